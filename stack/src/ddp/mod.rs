//! DDP, the data sink's side (RFC 5041 section 5): the untagged queues that
//! match messages to posted buffers by MSN. Tagged placement goes through
//! the STag table of the memory layer.

pub mod untagged;

pub use untagged::{Delivered, UntaggedBuffer, UntaggedError, UntaggedQueue};
