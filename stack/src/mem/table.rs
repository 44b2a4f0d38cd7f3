//! The STag table: the data sink's map from STag to registered region
//! (RFC 5041 sections 5.1.1 and 7.1, RFC 5040 sections 5.1-5.3), written
//! by the control side and read lock-free by any number of data-path
//! threads.
//!
//! Each slot holds a 64-bit state word (see `state.rs`) and a pointer to an
//! immutable region descriptor, published through `crossbeam_epoch`. A
//! data-path access pins the epoch, loads the state word (valid? key?),
//! loads the descriptor and checks that it belongs to the same generation,
//! then checks PD, access rights, TO wrap and bounds, and copies. Control
//! operations change the state word first and retire descriptors through
//! the epoch collector, so the [`GracePeriod`] they return ends only after
//! every access that could still see the old state has returned.

use core::fmt;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};

use super::access::Access;
use super::buffer::MemoryBuffer;
use super::error::{InvalidateError, MemError, TaggedError};
use super::grace::{Deregistered, GracePeriod};
use super::lent::Lent;
use super::pd::PdId;
use super::region::{Region, RegionSpec};
use super::slice::BufferSlice;
use super::stag::{Stag, INDEX_LIMIT};
use super::state::State;

/// One table entry.
struct Slot {
    /// The [`State`] word.
    state: AtomicU64,
    /// The descriptor of the current registration; null when free.
    region: Atomic<Region>,
}

/// What [`StagTable::info`] reports about a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagInfo {
    /// Whether the STag may be used (not invalidated).
    pub valid: bool,
    /// The owning protection domain.
    pub pd: PdId,
    /// Tagged Offset of the first octet.
    pub base_to: u64,
    /// Length in octets.
    pub len: u64,
    /// Access rights besides local read.
    pub access: Access,
    /// Whether a Send with Invalidate may invalidate it.
    pub invalidatable: bool,
    /// How many registrations the slot has seen, this one included (mod
    /// 2^32).
    pub generation: u32,
}

/// The STag table (see the module documentation). Share it with `Arc`:
/// every method takes `&self` and may run on any thread.
///
/// Data-path methods ([`place`](Self::place), [`fetch`](Self::fetch),
/// [`local_read`](Self::local_read), [`local_write`](Self::local_write),
/// [`invalidate_remote`](Self::invalidate_remote)) never block and never
/// allocate. Control methods ([`register`](Self::register),
/// [`invalidate_local`](Self::invalidate_local),
/// [`deregister`](Self::deregister)) are lock-free too; waiting for a grace
/// period is a separate, explicit step.
pub struct StagTable {
    slots: Box<[Slot]>,
    registered: AtomicUsize,
}

impl StagTable {
    /// The capacity [`Default`] gives: 65536 slots.
    pub const DEFAULT_CAPACITY: usize = 1 << 16;

    /// The largest capacity: every 24-bit index.
    pub const MAX_CAPACITY: usize = INDEX_LIMIT as usize;

    /// A table of `capacity` slots, `2..=2^24`. Slot 0 is never used (so
    /// STag 0 is never handed out): `capacity - 1` regions fit.
    pub fn new(capacity: usize) -> Result<Self, MemError> {
        if !(2..=Self::MAX_CAPACITY).contains(&capacity) {
            return Err(MemError::BadCapacity(capacity));
        }
        let slots = (0..capacity)
            .map(|_| Slot {
                state: AtomicU64::new(State::free(0).0),
                region: Atomic::null(),
            })
            .collect();
        Ok(Self {
            slots,
            registered: AtomicUsize::new(0),
        })
    }

    /// Number of slots, slot 0 included.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of registrations (valid or invalidated) not yet deregistered.
    pub fn registered(&self) -> usize {
        self.registered.load(Ordering::Relaxed)
    }

    /// The slot an STag's index names; none for index 0 or past the end.
    fn slot(&self, stag: Stag) -> Option<&Slot> {
        match stag.index() as usize {
            0 => None,
            index => self.slots.get(index),
        }
    }

    // ----- control side -------------------------------------------------

    /// Registers `spec` in protection domain `pd` under consumer key `key`
    /// and returns its STag (RFC 5041 section 8.3.1 item 4: the ULP
    /// establishes the association of buffer, STag and TO range).
    ///
    /// The index is unpredictable, as RFC 5042 asks of STags: the probe
    /// sequence starts at a random free slot and steps by a random stride
    /// coprime with the table size, so every slot is tried once before
    /// [`MemError::TableFull`]. Fails with [`MemError::OutOfBuffer`] or
    /// [`MemError::RegionWraps`] for a region that does not fit its buffer
    /// or the 64-bit TO space.
    pub fn register(&self, pd: PdId, spec: RegionSpec, key: u8) -> Result<Stag, MemError> {
        let access = spec.access;
        let invalidatable = spec.invalidatable;
        // Check the spec before claiming anything; the generation is filled
        // in once the slot is known.
        let mut region = spec.into_region(pd, 0)?;
        let (index, generation) = self.claim_slot()?;
        region.generation = generation;
        let slot = &self.slots[index];
        // Only the thread that claimed the slot (set B) touches its
        // descriptor, and deregistration left it null.
        let guard = &epoch::pin();
        let previous = slot
            .region
            .swap(Owned::new(region), Ordering::Release, guard);
        debug_assert!(previous.is_null(), "a free slot has no descriptor");
        let state = State::registered(generation, key, access, invalidatable);
        // Release: a reader that sees V sees the descriptor stored above.
        slot.state.store(state.0, Ordering::Release);
        self.registered.fetch_add(1, Ordering::Relaxed);
        Ok(Stag::from_parts(index as u32, key).expect("table indices fit 24 bits"))
    }

    /// Claims a free slot at a random position: returns its index and new
    /// generation, with the state word at allocated + busy.
    fn claim_slot(&self) -> Result<(usize, u32), MemError> {
        let usable = self.slots.len() - 1;
        let random = getrandom::u64().map_err(|_| MemError::NoEntropy)?;
        let mut position = (random as u32 as usize) % usable;
        let stride = coprime_stride((random >> 32) as usize, usable);
        for _ in 0..usable {
            let index = position + 1;
            let slot = &self.slots[index];
            let mut current = State(slot.state.load(Ordering::Relaxed));
            while !current.is_allocated() {
                let generation = current.generation().wrapping_add(1);
                match slot.state.compare_exchange_weak(
                    current.0,
                    State::claimed(generation).0,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok((index, generation)),
                    Err(now) => current = State(now),
                }
            }
            position = (position + stride) % usable;
        }
        Err(MemError::TableFull)
    }

    /// Invalidates an STag from the local side (the Local Invalidate of the
    /// verbs; RFC 5041 section 8.3 item 2: the ULP revokes STag validity).
    /// From the return on, no access starting later is admitted; the
    /// returned [`GracePeriod`] ends when the accesses already admitted have
    /// finished too. The registration stays until [`deregister`].
    ///
    /// Invalidating an invalidated STag succeeds, as the verbs allow. Fails
    /// with [`MemError::InvalidStag`] when the STag names no registration.
    ///
    /// [`deregister`]: Self::deregister
    pub fn invalidate_local(&self, stag: Stag) -> Result<GracePeriod, MemError> {
        let slot = self.slot(stag).ok_or(MemError::InvalidStag)?;
        let guard = &epoch::pin();
        let mut current = State(slot.state.load(Ordering::Acquire));
        loop {
            if !current.owned_by(stag.key()) {
                return Err(MemError::InvalidStag);
            }
            if !current.is_valid() {
                break;
            }
            match slot.state.compare_exchange_weak(
                current.0,
                current.invalidated().0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => current = State(now),
            }
        }
        Ok(GracePeriod::start(guard))
    }

    /// Deregisters an STag (valid or invalidated): it is refused from the
    /// return on, its slot may be reused at once, and its descriptor (with
    /// the table's reference to the buffer) is retired through the epoch
    /// collector. After the returned handle's [`wait`](GracePeriod::wait)
    /// no access through this table that could have used the registration
    /// is still running, so no write from this table ever lands in that
    /// buffer again (unless it is registered anew).
    ///
    /// Fails with [`MemError::InvalidStag`] when the STag names no
    /// registration, or another thread is deregistering it.
    pub fn deregister(&self, stag: Stag) -> Result<Deregistered, MemError> {
        let slot = self.slot(stag).ok_or(MemError::InvalidStag)?;
        let guard = &epoch::pin();
        let mut current = State(slot.state.load(Ordering::Acquire));
        let generation = loop {
            if !current.owned_by(stag.key()) {
                return Err(MemError::InvalidStag);
            }
            // V cleared, B set: readers are refused from here on, and no
            // other control operation touches the slot.
            let claimed = State::claimed(current.generation());
            match slot.state.compare_exchange_weak(
                current.0,
                claimed.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break current.generation(),
                Err(now) => current = State(now),
            }
        };
        let old = slot.region.swap(Shared::null(), Ordering::AcqRel, guard);
        slot.state
            .store(State::free(generation).0, Ordering::Release);
        self.registered.fetch_sub(1, Ordering::Relaxed);
        let cleanup = move || {
            if !old.is_null() {
                // SAFETY: `old` was unlinked from the slot above, after the
                // state word stopped admitting the STag; the collector runs
                // this only when every thread that could have loaded it has
                // unpinned, and nothing else frees it.
                drop(unsafe { old.into_owned() });
            }
        };
        // SAFETY: `cleanup` destroys only the descriptor unlinked above,
        // which threads pinning from now on cannot reach.
        Ok(unsafe { GracePeriod::start_with(guard, cleanup) })
    }

    /// A grace period covering every access to this table that has started
    /// so far: for instance after a Send with Invalidate
    /// ([`invalidate_remote`](Self::invalidate_remote)), before the
    /// consumer reuses the memory, since accesses from other streams may
    /// have been admitted just before.
    pub fn quiesce(&self) -> GracePeriod {
        GracePeriod::start(&epoch::pin())
    }

    /// What the table holds for `stag`, if it names a registration (valid
    /// or invalidated).
    pub fn info(&self, stag: Stag) -> Option<StagInfo> {
        let slot = self.slot(stag)?;
        let guard = &epoch::pin();
        let state = State(slot.state.load(Ordering::Acquire));
        if !state.owned_by(stag.key()) {
            return None;
        }
        let region = region_for(slot, state, guard)?;
        Some(StagInfo {
            valid: state.is_valid(),
            pd: region.pd,
            base_to: region.base_to,
            len: region.len,
            access: region.access,
            invalidatable: state.is_invalidatable(),
            generation: state.generation(),
        })
    }

    // ----- data path -----------------------------------------------------

    /// Places `data` at Tagged Offset `to` of the region `stag` names, for a
    /// stream of protection domain `pd`: the sink side of an RDMA Write or
    /// an RDMA Read Response (RFC 5040 sections 5.1, 5.2; RFC 5041 section
    /// 7.1). Checks, in order: STag valid with the right key
    /// ([`TaggedError::InvalidStag`]), same PD
    /// ([`StagNotAssociated`](TaggedError::StagNotAssociated)), remote write
    /// allowed ([`AccessRights`](TaggedError::AccessRights)), `to + len`
    /// does not wrap ([`ToWrap`](TaggedError::ToWrap)), `[to, to + len)`
    /// inside the region ([`BaseOrBounds`](TaggedError::BaseOrBounds)).
    /// Nothing is written unless every check passes. A region of the
    /// application's own memory that it unmapped without deregistering is
    /// found when the copy faults ([`Unmapped`](TaggedError::Unmapped),
    /// where a handler resumes such faults; see
    /// [`resume_after_fault`](super::resume_after_fault)), possibly after
    /// part of `data` was written. Report failures with
    /// [`TaggedError::ddp_error`].
    ///
    /// Empty `data` returns `Ok(())` at once without any check: a
    /// zero-length tagged DDP message is legal and its STag and TO "MUST NOT
    /// be checked" (RFC 5041 section 5.2). Peers rely on it: siw's Write RTR
    /// is a zero-length Write to STag 1.
    pub fn place(&self, stag: Stag, pd: PdId, to: u64, data: &[u8]) -> Result<(), TaggedError> {
        self.with_region(
            stag,
            pd,
            Access::REMOTE_WRITE,
            to,
            data.len(),
            |buffer, at| buffer.write_at(at, data),
        )
    }

    /// Reads `out.len()` octets at Tagged Offset `to` of the region `stag`
    /// names, for a stream of protection domain `pd`: the Data Source of an
    /// RDMA Read Request (RFC 5040 section 5.2). The same checks as
    /// [`place`](Self::place) in the same order, with remote read as the
    /// right needed. Report failures with [`TaggedError::rdmap_error`].
    ///
    /// An empty `out` returns `Ok(())` at once without any check, like a
    /// zero-length placement: the zero-length Read Response it answers
    /// carries no data to protect, and a zero-length Read is the Read RTR of
    /// RFC 6581, sent by peers with an STag the responder need not know.
    pub fn fetch(&self, stag: Stag, pd: PdId, to: u64, out: &mut [u8]) -> Result<(), TaggedError> {
        let len = out.len();
        self.with_region(stag, pd, Access::REMOTE_READ, to, len, |buffer, at| {
            buffer.read_at(at, out)
        })
    }

    /// The `len` octets at Tagged Offset `to` of the region `stag` names,
    /// held in place instead of copied, after the checks of
    /// [`local_read`](Self::local_read): a Send's or RDMA Write's data
    /// sent straight from the application's memory. The slice keeps the
    /// memory alive after a deregistration, so frames still referring to
    /// it stay readable. Unlike the copying accesses, a zero length is
    /// checked too.
    ///
    /// `Ok(None)` when the checks pass but the region lies in foreign
    /// memory ([`MemoryBuffer::from_raw_parts`]), which is never held
    /// past its deregistration ([`BufferSlice`] says why): copy it with
    /// [`local_read`](Self::local_read) instead.
    pub fn local_slice(
        &self,
        stag: Stag,
        pd: PdId,
        to: u64,
        len: usize,
    ) -> Result<Option<BufferSlice>, TaggedError> {
        self.slice(stag, pd, Access::NONE, to, len)
    }

    /// Like [`local_slice`](Self::local_slice) with the checks of
    /// [`fetch`](Self::fetch) (remote read): an RDMA Read Response's data
    /// sent from where it lies; `Ok(None)` for foreign memory, to be
    /// copied with [`fetch`](Self::fetch).
    pub fn fetch_slice(
        &self,
        stag: Stag,
        pd: PdId,
        to: u64,
        len: usize,
    ) -> Result<Option<BufferSlice>, TaggedError> {
        self.slice(stag, pd, Access::REMOTE_READ, to, len)
    }

    /// Lends the `len` octets at Tagged Offset `to` of the region `stag`
    /// names to `lend` for the length of the call, after the checks of
    /// [`place`](Self::place) with the access right `needed`
    /// ([`Access::NONE`] for a Send's or RDMA Write's gather list,
    /// [`Access::REMOTE_READ`] for a Read Response): a payload handed to
    /// a system call where it lies. The table's guard is held throughout,
    /// so a deregistration completes only after `lend` returned (see
    /// [`Lent`]); foreign memory is lent too. A zero length is checked,
    /// as [`local_slice`](Self::local_slice) checks it.
    pub fn lend<R>(
        &self,
        stag: Stag,
        pd: PdId,
        needed: Access,
        (to, len): (u64, usize),
        lend: impl FnOnce(Lent<'_>) -> R,
    ) -> Result<R, TaggedError> {
        let guard = &epoch::pin();
        let (region, at) = self.locate(stag, pd, needed, to, len, guard)?;
        Ok(lend(Lent::new(&region.buffer, at, len)))
    }

    fn slice(
        &self,
        stag: Stag,
        pd: PdId,
        needed: Access,
        to: u64,
        len: usize,
    ) -> Result<Option<BufferSlice>, TaggedError> {
        let guard = &epoch::pin();
        let (region, at) = self.locate(stag, pd, needed, to, len, guard)?;
        let slice = BufferSlice::new(region.buffer.clone(), at, len);
        // `locate` kept the octets inside the buffer: only foreign memory
        // makes no slice.
        debug_assert_eq!(slice.is_none(), region.buffer.is_foreign());
        Ok(slice)
    }

    /// Runs every check of [`place`](Self::place) for `len` octets at `to`
    /// with the access right `needed`, and moves nothing: how the Data
    /// Source validates a whole RDMA Read Request when it arrives (RFC 5040
    /// section 5.2), and how a requester validates its Read's sink before
    /// sending the request. A zero length passes without checks, as the
    /// accesses do.
    pub fn check(
        &self,
        stag: Stag,
        pd: PdId,
        needed: Access,
        to: u64,
        len: usize,
    ) -> Result<(), TaggedError> {
        self.with_region(stag, pd, needed, to, len, |_, _| Ok(()))
    }

    /// Reads from a region for a local scatter/gather element (the gather
    /// list of a Send or RDMA Write): the checks of [`fetch`](Self::fetch),
    /// with no access right needed (local read is always allowed). An empty
    /// `out` succeeds without checks.
    pub fn local_read(
        &self,
        stag: Stag,
        pd: PdId,
        to: u64,
        out: &mut [u8],
    ) -> Result<(), TaggedError> {
        let len = out.len();
        self.with_region(stag, pd, Access::NONE, to, len, |buffer, at| {
            buffer.read_at(at, out)
        })
    }

    /// Writes to a region for a local scatter/gather element (the scatter
    /// list of a Receive or of an RDMA Read's sink on the local side): the
    /// checks of [`place`](Self::place), with local write as the right
    /// needed. Empty `data` succeeds without checks.
    pub fn local_write(
        &self,
        stag: Stag,
        pd: PdId,
        to: u64,
        data: &[u8],
    ) -> Result<(), TaggedError> {
        self.with_region(
            stag,
            pd,
            Access::LOCAL_WRITE,
            to,
            data.len(),
            |buffer, at| buffer.write_at(at, data),
        )
    }

    /// Invalidates `stag` for the Invalidate STag field of a Send with
    /// Invalidate received on a stream of protection domain `pd` (RFC 5040
    /// sections 4.1 and 5.3). A compare-and-swap clears V only if the STag
    /// is valid with the right key ([`InvalidateError::InvalidStag`]), the
    /// PD matches ([`StagNotAssociated`](InvalidateError::StagNotAssociated))
    /// and the region was registered invalidatable
    /// ([`CannotInvalidate`](InvalidateError::CannotInvalidate)); a failure
    /// changes nothing. Invalidating twice fails the second time: the STag
    /// is no longer valid.
    ///
    /// Accesses from other threads admitted just before may still be
    /// running; [`quiesce`](Self::quiesce) waits them out.
    pub fn invalidate_remote(&self, stag: Stag, pd: PdId) -> Result<(), InvalidateError> {
        let slot = self.slot(stag).ok_or(InvalidateError::InvalidStag)?;
        let guard = &epoch::pin();
        let mut current = State(slot.state.load(Ordering::Acquire));
        loop {
            if !current.admits(stag.key()) {
                return Err(InvalidateError::InvalidStag);
            }
            let region = region_for(slot, current, guard).ok_or(InvalidateError::InvalidStag)?;
            if region.pd != pd {
                return Err(InvalidateError::StagNotAssociated);
            }
            if !current.is_invalidatable() {
                return Err(InvalidateError::CannotInvalidate);
            }
            // The generation in the word makes this fail if the slot was
            // deregistered and registered again since the load, key or not.
            match slot.state.compare_exchange_weak(
                current.0,
                current.invalidated().0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => current = State(now),
            }
        }
    }

    /// Runs the checks shared by every data-path access, then `copy` with
    /// the buffer and the offset of `to` in it, all while pinned (the pin
    /// is also what tells a revocation that the copy is under way: a
    /// grace period started after an invalidation ends only once it
    /// returned). A copy that faults because the application's memory is
    /// gone is [`TaggedError::Unmapped`]. A zero-length access succeeds at
    /// once without any check (see [`place`](Self::place) for why).
    fn with_region<F>(
        &self,
        stag: Stag,
        pd: PdId,
        needed: Access,
        to: u64,
        len: usize,
        copy: F,
    ) -> Result<(), TaggedError>
    where
        F: FnOnce(&MemoryBuffer, usize) -> Result<(), MemError>,
    {
        if len == 0 {
            return Ok(());
        }
        let guard = &epoch::pin();
        let (region, at) = self.locate(stag, pd, needed, to, len, guard)?;
        match copy(&region.buffer, at) {
            Ok(()) => Ok(()),
            Err(MemError::Fault { .. }) => Err(TaggedError::Unmapped),
            Err(err) => unreachable!("registration keeps regions inside their buffers: {err}"),
        }
    }

    /// The checks shared by every data-path access, in RFC 5041 section
    /// 7.1's order: the region of `stag` and where `len` octets at `to`
    /// lie in its buffer.
    fn locate<'g>(
        &'g self,
        stag: Stag,
        pd: PdId,
        needed: Access,
        to: u64,
        len: usize,
        guard: &'g Guard,
    ) -> Result<(&'g Region, usize), TaggedError> {
        let (state, region) = self.resolve(stag, pd, guard)?;
        if !state.access().contains(needed) {
            return Err(TaggedError::AccessRights);
        }
        Ok((region, region.locate(to, len)?))
    }

    /// The first two checks: the STag is valid with its key, and its
    /// region belongs to `pd`.
    fn resolve<'g>(
        &'g self,
        stag: Stag,
        pd: PdId,
        guard: &'g Guard,
    ) -> Result<(State, &'g Region), TaggedError> {
        let slot = self.slot(stag).ok_or(TaggedError::InvalidStag)?;
        let state = State(slot.state.load(Ordering::Acquire));
        if !state.admits(stag.key()) {
            return Err(TaggedError::InvalidStag);
        }
        let region = region_for(slot, state, guard).ok_or(TaggedError::InvalidStag)?;
        if region.pd != pd {
            return Err(TaggedError::StagNotAssociated);
        }
        Ok((state, region))
    }
}

/// The slot's descriptor if it belongs to the registration `state` was
/// loaded from. A different generation means the slot was deregistered (and
/// perhaps registered again) after `state` was loaded: the STag was invalid
/// at that moment, and the access is refused as if it had come then.
fn region_for<'g>(slot: &'g Slot, state: State, guard: &'g Guard) -> Option<&'g Region> {
    let shared = slot.region.load(Ordering::Acquire, guard);
    // SAFETY: descriptors are only stored by `register` (from `Owned`) and
    // only destroyed by the deferred cleanup of `deregister` after being
    // unlinked, or by `Drop` with exclusive access; `guard` keeps any
    // pointer loaded under it alive for `'g`.
    let region = unsafe { shared.as_ref() }?;
    (region.generation == state.generation()).then_some(region)
}

/// A stride in `1..=n` coprime with `n`, derived from `seed`, so that
/// stepping by it visits every residue mod `n` once.
fn coprime_stride(seed: usize, n: usize) -> usize {
    fn gcd(mut a: usize, mut b: usize) -> usize {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let mut stride = seed % n + 1;
    while gcd(stride, n) != 1 {
        stride = stride % n + 1;
    }
    stride
}

impl Default for StagTable {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY).expect("the default capacity is valid")
    }
}

impl Drop for StagTable {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no thread is inside a table method, so
        // no guard can hold a live descriptor; retired descriptors were
        // unlinked and belong to their deferred cleanups.
        let guard = unsafe { epoch::unprotected() };
        for slot in self.slots.iter() {
            let region = slot.region.swap(Shared::null(), Ordering::Relaxed, guard);
            if !region.is_null() {
                // SAFETY: as above; each descriptor is freed exactly once.
                drop(unsafe { region.into_owned() });
            }
        }
    }
}

impl fmt::Debug for StagTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagTable")
            .field("capacity", &self.capacity())
            .field("registered", &self.registered())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pd(n: u32) -> PdId {
        PdId::from_raw(n)
    }

    fn spec(len: usize, access: Access) -> RegionSpec {
        RegionSpec::new(Arc::new(MemoryBuffer::new(len)), 0, len, 0x1000, access)
    }

    #[test]
    fn coprime_strides_visit_every_slot() {
        for n in 1..64 {
            for seed in [0, 1, 7, n, n + 1, usize::MAX] {
                let stride = coprime_stride(seed, n);
                assert!((1..=n).contains(&stride));
                let mut seen = vec![false; n];
                let mut at = seed % n;
                for _ in 0..n {
                    assert!(!seen[at]);
                    seen[at] = true;
                    at = (at + stride) % n;
                }
            }
        }
    }

    #[test]
    fn stale_state_is_not_paired_with_a_new_descriptor() {
        // One usable slot, so re-registration reuses it with the same key:
        // the STag is identical, only the generation tells them apart.
        let table = StagTable::new(2).unwrap();
        let stag = table.register(pd(1), spec(16, Access::ALL), 9).unwrap();
        let slot = table.slot(stag).unwrap();
        let stale = State(slot.state.load(Ordering::Acquire));
        table.deregister(stag).unwrap().wait();
        let again = table.register(pd(1), spec(16, Access::ALL), 9).unwrap();
        assert_eq!(again, stag);
        let fresh = State(slot.state.load(Ordering::Acquire));
        assert_eq!(fresh.generation(), stale.generation().wrapping_add(1));
        let guard = &epoch::pin();
        assert!(region_for(slot, stale, guard).is_none());
        assert!(region_for(slot, fresh, guard).is_some());
        // A compare-and-swap from the stale word fails even though V, the
        // key and every other bit but the generation are the same.
        assert_eq!(stale.0 & 0xFFFF_FFFF, fresh.0 & 0xFFFF_FFFF);
        assert!(slot
            .state
            .compare_exchange(
                stale.0,
                stale.invalidated().0,
                Ordering::AcqRel,
                Ordering::Acquire
            )
            .is_err());
    }

    #[test]
    fn deregistration_frees_the_descriptor_and_the_buffer_reference() {
        let table = StagTable::new(8).unwrap();
        let buffer = Arc::new(MemoryBuffer::new(8));
        let stag = table
            .register(pd(1), RegionSpec::whole(buffer.clone(), Access::ALL), 0)
            .unwrap();
        assert_eq!(Arc::strong_count(&buffer), 2);
        table.deregister(stag).unwrap().wait();
        assert_eq!(Arc::strong_count(&buffer), 1);
        assert_eq!(table.registered(), 0);
    }

    #[test]
    fn dropping_the_table_frees_live_descriptors() {
        let table = StagTable::new(8).unwrap();
        let buffer = Arc::new(MemoryBuffer::new(8));
        table
            .register(pd(1), RegionSpec::whole(buffer.clone(), Access::ALL), 0)
            .unwrap();
        drop(table);
        assert_eq!(Arc::strong_count(&buffer), 1);
    }

    #[test]
    fn table_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<StagTable>();
    }
}
