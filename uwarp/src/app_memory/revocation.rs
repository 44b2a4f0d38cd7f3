//! The process's registered ranges of application memory, and their
//! revocation before the program unmaps them.
//!
//! An RNIC keeps writing registered pages after the program unmapped
//! them, and only them (they are pinned). uwarp writes the range where it
//! lies, so before the range changes hands it must stop: [`revoke`]
//! invalidates every region overlapping the range (a later access by the
//! peer is refused with a Terminate, by a local request with a protection
//! error completion) and waits for the STag table's grace period. That
//! wait is the in-flight marker: every placement, fetch or copy runs
//! pinned to the table's epoch, so once a grace period started after the
//! invalidation ends, no copy into the range is under way and none can
//! start. The data path takes no lock and writes nothing for it.
//!
//! One lock guards the registry: registration holds it from the check of
//! the mapping to the insertion, and [`revoke`] from the search to the
//! invalidations, so an unmap either comes before a registration (which
//! then finds the hole) or revokes it; a region leaves the registry
//! before its STag is deregistered, so a revocation never invalidates an
//! STag that a new registration reuses. Nothing waits while holding it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use uwarp_stack::mem::{GracePeriod, Stag, StagTable};

/// The registry: every non-empty registered range of application memory.
#[derive(Debug)]
pub(crate) struct Ranges {
    /// By first address, then a serial number (ranges may be equal).
    by_start: BTreeMap<(usize, u64), Entry>,
    /// The longest range ever registered: ranges overlapping `start..`
    /// begin at `start - longest` or later.
    longest: usize,
    /// The next serial number.
    serial: u64,
}

/// A registered range.
#[derive(Debug)]
struct Entry {
    /// One past its last address.
    end: usize,
    /// Its STag, in `table`.
    stag: Stag,
    table: Arc<StagTable>,
    /// The process that registered it: a child of `fork` inherits the
    /// registry, not the device behind the parent's registrations.
    owner: u32,
}

/// A region's place in the registry, which it leaves when the region is
/// dropped ([`Ranges::remove`]).
#[derive(Debug)]
pub(crate) struct Revocable {
    key: (usize, u64),
}

/// The registry of the process.
static RANGES: Mutex<Ranges> = Mutex::new(Ranges {
    by_start: BTreeMap::new(),
    longest: 0,
    serial: 0,
});

/// How many ranges the registry holds: an unmap when it holds none (a
/// program that registers nothing, or not yet) takes no lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);

impl Ranges {
    /// The registry, locked. A panic while it was held left it consistent
    /// (every change is one map operation), so poisoning is ignored.
    pub(crate) fn lock() -> MutexGuard<'static, Ranges> {
        RANGES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `len` (non-zero) octets at `addr`, registered as `stag` of
    /// `table`.
    pub(crate) fn insert(
        &mut self,
        addr: usize,
        len: usize,
        table: &Arc<StagTable>,
        stag: Stag,
    ) -> Revocable {
        let key = (addr, self.serial);
        self.serial += 1;
        self.longest = self.longest.max(len);
        let entry = Entry {
            end: addr + len,
            stag,
            table: Arc::clone(table),
            owner: std::process::id(),
        };
        self.by_start.insert(key, entry);
        COUNT.fetch_add(1, Ordering::Release);
        Revocable { key }
    }

    /// Forgets a range, before its STag is deregistered.
    pub(crate) fn remove(&mut self, revocable: Revocable) {
        if self.by_start.remove(&revocable.key).is_some() {
            COUNT.fetch_sub(1, Ordering::Release);
        }
    }

    /// The ranges that share an octet with `start .. end`.
    fn overlapping(&self, start: usize, end: usize) -> impl Iterator<Item = &Entry> {
        let from = (start.saturating_sub(self.longest), 0);
        self.by_start
            .range(from..(end, 0))
            .filter(move |(_, entry)| entry.end > start)
            .map(|(_, entry)| entry)
    }
}

/// Revokes the application's registrations of any octet of the `len`
/// octets at `addr`, which are about to be unmapped or replaced: each
/// overlapping region is invalidated as a whole (it stays registered
/// until the program deregisters it), then, unless the calling thread is
/// inside an STag table access itself, this waits until no copy into or
/// out of the range is under way. From then on a peer's access to those
/// regions gets a Terminate (invalid STag) and a local one a protection
/// error completion, instead of reaching whatever is mapped there next.
///
/// Cheap when nothing overlaps: one atomic load when no application
/// memory is registered, a lock and a search otherwise. In a child of
/// `fork` the parent's registrations are left alone.
pub fn revoke(addr: usize, len: usize) {
    if len == 0 || COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let end = addr.saturating_add(len);
    // A child of fork has the parent's registrations but none of its
    // device (whose threads, pinned at the fork, would never let a grace
    // period end): only its own are revoked.
    let process = std::process::id();
    let grace_periods: Vec<GracePeriod> = Ranges::lock()
        .overlapping(addr, end)
        .filter(|entry| entry.owner == process)
        .filter_map(|entry| entry.table.invalidate_local(entry.stag).ok())
        .collect();
    if GracePeriod::may_wait() {
        for grace in &grace_periods {
            grace.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uwarp_stack::mem::{Access, MemoryBuffer, PdId, RegionSpec};

    /// A table with one region of `len` octets at a made-up address,
    /// recorded in the registry.
    fn registered(
        table: &Arc<StagTable>,
        addr: usize,
        len: usize,
    ) -> (Stag, Revocable, Arc<MemoryBuffer>) {
        let buffer = Arc::new(MemoryBuffer::new(len));
        let spec = RegionSpec::new(buffer.clone(), 0, len, addr as u64, Access::ALL);
        let stag = table.register(PdId::from_raw(1), spec, 7).unwrap();
        let revocable = Ranges::lock().insert(addr, len, table, stag);
        (stag, revocable, buffer)
    }

    fn valid(table: &StagTable, stag: Stag) -> bool {
        table.info(stag).unwrap().valid
    }

    #[test]
    fn revokes_exactly_the_regions_that_overlap() {
        // Addresses no other test registers (the registry is the
        // process's): the top of the address space.
        let base = usize::MAX - (1 << 20);
        let table = Arc::new(StagTable::new(16).unwrap());
        let (before, r1, _b1) = registered(&table, base, 0x1000);
        let (inside, r2, _b2) = registered(&table, base + 0x3000, 0x2000);
        let (after, r3, _b3) = registered(&table, base + 0x8000, 0x1000);
        revoke(base + 0x1000, 0x3000);
        assert!(valid(&table, before), "ends where the range starts");
        assert!(!valid(&table, inside), "starts inside the range");
        assert!(valid(&table, after));
        revoke(base + 0x8fff, 1);
        assert!(!valid(&table, after), "one octet is enough");
        revoke(base + 0x1000, 0);
        assert!(valid(&table, before), "an empty range revokes nothing");
        for revocable in [r1, r2, r3] {
            Ranges::lock().remove(revocable);
        }
        // Forgotten ranges are not revoked.
        revoke(base, 0x1000);
        assert!(valid(&table, before));
    }
}
