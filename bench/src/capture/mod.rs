//! Packet captures: reading pcap/pcapng files, reassembling their TCP byte
//! streams, and writing synthetic TCP connections as pcap files.
//!
//! ```no_run
//! use std::path::Path;
//! use uwarp_bench::capture::read_capture;
//!
//! for stream in read_capture(Path::new("trace.pcap"))? {
//!     println!("{:?}: {} bytes, gaps {:?}", stream.key, stream.bytes.len(), stream.gaps);
//! }
//! # Ok::<(), uwarp_bench::capture::CaptureError>(())
//! ```

mod read;
mod reassembly;
mod write;

pub use read::{
    read_capture, read_capture_bytes, read_capture_from, Capture, CaptureError, CaptureStats,
};
pub use reassembly::{
    stream_offset_to_seq, FlowKey, SegmentRecord, StreamChunk, TcpStream, MAX_STREAM_BYTES,
};
pub use write::{PcapTcpWriter, MAX_SEGMENT_PAYLOAD};
