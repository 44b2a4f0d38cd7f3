//! The results of `uwarp-perf conns`: a table, or one JSON object whose
//! `results` hold one entry per connection count, with `msg_rate` as
//! every perf report names it.

use serde_json::{json, Value};

use super::{ConnsResult, ConnsRun};

/// Per connection, in microseconds.
fn us_per_connection(result: &ConnsResult, total: std::time::Duration) -> f64 {
    total.as_secs_f64() * 1e6 / result.connections as f64
}

/// The measured phase's nanoseconds per frame and per message, and
/// messages per second.
fn rates(result: &ConnsResult) -> (f64, f64, f64) {
    let phase = &result.measured;
    let ns = phase.elapsed.as_secs_f64() * 1e9;
    (
        ns / phase.frames.max(1) as f64,
        ns / phase.messages.max(1) as f64,
        phase.messages as f64 / phase.elapsed.as_secs_f64().max(1e-9),
    )
}

fn describe(run: &ConnsRun) -> String {
    let op = match run.op {
        super::Op::Send => "Sends",
        _ => "RDMA Writes",
    };
    format!(
        "{}-octet {op} round-robin over every connection: {} messages measured after one per \
         connection, {} on their way at once, TCP buffers {} octets each way, CRC {}",
        run.size,
        run.messages,
        run.window,
        run.buffer,
        if run.crc { "on" } else { "off" }
    )
}

/// The table.
pub fn to_text(run: &ConnsRun, results: &[ConnsResult]) -> String {
    let mut out = format!("conns: {}\n", describe(run));
    out.push_str(&format!(
        "{:>11} {:>13} {:>14} {:>16} {:>13} {:>10} {:>9} {:>9} {:>11} {:>12} {:>13}\n",
        "connections",
        "setup us/conn",
        "resident/conn",
        "after traffic",
        "after run",
        "frames/msg",
        "ns/frame",
        "ns/msg",
        "msg/s",
        "idle ns/poll",
        "close us/conn"
    ));
    for result in results {
        let (ns_frame, ns_msg, msg_rate) = rates(result);
        let phase = &result.measured;
        out.push_str(&format!(
            "{:>11} {:>13.1} {:>14} {:>16} {:>13} {:>10.2} {:>9.1} {:>9.1} {:>11.0} {:>12.1} {:>13.1}\n",
            result.connections,
            us_per_connection(result, result.setup),
            result.resident_setup,
            result.resident_traffic,
            result.resident_measured,
            phase.frames as f64 / phase.messages.max(1) as f64,
            ns_frame,
            ns_msg,
            msg_rate,
            result.idle_poll.as_secs_f64() * 1e9,
            us_per_connection(result, result.close),
        ));
    }
    out
}

/// The JSON object.
pub fn to_json(run: &ConnsRun, results: &[ConnsResult]) -> Value {
    let results: Vec<Value> = results
        .iter()
        .map(|result| {
            let (ns_per_frame, ns_per_msg, msg_rate) = rates(result);
            json!({
                "connections": result.connections,
                "setup_us_per_conn": us_per_connection(result, result.setup),
                "resident_bytes_per_conn": result.resident_setup,
                "resident_bytes_per_conn_after_traffic": result.resident_traffic,
                "resident_bytes_per_conn_after_run": result.resident_measured,
                "messages": result.measured.messages,
                "frames": result.measured.frames,
                "ns_per_frame": ns_per_frame,
                "ns_per_msg": ns_per_msg,
                "msg_rate": msg_rate,
                "idle_ns_per_poll": result.idle_poll.as_secs_f64() * 1e9,
                "close_us_per_conn": us_per_connection(result, result.close),
            })
        })
        .collect();
    json!({
        "op": run.op.name(),
        "size": run.size,
        "messages": run.messages,
        "window": run.window,
        "tcp_buffer": run.buffer,
        "crc": run.crc,
        "results": results,
    })
}
