//! The errors of the memory layer and the Terminate codes they become
//! (RFC 5041 sections 7.1-7.2, RFC 5040 sections 4.8 and 7).
//!
//! Which layer reports a tagged-buffer error depends on who found it, and
//! deployed peers agree (`tests/data/siw/README.md`):
//!
//! - placing an RDMA Write or an RDMA Read Response ([`place`]) is DDP's
//!   check of RFC 5041 section 7.1, answered with a DDP tagged buffer
//!   error: [`TaggedError::ddp_error`] (siw: `11 00 03 00` for a Write with
//!   a bad STag);
//! - reading the Data Source of an RDMA Read Request ([`fetch`]) is RDMAP's
//!   check of RFC 5040 section 5.2, answered with an RDMAP remote
//!   protection error: [`TaggedError::rdmap_error`] (siw: `10 00 07 00` for a
//!   Read Request with a bad source STag);
//! - the Invalidate STag of a Send with Invalidate (RFC 5040 sections 4.1
//!   and 5.3) is RDMAP's: [`InvalidateError::rdmap_error`].
//!
//! [`place`]: super::StagTable::place
//! [`fetch`]: super::StagTable::fetch

use core::fmt;

use crate::wire::terminate::TermError;

/// Why a tagged access (remote placement, remote read, or a local
/// scatter/gather access) was refused. The variants are the checks of RFC
/// 5041 section 7.1, in the order [`StagTable`](super::StagTable) makes
/// them; nothing is copied when one fails.
///
/// | variant | RFC 5041 7.1 check | [`ddp_error`](Self::ddp_error) | [`rdmap_error`](Self::rdmap_error) |
/// | --- | --- | --- | --- |
/// | `InvalidStag` | 1: the STag is valid | tagged, invalid STag (0x00) | remote protection, invalid STag (0x00) |
/// | `StagNotAssociated` | 1: ... for this stream (its PD, section 8.2) | tagged, STag not associated (0x02) | remote protection, STag not associated (0x03) |
/// | `AccessRights` | 2: the buffer allows the operation | tagged, invalid STag (0x00): DDP has no code for it | remote protection, access rights violation (0x02) |
/// | `ToWrap` | 5: TO + length does not wrap | tagged, TO wrap (0x03) | remote protection, TO wrap (0x04) |
/// | `BaseOrBounds` | 3-4: TO and TO + length within the region | tagged, base or bounds (0x01) | remote protection, base or bounds (0x01) |
/// | `Unmapped` | (after the checks) the memory is still there | tagged, invalid STag (0x00) | remote protection, unspecified (0xFF) |
///
/// RFC 5041 lists the wrap check last; uwarp makes it before the bounds
/// check because a sum that wraps has no end to compare, and it names the
/// more specific fault. A wrapping access can never be in bounds (a region
/// itself may not wrap), so only the code reported differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaggedError {
    /// The STag names no valid region: unknown index, wrong key, invalidated
    /// or deregistered.
    InvalidStag,
    /// The region belongs to another protection domain than the stream.
    StagNotAssociated,
    /// The region does not grant the access (remote write, remote read or
    /// local write).
    AccessRights,
    /// The 64-bit sum of TO and length wraps.
    ToWrap,
    /// `[TO, TO + length)` is not inside the region.
    BaseOrBounds,
    /// Every check passed, but the copy faulted: the application unmapped
    /// or freed the region's memory (or took its access away) without
    /// deregistering it first ([`MemError::Fault`]). Some octets may have
    /// moved before the fault.
    Unmapped,
}

impl TaggedError {
    /// The RDMAP remote protection error (RFC 5040 section 7) that reports
    /// this fault, used when RDMAP itself found it: the Data Source STag of
    /// an RDMA Read Request.
    pub fn rdmap_error(self) -> TermError {
        match self {
            Self::InvalidStag => TermError::RdmapInvalidStag,
            Self::StagNotAssociated => TermError::RdmapStagNotAssociated,
            Self::AccessRights => TermError::RdmapAccessRights,
            Self::ToWrap => TermError::RdmapToWrap,
            Self::BaseOrBounds => TermError::RdmapBaseOrBounds,
            Self::Unmapped => TermError::RdmapProtectionUnspecified,
        }
    }

    /// The DDP tagged buffer error (RFC 5041 section 7.2) that reports this
    /// fault, used when DDP found it while placing a tagged segment.
    ///
    /// RFC 5041 numbers no error for its check 2 ("the STag has an
    /// associated buffer that allows Placement"), so an access rights
    /// violation is reported as an invalid STag: for this operation the
    /// STag does not name a usable buffer. Linux siw makes the same choice.
    /// Memory found gone ([`Unmapped`](Self::Unmapped)) is reported the
    /// same way: the STag names no memory any more.
    pub fn ddp_error(self) -> TermError {
        match self {
            Self::InvalidStag | Self::AccessRights | Self::Unmapped => {
                TermError::DdpTaggedInvalidStag
            }
            Self::StagNotAssociated => TermError::DdpTaggedStagNotAssociated,
            Self::ToWrap => TermError::DdpTaggedToWrap,
            Self::BaseOrBounds => TermError::DdpTaggedBaseOrBounds,
        }
    }
}

impl fmt::Display for TaggedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidStag => "invalid STag",
            Self::StagNotAssociated => "STag not associated with this stream's protection domain",
            Self::AccessRights => "access rights violation",
            Self::ToWrap => "TO wrap",
            Self::BaseOrBounds => "base or bounds violation",
            Self::Unmapped => "the region's memory is no longer mapped",
        })
    }
}

impl std::error::Error for TaggedError {}

/// Why a remote invalidation (the Invalidate STag of a Send with
/// Invalidate, RFC 5040 sections 4.1 and 5.3) was refused. The STag is left
/// as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidateError {
    /// The STag names no valid region: unknown index, wrong key, already
    /// invalidated or deregistered.
    InvalidStag,
    /// The region belongs to another protection domain than the stream.
    StagNotAssociated,
    /// The region was registered as not remotely invalidatable.
    CannotInvalidate,
}

impl InvalidateError {
    /// The RDMAP error (RFC 5040 section 7) the Terminate carries:
    ///
    /// - `InvalidStag`: remote protection, invalid STag (0x00);
    /// - `StagNotAssociated`: remote protection, STag cannot be invalidated
    ///   (type 1, 0x09): a protection fault, as Linux siw reports a PD
    ///   mismatch;
    /// - `CannotInvalidate`: remote operation, STag cannot be invalidated
    ///   (type 2, 0x09): the operation is not allowed on this region.
    pub fn rdmap_error(self) -> TermError {
        match self {
            Self::InvalidStag => TermError::RdmapInvalidStag,
            Self::StagNotAssociated => TermError::RdmapProtectionCannotInvalidate,
            Self::CannotInvalidate => TermError::RdmapOperationCannotInvalidate,
        }
    }
}

impl fmt::Display for InvalidateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidStag => "invalid STag",
            Self::StagNotAssociated => {
                "STag cannot be invalidated: not associated with this stream's protection domain"
            }
            Self::CannotInvalidate => "STag cannot be invalidated: region is not invalidatable",
        })
    }
}

impl std::error::Error for InvalidateError {}

/// Errors of the control side: registration, deregistration, local
/// invalidation, and [`MemoryBuffer`](super::MemoryBuffer) accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemError {
    /// Every slot of the table is in use.
    TableFull,
    /// The STag names no registered region (unknown index, wrong key, or
    /// a deregistration already under way).
    InvalidStag,
    /// `offset .. offset + len` is not inside the buffer.
    OutOfBuffer {
        /// First octet asked for.
        offset: usize,
        /// Octets asked for.
        len: usize,
        /// Size of the buffer.
        buffer_len: usize,
    },
    /// `base_to + len` does not fit in 64 bits, so the region's Tagged
    /// Offsets would wrap (RFC 5041 section 7.1 check 5).
    RegionWraps,
    /// `len` octets at address `addr` are no memory range: a null address
    /// with a length, a length above `isize::MAX`, or a range that wraps
    /// past the end of the address space
    /// ([`MemoryBuffer::check_raw_parts`](super::MemoryBuffer::check_raw_parts)).
    InvalidRange {
        /// The address of the first octet.
        addr: usize,
        /// Octets asked for.
        len: usize,
    },
    /// Not all of the `len` octets at `addr` are mapped with the access a
    /// registration needs (readable; writable too when the region allows
    /// local or remote writes): the kernel's `EFAULT` for `ibv_reg_mr`.
    NotMapped {
        /// The address of the first octet.
        addr: usize,
        /// Octets asked for.
        len: usize,
    },
    /// A copy into or out of a buffer of the application's own memory
    /// faulted at `offset .. offset + len`: the memory was unmapped or
    /// protected while registered. Only where a signal handler resumes
    /// the copy (see [`resume_after_fault`](super::resume_after_fault));
    /// elsewhere the fault ends the process.
    Fault {
        /// First octet of the copy.
        offset: usize,
        /// Octets the copy was to move.
        len: usize,
    },
    /// A table must have between 2 and 2^24 slots (slot 0 is never used).
    BadCapacity(usize),
    /// The operating system's random number generator failed, so no
    /// unpredictable index could be chosen.
    NoEntropy,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TableFull => write!(f, "STag table full"),
            Self::InvalidStag => write!(f, "STag names no registered region"),
            Self::OutOfBuffer {
                offset,
                len,
                buffer_len,
            } => write!(
                f,
                "{len} octets at offset {offset} do not fit a buffer of {buffer_len}"
            ),
            Self::RegionWraps => write!(f, "region's Tagged Offsets wrap past 2^64"),
            Self::InvalidRange { addr, len } => {
                write!(f, "{len} octets at address {addr:#x} are no memory range")
            }
            Self::NotMapped { addr, len } => write!(
                f,
                "{len} octets at address {addr:#x} are not all mapped with the access asked for"
            ),
            Self::Fault { offset, len } => write!(
                f,
                "the copy of {len} octets at offset {offset} faulted: the memory is gone"
            ),
            Self::BadCapacity(n) => write!(f, "STag table capacity {n} is not in 2..=2^24"),
            Self::NoEntropy => write!(f, "system random number generator failed"),
        }
    }
}

impl std::error::Error for MemError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::terminate::{ErrorType, Layer};

    const ALL_TAGGED: [TaggedError; 6] = [
        TaggedError::InvalidStag,
        TaggedError::StagNotAssociated,
        TaggedError::AccessRights,
        TaggedError::ToWrap,
        TaggedError::BaseOrBounds,
        TaggedError::Unmapped,
    ];

    #[test]
    fn tagged_errors_map_to_their_layers() {
        for err in ALL_TAGGED {
            let rdmap = err.rdmap_error();
            assert_eq!(rdmap.layer(), Layer::Rdmap);
            assert_eq!(rdmap.error_type(), ErrorType::RemoteProtection);
            let ddp = err.ddp_error();
            assert_eq!(ddp.layer(), Layer::Ddp);
            assert_eq!(ddp.error_type(), ErrorType::TaggedBuffer);
        }
        // The RDMAP mapping is one-to-one.
        for (i, a) in ALL_TAGGED.iter().enumerate() {
            for b in &ALL_TAGGED[i + 1..] {
                assert_ne!(a.rdmap_error(), b.rdmap_error());
            }
        }
        assert_eq!(
            TaggedError::AccessRights.ddp_error(),
            TermError::DdpTaggedInvalidStag
        );
        assert_eq!(
            TaggedError::AccessRights.rdmap_error(),
            TermError::RdmapAccessRights
        );
        assert_eq!(
            TaggedError::Unmapped.ddp_error(),
            TermError::DdpTaggedInvalidStag
        );
        assert_eq!(
            TaggedError::Unmapped.rdmap_error(),
            TermError::RdmapProtectionUnspecified
        );
        assert!(TaggedError::Unmapped.rdmap_error().is_access_violation());
        assert_eq!(
            TaggedError::ToWrap.ddp_error().parts(),
            (Layer::Ddp, 1, 0x03)
        );
        assert_eq!(
            TaggedError::ToWrap.rdmap_error().parts(),
            (Layer::Rdmap, 1, 0x04)
        );
    }

    #[test]
    fn invalidate_errors_map_to_rdmap() {
        assert_eq!(
            InvalidateError::InvalidStag.rdmap_error(),
            TermError::RdmapInvalidStag
        );
        assert_eq!(
            InvalidateError::CannotInvalidate.rdmap_error().parts(),
            (Layer::Rdmap, 2, 0x09)
        );
        assert_eq!(
            InvalidateError::StagNotAssociated.rdmap_error().parts(),
            (Layer::Rdmap, 1, 0x09)
        );
    }

    #[test]
    fn errors_display() {
        assert_eq!(TaggedError::ToWrap.to_string(), "TO wrap");
        assert_eq!(
            MemError::OutOfBuffer {
                offset: 4,
                len: 8,
                buffer_len: 10
            }
            .to_string(),
            "8 octets at offset 4 do not fit a buffer of 10"
        );
        assert!(InvalidateError::CannotInvalidate
            .to_string()
            .contains("cannot be invalidated"));
    }
}
