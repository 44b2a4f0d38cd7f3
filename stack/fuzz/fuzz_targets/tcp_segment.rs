//! TCP segments: uwarp's header parser against smoltcp's on the same
//! octets, and the re-emission of what it accepts.
//!
//! The oracle, `uwarp_stack::wire::check::tcp_segment`, is shared with
//! `stack/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_stack::wire::check::tcp_segment(data);
});
