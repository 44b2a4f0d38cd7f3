//! `rdma_getaddrinfo` and `rdma_freeaddrinfo`: node and service strings
//! and hints; every returned node well-formed, the list ended, numeric
//! addresses resolved, nothing looked up by name.
//!
//! The oracle, `uwarp_verbs::check::getaddrinfo`, is shared with
//! `verbs/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`); its documentation gives the input
//! format.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_verbs::check::getaddrinfo(data);
});
