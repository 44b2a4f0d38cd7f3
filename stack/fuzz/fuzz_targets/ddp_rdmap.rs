//! ULPDUs: `DdpRepr` and `RdmapSegment::parse`, then `ReadRequest` or
//! `TerminateRepr` on the payload, each re-emitted and re-parsed.
//!
//! The oracle, `uwarp_stack::wire::check::ddp_rdmap`, is shared with
//! `stack/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_stack::wire::check::ddp_rdmap(data);
});
