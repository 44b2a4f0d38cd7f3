//! External-buffer mbufs: an [`Mbuf`] whose bytes live in caller memory, for
//! transmitting without a copy (DPDK's `rte_pktmbuf_attach_extbuf`).
//!
//! The caller hands over an owner of the bytes (`Vec<u8>`, `Box<[u8]>`,
//! `Arc<[u8]>`, or a guard of registered memory that implements
//! `AsRef<[u8]>`). It is boxed next to the `rte_mbuf_ext_shared_info` DPDK
//! needs, and DPDK's free callback drops that box when the last mbuf
//! referring to the buffer is freed, on whichever thread frees it: after the
//! device has sent the packet, or when the `Mbuf` is dropped unsent. The
//! bytes therefore stay alive and unmoved for as long as any device or mbuf
//! can read them, with no `unsafe` on the caller's side.

use std::ffi::c_void;

use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;

/// The buffer's owner and the DPDK record of it, in one allocation whose
/// address does not change.
#[repr(C)]
struct ExtHolder<B> {
    shinfo: dpdk_sys::rte_mbuf_ext_shared_info,
    owner: B,
}

/// DPDK's free callback: drops the holder, and with it the owner.
///
/// # Safety
/// `opaque` must be the `Box<ExtHolder<B>>` leaked by
/// [`Mbuf::from_external`], passed exactly once (DPDK calls this when the
/// shared info's reference count reaches 0).
unsafe extern "C" fn free_holder<B>(_addr: *mut c_void, opaque: *mut c_void) {
    // SAFETY: see the function's contract. A panic in B's Drop cannot
    // unwind through this extern "C" function; Rust aborts instead.
    drop(unsafe { Box::from_raw(opaque.cast::<ExtHolder<B>>()) });
}

impl Mbuf {
    /// An mbuf whose single segment is the bytes of `owner` (at most 65535
    /// of them, DPDK's segment limit), read-only, without copying.
    ///
    /// The mbuf header comes from `pool` (a pool with a small data room is
    /// enough). The device reads the bytes by DMA at their virtual address,
    /// so this needs the EAL in IOVA-as-VA mode ([`Eal::iova_is_va`]); with
    /// a real NIC the memory must also be DMA-mapped for it
    /// (`rte_extmem_register` + `rte_dev_dma_map`), which the caller of
    /// registered application memory arranges. Virtual devices copy in
    /// software and need nothing more.
    pub fn from_external<B>(eal: &Eal, pool: &Mempool, owner: B) -> Result<Mbuf>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        if !eal.iova_is_va() {
            return Err(Error::Unsupported(
                "external buffers need the EAL in IOVA-as-VA mode".into(),
            ));
        }
        let holder = Box::new(ExtHolder {
            shinfo: dpdk_sys::rte_mbuf_ext_shared_info {
                free_cb: Some(free_holder::<B>),
                fcb_opaque: std::ptr::null_mut(),
                refcnt: 1,
            },
            owner,
        });
        // The bytes' address is taken after the owner moved into the box:
        // an owner that stores its bytes inline (an array) moved with it.
        let bytes = holder.owner.as_ref();
        let (addr, len) = (bytes.as_ptr(), bytes.len());
        let len16 = u16::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!("external buffer of {len} bytes (at most 65535)"))
        })?;
        if len16 == 0 {
            return Err(Error::InvalidArgument("empty external buffer".into()));
        }
        let m = Mbuf::alloc(pool)?;
        let holder = Box::into_raw(holder);
        // SAFETY: holder is a live, leaked box; m is a fresh direct mbuf
        // with refcnt 1, exclusively ours. From here the box is owned by
        // the shared info and freed by free_holder when m (or the device)
        // frees the segment. The buffer is only read by DPDK and devices.
        unsafe {
            (*holder).shinfo.fcb_opaque = holder.cast::<c_void>();
            let raw = m.as_ptr();
            dpdk_sys::shim_rte_pktmbuf_attach_extbuf(
                raw,
                addr.cast_mut().cast::<c_void>(),
                addr as u64,
                len16,
                &raw mut (*holder).shinfo,
            );
            // attach_extbuf leaves data_len 0 at offset 0: cover the buffer.
            let p = dpdk_sys::shim_rte_pktmbuf_append(raw, len16);
            debug_assert!(
                !p.is_null(),
                "the fresh external segment has room for itself"
            );
        }
        Ok(m)
    }
}
