//! uwarp-bench: the built-in tools: the perf tool and the capture decoder.

pub mod capture;
pub mod decode;
pub mod perf;
pub mod pollloop;
pub mod port;
pub mod tcp;
