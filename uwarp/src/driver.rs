//! [`Driver`]: who runs a device's cores while the application waits.
//!
//! A device whose cores have threads of their own (the socket transport,
//! and the DPDK transport by default) needs nothing from a waiting
//! application. A DPDK device in inline mode has no threads: its cores run
//! when the application steps them, so every blocking call of the
//! connection manager steps them while it waits. That is the
//! single-threaded mode for tests and one-core machines, and the
//! run-to-completion shape where the application and the stack share a
//! core.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::error::Error;

/// A device's cores that run only when the application steps them (the
/// DPDK transport's inline mode implements it).
pub(crate) trait InlineCores: Send + Sync {
    /// Runs every core once at `now`; returns the work done (0 once the
    /// cores shut down).
    fn step(&self, now: Instant) -> usize;
}

/// How a device's cores run while the application waits.
///
/// The inline cores sit behind a trait object: a step locks and polls
/// every core, which the one indirect call is nothing beside.
#[derive(Clone, Default)]
pub(crate) struct Driver {
    inline: Option<Arc<dyn InlineCores>>,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = if self.inline.is_some() {
            "inline"
        } else {
            "threads"
        };
        f.debug_struct("Driver").field("cores", &mode).finish()
    }
}

impl Driver {
    /// A driver that steps `cores` on the waiting thread.
    pub(crate) fn inline(cores: Arc<dyn InlineCores>) -> Self {
        Driver {
            inline: Some(cores),
        }
    }

    /// Whether the cores run only when stepped.
    pub(crate) fn is_inline(&self) -> bool {
        self.inline.is_some()
    }

    /// Runs every inline core once; returns the work done (0 for a
    /// threaded device, whose cores run anyway).
    pub(crate) fn progress(&self) -> usize {
        self.progress_at(Instant::now())
    }

    /// [`progress`](Self::progress) with the time the caller read already:
    /// a wait loop reads the clock once per turn, for its deadline and
    /// the cores alike (a clock read costs about as much as an idle poll).
    pub(crate) fn progress_at(&self, now: Instant) -> usize {
        self.inline.as_ref().map_or(0, |cores| cores.step(now))
    }

    /// Waits for a message on `rx`, stepping inline cores meanwhile; an
    /// error once every sender is gone.
    pub(crate) fn wait<T>(&self, rx: &Receiver<T>) -> Result<T, Error> {
        let forever = Duration::from_secs(u64::from(u32::MAX));
        self.recv(rx, forever).map_err(|_| Error::DeviceClosed)
    }

    /// Waits up to `timeout` for a message on `rx`, stepping inline
    /// cores meanwhile.
    pub(crate) fn recv<T>(
        &self,
        rx: &Receiver<T>,
        timeout: Duration,
    ) -> Result<T, RecvTimeoutError> {
        if self.inline.is_none() {
            return rx.recv_timeout(timeout);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match rx.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(RecvTimeoutError::Timeout);
            }
            if self.progress_at(now) == 0 {
                std::hint::spin_loop();
            }
        }
    }
}
