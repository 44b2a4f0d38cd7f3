//! [`QpCounters`]: what a queue pair's stream has carried, for the
//! application and the perf tool. The dataplane that runs the stream
//! publishes them as it works (relaxed atomic stores, no lock); the
//! application reads a snapshot with [`crate::QueuePair::counters`].
//!
//! They name the events RFC 5044 appendix A and RFC 5041 section 5.3 are
//! about: FPDUs placed out of order, octets that had to wait in TCP's
//! reassembly buffer, FPDUs split across segments by the appendix A.1
//! exceptions, CRC errors, and Terminates (RFC 5040 section 4.8), and the
//! loss recovery of the TCP below: retransmissions (RFC 5681, RFC 6675),
//! retransmission timeouts (RFC 6298) and those found spurious (RFC
//! 5682, RFC 3708), fast recoveries, D-SACKs (RFC 2883), spurious recoveries undone
//! (RFC 3708) and tail loss probes (RFC 8985).

use std::sync::atomic::{AtomicU64, Ordering};

use uwarp_stack::rdmap::EngineCounters;
use uwarp_stack::tcp::Stats;

/// Declares `QpCounters` (every field a `u64`) with `FIELDS`, its number
/// of fields, and its conversions to and from an array in field order,
/// which publishing through atomics and adding field by field use.
macro_rules! qp_counters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$doc:meta])* pub $field:ident,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$doc])* pub $field: u64,)*
        }

        /// The number of counters.
        const FIELDS: usize = [$(stringify!($field)),*].len();

        impl $name {
            fn to_array(self) -> [u64; FIELDS] {
                [$(self.$field),*]
            }

            fn from_array(array: [u64; FIELDS]) -> Self {
                let [$($field),*] = array;
                Self { $($field),* }
            }
        }
    };
}

qp_counters! {
    /// What a queue pair's stream has carried since it connected. Fields a
    /// transport has no such event for stay 0: the kernel-socket transport
    /// sees only an in-order byte stream, so it places nothing out of order
    /// and cannot see the kernel's own reassembly (it counts only what its
    /// FPDU reader buffers: FPDUs its reads cut in two, and with Markers
    /// every octet); of the kernel's TCP it reports only `retransmissions`
    /// (`tcpi_total_retrans` of `TCP_INFO`, read at most once a
    /// millisecond).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct QpCounters {
        /// FPDUs sent.
        pub fpdus_sent,
        /// Of those, the ones whose payload was sent from registered
        /// memory, not from a copy in TCP's send queue (zero-copy
        /// transmit, `DpdkConfig::zero_copy_from`).
        pub fpdus_sent_by_reference,
        /// Of those, the ones the socket transport wrote to its socket
        /// straight from registered memory (`writev`), not from a copy.
        pub fpdus_written_through,
        /// FPDUs received.
        pub fpdus_received,
        /// Payload octets placed into registered memory.
        pub bytes_placed,
        /// TCP segments placed out of order, straight into registered memory.
        pub segments_placed_out_of_order,
        /// FPDUs in those segments.
        pub fpdus_placed_out_of_order,
        /// Payload octets in those FPDUs.
        pub bytes_placed_out_of_order,
        /// Stream octets copied into a reassembly buffer before they were
        /// read: TCP's (out of order and not placed), or the FPDU reader's
        /// (part of an FPDU whose rest was still to come, as when the
        /// peer's TCP cuts segments anywhere; every octet when Markers are
        /// on). It counts copies: an octet that went through both counts
        /// twice.
        pub bytes_reassembled,
        /// FPDUs this end split across TCP segments (RFC 5044 appendix A.1:
        /// the MSS shrank, or the peer's window stayed below one FPDU).
        pub fpdus_split,
        /// FPDUs whose CRC did not check (each ends the stream).
        pub crc_errors,
        /// Terminates sent.
        pub terminates_sent,
        /// Terminates received.
        pub terminates_received,
        /// TCP segments resent (timeout, fast retransmit, SACK recovery).
        pub retransmissions,
        /// TCP retransmission timer expiries (RFC 6298 section 5).
        pub timeouts,
        /// Of those, the ones found spurious and undone (F-RTO, RFC 5682,
        /// or D-SACKs for every copy, RFC 3708):
        /// nothing was lost, the path or the peer was late.
        pub spurious_timeouts,
        /// TCP fast recoveries entered (RFC 5681, RFC 6582, RFC 6675).
        pub fast_recoveries,
        /// Fast recoveries D-SACKs showed spurious, undone (RFC 3708).
        pub spurious_recoveries,
        /// D-SACK blocks received: the peer got some data twice (RFC 2883).
        pub dsacks_received,
        /// D-SACK blocks sent: some data arrived twice.
        pub dsacks_sent,
        /// TCP tail loss probes sent (RFC 8985 section 7).
        pub tail_loss_probes,
        /// Rounds of the stream that an application thread ran, and that
        /// did something: on the socket transport a post writes to the
        /// socket on the posting thread, and a poll of an empty completion
        /// queue reads the sockets feeding it, without waiting for the
        /// dataplane thread (0 on the DPDK transport, whose cores run
        /// every stream).
        pub application_rounds,
    }
}

/// What the transport below the engine counts (the engine counts the
/// rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TransportCounters {
    pub(crate) segments_placed_out_of_order: u64,
    pub(crate) bytes_reassembled: u64,
    pub(crate) fpdus_split: u64,
    pub(crate) retransmissions: u64,
    pub(crate) timeouts: u64,
    pub(crate) spurious_timeouts: u64,
    pub(crate) fast_recoveries: u64,
    pub(crate) spurious_recoveries: u64,
    pub(crate) dsacks_received: u64,
    pub(crate) dsacks_sent: u64,
    pub(crate) tail_loss_probes: u64,
    pub(crate) application_rounds: u64,
}

impl TransportCounters {
    /// Takes the counters uwarp's TCP connection keeps.
    pub(crate) fn take_tcp(&mut self, stats: &Stats) {
        self.fpdus_split = stats.records_split;
        self.retransmissions = stats.retransmissions;
        self.timeouts = stats.timeouts;
        self.spurious_timeouts = stats.spurious_timeouts;
        self.fast_recoveries = stats.fast_recoveries;
        self.spurious_recoveries = stats.spurious_recoveries;
        self.dsacks_received = stats.dsacks_received;
        self.dsacks_sent = stats.dsacks_sent;
        self.tail_loss_probes = stats.tail_loss_probes;
    }
}

impl QpCounters {
    /// The engine's counters and the transport's together.
    pub(crate) fn merge(engine: EngineCounters, transport: TransportCounters) -> Self {
        Self {
            fpdus_sent: engine.fpdus_sent,
            fpdus_sent_by_reference: engine.fpdus_sent_by_reference,
            fpdus_written_through: engine.fpdus_written_through,
            fpdus_received: engine.fpdus_received,
            bytes_placed: engine.bytes_placed,
            segments_placed_out_of_order: transport.segments_placed_out_of_order,
            fpdus_placed_out_of_order: engine.fpdus_placed_out_of_order,
            bytes_placed_out_of_order: engine.bytes_placed_out_of_order,
            bytes_reassembled: transport.bytes_reassembled + engine.bytes_buffered,
            fpdus_split: transport.fpdus_split,
            crc_errors: engine.crc_errors,
            terminates_sent: engine.terminates_sent,
            terminates_received: engine.terminates_received,
            retransmissions: transport.retransmissions,
            timeouts: transport.timeouts,
            spurious_timeouts: transport.spurious_timeouts,
            fast_recoveries: transport.fast_recoveries,
            spurious_recoveries: transport.spurious_recoveries,
            dsacks_received: transport.dsacks_received,
            dsacks_sent: transport.dsacks_sent,
            tail_loss_probes: transport.tail_loss_probes,
            application_rounds: transport.application_rounds,
        }
    }
}

impl std::ops::Add for QpCounters {
    type Output = Self;

    /// Field by field: the counters of several queue pairs together.
    fn add(self, other: Self) -> Self {
        let (a, b) = (self.to_array(), other.to_array());
        Self::from_array(std::array::from_fn(|i| a[i] + b[i]))
    }
}

/// A queue pair's counters as the dataplane publishes them.
#[derive(Debug, Default)]
pub(crate) struct CounterCells([AtomicU64; FIELDS]);

impl CounterCells {
    /// Publishes `counters` (from the one dataplane thread that runs the
    /// stream).
    pub(crate) fn publish(&self, counters: QpCounters) {
        for (cell, value) in self.0.iter().zip(counters.to_array()) {
            cell.store(value, Ordering::Relaxed);
        }
    }

    /// The last published counters. Each field is one the dataplane
    /// stored; fields may come from successive publications.
    pub(crate) fn snapshot(&self) -> QpCounters {
        QpCounters::from_array(std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publication_reads_back_field_for_field() {
        let counters = QpCounters::from_array(std::array::from_fn(|i| i as u64 * 3 + 1));
        let cells = CounterCells::default();
        assert_eq!(cells.snapshot(), QpCounters::default());
        cells.publish(counters);
        assert_eq!(cells.snapshot(), counters);
        assert_eq!(
            counters.to_array(),
            std::array::from_fn(|i| i as u64 * 3 + 1)
        );
        let doubled = counters + counters;
        assert_eq!(
            doubled.to_array(),
            std::array::from_fn(|i| i as u64 * 6 + 2)
        );
    }
}
