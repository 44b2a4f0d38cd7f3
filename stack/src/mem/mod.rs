//! Memory registration: protection domains, registered buffers and the STag
//! table that DDP's Tagged Buffer Model (RFC 5041 sections 5.1.1, 7.1 and
//! 8.2-8.3) and RDMAP's Write, Read and Send with Invalidate (RFC 5040
//! sections 5.1-5.3) place into, read from and invalidate, under the
//! security model of RFC 5042.
//!
//! Sans-IO like the rest of the crate, and built for several threads: the
//! control side registers and deregisters, any number of data-path threads
//! place and fetch without locks, and deregistration completes after an
//! epoch grace period (`crossbeam_epoch`), after which no placement lands in
//! the memory again.
//!
//! - [`Access`]: the access rights of a region (`access.rs`).
//! - [`Stag`]: 24-bit table index + 8-bit consumer key (`stag.rs`).
//! - [`PdId`], [`ProtectionDomains`]: protection domains (`pd.rs`).
//! - [`MemoryBuffer`]: memory to register, accessed only by raw copies
//!   (`buffer.rs`, which states the access contract); the application's
//!   own memory through [`guarded_copy`]'s copy, which a signal handler
//!   can resume when the memory is gone (`guarded.rs`).
//! - [`RegionSpec`]: what to register (`region.rs`, with the bounds checks).
//! - [`BufferSlice`]: registered octets held in place for zero-copy
//!   transmit (`slice.rs`).
//! - [`StagTable`]: the table (`table.rs`), its slot state word
//!   (`state.rs`), and [`GracePeriod`] / [`Deregistered`] (`grace.rs`).
//! - [`TaggedError`], [`InvalidateError`], [`MemError`] and their
//!   Terminate codes (`error.rs`).
//!
//! ```
//! use std::sync::Arc;
//! use uwarp_stack::mem::{Access, MemoryBuffer, ProtectionDomains, RegionSpec, StagTable};
//!
//! let table = Arc::new(StagTable::default());
//! let pd = ProtectionDomains::new().allocate().unwrap();
//! let buffer = Arc::new(MemoryBuffer::new(4096));
//! let spec = RegionSpec::whole(buffer.clone(), Access::REMOTE_WRITE);
//! let stag = table.register(pd, spec, 0x2A).unwrap();
//!
//! // An RDMA Write of 5 octets at the region's start (its TO is the VA).
//! table.place(stag, pd, buffer.addr(), b"hello").unwrap();
//! let mut got = [0u8; 5];
//! buffer.read_at(0, &mut got).unwrap();
//! assert_eq!(&got, b"hello");
//!
//! // After the grace period, no placement reaches the buffer again.
//! table.deregister(stag).unwrap().wait();
//! assert!(table.place(stag, pd, buffer.addr(), b"late").is_err());
//! ```

mod access;
mod buffer;
mod error;
mod grace;
mod guarded;
mod lent;
mod pd;
mod region;
mod slice;
mod stag;
mod state;
mod table;

pub use access::Access;
pub use buffer::{MemoryBuffer, PAGE_ALIGN};
pub use error::{InvalidateError, MemError, TaggedError};
pub use grace::{Burst, Deregistered, GracePeriod};
pub use guarded::{guarded_copy, resume_after_fault, GUARDED};
pub use lent::{Lent, LentRange};
pub use pd::{PdId, ProtectionDomains};
pub use region::RegionSpec;
pub use slice::BufferSlice;
pub use stag::{Stag, INDEX_BITS, INDEX_LIMIT};
pub use table::{StagInfo, StagTable};
