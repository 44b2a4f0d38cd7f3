//! Writing payloads through ([`FpduSink::write_through`], the socket
//! transport's `writev` from registered memory): the octets on the wire
//! are those a copying sink frames, foreign memory is written through
//! too, FPDUs with CRCs or Markers never are, a refused FPDU is offered
//! again unchanged, and the payloads stay pinned until the sink's round
//! ends: a deregistration meanwhile completes only after it.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{foreign, pair, read_back, write_to, Setup, REMOTE_ALL};
use uwarp_stack::mem::{Access, GracePeriod, Lent, LentRange};
use uwarp_stack::rdmap::CqKind;
use uwarp_stack::record::FpduSink;
use uwarp_stack::verbs::{SendOp, WcStatus};

/// A part of a round: framed octets, or a payload written through.
enum Part {
    Octets(Vec<u8>),
    Through(LentRange),
}

/// A sink that writes payloads of at least `from` octets through, as the
/// socket transport does: it keeps their ranges and reads them only when
/// the round ends, where the socket transport's `writev` reads them.
struct Through {
    from: usize,
    /// The stream, as far as rounds have ended.
    stream: Vec<u8>,
    round: Vec<Part>,
    reserved: Vec<u8>,
    /// Payloads written through.
    written_through: usize,
    /// Rounds ended.
    rounds: usize,
    /// Write-throughs still to refuse.
    refuse: usize,
    /// Runs as a round ends, before the payloads are read.
    at_end: Option<Box<dyn FnMut()>>,
}

impl Through {
    fn new(from: usize) -> Self {
        Through {
            from,
            stream: Vec::new(),
            round: Vec::new(),
            reserved: Vec::new(),
            written_through: 0,
            rounds: 0,
            refuse: 0,
            at_end: None,
        }
    }
}

impl FpduSink for Through {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        self.reserved = vec![0xEE; len];
        Some(&mut self.reserved)
    }

    fn commit(&mut self) {
        let octets = std::mem::take(&mut self.reserved);
        self.round.push(Part::Octets(octets));
    }

    fn writes_through_from(&self) -> Option<usize> {
        Some(self.from)
    }

    fn write_through(&mut self, head: &[u8], payload: &Lent<'_>, tail: &[u8]) -> bool {
        if self.refuse > 0 {
            self.refuse -= 1;
            return false;
        }
        self.round.push(Part::Octets(head.to_vec()));
        self.round.push(Part::Through(payload.range()));
        self.round.push(Part::Octets(tail.to_vec()));
        self.written_through += 1;
        true
    }

    fn end_round(&mut self) {
        if let Some(at_end) = &mut self.at_end {
            at_end();
        }
        for part in self.round.drain(..) {
            match part {
                Part::Octets(octets) => self.stream.extend_from_slice(&octets),
                Part::Through(range) => {
                    let mut payload = vec![0; range.len()];
                    // SAFETY: the engine holds its pin until this returns.
                    unsafe { range.read(0, &mut payload) }.unwrap();
                    self.stream.extend_from_slice(&payload);
                }
            }
        }
        self.rounds += 1;
    }
}

fn no_crc() -> Setup {
    Setup {
        crc: false,
        mulpdu: 1001,
        ..Setup::default()
    }
}

/// A Write framed by a copying sink, then written through, is the same
/// octets; the Write completes as a copied one does, without waiting
/// for an acknowledgement.
#[test]
fn written_through_fpdus_are_the_octets_a_copy_frames() {
    let (mut a, mut b) = pair(no_crc());
    let src = a.region(10_000, Access::NONE);
    let dst = b.region(10_000, REMOTE_ALL);
    let written = src.fill(5);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let mut copied = Vec::new();
    a.engine.poll_transmit(&mut copied, usize::MAX);
    a.post(2, write_to(&dst, 0), vec![src.whole()]);
    let mut sink = Through::new(512);
    a.engine.poll_transmit_to(&mut sink, usize::MAX);
    // Ten segments of 987 octets; the last, 117, is framed.
    assert_eq!((sink.written_through, sink.rounds), (10, 1));
    assert_eq!(sink.stream, copied);
    assert_eq!(
        a.statuses(CqKind::Send),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(a.engine.counters().fpdus_written_through, 10);
    b.engine.on_bytes(&sink.stream);
    assert_eq!(dst.contents(), written);
}

/// With CRCs the sender would have to read the payload, and Markers
/// would fall inside it: nothing is written through, and the peer
/// checks every CRC and Marker.
#[test]
fn fpdus_with_crcs_or_markers_are_framed() {
    for setup in [
        Setup {
            crc: true,
            ..no_crc()
        },
        Setup {
            markers_ab: true,
            ..no_crc()
        },
    ] {
        let (mut a, mut b) = pair(setup);
        let src = a.region(4_000, Access::NONE);
        let dst = b.region(4_000, REMOTE_ALL);
        let written = src.fill(6);
        a.post(1, write_to(&dst, 0), vec![src.whole()]);
        let mut sink = Through::new(512);
        a.engine.poll_transmit_to(&mut sink, usize::MAX);
        assert_eq!(sink.written_through, 0);
        b.engine.on_bytes(&sink.stream);
        assert_eq!(dst.contents(), written);
        assert_eq!(b.engine.counters().terminates_sent, 0);
    }
}

/// Foreign memory (the drop-ins' `ibv_reg_mr` of the program's own
/// memory), which is never held by reference, is written through: the
/// pin lasts only the round. Read Responses are written through too.
#[test]
fn foreign_memory_is_written_through() {
    // Declared first, so dropped after everything that uses them.
    let (mut owner_a, mut owner_b) = (Vec::new(), Vec::new());
    let (mut a, mut b) = pair(no_crc());
    // SAFETY (both): the owners are dropped last and only used through
    // the buffers.
    let (src_buffer, dst_buffer) =
        unsafe { (foreign(&mut owner_a, 4_000), foreign(&mut owner_b, 4_000)) };
    let src = a.region_over(a.pd, src_buffer, Access::NONE, true);
    let dst = b.region_over(b.pd, dst_buffer, REMOTE_ALL, true);
    let written = src.fill(8);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let mut sink = Through::new(512);
    a.engine.poll_transmit_to(&mut sink, usize::MAX);
    assert_eq!(sink.written_through, 4);
    assert_eq!(a.statuses(CqKind::Send), [(1, WcStatus::Success)]);
    b.engine.on_bytes(&sink.stream);
    assert_eq!(dst.contents(), written);
    dst.assert_guards();

    // The other way: `a` reads `b`'s foreign region back.
    let back = read_back(&mut a, &mut b, 2, &dst);
    let mut responses = Through::new(512);
    b.engine.poll_transmit_to(&mut responses, usize::MAX);
    assert_eq!(responses.written_through, 4);
    a.engine.on_bytes(&responses.stream);
    assert_eq!(back.contents(), written);
    assert_eq!(a.statuses(CqKind::Send), [(2, WcStatus::Success)]);
}

/// A sink without room for an FPDU now gets it again, unchanged, on the
/// next round; nothing is lost or repeated.
#[test]
fn a_refused_fpdu_is_offered_again() {
    let (mut a, mut b) = pair(no_crc());
    let src = a.region(3_000, Access::NONE);
    let dst = b.region(3_000, Access::LOCAL_WRITE);
    let sent = src.fill(9);
    b.post_recv(1, vec![dst.whole()]);
    a.post(2, SendOp::Send, vec![src.whole()]);
    let mut sink = Through::new(512);
    sink.refuse = 1;
    a.engine.poll_transmit_to(&mut sink, usize::MAX);
    assert!(sink.stream.is_empty());
    a.collect();
    assert!(a.completions.is_empty(), "completed before it was taken");
    a.engine.poll_transmit_to(&mut sink, usize::MAX);
    // 983 + 983 + 983 written through, 51 framed.
    assert_eq!((sink.written_through, sink.rounds), (3, 2));
    assert_eq!(a.statuses(CqKind::Send), [(2, WcStatus::Success)]);
    b.engine.on_bytes(&sink.stream);
    assert_eq!(dst.contents(), sent);
    assert_eq!(b.statuses(CqKind::Recv), [(1, WcStatus::Success)]);
}

/// A deregistration that starts while a round holds payloads written
/// through completes only after the round ended: until then the kernel
/// may still read them (the guarantee a program that frees memory after
/// `ibv_dereg_mr` relies on).
#[test]
fn a_deregistration_during_a_round_completes_after_it() {
    let (mut a, b) = pair(no_crc());
    let src = a.region(4_000, Access::NONE);
    let dst = b.region(4_000, REMOTE_ALL);
    src.fill(10);
    a.post(1, write_to(&dst, 0), vec![src.whole()]);
    let deregistration: Rc<RefCell<Option<thread::JoinHandle<()>>>> = Rc::default();
    let done = Arc::new(AtomicBool::new(false));
    let mut sink = Through::new(512);
    let (table, stag) = (a.table.clone(), src.stag);
    let (started, finished) = (deregistration.clone(), done.clone());
    sink.at_end = Some(Box::new(move || {
        assert!(!GracePeriod::may_wait(), "the round is not pinned");
        let (table, flag) = (table.clone(), finished.clone());
        *started.borrow_mut() = Some(thread::spawn(move || {
            table.deregister(stag).unwrap().wait();
            flag.store(true, Ordering::SeqCst);
        }));
        thread::sleep(Duration::from_millis(50));
        assert!(
            !finished.load(Ordering::SeqCst),
            "deregistered while payloads were lent"
        );
    }));
    a.engine.poll_transmit_to(&mut sink, usize::MAX);
    assert_eq!(sink.written_through, 4);
    let deregistration = deregistration.borrow_mut().take().expect("the round ended");
    deregistration.join().unwrap();
    assert!(done.load(Ordering::SeqCst));
}
