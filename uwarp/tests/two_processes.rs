//! Two endpoints in two processes: this test re-runs its own binary as the
//! server, so the two sides share nothing but the loopback connection.
//! The server registers a 16 MiB region and hands its address and rkey
//! over in the MPA Reply's private data; the client Writes and Reads it
//! at every size of the issue (0, 1, MULPDU - 1, MULPDU, MULPDU + 1,
//! 1 MiB, 16 MiB) and Sends each size, which the server checks octet for
//! octet before it exits. A custom `main` (harness = false) picks the role.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use uwarp::*;

const REGION: usize = 16 << 20;
const WAIT: Duration = Duration::from_secs(60);

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(7) ^ seed) as u8).collect()
}

/// The sizes, given the connection's MULPDU (both sides' MSS is the same
/// on loopback, so both derive the same list).
fn sizes(mulpdu: usize) -> Vec<usize> {
    let one = mulpdu - 18;
    vec![0, 1, one - 1, one, one + 1, 1 << 20, 16 << 20]
}

/// A MULPDU large enough for `sizes`, for counting the sizes before the
/// connection (and its real MULPDU) exists.
fn any_mulpdu() -> usize {
    1_000
}

fn server() -> Result<(), String> {
    let device = Device::open(DeviceConfig::default()).map_err(|e| e.to_string())?;
    let pd = device.alloc_pd().map_err(|e| e.to_string())?;
    let cq = device.create_cq(64);
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let all = Access::LOCAL_WRITE
        .union(Access::REMOTE_WRITE)
        .union(Access::REMOTE_READ);
    let exposed = pd.alloc_mr(REGION, all).map_err(|e| e.to_string())?;
    let inbox = pd
        .alloc_mr(REGION, Access::LOCAL_WRITE)
        .map_err(|e| e.to_string())?;
    let listener = device.listen("127.0.0.1:0").map_err(|e| e.to_string())?;
    println!("{}", listener.local_addr());
    let request = listener.get_request(WAIT).map_err(|e| e.to_string())?;
    let mut advert = exposed.addr().to_be_bytes().to_vec();
    advert.extend_from_slice(&exposed.rkey().to_be_bytes());
    // One receive per size; the list's length does not depend on the MSS.
    for i in 0..sizes(any_mulpdu()).len() {
        qp.post_recv(RecvWr {
            wr_id: i as u64,
            sgl: vec![inbox.whole()],
        })
        .map_err(|e| e.to_string())?;
    }
    let params = LocalParams {
        private_data: advert,
        ..LocalParams::default()
    };
    let connection = request.accept(&qp, params).map_err(|e| e.to_string())?;
    for (i, len) in sizes(connection.mulpdu).into_iter().enumerate() {
        let wc = cq.poll_blocking(WAIT).ok_or("no Send arrived")?;
        if wc.status != WcStatus::Success || wc.byte_len as usize != len {
            return Err(format!("Send {i}: {wc:?}, expected {len} octets"));
        }
        let mut got = vec![0u8; len];
        inbox
            .buffer()
            .read_at(0, &mut got)
            .map_err(|e| e.to_string())?;
        if got != pattern(len, i) {
            return Err(format!("Send {i} of {len} octets arrived corrupted"));
        }
    }
    if !qp.wait_closed(WAIT) {
        return Err("the client never disconnected".into());
    }
    Ok(())
}

fn client() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .arg("--server")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("no stdout")?;
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let addr = line.trim().to_string();

    let device = Device::open(DeviceConfig::default()).map_err(|e| e.to_string())?;
    let pd = device.alloc_pd().map_err(|e| e.to_string())?;
    let cq = device.create_cq(64);
    let qp = device.create_qp(&pd, QpInit::new(&cq));
    let connection = device
        .connect(addr.as_str(), &qp, ConnectParams::default())
        .map_err(|e| e.to_string())?;
    let pdata = &connection.private_data;
    let remote_addr = u64::from_be_bytes(pdata[..8].try_into().map_err(|_| "short private data")?);
    let rkey = u32::from_be_bytes(pdata[8..12].try_into().map_err(|_| "short private data")?);
    let local = pd
        .alloc_mr(REGION, Access::LOCAL_WRITE)
        .map_err(|e| e.to_string())?;
    let sink = pd
        .alloc_mr(REGION, Access::LOCAL_WRITE)
        .map_err(|e| e.to_string())?;
    let wait = |what: &str| -> Result<WorkCompletion, String> {
        let wc = cq
            .poll_blocking(WAIT)
            .ok_or(format!("{what}: no completion"))?;
        if wc.status != WcStatus::Success {
            return Err(format!("{what}: {wc:?}"));
        }
        Ok(wc)
    };
    for (i, len) in sizes(connection.mulpdu).into_iter().enumerate() {
        let data = pattern(len, i);
        local
            .buffer()
            .write_at(0, &data)
            .map_err(|e| e.to_string())?;
        let sge = local.sge(0, len as u32);
        let write = SendOp::Write { remote_addr, rkey };
        qp.post_send(SendWr::new(1, write, Payload::Sgl(vec![sge])))
            .map_err(|e| e.to_string())?;
        wait("Write")?;
        let read = SendOp::Read { remote_addr, rkey };
        qp.post_send(SendWr::new(
            2,
            read,
            Payload::Sgl(vec![sink.sge(0, len as u32)]),
        ))
        .map_err(|e| e.to_string())?;
        let wc = wait("Read")?;
        let mut got = vec![0u8; len];
        sink.buffer()
            .read_at(0, &mut got)
            .map_err(|e| e.to_string())?;
        if wc.byte_len as usize != len || got != data {
            return Err(format!(
                "Write then Read of {len} octets came back different"
            ));
        }
        qp.post_send(SendWr::new(3, SendOp::Send, Payload::Sgl(vec![sge])))
            .map_err(|e| e.to_string())?;
        wait("Send")?;
    }
    qp.disconnect();
    if !qp.wait_closed(WAIT) {
        return Err("the connection did not close".into());
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the server process failed: {status}"));
    }
    Ok(())
}

fn main() {
    let server_role = std::env::args().any(|a| a == "--server");
    // `cargo test` passes its own flags (a filter, --list ...): a listing
    // run names the one test and does nothing else.
    if std::env::args().any(|a| a == "--list") {
        println!("two_processes: test");
        return;
    }
    let result = if server_role { server() } else { client() };
    match result {
        Ok(()) => {
            if !server_role {
                println!("test two_processes ... ok\n\ntest result: ok. 1 passed; 0 failed");
            }
        }
        Err(message) => {
            eprintln!(
                "two_processes ({}): {message}",
                if server_role { "server" } else { "client" }
            );
            std::process::exit(1);
        }
    }
}
