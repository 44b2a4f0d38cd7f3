//! The queue pair states of the RDMAC verbs specification (section 6.2),
//! the model RFC 5040 section 6.6 refers to for stream teardown.

/// Where a queue pair is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created, not connected: receives may be posted, sends wait.
    Idle,
    /// Ready to send: the stream is in Full Operation.
    Rts,
    /// A graceful close is in progress: outstanding work finishes, nothing
    /// new is accepted.
    Closing,
    /// A Terminate was sent or received; the stream closes next.
    Terminate,
    /// The stream is gone: everything outstanding was flushed.
    Error,
}

impl QpState {
    /// Whether new send work requests are accepted for processing.
    pub fn accepts_sends(self) -> bool {
        matches!(self, Self::Idle | Self::Rts)
    }
}
