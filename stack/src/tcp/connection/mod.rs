//! One TCP connection, sans-IO: the RFC 9293 state machine (section 3.3.2)
//! with its send and receive halves, options negotiated on the SYN (MSS,
//! RFC 7323 window scale and timestamps, RFC 2018 SACK-permitted), and the
//! calls a dataplane drives it with.
//!
//! - [`Connection::on_segment`] takes a parsed segment (see
//!   [`crate::wire::tcp::parse`]) and hands new data to a [`Consumer`].
//! - [`Connection::poll_transmit`] gives the next segment to send, until
//!   `None`; call it after every input and timer.
//! - [`Connection::poll_at`] is the next deadline; at or after it call
//!   [`Connection::on_timer`].
//! - [`Connection::poll_event`] reports establishment, the peer's FIN,
//!   resets, time-outs and a clean close.
//!
//! `input.rs` processes arriving segments (RFC 9293 section 3.10.7, RFC
//! 5961, RFC 7323 PAWS, RFC 5681/6582/6675 loss detection, RFC 2883
//! D-SACK both ways and the undo of spurious recoveries), `output.rs`
//! builds segments (RFC 5044 A.1 segmentation, Nagle, SACK options, the
//! RFC 5681 section 4.1 restart window), `probe.rs` sends tail loss
//! probes (RFC 8985 section 7), `frto.rs` finds spurious retransmission
//! timeouts (RFC 5682) and `timers.rs` handles expiries.

mod early_retransmit;
mod frto;
mod input;
mod output;
mod probe;
mod timers;

use crate::mem::BufferSlice;
use crate::record::FpduSink;
use crate::tcp::config::Config;
use crate::tcp::receive::receiver::{Consumer, Receiver, WindowPolicy};
use crate::tcp::recovery::ack_heuristic::AckHeuristic;
use crate::tcp::recovery::congestion::Congestion;
use crate::tcp::recovery::frto::Frto;
use crate::tcp::recovery::limited_transmit::LimitedTransmit;
use crate::tcp::recovery::reordering::Reordering;
use crate::tcp::recovery::spurious::Episode;
use crate::tcp::recovery::tail_probe::TailProbe;
use crate::tcp::send::flight::Flight;
use crate::tcp::send::memory::SendMemory;
use crate::tcp::send::queue::{QueueFull, SendQueue};
use crate::tcp::seq::Seq;
use crate::tcp::timers::rtt::RttEstimator;
use crate::tcp::timers::time::{Duration, Instant};
use crate::tcp::timers::timer::{TimerKind, Timers};
use smoltcp::wire::{Ipv4Address, TcpRepr};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An IPv4 address and a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address.
    pub addr: Ipv4Address,
    /// The port.
    pub port: u16,
}

impl Endpoint {
    /// The endpoint `addr:port`.
    pub const fn new(addr: Ipv4Address, port: u16) -> Self {
        Endpoint { addr, port }
    }
}

/// Connection states (RFC 9293 section 3.3.2); LISTEN is the
/// [`crate::tcp::listener::Listener`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No connection (never opened, reset, timed out, or past TIME-WAIT).
    Closed,
    /// Our SYN is out, waiting for the peer's.
    SynSent,
    /// Both SYNs seen, ours not yet acknowledged.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// We closed and our FIN is acknowledged; the peer may still send.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; our FIN is not yet acknowledged.
    Closing,
    /// The peer closed, then we did; our FIN is not yet acknowledged.
    LastAck,
    /// Both closed; waiting 2 MSL for stray segments.
    TimeWait,
}

/// Something the application or dataplane should know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The three-way handshake completed.
    Established,
    /// The peer's FIN arrived: all its data has arrived.
    PeerClosed,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keep-alive probes went unanswered, or the peer
    /// never closed while we waited in FIN-WAIT-2
    /// ([`crate::tcp::Config::fin_wait2_timeout`]).
    TimedOut,
    /// Both directions closed cleanly (TIME-WAIT or CLOSED follows).
    Closed,
}

/// Counters of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segments emitted.
    pub segments_sent: u64,
    /// Segments given to `on_segment`.
    pub segments_received: u64,
    /// Segments resent (timeout, fast retransmit, SACK recovery).
    pub retransmissions: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Retransmission timer expiries found spurious and undone, by F-RTO
    /// (RFC 5682), by the timestamp echo (RFC 3522), or by D-SACKs
    /// reporting every retransmission they caused (RFC 3708): what was
    /// sent before the timeout had arrived without the retransmission. A
    /// stall that outlasts the backed-off RTO too counts twice.
    pub spurious_timeouts: u64,
    /// Fast recovery episodes entered.
    pub fast_recoveries: u64,
    /// Fast recoveries early retransmit started (RFC 5827): a flight of
    /// two or three segments, one duplicate ACK fewer than its segments;
    /// also counted in `fast_recoveries`.
    pub early_retransmits: u64,
    /// Fast recoveries found spurious by D-SACK and undone: every
    /// retransmission they made arrived as a duplicate (RFC 3708).
    pub spurious_recoveries: u64,
    /// D-SACK blocks received (RFC 2883): the peer got some data twice.
    pub dsacks_received: u64,
    /// D-SACK blocks sent: data arrived twice.
    pub dsacks_sent: u64,
    /// Tail loss probes sent (RFC 8985 section 7), new data or a
    /// retransmission (then also counted in `retransmissions`).
    pub tail_loss_probes: u64,
    /// Records split across segments (RFC 5044 A.1 exceptions).
    pub records_split: u64,
    /// Data segments that started inside a record: after a split, or when
    /// the peer acknowledged part of a segment.
    pub unaligned_segments: u64,
    /// RSTs and SYNs answered with a challenge ACK (RFC 5961), within its
    /// rate limit. Several answered before the connection next transmits
    /// (one receive burst on a dataplane core) share one ACK.
    pub challenge_acks: u64,
    /// Segments failing the sequence or ACK checks.
    pub unacceptable: u64,
    /// Segments rejected by PAWS (RFC 7323 section 5).
    pub paws_rejected: u64,
    /// Received octets that were not new (or beyond the window).
    pub duplicate_octets: u64,
    /// Octets the consumer declined and the reassembly buffer could not
    /// hold; they count as not received.
    pub declined_dropped: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
}

/// Why a record or data could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The connection no longer sends (closed, or close() was called).
    Closed,
    /// Not enough room in the send queue.
    Full,
}

impl From<QueueFull> for SendError {
    fn from(_: QueueFull) -> Self {
        SendError::Full
    }
}

/// Options both SYNs agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Negotiated {
    peer_mss: u16,
    /// Window scaling in use: shifts for the peer's windows and ours.
    scaling: bool,
    snd_scale: u8,
    rcv_scale: u8,
    sack: bool,
    timestamps: bool,
}

/// RFC 9293 section 3.7.1: the MSS to assume without the option.
const DEFAULT_PEER_MSS: u16 = 536;
/// The smallest MSS the engine works with, whatever the peer says.
const MIN_MSS: u16 = 64;
/// Octets a timestamp option takes in every segment (with padding).
const TIMESTAMP_OPTION_LEN: usize = 12;

impl Negotiated {
    /// What our SYN offers, before the peer answers.
    fn offer(config: &Config) -> Self {
        Negotiated {
            peer_mss: DEFAULT_PEER_MSS,
            scaling: true,
            snd_scale: 0,
            rcv_scale: config.window_scale.min(14),
            sack: config.sack,
            timestamps: config.timestamps,
        }
    }

    /// What is in use once the peer's SYN arrived.
    fn agree(config: &Config, syn: &TcpRepr<'_>) -> Self {
        let scaling = syn.window_scale.is_some();
        Negotiated {
            peer_mss: syn.max_seg_size.unwrap_or(DEFAULT_PEER_MSS).max(MIN_MSS),
            scaling,
            snd_scale: if scaling {
                syn.window_scale.unwrap_or(0).min(14)
            } else {
                0
            },
            rcv_scale: if scaling {
                config.window_scale.min(14)
            } else {
                0
            },
            sack: config.sack && syn.sack_permitted,
            timestamps: config.timestamps && syn.timestamp.is_some(),
        }
    }
}

/// Releases a listener's half-open slot when the handshake ends either way.
#[derive(Debug)]
pub(crate) struct HalfOpenSlot(Arc<AtomicUsize>);

impl HalfOpenSlot {
    /// Takes a slot from `count`.
    pub(crate) fn take(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        HalfOpenSlot(Arc::clone(count))
    }
}

impl Drop for HalfOpenSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One TCP connection.
#[derive(Debug)]
pub struct Connection {
    config: Config,
    local: Endpoint,
    remote: Endpoint,
    state: State,
    opts: Negotiated,
    local_mss: u16,
    nagle: bool,
    /// The smallest FPDU payload framed by reference, if any.
    references_from: Option<usize>,

    iss: Seq,
    syn_acked: bool,
    syn_transmissions: u32,
    syn_sent_at: Instant,
    send: SendQueue,
    flight: Flight,
    /// Position of the next new data octet (SND.NXT without the FIN).
    snd_nxt: u64,
    fin_queued: bool,
    fin_sent: bool,
    fin_acked: bool,
    snd_wnd: u64,
    max_snd_wnd: u64,
    snd_wl1: Seq,
    snd_wl2: Seq,
    cc: Congestion,
    rtt: RttEstimator,
    /// When data or a FIN last went out, new or resent (RFC 5681 section
    /// 4.1 measures idle time from it).
    last_data_sent: Instant,
    /// SND.NXT when the congestion window was last full: ACKs below it
    /// answer a full window (RFC 9438 section 5.8).
    cwnd_full_until: u64,
    /// RFC 6582 `recover`, while in fast recovery.
    recover: Option<u64>,
    /// SND.NXT at the last retransmission timeout, until SND.UNA reaches
    /// it: RFC 6675 section 5.1's RecoveryPoint (RFC 6582's `recover`
    /// without SACK). Meanwhile the window grows in slow start and no
    /// fast recovery starts.
    timeout_recover: Option<u64>,
    /// Without SACK, tells duplicate ACKs before `timeout_recover` caused
    /// by a lost retransmission from those caused by needless ones (RFC
    /// 6582 section 4.1).
    ack_heuristic: AckHeuristic,
    /// The last fast recovery or timeout, until D-SACKs show it spurious
    /// or another congestion event replaces it.
    episode: Option<Episode>,
    /// The duplicate threshold learned from the path's reordering.
    reordering: Reordering,
    /// The retransmission timeout F-RTO has no verdict on yet.
    frto: Option<Frto>,
    /// The tail loss probe whose outcome is not known yet.
    tail_probe: Option<TailProbe>,
    /// The probe timer fired: the next poll sends a probe.
    send_tail_probe: bool,
    /// The RFC 6675 rescue retransmission of this recovery went out.
    rescued: bool,
    dupacks: u32,
    /// What limited transmit sent since SND.UNA last advanced (RFC 3042).
    limited_transmit: LimitedTransmit,
    retries: u32,
    /// The peer's window stayed below the next record: split it.
    force_split: bool,
    persist_probes: u32,

    irs: Seq,
    recv: Receiver,
    ts_recent: Option<(u32, Instant)>,
    last_ack_sent: Seq,
    unacked_segments: u32,

    send_syn: bool,
    send_ack: bool,
    /// Duplicate ACKs owed for out-of-order segments, one each (RFC 5681
    /// section 4.2), even when the caller polls once for several; those
    /// for an RCV.NXT that has since advanced are dropped.
    dup_acks_owed: u32,
    send_probe: bool,
    pending_rst: Option<(Seq, Option<Seq>)>,

    timers: Timers,
    keepalive_sent: u32,
    last_heard: Instant,
    challenge_window: (Instant, u32),
    events: VecDeque<Event>,
    half_open: Option<HalfOpenSlot>,
    stats: Stats,
}

impl Connection {
    fn new(config: Config, local: Endpoint, remote: Endpoint, iss: Seq, now: Instant) -> Self {
        let opts = Negotiated::offer(&config);
        let local_mss = config.mss.max(MIN_MSS);
        let smss = u32::from(local_mss.min(opts.peer_mss));
        Connection {
            send: SendQueue::new(config.send_buffer),
            recv: Receiver::new(config.recv_buffer, config.max_ooo_ranges),
            cc: Congestion::new(config.congestion, smss, config.initial_window),
            last_data_sent: now,
            cwnd_full_until: 0,
            rtt: RttEstimator::new(config.rto_initial, config.rto_min, config.rto_max),
            nagle: config.nagle,
            references_from: None,
            local,
            remote,
            state: State::Closed,
            opts,
            local_mss,
            iss,
            syn_acked: false,
            syn_transmissions: 0,
            syn_sent_at: now,
            flight: Flight::default(),
            snd_nxt: 0,
            fin_queued: false,
            fin_sent: false,
            fin_acked: false,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: Seq(0),
            snd_wl2: iss,
            recover: None,
            timeout_recover: None,
            ack_heuristic: AckHeuristic::default(),
            episode: None,
            reordering: Reordering::default(),
            frto: None,
            tail_probe: None,
            send_tail_probe: false,
            rescued: false,
            dupacks: 0,
            limited_transmit: LimitedTransmit::default(),
            retries: 0,
            force_split: false,
            persist_probes: 0,
            irs: Seq(0),
            ts_recent: None,
            last_ack_sent: Seq(0),
            unacked_segments: 0,
            send_syn: false,
            send_ack: false,
            dup_acks_owed: 0,
            send_probe: false,
            pending_rst: None,
            timers: Timers::default(),
            keepalive_sent: 0,
            last_heard: now,
            challenge_window: (now, 0),
            events: VecDeque::new(),
            half_open: None,
            stats: Stats::default(),
            config,
        }
    }

    /// Active open: a connection in SYN-SENT whose SYN carries `isn`
    /// (chosen by the caller, e.g. with [`crate::tcp::isn::IsnGenerator`]).
    pub fn connect(
        config: Config,
        local: Endpoint,
        remote: Endpoint,
        isn: Seq,
        now: Instant,
    ) -> Self {
        let mut conn = Connection::new(config, local, remote, isn, now);
        conn.state = State::SynSent;
        conn.send_syn = true;
        conn
    }

    /// Passive open: a connection in SYN-RECEIVED answering `syn`, a SYN
    /// the caller received from `remote` for `local`.
    pub fn accept(
        config: Config,
        local: Endpoint,
        remote: Endpoint,
        isn: Seq,
        now: Instant,
        syn: &TcpRepr<'_>,
    ) -> Self {
        let mut conn = Connection::new(config, local, remote, isn, now);
        conn.accept_syn(now, syn);
        conn.state = State::SynReceived;
        conn.send_syn = true;
        conn
    }

    pub(crate) fn hold_half_open_slot(&mut self, slot: HalfOpenSlot) {
        self.half_open = Some(slot);
    }

    /// The local endpoint.
    pub fn local(&self) -> Endpoint {
        self.local
    }

    /// The remote endpoint.
    pub fn remote(&self) -> Endpoint {
        self.remote
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The effective send MSS (RFC 1122 section 4.2.2.6, RFC 5044 A.1):
    /// the smaller of our MSS and the peer's, less the timestamp option.
    /// MPA sizes its FPDUs (MULPDU) from it.
    pub fn emss(&self) -> usize {
        let mss = usize::from(self.local_mss.min(self.opts.peer_mss));
        let options = if self.opts.timestamps {
            TIMESTAMP_OPTION_LEN
        } else {
            0
        };
        mss - options
    }

    /// Lowers our MSS after a path MTU change (never above the configured
    /// one). Records queued for the larger EMSS are then split, counted in
    /// [`Stats::records_split`].
    pub fn set_mss(&mut self, mss: u16) {
        self.local_mss = mss.clamp(MIN_MSS, self.config.mss.max(MIN_MSS));
        self.cc.set_smss(self.emss() as u32);
    }

    /// Gives the connection until `now + timeout` to end (TIME-WAIT, or
    /// closed): if it has not by then, it is reset and reports
    /// [`Event::TimedOut`], whatever its state. For an application that
    /// closed and will not wait on a peer that never finishes, even one
    /// that keeps its window closed so our FIN never leaves (FIN-WAIT-1
    /// answers every zero-window probe, so nothing else ends it): iWARP
    /// after a Terminate (RFC 5040 section 7.2). Like `SO_LINGER`'s
    /// timeout, without its blocking.
    pub fn set_linger(&mut self, now: Instant, timeout: Duration) {
        self.timers.set(TimerKind::Linger, now + timeout);
    }

    /// Turns Nagle's algorithm on or off (off is TCP_NODELAY, RFC 5044
    /// A.2).
    pub fn set_nagle(&mut self, on: bool) {
        self.nagle = on;
    }

    /// Sets this connection's FIN-WAIT-2 timeout (see
    /// [`Config::fin_wait2_timeout`](crate::tcp::Config::fin_wait2_timeout)),
    /// for an application that gives a peer less time to close its half
    /// than the host's other connections get: iWARP after its own close
    /// (a peer's iWARP closes as soon as it sees our FIN, and one that
    /// does not must not hold the queue pair; after a Terminate,
    /// [`set_linger`](Self::set_linger) bounds the whole close). Set in
    /// FIN-WAIT-2 already, it counts from now.
    pub fn set_fin_wait2_timeout(&mut self, now: Instant, timeout: Option<Duration>) {
        self.config.fin_wait2_timeout = timeout;
        if self.state == State::FinWait2 {
            match timeout {
                Some(timeout) => self.timers.set(TimerKind::FinWait2, now + timeout),
                None => self.timers.cancel(TimerKind::FinWait2),
            }
        }
    }

    /// Sets who decides the advertised receive window.
    pub fn set_window_policy(&mut self, policy: WindowPolicy) {
        self.recv.set_policy(policy);
        self.window_may_have_opened();
    }

    /// The smoothed RTT, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }

    /// The congestion window in octets.
    pub fn cwnd(&self) -> u32 {
        self.cc.cwnd()
    }

    /// The slow start threshold in octets.
    pub fn ssthresh(&self) -> u32 {
        self.cc.ssthresh()
    }

    /// The duplicate threshold: SACKed segments above a hole (or
    /// duplicate ACKs) that make it lost, 3 until reordering on the path
    /// showed more.
    pub fn reordering(&self) -> usize {
        self.reordering.threshold()
    }

    fn accepts_data(&self) -> bool {
        !self.fin_queued
            && matches!(
                self.state,
                State::SynSent | State::SynReceived | State::Established | State::CloseWait
            )
    }

    /// Room in the send queue.
    pub fn send_capacity(&self) -> usize {
        if self.accepts_data() {
            self.send.free()
        } else {
            0
        }
    }

    /// The send queue's memory, which the payloads of segments from
    /// [`poll_transmit`](Self::poll_transmit) point into: a transmit path
    /// that sends them in place keeps a clone for as long as its frames
    /// may be read.
    pub fn send_memory(&self) -> &Arc<SendMemory> {
        self.send.memory()
    }

    /// Whether the send queue holds a record with a run by reference
    /// ([`reserve_record_referencing`](Self::reserve_record_referencing)),
    /// so that its segments may still point into registered memory.
    pub fn holds_referenced_runs(&self) -> bool {
        self.send.holds_references()
    }

    /// Gives back the memory of the send queue and the reassembly buffer
    /// once the connection is in TIME-WAIT, for an application that reads
    /// nothing more (octets it left unread are dropped). In TIME-WAIT the
    /// peer has acknowledged our FIN, and with it everything we sent, and
    /// segment text is ignored (RFC 9293 section 3.10.7.4): for its 2 MSL
    /// the connection only answers with ACKs (a retransmitted FIN, a SYN,
    /// a segment out of the window) or ends on a RST, none of which needs
    /// either buffer. A host that opens and closes many connections so
    /// keeps no buffers for those in TIME-WAIT. Returns whether it did
    /// (not outside TIME-WAIT); [`send_memory`](Self::send_memory) is
    /// then a new, one-octet memory, and the old one goes once every
    /// frame pointing into it is gone.
    pub fn release_memory(&mut self) -> bool {
        if self.state != State::TimeWait || !self.send.free_memory() {
            return false;
        }
        self.recv.free_buffer();
        true
    }

    /// Octets queued and not yet acknowledged.
    pub fn send_queue_len(&self) -> usize {
        (self.send.end() - self.send.head()) as usize
    }

    /// Queues byte-stream data (cut into segments anywhere); returns the
    /// octets taken.
    pub fn send(&mut self, data: &[u8]) -> usize {
        if self.accepts_data() {
            self.send.push_bytes(data)
        } else {
            0
        }
    }

    /// Queues one record (an MPA FPDU): it starts a segment and is never
    /// split, except in the RFC 5044 A.1 cases.
    pub fn send_record(&mut self, record: &[u8]) -> Result<(), SendError> {
        if !self.accepts_data() {
            return Err(SendError::Closed);
        }
        Ok(self.send.push_record(record)?)
    }

    /// Room for the next record of exactly `len` octets, written in place
    /// in the send queue and queued by [`commit_record`](Self::commit_record)
    /// (see [`send_record`](Self::send_record)); `Full` when it does not
    /// fit now.
    pub fn reserve_record(&mut self, len: usize) -> Result<&mut [u8], SendError> {
        if !self.accepts_data() {
            return Err(SendError::Closed);
        }
        Ok(self.send.reserve_record(len)?)
    }

    /// Queues the record last reserved with
    /// [`reserve_record`](Self::reserve_record).
    pub fn commit_record(&mut self) {
        self.send.commit_record();
    }

    /// Lets MPA records hold payloads of at least `min` octets by
    /// reference in registered memory, read again whenever a segment
    /// carrying them is built (zero-copy transmit; see [`FpduSink`]);
    /// `None`, the default, frames every payload into the send queue.
    pub fn set_references_from(&mut self, min: Option<usize>) {
        self.references_from = min;
    }

    /// Room for a record of `head` octets, `payload` held by reference
    /// and `tail` octets, queued by [`commit_record`](Self::commit_record)
    /// (see [`reserve_record`](Self::reserve_record)).
    pub fn reserve_record_referencing(
        &mut self,
        head: usize,
        payload: BufferSlice,
        tail: usize,
    ) -> Result<(&mut [u8], &mut [u8]), SendError> {
        if !self.accepts_data() {
            return Err(SendError::Closed);
        }
        Ok(self.send.reserve_record_referencing(head, payload, tail)?)
    }

    /// The stream position up to which the peer acknowledged our data
    /// (SND.UNA as a position: 0 is the first octet after the SYN).
    pub fn send_acknowledged(&self) -> u64 {
        self.send.head()
    }

    /// The stream position after the last octet queued.
    pub fn send_queued_end(&self) -> u64 {
        self.send.end()
    }

    /// The oldest in-order data held in the reassembly buffer (data the
    /// consumer declined), with its stream position.
    pub fn received(&self) -> Option<(u64, &[u8])> {
        self.recv.readable()
    }

    /// Octets of in-order data held and not yet read.
    pub fn received_len(&self) -> usize {
        self.recv.ready()
    }

    /// Frees held data below stream position `pos` (read by the caller).
    pub fn release_received(&mut self, pos: u64) {
        self.recv.release(pos);
        self.window_may_have_opened();
    }

    /// Copies in-order held data into `buf` and frees it; returns the
    /// octets copied.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let mut copied = 0;
        while let Some((pos, data)) = self.recv.readable() {
            let n = data.len().min(buf.len() - copied);
            if n == 0 {
                break;
            }
            buf[copied..copied + n].copy_from_slice(&data[..n]);
            copied += n;
            self.recv.release(pos + n as u64);
        }
        self.window_may_have_opened();
        copied
    }

    /// Whether the peer's FIN arrived (no more data will come).
    pub fn peer_closed(&self) -> bool {
        self.recv.fin_received()
    }

    /// Closes our direction: a FIN follows the queued data.
    pub fn close(&mut self) {
        match self.state {
            State::SynSent => self.state = State::Closed,
            State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Resets the connection (RFC 9293 ABORT): a RST goes out if the peer
    /// knows of us, and the connection is closed.
    pub fn abort(&mut self) {
        self.reset(None);
    }

    /// Hands `seg`, received for this connection, to the engine; new data
    /// goes to `consumer`.
    pub fn on_segment<C: Consumer + ?Sized>(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        consumer: &mut C,
    ) {
        if seg.dst_port != self.local.port || seg.src_port != self.remote.port {
            return;
        }
        self.stats.segments_received += 1;
        match self.state {
            State::Closed => {}
            State::SynSent => self.on_syn_sent(now, seg, consumer),
            _ => self.on_synchronized(now, seg, consumer),
        }
    }

    /// The next deadline at which [`Connection::on_timer`] has work.
    pub fn poll_at(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Whether the connection is gone and may be dropped from the table.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed && self.pending_rst.is_none()
    }

    /// The sequence number of sender stream position `pos`.
    fn seq_of(&self, pos: u64) -> Seq {
        self.iss + 1 + pos as u32
    }

    /// SND.UNA as a stream position (the FIN counts one).
    fn una_seqpos(&self) -> u64 {
        self.send.head() + u64::from(self.fin_acked)
    }

    /// SND.NXT as a stream position (the FIN counts one).
    fn nxt_seqpos(&self) -> u64 {
        self.snd_nxt + u64::from(self.fin_sent)
    }

    /// FlightSize of RFC 5681.
    fn flight_size(&self) -> u32 {
        (self.nxt_seqpos() - self.una_seqpos()).min(u64::from(u32::MAX)) as u32
    }

    /// RCV.NXT.
    fn rcv_nxt(&self) -> Seq {
        self.irs + 1 + self.recv.next_position() as u32
    }

    /// A window update is due when the window opened by at least two
    /// segments or half the buffer (RFC 9293 section 3.8.6.2.2).
    fn window_may_have_opened(&mut self) {
        if !matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        ) {
            return;
        }
        let step = (2 * self.emss() as u64).min(self.config.recv_buffer as u64 / 2);
        if self.recv.window_opens_by(step.max(1)) {
            self.send_ack = true;
        }
    }

    /// Ends the connection with a RST if the peer knows of us, reporting
    /// `event` if any.
    fn reset(&mut self, event: Option<Event>) {
        if !matches!(self.state, State::Closed | State::SynSent | State::TimeWait) {
            self.pending_rst = Some((self.seq_of(self.nxt_seqpos()), None));
        }
        self.terminate(event);
    }

    /// Ends the connection, reporting `event` if any.
    fn terminate(&mut self, event: Option<Event>) {
        self.state = State::Closed;
        self.timers.clear();
        self.half_open = None;
        self.send_ack = false;
        self.dup_acks_owed = 0;
        self.send_syn = false;
        self.send_probe = false;
        self.send_tail_probe = false;
        self.events.extend(event);
    }
}

/// FPDUs are framed straight into the send queue, one record each.
impl FpduSink for Connection {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        self.reserve_record(len).ok()
    }

    fn commit(&mut self) {
        self.commit_record();
    }

    fn references_from(&self) -> Option<usize> {
        self.references_from
    }

    fn reserve_referencing(
        &mut self,
        head: usize,
        payload: BufferSlice,
        tail: usize,
    ) -> Option<(&mut [u8], &mut [u8])> {
        self.references_from?;
        self.reserve_record_referencing(head, payload, tail).ok()
    }
}
