//! What a DPDK end's cores counted over a loopback run
//! ([`uwarp::Device::close`]'s [`HostReport`], summed over the
//! dataplane cores), as one line of text and as the JSON object `host`:
//! the connection set-up of the control core, the frames received, those
//! sent by reference (or copied for want of a DMA mapping) and those
//! gathered from pieces, and every way a frame was dropped.

use serde_json::{Map, Value};
use uwarp::HostReport;

/// A counter: its JSON name, its words in the text line, its value.
type Count = (&'static str, &'static str, u64);

/// `value` summed over `items`.
fn sum<T>(items: &[T], value: impl Fn(&T) -> u64) -> u64 {
    items.iter().map(value).sum()
}

/// The control core's TCP, the connections reset at shutdown, the frames
/// received, and the frames sent and received in pieces (payloads by
/// reference).
fn counts(r: &HostReport) -> [Count; 11] {
    let s = &r.setup;
    [
        ("handed_over", "connections handed over", s.handed_over),
        ("forwarded", "segments forwarded", s.forwarded),
        ("handshakes_failed", "handshakes failed", s.failed),
        ("resets_sent", "resets sent", s.resets_sent),
        ("syns_dropped", "SYNs dropped", s.syns_dropped),
        (
            "reset_at_shutdown",
            "connections reset at shutdown",
            r.reset_at_shutdown(),
        ),
        (
            "malformed",
            "malformed segments",
            s.malformed + sum(&r.cores, |c| c.malformed),
        ),
        (
            "frames_received",
            "frames received",
            sum(&r.dataplanes, |d| d.rx_frames),
        ),
        (
            "frames_referenced",
            "sent by reference",
            sum(&r.transmit, |t| t.payloads_referenced),
        ),
        (
            "frames_unmapped",
            "copied for want of a DMA mapping",
            sum(&r.transmit, |t| t.payloads_unmapped),
        ),
        (
            "frames_gathered",
            "gathered from pieces",
            sum(&r.dataplanes, |d| d.gathered),
        ),
    ]
}

/// Every way a frame was dropped, on receive and on transmit.
fn drops(r: &HostReport) -> [Count; 9] {
    let (d, t) = (&r.dataplanes, &r.transmit);
    [
        ("classify_dropped", "classify", sum(d, |d| d.net.dropped)),
        ("interface_dropped", "interface", r.net.dropped),
        (
            "control_ring_full",
            "control ring full",
            sum(d, |d| d.control_ring_full),
        ),
        (
            "forward_ring_full",
            "forward ring full",
            r.setup.forward_ring_full,
        ),
        (
            "gather_failed",
            "no mbuf to gather",
            sum(d, |d| d.gather_failed),
        ),
        ("stale_packets", "stale", sum(d, |d| d.stale_packets)),
        (
            "tx_backlog_full",
            "transmit backlog full",
            sum(t, |t| t.backlog_full),
        ),
        (
            "tx_no_buffer",
            "no mbuf to send",
            sum(t, |t| t.no_buffer) + r.net.tx_no_buffer,
        ),
        (
            "impairment_dropped",
            "impairment",
            sum(&r.impaired, |(rx, tx)| rx.dropped + tx.dropped),
        ),
    ]
}

/// The port's own counters (`rte_eth_stats`): what the device moved, and
/// what it dropped before any core saw it.
fn port(r: &HostReport) -> [Count; 6] {
    let p = &r.port;
    [
        ("port_rx_packets", "received", p.rx_packets),
        ("port_tx_packets", "sent", p.tx_packets),
        ("port_rx_missed", "missed", p.rx_missed),
        ("port_rx_no_mbuf", "no mbuf", p.rx_no_mbuf),
        ("port_rx_errors", "receive errors", p.rx_errors),
        ("port_tx_errors", "transmit errors", p.tx_errors),
    ]
}

/// The sum of `counts`.
fn total(counts: &[Count]) -> u64 {
    counts.iter().map(|(_, _, value)| value).sum()
}

/// `label value` of each count, comma separated.
fn words(counts: &[Count]) -> String {
    let words: Vec<String> = counts
        .iter()
        .map(|(_, label, value)| format!("{label} {value}"))
        .collect();
    words.join(", ")
}

/// The frames each dataplane core received from its queue, in core order.
fn per_core(r: &HostReport) -> Vec<u64> {
    r.dataplanes.iter().map(|d| d.rx_frames).collect()
}

/// One line for people: the counts, the frames each core received (with
/// more than one), the frames dropped and why, the mbufs dropped at
/// shutdown, the port's own counters.
pub fn text(r: &HostReport) -> String {
    let drops = drops(r);
    let per_core: Vec<String> = per_core(r).iter().map(u64::to_string).collect();
    let counted: Vec<String> = counts(r)
        .iter()
        .map(|&(name, label, value)| {
            if name == "frames_received" && per_core.len() > 1 {
                format!("{label} {value} ({} per core)", per_core.join("/"))
            } else {
                format!("{label} {value}")
            }
        })
        .collect();
    let counted = counted.join(", ");
    format!(
        "host: {counted}, frames dropped {} ({}), mbufs dropped at shutdown {}; port: {}\n",
        total(&drops),
        words(&drops),
        r.dropped_at_shutdown,
        words(&port(r)),
    )
}

/// The same as a JSON object: each count, drop and port counter by its
/// name, the drops' total `frames_dropped`, `frames_received_per_core`
/// and `dropped_at_shutdown`.
pub fn json(r: &HostReport) -> Value {
    let drops = drops(r);
    let dropped = total(&drops);
    let mut out: Map<String, Value> = counts(r)
        .into_iter()
        .chain(drops)
        .chain(port(r))
        .map(|(name, _, value)| (name.to_string(), value.into()))
        .collect();
    out.insert("frames_dropped".into(), dropped.into());
    out.insert("frames_received_per_core".into(), per_core(r).into());
    out.insert(
        "dropped_at_shutdown".into(),
        (r.dropped_at_shutdown as u64).into(),
    );
    Value::Object(out)
}
