//! A DPDK port from `uwarp-perf`'s command line: the EAL started from the
//! user's `--eal` arguments (virtual devices without hugepages, or PCI
//! devices when the arguments name some), and the port found by name.
//!
//! When `rte_eal_init` fails, its return value says little ("Invalid
//! argument"); the reason is in what the EAL printed while it ran
//! ("unrecognized option '--bogus'", "failed to parse device
//! \"net_bogus0\""), and its usage text lands on standard output, where
//! it would corrupt a JSON report. So the EAL runs with both streams
//! captured: on success they are replayed unchanged, on failure the
//! reason becomes the error.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

use smoltcp::wire::{EthernetAddress, Ipv4Address};
use uwarp::HostConfig;
use uwarp_dataplane::runtime::Placement;
use uwarp_dataplane::{Device, Eal, EalConfig};

/// The EAL arguments that name PCI devices (then the EAL scans the bus
/// and wants hugepages, unless the arguments say `--no-huge`).
const PCI_OPTIONS: [&str; 4] = ["-a", "--allow", "-b", "--block"];

/// A DPDK port and this host's addresses on it, as the command line
/// gives them (`--eal`, `--device`, `--ip`, `--mac`, `--gateway`), and
/// its cores (`--cores`, `--cpus`).
#[derive(Clone, Debug, PartialEq)]
pub struct PortHost {
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
    /// Dataplane cores (`--cores`), each with a queue pair of the port.
    pub cores: u16,
    /// Where the cores' threads run (`--cpus`).
    pub placement: Placement,
}

impl PortHost {
    /// The host of the options: `eal` split at white space, `ip` as
    /// ADDRESS/PREFIX, `mac` as six hex octets; one dataplane core,
    /// unpinned.
    pub fn parse(
        eal: &str,
        device: Option<&str>,
        ip: &str,
        mac: Option<&str>,
        gateway: Option<Ipv4Address>,
    ) -> Result<Self, String> {
        let (ip, prefix_len) = parse_cidr(ip)?;
        Ok(PortHost {
            eal: eal.split_whitespace().map(str::to_owned).collect(),
            device: device.map(str::to_owned),
            ip,
            prefix_len,
            mac: mac.map(parse_mac).transpose()?,
            gateway,
            cores: 1,
            placement: Placement::Unpinned,
        })
    }

    /// Starts the EAL and finds the port ([`open`]); with the host's
    /// settings on it (the rest at their defaults).
    pub fn open(&self) -> Result<(&'static Eal, Device, HostConfig), String> {
        let (eal, port) = open(&self.eal, self.device.as_deref())?;
        let mut host = HostConfig::new(self.ip, self.prefix_len);
        host.mac = self.mac;
        host.gateway = self.gateway;
        host.dataplane_cores = self.cores;
        host.placement = self.placement.clone();
        Ok((eal, port, host))
    }
}

/// Starts this process's EAL with `eal` (split at white space) and a file
/// prefix of its own, and finds the port `device`, by default the first
/// `--vdev` or `-a` device of `eal`.
pub fn open(eal: &[String], device: Option<&str>) -> Result<(&'static Eal, Device), String> {
    let name = device
        .map(str::to_owned)
        .or_else(|| first_device(eal))
        .ok_or("name the DPDK port with --device, or give a --vdev or -a in --eal")?;
    let pci = eal.iter().any(|arg| {
        PCI_OPTIONS
            .iter()
            .any(|o| arg == o || arg.starts_with(&format!("{o}=")))
    });
    let base = if pci {
        EalConfig::pci_devices(Vec::<String>::new())
    } else {
        EalConfig::virtual_devices(Vec::<String>::new())
    };
    // Each process its own runtime directory: two uwarp-perf processes on
    // one machine (net_memif) must not share one.
    let mut config = base.file_prefix(&format!("uwarp-perf-{}", std::process::id()));
    for arg in eal {
        config = config.arg(arg.clone());
    }
    let eal = init_eal(&config)?;
    let port = Device::by_name(eal, &name).map_err(|e| format!("no DPDK port {name}: {e}"))?;
    Ok((eal, port))
}

/// The name of the port of the first `--vdev` (its driver instance, e.g.
/// `net_tap0`) or `-a`/`--allow` (its PCI address) among `eal`.
fn first_device(eal: &[String]) -> Option<String> {
    let mut args = eal.iter();
    while let Some(arg) = args.next() {
        let value = ["--vdev", "-a", "--allow"].iter().find_map(|option| {
            match arg.strip_prefix(option)? {
                "" => args.clone().next().map(String::as_str),
                rest => rest.strip_prefix('='),
            }
        });
        if let Some(value) = value {
            return value.split(',').next().map(str::to_owned);
        }
    }
    None
}

/// `rte_eal_init` with standard output and error captured (see the
/// module's documentation).
fn init_eal(config: &EalConfig) -> Result<&'static Eal, String> {
    let (outcome, printed) = capture_output(|| Eal::init(config))
        .map_err(|e| format!("cannot capture the EAL's messages: {e}"))?;
    match outcome {
        Ok(eal) => {
            let _ = std::io::stdout().write_all(&printed.stdout);
            let _ = std::io::stderr().write_all(&printed.stderr);
            Ok(eal)
        }
        Err(err) => Err(
            match eal_reason(&String::from_utf8_lossy(&printed.stderr)) {
                Some(reason) => format!("the EAL did not start: {reason} ({err})"),
                None => format!("the EAL did not start: {err}"),
            },
        ),
    }
}

/// What a call printed on each stream.
struct Printed {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `f` with file descriptors 1 and 2 sent to temporary files, and
/// returns what it printed. The process must not be writing to either
/// from another thread meanwhile (the EAL starts before any thread).
fn capture_output<T>(f: impl FnOnce() -> T) -> std::io::Result<(T, Printed)> {
    let redirect = |fd: i32| -> std::io::Result<(File, i32)> {
        let path =
            std::env::temp_dir().join(format!("uwarp-perf-{}-fd{fd}.txt", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let _ = std::fs::remove_file(&path);
        // SAFETY: dup and dup2 on descriptors this process owns.
        let saved = unsafe { libc::dup(fd) };
        if saved < 0 || unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((file, saved))
    };
    let restore = |fd: i32, saved: i32| {
        // SAFETY: `saved` is the duplicate `redirect` made of `fd`.
        unsafe {
            libc::dup2(saved, fd);
            libc::close(saved);
        }
    };
    let _ = std::io::stdout().flush();
    let (mut out, saved_out) = redirect(1)?;
    let (mut err, saved_err) = match redirect(2) {
        Ok(pair) => pair,
        Err(e) => {
            restore(1, saved_out);
            return Err(e);
        }
    };
    let value = f();
    // The EAL prints its usage with C's buffered stdio.
    // SAFETY: fflush(NULL) flushes every C output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    restore(1, saved_out);
    restore(2, saved_err);
    let read = |file: &mut File| -> std::io::Result<Vec<u8>> {
        let mut text = Vec::new();
        file.rewind()?;
        file.read_to_end(&mut text)?;
        Ok(text)
    };
    let printed = Printed {
        stdout: read(&mut out)?,
        stderr: read(&mut err)?,
    };
    Ok((value, printed))
}

/// The first line of the EAL's messages that says what went wrong: not
/// one of its "Detected ..." notes, nor its closing generic complaint.
fn eal_reason(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(|line| {
            let line = line.trim();
            line.strip_prefix("EAL: ")
                .or_else(|| line.strip_prefix("uwarp: "))
                .unwrap_or(line)
        })
        .find(|line| {
            !line.is_empty()
                && !line.starts_with("Detected")
                && !line.contains("Invalid 'command line' arguments")
        })
        .map(str::to_owned)
}

/// `ADDRESS/PREFIX`, e.g. `10.0.0.2/24`.
fn parse_cidr(text: &str) -> Result<(Ipv4Address, u8), String> {
    text.split_once('/')
        .and_then(|(ip, len)| Some((ip.parse().ok()?, len.parse::<u8>().ok()?)))
        .filter(|&(_, len)| len <= 32)
        .ok_or_else(|| format!("--ip {text}: expected ADDRESS/PREFIX, e.g. 10.0.0.2/24"))
}

/// Six colon-separated hex octets.
fn parse_mac(text: &str) -> Result<EthernetAddress, String> {
    let bad = || format!("--mac {text}: expected six hex octets like 02:00:00:00:00:01");
    let octets: Vec<u8> = text
        .split(':')
        .map(|part| u8::from_str_radix(part, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let octets: [u8; 6] = octets.try_into().map_err(|_| bad())?;
    Ok(EthernetAddress(octets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_port_name_comes_from_the_first_device() {
        assert_eq!(
            first_device(&args(&["--vdev", "net_tap0,iface=x", "--vdev=net_ring1"])),
            Some("net_tap0".into())
        );
        assert_eq!(
            first_device(&args(&["-l", "0", "--vdev=net_memif0,role=server"])),
            Some("net_memif0".into())
        );
        assert_eq!(
            first_device(&args(&["-a", "0000:00:07.0", "--vdev", "net_ring0"])),
            Some("0000:00:07.0".into())
        );
        assert_eq!(first_device(&args(&["--no-pci"])), None);
    }

    #[test]
    fn the_eal_reason_is_its_first_complaint() {
        let printed = "uwarp: unrecognized option '--bogus'\nEAL: Detected CPU lcores: 2\n\
                       EAL: FATAL: Invalid 'command line' arguments.\n";
        assert_eq!(
            eal_reason(printed).as_deref(),
            Some("unrecognized option '--bogus'")
        );
        let printed = "EAL: Detected CPU lcores: 2\nEAL: Detected NUMA nodes: 1\n\
                       EAL: failed to parse device \"net_bogus0\"\n\
                       EAL: Unable to parse device 'net_bogus0'\n";
        assert_eq!(
            eal_reason(printed).as_deref(),
            Some("failed to parse device \"net_bogus0\"")
        );
        assert_eq!(eal_reason("EAL: Detected NUMA nodes: 1\n"), None);
    }

    #[test]
    fn addresses_parse_or_say_what_is_expected() {
        assert_eq!(
            parse_cidr("10.1.2.3/24"),
            Ok((Ipv4Address::new(10, 1, 2, 3), 24))
        );
        assert!(parse_cidr("10.1.2.3")
            .unwrap_err()
            .contains("ADDRESS/PREFIX"));
        assert!(parse_cidr("10.1.2.3/33").is_err());
        assert_eq!(
            parse_mac("02:00:00:00:00:0a"),
            Ok(EthernetAddress([2, 0, 0, 0, 0, 10]))
        );
        assert!(parse_mac("02:00").unwrap_err().contains("six hex octets"));
    }
}
