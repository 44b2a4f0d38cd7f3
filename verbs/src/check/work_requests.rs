//! Chains of `ibv_send_wr` and `ibv_recv_wr` from fuzz input, posted
//! through the context's `post_send`, `post_recv` and `post_srq_recv` to
//! a queue pair that is never connected (its work waits for a connection
//! that never comes, and goes with it) and to a shared receive queue.

use core::ffi::{c_int, c_uint};
use core::ptr;
use std::sync::OnceLock;

use super::{errno, verbs, Input, Verbs};
use crate::abi::verbs::*;
use crate::limits::MAX_SGE;

/// The most work requests in one chain.
const MAX_CHAIN: u8 = 8;

/// The most scatter/gather elements an input lays out for one request:
/// one more than a queue may take, so that a list the library must
/// refuse for its count is shorter than the count says.
const MAX_LIST: usize = MAX_SGE as usize + 1;

/// The size of the registered region, and of the inaccessible mapping.
const REGION: usize = 4096;

/// The most octets of inline data a queue pair takes.
const MAX_INLINE: u64 = 256;

/// Posts a chain of work requests built from `data` and checks the
/// answer against the verbs' contract: 0 when every request is valid;
/// otherwise `EINVAL` with `*bad_wr` the first invalid one (a request
/// whose opcode RDMAP does not carry, whose `num_sge` is negative, beyond
/// the queue's limit or without a list, whose inline data exceed 256
/// octets, an RDMA Read with more than one element, a message over 4 GiB
/// - 1, or any receive on a queue pair that takes its receives from an
///   SRQ). Queue pairs and SRQs asking for more than 16 elements must not
///   be created. Panics otherwise.
///
/// The library reads no element beyond the count it accepts, no list when
/// the count is 0 or less, and no data an element points at, except the
/// elements of inline sends, within 256 octets: elements of other
/// requests point into a registered region, into an inaccessible
/// mapping, or anywhere.
///
/// The input: a settings octet (bit 0: receives, else sends; bit 2: the
/// queue pair takes its receives from a new SRQ; bit 3: receives go to
/// that SRQ); the elements asked for by the send
/// queue and by the receive queue (and the SRQ), an octet each, modulo
/// 20; the length of the chain, modulo 9; then each request (see
/// `Request::read`).
pub fn work_requests(data: &[u8]) {
    let mut input = Input(data);
    let settings = input.u8();
    let fixture = Fixture::get();
    let (send_sge, recv_sge) = (u32::from(input.u8() % 20), u32::from(input.u8() % 20));
    let (srq, srq_sge) = if settings & 4 != 0 {
        match create_srq(fixture.verbs, recv_sge) {
            Some(made) => made,
            None => return,
        }
    } else {
        (ptr::null_mut(), 0)
    };
    let cap = IbvQpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: send_sge,
        max_recv_sge: recv_sge,
        max_inline_data: 0,
    };
    let created = fixture.verbs.create_qp(cap, srq);
    let fits = send_sge <= MAX_SGE as u32 && recv_sge <= MAX_SGE as u32;
    let (qp, cap) = match created {
        Ok(made) => made,
        Err(errno) => {
            assert!(
                !fits,
                "ibv_create_qp failed ({errno}) for {send_sge}/{recv_sge} elements"
            );
            assert_eq!(errno, libc::EINVAL);
            destroy_srq(srq);
            return;
        }
    };
    assert!(
        fits,
        "ibv_create_qp made a queue pair of {send_sge}/{recv_sge} elements"
    );
    assert_eq!(u64::from(cap.max_inline_data), MAX_INLINE);
    let mut chain: Vec<Request> = (0..input.u8() % (MAX_CHAIN + 1))
        .map(|index| Request::read(&mut input, u64::from(index), fixture))
        .collect();
    let ops = fixture.ops();
    if settings & 1 == 0 {
        let first_invalid = chain
            .iter()
            .position(|request| !request.send_is_valid(&cap));
        let mut wrs: Vec<IbvSendWr> = chain.iter_mut().map(Request::send_wr).collect();
        let post = ops.post_send.expect("post_send");
        // SAFETY: a live queue pair, and a chain whose lists hold what
        // they say (see `Request::read`).
        check_post(&mut wrs, first_invalid, |wr, bad| unsafe {
            post(qp, wr, bad)
        });
    } else if settings & 8 != 0 && !srq.is_null() {
        let first_invalid = chain
            .iter()
            .position(|request| !request.recv_is_valid(srq_sge));
        let mut wrs: Vec<IbvRecvWr> = chain.iter_mut().map(Request::recv_wr).collect();
        let post = ops.post_srq_recv.expect("post_srq_recv");
        // SAFETY: a live SRQ, and a chain as above.
        check_post(&mut wrs, first_invalid, |wr, bad| unsafe {
            post(srq, wr, bad)
        });
    } else {
        // A queue pair on an SRQ takes no receive of its own.
        let first_invalid = if srq.is_null() {
            chain
                .iter()
                .position(|request| !request.recv_is_valid(cap.max_recv_sge))
        } else {
            (!chain.is_empty()).then_some(0)
        };
        let mut wrs: Vec<IbvRecvWr> = chain.iter_mut().map(Request::recv_wr).collect();
        let post = ops.post_recv.expect("post_recv");
        // SAFETY: a live queue pair, and a chain as above.
        check_post(&mut wrs, first_invalid, |wr, bad| unsafe {
            post(qp, wr, bad)
        });
    }
    // SAFETY: the queue pair made above, used no more.
    assert_eq!(unsafe { crate::qp::ibv_destroy_qp(qp) }, 0);
    destroy_srq(srq);
}

/// A new SRQ asking for `max_sge` elements, with the elements it takes,
/// or `None` (checked) when it asks for more than the device has.
fn create_srq(verbs: &Verbs, max_sge: u32) -> Option<(*mut IbvSrq, u32)> {
    let mut attr = IbvSrqInitAttr {
        srq_context: ptr::null_mut(),
        attr: IbvSrqAttr {
            max_wr: 16,
            max_sge,
            srq_limit: 0,
        },
    };
    // SAFETY: a live domain and a valid structure.
    let srq = unsafe { crate::srq::ibv_create_srq(verbs.pd(), &mut attr) };
    let fits = max_sge <= MAX_SGE as u32;
    if srq.is_null() {
        assert!(
            !fits,
            "ibv_create_srq failed ({}) for {max_sge} elements",
            errno()
        );
        assert_eq!(errno(), libc::EINVAL);
        return None;
    }
    assert!(fits, "ibv_create_srq made a queue of {max_sge} elements");
    Some((srq, attr.attr.max_sge))
}

/// Destroys `srq` unless it is NULL.
fn destroy_srq(srq: *mut IbvSrq) {
    if !srq.is_null() {
        // SAFETY: a queue `create_srq` made, its queue pair destroyed.
        assert_eq!(unsafe { crate::srq::ibv_destroy_srq(srq) }, 0);
    }
}

/// A work request of the chain `next` links.
trait Linked {
    fn link(&mut self, next: *mut Self);
}

impl Linked for IbvSendWr {
    fn link(&mut self, next: *mut Self) {
        self.next = next;
    }
}

impl Linked for IbvRecvWr {
    fn link(&mut self, next: *mut Self) {
        self.next = next;
    }
}

/// Links `wrs` into a chain, posts it with `post` and checks the answer:
/// 0 with `*bad_wr` untouched when `first_invalid` is `None`, else
/// `EINVAL` with `*bad_wr` that request.
fn check_post<W: Linked>(
    wrs: &mut [W],
    first_invalid: Option<usize>,
    post: impl FnOnce(*mut W, *mut *mut W) -> c_int,
) {
    let mut next = ptr::null_mut();
    for wr in wrs.iter_mut().rev() {
        wr.link(next);
        next = wr;
    }
    let untouched = ptr::dangling_mut::<W>();
    let mut bad = untouched;
    let answer = post(next, &mut bad);
    match first_invalid {
        None => {
            assert_eq!(answer, 0, "a valid chain refused");
            assert_eq!(bad, untouched, "bad_wr written on success");
        }
        Some(index) => {
            assert_eq!(answer, libc::EINVAL, "request {index} is invalid");
            assert_eq!(
                bad,
                ptr::from_mut(&mut wrs[index]),
                "bad_wr is not request {index}"
            );
        }
    }
}

/// What the requests point into, made once per process: the shared
/// [`Verbs`], a registered region, an inaccessible mapping, and the
/// context's function table.
struct Fixture {
    verbs: &'static Verbs,
    /// The registered region's address, and its `ibv_mr` (an address,
    /// held so that the region stays registered, and reachable, for the
    /// process's life).
    region: u64,
    mr: usize,
    /// An address no access is allowed at, for `REGION` octets.
    inaccessible: u64,
}

impl Fixture {
    fn get() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| {
            let verbs = verbs();
            let region: &'static mut [u8] = Vec::leak(vec![0; REGION]);
            let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
            // SAFETY: a live domain and memory of the process's life.
            let mr = unsafe {
                crate::mr::ibv_reg_mr(verbs.pd(), region.as_mut_ptr().cast(), REGION, access)
            };
            assert!(!mr.is_null(), "ibv_reg_mr");
            // SAFETY: a fresh anonymous mapping, kept for the process's
            // life, that no access is allowed to.
            let inaccessible = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    REGION,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(inaccessible, libc::MAP_FAILED, "mmap");
            Fixture {
                verbs,
                region: region.as_ptr() as u64,
                mr: mr as usize,
                inaccessible: inaccessible as u64,
            }
        })
    }

    /// The registered region's `lkey`.
    fn lkey(&self) -> u32 {
        // SAFETY: the region ibv_reg_mr returned, never deregistered.
        unsafe { (*(self.mr as *const IbvMr)).lkey }
    }

    /// The context's function table, through which the header's inline
    /// `ibv_post_send` and its kin call.
    fn ops(&self) -> &'static IbvContextOps {
        // SAFETY: the process's context, never closed.
        unsafe { &(*self.verbs.context()).ops }
    }
}

/// One request of a chain, as it reads from the input, with the memory
/// its list and inline data live in.
struct Request {
    wr_id: u64,
    opcode: c_int,
    send_flags: c_uint,
    num_sge: c_int,
    /// The list as laid out: at most `num_sge` elements (and at most
    /// [`MAX_LIST`]); empty for a NULL `sg_list`.
    list: Vec<IbvSge>,
    /// Whether `sg_list` is NULL.
    no_list: bool,
    remote: (u64, u32),
    invalidate_rkey: u32,
    /// The memory inline elements point into (twice the most inline data,
    /// so that every element of at most 256 octets starting in its first
    /// half is readable).
    _inline: Box<[u8; 2 * MAX_INLINE as usize]>,
}

impl Request {
    /// Reads a request: its opcode (the octet as a signed one); its send
    /// flags (the octet, all eight bits); `num_sge` (see [`num_sge`]); an
    /// octet whose bit 0 makes `sg_list` NULL; the remote address (8
    /// octets), `rkey` and `invalidate_rkey` (4 each); then each element
    /// laid out (see [`Request::element`]).
    fn read(input: &mut Input<'_>, wr_id: u64, fixture: &Fixture) -> Request {
        let opcode = c_int::from(input.u8() as i8);
        let send_flags = c_uint::from(input.u8());
        let num_sge = num_sge(input.u8());
        let no_list = input.u8() & 1 != 0;
        let remote = (input.u64(), input.u32());
        let invalidate_rkey = input.u32();
        let mut inline = Box::new([0; 2 * MAX_INLINE as usize]);
        let inline_base = inline.as_mut_ptr() as u64;
        let laid_out = if no_list {
            0
        } else {
            num_sge.clamp(0, MAX_LIST as c_int) as usize
        };
        let is_inline = send_flags & IBV_SEND_INLINE != 0;
        let list = (0..laid_out)
            .map(|_| Request::element(input, fixture, is_inline.then_some(inline_base)))
            .collect();
        Request {
            wr_id,
            opcode,
            send_flags,
            num_sge,
            list,
            no_list,
            remote,
            invalidate_rkey,
            _inline: inline,
        }
    }

    /// Reads an element: a kind octet, an offset (2 octets), a length
    /// (an octet, see [`length`]) and an `lkey` (4 octets). Elements of
    /// requests flagged inline point into `inline` at the offset modulo
    /// 256; others, by kind modulo 4, into the registered region with its
    /// `lkey`, into it with the input's, into the inaccessible mapping,
    /// or at the input's address (8 more octets).
    fn element(input: &mut Input<'_>, fixture: &Fixture, inline: Option<u64>) -> IbvSge {
        let kind = input.u8();
        let offset = u64::from(u16::from_le_bytes([input.u8(), input.u8()]));
        let length = length(input.u8());
        let lkey = input.u32();
        let (addr, lkey) = match (inline, kind % 4) {
            (Some(base), _) => (base + offset % MAX_INLINE, lkey),
            (None, 0) => (fixture.region + offset % REGION as u64, fixture.lkey()),
            (None, 1) => (fixture.region + offset % REGION as u64, lkey),
            (None, 2) => (fixture.inaccessible + offset % REGION as u64, lkey),
            (None, _) => (input.u64(), lkey),
        };
        IbvSge { addr, length, lkey }
    }

    /// `sg_list`: NULL, or the list laid out; a list of no element (for a
    /// count of 0 or less) points at the inaccessible mapping, which the
    /// library must not read.
    fn sg_list(&mut self) -> *mut IbvSge {
        match (self.no_list, self.list.is_empty()) {
            (true, _) => ptr::null_mut(),
            (false, true) => Fixture::get().inaccessible as *mut IbvSge,
            (false, false) => self.list.as_mut_ptr(),
        }
    }

    fn send_wr(&mut self) -> IbvSendWr {
        IbvSendWr {
            wr_id: self.wr_id,
            next: ptr::null_mut(),
            sg_list: self.sg_list(),
            num_sge: self.num_sge,
            opcode: self.opcode,
            send_flags: self.send_flags,
            invalidate_rkey: self.invalidate_rkey,
            wr: IbvRdmaWr {
                remote_addr: self.remote.0,
                rkey: self.remote.1,
                _union_rest: [0; 5],
            },
            qp_type: 0,
            _bind_mw_tso: [0; 6],
        }
    }

    fn recv_wr(&mut self) -> IbvRecvWr {
        IbvRecvWr {
            wr_id: self.wr_id,
            next: ptr::null_mut(),
            sg_list: self.sg_list(),
            num_sge: self.num_sge,
        }
    }

    /// The elements a queue taking at most `max_sge` accepts, or `None`
    /// when the count is not acceptable.
    fn accepted_list(&self, max_sge: u32) -> Option<&[IbvSge]> {
        match self.num_sge {
            0 => Some(&[]),
            n if n < 0 || n as u32 > max_sge || self.no_list => None,
            n => Some(&self.list[..n as usize]),
        }
    }

    /// Whether a receive queue taking at most `max_sge` elements takes
    /// this request.
    fn recv_is_valid(&self, max_sge: u32) -> bool {
        self.accepted_list(max_sge).is_some()
    }

    /// Whether a send queue with capabilities `cap` takes this request.
    fn send_is_valid(&self, cap: &IbvQpCap) -> bool {
        let Some(list) = self.accepted_list(cap.max_send_sge) else {
            return false;
        };
        let total: u64 = list.iter().map(|sge| u64::from(sge.length)).sum();
        let inline = self.send_flags & IBV_SEND_INLINE != 0;
        match self.opcode {
            IBV_WR_RDMA_READ => list.len() <= 1 && total <= u64::from(u32::MAX),
            IBV_WR_SEND | IBV_WR_SEND_WITH_INV | IBV_WR_RDMA_WRITE if inline => {
                total <= u64::from(cap.max_inline_data)
            }
            IBV_WR_SEND | IBV_WR_SEND_WITH_INV | IBV_WR_RDMA_WRITE => total <= u64::from(u32::MAX),
            _ => false,
        }
    }
}

/// `num_sge` from an octet: the extremes of `c_int` for 0x80 and 0x7f,
/// else the octet as a signed one.
fn num_sge(octet: u8) -> c_int {
    match octet {
        0x80 => c_int::MIN,
        0x7f => c_int::MAX,
        other => c_int::from(other as i8),
    }
}

/// An element's length from an octet: the largest lengths for 0xff and
/// 0xfe, else three times the octet (0 to 759, across the inline limit).
fn length(octet: u8) -> u32 {
    match octet {
        0xff => u32::MAX,
        0xfe => 1 << 31,
        other => u32::from(other) * 3,
    }
}
