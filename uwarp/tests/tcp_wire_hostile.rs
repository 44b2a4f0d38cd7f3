//! Hostile input over the wire against uwarp's TCP on DPDK.
//!
//! uwarp runs on port A of a net_ring pair (the control core's
//! [`TcpSetup`] and one dataplane core's [`TcpCore`], stepped from the
//! test thread in simulated time); the test plays the peer on port B
//! with frames made by hand: a real handshake, then what RFC 9293 and
//! RFC 5961 say a TCP must withstand (blind resets and SYNs, a RST storm
//! against the challenge-ACK limit, ACKs out of range, data outside the
//! window, stale timestamps (RFC 7323 PAWS), out-of-order FINs, malformed
//! headers and options, a SYN flood, segments for no connection, and
//! 50,000 random mutations of a flow's segments), the ACKs a receive
//! burst of segments gets, and data that races the flow's hand-over to
//! the dataplane core. Each test checks the answer the RFCs prescribe, that
//! the connection still works afterwards, and that every mbuf is back in
//! the pool once the cores shut down.
//!
//! [`TcpSetup`]: uwarp_control::TcpSetup
//! [`TcpCore`]: uwarp_dataplane::tcp::TcpCore

use uwarp_testing::dpdk_rig;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use dpdk_rig::*;
use smoltcp::wire::{
    EthernetAddress, Ipv4Address, Ipv4Packet, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};
use uwarp_dataplane::tcp::End;
use uwarp_stack::tcp::sim::SimRng;
use uwarp_stack::tcp::Event;

/// The ACK uwarp owes after `segs`: exactly one segment to the peer, a
/// pure ACK with SEQ=SND.NXT and ACK=RCV.NXT (RFC 5961's challenge ACK,
/// and RFC 9293's answer to an unacceptable segment).
#[track_caller]
fn assert_one_ack(segs: &[Seg], snd_nxt: u32, rcv_nxt: u32) {
    assert_eq!(segs.len(), 1, "exactly one segment in answer: {segs:?}");
    let ack = &segs[0];
    assert!(ack.is_pure_ack(), "a pure ACK: {ack:?}");
    assert_eq!(ack.seq, snd_nxt, "SEQ=SND.NXT: {ack:?}");
    assert_eq!(ack.ack, Some(rcv_nxt), "ACK=RCV.NXT: {ack:?}");
}

/// The core services a flow once per receive burst, not per segment:
/// a burst of in-order data segments gets one cumulative ACK, while
/// out-of-order segments in a burst each still owe their duplicate ACK
/// (RFC 5681 section 4.2), and the segment filling the hole is
/// acknowledged at once with everything behind it.
#[test]
fn a_burst_gets_one_cumulative_ack_and_out_of_order_segments_their_own() {
    let mut rig = Rig::new("ackburst", test_config());
    let mut peer = Peer::new(40112, 0x1200_0000);
    let (log, _) = rig.connect(&mut peer);
    let start = peer.snd_nxt;
    let in_order: Vec<Vec<u8>> = (0..16u8).map(|i| peer.data(&[i; 1000])).collect();
    let acks = Rig::segments_to(&rig.exchange(&in_order), peer.port);
    assert_eq!(acks.len(), 1, "one ACK for the burst: {acks:?}");
    assert!(acks[0].is_pure_ack(), "{acks:?}");
    assert_eq!(acks[0].ack, Some(peer.snd_nxt), "it covers all 16");

    let hole = peer.data(&[0xaa; 1000]);
    let hole_seq = peer.snd_nxt.wrapping_sub(1000);
    let beyond: Vec<Vec<u8>> = (0..4).map(|_| peer.data(&[0xbb; 1000])).collect();
    let dups = Rig::segments_to(&rig.exchange(&beyond), peer.port);
    assert_eq!(dups.len(), 4, "a duplicate ACK each: {dups:?}");
    assert!(
        dups.iter()
            .all(|d| d.is_pure_ack() && d.ack == Some(hole_seq)),
        "{dups:?}"
    );
    let filled = Rig::segments_to(&rig.exchange(&[hole]), peer.port);
    assert_eq!(filled.len(), 1, "{filled:?}");
    assert_eq!(
        filled[0].ack,
        Some(peer.snd_nxt),
        "the hole and all behind it"
    );
    let log = lock(&log);
    let first = log.data[0].0;
    assert_eq!(
        log.left_edge - first,
        u64::from(peer.snd_nxt.wrapping_sub(start)),
        "all 21,000 octets delivered"
    );
    drop(log);
    rig.finish();
}

/// A flow whose doorbell rang and which took in a burst of segments
/// before one poll is driven twice in that poll: once before the first
/// segment, for the work posted before it (a receive for a Send), and
/// once after the burst. That first drive answers the doorbell, so
/// neither the burst's other segments nor the doorbell's queue entry
/// drive it again (before, each did: four drives). A ring after that
/// still gets its own drive.
#[test]
fn a_flow_rung_and_receiving_in_one_poll_is_driven_before_and_after_the_burst() {
    let mut rig = Rig::new("ringrecv", test_config());
    let mut peer = Peer::new(40113, 0x1300_0000);
    let (log, _) = rig.connect(&mut peer);
    rig.settle();
    let doorbell = lock(&log).doorbell.clone().expect("on the dataplane");
    let drives = || lock(&log).drives;

    doorbell.ring();
    rig.inject(&[peer.data(&[1; 1000]), peer.data(&[2; 1000])]);
    let before = drives();
    rig.step();
    assert_eq!(drives() - before, 2, "one before the burst, one after");
    let after_burst = drives();
    rig.settle();
    assert_eq!(drives(), after_burst, "nothing left to drive");

    doorbell.ring();
    rig.step();
    assert_eq!(drives() - after_burst, 1, "a ring alone is answered");
    assert_eq!(lock(&log).delivered(), 2000);
    rig.finish();
}

/// Data that races the hand-over: the peer's handshake ACK and its first
/// two data segments reach the dataplane core in one burst, before the
/// core owns the flow, so all three go to the control core. The ACK
/// completes the handshake and hands the flow over; the two segments
/// behind it are forwarded to the owning core (not dropped), which
/// delivers them in order once it has the flow. Later segments go to the
/// core directly.
#[test]
fn segments_racing_the_hand_over_are_forwarded_and_delivered() {
    let mut rig = Rig::new("handrace", test_config());
    let mut peer = Peer::new(40114, 0x1400_0000);
    rig.half_open(&mut peer);
    let ack = peer.segment(TcpControl::None, peer.snd_nxt, Some(peer.rcv_nxt), b"");
    let racing = [ack, peer.data(&[1; 700]), peer.data(&[2; 300])];
    let acks = Rig::segments_to(&rig.exchange(&racing), peer.port);
    assert!(
        acks.iter().any(|s| s.ack == Some(peer.snd_nxt)),
        "both segments acknowledged: {acks:?}"
    );
    let setup = rig.setup_counters();
    assert_eq!(setup.handed_over, 1, "{setup:?}");
    assert_eq!(setup.forwarded, 2, "{setup:?}");
    assert_eq!(setup.forward_ring_full, 0, "{setup:?}");
    let log = rig
        .app(peer.ip, peer.port)
        .expect("the accepted connection");
    assert_eq!(
        lock(&log).data,
        [(0, vec![1; 700], true), (700, vec![2; 300], true)],
        "delivered once each, in order"
    );

    assert_delivers(&mut rig, &mut peer, &log, &[3; 500]);
    assert_eq!(rig.setup_counters().forwarded, 2, "owned: no forwarding");
    let report = rig.finish();
    assert_eq!(report.core.malformed, 0, "{:?}", report.core);
    assert_eq!(report.dataplane.stale_packets, 0, "{:?}", report.dataplane);
}

/// Sends `payload` in order from `peer` and checks uwarp delivers it at
/// stream position `pos` and acknowledges it.
#[track_caller]
fn assert_delivers(rig: &mut Rig, peer: &mut Peer, log: &Log, payload: &[u8]) {
    let pos = u64::from(peer.snd_nxt.wrapping_sub(peer.iss.wrapping_add(1)));
    let before = lock(log).data.len();
    let out = rig.exchange(&[peer.data(payload)]);
    let segs = Rig::segments_to(&out, peer.port);
    for seg in &segs {
        peer.learn(seg);
    }
    assert!(
        segs.iter()
            .any(|s| s.is_pure_ack() && s.ack == Some(peer.snd_nxt)),
        "the data is acknowledged: {segs:?}"
    );
    assert!(
        segs.iter().all(|s| s.control != TcpControl::Rst),
        "{segs:?}"
    );
    let log = lock(log);
    assert_eq!(
        &log.data[before..],
        &[(pos, payload.to_vec(), true)],
        "delivered once, in order"
    );
    assert_eq!(log.left_edge, pos + payload.len() as u64);
    assert_eq!(log.end, None);
}

/// RFC 5961 section 3.2 (RFC 9293 section 3.10.7.4, "check the RST
/// bit"): a RST out of the window is dropped silently; one in the window
/// but not at RCV.NXT gets a challenge ACK and the connection lives on;
/// one exactly at RCV.NXT resets it. The same in SYN-RECEIVED, on the
/// control core.
#[test]
fn blind_resets_get_challenge_acks_and_only_an_exact_one_resets() {
    let mut rig = Rig::new("rst", test_config());
    let mut peer = Peer::new(40001, 0x1000_0000);
    let (log, _) = rig.connect(&mut peer);
    let snd_nxt = peer.rcv_nxt; // uwarp's SND.NXT: it sent nothing yet
    let rcv_nxt = peer.snd_nxt; // uwarp's RCV.NXT
    let window = peer.uwarp_window;
    assert_eq!(window, 32 * 1024, "RCV.WND is the receive buffer");

    // In the window, not at RCV.NXT: a challenge ACK each.
    let in_window = [
        peer.segment(TcpControl::Rst, rcv_nxt.wrapping_add(1), None, b""),
        peer.segment(TcpControl::Rst, rcv_nxt.wrapping_add(window - 1), None, b""),
        peer.segment(
            TcpControl::Rst,
            rcv_nxt.wrapping_add(1000),
            Some(snd_nxt),
            b"",
        ),
    ];
    for (i, rst) in in_window.iter().enumerate() {
        let out = rig.exchange(std::slice::from_ref(rst));
        assert_one_ack(&Rig::segments_to(&out, peer.port), snd_nxt, rcv_nxt);
        assert_eq!(lock(&log).stats.challenge_acks, i as u64 + 1);
    }
    // Outside the window (beyond it, before it): dropped, no answer.
    for seq in [
        rcv_nxt.wrapping_add(window),
        rcv_nxt.wrapping_add(window + 5000),
        rcv_nxt.wrapping_sub(1),
        rcv_nxt.wrapping_add(0x8000_0000),
    ] {
        let out = rig.exchange(&[peer.segment(TcpControl::Rst, seq, Some(snd_nxt), b"")]);
        assert_eq!(Rig::segments_to(&out, peer.port), vec![], "seq {seq:#x}");
    }
    {
        let log = lock(&log);
        assert_eq!(log.stats.challenge_acks, 3);
        assert_eq!(log.stats.unacceptable, 4);
        assert_eq!(log.end, None, "{log:?}");
        assert!(!log.events.contains(&Event::Reset));
    }
    assert_eq!(rig.flows(), 1);

    // The connection still works.
    assert_delivers(&mut rig, &mut peer, &log, b"still here");

    // Exactly at RCV.NXT: reset, nothing sent back, the flow dropped.
    let rcv_nxt = peer.snd_nxt;
    let out = rig.exchange(&[peer.segment(TcpControl::Rst, rcv_nxt, None, b"")]);
    assert_eq!(Rig::segments_to(&out, peer.port), vec![]);
    {
        let log = lock(&log);
        assert_eq!(log.end, Some(End::Reset), "{log:?}");
        assert_eq!(log.events.last(), Some(&Event::Reset));
    }
    assert_eq!(rig.flows(), 0);
    assert_eq!(rig.core_counters().flows_closed, 1);

    // The tuple is now no connection's: an ACK to it gets the RST of RFC
    // 9293 section 3.10.7.1 (<SEQ=SEG.ACK><CTL=RST>) from the listener,
    // once the control core stopped forwarding the tuple's segments to
    // the core it handed the flow to (2 s after the hand-over; see
    // `a_segment_right_after_a_reset_gets_a_reset` for before).
    rig.advance(Duration::from_secs(3), Duration::from_millis(10), |_| {});
    let out = rig.exchange(&[peer.data(b"anyone?")]);
    let segs = Rig::segments_to(&out, peer.port);
    assert_eq!(segs.len(), 1, "{segs:?}");
    assert_eq!(
        (segs[0].control, segs[0].seq, segs[0].ack),
        (TcpControl::Rst, snd_nxt, None)
    );

    // SYN-RECEIVED: the handshake on the control core.
    let mut half = Peer::new(40002, 0x2000_0000);
    let synack = rig.half_open(&mut half);
    assert_eq!(rig.cores.control.handler().handshakes(), 1);
    let out =
        rig.exchange(&[half.segment(TcpControl::Rst, half.snd_nxt.wrapping_add(7), None, b"")]);
    // The ACK of SYN-RECEIVED: SEQ=ISS+1 (SND.NXT), ACK=RCV.NXT.
    assert_one_ack(
        &Rig::segments_to(&out, half.port),
        synack.seq.wrapping_add(1),
        half.snd_nxt,
    );
    assert_eq!(
        rig.cores.control.handler().handshakes(),
        1,
        "still half-open"
    );
    let out = rig.exchange(&[half.segment(TcpControl::Rst, half.snd_nxt, None, b"")]);
    assert_eq!(Rig::segments_to(&out, half.port), vec![]);
    assert_eq!(rig.cores.control.handler().handshakes(), 0, "reset");
    let half_log = rig.app(half.ip, half.port).expect("log");
    assert_eq!(lock(&half_log).end, Some(End::Reset));

    let report = rig.finish();
    assert_eq!(report.core.malformed, 0);
    assert_eq!(report.setup.failed, 1, "the reset handshake");
}

/// RFC 5961 section 4.2 (RFC 9293 section 3.10.7.4, "check the SYN
/// bit"): a SYN on a synchronized connection, whatever its sequence
/// number, gets an ACK and the connection lives on.
#[test]
fn a_syn_on_an_established_connection_gets_a_challenge_ack() {
    let mut rig = Rig::new("syn", test_config());
    let mut peer = Peer::new(40011, 0x3000_0000);
    let (log, _) = rig.connect(&mut peer);
    assert_delivers(&mut rig, &mut peer, &log, b"before");
    let snd_nxt = peer.rcv_nxt;
    let rcv_nxt = peer.snd_nxt;
    let window = peer.uwarp_window;

    let syns = [
        // At RCV.NXT, inside the window, with and without ACK.
        peer.segment(TcpControl::Syn, rcv_nxt, None, b""),
        peer.segment(
            TcpControl::Syn,
            rcv_nxt.wrapping_add(100),
            Some(snd_nxt),
            b"",
        ),
        // The original SYN again (its ISN), and one far away.
        peer.segment(TcpControl::Syn, peer.iss, None, b""),
        peer.segment(TcpControl::Syn, rcv_nxt.wrapping_add(window + 1), None, b""),
        peer.segment(
            TcpControl::Syn,
            rcv_nxt.wrapping_add(0x8000_0000),
            None,
            b"",
        ),
        // A SYN carrying data, in the window.
        peer.segment(TcpControl::Syn, rcv_nxt, None, b"syn data"),
    ];
    for (i, syn) in syns.iter().enumerate() {
        let out = rig.exchange(std::slice::from_ref(syn));
        let segs = Rig::segments_to(&out, peer.port);
        assert_one_ack(&segs, snd_nxt, rcv_nxt);
        let log = lock(&log);
        assert_eq!(log.end, None, "SYN {i}: {log:?}");
        assert_eq!(log.delivered(), 6, "SYN {i} delivered nothing");
    }
    {
        let log = lock(&log);
        // Those in the window are challenge ACKs; the others fail the
        // sequence check first and get its ACK.
        assert_eq!(log.stats.challenge_acks, 3, "{:?}", log.stats);
        assert_eq!(log.stats.unacceptable, 3, "{:?}", log.stats);
        assert_eq!(log.state, Some(uwarp_stack::tcp::State::Established));
    }
    assert_delivers(&mut rig, &mut peer, &log, b"after the SYNs");
    assert_eq!(rig.flows(), 1);
    let report = rig.finish();
    assert_eq!(report.setup.handed_over, 1, "no new connection was made");
}

/// RFC 5961 section 5.2 and RFC 9293 section 3.10.7.4 ("fifth, check the
/// ACK field"): a segment whose ACK is beyond SND.NXT, or before
/// SND.UNA - MAX.SND.WND, is discarded (its data not delivered) and
/// answered with an ACK; one at either end of the range is accepted.
#[test]
fn data_with_an_ack_out_of_range_is_dropped_and_answered() {
    let mut rig = Rig::new("ackrange", test_config());

    // SYN-RECEIVED (RFC 9293 section 3.10.7.4): an ACK that does not
    // acknowledge our SYN draws <SEQ=SEG.ACK><CTL=RST>, and the handshake
    // stays; the right ACK then completes it.
    let mut half = Peer::new(40020, 0x4100_0000);
    let synack = rig.half_open(&mut half);
    for bad in [
        synack.seq.wrapping_add(1000),
        synack.seq,
        synack.seq.wrapping_sub(5),
    ] {
        let out = rig.exchange(&[half.segment(TcpControl::None, half.snd_nxt, Some(bad), b"")]);
        let segs = Rig::segments_to(&out, half.port);
        assert_eq!(segs.len(), 1, "{segs:?}");
        assert_eq!(
            (segs[0].control, segs[0].seq, segs[0].ack),
            (TcpControl::Rst, bad, None)
        );
        assert_eq!(
            rig.cores.control.handler().handshakes(),
            1,
            "still half-open"
        );
    }
    let ok = half.segment(TcpControl::None, half.snd_nxt, Some(half.rcv_nxt), b"");
    rig.exchange(&[ok]);
    assert_eq!(rig.cores.control.handler().handshakes(), 0);
    assert_eq!(rig.flows(), 1, "established and handed over");

    *rig.greeting.lock().unwrap() = vec![b'u'; 1000];
    let mut peer = Peer::new(40021, 0x4000_0000);
    let (log, greeting) = rig.connect(&mut peer);
    // uwarp sent its 1000 octets; the peer acknowledges none yet.
    let sent: usize = greeting.iter().map(|s| s.payload.len()).sum();
    assert_eq!(sent, 1000, "{greeting:?}");
    let snd_una = peer.uwarp_iss.wrapping_add(1);
    let snd_nxt = snd_una.wrapping_add(1000);
    let max_snd_wnd = u32::from(peer.window); // no window scaling
    let rcv_nxt = peer.snd_nxt;

    let bad_acks = [
        snd_nxt.wrapping_add(1),
        snd_nxt.wrapping_add(100_000),
        snd_una.wrapping_sub(max_snd_wnd).wrapping_sub(1),
        snd_una.wrapping_sub(0x7000_0000),
    ];
    for ack in bad_acks {
        let frame = peer.segment(TcpControl::Psh, rcv_nxt, Some(ack), b"bad ack");
        let out = rig.exchange(&[frame]);
        assert_one_ack(&Rig::segments_to(&out, peer.port), snd_nxt, rcv_nxt);
        let log = lock(&log);
        assert_eq!(log.delivered(), 0, "ACK {ack:#x}: nothing delivered");
        assert_eq!(log.end, None);
    }
    assert_eq!(lock(&log).stats.unacceptable, 4);

    // SND.UNA - MAX.SND.WND is acceptable (an old ACK): the data goes in.
    let ack = snd_una.wrapping_sub(max_snd_wnd);
    let out = rig.exchange(&[peer.segment(TcpControl::Psh, rcv_nxt, Some(ack), b"old ack")]);
    let segs = Rig::segments_to(&out, peer.port);
    assert!(
        segs.iter().any(|s| s.ack == Some(rcv_nxt.wrapping_add(7))),
        "{segs:?}"
    );
    assert_eq!(lock(&log).data, vec![(0, b"old ack".to_vec(), true)]);
    peer.snd_nxt = rcv_nxt.wrapping_add(7);

    // SND.NXT is acceptable: the data goes in and uwarp's data is acked.
    peer.rcv_nxt = snd_nxt;
    assert_delivers(&mut rig, &mut peer, &log, b"all acked");
    // Nothing is resent once everything is acknowledged.
    let out = {
        let mut out = Vec::new();
        rig.advance(Duration::from_secs(2), Duration::from_millis(1), |f| {
            out.push(f.to_vec())
        });
        out
    };
    let resent: Vec<Seg> = Rig::segments_to(&out, peer.port)
        .into_iter()
        .filter(|s| !s.payload.is_empty())
        .collect();
    assert_eq!(resent, vec![], "everything was acknowledged");
    assert_eq!(lock(&log).stats.retransmissions, 0);
    let report = rig.finish();
    assert_eq!(report.setup.failed, 0);
}

/// RFC 9293 section 3.10.7.4, "first, check the sequence number": data
/// beyond RCV.NXT + RCV.WND, or wholly before RCV.NXT, is not accepted
/// (no octet delivered twice) and is answered with an ACK; a segment
/// overlapping RCV.NXT gives only its new part; one straddling the right
/// edge gives only what is inside the window.
#[test]
fn data_outside_the_window_is_not_delivered_and_is_acknowledged() {
    let mut rig = Rig::new("window", test_config());
    let mut peer = Peer::new(40031, 0xfffe_0000); // wraps during the test
    let (log, _) = rig.connect(&mut peer);
    let snd_nxt = peer.rcv_nxt;
    assert_eq!(peer.uwarp_window, 32 * 1024);
    assert_delivers(&mut rig, &mut peer, &log, b"0123456789");
    let rcv_nxt = peer.snd_nxt;
    // RCV.WND as the ACK of those ten octets advertised it: the right
    // edge stays put until it can move by a segment (RFC 9293 section
    // 3.8.6.2.2).
    let window = peer.uwarp_window;
    assert_eq!(window, 32 * 1024 - 10);

    let unacceptable = [
        // Beyond the window: the first octet past it, and far beyond.
        (rcv_nxt.wrapping_add(window), b"beyond".to_vec()),
        (
            rcv_nxt.wrapping_add(window + 10_000),
            b"far beyond".to_vec(),
        ),
        (
            rcv_nxt.wrapping_add(0x8000_0000),
            b"half the space".to_vec(),
        ),
        // Old: the same ten octets again, with other contents.
        (rcv_nxt.wrapping_sub(10), b"XXXXXXXXXX".to_vec()),
        (rcv_nxt.wrapping_sub(3), b"XXX".to_vec()),
        (rcv_nxt.wrapping_sub(100_000), b"ancient".to_vec()),
    ];
    for (seq, payload) in &unacceptable {
        let frame = peer.segment(TcpControl::Psh, *seq, Some(snd_nxt), payload);
        let out = rig.exchange(&[frame]);
        assert_one_ack(&Rig::segments_to(&out, peer.port), snd_nxt, rcv_nxt);
    }
    // An empty ACK beyond the window is unacceptable too.
    let frame = peer.segment(
        TcpControl::None,
        rcv_nxt.wrapping_add(window),
        Some(snd_nxt),
        b"",
    );
    assert_one_ack(
        &Rig::segments_to(&rig.exchange(&[frame]), peer.port),
        snd_nxt,
        rcv_nxt,
    );
    {
        let log = lock(&log);
        assert_eq!(log.delivered(), 10, "{:?}", log.data);
        assert_eq!(log.stats.unacceptable, 7);
    }

    // Overlapping RCV.NXT: only "abcde" is new.
    let frame = peer.segment(
        TcpControl::Psh,
        rcv_nxt.wrapping_sub(5),
        Some(snd_nxt),
        b"YYYYYabcde",
    );
    let out = rig.exchange(&[frame]);
    peer.snd_nxt = rcv_nxt.wrapping_add(5);
    let segs = Rig::segments_to(&out, peer.port);
    for seg in &segs {
        peer.learn(seg);
    }
    assert!(segs.iter().any(|s| s.ack == Some(peer.snd_nxt)), "{segs:?}");
    {
        let log = lock(&log);
        assert_eq!(log.data.last(), Some(&(10, b"abcde".to_vec(), true)));
        assert!(
            !log.has_overlap(),
            "no octet delivered twice: {:?}",
            log.data
        );
        assert_eq!(log.stream(), b"0123456789abcde");
    }

    // Straddling the right edge: only the octet inside the window.
    let rcv_nxt = peer.snd_nxt;
    let edge = rcv_nxt.wrapping_add(peer.uwarp_window - 1);
    let frame = peer.segment(TcpControl::Psh, edge, Some(snd_nxt), b"!trimmed");
    let out = rig.exchange(&[frame]);
    let segs = Rig::segments_to(&out, peer.port);
    // Out of order: an immediate duplicate ACK of RCV.NXT.
    assert!(segs.iter().all(|s| s.ack == Some(rcv_nxt)), "{segs:?}");
    assert!(!segs.is_empty());
    {
        let log = lock(&log);
        let last = log.data.last().expect("data");
        assert_eq!(
            last,
            &(15 + u64::from(peer.uwarp_window) - 1, b"!".to_vec(), false),
            "only the octet inside the window"
        );
    }
    assert_delivers(&mut rig, &mut peer, &log, b"fghij");
    {
        let log = lock(&log);
        assert!(!log.has_overlap());
        assert_eq!(log.stream(), b"0123456789abcdefghij");
        assert_eq!(log.end, None);
    }
    rig.finish();
}

/// RFC 9293 section 3.10.7.1: once a connection is gone, a segment for
/// its 4-tuple is answered as for no connection (a RST, or the
/// listener's SYN-ACK for a new SYN), at once.
///
/// Regression: the control core used to forward every segment of a
/// handed-over tuple to its dataplane core for 2 s, whether or not the
/// flow still existed there, and the core dropped them as stale. The
/// core now announces closed flows and forwarding stops.
#[test]
fn a_segment_right_after_a_reset_gets_a_reset() {
    let mut rig = Rig::new("stale", test_config());
    let mut peer = Peer::new(40041, 0x5000_0000);
    let (log, _) = rig.connect(&mut peer);
    let snd_nxt = peer.rcv_nxt;
    let out = rig.exchange(&[peer.segment(TcpControl::Rst, peer.snd_nxt, None, b"")]);
    assert_eq!(Rig::segments_to(&out, peer.port), vec![]);
    assert_eq!(lock(&log).end, Some(End::Reset));
    assert_eq!(rig.flows(), 0);

    let stale_before = rig.cores.dataplanes[0].counters().stale_packets;
    let out = rig.exchange(&[peer.data(b"anyone?")]);
    let stale = rig.cores.dataplanes[0].counters().stale_packets - stale_before;
    let segs = Rig::segments_to(&out, peer.port);
    let mut failures = Vec::new();
    if segs.len() != 1
        || (segs[0].control, segs[0].seq, segs[0].ack) != (TcpControl::Rst, snd_nxt, None)
    {
        failures.push(format!(
            "an ACK got {segs:?} instead of <SEQ={snd_nxt:#x}><CTL=RST> \
                               ({stale} segment(s) dropped as stale by the core)"
        ));
    }

    // A new connection on the same 4-tuple.
    let mut again = Peer::new(peer.port, 0x6000_0000);
    let out = rig.exchange(&[again.syn()]);
    let segs = Rig::segments_to(&out, again.port);
    if !segs
        .iter()
        .any(|s| s.control == TcpControl::Syn && s.ack == Some(0x6000_0001))
    {
        failures.push(format!(
            "a new SYN on the tuple got {segs:?} instead of a SYN-ACK"
        ));
    }
    rig.finish();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Offset of the TCP header in the frames the peer sends (no IPv4
/// options).
const TCP_AT: usize = 34;

/// Malformed frames on an established flow: the dataplane's classify
/// drops those with a bad checksum or impossible lengths (counted by
/// reason), the engine's parser refuses bad options and flag
/// combinations (counted as malformed); nothing is answered, nothing
/// delivered, and the connection carries on. Options that parse but mean
/// nothing here (a window scale on a non-SYN, an unknown kind) are
/// ignored; a window scale above 14 in a SYN is used as 14 (RFC 7323
/// section 2.3).
#[test]
fn malformed_headers_and_options_are_dropped_and_counted() {
    let config = uwarp_stack::tcp::Config {
        initial_window: 20,
        ..test_config()
    };
    let mut rig = Rig::new("malformed", config);
    let mut peer = Peer::new(40051, 0x7000_0000);
    let (log, _) = rig.connect(&mut peer);
    assert_delivers(&mut rig, &mut peer, &log, b"first.");
    let (seq, ack) = (peer.snd_nxt, peer.rcv_nxt);
    let us = (UWARP_IP, LISTEN_PORT);
    let them = (PEER_IP, peer.port);
    let net_before = rig.net();

    // Dropped by classify.
    let good = peer.segment(TcpControl::Psh, seq, Some(ack), b"evil");
    let mut bad_tcp_checksum = good.clone();
    bad_tcp_checksum[TCP_AT + 16] ^= 0x5a;
    let mut bad_ip_checksum = good.clone();
    bad_ip_checksum[14 + 10] ^= 0x5a;
    let truncated = peer.frame(&good[TCP_AT..TCP_AT + 12]);
    let offset_beyond = peer.frame(&raw_tcp(
        them,
        us,
        seq,
        ack,
        flags::ACK | flags::PSH,
        65535,
        &[],
        Some(15),
        b"evil",
    ));
    let offset_below = peer.frame(&raw_tcp(
        them,
        us,
        seq,
        ack,
        flags::ACK | flags::PSH,
        65535,
        &[],
        Some(4),
        b"evil",
    ));
    let edit_ip = |frame: &[u8], edit: &dyn Fn(&mut Ipv4Packet<&mut [u8]>)| {
        let mut frame = frame.to_vec();
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
        edit(&mut ip);
        ip.fill_checksum();
        frame
    };
    let total_beyond = edit_ip(&good, &|ip| ip.set_total_len(1000));
    let ihl_below = edit_ip(&good, &|ip| ip.set_header_len(16));
    let fragment = edit_ip(&good, &|ip| ip.set_more_frags(true));
    let port_zero = peer.frame(&raw_tcp(
        (PEER_IP, 0),
        us,
        seq,
        ack,
        flags::ACK | flags::PSH,
        65535,
        &[],
        None,
        b"evil",
    ));
    let runt = good[..10].to_vec();
    let classify_drops = [
        bad_tcp_checksum,
        bad_ip_checksum,
        truncated,
        offset_beyond,
        offset_below,
        total_beyond,
        ihl_below,
        fragment,
        port_zero,
        runt,
    ];
    let out = rig.exchange(&classify_drops);
    assert_eq!(
        Rig::segments_to(&out, peer.port),
        vec![],
        "nothing answered"
    );
    let net = rig.net();
    let grew = |f: fn(&uwarp_dataplane::net::NetCounters) -> u64| f(&net) - f(&net_before);
    assert_eq!(grew(|n| n.tcp_bad_checksum), 1, "{net:?}");
    assert_eq!(grew(|n| n.ipv4_bad_checksum), 1, "{net:?}");
    assert_eq!(grew(|n| n.tcp_truncated), 3, "{net:?}");
    assert_eq!(grew(|n| n.ipv4_bad_total_length), 1, "{net:?}");
    assert_eq!(grew(|n| n.ipv4_bad_header_length), 1, "{net:?}");
    assert_eq!(grew(|n| n.ipv4_fragment), 1, "{net:?}");
    assert_eq!(grew(|n| n.tcp_bad_port), 1, "{net:?}");
    assert_eq!(grew(|n| n.runt), 1, "{net:?}");
    assert_eq!(grew(|n| n.dropped), 10, "{net:?}");

    // Refused by the engine's parser (valid checksums, right tuple, in
    // the window): counted as malformed.
    let with_options = |options: &[u8], flag_bits: u8| {
        peer.frame(&raw_tcp(
            them, us, seq, ack, flag_bits, 65535, options, None, b"evil",
        ))
    };
    let ack_psh = flags::ACK | flags::PSH;
    let parse_errors = [
        // A zero-length option, and a length of one.
        with_options(&[30, 0], ack_psh),
        with_options(&[4, 0], ack_psh),
        with_options(&[1, 1, 30, 1], ack_psh),
        // Option lengths beyond the header.
        with_options(&[8, 10, 0, 0], ack_psh),
        with_options(&[1, 2, 40, 0], ack_psh),
        // SACK with an odd length (not 2 + 8n).
        with_options(&[1, 1, 5, 11, 0, 0, 0, 1, 0, 0, 0, 2, 0], ack_psh),
        // MSS and window scale with wrong lengths.
        with_options(&[2, 3, 5, 0], ack_psh),
        with_options(&[3, 4, 7, 0], ack_psh),
        // Flags that cannot go together.
        with_options(&[], flags::SYN | flags::FIN | flags::ACK),
        with_options(&[], flags::RST | flags::FIN | flags::ACK),
        with_options(&[], flags::SYN | flags::RST),
    ];
    let malformed_before = rig.core_counters().malformed;
    let out = rig.exchange(&parse_errors);
    assert_eq!(
        Rig::segments_to(&out, peer.port),
        vec![],
        "nothing answered"
    );
    assert_eq!(
        rig.core_counters().malformed - malformed_before,
        parse_errors.len() as u64
    );
    {
        let log = lock(&log);
        assert_eq!(log.delivered(), 6, "nothing delivered: {:?}", log.data);
        assert_eq!(log.end, None);
    }
    assert_eq!(rig.net().dropped, net.dropped, "they passed classify");

    // Options that parse but do not apply are ignored: the data goes in.
    let ignored = [
        // A window scale above 14, on a non-SYN segment.
        (&[3u8, 3, 15, 0][..], &b"wscale15"[..]),
        // An unknown kind, and timestamps of the wrong length.
        (&[99, 4, 0xde, 0xad][..], &b"unknown"[..]),
        (&[8, 6, 0, 0, 0, 1][..], &b"short ts"[..]),
    ];
    let mut expected = b"first.".to_vec();
    for (options, payload) in ignored {
        let seq = peer.snd_nxt;
        let frame = peer.frame(&raw_tcp(
            them, us, seq, ack, ack_psh, 65535, options, None, payload,
        ));
        peer.snd_nxt = seq.wrapping_add(payload.len() as u32);
        let out = rig.exchange(&[frame]);
        let segs = Rig::segments_to(&out, peer.port);
        assert!(
            segs.iter().any(|s| s.ack == Some(peer.snd_nxt)),
            "{options:?}: {segs:?}"
        );
        expected.extend_from_slice(payload);
    }
    assert_delivers(&mut rig, &mut peer, &log, b"last");
    expected.extend_from_slice(b"last");
    assert_eq!(lock(&log).stream(), expected);
    assert!(!lock(&log).has_overlap());

    // A SYN offering a shift of 15: uwarp uses 14 (RFC 7323 section
    // 2.3). The peer's window field of 1 is then 16384 octets: with 40000
    // octets to send, uwarp first sends its initial window (14600), then,
    // as the peer acknowledges each of those segments (and its congestion
    // window grows past 16384), keeps exactly 16384 in flight.
    *rig.greeting.lock().unwrap() = vec![b'g'; 40_000];
    let mut wide = Peer::new(40052, 0x7100_0000);
    wide.offer.window_scale = Some(15);
    wide.window = 1;
    let (wide_log, first) = rig.connect(&mut wide);
    let data_start = wide.uwarp_iss.wrapping_add(1);
    let flight: usize = first.iter().map(|s| s.payload.len()).sum();
    assert_eq!(flight, 14600, "the initial window: {first:?}");
    let mut end = data_start.wrapping_add(14600);
    let mut acked = data_start;
    for seg in &first {
        acked = seg.seq.wrapping_add(seg.len());
        let frame = wide.segment(TcpControl::None, wide.snd_nxt, Some(acked), b"");
        let out = rig.exchange(&[frame]);
        for seg in Rig::segments_to(&out, wide.port) {
            if !seg.payload.is_empty() {
                end = end.max(seg.seq.wrapping_add(seg.len()));
            }
        }
    }
    assert_eq!(
        end.wrapping_sub(acked),
        1 << 14,
        "in flight: the window is 1 << 14"
    );
    assert_eq!(lock(&wide_log).end, None);

    let report = rig.finish();
    assert_eq!(report.core.malformed, parse_errors.len() as u64);
    assert_eq!(report.setup.malformed, 0);
}

/// A SYN flood of 20,000 SYNs from random addresses and ports of the
/// subnet: the listener keeps at most its bound of handshakes (1024,
/// `MAX_HALF_OPEN` in `control/src/setup.rs`), answers each one it
/// admits with a SYN-ACK and drops (and counts) the rest; once the
/// half-open handshakes time out (SYN-ACK retransmissions, RFC 9293
/// section 3.8.3), a legitimate handshake completes.
#[test]
fn a_syn_flood_stays_bounded_and_a_real_handshake_completes_after_it() {
    const SYNS: usize = 20_000;
    const BOUND: usize = 1024;
    let config = uwarp_stack::tcp::Config {
        send_buffer: 16 * 1024,
        recv_buffer: 16 * 1024,
        ..test_config()
    };
    let mut rig = Rig::new("synflood", config);
    let mut rng = SimRng::new(0x5f10_0d5e);
    let mut seen = HashSet::new();
    let mut syns = Vec::with_capacity(SYNS);
    while syns.len() < SYNS {
        let ip = Ipv4Address::new(10, 88, 1 + rng.below(254) as u8, 1 + rng.below(254) as u8);
        let port = 1024 + rng.below(64_000) as u16;
        if seen.insert((ip, port)) {
            syns.push((ip, port, rng.next_u32()));
        }
    }
    let mac_of = |ip: Ipv4Address| {
        let [_, _, c, d] = ip.octets();
        EthernetAddress([0x02, 0x66, 0x66, 0x66, c, d])
    };
    let syn_frame = |(ip, port, isn): (Ipv4Address, u16, u32)| {
        let repr = TcpRepr {
            src_port: port,
            dst_port: LISTEN_PORT,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(isn as i32),
            ack_number: None,
            window_len: 65535,
            window_scale: Some(7),
            max_seg_size: Some(1460),
            sack_permitted: true,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        ipv4_frame(
            (mac_of(ip), ip),
            (UWARP_MAC, UWARP_IP),
            &tcp_bytes(ip, UWARP_IP, &repr),
        )
    };

    let mut synacks: HashMap<(Ipv4Address, u16), Seg> = HashMap::new();
    let mut others = Vec::new();
    let mut most = 0;
    for (n, chunk) in syns.chunks(250).enumerate() {
        let frames: Vec<Vec<u8>> = chunk.iter().map(|&s| syn_frame(s)).collect();
        rig.inject(&frames);
        rig.drain(10_000, |frame| match Seg::parse(frame) {
            Some(seg) if seg.control == TcpControl::Syn => {
                let previous = synacks.insert((seg.ip_dst, seg.dst_port), seg);
                assert!(previous.is_none(), "one SYN-ACK per admitted SYN");
            }
            Some(seg) => others.push(seg),
            None => {}
        });
        let handshakes = rig.cores.control.handler().handshakes();
        assert!(handshakes <= BOUND, "{handshakes} after chunk {n}");
        most = most.max(handshakes);
        if n == 20 {
            // In the middle of the flood, the real peer is refused too
            // (no SYN cookies): its SYN is dropped unanswered.
            let mut early = Peer::new(40061, 0x9000_0000);
            let out = rig.exchange(&[early.syn()]);
            assert_eq!(Rig::segments_to(&out, early.port), vec![]);
        }
    }
    assert_eq!(others, vec![], "only SYN-ACKs");
    assert_eq!(most, BOUND, "the bound is reached, never passed");
    let setup = rig.setup_counters();
    assert_eq!(setup.syns_dropped, (SYNS - BOUND + 1) as u64, "{setup:?}");
    let stats = rig
        .cores
        .control
        .handler()
        .listener_stats(LISTEN_PORT)
        .expect("listener");
    assert_eq!(stats.accepted, BOUND as u64, "{stats:?}");
    assert_eq!(stats.dropped, (SYNS - BOUND + 1) as u64, "{stats:?}");
    assert_eq!(rig.cores.dataplanes[0].counters().control_ring_full, 0);
    // The first BOUND SYNs were admitted, and each got its SYN-ACK.
    let admitted: HashSet<(Ipv4Address, u16)> = syns[..BOUND]
        .iter()
        .map(|&(ip, port, _)| (ip, port))
        .collect();
    let answered: HashSet<(Ipv4Address, u16)> = synacks.keys().copied().collect();
    assert_eq!(answered, admitted);
    for &(ip, port, isn) in &syns[..BOUND] {
        let seg = &synacks[&(ip, port)];
        assert_eq!(seg.ack, Some(isn.wrapping_add(1)), "{seg:?}");
        assert_eq!((seg.src_port, seg.eth_dst), (LISTEN_PORT, mac_of(ip)));
    }

    // The half-open handshakes resend their SYN-ACKs, then give up
    // (1 + 2 + 4 + 8 + 16 + 32 + 60 s with the default RTOs).
    let mut resent = 0u64;
    rig.advance(
        Duration::from_secs(130),
        Duration::from_millis(10),
        |frame| {
            if Seg::parse(frame).is_some_and(|s| s.control == TcpControl::Syn) {
                resent += 1;
            }
        },
    );
    assert_eq!(rig.cores.control.handler().handshakes(), 0);
    assert_eq!(resent, 6 * BOUND as u64, "six retransmissions each");
    assert_eq!(rig.setup_counters().failed, BOUND as u64);
    let timed_out = rig
        .apps
        .lock()
        .unwrap()
        .values()
        .filter(|log| lock(log).end == Some(End::TimedOut))
        .count();
    assert_eq!(timed_out, BOUND);

    // A real peer now gets through.
    let mut peer = Peer::new(40062, 0x9100_0000);
    let (log, _) = rig.connect(&mut peer);
    assert_delivers(&mut rig, &mut peer, &log, b"past the flood");
    rig.finish();
}

/// The SEQ and ACK (when the ACK flag is set) of a RST.
type ResetFields = (u32, Option<u32>);

/// RFC 9293 section 3.10.7.1 (and LISTEN, 3.10.7.2): a segment for no
/// connection is answered with <SEQ=SEG.ACK><CTL=RST> when it has an
/// ACK, <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK> otherwise; a RST is
/// never answered; a listener answers an ACK with a RST and drops other
/// segments without SYN.
#[test]
fn segments_for_no_connection_get_the_resets_of_rfc_9293() {
    let mut rig = Rig::new("noconn", test_config());
    let mut closed = Peer::new(40071, 0xa000_0000);
    closed.dst_port = 7777;
    let s = 0xa000_0000u32;
    let a = 0x1234_5678u32;
    // (segment, expected RST: (SEQ, ACK)) to a port without a listener.
    let cases: Vec<(Vec<u8>, Option<ResetFields>)> = vec![
        (
            closed.segment(TcpControl::None, s, Some(a), b""),
            Some((a, None)),
        ),
        (
            closed.segment(TcpControl::Psh, s, Some(a), b"data"),
            Some((a, None)),
        ),
        (
            closed.segment(TcpControl::Fin, s, Some(a), b""),
            Some((a, None)),
        ),
        (
            closed.segment(TcpControl::Syn, s, Some(a), b""),
            Some((a, None)),
        ),
        (
            closed.segment(TcpControl::Psh, s, None, b"hello"),
            Some((0, Some(s + 5))),
        ),
        (
            closed.segment(TcpControl::Syn, s, None, b""),
            Some((0, Some(s + 1))),
        ),
        (
            closed.segment(TcpControl::Syn, s, None, b"xy"),
            Some((0, Some(s + 3))),
        ),
        (
            closed.segment(TcpControl::Fin, s, None, b"bye"),
            Some((0, Some(s + 4))),
        ),
        (
            closed.segment(TcpControl::None, s, None, b""),
            Some((0, Some(s))),
        ),
        (closed.segment(TcpControl::Rst, s, None, b""), None),
        (closed.segment(TcpControl::Rst, s, Some(a), b""), None),
        (closed.segment(TcpControl::Rst, s, None, b"rst data"), None),
    ];
    let mut resets = 0;
    for (i, (frame, expected)) in cases.iter().enumerate() {
        let out = rig.exchange(std::slice::from_ref(frame));
        let segs = Rig::segments_to(&out, closed.port);
        match expected {
            None => assert_eq!(segs, vec![], "case {i}: a RST is not answered"),
            Some((seq, ack)) => {
                resets += 1;
                assert_eq!(segs.len(), 1, "case {i}: {segs:?}");
                let rst = &segs[0];
                assert_eq!(
                    (rst.control, rst.seq, rst.ack),
                    (TcpControl::Rst, *seq, *ack),
                    "case {i}: {rst:?}"
                );
                assert!(rst.payload.is_empty());
                assert_eq!((rst.src_port, rst.dst_port), (7777, closed.port));
                assert_eq!((rst.ip_src, rst.ip_dst), (UWARP_IP, PEER_IP));
                // The Ethernet addresses: `resets_go_to_the_senders_mac`.
            }
        }
    }

    // The listening port, no connection of this tuple.
    let mut stray = Peer::new(40072, 0xb000_0000);
    let out = rig.exchange(&[stray.segment(TcpControl::None, s, Some(a), b"")]);
    let segs = Rig::segments_to(&out, stray.port);
    assert_eq!(segs.len(), 1, "{segs:?}");
    assert_eq!(
        (segs[0].control, segs[0].seq, segs[0].ack),
        (TcpControl::Rst, a, None)
    );
    resets += 1;
    for frame in [
        stray.segment(TcpControl::Psh, s, None, b"no ack"),
        stray.segment(TcpControl::Fin, s, None, b""),
        stray.segment(TcpControl::Rst, s, None, b""),
        stray.segment(TcpControl::Rst, s, Some(a), b""),
    ] {
        let out = rig.exchange(&[frame]);
        assert_eq!(Rig::segments_to(&out, stray.port), vec![], "dropped");
    }
    assert_eq!(rig.cores.control.handler().handshakes(), 0);

    // For another address: dropped by classify, unanswered.
    let other = Ipv4Address::new(10, 88, 0, 3);
    let repr_frame = closed.segment(TcpControl::None, s, Some(a), b"");
    let mut tcp = repr_frame[TCP_AT..TCP_AT + 20].to_vec();
    fill_tcp_checksum(PEER_IP, other, &mut tcp);
    let frame = ipv4_frame((PEER_MAC, PEER_IP), (UWARP_MAC, other), &tcp);
    let out = rig.exchange(&[frame]);
    assert_eq!(Rig::segments_to(&out, closed.port), vec![]);
    assert_eq!(rig.net().ipv4_not_our_address, 1);

    // The listener still serves.
    let mut peer = Peer::new(40073, 0xc000_0000);
    let (log, _) = rig.connect(&mut peer);
    assert_delivers(&mut rig, &mut peer, &log, b"hello");
    let report = rig.finish();
    assert_eq!(report.setup.resets_sent, resets);
}

/// A RST answering a segment for no connection goes back the way the
/// segment came: from uwarp's MAC address to the sender's (RFC 894; the
/// IPv4 addresses are swapped already).
///
/// Regression: these RSTs once went out with the two Ethernet addresses
/// swapped, which a switch drops (and learns the peer's MAC on uwarp's
/// port from).
#[test]
fn resets_go_to_the_senders_mac() {
    let mut rig = Rig::new("rstmac", test_config());
    let mut closed = Peer::new(40081, 0xd000_0000);
    closed.dst_port = 7777;
    let mut listening = Peer::new(40082, 0xd100_0000);
    let frames = [
        closed.segment(TcpControl::None, 1, Some(2), b""),
        closed.segment(TcpControl::Syn, 1, None, b""),
        listening.segment(TcpControl::None, 1, Some(2), b""),
    ];
    let mut rsts = Vec::new();
    for frame in frames {
        let out = rig.exchange(&[frame]);
        rsts.extend(
            out.iter()
                .filter_map(|f| Seg::parse(f))
                .filter(|s| s.control == TcpControl::Rst),
        );
    }
    rig.finish();
    assert_eq!(rsts.len(), 3, "{rsts:?}");
    for rst in &rsts {
        assert_eq!((rst.eth_src, rst.eth_dst), (UWARP_MAC, PEER_MAC), "{rst:?}");
    }
}

/// The connection the fuzzer works on.
struct Fuzzed {
    peer: Peer,
    log: Log,
    /// A segment with FIN for this tuple reached uwarp (parsable).
    fin_sent: bool,
}

/// A fresh connection with every option (window scale, SACK,
/// timestamps), from the next peer port.
fn open_fuzzed(rig: &mut Rig, rng: &mut SimRng, next_port: &mut u16) -> Fuzzed {
    let mut peer = Peer::new(*next_port, rng.next_u32());
    *next_port += 1;
    peer.offer = Offer {
        window_scale: Some(7),
        sack: true,
        timestamps: true,
    };
    peer.window = 512;
    let (log, _) = rig.connect(&mut peer);
    assert!(peer.timestamps);
    Fuzzed {
        peer,
        log,
        fin_sent: false,
    }
}

/// A valid segment of `peer`'s flow at RCV.NXT (`rcv_nxt`), mutated: 1
/// to 3 of bit flips in the header, random flags, random or nearby
/// SEQ/ACK, window, data offset, option bytes, length, and (rarely)
/// ports; the checksum recomputed in 99 cases of 100.
fn mutated_segment(rng: &mut SimRng, peer: &mut Peer, rcv_nxt: u32) -> Vec<u8> {
    let snd_nxt = peer.uwarp_iss.wrapping_add(1);
    let len = if rng.chance(0.3) {
        0
    } else {
        1 + rng.below(120) as usize
    };
    let payload: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
    let control = [TcpControl::None, TcpControl::Psh][rng.below(2) as usize];
    let mut repr = TcpRepr {
        src_port: peer.port,
        dst_port: peer.dst_port,
        control,
        seq_number: TcpSeqNumber(rcv_nxt as i32),
        ack_number: Some(TcpSeqNumber(snd_nxt as i32)),
        window_len: peer.window,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: Some(peer.next_timestamp()),
        payload: &payload,
    };
    if rng.chance(0.2) {
        let left = snd_nxt.wrapping_add(rng.below(4000) as u32);
        repr.sack_ranges[0] = Some((left, left.wrapping_add(rng.below(3000) as u32)));
    }
    let mut tcp = tcp_bytes(peer.ip, UWARP_IP, &repr);
    let near = |rng: &mut SimRng, base: u32| {
        base.wrapping_add((rng.below(140_001) as i64 - 70_000) as u32)
    };
    for _ in 0..1 + rng.below(3) {
        // Earlier mutations may have cut the segment short: every edit
        // stays within it.
        let header_len = (usize::from(tcp.get(12).copied().unwrap_or(0) >> 4) * 4)
            .max(20)
            .min(tcp.len());
        let put = |tcp: &mut Vec<u8>, at: usize, bytes: &[u8]| {
            if let Some(field) = tcp.get_mut(at..at + bytes.len()) {
                field.copy_from_slice(bytes);
            }
        };
        match rng.below(12) {
            0 | 1 => {
                // A bit of the header past the ports.
                if header_len > 4 {
                    let at = 4 + rng.below(header_len as u64 - 4) as usize;
                    tcp[at] ^= 1 << rng.below(8);
                }
            }
            2 => {
                // Random flags; RST and FIN kept rarer, or connections
                // end too soon (a RST or FIN at RCV.NXT is valid).
                let mut bits = rng.next_u32() as u8;
                if rng.chance(0.7) {
                    bits &= !flags::RST;
                }
                if rng.chance(0.7) {
                    bits &= !flags::FIN;
                }
                put(&mut tcp, 13, &[bits]);
            }
            3 => put(&mut tcp, 4, &rng.next_u32().to_be_bytes()),
            4 => put(&mut tcp, 4, &near(rng, rcv_nxt).to_be_bytes()),
            5 => put(&mut tcp, 8, &rng.next_u32().to_be_bytes()),
            6 => put(&mut tcp, 8, &near(rng, snd_nxt).to_be_bytes()),
            7 => put(&mut tcp, 14, &(rng.next_u32() as u16).to_be_bytes()),
            8 => {
                let offset = (rng.below(16) as u8) << 4;
                if let Some(byte) = tcp.get_mut(12) {
                    *byte = offset | (*byte & 0x0f);
                }
            }
            9 => {
                // Option bytes (the timestamp's, and any SACK's).
                if header_len > 20 {
                    let at = 20 + rng.below(header_len as u64 - 20) as usize;
                    tcp[at] = rng.next_u32() as u8;
                }
            }
            10 => {
                if rng.chance(0.5) {
                    let keep = rng.below(tcp.len() as u64 + 1) as usize;
                    tcp.truncate(keep);
                } else {
                    tcp.extend((0..1 + rng.below(64)).map(|_| rng.next_u32() as u8));
                }
            }
            _ => {
                // Another tuple: a source port no test connection uses, or
                // another of uwarp's ports.
                if rng.chance(0.5) {
                    let port = 1024 + rng.below(29_000) as u16;
                    put(&mut tcp, 0, &port.to_be_bytes());
                } else {
                    put(&mut tcp, 2, &(rng.next_u32() as u16).to_be_bytes());
                }
            }
        }
    }
    if tcp.len() >= 18 && rng.chance(0.99) {
        fill_tcp_checksum(peer.ip, UWARP_IP, &mut tcp);
    }
    tcp
}

/// What a mutated segment says, if the engine can parse it (checksum
/// ignored: the dataplane checked it).
fn parsed(tcp: &[u8]) -> Option<(u16, u16, TcpControl, u32)> {
    let packet = TcpPacket::new_checked(tcp).ok()?;
    let repr = TcpRepr::parse(
        &packet,
        &PEER_IP.into(),
        &UWARP_IP.into(),
        &smoltcp::phy::ChecksumCapabilities::ignored(),
    )
    .ok()?;
    Some((
        repr.src_port,
        repr.dst_port,
        repr.control,
        repr.seq_number.0 as u32,
    ))
}

/// 50,000 seeded random mutations of valid segments of established flows
/// (timestamps, SACK and window scaling in use), each injected and
/// stepped on its own: no panic; a connection only ever ends by a RST
/// exactly at RCV.NXT (RFC 5961 section 3.2) or closes its receiving half
/// by the peer's FIN, and then the fuzzing goes on with a new one; uwarp
/// never resets a live connection itself; and at the end the connection
/// delivers and acknowledges a legitimate segment.
#[test]
fn fifty_thousand_mutated_segments_leave_the_engine_sound() {
    const MUTATIONS: usize = 50_000;
    let config = uwarp_stack::tcp::Config {
        send_buffer: 16 * 1024,
        recv_buffer: 16 * 1024,
        ..test_config()
    };
    let mut rig = Rig::new("fuzz", config);
    let mut rng = SimRng::new(0xf022_5eed_0bad_cafe);
    let mut next_port = 60_000u16;
    let mut conn = open_fuzzed(&mut rig, &mut rng, &mut next_port);
    let (mut resets, mut peer_fins, mut connections) = (0u32, 0u32, 1u32);
    let mut uwarp_resets_on_live = Vec::new();
    for i in 0..MUTATIONS {
        let left_edge = lock(&conn.log).left_edge;
        let rcv_nxt = conn.peer.iss.wrapping_add(1).wrapping_add(left_edge as u32);
        let tcp = mutated_segment(&mut rng, &mut conn.peer, rcv_nxt);
        let what = parsed(&tcp);
        let ours = |(src, dst, ..): &(u16, u16, TcpControl, u32)| {
            (*src, *dst) == (conn.peer.port, LISTEN_PORT)
        };
        if what
            .as_ref()
            .is_some_and(|w| ours(w) && w.2 == TcpControl::Fin)
        {
            conn.fin_sent = true;
        }
        let frame = conn.peer.frame(&tcp);
        rig.inject(&[frame]);
        rig.step();
        let (end, peer_closed) = {
            let log = lock(&conn.log);
            (log.end, log.events.contains(&Event::PeerClosed))
        };
        for seg in rig.collect().iter().filter_map(|f| Seg::parse(f)) {
            if (seg.src_port, seg.dst_port) != (LISTEN_PORT, conn.peer.port) {
                continue;
            }
            if seg.control == TcpControl::Rst && end.is_none() {
                uwarp_resets_on_live.push((i, seg.clone()));
            }
            // Keep the peer's timestamps ahead of uwarp's TS.Recent, which
            // mutated timestamps may have moved: the base segments stay
            // valid.
            if let Some((_, tsecr)) = seg.timestamp {
                if (tsecr.wrapping_sub(conn.peer.ts_clock) as i32) > 0 {
                    conn.peer.ts_clock = tsecr;
                }
            }
        }
        if let Some(end) = end {
            assert_eq!(end, End::Reset, "mutation {i}: {:?}", lock(&conn.log));
            let (_, _, control, seq) = what
                .filter(|w| ours(w))
                .unwrap_or_else(|| panic!("mutation {i} ended the connection: {tcp:02x?}"));
            assert_eq!(control, TcpControl::Rst, "mutation {i}");
            assert_eq!(seq, rcv_nxt, "mutation {i}: a RST exactly at RCV.NXT");
            resets += 1;
        } else if peer_closed {
            assert!(conn.fin_sent, "mutation {i}: PeerClosed without a FIN");
            peer_fins += 1;
        } else {
            continue;
        }
        conn = open_fuzzed(&mut rig, &mut rng, &mut next_port);
        connections += 1;
    }
    assert_eq!(
        uwarp_resets_on_live,
        vec![],
        "uwarp reset a live connection"
    );

    // Back in step with the connection: an unacceptable segment (far
    // beyond the window) draws an ACK with SND.NXT, RCV.NXT and TS.Recent.
    let left_edge = lock(&conn.log).left_edge;
    let rcv_nxt = conn.peer.iss.wrapping_add(1).wrapping_add(left_edge as u32);
    let snd_nxt = conn.peer.uwarp_iss.wrapping_add(1);
    let probe = conn.peer.segment(
        TcpControl::None,
        rcv_nxt.wrapping_add(0x4000_0000),
        Some(snd_nxt),
        b"",
    );
    let out = rig.exchange(&[probe]);
    let segs = Rig::segments_to(&out, conn.peer.port);
    let ack = segs
        .iter()
        .rev()
        .find(|s| s.is_pure_ack())
        .unwrap_or_else(|| panic!("no ACK to the probe: {segs:?}"));
    assert_eq!((ack.seq, ack.ack), (snd_nxt, Some(rcv_nxt)), "{ack:?}");
    if let Some((_, tsecr)) = ack.timestamp {
        if (tsecr.wrapping_sub(conn.peer.ts_clock) as i32) > 0 {
            conn.peer.ts_clock = tsecr;
        }
    }
    // A legitimate segment at RCV.NXT is delivered (the octets nothing
    // delivered before: mutated data may have arrived out of order there)
    // and acknowledged.
    conn.peer.snd_nxt = rcv_nxt;
    conn.peer.rcv_nxt = snd_nxt;
    let legit = b"a legitimate segment after the fuzzing";
    let before = lock(&conn.log).data.len();
    let out = rig.exchange(&[conn.peer.data(legit)]);
    let segs = Rig::segments_to(&out, conn.peer.port);
    assert!(
        segs.iter().any(|s| s
            .ack
            .is_some_and(|a| (a.wrapping_sub(conn.peer.snd_nxt) as i32) >= 0)),
        "acknowledged: {segs:?}"
    );
    {
        let log = lock(&conn.log);
        assert_eq!(log.end, None);
        assert!(log.left_edge >= left_edge + legit.len() as u64, "{log:?}");
        for (pos, data, _) in &log.data[before..] {
            let at = (pos - left_edge) as usize;
            assert_eq!(&legit[at..at + data.len()], &data[..], "at {pos}");
        }
        assert!(!log.has_overlap(), "no octet delivered twice");
    }

    let report = rig.finish();
    println!(
        "{MUTATIONS} mutations over {connections} connections: {resets} reset by a RST at \
         RCV.NXT, {peer_fins} closed by a FIN; engine: {:?}; classify drops: {}",
        report.core, report.dataplane.net.dropped
    );
    assert!(report.core.malformed > 0, "{:?}", report.core);
    assert!(report.dataplane.net.tcp_bad_checksum > 0);
    assert!(report.core.segments_received > MUTATIONS as u64 / 2);
}

/// RFC 7323 section 5.3: with timestamps in use, a segment whose TSval is
/// older than TS.Recent is not acceptable (PAWS): an ACK, nothing
/// delivered; a RST is exempt.
#[test]
fn old_timestamps_are_rejected_by_paws_but_not_for_a_rst() {
    let mut rig = Rig::new("paws", test_config());
    let mut peer = Peer::new(40091, 0xe000_0000);
    peer.offer = Offer {
        window_scale: Some(7),
        sack: true,
        timestamps: true,
    };
    let (log, _) = rig.connect(&mut peer);
    assert!(peer.timestamps);
    assert_delivers(&mut rig, &mut peer, &log, b"fresh");
    let snd_nxt = peer.rcv_nxt;
    let rcv_nxt = peer.snd_nxt;

    // At RCV.NXT, in the window, but older than TS.Recent.
    let stale_ts = peer.ts_clock.wrapping_sub(1000);
    let ts_recent = peer.ts_recent;
    for payload in [&b"replayed"[..], &b""[..]] {
        let frame = peer.segment_with(TcpControl::Psh, rcv_nxt, Some(snd_nxt), payload, |repr| {
            repr.timestamp = Some(smoltcp::wire::TcpTimestampRepr::new(stale_ts, ts_recent));
        });
        let out = rig.exchange(&[frame]);
        assert_one_ack(&Rig::segments_to(&out, peer.port), snd_nxt, rcv_nxt);
    }
    {
        let log = lock(&log);
        assert_eq!(log.stats.paws_rejected, 2, "{:?}", log.stats);
        assert_eq!(log.delivered(), 5);
    }
    assert_delivers(&mut rig, &mut peer, &log, b"still fresh");

    // A RST with an old timestamp, exactly at RCV.NXT, still resets.
    let rcv_nxt = peer.snd_nxt;
    let frame = peer.segment_with(TcpControl::Rst, rcv_nxt, None, b"", |repr| {
        repr.timestamp = Some(smoltcp::wire::TcpTimestampRepr::new(stale_ts, ts_recent));
    });
    let out = rig.exchange(&[frame]);
    assert_eq!(Rig::segments_to(&out, peer.port), vec![]);
    assert_eq!(lock(&log).end, Some(End::Reset));
    rig.finish();
}

/// A FIN that arrives out of order is only the peer's word on where its
/// stream ends; RFC 9293 section 3.10.7.4 processes segments in sequence
/// order, so once in-order data has moved RCV.NXT past that position the
/// queued FIN is old and is dropped, and the peer's FIN at the real end
/// of its data closes its half (CLOSE-WAIT, ACK = FIN + 1). With only
/// in-order data up to the FIN's position, the FIN takes effect there.
///
/// Regression: the receiver used to keep the first FIN position it saw
/// even after data went past it, and then ignored every later FIN, so
/// one forged in-window FIN made the connection deaf to the real close.
#[test]
fn an_out_of_order_fin_passed_by_data_does_not_swallow_the_real_fin() {
    let mut rig = Rig::new("ooofin", test_config());
    let mut peer = Peer::new(40101, 0xf000_0000);
    let (log, _) = rig.connect(&mut peer);
    assert_delivers(&mut rig, &mut peer, &log, b"abc");
    // A FIN 100 octets ahead: out of order, a duplicate ACK.
    let snd_nxt = fin_ahead(&mut rig, &mut peer, 100);
    // In-order data past that position (the real peer's).
    assert_delivers(&mut rig, &mut peer, &log, &[b'd'; 200]);
    assert!(!lock(&log).events.contains(&Event::PeerClosed));
    // The real FIN, at RCV.NXT.
    let fin_at = peer.snd_nxt;
    let out = rig.exchange(&[peer.segment(TcpControl::Fin, fin_at, Some(snd_nxt), b"")]);
    let segs = Rig::segments_to(&out, peer.port);
    let log = lock(&log);
    let closed = log.events.contains(&Event::PeerClosed);
    let acked = segs.iter().any(|s| s.ack == Some(fin_at.wrapping_add(1)));
    drop(log);
    rig.finish();
    assert!(
        closed && acked,
        "the FIN at RCV.NXT: PeerClosed {closed}, acknowledged {acked}: {segs:?}"
    );
}

/// Sends a FIN `ahead` octets past RCV.NXT and checks that it is only
/// answered by duplicate ACKs of RCV.NXT; returns SND.NXT.
fn fin_ahead(rig: &mut Rig, peer: &mut Peer, ahead: u32) -> u32 {
    let (snd_nxt, rcv_nxt) = (peer.rcv_nxt, peer.snd_nxt);
    let fin = peer.segment(
        TcpControl::Fin,
        rcv_nxt.wrapping_add(ahead),
        Some(snd_nxt),
        b"",
    );
    let out = rig.exchange(&[fin]);
    let segs = Rig::segments_to(&out, peer.port);
    assert!(segs.iter().all(|s| s.ack == Some(rcv_nxt)), "{segs:?}");
    snd_nxt
}

/// The control case of the test above: an out-of-order FIN, then
/// in-order data exactly up to it: the FIN takes effect there.
#[test]
fn an_out_of_order_fin_takes_effect_when_the_data_reaches_it() {
    let mut rig = Rig::new("ooofin2", test_config());
    let mut peer = Peer::new(40102, 0xf100_0000);
    let (log, _) = rig.connect(&mut peer);
    let fin_at = peer.snd_nxt.wrapping_add(10);
    fin_ahead(&mut rig, &mut peer, 10);
    let out = rig.exchange(&[peer.data(b"0123456789")]);
    let segs = Rig::segments_to(&out, peer.port);
    assert!(
        segs.iter().any(|s| s.ack == Some(fin_at.wrapping_add(1))),
        "data and FIN acknowledged: {segs:?}"
    );
    {
        let log = lock(&log);
        assert_eq!(log.stream(), b"0123456789");
        assert!(log.events.contains(&Event::PeerClosed));
        assert_eq!(log.state, Some(uwarp_stack::tcp::State::CloseWait));
    }
    rig.finish();
}

/// RFC 5961 section 7: a storm of blind in-window RSTs draws challenge
/// ACKs only up to the configured limit per second (100 by default), the
/// connection survives it, and the budget comes back a second later.
#[test]
fn a_blind_rst_storm_is_throttled_and_survived() {
    let mut rig = Rig::new("rststorm", test_config());
    let mut peer = Peer::new(40111, 0x1100_0000);
    let (log, _) = rig.connect(&mut peer);
    let snd_nxt = peer.rcv_nxt;
    let rcv_nxt = peer.snd_nxt;
    let limit = test_config().challenge_ack_limit as usize;
    // The core answers a receive burst once: the RSTs of one burst share
    // a challenge ACK. The budget covers the first 100 RSTs (two batches);
    // the other 400 get none.
    let mut acks_per_batch = Vec::new();
    for batch in 0..10u32 {
        let frames: Vec<Vec<u8>> = (0..50u32)
            .map(|i| {
                let seq = rcv_nxt.wrapping_add(1 + batch * 50 + i);
                peer.segment(TcpControl::Rst, seq, None, b"")
            })
            .collect();
        let out = rig.exchange(&frames);
        let acks = Rig::segments_to(&out, peer.port);
        for seg in &acks {
            assert!(seg.is_pure_ack(), "{seg:?}");
            assert_eq!((seg.seq, seg.ack), (snd_nxt, Some(rcv_nxt)));
        }
        acks_per_batch.push(acks.len());
    }
    let within = limit / 50;
    assert!(
        acks_per_batch[..within]
            .iter()
            .all(|&n| (1..=50).contains(&n)),
        "RSTs within the budget are answered: {acks_per_batch:?}"
    );
    assert!(
        acks_per_batch[within..].iter().all(|&n| n == 0),
        "500 RSTs within 30 ms: none answered past {limit}: {acks_per_batch:?}"
    );
    assert_eq!(lock(&log).stats.challenge_acks, limit as u64);
    assert_eq!(lock(&log).end, None);

    // A second later, the budget is back.
    rig.advance(
        Duration::from_millis(1100),
        Duration::from_millis(10),
        |_| {},
    );
    let out = rig.exchange(&[peer.segment(TcpControl::Rst, rcv_nxt.wrapping_add(9), None, b"")]);
    assert_one_ack(&Rig::segments_to(&out, peer.port), snd_nxt, rcv_nxt);
    assert_delivers(&mut rig, &mut peer, &log, b"survived the storm");
    rig.finish();
}
