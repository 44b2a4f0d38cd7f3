//! A large [`MemoryBuffer`] is zeroed without being written: its pages
//! stay untouched until used, as `calloc`'s fresh mappings are.
//!
//! Page-aligned allocations once went through the allocator's aligned
//! path, which clears every octet by hand: each connection's TCP send
//! queue (the same allocation) was written in full at set-up, and the
//! connection set-up rate fell five times. In a process of its own (one
//! test: nothing else allocates meanwhile), a 64 MiB buffer must add far
//! less than 64 MiB to the resident set.

use uwarp_stack::mem::{MemoryBuffer, PAGE_ALIGN};

/// The process's resident set, in octets (`VmRSS` of
/// `/proc/self/status`, in KiB).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

#[test]
fn a_large_buffer_is_zero_without_its_pages_being_written() {
    const LEN: usize = 64 << 20;
    let before = resident();
    let buffer = MemoryBuffer::new(LEN);
    let grown = resident().saturating_sub(before);
    assert!(
        grown < (LEN / 4) as u64,
        "a {LEN}-octet buffer made {grown} octets resident"
    );
    assert_eq!(buffer.addr() % PAGE_ALIGN as u64, 0);
    let mut sample = [0xFFu8; 4096];
    for at in [0, LEN / 2, LEN - sample.len()] {
        buffer.read_at(at, &mut sample).expect("inside the buffer");
        assert!(sample.iter().all(|&octet| octet == 0), "octets at {at}");
    }
}
