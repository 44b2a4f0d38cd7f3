//! iSER on uwarp's drop-ins: Debian's tgt (`tgtd`, its iSER driver on
//! librdmacm) serves a file-backed LUN, and libiscsi's initiator reaches
//! it over `iser://`, both on uwarp over loopback (socket transport):
//! `iscsi-inq`, `iscsi-perf` (SCSI READs, which the target answers with
//! RDMA Writes) and a libiscsi program (`tests/c/iser_rw.c`) that writes
//! patterns of several sizes (SCSI WRITEs, whose data the target pulls
//! with RDMA Reads) and reads them back; the backing file must then hold
//! the same patterns. tgt 1.0.85 wants an initiator-name ACL besides the
//! address one, and keeps the iSER port in a `short`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::pair::{Running, Side};
use support::{assert_success, compile_c_with, debian_tool, uwarp_run};

const TARGET: &str = "iqn.2026-11.org.uwarp:iser-test";
const INITIATOR: &str = "iqn.2026-11.org.uwarp:iser-host";
/// The backing file's size.
const LUN_BYTES: u64 = 64 << 20;
/// The sizes `iser_rw.c` writes, each at LBA `i * 8 MiB / 512`.
const SIZES: [usize; 5] = [512, 4096, 65536, 3 * 65536 + 512, 262144];

/// A TCP port below 32768 (tgt keeps the iSER port in a `short`) that
/// nothing on loopback listens on now.
fn low_port() -> u16 {
    let start = 20000 + (std::process::id() % 5000) as u16;
    (start..start + 2000)
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port below 32768")
}

/// tgtd on uwarp: an iSER listener on `iser_port` and its iSCSI/TCP
/// portal on `tcp_port` (iWARP shares TCP's port space), controlled
/// through control port `control`.
struct Target {
    _tgtd: Running,
    control: String,
    backing: PathBuf,
}

impl Target {
    fn start(iser_port: u16, tcp_port: u16) -> Target {
        let control = (100 + std::process::id() % 800).to_string();
        let backing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("iser-lun.img");
        let file = std::fs::File::create(&backing).expect("the backing file");
        file.set_len(LUN_BYTES).expect("its size");
        let side = Side {
            tool: "/usr/sbin/tgtd",
            args: vec![
                "-f".into(),
                "-C".into(),
                control.clone(),
                "--iscsi".into(),
                format!("portal=127.0.0.1:{tcp_port}"),
                "--iser".into(),
                format!("port={iser_port},pool_sz_mb=64"),
            ],
            options: Vec::new(),
        };
        let tgtd = Running::start(side.command());
        let target = Target {
            _tgtd: tgtd,
            control,
            backing,
        };
        // tgtadm answers once tgtd's control socket is up.
        let started = Instant::now();
        while !target
            .tgtadm(&["--op", "show", "--mode", "target"])
            .status
            .success()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "tgtd did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let backing = target.backing.display().to_string();
        for args in [
            &[
                "--op", "new", "--mode", "target", "--tid", "1", "-T", TARGET,
            ][..],
            &[
                "--op",
                "new",
                "--mode",
                "logicalunit",
                "--tid",
                "1",
                "--lun",
                "1",
                "-b",
                &backing,
            ],
            &[
                "--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL",
            ],
            &[
                "--op",
                "bind",
                "--mode",
                "target",
                "--tid",
                "1",
                "--initiator-name",
                INITIATOR,
            ],
        ] {
            let output = target.tgtadm(args);
            assert_success(&format!("tgtadm {args:?}"), &output);
        }
        target
    }

    fn tgtadm(&self, args: &[&str]) -> Output {
        Command::new("/usr/sbin/tgtadm")
            .args(["-C", &self.control, "--lld", "iser"])
            .args(args)
            .output()
            .expect("tgtadm runs")
    }
}

/// The pattern `iser_rw.c` writes at `lba`.
fn pattern(len: usize, lba: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 31 + lba * 7 + (i as u64 >> 9)) as u8)
        .collect()
}

#[test]
fn tgt_serves_libiscsi_over_iser_on_uwarp() {
    if !uwarp_testing::root_or_skip("tgtd") {
        return;
    }
    let (iser_port, tcp_port) = (low_port(), low_port() + 1);
    let target = Target::start(iser_port, tcp_port);
    let url = format!("iser://127.0.0.1:{iser_port}/{TARGET}/1");

    let inquiry = uwarp_run(debian_tool("iscsi-inq"), &["-i", INITIATOR, &url]);
    assert_success("iscsi-inq", &inquiry);
    let text = String::from_utf8_lossy(&inquiry.stdout);
    assert!(text.contains("Product:VIRTUAL-DISK"), "{text}");

    let program = compile_c_with("iser_rw", &["-liscsi"]);
    let written = uwarp_run(&program, &[&url, INITIATOR]);
    assert_success("iser_rw", &written);
    assert_eq!(String::from_utf8_lossy(&written.stdout), "ok\n");
    let backing = std::fs::read(&target.backing).expect("the backing file");
    for (i, size) in SIZES.into_iter().enumerate() {
        let lba = i as u64 * (8 << 20) / 512;
        let start = (lba * 512) as usize;
        assert!(
            backing[start..start + size] == pattern(size, lba),
            "the backing file does not hold the {size}-octet write"
        );
    }

    let perf = uwarp_run(
        debian_tool("iscsi-perf"),
        &["-i", INITIATOR, "-t", "2", "-b", "16", &url],
    );
    assert_success("iscsi-perf", &perf);
    let text = String::from_utf8_lossy(&perf.stdout);
    let average = text
        .split("iops average ")
        .last()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|iops| iops.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(average > 0, "iscsi-perf measured nothing:\n{text}");
}
