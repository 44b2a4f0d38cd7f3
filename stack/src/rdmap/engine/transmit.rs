//! The transmit side of a stream: a Terminate goes out ahead of anything
//! else and is followed by the LLP close (RFC 5040 section 6.6); the
//! responder sends nothing before the initiator's first FPDU (RFC 5044
//! section 7.1.2, RFC 6581 section 9.2); send queue segments and RDMA Read
//! Responses (RFC 5040 sections 5 and 6.4) take turns, each framed into
//! one FPDU (RFC 5044 section 4); a graceful disconnect asks for the close
//! once nothing is left to send or to answer (RFC 5041 section 6.2.1).
//!
//! Each FPDU is framed in room the transport's [`FpduSink`] gives, and its
//! payload is read from registered memory straight into that room, so a
//! transport that hands out room in its TCP send queue sends data that was
//! copied once on its way out of the application's memory. A sink that
//! takes payloads by reference ([`FpduSink::references_from`]) gets large
//! ones as a [`BufferSlice`] of the application's memory instead, with
//! only the headers, pad and CRC framed (zero-copy transmit); a Send or
//! Write sent so completes once the LLP acknowledged it
//! ([`QpEngine::on_acknowledged`]), since until then a retransmission
//! reads that memory again. Payloads in foreign memory (registered where
//! the application allocated it, [`MemoryBuffer::from_raw_parts`]) are
//! framed by copy even then: the application may free that memory as soon
//! as it is deregistered, and a reference could outlive that.
//!
//! A byte-stream sink that writes payloads through
//! ([`FpduSink::writes_through_from`], the socket transport's `writev`)
//! gets large ones of FPDUs without CRC or Markers lent ([`Lent`],
//! foreign memory too) and pinned until its round ends: it hands them to
//! the kernel where they lie and copies what the kernel did not take
//! before the round ends, so a Send or Write sent so completes as a
//! copied one does.
//!
//! [`MemoryBuffer::from_raw_parts`]: crate::mem::MemoryBuffer::from_raw_parts

use super::send_queue::LocalFault;
use super::send_queue::MAX_HEADER_LEN;
use super::{LlpClose, QpEngine};
use crate::mem::{Access, BufferSlice, Burst, Lent, Stag, TaggedError};
use crate::mpa::FpduWriter;
use crate::record::{FpduSink, VecSink};
use crate::verbs::QpState;
use crate::verbs::WcStatus;
use crate::wire::terminate::TermError;
use crate::wire::terminate_ulpdu::Fault;
use crate::wire::WireError;

impl QpEngine {
    /// Appends FPDUs to `out` until about `budget` octets were added or
    /// nothing is left to send; returns how many octets it added.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>, budget: usize) -> usize {
        self.transmit(&mut VecSink::new(out), budget)
    }

    /// Frames FPDUs into `sink` until about `budget` octets were framed,
    /// nothing is left to send or the sink has no room; returns how many
    /// octets it framed. For a byte-stream transport with a sink of its
    /// own, one that writes payloads through
    /// ([`FpduSink::write_through`]).
    pub fn poll_transmit_to<S: FpduSink + ?Sized>(&mut self, sink: &mut S, budget: usize) -> usize {
        self.transmit(sink, budget)
    }

    /// Frames at most one FPDU (the next Terminate, send queue segment or
    /// Read Response) into `sink`; returns whether it did. A transport
    /// that cuts TCP segments at FPDU boundaries (RFC 5044 section 5.2)
    /// gives room for each one as a record of its send queue.
    pub fn poll_fpdu(&mut self, sink: &mut dyn FpduSink) -> bool {
        // A budget of one octet stops after the first FPDU; a Terminate
        // that a failed fetch queued instead of a segment still goes out,
        // and is then the only FPDU.
        self.transmit(sink, 1) > 0
    }

    /// Frames what is due into `sink` until about `budget` octets were
    /// framed; returns how many were.
    fn transmit<S: FpduSink + ?Sized>(&mut self, sink: &mut S, budget: usize) -> usize {
        // Payloads the sink writes through stay readable until its round
        // ends (`FpduSink::write_through`).
        let through_round = sink.writes_through_from().map(|_| Burst::begin());
        let framed = self.transmit_round(sink, budget);
        if through_round.is_some() {
            sink.end_round();
        }
        framed
    }

    /// The FPDUs of one [`transmit`](Self::transmit).
    fn transmit_round<S: FpduSink + ?Sized>(&mut self, sink: &mut S, budget: usize) -> usize {
        let mut framed = self.transmit_terminate(sink);
        if self.peer_started {
            while framed < budget && self.accepts_work() {
                self.responses_first = !self.responses_first;
                let mut turns = [Self::send_from_queue::<S>, Self::send_read_response::<S>];
                if self.responses_first {
                    turns.reverse();
                }
                let Some(len) = turns.iter().find_map(|turn| turn(self, sink)) else {
                    break;
                };
                framed += len;
            }
            // A local error met on the way goes out at once.
            framed += self.transmit_terminate(sink);
        }
        if self.state == QpState::Closing
            && self.sq.is_idle()
            && self.inbound_reads.pending() == 0
            && self.llp_close.is_none()
        {
            self.llp_close = Some(LlpClose::Graceful);
        }
        framed
    }

    /// Sends the queued Terminate, if there is one and the sink has room,
    /// and asks for the close that follows it; returns the octets framed.
    fn transmit_terminate<S: FpduSink + ?Sized>(&mut self, sink: &mut S) -> usize {
        let Some(ulpdu) = self.terminate_out.as_ref() else {
            return 0;
        };
        let framed = frame(&mut self.writer, sink, ulpdu.len(), |out| {
            out.copy_from_slice(ulpdu);
            Ok(())
        });
        let Framed::Sent(len) = framed else {
            return 0;
        };
        self.terminate_out = None;
        self.counters.terminates_sent += 1;
        self.llp_close.get_or_insert(LlpClose::Graceful);
        len
    }

    /// Sends the next send queue segment and returns the octets framed;
    /// `None` when there is none or the sink has no room for it.
    fn send_from_queue<S: FpduSink + ?Sized>(&mut self, sink: &mut S) -> Option<usize> {
        let segment = match self.sq.next_segment(self.mulpdu, &self.table, self.pd) {
            Ok(Some(segment)) => segment,
            Ok(None) => return None,
            Err(LocalFault) => {
                // The request completed with its local error; that ends the
                // stream (RDMAC verbs), and the peer learns of it through a
                // local catastrophic Terminate.
                self.send_local_catastrophic();
                return None;
            }
        };
        let (sq, table, pd) = (&self.sq, &self.table, self.pd);
        let header = &segment.header[..segment.header_len];
        let writer = &mut self.writer;
        let through =
            writes_through(sink, writer, header.len(), segment.payload_len).and_then(|parts| {
                sq.lend_payload(&segment, table, pd, |payload| {
                    frame_through(writer, sink, header, &payload, parts)
                })
            });
        let referencing = through
            .is_none()
            .then(|| references(sink, writer, header.len(), segment.payload_len))
            .flatten()
            .and_then(|parts| Some((parts, sq.payload_slice(&segment, table, pd)?)));
        let (way, framed) = match (through, referencing) {
            (Some(through), _) => (Way::Through, through.unwrap_or_else(Framed::Failed)),
            (None, Some((parts, Ok(payload)))) => (
                Way::Reference,
                frame_referencing(writer, sink, header, payload, parts),
            ),
            (None, Some((_, Err(err)))) => (Way::Reference, Framed::Failed(err)),
            (None, None) => (
                Way::Copy,
                frame(writer, sink, segment.ulpdu_len(), |out| {
                    let (head, payload) = out.split_at_mut(header.len());
                    head.copy_from_slice(header);
                    sq.copy_payload(&segment, table, pd, payload)
                }),
            ),
        };
        match framed {
            Framed::Sent(len) => {
                let until = (way == Way::Reference).then(|| self.writer.offset());
                self.sq.segment_sent(&segment, until);
                self.count_sent(way);
                Some(len)
            }
            Framed::NoRoom => None,
            Framed::Failed(_) => {
                // A region of the gather list went away while the message
                // was being sent: part of it is out already.
                self.sq.fail_current(WcStatus::LocalProtectionError);
                self.send_local_catastrophic();
                None
            }
        }
    }

    /// Queues the Terminate that tells the peer a local error ended the
    /// stream.
    fn send_local_catastrophic(&mut self) {
        let fault = Fault::new(TermError::RdmapLocalCatastrophic);
        self.send_terminate(fault, &[]);
    }

    /// Sends the next Read Response segment and returns the octets
    /// framed (none when a failed fetch queued a Terminate instead);
    /// `None` when no response is queued or the sink has no room for it.
    fn send_read_response<S: FpduSink + ?Sized>(&mut self, sink: &mut S) -> Option<usize> {
        let segment = self.inbound_reads.peek_segment(self.mulpdu)?;
        let header = segment.header();
        let (table, pd) = (&self.table, self.pd);
        let (stag, to, len) = (
            Stag(segment.source_stag),
            segment.source_to,
            segment.len as usize,
        );
        let writer = &mut self.writer;
        // Written through from where it lies when the sink does that;
        // else held in place when the sink takes it and the memory may be
        // held (it is not foreign).
        let through = writes_through(sink, writer, header.len(), len).map(|parts| {
            let at = (to, len);
            table
                .lend(stag, pd, Access::REMOTE_READ, at, |payload| {
                    frame_through(writer, sink, &header, &payload, parts)
                })
                .unwrap_or_else(Framed::Failed)
        });
        let referencing = through
            .is_none()
            .then(|| references(sink, writer, header.len(), len))
            .flatten()
            .and_then(|parts| Some((parts, table.fetch_slice(stag, pd, to, len).transpose()?)));
        let (way, framed) = match (through, referencing) {
            (Some(framed), _) => (Way::Through, framed),
            (None, Some((parts, Ok(payload)))) => (
                Way::Reference,
                frame_referencing(writer, sink, &header, payload, parts),
            ),
            (None, Some((_, Err(err)))) => (Way::Reference, Framed::Failed(err)),
            (None, None) => (
                Way::Copy,
                frame(writer, sink, header.len() + len, |out| {
                    let (head, payload) = out.split_at_mut(header.len());
                    head.copy_from_slice(&header);
                    table.fetch(stag, pd, to, payload)
                }),
            ),
        };
        let len = match framed {
            Framed::NoRoom => return None,
            Framed::Sent(len) => {
                self.count_sent(way);
                len
            }
            Framed::Failed(err) => {
                // The region changed after the request was validated: the
                // Terminate names the request (R).
                let fault = Fault {
                    error: err.rdmap_error(),
                    rdmap_header: Some(segment.request.to_bytes()),
                };
                self.send_terminate(fault, &[]);
                0
            }
        };
        self.inbound_reads.segment_sent(&segment);
        Some(len)
    }
}

impl QpEngine {
    /// Counts one FPDU sent the way `way` says.
    fn count_sent(&mut self, way: Way) {
        self.counters.fpdus_sent += 1;
        self.counters.fpdus_sent_by_reference += u64::from(way == Way::Reference);
        self.counters.fpdus_written_through += u64::from(way == Way::Through);
    }
}

/// How an FPDU's payload reaches the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Copied into the sink's room.
    Copy,
    /// Held by reference until the LLP acknowledges it.
    Reference,
    /// Written through from where it lies, during the call.
    Through,
}

/// What became of an FPDU offered to a sink.
#[derive(Debug, PartialEq, Eq)]
enum Framed {
    /// Framed and committed: this many octets.
    Sent(usize),
    /// The sink had no room; nothing changed.
    NoRoom,
    /// Its payload could not be read; nothing was committed.
    Failed(TaggedError),
}

/// Why filling a frame failed.
enum FillError {
    /// The payload could not be read from its region.
    Fetch(TaggedError),
    /// The ULPDU cannot be framed.
    Wire(WireError),
}

impl From<WireError> for FillError {
    fn from(err: WireError) -> Self {
        FillError::Wire(err)
    }
}

/// Whether `sink` takes a payload of `len` octets by reference after a
/// header of `header_len`, and if so the lengths of the parts around it
/// ([`FpduWriter::referencing_parts`]): never an empty one (a zero-length
/// Read Response answers a Read RTR whose STag need not be valid, and is
/// checked by no one), nor with Markers on, which would fall inside it.
fn references<S: FpduSink + ?Sized>(
    sink: &S,
    writer: &FpduWriter,
    header_len: usize,
    len: usize,
) -> Option<(usize, usize)> {
    let taken = len > 0 && sink.references_from().is_some_and(|min| len >= min);
    taken.then(|| writer.referencing_parts(header_len, len))?
}

/// Whether `sink` writes a payload of `len` octets through after a
/// header of `header_len`, and if so the lengths of the parts around it
/// ([`FpduWriter::through_parts`]: never with CRCs or Markers on). Not
/// an empty one, as [`references`] says.
fn writes_through<S: FpduSink + ?Sized>(
    sink: &S,
    writer: &FpduWriter,
    header_len: usize,
    len: usize,
) -> Option<(usize, usize)> {
    let taken = len > 0 && sink.writes_through_from().is_some_and(|min| len >= min);
    taken.then(|| writer.through_parts(header_len, len))?
}

/// Offers the FPDU of `header` and the lent `payload` to `sink` to write
/// through, with the parts `writes_through` gave.
fn frame_through<S: FpduSink + ?Sized>(
    writer: &mut FpduWriter,
    sink: &mut S,
    header: &[u8],
    payload: &Lent<'_>,
    (head_len, tail_len): (usize, usize),
) -> Framed {
    // The length field and the longest header; the pad and the CRC.
    let mut head = [0; 2 + MAX_HEADER_LEN];
    let mut tail = [0; 3 + 4];
    let (head, tail) = (&mut head[..head_len], &mut tail[..tail_len]);
    let len = writer
        .frame_through(header, payload.len(), head, tail)
        .expect("the parts have the lengths through_parts gave");
    if !sink.write_through(head, payload, tail) {
        return Framed::NoRoom;
    }
    writer.wrote(len);
    Framed::Sent(len)
}

/// Frames the ULPDU of `header` and `payload`, held by reference, into
/// room from `sink` with the parts `references` gave, and commits it.
fn frame_referencing<S: FpduSink + ?Sized>(
    writer: &mut FpduWriter,
    sink: &mut S,
    header: &[u8],
    payload: BufferSlice,
    (head_len, tail_len): (usize, usize),
) -> Framed {
    let Some((head, tail)) = sink.reserve_referencing(head_len, payload.clone(), tail_len) else {
        return Framed::NoRoom;
    };
    let written = writer
        .write_referencing(header, &payload, head, tail)
        .expect("the rooms have the lengths referencing_parts gave");
    sink.commit();
    Framed::Sent(written)
}

/// Frames the ULPDU of `ulpdu_len` octets that `fill` writes into room
/// from `sink`, and commits it.
fn frame<S: FpduSink + ?Sized>(
    writer: &mut FpduWriter,
    sink: &mut S,
    ulpdu_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), TaggedError>,
) -> Framed {
    const FITS: &str = "every ULPDU the engine builds fits an FPDU: the MULPDU is at most 65535";
    let len = writer.next_len(ulpdu_len).expect(FITS);
    let Some(room) = sink.reserve(len) else {
        return Framed::NoRoom;
    };
    match writer.write_with(ulpdu_len, room, |out| fill(out).map_err(FillError::Fetch)) {
        Ok(written) => {
            sink.commit();
            Framed::Sent(written)
        }
        Err(FillError::Fetch(err)) => Framed::Failed(err),
        Err(FillError::Wire(err)) => panic!("{FITS}: {err:?}"),
    }
}
