//! The transmit side of a stream: a Terminate goes out ahead of anything
//! else and is followed by the LLP close (RFC 5040 section 6.6); the
//! responder sends nothing before the initiator's first FPDU (RFC 5044
//! section 7.1.2, RFC 6581 section 9.2); send queue segments and RDMA Read
//! Responses (RFC 5040 sections 5 and 6.4) take turns, each framed into
//! one FPDU (RFC 5044 section 4); a graceful disconnect asks for the close
//! once nothing is left to send or to answer (RFC 5041 section 6.2.1).

use super::send_queue::LocalFault;
use super::{terminate, LlpClose, QpEngine};
use crate::mem::Stag;
use crate::mpa::FpduWriter;
use crate::verbs::QpState;
use crate::wire::terminate::TermError;

impl QpEngine {
    /// Appends FPDUs to `out` until about `budget` octets were added or
    /// nothing is left to send; returns how many octets it added.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>, budget: usize) -> usize {
        let start = out.len();
        self.transmit_terminate(out);
        if self.peer_started {
            while out.len() - start < budget && self.accepts_work() {
                self.responses_first = !self.responses_first;
                let mut turns = [Self::send_from_queue, Self::send_read_response];
                if self.responses_first {
                    turns.reverse();
                }
                if !turns.iter().any(|turn| turn(self, out)) {
                    break;
                }
            }
            // A local error met on the way goes out at once.
            self.transmit_terminate(out);
        }
        if self.state == QpState::Closing
            && self.sq.is_idle()
            && self.inbound_reads.pending() == 0
            && self.llp_close.is_none()
        {
            self.llp_close = Some(LlpClose::Graceful);
        }
        out.len() - start
    }

    /// Appends at most one FPDU to `out` (the next Terminate, send queue
    /// segment or Read Response); returns whether it did. A transport
    /// that cuts TCP segments at FPDU boundaries (RFC 5044 section 5.2)
    /// queues each one as a record.
    pub fn poll_fpdu(&mut self, out: &mut Vec<u8>) -> bool {
        // A budget of one octet stops the loop after the first FPDU; a
        // Terminate that a failed fetch queued instead of a segment still
        // goes out, and is then the only FPDU.
        self.poll_transmit(out, 1) > 0
    }

    /// Sends the queued Terminate, if there is one, and asks for the close
    /// that follows it.
    fn transmit_terminate(&mut self, out: &mut Vec<u8>) {
        if let Some(ulpdu) = self.terminate_out.take() {
            frame(&mut self.writer, &[&ulpdu], out);
            self.counters.terminates_sent += 1;
            self.llp_close.get_or_insert(LlpClose::Graceful);
        }
    }

    /// Sends the next send queue segment; `false` when there is none.
    fn send_from_queue(&mut self, out: &mut Vec<u8>) -> bool {
        match self.sq.next_segment(self.mulpdu, &self.table, self.pd) {
            Ok(Some(segment)) => {
                let parts = [&segment.header[..segment.header_len], segment.payload];
                frame(&mut self.writer, &parts, out);
                self.counters.fpdus_sent += 1;
                true
            }
            Ok(None) => false,
            Err(LocalFault) => {
                // The request completed with its local error; that ends the
                // stream (RDMAC verbs), and the peer learns of it through a
                // local catastrophic Terminate.
                let fault = terminate::Fault::new(TermError::RdmapLocalCatastrophic);
                self.send_terminate(fault, &[]);
                false
            }
        }
    }

    /// Sends the next Read Response segment; `false` when none is queued.
    fn send_read_response(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(segment) = self.inbound_reads.next_segment(self.mulpdu) else {
            return false;
        };
        let mut data = std::mem::take(&mut self.scratch);
        data.resize(segment.len as usize, 0);
        let fetched = self.table.fetch(
            Stag(segment.source_stag),
            self.pd,
            segment.source_to,
            &mut data,
        );
        match fetched {
            Ok(()) => {
                let header = segment.header();
                frame(&mut self.writer, &[&header, &data], out);
                self.counters.fpdus_sent += 1;
            }
            Err(err) => {
                // The region changed after the request was validated: the
                // Terminate names the request (R).
                let fault = terminate::Fault {
                    error: err.rdmap_error(),
                    rdmap_header: Some(segment.request.to_bytes()),
                };
                self.send_terminate(fault, &[]);
            }
        }
        self.scratch = data;
        true
    }
}

/// Frames one ULPDU made of `parts` into `out`.
fn frame(writer: &mut FpduWriter, parts: &[&[u8]], out: &mut Vec<u8>) {
    writer
        .write(parts, out)
        .expect("every ULPDU the engine builds fits an FPDU: the MULPDU is at most 65535");
}
