//! `post_send`, `post_recv` and `post_srq_recv` (the context's function
//! table, as the header's inline `ibv_post_send` calls it) on chains of
//! work requests of every opcode, flag and element count, to a queue
//! pair that is never connected: `EINVAL` and `bad_wr` at the first
//! invalid request, and no memory read beyond what the library may read.
//!
//! The oracle, `uwarp_verbs::check::work_requests`, is shared with
//! `verbs/tests/fuzz_inputs.rs`, so a crash found here replays as an
//! ordinary test (see `../README.md`); its documentation gives the input
//! format.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    uwarp_verbs::check::work_requests(data);
});
