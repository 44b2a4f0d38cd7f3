//! Out-of-order placement: Placement ahead of Delivery (RFC 5041 section
//! 5.3, RFC 5044 appendices A.3 and B.1.4).
//!
//! An out-of-order TCP segment that holds whole FPDUs, each with a CRC
//! that checks, is placed at once: Writes and Read Responses through the
//! STag table, Sends into their posted receive at their MO; a Read
//! Request's 28 octets are kept with it. Nothing else of their arrival
//! happens yet. When the in-order stream reaches such an FPDU it is
//! delivered like any other, its checks run again, with no copy: the
//! Read's progress, the receive's completion, invalidation, the Read
//! Request joining the inbound queue, and the Terminate an error earns
//! all come in stream order.
//!
//! As with any RNIC that places out of order, a Write that follows a Read
//! Request in the stream may be placed before the Read is answered; an
//! application that needs the Read to see the older data fences the
//! Write (the verbs' fence), as RFC 5040 section 5.5 leaves it.
//!
//! Placement may start before the peer's first FPDU has arrived, unless
//! that first FPDU is a Send RTR (RFC 6581): it takes an MSN and no
//! receive, so until it is in, no Send can be matched to its receive.
//!
//! A segment qualifies only if every FPDU in it places; otherwise the LLP
//! keeps it and it arrives in order later (what was written meanwhile is
//! written again with the same octets). Without CRCs, or with Markers, an
//! out-of-order segment is never placed early: the header of an FPDU that
//! a segment seems to start with is only trusted once its CRC vouches
//! for it. If the stream reaches an FPDU placed early while part of an
//! FPDU is still incomplete before it, the segment did not start at an
//! FPDU boundary after all (only a peer embedding FPDUs in its payload
//! can arrange that); the stream ends with a Terminate.

use std::collections::BTreeMap;

use super::receive::{carries_send_payload, Payload};
use super::QpEngine;
use crate::mem::Stag;
use crate::mpa::framer::front_fpdu;
use crate::mpa::Rtr;
use crate::wire::ddp::{BufferModel, DdpRepr};
use crate::wire::rdmap::{Opcode, RdmapControl, RdmapSegment, QN_READ_REQUEST, READ_REQUEST_LEN};
use crate::wire::terminate::TermError;
use crate::wire::terminate_ulpdu::Fault;

/// At most this many FPDUs wait, placed, for the in-order stream; past
/// it out-of-order segments are left to the LLP's reassembly buffer.
const MAX_EARLY: usize = 4096;

/// An FPDU placed ahead of the in-order stream.
#[derive(Debug, Clone, Copy)]
struct Early {
    /// Its length in the stream.
    wire_len: u64,
    ddp: DdpRepr,
    control: RdmapControl,
    /// Payload octets placed.
    placed: usize,
    /// A Read Request's header, for the inbound queue at delivery.
    read_request: Option<[u8; READ_REQUEST_LEN]>,
}

/// The FPDUs placed ahead of the in-order stream, by stream offset.
#[derive(Debug, Default)]
pub(super) struct EarlyFpdus {
    by_offset: BTreeMap<u64, Early>,
    /// Scratch for the FPDUs of the segment being placed.
    segment: Vec<(u64, Early)>,
}

impl QpEngine {
    /// Places the out-of-order stream octets `data` found at `offset`
    /// (counted from the first octet of Full Operation, like the octets
    /// [`on_bytes`](Self::on_bytes) takes) straight into registered memory
    /// when they are whole FPDUs that can be placed (see the module
    /// documentation). Returns whether it did: the LLP then keeps nothing
    /// of them and never hands them over in order. Otherwise nothing of
    /// them counts and the LLP should hold them for in-order delivery.
    pub fn place_out_of_order(&mut self, offset: u64, data: &[u8]) -> bool {
        let allowed = self.early_placement
            && self.accepts_work()
            && self.knows_receive_msns()
            && offset > self.rx_offset
            && !data.is_empty()
            && self.early.by_offset.len() < MAX_EARLY;
        if !allowed {
            return false;
        }
        let mut segment = std::mem::take(&mut self.early.segment);
        segment.clear();
        let (mut at, mut rest) = (offset, data);
        while !rest.is_empty() {
            let Some((early, len)) = self.place_one(rest) else {
                self.early.segment = segment;
                return false;
            };
            segment.push((at, early));
            at += early.wire_len;
            rest = &rest[len..];
        }
        for (at, early) in segment.drain(..) {
            self.counters.fpdus_placed_out_of_order += 1;
            self.counters.bytes_placed_out_of_order += early.placed as u64;
            self.counters.bytes_placed += early.placed as u64;
            self.early.by_offset.insert(at, early);
        }
        self.early.segment = segment;
        true
    }

    /// Whether a Send's MSN tells which posted receive it fills. Not
    /// before a Send RTR the responder waits for has arrived: that RTR
    /// takes an MSN of its own and no receive (RFC 6581 section 9.2),
    /// and until it has, a later Send would be matched one receive off.
    /// Any other first FPDU changes nothing for the ones behind it, so
    /// they may be placed before it arrives.
    fn knows_receive_msns(&self) -> bool {
        self.peer_started || self.expected_rtr != Some(Rtr::Send)
    }

    /// Places the FPDU at the front of `data`, if it is whole, its CRC
    /// checks and it is a Write, Read Response or Send that fits where it
    /// goes; returns it and its length.
    fn place_one(&mut self, data: &[u8]) -> Option<(Early, usize)> {
        let (ulpdu, wire_len) = front_fpdu(data, true)?.ok()?;
        let segment = RdmapSegment::parse(ulpdu).ok()?;
        let payload = segment.payload;
        let placed = match (segment.ddp.model, segment.opcode()) {
            (BufferModel::Tagged { stag, to }, Opcode::RdmaWrite) => {
                self.table.place(Stag(stag), self.pd, to, payload).is_ok()
            }
            (BufferModel::Tagged { stag, to }, Opcode::ReadResponse) => {
                let len = u32::try_from(payload.len()).ok()?;
                self.sq.expects_read_response(stag, to, len)
                    && self
                        .table
                        .local_write(Stag(stag), self.pd, to, payload)
                        .is_ok()
            }
            (BufferModel::Untagged { qn, msn, mo, .. }, opcode)
                if opcode.queue_number() == Some(qn) && carries_send_payload(opcode) =>
            {
                self.take_from_srq(msn);
                self.rq.write(msn, mo, payload).is_ok()
            }
            // A whole Read Request is kept; its checks come in order.
            (BufferModel::Untagged { qn, mo: 0, .. }, Opcode::ReadRequest)
                if qn == QN_READ_REQUEST && segment.ddp.last =>
            {
                let request = payload.try_into().ok()?;
                let early = Early {
                    wire_len: wire_len as u64,
                    ddp: segment.ddp,
                    control: segment.control,
                    placed: 0,
                    read_request: Some(request),
                };
                return Some((early, wire_len));
            }
            _ => false,
        };
        let early = Early {
            wire_len: wire_len as u64,
            ddp: segment.ddp,
            control: segment.control,
            placed: payload.len(),
            read_request: None,
        };
        placed.then_some((early, wire_len))
    }

    /// Delivers, in order, the FPDUs placed early that the in-order stream
    /// has now reached, and moves the stream past them. Once the stream
    /// has ended in Terminate or Error they are only passed over.
    pub(super) fn deliver_early(&mut self) {
        while let Some(entry) = self.early.by_offset.first_entry() {
            if *entry.key() > self.rx_offset {
                return;
            }
            let (at, early) = entry.remove_entry();
            let aligned = at == self.rx_offset && self.reader.skip(early.wire_len);
            self.rx_offset = at.max(self.rx_offset) + early.wire_len;
            if !self.accepts_work() {
                continue;
            }
            if !aligned {
                self.send_terminate(Fault::new(TermError::MpaLocalCatastrophic), &[]);
                continue;
            }
            self.counters.fpdus_received += 1;
            let segment = RdmapSegment {
                ddp: early.ddp,
                control: early.control,
                payload: early.read_request.as_ref().map_or(&[], |r| &r[..]),
            };
            if let Err(fault) = self.dispatch(&segment, Payload::Placed(early.placed)) {
                self.send_terminate(fault, &echo(&segment, early.placed));
            }
        }
    }

    /// The stream offset of the next octet the LLP hands over in order:
    /// the octets taken so far and the FPDUs placed early that followed
    /// them.
    pub fn rx_offset(&self) -> u64 {
        self.rx_offset
    }
}

/// A ULPDU to echo in a Terminate for an FPDU placed early: its header,
/// and a payload of its length (a Terminate echoes only the header and
/// the segment's length; a Read Request's is the kept one).
fn echo(segment: &RdmapSegment, placed: usize) -> Vec<u8> {
    let payload = placed.max(segment.payload.len());
    let mut ulpdu = vec![0; segment.ddp.header_len() + payload];
    // The buffer holds the header; the empty payload leaves the rest.
    let _ = segment.emit(&mut ulpdu);
    ulpdu
}
