//! FPDUs with Markers: the first 8 octets are the stream offset
//! (little-endian), the rest goes to `MarkedFpdu::parse` at that offset;
//! what parses is re-emitted with `marker::emit`.
//!
//! The oracle, `uwarp_stack::wire::check::marker`, is shared with
//! `stack/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_stack::wire::check::marker(data);
});
