//! The data sink's side of one untagged queue (RFC 5041 sections 5.3, 5.4
//! and 7.2): buffers posted in order, messages matched to them by MSN,
//! segments placed at their MO, and messages delivered in MSN order once
//! every octet has arrived.
//!
//! MSNs start at 1 and wrap (RFC 5041 section 4.3). A message whose MSN
//! is the next expected one but finds no posted buffer is "no buffer
//! available"; one outside the window of posted buffers is "MSN range is
//! not valid"; a segment that starts past the end of its buffer (check 3 of
//! RFC 5041 section 7.1) has an invalid MO; one that starts inside it but
//! would run past it (check 4) is "message too long". Nothing is placed
//! when a check fails.

use std::collections::VecDeque;

use crate::wire::terminate::TermError;

/// A posted receive buffer as the untagged queue sees it.
pub trait UntaggedBuffer {
    /// How many octets the buffer can take.
    fn capacity(&self) -> usize;
    /// Writes `data` at `offset`; the queue has checked the bounds.
    fn write_at(&mut self, offset: usize, data: &[u8]);
}

/// Why a segment was refused; each is one of RFC 5041's untagged buffer
/// errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UntaggedError {
    /// The message is the next one expected but no buffer is posted.
    NoBuffer,
    /// The MSN lies outside the window of posted buffers.
    MsnRange,
    /// The MO lies past the end of the buffer, or MO plus the segment's
    /// length overflows 32 bits.
    InvalidMo,
    /// The segment would run past the end of its buffer.
    TooLong,
}

impl UntaggedError {
    /// The Terminate error that reports it (RFC 5041 section 7.2).
    pub fn terminate_error(self) -> TermError {
        match self {
            Self::NoBuffer => TermError::DdpUntaggedNoBuffer,
            Self::MsnRange => TermError::DdpUntaggedMsnRange,
            Self::InvalidMo => TermError::DdpUntaggedInvalidMo,
            Self::TooLong => TermError::DdpUntaggedTooLong,
        }
    }
}

/// A message whose every octet has been placed.
#[derive(Debug, PartialEq, Eq)]
pub struct Delivered<B> {
    /// Its MSN.
    pub msn: u32,
    /// Its length: the MO plus length of its last segment.
    pub len: u32,
    /// The buffer it was placed in.
    pub buffer: B,
}

/// A posted buffer and what has arrived for the message matched to it.
#[derive(Debug)]
struct Slot<B> {
    buffer: B,
    placed: u64,
    /// Set when the segment with L = 1 has arrived.
    total: Option<u32>,
}

/// One untagged queue of a DDP stream.
#[derive(Debug)]
pub struct UntaggedQueue<B> {
    /// MSN of the message in `slots[0]`.
    next_msn: u32,
    slots: VecDeque<Slot<B>>,
}

impl<B: UntaggedBuffer> Default for UntaggedQueue<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: UntaggedBuffer> UntaggedQueue<B> {
    /// An empty queue expecting MSN 1.
    pub fn new() -> Self {
        Self {
            next_msn: 1,
            slots: VecDeque::new(),
        }
    }

    /// Posts a buffer for the next message not yet matched to one.
    pub fn post(&mut self, buffer: B) {
        self.slots.push_back(Slot {
            buffer,
            placed: 0,
            total: None,
        });
    }

    /// Buffers posted and not yet delivered.
    pub fn posted(&self) -> usize {
        self.slots.len()
    }

    /// The MSN of the next message to be delivered.
    pub fn next_msn(&self) -> u32 {
        self.next_msn
    }

    /// Places one segment of message `msn` at `mo`; `last` is its L bit.
    pub fn place(
        &mut self,
        msn: u32,
        mo: u32,
        last: bool,
        payload: &[u8],
    ) -> Result<(), UntaggedError> {
        self.write(msn, mo, payload)?;
        self.account(msn, mo, last, payload.len())
    }

    /// Writes one segment of message `msn` at `mo` into its buffer without
    /// counting it as arrived: placement ahead of the in-order stream (RFC
    /// 5041 section 5.3), whose [`account`](Self::account) follows when
    /// the stream reaches the segment. Nothing is written on an error.
    pub fn write(&mut self, msn: u32, mo: u32, payload: &[u8]) -> Result<(), UntaggedError> {
        let index = self.fit(msn, mo, payload.len())?;
        self.slots[index].buffer.write_at(mo as usize, payload);
        Ok(())
    }

    /// Counts a segment of `len` octets of message `msn` at `mo` as
    /// arrived, its octets already written; `last` is its L bit. Fails as
    /// [`place`](Self::place) would, and then counts nothing.
    pub fn account(
        &mut self,
        msn: u32,
        mo: u32,
        last: bool,
        len: usize,
    ) -> Result<(), UntaggedError> {
        let index = self.fit(msn, mo, len)?;
        let slot = &mut self.slots[index];
        slot.placed += len as u64;
        if last {
            // `fit` checked that the end fits in 32 bits.
            slot.total = Some(mo + len as u32);
        }
        Ok(())
    }

    /// The slot of message `msn`, once a segment of `len` octets at `mo`
    /// is known to fit its buffer.
    fn fit(&self, msn: u32, mo: u32, len: usize) -> Result<usize, UntaggedError> {
        let index = msn.wrapping_sub(self.next_msn) as usize;
        if index >= self.slots.len() {
            // The next expected message, or one a buffer could have been
            // posted for, has simply found none; anything else is out of
            // the window.
            return Err(if index == self.slots.len() {
                UntaggedError::NoBuffer
            } else {
                UntaggedError::MsnRange
            });
        }
        let len = u32::try_from(len).map_err(|_| UntaggedError::InvalidMo)?;
        let end = mo.checked_add(len).ok_or(UntaggedError::InvalidMo)?;
        let capacity = self.slots[index].buffer.capacity();
        if mo as usize > capacity {
            return Err(UntaggedError::InvalidMo);
        }
        if end as usize > capacity {
            return Err(UntaggedError::TooLong);
        }
        Ok(index)
    }

    /// The buffer matched to message `msn`, if one is posted for it.
    pub fn buffer_mut(&mut self, msn: u32) -> Option<&mut B> {
        let index = msn.wrapping_sub(self.next_msn) as usize;
        self.slots.get_mut(index).map(|slot| &mut slot.buffer)
    }

    /// Consumes the next MSN without a buffer: the zero-length Send RTR of
    /// RFC 6581 section 9.2 is a DDP message of its own that no posted
    /// receive takes. Only valid before any segment of that MSN was placed.
    pub fn skip_next(&mut self) {
        self.next_msn = self.next_msn.wrapping_add(1);
    }

    /// The next message in MSN order, once all of it has been placed.
    pub fn deliver(&mut self) -> Option<Delivered<B>> {
        let slot = self.slots.front()?;
        let total = slot.total?;
        if slot.placed < u64::from(total) {
            return None;
        }
        let slot = self.slots.pop_front()?;
        let msn = self.next_msn;
        self.next_msn = self.next_msn.wrapping_add(1);
        Some(Delivered {
            msn,
            len: total,
            buffer: slot.buffer,
        })
    }

    /// Takes back every buffer not yet delivered, in posting order (a QP
    /// in the error state flushes them).
    pub fn flush(&mut self) -> impl Iterator<Item = B> + '_ {
        self.slots.drain(..).map(|slot| slot.buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl UntaggedBuffer for Vec<u8> {
        fn capacity(&self) -> usize {
            self.len()
        }
        fn write_at(&mut self, offset: usize, data: &[u8]) {
            self[offset..offset + data.len()].copy_from_slice(data);
        }
    }

    #[test]
    fn segments_in_order_deliver_a_message() {
        let mut queue = UntaggedQueue::new();
        queue.post(vec![0u8; 2048]);
        queue.place(1, 0, false, &[1; 1482]).unwrap();
        assert!(queue.deliver().is_none());
        queue.place(1, 1482, true, &[2; 566]).unwrap();
        let delivered = queue.deliver().unwrap();
        assert_eq!((delivered.msn, delivered.len), (1, 2048));
        assert_eq!(delivered.buffer[1481..1483], [1, 2]);
        assert_eq!(queue.next_msn(), 2);
    }

    #[test]
    fn a_segment_written_early_counts_only_once_accounted() {
        let mut queue = UntaggedQueue::new();
        queue.post(vec![0u8; 100]);
        queue.write(1, 60, &[7; 40]).unwrap();
        assert_eq!(queue.buffer_mut(1).unwrap()[60..], [7; 40]);
        queue.place(1, 0, false, &[1; 60]).unwrap();
        assert!(
            queue.deliver().is_none(),
            "the early segment is not counted yet"
        );
        assert_eq!(queue.account(1, 60, true, 41), Err(UntaggedError::TooLong));
        queue.account(1, 60, true, 40).unwrap();
        let delivered = queue.deliver().unwrap();
        assert_eq!(delivered.len, 100);
        assert_eq!(delivered.buffer[59..61], [1, 7]);
    }

    #[test]
    fn an_early_write_is_refused_like_a_placement() {
        let mut queue: UntaggedQueue<Vec<u8>> = UntaggedQueue::new();
        assert_eq!(queue.write(1, 0, &[1]), Err(UntaggedError::NoBuffer));
        queue.post(vec![0u8; 10]);
        assert_eq!(queue.write(1, 11, &[]), Err(UntaggedError::InvalidMo));
        assert_eq!(queue.write(1, 5, &[1; 6]), Err(UntaggedError::TooLong));
        assert_eq!(queue.write(9, 0, &[1]), Err(UntaggedError::MsnRange));
        assert_eq!(queue.buffer_mut(1).unwrap(), &vec![0u8; 10]);
    }

    #[test]
    fn segments_out_of_order_deliver_once_complete() {
        let mut queue = UntaggedQueue::new();
        queue.post(vec![0u8; 100]);
        queue.post(vec![0u8; 100]);
        queue.place(2, 0, true, &[9; 10]).unwrap();
        assert!(queue.deliver().is_none(), "MSN 1 comes first");
        queue.place(1, 50, true, &[5; 50]).unwrap();
        assert!(queue.deliver().is_none(), "MSN 1 still misses 50 octets");
        queue.place(1, 0, false, &[4; 50]).unwrap();
        assert_eq!(queue.deliver().unwrap().len, 100);
        assert_eq!(queue.deliver().unwrap().len, 10);
    }

    #[test]
    fn errors_follow_rfc5041() {
        let mut queue: UntaggedQueue<Vec<u8>> = UntaggedQueue::new();
        assert_eq!(queue.place(1, 0, true, b"x"), Err(UntaggedError::NoBuffer));
        assert_eq!(queue.place(7, 0, true, b"x"), Err(UntaggedError::MsnRange));
        assert_eq!(queue.place(0, 0, true, b"x"), Err(UntaggedError::MsnRange));
        queue.post(vec![0u8; 8]);
        assert_eq!(
            queue.place(1, 4, true, b"12345"),
            Err(UntaggedError::TooLong)
        );
        assert_eq!(
            queue.place(1, u32::MAX, true, b"1"),
            Err(UntaggedError::InvalidMo)
        );
        // An MO past the end is invalid even with no payload; at the end
        // it is the place of an empty last segment.
        assert_eq!(queue.place(1, 9, true, b""), Err(UntaggedError::InvalidMo));
        assert_eq!(queue.place(1, 9, true, b"1"), Err(UntaggedError::InvalidMo));
        assert_eq!(queue.place(1, 8, true, b"1"), Err(UntaggedError::TooLong));
        assert_eq!(queue.place(2, 0, true, b"1"), Err(UntaggedError::NoBuffer));
        // Nothing was placed by the failures.
        queue.place(1, 0, true, b"ok").unwrap();
        assert_eq!(queue.deliver().unwrap().buffer, b"ok\0\0\0\0\0\0");
        assert_eq!(
            UntaggedError::NoBuffer.terminate_error(),
            TermError::DdpUntaggedNoBuffer
        );
    }

    #[test]
    fn zero_length_messages_and_msn_wrap() {
        let mut queue = UntaggedQueue {
            next_msn: u32::MAX,
            slots: VecDeque::new(),
        };
        queue.post(Vec::new());
        queue.post(vec![0u8; 4]);
        queue.place(u32::MAX, 0, true, &[]).unwrap();
        queue.place(0, 0, true, b"abcd").unwrap();
        assert_eq!(queue.deliver().unwrap().len, 0);
        let second = queue.deliver().unwrap();
        assert_eq!((second.msn, second.len), (0, 4));
        assert_eq!(queue.next_msn(), 1);
    }

    #[test]
    fn flush_returns_undelivered_buffers_in_order() {
        let mut queue = UntaggedQueue::new();
        queue.post(vec![1u8]);
        queue.post(vec![2u8]);
        let flushed: Vec<_> = queue.flush().collect();
        assert_eq!(flushed, vec![vec![1u8], vec![2u8]]);
        assert_eq!(queue.posted(), 0);
    }
}
