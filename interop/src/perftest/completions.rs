//! Completions as a perftest run takes them: a failed one becomes the
//! error that explains it (a flush after a Terminate names the
//! Terminate, a flush after a close says the peer disconnected).

use std::time::{Duration, Instant};

use uwarp_stack::verbs::{WcStatus, WorkCompletion};

use super::PerftestError;
use uwarp::CompletionQueue;
use uwarp::QueuePair;

/// `wc` if it succeeded, else why it failed.
pub(crate) fn checked(
    qp: &QueuePair,
    wc: WorkCompletion,
    waiting_for: &'static str,
) -> Result<WorkCompletion, PerftestError> {
    match wc.status {
        WcStatus::Success => Ok(wc),
        WcStatus::WrFlushError => match qp.take_terminate() {
            Some(event) => Err(PerftestError::Terminated(event)),
            None => Err(PerftestError::Disconnected { waiting_for }),
        },
        _ => Err(PerftestError::Completion { waiting_for, wc }),
    }
}

/// The next successful completion on `cq` (of `qp`), waiting at most
/// `timeout`.
pub(crate) fn next(
    qp: &QueuePair,
    cq: &CompletionQueue,
    timeout: Duration,
    waiting_for: &'static str,
) -> Result<WorkCompletion, PerftestError> {
    checked(qp, next_any(cq, timeout, waiting_for)?, waiting_for)
}

/// The next completion on `cq`, failed or not, waiting at most
/// `timeout`.
pub(crate) fn next_any(
    cq: &CompletionQueue,
    timeout: Duration,
    waiting_for: &'static str,
) -> Result<WorkCompletion, PerftestError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(PerftestError::Timeout { waiting_for });
        }
        // In slices, so a deadline far away still notices the clock.
        if let Some(wc) = cq.poll_blocking(left.min(Duration::from_millis(100))) {
            return Ok(wc);
        }
    }
}
