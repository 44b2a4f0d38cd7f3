//! The one uwarp device behind the drop-in libraries: opened the first
//! time an application opens its verbs device (never in a library
//! constructor: servers that fork before any RDMA call must not inherit
//! its threads), configured from the environment, and kept for the life
//! of the process.
//!
//! A child of `fork` opens a device of its own the first time it needs
//! one, as under rdma-core: the parent's device is forgotten, never
//! closed (its threads are not in the child; the objects the parent made
//! from it keep pointing at it, and fail with `ENODEV` there,
//! [`uwarp::fork_generation`]). On DPDK a child gets no device: the
//! process's EAL is its parent's and cannot be started again, so what
//! needs the device fails with `ENODEV` (and one line on standard error,
//! uwarp's reason).
//!
//! Its threads are started with every signal blocked but SIGSEGV and
//! SIGBUS, so that signals meant for the process (`SIGALRM` from
//! `alarm()`, `SIGINT`) reach the application's own threads, as they do
//! when the RNIC is hardware. A fault's signal cannot be blocked (the
//! kernel kills a thread that faults with it blocked), and the fault
//! guard of `uwarp::app_memory` must see it on the thread whose copy into
//! the application's memory faulted.
//!
//! Environment (`uwarp-run`'s options of the same names set it):
//! - `UWARP_TRANSPORT`: `socket` (the default: iWARP over the kernel's
//!   TCP, no set-up, any number of processes per host) or `dpdk`
//!   (uwarp's TCP on a DPDK port, its cores on threads of their own).
//! - For `dpdk`: `UWARP_IFACE`, a kernel interface whose queue 0 the
//!   device runs on through AF_XDP, beside the kernel and at the
//!   interface's own address; or `UWARP_EAL`, the EAL's arguments (e.g.
//!   `--vdev net_tap0,iface=uw0`); `UWARP_IP`, this host's
//!   `ADDRESS/PREFIX` on the port; optionally `UWARP_PORT` (the port's
//!   name; by default the first `--vdev` or `-a`), `UWARP_MAC`,
//!   `UWARP_GATEWAY`, `UWARP_VLAN` (`ID[:PCP]`: the IEEE 802.1Q VLAN of
//!   the port, its frames tagged with ID at priority PCP), and either `UWARP_CORES` (the number of dataplane
//!   cores, 1 by default, wherever the kernel runs them) or `UWARP_CPUS`
//!   (`CONTROL,DATAPLANE[,DATAPLANE...]`: the control core and one
//!   dataplane core per further CPU, each pinned).
//! - `UWARP_FIRST_FPDU_DELAY_MS`: how long an active side holds its first
//!   FPDU back after the peer's MPA Reply (0 by default; 200 against
//!   Linux siw's servers, whose passive side can lose an FPDU that comes
//!   too soon: [`uwarp::ConnectParams::first_fpdu_delay`]).
//! - `UWARP_LOOPBACK_BIND`: on the socket transport, what a bind to a
//!   loopback address gives: `device` (the default: the device, so that
//!   programs on one host run over loopback) or `any` (no device, as
//!   Linux's RDMA CM counts a loopback address as a wildcard: a program
//!   that binds "localhost" only to learn its device, as libfabric does,
//!   goes on to the host's own addresses, which its peers on other hosts
//!   can reach).
//! - `UWARP_LOG`: what the library prints ([`crate::log`]).
//!
//! A device on DPDK is closed when the process exits (by `exit` or a
//! return from `main`): its TCP lives in the process, and peers must hear
//! of the connections it leaves open (a RST each), as they would from a
//! kernel.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

use uwarp::{
    parse_mac, CoreThreads, Device, DeviceConfig, DpdkConfig, DpdkPort, HostConfig, Placement, Vlan,
};

use crate::log::{self, Level};

/// The device of the newest process of the fork lineage that opened one
/// (a [`Slot`] leaked, never freed: a child's objects made by its parent
/// keep referring to the parent's), null before any.
static DEVICE: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());

/// The fork generation, plus one, of the process one of whose threads
/// took the opening of its device; 0 before any. Threads of the same
/// process wait for that one; a child, whose generation differs, opens
/// its own (a lock would stay held in a child whose parent forked while
/// opening).
static OPENING: AtomicU64 = AtomicU64::new(0);

/// Set once the process's device closes at exit ([`close_at_exit`]).
static CLOSING_AT_EXIT: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Whether this thread is the one running the process's exit.
    static EXITING_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A process's device, or why it could not be opened (`errno`, message).
struct Slot {
    /// The fork generation of the process it belongs to.
    generation: u64,
    opened: Result<Opened, (i32, String)>,
}

/// An open device and the settings its connections use.
struct Opened {
    device: Device,
    /// Its own address on a DPDK port (if it is on one).
    address: Option<Ipv4Addr>,
    /// How long its active sides hold their first FPDU back.
    first_fpdu_delay: Duration,
    /// A bind to a loopback address gives the device where it carries
    /// loopback connections (`UWARP_LOOPBACK_BIND=device`).
    loopback_bind_gives_device: bool,
}

/// The process's uwarp device, opened on first use in this process; on
/// failure the `errno` to answer with (the reason is printed once, on
/// standard error).
pub fn device() -> Result<&'static Device, i32> {
    own_slot()
        .opened
        .as_ref()
        .map(|opened| &opened.device)
        .map_err(|(errno, _)| *errno)
}

/// This process's slot, made by the first thread that asks (the others
/// wait for it).
fn own_slot() -> &'static Slot {
    let generation = uwarp::fork_generation();
    loop {
        let newest = newest_slot();
        if let Some(slot) = newest.filter(|slot| slot.generation == generation) {
            return slot;
        }
        let taken = OPENING.load(Ordering::Acquire);
        if taken != generation + 1
            && OPENING
                .compare_exchange(taken, generation + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let slot: &'static Slot = Box::leak(Box::new(open_slot(generation)));
            DEVICE.store(std::ptr::from_ref(slot).cast_mut(), Ordering::Release);
            return slot;
        }
        // Another thread of this process is opening it.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The slot of the newest process that made one: this one's, or, in a
/// child of `fork` that has not made its own yet, an ancestor's.
fn newest_slot() -> Option<&'static Slot> {
    // SAFETY: DEVICE is null or a slot leaked by `own_slot`, never freed.
    unsafe { DEVICE.load(Ordering::Acquire).as_ref() }
}

/// Opens the device of the process of fork generation `generation`, and
/// reports the outcome (a panic too: the threads waiting for the slot
/// must get one).
fn open_slot(generation: u64) -> Slot {
    let opened = std::panic::catch_unwind(|| {
        #[cfg(test)]
        if cfg!(miri) {
            return open_without_transport();
        }
        with_signals_blocked(open)
    })
    .unwrap_or_else(|_| Err((libc::EIO, "opening the device panicked".to_string())));
    match &opened {
        Ok(opened) => {
            log::print(Level::Info, format_args!("{}", describe(&opened.address)));
            // SAFETY: registers a handler that has no arguments and
            // returns; atexit has no other precondition.
            if opened.address.is_some() && unsafe { libc::atexit(close_at_exit) } != 0 {
                log::print(
                    Level::Error,
                    format_args!("cannot close the device at exit"),
                );
            }
        }
        Err((_, reason)) => log::print(
            Level::Error,
            format_args!("cannot open the device: {reason}"),
        ),
    }
    Slot { generation, opened }
}

/// How long an active side holds its first FPDU back after the MPA
/// Reply (`UWARP_FIRST_FPDU_DELAY_MS`; zero before the device opened).
pub fn first_fpdu_delay() -> Duration {
    opened().map_or(Duration::ZERO, |opened| opened.first_fpdu_delay)
}

/// Whether a bind to a loopback address gives the device, on a device
/// that carries loopback connections (`UWARP_LOOPBACK_BIND`; before the
/// device opened, the default).
pub fn loopback_bind_gives_device() -> bool {
    opened().is_none_or(|opened| opened.loopback_bind_gives_device)
}

/// This process's device, when it is open.
fn opened() -> Option<&'static Opened> {
    newest_slot()
        .filter(|slot| slot.generation == uwarp::fork_generation())?
        .opened
        .as_ref()
        .ok()
}

/// Closes a DPDK device when its process exits (by `exit` or a return
/// from `main`; an exit handler registered when it opened): every
/// connection still open is reset, so that its peer hears a RST, as from
/// the kernel when a process exits with its sockets open, instead of
/// retransmitting into silence for minutes. The socket transport needs
/// none: the kernel closes its sockets. A child of `fork` inherits the
/// handler, not the device: there it does nothing.
extern "C" fn close_at_exit() {
    EXITING_THREAD.with(|exiting| exiting.set(true));
    CLOSING_AT_EXIT.store(true, Ordering::SeqCst);
    let closed = std::panic::catch_unwind(|| {
        if let Some(opened) = opened() {
            log::print(Level::Info, format_args!("closing the device at exit"));
            opened.device.shut_down();
        }
    });
    if closed.is_err() {
        log::print(
            Level::Error,
            format_args!("closing the device at exit failed"),
        );
    }
}

/// Called first by the calls that wait for an event (`rdma_get_cm_event`,
/// `ibv_get_cq_event`, `ibv_get_async_event`): while the device closes at
/// exit, which may take until its connections settled, the process is
/// ending, and a thread that asks for an event waits for that end instead
/// of being answered. With the kernel an exit takes microseconds, and
/// programs whose threads race their own teardown were never caught: rping's
/// connection-manager thread, asking again on the channel its main thread
/// destroyed before returning, would get `EINVAL` and `exit(-1)` in the
/// middle of the main thread's exit, and the process's status became 255.
/// It waits in `pause`, a cancellation point. The exiting thread itself
/// (an exit handler of the program's that runs after this library's)
/// is answered as ever.
pub extern "C" fn wait_if_exiting() {
    if !CLOSING_AT_EXIT.load(Ordering::SeqCst) || EXITING_THREAD.with(std::cell::Cell::get) {
        return;
    }
    loop {
        // SAFETY: pause has no preconditions.
        unsafe { libc::pause() };
    }
}

/// The address this host has on its DPDK port, when the device is on the
/// DPDK transport (the source of its connections, which the kernel's
/// routes know nothing of); `None` on the socket transport.
pub fn own_address() -> Option<IpAddr> {
    opened()?.address.map(IpAddr::V4)
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
    let first_fpdu_delay = first_fpdu_delay_setting().map_err(|reason| (libc::EINVAL, reason))?;
    let loopback_bind_gives_device =
        loopback_bind_setting().map_err(|reason| (libc::EINVAL, reason))?;
    let device = Device::open(config).map_err(|e| (crate::export::errno_of(&e), e.to_string()))?;
    Ok(Opened {
        device,
        address,
        first_fpdu_delay,
        loopback_bind_gives_device,
    })
}

/// The device of this crate's unit tests under Miri
/// (`scripts/miri-ci.sh`): one whose transport never starts
/// ([`Device::without_transport`]), as Miri can run neither a
/// transport's threads nor its sockets (nor block signals: `sigfillset`
/// is a foreign function to it). Everything above the transport (the
/// verbs' objects, their handles and tables) is the production code.
#[cfg(test)]
fn open_without_transport() -> Result<Opened, (i32, String)> {
    let device = Device::without_transport(64).map_err(|e| (libc::EIO, e.to_string()))?;
    Ok(Opened {
        device,
        address: None,
        first_fpdu_delay: Duration::ZERO,
        loopback_bind_gives_device: true,
    })
}

/// The environment variable `name`, when it is set and not empty.
fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// `UWARP_FIRST_FPDU_DELAY_MS`, zero when unset or empty.
fn first_fpdu_delay_setting() -> Result<Duration, String> {
    let Some(value) = setting("UWARP_FIRST_FPDU_DELAY_MS") else {
        return Ok(Duration::ZERO);
    };
    value
        .parse()
        .ok()
        .filter(|&ms| ms <= MAX_FIRST_FPDU_DELAY_MS)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            format!(
                "UWARP_FIRST_FPDU_DELAY_MS={value}: expected milliseconds, \
                 0 to {MAX_FIRST_FPDU_DELAY_MS}"
            )
        })
}

/// `UWARP_LOOPBACK_BIND`: whether a loopback bind gives the device
/// (`device`, the default when unset or empty) or not (`any`).
fn loopback_bind_setting() -> Result<bool, String> {
    match setting("UWARP_LOOPBACK_BIND").as_deref() {
        None | Some("device") => Ok(true),
        Some("any") => Ok(false),
        Some(other) => Err(format!(
            "UWARP_LOOPBACK_BIND={other}: expected device or any"
        )),
    }
}

/// The longest hold `UWARP_FIRST_FPDU_DELAY_MS` accepts (a minute: more
/// is a typo, and the peer's own timeouts would end the connection).
const MAX_FIRST_FPDU_DELAY_MS: u64 = 60_000;

/// What `UWARP_LOG=info` says of the device opened.
fn describe(address: &Option<Ipv4Addr>) -> String {
    match address {
        Some(ip) => format!("device uwarp0 on DPDK at {ip}"),
        None => "device uwarp0 on the kernel's TCP sockets".to_string(),
    }
}

/// The DPDK transport's settings from the environment.
fn dpdk_config() -> Result<DpdkConfig, String> {
    if let Some(iface) = setting("UWARP_IFACE") {
        return beside_kernel_config(&iface);
    }
    let mut eal: Vec<String> = setting("UWARP_EAL")
        .ok_or("UWARP_TRANSPORT=dpdk needs UWARP_EAL, e.g. \"--vdev net_tap0,iface=uw0\"")?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if !eal.iter().any(|arg| arg.starts_with("--log-level")) {
        eal.push(log::level().eal_argument().to_owned());
    }
    let ip = setting("UWARP_IP").ok_or("UWARP_TRANSPORT=dpdk needs UWARP_IP, e.g. 10.0.0.2/24")?;
    let mut host = HostConfig::from_cidr(&ip).map_err(|e| format!("UWARP_IP={e}"))?;
    if let Some(mac) = setting("UWARP_MAC") {
        host.mac = Some(parse_mac(&mac).map_err(|e| format!("UWARP_MAC={e}"))?);
    }
    if let Some(gateway) = setting("UWARP_GATEWAY") {
        let parsed: Ipv4Addr = gateway
            .parse()
            .map_err(|_| format!("UWARP_GATEWAY={gateway}: expected an IPv4 address"))?;
        host.gateway = Some(parsed);
    }
    if let Some(vlan) = setting("UWARP_VLAN") {
        host.vlan = Some(Vlan::parse(&vlan).map_err(|e| format!("UWARP_VLAN={e}"))?);
    }
    cores_from_environment(&mut host)?;
    let port = match setting("UWARP_PORT") {
        Some(name) => DpdkPort::Named(name),
        None => DpdkPort::first_in_eal(&eal)
            .ok_or("name the DPDK port with UWARP_PORT, or give a --vdev or -a in UWARP_EAL")?,
    };
    // Cores on threads of their own: programs spin on memory (perftest's
    // latency tests) and never call into the library while they do.
    let mut dpdk = DpdkConfig::new(port, host, CoreThreads::Spawned);
    dpdk.eal = Some(eal);
    Ok(dpdk)
}

/// The DPDK transport beside the kernel, on queue 0 of the kernel's
/// interface `iface` (`UWARP_IFACE`), at its own address.
fn beside_kernel_config(iface: &str) -> Result<DpdkConfig, String> {
    for other in [
        "UWARP_EAL",
        "UWARP_PORT",
        "UWARP_IP",
        "UWARP_MAC",
        "UWARP_GATEWAY",
        "UWARP_VLAN",
    ] {
        if setting(other).is_some() {
            return Err(format!(
                "UWARP_IFACE={iface} takes the interface's port and addresses: unset {other}"
            ));
        }
    }
    let mut dpdk = DpdkConfig::beside_kernel(iface, CoreThreads::Spawned)
        .map_err(|e| format!("UWARP_IFACE={iface}: {e}"))?;
    cores_from_environment(&mut dpdk.host)?;
    Ok(dpdk)
}

/// The dataplane cores `UWARP_CORES` or `UWARP_CPUS` ask for, into
/// `host`.
fn cores_from_environment(host: &mut HostConfig) -> Result<(), String> {
    match (setting("UWARP_CORES"), setting("UWARP_CPUS")) {
        (Some(_), Some(_)) => {
            return Err(
                "give UWARP_CORES (how many cores) or UWARP_CPUS (which CPUs), not both"
                    .to_string(),
            )
        }
        (Some(cores), None) => {
            host.dataplane_cores = cores.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
                format!("UWARP_CORES={cores}: expected a number of cores, 1 or more")
            })?;
        }
        (None, Some(cpus)) => {
            let placement = Placement::parse_cpus(&cpus).map_err(|e| format!("UWARP_CPUS: {e}"))?;
            if let Placement::Pinned { dataplanes, .. } = &placement {
                host.dataplane_cores = u16::try_from(dataplanes.len())
                    .map_err(|_| format!("UWARP_CPUS={cpus}: too many CPUs"))?;
            }
            host.placement = placement;
        }
        (None, None) => {}
    }
    Ok(())
}

/// Runs `f` on a new thread that has every signal but SIGSEGV and SIGBUS
/// blocked (threads it starts inherit the mask), and returns what it
/// returned.
fn with_signals_blocked<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let result = blocking_signals(|| std::thread::scope(|scope| scope.spawn(f).join()));
    match result {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Starts a library thread named `name` running `f`, with every signal
/// but SIGSEGV and SIGBUS blocked in it.
pub fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let builder = std::thread::Builder::new().name(name.to_owned());
    blocking_signals(|| builder.spawn(f))
}

/// Runs `f` with every signal but SIGSEGV and SIGBUS blocked on the
/// calling thread (so threads it starts inherit the mask), then restores
/// the mask.
fn blocking_signals<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: `all` and `previous` are plain sigset_t values owned by this
    // frame; sigfillset, sigdelset and pthread_sigmask only write them and
    // the calling thread's mask.
    let previous = unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        let mut previous = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::sigdelset(&mut all, libc::SIGSEGV);
        libc::sigdelset(&mut all, libc::SIGBUS);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
        previous
    };
    let result = f();
    // SAFETY: restores the mask saved above on the calling thread.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    result
}
