//! The two-host modes between two `uwarp-perf` processes on DPDK's
//! net_af_packet, each in a network namespace of its own, joined by a veth
//! pair the test makes (as two hosts on one Ethernet would be): every mode
//! at a small count with its data verified. The namespaces go away on
//! every exit path. Needs root (namespaces, af_packet).

mod common;

use common::{finish_and_check, sh, side_args, small_run, Perf};
use common::{ITERS, MODES};
use uwarp_testing::{root_or_skip, serial};

/// Two namespaces, `NAME-s` and `NAME-c`, joined by a veth pair whose
/// ends are named like them; deleted (and the pair with them) on drop.
struct Namespaces {
    name: String,
}

impl Namespaces {
    /// Makes the namespaces and the pair, links up, checksum and
    /// segmentation offloads off (so the frames af_packet reads carry
    /// real checksums, as `scripts/topo-veth.sh` does) and no IPv6 (so
    /// the kernels stay quiet on the link). The kernels get no address:
    /// the link is uwarp's alone.
    fn new(name: &str) -> Self {
        let namespaces = Namespaces {
            name: name.to_owned(),
        };
        namespaces.remove();
        let (server, client) = (namespaces.server(), namespaces.client());
        for ns in [&server, &client] {
            sh("ip", &["netns", "add", ns]);
        }
        sh(
            "ip",
            &[
                "link", "add", &server, "netns", &server, "type", "veth", "peer", "name", &client,
                "netns", &client,
            ],
        );
        for ns in [&server, &client] {
            let exec = |command: &[&str]| {
                let mut full = vec!["netns", "exec", ns];
                full.extend_from_slice(command);
                sh("ip", &full);
            };
            exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{ns}.disable_ipv6=1"),
            ]);
            exec(&["ip", "link", "set", "lo", "up"]);
            exec(&["ip", "link", "set", ns, "up"]);
            exec(&[
                "ethtool", "-K", ns, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro",
                "off",
            ]);
        }
        namespaces
    }

    fn server(&self) -> String {
        format!("{}-s", self.name)
    }

    fn client(&self) -> String {
        format!("{}-c", self.name)
    }

    fn remove(&self) {
        for ns in [self.server(), self.client()] {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &ns])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `uwarp-perf MODE SIDE...` on af_packet over interface `ns` (in
/// namespace `ns`), at `ip`.
fn in_namespace(ns: &str, ip: &str, mode: &str, side: &[&str], extra: &[String]) -> Vec<String> {
    let eal = format!("--vdev net_af_packet0,iface={ns},qpairs=1");
    side_args(mode, side, &["--eal", &eal, "--ip", ip], extra)
}

#[test]
fn every_mode_runs_between_two_namespaces_over_af_packet() {
    if !root_or_skip("a network namespace") {
        return;
    }
    let _serial = serial();
    let namespaces = Namespaces::new("uwpv1");
    let (server_ns, client_ns) = (namespaces.server(), namespaces.client());
    for (i, mode) in MODES.into_iter().enumerate() {
        let port = (18600 + i).to_string();
        let server_args = in_namespace(
            &server_ns,
            "10.81.21.1/24",
            mode,
            &["--server", "--port", &port],
            &[],
        );
        let mut server = Perf::start("server", &["ip", "netns", "exec", &server_ns], &server_args);
        server.wait_for("listening on 10.81.21.1");
        let peer = format!("10.81.21.1:{port}");
        let client_args = in_namespace(
            &client_ns,
            "10.81.21.2/24",
            mode,
            &["--connect", &peer],
            &small_run(mode),
        );
        let client = Perf::start("client", &["ip", "netns", "exec", &client_ns], &client_args);
        let (_, client) = finish_and_check(server, client, mode, ITERS);
        assert_eq!(client["peer"], peer.as_str());
    }
}
