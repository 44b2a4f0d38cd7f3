//! Two network namespaces joined by a veth pair, for the tests that run
//! uwarp on DPDK's net_af_packet against another host (`twohost_veth`:
//! two `uwarp-perf` processes; `tcp_kernel_vlan`: uwarp and the kernel).

use super::sh;

/// Two namespaces, `NAME-s` and `NAME-c`, joined by a veth pair whose
/// ends are named like them; deleted (and the pair with them) on drop.
pub struct Namespaces {
    name: String,
}

impl Namespaces {
    /// Makes the namespaces and the pair, links up, checksum and
    /// segmentation offloads off (so the frames af_packet reads carry
    /// real checksums, as `scripts/topo-veth.sh` does) and no IPv6 (so
    /// the kernels stay quiet on the link). The kernels get no address:
    /// the link is uwarp's alone.
    pub fn new(name: &str) -> Self {
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

    pub fn server(&self) -> String {
        format!("{}-s", self.name)
    }

    pub fn client(&self) -> String {
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
