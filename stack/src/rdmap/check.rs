//! The queue-pair engine's oracle, shared by the `engine` fuzz target
//! (`stack/fuzz/fuzz_targets/engine.rs`) and `stack/tests/qp_fuzz.rs`, so
//! that a crash the fuzzer finds replays as an ordinary test.
//!
//! [`engine`] builds one engine with registered regions of every kind and
//! outstanding work of every kind, feeds it arbitrary stream octets as a
//! peer would (RFC 5044 Full Operation), then closes the LLP. It panics
//! when the engine breaks a promise the RFCs make it keep whatever the
//! peer sends (RFC 5041 section 7.1, RFC 5042 section 5: nothing is placed
//! outside a registered region or into one that forbids it; RFC 5040
//! section 6.6 and the RDMAC verbs: every work request completes exactly
//! once) or when what it sends does not frame or parse.
//!
//! The input: octet 0 holds the settings (bit 0 CRC, bit 1 Markers in
//! what the peer sends, bit 2 the engine is the responder, bits 3-4 the
//! RTR: none, Write, Send, Read, bit 5 reordering, bit 6 zero-copy
//! transmit: the engine's FPDUs go into a sink that takes every payload
//! by reference, as the DPDK transport's TCP send queue does, and reads
//! it from its memory when the FPDU is committed); octet 1 the size of
//! the pieces the rest is fed in (0: all at once, or with reordering one
//! FPDU a piece, as the ULPDU_Length fields cut it); the rest is the
//! peer's stream. With reordering, of each two pieces the second arrives first
//! and is offered for placement out of order (RFC 5041 section 5.3); if
//! the engine declines it, it follows the first in order, as TCP's
//! reassembly buffer would hand it over.
//!
//! The regions, each [`REGION_LEN`] octets with guard octets around it in
//! its buffer: region `i` has STag `(i + 1) << 8` (key 0) and Tagged
//! Offsets from `(i + 1) * REGION_TO_STEP`.
//!
//! | `i` | rights | protection domain | role |
//! | --- | --- | --- | --- |
//! | 0 | remote read and write, local write | the stream's | |
//! | 1 | remote read | the stream's | never written; the source of an RDMA Write |
//! | 2 | remote write | the stream's | |
//! | 3 | local write | the stream's | two receives of 128 octets |
//! | 4 | local write | the stream's | the sink of an RDMA Read |
//! | 5 | all | another | never written |

use std::sync::Arc;

use crate::mem::{Access, BufferSlice, MemoryBuffer, PdId, RegionSpec, Stag, StagTable};
use crate::mpa::{FpduReader, Negotiated, Rtr};
use crate::rdmap::{CqKind, EngineConfig, QpEngine, Role};
use crate::record::{FpduSink, VecSink};
use crate::verbs::{Payload, QpState, RecvWr, SendOp, SendWr, Sge};
use crate::wire::fpdu;
use crate::wire::mpa::Revision;
use crate::wire::rdmap::{Opcode, RdmapSegment};

/// Octets in each region.
pub const REGION_LEN: usize = 256;
/// Distance between the regions' first Tagged Offsets.
pub const REGION_TO_STEP: u64 = 0x1_0000;

/// Octets around each region that must never change.
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xA5;

/// (rights, in the stream's protection domain, may be written).
const REGIONS: [(Access, bool, bool); 6] = [
    (Access::ALL, true, true),
    (Access::REMOTE_READ, true, false),
    (Access::REMOTE_WRITE, true, true),
    (Access::LOCAL_WRITE, true, true),
    (Access::LOCAL_WRITE, true, true),
    (Access::ALL, false, false),
];

const SENDS: [u64; 4] = [1, 2, 3, 4];
const RECEIVES: [u64; 2] = [10, 11];

struct Region {
    buffer: Arc<MemoryBuffer>,
    writable: bool,
    before: Vec<u8>,
}

fn octets(buffer: &MemoryBuffer) -> Vec<u8> {
    let mut out = vec![0; buffer.len()];
    buffer.read_at(0, &mut out).expect("the whole buffer");
    out
}

/// Registers region `i` at the STag the module documentation gives it.
fn register(table: &StagTable, i: usize, pds: [PdId; 2]) -> Region {
    let (access, own, writable) = REGIONS[i];
    let buffer = Arc::new(MemoryBuffer::new(REGION_LEN + 2 * GUARD));
    buffer.fill(GUARD_BYTE);
    let fill: Vec<u8> = (0..REGION_LEN).map(|o| (o * 7 + i) as u8).collect();
    buffer.write_at(GUARD, &fill).expect("inside the buffer");
    let base_to = (i as u64 + 1) * REGION_TO_STEP;
    let pd = if own { pds[0] } else { pds[1] };
    let wanted = i as u32 + 1;
    loop {
        let spec = RegionSpec::new(buffer.clone(), GUARD, REGION_LEN, base_to, access);
        let stag = table.register(pd, spec, 0).expect("a slot is free");
        if stag.index() == wanted {
            break;
        }
        // Indices are drawn at random: try again until it is the one the
        // input can name. Nothing has used the STag, so there is no grace
        // period to wait for.
        table.deregister(stag).expect("just registered");
    }
    Region {
        before: octets(&buffer),
        buffer,
        writable,
    }
}

fn sge(i: usize, offset: usize, length: usize) -> Sge {
    Sge {
        addr: (i as u64 + 1) * REGION_TO_STEP + offset as u64,
        length: length as u32,
        lkey: Stag((i as u32 + 1) << 8),
    }
}

/// An [`FpduSink`] that appends FPDUs to a vector like [`VecSink`], but
/// takes every payload by reference and reads it from its memory when the
/// FPDU is committed: the engine's zero-copy transmit path, its output
/// checked like the copying one's.
struct ReferencingSink<'a> {
    sink: VecSink<'a>,
    /// The reservation's payload, and how many octets precede it.
    run: Option<(BufferSlice, usize)>,
}

impl<'a> ReferencingSink<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        ReferencingSink {
            sink: VecSink::new(out),
            run: None,
        }
    }
}

impl FpduSink for ReferencingSink<'_> {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        self.run = None;
        self.sink.reserve(len)
    }

    fn commit(&mut self) {
        if let Some((run, head)) = self.run.take() {
            // The reservation holds head and tail; the run goes between.
            let mut payload = vec![0; run.len()];
            assert!(run.read(0, &mut payload), "a slice reads inside itself");
            self.sink.insert_reserved(head, &payload);
        }
        self.sink.commit();
    }

    fn references_from(&self) -> Option<usize> {
        Some(1)
    }

    fn reserve_referencing(
        &mut self,
        head: usize,
        payload: BufferSlice,
        tail: usize,
    ) -> Option<(&mut [u8], &mut [u8])> {
        self.run = Some((payload, head));
        Some(self.sink.reserve(head + tail)?.split_at_mut(head))
    }
}

/// `stream` cut where its ULPDU_Length fields say each FPDU ends (the
/// tail that is not a whole FPDU is the last piece).
fn fpdu_pieces(mut stream: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    while let [high, low, ..] = *stream {
        let len = fpdu::fpdu_len(usize::from(u16::from_be_bytes([high, low]))).min(stream.len());
        let (piece, rest) = stream.split_at(len);
        pieces.push(piece);
        stream = rest;
    }
    if !stream.is_empty() {
        pieces.push(stream);
    }
    pieces
}

/// Runs the engine over `input` (see the module documentation) and checks
/// its promises, panicking on the first one broken. Returns whether the
/// stream was still in Full Operation when the input ended (no Terminate
/// was sent or received).
pub fn engine(input: &[u8]) -> bool {
    let (settings, piece, stream) = match input {
        [settings, piece, stream @ ..] => (*settings, usize::from(*piece), stream),
        _ => return true,
    };
    let crc = settings & 1 != 0;
    let rtr =
        [None, Some(Rtr::Write), Some(Rtr::Send), Some(Rtr::Read)][usize::from(settings >> 3 & 3)];
    let role = if settings & 4 != 0 {
        Role::Responder
    } else {
        Role::Initiator
    };
    let table = Arc::new(StagTable::new(REGIONS.len() + 1).expect("a valid capacity"));
    let pds = [PdId::from_raw(1), PdId::from_raw(2)];
    let regions: Vec<Region> = (0..REGIONS.len())
        .map(|i| register(&table, i, pds))
        .collect();
    let mut engine = QpEngine::new(EngineConfig {
        negotiated: Negotiated {
            revision: Revision::Enhanced,
            crc,
            markers_tx: false,
            markers_rx: settings & 2 != 0,
            ird: 4,
            ord: 4,
            peer_ird: Some(4),
            peer_ord: Some(4),
            rtr,
        },
        role,
        mulpdu: 512,
        pd: pds[0],
        table,
        srq: None,
    });
    for (k, wr_id) in RECEIVES.into_iter().enumerate() {
        engine.post_recv(RecvWr {
            wr_id,
            sgl: vec![sge(3, k * 128, 128)],
        });
    }
    let remote = 0x00ab_cd00;
    let read = SendOp::Read {
        remote_addr: 0,
        rkey: remote,
    };
    let write = SendOp::Write {
        remote_addr: 0x100,
        rkey: remote,
    };
    engine.post_send(SendWr::new(
        SENDS[0],
        read,
        Payload::Sgl(vec![sge(4, 0, REGION_LEN)]),
    ));
    engine.post_send(SendWr::new(
        SENDS[1],
        SendOp::Send,
        Payload::Inline(b"uwarp".to_vec()),
    ));
    engine.post_send(SendWr::new(SENDS[2], write, Payload::Inline(vec![9; 16])));
    engine.post_send(SendWr::new(
        SENDS[3],
        write,
        Payload::Sgl(vec![sge(1, 0, REGION_LEN)]),
    ));

    let mut sent = Vec::new();
    let mut completions = Vec::new();
    let zero_copy = settings & 0x40 != 0;
    let mut drain = |engine: &mut QpEngine, sent: &mut Vec<u8>| {
        if zero_copy {
            while engine.poll_fpdu(&mut ReferencingSink::new(sent)) {}
            // Everything sent counts as acknowledged at once.
            engine.on_acknowledged(u64::MAX);
        } else {
            engine.poll_transmit(sent, 1 << 16);
        }
        while let Some(c) = engine.poll_completion() {
            completions.push(c);
        }
        while engine.poll_event().is_some() {}
    };
    drain(&mut engine, &mut sent);
    let reorder = settings & 0x20 != 0;
    let pieces: Vec<&[u8]> = match piece {
        0 if reorder => fpdu_pieces(stream),
        0 => vec![stream],
        _ => stream.chunks(piece).collect(),
    };
    let mut chunks = pieces.into_iter();
    let mut offset = 0u64;
    while let Some(chunk) = chunks.next() {
        let next = if reorder { chunks.next() } else { None };
        let next_at = offset + chunk.len() as u64;
        let placed = next.is_some_and(|next| engine.place_out_of_order(next_at, next));
        drain(&mut engine, &mut sent);
        engine.on_bytes(chunk);
        offset = next_at;
        if let Some(next) = next {
            if !placed {
                engine.on_bytes(next);
            }
            offset += next.len() as u64;
        }
        assert_eq!(engine.rx_offset(), offset, "every octet is taken once");
        drain(&mut engine, &mut sent);
    }
    let open = matches!(engine.state(), QpState::Rts);
    engine.on_llp_closed();
    drain(&mut engine, &mut sent);
    assert_eq!(engine.state(), QpState::Error);

    // Every work request completed exactly once, on its queue.
    let mut ids: Vec<(CqKind, u64)> = completions.iter().map(|(cq, wc)| (*cq, wc.wr_id)).collect();
    ids.sort_by_key(|&(cq, id)| (cq == CqKind::Recv, id));
    let expected: Vec<_> = SENDS
        .iter()
        .map(|&id| (CqKind::Send, id))
        .chain(RECEIVES.iter().map(|&id| (CqKind::Recv, id)))
        .collect();
    assert_eq!(ids, expected, "every work request completes exactly once");
    for (_, wc) in &completions {
        assert!(wc.byte_len as usize <= REGION_LEN);
    }

    // Nothing outside a region, nor in one that may not be written.
    for (i, region) in regions.iter().enumerate() {
        let now = octets(&region.buffer);
        if region.writable {
            let (head, rest) = now.split_at(GUARD);
            let tail = &rest[REGION_LEN..];
            assert!(
                head.iter().chain(tail).all(|&b| b == GUARD_BYTE),
                "an octet around region {i} changed"
            );
        } else {
            assert!(now == region.before, "region {i} changed");
        }
    }

    // What the engine sent frames and parses, and a Terminate is last.
    let mut reader = FpduReader::new(crc, false);
    reader.push(&sent);
    let mut ulpdus = Vec::new();
    while let Some(ulpdu) = reader.next_ulpdu() {
        ulpdus.push(ulpdu.expect("the engine frames what it sends"));
    }
    assert_eq!(reader.buffered(), 0, "the engine sends whole FPDUs");
    for (n, ulpdu) in ulpdus.iter().enumerate() {
        let segment = RdmapSegment::parse(ulpdu).expect("the engine sends valid segments");
        if segment.opcode() == Opcode::Terminate {
            assert_eq!(n + 1, ulpdus.len(), "nothing follows a Terminate");
        }
    }
    open
}
