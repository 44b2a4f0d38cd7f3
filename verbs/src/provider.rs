//! The one uwarp device behind the drop-in libraries: opened the first
//! time an application opens its verbs device (never in a library
//! constructor: servers that fork before any RDMA call must not inherit
//! its threads), configured from the environment, and kept for the life
//! of the process.
//!
//! Its threads are started with every signal blocked, so that signals
//! meant for the process (`SIGALRM` from `alarm()`, `SIGINT`) reach the
//! application's own threads, as they do when the RNIC is hardware.
//!
//! Environment (`uwarp-run`'s options set it):
//! - `UWARP_TRANSPORT`: `socket` (the default: iWARP over the kernel's
//!   TCP, no set-up, any number of processes per host) or `dpdk`
//!   (uwarp's TCP on a DPDK port, its cores on threads of their own).
//! - For `dpdk`: `UWARP_DPDK_EAL`, the EAL's arguments (e.g.
//!   `--vdev net_tap0,iface=uw0`); `UWARP_IP`, this host's
//!   `ADDRESS/PREFIX` on the port; optionally `UWARP_DPDK_PORT` (the
//!   port's name; by default the first `--vdev` or `-a`), `UWARP_MAC`,
//!   `UWARP_GATEWAY` and `UWARP_CORES` (dataplane cores, 1 by default).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use uwarp::{parse_mac, CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig};

/// The process's device and its own address on a DPDK port (the socket
/// transport has none: the kernel's addresses are its), or why it could
/// not be opened (`errno`, message).
static DEVICE: OnceLock<Result<Opened, (i32, String)>> = OnceLock::new();

/// An open device, with its own address on a DPDK port (if it is on one).
type Opened = (Device, Option<Ipv4Addr>);

/// The process's uwarp device, opened on first use; on failure the
/// `errno` to answer with (the reason is printed once, on standard error).
pub fn device() -> Result<&'static Device, i32> {
    let opened = DEVICE.get_or_init(|| {
        let opened = with_signals_blocked(open);
        if let Err((_, reason)) = &opened {
            eprintln!("uwarp: cannot open the device: {reason}");
        }
        opened
    });
    opened
        .as_ref()
        .map(|(device, _)| device)
        .map_err(|(errno, _)| *errno)
}

/// The address this host has on its DPDK port, when the device is on the
/// DPDK transport (the source of its connections, which the kernel's
/// routes know nothing of); `None` on the socket transport.
pub fn own_address() -> Option<IpAddr> {
    DEVICE.get()?.as_ref().ok()?.1.map(IpAddr::V4)
}

/// Opens the device the environment describes.
fn open() -> Result<Opened, (i32, String)> {
    let transport = std::env::var("UWARP_TRANSPORT").unwrap_or_else(|_| "socket".into());
    let (config, address) = match transport.as_str() {
        "socket" => (DeviceConfig::default(), None),
        "dpdk" => {
            let dpdk = dpdk_config().map_err(|reason| (libc::EINVAL, reason))?;
            let address = Ipv4Addr::from(dpdk.host.ip.octets());
            (DeviceConfig::dpdk(dpdk), Some(address))
        }
        other => {
            let reason = format!("UWARP_TRANSPORT={other}: the transports are: socket, dpdk");
            return Err((libc::EINVAL, reason));
        }
    };
    let device = Device::open(config).map_err(|e| (crate::export::errno_of(&e), e.to_string()))?;
    Ok((device, address))
}

/// The DPDK transport's settings from the environment.
fn dpdk_config() -> Result<DpdkConfig, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let eal: Vec<String> = var("UWARP_DPDK_EAL")
        .ok_or("UWARP_TRANSPORT=dpdk needs UWARP_DPDK_EAL, e.g. \"--vdev net_tap0,iface=uw0\"")?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let ip = var("UWARP_IP").ok_or("UWARP_TRANSPORT=dpdk needs UWARP_IP, e.g. 10.0.0.2/24")?;
    let mut host = HostConfig::from_cidr(&ip).map_err(|e| format!("UWARP_IP={e}"))?;
    if let Some(mac) = var("UWARP_MAC") {
        host.mac = Some(parse_mac(&mac).map_err(|e| format!("UWARP_MAC={e}"))?);
    }
    if let Some(gateway) = var("UWARP_GATEWAY") {
        let parsed: Ipv4Addr = gateway
            .parse()
            .map_err(|_| format!("UWARP_GATEWAY={gateway}: expected an IPv4 address"))?;
        host.gateway = Some(parsed);
    }
    if let Some(cores) = var("UWARP_CORES") {
        host.dataplane_cores =
            cores.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                format!("UWARP_CORES={cores}: expected a number of cores, 1 or more")
            })?;
    }
    let port = match var("UWARP_DPDK_PORT") {
        Some(name) => DpdkPort::Named(name),
        None => DpdkPort::first_in_eal(&eal).ok_or(
            "name the DPDK port with UWARP_DPDK_PORT, or give a --vdev or -a in UWARP_DPDK_EAL",
        )?,
    };
    // Cores on threads of their own: programs spin on memory (perftest's
    // latency tests) and never call into the library while they do.
    let mut dpdk = DpdkConfig::new(port, host, CoreThreads::Spawned);
    dpdk.eal = Some(eal);
    Ok(dpdk)
}

/// Runs `f` on a new thread that has every signal blocked (threads it
/// starts inherit the mask), and returns what it returned.
fn with_signals_blocked<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let result = blocking_signals(|| std::thread::scope(|scope| scope.spawn(f).join()));
    match result {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Starts a library thread named `name` running `f`, with every signal
/// blocked in it.
pub fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let builder = std::thread::Builder::new().name(name.to_owned());
    blocking_signals(|| builder.spawn(f))
}

/// Runs `f` with every signal blocked on the calling thread (so threads
/// it starts inherit the mask), then restores the mask.
fn blocking_signals<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: `all` and `previous` are plain sigset_t values owned by this
    // frame; sigfillset and pthread_sigmask only write them and the
    // calling thread's mask.
    let previous = unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        let mut previous = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous);
        previous
    };
    let result = f();
    // SAFETY: restores the mask saved above on the calling thread.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    result
}
