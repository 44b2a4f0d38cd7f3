//! Reassembles the TCP streams of the real siw captures in `tests/data/siw`
//! and checks two exchanges against the byte streams the host peer logged.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use uwarp_bench::capture::{read_capture, TcpStream};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/siw");

#[test]
fn every_capture_has_a_tcp_stream_with_payload() {
    let mut count = 0;
    for dir in ["lo", "tap"] {
        for entry in std::fs::read_dir(Path::new(DATA).join(dir)).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "pcap") {
                continue;
            }
            count += 1;
            let streams = read_capture(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            assert!(
                streams.iter().any(|s| !s.bytes.is_empty()),
                "{path:?}: no payload"
            );
            for s in &streams {
                assert!(
                    s.is_complete(),
                    "{path:?}: {:?} has gaps {:?}",
                    s.key,
                    s.gaps
                );
            }
        }
    }
    assert!(count >= 24, "found only {count} captures");
}

/// The one stream from `src` to `dst` that carries payload.
fn stream<'a>(streams: &'a [TcpStream], src: &str, dst: &str) -> &'a TcpStream {
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let is_it = |s: &&TcpStream| s.key.src.ip() == src && s.key.dst.ip() == dst;
    let found: Vec<&TcpStream> = streams
        .iter()
        .filter(is_it)
        .filter(|s| !s.bytes.is_empty())
        .collect();
    assert_eq!(found.len(), 1, "streams with payload from {src} to {dst}");
    found[0]
}

/// `<peer>.tx.bin` is what the host peer (10.99.0.1) sent and `<peer>.rx.bin`
/// what it received; both hold the whole stream, first payload byte to FIN.
fn check_against_host_log(pcap: &str, peer: &str) {
    let tap = Path::new(DATA).join("tap");
    let streams = read_capture(&tap.join(pcap)).unwrap();
    let from_host = stream(&streams, "10.99.0.1", "10.99.0.2");
    let to_host = stream(&streams, "10.99.0.2", "10.99.0.1");
    assert_eq!(
        from_host.bytes,
        std::fs::read(tap.join(format!("{peer}.tx.bin"))).unwrap()
    );
    assert_eq!(
        to_host.bytes,
        std::fs::read(tap.join(format!("{peer}.rx.bin"))).unwrap()
    );
    assert_eq!(from_host.key, to_host.key.reversed());
    for s in [from_host, to_host] {
        assert!(s.isn.is_some() && s.retransmitted_bytes == 0 && !s.reset);
        assert_eq!(s.fin_seq, Some(s.offset_to_seq(s.bytes.len())));
    }
}

#[test]
fn python_client_against_siw_server() {
    check_against_host_log("tap-7320-rev-pyclient-siwserver-v2.pcap", "py-client-7320");
}

#[test]
fn siw_client_against_python_server() {
    check_against_host_log(
        "tap-7310-fwd-rping-siwclient-pyserver-v2.pcap",
        "py-server-7310",
    );
}
