//! Impairment: seeded loss, reordering, duplication and delay of the
//! frames a port receives and sends, for testing TCP against a bad link
//! where the kernel has no netem.
//!
//! - [`ImpairConfig`]: one direction's impairment (`off` by default),
//!   parsed from text such as `loss=0.01,reorder=0.01,dup=0.001,delay=200us,seed=7`.
//! - [`Impairment`]: both directions of a port.
//! - [`ImpairSwitch`]: a port's current [`Impairment`], shared by its
//!   cores and switchable from any thread while they run.
//! - [`Impairer`]: the logic, generic over the item (an mbuf in the
//!   runtime, anything in tests).
//!
//! An item goes through the stages in turn: loss drops it; duplication
//! adds a copy after it (each goes on through the stages on its own);
//! reordering holds it back until 1 to [`REORDER_MAX_GAP`] later items
//! have passed, or [`REORDER_HOLD`] has elapsed, whichever comes first,
//! so a lone held item is never held for long; delay keeps every item
//! in a first-in first-out line until `now + delay`, so a constant delay
//! keeps the order. The runtime applies the receive side to each burst a
//! dataplane core receives, before classification, and the transmit side
//! in each [`TxBatch`](crate::runtime::TxBatch) on the way to the device.
//! Each core draws from its own random streams (from the seed, its queue
//! and the direction), so a run is deterministic per seed. Time is the
//! `now` of the core's poll (simulated time in a stepped test), except on
//! the control core's own transmit queue, which goes by the clock.
//!
//! When a direction is off and holds nothing, what it costs is one branch
//! per burst and one atomic load per poll.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::mbuf::Mbuf;
use crate::mempool::Mempool;

/// The longest a reordered item is held back, when too few items follow
/// it to release it.
pub const REORDER_HOLD: Duration = Duration::from_millis(1);

/// A reordered item is released after 1 to this many later items passed.
pub const REORDER_MAX_GAP: u32 = 3;

/// How many items the reordering stage holds at once; beyond that items
/// pass in order.
pub const REORDER_CAPACITY: usize = 8;

/// How many items the delay line holds; more are dropped (counted as lost).
pub const DELAY_CAPACITY: usize = 1024;

/// One direction's impairment. Probabilities are per item, 0.0 for off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ImpairConfig {
    /// Probability that an item is lost.
    pub loss: f64,
    /// Probability that an item is held back behind later ones.
    pub reorder: f64,
    /// Probability that an item is sent twice.
    pub duplicate: f64,
    /// How long every item is held (0: not delayed).
    pub delay: Duration,
    /// The seed of the random choices.
    pub seed: u64,
}

impl ImpairConfig {
    /// Whether anything is impaired (the seed alone impairs nothing).
    pub fn is_active(&self) -> bool {
        self.loss > 0.0 || self.reorder > 0.0 || self.duplicate > 0.0 || !self.delay.is_zero()
    }
}

impl fmt::Display for ImpairConfig {
    /// `off`, or the `key=value` list [`FromStr`] parses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_active() {
            return f.write_str("off");
        }
        write!(
            f,
            "loss={},reorder={},dup={},delay=",
            self.loss, self.reorder, self.duplicate
        )?;
        if self.delay.subsec_nanos() % 1000 == 0 {
            write!(f, "{}us", self.delay.as_micros())?;
        } else {
            write!(f, "{}ns", self.delay.as_nanos())?;
        }
        write!(f, ",seed={}", self.seed)
    }
}

impl FromStr for ImpairConfig {
    type Err = Error;

    /// Parses `off` or comma-separated `key=value` pairs: `loss`,
    /// `reorder` and `dup` (or `duplicate`) take a probability in [0, 1],
    /// `delay` a whole number with a unit (`ns`, `us`, `ms` or `s`), `seed`
    /// an unsigned integer. Keys not given stay off (seed 0).
    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        let bad = |what: String| Error::InvalidArgument(format!("impairment {text:?}: {what}"));
        if text == "off" {
            return Ok(ImpairConfig::default());
        }
        if text.is_empty() {
            return Err(bad("empty (give `off` or key=value pairs)".into()));
        }
        let mut config = ImpairConfig::default();
        for pair in text.split(',').map(str::trim) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("{pair:?} is not key=value")))?;
            let (key, value) = (key.trim(), value.trim());
            let probability = || match value.parse::<f64>() {
                Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
                _ => Err(bad(format!(
                    "{key}={value}: a probability must be a number in [0, 1]"
                ))),
            };
            match key {
                "loss" => config.loss = probability()?,
                "reorder" => config.reorder = probability()?,
                "dup" | "duplicate" => config.duplicate = probability()?,
                "delay" => {
                    config.delay = parse_duration(value).ok_or_else(|| {
                        bad(format!(
                            "delay={value}: give a whole number and a unit (ns, us, ms or s), \
                             e.g. 200us"
                        ))
                    })?;
                }
                "seed" => {
                    config.seed = value.parse().map_err(|_| {
                        bad(format!(
                            "seed={value}: a seed is an unsigned 64-bit integer"
                        ))
                    })?;
                }
                _ => {
                    return Err(bad(format!(
                        "unknown key {key:?} (loss, reorder, dup, delay, seed)"
                    )))
                }
            }
        }
        Ok(config)
    }
}

/// `200us`, `5ms`, `1s`, `300ns`: a whole number and a unit.
fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
    let number = number.parse().ok()?;
    match unit.trim() {
        "ns" => Some(Duration::from_nanos(number)),
        "us" => Some(Duration::from_micros(number)),
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        _ => None,
    }
}

/// Both directions of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Applied to received frames, before classification.
    pub rx: ImpairConfig,
    /// Applied to frames on their way to the device.
    pub tx: ImpairConfig,
}

impl Impairment {
    /// Whether either direction impairs anything.
    pub fn is_active(&self) -> bool {
        self.rx.is_active() || self.tx.is_active()
    }
}

/// What an [`Impairer`] did, counted while it was engaged (active, or
/// releasing what it held): items in plus copies made equal items passed
/// plus items dropped plus items still held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairCounters {
    /// Items handed on, copies included.
    pub passed: u64,
    /// Items lost: by chance, or because the delay line was full.
    pub dropped: u64,
    /// Copies made.
    pub duplicated: u64,
    /// Copies skipped because none could be made (no free mbuf).
    pub duplicate_failed: u64,
    /// Items held back to be reordered.
    pub reordered: u64,
    /// Items put in the delay line.
    pub delayed: u64,
}

/// SplitMix64's output function: a bijective mix of all 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: small, fast, and good enough to draw impairments.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    /// The generator of `stream` under `seed`: distinct streams of one
    /// seed are unrelated.
    fn new(seed: u64, stream: u64) -> Self {
        Rng(mix(seed ^ mix(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// True with probability `p`; draws nothing when `p` is 0.
    fn chance(&mut self, p: f64) -> bool {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        p > 0.0 && (self.next() >> 11) as f64 * SCALE < p
    }

    /// A number in `1..=n`.
    fn one_to(&mut self, n: u32) -> u32 {
        1 + (self.next() % u64::from(n)) as u32
    }
}

/// An item the reordering stage holds back.
#[derive(Debug)]
struct Held<T> {
    item: T,
    /// Later items still to pass before this one is released.
    after: u32,
    /// When it is released even if they do not.
    until: Instant,
}

/// One direction's impairment of a stream of items.
#[derive(Debug)]
pub struct Impairer<T> {
    config: ImpairConfig,
    rng: Rng,
    /// Active, or holding items: what [`apply`](Self::apply) has to do.
    engaged: bool,
    reordering: Vec<Held<T>>,
    delayed: VecDeque<(Instant, T)>,
    /// The items being impaired, kept for its capacity.
    input: Vec<T>,
    counters: ImpairCounters,
}

impl<T> Impairer<T> {
    /// Impairs with `config`, drawing from random stream `stream` of its
    /// seed.
    pub fn new(config: ImpairConfig, stream: u64) -> Self {
        Impairer {
            config,
            rng: Rng::new(config.seed, stream),
            engaged: config.is_active(),
            reordering: Vec::with_capacity(REORDER_CAPACITY),
            delayed: VecDeque::new(),
            input: Vec::new(),
            counters: ImpairCounters::default(),
        }
    }

    /// Switches to `config` (and stream `stream` of its seed, from its
    /// start). Items held stay held until released as before, the
    /// counters go on; switched off, the next [`apply`](Self::apply)
    /// releases everything held.
    pub fn configure(&mut self, config: ImpairConfig, stream: u64) {
        self.config = config;
        self.rng = Rng::new(config.seed, stream);
        self.engaged = config.is_active() || self.held() > 0;
    }

    /// The configuration in force.
    pub fn config(&self) -> &ImpairConfig {
        &self.config
    }

    /// Whether [`apply`](Self::apply) has anything to do: false when off
    /// and holding nothing.
    pub fn is_engaged(&self) -> bool {
        self.engaged
    }

    /// Items held back (reordered or delayed).
    pub fn held(&self) -> usize {
        self.reordering.len() + self.delayed.len()
    }

    /// The counters so far.
    pub fn counters(&self) -> &ImpairCounters {
        &self.counters
    }

    /// Impairs `items[from..]` at `now`: on return `items[..from]` is
    /// untouched, followed by what passes now, in order: held items whose
    /// time came and the new items not held or lost. `duplicate` makes the
    /// copy of an item to duplicate (`None`: the copy is skipped and
    /// counted). Call it at every poll while [`is_engaged`](Self::is_engaged),
    /// even with no new items, so held items are released on time.
    pub fn apply<F>(&mut self, now: Instant, items: &mut Vec<T>, from: usize, mut duplicate: F)
    where
        F: FnMut(&T) -> Option<T>,
    {
        if !self.engaged {
            return;
        }
        let mut input = std::mem::take(&mut self.input);
        input.extend(items.drain(from..));
        if self.config.is_active() {
            self.release_reordered(now, items, |held| held.until <= now);
            for item in input.drain(..) {
                self.admit(now, item, items, &mut duplicate);
            }
            self.release_delayed(now, items);
        } else {
            self.release_all(items);
            self.counters.passed += input.len() as u64;
            items.append(&mut input);
        }
        self.input = input;
        self.engaged = self.config.is_active() || self.held() > 0;
    }

    /// Drops everything held (at shutdown); returns how many items.
    pub fn discard(&mut self) -> usize {
        let n = self.held();
        self.reordering.clear();
        self.delayed.clear();
        self.engaged = self.config.is_active();
        n
    }

    /// One new item: loss, then duplication, then the later stages for
    /// the item and its copy.
    fn admit<F>(&mut self, now: Instant, item: T, out: &mut Vec<T>, duplicate: &mut F)
    where
        F: FnMut(&T) -> Option<T>,
    {
        if self.rng.chance(self.config.loss) {
            self.counters.dropped += 1;
            return;
        }
        let copy = if self.rng.chance(self.config.duplicate) {
            let copy = duplicate(&item);
            match copy {
                Some(_) => self.counters.duplicated += 1,
                None => self.counters.duplicate_failed += 1,
            }
            copy
        } else {
            None
        };
        self.reorder(now, item, out);
        if let Some(copy) = copy {
            self.reorder(now, copy, out);
        }
    }

    /// The reordering stage: holds `item` back, or passes it on and
    /// releases the held items it was the last to wait for.
    fn reorder(&mut self, now: Instant, item: T, out: &mut Vec<T>) {
        if self.reordering.len() < REORDER_CAPACITY && self.rng.chance(self.config.reorder) {
            self.reordering.push(Held {
                item,
                after: self.rng.one_to(REORDER_MAX_GAP),
                until: now + REORDER_HOLD,
            });
            self.counters.reordered += 1;
            return;
        }
        self.delay(now, item, out);
        self.release_reordered(now, out, |held| {
            held.after -= 1;
            held.after == 0
        });
    }

    /// Passes on, in the order they were held, the held items for which
    /// `due` (called once on each) says so.
    fn release_reordered(
        &mut self,
        now: Instant,
        out: &mut Vec<T>,
        mut due: impl FnMut(&mut Held<T>) -> bool,
    ) {
        let mut i = 0;
        while i < self.reordering.len() {
            if due(&mut self.reordering[i]) {
                let held = self.reordering.remove(i);
                self.delay(now, held.item, out);
            } else {
                i += 1;
            }
        }
    }

    /// The delay stage: `item` waits in line until `now + delay`, or
    /// passes at once when there is no delay and no line.
    fn delay(&mut self, now: Instant, item: T, out: &mut Vec<T>) {
        let delay = self.config.delay;
        if delay.is_zero() && self.delayed.is_empty() {
            self.counters.passed += 1;
            out.push(item);
        } else if self.delayed.len() >= DELAY_CAPACITY {
            self.counters.dropped += 1;
        } else {
            self.counters.delayed += u64::from(!delay.is_zero());
            self.delayed.push_back((now + delay, item));
        }
    }

    /// Passes on the items at the head of the delay line whose time came.
    fn release_delayed(&mut self, now: Instant, out: &mut Vec<T>) {
        while self.delayed.front().is_some_and(|(until, _)| *until <= now) {
            let (_, item) = self.delayed.pop_front().expect("a front item");
            self.counters.passed += 1;
            out.push(item);
        }
    }

    /// Passes on everything held: the delay line, then the reordered.
    fn release_all(&mut self, out: &mut Vec<T>) {
        self.counters.passed += self.held() as u64;
        out.extend(self.delayed.drain(..).map(|(_, item)| item));
        out.extend(self.reordering.drain(..).map(|held| held.item));
    }
}

/// A port's impairment, shared by its cores. Setting it is rare and
/// takes a lock; the cores only load its generation, once per poll, and
/// read it after a change.
#[derive(Debug, Default)]
pub struct ImpairSwitch {
    generation: AtomicU64,
    current: Mutex<Impairment>,
}

impl ImpairSwitch {
    /// Switches the port to `impairment`; each core takes it up at its
    /// next poll.
    pub fn set(&self, impairment: Impairment) {
        let mut current = self.lock();
        *current = impairment;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The impairment in force.
    pub fn get(&self) -> Impairment {
        *self.lock()
    }

    /// How many times it was set.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The impairment and its generation, read together.
    fn snapshot(&self) -> (u64, Impairment) {
        let current = self.lock();
        (self.generation.load(Ordering::Relaxed), *current)
    }

    fn lock(&self) -> MutexGuard<'_, Impairment> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Which way the frames of a [`Stage`] go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Received.
    Rx,
    /// Sent.
    Tx,
}

/// One direction of one queue: an [`Impairer`] following an
/// [`ImpairSwitch`].
#[derive(Debug)]
pub(crate) struct Stage<T> {
    switch: Arc<ImpairSwitch>,
    seen: u64,
    /// The random stream, from the queue and the direction.
    stream: u64,
    direction: Direction,
    /// The impairer, configured from the switch.
    pub(crate) impairer: Impairer<T>,
}

impl<T> Stage<T> {
    /// The `direction` side of queue `queue`, following `switch`.
    pub(crate) fn new(switch: Arc<ImpairSwitch>, direction: Direction, queue: u16) -> Self {
        let mut stage = Stage {
            switch,
            seen: 0,
            stream: (u64::from(queue) << 1) | u64::from(direction == Direction::Tx),
            direction,
            impairer: Impairer::new(ImpairConfig::default(), 0),
        };
        stage.sync();
        stage
    }

    /// Follows `switch` from now on.
    pub(crate) fn attach(&mut self, switch: Arc<ImpairSwitch>) {
        self.switch = switch;
        self.sync();
    }

    /// The switch followed.
    pub(crate) fn switch(&self) -> &Arc<ImpairSwitch> {
        &self.switch
    }

    /// Takes up the switch's setting if it changed: one atomic load when
    /// it did not.
    pub(crate) fn refresh(&mut self) {
        if self.switch.generation() != self.seen {
            self.sync();
        }
    }

    fn sync(&mut self) {
        let (generation, impairment) = self.switch.snapshot();
        self.seen = generation;
        let config = match self.direction {
            Direction::Rx => impairment.rx,
            Direction::Tx => impairment.tx,
        };
        self.impairer.configure(config, self.stream);
    }
}

/// A copy of `mbuf` from `pool`, segment by segment, with its transmit
/// offload requests; `None` when the pool has too few free mbufs or a
/// segment does not fit one.
pub(crate) fn copy_mbuf(pool: &Mempool, mbuf: &Mbuf) -> Option<Mbuf> {
    let mut segments = mbuf.segments();
    let mut copy = Mbuf::from_slice(pool, segments.next()?).ok()?;
    for segment in segments {
        copy.chain(Mbuf::from_slice(pool, segment).ok()?).ok()?;
    }
    copy.copy_offloads_from(mbuf);
    Some(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> ImpairConfig {
        text.parse().expect("a valid impairment")
    }

    /// Feeds `0..n` in bursts of 32, one burst per millisecond, then
    /// polls until nothing is held; returns what came out.
    fn run(impairer: &mut Impairer<u32>, n: u32) -> Vec<u32> {
        let start = Instant::now();
        let mut out = Vec::new();
        let mut burst = Vec::new();
        let mut tick = 0;
        let mut next = 0;
        while next < n || impairer.held() > 0 {
            let now = start + Duration::from_millis(tick);
            burst.extend(next..n.min(next + 32));
            next = n.min(next + 32);
            impairer.apply(now, &mut burst, 0, |&x| Some(x));
            out.append(&mut burst);
            tick += 1;
        }
        out
    }

    #[test]
    fn the_same_seed_gives_the_same_run_and_another_seed_another() {
        let text = "loss=0.05,reorder=0.05,dup=0.05,delay=2ms,seed=";
        let outcome = |seed: &str, stream| {
            let mut impairer = Impairer::new(config(&format!("{text}{seed}")), stream);
            (run(&mut impairer, 10_000), *impairer.counters())
        };
        assert_eq!(outcome("7", 0), outcome("7", 0));
        assert_ne!(outcome("7", 0).0, outcome("8", 0).0);
        assert_ne!(outcome("7", 0).0, outcome("7", 1).0, "streams differ");
    }

    #[test]
    fn loss_drops_at_its_rate() {
        let mut impairer = Impairer::new(config("loss=0.1,seed=1"), 0);
        let out = run(&mut impairer, 100_000);
        // 10,000 expected, standard deviation about 95.
        let dropped = impairer.counters().dropped;
        assert!((9_500..=10_500).contains(&dropped), "{dropped}");
        assert_eq!(out.len() as u64, 100_000 - dropped);
        assert!(out.windows(2).all(|w| w[0] < w[1]), "loss keeps the order");
        assert_eq!(impairer.counters().passed, out.len() as u64);
    }

    #[test]
    fn duplication_copies_at_its_rate_and_counts_failed_copies() {
        let mut impairer = Impairer::new(config("dup=0.25,seed=2"), 0);
        let out = run(&mut impairer, 100_000);
        // 25,000 expected, standard deviation about 137.
        let duplicated = impairer.counters().duplicated;
        assert!((24_300..=25_700).contains(&duplicated), "{duplicated}");
        assert_eq!(out.len() as u64, 100_000 + duplicated);
        assert!(
            out.windows(2).all(|w| w[0] <= w[1]),
            "a copy follows its item"
        );

        let mut impairer = Impairer::new(config("dup=1,seed=2"), 0);
        let mut items = vec![1, 2, 3];
        impairer.apply(Instant::now(), &mut items, 0, |_| None);
        assert_eq!(items, [1, 2, 3]);
        assert_eq!(impairer.counters().duplicate_failed, 3);
        assert_eq!(impairer.counters().duplicated, 0);
    }

    #[test]
    fn reordering_changes_the_order_but_never_loses_or_invents() {
        let mut impairer = Impairer::new(config("reorder=0.1,seed=3"), 0);
        let out = run(&mut impairer, 10_000);
        assert_ne!(out, (0..10_000).collect::<Vec<_>>(), "the order changed");
        let mut sorted = out.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10_000).collect::<Vec<_>>());
        let counters = impairer.counters();
        assert!(counters.reordered > 500, "{counters:?}");
        assert_eq!(counters.passed, 10_000);
        // Every item is at most a few places (and one burst) late.
        let late = out
            .iter()
            .enumerate()
            .map(|(i, &x)| i as i64 - i64::from(x));
        assert!(late.max().unwrap() <= 32 + i64::from(REORDER_MAX_GAP));
    }

    #[test]
    fn a_lone_reordered_item_is_released_after_the_time_bound() {
        let mut impairer = Impairer::new(config("reorder=1,seed=4"), 0);
        let t0 = Instant::now();
        let mut items = vec![42];
        impairer.apply(t0, &mut items, 0, |&x| Some(x));
        assert!(items.is_empty());
        assert_eq!(impairer.held(), 1);
        impairer.apply(t0 + REORDER_HOLD / 2, &mut items, 0, |&x| Some(x));
        assert!(items.is_empty(), "still held");
        impairer.apply(t0 + REORDER_HOLD, &mut items, 0, |&x| Some(x));
        assert_eq!(items, [42]);
        assert_eq!(impairer.held(), 0);
    }

    #[test]
    fn delay_holds_until_the_deadline_in_order() {
        let mut impairer = Impairer::new(config("delay=5ms"), 0);
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut at = |now: Instant, mut items: Vec<u32>| {
            impairer.apply(now, &mut items, 0, |&x| Some(x));
            items
        };
        assert_eq!(at(t0, vec![1, 2]), []);
        assert_eq!(at(t0 + ms, vec![3]), []);
        let just_before = t0 + 5 * ms - Duration::from_nanos(1);
        assert_eq!(at(just_before, vec![]), [], "held until the deadline");
        assert_eq!(at(t0 + 5 * ms, vec![4]), [1, 2]);
        assert_eq!(at(t0 + 6 * ms, vec![]), [3]);
        assert_eq!(at(t0 + 10 * ms, vec![]), [4]);
        assert_eq!(impairer.counters().delayed, 4);
        assert_eq!(impairer.held(), 0);
    }

    #[test]
    fn apply_leaves_the_items_before_from_alone() {
        let mut impairer = Impairer::new(config("delay=1ms"), 0);
        let t0 = Instant::now();
        let mut items = vec![1, 2, 3];
        impairer.apply(t0, &mut items, 1, |&x| Some(x));
        assert_eq!(items, [1]);
        impairer.apply(t0 + Duration::from_millis(1), &mut items, 1, |&x| Some(x));
        assert_eq!(items, [1, 2, 3]);
    }

    #[test]
    fn the_delay_line_is_bounded_and_overflow_is_loss() {
        let mut impairer = Impairer::new(config("delay=1s"), 0);
        let t0 = Instant::now();
        let mut items: Vec<usize> = (0..DELAY_CAPACITY + 10).collect();
        impairer.apply(t0, &mut items, 0, |&x| Some(x));
        assert!(items.is_empty());
        assert_eq!(impairer.held(), DELAY_CAPACITY);
        assert_eq!(impairer.counters().dropped, 10);
        assert_eq!(impairer.discard(), DELAY_CAPACITY);
        assert_eq!(impairer.held(), 0);
    }

    #[test]
    fn switching_off_releases_everything_held_in_order() {
        let mut impairer = Impairer::new(config("delay=1s"), 0);
        let t0 = Instant::now();
        let mut items = vec![1, 2, 3];
        impairer.apply(t0, &mut items, 0, |&x| Some(x));
        assert!(impairer.is_engaged());
        impairer.configure(ImpairConfig::default(), 0);
        assert!(impairer.is_engaged(), "it still holds items");
        items.push(4);
        impairer.apply(t0, &mut items, 0, |&x| Some(x));
        assert_eq!(items, [1, 2, 3, 4]);
        assert!(!impairer.is_engaged());
        items.push(5);
        impairer.apply(t0, &mut items, 0, |&x| Some(x));
        assert_eq!(items, [1, 2, 3, 4, 5]);
        assert_eq!(impairer.counters().passed, 4, "off, nothing is counted");
    }

    #[test]
    fn off_draws_nothing_and_passes_everything() {
        let mut impairer = Impairer::new(ImpairConfig::default(), 0);
        assert!(!impairer.is_engaged());
        let mut items = vec![1, 2, 3];
        impairer.apply(Instant::now(), &mut items, 0, |_| unreachable!("no copies"));
        assert_eq!(items, [1, 2, 3]);
        assert_eq!(*impairer.counters(), ImpairCounters::default());
    }

    #[test]
    fn a_stage_follows_its_switch() {
        let switch = Arc::new(ImpairSwitch::default());
        let mut rx = Stage::<u32>::new(Arc::clone(&switch), Direction::Rx, 0);
        let mut tx = Stage::<u32>::new(Arc::clone(&switch), Direction::Tx, 0);
        assert!(!rx.impairer.is_engaged() && !tx.impairer.is_engaged());
        let impairment = Impairment {
            rx: config("loss=1"),
            ..Impairment::default()
        };
        switch.set(impairment);
        assert_eq!(switch.get(), impairment);
        assert_eq!(switch.generation(), 1);
        rx.refresh();
        tx.refresh();
        assert!(rx.impairer.is_engaged() && !tx.impairer.is_engaged());
        assert_eq!(rx.impairer.config().loss, 1.0);
        let mut items = vec![1];
        rx.impairer
            .apply(Instant::now(), &mut items, 0, |&x| Some(x));
        assert!(items.is_empty(), "lost");

        let other = Arc::new(ImpairSwitch::default());
        rx.attach(Arc::clone(&other));
        assert!(Arc::ptr_eq(rx.switch(), &other));
        assert!(!rx.impairer.is_engaged(), "the new switch is off");
    }

    #[test]
    fn text_parses_into_a_config_and_back() {
        let parsed = config(" loss=0.01, reorder=0.02 ,dup=0.001,delay=200us,seed=7 ");
        assert_eq!(
            parsed,
            ImpairConfig {
                loss: 0.01,
                reorder: 0.02,
                duplicate: 0.001,
                delay: Duration::from_micros(200),
                seed: 7,
            }
        );
        assert_eq!(config(&parsed.to_string()), parsed);
        assert_eq!(config("off"), ImpairConfig::default());
        assert_eq!(ImpairConfig::default().to_string(), "off");
        assert_eq!(config("duplicate=1").duplicate, 1.0);
        assert_eq!(config("delay=3ms").delay, Duration::from_millis(3));
        assert_eq!(config("delay=2s").delay, Duration::from_secs(2));
        assert_eq!(config("delay=1500ns").delay, Duration::from_nanos(1500));
        assert_eq!(
            config(&config("delay=1500ns").to_string()).delay.as_nanos(),
            1500
        );
        assert!(!config("seed=9").is_active());
    }

    #[test]
    fn bad_text_is_refused_naming_what_is_wrong() {
        for (text, names) in [
            ("", "empty"),
            ("loss", "\"loss\" is not key=value"),
            ("loss=1.5", "loss=1.5"),
            ("loss=-0.1", "loss=-0.1"),
            ("reorder=NaN", "reorder=NaN"),
            ("dup=often", "dup=often"),
            ("delay=200", "delay=200"),
            ("delay=5min", "delay=5min"),
            ("delay=-1ms", "delay=-1ms"),
            ("seed=-1", "seed=-1"),
            ("jitter=1ms", "unknown key \"jitter\""),
            ("loss=0.1,,dup=0.1", "\"\" is not key=value"),
        ] {
            let error = text.parse::<ImpairConfig>().expect_err(text).to_string();
            assert!(error.contains(names), "{text:?}: {error}");
        }
    }
}
