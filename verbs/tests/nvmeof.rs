//! NVMe over Fabrics against the kernel: the siw VM of `scripts/siw-vm/`
//! runs Linux's own NVMe-oF RDMA target (`nvmet`, `nvmet_rdma`) on siw,
//! serving a RAM disk (`brd`, `/dev/ram0`) as namespace 1 of a subsystem
//! any host may use, configured through configfs at 10.79.0.2:4420; on
//! the host, PyPI's `nvmeof` (a userspace NVMe/RDMA initiator in Python
//! on the `ibverbs` bindings, which `dlopen` libibverbs.so.1 and
//! librdmacm.so.1) runs on uwarp's drop-in libraries under `uwarp-run`,
//! driven by `tests/nvmeof_host.py`: once on the socket transport (the
//! kernel's TCP), then on DPDK (uwarp's own TCP, on `net_af_packet` on
//! the VM's tap), against the same target in one boot.
//!
//! Each host connects (the admin queue, then an I/O queue, each its own
//! connection), identifies the controller and the namespace, reads a
//! range the VM filled with random data before the target started, then
//! writes patterns at several LBAs and sizes (one block, a page, more
//! than a page, 128 KiB, 1 MiB (the target's largest transfer), 2 MiB in
//! two commands, 196 KiB), reads each back, writes them all again with
//! every command outstanding at once and reads them back so. The target
//! moves a write's data with RDMA Reads of the host's memory and a read's
//! with RDMA Writes into it; each command's response is a Send.
//!
//! Checked: the driver's own comparisons (it exits non-zero at the first
//! difference, or at octets changed around a buffer); the controller's
//! identity (Linux's model, its firmware the VM kernel's release, the
//! controller ID, as many commands outstanding as the driver sent) and the
//! namespace's size (the RAM disk's); the random range, as the host read
//! it, against its SHA-256 in the VM; what the host wrote last, against
//! the SHA-256 of `/dev/ram0`'s ranges read in the VM afterwards; and that
//! each host's end closed both its connections (none left established in
//! the VM: with no keep-alive the target would keep a controller whose
//! host vanished).
//!
//! Needs root (the tap), qemu (`scripts/setup.sh`) and the Python packages
//! `scripts/setup.sh` installs into `/opt/uwarp/venv`; the first run
//! builds the VM (`scripts/siw-vm/build.sh`).

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use support::assert_success;
use support::pair::{strings, Running, Side};
use uwarp_testing::siw_vm::{Vm, DPDK_IP, HOST_IP, TAP, VM_IP};
use uwarp_testing::{root_or_skip, serial};

/// The Python with `nvmeof` and `ibverbs` (`scripts/setup.sh`).
const PYTHON: &str = "/opt/uwarp/venv/bin/python3";
/// The subsystem the target serves.
const NQN: &str = "nqn.2026-11.org.uwarp:ram0";
/// NVMe/RDMA's port.
const PORT: u16 = 4420;
/// The RAM disk's size (`brd`'s `rd_size`, in KiB).
const RAM_DISK_KIB: u64 = 64 * 1024;
/// The namespace's block size (brd's logical block size).
const BLOCK: u64 = 512;
/// The range the VM fills with random data before the target starts:
/// LBA and octets.
const PRESET: (u64, u64) = (2048, 65536);
/// The ranges the host writes: LBA and octets.
const WRITES: [(u64, u64); 8] = [
    (0, 512),
    (8, 4096),
    (100, 4608),
    (4096, 128 << 10),
    (8192, 1 << 20),
    (20001, 2 << 20),
    (30001, 512),
    (40000, 196 << 10),
];
/// How long each host's driver may run.
const RUN_LIMIT: Duration = Duration::from_secs(90);
/// How long the VM waits for both hosts' drivers to end.
const VM_WAIT_SECS: u32 = 200;

/// The VM's command: the target's modules, the random range, the kernel's
/// release, the target (announced once it listens), then, once the test says the host is
/// done (a connection to `done_port` on the host), how many connections
/// to the target are still established (after waiting up to 10 s for
/// none), and the SHA-256 of each written range of the RAM disk.
fn vm_command(done_port: u16) -> String {
    let (preset_lba, preset_octets) = PRESET;
    let preset_blocks = preset_octets / BLOCK;
    let namespace = "$s/namespaces/1";
    let port = "$n/ports/1";
    // A connection to the target, established, in /proc/net/tcp.
    let established = format!(":{PORT:04X} [0-9A-F]*:[0-9A-F]* 01 ");
    let mut sums = String::new();
    for (lba, octets) in WRITES {
        let blocks = octets / BLOCK;
        sums += &format!(
            "echo \"uwsiw-test: ram0 {lba} {octets} \
             $(dd if=/dev/ram0 bs={BLOCK} skip={lba} count={blocks} 2>/dev/null | sha256sum)\"; "
        );
    }
    format!(
        "set -e; \
         for m in $(cat /modules/later); do a=; \
           [ $m = brd ] && a='rd_nr=1 rd_size={RAM_DISK_KIB}'; insmod /modules/$m.ko $a; done; \
         dd if=/dev/urandom of=/dev/ram0 bs={BLOCK} seek={preset_lba} count={preset_blocks} 2>/dev/null; \
         echo \"uwsiw-test: preset \
           $(dd if=/dev/ram0 bs={BLOCK} skip={preset_lba} count={preset_blocks} 2>/dev/null | sha256sum)\"; \
         echo \"uwsiw-test: kernel $(uname -r)\"; \
         mount -t configfs none /sys/kernel/config; \
         n=/sys/kernel/config/nvmet; s=$n/subsystems/{NQN}; \
         mkdir $s; echo 1 > $s/attr_allow_any_host; \
         mkdir {namespace}; echo /dev/ram0 > {namespace}/device_path; echo 1 > {namespace}/enable; \
         mkdir {port}; echo rdma > {port}/addr_trtype; echo ipv4 > {port}/addr_adrfam; \
         echo {VM_IP} > {port}/addr_traddr; echo {PORT} > {port}/addr_trsvcid; \
         ln -s $s {port}/subsystems/{NQN}; \
         while ! grep -q ':{PORT:04X} 00000000:0000 0A' /proc/net/tcp; do sleep 0.1; done; \
         echo 'uwsiw-test: serving nvmet'; \
         timeout {VM_WAIT_SECS} nc {HOST_IP} {done_port} > /dev/null; \
         i=0; while grep -q '{established}' /proc/net/tcp && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
         echo \"uwsiw-test: established $(grep -c '{established}' /proc/net/tcp)\"; \
         sync; echo 3 > /proc/sys/vm/drop_caches; \
         {sums}true"
    )
}

/// Waits for the VM's connection on `done` (the VM asks once its target
/// serves) and answers it: the host is done.
fn tell_vm_done(vm: &mut Vm, done: &TcpListener) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut asker = loop {
        match done.accept() {
            Ok((stream, _)) => break stream,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                vm.assert_running();
                assert!(Instant::now() < deadline, "the VM never asked");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(err) => panic!("the VM's port: {err}"),
        }
    };
    asker.write_all(b"done\n").expect("the word goes");
}

/// The value of `key=VALUE` among the words of `line`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
}

/// How the host's driver reaches the target: its name in messages,
/// `uwarp-run`'s options, and the address it connects from.
struct HostTransport {
    name: &'static str,
    options: Vec<String>,
    source: Ipv4Addr,
}

/// The transports the host's driver runs on, one after the other: the
/// kernel's TCP (the socket transport, from the tap's host end), then
/// uwarp's TCP on DPDK's `net_af_packet` on the same tap, at its own
/// address. Each holds its first FPDU back 200 ms after siw's MPA Reply:
/// siw's accept race (docs/siw-interop.md).
fn host_transports() -> [HostTransport; 2] {
    let delay = ["--first-fpdu-delay-ms", "200"];
    let eal = format!("--vdev net_af_packet0,iface={TAP}");
    let ip = format!("{DPDK_IP}/24");
    [
        HostTransport {
            name: "socket",
            options: strings(&delay),
            source: HOST_IP,
        },
        HostTransport {
            name: "dpdk",
            options: strings(
                &[
                    &delay[..],
                    &["--transport", "dpdk", "--eal", &eal, "--ip", &ip],
                ]
                .concat(),
            ),
            source: DPDK_IP,
        },
    ]
}

/// Runs the host's driver on `transport` against the VM's target: its
/// output, and how long it ran.
fn drive_host(transport: &HostTransport) -> (std::process::Output, Duration) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvmeof_host.py");
    let ram_disk = (RAM_DISK_KIB * 1024).to_string();
    let mut args = vec![script.display().to_string()];
    args.extend(strings(&[
        "--target",
        &VM_IP.to_string(),
        "--source",
        &transport.source.to_string(),
        "--port",
        &PORT.to_string(),
        "--nqn",
        NQN,
        "--size",
        &ram_disk,
        "--preset",
        &format!("{}:{}", PRESET.0, PRESET.1),
    ]));
    for (lba, octets) in WRITES {
        args.extend(strings(&["--write", &format!("{lba}:{octets}")]));
    }
    let host = Side {
        tool: PYTHON,
        args,
        options: transport.options.clone(),
    };
    let started = Instant::now();
    let output = Running::start(host.command()).finish(Instant::now() + RUN_LIMIT);
    (output, started.elapsed())
}

/// What the VM saw of the target: its kernel's release, the random
/// range's SHA-256, and (after the hosts) the SHA-256 of each written
/// range of the RAM disk.
struct TargetView {
    kernel: String,
    preset_sum: String,
    ram0: HashMap<(u64, u64), String>,
}

/// Checks what the host's driver on `transport` printed against the
/// target's view: the controller, the namespace, the random range, every
/// read back, and every range the host wrote, as the RAM disk holds it
/// (both hosts write the same patterns: they depend only on the range).
fn check_host(transport: &HostTransport, output: &std::process::Output, target: &TargetView) {
    let name = transport.name;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("the host's driver on the {name} transport:\n{stdout}");
    assert_success(&format!("nvmeof_host.py on uwarp ({name})"), output);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"passed"),
        "the driver did not pass ({name})"
    );

    let line = |prefix: &str| {
        lines
            .iter()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("the driver printed no {prefix:?} line ({name})"))
            .to_owned()
    };
    let controller = line("controller: ");
    assert_eq!(field(controller, "model"), Some("'Linux'"), "{controller}");
    let cntlid: u16 = field(controller, "cntlid")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no controller ID: {controller}"));
    assert!(cntlid >= 1, "{controller}");
    // Linux's target names its firmware after the kernel's release, cut
    // to the field's 8 octets.
    let firmware = field(controller, "firmware")
        .map(|firmware| firmware.trim_matches('\''))
        .unwrap_or_default();
    assert!(
        !firmware.is_empty() && target.kernel.starts_with(firmware),
        "firmware {firmware:?} of kernel {}: {controller}",
        target.kernel
    );
    let max_transfer: u64 = field(controller, "max_transfer")
        .and_then(|octets| octets.parse().ok())
        .unwrap_or_else(|| panic!("no largest transfer: {controller}"));
    let commands: u64 = WRITES
        .iter()
        .map(|(_, octets)| octets.div_ceil(max_transfer))
        .sum();
    for what in ["writes", "reads"] {
        line(&format!("{what} outstanding at once: {commands}"));
    }
    let namespace = line("namespace 1: ");
    let ram_disk = (RAM_DISK_KIB * 1024).to_string();
    assert_eq!(
        field(namespace, "size"),
        Some(ram_disk.as_str()),
        "{namespace}"
    );
    assert_eq!(
        field(namespace, "lba_size"),
        Some(BLOCK.to_string().as_str()),
        "{namespace}"
    );
    let preset = line(&format!("preset lba={} octets={} ", PRESET.0, PRESET.1));
    assert_eq!(
        field(preset, "sha256"),
        Some(target.preset_sum.as_str()),
        "the random range as the host read it ({name})"
    );
    for (lba, octets) in WRITES {
        line(&format!("read lba={lba} octets={octets}: equal"));
        let rewrote = line(&format!("rewrote lba={lba} octets={octets} "));
        assert_eq!(
            field(rewrote, "sha256"),
            target.ram0.get(&(lba, octets)).map(String::as_str),
            "the RAM disk's {octets} octets at LBA {lba} against what the host wrote ({name})"
        );
    }
    line("concurrent reads: equal");
}

#[test]
fn nvmeof_host_on_uwarp_writes_and_reads_the_kernels_nvmet_target_on_siw() {
    if !root_or_skip("the siw VM (its tap)") {
        return;
    }
    let _serial = serial();
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run scripts/setup.sh (it installs nvmeof and ibverbs there)"
    );
    let done = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a port for the VM");
    done.set_nonblocking(true).expect("a non-blocking port");
    let done_port = done.local_addr().expect("its address").port();
    let started = Instant::now();
    let mut vm = Vm::boot("", &vm_command(done_port));
    let booted = started.elapsed();
    let preset_sum = vm.expect_with("the random range's SHA-256", |line| {
        let sum = line.strip_prefix("uwsiw-test: preset ")?;
        sum.split_whitespace().next().map(str::to_owned)
    });
    let kernel = vm.expect_with("its kernel's release", |line| {
        line.strip_prefix("uwsiw-test: kernel ").map(str::to_owned)
    });
    vm.expect("uwsiw-test: serving nvmet");
    vm.assert_running();

    let transports = host_transports();
    let runs: Vec<_> = transports.iter().map(drive_host).collect();
    // Told whatever the drivers' ends, so that the VM ends too.
    tell_vm_done(&mut vm, &done);
    let established = vm.expect_with("the connections left", |line| {
        line.strip_prefix("uwsiw-test: established ")
            .map(str::to_owned)
    });
    let mut ram0 = HashMap::new();
    for _ in WRITES {
        let (range, sum) = vm.expect_with("a range's SHA-256", |line| {
            let mut words = line.strip_prefix("uwsiw-test: ram0 ")?.split_whitespace();
            let lba: u64 = words.next()?.parse().ok()?;
            let octets: u64 = words.next()?.parse().ok()?;
            Some(((lba, octets), words.next()?.to_owned()))
        });
        ram0.insert(range, sum);
    }
    vm.finish();
    let target = TargetView {
        kernel,
        preset_sum,
        ram0,
    };
    for (transport, (output, _)) in transports.iter().zip(&runs) {
        check_host(transport, output, &target);
    }
    assert_eq!(
        established, "0",
        "connections to the target left established after the hosts' ends"
    );
    let durations: Vec<String> = transports
        .iter()
        .zip(&runs)
        .map(|(transport, (_, ran))| format!("{} {:.1} s", transport.name, ran.as_secs_f64()))
        .collect();
    eprintln!(
        "nvmeof against nvmet on siw: passed (VM booted in {:.1} s, the host's driver ran: {})",
        booted.as_secs_f64(),
        durations.join(", ")
    );
}
