//! Byte-exact agreement with Linux siw's first FPDUs: configured like the
//! captured siw rping client (the same MPA Request, the same Reply in
//! answer), the engine's RTR and first Send are the octets siw sent.
//! Streams from `tests/data/siw/tap/` (what the host peer received from
//! siw, and what it sent back).

use std::path::PathBuf;
use std::sync::Arc;

use uwarp_stack::mem::{ProtectionDomains, StagTable};
use uwarp_stack::mpa::{Initiator, InitiatorOutcome, LocalParams, RtrSet};
use uwarp_stack::rdmap::{EngineConfig, QpEngine, Role};
use uwarp_stack::verbs::{Payload, SendOp, SendWr};
use uwarp_stack::wire::mpa::{Revision, StartupRepr};

fn capture(name: &str) -> Vec<u8> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "tests",
        "data",
        "siw",
        "tap",
        name,
    ]
    .iter()
    .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replays one capture: siw's stream `from_siw` opens with its Request,
/// the host's `to_siw` with the Reply. Returns (siw's Full Operation
/// octets, what the engine sends for the same work).
fn replay(from_siw: &str, to_siw: &str, peer_to_peer: bool) -> (Vec<u8>, Vec<u8>) {
    let siw = capture(from_siw);
    let host = capture(to_siw);
    let (request, request_len) = StartupRepr::parse_bytes(&siw).unwrap();
    let block = request.enhanced.expect("siw sends revision 2");
    let local = LocalParams {
        revision: Revision::Enhanced,
        crc: request.crc,
        markers: request.markers,
        ird: block.ird,
        ord: block.ord,
        peer_to_peer: peer_to_peer.then_some(RtrSet::WRITE_AND_READ),
        private_data: Vec::new(),
    };
    let mut initiator = Initiator::new(local, 0, 1_000_000).unwrap();
    assert_eq!(
        initiator.request(),
        &siw[..request_len],
        "the Request itself"
    );
    let (_, outcome) = initiator.on_bytes(&host).unwrap();
    let Some(InitiatorOutcome::Accepted { negotiated, .. }) = outcome else {
        panic!("the captured Reply accepts");
    };
    let stream = siw[request_len..].to_vec();
    // The first Send carries rping's 16-octet buffer advertisement: take
    // its payload from the capture (its position follows from the RTR).
    let rtr_len = if peer_to_peer { 20 } else { 0 };
    let advert = stream[rtr_len + 2 + 18..rtr_len + 2 + 18 + 16].to_vec();

    let table = Arc::new(StagTable::default());
    let pd = ProtectionDomains::new().allocate().unwrap();
    let mut engine = QpEngine::new(EngineConfig {
        negotiated,
        role: Role::Initiator,
        mulpdu: 1448,
        pd,
        table,
        srq: None,
    });
    engine.post_send(SendWr::new(1, SendOp::Send, Payload::Inline(advert)));
    let mut out = Vec::new();
    engine.poll_transmit(&mut out, 1 << 16);
    (stream, out)
}

#[test]
fn the_first_send_equals_siws() {
    let (siw, ours) = replay("py-server-7310.rx.bin", "py-server-7310.tx.bin", false);
    assert_eq!(ours.len(), 40, "one FPDU: 2 + 18 + 16 + 4");
    assert_eq!(ours, siw[..ours.len()]);
}

#[test]
fn the_write_rtr_and_first_send_equal_siws() {
    let (siw, ours) = replay("py-server-7312.rx.bin", "py-server-7312.tx.bin", true);
    assert_eq!(ours.len(), 20 + 40, "the RTR then the Send");
    assert_eq!(ours, siw[..ours.len()]);
}
