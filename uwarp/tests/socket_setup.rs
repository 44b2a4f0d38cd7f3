//! The socket transport sets new connections up as fast with hundreds of
//! idle connections open as with none. Its dataplane thread reads only
//! the sockets its epoll set reports readable (it read every socket each
//! round, so the hand-over of each new connection waited for as many
//! empty reads as connections were open), and its control thread sleeps
//! on its sockets and on a bell its commands ring (it napped between
//! polls).

use std::time::{Duration, Instant};

use uwarp::*;
use uwarp_testing::pair::Devices;

/// Connections timed, each time.
const TIMED: usize = 40;
/// Idle connections opened between the two timings (beside those the
/// first timing left open).
const IDLE: usize = 400;
/// How much slower the second timing may be: before the change it was
/// 6.5 times slower here (each round read every one of 1,100 sockets).
const MOST_SLOWDOWN: f64 = 4.0;

/// `count` queue pairs of `device`, on a protection domain and a
/// completion queue of their own.
fn queue_pairs(device: &Device, count: usize) -> Vec<QueuePair> {
    let cq = device.create_cq(16);
    let pd = device.alloc_pd().unwrap();
    (0..count)
        .map(|_| device.create_qp(&pd, QpInit::new(&cq)))
        .collect()
}

/// Sets up `count` connections from `client` to `server`'s `listener`,
/// one after another, and returns how long that took and their queue
/// pairs (which keep the connections open).
fn set_up(devices: &Devices, listener: &Listener, count: usize) -> (Duration, Vec<QueuePair>) {
    let addr = listener.local_addr();
    let servers = queue_pairs(&devices.server, count);
    let clients = queue_pairs(&devices.client, count);
    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for qp in &servers {
                let request = listener.get_request(Duration::from_secs(10)).unwrap();
                request.accept(qp, LocalParams::default()).unwrap();
            }
        });
        for qp in &clients {
            devices
                .client
                .connect(addr, qp, ConnectParams::default())
                .unwrap();
        }
    });
    let took = started.elapsed();
    (took, servers.into_iter().chain(clients).collect())
}

/// The quickest of three batches of [`TIMED`] setups (the least
/// disturbed by the rest of the machine), keeping their connections open.
fn quickest_batch(devices: &Devices, listener: &Listener, open: &mut Vec<QueuePair>) -> Duration {
    (0..3)
        .map(|_| {
            let (took, qps) = set_up(devices, listener, TIMED);
            open.extend(qps);
            took
        })
        .min()
        .unwrap()
}

#[test]
fn idle_connections_do_not_slow_the_setup_of_new_ones() {
    let devices = Devices::sockets().unwrap();
    let listener = devices.server.listen(devices.listen).unwrap();
    // Warm up (threads, allocations), then time a few with few open.
    let (_, warm) = set_up(&devices, &listener, TIMED);
    drop(warm);
    let mut open = Vec::new();
    let few = quickest_batch(&devices, &listener, &mut open);
    let (_, idle) = set_up(&devices, &listener, IDLE);
    open.extend(idle);
    let many = quickest_batch(&devices, &listener, &mut open);
    let slowdown = many.as_secs_f64() / few.as_secs_f64();
    eprintln!(
        "{TIMED} setups: {few:?} with few connections open, {many:?} among {} ({slowdown:.2}x)",
        open.len() / 2
    );
    assert!(
        slowdown < MOST_SLOWDOWN,
        "{TIMED} setups took {few:?} with few connections open and {many:?} among {}",
        open.len() / 2
    );
}
