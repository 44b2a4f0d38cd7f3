//! The send queue: a ring of octets not yet acknowledged, divided into
//! records (MPA FPDUs) and byte-stream runs, and the rule that cuts
//! segments only at record boundaries (RFC 5044 A.1).
//!
//! A record may hold a run of octets by reference instead ([`BufferSlice`],
//! registered memory sent without a copy: zero-copy transmit). The ring
//! keeps the stream's layout all the same, with the run's place left
//! unwritten, so positions map to ring offsets the same way for every
//! octet; a segment's [`Payload`] names the runs it covers.
//!
//! A record is never split unless it is longer than the EMSS, or the caller
//! forces it because the peer's window stayed below the record; the cut
//! reports a split so it can be counted. Byte-stream runs (the MPA startup
//! phase, plain TCP use) can be cut anywhere.

use crate::mem::BufferSlice;
use crate::tcp::segment::{Payload, References};
use crate::tcp::send::memory::SendMemory;
use core::cell::Cell;
use core::ops::Range;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many chunks a lookup walks forward from the cursor before it
/// searches instead.
const CURSOR_STEPS: usize = 4;

/// A run of queued octets ending at `end`: a record, or byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    end: u64,
    record: bool,
    /// Octets of the record held by reference, if any.
    run: Option<Run>,
}

/// Octets a record holds by reference, after its first `head` octets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    head: usize,
    slice: BufferSlice,
}

impl Chunk {
    /// The chunk's referenced octets, if it has any, with the position of
    /// the first; `start` is where the chunk begins.
    pub(crate) fn referenced(&self, start: u64) -> Option<(u64, &BufferSlice)> {
        let run = self.run.as_ref()?;
        Some((start + run.head as u64, &run.slice))
    }

    /// Position after the chunk's last octet.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }
}

/// A record could not be queued: not enough room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// Where the next segment ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Octets in the segment.
    pub len: u64,
    /// The segment ends inside a record (an RFC 5044 A.1 exception).
    pub splits_record: bool,
}

/// Why a record may be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitPermit {
    /// Only when the record is longer than the EMSS.
    EmssOnly,
    /// Also when it is longer than the room left (the peer's window stayed
    /// below it).
    Window,
}

/// Queued octets from the oldest unacknowledged one to the last queued.
#[derive(Debug)]
pub struct SendQueue {
    /// The ring's octets, shared with transmit paths that send from them
    /// in place.
    memory: Arc<SendMemory>,
    head: u64,
    tail: u64,
    /// The position whose octet is at the ring's start. Moved to the tail
    /// whenever a write finds the queue empty, so a connection whose
    /// data is acknowledged before more is queued (requests and replies,
    /// small messages on many connections) keeps reusing the ring's first
    /// pages instead of touching, and keeping resident, all of them.
    origin: u64,
    chunks: VecDeque<Chunk>,
    /// How many chunks hold a run by reference.
    referencing: usize,
    /// Where the oldest chunk began, possibly before `head`.
    front_start: u64,
    /// Chunks dropped from the front so far.
    released_chunks: u64,
    /// Where the last lookup found its chunk, counted in chunks ever
    /// queued: segments are cut at rising positions, so the next lookup
    /// starts here and moves a chunk or two instead of searching.
    cursor: Cell<u64>,
    /// The record reserved and not yet committed.
    reserved: Option<Reserved>,
    /// Where a reserved record that would wrap around the ring's end is
    /// written, to be copied in at commit; also where the octets around a
    /// referenced run are written.
    wrap_scratch: Vec<u8>,
}

/// A record reserved by [`SendQueue::reserve_record`] or
/// [`SendQueue::reserve_record_referencing`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reserved {
    /// Written in place at the tail of the ring.
    InRing(usize),
    /// Written into the wrap scratch.
    Wrapped(usize),
    /// `run.head` octets, the run, `tail` octets; the two parts written in
    /// place, or into the wrap scratch (`wrapped`) when either would
    /// straddle the ring's end.
    Referencing {
        run: Run,
        tail: usize,
        wrapped: bool,
    },
}

impl SendQueue {
    /// An empty queue of `capacity` octets, starting at position 0.
    pub fn new(capacity: usize) -> Self {
        SendQueue {
            memory: SendMemory::new(capacity),
            head: 0,
            tail: 0,
            origin: 0,
            chunks: VecDeque::new(),
            referencing: 0,
            front_start: 0,
            released_chunks: 0,
            cursor: Cell::new(0),
            reserved: None,
            wrap_scratch: Vec::new(),
        }
    }

    /// The ring's memory, for a transmit path that references segments'
    /// payloads in place (see [`SendMemory`]).
    pub fn memory(&self) -> &Arc<SendMemory> {
        &self.memory
    }

    fn ring(&self) -> &[u8] {
        // SAFETY: this queue is the memory's only writer, and writing
        // takes `&mut self`, so no write happens while this slice lives.
        unsafe { self.memory.bytes() }
    }

    /// The ring's octets at each `(offset, len)` of `rooms`, writable: the
    /// rooms a record reservation hands out, so a sender frames straight
    /// into the ring. The callers name only free octets (never queued, or
    /// acknowledged), at and after the tail.
    ///
    /// # Panics
    /// If a room runs past the ring's end, or two of them overlap.
    fn rooms<const N: usize>(&mut self, rooms: [(usize, usize); N]) -> [&mut [u8]; N] {
        let cap = self.memory.len();
        for (i, &(at, len)) in rooms.iter().enumerate() {
            assert!(at <= cap && len <= cap - at, "a room inside the ring");
            for &(other_at, other_len) in &rooms[..i] {
                assert!(
                    len == 0
                        || other_len == 0
                        || at + len <= other_at
                        || other_at + other_len <= at,
                    "disjoint rooms"
                );
            }
        }
        let base = self.memory.as_mut_ptr();
        rooms.map(|(at, len)| {
            // SAFETY: the room lies inside the live allocation and overlaps
            // no other room (both checked above). The rooms borrow the queue
            // exclusively, and the queue is the memory's only writer, so no
            // other slice of its octets lives while they do. Other holders
            // of the memory read only through raw pointers, and only what
            // an old frame of theirs points at: queued octets, which no room
            // names, or acknowledged ones (the race `SendMemory`'s contract
            // allows).
            unsafe { std::slice::from_raw_parts_mut(base.add(at), len) }
        })
    }

    /// Gives the ring's memory back, keeping one octet, when nothing is
    /// queued; returns whether it did. Only for a connection that will
    /// send no more data (TIME-WAIT): a record reserved and never
    /// committed is dropped with it (and any registered memory it
    /// referenced let go). A transmit path still holding the old memory
    /// keeps it alive until it lets go.
    pub fn free_memory(&mut self) -> bool {
        if self.head != self.tail || !self.chunks.is_empty() {
            return false;
        }
        self.reserved = None;
        self.memory = SendMemory::new(1);
        self.origin = self.tail;
        // Empty already: these only give their allocations back.
        self.chunks = VecDeque::new();
        self.wrap_scratch = Vec::new();
        true
    }

    /// Whether any queued record holds a run by reference.
    pub fn holds_references(&self) -> bool {
        self.referencing != 0
    }

    /// Position of the oldest queued octet.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Position after the last queued octet.
    pub fn end(&self) -> u64 {
        self.tail
    }

    /// Room for more octets.
    pub fn free(&self) -> usize {
        self.memory.len() - (self.tail - self.head) as usize
    }

    /// Where `pos` is in the ring.
    fn index(&self, pos: u64) -> usize {
        ((pos - self.origin) % self.memory.len() as u64) as usize
    }

    /// Where the next write goes: the ring's start when nothing is queued
    /// (every octet written before is acknowledged, so no segment still
    /// needs any of them; see [`SendMemory`]).
    fn tail_index(&mut self) -> usize {
        if self.head == self.tail {
            self.origin = self.tail;
        }
        self.index(self.tail)
    }

    /// Appends `data` at the tail.
    fn write(&mut self, data: &[u8]) {
        self.tail_index();
        self.write_at(self.tail, data);
        self.tail += data.len() as u64;
    }

    /// Writes `data` at position `pos` and on, around the ring's end.
    fn write_at(&mut self, pos: u64, data: &[u8]) {
        let cap = self.memory.len();
        let mut at = self.index(pos);
        for piece in data.chunks(cap) {
            let (first, second) = piece.split_at(piece.len().min(cap - at));
            // SAFETY: this queue is the memory's only writer, and `&mut
            // self` means no slice of its octets lives; the callers write
            // at the tail or into the reserved record, octets never queued
            // or acknowledged.
            unsafe {
                self.memory.write_at(at, first);
                self.memory.write_at(0, second);
            }
            at = (at + piece.len()) % cap;
        }
    }

    /// Queues a whole record, or nothing.
    pub fn push_record(&mut self, record: &[u8]) -> Result<(), QueueFull> {
        self.reserve_record(record.len())?.copy_from_slice(record);
        self.commit_record();
        Ok(())
    }

    /// Room for a record of exactly `len` octets, written by the caller
    /// and queued by [`commit_record`](Self::commit_record); nothing is
    /// queued until then, and a later reservation replaces this one. The
    /// room is the ring itself unless the record would wrap around its
    /// end, so a sender can frame straight into it.
    pub fn reserve_record(&mut self, len: usize) -> Result<&mut [u8], QueueFull> {
        if len > self.free() {
            self.reserved = None;
            return Err(QueueFull);
        }
        let cap = self.memory.len();
        let at = self.tail_index();
        if at + len <= cap {
            self.reserved = Some(Reserved::InRing(len));
            let [room] = self.rooms([(at, len)]);
            Ok(room)
        } else {
            self.reserved = Some(Reserved::Wrapped(len));
            self.wrap_scratch.resize(len, 0);
            Ok(&mut self.wrap_scratch[..])
        }
    }

    /// Room for a record of `head` octets, the run `run` held by
    /// reference, and `tail` octets: the two rooms for the caller to
    /// write, queued by [`commit_record`](Self::commit_record) like
    /// [`reserve_record`](Self::reserve_record)'s. The run counts against
    /// the queue's room like octets of its own.
    pub fn reserve_record_referencing(
        &mut self,
        head: usize,
        run: BufferSlice,
        tail: usize,
    ) -> Result<(&mut [u8], &mut [u8]), QueueFull> {
        self.reserved = None;
        let len = head + run.len() + tail;
        if len > self.free() {
            return Err(QueueFull);
        }
        let cap = self.memory.len();
        let head_at = self.tail_index();
        let tail_at = (head_at + head + run.len()) % cap;
        let wrapped = head_at + head > cap || tail_at + tail > cap;
        self.reserved = Some(Reserved::Referencing {
            run: Run { head, slice: run },
            tail,
            wrapped,
        });
        if wrapped {
            self.wrap_scratch.resize(head + tail, 0);
            return Ok(self.wrap_scratch.split_at_mut(head));
        }
        // Two disjoint places in the ring; the tail's comes first when the
        // run wrapped around the ring's end.
        let [head_room, tail_room] = self.rooms([(head_at, head), (tail_at, tail)]);
        Ok((head_room, tail_room))
    }

    /// Queues the record last reserved; does nothing without one.
    pub fn commit_record(&mut self) {
        let run = match self.reserved.take() {
            None | Some(Reserved::InRing(0) | Reserved::Wrapped(0)) => return,
            Some(Reserved::InRing(len)) => {
                self.tail += len as u64;
                None
            }
            Some(Reserved::Wrapped(len)) => {
                let scratch = std::mem::take(&mut self.wrap_scratch);
                self.write(&scratch[..len]);
                self.wrap_scratch = scratch;
                None
            }
            Some(Reserved::Referencing { run, tail, wrapped }) => {
                let head = run.head;
                let len = (head + run.slice.len() + tail) as u64;
                if len == 0 {
                    return;
                }
                if wrapped {
                    let scratch = std::mem::take(&mut self.wrap_scratch);
                    self.write_at(self.tail, &scratch[..head]);
                    let tail_pos = self.tail + len - tail as u64;
                    self.write_at(tail_pos, &scratch[head..head + tail]);
                    self.wrap_scratch = scratch;
                }
                self.tail += len;
                self.referencing += 1;
                Some(run)
            }
        };
        self.chunks.push_back(Chunk {
            end: self.tail,
            record: true,
            run,
        });
    }

    /// Queues as many octets of `data` as fit, as byte stream; returns how
    /// many.
    pub fn push_bytes(&mut self, data: &[u8]) -> usize {
        self.reserved = None;
        let taken = data.len().min(self.free());
        if taken == 0 {
            return 0;
        }
        self.write(&data[..taken]);
        match self.chunks.back_mut() {
            Some(last) if !last.record => last.end = self.tail,
            _ => self.chunks.push_back(Chunk {
                end: self.tail,
                record: false,
                run: None,
            }),
        }
        taken
    }

    /// Drops everything before `pos` (acknowledged).
    pub fn release(&mut self, pos: u64) {
        self.head = pos.clamp(self.head, self.tail);
        while let Some(front) = self.chunks.front().filter(|c| c.end <= self.head) {
            self.front_start = front.end;
            self.referencing -= usize::from(front.run.is_some());
            self.chunks.pop_front();
            self.released_chunks += 1;
        }
    }

    /// The index of the first chunk ending after `pos` (the chunk holding
    /// it), or the number of chunks when none does.
    fn chunk_at(&self, pos: u64) -> usize {
        let ends_by = |i: usize| self.chunks.get(i).is_some_and(|c| c.end <= pos);
        let hint = self.cursor.get().saturating_sub(self.released_chunks) as usize;
        let start = hint.min(self.chunks.len());
        let mut i = start;
        // A few steps forward from the cursor; behind it (a
        // retransmission) or far ahead, a binary search.
        let walkable = start == 0 || ends_by(start - 1);
        while walkable && i < start + CURSOR_STEPS && ends_by(i) {
            i += 1;
        }
        if !walkable || ends_by(i) {
            i = self.chunks.partition_point(|c| c.end <= pos);
        }
        self.cursor.set(self.released_chunks + i as u64);
        i
    }

    /// The queued octets in `range`, which must lie in the queue. Inlined:
    /// returned through memory, its two slices are read back wider than
    /// they were written, a store-forwarding stall per segment sent.
    #[inline]
    pub fn payload(&self, range: Range<u64>) -> Payload<'_> {
        let ring = self.ring();
        let cap = ring.len();
        let start = range.start.clamp(self.head, self.tail);
        let len = (range.end.clamp(start, self.tail) - start) as usize;
        let at = self.index(start);
        let first = len.min(cap - at);
        Payload {
            first: &ring[at..at + first],
            second: &ring[..len - first],
            references: self.references(start..start + len as u64),
        }
    }

    /// The chunks that overlap `range`, where any of the queue's holds a
    /// run by reference.
    #[inline]
    fn references(&self, range: Range<u64>) -> References<'_> {
        if self.referencing == 0 || range.is_empty() {
            return References::default();
        }
        let from = self.chunk_at(range.start);
        let to = from
            + self
                .chunks
                .range(from..)
                .take_while(|chunk| chunk.end < range.end)
                .count()
            + 1;
        let to = to.min(self.chunks.len());
        let first_start = from
            .checked_sub(1)
            .map_or(self.front_start, |p| self.chunks[p].end);
        let (front, back) = self.chunks.as_slices();
        let split = front.len();
        let chunks = [
            &front[from.min(split)..to.min(split)],
            &back[from.max(split) - split..to.max(split) - split],
        ];
        References::new(range, first_start, chunks)
    }

    /// Whether a segment may start at `pos` without splitting a record.
    pub fn is_boundary(&self, pos: u64) -> bool {
        let i = self.chunk_at(pos);
        match self.chunks.get(i) {
            Some(chunk) if chunk.record => {
                let start = i
                    .checked_sub(1)
                    .map_or(self.front_start, |p| self.chunks[p].end);
                start == pos
            }
            _ => true,
        }
    }

    /// The segment to cut at `start` with at most `room` octets, packing
    /// whole records. A record longer than `emss` is split at `room`; one
    /// longer than `room` only is split when `permit` says so and otherwise
    /// waits (`None`).
    pub fn cut(&self, start: u64, room: u64, emss: u64, permit: SplitPermit) -> Option<Cut> {
        if room == 0 || start >= self.tail {
            return None;
        }
        let mut len = 0;
        let first = self.chunk_at(start);
        for chunk in self.chunks.iter().skip(first) {
            let avail = chunk.end - (start + len);
            if avail <= room - len {
                len += avail;
                continue;
            }
            if !chunk.record {
                return Some(Cut {
                    len: room,
                    splits_record: false,
                });
            }
            if len > 0 {
                break;
            }
            let may_split = avail > emss || permit == SplitPermit::Window;
            return may_split.then_some(Cut {
                len: room,
                splits_record: true,
            });
        }
        Some(Cut {
            len,
            splits_record: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_whole_records_and_splits_only_when_allowed() {
        let mut q = SendQueue::new(64);
        q.push_record(&[1; 10]).unwrap();
        q.push_record(&[2; 10]).unwrap();
        q.push_record(&[3; 30]).unwrap();
        let cut = q.cut(0, 25, 25, SplitPermit::EmssOnly).unwrap();
        assert_eq!(
            cut,
            Cut {
                len: 20,
                splits_record: false
            }
        );
        // 30 octets with an EMSS of 25: must split.
        let cut = q.cut(20, 25, 25, SplitPermit::EmssOnly).unwrap();
        assert!(cut.splits_record);
        // Fits the EMSS but not the window: waits unless permitted.
        assert_eq!(q.cut(20, 10, 40, SplitPermit::EmssOnly), None);
        assert_eq!(
            q.cut(20, 10, 40, SplitPermit::Window).map(|c| c.len),
            Some(10)
        );
        assert!(q.is_boundary(10) && !q.is_boundary(15));
        assert_eq!(q.push_record(&[4; 20]), Err(QueueFull));
    }

    #[test]
    fn byte_stream_then_records() {
        let mut q = SendQueue::new(1024);
        assert_eq!(q.push_bytes(&[0; 100]), 100);
        q.push_record(&[1; 50]).unwrap();
        q.push_record(&[2; 50]).unwrap();
        // The startup bytes go alone; the records then pack.
        let cut = q.cut(0, 120, 120, SplitPermit::EmssOnly).unwrap();
        assert_eq!(
            cut,
            Cut {
                len: 100,
                splits_record: false
            }
        );
        let cut = q.cut(100, 120, 120, SplitPermit::EmssOnly).unwrap();
        assert_eq!(
            cut,
            Cut {
                len: 100,
                splits_record: false
            }
        );
        // Stream octets may be cut anywhere.
        assert_eq!(
            q.cut(0, 30, 120, SplitPermit::EmssOnly).map(|c| c.len),
            Some(30)
        );
        assert!(q.is_boundary(30) && q.is_boundary(100) && !q.is_boundary(120));
    }

    #[test]
    fn records_framed_in_place_and_across_the_wrap() {
        let mut q = SendQueue::new(16);
        // Reserved and not committed: nothing is queued.
        q.reserve_record(6).unwrap().fill(9);
        assert_eq!(q.end(), 0);
        q.reserve_record(6).unwrap().copy_from_slice(&[1; 6]);
        q.commit_record();
        q.reserve_record(6).unwrap().copy_from_slice(&[2; 6]);
        q.commit_record();
        // A commit without a reservation does nothing.
        q.commit_record();
        assert_eq!(q.end(), 12);
        q.release(12);
        // 4 octets to the ring's end: this record wraps.
        q.reserve_record(8)
            .unwrap()
            .copy_from_slice(&[3, 4, 5, 6, 7, 8, 9, 10]);
        q.commit_record();
        assert_eq!(q.payload(12..20).to_vec(), [3, 4, 5, 6, 7, 8, 9, 10]);
        assert!(q.is_boundary(12) && q.is_boundary(20) && !q.is_boundary(16));
        assert_eq!(q.reserve_record(9), Err(QueueFull));
        // A failed reservation leaves nothing to commit.
        q.commit_record();
        assert_eq!(q.end(), 20);
    }

    #[test]
    fn payloads_point_into_the_shared_memory_which_outlives_the_queue() {
        let mut q = SendQueue::new(32);
        q.push_record(&[5; 20]).unwrap();
        let memory = Arc::clone(q.memory());
        let payload = q.payload(4..12);
        let base = memory.as_ptr() as usize;
        let at = payload.first.as_ptr() as usize;
        assert_eq!((at - base, payload.first.len()), (4, 8));
        drop(q);
        // The memory is still there for a frame that points into it.
        // SAFETY: the queue, the only writer, is gone.
        assert_eq!(unsafe { memory.bytes() }[..20], [5; 20]);
        assert_eq!(memory.len(), 32);
    }

    #[test]
    fn an_empty_queue_writes_from_the_rings_start_again() {
        let mut q = SendQueue::new(64);
        let base = q.memory().as_ptr() as usize;
        let offset =
            |q: &SendQueue, pos: u64| q.payload(pos..pos + 1).first.as_ptr() as usize - base;
        q.push_record(&[1; 10]).unwrap();
        q.push_record(&[2; 10]).unwrap();
        // Something still queued: the next record follows it.
        q.release(10);
        q.push_record(&[3; 10]).unwrap();
        assert_eq!(offset(&q, 20), 20);
        // Everything acknowledged: the next record and the next bytes
        // start at the ring's start, whatever their position.
        q.release(30);
        q.push_record(&[4; 10]).unwrap();
        assert_eq!(
            (offset(&q, 30), q.payload(30..40).to_vec()),
            (0, vec![4; 10])
        );
        q.release(40);
        assert_eq!(q.push_bytes(&[5; 64]), 64);
        assert_eq!(offset(&q, 40), 0);
        assert_eq!(q.payload(40..104).to_vec(), vec![5; 64]);
        assert!(q.is_boundary(40) && q.cut(40, 100, 100, SplitPermit::EmssOnly).unwrap().len == 64);
        // A reservation made empty is committed where it was written.
        q.release(104);
        q.reserve_record(8).unwrap().fill(6);
        q.commit_record();
        assert_eq!(
            (offset(&q, 104), q.payload(104..112).to_vec()),
            (0, vec![6; 8])
        );
    }

    /// `len` octets of registered memory counting up from `first`.
    fn memory(first: u8, len: usize) -> BufferSlice {
        let buffer = Arc::new(crate::mem::MemoryBuffer::new(len + 8));
        let data: Vec<u8> = (0..len).map(|i| first.wrapping_add(i as u8)).collect();
        buffer.write_at(8, &data).unwrap();
        BufferSlice::new(buffer, 8, len).unwrap()
    }

    /// Queues a record of `head`, the run `run` and `tail`; false when it
    /// did not fit.
    fn push_referencing(q: &mut SendQueue, head: &[u8], run: BufferSlice, tail: &[u8]) -> bool {
        let Ok((h, t)) = q.reserve_record_referencing(head.len(), run, tail.len()) else {
            return false;
        };
        h.copy_from_slice(head);
        t.copy_from_slice(tail);
        q.commit_record();
        true
    }

    #[test]
    fn records_hold_runs_by_reference_wherever_the_ring_puts_them() {
        // A ring of 32: the record of 4 + 16 + 4 octets at every start
        // offset, so the head, the run and the tail each straddle the end.
        for offset in 0..32u64 {
            let mut q = SendQueue::new(32);
            assert_eq!(q.push_bytes(&vec![0; offset as usize]), offset as usize);
            q.release(offset);
            // Keep one octet queued so the ring does not restart at 0.
            if offset > 0 {
                q.push_bytes(&[0xEE]);
            }
            let start = q.end();
            assert!(push_referencing(
                &mut q,
                &[1, 2, 3, 4],
                memory(100, 16),
                &[5, 6, 7, 8]
            ));
            let mut expected = vec![1, 2, 3, 4];
            expected.extend(100..116);
            expected.extend([5, 6, 7, 8]);
            assert_eq!(
                q.payload(start..start + 24).to_vec(),
                expected,
                "at {offset}"
            );
            // Any part of it, as a split segment would carry it.
            assert_eq!(q.payload(start + 6..start + 21).to_vec(), expected[6..21]);
            assert!(!q.payload(start..start + 24).references.is_empty());
            assert!(q.payload(start..start + 4).references.is_empty());
            assert!(q.is_boundary(start) && q.is_boundary(start + 24));
            assert!(!q.is_boundary(start + 4));
            // The run counts against the room.
            assert!(!push_referencing(&mut q, &[], memory(0, 9), &[]));
            q.release(start + 24);
            assert_eq!((q.referencing, q.chunks.len()), (0, 0));
        }
    }

    /// TIME-WAIT's release: refused while anything is queued; a record
    /// reserved and never committed goes with the memory, and a late
    /// commit of it adds nothing.
    #[test]
    fn freeing_the_memory_needs_an_empty_queue_and_drops_a_reservation() {
        let mut q = SendQueue::new(64);
        q.push_bytes(&[1; 10]);
        assert!(!q.free_memory());
        q.release(10);
        let _ = q.reserve_record_referencing(2, memory(0, 8), 4).unwrap();
        assert!(q.free_memory());
        assert_eq!((q.memory().len(), q.free()), (1, 1));
        q.commit_record();
        assert_eq!((q.head(), q.end(), q.referencing), (10, 10, 0));
        assert!(q.payload(10..10).to_vec().is_empty());
    }

    #[test]
    fn a_referencing_record_that_does_not_fit_leaves_nothing() {
        let mut q = SendQueue::new(16);
        assert_eq!(
            q.reserve_record_referencing(2, memory(0, 14), 1),
            Err(QueueFull)
        );
        q.commit_record();
        assert_eq!((q.end(), q.referencing), (0, 0));
        // A reservation replaced by another is dropped with its run.
        let _ = q.reserve_record_referencing(2, memory(0, 4), 2).unwrap();
        q.push_bytes(&[9]);
        q.commit_record();
        assert_eq!((q.end(), q.referencing), (1, 0));
    }

    /// A xorshift generator: `next(n)` is below `n`.
    fn numbers() -> impl FnMut(u64) -> u64 {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        move |n| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        }
    }

    #[test]
    fn payloads_are_the_octets_queued_however_the_ring_moves() {
        let mut q = SendQueue::new(1000);
        let mut model: VecDeque<u8> = VecDeque::new();
        let mut next = numbers();
        let mut byte = 0u8;
        let mut octets = |len: u64| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    byte = byte.wrapping_add(1);
                    byte
                })
                .collect()
        };
        for _ in 0..20_000 {
            match next(6) {
                5 => {
                    let head = octets(1 + next(30));
                    let run = octets(1 + next(300));
                    let tail = octets(next(8));
                    let slice = memory(run[0], run.len());
                    if push_referencing(&mut q, &head, slice, &tail) {
                        model.extend(&head);
                        model.extend(&run);
                        model.extend(&tail);
                    }
                }
                0 => {
                    let record = octets(1 + next(400));
                    if q.push_record(&record).is_ok() {
                        model.extend(&record);
                    }
                }
                1 => {
                    let record = octets(1 + next(400));
                    if let Ok(room) = q.reserve_record(record.len()) {
                        room.copy_from_slice(&record);
                        q.commit_record();
                        model.extend(&record);
                    }
                }
                2 => {
                    let data = octets(1 + next(300));
                    let taken = q.push_bytes(&data);
                    model.extend(&data[..taken]);
                }
                3 => {
                    // Often everything, so the ring restarts at its start.
                    let acked = next(model.len() as u64 + 1).max(model.len() as u64 * next(2));
                    q.release(q.head() + acked);
                    model.drain(..acked as usize);
                }
                _ => {
                    let start = q.head() + next(model.len() as u64 + 1);
                    let end = start + next(q.end() - start + 1);
                    let from = (start - q.head()) as usize;
                    let expected: Vec<u8> = model
                        .range(from..from + (end - start) as usize)
                        .copied()
                        .collect();
                    assert_eq!(q.payload(start..end).to_vec(), expected, "{start}..{end}");
                }
            }
            assert_eq!(q.end() - q.head(), model.len() as u64);
        }
    }

    #[test]
    fn the_cursor_finds_what_a_search_finds() {
        let mut q = SendQueue::new(4096);
        let mut next = numbers();
        for _ in 0..5000 {
            match next(4) {
                0 => {
                    let len = 1 + next(300) as usize;
                    let _ = q.push_record(&vec![1; len]);
                }
                1 => {
                    let len = 1 + next(100) as usize;
                    q.push_bytes(&vec![2; len]);
                }
                2 => q.release(q.head() + next(400)),
                _ => {
                    // Mostly rising positions, sometimes back (a resend).
                    let span = q.end() - q.head() + 1;
                    let pos = q.head() + next(span);
                    let searched = q.chunks.partition_point(|c| c.end <= pos);
                    assert_eq!(q.chunk_at(pos), searched, "at {pos}");
                    let ahead = (pos + next(200)).min(q.end());
                    let searched = q.chunks.partition_point(|c| c.end <= ahead);
                    assert_eq!(q.chunk_at(ahead), searched, "at {ahead}");
                }
            }
        }
    }

    #[test]
    fn ring_wraps_into_two_slices() {
        let mut q = SendQueue::new(16);
        assert_eq!(q.push_bytes(&[7; 12]), 12);
        q.release(10);
        assert_eq!(q.push_bytes(&(0..10).collect::<Vec<u8>>()), 10);
        let payload = q.payload(10..22);
        assert_eq!(payload.first.len(), 6);
        assert_eq!(payload.to_vec(), [7, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let cut = q.cut(10, 5, 5, SplitPermit::EmssOnly).unwrap();
        assert_eq!(
            cut,
            Cut {
                len: 5,
                splits_record: false
            }
        );
    }
}
