//! The rules that turn an MPA Request and Reply into connection parameters:
//! CRC and Markers (RFC 5044 section 7.1), IRD/ORD (RFC 6581 section 9.1),
//! the peer-to-peer model and its RTR (RFC 6581 section 9.2), and which
//! revision answers which (RFC 6581 section 10).
//!
//! Everything here is a pure function of the two frames and the local
//! settings, so the state machines in [`super::startup`] stay small and
//! the rules can be tested one by one.

use crate::wire::mpa::{EnhancedBlock, FrameKind, Revision, StartupRepr, IRD_ORD_MAX};
use crate::wire::terminate::TermError;

/// A zero-length message that serves as the ready-to-receive indication of
/// the peer-to-peer model (RFC 6581 section 9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rtr {
    /// A zero-length Send (B).
    Send,
    /// A zero-length RDMA Write (C).
    Write,
    /// A zero-length RDMA Read (D).
    Read,
}

/// A set of RTR options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RtrSet {
    /// Zero-length Send.
    pub send: bool,
    /// Zero-length RDMA Write.
    pub write: bool,
    /// Zero-length RDMA Read.
    pub read: bool,
}

impl RtrSet {
    /// Write and Read: what Linux siw and Chelsio offer, and uwarp's default.
    pub const WRITE_AND_READ: Self = Self {
        send: false,
        write: true,
        read: true,
    };

    /// Every option.
    pub const ALL: Self = Self {
        send: true,
        write: true,
        read: true,
    };

    /// The options in both sets.
    pub fn intersect(self, other: Self) -> Self {
        Self {
            send: self.send && other.send,
            write: self.write && other.write,
            read: self.read && other.read,
        }
    }

    /// Whether the set holds `rtr`.
    pub fn contains(self, rtr: Rtr) -> bool {
        match rtr {
            Rtr::Send => self.send,
            Rtr::Write => self.write,
            Rtr::Read => self.read,
        }
    }

    /// The first option of `preference` in the set.
    pub fn choose(self, preference: &[Rtr]) -> Option<Rtr> {
        preference.iter().copied().find(|&rtr| self.contains(rtr))
    }

    /// The set holding only `rtr`.
    pub fn only(rtr: Rtr) -> Self {
        Self {
            send: rtr == Rtr::Send,
            write: rtr == Rtr::Write,
            read: rtr == Rtr::Read,
        }
    }

    fn is_empty(self) -> bool {
        !(self.send || self.write || self.read)
    }

    fn from_block(block: &EnhancedBlock) -> Self {
        Self {
            send: block.send_rtr,
            write: block.write_rtr,
            read: block.read_rtr,
        }
    }
}

/// The order in which uwarp picks an RTR when several are possible: a
/// zero-length Write costs the peer nothing, a Read needs an IRD slot, a
/// Send consumes a posted receive.
pub const RTR_PREFERENCE: [Rtr; 3] = [Rtr::Write, Rtr::Read, Rtr::Send];

/// One side's wishes and resources for a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalParams {
    /// The highest revision to speak: [`Revision::Enhanced`] (2) sends and
    /// accepts the RFC 6581 block; [`Revision::Rfc5044`] (1) does neither.
    pub revision: Revision,
    /// Ask for CRCs (they are used when either side asks).
    pub crc: bool,
    /// Ask the peer to put Markers in what it sends us.
    pub markers: bool,
    /// Inbound RDMA Read queue depth this side can support
    /// ([`IRD_ORD_MAX`] leaves IRD/ORD to the application).
    pub ird: u16,
    /// Outbound RDMA Reads this side wants in flight.
    pub ord: u16,
    /// Initiator: the RTR options it can send to ask for the peer-to-peer
    /// model, `None` for client-server. Responder: the RTR options it can
    /// receive when an initiator asks for peer-to-peer (`None` means the
    /// default, [`RtrSet::WRITE_AND_READ`]).
    pub peer_to_peer: Option<RtrSet>,
    /// The application's private data (at most 512 octets, less the
    /// 4-octet enhanced block in revision 2).
    pub private_data: Vec<u8>,
}

impl Default for LocalParams {
    fn default() -> Self {
        Self {
            revision: Revision::Enhanced,
            crc: false,
            markers: false,
            ird: 16,
            ord: 16,
            peer_to_peer: None,
            private_data: Vec::new(),
        }
    }
}

/// What a finished negotiation gives one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The revision both frames used.
    pub revision: Revision,
    /// CRCs in both directions.
    pub crc: bool,
    /// This side puts Markers in what it sends.
    pub markers_tx: bool,
    /// The peer puts Markers in what it sends.
    pub markers_rx: bool,
    /// This side's inbound RDMA Read queue depth.
    pub ird: u16,
    /// This side's limit of outbound RDMA Reads.
    pub ord: u16,
    /// The IRD the peer announced (`None` without the enhanced block).
    pub peer_ird: Option<u16>,
    /// The ORD the peer announced.
    pub peer_ord: Option<u16>,
    /// Peer-to-peer: the RTR the initiator sends and the responder waits
    /// for before its first FPDU.
    pub rtr: Option<Rtr>,
}

/// Why a negotiation failed; each maps to the Terminate error RFC 6581
/// section 8 names (or a plain close, before Full Operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegotiationError {
    /// The peer's frame is not a valid answer (RFC 5044 section 7.1): the
    /// wrong kind, a revision above ours, or an enhanced Request to a
    /// responder that only speaks revision 1.
    InvalidFrame,
    /// The responder's ORD exceeds what this side can take in.
    InsufficientIrd,
    /// No RTR option both sides support.
    NoMatchingRtr,
}

impl NegotiationError {
    /// The Terminate error that reports this failure.
    pub fn terminate_error(self) -> TermError {
        match self {
            Self::InvalidFrame => TermError::MpaInvalidStartup,
            Self::InsufficientIrd => TermError::MpaInsufficientIrd,
            Self::NoMatchingRtr => TermError::MpaNoMatchingRtr,
        }
    }
}

/// The Request an initiator with `local` settings sends.
pub fn request(local: &LocalParams) -> StartupRepr<'_> {
    let enhanced = (local.revision == Revision::Enhanced).then(|| {
        let rtr = local.peer_to_peer.unwrap_or_default();
        EnhancedBlock {
            peer_to_peer: local.peer_to_peer.is_some(),
            send_rtr: rtr.send,
            write_rtr: rtr.write,
            read_rtr: rtr.read,
            ird: local.ird.min(IRD_ORD_MAX),
            ord: local.ord.min(IRD_ORD_MAX),
        }
    });
    StartupRepr {
        kind: FrameKind::Request,
        markers: local.markers,
        crc: local.crc,
        reject: false,
        reserved_flags: 0,
        revision: local.revision,
        enhanced,
        private_data: &local.private_data,
    }
}

/// The responder's answer to `request`: the Reply to send (with the
/// application's private data) and the parameters the responder then uses.
/// An enhanced Request gets an enhanced Reply, an unenhanced Request an
/// unenhanced one, in the Request's revision (RFC 6581 section 10).
pub fn accept<'a>(
    local: &'a LocalParams,
    request: &StartupRepr<'_>,
) -> Result<(StartupRepr<'a>, Negotiated), NegotiationError> {
    if request.kind != FrameKind::Request
        || request.revision > local.revision
        || request.revision == Revision::Rdmac
        || (request.enhanced.is_some() && local.revision < Revision::Enhanced)
    {
        return Err(NegotiationError::InvalidFrame);
    }
    let crc = local.crc || request.crc;
    let mut negotiated = Negotiated {
        revision: request.revision,
        crc,
        markers_tx: request.markers,
        markers_rx: local.markers,
        ird: local.ird,
        ord: local.ord,
        peer_ird: None,
        peer_ord: None,
        rtr: None,
    };
    let enhanced = request.enhanced.map(|theirs| {
        let (block, rtr) = responder_block(local, &theirs);
        negotiated.peer_ird = Some(theirs.ird);
        negotiated.peer_ord = Some(theirs.ord);
        negotiated.rtr = rtr;
        if block.ird != IRD_ORD_MAX {
            negotiated.ird = block.ird;
        }
        if block.ord != IRD_ORD_MAX {
            negotiated.ord = block.ord;
        }
        block
    });
    let reply = StartupRepr {
        kind: FrameKind::Reply,
        markers: local.markers,
        crc,
        reject: false,
        reserved_flags: 0,
        revision: request.revision,
        enhanced,
        private_data: &local.private_data,
    };
    Ok((reply, negotiated))
}

/// The responder's enhanced block and the RTR it then expects.
fn responder_block(local: &LocalParams, theirs: &EnhancedBlock) -> (EnhancedBlock, Option<Rtr>) {
    let rtr = theirs.peer_to_peer.then(|| {
        let supported = local.peer_to_peer.unwrap_or(RtrSet::WRITE_AND_READ);
        let offered = RtrSet::from_block(theirs);
        match offered.intersect(supported).choose(&RTR_PREFERENCE) {
            // Answer with the one option the initiator will then use.
            Some(rtr) => (RtrSet::only(rtr), Some(rtr)),
            // Nothing in common: say what we support, so the initiator can
            // report "no matching RTR" (RFC 6581 section 9.2).
            None if supported.is_empty() => (RtrSet::WRITE_AND_READ, None),
            None => (supported, None),
        }
    });
    // Responder IRD: enough for the initiator's ORD, within our means; a
    // Read RTR needs one slot even when the initiator wants no Reads.
    let read_rtr = matches!(rtr, Some((_, Some(Rtr::Read))));
    let ird = if theirs.ord == IRD_ORD_MAX {
        IRD_ORD_MAX
    } else {
        theirs.ord.max(u16::from(read_rtr)).min(local.ird)
    };
    // Responder ORD: never more than the initiator can take in.
    let ord = if theirs.ird == IRD_ORD_MAX {
        IRD_ORD_MAX
    } else {
        local.ord.min(theirs.ird)
    };
    let options = rtr.map_or(RtrSet::default(), |(set, _)| set);
    let block = EnhancedBlock {
        peer_to_peer: rtr.is_some(),
        send_rtr: options.send,
        write_rtr: options.write,
        read_rtr: options.read,
        ird: ird.min(IRD_ORD_MAX),
        ord: ord.min(IRD_ORD_MAX),
    };
    (block, rtr.and_then(|(_, chosen)| chosen))
}

/// A rejecting Reply carrying `private_data` (RFC 5044 section 7.1). An
/// enhanced Request gets the enhanced block with this side's IRD/ORD, so
/// the initiator learns what would have been acceptable.
pub fn reject<'a>(
    local: &LocalParams,
    request: &StartupRepr<'_>,
    private_data: &'a [u8],
) -> StartupRepr<'a> {
    let enhanced = request.enhanced.map(|_| EnhancedBlock {
        ird: local.ird.min(IRD_ORD_MAX),
        ord: local.ord.min(IRD_ORD_MAX),
        ..EnhancedBlock::default()
    });
    StartupRepr {
        kind: FrameKind::Reply,
        markers: false,
        crc: false,
        reject: true,
        reserved_flags: 0,
        revision: request.revision.min(local.revision).max(Revision::Rfc5044),
        enhanced,
        private_data,
    }
}

/// The initiator's view of an accepting `reply` to the `request` it sent.
pub fn complete(
    local: &LocalParams,
    request: &StartupRepr<'_>,
    reply: &StartupRepr<'_>,
) -> Result<Negotiated, NegotiationError> {
    let enhanced_mismatch = request.enhanced.is_some() != reply.enhanced.is_some();
    if reply.kind != FrameKind::Reply || reply.revision > request.revision || enhanced_mismatch {
        return Err(NegotiationError::InvalidFrame);
    }
    let mut negotiated = Negotiated {
        revision: reply.revision,
        crc: request.crc || reply.crc,
        markers_tx: reply.markers,
        markers_rx: request.markers,
        ird: local.ird,
        ord: local.ord,
        peer_ird: None,
        peer_ord: None,
        rtr: None,
    };
    if let (Some(mine), Some(theirs)) = (request.enhanced, reply.enhanced) {
        negotiated.peer_ird = Some(theirs.ird);
        negotiated.peer_ord = Some(theirs.ord);
        if theirs.ird != IRD_ORD_MAX {
            negotiated.ord = local.ord.min(theirs.ird);
        }
        // Our IRD stays as announced; it must cover the responder's ORD.
        if theirs.ord != IRD_ORD_MAX && theirs.ord > local.ird {
            return Err(NegotiationError::InsufficientIrd);
        }
        if mine.peer_to_peer {
            let answered = RtrSet::from_block(&theirs);
            let offered = RtrSet::from_block(&mine);
            negotiated.rtr = Some(
                answered
                    .intersect(offered)
                    .choose(&RTR_PREFERENCE)
                    .filter(|_| theirs.peer_to_peer)
                    .ok_or(NegotiationError::NoMatchingRtr)?,
            );
        }
    }
    Ok(negotiated)
}
