//! What a run measures: an operation ([`Op`]) and a metric ([`Metric`]),
//! together one of perftest's tests ([`Mode`]: `write-bw` is
//! `ib_write_bw`, `send-lat` is `ib_send_lat`, ...).

/// The RDMA operation a run moves its data with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// RDMA Write.
    Write,
    /// RDMA Read.
    Read,
    /// Send into posted receives.
    Send,
}

impl Op {
    /// The operation's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
            Self::Send => "send",
        }
    }
}

/// What a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Bandwidth: `tx_depth` operations kept outstanding.
    Bandwidth,
    /// Latency: one operation at a time (a ping-pong, or a Read's round
    /// trip).
    Latency,
}

/// One of the six tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// The operation.
    pub op: Op,
    /// The metric.
    pub metric: Metric,
}

impl Mode {
    /// Its subcommand name, e.g. `write-bw`.
    pub fn name(self) -> &'static str {
        match (self.op, self.metric) {
            (Op::Write, Metric::Bandwidth) => "write-bw",
            (Op::Write, Metric::Latency) => "write-lat",
            (Op::Read, Metric::Bandwidth) => "read-bw",
            (Op::Read, Metric::Latency) => "read-lat",
            (Op::Send, Metric::Bandwidth) => "send-bw",
            (Op::Send, Metric::Latency) => "send-lat",
        }
    }

    /// Latency is half the round trip for the ping-pongs (as
    /// `ib_write_lat` and `ib_send_lat` report it) and the whole round
    /// trip for a Read (as `ib_read_lat` does).
    pub fn round_trips_per_sample(self) -> u64 {
        match self.op {
            Op::Read => 1,
            Op::Write | Op::Send => 2,
        }
    }

    /// What the run checks of the data it moved, for the report.
    pub fn verification(self) -> &'static str {
        match (self.op, self.metric) {
            (Op::Write, Metric::Bandwidth) => {
                "the server found the client's pattern in its buffer after the last Write"
            }
            (Op::Send, Metric::Bandwidth) => {
                "the server received every Send at full length, the last with the client's pattern"
            }
            (Op::Read, _) => {
                "the client found the server's pattern in its buffer after the last Read"
            }
            (_, Metric::Latency) => {
                "each end saw every round's stamp in order and the peer's pattern around it"
            }
        }
    }

    /// Encodes the mode in one octet of the connection request.
    pub(crate) fn code(self) -> u8 {
        let op = match self.op {
            Op::Write => 0,
            Op::Read => 1,
            Op::Send => 2,
        };
        let metric = match self.metric {
            Metric::Bandwidth => 0,
            Metric::Latency => 4,
        };
        op | metric
    }

    /// The mode [`Mode::code`] encoded.
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        let op = match code & 3 {
            0 => Op::Write,
            1 => Op::Read,
            2 => Op::Send,
            _ => return None,
        };
        let metric = match code & !3 {
            0 => Metric::Bandwidth,
            4 => Metric::Latency,
            _ => return None,
        };
        Some(Mode { op, metric })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_survives_its_code_and_has_its_own_name() {
        let mut names = Vec::new();
        for op in [Op::Write, Op::Read, Op::Send] {
            for metric in [Metric::Bandwidth, Metric::Latency] {
                let mode = Mode { op, metric };
                assert_eq!(Mode::from_code(mode.code()), Some(mode));
                names.push(mode.name());
            }
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 6);
        assert_eq!(Mode::from_code(3), None);
        assert_eq!(Mode::from_code(8), None);
    }
}
