//! The queue-pair engine under a hostile peer: arbitrary stream octets fed
//! to `QpEngine::on_bytes` with registered regions of every kind and work
//! outstanding. No panic, no octet changed outside a region or in one that
//! forbids it, every work request completed exactly once, and everything
//! the engine sends frames and parses.
//!
//! The oracle, `uwarp_stack::rdmap::check::engine`, is shared with
//! `stack/tests/qp_fuzz.rs`, so a crash found here replays as an ordinary
//! test (see `../README.md`); its documentation gives the input format.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_stack::rdmap::check::engine(data);
});
