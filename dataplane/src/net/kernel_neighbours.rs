//! Next hops from the kernel's neighbour table, for a port on an
//! interface the kernel keeps (AF_XDP beside it): the kernel answers ARP
//! there and takes the replies, so uwarp asks it rather than speaking ARP
//! itself with the same MAC address.
//!
//! rtnetlink (`NETLINK_ROUTE`): `RTM_GETNEIGH` for one address on one
//! interface (Linux 5.0 and later answer it without a dump), and, when the
//! kernel knows none, `RTM_NEWNEIGH` with `NTF_USE`, which has the kernel
//! resolve the address as if traffic were waiting for it (what `ip neigh
//! replace ADDR dev DEV use` sends).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use smoltcp::wire::{EthernetAddress, Ipv4Address};

/// How often the kernel is asked to resolve the same address at most.
const SOLICIT_EVERY: Duration = Duration::from_millis(500);

// rtnetlink's numbers (linux/rtnetlink.h, linux/neighbour.h,
// linux/netlink.h).
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
const NTF_USE: u8 = 0x01;
/// The states whose link-layer address may be sent to: REACHABLE, STALE,
/// DELAY, PROBE, NOARP, PERMANENT.
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

const NLMSG_HEADER_LEN: usize = 16;
const NDMSG_LEN: usize = 12;
const RTA_HEADER_LEN: usize = 4;

/// One request: the netlink header, the `ndmsg` and one `NDA_DST`.
const REQUEST_LEN: usize = NLMSG_HEADER_LEN + NDMSG_LEN + RTA_HEADER_LEN + 4;

/// The kernel's neighbour table for one interface.
#[derive(Debug)]
pub struct KernelNeighbours {
    ifindex: u32,
    /// Opened at the first question.
    socket: Option<OwnedFd>,
    sequence: u32,
    /// When each address was last solicited.
    solicited: HashMap<Ipv4Address, Instant>,
}

impl KernelNeighbours {
    /// The table of the interface of index `ifindex`.
    pub fn new(ifindex: u32) -> Self {
        KernelNeighbours {
            ifindex,
            socket: None,
            sequence: 0,
            solicited: HashMap::new(),
        }
    }

    /// The MAC address of `ip` if the kernel has a usable one; otherwise
    /// asks the kernel to resolve it (at most every 500 ms) and
    /// gives `None`.
    pub fn resolve(
        &mut self,
        now: Instant,
        ip: Ipv4Address,
    ) -> io::Result<Option<EthernetAddress>> {
        if let Some(mac) = self.lookup(ip)? {
            self.solicited.remove(&ip);
            return Ok(Some(mac));
        }
        let due = self
            .solicited
            .get(&ip)
            .is_none_or(|&at| now.duration_since(at) >= SOLICIT_EVERY);
        if due {
            self.solicited.insert(ip, now);
            self.solicit(ip)?;
        }
        Ok(None)
    }

    /// The kernel's usable entry for `ip`, if any.
    pub fn lookup(&mut self, ip: Ipv4Address) -> io::Result<Option<EthernetAddress>> {
        let reply = self.ask(RTM_GETNEIGH, NLM_F_REQUEST, 0, ip)?;
        match reply {
            Reply::Error(0) => Ok(None),
            Reply::Error(errno) if errno == libc::ENOENT => Ok(None),
            Reply::Error(errno) => Err(io::Error::from_raw_os_error(errno)),
            Reply::Neighbour { state, lladdr } => Ok(lladdr
                .filter(|_| state & NUD_VALID != 0)
                .map(EthernetAddress)),
        }
    }

    /// Has the kernel resolve `ip` on the interface.
    pub fn solicit(&mut self, ip: Ipv4Address) -> io::Result<()> {
        let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        match self.ask(RTM_NEWNEIGH, flags, NTF_USE, ip)? {
            Reply::Error(0) | Reply::Neighbour { .. } => Ok(()),
            Reply::Error(errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// Sends one request about `ip` and reads its answer.
    fn ask(&mut self, kind: u16, flags: u16, ndm_flags: u8, ip: Ipv4Address) -> io::Result<Reply> {
        self.sequence = self.sequence.wrapping_add(1);
        let request = request(kind, flags, self.sequence, self.ifindex, ndm_flags, ip);
        let fd = self.socket()?;
        // SAFETY: `request` is a buffer of its length.
        let sent = unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 1024];
        loop {
            // SAFETY: `buf` has room for the length given.
            let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if got < 0 {
                return Err(io::Error::last_os_error());
            }
            let got = got as usize;
            // An answer to an earlier request that timed out is skipped.
            match parse_reply(&buf[..got], self.sequence) {
                Some(reply) => return Ok(reply),
                None => continue,
            }
        }
    }

    fn socket(&mut self) -> io::Result<i32> {
        if let Some(socket) = &self.socket {
            return Ok(socket.as_raw_fd());
        }
        // SAFETY: plain call; it returns a new descriptor or -1.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just made and nothing else owns it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // A kernel that does not answer must not hold the control core.
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: a timeval of the length given.
        let set = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(self.socket.insert(socket).as_raw_fd())
    }
}

/// What the kernel answered.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// An acknowledgement (0) or an error (its errno).
    Error(i32),
    /// A neighbour entry: its state and link-layer address.
    Neighbour { state: u16, lladdr: Option<[u8; 6]> },
}

/// A request of `kind` with `flags` about `ip` on interface `ifindex`.
fn request(
    kind: u16,
    flags: u16,
    sequence: u32,
    ifindex: u32,
    ndm_flags: u8,
    ip: Ipv4Address,
) -> [u8; REQUEST_LEN] {
    let mut m = [0u8; REQUEST_LEN];
    // nlmsghdr: length, type, flags, sequence, port id (0: the kernel
    // fills it in).
    m[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m[6..8].copy_from_slice(&flags.to_ne_bytes());
    m[8..12].copy_from_slice(&sequence.to_ne_bytes());
    // ndmsg: family, padding, index, state (NUD_NONE), flags, type.
    let nd = NLMSG_HEADER_LEN;
    m[nd] = libc::AF_INET as u8;
    m[nd + 4..nd + 8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    m[nd + 10] = ndm_flags;
    // rtattr NDA_DST: length, type, the address.
    let rta = nd + NDMSG_LEN;
    m[rta..rta + 2].copy_from_slice(&((RTA_HEADER_LEN + 4) as u16).to_ne_bytes());
    m[rta + 2..rta + 4].copy_from_slice(&NDA_DST.to_ne_bytes());
    m[rta + 4..rta + 8].copy_from_slice(&ip.octets());
    m
}

/// The answer to request `sequence` in `buf`, if it is one.
fn parse_reply(buf: &[u8], sequence: u32) -> Option<Reply> {
    let u16_at = |at: usize| {
        buf.get(at..at + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let len = (u32_at(0)? as usize).min(buf.len());
    let kind = u16_at(4)?;
    if u32_at(8)? != sequence {
        return None;
    }
    if kind == NLMSG_ERROR {
        // nlmsgerr: a negative errno, or 0 for an acknowledgement.
        let error = u32_at(NLMSG_HEADER_LEN)? as i32;
        return Some(Reply::Error(error.wrapping_neg()));
    }
    if kind != RTM_NEWNEIGH {
        return None;
    }
    let state = u16_at(NLMSG_HEADER_LEN + 8)?;
    let mut lladdr = None;
    let mut at = NLMSG_HEADER_LEN + NDMSG_LEN;
    while at + RTA_HEADER_LEN <= len {
        let rta_len = usize::from(u16_at(at)?);
        let rta_kind = u16_at(at + 2)?;
        if rta_len < RTA_HEADER_LEN || at + rta_len > len {
            break;
        }
        if rta_kind == NDA_LLADDR && rta_len == RTA_HEADER_LEN + 6 {
            lladdr = buf[at + 4..at + 10].try_into().ok();
        }
        // Attributes are aligned to 4 octets.
        at += (rta_len + 3) & !3;
    }
    Some(Reply::Neighbour { state, lladdr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_laid_out_as_rtnetlink_wants() {
        let m = request(
            RTM_GETNEIGH,
            NLM_F_REQUEST,
            7,
            3,
            0,
            Ipv4Address::new(10, 0, 0, 2),
        );
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 36);
        assert_eq!(
            u16::from_ne_bytes(m[4..6].try_into().unwrap()),
            RTM_GETNEIGH
        );
        assert_eq!(m[16], libc::AF_INET as u8);
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 3);
        assert_eq!(&m[28..36], &[8, 0, 1, 0, 10, 0, 0, 2][..]);
    }

    #[test]
    fn replies_parse_and_truncated_ones_do_not_panic() {
        let mut entry = vec![0u8; 16 + 12 + 8 + 12];
        let len = entry.len() as u32;
        entry[0..4].copy_from_slice(&len.to_ne_bytes());
        entry[4..6].copy_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
        entry[8..12].copy_from_slice(&9u32.to_ne_bytes());
        entry[24..26].copy_from_slice(&0x02u16.to_ne_bytes());
        entry[28..30].copy_from_slice(&8u16.to_ne_bytes());
        entry[30..32].copy_from_slice(&NDA_DST.to_ne_bytes());
        entry[36..38].copy_from_slice(&10u16.to_ne_bytes());
        entry[38..40].copy_from_slice(&NDA_LLADDR.to_ne_bytes());
        entry[40..46].copy_from_slice(&[2, 0, 0, 0, 0, 7]);
        assert_eq!(
            parse_reply(&entry, 9),
            Some(Reply::Neighbour {
                state: 0x02,
                lladdr: Some([2, 0, 0, 0, 0, 7])
            })
        );
        assert_eq!(parse_reply(&entry, 8), None, "another request's answer");
        for cut in 0..entry.len() {
            let _ = parse_reply(&entry[..cut], 9);
        }
        let mut error = vec![0u8; 36];
        error[0..4].copy_from_slice(&36u32.to_ne_bytes());
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        error[8..12].copy_from_slice(&9u32.to_ne_bytes());
        error[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert_eq!(parse_reply(&error, 9), Some(Reply::Error(libc::ENOENT)));
    }

    #[test]
    fn loopback_has_no_neighbours_and_the_kernel_answers() {
        // SAFETY: a NUL-terminated name.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let mut table = KernelNeighbours::new(lo);
        // The kernel answers (no entry), it does not time out.
        assert_eq!(table.lookup(Ipv4Address::new(127, 0, 0, 2)).unwrap(), None);
    }
}
