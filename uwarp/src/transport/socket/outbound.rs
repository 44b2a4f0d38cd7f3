//! The octets a connection of the socket transport has framed for its
//! socket and not yet written ([`Outbound`]), and the sink its engine
//! frames into for one round ([`OutboundSink`]).
//!
//! Small FPDUs are framed into the buffer. The payload of a large FPDU
//! without CRC and Markers (the socket transport's default, as siw's) is
//! not copied: only its header and trailer are framed, and the payload
//! stays in the application's registered memory
//! ([`FpduSink::write_through`]). At the end of the round one `writev`
//! hands the kernel the buffer with those payloads in their places, so a
//! large payload is copied once on its way out, by the kernel, and the
//! round still costs one system call, whose octets the kernel cuts into
//! segments as it would one write's. What the socket does not take is
//! copied into the buffer before the round ends (the engine keeps the
//! payloads pinned until then), so no reference to the application's
//! memory outlives the round, and a Send or Write still completes once
//! its octets are the kernel's or the buffer's.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use uwarp_stack::mem::{Lent, LentRange};
use uwarp_stack::record::FpduSink;

/// The smallest payload written through. Below it the copy into the
/// buffer costs less than the payload's own place in the `writev`.
pub(super) const WRITE_THROUGH_FROM: usize = 16 * 1024;

/// Framed octets on their way to the socket.
#[derive(Debug)]
pub(super) struct Outbound {
    /// Framed into in place. It grows to what the connection needs,
    /// each octet zeroed once, when it first grows over it: a connection
    /// of small messages keeps a small one, and none costs its set-up a
    /// large clear (heap memory that `calloc` must clear cut the DPDK
    /// transport's set-up rate five times once, docs/perf.md).
    buf: Vec<u8>,
    /// Where a round's unwritten octets are gathered, then swapped with
    /// `buf`; made when first needed.
    spare: Vec<u8>,
    /// The most octets framed at once.
    capacity: usize,
    /// Octets before this were written.
    at: usize,
    /// Octets before this are framed.
    len: usize,
}

impl Outbound {
    /// Room for up to `capacity` framed octets.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            buf: Vec::new(),
            spare: Vec::new(),
            capacity,
            at: 0,
            len: 0,
        }
    }

    /// Whether framed octets wait for room in the socket.
    pub(super) fn has_unwritten(&self) -> bool {
        self.at < self.len
    }

    /// Drops what was not written (the connection is reset or gone).
    pub(super) fn clear(&mut self) {
        (self.at, self.len) = (0, 0);
    }

    /// Writes what waits while the socket takes it: whether it wrote
    /// anything; an error when the peer is gone.
    pub(super) fn flush(&mut self, stream: &TcpStream) -> io::Result<bool> {
        let mut wrote = false;
        while self.has_unwritten() {
            match io::Write::write(&mut &*stream, &self.buf[self.at..self.len]) {
                Ok(n) => {
                    self.at += n;
                    wrote = true;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        if !self.has_unwritten() {
            self.clear();
        }
        Ok(wrote)
    }

    /// `buf`'s octets `from .. to`, grown to hold them.
    fn room(&mut self, from: usize, to: usize) -> &mut [u8] {
        grow(&mut self.buf, to, self.capacity);
        &mut self.buf[from..to]
    }

    /// The sink the engine frames into for one round, with nothing
    /// unwritten, writing through to `stream`.
    pub(super) fn sink<'a>(&'a mut self, stream: &'a TcpStream) -> OutboundSink<'a> {
        debug_assert!(!self.has_unwritten());
        self.clear();
        OutboundSink {
            out: self,
            stream,
            reserved: 0,
            through: Vec::new(),
            through_len: 0,
            outcome: Outcome::default(),
        }
    }
}

/// A payload written through: it goes into the stream just before the
/// buffer's octet `at`.
#[derive(Debug, Clone, Copy)]
struct Hole {
    at: usize,
    payload: LentRange,
}

/// An [`FpduSink`] over a connection's [`Outbound`] and its socket, for
/// one round of the engine.
#[derive(Debug)]
pub(super) struct OutboundSink<'a> {
    out: &'a mut Outbound,
    stream: &'a TcpStream,
    /// The length of the uncommitted reservation.
    reserved: usize,
    /// The payloads written through this round, in stream order.
    through: Vec<Hole>,
    /// Their octets.
    through_len: usize,
    outcome: Outcome,
}

/// What a round of an [`OutboundSink`] did besides framing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Outcome {
    /// Octets were written to the socket.
    pub(super) wrote: bool,
    /// The socket failed for good: the peer is gone.
    pub(super) failed: bool,
    /// A payload written through could not be read (a program unmapped
    /// its registered memory without deregistering it) after its FPDU
    /// counted as sent: the stream cannot go on, and the connection is
    /// reset.
    pub(super) broken: bool,
}

impl OutboundSink<'_> {
    /// What the round did.
    pub(super) fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Whether `len` more octets fit, counting the payloads written
    /// through: all of the round may have to be gathered into the buffer.
    fn fits(&self, len: usize) -> bool {
        self.out.len + self.through_len + len <= self.out.capacity
    }

    /// The round's octets in stream order: the buffer's, with the
    /// payloads written through in their places.
    fn pieces(&self) -> Vec<Piece> {
        let mut pieces = Vec::with_capacity(2 * self.through.len() + 1);
        let mut from = 0;
        for hole in &self.through {
            pieces.push(Piece::Buffer(from, hole.at));
            pieces.push(Piece::Lent(hole.payload));
            from = hole.at;
        }
        pieces.push(Piece::Buffer(from, self.out.len));
        pieces.retain(|piece| piece.len() > 0);
        pieces
    }

    /// Writes `pieces` with `writev` while the socket takes them: how many
    /// octets it took.
    fn write(&mut self, pieces: &[Piece]) -> usize {
        let mut iov: Vec<libc::iovec> = pieces
            .iter()
            .map(|piece| libc::iovec {
                iov_base: match *piece {
                    Piece::Buffer(from, _) => self.out.buf[from..].as_ptr().cast_mut().cast(),
                    // SAFETY: the engine's pin, taken before the payload
                    // was lent, lasts until `end_round` returns
                    // (`FpduSink::write_through`), and this runs in it.
                    Piece::Lent(payload) => unsafe { payload.as_ptr() }.cast_mut().cast(),
                },
                iov_len: piece.len(),
            })
            .collect();
        let total: usize = pieces.iter().map(Piece::len).sum();
        let (mut written, mut first) = (0, 0);
        while written < total {
            let count = (iov.len() - first).min(libc::UIO_MAXIOV as usize);
            // SAFETY: every iovec names octets readable now: the buffer's,
            // and payloads pinned for the round (above), which the kernel
            // reads with `copy_from_user` (EFAULT, not a fault, where a
            // program unmapped them). Past `first`, the first iovec is
            // adjusted below to start after what was taken.
            let n = unsafe {
                libc::writev(
                    self.stream.as_raw_fd(),
                    iov[first..].as_ptr(),
                    count as libc::c_int,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {}
                    // A payload's memory is gone: copying the rest finds
                    // which (`gather_unwritten`).
                    _ if err.raw_os_error() == Some(libc::EFAULT) => {}
                    _ => self.outcome.failed = true,
                }
                break;
            }
            let n = n as usize;
            self.outcome.wrote |= n > 0;
            written += n;
            first = advance(&mut iov, first, n);
            if n == 0 {
                break;
            }
        }
        written
    }

    /// Gathers what the socket did not take of `pieces` (its first
    /// `written` octets went) into the spare buffer and makes it the
    /// buffer: the payloads' octets are copied out of their memory.
    fn gather_unwritten(&mut self, pieces: &[Piece], written: usize) {
        let total: usize = pieces.iter().map(Piece::len).sum();
        grow(&mut self.out.spare, total - written, self.out.capacity);
        let mut skip = written;
        let mut len = 0;
        for piece in pieces {
            let piece_len = piece.len();
            if skip >= piece_len {
                skip -= piece_len;
                continue;
            }
            let take = piece_len - skip;
            let dst = &mut self.out.spare[len..len + take];
            match *piece {
                Piece::Buffer(from, _) => {
                    dst.copy_from_slice(&self.out.buf[from + skip..from + piece_len]);
                }
                Piece::Lent(payload) => {
                    // SAFETY: in the engine's pin, as in `write`.
                    if unsafe { payload.read(skip, dst) }.is_err() {
                        self.outcome.broken = true;
                        return;
                    }
                }
            }
            len += take;
            skip = 0;
        }
        std::mem::swap(&mut self.out.buf, &mut self.out.spare);
        (self.out.at, self.out.len) = (0, len);
    }
}

/// A piece of a round's octets.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// The buffer's octets in this range.
    Buffer(usize, usize),
    /// A payload written through.
    Lent(LentRange),
}

/// Grows `buf` to at least `len` octets, zeroing the new ones: to the
/// next power of two, at least a page, at most `capacity` (never below
/// `len`).
fn grow(buf: &mut Vec<u8>, len: usize, capacity: usize) {
    if buf.len() < len {
        let size = len.next_power_of_two().clamp(4096, capacity.max(4096));
        buf.resize(size.max(len), 0);
    }
}

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Buffer(from, to) => to - from,
            Piece::Lent(payload) => payload.len(),
        }
    }
}

/// Moves past `n` written octets of `iov` from entry `first` on,
/// shortening the entry they end in: the new first entry.
fn advance(iov: &mut [libc::iovec], mut first: usize, mut n: usize) -> usize {
    while first < iov.len() && n >= iov[first].iov_len {
        n -= iov[first].iov_len;
        first += 1;
    }
    if let Some(entry) = iov.get_mut(first) {
        entry.iov_base = entry.iov_base.cast::<u8>().wrapping_add(n).cast();
        entry.iov_len -= n;
    }
    first
}

impl FpduSink for OutboundSink<'_> {
    fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        if !self.fits(len) {
            return None;
        }
        self.reserved = len;
        let start = self.out.len;
        Some(self.out.room(start, start + len))
    }

    fn commit(&mut self) {
        self.out.len += std::mem::take(&mut self.reserved);
    }

    fn writes_through_from(&self) -> Option<usize> {
        Some(WRITE_THROUGH_FROM)
    }

    fn write_through(&mut self, head: &[u8], payload: &Lent<'_>, tail: &[u8]) -> bool {
        if !self.fits(head.len() + payload.len() + tail.len()) {
            return false;
        }
        let at = self.out.len + head.len();
        let end = at + tail.len();
        let room = self.out.room(self.out.len, end);
        room[..head.len()].copy_from_slice(head);
        room[head.len()..].copy_from_slice(tail);
        self.out.len = end;
        self.through.push(Hole {
            at,
            payload: payload.range(),
        });
        self.through_len += payload.len();
        true
    }

    fn end_round(&mut self) {
        if self.through.is_empty() {
            return;
        }
        let pieces = self.pieces();
        let written = self.write(&pieces);
        if !self.outcome.failed {
            self.gather_unwritten(&pieces, written);
        }
        self.through.clear();
        self.through_len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;
    use std::sync::Arc;
    use uwarp_stack::mem::{Access, Burst, MemoryBuffer, ProtectionDomains, RegionSpec, StagTable};

    /// A connected pair on loopback: the sender non-blocking with a small
    /// send buffer, so that a large round fills it.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        let size: libc::c_int = 16 * 1024;
        // SAFETY: an int option, passed with its size.
        unsafe {
            libc::setsockopt(
                sender.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&raw const size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        sender.set_nonblocking(true).unwrap();
        (sender, receiver)
    }

    /// A table with `buffer` registered whole; the table, the STag and
    /// the protection domain.
    fn registered(
        buffer: Arc<MemoryBuffer>,
    ) -> (StagTable, uwarp_stack::mem::Stag, uwarp_stack::mem::PdId) {
        let table = StagTable::new(16).unwrap();
        let pd = ProtectionDomains::default().allocate().unwrap();
        let len = buffer.len();
        let spec = RegionSpec::new(buffer, 0, len, 0, Access::NONE);
        let stag = table.register(pd, spec, 1).unwrap();
        (table, stag, pd)
    }

    /// One round: `small` framed, then `payload_len` octets of the region
    /// written through between a head and a tail, and `small` again.
    fn round(
        out: &mut Outbound,
        stream: &TcpStream,
        (table, stag, pd): &(StagTable, uwarp_stack::mem::Stag, uwarp_stack::mem::PdId),
        payload_len: usize,
    ) -> Outcome {
        let _pin = Burst::begin();
        let mut sink = out.sink(stream);
        for part in [&b"small"[..], b"tail"] {
            sink.reserve(part.len()).unwrap().copy_from_slice(part);
            sink.commit();
            if part == b"small" {
                let lent = table.lend(*stag, *pd, Access::NONE, (0, payload_len), |lent| {
                    assert!(sink.write_through(b"head", &lent, b"end"));
                });
                lent.unwrap();
            }
        }
        sink.end_round();
        sink.outcome()
    }

    #[test]
    fn what_the_socket_does_not_take_is_gathered_and_written_later() {
        let (sender, mut receiver) = pair();
        let payload: Vec<u8> = (0..4_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let buffer = Arc::new(MemoryBuffer::new(payload.len()));
        buffer.write_at(0, &payload).unwrap();
        let region = registered(buffer);
        let mut out = Outbound::new(8 << 20);
        let outcome = round(&mut out, &sender, &region, payload.len());
        assert_eq!(
            (outcome.wrote, outcome.failed, outcome.broken),
            (true, false, false)
        );
        assert!(out.has_unwritten(), "a 4 MB round fit a 16 KiB send buffer");
        let expected = [&b"smallhead"[..], &payload, b"endtail"].concat();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0; expected.len()];
            receiver.read_exact(&mut got).unwrap();
            assert!(got == expected, "the stream differs");
        });
        while out.has_unwritten() {
            out.flush(&sender).unwrap();
            std::thread::yield_now();
        }
        reader.join().unwrap();
    }

    #[test]
    fn a_payload_that_went_away_breaks_the_round_without_a_fault() {
        crate::app_memory::install_fault_guard();
        let (sender, _receiver) = pair();
        let page = 4096;
        let len = 64 * page;
        // SAFETY: a fresh anonymous mapping, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        // SAFETY: the mapping lives until the munmap at the end, after
        // every use of the buffer.
        let buffer = Arc::new(unsafe { MemoryBuffer::from_raw_parts(map.cast(), len) });
        let region = registered(buffer);
        // SAFETY: the program takes its memory away without
        // deregistering it, as the tests of the drop-ins do.
        assert_eq!(unsafe { libc::mprotect(map, len, libc::PROT_NONE) }, 0);
        let mut out = Outbound::new(1 << 20);
        let outcome = round(&mut out, &sender, &region, len);
        assert!(outcome.broken && !outcome.failed, "{outcome:?}");
        drop(region);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(map, len) };
    }

    fn iovec(base: usize, len: usize) -> libc::iovec {
        libc::iovec {
            iov_base: base as *mut libc::c_void,
            iov_len: len,
        }
    }

    #[test]
    fn the_buffer_grows_by_powers_of_two_within_the_capacity() {
        let mut buf = Vec::new();
        for (len, capacity, grown) in [
            (10, 1 << 20, 4096),
            (5000, 1 << 20, 8192),
            (100, 1 << 20, 8192),
            (600_000, 700_000, 700_000),
            (800_000, 700_000, 800_000),
        ] {
            grow(&mut buf, len, capacity);
            assert_eq!(buf.len(), grown, "{len} within {capacity}");
        }
    }

    #[test]
    fn advance_moves_past_whole_entries_and_into_the_next() {
        let mut iov = [iovec(100, 10), iovec(200, 5), iovec(300, 8)];
        assert_eq!(advance(&mut iov, 0, 12), 1);
        assert_eq!((iov[1].iov_base as usize, iov[1].iov_len), (202, 3));
        assert_eq!(advance(&mut iov, 1, 3), 2);
        assert_eq!(advance(&mut iov, 2, 8), 3);
        let mut iov = [iovec(100, 10)];
        assert_eq!(advance(&mut iov, 0, 0), 0);
        assert_eq!(iov[0].iov_len, 10);
    }
}
