//! FPDUs without Markers: `Fpdu::new_checked`, re-emitted with and without
//! CRC, and a CRC bit-flip check.
//!
//! The oracle, `uwarp_stack::wire::check::fpdu`, is shared with
//! `stack/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_stack::wire::check::fpdu(data);
});
