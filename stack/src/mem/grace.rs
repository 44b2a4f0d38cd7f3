//! Grace periods: knowing when every data-path access that could still see
//! a region has finished (RFC 5041 section 8.3 item 2: STags are only valid
//! for the duration the ULP establishes, and after revocation the memory is
//! the consumer's again).
//!
//! Every [`StagTable`](super::StagTable) access runs pinned to a
//! `crossbeam_epoch` epoch. Invalidation and deregistration first make the
//! state word refuse the STag, then defer a function through the epoch
//! collector; the collector runs it only once every thread that was pinned
//! at that moment has unpinned, which is after every access that could have
//! seen the STag valid has returned. The function drops the retired
//! descriptor (if any) and raises a flag; [`GracePeriod`] waits for the flag.

use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_epoch::{self as epoch, Guard};

/// The end of a grace period: once [`is_complete`](Self::is_complete) or
/// [`wait`](Self::wait) says so, no table access that started before the
/// operation that returned this handle is still running, and none that
/// starts later can use what that operation revoked.
#[derive(Clone)]
pub struct GracePeriod {
    done: Arc<AtomicBool>,
}

/// What [`StagTable::deregister`](super::StagTable::deregister) returns:
/// the grace period after which no write from the table lands in the
/// region's buffer again and the table holds no reference to it.
pub type Deregistered = GracePeriod;

/// The STag table's epoch held pinned across a burst of table accesses (a
/// dataplane core's handling of one receive burst): each access inside
/// then pins by bumping this thread's count, instead of with the fence a
/// first pin costs (one per FPDU placed or sent, before). Grace periods
/// that start meanwhile end only after the burst: keep it short, and do
/// not [`wait`](GracePeriod::wait) for one while it lives.
pub struct Burst {
    _guard: Guard,
}

impl Burst {
    /// Pins the epoch until the burst is dropped.
    pub fn begin() -> Self {
        Burst {
            _guard: epoch::pin(),
        }
    }
}

impl fmt::Debug for Burst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Burst")
    }
}

/// How many times [`GracePeriod::wait`] spins before it starts sleeping.
const SPINS: u32 = 64;
/// The first and the longest sleep of [`GracePeriod::wait`]. Sleeping, not
/// yielding: when the data-path threads fill every core, a yield can cost a
/// whole time slice, while a short sleep gives a descheduled pinned thread
/// the core and wakes up soon after.
const FIRST_SLEEP: Duration = Duration::from_micros(5);
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

impl GracePeriod {
    /// Starts a grace period after what the current thread has done so
    /// far; `cleanup` runs when it ends, before the handle reports it.
    ///
    /// # Safety
    ///
    /// As for [`Guard::defer_unchecked`]: `cleanup` may run on any thread,
    /// once every thread pinned now has unpinned; whatever it destroys must
    /// already be unreachable for threads that pin later.
    pub(crate) unsafe fn start_with<F: FnOnce()>(guard: &Guard, cleanup: F) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        // SAFETY: the caller vouches for `cleanup`; raising the flag is
        // safe on any thread at any time.
        unsafe {
            guard.defer_unchecked(move || {
                cleanup();
                flag.store(true, Ordering::Release);
            });
        }
        // Move the deferred function to the global queue at once, so that
        // any thread's collection can run it even if this one goes idle.
        guard.flush();
        GracePeriod { done }
    }

    /// Starts a grace period after what the current thread has done so far.
    pub(crate) fn start(guard: &Guard) -> Self {
        // SAFETY: nothing is destroyed.
        unsafe { Self::start_with(guard, || ()) }
    }

    /// Whether the grace period has ended. Helps it along: unless the
    /// calling thread is itself pinned, this pins, flushes and collects
    /// once, which may advance the global epoch.
    pub fn is_complete(&self) -> bool {
        if self.done.load(Ordering::Acquire) {
            return true;
        }
        if !epoch::is_pinned() {
            epoch::pin().flush();
        }
        self.done.load(Ordering::Acquire)
    }

    /// Whether the calling thread may [`wait`](Self::wait) for a grace
    /// period: it is not pinned itself (inside a table access, or holding
    /// a `Guard` of the default `crossbeam_epoch` collector).
    pub fn may_wait() -> bool {
        !epoch::is_pinned()
    }

    /// Blocks until the grace period has ended, driving the epoch collector
    /// meanwhile. It ends as soon as every table access that was running at
    /// the start returns: data-path calls are short, so this takes
    /// microseconds unless a thread is descheduled inside one.
    ///
    /// # Panics
    ///
    /// If the calling thread is pinned to the default `crossbeam_epoch`
    /// collector (it holds a `Guard`): the epoch could not advance past it,
    /// so the wait would never end.
    pub fn wait(&self) {
        assert!(
            !epoch::is_pinned(),
            "GracePeriod::wait called while pinned: the grace period could never end"
        );
        let mut spins = 0u32;
        let mut sleep = FIRST_SLEEP;
        while !self.is_complete() {
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
            } else {
                thread::sleep(sleep);
                sleep = (sleep * 2).min(LONGEST_SLEEP);
            }
        }
    }
}

impl fmt::Debug for GracePeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GracePeriod")
            .field("complete", &self.done.load(Ordering::Acquire))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn ends_without_other_threads() {
        let grace = GracePeriod::start(&epoch::pin());
        grace.wait();
        assert!(grace.is_complete());
    }

    #[test]
    fn waits_for_a_pinned_thread() {
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let reader = thread::spawn(move || {
            let guard = epoch::pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        let grace = GracePeriod::start(&epoch::pin());
        // The reader stays pinned: however often we help, it cannot end.
        for _ in 0..1000 {
            assert!(!grace.is_complete());
        }
        release_tx.send(()).unwrap();
        reader.join().unwrap();
        grace.wait();
        assert!(grace.is_complete());
    }

    #[test]
    fn cleanup_runs_before_completion() {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&dropped);
        // SAFETY: the cleanup destroys nothing shared.
        let grace = unsafe {
            GracePeriod::start_with(&epoch::pin(), move || flag.store(true, Ordering::Relaxed))
        };
        grace.wait();
        assert!(dropped.load(Ordering::Relaxed));
    }

    #[test]
    fn a_pinned_thread_may_not_wait() {
        assert!(GracePeriod::may_wait());
        let guard = epoch::pin();
        assert!(!GracePeriod::may_wait());
        drop(guard);
        assert!(GracePeriod::may_wait());
    }

    #[test]
    #[should_panic(expected = "while pinned")]
    fn waiting_while_pinned_panics() {
        let guard = epoch::pin();
        let grace = GracePeriod::start(&guard);
        grace.wait();
    }
}
