//! Zero-copy transmit through the engine: a sink that holds payloads by
//! reference ([`FpduSink::reserve_referencing`]) puts the same octets on
//! the wire as one that takes them framed, a Send or Write sent so
//! completes only once the LLP acknowledged it, and the memory it refers
//! to stays readable after its region was deregistered. Foreign memory
//! (registered where the application allocated it) is never referenced:
//! its payloads are copied even into such a sink.

mod common;

use common::{foreign, pair, read_back, write_to, Region, Setup, Side, REMOTE_ALL};
use uwarp_stack::mem::{Access, BufferSlice};
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::record::{FpduSink, VecSink};
use uwarp_stack::verbs::{SendOp, WcStatus};

/// One committed FPDU part: octets, or a run of registered memory.
enum Part {
    Octets(Vec<u8>),
    Run(BufferSlice),
}

/// A sink that holds payloads of at least `from` octets by reference, as
/// uwarp's TCP send queue does, and reads them only when asked for the
/// stream (as a segment is built, or rebuilt for a retransmission).
struct Referencing {
    from: usize,
    parts: Vec<Part>,
    reserved: Vec<Part>,
    head: Vec<u8>,
    tail: Vec<u8>,
    /// Octets committed, runs included.
    committed: u64,
    runs: usize,
}

impl Referencing {
    fn new(from: usize) -> Self {
        Referencing {
            from,
            parts: Vec::new(),
            reserved: Vec::new(),
            head: Vec::new(),
            tail: Vec::new(),
            committed: 0,
            runs: 0,
        }
    }

    /// The stream so far, runs read from their memory now.
    fn stream(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for part in &self.parts {
            match part {
                Part::Octets(octets) => out.extend_from_slice(octets),
                Part::Run(slice) => {
                    let mut run = vec![0; slice.len()];
                    assert!(slice.read(0, &mut run));
                    out.extend_from_slice(&run);
                }
            }
        }
        out
    }
}

impl FpduSink for Referencing {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        self.reserved.clear();
        self.head = vec![0xEE; len];
        self.tail.clear();
        Some(&mut self.head)
    }

    fn commit(&mut self) {
        let head = std::mem::take(&mut self.head);
        let tail = std::mem::take(&mut self.tail);
        self.committed += (head.len() + tail.len()) as u64;
        self.parts.push(Part::Octets(head));
        for part in self.reserved.drain(..) {
            if let Part::Run(slice) = &part {
                self.committed += slice.len() as u64;
                self.runs += 1;
            }
            self.parts.push(part);
        }
        self.parts.push(Part::Octets(tail));
    }

    fn references_from(&self) -> Option<usize> {
        Some(self.from)
    }

    fn reserve_referencing(
        &mut self,
        head: usize,
        payload: BufferSlice,
        tail: usize,
    ) -> Option<(&mut [u8], &mut [u8])> {
        self.reserved = vec![Part::Run(payload)];
        self.head = vec![0xEE; head];
        self.tail = vec![0xEE; tail];
        Some((&mut self.head, &mut self.tail))
    }
}

/// `a`'s Write of a `len`-octet region (filled) to `b`'s, posted as work
/// request 1 and framed to the end into a [`Referencing`] sink that takes
/// payloads from `from` octets.
struct WriteByReference {
    a: Side,
    b: Side,
    src: Region,
    dst: Region,
    written: Vec<u8>,
    sink: Referencing,
}

fn write_by_reference(setup: Setup, len: usize, from: usize) -> WriteByReference {
    let (mut a, b) = pair(setup);
    let src = a.region(len, Access::NONE);
    let dst = b.region(len, REMOTE_ALL);
    let written = src.fill(3);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let mut sink = Referencing::new(from);
    while a.engine.poll_fpdu(&mut sink) {}
    WriteByReference {
        a,
        b,
        src,
        dst,
        written,
        sink,
    }
}

/// The same Write framed through a copying sink, then through a
/// referencing one, is the same octets on the wire.
#[test]
fn referenced_fpdus_are_the_octets_a_copy_frames() {
    let (mut a, mut b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    let src = a.region(10_000, Access::NONE);
    let dst = b.region(10_000, REMOTE_ALL);
    let written = src.fill(5);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let mut copied = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut copied)) {}
    a.post(2, write_to(&dst, 0), vec![src.whole()]);
    let mut sink = Referencing::new(512);
    while a.engine.poll_fpdu(&mut sink) {}
    // Ten segments; the last, 117 octets, is copied.
    assert_eq!(sink.runs, 10);
    let referenced = sink.stream();
    let differ = copied.iter().zip(&referenced).position(|(x, y)| x != y);
    assert_eq!((copied.len(), differ), (referenced.len(), None));
    b.engine.on_bytes(&referenced);
    assert_eq!(dst.contents(), written);
}

/// A Send whose gather list has two elements: the segment across them is
/// copied, the others go by reference, and the receive gets it whole.
#[test]
fn a_segment_across_two_gather_elements_is_copied() {
    let (mut a, mut b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    let src = a.region(3_000, Access::NONE);
    let dst = b.region(3_000, Access::LOCAL_WRITE);
    let sent = src.fill(6);
    b.post_recv(1, vec![dst.whole()]);
    a.post(
        2,
        SendOp::Send,
        vec![src.sge(0, 1_500), src.sge(1_500, 1_500)],
    );
    let mut sink = Referencing::new(512);
    while a.engine.poll_fpdu(&mut sink) {}
    // 983 + 983 + 983 + 51: the second spans the two elements, the last
    // is under the threshold.
    assert_eq!(sink.runs, 2);
    b.engine.on_bytes(&sink.stream());
    assert_eq!(dst.contents(), sent);
    let received = b.take(CqKind::Recv);
    assert_eq!((received[0].wr_id, received[0].byte_len), (1, 3_000));
}

#[test]
fn a_request_sent_by_reference_completes_once_acknowledged() {
    let (mut a, mut b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    let src = a.region(4_000, Access::NONE);
    let dst = b.region(4_000, REMOTE_ALL);
    src.fill(7);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    // Copied (inline), but it completes after the Write, in order.
    a.post_fenced_inline(2, vec![1; 8]);
    b.post_recv(3, vec![dst.sge(0, 8)]);
    let mut sink = Referencing::new(512);
    // The Write's four segments of 987 octets go by reference.
    for _ in 0..4 {
        assert!(a.engine.poll_fpdu(&mut sink));
    }
    let referenced_end = sink.committed;
    // Its last, 52 octets, is copied, and so is the Send after it.
    while a.engine.poll_fpdu(&mut sink) {}
    assert_eq!(sink.runs, 4);
    a.collect();
    assert!(a.completions.is_empty(), "completed before any ACK");
    a.engine.on_acknowledged(referenced_end - 1);
    a.collect();
    assert!(
        a.completions.is_empty(),
        "completed before its referenced octets were acknowledged"
    );
    // What was copied need not wait.
    a.engine.on_acknowledged(referenced_end);
    let done: Vec<_> = a
        .take(CqKind::Send)
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(done, [(1, WcStatus::Success), (2, WcStatus::Success)]);
    // An ACK going back (reordered) changes nothing.
    a.engine.on_acknowledged(1);
    b.engine.on_bytes(&sink.stream());
    assert_eq!(b.take(CqKind::Recv).len(), 1);
}

/// The peer's FIN flushes the queue pair, but TCP still retransmits what
/// it has not acknowledged, from the application's memory: the Write sent
/// by reference completes only with the ACK or when TCP has ended, and
/// what was posted after it (flushed) completes after it.
#[test]
fn a_flush_holds_what_tcp_may_still_resend() {
    let WriteByReference { mut a, src, .. } = write_by_reference(Setup::default(), 3_000, 512);
    a.post(2, SendOp::Send, vec![src.sge(0, 8)]);
    a.engine.on_llp_closed();
    a.post(3, SendOp::Send, vec![src.sge(0, 8)]);
    a.collect();
    assert!(a.completions.is_empty(), "completed before TCP was done");
    // TCP ended (or acknowledged everything): the Write is done, and the
    // two after it were flushed.
    a.engine.on_acknowledged(u64::MAX);
    assert_eq!(
        a.statuses(CqKind::Send),
        [
            (1, WcStatus::Success),
            (2, WcStatus::WrFlushError),
            (3, WcStatus::WrFlushError)
        ]
    );
}

/// An abortive close resets TCP, which then reads nothing again.
#[test]
fn an_abort_completes_at_once() {
    let WriteByReference { mut a, sink, .. } = write_by_reference(Setup::default(), 3_000, 512);
    assert!(sink.runs > 0);
    a.engine.abort();
    assert_eq!(a.statuses(CqKind::Send), [(1, WcStatus::Success)]);
}

/// With Markers on what this end sends (they would fall inside a payload
/// held by reference) everything is copied, even into a sink that takes
/// references. Regression: the engine panicked on the first large segment.
#[test]
fn markers_keep_every_payload_copied() {
    let setup = Setup {
        mulpdu: 1001,
        markers_ab: true,
        ..Setup::default()
    };
    let mut run = write_by_reference(setup, 4_000, 512);
    assert_eq!(run.sink.runs, 0);
    run.b.engine.on_bytes(&run.sink.stream());
    assert_eq!(run.dst.contents(), run.written);
    assert_eq!(run.a.statuses(CqKind::Send), [(1, WcStatus::Success)]);
}

/// A zero-length Read Response is never referenced, even by a sink that
/// takes every payload: it answers a Read RTR, whose STag the responder
/// need not know and does not check.
#[test]
fn a_zero_length_read_response_is_not_checked() {
    let (mut a, mut b) = pair(Setup::default());
    let sink_region = a.region(16, Access::LOCAL_WRITE);
    a.post(
        1,
        SendOp::Read {
            remote_addr: 0,
            rkey: 0xdead_beef,
        },
        vec![sink_region.sge(0, 0)],
    );
    let mut request = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut request)) {}
    b.engine.on_bytes(&request);
    let mut sink = Referencing::new(0);
    while b.engine.poll_fpdu(&mut sink) {}
    b.collect();
    assert!(b.events.is_empty(), "{:?}", b.events);
    a.engine.on_bytes(&sink.stream());
    let done = a.take(CqKind::Send);
    assert_eq!((done[0].wr_id, done[0].status), (1, WcStatus::Success));
}

#[test]
fn referenced_memory_outlives_its_deregistration() {
    let WriteByReference {
        a,
        mut b,
        src,
        dst,
        written,
        sink,
    } = write_by_reference(Setup::default(), 5_000, 1024);
    assert!(sink.runs > 0);
    a.table.deregister(src.stag).unwrap().wait();
    drop(src);
    // A retransmission reads the memory again: still there, unchanged.
    b.engine.on_bytes(&sink.stream());
    assert_eq!(dst.contents(), written);
}

#[test]
fn read_responses_go_by_reference_too() {
    let (mut a, mut b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    let source = b.region(6_000, Access::REMOTE_READ);
    let sink_region = a.region(6_000, Access::LOCAL_WRITE);
    let data = source.fill(4);
    a.post(
        1,
        SendOp::Read {
            remote_addr: source.to,
            rkey: source.stag.raw(),
        },
        vec![sink_region.whole()],
    );
    let mut request = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut request)) {}
    b.engine.on_bytes(&request);
    let mut sink = Referencing::new(512);
    while b.engine.poll_fpdu(&mut sink) {}
    // The last of seven segments (78 octets) is copied.
    assert_eq!(sink.runs, 6);
    a.engine.on_bytes(&sink.stream());
    assert_eq!(sink_region.contents(), data);
    let done = a.take(CqKind::Send);
    assert_eq!((done[0].wr_id, done[0].status), (1, WcStatus::Success));
}

/// A flush keeps the failed request ahead of the flushed receives, as
/// before requests could wait for TCP: a queue pair whose two queues
/// share a completion queue learns why it failed first. Regression: the
/// receives came first, and `rping` took the stream for disconnected.
#[test]
fn a_flush_reports_the_failed_request_before_the_flushed_receives() {
    let (mut a, _b) = pair(Setup::default());
    let sink_region = a.region(64, Access::LOCAL_WRITE);
    a.post_recv(1, vec![sink_region.sge(0, 16)]);
    a.post(
        2,
        SendOp::Read {
            remote_addr: 0x1000,
            rkey: 0xdead_beef,
        },
        vec![sink_region.sge(16, 16)],
    );
    let mut request = Vec::new();
    while a.engine.poll_fpdu(&mut VecSink::new(&mut request)) {}
    a.engine.on_llp_closed();
    let mut order = Vec::new();
    while let Some((cq, wc)) = a.engine.poll_completion() {
        order.push((cq, wc.wr_id));
    }
    assert_eq!(order, [(CqKind::Send, 2), (CqKind::Recv, 1)]);
}

/// A Write from foreign memory and a Read Response from foreign memory,
/// framed by a sink that takes every payload of 512 octets and more by
/// reference: nothing goes by reference, both arrive intact, and the
/// Write completes without waiting for an acknowledgement.
#[test]
fn foreign_memory_is_copied_even_where_payloads_go_by_reference() {
    // Declared first, so dropped after everything that uses them.
    let (mut owner_a, mut owner_b) = (Vec::new(), Vec::new());
    let (mut a, mut b) = pair(Setup {
        mulpdu: 1001,
        ..Setup::default()
    });
    // SAFETY (both): the owners are dropped last and only used through
    // the buffers.
    let (src_buffer, dst_buffer) =
        unsafe { (foreign(&mut owner_a, 4_000), foreign(&mut owner_b, 4_000)) };
    let src = a.region_over(a.pd, src_buffer, Access::NONE, true);
    let dst = b.region_over(b.pd, dst_buffer, REMOTE_ALL, true);
    let written = src.fill(8);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let mut sink = Referencing::new(512);
    while a.engine.poll_fpdu(&mut sink) {}
    assert_eq!(sink.runs, 0, "foreign memory went by reference");
    assert_eq!(a.statuses(CqKind::Send), [(1, WcStatus::Success)]);
    b.engine.on_bytes(&sink.stream());
    assert_eq!(dst.contents(), written);
    dst.assert_guards();

    // The other way: `a` reads `b`'s foreign region back.
    let back = read_back(&mut a, &mut b, 2, &dst);
    let mut responses = Referencing::new(512);
    while b.engine.poll_fpdu(&mut responses) {}
    assert_eq!(responses.runs, 0, "foreign memory went by reference");
    a.engine.on_bytes(&responses.stream());
    assert_eq!(back.contents(), written);
    assert_eq!(a.statuses(CqKind::Send), [(2, WcStatus::Success)]);
}
