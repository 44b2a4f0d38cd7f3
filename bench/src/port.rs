//! A DPDK port from `uwarp-perf`'s command line: the `--eal` arguments
//! and the port's name, as a [`DpdkConfig`] for a uwarp device.
//!
//! The library starts the EAL from those arguments (virtual devices
//! without hugepages, or PCI devices when the arguments name some), with
//! a file prefix of this process's own, and captures what the EAL prints
//! while it starts: when it refuses the arguments, the error is the
//! EAL's own reason (`uwarp::DpdkConfig::eal`).

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::{parse_mac, CoreThreads, DpdkConfig, DpdkPort, HostConfig, Vlan};
use uwarp_dataplane::runtime::{ImpairConfig, Placement};
use uwarp_dataplane::{Device, Eal};

/// A DPDK port and this host's addresses on it, as the command line
/// gives them (`--eal`, `--device`, `--ip`, `--mac`, `--gateway`,
/// `--vlan`), its
/// cores (`--cores`, `--cpus`), and how its frames go (`--impair-rx`,
/// `--payloads-by-reference`).
#[derive(Clone, Debug, PartialEq)]
pub struct PortHost {
    /// The kernel interface whose queue 0 the port is, beside the kernel
    /// (`--iface`, `DpdkConfig::beside_kernel`); then `eal` and `device`
    /// are empty and the addresses are the interface's.
    pub iface: Option<String>,
    /// EAL arguments (e.g. `--vdev net_tap0,iface=uw0`).
    pub eal: Vec<String>,
    /// The port's name; `None` takes the first `--vdev`'s or `-a`'s.
    pub device: Option<String>,
    /// This host's address.
    pub ip: Ipv4Address,
    /// Its prefix length.
    pub prefix_len: u8,
    /// This host's MAC address (`None`: the port's).
    pub mac: Option<EthernetAddress>,
    /// The default gateway.
    pub gateway: Option<Ipv4Address>,
    /// The IEEE 802.1Q VLAN the port is on (`--vlan`; `None`: untagged).
    pub vlan: Option<Vlan>,
    /// Dataplane cores (`--cores`), each with a queue pair of the port.
    pub cores: u16,
    /// Where the cores' threads run (`--cpus`).
    pub placement: Placement,
    /// What the receive path's impairment stage does (`--impair-rx`).
    pub impair_rx: ImpairConfig,
    /// Send TCP payloads by reference where the device allows
    /// (`--payloads-by-reference`, `HostConfig::payloads_by_reference`).
    pub payloads_by_reference: bool,
}

impl PortHost {
    /// The host of the options: `eal` split at white space, `ip` as
    /// ADDRESS/PREFIX, `mac` as six hex octets; one dataplane core,
    /// unpinned; no impairment; payloads copied.
    pub fn parse(
        eal: &str,
        device: Option<&str>,
        ip: &str,
        mac: Option<&str>,
        gateway: Option<Ipv4Address>,
    ) -> Result<Self, String> {
        let at = HostConfig::from_cidr(ip).map_err(|e| format!("--ip {e}"))?;
        Ok(PortHost {
            iface: None,
            eal: eal.split_whitespace().map(str::to_owned).collect(),
            device: device.map(str::to_owned),
            ip: at.ip,
            prefix_len: at.prefix_len,
            mac: mac
                .map(parse_mac)
                .transpose()
                .map_err(|e| format!("--mac {e}"))?,
            gateway,
            vlan: None,
            cores: 1,
            placement: Placement::Unpinned,
            impair_rx: ImpairConfig::default(),
            payloads_by_reference: false,
        })
    }

    /// The host on queue 0 of the kernel's interface `iface`, beside the
    /// kernel, at the interface's address and gateway; one dataplane core,
    /// unpinned; no impairment; payloads copied.
    pub fn beside_kernel(iface: &str) -> Result<Self, String> {
        let config = DpdkConfig::beside_kernel(iface, CoreThreads::Inline)
            .map_err(|e| format!("--iface {iface}: {e}"))?;
        Ok(PortHost {
            iface: Some(iface.to_owned()),
            eal: Vec::new(),
            device: None,
            ip: config.host.ip,
            prefix_len: config.host.prefix_len,
            mac: None,
            gateway: config.host.gateway,
            vlan: None,
            cores: 1,
            placement: Placement::Unpinned,
            impair_rx: ImpairConfig::default(),
            payloads_by_reference: false,
        })
    }

    /// The configuration of a uwarp device on this port, its cores on
    /// `threads`: the port `device`, by default the first `--vdev` or
    /// `-a` device of `eal`; the EAL started from `eal`; the host's
    /// settings on it (the rest at their defaults).
    pub fn dpdk_config(&self, threads: CoreThreads) -> Result<DpdkConfig, String> {
        if let Some(iface) = &self.iface {
            let mut dpdk = DpdkConfig::beside_kernel(iface, threads)
                .map_err(|e| format!("--iface {iface}: {e}"))?;
            dpdk.host.dataplane_cores = self.cores;
            dpdk.host.placement = self.placement.clone();
            dpdk.host.impairment.rx = self.impair_rx;
            dpdk.host.payloads_by_reference = self.payloads_by_reference;
            return Ok(dpdk);
        }
        let port = match &self.device {
            Some(name) => DpdkPort::Named(name.clone()),
            None => DpdkPort::first_in_eal(&self.eal)
                .ok_or("name the DPDK port with --device, or give a --vdev or -a in --eal")?,
        };
        let mut host = HostConfig::new(self.ip, self.prefix_len);
        host.mac = self.mac;
        host.gateway = self.gateway;
        host.vlan = self.vlan;
        host.dataplane_cores = self.cores;
        host.placement = self.placement.clone();
        host.impairment.rx = self.impair_rx;
        host.payloads_by_reference = self.payloads_by_reference;
        let mut dpdk = DpdkConfig::new(port, host, threads);
        dpdk.eal = Some(self.eal.clone());
        Ok(dpdk)
    }

    /// For a host below the uwarp API (`uwarp-perf tcp`'s `TcpHost`):
    /// the EAL started as a device's would be ([`PortHost::dpdk_config`],
    /// `DpdkConfig::start_eal`), the port claimed, and the host's
    /// settings.
    pub fn open(&self) -> Result<(&'static Eal, Device, HostConfig), String> {
        let dpdk = self.dpdk_config(CoreThreads::Spawned)?;
        dpdk.start_eal().map_err(|e| e.to_string())?;
        let eal = Eal::get().ok_or("the EAL is not running")?;
        let DpdkPort::Named(name) = &dpdk.port else {
            return Err("this mode runs on a port the EAL arguments name, not --iface".into());
        };
        let port = Device::by_name(eal, name).map_err(|e| format!("no DPDK port {name}: {e}"))?;
        Ok((eal, port, dpdk.host))
    }
}
