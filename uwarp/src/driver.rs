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
//!
//! A driver also knows the process its device was opened in (its fork
//! generation, `crate::fork`): in a child of `fork` nothing of the
//! parent's device answers, so its waits fail at once.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::error::Error;
use crate::fork;

/// Polls of an empty completion queue by one thread after which it yields
/// its CPU once, on a device whose cores have threads of their own: as the
/// cores themselves do when idle. A poll costs tens of nanoseconds and a
/// yield with nothing else to run a few hundred, so a thread with a CPU of
/// its own loses little; where the application's polling thread shares a
/// CPU with a core (fewer CPUs than busy threads), the core gets to run
/// within microseconds instead of at the end of the scheduler's slice.
const EMPTY_POLLS_BEFORE_YIELD: u32 = 256;

thread_local! {
    /// This thread's empty polls since it last yielded.
    static EMPTY_POLLS: Cell<u32> = const { Cell::new(0) };
}

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
#[derive(Clone)]
pub(crate) struct Driver {
    inline: Option<Arc<dyn InlineCores>>,
    /// The fork generation of the process it was made in.
    generation: u64,
}

impl Default for Driver {
    /// The driver of a device whose cores have threads of their own,
    /// opened in this process.
    fn default() -> Self {
        Driver {
            inline: None,
            generation: fork::generation(),
        }
    }
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
            generation: fork::generation(),
        }
    }

    /// The driver of a threaded device as a child of `fork` sees its
    /// parent's.
    #[cfg(test)]
    pub(crate) fn of_the_parent() -> Self {
        Driver {
            inline: None,
            generation: fork::generation().wrapping_sub(1),
        }
    }

    /// `Ok` in the process its device was opened in;
    /// [`Error::DeviceClosed`] in a child of `fork`, where the device's
    /// threads or cores are not (its objects fail there, as those of a
    /// device gone from under rdma-core do).
    pub(crate) fn ensure_in_its_process(&self) -> Result<(), Error> {
        if self.generation == fork::generation() {
            Ok(())
        } else {
            Err(Error::DeviceClosed)
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

    /// What a poll that found its completion queue empty does: runs
    /// inline cores once; on a device whose cores have threads, yields the
    /// CPU once every [`EMPTY_POLLS_BEFORE_YIELD`] such polls by this
    /// thread, so that an application spinning on the queue (perftest, an
    /// MPI progress loop) lets cores sharing its CPU run.
    pub(crate) fn empty_poll(&self) {
        if self.inline.is_some() {
            self.progress();
            return;
        }
        EMPTY_POLLS.with(|polls| {
            let count = polls.get() + 1;
            if count < EMPTY_POLLS_BEFORE_YIELD {
                polls.set(count);
            } else {
                polls.set(0);
                std::thread::yield_now();
            }
        });
    }

    /// Waits for a message on `rx`, stepping inline cores meanwhile; an
    /// error once every sender is gone.
    pub(crate) fn wait<T>(&self, rx: &Receiver<T>) -> Result<T, Error> {
        let forever = Duration::from_secs(u64::from(u32::MAX));
        self.recv(rx, forever).map_err(|_| Error::DeviceClosed)
    }

    /// Waits up to `timeout` for a message on `rx`, stepping inline
    /// cores meanwhile; in a child of `fork`, where nothing of the device
    /// would ever send one, fails at once as if every sender were gone.
    pub(crate) fn recv<T>(
        &self,
        rx: &Receiver<T>,
        timeout: Duration,
    ) -> Result<T, RecvTimeoutError> {
        if self.ensure_in_its_process().is_err() {
            return Err(RecvTimeoutError::Disconnected);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threaded_device_yields_once_every_so_many_empty_polls() {
        let driver = Driver::default();
        EMPTY_POLLS.with(|polls| polls.set(0));
        (1..EMPTY_POLLS_BEFORE_YIELD).for_each(|_| driver.empty_poll());
        assert_eq!(
            EMPTY_POLLS.with(Cell::get),
            EMPTY_POLLS_BEFORE_YIELD - 1,
            "no yield yet"
        );
        driver.empty_poll();
        assert_eq!(EMPTY_POLLS.with(Cell::get), 0, "yielded, counting again");
    }
}
