//! Protection domains and memory regions (RFC 5040 section 2.1 and
//! RFC 5042 section 5: every STag belongs to one protection domain, and a
//! stream may only touch regions of its own).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use uwarp_stack::mem::{Access, MemoryBuffer, PdId, RegionSpec, Stag, StagTable};
use uwarp_stack::verbs::Sge;

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
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let spec = RegionSpec::whole(buffer.clone(), access);
        let stag = self.table.register(self.id, spec, key)?;
        Ok(MemoryRegion {
            buffer,
            stag,
            table: self.table.clone(),
        })
    }
}

/// Registered memory (`ibv_mr`): deregistered when dropped, after the
/// grace period that guarantees no placement lands in it afterwards.
#[derive(Debug)]
pub struct MemoryRegion {
    buffer: Arc<MemoryBuffer>,
    stag: Stag,
    table: Arc<StagTable>,
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
    /// Write and Read requests, and what local SGEs start from.
    pub fn addr(&self) -> u64 {
        self.buffer.addr()
    }

    /// Length in octets.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The memory.
    pub fn buffer(&self) -> &Arc<MemoryBuffer> {
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
    fn drop(&mut self) {
        if let Ok(grace) = self.table.deregister(self.stag) {
            grace.wait();
        }
    }
}
