//! Private data, IRD and ORD through `rdma_connect`, `rdma_accept` and
//! `rdma_reject`, over a connection on the loopback interface: each side
//! receives exactly the octets the other passed.
//!
//! The oracle, `uwarp_verbs::check::private_data`, is shared with
//! `verbs/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`); its documentation gives the input
//! format.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_verbs::check::private_data(data);
});
