//! Memory the application owns, registered where it lies
//! (`ProtectionDomain::register_memory`, the `ibv_reg_mr` of programs
//! that register their own heap, `mmap` or shared memory), on both
//! transports: over loopback TCP sockets, and on DPDK over a net_ring
//! pair with zero-copy transmit taking every full segment
//! (`DpdkConfig::zero_copy_from`), so that sending application memory by
//! copy is tested where uwarp's own memory goes by reference.
//!
//! Each range lies at an odd offset of a `Vec<u8>` between guard octets
//! (`AppMemory`): RDMA Write, Read and Send move data into and out of it
//! and nothing outside it; two overlapping registrations have STags of
//! their own and end on their own; an `iova` renames the range's Tagged
//! Offsets; and memory freed as soon as its region is dropped is never
//! touched again, a Write to its old STag being refused. The hostile
//! peer's cases run against application memory too (`hostile.rs`,
//! `app_memory::`).

use uwarp_testing::dpdk_rig;
use uwarp_testing::pair;

use pair::*;
use uwarp::*;

/// Where the cases run.
trait Transport {
    /// Whether uwarp's own memory goes by reference (zero-copy transmit).
    const BY_REFERENCE: bool;
    /// Whether large payloads are written through from registered
    /// memory, the application's included (the socket transport's
    /// `writev`).
    const WRITES_THROUGH: bool;

    /// Two devices that reach each other.
    fn devices() -> Devices;
}

/// The socket transport over loopback.
struct Socket;

impl Transport for Socket {
    const BY_REFERENCE: bool = false;
    const WRITES_THROUGH: bool = true;

    fn devices() -> Devices {
        Devices::sockets().unwrap()
    }
}

/// The DPDK transport on a net_ring pair of this process: 10.76.0.1 (the
/// server) and 10.76.0.2, cores on threads of their own, every FPDU
/// payload of 1024 octets and more sent by reference where the memory
/// allows it.
struct Dpdk;

impl Transport for Dpdk {
    const BY_REFERENCE: bool = true;
    const WRITES_THROUGH: bool = false;

    fn devices() -> Devices {
        let (server, client) = dpdk_rig::device_pair(76, 1024, CoreThreads::Spawned, |dpdk| {
            dpdk_rig::small_pool(&mut dpdk.host);
            dpdk.zero_copy_from = Some(ZERO_COPY_FROM);
        });
        Devices {
            server,
            client,
            listen: "10.76.0.1:0",
        }
    }
}

/// The threshold of zero-copy transmit on [`Dpdk`]: below one segment's
/// payload at MTU 1500, so that large transfers would go by reference.
const ZERO_COPY_FROM: usize = 1024;

uwarp_testing::on_every_transport!(
    writes_reads_and_sends_move_through_unaligned_app_memory,
    overlapping_registrations_have_stags_of_their_own,
    an_iova_names_the_first_octet,
    memory_freed_right_after_deregistration_is_never_touched_again,
    app_memory_is_copied_where_uwarps_own_goes_by_reference,
);

/// Everything a peer may do to a region.
const REMOTE: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// A connection with default settings between `T`'s devices.
fn connect<T: Transport>() -> (End, End) {
    let (client, server) = (ConnectParams::default(), LocalParams::default());
    connect_devices(T::devices(), CQ_DEPTH, client, server, |_, _| {}).unwrap()
}

/// Registers all of `memory` in `pd` with `access`, from Tagged Offset
/// `iova` if given.
///
/// # Safety
///
/// The region must be dropped before `memory`.
unsafe fn register(
    pd: &ProtectionDomain,
    memory: &AppMemory,
    iova: Option<u64>,
    access: Access,
) -> MemoryRegion {
    // SAFETY: `memory`'s range stays allocated until it is dropped, after
    // the region (the caller's promise), and it reaches its octets only
    // through raw copies (`AppMemory`).
    unsafe { pd.register_memory(memory.range(), memory.len(), iova, access) }
        .expect("a registration")
}

/// `op` posted on `end` as work request `wr_id` with `sgl`, and its
/// completion, which must succeed.
fn run(end: &End, wr_id: u64, op: SendOp, sgl: Vec<Sge>) -> WorkCompletion {
    end.qp
        .post_send(SendWr::new(wr_id, op, Payload::Sgl(sgl)))
        .unwrap();
    let wc = end.expect_ok();
    assert_eq!(wc.wr_id, wr_id);
    wc
}

/// An RDMA Write to `rkey` at Tagged Offset `to`.
fn write_to(to: u64, rkey: u32) -> SendOp {
    SendOp::Write {
        remote_addr: to,
        rkey,
    }
}

/// An RDMA Read from `rkey` at Tagged Offset `to`.
fn read_from(to: u64, rkey: u32) -> SendOp {
    SendOp::Read {
        remote_addr: to,
        rkey,
    }
}

/// Waits until the Writes `client` posted so far are placed at the
/// server: a one-octet Read of `region` behind them, which the server
/// answers only after placing them (it handles its stream in order; a
/// Write completes when it is sent, not placed).
fn placed(client: &End, region: &MemoryRegion) {
    let sink = client.pd.alloc_mr(1, Access::LOCAL_WRITE).unwrap();
    run(
        client,
        0,
        read_from(region.addr(), region.rkey()),
        vec![sink.whole()],
    );
}

/// Asserts that `end`'s queue pair sent nothing by reference: on the
/// DPDK transport every payload of application memory was copied.
fn nothing_sent_by_reference(end: &End) {
    let counters = end.qp.counters();
    assert_eq!(counters.fpdus_sent_by_reference, 0, "{counters:?}");
}

/// Asserts that `end`'s queue pair wrote large payloads through from the
/// application's memory where `T` does that, and none elsewhere.
fn written_through_where_the_transport_does<T: Transport>(end: &End) {
    let counters = end.qp.counters();
    let through = counters.fpdus_written_through > 0;
    assert_eq!(through, T::WRITES_THROUGH, "{counters:?}");
}

/// A Write from 16 octets at offset 3 of the client's `Vec` into the
/// server's, a Read of them back into a third, and a Send from the
/// server's into a receive posted on a fourth; then the same at 64 KiB,
/// many FPDUs each. Every transfer lands intact, every guard octet stays.
fn writes_reads_and_sends_move_through_unaligned_app_memory<T: Transport>() {
    let (client, server) = connect::<T>();
    for (round, len) in [16, 64 << 10].into_iter().enumerate() {
        let source = AppMemory::new(len);
        let target = AppMemory::new(len);
        let sink = AppMemory::new(len);
        let inbox = AppMemory::new(len);
        // SAFETY (all four): the regions are declared after their memory,
        // so they are dropped first.
        let source_mr = unsafe { register(&client.pd, &source, None, Access::LOCAL_WRITE) };
        let target_mr = unsafe { register(&server.pd, &target, None, REMOTE) };
        let sink_mr = unsafe { register(&client.pd, &sink, None, Access::LOCAL_WRITE) };
        let inbox_mr = unsafe { register(&client.pd, &inbox, None, Access::LOCAL_WRITE) };
        assert_eq!(source_mr.addr(), source.range() as u64);
        assert_ne!(source_mr.addr() % 2, 0, "an unaligned range");
        let data = fill(&source_mr, round as u8);

        let write = write_to(target_mr.addr(), target_mr.rkey());
        run(&client, 1, write, vec![source_mr.whole()]);
        let read = read_from(target_mr.addr(), target_mr.rkey());
        let wc = run(&client, 2, read, vec![sink_mr.whole()]);
        assert_eq!(wc.byte_len, len as u32);
        assert!(contents(&target_mr) == data, "Write of {len} octets");
        assert!(contents(&sink_mr) == data, "Read of {len} octets");

        client
            .qp
            .post_recv(RecvWr {
                wr_id: 3,
                sgl: vec![inbox_mr.whole()],
            })
            .unwrap();
        run(&server, 4, SendOp::Send, vec![target_mr.whole()]);
        let wc = client.expect_ok();
        assert_eq!((wc.wr_id, wc.byte_len), (3, len as u32));
        assert!(contents(&inbox_mr) == data, "Send of {len} octets");

        for memory in [&source, &target, &sink, &inbox] {
            assert!(memory.guards_intact(), "an octet outside a range changed");
        }
    }
    nothing_sent_by_reference(&client);
    nothing_sent_by_reference(&server);
    written_through_where_the_transport_does::<T>(&client);
    written_through_where_the_transport_does::<T>(&server);
}

/// One range registered twice: two STags, each usable alone; once one is
/// deregistered, the other still takes Writes, and a Write to the first
/// is refused with the Terminate of an invalid STag, leaving the memory
/// as the second left it.
fn overlapping_registrations_have_stags_of_their_own<T: Transport>() {
    let (client, server) = connect::<T>();
    let target = AppMemory::new(16);
    // SAFETY (both): the regions are dropped (explicitly, or at the end,
    // being declared later) before `target`.
    let first = unsafe { register(&server.pd, &target, None, REMOTE) };
    let second = unsafe { register(&server.pd, &target, None, REMOTE) };
    assert_ne!(first.rkey(), second.rkey());
    assert_eq!(first.addr(), second.addr());
    let source = client.pd.alloc_mr(16, Access::LOCAL_WRITE).unwrap();

    let data = fill(&source, 1);
    run(
        &client,
        1,
        write_to(first.addr(), first.rkey()),
        vec![source.whole()],
    );
    placed(&client, &second);
    assert_eq!(contents(&second), data, "the second sees the first's Write");
    let (stale, to) = (first.rkey(), first.addr());
    drop(first);

    let data = fill(&source, 2);
    run(
        &client,
        2,
        write_to(second.addr(), second.rkey()),
        vec![source.whole()],
    );
    placed(&client, &second);
    assert_eq!(contents(&second), data, "the second still takes Writes");

    let wr = SendWr::new(3, write_to(to, stale), Payload::Inline(vec![0xEE; 16]));
    client.qp.post_send(wr).unwrap();
    server.expect_terminate_to(&client, TermError::DdpTaggedInvalidStag);
    assert!(server.qp.wait_closed(WAIT));
    assert_eq!(contents(&second), data, "the refused Write placed nothing");
    assert!(target.guards_intact());
}

/// A range registered with an `iova`: the peer's Write at `iova + k`
/// changes the octet at the range's address + `k`, a Read there reads it,
/// and a Write at the memory's own address is out of the region's bounds.
fn an_iova_names_the_first_octet<T: Transport>() {
    const IOVA: u64 = 0xF000_0000_0000_0000;
    const K: usize = 5;
    let (client, server) = connect::<T>();
    let target = AppMemory::new(16);
    // SAFETY: `region` is declared after `target`, so dropped first.
    let region = unsafe { register(&server.pd, &target, Some(IOVA), REMOTE) };
    assert_eq!(region.addr(), IOVA);
    let before = contents(&region);
    let source = client.pd.alloc_mr(4, Access::LOCAL_WRITE).unwrap();
    let data = fill(&source, 3);

    run(
        &client,
        1,
        write_to(IOVA + K as u64, region.rkey()),
        vec![source.whole()],
    );
    // The Read behind it is answered once the Write is placed.
    let sink = client.pd.alloc_mr(4, Access::LOCAL_WRITE).unwrap();
    run(
        &client,
        2,
        read_from(IOVA + K as u64, region.rkey()),
        vec![sink.whole()],
    );
    assert_eq!(contents(&sink), data);
    let mut expected = before;
    expected[K..K + 4].copy_from_slice(&data);
    assert_eq!(contents(&region), expected);
    assert_eq!(target.snapshot()[APP_HEAD + K..APP_HEAD + K + 4], data);

    let address = target.range() as u64;
    let wr = SendWr::new(
        3,
        write_to(address, region.rkey()),
        Payload::Inline(vec![0xEE]),
    );
    client.qp.post_send(wr).unwrap();
    assert_eq!(
        server.qp.next_event(WAIT),
        Some(QpEvent::TerminateSent(TermError::DdpTaggedBaseOrBounds))
    );
    assert!(server.qp.wait_closed(WAIT));
    assert_eq!(contents(&region), expected);
    assert!(target.guards_intact());
}

/// The verbs application's teardown: `ibv_dereg_mr`, then `free`. The
/// server's range is written and read by the peer (its Read Responses
/// sent from it), the client's is the source and the sink of that; as
/// soon as a Send tells the server the Read is done, both drop their
/// regions and free their memory at once. Nothing crashes, and a Write
/// to the old STag is refused, leaving a new allocation registered in
/// its place untouched.
fn memory_freed_right_after_deregistration_is_never_touched_again<T: Transport>() {
    const LEN: usize = 256 << 10;
    let (client, server) = connect::<T>();
    let inbox = server.pd.alloc_mr(4, Access::LOCAL_WRITE).unwrap();
    let target = AppMemory::new(LEN);
    let local = AppMemory::new(LEN);
    // SAFETY (both): each region is dropped before its memory, below.
    let target_mr = unsafe { register(&server.pd, &target, None, REMOTE) };
    let local_mr = unsafe { register(&client.pd, &local, None, Access::LOCAL_WRITE) };
    let (stale, to) = (target_mr.rkey(), target_mr.addr());
    for round in 0..4u8 {
        let data = fill(&local_mr, round);
        run(&client, 1, write_to(to, stale), vec![local_mr.whole()]);
        fill(&local_mr, 0xFF);
        run(&client, 2, read_from(to, stale), vec![local_mr.whole()]);
        assert!(contents(&local_mr) == data, "round {round}");
    }
    server
        .qp
        .post_recv(RecvWr {
            wr_id: 5,
            sgl: vec![inbox.whole()],
        })
        .unwrap();
    let done = SendWr::new(6, SendOp::Send, Payload::Inline(b"done".to_vec()));
    client.qp.post_send(done).unwrap();
    assert_eq!(server.expect_ok().wr_id, 5);
    drop(target_mr);
    drop(target);
    client.expect_ok();
    drop(local_mr);
    drop(local);

    // A new allocation, maybe at the same address, registered anew: the
    // old STag does not name it.
    let reused = AppMemory::new(LEN);
    // SAFETY: `region` is declared after `reused`, so dropped first.
    let region = unsafe { register(&server.pd, &reused, None, REMOTE) };
    let before = contents(&region);
    let late = write_to(to, stale);
    let wr = SendWr::new(7, late, Payload::Inline(vec![0xEE; 64]));
    client.qp.post_send(wr).unwrap();
    assert_eq!(
        server.qp.next_event(WAIT),
        Some(QpEvent::TerminateSent(TermError::DdpTaggedInvalidStag))
    );
    assert!(server.qp.wait_closed(WAIT));
    assert!(contents(&region) == before, "the late Write placed nothing");
    assert!(reused.guards_intact());
    nothing_sent_by_reference(&client);
    nothing_sent_by_reference(&server);
    written_through_where_the_transport_does::<T>(&client);
    written_through_where_the_transport_does::<T>(&server);
}

/// The same Write of 64 KiB, from uwarp's memory and then from the
/// application's: on DPDK the first goes by reference, FPDU by FPDU, and
/// the second is copied; both arrive intact. (On the socket transport
/// nothing goes by reference.)
fn app_memory_is_copied_where_uwarps_own_goes_by_reference<T: Transport>() {
    const LEN: usize = 64 << 10;
    let (client, server) = connect::<T>();
    let target = server.pd.alloc_mr(LEN, REMOTE).unwrap();
    let own = client.pd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let app = AppMemory::new(LEN);
    // SAFETY: `app_mr` is declared after `app`, so dropped first.
    let app_mr = unsafe { register(&client.pd, &app, None, Access::LOCAL_WRITE) };
    let write = write_to(target.addr(), target.rkey());

    let data = fill(&own, 1);
    run(&client, 1, write, vec![own.whole()]);
    placed(&client, &target);
    assert!(contents(&target) == data, "the Write from uwarp's memory");
    let by_reference = client.qp.counters().fpdus_sent_by_reference;

    let data = fill(&app_mr, 2);
    run(&client, 2, write, vec![app_mr.whole()]);
    placed(&client, &target);
    assert!(
        contents(&target) == data,
        "the Write from the application's"
    );
    let counters = client.qp.counters();
    assert_eq!(
        counters.fpdus_sent_by_reference, by_reference,
        "{counters:?}"
    );
    assert_eq!(by_reference > 0, T::BY_REFERENCE, "{counters:?}");
}
