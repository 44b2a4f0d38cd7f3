//! Fuzz oracles for the C entry points that parse what applications hand
//! in (with the crate's `testing` feature). Each oracle builds, from
//! arbitrary octets, the arguments a C program could pass, calls the
//! exported functions as such a program does (the queue pair's posting
//! verbs through the context's function table, as the header's inline
//! `ibv_post_send` does), and panics when an answer breaks the contract
//! the function documents. Arguments stay within what the C contract
//! lets an application pass (pointers valid for the lengths they come
//! with); where the library must refuse before reading, the memory beyond
//! what it may read is inaccessible or outside the allocation, so a
//! stray read crashes under AddressSanitizer or faults.
//!
//! - [`getaddrinfo`]: `rdma_getaddrinfo` and `rdma_freeaddrinfo`.
//! - [`work_requests`]: chains of `ibv_send_wr` and `ibv_recv_wr` posted
//!   to a queue pair that is never connected, and to a shared receive
//!   queue.
//! - [`private_data`]: private data and IRD/ORD of `rdma_connect`,
//!   `rdma_accept` and `rdma_reject`, over a real connection on the
//!   loopback interface.
//!
//! The fuzz targets of `fuzz/` call them, and so does
//! `tests/fuzz_inputs.rs`, so a crash libFuzzer finds replays as an
//! ordinary test.

mod addrinfo;
mod private_data;
mod work_requests;

pub use addrinfo::getaddrinfo;
pub use private_data::private_data;
pub use work_requests::work_requests;

use core::ffi::c_int;
use std::sync::OnceLock;

use crate::abi::verbs::*;
use crate::device::shared_context;

/// Octets taken from the front of a fuzz input; zeros once it is
/// exhausted, so that every input means something.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&first, rest)) => {
                self.0 = rest;
                first
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// The next `len` octets, zero-padded past the end.
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.u8()).collect()
    }

    /// Everything not taken yet.
    fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.0)
    }
}

/// The calling thread's `errno`.
fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// What the oracles that post work share, made once per process through
/// the exported verbs: the device's context, a protection domain, and a
/// completion queue. Addresses, so that the statics holding them are
/// `Sync`.
struct Verbs {
    context: usize,
    pd: usize,
    cq: usize,
}

/// The process's [`Verbs`].
fn verbs() -> &'static Verbs {
    static VERBS: OnceLock<Verbs> = OnceLock::new();
    VERBS.get_or_init(|| {
        let context = shared_context().expect("the socket transport's device opens");
        // SAFETY: a live context.
        let pd = unsafe { crate::pd::ibv_alloc_pd(context) };
        assert!(!pd.is_null(), "ibv_alloc_pd");
        // SAFETY: as above; no channel.
        let cq = unsafe {
            crate::cq::ibv_create_cq(context, 64, core::ptr::null_mut(), core::ptr::null_mut(), 0)
        };
        assert!(!cq.is_null(), "ibv_create_cq");
        Verbs {
            context: context as usize,
            pd: pd as usize,
            cq: cq as usize,
        }
    })
}

impl Verbs {
    fn context(&self) -> *mut IbvContext {
        self.context as *mut IbvContext
    }

    fn pd(&self) -> *mut IbvPd {
        self.pd as *mut IbvPd
    }

    /// `ibv_create_qp` on the shared domain and queue, asking for `cap`
    /// (receives from `srq` if not NULL): the queue pair and the
    /// capabilities it reports, or `errno`.
    fn create_qp(&self, cap: IbvQpCap, srq: *mut IbvSrq) -> Result<(*mut IbvQp, IbvQpCap), c_int> {
        let cq = self.cq as *mut IbvCq;
        let mut attr = IbvQpInitAttr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq,
            cap,
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: a live domain, and attributes naming live queues.
        let qp = unsafe { crate::qp::ibv_create_qp(self.pd(), &mut attr) };
        if qp.is_null() {
            Err(errno())
        } else {
            Ok((qp, attr.cap))
        }
    }
}
