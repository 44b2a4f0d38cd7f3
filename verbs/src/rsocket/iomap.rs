//! rsockets' direct writes (`riomap`, `riounmap`, `riowrite`), as
//! rdma-core's: a buffer mapped with `PROT_WRITE` is registered for
//! remote writes and announced to the peer by an RDMA Write of its
//! `struct rs_iomap` into the peer's iomap (`RS_OP_IOMAP_SGL`, sent before
//! the next `rsend` or `riowrite`); the peer's `riowrite` then RDMA-Writes
//! into it at an offset, with no message: the application learns of the
//! data from the data itself (riostream polls its buffer's last octet).

use std::sync::MutexGuard;

use uwarp::{Access, MemoryRegion, Payload, SendOp, SendWr};

use super::data::{await_send, count_or_failure, next_write, payload_of};
use super::stream::{Conn, Inner, Rsocket};
use super::wire::{self, Iomap, RemoteSge, IOMAP_SIZE};
use crate::export::errno_of;

/// One `riomap` mapping of the application's memory.
#[derive(Debug)]
pub struct Mapping {
    /// The offset `riowrite` names its first octet by.
    offset: u64,
    /// The registration.
    region: MemoryRegion,
    /// Its entry in the peer's iomap (writable mappings only).
    index: Option<u32>,
    /// Announced to the peer yet.
    announced: bool,
}

/// `riomap`: maps `len` octets at `buf` at `offset` (the address for
/// -1); with `PROT_WRITE` the peer may `riowrite` into it, taking one of
/// the entries its conn data offered (`ENOMEM` when all are taken);
/// `EINVAL` for other protections or before a connection.
///
/// # Safety
///
/// `buf` is valid for `len` octets until `riounmap` (or the socket's
/// close); the application reads what the peer writes there through raw
/// pointers only.
pub unsafe fn map(
    socket: &Rsocket,
    buf: *mut u8,
    len: usize,
    prot: i32,
    offset: i64,
) -> Result<i64, i32> {
    let mut inner = socket.lock();
    let conn = inner.conn.as_mut().ok_or(libc::EINVAL)?;
    if prot & !libc::PROT_WRITE != 0 {
        return Err(libc::EINVAL);
    }
    let writable = prot & libc::PROT_WRITE != 0;
    let index = if writable {
        let taken: Vec<u32> = conn.mappings.iter().filter_map(|m| m.index).collect();
        let free = (0..conn.remote_iomap.length).find(|i| !taken.contains(i));
        Some(free.ok_or(libc::ENOMEM)?)
    } else {
        None
    };
    let access = if writable {
        Access::LOCAL_WRITE | Access::REMOTE_WRITE
    } else {
        Access::LOCAL_WRITE
    };
    // SAFETY: the caller keeps the memory mapped until riounmap and reads
    // it through raw pointers only.
    let region =
        unsafe { conn.pd.register_memory(buf, len, None, access) }.map_err(|e| errno_of(&e))?;
    let offset = if offset == -1 { buf as i64 } else { offset };
    conn.mappings.push(Mapping {
        offset: offset as u64,
        region,
        index,
        announced: !writable,
    });
    Ok(offset)
}

/// `riounmap`: ends the mapping of exactly `len` octets at `buf`
/// (`EINVAL` if there is none). As rdma-core, the peer is not told.
pub fn unmap(socket: &Rsocket, buf: *mut u8, len: usize) -> Result<(), i32> {
    let mut inner = socket.lock();
    let conn = inner.conn.as_mut().ok_or(libc::EINVAL)?;
    let found = conn
        .mappings
        .iter()
        .position(|m| m.region.addr() == buf as u64 && m.region.len() == len)
        .ok_or(libc::EINVAL)?;
    conn.mappings.remove(found);
    Ok(())
}

/// `rs_send_iomaps`: announces the writable mappings not yet announced,
/// each by an RDMA Write of its `rs_iomap` into the peer's iomap and the
/// `RS_OP_IOMAP_SGL` message (which takes a credit, as rdma-core's).
pub fn send_pending<'a>(
    socket: &'a Rsocket,
    mut inner: MutexGuard<'a, Inner>,
    nonblock: bool,
) -> (MutexGuard<'a, Inner>, Option<i32>) {
    loop {
        let pending = inner
            .conn
            .as_ref()
            .and_then(|c| c.mappings.iter().position(|m| !m.announced));
        let Some(at) = pending else {
            return (inner, None);
        };
        let failure;
        (inner, failure) = await_send(socket, inner, nonblock);
        if failure.is_some() {
            return (inner, failure);
        }
        let conn = inner
            .conn
            .as_mut()
            .expect("a socket that can send has a connection");
        let mapping = &conn.mappings[at];
        let index = mapping.index.expect("only writable mappings are announced");
        let entry = Iomap {
            offset: mapping.offset,
            sge: RemoteSge {
                addr: mapping.region.addr(),
                key: mapping.region.rkey(),
                length: mapping.region.len() as u32,
            },
        };
        conn.mappings[at].announced = true;
        conn.sseq_no = conn.sseq_no.wrapping_add(1);
        conn.sqe_avail -= 2;
        conn.sbuf_bytes_avail -= IOMAP_SIZE as u32;
        let slot = conn.remote_iomap.addr + u64::from(index) * IOMAP_SIZE as u64;
        let payload = Payload::Inline(entry.to_host_bytes().to_vec());
        let msg = wire::message(wire::OP_IOMAP_SGL, index);
        if let Err(errno) = conn.post_write_msg(payload, msg, (slot, conn.remote_iomap.key)) {
            return (inner, Some(errno));
        }
    }
}

/// `riowrite`: writes `data` into the peer's mapping at `offset` by RDMA
/// Writes (`RS_OP_WRITE`, no message); the count written, which stops at
/// the end of the peer's mappings.
pub fn write(socket: &Rsocket, data: &[u8], offset: i64, flags: i32) -> Result<usize, i32> {
    let mut inner = socket.lock();
    if inner.conn.is_none() {
        return Err(libc::ENOTCONN);
    }
    let nonblock = inner.nonblocking(flags);
    let mut failure;
    (inner, failure) = send_pending(socket, inner, nonblock);
    let mut written = 0usize;
    while failure.is_none() && written < data.len() {
        let at = offset as u64 + written as u64;
        let Some(target) = inner.conn.as_ref().and_then(|c| find_mapping(c, at)) else {
            break;
        };
        let left = (data.len() - written) as u32;
        let room = (target.offset + u64::from(target.sge.length) - at) as u32;
        let (back, size) = next_write(socket, inner, nonblock, left, |_| room);
        inner = back;
        let (conn, xfer) = match size {
            Ok(xfer) => (inner.conn.as_mut().expect("next_write found it"), xfer),
            Err(errno) => {
                failure = Some(errno);
                break;
            }
        };
        conn.sqe_avail -= 1;
        conn.sbuf_bytes_avail -= xfer;
        let payload = payload_of(conn, data[written..written + xfer as usize].to_vec());
        let op = SendOp::Write {
            remote_addr: target.sge.addr + (at - target.offset),
            rkey: target.sge.key,
        };
        let wr_id = u64::from(wire::message(wire::OP_WRITE, xfer));
        if let Err(errno) = conn.post(SendWr::new(wr_id, op, payload)) {
            failure = Some(errno);
            break;
        }
        written += xfer as usize;
    }
    drop(inner);
    count_or_failure(written, failure)
}

/// `rs_find_iomap`: the peer's mapping (announced into this side's
/// iomap) that holds `offset`.
fn find_mapping(conn: &Conn, offset: u64) -> Option<Iomap> {
    (0..conn.sizes.iomap_size as usize)
        .map(|i| conn.iomap_entry(i))
        .find(|m| {
            m.sge.length > 0 && offset >= m.offset && offset < m.offset + u64::from(m.sge.length)
        })
}
