//! `uwarp-run PROGRAM [ARGS]...`: runs an unmodified RDMA program on
//! uwarp.
//!
//! The program's `libibverbs.so.1` is uwarp's drop-in
//! (`libuwarp_verbs.so`, built beside this binary): `uwarp-run` makes a
//! directory of links beside it, `uwarp-libs/`, giving that shared object
//! the library names programs load, puts it first on `LD_LIBRARY_PATH`, sets the `UWARP_*`
//! variables its options name, and replaces itself with the program
//! (its exit status and signals are the program's own).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Parser;

/// The library names the shared object answers to.
const NAMES: [&str; 2] = ["libibverbs.so.1", "librdmacm.so.1"];

/// The shared object cargo builds.
const LIBRARY: &str = "libuwarp_verbs.so";

/// Runs an unmodified RDMA program (built against rdma-core's libibverbs)
/// on uwarp: no kernel module, no RDMA NIC.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The transport: `socket` (iWARP over the kernel's TCP) or `dpdk`
    /// (uwarp's TCP on a DPDK port: give --iface, or --eal and --ip).
    #[arg(long, default_value = "socket")]
    transport: String,
    /// DPDK: the EAL's arguments, e.g. "--vdev net_tap0,iface=uw0".
    #[arg(long, allow_hyphen_values = true)]
    eal: Option<String>,
    /// DPDK: run on queue 0 of this kernel interface through AF_XDP,
    /// beside the kernel, on the interface's own address (instead of
    /// --eal, --port, --ip, --mac, --gateway, --vlan). Needs root.
    #[arg(long, conflicts_with_all = ["eal", "port", "ip", "mac", "gateway", "vlan"])]
    iface: Option<String>,
    /// DPDK: the port's name (by default the first --vdev or -a of --eal).
    #[arg(long)]
    port: Option<String>,
    /// DPDK: this host's ADDRESS/PREFIX on the port, e.g. 10.0.0.2/24.
    #[arg(long)]
    ip: Option<String>,
    /// DPDK: this host's MAC address (by default the port's).
    #[arg(long)]
    mac: Option<String>,
    /// DPDK: the default gateway.
    #[arg(long)]
    gateway: Option<String>,
    /// DPDK: the IEEE 802.1Q VLAN the port is on, ID or ID:PCP (e.g. 42 or
    /// 42:5): only frames tagged with ID are taken, every frame sent is
    /// tagged with ID and priority PCP (0 by default).
    #[arg(long, value_name = "ID[:PCP]")]
    vlan: Option<String>,
    /// DPDK: dataplane cores, each on a queue of the port, wherever the
    /// kernel runs them (1 by default).
    #[arg(long, conflicts_with = "cpus")]
    cores: Option<u16>,
    /// DPDK: CONTROL,DATAPLANE[,DATAPLANE...]: the control core and one
    /// dataplane core per further CPU, each pinned to its CPU.
    #[arg(long)]
    cpus: Option<String>,
    /// How long an active side holds its first FPDU back after the
    /// peer's MPA Reply, in milliseconds (0 by default; 200 against Linux
    /// siw's servers).
    #[arg(long)]
    first_fpdu_delay_ms: Option<u64>,
    /// Socket transport: what a bind to a loopback address gives:
    /// `device` (the default: the device, so that programs on one host
    /// run over loopback) or `any` (no device, as on Linux's RDMA CM:
    /// libfabric and Open MPI, which bind "localhost" to find their
    /// address, then take the host's address on its links; for ranks
    /// across hosts).
    #[arg(long)]
    loopback_bind: Option<String>,
    /// What the library prints on standard error: off, error (the
    /// default) or info.
    #[arg(long)]
    log: Option<String>,
    /// Print the directory of library links (for setting
    /// `LD_LIBRARY_PATH` by hand) and exit.
    #[arg(long)]
    print_lib_dir: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("uwarp-run: {message}");
            ExitCode::from(127)
        }
    }
}

/// Runs the program (or prints the directory); returns only on failure.
fn run(cli: Cli) -> Result<(), String> {
    let library = find_library()?;
    let dir = link_directory(&library)?;
    if cli.print_lib_dir {
        println!("{}", dir.display());
        return Ok(());
    }
    let (program, args) = cli
        .command
        .split_first()
        .ok_or("name the program to run, e.g. `uwarp-run ibv_devinfo`")?;
    let mut search = OsString::from(&dir);
    if let Some(previous) = std::env::var_os("LD_LIBRARY_PATH") {
        search.push(":");
        search.push(previous);
    }
    let mut command = Command::new(program);
    command
        .args(args)
        .env("LD_LIBRARY_PATH", search)
        .env("UWARP_TRANSPORT", &cli.transport);
    let cores = cli.cores.map(|n| n.to_string());
    let first_fpdu_delay = cli.first_fpdu_delay_ms.map(|ms| ms.to_string());
    for (name, value) in [
        ("UWARP_EAL", &cli.eal),
        ("UWARP_IFACE", &cli.iface),
        ("UWARP_PORT", &cli.port),
        ("UWARP_IP", &cli.ip),
        ("UWARP_MAC", &cli.mac),
        ("UWARP_GATEWAY", &cli.gateway),
        ("UWARP_VLAN", &cli.vlan),
        ("UWARP_CORES", &cores),
        ("UWARP_CPUS", &cli.cpus),
        ("UWARP_FIRST_FPDU_DELAY_MS", &first_fpdu_delay),
        ("UWARP_LOOPBACK_BIND", &cli.loopback_bind),
        ("UWARP_LOG", &cli.log),
    ] {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    let error = command.exec();
    Err(format!(
        "cannot run {}: {error}",
        Path::new(program).display()
    ))
}

/// The newest `libuwarp_verbs.so` among the places cargo puts it beside
/// this binary (`cargo build` uplifts it; `cargo test` leaves it in
/// `deps/`) and where `scripts/install.sh` puts it (`PREFIX/lib/uwarp/`
/// for `PREFIX/bin/uwarp-run`), or the one `UWARP_VERBS_LIBRARY` names.
fn find_library() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("UWARP_VERBS_LIBRARY") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let dir = exe.parent().ok_or("my path has no directory")?;
    let installed = dir.join("../lib/uwarp").join(LIBRARY);
    [dir.join(LIBRARY), dir.join("deps").join(LIBRARY), installed]
        .into_iter()
        .filter_map(|path| {
            let modified = path.metadata().and_then(|m| m.modified()).ok()?;
            Some((modified, path))
        })
        .max()
        .map(|(_, path)| path)
        .ok_or_else(|| {
            format!(
                "no {LIBRARY} beside {} (build it: cargo build -p uwarp-verbs), \
                 or name it in UWARP_VERBS_LIBRARY",
                dir.display()
            )
        })
}

/// The directory `uwarp-libs/` beside `library`, whose entries
/// ([`NAMES`]) link to it, each remade atomically (programs started at
/// the same time never see one missing).
fn link_directory(library: &Path) -> Result<PathBuf, String> {
    let library = library
        .canonicalize()
        .map_err(|e| format!("{}: {e}", library.display()))?;
    let dir = library.with_file_name("uwarp-libs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for name in NAMES {
        if std::fs::read_link(dir.join(name)).is_ok_and(|target| target == library) {
            continue; // already right: an installed, read-only directory stays as it is
        }
        let staged = dir.join(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&staged);
        std::os::unix::fs::symlink(&library, &staged)
            .and_then(|()| std::fs::rename(&staged, dir.join(name)))
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
    }
    Ok(dir)
}
