//! [`TcpFlow`]: one connection with its application and route, as held by
//! the control core during the handshake and by a dataplane core after.
//!
//! Driving a flow is always the same three steps, whoever holds it: feed
//! it input (a segment or a timer), let the application act on the
//! events and queue data, and send every segment the engine has (RFC 9293
//! section 3.10's processing, the engine's `poll_transmit`).

use std::sync::Arc;

use crate::net::{FourTuple, FrameSink};
use smoltcp::wire::TcpRepr;
use uwarp_stack::tcp::{Connection, Event, Instant, State};

use super::app::{End, TcpApp};
use super::doorbell::{Doorbell, Rung};
use super::frame_memory::FrameMemory;
use super::route::Route;

/// What servicing the flows of one core counted: their transmissions,
/// and the buffers given back in TIME-WAIT.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// TCP segments handed to the transmit queue.
    pub segments_sent: u64,
    /// Segments lost because the transmit queue or the mempool was full
    /// (TCP recovers them as losses).
    pub segments_dropped: u64,
    /// Connections that gave their send queue and reassembly buffer back
    /// on reaching TIME-WAIT ([`Connection::release_memory`]).
    pub buffers_released: u64,
}

/// Where a flow stands after it was driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Open; its timers are next due at the given time, if any.
    Open(Option<Instant>),
    /// Closed: drop it from its table.
    Closed,
}

/// One connection, its application and its route.
pub struct TcpFlow<A> {
    conn: Box<Connection>,
    app: A,
    route: Route,
    /// The memory its frames may carry their payload from by reference.
    memory: FrameMemory,
    /// The end the engine reported, told to the application once it has
    /// had its last chance to read.
    end: Option<End>,
    ended: bool,
    /// The deadline this flow is queued at in its core's timer queue.
    pub scheduled: Option<Instant>,
    /// Whether it took in segments its core has not serviced it after.
    received: bool,
    /// Its doorbell, once on a dataplane core.
    doorbell: Option<Doorbell>,
}

impl<A: TcpApp> TcpFlow<A> {
    /// A flow for `conn`, run by `app`, sending along `route`.
    pub fn new(conn: Box<Connection>, app: A, route: Route) -> Self {
        TcpFlow {
            memory: FrameMemory::new(&conn),
            conn,
            app,
            route,
            end: None,
            ended: false,
            scheduled: None,
            received: false,
            doorbell: None,
        }
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application and the connection, for the control core to act on
    /// the application's decisions (accepting a connection, say).
    pub fn parts_mut(&mut self) -> (&mut A, &mut Connection) {
        (&mut self.app, &mut self.conn)
    }

    /// Whether the flow can leave the control core: the handshake is over
    /// and the application is done with its own set-up.
    pub fn ready_for_dataplane(&self) -> bool {
        self.is_synchronized() && self.app.ready_for_dataplane()
    }

    /// The flow arrived on a dataplane core whose rung doorbells are
    /// queued on `rung`.
    pub fn on_dataplane(&mut self, tuple: FourTuple, rung: &Arc<Rung>) {
        let doorbell = Doorbell::new(tuple, Arc::clone(rung));
        self.doorbell = Some(doorbell.clone());
        if !self.ended {
            self.app.on_dataplane(doorbell);
        }
    }

    /// Notes that the flow took in a segment; true when it is the first
    /// since the flow was last serviced for input (its core then queues
    /// it for one service after the receive burst).
    pub(crate) fn mark_received(&mut self) -> bool {
        !std::mem::replace(&mut self.received, true)
    }

    /// Notes that the core is servicing the flow for the segments it
    /// took in.
    pub(crate) fn received_serviced(&mut self) {
        self.received = false;
    }

    /// Whether the flow's doorbell rang since the flow was last serviced
    /// (a doorbell queue entry for a flow serviced since is stale).
    pub(crate) fn doorbell_armed(&self) -> bool {
        self.doorbell.as_ref().is_some_and(Doorbell::is_armed)
    }

    /// Hands a received segment to the engine (new data to the
    /// application). Work the application posted before the segment was
    /// taken in (its doorbell rang, and the core has not driven the flow
    /// since) goes to the application first: a receive posted before a
    /// Send arrives must be there for it, or the Send ends the stream
    /// with RFC 5041's "no buffer" error, however briefly the core had
    /// left the doorbell unanswered. That drive answers the doorbell: the
    /// burst's other segments do not drive again for it.
    pub fn on_segment(&mut self, now: Instant, segment: &TcpRepr<'_>) {
        if let Some(doorbell) = self
            .doorbell
            .as_ref()
            .filter(|d| !self.ended && d.is_pending())
        {
            doorbell.answered();
            self.app.drive(now, &mut self.conn);
        }
        self.conn.on_segment(now, segment, &mut self.app);
    }

    /// Runs the engine's timers that are due; returns whether any was
    /// (a timer queue's entry may be older than the connection's current
    /// deadline, which input moved later).
    pub fn on_timer(&mut self, now: Instant) -> bool {
        let due = self.conn.poll_at().is_some_and(|at| at <= now);
        if due {
            self.conn.on_timer(now);
        }
        due
    }

    /// When the engine's timers are next due, if any is armed.
    pub fn poll_at(&self) -> Option<Instant> {
        self.conn.poll_at()
    }

    /// Events to the application, its work, every segment out; then, if
    /// the connection ended, the end. The application drives once more
    /// before it hears the end: the segment that ended the connection may
    /// also have made held data readable.
    pub fn service(
        &mut self,
        now: Instant,
        sink: &mut dyn FrameSink,
        counters: &mut FlowCounters,
    ) -> Status {
        // This drive takes in whatever work rang the doorbell: a queue
        // entry left for it finds the doorbell answered and is skipped.
        if let Some(doorbell) = &self.doorbell {
            doorbell.answered();
        }
        self.deliver_events(now);
        if !self.ended {
            self.app.drive(now, &mut self.conn);
        }
        while let Some(segment) = self.conn.poll_transmit(now) {
            if self.route.transmit_from(&segment, &mut self.memory, sink) {
                counters.segments_sent += 1;
            } else {
                counters.segments_dropped += 1;
            }
        }
        self.memory.forget_unused_registered(&self.conn);
        self.deliver_events(now);
        if let Some(end) = self.end.take() {
            self.finish(end, counters);
        }
        if self.conn.is_closed() {
            self.finish(End::Aborted, counters);
            Status::Closed
        } else {
            Status::Open(self.conn.poll_at())
        }
    }

    /// Resets the connection (RFC 9293's ABORT: a RST when the peer knows
    /// of it), sends the RST and tells the application its end: for a
    /// host that stops with the connection open. Returns whether a
    /// segment went out (the peer knew of the connection, and the RST
    /// found room).
    pub fn reset(
        &mut self,
        now: Instant,
        sink: &mut dyn FrameSink,
        counters: &mut FlowCounters,
    ) -> bool {
        let sent = counters.segments_sent;
        self.conn.abort();
        self.service(now, sink, counters);
        counters.segments_sent > sent
    }

    /// Whether the handshake is over.
    fn is_synchronized(&self) -> bool {
        !matches!(self.conn.state(), State::SynSent | State::SynReceived)
    }

    fn deliver_events(&mut self, now: Instant) {
        while let Some(event) = self.conn.poll_event() {
            if self.ended {
                continue;
            }
            self.app.on_event(now, event, &mut self.conn);
            let end = match event {
                Event::Closed => End::Closed,
                Event::Reset => End::Reset,
                Event::TimedOut => End::TimedOut,
                Event::Established | Event::PeerClosed => continue,
            };
            self.end.get_or_insert(end);
        }
    }

    /// Tells the application the end, once; then, the application having
    /// read everything, a connection in TIME-WAIT gives its buffers back
    /// for the 2 MSL it still lingers in the table.
    fn finish(&mut self, end: End, counters: &mut FlowCounters) {
        if !self.ended {
            self.ended = true;
            self.app.on_end(end, self.conn.stats());
        }
        if self.memory.send_ring().is_some() && self.conn.release_memory() {
            // Frames still pointing into the old memory keep it alive.
            self.memory.release_send_ring();
            counters.buffers_released += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extbuf::ExternalRegion;
    use crate::net::ipv4::HEADERS_LEN;
    use crate::net::{InterfaceAddress, Piece};
    use smoltcp::wire::{
        EthernetAddress, EthernetFrame, Ipv4Address, Ipv4Packet, TcpControl, TcpPacket,
    };
    use uwarp_stack::mem::{BufferSlice, MemoryBuffer};
    use uwarp_stack::tcp::{parse, Config, Consumer, Disposition, Endpoint, Seq, State, Stats};

    /// Takes in-order data in place and reads the rest at `drive`, like
    /// uwarp-perf's source once it sent everything; remembers what it had
    /// read when it heard the end.
    #[derive(Default)]
    struct Reader {
        read: u64,
        read_at_end: Option<u64>,
    }

    impl Consumer for Reader {
        fn on_data(&mut self, pos: u64, data: &[u8], in_order: bool) -> Disposition {
            if in_order && pos == self.read {
                self.read += data.len() as u64;
                Disposition::Consumed
            } else {
                Disposition::Keep
            }
        }

        fn on_left_edge(&mut self, _: u64) {}
    }

    impl TcpApp for Reader {
        fn drive(&mut self, _: Instant, conn: &mut Connection) {
            while let Some((pos, data)) = conn.received() {
                let end = pos + data.len() as u64;
                self.read = self.read.max(end);
                conn.release_received(end);
            }
            // Closes first, so the peer's FIN ends the connection.
            conn.close();
        }

        fn on_end(&mut self, _: End, _: &Stats) {
            self.read_at_end = Some(self.read);
        }
    }

    /// Frames as a vector, for the test to deliver in any order.
    #[derive(Default)]
    struct Frames(Vec<Vec<u8>>);

    impl FrameSink for Frames {
        fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
            let mut frame = vec![0; len];
            fill(&mut frame);
            self.0.push(frame);
            true
        }
    }

    /// A device that reads payloads from `registered` by reference, as a
    /// memory link does: each such frame is gathered and its checksum
    /// filled in, as the receiving end would see it.
    struct ReferencingFrames {
        frames: Frames,
        registered: Arc<MemoryBuffer>,
        /// The places in `registered` frames were sent from.
        referenced: Vec<std::ops::Range<usize>>,
    }

    impl FrameSink for ReferencingFrames {
        fn send_frame(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
            self.frames.send_frame(len, fill)
        }

        fn sends_by_reference(&self) -> bool {
            true
        }

        fn send_tcp_frame_referencing(
            &mut self,
            headers_len: usize,
            _region: &ExternalRegion,
            range: std::ops::Range<usize>,
            trailer_len: usize,
            fill: &mut dyn FnMut(Piece, &mut [u8]),
        ) -> Option<bool> {
            let mut frame = vec![0; headers_len];
            fill(Piece::Head, &mut frame);
            let mut run = vec![0; range.len()];
            self.registered.read_at(range.start, &mut run).unwrap();
            frame.extend_from_slice(&run);
            let mut trailer = vec![0; trailer_len];
            fill(Piece::Trailer, &mut trailer);
            frame.extend_from_slice(&trailer);
            let (src, dst, _) = tcp_of(&frame);
            let mut tcp = TcpPacket::new_unchecked(&mut frame[HEADERS_LEN..]);
            tcp.fill_checksum(&src.into(), &dst.into());
            self.frames.0.push(frame);
            self.referenced.push(range);
            Some(true)
        }
    }

    /// The TCP segment of an Ethernet frame the route wrote.
    fn tcp_of(frame: &[u8]) -> (Ipv4Address, Ipv4Address, Vec<u8>) {
        let ip =
            Ipv4Packet::new_checked(EthernetFrame::new_checked(frame).unwrap().payload()).unwrap();
        (ip.src_addr(), ip.dst_addr(), ip.payload().to_vec())
    }

    /// A flow run by `app` that accepted the connection of `peer`, a bare
    /// engine, with the handshake's SYN-ACK delivered to the peer.
    struct Wire<A> {
        flow: TcpFlow<A>,
        peer: Connection,
        frames: Frames,
        counters: FlowCounters,
        now: Instant,
    }

    const NEAR: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
    const FAR: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

    impl<A: TcpApp> Wire<A> {
        fn accept(app: A) -> Self {
            let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
            let from = InterfaceAddress {
                mac,
                ip: NEAR,
                prefix_len: 24,
                gateway: None,
                vlan: None,
            };
            let (near, far) = (Endpoint::new(NEAR, 40000), Endpoint::new(FAR, 5000));
            let now = Instant::from_micros(0);
            let mut peer = Connection::connect(Config::default(), far, near, Seq(7), now);
            let syn = peer.poll_transmit(now).unwrap().to_bytes();
            let conn = Connection::accept(
                Config::default(),
                near,
                far,
                Seq(1000),
                now,
                &parse(FAR, NEAR, &syn).unwrap(),
            );
            let mut wire = Wire {
                flow: TcpFlow::new(Box::new(conn), app, Route::new(&from, mac, FAR)),
                peer,
                frames: Frames::default(),
                counters: FlowCounters::default(),
                now,
            };
            wire.service();
            wire
        }

        /// Services the flow and hands what it sent to the peer.
        fn service(&mut self) {
            self.flow
                .service(self.now, &mut self.frames, &mut self.counters);
            let mut sink = uwarp_stack::tcp::ByteStream;
            for frame in self.frames.0.drain(..) {
                let (src, dst, tcp) = tcp_of(&frame);
                let segment = parse(src, dst, &tcp).unwrap();
                self.peer.on_segment(self.now, &segment, &mut sink);
            }
        }

        /// Every segment the peer has to send.
        fn peer_segments(&mut self) -> Vec<Vec<u8>> {
            let mut segments = Vec::new();
            while let Some(segment) = self.peer.poll_transmit(self.now) {
                segments.push(segment.to_bytes());
            }
            segments
        }

        /// One segment from the peer into the flow, then a service.
        fn deliver(&mut self, segment: &[u8]) {
            self.flow
                .on_segment(self.now, &parse(FAR, NEAR, segment).unwrap());
            self.service();
        }
    }

    #[test]
    fn held_data_made_readable_by_the_last_segment_is_read_before_the_end() {
        let mut wire = Wire::accept(Reader::default());
        // The peer sends 3000 octets and closes.
        assert_eq!(wire.peer.send(&[9; 3000]), 3000);
        wire.peer.close();
        let mut segments = wire.peer_segments();
        assert!(segments.len() >= 3, "several data segments and a FIN");
        // The ACK of the handshake first, then everything but the first
        // data segment (held out of order), then the first: it makes all
        // the held data readable and brings the FIN in order at once.
        let first_data = segments.remove(1);
        segments.push(first_data);
        for segment in &segments {
            wire.deliver(segment);
            for answer in wire.peer_segments() {
                wire.deliver(&answer);
            }
        }
        assert_eq!(wire.flow.app().read_at_end, Some(3000));
    }

    /// The flow closes first, so it ends in TIME-WAIT: there it gives its
    /// buffers back (counted), and still answers the peer's repeated FIN
    /// with an ACK, now copied into its frame.
    #[test]
    fn a_flow_in_time_wait_gives_its_buffers_back_and_still_answers_a_fin() {
        let mut wire = Wire::accept(Reader::default());
        for ack in wire.peer_segments() {
            wire.deliver(&ack);
        }
        // The reader closed once established; the peer has its FIN.
        assert_eq!(wire.flow.conn.state(), State::FinWait1);
        wire.peer.close();
        let mut fin = None;
        for segment in wire.peer_segments() {
            wire.deliver(&segment);
            fin = Some(segment);
        }
        let fin = fin.expect("the peer's FIN");
        assert_eq!(wire.flow.conn.state(), State::TimeWait);
        assert_eq!(wire.counters.buffers_released, 1);
        assert!(wire.flow.memory.send_ring().is_none());
        assert_eq!(wire.flow.conn.send_memory().len(), 1);

        let fin = parse(FAR, NEAR, &fin).unwrap();
        wire.flow.on_segment(wire.now, &fin);
        let mut frames = Frames::default();
        wire.flow.service(wire.now, &mut frames, &mut wire.counters);
        assert_eq!(frames.0.len(), 1, "one ACK for the repeated FIN");
        let (src, dst, tcp) = tcp_of(&frames.0[0]);
        let ack = parse(src, dst, &tcp).unwrap();
        let fin_end = Seq::from(fin.seq_number) + fin.payload.len() as u32 + 1;
        assert_eq!(ack.ack_number.map(Seq::from), Some(fin_end));
        assert!(ack.payload.is_empty() && ack.control == TcpControl::None);
        assert_eq!(wire.counters.buffers_released, 1, "counted once");
    }

    /// Queues one record, `head`, a run held by reference, `tail`, once
    /// it is given the run.
    struct ZeroCopySender {
        head: &'static [u8],
        run: Option<BufferSlice>,
        tail: &'static [u8],
    }

    impl Consumer for ZeroCopySender {
        fn on_data(&mut self, _: u64, _: &[u8], _: bool) -> Disposition {
            Disposition::Consumed
        }

        fn on_left_edge(&mut self, _: u64) {}
    }

    impl TcpApp for ZeroCopySender {
        fn drive(&mut self, _: Instant, conn: &mut Connection) {
            if let Some(run) = self.run.take() {
                let (head, tail) = conn
                    .reserve_record_referencing(self.head.len(), run, self.tail.len())
                    .unwrap();
                head.copy_from_slice(self.head);
                tail.copy_from_slice(self.tail);
                conn.commit_record();
            }
        }

        fn on_end(&mut self, _: End, _: &Stats) {}
    }

    /// 1000 octets of a pattern at offset 100 of `registered`.
    const RUN: std::ops::Range<usize> = 100..1100;

    /// An established flow that, serviced through the returned sink,
    /// sends one record of `head`, the octets at [`RUN`] of `registered`
    /// (written here) by reference, and `tail`; and those octets.
    fn zero_copy_wire(
        registered: &Arc<MemoryBuffer>,
        head: &'static [u8],
        tail: &'static [u8],
    ) -> (Wire<ZeroCopySender>, ReferencingFrames, Vec<u8>) {
        let data: Vec<u8> = RUN.map(|i| (i * 7 + 3) as u8).collect();
        registered.write_at(RUN.start, &data).unwrap();
        let run = BufferSlice::new(Arc::clone(registered), RUN.start, RUN.len()).unwrap();
        let app = ZeroCopySender {
            head,
            run: None,
            tail,
        };
        let mut wire = Wire::accept(app);
        for ack in wire.peer_segments() {
            wire.deliver(&ack);
        }
        wire.flow.app.run = Some(run);
        let sink = ReferencingFrames {
            frames: Frames::default(),
            registered: Arc::clone(registered),
            referenced: Vec::new(),
        };
        (wire, sink, data)
    }

    /// A run held by reference goes out from the application's memory,
    /// the record's other octets around it, and the flow keeps that
    /// memory alive only until TCP has the run acknowledged.
    #[test]
    fn a_run_in_registered_memory_is_sent_from_there_and_let_go_once_acknowledged() {
        let registered = Arc::new(MemoryBuffer::new(4096));
        let (mut wire, mut sink, data) = zero_copy_wire(&registered, b"HEAD", b"TAIL!!");
        wire.flow.service(wire.now, &mut sink, &mut wire.counters);
        assert_eq!(sink.referenced, vec![RUN]);
        drop(sink.registered);
        // Ours, the queued record's, and the flow's region's (its cache
        // entry and the region's own holder).
        assert_eq!(Arc::strong_count(&registered), 4);
        wire.frames = sink.frames;
        wire.service();
        let (_, received) = wire.peer.received().expect("the record arrived");
        assert_eq!(&received[..4], b"HEAD");
        assert_eq!(&received[4..1004], &data[..]);
        assert_eq!(&received[1004..], b"TAIL!!");
        // The peer's (delayed) ACK releases the record, and the flow its
        // region.
        wire.now = wire.now + uwarp_stack::tcp::Duration::from_millis(500);
        wire.peer.on_timer(wire.now);
        for ack in wire.peer_segments() {
            wire.deliver(&ack);
        }
        assert_eq!(Arc::strong_count(&registered), 1, "nothing holds it now");
    }

    /// A segment that is nothing but a run is copied: as headers chained
    /// to the run alone it would be read in place by a memory link's
    /// receiver.
    #[test]
    fn a_segment_of_nothing_but_a_run_is_copied() {
        let registered = Arc::new(MemoryBuffer::new(4096));
        let (mut wire, mut sink, data) = zero_copy_wire(&registered, b"", b"");
        wire.flow.service(wire.now, &mut sink, &mut wire.counters);
        assert!(sink.referenced.is_empty(), "{:?}", sink.referenced);
        wire.frames = sink.frames;
        wire.service();
        let (_, received) = wire.peer.received().expect("the record arrived");
        assert_eq!(received, &data[..]);
    }

    /// Takes data only into room its application made ready and its
    /// drive took in, as a stream takes a Send only into a receive its
    /// drive took from the queue pair.
    #[derive(Default)]
    struct Receiver {
        /// The application posted a receive and rang the doorbell.
        posted: Arc<std::sync::atomic::AtomicBool>,
        doorbell: Option<Doorbell>,
        taken_in: bool,
        accepted: usize,
        refused: usize,
    }

    impl Consumer for Receiver {
        fn on_data(&mut self, _pos: u64, data: &[u8], _in_order: bool) -> Disposition {
            if self.taken_in {
                self.accepted += data.len();
            } else {
                self.refused += data.len();
            }
            Disposition::Consumed
        }

        fn on_left_edge(&mut self, _: u64) {}
    }

    impl TcpApp for Receiver {
        fn drive(&mut self, _: Instant, _: &mut Connection) {
            self.taken_in |= self.posted.load(std::sync::atomic::Ordering::Acquire);
        }

        fn on_dataplane(&mut self, doorbell: Doorbell) {
            self.doorbell = Some(doorbell);
        }

        fn on_end(&mut self, _: End, _: &Stats) {}
    }

    #[test]
    fn work_posted_before_a_segment_arrives_is_taken_in_before_it() {
        let mut wire = Wire::accept(Receiver::default());
        for ack in wire.peer_segments() {
            wire.deliver(&ack);
        }
        let tuple = FourTuple {
            local_ip: NEAR,
            local_port: 40000,
            remote_ip: FAR,
            remote_port: 5000,
        };
        let rung = Arc::new(Rung::new());
        wire.flow.on_dataplane(tuple, &rung);
        // The application posts and rings; the core has not answered the
        // doorbell when the peer's data arrives (it receives before it
        // drains its doorbell queue).
        let app = wire.flow.app();
        app.posted.store(true, std::sync::atomic::Ordering::Release);
        app.doorbell.as_ref().unwrap().ring();
        assert_eq!(wire.peer.send(&[7; 100]), 100);
        for segment in wire.peer_segments() {
            wire.deliver(&segment);
        }
        assert_eq!(
            (wire.flow.app().accepted, wire.flow.app().refused),
            (100, 0)
        );
    }
}
