//! The kernel's side of the tests of uwarp's TCP against Linux's TCP
//! (`tcp_kernel_interop`, `tcp_kernel_vlan`): kernel sockets sending,
//! echoing and hashing what they move, the one report of a `uwarp-perf
//! tcp` run, and a thread of the test in another network namespace.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// What one side of a kernel connection saw.
#[derive(Debug, PartialEq, Eq)]
pub struct Seen {
    pub sent: u64,
    pub sent_sha256: String,
    pub received: u64,
    pub received_sha256: String,
}

pub fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads `stream` to its end, hashing; with `echo`, writes everything back.
pub fn drain(stream: &mut TcpStream, echo: bool) -> (u64, String) {
    let mut hash = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = stream.read(&mut buf).expect("the kernel reads");
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        total += n as u64;
        if echo {
            stream.write_all(&buf[..n]).expect("the kernel echoes");
        }
    }
    (total, hex(hash.finalize()))
}

/// A kernel echo server for one connection on `listener`.
pub fn kernel_echo(listener: TcpListener) -> JoinHandle<Seen> {
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("uwarp connects");
        let (n, digest) = drain(&mut stream, true);
        Seen {
            sent: n,
            sent_sha256: digest.clone(),
            received: n,
            received_sha256: digest,
        }
    })
}

/// A kernel client sending `bytes` of pseudo-random data to `peer` (then
/// closing its direction) while reading everything that comes back.
pub fn kernel_source(peer: SocketAddr, bytes: u64) -> Seen {
    let stream = TcpStream::connect_timeout(&peer, Duration::from_secs(10)).expect("connects");
    let mut writer = stream.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let mut block = uwarp_bench::tcp::pattern_block();
        let mut hash = Sha256::new();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            writer.write_all(&block[..n]).expect("the kernel sends");
            hash.update(&block[..n]);
            left -= n as u64;
            // Shift the block so equal blocks at different offsets differ.
            block.rotate_left(7);
        }
        writer.shutdown(std::net::Shutdown::Write).expect("FIN");
        hex(hash.finalize())
    });
    let mut reader = stream;
    let (received, received_sha256) = drain(&mut reader, false);
    Seen {
        sent: bytes,
        sent_sha256: sender.join().expect("sender"),
        received,
        received_sha256,
    }
}

/// The one report of a run (printed, for `--nocapture`).
pub fn the_report(reports: &[serde_json::Value], stderr: &str) -> serde_json::Value {
    assert_eq!(reports.len(), 1, "one report, stderr:\n{stderr}");
    eprintln!("uwarp-perf: {}", reports[0]);
    reports[0].clone()
}

/// Runs `work` on a thread of its own in the network namespace `ns`
/// (made by `ip netns add`), so that the sockets it opens are that
/// namespace's; returns what it returned.
pub fn in_netns<T: Send + 'static>(ns: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let namespace = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: the descriptor is an open namespace file for as long as
        // the call runs; setns changes the namespace of this thread only,
        // a thread of this function's own that ends with `work`.
        let entered = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            entered,
            0,
            "setns {path}: {}",
            std::io::Error::last_os_error()
        );
        work()
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
