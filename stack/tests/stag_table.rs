//! The STag table (RFC 5041 section 7.1, RFC 5040 sections 5.1-5.3 and 7):
//! every check in its order with its error, the edges of bounds and wrap,
//! keys, protection domains and access rights, zero-length placement, local
//! and remote invalidation, re-registration, table exhaustion, the spread of
//! STag indices, and the concurrency guarantee: once `deregister(..).wait()`
//! returns, no write from the table lands in the region's buffer again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use uwarp_stack::mem::{
    Access, InvalidateError, MemError, MemoryBuffer, PdId, ProtectionDomains, RegionSpec, Stag,
    StagTable, TaggedError,
};
use uwarp_stack::wire::terminate::{Layer, TermError};

/// Base Tagged Offset of the regions most tests register.
const BASE: u64 = 0x10_0000;

struct Fixture {
    table: StagTable,
    pd: PdId,
    other_pd: PdId,
}

fn fixture(capacity: usize) -> Fixture {
    let pds = ProtectionDomains::new();
    Fixture {
        table: StagTable::new(capacity).unwrap(),
        pd: pds.allocate().unwrap(),
        other_pd: pds.allocate().unwrap(),
    }
}

/// A buffer of `len` octets filled with `fill`.
fn buffer(len: usize, fill: u8) -> Arc<MemoryBuffer> {
    let buffer = Arc::new(MemoryBuffer::new(len));
    buffer.fill(fill);
    buffer
}

fn contents(buffer: &MemoryBuffer) -> Vec<u8> {
    let mut out = vec![0; buffer.len()];
    buffer.read_at(0, &mut out).unwrap();
    out
}

/// The same STag with another key.
fn rekeyed(stag: Stag) -> Stag {
    Stag::from_parts(stag.index(), stag.key() ^ 0x01).unwrap()
}

/// The four data-path accesses, each returning its result.
#[derive(Debug, Clone, Copy)]
enum Op {
    Place,
    Fetch,
    LocalRead,
    LocalWrite,
}

const OPS: [Op; 4] = [Op::Place, Op::Fetch, Op::LocalRead, Op::LocalWrite];

impl Op {
    fn run(
        self,
        table: &StagTable,
        stag: Stag,
        pd: PdId,
        to: u64,
        len: usize,
    ) -> Result<(), TaggedError> {
        let data = vec![0xEE; len];
        let mut out = vec![0; len];
        match self {
            Op::Place => table.place(stag, pd, to, &data),
            Op::Fetch => table.fetch(stag, pd, to, &mut out),
            Op::LocalRead => table.local_read(stag, pd, to, &mut out),
            Op::LocalWrite => table.local_write(stag, pd, to, &data),
        }
    }

    /// The right the access needs.
    fn needs(self) -> Access {
        match self {
            Op::Place => Access::REMOTE_WRITE,
            Op::Fetch => Access::REMOTE_READ,
            Op::LocalRead => Access::NONE,
            Op::LocalWrite => Access::LOCAL_WRITE,
        }
    }

    /// Every right but the one needed: a region that refuses this access.
    fn refused_by(self) -> Access {
        Access::from_bits_truncate(Access::ALL.bits() & !self.needs().bits())
    }
}

#[test]
fn checks_run_in_order() {
    let f = fixture(64);
    for op in OPS {
        let len = 16;
        let buf = buffer(64, 0x11);
        let stag = |access| {
            f.table
                .register(
                    f.pd,
                    RegionSpec::new(buf.clone(), 8, 32, BASE, access),
                    0x33,
                )
                .unwrap()
        };
        let all = stag(Access::ALL);
        let refusing = stag(op.refused_by());
        let wrap = u64::MAX - 3;
        let ctx = format!("{op:?}");

        // Every check fails: the STag check wins.
        assert_eq!(
            op.run(&f.table, rekeyed(refusing), f.other_pd, wrap, len),
            Err(TaggedError::InvalidStag),
            "{ctx}"
        );
        // Valid STag; wrong PD, rights, wrap: the PD check wins.
        assert_eq!(
            op.run(&f.table, refusing, f.other_pd, wrap, len),
            Err(TaggedError::StagNotAssociated),
            "{ctx}"
        );
        if op.needs() != Access::NONE {
            // Right PD; wrong rights and wrap: access rights win.
            assert_eq!(
                op.run(&f.table, refusing, f.pd, wrap, len),
                Err(TaggedError::AccessRights),
                "{ctx}"
            );
        }
        // Rights granted; the TO wraps (and is out of bounds): wrap wins.
        assert_eq!(
            op.run(&f.table, all, f.pd, wrap, len),
            Err(TaggedError::ToWrap),
            "{ctx}"
        );
        // Only the bounds are wrong.
        assert_eq!(
            op.run(&f.table, all, f.pd, BASE + 17, len),
            Err(TaggedError::BaseOrBounds),
            "{ctx}"
        );
        assert_eq!(op.run(&f.table, all, f.pd, BASE + 16, len), Ok(()), "{ctx}");
        // Nothing but the one good access wrote; the failures left no trace.
        let got = contents(&buf);
        let written = matches!(op, Op::Place | Op::LocalWrite);
        for (i, &octet) in got.iter().enumerate() {
            let expected = if written && (24..40).contains(&i) {
                0xEE
            } else {
                0x11
            };
            assert_eq!(octet, expected, "{ctx} octet {i}");
        }
    }
}

#[test]
fn bounds_at_the_edges() {
    let f = fixture(64);
    let buf = buffer(64, 0);
    // 32 octets at buffer offset 8, TOs BASE..BASE + 32.
    let stag = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buf.clone(), 8, 32, BASE, Access::ALL),
            1,
        )
        .unwrap();
    let place = |to, len: usize| f.table.place(stag, f.pd, to, &vec![0xCC; len]);
    let fetch = |to, len: usize| f.table.fetch(stag, f.pd, to, &mut vec![0; len]);
    for check in [&place as &dyn Fn(u64, usize) -> _, &fetch] {
        assert_eq!(check(BASE, 32), Ok(()), "to == base, whole region");
        assert_eq!(check(BASE, 1), Ok(()), "to == base");
        assert_eq!(check(BASE + 31, 1), Ok(()), "to + len == end");
        assert_eq!(check(BASE + 8, 24), Ok(()), "to + len == end");
        assert_eq!(
            check(BASE - 1, 1),
            Err(TaggedError::BaseOrBounds),
            "one before base"
        );
        assert_eq!(
            check(BASE - 1, 2),
            Err(TaggedError::BaseOrBounds),
            "straddles base"
        );
        assert_eq!(
            check(BASE + 32, 1),
            Err(TaggedError::BaseOrBounds),
            "one past end"
        );
        assert_eq!(
            check(BASE + 31, 2),
            Err(TaggedError::BaseOrBounds),
            "straddles end"
        );
        assert_eq!(
            check(BASE, 33),
            Err(TaggedError::BaseOrBounds),
            "one too long"
        );
        assert_eq!(check(0, 1), Err(TaggedError::BaseOrBounds), "TO 0");
    }
    // The octets outside the region (buffer offsets 0..8 and 40..64) are
    // untouched; the region itself was filled.
    let got = contents(&buf);
    assert!(got[..8].iter().all(|&b| b == 0));
    assert!(got[8..40].iter().all(|&b| b == 0xCC));
    assert!(got[40..].iter().all(|&b| b == 0));

    // Placement lands at the right offset.
    f.table.place(stag, f.pd, BASE + 5, b"xyz").unwrap();
    let mut out = [0u8; 3];
    buf.read_at(13, &mut out).unwrap();
    assert_eq!(&out, b"xyz");
    f.table.fetch(stag, f.pd, BASE + 5, &mut out).unwrap();
    assert_eq!(&out, b"xyz");
}

#[test]
fn to_wrap_at_u64_max() {
    let f = fixture(64);
    // A region at the very top of the TO space: its last TO is u64::MAX - 1.
    let top = u64::MAX - 16;
    let buf = buffer(16, 0);
    let stag = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buf.clone(), 0, 16, top, Access::ALL),
            2,
        )
        .unwrap();
    assert_eq!(f.table.place(stag, f.pd, top, &[1; 16]), Ok(()));
    assert_eq!(
        f.table.place(stag, f.pd, u64::MAX - 8, &[1; 8]),
        Ok(()),
        "to + len == u64::MAX, the region's end: no wrap"
    );
    assert_eq!(f.table.place(stag, f.pd, u64::MAX - 1, &[2]), Ok(()));
    assert_eq!(
        f.table.place(stag, f.pd, u64::MAX, &[3]),
        Err(TaggedError::ToWrap)
    );
    assert_eq!(
        f.table.place(stag, f.pd, u64::MAX - 1, &[3, 3]),
        Err(TaggedError::ToWrap)
    );
    assert_eq!(
        f.table.fetch(stag, f.pd, u64::MAX - 7, &mut [0; 9]),
        Err(TaggedError::ToWrap)
    );
    // A huge TO on an ordinary region wraps too.
    let low = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buffer(16, 0), 0, 16, 0, Access::ALL),
            2,
        )
        .unwrap();
    assert_eq!(
        f.table.place(low, f.pd, u64::MAX, &[0]),
        Err(TaggedError::ToWrap)
    );
    // A region whose TOs would wrap is refused at registration.
    assert_eq!(
        f.table.register(
            f.pd,
            RegionSpec::new(buffer(16, 0), 0, 16, u64::MAX - 15, Access::ALL),
            2
        ),
        Err(MemError::RegionWraps)
    );
    let mut got = contents(&buf);
    assert_eq!(got.pop(), Some(2));
    assert!(got.iter().all(|&b| b == 1));
}

#[test]
fn key_index_and_pd_mismatches() {
    let f = fixture(64);
    let stag = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buffer(16, 0), 0, 16, BASE, Access::ALL),
            0x80,
        )
        .unwrap();
    let past_end = Stag::from_parts(64, 0x80).unwrap();
    let huge = Stag::from_parts((1 << 24) - 1, 0x80).unwrap();
    for op in OPS {
        for bad in [
            rekeyed(stag),
            Stag(stag.raw() ^ 0xFF),
            Stag(0),
            Stag(0x80),
            past_end,
            huge,
        ] {
            assert_eq!(
                op.run(&f.table, bad, f.pd, BASE, 4),
                Err(TaggedError::InvalidStag),
                "{op:?} {bad}"
            );
        }
        assert_eq!(
            op.run(&f.table, stag, f.other_pd, BASE, 4),
            Err(TaggedError::StagNotAssociated),
            "{op:?}"
        );
        assert_eq!(op.run(&f.table, stag, f.pd, BASE, 4), Ok(()), "{op:?}");
    }
    assert_eq!(f.table.info(rekeyed(stag)), None);
    assert_eq!(
        f.table.deregister(rekeyed(stag)).unwrap_err(),
        MemError::InvalidStag
    );
    assert_eq!(
        f.table.invalidate_local(rekeyed(stag)).unwrap_err(),
        MemError::InvalidStag
    );
    assert_eq!(
        f.table.deregister(Stag(0)).unwrap_err(),
        MemError::InvalidStag
    );
    assert_eq!(f.table.deregister(huge).unwrap_err(), MemError::InvalidStag);
    // The mismatches changed nothing.
    assert!(f.table.info(stag).unwrap().valid);
}

#[test]
fn access_rights_matrix() {
    let f = fixture(64);
    for bits in 0..=Access::ALL.bits() {
        let access = Access::from_bits(bits).unwrap();
        let stag = f
            .table
            .register(
                f.pd,
                RegionSpec::new(buffer(8, 0), 0, 8, BASE, access),
                bits,
            )
            .unwrap();
        for op in OPS {
            let expected = if access.contains(op.needs()) {
                Ok(())
            } else {
                Err(TaggedError::AccessRights)
            };
            assert_eq!(
                op.run(&f.table, stag, f.pd, BASE, 8),
                expected,
                "{op:?} {access:?}"
            );
        }
    }
}

#[test]
fn zero_length_accesses_are_not_checked() {
    let f = fixture(64);
    let buf = buffer(8, 0x5A);
    let no_rights = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buf.clone(), 0, 8, BASE, Access::NONE),
            3,
        )
        .unwrap();
    let bad_stags = [Stag(0), Stag(1), rekeyed(no_rights), no_rights];
    for stag in bad_stags {
        for pd in [f.pd, f.other_pd] {
            for to in [0, BASE - 1, BASE + 9, u64::MAX] {
                assert_eq!(f.table.place(stag, pd, to, &[]), Ok(()));
                assert_eq!(f.table.fetch(stag, pd, to, &mut []), Ok(()));
                assert_eq!(f.table.local_read(stag, pd, to, &mut []), Ok(()));
                assert_eq!(f.table.local_write(stag, pd, to, &[]), Ok(()));
            }
        }
    }
    // One octet is checked again.
    assert_eq!(
        f.table.place(Stag(1), f.pd, 0, &[0]),
        Err(TaggedError::InvalidStag)
    );
    assert!(contents(&buf).iter().all(|&b| b == 0x5A));
}

#[test]
fn remote_invalidation() {
    let f = fixture(64);
    let register = |invalidatable| {
        let spec = RegionSpec {
            invalidatable,
            ..RegionSpec::new(buffer(8, 0), 0, 8, BASE, Access::ALL)
        };
        f.table.register(f.pd, spec, 0x44).unwrap()
    };
    let stag = register(true);

    // Refusals change nothing.
    assert_eq!(
        f.table.invalidate_remote(rekeyed(stag), f.pd),
        Err(InvalidateError::InvalidStag)
    );
    assert_eq!(
        f.table.invalidate_remote(stag, f.other_pd),
        Err(InvalidateError::StagNotAssociated)
    );
    assert_eq!(
        f.table.invalidate_remote(Stag(0), f.pd),
        Err(InvalidateError::InvalidStag)
    );
    assert_eq!(f.table.place(stag, f.pd, BASE, &[1]), Ok(()));

    // The compare-and-swap clears V once; the second attempt finds the STag
    // invalid.
    assert_eq!(f.table.invalidate_remote(stag, f.pd), Ok(()));
    assert_eq!(
        f.table.place(stag, f.pd, BASE, &[1]),
        Err(TaggedError::InvalidStag)
    );
    assert_eq!(
        f.table.fetch(stag, f.pd, BASE, &mut [0]),
        Err(TaggedError::InvalidStag)
    );
    assert_eq!(
        f.table.invalidate_remote(stag, f.pd),
        Err(InvalidateError::InvalidStag)
    );
    let info = f.table.info(stag).unwrap();
    assert!(!info.valid && info.invalidatable);
    f.table.quiesce().wait();
    // Still registered: local invalidation is idempotent, deregistration works.
    f.table.invalidate_local(stag).unwrap().wait();
    f.table.deregister(stag).unwrap().wait();
    assert_eq!(
        f.table.invalidate_remote(stag, f.pd),
        Err(InvalidateError::InvalidStag)
    );

    // A region registered as not invalidatable refuses, and stays valid.
    let fixed = register(false);
    assert_eq!(
        f.table.invalidate_remote(fixed, f.pd),
        Err(InvalidateError::CannotInvalidate)
    );
    assert!(f.table.info(fixed).unwrap().valid);
    assert_eq!(f.table.place(fixed, f.pd, BASE, &[1]), Ok(()));
    // PD is checked before invalidatability.
    assert_eq!(
        f.table.invalidate_remote(fixed, f.other_pd),
        Err(InvalidateError::StagNotAssociated)
    );
    // The owner can still invalidate it locally.
    f.table.invalidate_local(fixed).unwrap().wait();
    assert_eq!(
        f.table.invalidate_remote(fixed, f.pd),
        Err(InvalidateError::InvalidStag)
    );

    // The Terminate codes.
    assert_eq!(
        InvalidateError::InvalidStag.rdmap_error(),
        TermError::RdmapInvalidStag
    );
    assert_eq!(
        InvalidateError::CannotInvalidate.rdmap_error(),
        TermError::RdmapOperationCannotInvalidate
    );
}

#[test]
fn local_invalidation() {
    let f = fixture(64);
    let buf = buffer(8, 0);
    let stag = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buf.clone(), 0, 8, BASE, Access::ALL),
            0x55,
        )
        .unwrap();
    let grace = f.table.invalidate_local(stag).unwrap();
    grace.wait();
    assert!(grace.is_complete());
    for op in OPS {
        assert_eq!(
            op.run(&f.table, stag, f.pd, BASE, 1),
            Err(TaggedError::InvalidStag),
            "{op:?}"
        );
    }
    // Twice is fine, as the verbs allow; a wrong key is not.
    f.table.invalidate_local(stag).unwrap().wait();
    assert_eq!(
        f.table.invalidate_local(rekeyed(stag)).unwrap_err(),
        MemError::InvalidStag
    );
    assert_eq!(f.table.registered(), 1);
    assert!(!f.table.info(stag).unwrap().valid);
    f.table.deregister(stag).unwrap().wait();
    assert_eq!(
        f.table.invalidate_local(stag).unwrap_err(),
        MemError::InvalidStag
    );
    assert_eq!(f.table.deregister(stag).unwrap_err(), MemError::InvalidStag);
    assert_eq!(f.table.info(stag), None);
    assert_eq!(f.table.registered(), 0);
    assert!(contents(&buf).iter().all(|&b| b == 0));
}

#[test]
fn reregistration_bumps_the_generation() {
    // One usable slot: every registration lands on index 1.
    let f = fixture(2);
    let old = buffer(8, 0);
    let first = f
        .table
        .register(
            f.pd,
            RegionSpec::new(old.clone(), 0, 8, BASE, Access::ALL),
            7,
        )
        .unwrap();
    assert_eq!(first, Stag::from_parts(1, 7).unwrap());
    let generation = f.table.info(first).unwrap().generation;
    f.table.deregister(first).unwrap().wait();
    assert_eq!(
        f.table.place(first, f.pd, BASE, &[1]),
        Err(TaggedError::InvalidStag)
    );

    // Same key: the same STag again, now naming the new region.
    let new = buffer(8, 0);
    let second = f
        .table
        .register(
            f.pd,
            RegionSpec::new(new.clone(), 0, 8, BASE, Access::ALL),
            7,
        )
        .unwrap();
    assert_eq!(second, first);
    assert_eq!(
        f.table.info(second).unwrap().generation,
        generation.wrapping_add(1)
    );
    f.table.place(second, f.pd, BASE, &[9]).unwrap();
    assert_eq!(contents(&new)[0], 9);
    assert!(contents(&old).iter().all(|&b| b == 0));

    // Another key: the old STag is dead, the new one works.
    f.table.deregister(second).unwrap().wait();
    let third = f
        .table
        .register(
            f.pd,
            RegionSpec::new(buffer(8, 0), 0, 8, BASE, Access::ALL),
            8,
        )
        .unwrap();
    assert_eq!(third.index(), 1);
    assert_eq!(
        f.table.info(third).unwrap().generation,
        generation.wrapping_add(2)
    );
    assert_eq!(
        f.table.place(second, f.pd, BASE, &[1]),
        Err(TaggedError::InvalidStag)
    );
    assert_eq!(f.table.place(third, f.pd, BASE, &[1]), Ok(()));
}

#[test]
fn table_full_and_stag_zero() {
    let f = fixture(8);
    let spec = || RegionSpec::new(buffer(4, 0), 0, 4, 0, Access::ALL);
    let stags: Vec<Stag> = (0..7)
        .map(|_| f.table.register(f.pd, spec(), 0).unwrap())
        .collect();
    let indices: HashSet<u32> = stags.iter().map(|s| s.index()).collect();
    assert_eq!(indices, (1..8).collect());
    assert!(stags.iter().all(|s| s.raw() != 0));
    assert_eq!(f.table.register(f.pd, spec(), 0), Err(MemError::TableFull));
    assert_eq!(f.table.registered(), 7);
    // A freed slot is found again, wherever it is.
    f.table.deregister(stags[3]).unwrap();
    assert_eq!(
        f.table.register(f.pd, spec(), 0).unwrap().index(),
        stags[3].index()
    );
    assert_eq!(f.table.register(f.pd, spec(), 0), Err(MemError::TableFull));

    // With key 0 and the smallest table, the STag is 0x100, never 0.
    let tiny = fixture(2);
    for _ in 0..100 {
        let stag = tiny.table.register(tiny.pd, spec(), 0).unwrap();
        assert_eq!(stag, Stag(0x100));
        tiny.table.deregister(stag).unwrap();
    }
}

#[test]
fn bad_capacities_and_specs() {
    for capacity in [0, 1, StagTable::MAX_CAPACITY + 1] {
        assert_eq!(
            StagTable::new(capacity).unwrap_err(),
            MemError::BadCapacity(capacity)
        );
    }
    assert_eq!(StagTable::default().capacity(), 1 << 16);
    let f = fixture(4);
    assert_eq!(
        f.table
            .register(f.pd, RegionSpec::new(buffer(8, 0), 4, 5, 0, Access::ALL), 0),
        Err(MemError::OutOfBuffer {
            offset: 4,
            len: 5,
            buffer_len: 8
        })
    );
    assert_eq!(f.table.registered(), 0);
}

#[test]
fn indices_are_spread() {
    let f = fixture(1 << 16);
    let spec = || RegionSpec::new(buffer(1, 0), 0, 1, 0, Access::NONE);
    let indices: Vec<u32> = (0..256)
        .map(|_| f.table.register(f.pd, spec(), 0).unwrap().index())
        .collect();
    assert_eq!(indices.iter().collect::<HashSet<_>>().len(), 256);
    assert!(indices.iter().all(|&i| i != 0));
    // Sequential allocation would make (almost) every step +1; random
    // placement makes any +1 step a 1-in-65535 event.
    let sequential = indices.windows(2).filter(|w| w[1] == w[0] + 1).count();
    assert!(sequential < 8, "{sequential} sequential steps: {indices:?}");
    // Spread over the table: the chance that 256 uniform indices all miss
    // a quarter of the table is (3/4)^256.
    let quarter = (1 << 16) / 4;
    assert!(indices.iter().any(|&i| i < quarter));
    assert!(indices.iter().any(|&i| i >= 3 * quarter));
}

#[test]
fn terminate_codes_of_tagged_errors() {
    // A placement (DDP) and a Read Request source (RDMAP) report the same
    // fault on their own layer.
    assert_eq!(
        TaggedError::InvalidStag.ddp_error().parts(),
        (Layer::Ddp, 1, 0x00)
    );
    assert_eq!(
        TaggedError::InvalidStag.rdmap_error().parts(),
        (Layer::Rdmap, 1, 0x00)
    );
    assert_eq!(
        TaggedError::BaseOrBounds.ddp_error(),
        TermError::DdpTaggedBaseOrBounds
    );
    assert_eq!(
        TaggedError::StagNotAssociated.rdmap_error(),
        TermError::RdmapStagNotAssociated
    );
}

#[test]
fn concurrent_remote_invalidation_succeeds_once() {
    const THREADS: usize = 6;
    let f = Arc::new(fixture(64));
    for round in 0..20u8 {
        let stag = f
            .table
            .register(
                f.pd,
                RegionSpec::new(buffer(8, 0), 0, 8, BASE, Access::ALL),
                round,
            )
            .unwrap();
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (f, barrier) = (Arc::clone(&f), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    f.table.invalidate_remote(stag, f.pd)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(results
            .iter()
            .all(|r| matches!(r, Ok(()) | Err(InvalidateError::InvalidStag))));
        f.table.deregister(stag).unwrap().wait();
    }
}

#[test]
fn concurrent_registration_fills_the_table_exactly() {
    const THREADS: usize = 4;
    let f = Arc::new(fixture(257));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (f, barrier) = (Arc::clone(&f), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut mine = Vec::new();
                loop {
                    let spec = RegionSpec::new(buffer(1, 0), 0, 1, 0, Access::ALL);
                    match f.table.register(f.pd, spec, t as u8) {
                        Ok(stag) => mine.push(stag),
                        Err(MemError::TableFull) => return mine,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let all: Vec<Stag> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(all.len(), 256);
    let indices: HashSet<u32> = all.iter().map(|s| s.index()).collect();
    assert_eq!(indices, (1..257).collect());
    assert_eq!(f.table.registered(), 256);
}

/// The project's concurrency requirement: data-path threads hammer
/// `place` and `fetch` on live and stale STags while this thread
/// registers, invalidates and deregisters regions; after each
/// `deregister(..).wait()` the retired buffer must never change again.
#[test]
fn no_write_lands_after_deregistration() {
    /// Data-path threads; each owns one chunk of every region, so that no
    /// two threads ever touch the same octets.
    const HAMMERS: usize = 3;
    const CHUNK: usize = 16 * 1024;
    const REGION_LEN: usize = HAMMERS * CHUNK;
    /// STags advertised at any time.
    const LIVE: usize = 4;
    /// Stale STags each hammer keeps trying after they are replaced.
    const REMEMBERED: usize = 12;
    /// Regions retired by the control thread.
    const ROUNDS: usize = 300;
    /// How many times a retired buffer is re-read, with a pause between
    /// reads that lets the hammers run (a sleep rather than a yield, which
    /// can cost a whole time slice when the hammers fill every core).
    const CHECKS: usize = 25;
    const PAUSE: Duration = Duration::from_micros(20);
    const SENTINEL: u8 = 0xA5;

    struct Shared {
        table: StagTable,
        pd: PdId,
        live: Vec<AtomicU32>,
        stop: AtomicBool,
        placed: AtomicUsize,
        refused: AtomicUsize,
    }

    let pd = ProtectionDomains::new().allocate().unwrap();
    let shared = Arc::new(Shared {
        table: StagTable::new(64).unwrap(),
        pd,
        live: (0..LIVE).map(|_| AtomicU32::new(0)).collect(),
        stop: AtomicBool::new(false),
        placed: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
    });

    // Every region is exposed at the same base TO, so the TO a hammer
    // writes, `BASE + its chunk offset`, is its own chunk of whichever
    // region an STag names, stale STags whose index and key were reused
    // included.
    let register = |key: u8| {
        let buf = buffer(REGION_LEN, SENTINEL);
        let access = Access::REMOTE_WRITE | Access::REMOTE_READ;
        let spec = RegionSpec::new(buf.clone(), 0, REGION_LEN, BASE, access);
        (shared.table.register(pd, spec, key).unwrap(), buf)
    };
    let mut live: Vec<(Stag, Arc<MemoryBuffer>)> = (0..LIVE).map(|i| register(i as u8)).collect();
    for (slot, (stag, _)) in shared.live.iter().zip(&live) {
        slot.store(stag.raw(), Ordering::Release);
    }

    let start = Arc::new(Barrier::new(HAMMERS + 1));
    let hammers: Vec<_> = (0..HAMMERS)
        .map(|t| {
            let shared = Arc::clone(&shared);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                // The hammer's fill octet, after an 8-octet serial number that
                // makes every placement differ from the last, so that a late
                // write cannot hide by repeating what is already there.
                let mut pattern = [t as u8 + 1; CHUNK];
                let mut serial = 1u64;
                pattern[..8].copy_from_slice(&serial.to_le_bytes());
                let to = BASE + (t * CHUNK) as u64;
                let mut out = [0u8; CHUNK];
                // Deterministic progress: before any churn, the first region
                // is live and this placement must succeed.
                let first = Stag(shared.live[0].load(Ordering::Acquire));
                shared.table.place(first, shared.pd, to, &pattern).unwrap();
                shared.placed.fetch_add(1, Ordering::Relaxed);
                start.wait();
                let mut known: Vec<Stag> = Vec::new();
                let mut round = 0usize;
                while !shared.stop.load(Ordering::Acquire) {
                    // Learn the advertised STags now and then; keep old ones.
                    if round % 8 == 0 {
                        for slot in &shared.live {
                            let stag = Stag(slot.load(Ordering::Acquire));
                            if !known.contains(&stag) {
                                known.push(stag);
                                if known.len() > REMEMBERED {
                                    known.remove(0);
                                }
                            }
                        }
                    }
                    round += 1;
                    for &stag in &known {
                        serial += 1;
                        pattern[..8].copy_from_slice(&serial.to_le_bytes());
                        match shared.table.place(stag, shared.pd, to, &pattern) {
                            Ok(()) => shared.placed.fetch_add(1, Ordering::Relaxed),
                            Err(TaggedError::InvalidStag) => {
                                shared.refused.fetch_add(1, Ordering::Relaxed)
                            }
                            Err(e) => panic!("place: {e}"),
                        };
                        match shared.table.fetch(stag, shared.pd, to, &mut out) {
                            Ok(()) => {
                                // Only this thread writes this chunk, and its
                                // writes are over: it is untouched or one of
                                // ours, whole.
                                let fresh = out.iter().all(|&b| b == SENTINEL);
                                let ours = out[8..] == pattern[8..] && {
                                    let mut sn = [0u8; 8];
                                    sn.copy_from_slice(&out[..8]);
                                    (1..=serial).contains(&u64::from_le_bytes(sn))
                                };
                                assert!(fresh || ours, "torn or foreign chunk: {:?}", &out[..16]);
                            }
                            Err(TaggedError::InvalidStag) => {}
                            Err(e) => panic!("fetch: {e}"),
                        }
                    }
                }
            })
        })
        .collect();

    start.wait();
    for round in 0..ROUNDS {
        let i = round % LIVE;
        let (fresh_stag, fresh_buf) = register((LIVE + round) as u8);
        shared.live[i].store(fresh_stag.raw(), Ordering::Release);
        let (old_stag, old_buf) = std::mem::replace(&mut live[i], (fresh_stag, fresh_buf));

        match round % 3 {
            0 => {}
            1 => {
                // Local invalidation alone already stops every write.
                shared.table.invalidate_local(old_stag).unwrap().wait();
                let snapshot = contents(&old_buf);
                for _ in 0..CHECKS / 4 {
                    thread::sleep(PAUSE);
                    assert!(contents(&old_buf) == snapshot, "write after invalidation");
                }
            }
            _ => shared.table.invalidate_remote(old_stag, pd).unwrap(),
        }
        shared.table.deregister(old_stag).unwrap().wait();
        // The table no longer holds the buffer.
        assert_eq!(Arc::strong_count(&old_buf), 1);
        let snapshot = contents(&old_buf);
        for check in 0..CHECKS {
            thread::sleep(PAUSE);
            assert!(
                contents(&old_buf) == snapshot,
                "round {round}: a write landed in a deregistered buffer (check {check})"
            );
        }
    }
    shared.stop.store(true, Ordering::Release);
    for hammer in hammers {
        hammer.join().unwrap();
    }
    // Each hammer's first placement succeeded before the churn began.
    assert!(shared.placed.load(Ordering::Relaxed) >= HAMMERS);
    assert_eq!(shared.table.registered(), LIVE);
    eprintln!(
        "placed {}, refused {}",
        shared.placed.load(Ordering::Relaxed),
        shared.refused.load(Ordering::Relaxed)
    );
}
