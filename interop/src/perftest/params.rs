//! The numbers each side derives from its own command line the way
//! perftest 4.5 does (`perftest_parameters.c`, `force_dependecies`), and
//! where each message goes in memory (`perftest_resources.c`). perftest
//! exchanges none of them: the send test's receive window is right only
//! when both sides were given the same `-s` and `-n`.

/// perftest's port (`DEF_PORT`).
pub const DEFAULT_PORT: u16 = 18515;
/// The default message size of the bandwidth tests (`DEF_SIZE_BW`).
pub const DEFAULT_SIZE: u32 = 65536;
/// The largest message size perftest accepts (`MAX_SIZE`, 8 MiB).
pub const MAX_SIZE: u32 = 1 << 23;
/// The default iterations of `ib_write_bw` (`DEF_ITERS_WB`).
pub const DEFAULT_ITERS_WRITE: u64 = 5000;
/// The default iterations of `ib_read_bw` and `ib_send_bw` (`DEF_ITERS`).
pub const DEFAULT_ITERS: u64 = 1000;
/// The fewest iterations perftest accepts (`MIN_ITER`).
pub const MIN_ITERS: u64 = 5;
/// The default send queue depth of the bandwidth tests (`DEF_TX_BW`).
pub const DEFAULT_TX_DEPTH: u32 = 128;
/// The send test's default receive queue depth (`DEF_RX_SEND`).
pub const DEFAULT_RX_DEPTH_SEND: u64 = 512;
/// The RDMA Reads this side offers to have outstanding: perftest asks the
/// device for its maximum, which is 128 on Linux siw (`SIW_MAX_ORD_QP`).
pub const DEFAULT_OUT_READS: u16 = 128;
/// perftest's page size when `sysconf` has none (`DEF_PAGE_SIZE`).
const DEFAULT_PAGE_SIZE: u32 = 4096;
/// perftest's cache line size when `sysconf` has none
/// (`DEF_CACHE_LINE_SIZE`).
const DEFAULT_CACHE_LINE: u32 = 64;
/// Above this many iterations perftest skips the peak (`noPeak`).
pub const PEAK_ITERS_LIMIT: u64 = 20_000;

/// This host's page size: perftest's cycle buffer before the two sides
/// take the larger of theirs.
pub fn local_cycle_buffer() -> u32 {
    sysconf_or(libc::_SC_PAGESIZE, DEFAULT_PAGE_SIZE)
}

/// This host's level-1 data cache line size.
pub fn local_cache_line() -> u32 {
    sysconf_or(libc::_SC_LEVEL1_DCACHE_LINESIZE, DEFAULT_CACHE_LINE)
}

/// `sysconf(name)`, or `default` when the system does not say.
fn sysconf_or(name: libc::c_int, default: u32) -> u32 {
    // SAFETY: sysconf has no preconditions.
    let value = unsafe { libc::sysconf(name) };
    u32::try_from(value)
        .ok()
        .filter(|&v| v > 0)
        .unwrap_or(default)
}

/// Work requests the client keeps outstanding: the requested depth, but
/// never more than the iterations.
pub fn tx_depth(requested: u32, iters: u64) -> u64 {
    u64::from(requested).min(iters)
}

/// The send test's receive queue depth: [`DEFAULT_RX_DEPTH_SEND`], never
/// more than the iterations, then made even ("WA for a bug when rx_depth
/// is odd in SEND"). The client runs at most this many Sends ahead of the
/// server's credits, and so assumes the server posted as many.
pub fn rx_depth(iters: u64) -> u64 {
    let depth = DEFAULT_RX_DEPTH_SEND.min(iters);
    depth + depth % 2
}

/// Every this many receives the send test's server writes a credit
/// (`credit_cnt = rx_depth / 3`).
pub fn credit_every(rx_depth: u64) -> u64 {
    (rx_depth / 3).max(1)
}

/// Whether the send test's server writes a credit after its
/// `received`th receive: every [`credit_every`] receives, counted
/// afresh after each `rx_depth` (`run_iter_bw_server`).
pub fn credit_due(received: u64, rx_depth: u64) -> bool {
    (received % rx_depth.max(1)) % credit_every(rx_depth) == 0
}

/// Where messages go in a side's memory: perftest's cycle buffer. A
/// side's region is two halves of [`buff_size`](Self::buff_size) octets:
/// the first is what it sends from or reads into, the second what the
/// peer writes into or reads from (the address it advertises) and where
/// its receives land. Messages of at most half a cycle buffer go to
/// successive slots of [`step`](Self::step) octets, wrapping at the
/// cycle buffer's end; larger ones all go to the half's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The message size.
    pub size: u32,
    /// The cycle buffer: the larger page size of the two sides.
    pub cycle_buffer: u32,
    /// The larger cache line size of the two sides.
    pub cache_line: u32,
}

impl Layout {
    /// One half of the region (`BUFF_SIZE`): the cycle buffer, or the
    /// message size when that is larger.
    pub fn buff_size(&self) -> u64 {
        u64::from(self.size.max(self.cycle_buffer))
    }

    /// The distance between successive slots (`INC`): the size rounded up
    /// to whole cache lines, at least one.
    pub fn step(&self) -> u64 {
        let line = u64::from(self.cache_line.max(1));
        u64::from(self.size).div_ceil(line).max(1) * line
    }

    /// The offset in its half of the `n`th message (counted from 0), as
    /// perftest's `increase_rem_addr` and `increase_loc_addr` move it.
    pub fn offset(&self, n: u64) -> u64 {
        if u64::from(self.size) > u64::from(self.cycle_buffer) / 2 {
            return 0;
        }
        let slots = (u64::from(self.cycle_buffer) / self.step()).max(1);
        (n % slots) * self.step()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depths_follow_perftest() {
        assert_eq!(tx_depth(128, 5), 5);
        assert_eq!(tx_depth(128, 5000), 128);
        // The captured `ib_send_bw -n 5` printed "RX depth : 6".
        assert_eq!(rx_depth(5), 6);
        assert_eq!(rx_depth(200), 200);
        assert_eq!(rx_depth(1000), 512);
        assert_eq!(credit_every(6), 2);
        assert_eq!(credit_every(512), 170);
        // The captured server credited after its 2nd and 4th receive.
        let due: Vec<u64> = (1..=5).filter(|&n| credit_due(n, 6)).collect();
        assert_eq!(due, [2, 4]);
        // Counted afresh after every rx_depth: 170, 340, 510, then 512.
        let due: Vec<u64> = (1..=600).filter(|&n| credit_due(n, 512)).collect();
        assert_eq!(due, [170, 340, 510, 512]);
    }

    #[test]
    fn small_messages_cycle_through_cache_line_slots() {
        let layout = Layout {
            size: 64,
            cycle_buffer: 4096,
            cache_line: 64,
        };
        assert_eq!(layout.buff_size(), 4096);
        // The captured 64-octet Writes went to vaddr + 0, 0x40, 0x80, ...
        assert_eq!(
            (0..5).map(|n| layout.offset(n)).collect::<Vec<_>>(),
            [0, 0x40, 0x80, 0xc0, 0x100]
        );
        assert_eq!(layout.offset(64), 0);
        let odd = Layout {
            size: 100,
            ..layout
        };
        assert_eq!(odd.step(), 128);
        assert_eq!(odd.offset(31), 31 * 128);
        assert_eq!(odd.offset(32), 0);
    }

    #[test]
    fn large_messages_stay_at_the_start() {
        let layout = Layout {
            size: 65536,
            cycle_buffer: 4096,
            cache_line: 64,
        };
        assert_eq!(layout.buff_size(), 65536);
        assert_eq!(layout.offset(7), 0);
        let half = Layout {
            size: 2049,
            ..layout
        };
        assert_eq!(half.offset(1), 0);
    }

    #[test]
    fn this_host_has_a_page_and_a_cache_line() {
        assert!(local_cycle_buffer().is_power_of_two());
        assert!(local_cache_line() > 0);
    }
}
