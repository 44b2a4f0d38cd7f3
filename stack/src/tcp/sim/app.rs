//! The applications at both ends: each writes a patterned stream (as
//! records or as byte stream), reads what arrives, and checks every octet
//! it is handed, noticing any handed over twice.

use super::rng::SimRng;
use super::scenario::Scenario;
use crate::tcp::connection::{Connection, Event};
use crate::tcp::receive::ranges::RangeSet;
use crate::tcp::receive::receiver::{Consumer, Disposition};
use crate::tcp::timers::time::Instant;
use std::collections::BTreeSet;

/// The octet at `pos` of the stream sent by side `side`.
pub fn pattern(side: u8, pos: u64) -> u8 {
    let x = pos.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(side) << 56);
    (x >> 40) as u8 ^ pos as u8
}

/// A consumer that checks every octet it is offered, places some of them,
/// and notices any octet offered twice.
#[derive(Debug)]
pub(super) struct Checker {
    pub(super) side: u8,
    pub(super) consume: f64,
    pub(super) rng: SimRng,
    pub(super) offered: RangeSet,
    pub(super) covered: RangeSet,
    pub(super) duplicates: u64,
    pub(super) corrupt: u64,
    pub(super) left_edge: u64,
}

impl Checker {
    pub(super) fn new(side: u8, consume: f64, seed: u64) -> Self {
        Checker {
            side,
            consume,
            rng: SimRng::new(seed),
            offered: RangeSet::new(usize::MAX),
            covered: RangeSet::new(usize::MAX),
            duplicates: 0,
            corrupt: 0,
            left_edge: 0,
        }
    }

    pub(super) fn check(&mut self, pos: u64, data: &[u8]) {
        let wrong = data
            .iter()
            .zip(pos..)
            .filter(|(octet, at)| **octet != pattern(self.side, *at))
            .count();
        self.corrupt += wrong as u64;
    }
}

impl Consumer for Checker {
    fn on_data(&mut self, pos: u64, data: &[u8], _in_order: bool) -> Disposition {
        let range = pos..pos + data.len() as u64;
        let mut fresh = 0;
        let mut cursor = range.start;
        while let Some(gap) = self.offered.next_gap(cursor, range.end) {
            fresh += gap.end - gap.start;
            cursor = gap.end;
        }
        self.duplicates += data.len() as u64 - fresh;
        self.offered.insert(range.clone());
        self.check(pos, data);
        if self.rng.chance(self.consume) {
            self.covered.insert(range);
            Disposition::Consumed
        } else {
            Disposition::Keep
        }
    }

    fn on_left_edge(&mut self, left_edge: u64) {
        if left_edge < self.left_edge {
            self.corrupt += 1;
        }
        self.left_edge = left_edge;
    }
}

/// One side's application.
#[derive(Debug)]
pub(super) struct App {
    pub(super) side: u8,
    pub(super) total: u64,
    pub(super) pushed: u64,
    pub(super) records: bool,
    pub(super) record_starts: BTreeSet<u64>,
    pub(super) closed: bool,
    pub(super) events: Vec<Event>,
    pub(super) checker: Checker,
    pub(super) next_read: Instant,
}

impl App {
    pub(super) fn new(side: u8, total: u64, scenario: &Scenario) -> Self {
        App {
            side,
            total,
            pushed: 0,
            records: scenario.records,
            record_starts: BTreeSet::new(),
            closed: false,
            events: Vec::new(),
            checker: Checker::new(side ^ 1, scenario.consume, scenario.seed ^ u64::from(side)),
            next_read: Instant(0),
        }
    }

    /// Queues as much of the stream as fits, then closes.
    pub(super) fn write(&mut self, conn: &mut Connection, rng: &mut SimRng) {
        while self.pushed < self.total {
            let left = self.total - self.pushed;
            let max = if self.records {
                conn.emss() as u64
            } else {
                4096
            };
            let len = rng.between(1, max.min(left));
            let data: Vec<u8> = (self.pushed..self.pushed + len)
                .map(|p| pattern(self.side, p))
                .collect();
            if self.records {
                if conn.send_record(&data).is_err() {
                    break;
                }
                self.record_starts.insert(self.pushed);
                self.pushed += len;
            } else {
                let taken = conn.send(&data) as u64;
                self.pushed += taken;
                if taken < len {
                    break;
                }
            }
        }
        if self.pushed == self.total && !self.closed {
            conn.close();
            self.closed = true;
        }
    }

    /// Reads held data, at most `budget` octets.
    pub(super) fn read(&mut self, conn: &mut Connection, budget: u64) {
        let mut left = budget;
        while let Some((pos, data)) = conn.received() {
            let n = (data.len() as u64).min(left);
            if n == 0 {
                break;
            }
            let piece = data[..n as usize].to_vec();
            self.checker.check(pos, &piece);
            self.checker.covered.insert(pos..pos + n);
            conn.release_received(pos + n);
            left -= n;
        }
    }
}
