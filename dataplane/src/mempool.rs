//! Pools of packet buffers (`rte_pktmbuf_pool_create`), one per core.
//!
//! A [`Mempool`] owns its DPDK mempool and frees it when dropped, but only
//! if every mbuf is back in it: an mbuf still held somewhere (by an
//! [`Mbuf`](crate::Mbuf), a device queue, a ring) would otherwise point into
//! freed memory when it is freed. A pool dropped with mbufs out is left
//! allocated (and counted by [`leaked_pools`]), which is safe and visible.

use std::ffi::CStr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::eal::Eal;
use crate::error::{c_name, Error, Result};

/// The longest mempool name DPDK accepts, in bytes.
pub const MAX_NAME_LEN: usize = dpdk_sys::RTE_MEMPOOL_NAMESIZE as usize - 1;

static LEAKED_POOLS: AtomicUsize = AtomicUsize::new(0);

/// How many [`Mempool`]s were dropped while mbufs were still out, and so
/// were deliberately not freed.
pub fn leaked_pools() -> usize {
    LEAKED_POOLS.load(Ordering::Relaxed)
}

/// The shape of a pktmbuf pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MempoolConfig {
    /// Number of mbufs; `2^q - 1` uses memory best.
    pub capacity: u32,
    /// Per-lcore cache size (0 disables it); at most 512 and at most
    /// `capacity / 1.5`.
    pub cache_size: u32,
    /// Bytes of data room per mbuf, headroom included
    /// (`RTE_MBUF_DEFAULT_BUF_SIZE` = 2048 + 128 by default).
    pub data_room: u16,
}

impl Default for MempoolConfig {
    fn default() -> Self {
        MempoolConfig {
            capacity: 8191,
            cache_size: 256,
            data_room: dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
        }
    }
}

/// A pktmbuf pool; mbufs are allocated from it with
/// [`Mbuf::alloc`](crate::Mbuf::alloc).
#[derive(Debug)]
pub struct Mempool {
    raw: NonNull<dpdk_sys::rte_mempool>,
    capacity: u32,
}

// SAFETY: the pool uses DPDK's default multi-producer/multi-consumer ring
// ops, so gets and puts from any thread are safe; the pointer is only freed
// in Drop, which has exclusive access.
unsafe impl Send for Mempool {}
// SAFETY: as above; &Mempool only allows gets, puts and counts.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool named `name` (unique in the process, at most
    /// [`MAX_NAME_LEN`] bytes) on NUMA socket `socket` (`None`: any).
    pub fn new(
        _eal: &Eal,
        name: &str,
        config: &MempoolConfig,
        socket: Option<u32>,
    ) -> Result<Self> {
        let cname = c_name("mempool name", name, MAX_NAME_LEN)?;
        if config.cache_size > dpdk_sys::RTE_MEMPOOL_CACHE_MAX_SIZE
            || u64::from(config.cache_size) * 3 > u64::from(config.capacity) * 2
        {
            return Err(Error::InvalidArgument(format!(
                "mempool cache of {} for {} mbufs (at most 512 and capacity / 1.5)",
                config.cache_size, config.capacity
            )));
        }
        let socket = match socket {
            Some(s) => {
                i32::try_from(s).map_err(|_| Error::InvalidArgument(format!("socket {s}")))?
            }
            None => dpdk_sys::SOCKET_ID_ANY,
        };
        // SAFETY: the EAL is initialised; cname outlives the call.
        let raw = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                config.capacity,
                config.cache_size,
                0,
                config.data_room,
                socket,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_errno("rte_pktmbuf_pool_create"))?;
        Ok(Mempool {
            raw,
            capacity: config.capacity,
        })
    }

    /// Creates the pool of `lcore`, named `<prefix>_<lcore>`, on the NUMA
    /// socket of that lcore, so its mbufs are local to the core that
    /// allocates them.
    pub fn for_lcore(eal: &Eal, prefix: &str, lcore: u32, config: &MempoolConfig) -> Result<Self> {
        let socket = eal.socket_of_lcore(lcore);
        Self::new(eal, &format!("{prefix}_{lcore}"), config, Some(socket))
    }

    /// The pool's name.
    pub fn name(&self) -> String {
        // SAFETY: the pool is alive; its name is a NUL-terminated array.
        unsafe { CStr::from_ptr((*self.raw.as_ptr()).name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// The number of mbufs the pool was created with.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Free mbufs, those in per-lcore caches included.
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive.
        unsafe { dpdk_sys::rte_mempool_avail_count(self.raw.as_ptr()) }
    }

    /// Mbufs out of the pool: held by the application, queued in a device
    /// or a ring.
    pub fn in_use(&self) -> u32 {
        // SAFETY: the pool is alive.
        unsafe { dpdk_sys::rte_mempool_in_use_count(self.raw.as_ptr()) }
    }

    /// The raw pool, for DPDK calls that take one (queue set-up). It stays
    /// valid while `self` lives.
    pub fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.raw.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        if self.in_use() == 0 {
            // SAFETY: no mbuf of the pool is out, and self is the only
            // handle to it.
            unsafe { dpdk_sys::rte_mempool_free(self.raw.as_ptr()) };
        } else {
            LEAKED_POOLS.fetch_add(1, Ordering::Relaxed);
        }
    }
}
