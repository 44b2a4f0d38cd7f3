//! A hashed timing wheel for a dataplane core that holds thousands of
//! connections, each with the timers of RFC 9293 section 3.8 and RFC 6298
//! section 5 behind one deadline ([`crate::tcp::Connection::poll_at`]).
//!
//! No RFC specifies the wheel itself; it is scheme 6 of Varghese and Lauck,
//! "Hashed and Hierarchical Timing Wheels" (SOSP 1987): a deadline falls in
//! the slot of its tick modulo the number of slots, and a slot holds
//! deadlines of any revolution, each entry keeping its own deadline so the
//! visit of its slot in an earlier revolution passes it by.

use crate::tcp::timers::time::{Duration, Instant};

/// Keys by deadline, in `slots` buckets of `tick` each.
///
/// [`TimerWheel::schedule`] costs O(1); [`TimerWheel::expire`] visits the
/// slots of the ticks since the previous call (all of them at most once)
/// and within each the entries still waiting. Slots keep their storage,
/// so neither allocates once the wheel has held its largest population.
///
/// The wheel is lazy: it never cancels or moves an entry. A caller
/// rescheduling a connection whose deadline changed simply schedules it
/// again, so a key may be present several times and come out of
/// [`TimerWheel::expire`] several times, each entry once, never before its
/// own deadline. A connection that comes out early for its current
/// deadline (an earlier entry of it) has nothing due: the caller compares
/// `poll_at()` with `now`, runs `on_timer` only when due, and schedules it
/// again at its `poll_at()`.
#[derive(Debug, Clone)]
pub struct TimerWheel<K> {
    tick: u64,
    slots: Vec<Slot<K>>,
    /// The first tick the next [`TimerWheel::expire`] visits: every entry
    /// lives in the slot of a tick at or after it.
    cursor: u64,
    /// Where the tick of `cursor` ends (microseconds) and its slot: a
    /// poll within the same tick, the usual case on a busy core, visits
    /// that slot with no division.
    cursor_end: u64,
    cursor_slot: usize,
    len: usize,
}

/// One bucket of the wheel: its entries and the earliest of their
/// deadlines, so that a visit before that deadline (the tick of `now`,
/// polled again and again; a slot holding later revolutions) costs one
/// comparison.
#[derive(Debug, Clone)]
struct Slot<K> {
    entries: Vec<(K, Instant)>,
    /// The earliest deadline in `entries` (`None` when empty).
    earliest: Option<Instant>,
}

impl<K: Copy> Slot<K> {
    fn push(&mut self, key: K, at: Instant) {
        self.entries.push((key, at));
        self.earliest = Some(self.earliest.map_or(at, |earliest| earliest.min(at)));
    }

    /// Hands the entries due at `now` to `due`; returns how many.
    fn expire(&mut self, now: Instant, due: &mut impl FnMut(K, Instant)) -> usize {
        if self.earliest.is_none_or(|earliest| earliest > now) {
            return 0;
        }
        let mut expired = 0;
        let mut earliest = None::<Instant>;
        self.entries.retain(|&(key, at)| {
            let is_due = at <= now;
            if is_due {
                due(key, at);
                expired += 1;
            } else {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
            !is_due
        });
        self.earliest = earliest;
        expired
    }
}

impl<K: Copy> TimerWheel<K> {
    /// A wheel of `slots` buckets of `tick` each: one revolution spans
    /// `tick × slots`; later deadlines wait in their slot for the
    /// revolutions to pass.
    ///
    /// # Panics
    ///
    /// If `tick` or `slots` is zero.
    pub fn new(tick: Duration, slots: usize) -> Self {
        assert!(tick.micros() > 0, "a timer wheel needs a non-zero tick");
        assert!(slots > 0, "a timer wheel needs at least one slot");
        TimerWheel {
            tick: tick.micros(),
            slots: (0..slots)
                .map(|_| Slot {
                    entries: Vec::new(),
                    earliest: None,
                })
                .collect(),
            cursor: 0,
            cursor_end: tick.micros(),
            cursor_slot: 0,
            len: 0,
        }
    }

    fn slot(&self, tick: u64) -> usize {
        (tick % self.slots.len() as u64) as usize
    }

    /// Adds `key` with deadline `at`; a deadline already past expires at
    /// the next [`TimerWheel::expire`].
    pub fn schedule(&mut self, key: K, at: Instant) {
        let tick = (at.micros() / self.tick).max(self.cursor);
        let slot = self.slot(tick);
        self.slots[slot].push(key, at);
        self.len += 1;
    }

    /// Removes every entry whose deadline is at or before `now` and hands
    /// it to `due` (in no particular order), each key with the deadline it
    /// was scheduled at: a caller that reschedules lazily tells its live
    /// entry from the ones it left behind by that deadline.
    pub fn expire(&mut self, now: Instant, mut due: impl FnMut(K, Instant)) {
        if now.micros() < self.cursor_end {
            self.len -= self.slots[self.cursor_slot].expire(now, &mut due);
            return;
        }
        let last = (now.micros() / self.tick).max(self.cursor);
        let visits = (last - self.cursor).saturating_add(1);
        let visits = visits.min(self.slots.len() as u64);
        for tick in last + 1 - visits..=last {
            let slot = self.slot(tick);
            self.len -= self.slots[slot].expire(now, &mut due);
        }
        // The tick of `now` may hold later deadlines: visit it again.
        self.cursor = last;
        self.cursor_end = last.saturating_add(1).saturating_mul(self.tick);
        self.cursor_slot = self.slot(last);
    }

    /// Entries scheduled and not yet expired (a key scheduled twice counts
    /// twice).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    fn wheel() -> TimerWheel<u32> {
        TimerWheel::new(Duration::from_micros(100), 8)
    }

    fn expired(wheel: &mut TimerWheel<u32>, now: u64) -> Vec<u32> {
        let mut keys = Vec::new();
        wheel.expire(Instant(now), |key, _| keys.push(key));
        keys.sort_unstable();
        keys
    }

    #[test]
    fn deadlines_expire_at_their_time_not_their_tick() {
        let mut w = wheel();
        w.schedule(1, Instant(150));
        w.schedule(2, Instant(199));
        w.schedule(3, Instant(200));
        assert_eq!(w.len(), 3);
        assert_eq!(expired(&mut w, 149), Vec::<u32>::new());
        assert_eq!(expired(&mut w, 150), vec![1]);
        assert_eq!(expired(&mut w, 199), vec![2]);
        assert_eq!(expired(&mut w, 200), vec![3]);
        assert!(w.is_empty());
    }

    #[test]
    fn later_revolutions_wait_in_their_slot() {
        let mut w = wheel();
        // One revolution is 800 us; 5000 and 5050 share slot 2 with 250.
        w.schedule(1, Instant(5050));
        w.schedule(2, Instant(250));
        w.schedule(3, Instant(5000));
        assert_eq!(expired(&mut w, 300), vec![2]);
        assert_eq!(expired(&mut w, 4999), Vec::<u32>::new());
        assert_eq!(w.len(), 2);
        assert_eq!(expired(&mut w, 5000), vec![3]);
        assert_eq!(expired(&mut w, 1_000_000), vec![1]);
    }

    #[test]
    fn past_deadlines_and_repeated_keys() {
        let mut w = wheel();
        assert_eq!(expired(&mut w, 10_000), Vec::<u32>::new());
        w.schedule(7, Instant(20));
        w.schedule(7, Instant(10_050));
        w.schedule(7, Instant(10_950));
        assert_eq!(expired(&mut w, 10_000), vec![7], "the past is due at once");
        assert_eq!(expired(&mut w, 10_100), vec![7]);
        assert_eq!(expired(&mut w, 11_000), vec![7], "each entry once");
        assert!(w.is_empty());
        // Time going backwards expires nothing early.
        w.schedule(8, Instant(11_500));
        assert_eq!(expired(&mut w, 9_000), Vec::<u32>::new());
        assert_eq!(expired(&mut w, 11_500), vec![8]);
    }

    #[test]
    fn no_allocation_after_warm_up() {
        let mut w = wheel();
        let mut out = Vec::new();
        let mut warm = None;
        // Every round spreads the same deadlines over the same slots, one
        // revolution (800 us) apart.
        for round in 0..4u64 {
            for key in 0..64 {
                w.schedule(key, Instant(round * 8_000 + u64::from(key) * 37));
            }
            out.clear();
            w.expire(Instant(round * 8_000 + 7_999), |key, _| out.push(key));
            assert_eq!(out.len(), 64);
            let capacities: Vec<usize> =
                w.slots.iter().map(|slot| slot.entries.capacity()).collect();
            let now = (capacities, out.capacity());
            assert_eq!(*warm.get_or_insert_with(|| now.clone()), now);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Schedule the next key this far from now (negative: the past).
        Schedule(i64),
        /// Advance time by this much, then expire.
        Expire(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (-500i64..20_000).prop_map(Op::Schedule),
            1 => (0u64..3_000).prop_map(Op::Expire),
        ]
    }

    proptest! {
        /// The wheel expires exactly what a binary heap of deadlines pops.
        #[test]
        fn matches_a_binary_heap(
            tick in 1u64..300,
            slots in 1usize..20,
            start in 0u64..1_000_000,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut w = TimerWheel::new(Duration(tick), slots);
            let mut model = BinaryHeap::new();
            let mut now = start;
            let mut next_key = 0u32;
            let mut out = Vec::new();
            for op in ops.into_iter().chain([Op::Expire(1 << 40)]) {
                match op {
                    Op::Schedule(offset) => {
                        let at = Instant(now.saturating_add_signed(offset));
                        w.schedule(next_key, at);
                        model.push(Reverse((at, next_key)));
                        next_key += 1;
                    }
                    Op::Expire(by) => {
                        now += by;
                        out.clear();
                        w.expire(Instant(now), |key, at| out.push((key, at)));
                        out.sort_unstable_by_key(|&(key, _)| key);
                        let mut due = Vec::new();
                        while model.peek().is_some_and(|Reverse((at, _))| at.micros() <= now) {
                            due.extend(model.pop().map(|Reverse((at, key))| (key, at)));
                        }
                        due.sort_unstable_by_key(|&(key, _)| key);
                        prop_assert_eq!(&out, &due);
                    }
                }
                prop_assert_eq!(w.len(), model.len());
            }
            prop_assert!(w.is_empty());
        }
    }
}
