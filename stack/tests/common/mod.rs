//! Shared helpers of the `qp_*` engine tests: two engines joined back to
//! back in memory, registered regions with guard octets around them, and a
//! hostile peer that writes hand-made ULPDUs into one engine and parses
//! what it sends back.
//!
//! Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use std::sync::Arc;

use uwarp_stack::mem::{
    Access, MemoryBuffer, PdId, ProtectionDomains, RegionSpec, Stag, StagTable,
};
use uwarp_stack::mpa::{FpduReader, FpduWriter, Negotiated, Rtr};
use uwarp_stack::rdmap::{CqKind, EngineConfig, QpEngine, QpEvent, Role, SharedReceiveQueue};
use uwarp_stack::record::VecSink;
use uwarp_stack::verbs::{
    Payload, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use uwarp_stack::wire::ddp::{BufferModel, DdpRepr};
use uwarp_stack::wire::mpa::Revision;
use uwarp_stack::wire::rdmap::{Opcode, RdmapControl, RdmapSegment, ReadRequest, QN_SEND};
use uwarp_stack::wire::terminate::{LayoutHint, TermError, TerminateRepr};

/// Octets of guard kept on each side of a [`Region`] inside its buffer.
pub const GUARD: usize = 64;

/// How two engines are set up.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// CRCs on the stream (both directions, as MPA negotiates it).
    pub crc: bool,
    /// The initiator puts Markers in what it sends.
    pub markers_ab: bool,
    /// The responder puts Markers in what it sends.
    pub markers_ba: bool,
    /// The MULPDU of both ends.
    pub mulpdu: usize,
    /// IRD and ORD of both ends.
    pub ird_ord: u16,
    /// The peer-to-peer RTR.
    pub rtr: Option<Rtr>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            crc: true,
            markers_ab: false,
            markers_ba: false,
            mulpdu: 1448,
            ird_ord: 8,
            rtr: None,
        }
    }
}

impl Setup {
    /// What MPA negotiated, seen from one end (`initiator` or not).
    pub fn negotiated(&self, initiator: bool) -> Negotiated {
        let (markers_tx, markers_rx) = if initiator {
            (self.markers_ab, self.markers_ba)
        } else {
            (self.markers_ba, self.markers_ab)
        };
        Negotiated {
            revision: Revision::Enhanced,
            crc: self.crc,
            markers_tx,
            markers_rx,
            ird: self.ird_ord,
            ord: self.ird_ord,
            peer_ird: Some(self.ird_ord),
            peer_ord: Some(self.ird_ord),
            rtr: self.rtr,
        }
    }
}

/// One end: its engine and what it has produced so far.
pub struct Side {
    /// The engine.
    pub engine: QpEngine,
    /// Its protection domain.
    pub pd: PdId,
    /// The table shared by both ends.
    pub table: Arc<StagTable>,
    /// Completions polled so far.
    pub completions: Vec<(CqKind, WorkCompletion)>,
    /// Events polled so far.
    pub events: Vec<QpEvent>,
    /// When set, every ULPDU this end transmits, in order.
    pub tap: Option<(FpduReader, Vec<Vec<u8>>)>,
    crc: bool,
    markers_tx: bool,
}

/// A registered region in the middle of a larger buffer, so that octets on
/// either side of it can be checked to stay untouched.
pub struct Region {
    /// The whole buffer, guards included.
    pub buffer: Arc<MemoryBuffer>,
    /// The STag.
    pub stag: Stag,
    /// Tagged Offset of the region's first octet.
    pub to: u64,
    /// Octets in the region.
    pub len: usize,
}

impl Region {
    /// A scatter/gather element of `length` octets at `offset` in the region.
    pub fn sge(&self, offset: usize, length: usize) -> Sge {
        Sge {
            addr: self.to + offset as u64,
            length: length as u32,
            lkey: self.stag,
        }
    }

    /// The whole region as one element.
    pub fn whole(&self) -> Sge {
        self.sge(0, self.len)
    }

    /// The region's octets.
    pub fn contents(&self) -> Vec<u8> {
        let mut out = vec![0; self.len];
        self.buffer.read_at(GUARD, &mut out).unwrap();
        out
    }

    /// Every octet of the buffer, guards included.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0; self.buffer.len()];
        self.buffer.read_at(0, &mut out).unwrap();
        out
    }

    /// Fills the region with a pattern drawn from `seed` and returns it.
    pub fn fill(&self, seed: u8) -> Vec<u8> {
        let data = pattern(self.len, seed);
        self.buffer.write_at(GUARD, &data).unwrap();
        data
    }

    /// Asserts both guards still hold the fill byte they were made with.
    pub fn assert_guards(&self) {
        let all = self.snapshot();
        let (head, rest) = all.split_at(GUARD);
        let tail = &rest[self.len..];
        assert!(
            head.iter().chain(tail).all(|&b| b == GUARD_BYTE),
            "an octet outside the region changed"
        );
    }
}

/// What the guards are filled with.
pub const GUARD_BYTE: u8 = 0xA5;

/// `len` octets of a pattern that differs for every seed and offset.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            ((i ^ (i >> 8) ^ (i >> 16)) as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
        })
        .collect()
}

impl Side {
    fn new(setup: &Setup, role: Role, pd: PdId, table: &Arc<StagTable>) -> Self {
        Self::with_srq(setup, role, pd, table, None)
    }

    /// An end whose receives come from `srq`.
    pub fn with_srq(
        setup: &Setup,
        role: Role,
        pd: PdId,
        table: &Arc<StagTable>,
        srq: Option<Arc<SharedReceiveQueue>>,
    ) -> Self {
        let negotiated = setup.negotiated(role == Role::Initiator);
        Self {
            engine: QpEngine::new(EngineConfig {
                negotiated,
                role,
                mulpdu: setup.mulpdu,
                pd,
                table: table.clone(),
                srq,
            }),
            pd,
            table: table.clone(),
            completions: Vec::new(),
            events: Vec::new(),
            tap: None,
            crc: negotiated.crc,
            markers_tx: negotiated.markers_tx,
        }
    }

    /// Starts recording every ULPDU this end transmits.
    pub fn record(&mut self) {
        self.tap = Some((FpduReader::new(self.crc, self.markers_tx), Vec::new()));
    }

    /// The ULPDUs recorded so far, taken.
    pub fn take_sent(&mut self) -> Vec<Vec<u8>> {
        self.tap
            .as_mut()
            .map(|(_, sent)| std::mem::take(sent))
            .unwrap_or_default()
    }

    /// A region of `len` octets with the given rights, key 7, guards around.
    pub fn region(&self, len: usize, access: Access) -> Region {
        self.region_in(self.pd, len, access, true)
    }

    /// A region registered in `pd`, remotely invalidatable or not.
    pub fn region_in(&self, pd: PdId, len: usize, access: Access, invalidatable: bool) -> Region {
        let buffer = Arc::new(MemoryBuffer::new(len + 2 * GUARD));
        self.region_over(pd, buffer, access, invalidatable)
    }

    /// A region over all of `buffer` but a guard at each end, registered
    /// in `pd`: for memory made elsewhere (foreign memory).
    pub fn region_over(
        &self,
        pd: PdId,
        buffer: Arc<MemoryBuffer>,
        access: Access,
        invalidatable: bool,
    ) -> Region {
        let len = buffer.len() - 2 * GUARD;
        buffer.fill(GUARD_BYTE);
        buffer.write_at(GUARD, &vec![0; len]).unwrap();
        let to = buffer.addr() + GUARD as u64;
        let spec = RegionSpec {
            invalidatable,
            ..RegionSpec::new(buffer.clone(), GUARD, len, to, access)
        };
        let stag = self.table.register(pd, spec, 7).unwrap();
        Region {
            buffer,
            stag,
            to,
            len,
        }
    }

    /// Transmits up to `budget` octets into `out`, recording them if asked.
    pub fn transmit(&mut self, out: &mut Vec<u8>, budget: usize) -> usize {
        let start = out.len();
        let n = self.engine.poll_transmit(out, budget);
        if let Some((reader, sent)) = &mut self.tap {
            reader.push(&out[start..]);
            while let Some(ulpdu) = reader.next_ulpdu() {
                sent.push(ulpdu.expect("the engine frames what it sends"));
            }
        }
        n
    }

    /// Moves completions and events out of the engine.
    pub fn collect(&mut self) {
        while let Some(c) = self.engine.poll_completion() {
            self.completions.push(c);
        }
        while let Some(e) = self.engine.poll_event() {
            self.events.push(e);
        }
    }

    /// The completions of one queue, taken.
    pub fn take(&mut self, cq: CqKind) -> Vec<WorkCompletion> {
        self.collect();
        let (mine, rest) = std::mem::take(&mut self.completions)
            .into_iter()
            .partition(|(kind, _)| *kind == cq);
        self.completions = rest;
        mine.into_iter().map(|(_, wc)| wc).collect()
    }

    /// The `(wr_id, status)` of each completion of one queue, taken.
    pub fn statuses(&mut self, cq: CqKind) -> Vec<(u64, WcStatus)> {
        self.take(cq).iter().map(|w| (w.wr_id, w.status)).collect()
    }

    /// The `(wr_id, opcode, status)` of each completion of one queue, taken.
    pub fn outcomes(&mut self, cq: CqKind) -> Vec<(u64, WcOpcode, WcStatus)> {
        self.take(cq)
            .iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect()
    }

    /// The `(wr_id, status)` of every completion, send queue first, taken.
    pub fn all_statuses(&mut self) -> Vec<(u64, WcStatus)> {
        let mut all = self.statuses(CqKind::Send);
        all.extend(self.statuses(CqKind::Recv));
        all
    }

    /// Posts a receive of the given elements.
    pub fn post_recv(&mut self, wr_id: u64, sgl: Vec<Sge>) {
        self.engine.post_recv(RecvWr { wr_id, sgl });
    }

    /// Posts a signaled, fenced Send of `data` carried inline.
    pub fn post_fenced_inline(&mut self, wr_id: u64, data: Vec<u8>) {
        self.engine.post_send(SendWr {
            fence: true,
            ..SendWr::new(wr_id, SendOp::Send, Payload::Inline(data))
        });
    }

    /// Posts a signaled send work request.
    pub fn post(&mut self, wr_id: u64, op: SendOp, sgl: Vec<Sge>) {
        self.engine
            .post_send(SendWr::new(wr_id, op, Payload::Sgl(sgl)));
    }
}

/// Two engines of one setup, initiator first, in different PDs of one table.
pub fn pair(setup: Setup) -> (Side, Side) {
    let table = Arc::new(StagTable::default());
    let pds = ProtectionDomains::new();
    let a = Side::new(&setup, Role::Initiator, pds.allocate().unwrap(), &table);
    let b = Side::new(&setup, Role::Responder, pds.allocate().unwrap(), &table);
    (a, b)
}

/// Moves octets both ways until neither end has anything to send, then
/// collects both ends' completions and events.
pub fn pump(a: &mut Side, b: &mut Side) {
    pump_budget(a, b, 1 << 20);
}

/// [`pump`] with at most `budget` octets per turn.
pub fn pump_budget(a: &mut Side, b: &mut Side, budget: usize) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let ab = a.transmit(&mut buf, budget);
        b.engine.on_bytes(&buf);
        buf.clear();
        let ba = b.transmit(&mut buf, budget);
        a.engine.on_bytes(&buf);
        a.collect();
        b.collect();
        if ab == 0 && ba == 0 {
            break;
        }
    }
}

/// A completion's (wr_id, opcode, status, byte_len).
pub fn summary(wc: &WorkCompletion) -> (u64, WcOpcode, WcStatus, u32) {
    (wc.wr_id, wc.opcode, wc.status, wc.byte_len)
}

// ----- hand-made ULPDUs ---------------------------------------------------

/// A tagged segment.
pub fn tagged(opcode: Opcode, last: bool, stag: u32, to: u64, payload: &[u8]) -> Vec<u8> {
    segment(opcode, last, BufferModel::Tagged { stag, to }, payload)
}

/// An untagged segment.
pub fn untagged(
    opcode: Opcode,
    last: bool,
    (qn, msn, mo): (u32, u32, u32),
    ulp_word: u32,
    payload: &[u8],
) -> Vec<u8> {
    let model = BufferModel::Untagged {
        ulp_word,
        qn,
        msn,
        mo,
    };
    segment(opcode, last, model, payload)
}

/// A whole Send message in one segment.
pub fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
    untagged(Opcode::Send, true, (QN_SEND, msn, 0), 0, payload)
}

/// A Read Request carrying `request`, message `msn` of queue 1.
pub fn read_request(msn: u32, request: &ReadRequest) -> Vec<u8> {
    untagged(
        Opcode::ReadRequest,
        true,
        (1, msn, 0),
        0,
        &request.to_bytes(),
    )
}

fn segment(opcode: Opcode, last: bool, model: BufferModel, payload: &[u8]) -> Vec<u8> {
    let ddp = DdpRepr {
        last,
        reserved: 0,
        ulp_control: RdmapControl::new(opcode).to_u8(),
        model,
    };
    let mut out = vec![0; ddp.header_len()];
    ddp.emit(&mut out).unwrap();
    out.extend_from_slice(payload);
    out
}

/// A Terminate as the engine sent it, with its headers copied out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentTerminate {
    /// The error.
    pub error: TermError,
    /// The DDP Segment Length (M).
    pub segment_len: Option<u16>,
    /// The terminated DDP header (D).
    pub ddp_header: Option<Vec<u8>>,
    /// The terminated RDMAP header (R).
    pub rdmap_header: Option<Vec<u8>>,
    /// The Terminate's own MSN on queue 2.
    pub msn: u32,
}

/// Parses a ULPDU as a Terminate in the RFC 5040 layout, if it is one.
pub fn as_terminate(ulpdu: &[u8]) -> Option<SentTerminate> {
    let segment = RdmapSegment::parse(ulpdu).ok()?;
    if segment.opcode() != Opcode::Terminate {
        return None;
    }
    let BufferModel::Untagged { qn, msn, mo, .. } = segment.ddp.model else {
        panic!("a Terminate in a tagged segment");
    };
    assert_eq!((qn, mo, segment.ddp.last), (2, 0, true));
    let term = TerminateRepr::parse(segment.payload, LayoutHint::Rfc5040)
        .expect("the engine sends RFC 5040 Terminates");
    assert!(term.trailing.is_empty() && term.reserved == 0);
    Some(SentTerminate {
        error: term.error,
        segment_len: term.ddp_segment_len,
        ddp_header: term.ddp_header.map(<[u8]>::to_vec),
        rdmap_header: term.rdmap_header.map(<[u8]>::to_vec),
        msn,
    })
}

/// One engine and a peer made of a bare FPDU writer and reader: the peer
/// writes whatever ULPDUs a test makes, and reads what the engine sends.
pub struct Hostile {
    /// The engine under attack.
    pub victim: Side,
    /// Frames the peer's ULPDUs.
    pub writer: FpduWriter,
    /// Reads what the victim sends.
    pub reader: FpduReader,
    /// Every ULPDU the victim has sent.
    pub received: Vec<Vec<u8>>,
}

impl Hostile {
    /// A victim of `role` in `setup` (seen from the victim: `markers_ab`
    /// is what the victim sends when it is the initiator).
    pub fn new(setup: Setup, role: Role) -> Self {
        let table = Arc::new(StagTable::default());
        let pd = ProtectionDomains::new().allocate().unwrap();
        let victim = Side::new(&setup, role, pd, &table);
        let mine = setup.negotiated(role == Role::Initiator);
        Self {
            victim,
            writer: FpduWriter::new(mine.crc, mine.markers_rx),
            reader: FpduReader::new(mine.crc, mine.markers_tx),
            received: Vec::new(),
        }
    }

    /// A victim as initiator, CRC on, no Markers, MULPDU 1448.
    pub fn default_initiator() -> Self {
        Self::new(Setup::default(), Role::Initiator)
    }

    /// Frames `ulpdu` and hands it to the victim, then collects its output.
    pub fn inject(&mut self, ulpdu: &[u8]) {
        let mut bytes = Vec::new();
        self.writer.write(&[ulpdu], &mut bytes).unwrap();
        self.inject_raw(&bytes);
    }

    /// Hands raw stream octets to the victim, then collects its output.
    pub fn inject_raw(&mut self, bytes: &[u8]) {
        self.victim.engine.on_bytes(bytes);
        self.flush();
    }

    /// Collects what the victim transmits, completes and reports.
    pub fn flush(&mut self) {
        loop {
            let mut out = Vec::new();
            if self.victim.transmit(&mut out, 1 << 20) == 0 {
                break;
            }
            self.reader.push(&out);
            while let Some(ulpdu) = self.reader.next_ulpdu() {
                self.received
                    .push(ulpdu.expect("the victim frames what it sends"));
            }
        }
        self.victim.collect();
    }

    /// The Terminates the victim has sent.
    pub fn terminates(&self) -> Vec<SentTerminate> {
        self.received
            .iter()
            .filter_map(|u| as_terminate(u))
            .collect()
    }

    /// The one Terminate the victim has sent.
    pub fn terminate(&self) -> SentTerminate {
        let mut all = self.terminates();
        assert_eq!(all.len(), 1, "exactly one Terminate: {all:?}");
        all.remove(0)
    }
}

/// Convenience: a signaled send work request with an SGL.
pub fn wr(wr_id: u64, op: SendOp, sgl: Vec<Sge>) -> SendWr {
    SendWr::new(wr_id, op, Payload::Sgl(sgl))
}

/// Rights a Data Sink or Source region usually has.
pub const REMOTE_ALL: Access = Access::ALL;

/// A Write to `region` at `offset`.
pub fn write_to(region: &Region, offset: usize) -> SendOp {
    SendOp::Write {
        remote_addr: region.to + offset as u64,
        rkey: region.stag.raw(),
    }
}

/// A Read from `region` at `offset`.
pub fn read_from(region: &Region, offset: usize) -> SendOp {
    SendOp::Read {
        remote_addr: region.to + offset as u64,
        rkey: region.stag.raw(),
    }
}

/// The opcodes of recorded ULPDUs.
pub fn opcodes(ulpdus: &[Vec<u8>]) -> Vec<Opcode> {
    ulpdus
        .iter()
        .map(|u| RdmapSegment::parse(u).unwrap().opcode())
        .collect()
}

/// A Write to a raw address and key, registered or not.
pub fn write_at(remote_addr: u64, rkey: u32) -> SendOp {
    SendOp::Write { remote_addr, rkey }
}

/// A Read from a raw address and key, registered or not.
pub fn read_at(remote_addr: u64, rkey: u32) -> SendOp {
    SendOp::Read { remote_addr, rkey }
}

/// Everything `from` has to send, up to 1 MiB, handed to `to`; returned.
pub fn deliver(from: &mut Side, to: &mut Side) -> Vec<u8> {
    let mut out = Vec::new();
    from.transmit(&mut out, 1 << 20);
    to.engine.on_bytes(&out);
    out
}

/// `len` octets at offset 1 (unaligned) of `owner`, as foreign memory
/// with a guard at each end, for [`Side::region_over`].
///
/// # Safety
///
/// `owner` must outlive every clone of the returned buffer, and not be
/// touched meanwhile.
pub unsafe fn foreign(owner: &mut Vec<u8>, len: usize) -> Arc<MemoryBuffer> {
    owner.resize(1 + len + 2 * GUARD, 0);
    // SAFETY: the `len + 2 * GUARD` octets after the first of `owner` are
    // inside its allocation, which the caller keeps alive and untouched
    // for as long as the buffer.
    Arc::new(unsafe { MemoryBuffer::from_raw_parts(owner.as_mut_ptr().add(1), len + 2 * GUARD) })
}

/// `a`'s Read of all of `b`'s `region` into a new region of its own,
/// posted as work request `wr_id`, with the Read Request delivered to
/// `b`: the region the Read Responses will land in.
pub fn read_back(a: &mut Side, b: &mut Side, wr_id: u64, region: &Region) -> Region {
    let back = a.region(region.len, Access::LOCAL_WRITE);
    a.post(
        wr_id,
        SendOp::Read {
            remote_addr: region.to,
            rkey: region.stag.raw(),
        },
        vec![back.whole()],
    );
    let mut request = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut request)) {}
    b.engine.on_bytes(&request);
    back
}
