//! RDMAP (RFC 5040): the pieces of the queue-pair engine. So far, the RDMA
//! Read queues of both sides, limited by the negotiated ORD and IRD.

pub mod read_queue;

pub use read_queue::{InboundReads, OutboundReads, ResponseSegment};
