//! The dataplane thread of the socket transport: it holds every established
//! connection (`conn.rs`), and in one poll loop runs each one's round:
//! work requests from the application's rings into the engines, stream
//! octets between the sockets and the engines, and completions and events
//! back to the application (the run-to-completion loop of the DPDK
//! transport, with a socket in place of a NIC queue). A connection an
//! application thread runs at that moment (`conn_cell.rs`) is left to it
//! for the round.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};

use super::conn::{Adopt, Conn, RX_CHUNK};
use super::conn_cell::{ConnCell, PollWatch};
use super::idle::{Idle, Interest};
use super::readiness::Readiness;
use crate::bell::Bell;

/// How long a device being dropped waits for the application to make
/// room in completion queues that are full; what they still cannot take
/// after that is discarded (each queue's `overflowed` count already says
/// it overran).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

/// Starts the dataplane thread.
///
/// The control thread rings `bell` after each connection it hands over:
/// a parked dataplane takes it at once.
pub(crate) fn spawn_dataplane(
    adopt: Receiver<Adopt>,
    bell: Arc<Bell>,
) -> io::Result<JoinHandle<()>> {
    let readiness = Readiness::new()?;
    readiness.watch(bell.as_fd())?;
    std::thread::Builder::new()
        .name("uwarp-dataplane".into())
        .spawn(move || run(adopt, bell, readiness))
}

fn run(adopt: Receiver<Adopt>, bell: Arc<Bell>, mut readiness: Readiness) {
    // Each connection, the dataplane thread's record of its
    // application's polls, and until when its last round left it quiet.
    let mut conns: Vec<(Arc<ConnCell>, PollWatch, Option<Instant>)> = Vec::new();
    let mut rx = vec![0u8; RX_CHUNK];
    let mut idle = Idle::default();
    // Once the device is closing: when to stop waiting for room in full
    // completion queues.
    let mut drain_deadline: Option<Instant> = None;
    let adopted = |new: Adopt, readiness: &Readiness| {
        let cell = ConnCell::share(Conn::new(new, readiness), &bell);
        (cell, PollWatch::default(), None)
    };
    loop {
        if conns.is_empty() {
            // Nothing to poll: sleep until a connection is handed over
            // (an idle device takes no CPU), or the device closes.
            match adopt.recv() {
                Ok(new) => conns.push(adopted(new, &readiness)),
                Err(_) => return,
            }
        }
        loop {
            match adopt.try_recv() {
                Ok(new) => conns.push(adopted(new, &readiness)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // The device is closing: reset what is still open.
                    if conns.is_empty() {
                        return;
                    }
                    if drain_deadline.is_none() {
                        drain_deadline = Some(Instant::now() + DRAIN_TIMEOUT);
                        conns.iter().for_each(|(cell, ..)| cell.lock().abort());
                    }
                    break;
                }
            }
        }
        let now = Instant::now();
        let give_up = drain_deadline.is_some_and(|deadline| now >= deadline);
        let mut busy = false;
        readiness.look();
        if readiness.is_readable(bell.as_fd()) {
            bell.silence();
        }
        let closing = drain_deadline.is_some();
        conns.retain_mut(|(cell, watch, quiet_until)| {
            // A connection its last round left quiet waits for news (the
            // application's polls among them) or its next timer: with
            // thousands open, a round visits the few that need one.
            let quiet = quiet_until.is_some_and(|until| now < until);
            if quiet && !closing && !cell.has_news(&readiness, watch) {
                return true;
            }
            // One an application thread runs now is its for this round.
            let Some(mut conn) = cell.try_lock() else {
                return true;
            };
            // The round that leaves the connection to the application
            // still takes the posts made before the application could
            // know it; later ones take only those a request asks for.
            let was_left = cell.is_left_to_application();
            let requested = cell.take_request();
            cell.take_stirred();
            let reads = cell.application_reads(watch, now);
            let share = (reads, requested || !was_left);
            let (active, finished) = conn.poll(now, &mut rx, &readiness, give_up, share);
            // One left to the application is weighed again when its
            // window ends, polls or not: they may have stopped.
            *quiet_until = match (active, reads) {
                (true, _) => None,
                (false, true) => conn.quiet_until().map(|due| due.min(watch.window_ends())),
                (false, false) => conn.quiet_until(),
            };
            if finished {
                conn.forget(&readiness);
            }
            // A round asked for meanwhile runs next turn, unparked. A
            // connection that stays the dataplane thread's needs no look
            // (and no fence): its posts are taken every round, and an
            // application thread that ran it meanwhile (posts it held
            // back, or a hand-over just then) left its request, which
            // `has_news` sees at the next round.
            if was_left || reads {
                busy |= cell.let_go(conn);
            }
            busy |= active;
            !finished
        });
        let set = Interest {
            fd: readiness.as_fd(),
            readable: true,
            writable: false,
        };
        // The park leaves out sockets waited on for nothing: reading,
        // the set waits for them all.
        let sockets = conns.iter().filter_map(|(cell, ..)| cell.interest());
        idle.after_round(busy, std::iter::once(set).chain(sockets));
    }
}
