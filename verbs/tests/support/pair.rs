//! Two programs at once: a server and a client, each run by `uwarp-run`,
//! the client started once the server is ready.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::debian_tool;

/// Whether a kernel TCP socket listens on `port` (the socket transport's
/// listener, or a program's own), IPv4 or IPv6, read from `/proc/net/tcp`
/// and `tcp6` without touching it: a client refused by a server not yet
/// listening takes an error path of its own, which these tests do not
/// mean to test.
pub fn listening(port: &str) -> bool {
    let Ok(port) = port.parse::<u16>() else {
        return false;
    };
    let wanted = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|table| {
            table
                .lines()
                .any(|line| line.split_whitespace().nth(3) == Some("0A") && line.contains(&wanted))
        })
    })
}

/// Waits up to 20 s for a listener on `port`.
pub fn wait_listening(port: &str) {
    let started = Instant::now();
    while !listening(port) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub use uwarp_testing::free_port;

/// One side of a pair: the program, its arguments, and `uwarp-run`'s
/// options before them.
pub struct Side<'a> {
    /// A Debian tool's name in /usr/bin, or a program's path.
    pub tool: &'a str,
    /// Its arguments.
    pub args: Vec<String>,
    /// `uwarp-run`'s options.
    pub options: Vec<String>,
}

impl Side<'_> {
    /// The command that runs this side.
    pub fn command(&self) -> std::process::Command {
        let program = if Path::new(self.tool).is_absolute() {
            PathBuf::from(self.tool)
        } else {
            debian_tool(self.tool)
        };
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_uwarp-run"));
        command.args(&self.options).arg(program).args(&self.args);
        command
    }
}

/// How long a client may run, and a server after its client ended,
/// before it is killed (its output then shows how far it got).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// How long a server may run after its client failed: it cannot succeed
/// without it (a perftest server whose client was refused between its
/// two listens waits for it for good).
const ORPHAN_LIMIT: Duration = Duration::from_secs(5);

/// A program running with its output read as it comes: a program whose
/// pipe fills (64 KiB pings printed with `-v`) would block and never
/// answer. Dropped unfinished (a test that failed first), it is killed:
/// a server left waiting for a client would outlive the test run. It runs
/// in a process group of its own, killed whole: the processes it forked
/// (fio's jobs) go with it, and with them the last writers of its pipes.
pub struct Running {
    child: Child,
    /// The readers of its output (taken when it is finished).
    output: Option<[JoinHandle<Vec<u8>>; 2]>,
}

impl Running {
    /// Starts `command` with its output read as it comes.
    pub fn start(mut command: Command) -> Running {
        let mut child = command
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the program starts");
        let stdout = drain(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let stderr = drain(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        Running {
            child,
            output: Some([stdout, stderr]),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its output once it ended, killed if it runs past `deadline`. A
    /// program killed at its deadline has its threads' stacks at that
    /// moment (gdb's `thread apply all bt`, when gdb is installed) added
    /// to its stderr, so that a hang says where it hung.
    pub fn finish(mut self, deadline: Instant) -> Output {
        let mut stacks = Vec::new();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("the program's status") {
                break status;
            }
            if Instant::now() > deadline {
                stacks = stacks_of(self.child.id());
                self.kill();
                break self.child.wait().expect("the killed program's status");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // What it forked and left running holds its pipes open.
        self.kill();
        let [stdout, stderr] = self.output.take().expect("finished once");
        let mut stderr = stderr.join().expect("the output reader");
        stderr.extend(stacks);
        Output {
            status,
            stdout: stdout.join().expect("the output reader"),
            stderr,
        }
    }
}

/// The stacks of every thread of process `pid`, as gdb prints them
/// (bounded at 60 s), headed by a line saying what they are; nothing when
/// gdb is not installed.
fn stacks_of(pid: u32) -> Vec<u8> {
    let Ok(output) = Command::new("timeout")
        .args([
            "60",
            "gdb",
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .stdin(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let mut stacks = b"\n--- its threads when its time ran out (gdb) ---\n".to_vec();
    stacks.extend(output.stdout);
    stacks
}

impl Running {
    /// Kills its process group (nothing when every member has ended).
    fn kill(&self) {
        let group = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) touches no memory. The group is the one `start`
        // made, named by the child's pid: Linux hands out no pid still in
        // use as a group's id, so while a member lives it names only this
        // group (and with none left there is nothing to kill).
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads `stream` to its end on a thread of its own.
fn drain(stream: Option<Box<dyn Read + Send>>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut octets = Vec::new();
        if let Some(mut stream) = stream {
            let _ = stream.read_to_end(&mut octets);
        }
        octets
    })
}

/// Runs `tool` as a server with `server_args` on `link`, then, once the
/// link says the server is ready for a client on `port` (or after 20 s),
/// `tool` as its client with `client_args` (again while the server is not
/// yet listening: the client's connect is refused and it exits at once,
/// with one of `refused` in its output), and returns both outputs. Either
/// is killed after [`RUN_LIMIT`] (the client from its start, the server
/// from the client's end; [`ORPHAN_LIMIT`] when the client failed).
pub fn run_pair(
    link: &dyn Link,
    tool: &str,
    port: &str,
    args: [Vec<String>; 2],
    refused: &[&str],
) -> (Output, Output) {
    run_two(link, [tool, tool], port, args, refused)
}

/// [`run_pair`] with a server tool and a client tool of their own (as
/// rdmacm-utils' `rdma_server` and `rdma_client`).
pub fn run_two(
    link: &dyn Link,
    [server_tool, client_tool]: [&str; 2],
    port: &str,
    [server_args, client_args]: [Vec<String>; 2],
    refused: &[&str],
) -> (Output, Output) {
    let [server_options, client_options] = link.start_run();
    let server = Side {
        tool: server_tool,
        args: server_args,
        options: server_options,
    };
    let client = Side {
        tool: client_tool,
        args: client_args,
        options: client_options,
    };
    let server_run = Running::start(server.command());
    let started = Instant::now();
    while !link.server_ready(port) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = loop {
        let client = Running::start(client.command()).finish(Instant::now() + RUN_LIMIT);
        let output = [client.stdout.as_slice(), client.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&output);
        let was_refused = refused.iter().any(|marker| text.contains(marker));
        if client.status.success() || !was_refused || started.elapsed() > Duration::from_secs(20) {
            break client;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let limit = if client.status.success() {
        RUN_LIMIT
    } else {
        ORPHAN_LIMIT
    };
    let server = server_run.finish(Instant::now() + limit);
    (server, client)
}

/// Owned copies of `args`.
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

/// Where the two programs of a pair meet.
pub trait Link {
    /// The address the server listens on and the client connects to.
    fn server_ip(&self) -> &str;

    /// `uwarp-run`'s options for a new run's server and client, with what
    /// an earlier run left behind cleared.
    fn start_run(&self) -> [Vec<String>; 2];

    /// Whether the server of the run, listening on `port`, is ready for
    /// its client.
    fn server_ready(&self, port: &str) -> bool;
}

/// Loopback on the default transport (the kernel's TCP sockets): the
/// server is ready once its kernel listener is.
pub struct Loopback;

impl Link for Loopback {
    fn server_ip(&self) -> &str {
        "127.0.0.1"
    }

    fn start_run(&self) -> [Vec<String>; 2] {
        Default::default()
    }

    fn server_ready(&self, port: &str) -> bool {
        listening(port)
    }
}

/// A net_memif link between two processes, each a uwarp host on DPDK of
/// its own (uwarp's TCP, not the kernel's; the EAL's shared memory needs
/// root): the server at 10.78.0.1, the client at 10.78.0.2. Its socket
/// file goes when it is dropped.
pub struct MemifLink {
    socket: PathBuf,
}

impl MemifLink {
    /// A link whose socket file is named after `name` and this process.
    pub fn new(name: &str) -> MemifLink {
        let socket = std::env::temp_dir().join(format!("uwarp-{name}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        MemifLink { socket }
    }

    /// `uwarp-run`'s options for the server's side and the client's.
    fn options(&self) -> [Vec<String>; 2] {
        let side = |role: &str, last: u8| {
            let eal = format!(
                "--vdev net_memif0,role={role},socket={},socket-abstract=no,mac=02:00:00:00:78:0{last}",
                self.socket.display()
            );
            strings(&[
                "--transport",
                "dpdk",
                "--eal",
                &eal,
                "--ip",
                &format!("10.78.0.{last}/24"),
            ])
        };
        [side("server", 1), side("client", 2)]
    }
}

impl Link for MemifLink {
    fn server_ip(&self) -> &str {
        "10.78.0.1"
    }

    /// The options, once the socket file of an earlier run's server is
    /// gone: DPDK leaves it when its process exits, and a server then
    /// fails to make it again.
    fn start_run(&self) -> [Vec<String>; 2] {
        let _ = std::fs::remove_file(&self.socket);
        self.options()
    }

    /// Whether the server's EAL listens on the link's socket (the
    /// kernel's list of Unix sockets names it; a file left by an earlier
    /// server is not there): the client starts then (two EALs starting at
    /// once sometimes never joined the link).
    fn server_ready(&self, _port: &str) -> bool {
        let path = self.socket.display().to_string();
        std::fs::read_to_string("/proc/net/unix")
            .is_ok_and(|table| table.lines().any(|line| line.ends_with(&path)))
    }
}

impl Drop for MemifLink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A net_tap link between uwarp's TCP and the kernel's: the server is a
/// uwarp host on DPDK whose port is the tap `iface` (at 10.83.0.2), the
/// client uwarp on the socket transport, whose kernel reaches it through
/// the tap (at 10.83.0.1). DPDK makes the tap when its server starts,
/// and takes it away when the server exits.
pub struct TapLink {
    iface: String,
}

impl TapLink {
    /// A link over the tap named `iface`.
    pub fn new(iface: &str) -> TapLink {
        TapLink {
            iface: iface.to_owned(),
        }
    }
}

impl Link for TapLink {
    fn server_ip(&self) -> &str {
        "10.83.0.2"
    }

    fn start_run(&self) -> [Vec<String>; 2] {
        let eal = format!("--vdev net_tap0,iface={}", self.iface);
        let server = strings(&["--transport", "dpdk", "--eal", &eal, "--ip", "10.83.0.2/24"]);
        [server, Vec::new()]
    }

    /// Once DPDK has made the tap, gives the kernel its address on it
    /// (`scripts/topo-tap.sh up`); the server is ready then, or soon (a
    /// client refused meanwhile tries again).
    fn server_ready(&self, _port: &str) -> bool {
        if !Path::new("/sys/class/net").join(&self.iface).exists() {
            return false;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/topo-tap.sh");
        let status = Command::new("bash")
            .arg(script)
            .args(["up", &self.iface, "10.83.0.1/24"])
            .status()
            .expect("topo-tap.sh runs");
        status.success()
    }
}
