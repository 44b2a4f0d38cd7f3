//! The baseline: the workload's bytes over a plain kernel TCP socket pair
//! on loopback, with no framing, CRC or placement (what the socket
//! transport runs on, so its ceiling).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use hdrhistogram::Histogram;

use super::{Measurement, Workload};

/// Measures bandwidth (one stream of `iters` messages) and latency
/// (`latency_iters` ping-pongs of `size` octets).
pub fn run(workload: &Workload) -> Result<Measurement, String> {
    let (mut tx, mut rx) = pair().map_err(|e| format!("baseline sockets: {e}"))?;
    let size = workload.size.max(1);
    let total = size * workload.iters;
    let reader = std::thread::spawn(move || -> std::io::Result<TcpStream> {
        let mut buf = vec![0u8; 1 << 20];
        let mut left = total;
        while left > 0 {
            let n = rx.read(&mut buf[..left.min(1 << 20)])?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            left -= n;
        }
        Ok(rx)
    });
    let message = vec![0xA5u8; size];
    let start = Instant::now();
    for _ in 0..workload.iters {
        tx.write_all(&message).map_err(|e| e.to_string())?;
    }
    let mut rx = reader
        .join()
        .map_err(|_| "baseline reader panicked".to_string())?
        .map_err(|e| e.to_string())?;
    let elapsed = start.elapsed().as_secs_f64();

    let mut histogram = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut echo = vec![0u8; size];
    let echoer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut buf = vec![0u8; size];
        loop {
            if rx.read_exact(&mut buf).is_err() {
                return Ok(());
            }
            rx.write_all(&buf)?;
        }
    });
    for _ in 0..workload.latency_iters {
        let sent = Instant::now();
        tx.write_all(&message).map_err(|e| e.to_string())?;
        tx.read_exact(&mut echo).map_err(|e| e.to_string())?;
        let _ = histogram.record(sent.elapsed().as_nanos() as u64 / 2);
    }
    drop(tx);
    let _ = echoer.join();
    Ok(Measurement {
        bw_gbps: (total * 8) as f64 / elapsed / 1e9,
        msg_rate: workload.iters as f64 / elapsed,
        lat_p50_us: histogram.value_at_quantile(0.5) as f64 / 1e3,
        lat_p99_us: histogram.value_at_quantile(0.99) as f64 / 1e3,
    })
}

fn pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let tx = TcpStream::connect(listener.local_addr()?)?;
    let (rx, _) = listener.accept()?;
    tx.set_nodelay(true)?;
    rx.set_nodelay(true)?;
    Ok((tx, rx))
}
