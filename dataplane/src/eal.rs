//! The DPDK Environment Abstraction Layer, initialised once per process.
//!
//! `rte_eal_init` can run only once in a process and cannot be undone and
//! redone, so [`Eal::init`] keeps its outcome in a process-wide `OnceLock`:
//! the first call initialises, later calls with the same arguments get the
//! same [`Eal`] handle, and calls with different arguments get
//! [`Error::EalAlreadyInitialised`]. Every other wrapper takes `&Eal`, so
//! nothing reaches DPDK before the EAL is up.
//!
//! The thread that runs the first [`Eal::init`] becomes DPDK's main lcore
//! (its CPU affinity is set to that core); other threads are "non-EAL"
//! threads, which DPDK supports for everything the dataplane does (their
//! mempool operations bypass the per-lcore caches).

use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The directory Debian's DPDK 22.11 loads its poll-mode drivers from.
///
/// `rte_eal_init` loads every driver of this directory by itself (the path
/// is compiled into librte_eal), so it need not be passed with `-d`; it is
/// here for [`EalConfig::driver_path`] on systems where it differs.
pub const DEBIAN_DRIVER_DIR: &str = "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0";

/// The arguments of `rte_eal_init`, built for one of the two set-ups uwarp
/// runs on: virtual devices without hugepages, or real NICs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EalConfig {
    base: Vec<String>,
    lcores: Lcores,
}

/// Which lcores the EAL runs, and on which CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lcores {
    /// `-l <list>`: lcore `n` runs on CPU `n`, e.g. `"0"` or `"0-3"`.
    List(String),
    /// `--lcores=<map>`: lcores mapped to CPU sets, e.g. `"0@0,1@(2-3)"`.
    Map(String),
}

impl EalConfig {
    /// Virtual devices only, no hugepages, no PCI scan, no files shared with
    /// other DPDK processes: `--no-huge -m 256 --no-shconf --no-pci
    /// --no-telemetry -l 0 --vdev <each>`.
    ///
    /// `--no-huge` takes 256 MB of ordinary memory. `--no-shconf` keeps the
    /// EAL from writing its shared configuration, so several processes can
    /// run at once (parallel CI jobs); `--no-telemetry` keeps it from
    /// opening the telemetry socket. `--in-memory` would say the same more
    /// strongly but DPDK 22.11 refuses it next to `--no-huge` ("Option
    /// --legacy-mem is not compatible with --in-memory": `--no-huge` implies
    /// legacy memory).
    pub fn virtual_devices<I, S>(vdevs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let base = [
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--no-pci",
            "--no-telemetry",
        ];
        Self::on_lcore_0(
            base.into_iter().map(String::from).collect(),
            "--vdev",
            vdevs,
        )
    }

    /// Real NICs: the PCI devices of `allow` (e.g. `"0000:03:00.0"`, each
    /// passed as `-a`), hugepage memory, `-l 0`. The devices must be bound
    /// to vfio-pci (or use a bifurcated driver such as mlx5) and hugepages
    /// must be reserved beforehand.
    pub fn pci_devices<I, S>(allow: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::on_lcore_0(Vec::new(), "-a", allow)
    }

    /// `base`, then `option DEVICE` for each of `devices`, on lcore 0.
    fn on_lcore_0<I, S>(mut base: Vec<String>, option: &str, devices: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for device in devices {
            base.push(option.to_owned());
            base.push(device.into());
        }
        EalConfig {
            base,
            lcores: Lcores::List("0".to_owned()),
        }
    }

    /// Replaces the lcore choice (`-l 0` by default).
    pub fn lcores(mut self, lcores: Lcores) -> Self {
        self.lcores = lcores;
        self
    }

    /// Adds `-d <path>`: a driver library or a directory of them to load
    /// besides the ones of DPDK's default driver directory.
    pub fn driver_path(self, path: impl Into<String>) -> Self {
        self.arg("-d").arg(path)
    }

    /// Keeps DPDK's shared configuration, with its runtime files under
    /// `/var/run/dpdk/<prefix>` (or `$XDG_RUNTIME_DIR/dpdk/<prefix>`),
    /// instead of `--no-shconf`: net_memif needs the multi-process channel
    /// that comes with it. `prefix` must differ between the DPDK processes
    /// running on one machine.
    pub fn file_prefix(mut self, prefix: &str) -> Self {
        self.base.retain(|a| a != "--no-shconf");
        self.arg(format!("--file-prefix={prefix}"))
    }

    /// Adds one more raw EAL argument (e.g. `--log-level=lib.eal:debug`).
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.base.push(arg.into());
        self
    }

    /// The arguments as `rte_eal_init` will see them, without the program
    /// name.
    pub fn args(&self) -> Vec<String> {
        let mut args = self.base.clone();
        match &self.lcores {
            Lcores::List(list) => {
                args.push("-l".to_owned());
                args.push(list.clone());
            }
            Lcores::Map(map) => args.push(format!("--lcores={map}")),
        }
        args
    }
}

/// Proof that the EAL of this process is initialised, with what it was
/// initialised from.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
}

static EAL: OnceLock<std::result::Result<Eal, Error>> = OnceLock::new();

impl Eal {
    /// Initialises the EAL with `config`, or returns the EAL this process
    /// already initialised with the same arguments.
    ///
    /// A failed initialisation is final too: later calls return its error.
    pub fn init(config: &EalConfig) -> Result<&'static Eal> {
        let requested = config.args();
        let outcome = EAL.get_or_init(|| run_eal_init(&requested));
        match outcome {
            Ok(eal) if eal.args == requested => Ok(eal),
            Ok(eal) => Err(Error::EalAlreadyInitialised {
                running: eal.args.clone(),
                requested,
            }),
            Err(e) => Err(e.clone()),
        }
    }

    /// The EAL of this process, if [`Eal::init`] succeeded.
    pub fn get() -> Option<&'static Eal> {
        EAL.get().and_then(|r| r.as_ref().ok())
    }

    /// The arguments the EAL was initialised with (without the program
    /// name).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Whether DMA addresses are virtual addresses (`RTE_IOVA_VA`), which
    /// is what lets [`crate::Mbuf::from_external`] hand any memory to a
    /// device.
    pub fn iova_is_va(&self) -> bool {
        // SAFETY: the EAL is initialised (self exists).
        unsafe { dpdk_sys::rte_eal_iova_mode() == dpdk_sys::RTE_IOVA_VA }
    }

    /// The lcore id of the calling thread, `None` on a thread the EAL does
    /// not know (any thread but the main lcore and the EAL's workers).
    pub fn current_lcore(&self) -> Option<u32> {
        // SAFETY: reads a thread-local variable of the EAL.
        let id = unsafe { dpdk_sys::shim_rte_lcore_id() };
        (id != dpdk_sys::LCORE_ID_ANY).then_some(id)
    }

    /// Gives the calling thread an lcore id (`rte_thread_register`), so
    /// that mempool caches and per-lcore state work on threads the EAL did
    /// not start; a thread that already has one keeps it. The thread
    /// releases the id with [`Eal::unregister_current_thread`] before it
    /// ends.
    pub fn register_current_thread(&self) -> Result<u32> {
        if let Some(id) = self.current_lcore() {
            return Ok(id);
        }
        // SAFETY: the EAL is initialised; registration touches only the
        // calling thread's lcore state.
        let ret = unsafe { dpdk_sys::rte_thread_register() };
        if ret != 0 {
            return Err(Error::from_errno("rte_thread_register"));
        }
        self.current_lcore()
            .ok_or_else(|| Error::InvalidArgument("rte_thread_register gave no lcore id".into()))
    }

    /// Releases the lcore id [`Eal::register_current_thread`] gave the
    /// calling thread.
    pub fn unregister_current_thread(&self) {
        // SAFETY: the EAL is initialised; a thread without a registered
        // id is ignored by DPDK.
        unsafe { dpdk_sys::rte_thread_unregister() }
    }

    /// The NUMA socket of `lcore`.
    pub fn socket_of_lcore(&self, lcore: u32) -> u32 {
        // SAFETY: the EAL is initialised; out-of-range lcores yield 0.
        unsafe { dpdk_sys::rte_lcore_to_socket_id(lcore) }
    }

    /// How many lcores the EAL runs.
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: the EAL is initialised.
        unsafe { dpdk_sys::rte_lcore_count() }
    }
}

fn run_eal_init(args: &[String]) -> std::result::Result<Eal, Error> {
    let mut owned = Vec::with_capacity(args.len() + 1);
    owned.push(CString::new("uwarp").expect("no NUL"));
    for a in args {
        owned.push(
            CString::new(a.as_str())
                .map_err(|_| Error::InvalidArgument(format!("EAL argument {a:?} contains NUL")))?,
        );
    }
    // rte_eal_init permutes argv and may keep pointers into the strings
    // (device arguments, the program name), so argv and its strings live as
    // long as the process: this runs once.
    let argv: &'static mut [*mut c_char] = Vec::leak(
        owned
            .into_iter()
            .map(CString::into_raw)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect(),
    );
    let argc = c_int::try_from(argv.len() - 1).expect("few arguments");
    let affinity = ThreadAffinity::current();
    // SAFETY: argv holds argc valid NUL-terminated strings and a final
    // NULL, all leaked; this is the only call in the process (OnceLock).
    let ret = unsafe { dpdk_sys::rte_eal_init(argc, argv.as_mut_ptr()) };
    if ret < 0 {
        return Err(Error::from_errno("rte_eal_init"));
    }
    // The EAL pins the calling thread to its main lcore's CPU, and every
    // thread spawned from it after would inherit that one CPU: the
    // runtime's unpinned cores and the application's threads would all
    // share CPU 0. Cores that want a CPU pin themselves.
    if let Some(affinity) = affinity {
        affinity.restore();
    }
    log_to_plain_stderr();
    Ok(Eal {
        args: args.to_vec(),
    })
}

/// Sends DPDK's log to C's `stderr` itself instead of the stream
/// `rte_eal_init` opened for it.
///
/// On Linux the EAL's default log stream (DPDK 22.11,
/// `lib/eal/linux/eal_log.c`) is a `fopencookie` stream whose writer
/// copies each message to `stderr` and then calls `syslog(3)`. That makes
/// a process hang at exit: `exit` flushes every stdio stream while it
/// holds glibc's lock of the list of streams, and flushing the log stream
/// waits in `syslog` for syslog's lock; meanwhile a message the EAL's
/// interrupt thread logs (net_memif's handler of its peer's disconnect
/// does) holds syslog's lock and, inside `syslog`, `localtime_r` → `tzset`
/// → `fopen` waits for the list's lock. `stderr` is unbuffered and
/// writing to it takes only its own lock, so no order of the two threads
/// can deadlock; messages still reach file descriptor 2, where the
/// callers that capture the EAL's output read them.
fn log_to_plain_stderr() {
    // SAFETY: the EAL is initialised; `stderr` is C's standard error
    // stream, open for the life of the process, and rte_openlog_stream
    // only records the pointer (it always returns 0).
    unsafe {
        dpdk_sys::rte_openlog_stream(dpdk_sys::stderr);
    }
}

/// A thread's CPU affinity mask, saved to be put back.
struct ThreadAffinity(libc::cpu_set_t);

impl ThreadAffinity {
    /// The calling thread's mask, if the system tells it.
    fn current() -> Option<Self> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid cpu_set_t of the size given; 0 names the
        // calling thread.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        (rc == 0).then_some(ThreadAffinity(set))
    }

    /// Makes it the calling thread's mask again (best effort).
    fn restore(&self) {
        // SAFETY: as in `current`.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_device_arguments() {
        let c = EalConfig::virtual_devices(["net_ring0", "net_tap0,iface=uw0"]);
        assert_eq!(
            c.args(),
            [
                "--no-huge",
                "-m",
                "256",
                "--no-shconf",
                "--no-pci",
                "--no-telemetry",
                "--vdev",
                "net_ring0",
                "--vdev",
                "net_tap0,iface=uw0",
                "-l",
                "0"
            ]
        );
    }

    #[test]
    fn pci_arguments_and_lcore_choices() {
        let c = EalConfig::pci_devices(["0000:03:00.0", "0000:03:00.1"])
            .lcores(Lcores::Map("0@0,1@(2-3)".into()))
            .driver_path(DEBIAN_DRIVER_DIR);
        assert_eq!(
            c.args(),
            [
                "-a",
                "0000:03:00.0",
                "-a",
                "0000:03:00.1",
                "-d",
                DEBIAN_DRIVER_DIR,
                "--lcores=0@0,1@(2-3)"
            ]
        );
        let c = EalConfig::pci_devices(["0000:03:00.0"]).lcores(Lcores::List("0-3".into()));
        assert_eq!(c.args()[2..], ["-l", "0-3"]);
    }
}
