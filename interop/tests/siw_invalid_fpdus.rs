//! Captures of Linux siw answering invalid FPDUs: the test vectors of
//! `uwarp-perf decode` on misbehaving peers (`bench/tests/decode_invalid.rs`,
//! issue 30).
//!
//! For each case the siw VM of `scripts/siw-vm/` (siw's default
//! parameters: no CRC, no peer-to-peer) runs Debian's `rping -s`, and a
//! probe on the host connects to it over the kernel's TCP, exchanges an
//! MPA Request and Reply as rping's client would (revision 2, IRD and ORD
//! 1, no CRC), waits out siw's accept race, sends one FPDU that is wrong
//! in one way, and reads what siw answers until it closes. tshark records
//! each connection on the tap, handshake to close, into
//! `tests/data/siw/tap/tap-74NN-probe-NAME.pcap`:
//!
//! | NN | NAME | the FPDU |
//! | --- | --- | --- |
//! | 01 | `unknown-opcode` | a Send whose RDMAP opcode is 0xC |
//! | 02 | `bad-ddp-version` | a Send with DDP version 2 |
//! | 03 | `bad-msn` | the first Send with MSN 7 |
//! | 04 | `send-too-long` | a Send of 200 octets into rping's 16-octet receive |
//! | 05 | `read-request-bad-stag` | a Read Request for a source STag siw never gave out |
//!
//! Ignored: it rewrites test data. Run it by hand, as root, after changing
//! a case, and commit the captures:
//! `cargo test -p uwarp-interop --test siw_invalid_fpdus -- --ignored`.
//! It checks that siw answered each FPDU with a Terminate and closed.

mod siw_vm;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use siw_vm::{announced_server, report_status, Vm, TAP, VM_IP};
use uwarp_stack::wire::fpdu;
use uwarp_stack::wire::mpa::{FrameKind, HEADER_LEN};
use uwarp_stack::wire::rdmap::ReadRequest;
use uwarp_testing::siw_frames::{startup, untagged};
use uwarp_testing::{root_or_skip, serial};

/// Where siw's rping listens.
const PORT: u16 = 7400;
/// How long the probe waits after siw's Reply before its FPDU (siw's
/// accept race, docs/siw-interop.md).
const ACCEPT_RACE: Duration = Duration::from_millis(200);
/// Any one read or connection.
const STEP: Duration = Duration::from_secs(20);

/// One invalid FPDU and the capture it goes to.
struct Case {
    /// The NN of its file name.
    number: u16,
    /// The NAME of its file name.
    name: &'static str,
    /// The ULPDU the probe sends, framed without CRC.
    ulpdu: Vec<u8>,
}

/// RDMAP control octets: version 1 with the Send and Read Request
/// opcodes, and with the unassigned opcode 0xC (RFC 5040 section 4.3).
const SEND: u8 = 0x43;
const READ_REQUEST: u8 = 0x41;
const UNKNOWN_OPCODE: u8 = 0x4c;

fn cases() -> Vec<Case> {
    let mut bad_version = untagged(SEND, 0, 1, &[0x5a; 16]);
    // DDP's control octet: L, and version 2 in its last two bits.
    bad_version[0] = 0x42;
    let read_request = ReadRequest {
        sink_stag: 0x1234_5600,
        sink_to: 0x7f00_0000_2000,
        size: 64,
        source_stag: 0xdead_0000,
        source_to: 0x1000,
    };
    vec![
        Case {
            number: 1,
            name: "unknown-opcode",
            ulpdu: untagged(UNKNOWN_OPCODE, 0, 1, &[0x5a; 16]),
        },
        Case {
            number: 2,
            name: "bad-ddp-version",
            ulpdu: bad_version,
        },
        Case {
            number: 3,
            name: "bad-msn",
            ulpdu: untagged(SEND, 0, 7, &[0x5a; 16]),
        },
        Case {
            number: 4,
            name: "send-too-long",
            ulpdu: untagged(SEND, 0, 1, &[0x5a; 200]),
        },
        Case {
            number: 5,
            name: "read-request-bad-stag",
            ulpdu: untagged(READ_REQUEST, 1, 1, &read_request.to_bytes()),
        },
    ]
}

/// tshark recording the connections to [`PORT`] on the tap into a file.
struct Recording {
    child: Child,
}

impl Recording {
    /// Starts tshark on the tap, and waits until it captures.
    fn start(file: &Path) -> Self {
        let _ = std::fs::remove_file(file);
        let mut child = Command::new("tshark")
            .args(["-i", TAP, "-F", "pcap", "-f", &format!("tcp port {PORT}")])
            .arg("-w")
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tshark runs (scripts/setup.sh installs it)");
        let stderr = child.stderr.take().expect("piped");
        let (started, said) = std::sync::mpsc::channel();
        // Drained until tshark exits: a closed pipe would kill it.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Capture started") {
                    let _ = started.send(());
                }
            }
        });
        said.recv_timeout(STEP).expect("tshark starts capturing");
        Recording { child }
    }

    /// Stops tshark (SIGINT, which has it write what it holds).
    fn stop(mut self) {
        std::thread::sleep(Duration::from_millis(500));
        let interrupted = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(interrupted.success(), "tshark could not be stopped");
        self.child.wait().expect("tshark exits");
    }
}

/// The probe: MPA Request and Reply, then `ulpdu` as an FPDU; returns
/// everything siw sent after its Reply, until it closed.
fn probe(ulpdu: &[u8]) -> Vec<u8> {
    let siw = SocketAddr::from((VM_IP, PORT));
    let mut stream = TcpStream::connect_timeout(&siw, STEP).expect("connect to siw's rping");
    stream.set_read_timeout(Some(STEP)).expect("a read timeout");
    stream
        .write_all(&startup(FrameKind::Request))
        .expect("send the MPA Request");
    let mut reply = [0; HEADER_LEN];
    stream.read_exact(&mut reply).expect("siw's MPA Reply");
    let pd_len = usize::from(u16::from_be_bytes([reply[18], reply[19]]));
    let mut private_data = vec![0; pd_len];
    stream
        .read_exact(&mut private_data)
        .expect("the Reply's private data");
    std::thread::sleep(ACCEPT_RACE);
    let fpdu = fpdu::to_vec(&[ulpdu], false).expect("an FPDU");
    stream.write_all(&fpdu).expect("send the FPDU");
    let mut answer = Vec::new();
    // A reset after the Terminate leaves what came before it here.
    let _ = stream.read_to_end(&mut answer);
    answer
}

/// The file of `case`.
fn capture_file(case: &Case) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/siw/tap")
        .join(format!("tap-74{:02}-probe-{}.pcap", case.number, case.name))
}

#[test]
#[ignore = "rewrites tests/data/siw/tap/tap-74NN-*.pcap; run by hand as root"]
fn write_captures_of_siw_answering_invalid_fpdus() {
    if !root_or_skip("the siw VM (a tap)") {
        return;
    }
    let _serial = serial();
    let cases = cases();
    // One rping server after another, each announced ("case $n" is
    // expanded by the VM's shell; the command rides on the kernel's
    // command line, which has no room for five copies).
    let label = "case $n";
    let server = announced_server(
        &format!("rping -s -a {VM_IP} -p {PORT} -C 1 -S 64"),
        PORT,
        label,
    );
    let command = format!(
        "for n in $(seq {}); do {server}; {}; done",
        cases.len(),
        report_status(label, "$?")
    );
    let mut vm = Vm::boot("", &command);
    for (n, case) in (1..).zip(&cases) {
        vm.expect(&format!("uwsiw-test: serving case {n}"));
        let file = capture_file(case);
        let recording = Recording::start(&file);
        let answer = probe(&case.ulpdu);
        recording.stop();
        // MPA's length, DDP's control octet, RDMAP's: opcode 7.
        assert!(
            answer.len() >= 4 && answer[3] & 0x0f == 7,
            "{}: siw answered {answer:02x?}",
            case.name
        );
        println!(
            "{}: siw's Terminate {:02x?}, {} octets in {}",
            case.name,
            &answer[..answer.len().min(48)],
            answer.len(),
            file.display()
        );
        let status = vm.status_of(&format!("case {n}"));
        println!("{}: siw's rping exited {status}", case.name);
    }
    vm.finish();
}
