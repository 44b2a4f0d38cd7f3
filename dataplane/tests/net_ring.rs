//! The dataplane on net_ring ports, all in one process.
//!
//! Cargo runs these tests on threads of one process, and the EAL can be
//! initialised once per process, so every test goes through [`eal`], which
//! starts it with the `--vdev`s the binary needs (a loopback `net_ring0`
//! and a `net_null0`, the latter loaded only from DPDK's driver directory).
//! Port pairs are created at run time with `rte_eth_from_rings`, each test
//! with its own pair and its own mempool, so tests running at the same time
//! never share a port or a pool and their occupancy counts are exact.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uwarp_dataplane::extbuf::ExternalRegion;
use uwarp_dataplane::{
    ring_pair, Device, Eal, EalConfig, Error, Mbuf, Mempool, MempoolConfig, Port, PortConfig,
    Queues,
};

fn eal_config() -> EalConfig {
    EalConfig::virtual_devices(["net_ring0", "net_null0"])
}

fn eal() -> &'static Eal {
    Eal::init(&eal_config()).expect("the EAL starts with virtual devices")
}

fn pool(name: &str) -> Arc<Mempool> {
    let config = MempoolConfig {
        capacity: 1023,
        cache_size: 32,
        ..MempoolConfig::default()
    };
    Arc::new(Mempool::new(eal(), name, &config, None).expect("mempool"))
}

/// A started, cross-connected pair of ports with `queues` queue pairs.
fn started_pair(pool: &Arc<Mempool>, queues: u16, ring_size: u32) -> (Port, Queues, Port, Queues) {
    let (a, b) = ring_pair(eal(), queues, ring_size).expect("ring pair");
    let config = PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        ..PortConfig::default()
    };
    let mut pa = Port::configure(eal(), a, &config, &[Arc::clone(pool)]).expect("configure a");
    let mut pb = Port::configure(eal(), b, &config, &[Arc::clone(pool)]).expect("configure b");
    pa.start().expect("start a");
    pb.start().expect("start b");
    let qa = pa.take_queues().expect("queues of a");
    let qb = pb.take_queues().expect("queues of b");
    (pa, qa, pb, qb)
}

/// A frame whose bytes identify it: `len` bytes, byte i = (tag + i) mod 251.
fn frame(tag: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((tag as usize + i) % 251) as u8).collect()
}

/// Polls `q` until `want` packets arrived or many polls found nothing.
fn receive(q: &mut uwarp_dataplane::RxQueue, want: usize) -> Vec<Mbuf> {
    let mut got = Vec::new();
    let mut idle = 0;
    while got.len() < want && idle < 1000 {
        if q.rx_burst(&mut got, 32) == 0 {
            idle += 1;
        }
    }
    got
}

#[test]
fn eal_initialises_once_and_refuses_other_arguments() {
    let first = eal();
    let again = Eal::init(&eal_config()).expect("same arguments, same EAL");
    assert!(std::ptr::eq(first, again));
    assert!(std::ptr::eq(Eal::get().expect("initialised"), first));
    assert_eq!(
        first.args(),
        [
            "--no-huge",
            "-m",
            "256",
            "--no-shconf",
            "--no-pci",
            "--no-telemetry",
            "--vdev",
            "net_ring0",
            "--vdev",
            "net_null0",
            "-l",
            "0"
        ]
    );
    match Eal::init(&EalConfig::virtual_devices(["net_ring9"])) {
        Err(Error::EalAlreadyInitialised { running, requested }) => {
            assert_eq!(running, first.args());
            assert!(requested.contains(&"net_ring9".to_owned()));
        }
        other => panic!("a second EAL with other arguments: {other:?}"),
    }
    assert_eq!(first.lcore_count(), 1);
    // --no-huge leaves DPDK no physical addresses to give: IOVA is VA.
    assert!(first.iova_is_va());
}

#[test]
fn eal_loads_the_drivers_of_the_driver_directory() {
    let eal = eal();
    // net_null is not linked into the test binary: the EAL found it in
    // DPDK's driver directory, as it found the ring mempool driver every
    // pool here uses.
    let null = Device::by_name(eal, "net_null0").expect("net_null0 was probed");
    assert_eq!(null.name().expect("name"), "net_null0");
    let pool = pool("drv_dir");
    let port = Port::configure(eal, null, &PortConfig::default(), &[Arc::clone(&pool)])
        .expect("configure net_null0");
    assert_eq!(port.capabilities().driver, "net_null");
}

#[test]
fn vdev_from_the_command_line_is_a_loopback_and_claimed_once() {
    let eal = eal();
    let dev = Device::by_name(eal, "net_ring0").expect("net_ring0 was probed");
    let id = dev.port_id();
    match Device::by_name(eal, "net_ring0") {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("already claimed"), "{msg}"),
        other => panic!("second claim of net_ring0: {other:?}"),
    }
    let pool = pool("loopback");
    let mut port =
        Port::configure(eal, dev, &PortConfig::default(), &[Arc::clone(&pool)]).expect("configure");
    assert_eq!(port.port_id(), id);
    assert_eq!(port.capabilities().driver, "net_ring");
    port.start().expect("start");
    let mut q = port.take_queues().expect("queues");
    assert!(port.take_queues().is_none(), "queues are handed out once");

    let mut out = vec![Mbuf::from_slice(&pool, &frame(7, 60)).expect("mbuf")];
    assert_eq!(q.tx[0].tx_burst(&mut out), 1);
    let got = receive(&mut q.rx[0], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data(), &frame(7, 60)[..]);
    drop(got);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn frames_sent_on_one_port_arrive_on_the_other_in_bursts_of_32() {
    let pool = pool("burst32");
    let (pa, mut qa, pb, mut qb) = started_pair(&pool, 1, 1024);
    assert_eq!(pool.in_use(), 0);

    for round in 0..10u32 {
        let mut burst = Vec::with_capacity(32);
        for i in 0..32 {
            let tag = round * 32 + i;
            burst.push(Mbuf::from_slice(&pool, &frame(tag, 60 + (tag as usize % 1400))).unwrap());
        }
        assert_eq!(pool.in_use(), 32);
        assert_eq!(qa.tx[0].tx_burst(&mut burst), 32);
        assert!(burst.is_empty());

        let mut got = Vec::with_capacity(32);
        assert_eq!(
            qb.rx[0].rx_burst(&mut got, 32),
            32,
            "one poll takes the whole burst"
        );
        for (i, m) in got.iter().enumerate() {
            let tag = round * 32 + i as u32;
            assert_eq!(m.data(), &frame(tag, 60 + (tag as usize % 1400))[..]);
            assert_eq!(m.nb_segs(), 1);
        }
        // Nothing came back to the sender: the ports are a pair, not loops.
        let mut none = Vec::new();
        assert_eq!(qa.rx[0].rx_burst(&mut none, 32), 0);

        // And the other way.
        assert_eq!(qb.tx[0].tx_burst(&mut got), 32);
        let back = receive(&mut qa.rx[0], 32);
        assert_eq!(back.len(), 32);
        assert_eq!(
            back[31].data(),
            &frame(round * 32 + 31, 60 + ((round * 32 + 31) as usize % 1400))[..]
        );
    }
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");

    let (sa, sb) = (pa.stats().unwrap(), pb.stats().unwrap());
    assert_eq!((sa.tx_packets, sa.rx_packets), (320, 320));
    assert_eq!((sb.tx_packets, sb.rx_packets), (320, 320));
}

#[test]
fn chained_mbufs_arrive_with_all_segments() {
    let pool = pool("chain");
    let (_pa, mut qa, _pb, mut qb) = started_pair(&pool, 1, 256);

    let parts = [frame(1, 100), frame(2, 1500), frame(3, 37)];
    let mut head = Mbuf::from_slice(&pool, &parts[0]).unwrap();
    for part in &parts[1..] {
        head.chain(Mbuf::from_slice(&pool, part).unwrap())
            .map_err(|(e, _)| e)
            .unwrap();
    }
    assert_eq!(head.nb_segs(), 3);
    assert_eq!(head.pkt_len(), 1637);
    assert_eq!(head.data_len(), 100);
    assert!(!head.is_contiguous());
    assert_eq!(pool.in_use(), 3);

    let mut out = vec![head];
    assert_eq!(qa.tx[0].tx_burst(&mut out), 1);
    let got = receive(&mut qb.rx[0], 1);
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m.nb_segs(), 3);
    assert_eq!(m.pkt_len(), 1637);
    let segs: Vec<&[u8]> = m.segments().collect();
    assert_eq!(segs, [&parts[0][..], &parts[1][..], &parts[2][..]]);
    assert_eq!(m.to_vec(), parts.concat());
    drop(got);
    assert_eq!(
        pool.in_use(),
        0,
        "freeing the head freed all three segments"
    );
}

#[test]
fn tx_burst_gives_back_what_the_device_did_not_take() {
    let pool = pool("unsent");
    // A ring of 64 slots holds 63 packets.
    let (_pa, mut qa, _pb, mut qb) = started_pair(&pool, 1, 64);
    let mut burst = Vec::new();
    for tag in 0..100 {
        burst.push(Mbuf::from_slice(&pool, &frame(tag, 64)).unwrap());
    }
    assert_eq!(qa.tx[0].tx_burst(&mut burst), 63);
    assert_eq!(burst.len(), 37);
    assert_eq!(
        burst[0].data(),
        &frame(63, 64)[..],
        "the unsent keep their order"
    );
    assert_eq!(pool.in_use(), 100);

    let got = receive(&mut qb.rx[0], 63);
    assert_eq!(got.len(), 63);
    assert_eq!(got[62].data(), &frame(62, 64)[..]);
    drop(got);
    // Room again: the rest goes.
    assert_eq!(qa.tx[0].tx_burst(&mut burst), 37);
    assert!(burst.is_empty());
    let got = receive(&mut qb.rx[0], 37);
    assert_eq!(got.len(), 37);
    drop(got);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn queues_of_a_multi_queue_pair_are_separate() {
    let pool = pool("multiq");
    let (pa, mut qa, _pb, mut qb) = started_pair(&pool, 4, 256);
    assert_eq!((qa.rx.len(), qa.tx.len()), (4, 4));
    // net_ring reports no RSS, so RSS stays off although PortConfig asks
    // for it, and no checksum or TSO offload is claimed.
    let caps = pa.capabilities();
    assert_eq!(caps.driver, "net_ring");
    assert!(!caps.rss());
    assert_eq!(pa.rss_flow_types(), 0);
    assert!(!caps.tx_tcp_checksum() && !caps.tx_tcp_tso() && !caps.tx_ipv4_checksum());
    assert_eq!(pa.tx_offloads() & !caps.tx_offloads, 0);

    for q in 0..4usize {
        let mut out = vec![Mbuf::from_slice(&pool, &frame(q as u32, 80)).unwrap()];
        assert_eq!(qa.tx[q].tx_burst(&mut out), 1);
    }
    for q in 0..4usize {
        let mut got = Vec::new();
        assert_eq!(qb.rx[q].rx_burst(&mut got, 32), 1, "queue {q}");
        assert_eq!(got[0].data(), &frame(q as u32, 80)[..]);
    }
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn link_stats_and_extended_stats() {
    let pool = pool("stats");
    let (mut pa, mut qa, pb, mut qb) = started_pair(&pool, 1, 256);
    let link = pa.link().unwrap();
    assert!(link.up, "{link:?}");
    assert!(link.speed_mbps > 0, "{link:?}");

    let mut out: Vec<Mbuf> = (0..5)
        .map(|t| Mbuf::from_slice(&pool, &frame(t, 100)).unwrap())
        .collect();
    assert_eq!(qa.tx[0].tx_burst(&mut out), 5);
    assert_eq!(receive(&mut qb.rx[0], 5).len(), 5);

    let xa = pa.xstats().unwrap();
    let get = |xs: &[(String, u64)], name: &str| {
        xs.iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no {name} in {xs:?}"))
            .1
    };
    assert_eq!(get(&xa, "tx_good_packets"), 5);
    assert_eq!(get(&pb.xstats().unwrap(), "rx_good_packets"), 5);
    assert_eq!(pa.stats().unwrap().tx_packets, 5);

    pa.reset_stats().unwrap();
    assert_eq!(pa.stats().unwrap().tx_packets, 0);
    pa.stop().unwrap();
    assert!(!pa.is_started());
    assert!(
        !pa.link().unwrap().up,
        "a stopped ring port reports its link down"
    );
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn mbuf_data_grows_and_shrinks_at_both_ends() {
    let pool = pool("mbufops");
    let mut m = Mbuf::alloc(&pool).unwrap();
    assert_eq!((m.pkt_len(), m.data_len()), (0, 0));
    assert_eq!(m.headroom(), dpdk_sys::RTE_PKTMBUF_HEADROOM as u16);
    let room = m.tailroom();
    assert_eq!(room, 2048);

    m.append(10).unwrap().copy_from_slice(b"0123456789");
    m.prepend(4).unwrap().copy_from_slice(b"HDR:");
    assert_eq!(m.data(), b"HDR:0123456789");
    assert_eq!(m.pkt_len(), 14);
    m.adj(4).unwrap();
    m.trim(3).unwrap();
    assert_eq!(m.data(), b"0123456");
    m.data_mut().unwrap()[0] = b'X';
    assert_eq!(m.data(), b"X123456");

    assert!(m.adj(8).is_err(), "more than the segment holds");
    assert!(m.trim(8).is_err());
    assert!(m.prepend(m.headroom() + 1).is_err());
    assert!(m.append(m.tailroom() + 1).is_err());
    assert_eq!(m.data(), b"X123456", "failed calls change nothing");

    // append writes into the last segment of a chain.
    m.chain(Mbuf::from_slice(&pool, b"tail").unwrap())
        .map_err(|(e, _)| e)
        .unwrap();
    m.extend_from_slice(b"!").unwrap();
    assert_eq!(m.to_vec(), b"X123456tail!");
    assert_eq!(m.pkt_len(), 12);
    m.trim(1).unwrap();
    assert_eq!(m.to_vec(), b"X123456tail");
    assert_eq!(pool.in_use(), 2);
    drop(m);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn bulk_allocation_is_all_or_nothing() {
    let pool = pool("bulk");
    assert_eq!(pool.capacity(), 1023);
    assert_eq!(pool.available(), 1023);
    let mut v = Vec::new();
    Mbuf::alloc_bulk(&pool, 32, &mut v).unwrap();
    assert_eq!(v.len(), 32);
    assert_eq!((pool.in_use(), pool.available()), (32, 991));
    assert_eq!(Mbuf::alloc_bulk(&pool, 1000, &mut v), Err(Error::NoMbufs));
    assert_eq!(v.len(), 32);
    assert_eq!(pool.in_use(), 32);
    v.clear();
    assert_eq!(pool.in_use(), 0);
}

/// An owner of external bytes that counts its drops.
struct Owned {
    bytes: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn external_buffers_go_out_without_a_copy_and_are_released_once() {
    let eal = eal();
    let pool = pool("extbuf");
    let (_pa, mut qa, _pb, mut qb) = started_pair(&pool, 1, 256);
    let drops = Arc::new(AtomicUsize::new(0));
    let payload = frame(42, 4000);
    let payload_addr = payload.as_ptr();

    // Dropped unsent: the owner goes at once.
    let m = Mbuf::from_external(
        eal,
        &pool,
        Owned {
            bytes: frame(1, 10),
            drops: Arc::clone(&drops),
        },
    )
    .unwrap();
    drop(m);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A header in pool memory chained to a payload in caller memory.
    let mut head = Mbuf::from_slice(&pool, b"header").unwrap();
    let mut ext = Mbuf::from_external(
        eal,
        &pool,
        Owned {
            bytes: payload,
            drops: Arc::clone(&drops),
        },
    )
    .unwrap();
    assert_eq!(ext.data().as_ptr(), payload_addr, "no copy");
    assert_eq!(ext.pkt_len(), 4000);
    assert!(ext.data_mut().is_none(), "external bytes are read-only");
    assert!(ext.append(1).is_err());
    assert!(ext.prepend(1).is_err());
    head.chain(ext).map_err(|(e, _)| e).unwrap();

    let mut out = vec![head];
    assert_eq!(qa.tx[0].tx_burst(&mut out), 1);
    let got = receive(&mut qb.rx[0], 1);
    assert_eq!(got.len(), 1);
    let segs: Vec<&[u8]> = got[0].segments().collect();
    assert_eq!(segs[0], b"header");
    assert_eq!(segs[1].as_ptr(), payload_addr, "received in place");
    assert_eq!(segs[1], &frame(42, 4000)[..]);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "still in use by the receiver"
    );
    drop(got);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "released when the last mbuf went"
    );
    assert_eq!(pool.in_use(), 0);

    let too_big = Mbuf::from_external(eal, &pool, vec![0u8; 70_000]);
    assert!(matches!(too_big, Err(Error::InvalidArgument(_))));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn a_region_lends_slices_to_many_mbufs_and_outlives_its_handle() {
    let pool = pool("region");
    let (_pa, mut qa, _pb, mut qb) = started_pair(&pool, 1, 256);
    let drops = Arc::new(AtomicUsize::new(0));
    let bytes = frame(9, 3000);
    let whole = bytes.clone();
    let addr = bytes.as_ptr();
    let region = ExternalRegion::from_owner(Owned {
        bytes,
        drops: Arc::clone(&drops),
    });
    // SAFETY: the Vec's heap buffer did not move into the region, which
    // keeps it alive and unchanged until the last mbuf below is gone.
    let base = unsafe { std::slice::from_raw_parts(addr, 3000) };
    let first = region
        .attach(Mbuf::alloc(&pool).unwrap(), &base[..1000])
        .unwrap();
    let second = region
        .attach(Mbuf::alloc(&pool).unwrap(), &base[1000..2500])
        .unwrap();
    assert_eq!(first.data(), &whole[..1000]);
    assert_eq!(second.data(), &whole[1000..2500]);
    assert_eq!(first.data().as_ptr(), base.as_ptr(), "no copy");

    // Bytes outside the region, an empty slice, and an mbuf that is not
    // empty are refused, and give their mbuf back to the pool.
    let outside = vec![0u8; 10];
    let fresh = Mbuf::alloc(&pool).unwrap();
    assert!(matches!(
        region.attach(fresh, &outside),
        Err(Error::InvalidArgument(_))
    ));
    let fresh = Mbuf::alloc(&pool).unwrap();
    assert!(matches!(
        region.attach(fresh, &base[..0]),
        Err(Error::InvalidArgument(_))
    ));
    let used = Mbuf::from_slice(&pool, b"x").unwrap();
    assert!(matches!(
        region.attach(used, &base[..8]),
        Err(Error::InvalidArgument(_))
    ));

    // Octets named by their place in the region, and refused past its end
    // or backwards.
    let third = region
        .attach_range(Mbuf::alloc(&pool).unwrap(), 2500..3000)
        .unwrap();
    assert_eq!(third.data(), &whole[2500..3000]);
    assert_eq!(region.offset_of(&base[2500..]), Some(2500));
    assert_eq!(region.offset_of(&outside), None);
    let backwards = std::ops::Range { start: 20, end: 10 };
    for range in [2990..3001, 3000..3001, backwards] {
        let fresh = Mbuf::alloc(&pool).unwrap();
        assert!(
            matches!(
                region.attach_range(fresh, range.clone()),
                Err(Error::InvalidArgument(_))
            ),
            "{range:?}"
        );
    }
    drop(third);

    // The handle goes first: the owner stays for the mbufs in flight.
    drop(region);
    let mut out = vec![first];
    assert_eq!(qa.tx[0].tx_burst(&mut out), 1);
    drop(second);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "one mbuf still refers to it"
    );
    let got = receive(&mut qb.rx[0], 1);
    assert_eq!(got[0].data(), &whole[..1000], "received in place");
    drop(got);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "freed with the last mbuf");
    assert_eq!(pool.in_use(), 0);

    // With no mbuf ever attached, the handle frees the owner itself.
    let region = ExternalRegion::from_owner(Owned {
        bytes: frame(1, 10),
        drops: Arc::clone(&drops),
    });
    drop(region);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn a_chained_frame_is_gathered_into_one_segment() {
    let pool = pool("gather");
    let mut head = Mbuf::from_slice(&pool, &frame(3, 54)).unwrap();
    head.offload_tcp_checksums(14, 20);
    head.chain(Mbuf::from_slice(&pool, &frame(57, 1400)).unwrap())
        .map_err(|(e, _)| e)
        .unwrap();
    let one = head.gathered(&pool).unwrap();
    assert!(one.is_contiguous());
    assert_eq!(one.data(), &frame(3, 1454)[..]);
    assert_eq!(one.ol_flags(), head.ol_flags(), "the offload requests too");
    drop((head, one));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn mbufs_left_in_a_ring_are_freed_with_the_pair() {
    let pool = pool("leftover");
    {
        let (pa, mut qa, pb, qb) = started_pair(&pool, 1, 256);
        let mut out: Vec<Mbuf> = (0..10)
            .map(|t| Mbuf::from_slice(&pool, &frame(t, 64)).unwrap())
            .collect();
        assert_eq!(qa.tx[0].tx_burst(&mut out), 10);
        assert_eq!(pool.in_use(), 10, "in flight in the ring");
        drop((pa, qa, pb, qb));
    }
    assert_eq!(pool.in_use(), 0, "removing the pair drained its rings");
}

#[test]
fn runtime_vdevs_take_transmitted_mbufs_and_are_removed_on_drop() {
    let eal = eal();
    let pool = pool("rtvdev");
    for round in 0..2 {
        // The same name twice: the first device was removed on drop.
        let dev = Device::create_vdev(eal, "net_null_uwrt", "").expect("create net_null");
        assert_eq!(dev.name().unwrap(), "net_null_uwrt");
        let mut port = Port::configure(eal, dev, &PortConfig::default(), &[Arc::clone(&pool)])
            .expect("configure");
        port.start().unwrap();
        let mut q = port.take_queues().unwrap();
        let mut out: Vec<Mbuf> = (0..32)
            .map(|t| Mbuf::from_slice(&pool, &frame(t, 64)).unwrap())
            .collect();
        assert_eq!(pool.in_use(), 32);
        assert_eq!(q.tx[0].tx_burst(&mut out), 32, "round {round}");
        // net_null frees what it "sends": the mbufs are back in the pool.
        assert_eq!(pool.in_use(), 0);
        // It also "receives" frames it allocates from the port's pool.
        let mut got = Vec::new();
        assert_eq!(q.rx[0].rx_burst(&mut got, 8), 8);
        assert_eq!(pool.in_use(), 8);
        drop(got);
        assert_eq!(port.stats().unwrap().tx_packets, 32);
    }
    assert_eq!(pool.in_use(), 0);
}
