//! The fuzz oracles of `uwarp_verbs::check`, which the cargo-fuzz targets
//! in `verbs/fuzz/` call, run as ordinary tests over hand-written seeds
//! (one per behaviour each oracle knows: valid and invalid requests,
//! numeric and refused addresses, accepted and rejected connections) and,
//! for the oracles that need no connection, deterministic mutations of
//! them. `write_seed_corpus` writes the seeds for cargo fuzz.
//!
//! A crash found by `cargo fuzz` replays here as a test calling the same
//! oracle on its input (see `verbs/fuzz/README.md`).

use std::sync::atomic::{AtomicBool, Ordering};

use uwarp_verbs::check;

/// `IBV_WR_*` and `IBV_SEND_*` values the seeds use.
const SEND: u8 = 2;
const WRITE: u8 = 0;
const READ: u8 = 4;
const INLINE: u8 = 8;
const SIGNALED: u8 = 2;

/// A `getaddrinfo` input: hints' flags and family octet, which of node
/// (1), service (2) and hints (4) are NULL, then node and service.
fn addrinfo(flags: u32, family: u8, nulls: u8, node: &str, service: &str) -> Vec<u8> {
    let mut input = flags.to_le_bytes().to_vec();
    input.extend([family, nulls, 0, 0, 0]);
    input.extend(node.as_bytes());
    input.push(0);
    input.extend(service.as_bytes());
    input
}

fn getaddrinfo_seeds() -> Vec<Vec<u8>> {
    vec![
        addrinfo(0, 0, 0, "127.0.0.1", "7471"),
        addrinfo(0, 1, 2, "10.1.2.3", ""),
        addrinfo(0, 2, 0, "::1", "80"),
        addrinfo(0, 0, 0, "fe80::1%1", "65535"),
        addrinfo(0, 1, 0, "::ffff:1.2.3.4", "1"),
        addrinfo(1, 0, 1, "", "0"),
        addrinfo(1, 2, 5, "", "4791"),
        addrinfo(0, 0, 0, "192.168.0.1", "http"),
        addrinfo(0, 0, 0, "localhost", "80"),
        addrinfo(0, 27, 0, "127.0.0.1", "80"),
        // Regression (found by fuzz-ci.sh): a passive entry for service 0
        // whose hints carry an IPv6 destination took the destination's
        // family for the IPv4 address it listens on.
        vec![0x01, 0x00, 0x00, 0xd2, 0x00, 0x31, 0x0a, 0x00, 0xe7, 0x0a],
    ]
}

/// A `work_requests` element: kind, offset, length octet, lkey.
fn element(kind: u8, offset: u16, length: u8) -> Vec<u8> {
    let mut octets = vec![kind];
    octets.extend(offset.to_le_bytes());
    octets.push(length);
    octets.extend([0; 4]);
    octets
}

/// A `work_requests` request: opcode, flags, `num_sge`, list NULL or not,
/// remote address, rkey, invalidate rkey, then its elements.
fn request(opcode: u8, flags: u8, num_sge: u8, elements: &[Vec<u8>]) -> Vec<u8> {
    let mut octets = vec![opcode, flags, num_sge, 0];
    octets.extend([0; 16]);
    octets.extend(elements.concat());
    octets
}

/// A `work_requests` input: settings, elements asked for, then the chain.
fn chain(settings: u8, sges: (u8, u8), requests: &[Vec<u8>]) -> Vec<u8> {
    let mut input = vec![settings, sges.0, sges.1, requests.len() as u8];
    input.extend(requests.concat());
    input
}

fn work_requests_seeds() -> Vec<Vec<u8>> {
    let registered = element(0, 64, 20);
    let inline = element(0, 0, 40);
    vec![
        chain(
            0,
            (2, 2),
            &[request(
                SEND,
                SIGNALED,
                1,
                std::slice::from_ref(&registered),
            )],
        ),
        chain(
            0,
            (4, 1),
            &[
                request(WRITE, INLINE, 2, &[inline.clone(), inline.clone()]),
                request(READ, 0, 1, &[element(2, 0, 10)]),
                request(
                    9,
                    INLINE,
                    3,
                    &[inline.clone(), inline.clone(), inline.clone()],
                ),
            ],
        ),
        chain(
            0,
            (16, 16),
            &[request(
                READ,
                0,
                2,
                &[registered.clone(), registered.clone()],
            )],
        ),
        chain(
            0,
            (1, 1),
            &[request(SEND, INLINE, 1, &[element(0, 0, 0xff)])],
        ),
        chain(0, (1, 1), &[request(3, 0, 0, &[])]),
        chain(
            1,
            (1, 3),
            &[
                request(
                    0,
                    0,
                    3,
                    &[registered.clone(), element(1, 9, 1), element(3, 0, 0xfe)],
                ),
                request(0, 0, 0x80, &[]),
            ],
        ),
        chain(
            1 | 4 | 8,
            (1, 2),
            &[
                request(0, 0, 2, &[registered.clone(), registered.clone()]),
                request(
                    0,
                    0,
                    3,
                    &[registered.clone(), registered.clone(), registered],
                ),
            ],
        ),
        chain(1 | 4, (1, 2), &[request(0, 0, 0, &[])]),
        chain(0, (17, 1), &[]),
    ]
}

/// A `private_data` input: settings, then the connection's and the
/// reply's private data (length / 2 with bit 7 for NULL, the octets, IRD
/// and ORD).
fn connection(settings: u8, connect: (u8, u8), reply: (u8, u8)) -> Vec<u8> {
    let mut input = vec![settings];
    for (head, ird_ord) in [connect, reply] {
        input.push(head);
        input.extend((0..(head & 0x7f) * 2).map(|i| i ^ 0x5a));
        input.extend([ird_ord, ird_ord]);
    }
    input
}

fn private_data_seeds() -> Vec<Vec<u8>> {
    vec![
        connection(0, (5, 1), (8, 1)),
        connection(1, (10, 16), (0, 16)),
        connection(1, (0x7f, 0), (0x7f, 0)),
        connection(0, (0x83, 4), (0x90, 4)),
        connection(2, (3, 1), (0, 1)),
    ]
}

/// xorshift64*: a fixed, dependency-free sequence of mutations.
struct Mutator(u64);

impl Mutator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `seed` with one change: an octet overwritten, a bit flipped, cut
    /// short, or extended.
    fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut input = seed.to_vec();
        let at = (self.next() as usize) % input.len().max(1);
        match self.next() % 4 {
            0 if !input.is_empty() => input[at] = self.next() as u8,
            1 if !input.is_empty() => input[at] ^= 1 << (self.next() % 8),
            2 => input.truncate(at),
            _ => input.extend((0..self.next() % 16).map(|_| self.next() as u8)),
        }
        input
    }
}

/// Every seed, then `per_seed` mutations of each, through `oracle`.
fn run(seeds: &[Vec<u8>], per_seed: usize, oracle: fn(&[u8])) {
    let mut mutator = Mutator(0x9e37_79b9_7f4a_7c15);
    for seed in seeds {
        oracle(seed);
        for _ in 0..per_seed {
            oracle(&mutator.mutate(seed));
        }
    }
}

#[test]
fn getaddrinfo_seeds_and_mutations() {
    run(&getaddrinfo_seeds(), 200, check::getaddrinfo);
}

#[test]
fn work_requests_seeds_and_mutations() {
    run(&work_requests_seeds(), 300, check::work_requests);
}

#[test]
fn private_data_seeds_and_mutations() {
    run(&private_data_seeds(), 4, check::private_data);
}

/// Writes the seeds for `cargo fuzz` to `$UWARP_FUZZ_CORPUS/<target>/`,
/// one file per seed:
///
/// ```text
/// UWARP_FUZZ_CORPUS=$PWD/verbs/fuzz/corpus \
///     cargo test -p uwarp-verbs --test fuzz_inputs -- --ignored write_seed_corpus
/// ```
#[test]
#[ignore = "writes files; run by hand to seed cargo fuzz"]
fn write_seed_corpus() {
    let Some(root) = std::env::var_os("UWARP_FUZZ_CORPUS") else {
        eprintln!("UWARP_FUZZ_CORPUS is not set: nothing written");
        return;
    };
    let root = std::path::PathBuf::from(root);
    for (target, seeds) in [
        ("getaddrinfo", getaddrinfo_seeds()),
        ("work_requests", work_requests_seeds()),
        ("private_data", private_data_seeds()),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (index, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{index:02}")), seed).expect("seed file");
        }
        eprintln!("{}: {} seeds", dir.display(), seeds.len());
    }
}

/// Regression: `cargo fuzz run private_data` stopped after 3,700 inputs
/// when libFuzzer's timer signal (installed without `SA_RESTART`)
/// interrupted `rdma_get_cm_event`, which then answers -1 with `EINTR`,
/// as documented; the oracle took that for a failure instead of waiting
/// again, as an application does. Here another thread interrupts the
/// oracle's waits with `SIGUSR1` every 200 µs while the seeds run.
#[test]
fn private_data_waits_again_when_a_signal_interrupts() {
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: a handler that does nothing, without SA_RESTART, so that a
    // wait it interrupts fails with EINTR; a zeroed sigaction is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    // SAFETY: the calling thread's own handle.
    let oracle_thread = unsafe { libc::pthread_self() };
    /// Sets its flag when dropped, also by a panic (the scope joins the
    /// signalling thread before the panic goes on).
    struct SetOnDrop<'a>(&'a AtomicBool);
    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                // SAFETY: the oracle's thread, alive until `stop` is set.
                unsafe { libc::pthread_kill(oracle_thread, libc::SIGUSR1) };
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let _stop = SetOnDrop(&stop);
        for seed in private_data_seeds() {
            check::private_data(&seed);
        }
    });
}
