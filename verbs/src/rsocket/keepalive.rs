//! `SO_KEEPALIVE` on stream rsockets, as rdma-core's rsocket service
//! thread (`tcp_svc`) does it: a socket with keepalive on sends its peer
//! an `RS_CTRL_KEEPALIVE` control message, which the peer drops, every
//! `TCP_KEEPIDLE` seconds (by default the kernel's
//! `net.ipv4.tcp_keepalive_time`, 7200 s if it cannot be read), while it
//! is connected and one of its control credits is free. The message keeps
//! the connection's idle timers elsewhere fed (NAT, firewalls), and makes
//! the transport notice a peer that vanished: its retransmissions run out
//! and the connection fails. `TCP_KEEPCNT` and `TCP_KEEPINTVL` mean
//! nothing on a reliable connection (accepted and ignored, as rdma-core).
//!
//! One thread for the process sends them all. The first socket to turn
//! keepalive on starts it (in a child of `fork`, again); it sleeps until
//! the next socket is due, and forgets a socket once the socket is closed
//! or its keepalive turned off.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::stream::{state, Rsocket};
use super::wire;

/// Where the kernel keeps its keepalive time, in seconds.
const KERNEL_KEEPALIVE_TIME: &str = "/proc/sys/net/ipv4/tcp_keepalive_time";
/// rdma-core's keepalive time when the kernel's cannot be read.
const DEFAULT_KEEPALIVE_SECS: u32 = 7200;

/// The keepalive time a socket starts with (`rs_set_keepalive`).
pub fn default_secs() -> u32 {
    std::fs::read_to_string(KERNEL_KEEPALIVE_TIME)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .filter(|&secs| secs > 0)
        .unwrap_or(DEFAULT_KEEPALIVE_SECS)
}

/// A socket the thread sends keepalives for, and when its next is due.
struct Watched {
    socket: Weak<Rsocket>,
    due: Instant,
}

/// The sockets with keepalive on, and the fork generation whose process
/// runs the thread that serves them.
#[derive(Default)]
struct Schedule {
    watched: Vec<Watched>,
    served_in: Option<u64>,
}

/// The process's keepalive service.
struct Service {
    schedule: Mutex<Schedule>,
    /// Rung when a socket is (re)scheduled.
    changed: Condvar,
}

fn service() -> &'static Service {
    static SERVICE: OnceLock<Service> = OnceLock::new();
    SERVICE.get_or_init(|| Service {
        schedule: Mutex::new(Schedule::default()),
        changed: Condvar::new(),
    })
}

fn lock(service: &Service) -> MutexGuard<'_, Schedule> {
    service.schedule.lock().unwrap_or_else(|e| e.into_inner())
}

impl Schedule {
    /// Where `socket` is watched, if it is.
    fn position(&self, socket: &Arc<Rsocket>) -> Option<usize> {
        let socket = Arc::as_ptr(socket);
        self.watched
            .iter()
            .position(|watched| watched.socket.as_ptr() == socket)
    }
}

/// Sends `socket`'s first keepalive `every` from now (again, if it was
/// scheduled: `TCP_KEEPIDLE` changed).
pub fn schedule(socket: &Arc<Rsocket>, every: Duration) {
    let service = service();
    let mut schedule = lock(service);
    let due = Instant::now() + every;
    match schedule.position(socket) {
        Some(at) => schedule.watched[at].due = due,
        None => schedule.watched.push(Watched {
            socket: Arc::downgrade(socket),
            due,
        }),
    }
    let generation = uwarp::fork_generation();
    if schedule.served_in != Some(generation) {
        // A thread that fails to start leaves keepalives unsent, as
        // rdma-core's does when its service thread cannot start; the
        // next socket to turn keepalive on tries again.
        if crate::provider::spawn("uwarp-rs-keepalive", move || serve(service)).is_ok() {
            schedule.served_in = Some(generation);
        }
    }
    service.changed.notify_one();
}

/// The thread: sends what is due, then sleeps until the next is (or a
/// socket is scheduled). The schedule's lock is not held while a socket
/// sends: no lock is ever taken inside another here, and the lock is
/// held only for the bookkeeping.
fn serve(service: &'static Service) {
    let mut schedule = lock(service);
    loop {
        let now = Instant::now();
        // Sockets gone are forgotten; those due are sent for below.
        schedule
            .watched
            .retain(|watched| watched.socket.strong_count() > 0);
        let due: Vec<Arc<Rsocket>> = schedule
            .watched
            .iter()
            .filter(|watched| watched.due <= now)
            .filter_map(|watched| watched.socket.upgrade())
            .collect();
        drop(schedule);
        let sent: Vec<_> = due
            .into_iter()
            .map(|socket| {
                let every = send(&socket);
                (socket, every)
            })
            .collect();
        schedule = lock(service);
        for (socket, every) in sent {
            match (schedule.position(&socket), every) {
                // Not moved by `schedule` meanwhile (a new TCP_KEEPIDLE).
                (Some(at), Some(every)) if schedule.watched[at].due <= now => {
                    schedule.watched[at].due = now + every;
                }
                // Off (unless turned on again meanwhile).
                (Some(at), None) if schedule.watched[at].due <= now => {
                    schedule.watched.swap_remove(at);
                }
                _ => {}
            }
        }
        schedule = match schedule.watched.iter().map(|watched| watched.due).min() {
            Some(next) => {
                let wait = next.saturating_duration_since(Instant::now());
                service
                    .changed
                    .wait_timeout(schedule, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => service
                .changed
                .wait(schedule)
                .unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// `tcp_svc_send_keepalive`: the keepalive message, if `socket` is
/// connected and a control credit is free. The socket's keepalive time,
/// or `None` once its keepalive is off.
fn send(socket: &Rsocket) -> Option<Duration> {
    let mut inner = socket.lock();
    let every = super::options::keepalive_every(&inner)?;
    let connected = inner.state & state::CONNECTED != 0;
    if let Some(conn) = inner.conn.as_mut().filter(|_| connected) {
        if conn.ctrl_seqno != conn.ctrl_max_seqno {
            conn.ctrl_seqno = conn.ctrl_seqno.wrapping_add(1);
            // A failed post fails the connection, which the socket's next
            // call reports; nothing to add here.
            let _ = conn.post_msg(wire::message(wire::OP_CTRL, wire::CTRL_KEEPALIVE));
        }
    }
    Some(every)
}
