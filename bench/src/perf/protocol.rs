//! What the client and the server of a run tell each other.
//!
//! - Connecting: the client's MPA Request carries a [`Hello`] (the mode,
//!   the number of queue pairs and this one's index, a session number
//!   that ties the queue pairs of one run together, the largest message,
//!   the client's send queue depth, and where the client's [`Region`]
//!   is); the server's Reply carries its own [`Region`]. A server that
//!   runs another mode rejects the request with the reason as text.
//! - Running: [`Control`] messages, each an RDMA Write into the next slot
//!   of the peer's mailbox (a ring of [`SLOT`]-octet slots at the end of
//!   its region), then a zero-length Send with the Solicited Event bit as
//!   its doorbell. The doorbell places nothing, so it never overwrites
//!   the data a Send of the run left in the peer's buffer; and it
//!   completes only once the Write before it is placed (RFC 5040 section
//!   5.5), so the slot is whole when the peer reads it. Each message
//!   carries its sequence number, which the reader checks: a slot
//!   overwritten before it was read is an error, never a silent mix-up.
//!
//! All numbers are big-endian.

use super::report::Latency;
use super::Mode;

/// The first octets of every [`Hello`] and server Reply.
const MAGIC: [u8; 4] = *b"UWPF";
/// This protocol's version.
const VERSION: u8 = 1;
/// The octets of one mailbox slot: the largest control message.
pub const SLOT: usize = 256;
/// The most queue pairs a run can use (an [`Control::End`] lists each
/// one's count in one slot).
pub const MAX_QPS: usize = 16;

/// Where one side's memory is: the region's Tagged Offset and STag, and
/// the largest message it holds. The region is `max` octets where the
/// peer's messages land (the sink), `max` octets of this side's data
/// (the source), then the mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Tagged Offset of its first octet.
    pub addr: u64,
    /// Its STag.
    pub rkey: u32,
    /// The sink's and the source's length.
    pub max: u64,
}

impl Region {
    /// The peer's source: where RDMA Reads read.
    pub fn source(&self) -> u64 {
        self.addr + self.max
    }

    /// Mailbox slot `slot`.
    pub fn slot(&self, slot: usize) -> u64 {
        self.addr + 2 * self.max + (slot * SLOT) as u64
    }

    fn put(&self, out: &mut Writer) {
        out.u64(self.addr).u32(self.rkey).u64(self.max);
    }

    fn take(input: &mut Reader<'_>) -> Result<Self, String> {
        Ok(Region {
            addr: input.u64()?,
            rkey: input.u32()?,
            max: input.u64()?,
        })
    }
}

/// Mailbox slots of a run with `qps` queue pairs: room for the server's
/// credits for every queue pair (at most two each between two reads of
/// the client) and the messages of the handshake.
pub fn mailbox_slots(qps: usize) -> usize {
    8 + 4 * qps
}

/// The client's connection request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The test.
    pub mode: Mode,
    /// Queue pairs in the run.
    pub qps: u8,
    /// This queue pair's index (0 carries the control messages).
    pub index: u8,
    /// The run's number, the same on each of its queue pairs.
    pub session: u64,
    /// The client's send queue depth, which sizes the server's window of
    /// posted receives.
    pub tx_depth: u32,
    /// The client's region; its `max` is the run's largest message.
    pub region: Region,
}

impl Hello {
    /// The private data of the MPA Request.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        out.bytes(&MAGIC)
            .u8(VERSION)
            .u8(self.mode.code())
            .u8(self.qps)
            .u8(self.index)
            .u64(self.session)
            .u32(self.tx_depth);
        self.region.put(&mut out);
        out.0
    }

    /// Parses a Request's private data.
    pub fn decode(data: &[u8]) -> Result<Self, String> {
        let mut input = Reader::greeting(data)?;
        let mode = input.u8()?;
        let hello = Hello {
            mode: Mode::from_code(mode).ok_or(format!("unknown mode {mode}"))?,
            qps: input.u8()?,
            index: input.u8()?,
            session: input.u64()?,
            tx_depth: input.u32()?,
            region: Region::take(&mut input)?,
        };
        if hello.qps == 0 || usize::from(hello.qps) > MAX_QPS || hello.index >= hello.qps {
            return Err(format!("queue pair {} of {}", hello.index, hello.qps));
        }
        Ok(hello)
    }
}

/// The private data of the server's Reply: its region.
pub fn encode_reply(region: &Region) -> Vec<u8> {
    let mut out = Writer::default();
    out.bytes(&MAGIC).u8(VERSION);
    region.put(&mut out);
    out.0
}

/// Parses the server's Reply.
pub fn decode_reply(data: &[u8]) -> Result<Region, String> {
    Region::take(&mut Reader::greeting(data)?)
}

/// When a run stops: after a number of messages (round trips, for
/// latency), or after a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// This many messages.
    Iters(u64),
    /// Messages until this long has passed.
    Duration(std::time::Duration),
}

/// What the client measured in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The run's length, on the client's clock.
    pub seconds: f64,
    /// Messages (round trips, for latency) on each queue pair.
    pub counts: Vec<u64>,
    /// Latency percentiles, for latency runs.
    pub latency: Option<Latency>,
}

impl Summary {
    /// Messages on every queue pair together.
    pub fn messages(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The messages of a run, after the connection is set up.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Client: the next measurement, of `size`-octet messages.
    Begin {
        /// Message size.
        size: u64,
        /// When the client stops.
        stop: Stop,
    },
    /// Server: ready; the client may Send `credits` messages on each
    /// queue pair before it hears more.
    Ready {
        /// Receives posted on each queue pair.
        credits: u64,
    },
    /// Server: the client may have Sent `total` messages on queue pair
    /// `qp` since [`Control::Ready`].
    Credit {
        /// The queue pair.
        qp: u8,
        /// Messages it may have sent in all.
        total: u64,
    },
    /// Client: the measurement is over; what it measured.
    End(Summary),
    /// Server: what it found checking the data; `None` when all is well.
    Verdict {
        /// The problem.
        problem: Option<String>,
    },
    /// Client: no more measurements; the server answers with the same
    /// before the client disconnects.
    Bye,
}

const BEGIN: u8 = 1;
const READY: u8 = 2;
const CREDIT: u8 = 3;
const END: u8 = 4;
const VERDICT: u8 = 5;
const BYE: u8 = 6;

impl Control {
    /// The message as sequence number `seq` (at most [`SLOT`] octets).
    pub fn encode(&self, seq: u32) -> Vec<u8> {
        let mut out = Writer::default();
        out.u32(seq);
        match self {
            Self::Begin { size, stop } => {
                let (iters, nanos) = match stop {
                    Stop::Iters(n) => (*n, 0),
                    Stop::Duration(d) => (0, d.as_nanos() as u64),
                };
                out.u8(BEGIN).u64(*size).u64(iters).u64(nanos);
            }
            Self::Ready { credits } => {
                out.u8(READY).u64(*credits);
            }
            Self::Credit { qp, total } => {
                out.u8(CREDIT).u8(*qp).u64(*total);
            }
            Self::End(summary) => {
                out.u8(END)
                    .f64(summary.seconds)
                    .u8(summary.counts.len() as u8);
                for count in &summary.counts {
                    out.u64(*count);
                }
                out.u8(u8::from(summary.latency.is_some()));
                for value in summary.latency.map(|l| l.values()).unwrap_or_default() {
                    out.f64(value);
                }
            }
            Self::Verdict { problem } => {
                let text = problem.as_deref().unwrap_or("");
                // Cut at a character boundary to fit the slot.
                let mut end = text.len().min(SLOT - 16);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                out.u8(VERDICT).u8(u8::from(problem.is_some()));
                out.u16(end as u16).bytes(&text.as_bytes()[..end]);
            }
            Self::Bye => {
                out.u8(BYE);
            }
        }
        out.0
    }

    /// Parses a mailbox slot: the sequence number and the message.
    pub fn decode(slot: &[u8]) -> Result<(u32, Self), String> {
        let mut input = Reader(slot);
        let seq = input.u32()?;
        let message = match input.u8()? {
            BEGIN => {
                let size = input.u64()?;
                let (iters, nanos) = (input.u64()?, input.u64()?);
                let stop = if iters > 0 {
                    Stop::Iters(iters)
                } else {
                    Stop::Duration(std::time::Duration::from_nanos(nanos))
                };
                Self::Begin { size, stop }
            }
            READY => Self::Ready {
                credits: input.u64()?,
            },
            CREDIT => Self::Credit {
                qp: input.u8()?,
                total: input.u64()?,
            },
            END => {
                let seconds = input.f64()?;
                let counts = (0..input.u8()?)
                    .map(|_| input.u64())
                    .collect::<Result<_, _>>()?;
                let latency = if input.u8()? == 1 {
                    let mut values = [0.0; 5];
                    for value in &mut values {
                        *value = input.f64()?;
                    }
                    Some(Latency::from_values(values))
                } else {
                    None
                };
                Self::End(Summary {
                    seconds,
                    counts,
                    latency,
                })
            }
            VERDICT => {
                let failed = input.u8()? == 1;
                let len = usize::from(input.u16()?);
                let text = String::from_utf8_lossy(input.take(len)?).into_owned();
                Self::Verdict {
                    problem: failed.then_some(text),
                }
            }
            BYE => Self::Bye,
            other => return Err(format!("unknown control message {other}")),
        };
        Ok((seq, message))
    }
}

/// Big-endian numbers appended to a buffer.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.extend_from_slice(bytes);
        self
    }

    fn u8(&mut self, value: u8) -> &mut Self {
        self.bytes(&[value])
    }

    fn u16(&mut self, value: u16) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    fn u32(&mut self, value: u32) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes(&value.to_be_bytes())
    }

    fn f64(&mut self, value: f64) -> &mut Self {
        self.u64(value.to_bits())
    }
}

/// Big-endian numbers read off the front of a buffer.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// A reader past the magic and version of a Request or Reply.
    fn greeting(data: &'a [u8]) -> Result<Self, String> {
        let mut input = Reader(data);
        if input.take(MAGIC.len())? != MAGIC {
            return Err("not a uwarp-perf peer (no UWPF in its private data)".into());
        }
        match input.u8()? {
            VERSION => Ok(input),
            other => Err(format!(
                "the peer speaks uwarp-perf protocol {other}, this is {VERSION}"
            )),
        }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if self.0.len() < len {
            return Err("a message ends early".into());
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self.take(N)?;
        Ok(bytes.try_into().expect("took N octets"))
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_bits(self.u64()?))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::perf::{Metric, Op};

    const REGION: Region = Region {
        addr: 0x5566_7788_0000,
        rkey: 0xAB_CDEF,
        max: 65536,
    };

    #[test]
    fn a_hello_and_a_reply_survive_the_private_data() {
        let hello = Hello {
            mode: Mode {
                op: Op::Send,
                metric: Metric::Latency,
            },
            qps: 4,
            index: 3,
            session: 0xDEAD_BEEF_0123_4567,
            tx_depth: 128,
            region: REGION,
        };
        let data = hello.encode();
        assert!(data.len() < 64, "well within MPA's 512 octets");
        assert_eq!(Hello::decode(&data), Ok(hello));
        assert_eq!(decode_reply(&encode_reply(&REGION)), Ok(REGION));
        assert!(Hello::decode(&data[..20]).unwrap_err().contains("early"));
        assert!(Hello::decode(b"rping")
            .unwrap_err()
            .contains("not a uwarp-perf peer"));
        let bad_index = Hello { index: 4, ..hello };
        assert!(Hello::decode(&bad_index.encode()).is_err());
    }

    #[test]
    fn every_control_message_survives_a_slot() {
        let latency = Latency::from_values([1.5, 2.0, 3.25, 8.0, 19.0]);
        let messages = [
            Control::Begin {
                size: 8 << 20,
                stop: Stop::Iters(5000),
            },
            Control::Begin {
                size: 2,
                stop: Stop::Duration(Duration::from_millis(1500)),
            },
            Control::Ready { credits: 256 },
            Control::Credit { qp: 3, total: 384 },
            Control::End(Summary {
                seconds: 1.25,
                counts: vec![7; MAX_QPS],
                latency: Some(latency),
            }),
            Control::End(Summary {
                seconds: 0.5,
                counts: vec![20000],
                latency: None,
            }),
            Control::Verdict { problem: None },
            Control::Verdict {
                problem: Some("the sink differs at octet 17".into()),
            },
            Control::Bye,
        ];
        for (seq, message) in messages.into_iter().enumerate() {
            let slot = message.encode(seq as u32);
            assert!(slot.len() <= SLOT, "{message:?}");
            assert_eq!(Control::decode(&slot), Ok((seq as u32, message)));
        }
    }

    #[test]
    fn a_long_verdict_is_cut_to_its_slot_at_a_character_boundary() {
        let problem = "é".repeat(SLOT);
        let slot = Control::Verdict {
            problem: Some(problem),
        }
        .encode(1);
        assert!(slot.len() <= SLOT);
        match Control::decode(&slot) {
            Ok((
                1,
                Control::Verdict {
                    problem: Some(text),
                },
            )) => {
                assert!(text.chars().all(|c| c == 'é') && !text.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_mailbox_follows_the_sink_and_the_source() {
        assert_eq!(REGION.source(), REGION.addr + 65536);
        assert_eq!(REGION.slot(0), REGION.addr + 2 * 65536);
        assert_eq!(REGION.slot(2), REGION.addr + 2 * 65536 + 2 * SLOT as u64);
    }
}
