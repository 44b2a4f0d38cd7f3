//! Two queue-pair engines joined back to back in memory: every RDMAP
//! operation end to end through MPA framing, DDP placement and the STag
//! table, with the data checked octet for octet.

use std::sync::Arc;

use uwarp_stack::mem::{
    Access, MemoryBuffer, PdId, ProtectionDomains, RegionSpec, Stag, StagTable,
};
use uwarp_stack::mpa::Negotiated;
use uwarp_stack::rdmap::{CqKind, EngineConfig, QpEngine, Role};
use uwarp_stack::verbs::{
    Payload, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use uwarp_stack::wire::mpa::Revision;

struct Side {
    engine: QpEngine,
    pd: PdId,
    table: Arc<StagTable>,
    completions: Vec<(CqKind, WorkCompletion)>,
}

fn negotiated() -> Negotiated {
    Negotiated {
        revision: Revision::Enhanced,
        crc: true,
        markers_tx: false,
        markers_rx: false,
        ird: 8,
        ord: 8,
        peer_ird: Some(8),
        peer_ord: Some(8),
        rtr: None,
    }
}

fn pair(n: Negotiated, mulpdu: usize) -> (Side, Side) {
    let table = Arc::new(StagTable::default());
    let pds = ProtectionDomains::new();
    let make = |role| {
        let pd = pds.allocate().unwrap();
        Side {
            engine: QpEngine::new(EngineConfig {
                negotiated: n,
                role,
                mulpdu,
                pd,
                table: table.clone(),
                srq: None,
            }),
            pd,
            table: table.clone(),
            completions: Vec::new(),
        }
    };
    (make(Role::Initiator), make(Role::Responder))
}

fn pump(a: &mut Side, b: &mut Side) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let ab = a.engine.poll_transmit(&mut buf, 1 << 20);
        b.engine.on_bytes(&buf);
        buf.clear();
        let ba = b.engine.poll_transmit(&mut buf, 1 << 20);
        a.engine.on_bytes(&buf);
        for side in [&mut *a, &mut *b] {
            while let Some(c) = side.engine.poll_completion() {
                side.completions.push(c);
            }
        }
        if ab == 0 && ba == 0 {
            break;
        }
    }
}

impl Side {
    fn region(&self, len: usize, access: Access) -> (Arc<MemoryBuffer>, Stag) {
        let buffer = Arc::new(MemoryBuffer::new(len));
        let spec = RegionSpec::whole(buffer.clone(), access);
        let stag = self.table.register(self.pd, spec, 7).unwrap();
        (buffer, stag)
    }
}

fn sge(buffer: &MemoryBuffer, stag: Stag) -> Sge {
    Sge {
        addr: buffer.addr(),
        length: buffer.len() as u32,
        lkey: stag,
    }
}

fn pattern(buffer: &MemoryBuffer, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..buffer.len())
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    buffer.write_at(0, &data).unwrap();
    data
}

fn contents(buffer: &MemoryBuffer) -> Vec<u8> {
    let mut out = vec![0; buffer.len()];
    buffer.read_at(0, &mut out).unwrap();
    out
}

#[test]
fn send_write_read_move_data() {
    let (mut a, mut b) = pair(negotiated(), 1448);
    let len = 5000;
    let (src, src_stag) = a.region(len, Access::LOCAL_WRITE);
    let data = pattern(&src, 3);
    let (dst, dst_stag) = b.region(
        len,
        Access::LOCAL_WRITE
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_READ),
    );
    b.engine.post_recv(RecvWr {
        wr_id: 1,
        sgl: vec![sge(&dst, dst_stag)],
    });
    a.engine.post_send(SendWr::new(
        2,
        SendOp::Send,
        Payload::Sgl(vec![sge(&src, src_stag)]),
    ));
    pump(&mut a, &mut b);
    assert_eq!(contents(&dst), data);
    assert_eq!(b.completions.len(), 1);
    assert_eq!(b.completions[0].1.byte_len, len as u32);
    assert_eq!(a.completions[0].1.status, WcStatus::Success);

    let (sink, sink_stag) = a.region(len, Access::LOCAL_WRITE);
    let rdata = pattern(&dst, 9);
    a.engine.post_send(SendWr::new(
        3,
        SendOp::Read {
            remote_addr: dst.addr(),
            rkey: dst_stag.raw(),
        },
        Payload::Sgl(vec![sge(&sink, sink_stag)]),
    ));
    pump(&mut a, &mut b);
    assert_eq!(contents(&sink), rdata);
    let last = a.completions.last().unwrap().1;
    assert_eq!(
        (last.opcode, last.status, last.byte_len),
        (WcOpcode::Read, WcStatus::Success, len as u32)
    );
}
