//! Protection domains and memory regions (RFC 5040 section 2.1 and
//! RFC 5042 section 5: every STag belongs to one protection domain, and a
//! stream may only touch regions of its own).
//!
//! A region's memory is uwarp's own ([`ProtectionDomain::alloc_mr`], or a
//! [`MemoryBuffer`] handed to [`ProtectionDomain::register`]) or the
//! application's ([`ProtectionDomain::register_memory`], `ibv_reg_mr`).
//! Dropping a [`MemoryRegion`] deregisters it and returns once uwarp
//! will never read or write the application's memory again: after the
//! STag table's grace period no placement, fetch or copy through the
//! region is running or can start, and zero-copy transmit never holds
//! application memory by reference (it copies it), so nothing else is
//! left to wait for. The application's memory is checked at
//! registration, revocable when unmapped and guarded against faults
//! ([`crate::app_memory`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use uwarp_stack::mem::{
    Access, MemError, MemoryBuffer, PdId, RegionSpec, Stag, StagTable, GUARDED,
};
use uwarp_stack::verbs::Sge;

use crate::app_memory::{self, Ranges, Revocable};
use crate::error::Error;

/// A protection domain: queue pairs and memory regions created from it
/// can work together; those of other domains cannot.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    id: PdId,
    table: Arc<StagTable>,
    next_key: Arc<AtomicU8>,
}

impl ProtectionDomain {
    pub(crate) fn new(id: PdId, table: Arc<StagTable>) -> Self {
        Self {
            id,
            table,
            next_key: Arc::new(AtomicU8::new(1)),
        }
    }

    /// The domain's identifier.
    pub fn id(&self) -> PdId {
        self.id
    }

    /// Allocates `len` octets of zeroed memory and registers all of it.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<MemoryRegion, Error> {
        self.register(Arc::new(MemoryBuffer::new(len)), access)
    }

    /// Registers the whole of `buffer` with `access` (local read is always
    /// allowed), its address as base Tagged Offset, and a fresh key.
    pub fn register(
        &self,
        buffer: Arc<MemoryBuffer>,
        access: Access,
    ) -> Result<MemoryRegion, Error> {
        let base_to = buffer.addr();
        Ok(self.register_whole(buffer, base_to, access)?)
    }

    /// Registers `len` octets of the application's own memory at `addr`
    /// (`ibv_reg_mr`; with `iova`, `ibv_reg_mr_iova2`): heap memory of any
    /// alignment, a member of a struct, an `mmap`ed file, shared memory.
    /// The Tagged Offset of the first octet — what the peer names in its
    /// RDMA Writes and Reads and what local SGEs start from
    /// ([`MemoryRegion::addr`]) — is `iova` if given, else the address.
    /// `len` may be 0. The same memory may be registered any number of
    /// times, overlapping or not: each registration has an STag of its own
    /// and is deregistered on its own.
    ///
    /// Unlike uwarp's own memory, payloads sent from this memory are always
    /// copied, never sent by reference (zero-copy transmit,
    /// [`DpdkConfig::zero_copy_from`](crate::DpdkConfig::zero_copy_from)),
    /// so that dropping the region never waits for the network.
    ///
    /// Fails with [`Error::InvalidArgument`] for a null `addr` with a
    /// non-zero `len`, a range longer than `isize::MAX` or wrapping past
    /// the end of the address space, or Tagged Offsets `iova .. iova + len`
    /// that wrap past 2^64; with [`Error::Mem`] holding
    /// [`MemError::NotMapped`] when the range is not wholly mapped,
    /// readable, and writable if `access` allows local or remote writes
    /// (the kernel's `EFAULT`), or another [`MemError`] when the STag
    /// table is full.
    ///
    /// The registration is revoked (the region invalidated) when the
    /// drop-in library sees the program unmap any of it
    /// ([`app_memory::revoke`]), and a copy that finds the memory gone
    /// fails instead of faulting (see [`crate::app_memory`]): what a
    /// program that breaks the first rule below gets, instead of a crash.
    ///
    /// # Safety
    ///
    /// From the call until the returned [`MemoryRegion`] is dropped (for
    /// ever if it is leaked; nothing is kept on failure):
    ///
    /// - the `len` octets at `addr` must stay mapped as they were
    ///   registered, from any thread: not freed, unmapped or remapped;
    /// - the application reaches them through raw pointers only, never
    ///   through a `&[u8]` or `&mut [u8]` that a placement or a read by
    ///   uwarp may overlap (the access contract of [`MemoryBuffer`]): a
    ///   peer may write whatever `access` allows at any time, and what a
    ///   posted request sends must not change before it completes.
    ///
    /// Once the drop returns the memory is the application's again: it
    /// may free it at once.
    pub unsafe fn register_memory(
        &self,
        addr: *mut u8,
        len: usize,
        iova: Option<u64>,
        access: Access,
    ) -> Result<MemoryRegion, Error> {
        MemoryBuffer::check_raw_parts(addr, len).map_err(|_| {
            Error::InvalidArgument(
                "register_memory: no memory range (null with a length, too long, or wrapping)",
            )
        })?;
        // Held from the check of the mapping to the record of the range,
        // so that an unmap comes before both or revokes the region.
        let mut ranges = Ranges::lock();
        if len > 0 {
            // Where no fault can be resumed (not x86_64), a write through
            // the region's buffer to read-only memory would kill the
            // process: writable memory is needed whatever the access.
            let writes = !GUARDED
                || access.contains(Access::LOCAL_WRITE)
                || access.contains(Access::REMOTE_WRITE);
            app_memory::check_mapped(addr.addr(), len, writes)?;
            app_memory::install_fault_guard();
        }
        // SAFETY: the range passed `check_raw_parts` and is mapped, and
        // this function's contract keeps it mapped and raw until the region
        // is dropped; where it is read-only (registered for reading), or
        // the program breaks the contract, an access faults into the guard
        // installed above and fails, as `from_raw_parts` allows. The buffer goes nowhere but into the region and the
        // table's registration, whose drop waits for the grace period that
        // releases the table's reference (see `MemoryRegion`'s `Drop`), and
        // no `BufferSlice` is made of foreign memory: the buffer is
        // dropped, at the latest, with the region.
        let buffer = Arc::new(unsafe { MemoryBuffer::from_raw_parts(addr, len) });
        // The address as given, even for an empty range at a null address
        // (whose buffer reports a dangling one).
        let base_to = iova.unwrap_or(addr.addr() as u64);
        let mut region = self
            .register_whole(buffer, base_to, access)
            .map_err(|err| match err {
                MemError::RegionWraps => {
                    Error::InvalidArgument("register_memory: iova + len wraps past 2^64")
                }
                err => Error::Mem(err),
            })?;
        if len > 0 {
            region.revocable = Some(ranges.insert(addr.addr(), len, &self.table, region.stag));
        }
        Ok(region)
    }

    /// Registers the whole of `buffer` with `access`, from Tagged Offset
    /// `base_to`, under a fresh key.
    fn register_whole(
        &self,
        buffer: Arc<MemoryBuffer>,
        base_to: u64,
        access: Access,
    ) -> Result<MemoryRegion, MemError> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let spec = RegionSpec::new(buffer.clone(), 0, buffer.len(), base_to, access);
        let stag = self.table.register(self.id, spec, key)?;
        Ok(MemoryRegion {
            buffer,
            base_to,
            stag,
            table: self.table.clone(),
            revocable: None,
        })
    }
}

/// Registered memory (`ibv_mr`): deregistered when dropped, after the
/// grace period that guarantees no placement lands in it afterwards.
///
/// For the application's own memory
/// ([`ProtectionDomain::register_memory`]) that is all there is to wait
/// for: the region's buffer is referenced only by the region and by its
/// STag table entry, which the grace period releases, since zero-copy
/// transmit copies such memory instead of holding it (see
/// [`register_memory`](ProtectionDomain::register_memory)). When the drop
/// returns, uwarp will never read or write that memory again.
#[derive(Debug)]
pub struct MemoryRegion {
    buffer: Arc<MemoryBuffer>,
    base_to: u64,
    stag: Stag,
    table: Arc<StagTable>,
    /// The application's memory is in the process's registry of ranges
    /// an unmap revokes ([`crate::app_memory`]); uwarp's own is not.
    revocable: Option<Revocable>,
}

impl MemoryRegion {
    /// The STag local work requests name (`lkey`).
    pub fn lkey(&self) -> Stag {
        self.stag
    }

    /// The STag to advertise to the peer (`rkey`): the same STag.
    pub fn rkey(&self) -> u32 {
        self.stag.raw()
    }

    /// Tagged Offset of the first octet: what the peer puts in its RDMA
    /// Write and Read requests, and what local SGEs start from. The
    /// memory's address, unless
    /// [`register_memory`](ProtectionDomain::register_memory) was given an
    /// `iova`.
    pub fn addr(&self) -> u64 {
        self.base_to
    }

    /// Length in octets.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The memory, to read and write with raw copies
    /// ([`MemoryBuffer::read_at`], [`MemoryBuffer::write_at`]); offset 0 is
    /// the region's first octet. Borrowed from the region, not shared:
    /// for the application's own memory the region's drop ends uwarp's
    /// use of it, which an `Arc` kept elsewhere would outlive.
    pub fn buffer(&self) -> &MemoryBuffer {
        &self.buffer
    }

    /// A scatter/gather element for `len` octets at `offset`.
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge {
            addr: self.addr().wrapping_add(offset as u64),
            length: len,
            lkey: self.stag,
        }
    }

    /// A scatter/gather element covering the whole region (which must be
    /// under 4 GiB).
    pub fn whole(&self) -> Sge {
        self.sge(0, u32::try_from(self.len()).unwrap_or(u32::MAX))
    }
}

impl Drop for MemoryRegion {
    /// Deregisters the STag and waits for the grace period: every access
    /// through the STag table that could have used the registration has
    /// returned, and the table's reference to the buffer is dropped. No
    /// other reference to foreign memory exists (no `BufferSlice` is made
    /// of it), so for the application's memory this is the end of uwarp's
    /// use of it.
    fn drop(&mut self) {
        // Out of the registry first: no revocation may touch the STag once
        // it is deregistered (a new registration may reuse it).
        if let Some(revocable) = self.revocable.take() {
            Ranges::lock().remove(revocable);
        }
        let deregistered = self.table.deregister(self.stag);
        // Nothing but this drop deregisters a region's STag.
        debug_assert!(deregistered.is_ok(), "{deregistered:?}");
        if let Ok(grace) = deregistered {
            grace.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pd() -> ProtectionDomain {
        ProtectionDomain::new(PdId::from_raw(1), Arc::new(StagTable::default()))
    }

    fn invalid(result: Result<MemoryRegion, Error>) -> bool {
        matches!(result, Err(Error::InvalidArgument(_)))
    }

    /// `register_memory` of `len` octets at address `addr`, which must be
    /// refused or empty: nothing there is memory.
    fn register_at(addr: usize, len: usize, iova: Option<u64>) -> Result<MemoryRegion, Error> {
        let ptr = core::ptr::null_mut::<u8>().with_addr(addr);
        // SAFETY: the callers pass arguments `register_memory` refuses
        // before it keeps anything, or zero octets, valid anywhere.
        unsafe { pd().register_memory(ptr, len, iova, Access::ALL) }
    }

    #[test]
    fn ranges_that_are_no_memory_are_invalid_arguments() {
        assert!(invalid(register_at(0, 1, None)), "null with a length");
        assert!(invalid(register_at(usize::MAX - 7, 16, None)), "wraps");
        let long = isize::MAX as usize + 1;
        assert!(invalid(register_at(0x1000, long, None)), "too long");
    }

    #[test]
    fn wrapping_tagged_offsets_are_invalid_arguments() {
        let mut octets = [0u8; 16];
        let at = octets.as_mut_ptr();
        let pd = pd();
        // SAFETY (both): `octets` outlives the regions, which are dropped
        // at once (or never made), and is not touched meanwhile.
        let wraps = unsafe { pd.register_memory(at, 16, Some(u64::MAX - 8), Access::ALL) };
        assert!(invalid(wraps));
        let fits = unsafe { pd.register_memory(at, 16, Some(u64::MAX - 16), Access::ALL) };
        assert_eq!(fits.unwrap().addr(), u64::MAX - 16);
    }

    #[test]
    fn memory_not_mapped_as_the_access_needs_is_refused() {
        let not_mapped = |result: Result<MemoryRegion, Error>| {
            matches!(result, Err(Error::Mem(MemError::NotMapped { .. })))
        };
        // SAFETY: a new private anonymous read-only mapping of two pages,
        // this test's own.
        let at = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                8192,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let at = at.cast::<u8>();
        let pd = pd();
        // SAFETY (all three): the mapping lives until the end of the test,
        // and the regions made are dropped at once; the refused ones keep
        // nothing.
        let write = unsafe { pd.register_memory(at, 8192, None, Access::LOCAL_WRITE) };
        assert!(not_mapped(write), "read-only, for writing");
        let read = unsafe { pd.register_memory(at, 8192, None, Access::REMOTE_READ) };
        assert_eq!(read.unwrap().len(), 8192);
        // SAFETY: the second page of the mapping. (Made inaccessible, not
        // unmapped: another test's thread could map the hole at once.)
        let no_access = unsafe { libc::mprotect(at.add(4096).cast(), 4096, libc::PROT_NONE) };
        assert_eq!(no_access, 0);
        let hole = unsafe { pd.register_memory(at, 8192, None, Access::REMOTE_READ) };
        assert!(not_mapped(hole), "runs into a page without access");
        // SAFETY: the mapping, unmapped once.
        assert_eq!(unsafe { libc::munmap(at.cast(), 8192) }, 0);
    }

    #[test]
    fn an_empty_range_may_lie_anywhere() {
        let at_null = register_at(0, 0, None).unwrap();
        assert_eq!((at_null.addr(), at_null.len()), (0, 0));
        assert!(at_null.is_empty() && at_null.buffer().is_foreign());
        let at_top = register_at(0x1000, 0, Some(u64::MAX)).unwrap();
        assert_eq!(at_top.addr(), u64::MAX);
    }
}
