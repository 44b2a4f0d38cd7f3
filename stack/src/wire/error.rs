//! The one error type of the wire module.
//!
//! Every parser returns [`WireError`] instead of panicking or reading out of
//! bounds, and every emitter refuses input the protocol cannot carry. The
//! variants are precise enough for the engines to pick the Terminate error
//! (RFC 5040 section 7) or the MPA reject (RFC 5044 section 7.1,
//! RFC 6581 section 9) that answers the input.

use core::fmt;

/// Why a header could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer ends before the header or the length it announces.
    Truncated {
        /// Octets the header needs.
        needed: usize,
        /// Octets the buffer has.
        available: usize,
    },
    /// The output buffer is too small for what is being emitted.
    BufferTooSmall {
        /// Octets the emitter needs.
        needed: usize,
        /// Octets the buffer has.
        available: usize,
    },
    /// An MPA startup frame whose first 16 octets are neither
    /// `MPA ID Req Frame` nor `MPA ID Rep Frame` (RFC 5044 section 7.1).
    BadMpaKey,
    /// An MPA revision other than 0, 1 or 2 (RFC 5044 section 7.1,
    /// RFC 6581 section 8).
    UnknownMpaRevision(u8),
    /// PD_Length above the limit of 512 octets (RFC 5044 section 7.1).
    PrivateDataTooLong(usize),
    /// The S flag is set but the private data is shorter than the 4-octet
    /// enhanced block (RFC 6581 section 9).
    MissingEnhancedBlock,
    /// IRD or ORD above the 14-bit maximum 0x3FFF (RFC 6581 section 9.1).
    IrdOrdOutOfRange(u16),
    /// A ULPDU longer than the 16-bit ULPDU_Length can describe
    /// (RFC 5044 section 4.1).
    UlpduTooLong(usize),
    /// A Marker whose FPDUPTR does not point at the start of the FPDU that
    /// holds it (RFC 5044 section 4.3).
    MarkerMismatch {
        /// Stream offset of the Marker.
        offset: u64,
        /// FPDUPTR the Marker carries.
        found: u16,
        /// FPDUPTR it should carry.
        expected: u16,
    },
    /// An FPDU so long that a Marker inside it lies more than 65535 octets
    /// after its header, beyond what FPDUPTR can express
    /// (RFC 5044 section 4.2).
    MarkerPointerOverflow,
    /// An FPDU start that is not a multiple of 4 octets into the MPA
    /// stream: FPDUs and Markers are multiples of 4, so none can start there
    /// (RFC 5044 section 4).
    UnalignedOffset(u64),
    /// A DDP version (DV) other than 1 (RFC 5041 section 4.2).
    BadDdpVersion(u8),
    /// An RDMAP version (RV) other than 1 (RFC 5040 section 4.1).
    BadRdmapVersion(u8),
    /// An RDMAP opcode that neither RFC 5040 nor RFC 7306 defines.
    UnknownOpcode(u8),
    /// An opcode sent with the wrong DDP buffer model, e.g. an RDMA Write in
    /// an untagged segment (RFC 5040 section 4.2).
    OpcodeModelMismatch {
        /// The opcode carried.
        opcode: u8,
        /// Whether the segment was tagged.
        tagged: bool,
    },
    /// A Terminate control word that is neither a valid RFC 5040 nor a
    /// valid Linux siw layout (RFC 5040 section 4.8).
    BadTerminate,
    /// A Layer / Error Type / Error Code triple that RFC 5040 section 7
    /// does not define.
    UnknownTerminateCode {
        /// Layer nibble.
        layer: u8,
        /// Error Type nibble.
        etype: u8,
        /// Error Code octet.
        code: u8,
    },
    /// Octets that do not start with the RPC-over-RDMA format identifier
    /// 0xf6ab0e18 (RFC 8797 section 5.1).
    BadRpcRdmaFormat,
    /// RPC-over-RDMA CM private data whose version is not 1
    /// (RFC 8797 section 5.1).
    UnsupportedRpcRdmaVersion(u8),
    /// An RPC-over-RDMA send or receive size that is not a multiple of
    /// 1024 octets between 1 KiB and 256 KiB (RFC 8797 section 5.1).
    BadRpcRdmaSize(u32),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { needed, available } => {
                write!(f, "truncated: need {needed} octets, have {available}")
            }
            Self::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "output buffer too small: need {needed} octets, have {available}"
                )
            }
            Self::BadMpaKey => write!(f, "not an MPA Request or Reply key"),
            Self::UnknownMpaRevision(rev) => write!(f, "unknown MPA revision {rev}"),
            Self::PrivateDataTooLong(len) => {
                write!(f, "private data of {len} octets exceeds 512")
            }
            Self::MissingEnhancedBlock => {
                write!(f, "S flag set without the 4-octet enhanced block")
            }
            Self::IrdOrdOutOfRange(v) => write!(f, "IRD/ORD {v:#x} exceeds 0x3fff"),
            Self::UlpduTooLong(len) => write!(f, "ULPDU of {len} octets exceeds 65535"),
            Self::MarkerMismatch {
                offset,
                found,
                expected,
            } => write!(
                f,
                "Marker at stream offset {offset} has FPDUPTR {found}, expected {expected}"
            ),
            Self::MarkerPointerOverflow => {
                write!(
                    f,
                    "FPDU too long for a Marker's FPDUPTR to reach its header"
                )
            }
            Self::UnalignedOffset(offset) => {
                write!(f, "stream offset {offset} is not a multiple of 4")
            }
            Self::BadDdpVersion(v) => write!(f, "DDP version {v}, expected 1"),
            Self::BadRdmapVersion(v) => write!(f, "RDMAP version {v}, expected 1"),
            Self::UnknownOpcode(op) => write!(f, "unknown RDMAP opcode {op:#x}"),
            Self::OpcodeModelMismatch { opcode, tagged } => write!(
                f,
                "RDMAP opcode {opcode:#x} in a {} segment",
                if tagged { "tagged" } else { "untagged" }
            ),
            Self::BadTerminate => write!(f, "invalid Terminate control word"),
            Self::UnknownTerminateCode { layer, etype, code } => write!(
                f,
                "undefined Terminate error layer {layer} type {etype} code {code:#04x}"
            ),
            Self::BadRpcRdmaFormat => write!(f, "no RPC-over-RDMA format identifier"),
            Self::UnsupportedRpcRdmaVersion(v) => {
                write!(f, "RPC-over-RDMA private data version {v}, expected 1")
            }
            Self::BadRpcRdmaSize(size) => {
                write!(f, "RPC-over-RDMA size {size} not encodable in 1 KiB units")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// Shorthand for results of the wire module.
pub type Result<T> = core::result::Result<T, WireError>;

/// Checks that `buf` holds at least `needed` octets.
pub(crate) fn check_len(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(WireError::Truncated {
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Checks that an output buffer can take `needed` octets.
pub(crate) fn check_room(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(WireError::BufferTooSmall {
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// What an emitter that writes `len` octets with `emit` writes, as a
/// vector: the `to_vec` of the representations.
pub(crate) fn emitted(
    len: usize,
    emit: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<Vec<u8>> {
    let mut out = vec![0; len];
    emit(&mut out)?;
    Ok(out)
}
