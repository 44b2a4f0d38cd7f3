//! Drives the siw VM of `scripts/siw-vm/` (Linux soft-iWARP in a QEMU
//! guest) for the tests against the kernel's iWARP: builds it once per
//! test binary, boots it with a set of siw's module parameters to run one
//! shell line, and reads what that prints. The VM is at [`VM_IP`] behind
//! the tap [`TAP`], the host at [`HOST_IP`].

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The host's end of the tap.
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
/// The VM's eth0, where siw is attached.
pub const VM_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
/// uwarp on DPDK, on net_af_packet on the host's end of the tap.
pub const DPDK_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 3);
/// The host's end of the tap, as run.sh names it.
pub const TAP: &str = "uwsiw0";
/// The whole VM run, boot included (run.sh powers it off after that).
pub const VM_TIMEOUT_SECS: u32 = 300;

/// The VM's scripts.
pub fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/siw-vm")
}

/// Builds the VM once per test binary (a no-op when it is up to date).
pub fn build_vm() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg(scripts().join("build.sh"))
            .stdout(Stdio::null())
            .status()
            .expect("run build.sh");
        assert!(status.success(), "scripts/siw-vm/build.sh failed");
    });
}

/// A running `run.sh`: its output lines arrive on `lines`. Dropping it
/// stops the VM (SIGTERM: run.sh then kills qemu and removes the tap).
pub struct Vm {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Vm {
    /// Boots the VM with siw's `params` to run the shell line `command`,
    /// and waits until siw is attached and the command starts.
    pub fn boot(params: &str, command: &str) -> Self {
        let mut vm = Self::start(params, command);
        vm.expect("uwsiw: ready");
        vm
    }

    /// Starts booting the VM with siw's `params` to run the shell line
    /// `command`.
    pub fn start(params: &str, command: &str) -> Self {
        build_vm();
        let mut child = Command::new("bash")
            .arg(scripts().join("run.sh"))
            .args(["--siw", params, "--timeout", &VM_TIMEOUT_SECS.to_string()])
            .args(["exec", "sh", "-c", command])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run run.sh");
        let stdout = child.stdout.take().expect("run.sh's stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                println!("vm: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Vm { child, lines }
    }

    /// Waits until run.sh has made the tap (qemu is starting).
    pub fn wait_for_tap(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(u64::from(VM_TIMEOUT_SECS));
        while !std::path::Path::new("/sys/class/net").join(TAP).exists() {
            self.assert_running();
            assert!(Instant::now() < deadline, "run.sh never made {TAP}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the VM to print `wanted`; panics if it stops first.
    pub fn expect(&mut self, wanted: &str) {
        self.expect_with(&format!("{wanted:?}"), |line| {
            assert!(!line.contains("data mismatch"), "siw's rping: {line}");
            (line == wanted).then_some(())
        });
    }

    /// Waits for the first line that `take` makes something of (`what`
    /// names it in the panic if the VM stops first, or prints nothing
    /// for [`VM_TIMEOUT_SECS`]), and returns that.
    pub fn expect_with<T>(&mut self, what: &str, mut take: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(u64::from(VM_TIMEOUT_SECS));
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(found) = take(&line) {
                        return found;
                    }
                }
                Err(err) => panic!("the VM never printed {what} ({err}): {}", self.stop()),
            }
        }
    }

    /// The exit status the VM reported for the run it named `label` (see
    /// [`report_status`]), once it comes.
    pub fn status_of(&mut self, label: &str) -> String {
        let done = format!("uwsiw-test: done {label} rc=");
        self.expect_with(&format!("{label}'s end"), |line| {
            line.strip_prefix(&done).map(str::to_owned)
        })
    }

    /// Whether the siw `rping` run the VM named `label` ended well: it
    /// exited 0, or 255 right after its exit race ([`RPING_EXIT_RACE`],
    /// see [`Vm::finish`]). `Err` holds any other status; a ping's data
    /// found wrong panics.
    pub fn rping_status_of(&mut self, label: &str) -> Result<(), String> {
        let done = format!("uwsiw-test: done {label} rc=");
        let mut raced = false;
        let status = self.expect_with(&format!("{label}'s end"), |line| {
            assert!(!line.contains("data mismatch"), "siw's rping: {line}");
            raced |= line == RPING_EXIT_RACE;
            line.strip_prefix(&done).map(str::to_owned)
        });
        match status.as_str() {
            "0" => Ok(()),
            "255" if raced => Ok(()),
            _ => Err(status),
        }
    }

    /// Panics unless the VM still runs. A connection to the VM's address
    /// is made only after this: once the tap is gone the host would route
    /// it elsewhere.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the VM stopped: {status}");
        }
    }

    /// Waits for the VM's command to end; panics unless it succeeded and
    /// siw's rping never found a ping's data wrong ("data mismatch!").
    /// (rping's exit status says less: when it exits, its connection
    /// manager thread may find the event channel closed under it, print
    /// [`RPING_EXIT_RACE`] and exit with 255.)
    pub fn finish(mut self) {
        let status = self.child.wait().expect("wait for run.sh");
        assert!(status.success(), "the VM's command failed: {status}");
        let mismatch = self
            .lines
            .try_iter()
            .find(|line| line.contains("data mismatch"));
        assert_eq!(mismatch, None, "siw's rping found wrong data");
    }

    /// Stops the VM (SIGTERM: run.sh kills qemu and removes the tap) and
    /// says how run.sh ended.
    pub fn stop(&mut self) -> String {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill has no memory preconditions; the pid is our child's.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        }
        match self.child.wait() {
            Ok(status) => format!("run.sh ended: {status}"),
            Err(err) => format!("run.sh: {err}"),
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the VM's kernel printed on its console in the last boot (run.sh
/// writes it to the cache's `log/console-TAP.log`).
pub fn console_log() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/siw-vm/log")
        .join(format!("console-{TAP}.log"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

pub use crate::free_port;

/// A VM shell line that starts `server` (listening on `port` of the VM),
/// announces "uwsiw-test: serving LABEL" once the kernel lists the port
/// as listening, and waits for the server to exit.
///
/// Announcing only then matters: siw's `siw_create_listen` calls
/// `listen()` before it marks its endpoint as listening, and a connection
/// that completes in between is never accepted (the client's MPA Request
/// waits for a Reply that never comes). A client that starts at the
/// announcement and retries refused connections meets a listener that is
/// ready. A server that exits before it listens is announced too, so the
/// client's error is the server's, not a hang.
pub fn announced_server(server: &str, port: u16, label: &str) -> String {
    announced_server_then(server, port, label, "true")
}

/// [`announced_server`], running the shell line `then` after the
/// announcement, while the server runs (its pid is in `$p`).
pub fn announced_server_then(server: &str, port: u16, label: &str, then: &str) -> String {
    format!(
        "{server} & p=$!; \
         while kill -0 $p 2>/dev/null && ! grep -q ':{port:04X} 00000000:0000 0A' /proc/net/tcp; \
         do sleep 0.1; done; \
         echo \"uwsiw-test: serving {label}\"; {then}; wait $p"
    )
}

/// What Debian's `rping` prints when its connection manager thread finds
/// the event channel closed under it as the program exits (it then exits
/// with 255 after a run that went well).
pub const RPING_EXIT_RACE: &str = "rdma_get_cm_event: Bad file descriptor";

/// A VM shell line that reports `status` (a shell expression: `$?`, a
/// variable) as the exit status of the run it names `label`, for
/// [`Vm::status_of`].
pub fn report_status(label: &str, status: &str) -> String {
    format!("echo \"uwsiw-test: done {label} rc={status}\"")
}
