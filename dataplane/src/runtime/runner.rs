//! Running the cores: pinned threads, or stepped from one thread.
//!
//! [`Runtime::spawn`] gives the control core and each dataplane core a
//! thread of its own (pinned to a CPU with `core_affinity` when asked)
//! that polls until [`Runtime::shutdown`]; [`Stepper`] polls them all in
//! turn from the caller's thread, deterministically, for tests and
//! one-core machines. Both end with every core's `shutdown`, which frees
//! every mbuf it held; shut down with a linger (`shutdown_settling`), the
//! dataplane cores first poll on, the control core beside them, until
//! their flows settled or the linger ran out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::eal::Eal;
use crate::error::{Error, Result};
use crate::runtime::control_core::{ControlCore, ControlHandler};
use crate::runtime::dataplane_core::{DataplaneCore, FlowHandler};

/// Consecutive idle polls after which a core yields its CPU once. A core
/// with a CPU of its own loses nothing; on a machine with fewer CPUs than
/// cores (CI, laptops) the others get to run.
const IDLE_POLLS_BEFORE_YIELD: u32 = 256;

/// How long a control core on a thread of its own must find nothing to do
/// before it naps between polls: connection set-up is not the data path
/// (posted work goes to the dataplane cores' doorbells), and a busy-polling
/// control core takes a CPU from the dataplane cores and the application
/// wherever they share one.
const CONTROL_QUIET_AFTER: Duration = Duration::from_millis(20);

/// How long a quiet control core naps: about the most a connection request
/// then waits for its first segment to be read (the application's own
/// requests wake it at once).
const CONTROL_NAP: Duration = Duration::from_millis(1);

/// Where the cores' threads run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Wherever the OS schedules them.
    Unpinned,
    /// The control core on CPU `control`, dataplane core `i` on
    /// `dataplanes[i]` (CPU ids as `core_affinity` numbers them).
    Pinned {
        /// The control core's CPU.
        control: usize,
        /// Each dataplane core's CPU.
        dataplanes: Vec<usize>,
    },
}

impl Placement {
    /// Parses `CONTROL,DATAPLANE[,DATAPLANE...]` (e.g. `0,1`): the control
    /// core pinned to the first CPU and one dataplane core pinned to each
    /// of the others; the error says what was expected.
    pub fn parse_cpus(text: &str) -> std::result::Result<Placement, String> {
        let cpus: Option<Vec<usize>> = text.split(',').map(|n| n.trim().parse().ok()).collect();
        match cpus.as_deref() {
            Some([control, dataplanes @ ..]) if !dataplanes.is_empty() => Ok(Placement::Pinned {
                control: *control,
                dataplanes: dataplanes.to_vec(),
            }),
            _ => Err(format!(
                "expected CPU numbers CONTROL,DATAPLANE[,DATAPLANE...] (e.g. 0,1), not {text:?}"
            )),
        }
    }
}

/// The cores after they stopped, for their counters and state.
pub struct Stopped<C: ControlHandler, D: FlowHandler> {
    /// The control core.
    pub control: ControlCore<C>,
    /// The dataplane cores, in order.
    pub dataplanes: Vec<DataplaneCore<D>>,
    /// Mbufs dropped unsent at shutdown, over all cores.
    pub dropped_at_shutdown: usize,
}

/// Cores running on threads of their own.
pub struct Runtime<C: ControlHandler, D: FlowHandler> {
    stop_dataplanes: Arc<Stop>,
    stop_control: Arc<Stop>,
    control: JoinHandle<ControlCore<C>>,
    dataplanes: Vec<JoinHandle<DataplaneCore<D>>>,
}

/// When the threads of some cores stop polling: once asked, and the
/// core [`settled`](Poll::settled) or the deadline set before asking
/// passed.
#[derive(Default)]
struct Stop {
    asked: AtomicBool,
    settle_until: OnceLock<Instant>,
}

impl Stop {
    /// Asks the cores to stop, at once or, with `settle_until`, once
    /// settled.
    fn ask(&self, settle_until: Option<Instant>) {
        if let Some(deadline) = settle_until {
            let _ = self.settle_until.set(deadline);
        }
        self.asked.store(true, Ordering::Release);
    }

    /// Whether a core stops polling at `now`: asked to, and with no
    /// deadline, or past it, or `settled` (called only once asked).
    fn reached(&self, now: Instant, settled: impl FnOnce() -> bool) -> bool {
        self.asked.load(Ordering::Acquire)
            && self
                .settle_until
                .get()
                .is_none_or(|deadline| now >= *deadline || settled())
    }
}

/// Something a thread can poll.
trait Poll: Send + 'static {
    fn poll_once(&mut self, now: Instant) -> usize;

    /// Called after a poll that found nothing, the core having found
    /// nothing for `quiet`; whether it was woken by work meanwhile.
    fn rest(&mut self, quiet: Duration) -> bool;

    /// Whether it may stop without losing what it sent.
    fn settled(&self) -> bool {
        true
    }
}

impl<C: ControlHandler + 'static> Poll for ControlCore<C> {
    fn poll_once(&mut self, now: Instant) -> usize {
        self.poll(now)
    }

    fn rest(&mut self, quiet: Duration) -> bool {
        quiet >= CONTROL_QUIET_AFTER && self.nap(CONTROL_NAP)
    }
}

impl<D: FlowHandler + 'static> Poll for DataplaneCore<D> {
    fn poll_once(&mut self, now: Instant) -> usize {
        self.poll(now)
    }

    /// A dataplane core never naps: the frames it polls for cannot wake
    /// it.
    fn rest(&mut self, _quiet: Duration) -> bool {
        false
    }

    fn settled(&self) -> bool {
        self.is_settled()
    }
}

fn spawn_core<P: Poll>(
    eal: &'static Eal,
    name: String,
    mut core: P,
    cpu: Option<usize>,
    stop: Arc<Stop>,
) -> Result<JoinHandle<P>> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            if let Some(id) = cpu {
                core_affinity::set_for_current(core_affinity::CoreId { id });
            }
            let registered = eal.register_current_thread().is_ok();
            let mut idle = 0u32;
            let mut quiet_since = None;
            loop {
                let now = Instant::now();
                if stop.reached(now, || core.settled()) {
                    break;
                }
                if core.poll_once(now) > 0 {
                    idle = 0;
                    quiet_since = None;
                    continue;
                }
                let since = *quiet_since.get_or_insert(now);
                if core.rest(now - since) {
                    quiet_since = None;
                }
                idle += 1;
                if idle >= IDLE_POLLS_BEFORE_YIELD {
                    idle = 0;
                    std::thread::yield_now();
                }
            }
            if registered {
                eal.unregister_current_thread();
            }
            core
        })
        .map_err(|e| Error::InvalidArgument(format!("cannot start a core thread: {e}")))
}

impl<C, D> Runtime<C, D>
where
    C: ControlHandler<Flow = D::Flow> + 'static,
    D: FlowHandler + 'static,
{
    /// Starts one thread per core.
    pub fn spawn(
        eal: &'static Eal,
        control: ControlCore<C>,
        dataplanes: Vec<DataplaneCore<D>>,
        placement: &Placement,
    ) -> Result<Self> {
        let (control_cpu, dataplane_cpus) = match placement {
            Placement::Unpinned => (None, vec![None; dataplanes.len()]),
            Placement::Pinned {
                control,
                dataplanes: cpus,
            } => {
                if cpus.len() != dataplanes.len() {
                    return Err(Error::InvalidArgument(format!(
                        "{} CPUs for {} dataplane cores",
                        cpus.len(),
                        dataplanes.len()
                    )));
                }
                (Some(*control), cpus.iter().copied().map(Some).collect())
            }
        };
        let stop_dataplanes = Arc::new(Stop::default());
        let stop_control = Arc::new(Stop::default());
        let mut handles = Vec::with_capacity(dataplanes.len());
        for (index, (core, cpu)) in dataplanes.into_iter().zip(dataplane_cpus).enumerate() {
            let name = format!("uwarp-dp{index}");
            let stop = Arc::clone(&stop_dataplanes);
            handles.push(spawn_core(eal, name, core, cpu, stop)?);
        }
        let stop = Arc::clone(&stop_control);
        let control = spawn_core(eal, "uwarp-ctl".into(), control, control_cpu, stop)?;
        Ok(Runtime {
            stop_dataplanes,
            stop_control,
            control,
            dataplanes: handles,
        })
    }

    /// Stops every core, waits for its thread, and shuts it down: the
    /// connections still open are reset.
    pub fn shutdown(self) -> Stopped<C, D> {
        self.shutdown_settling(Duration::ZERO)
    }

    /// [`shutdown`](Self::shutdown), once the dataplane cores' flows
    /// [settled](FlowHandler::settled) (or the link went down), for at
    /// most `linger`: what they sent before is delivered, as a kernel
    /// delivers what an exited process's sockets sent. The control core
    /// polls until the dataplane cores stopped.
    pub fn shutdown_settling(self, linger: Duration) -> Stopped<C, D> {
        let settle_until = (!linger.is_zero()).then(|| Instant::now() + linger);
        self.stop_dataplanes.ask(settle_until);
        let dataplanes: Vec<_> = self
            .dataplanes
            .into_iter()
            .map(|h| h.join().expect("a dataplane core panicked"))
            .collect();
        self.stop_control.ask(None);
        let control = self.control.join().expect("the control core panicked");
        finish(control, dataplanes)
    }
}

/// The control core ends its flows, then the dataplane cores end theirs
/// and stop (they stop feeding the rings), then the control core stops
/// and empties the rings.
fn finish<C: ControlHandler, D: FlowHandler>(
    mut control: ControlCore<C>,
    mut dataplanes: Vec<DataplaneCore<D>>,
) -> Stopped<C, D> {
    control.end_flows(Instant::now());
    let mut dropped: usize = dataplanes.iter_mut().map(DataplaneCore::shutdown).sum();
    dropped += control.shutdown();
    Stopped {
        control,
        dataplanes,
        dropped_at_shutdown: dropped,
    }
}

/// Unless it has work ([`ControlCore::has_work`]: frames from the
/// dataplane cores, the application's requests), the control core of a
/// [`Stepper`] is polled once per this interval, for its timers, whether
/// the dataplane cores are busy or idle: connection set-up is not the
/// data path, and a control poll costs about as much as a dataplane
/// poll, which an idle step would otherwise spend between a frame's
/// arrival and its being read (an 8-octet Write's one-way latency fell
/// from 1.08-1.09 to 1.03-1.07 us on `uwarp-perf loopback`).
pub const CONTROL_POLL_INTERVAL: Duration = Duration::from_micros(20);

/// Every core polled in turn from the caller's thread.
pub struct Stepper<C: ControlHandler, D: FlowHandler> {
    /// The control core.
    pub control: ControlCore<C>,
    /// The dataplane cores.
    pub dataplanes: Vec<DataplaneCore<D>>,
    /// When the control core is next polled if the dataplane cores stay
    /// busy.
    next_control: Option<Instant>,
}

impl<C, D> Stepper<C, D>
where
    C: ControlHandler<Flow = D::Flow>,
    D: FlowHandler,
{
    /// Steps `control` and `dataplanes`.
    pub fn new(control: ControlCore<C>, dataplanes: Vec<DataplaneCore<D>>) -> Self {
        Stepper {
            control,
            dataplanes,
            next_control: None,
        }
    }

    /// Polls every dataplane core, then the control core, at `now`;
    /// returns the work done. A control core without work waits up to
    /// [`CONTROL_POLL_INTERVAL`] for its turn.
    pub fn step(&mut self, now: Instant) -> usize {
        let mut work: usize = self.dataplanes.iter_mut().map(|d| d.poll(now)).sum();
        let due = self.next_control.is_none_or(|next| now >= next);
        if due || self.control.has_work() {
            self.next_control = Some(now + CONTROL_POLL_INTERVAL);
            work += self.control.poll(now);
        }
        work
    }

    /// Shuts every core down.
    pub fn shutdown(self) -> Stopped<C, D> {
        finish(self.control, self.dataplanes)
    }

    /// [`Runtime::shutdown_settling`], stepping: steps every core until
    /// the dataplane cores' flows settled, for at most `linger`, then
    /// shuts them down.
    pub fn shutdown_settling(mut self, linger: Duration) -> Stopped<C, D> {
        let deadline = Instant::now() + linger;
        loop {
            let now = Instant::now();
            if now >= deadline || self.dataplanes.iter().all(DataplaneCore::is_settled) {
                break;
            }
            if self.step(now) == 0 {
                std::thread::yield_now();
            }
        }
        self.shutdown()
    }
}
