//! Memory DMA-mapped for PCI devices, so that a NIC can read frames'
//! payloads where they lie (zero-copy transmit by reference, RFC 5040
//! section 5's Tagged and Untagged sources sent without a copy).
//!
//! DPDK maps its own memory (hugepages, its mempools) for every device it
//! drives through VFIO; memory from the heap is invisible to the device
//! until it is mapped into the IOMMU too. With the EAL in IOVA-as-VA mode
//! the I/O address of an octet is its virtual address, so a mapping puts
//! the pages at their own addresses in the VFIO container all of the
//! process's devices share (what `rte_dev_dma_map` does for a PCI device
//! on VFIO, without the memseg list `rte_extmem_register` would spend on
//! each range).
//!
//! Mappings are whole pages, counted per range: the first [`map`] of a
//! range maps it, every further one of the same range only counts, and the
//! last [`DmaMapping`] dropped unmaps it. A range that shares a page with
//! another mapped range, but is not the same range, is refused (the
//! container cannot hold overlapping mappings); the memory uwarp sends
//! from by reference, its own registered buffers and its send queues,
//! starts on a page of its own ([`uwarp_stack::mem::PAGE_ALIGN`]), so
//! theirs never overlap; the one exception is a send queue shorter than
//! a page (a `send_buffer` under 4 KiB), which comes from the heap: its
//! frames are then copied instead (`payloads_unmapped`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};

/// The granule of a mapping: a page of ordinary memory (4 KiB on x86-64).
pub const PAGE: usize = uwarp_stack::mem::PAGE_ALIGN;

/// One mapped range: its length and how many [`DmaMapping`]s hold it.
struct Mapped {
    len: usize,
    holders: usize,
}

/// The mapped ranges, by first address, and the rules of sharing them.
#[derive(Default)]
struct Ranges(BTreeMap<usize, Mapped>);

impl Ranges {
    /// Counts a holder of the `len` octets at `start` (whole pages),
    /// calling `map` first when nobody holds them yet; refuses a range
    /// that overlaps a held range without being it, and whatever `map`
    /// refuses.
    fn hold(&mut self, start: usize, len: usize, map: impl FnOnce() -> Result<()>) -> Result<()> {
        if let Some(held) = self.0.get_mut(&start) {
            if held.len != len {
                return Err(Error::InvalidArgument(format!(
                    "{len} octets at {start:#x}: {} octets there are mapped for DMA",
                    held.len
                )));
            }
            held.holders += 1;
            return Ok(());
        }
        let before = self.0.range(..start).next_back();
        let after = self.0.range(start..).next();
        if before.is_some_and(|(&other, held)| other + held.len > start)
            || after.is_some_and(|(&other, _)| other < start + len)
        {
            return Err(Error::InvalidArgument(format!(
                "{len} octets at {start:#x} overlap a range mapped for DMA"
            )));
        }
        map()?;
        self.0.insert(start, Mapped { len, holders: 1 });
        Ok(())
    }

    /// Lets go of one holder of the range at `start`; its length when
    /// that was the last one (the caller unmaps it).
    fn release(&mut self, start: usize) -> Option<usize> {
        let held = self.0.get_mut(&start)?;
        held.holders -= 1;
        if held.holders > 0 {
            return None;
        }
        self.0.remove(&start).map(|gone| gone.len)
    }
}

/// The ranges mapped now.
static MAPPED: Mutex<Ranges> = Mutex::new(Ranges(BTreeMap::new()));

/// The table of mapped ranges. A holder that panicked left it consistent
/// (every change is one insert, removal or count), so a poisoned lock is
/// taken as it is.
fn mapped() -> MutexGuard<'static, Ranges> {
    MAPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The whole pages holding the `len` octets at `addr`, as first address
/// and length; `None` for no octets or a range past the address space.
fn pages(addr: usize, len: usize) -> Option<(usize, usize)> {
    if len == 0 {
        return None;
    }
    let start = addr & !(PAGE - 1);
    let end = addr.checked_add(len)?.checked_next_multiple_of(PAGE)?;
    Some((start, end - start))
}

/// The `len` octets at `addr` cut where they cross from one page into the
/// next: each piece, as offsets from `addr`, lies in one page.
///
/// A device given a buffer per piece reads each through one IOMMU page.
/// Hardware splits its reads at pages anyway; QEMU's emulated e1000e
/// (7.2, `hw/net/net_tx_pkt.c`, `net_tx_pkt_add_raw_fragment`) does
/// not: behind its emulated IOMMU a transmit buffer is mapped only to the
/// end of its page, and a frame with a buffer that crosses one is dropped
/// without a word, its retransmissions too.
pub fn page_pieces(addr: usize, len: usize) -> impl Iterator<Item = Range<usize>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= len {
            return None;
        }
        let here = addr.wrapping_add(at);
        let to_page_end = PAGE - (here & (PAGE - 1));
        let end = at + to_page_end.min(len - at);
        let piece = at..end;
        at = end;
        Some(piece)
    })
}

/// The pages holding the `len` octets at `addr`, mapped for DMA at their
/// virtual addresses until the returned handle is dropped.
///
/// Fails when the range is empty, when it overlaps another mapped range
/// without being it, or when VFIO refuses (no VFIO container, DPDK's
/// table of such mappings full, the IOMMU out of room).
///
/// Only for a process whose EAL runs in IOVA-as-VA mode with its devices
/// on VFIO; the memory must stay allocated until the handle is dropped.
pub fn map(addr: *const u8, len: usize) -> Result<DmaMapping> {
    let (start, len) = pages(addr as usize, len)
        .ok_or_else(|| Error::InvalidArgument("no octets to map for DMA".into()))?;
    mapped().hold(start, len, || {
        let (va, size) = (start as u64, len as u64);
        // SAFETY: maps pages of this process at their own addresses into
        // DPDK's default VFIO container; nothing is read or written here.
        // The caller keeps the memory allocated while the mapping lives.
        let ret = unsafe {
            dpdk_sys::rte_vfio_container_dma_map(
                dpdk_sys::RTE_VFIO_DEFAULT_CONTAINER_FD,
                va,
                va,
                size,
            )
        };
        match ret {
            0 => Ok(()),
            _ => Err(Error::from_errno("rte_vfio_container_dma_map")),
        }
    })?;
    Ok(DmaMapping { start })
}

/// A range of pages mapped for DMA, unmapped when the last handle of the
/// same range is dropped.
#[derive(Debug)]
pub struct DmaMapping {
    start: usize,
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        let Some(len) = mapped().release(self.start) else {
            return;
        };
        let (va, size) = (self.start as u64, len as u64);
        // SAFETY: unmaps exactly the range `map` mapped; no device is
        // given these addresses any more (the last frame that held them
        // was freed, which is what drops the last handle). A failure
        // leaves the pages mapped, as every page DPDK maps stays: nothing
        // else can be done about it here.
        unsafe {
            dpdk_sys::rte_vfio_container_dma_unmap(
                dpdk_sys::RTE_VFIO_DEFAULT_CONTAINER_FD,
                va,
                va,
                size,
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_octets_with_whole_pages() {
        assert_eq!(pages(0x1000, 1), Some((0x1000, PAGE)));
        assert_eq!(pages(0x1fff, 2), Some((0x1000, 2 * PAGE)));
        assert_eq!(pages(0x1000, PAGE), Some((0x1000, PAGE)));
        assert_eq!(pages(0x1000, 0), None);
        assert_eq!(pages(usize::MAX - 10, 100), None);
    }

    #[test]
    fn page_pieces_cut_at_every_page_crossed_and_nowhere_else() {
        let pieces = |addr, len| page_pieces(addr, len).collect::<Vec<_>>();
        assert_eq!(pieces(0x1000, 0x1000), vec![(0..0x1000)]);
        assert_eq!(pieces(0x1f00, 0x300), [0..0x100, 0x100..0x300]);
        assert_eq!(pieces(0x1fff, 2), [0..1, 1..2]);
        assert_eq!(
            pieces(0x1800, 0x2000),
            [0..0x800, 0x800..0x1800, 0x1800..0x2000]
        );
        assert_eq!(pieces(0x1234, 100), vec![(0..100)]);
        assert!(pieces(0x1000, 0).is_empty());
    }

    #[test]
    fn a_range_is_mapped_by_its_first_holder_and_unmapped_after_its_last() {
        let mut ranges = Ranges::default();
        let mut maps = 0;
        for _ in 0..2 {
            ranges
                .hold(0x10000, 2 * PAGE, || {
                    maps += 1;
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(maps, 1, "the second holder only counts");
        assert_eq!(ranges.release(0x10000), None, "one holder left");
        assert_eq!(ranges.release(0x10000), Some(2 * PAGE), "unmap it");
        assert_eq!(ranges.release(0x10000), None, "nothing held");
    }

    #[test]
    fn overlapping_ranges_are_refused_without_mapping_and_neighbours_taken() {
        let mut ranges = Ranges::default();
        let never = || -> Result<()> { panic!("an overlap must not reach VFIO") };
        ranges.hold(0x10000, 2 * PAGE, || Ok(())).unwrap();
        // The same start with another length, a range ending inside it,
        // one starting inside it.
        assert!(ranges.hold(0x10000, PAGE, never).is_err());
        assert!(ranges.hold(0xf000, 2 * PAGE, never).is_err());
        assert!(ranges.hold(0x11000, 2 * PAGE, never).is_err());
        // The pages just before and just after are free.
        ranges.hold(0xf000, PAGE, || Ok(())).unwrap();
        ranges.hold(0x12000, PAGE, || Ok(())).unwrap();
    }

    #[test]
    fn a_refused_mapping_leaves_nothing_held() {
        let mut ranges = Ranges::default();
        let refused = ranges.hold(0x10000, PAGE, || Err(Error::NoMbufs));
        assert_eq!(refused, Err(Error::NoMbufs));
        assert_eq!(ranges.release(0x10000), None);
        ranges.hold(0x10000, PAGE, || Ok(())).unwrap();
    }
}
