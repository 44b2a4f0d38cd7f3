//! Opening and closing: active, passive and simultaneous open, lost SYNs,
//! the listener's answers and its half-open bound, FIN both ways,
//! simultaneous close, TIME-WAIT, the FIN-WAIT-2 timeout, resets and abort
//! (RFC 9293 sections 3.5-3.6, 3.10.7).

mod tcp_common;

use smoltcp::wire::TcpControl;
use tcp_common::*;
use uwarp_stack::tcp::{
    parse, Config, Connection, Duration, Event, Instant, IsnGenerator, ListenOutcome, Listener,
    Seq, State,
};

#[test]
fn three_way_handshake_negotiates_options() {
    let mut pair = Pair::connected(config(), config());
    assert_eq!(pair.a.state(), State::Established);
    assert_eq!(pair.b.state(), State::Established);
    let syn = pair.log[0].repr();
    assert_eq!(syn.control, TcpControl::Syn);
    assert_eq!(syn.ack_number, None);
    assert_eq!(syn.max_seg_size, Some(1460));
    assert_eq!(syn.window_scale, Some(7));
    assert!(syn.sack_permitted && syn.timestamp.is_some());
    let syn_ack = pair.log[1].repr();
    assert_eq!(syn_ack.control, TcpControl::Syn);
    assert_eq!(syn_ack.ack_number.map(Seq::from), Some(A_ISN + 1));
    // EMSS: 1460 less the 12 octets of the timestamp option.
    assert_eq!(pair.a.emss(), 1448);
    assert!(pair.a.srtt().is_some());
    // Data flows both ways.
    assert_eq!(pair.a.send(b"ping"), 4);
    pair.exchange();
    assert_eq!(pair.b.received(), Some((0, &b"ping"[..])));
}

#[test]
fn options_absent_from_the_peer_are_not_used() {
    let mut plain = config();
    plain.sack = false;
    plain.timestamps = false;
    plain.mss = 536;
    let pair = Pair::connected(config(), plain);
    let syn_ack = pair.log[1].repr();
    assert!(!syn_ack.sack_permitted && syn_ack.timestamp.is_none());
    assert_eq!(pair.a.emss(), 536);
    let ack = pair.log[2].repr();
    assert!(ack.timestamp.is_none());
}

#[test]
fn lost_syn_and_syn_ack_are_retransmitted() {
    let now = Instant(0);
    let mut a = Connection::connect(config(), A, B, A_ISN, now);
    let first = drain(&mut a, now);
    assert_eq!(first.len(), 1);
    let deadline = a.poll_at().expect("SYN timer");
    assert_eq!(deadline, Instant(1_000_000), "RFC 6298 initial RTO of 1 s");
    a.on_timer(deadline);
    let again = drain(&mut a, deadline);
    assert_eq!(again.len(), 1);
    assert_eq!(a.poll_at(), Some(Instant(3_000_000)), "backed off to 2 s");
    // The passive side retransmits its SYN-ACK when its ACK is lost, and
    // answers a repeated SYN with the SYN-ACK again.
    let repr = parse(A.addr, B.addr, &again[0]).unwrap();
    let mut b = Connection::accept(config(), B, A, Seq(77), deadline, &repr);
    let syn_ack = drain(&mut b, deadline);
    assert_eq!(syn_ack.len(), 1);
    b.on_segment(deadline, &repr, &mut Recorder::default());
    assert_eq!(
        drain(&mut b, deadline).len(),
        1,
        "SYN-ACK resent for the duplicate SYN"
    );
    let at = b.poll_at().unwrap();
    b.on_timer(at);
    assert_eq!(drain(&mut b, at).len(), 1, "SYN-ACK resent on timeout");
}

#[test]
fn syn_retries_give_up() {
    let mut cfg = config();
    cfg.max_syn_retransmits = 2;
    let mut a = Connection::connect(cfg, A, B, A_ISN, Instant(0));
    for _ in 0..3 {
        let now = a.poll_at().unwrap_or(Instant(0));
        a.on_timer(now);
        drain(&mut a, now);
    }
    let now = a.poll_at().unwrap();
    a.on_timer(now);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.poll_event(), Some(Event::TimedOut));
}

#[test]
fn simultaneous_open() {
    // Small buffers with a large scale: the windows in the crossing
    // SYN-ACKs must not be scaled (RFC 7323 section 2.2).
    let small = Config {
        recv_buffer: 3000,
        window_scale: 8,
        nagle: false,
        ..config()
    };
    let now = Instant(0);
    let mut a = Connection::connect(small.clone(), A, B, A_ISN, now);
    let mut b = Connection::connect(small, B, A, Seq(5000), now);
    let syn_a = drain(&mut a, now).remove(0);
    let syn_b = drain(&mut b, now).remove(0);
    let mut rx = Recorder::default();
    a.on_segment(now, &parse(B.addr, A.addr, &syn_b).unwrap(), &mut rx);
    b.on_segment(now, &parse(A.addr, B.addr, &syn_a).unwrap(), &mut rx);
    assert_eq!(
        (a.state(), b.state()),
        (State::SynReceived, State::SynReceived)
    );
    let syn_ack_a = drain(&mut a, now).remove(0);
    let syn_ack_b = drain(&mut b, now).remove(0);
    a.on_segment(now, &parse(B.addr, A.addr, &syn_ack_b).unwrap(), &mut rx);
    b.on_segment(now, &parse(A.addr, B.addr, &syn_ack_a).unwrap(), &mut rx);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    a.send(&stream(10_000));
    let sent: usize = drain(&mut a, now)
        .iter()
        .map(|bytes| parse(A.addr, B.addr, bytes).unwrap().payload.len())
        .sum();
    assert_eq!(sent, 3000, "exactly the peer's unscaled SYN window");
}

#[test]
fn syn_sent_answers_a_bad_ack_with_reset_and_accepts_a_good_reset() {
    let now = Instant(0);
    let mut a = Connection::connect(config(), A, B, A_ISN, now);
    drain(&mut a, now);
    let mut rx = Recorder::default();
    let bad = forged(TcpControl::None, Seq(9), Some(Seq(12345)), &[]);
    a.on_segment(now, &parse(B.addr, A.addr, &bad).unwrap(), &mut rx);
    let rst = drain(&mut a, now);
    let rst = parse(A.addr, B.addr, &rst[0]).unwrap();
    assert_eq!(rst.control, TcpControl::Rst);
    assert_eq!(Seq::from(rst.seq_number), Seq(12345));
    assert_eq!(a.state(), State::SynSent);
    // A reset without an acceptable ACK is ignored; with one it refuses.
    let blind = forged(TcpControl::Rst, Seq(9), None, &[]);
    a.on_segment(now, &parse(B.addr, A.addr, &blind).unwrap(), &mut rx);
    assert_eq!(a.state(), State::SynSent);
    let refused = forged(TcpControl::Rst, Seq(0), Some(A_ISN + 1), &[]);
    a.on_segment(now, &parse(B.addr, A.addr, &refused).unwrap(), &mut rx);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.poll_event(), Some(Event::Reset));
}

#[test]
fn listener_resets_stray_acks_and_bounds_half_open_connections() {
    let now = Instant(0);
    let mut listener = Listener::new(B, config(), IsnGenerator::new([9; 16]), 3);
    let ack = forged(TcpControl::None, Seq(1), Some(Seq(4242)), &[]);
    // `forged` builds B -> A segments; swap roles to aim at the listener.
    let repr = parse(B.addr, A.addr, &ack).unwrap();
    let mut aimed = repr;
    aimed.dst_port = B.port;
    aimed.src_port = A.port;
    match listener.on_segment(now, A.addr, B.addr, &aimed) {
        ListenOutcome::Reset(rst) => {
            assert_eq!(rst.header.control, TcpControl::Rst);
            assert_eq!(rst.seq(), Seq(4242));
        }
        other => panic!("expected a reset, got {other:?}"),
    }
    // A SYN flood: only three handshakes at a time.
    let mut accepted = Vec::new();
    for port in 0..100u16 {
        let mut syn = aimed;
        syn.control = TcpControl::Syn;
        syn.ack_number = None;
        syn.src_port = 3000 + port;
        match listener.on_segment(now, A.addr, B.addr, &syn) {
            ListenOutcome::Accepted(conn) => accepted.push(conn),
            ListenOutcome::Dropped => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(accepted.len(), 3);
    assert_eq!(listener.half_open(), 3);
    assert_eq!(listener.stats().dropped, 97);
    // A half-open connection that goes away frees its slot.
    accepted.pop();
    assert_eq!(listener.half_open(), 2);
}

#[test]
fn handshake_completion_frees_the_half_open_slot() {
    let now = Instant(0);
    let mut listener = Listener::new(B, config(), IsnGenerator::new([3; 16]), 1);
    let mut a = Connection::connect(config(), A, B, A_ISN, now);
    let syn = drain(&mut a, now).remove(0);
    let repr = parse(A.addr, B.addr, &syn).unwrap();
    let ListenOutcome::Accepted(mut b) = listener.on_segment(now, A.addr, B.addr, &repr) else {
        panic!("refused");
    };
    assert_eq!(listener.half_open(), 1);
    let mut rx = Recorder::default();
    for bytes in drain(&mut b, now) {
        a.on_segment(now, &parse(B.addr, A.addr, &bytes).unwrap(), &mut rx);
    }
    for bytes in drain(&mut a, now) {
        b.on_segment(now, &parse(A.addr, B.addr, &bytes).unwrap(), &mut rx);
    }
    assert_eq!(b.state(), State::Established);
    assert_eq!(listener.half_open(), 0);
}

#[test]
fn orderly_close_both_ways_with_time_wait() {
    let mut pair = Pair::connected(config(), config());
    pair.a.send(b"bye");
    pair.a.close();
    assert_eq!(pair.a.state(), State::FinWait1);
    pair.exchange();
    assert_eq!(pair.a.state(), State::FinWait2);
    assert_eq!(pair.b.state(), State::CloseWait);
    assert!(pair.b.peer_closed());
    assert_eq!(Pair::events(&mut pair.b), vec![Event::PeerClosed]);
    pair.b.send(b"reply");
    pair.b.close();
    pair.exchange();
    assert_eq!(pair.a.state(), State::TimeWait);
    assert_eq!(pair.b.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.b), vec![Event::Closed]);
    assert_eq!(
        Pair::events(&mut pair.a),
        vec![Event::PeerClosed, Event::Closed]
    );
    let mut buf = [0; 8];
    assert_eq!(pair.a.recv(&mut buf), 5);
    assert_eq!(&buf[..5], b"reply");
    // TIME-WAIT answers a retransmitted FIN and ends after 2 MSL.
    let fin = pair.log.iter().rev().find(|w| !w.from_a).cloned().unwrap();
    pair.deliver(&fin);
    assert_eq!(pair.take(true).len(), 1, "ACK of the repeated FIN");
    pair.advance(Duration::from_millis(100));
    assert!(pair.a.is_closed());
}

/// TIME-WAIT needs no buffers: a connection gives them back there (the
/// application done reading), still answers a retransmitted FIN with the
/// same ACK, and ends after 2 MSL. Not before TIME-WAIT.
#[test]
fn time_wait_gives_its_buffers_back_and_still_answers_a_fin() {
    let mut pair = Pair::connected(config(), config());
    let buffer = pair.a.send_memory().len();
    assert!(buffer > 1);
    pair.a.send(b"bye");
    pair.b.send(b"reply");
    pair.a.close();
    assert!(!pair.a.release_memory(), "not in FIN-WAIT-1");
    pair.exchange();
    pair.b.close();
    assert!(!pair.b.release_memory(), "not in LAST-ACK");
    pair.exchange();
    assert_eq!(pair.a.state(), State::TimeWait);
    let mut buf = [0; 8];
    assert_eq!(pair.a.recv(&mut buf), 5);
    let first_ack = pair.log.last().cloned().unwrap();
    assert!(first_ack.from_a);

    assert!(pair.a.release_memory());
    assert_eq!(pair.a.send_memory().len(), 1);
    let fin = pair.log.iter().rev().find(|w| !w.from_a).cloned().unwrap();
    pair.deliver(&fin);
    let again = pair.take(true);
    assert_eq!(again.len(), 1, "ACK of the repeated FIN");
    let (first, again) = (first_ack.repr(), again[0].repr());
    assert_eq!(
        (again.seq_number, again.ack_number, again.control),
        (first.seq_number, first.ack_number, TcpControl::None)
    );
    assert!(again.window_len > 0, "the window offered stays offered");
    assert_eq!(pair.a.send(b"more"), 0);

    // Data after the FIN, or over it (a broken or hostile peer), is
    // ignored (RFC 9293 section 3.10.7.4: TIME-WAIT ignores segment
    // text), never stored in the one-octet ring nor delivered; the
    // connection stays in TIME-WAIT.
    let fin = fin.repr();
    let fin_seq = Seq::from(fin.seq_number);
    let tsval = fin.timestamp.expect("timestamps in use").tsval + 1;
    let a_next = fin.ack_number.map(Seq::from);
    for (seq, len) in [(fin_seq + 1, 1000), (fin_seq, 10), (fin_seq + 1, 1)] {
        let segment = retimed(&forged(TcpControl::Psh, seq, a_next, &vec![7; len]), tsval);
        let answers = inject(&mut pair, &segment);
        assert!(answers.iter().all(|w| w.payload_len() == 0), "{answers:?}");
        assert_eq!(pair.a.state(), State::TimeWait);
        assert_eq!(pair.a.recv(&mut buf), 0);
    }
    pair.advance(Duration::from_millis(99));
    assert_eq!(pair.a.state(), State::TimeWait);
    pair.advance(Duration::from_millis(1));
    assert!(pair.a.is_closed());
}

#[test]
fn fin_wait_2_times_out_when_the_peer_stays_silent() {
    assert_eq!(
        Config::default().fin_wait2_timeout,
        Some(Duration::from_secs(60))
    );
    let cfg = Config {
        fin_wait2_timeout: Some(Duration::from_secs(2)),
        ..config()
    };
    let mut pair = Pair::connected(cfg, config());
    pair.a.close();
    pair.exchange();
    assert_eq!(pair.a.state(), State::FinWait2);
    assert_eq!(pair.a.poll_at(), Some(pair.now + Duration::from_secs(2)));
    // The peer still sends after a second: that pushes the deadline back.
    pair.advance(Duration::from_secs(1));
    pair.b.send(b"still here");
    pair.settle(Duration::from_millis(10));
    pair.advance(Duration::from_millis(1500));
    assert_eq!(pair.a.state(), State::FinWait2);
    // Then two silent seconds: a RST, and a time-out for the application.
    pair.advance(Duration::from_millis(500));
    assert_eq!(pair.a.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.a), vec![Event::TimedOut]);
    let rst = pair.take(true);
    assert_eq!(rst.len(), 1);
    assert_eq!(rst[0].repr().control, TcpControl::Rst);
    assert!(pair.a.is_closed());
    pair.deliver(&rst[0]);
    assert_eq!(pair.b.state(), State::Closed);
    assert_eq!(
        Pair::events(&mut pair.b),
        vec![Event::PeerClosed, Event::Reset]
    );
}

#[test]
fn fin_wait_2_without_a_timeout_waits_for_the_peer() {
    let cfg = Config {
        fin_wait2_timeout: None,
        ..config()
    };
    let mut pair = Pair::connected(cfg, config());
    pair.a.close();
    pair.exchange();
    assert_eq!(pair.a.state(), State::FinWait2);
    assert_eq!(pair.a.poll_at(), None);
    pair.advance(Duration::from_secs(3600));
    assert_eq!(pair.a.state(), State::FinWait2);
    pair.b.close();
    pair.exchange();
    assert_eq!(pair.a.state(), State::TimeWait);
    assert_eq!(
        Pair::events(&mut pair.a),
        vec![Event::PeerClosed, Event::Closed]
    );
}

#[test]
fn a_connection_sets_its_own_fin_wait_2_timeout() {
    // Before the close: it applies once our FIN is acknowledged.
    let mut pair = Pair::connected(config(), config());
    pair.a
        .set_fin_wait2_timeout(pair.now, Some(Duration::from_secs(2)));
    pair.a.close();
    pair.exchange();
    assert_eq!(pair.a.state(), State::FinWait2);
    assert_eq!(pair.a.poll_at(), Some(pair.now + Duration::from_secs(2)));
    pair.advance(Duration::from_secs(2));
    assert_eq!(pair.a.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.a), vec![Event::TimedOut]);

    // In FIN-WAIT-2 already, under the host's 60 s: it counts from now.
    let mut pair = Pair::connected(config(), config());
    pair.a.close();
    pair.exchange();
    pair.advance(Duration::from_secs(10));
    assert_eq!(pair.a.state(), State::FinWait2);
    pair.a
        .set_fin_wait2_timeout(pair.now, Some(Duration::from_secs(2)));
    assert_eq!(pair.a.poll_at(), Some(pair.now + Duration::from_secs(2)));
    pair.advance(Duration::from_secs(2));
    assert_eq!(pair.a.state(), State::Closed);

    // And none takes the timer away.
    let mut pair = Pair::connected(config(), config());
    pair.a.close();
    pair.exchange();
    pair.a.set_fin_wait2_timeout(pair.now, None);
    assert_eq!(pair.a.poll_at(), None);
    pair.advance(Duration::from_secs(3600));
    assert_eq!(pair.a.state(), State::FinWait2);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut pair = Pair::connected(config(), config());
    pair.a.close();
    pair.b.close();
    let fin_a = pair.take(true);
    let fin_b = pair.take(false);
    for wire in fin_a.iter().chain(&fin_b) {
        pair.deliver(wire);
    }
    assert_eq!(
        (pair.a.state(), pair.b.state()),
        (State::Closing, State::Closing)
    );
    pair.exchange();
    assert_eq!(
        (pair.a.state(), pair.b.state()),
        (State::TimeWait, State::TimeWait)
    );
}

#[test]
fn abort_sends_reset_and_peer_closes() {
    let mut pair = Pair::connected(config(), config());
    pair.a.abort();
    assert_eq!(pair.a.state(), State::Closed);
    let rst = pair.take(true);
    assert_eq!(rst.len(), 1);
    assert_eq!(rst[0].repr().control, TcpControl::Rst);
    assert!(pair.a.is_closed());
    pair.deliver(&rst[0]);
    assert_eq!(pair.b.state(), State::Closed);
    assert_eq!(Pair::events(&mut pair.b), vec![Event::Reset]);
}

#[test]
fn reset_reply_follows_rfc_9293() {
    let syn = forged(TcpControl::Syn, Seq(100), None, b"abc");
    let repr = parse(B.addr, A.addr, &syn).unwrap();
    let rst = uwarp_stack::tcp::reset_reply(B.addr, A.addr, &repr).unwrap();
    assert_eq!(rst.seq(), Seq(0));
    assert_eq!(rst.header.ack_number.map(Seq::from), Some(Seq(104)));
    let reset = forged(TcpControl::Rst, Seq(1), None, &[]);
    let repr = parse(B.addr, A.addr, &reset).unwrap();
    assert!(uwarp_stack::tcp::reset_reply(B.addr, A.addr, &repr).is_none());
}

#[test]
fn emit_checks_the_buffer_and_fills_the_checksum() {
    let now = Instant(0);
    let mut a = Connection::connect(config(), A, B, A_ISN, now);
    let syn = a.poll_transmit(now).expect("SYN");
    let mut short = [0u8; 20];
    let needed = syn.len();
    assert_eq!(
        syn.emit(&mut short),
        Err(uwarp_stack::tcp::BufferTooSmall { needed })
    );
    let mut buf = [0u8; 128];
    assert_eq!(syn.emit(&mut buf), Ok(needed));
    let repr = parse(A.addr, B.addr, &buf[..needed]).expect("checksum verifies");
    assert_eq!(repr.control, TcpControl::Syn);
    assert_eq!(
        parse(
            A.addr,
            smoltcp::wire::Ipv4Address::new(10, 0, 0, 3),
            &buf[..needed]
        ),
        Err(uwarp_stack::tcp::ParseError::Checksum),
        "the pseudo-header covers the addresses"
    );
}

#[test]
fn connections_can_move_between_cores() {
    fn assert_send<T: Send>() {}
    assert_send::<Connection>();
    assert_send::<Listener>();
}
