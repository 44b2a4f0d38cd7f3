//! `rdma_getaddrinfo` on node and service strings and hints from fuzz
//! input, then `rdma_freeaddrinfo` on what it returned.

use core::ffi::{c_char, c_int};
use core::ptr;
use std::ffi::CString;
use std::net::{IpAddr, SocketAddr};

use super::{errno, Input};
use crate::abi::cm::*;
use crate::abi::verbs::IBV_QPT_RC;
use crate::cm::addrinfo::{
    family_of, from_sockaddr, hinted_addresses, rdma_freeaddrinfo, rdma_getaddrinfo,
};

/// More nodes than any answer has: a list this long does not end.
const MAX_NODES: usize = 64;

/// Calls `rdma_getaddrinfo` with arguments built from `data` and checks
/// the answer: 0 with a list of well-formed nodes (the family asked for,
/// an address of that family and of its length on the side `RAI_PASSIVE`
/// says, the port of a numeric service, the address of a numeric node,
/// and on the other side nothing or the hints' address there), or -1
/// with `errno` set and nothing returned. A numeric node the hints'
/// family admits, with no service or a numeric one, must resolve; with
/// neither node nor service, hints alone give one node of their own
/// addresses (rdma-core's answer). Panics otherwise.
///
/// The input: the hints' `ai_flags` (4 octets, little-endian); their
/// family (0: `AF_UNSPEC`, 1: `AF_INET`, 2: `AF_INET6`, else the octet
/// itself); an octet whose bits 0, 1 and 2 pass NULL for the node, the
/// service and the hints; the port space (0: `RDMA_PS_TCP`, else the
/// octet); the lengths of the hints' source and destination addresses
/// (an octet each, modulo 29) and their octets; then the node and the
/// service, each ended by a NUL.
///
/// No name is ever looked up: a node always goes with hints whose flags
/// have `RAI_NUMERICHOST`. A service that is not a number is looked up
/// in the services database (`/etc/services`).
pub fn getaddrinfo(data: &[u8]) {
    let mut input = Input(data);
    let mut flags = input.u32() as c_int;
    let family = match input.u8() {
        0 => libc::AF_UNSPEC,
        1 => libc::AF_INET,
        2 => libc::AF_INET6,
        other => c_int::from(other),
    };
    let nulls = input.u8();
    let port_space = match input.u8() {
        0 => RDMA_PS_TCP,
        other => c_int::from(other),
    };
    let src_len = usize::from(input.u8() % 29);
    let mut src = input.bytes(src_len);
    let dst_len = usize::from(input.u8() % 29);
    let mut dst = input.bytes(dst_len);
    let mut strings = input.rest().splitn(3, |&octet| octet == 0);
    let mut string = |null: bool| {
        let octets = strings.next().unwrap_or_default();
        (!null).then(|| CString::new(octets).expect("split at every NUL"))
    };
    let node = string(nulls & 1 != 0);
    let service = string(nulls & 2 != 0);
    if node.is_some() {
        flags |= RAI_NUMERICHOST;
    }
    let hints = (nulls & 4 == 0 || node.is_some()).then(|| RdmaAddrinfo {
        ai_flags: flags,
        ai_family: family,
        ai_port_space: port_space,
        ai_src_len: src_len as libc::socklen_t,
        ai_dst_len: dst_len as libc::socklen_t,
        ai_src_addr: address(&mut src),
        ai_dst_addr: address(&mut dst),
        ..RdmaAddrinfo::reliable_connected()
    });
    let expected = Expected {
        passive: hints
            .as_ref()
            .is_some_and(|h| h.ai_flags & RAI_PASSIVE != 0),
        family: hints.as_ref().map_or(libc::AF_UNSPEC, |h| h.ai_family),
        ip: node.as_deref().and_then(|n| n.to_str().ok()?.parse().ok()),
        port: service.as_deref().and_then(|s| numeric_port(s.to_bytes())),
        hinted: hints.as_ref().map_or((None, None), hinted_addresses),
        hints_alone: node.is_none() && service.is_none(),
    };
    let mut res: *mut RdmaAddrinfo = ptr::null_mut();
    crate::export::set_errno(0);
    // SAFETY: C strings or NULL, hints or NULL, and a writable `res`.
    let answer = unsafe {
        rdma_getaddrinfo(
            node.as_deref().map_or(ptr::null(), |n| n.as_ptr()),
            service.as_deref().map_or(ptr::null(), |s| s.as_ptr()),
            hints.as_ref().map_or(ptr::null(), ptr::from_ref),
            &mut res,
        )
    };
    match answer {
        0 => {
            expected.check(res);
            // SAFETY: the list rdma_getaddrinfo returned, freed once.
            unsafe { rdma_freeaddrinfo(res) };
        }
        -1 => {
            assert!(res.is_null(), "a failure returned a list");
            assert_ne!(errno(), 0, "a failure without errno");
            assert!(
                !expected.must_resolve(service.is_some()),
                "{node:?} with family {family} and service {service:?} did not resolve"
            );
            assert!(
                !expected.hints_alone || hints.is_none(),
                "hints alone did not resolve"
            );
        }
        other => panic!("rdma_getaddrinfo answered {other}"),
    }
}

/// The hints' socket address over `octets` (NULL when there are none).
fn address(octets: &mut [u8]) -> *mut libc::sockaddr {
    if octets.is_empty() {
        ptr::null_mut()
    } else {
        octets.as_mut_ptr().cast()
    }
}

/// The port a service names when it is a decimal number of at most five
/// digits that fits.
fn numeric_port(service: &[u8]) -> Option<u16> {
    let digits =
        !service.is_empty() && service.len() <= 5 && service.iter().all(u8::is_ascii_digit);
    digits
        .then(|| core::str::from_utf8(service).ok()?.parse().ok())
        .flatten()
}

/// What every node of an answer must say.
struct Expected {
    passive: bool,
    /// The hints' family.
    family: c_int,
    /// The node's address, when Rust reads it as one.
    ip: Option<IpAddr>,
    /// The service's port, when it is a number.
    port: Option<u16>,
    /// The hints' whole source and destination addresses.
    hinted: (Option<SocketAddr>, Option<SocketAddr>),
    /// Neither node nor service: the answer is the hints' own.
    hints_alone: bool,
}

impl Expected {
    /// Whether the call had to succeed: a numeric node of a family the
    /// hints admit, and no service or a numeric one.
    fn must_resolve(&self, has_service: bool) -> bool {
        let admitted = match self.ip {
            Some(IpAddr::V4(_)) => [libc::AF_UNSPEC, libc::AF_INET].contains(&self.family),
            Some(IpAddr::V6(_)) => [libc::AF_UNSPEC, libc::AF_INET6].contains(&self.family),
            None => false,
        };
        admitted && (!has_service || self.port.is_some())
    }

    /// Checks every node of the list `res` and that it ends.
    fn check(&self, res: *mut RdmaAddrinfo) {
        assert!(!res.is_null(), "success without a list");
        if self.hints_alone {
            return self.check_hints_alone(res);
        }
        let mut next = res;
        let mut nodes = 0;
        while !next.is_null() {
            nodes += 1;
            assert!(nodes <= MAX_NODES, "the list does not end");
            // SAFETY: a node of the list rdma_getaddrinfo returned.
            let node = unsafe { &*next };
            self.check_node(node);
            next = node.ai_next;
        }
    }

    /// The one node made of the hints: their addresses, and their
    /// family when they have none.
    fn check_hints_alone(&self, res: *mut RdmaAddrinfo) {
        // SAFETY: the list rdma_getaddrinfo returned.
        let node = unsafe { &*res };
        assert!(node.ai_next.is_null(), "hints alone give one node");
        // SAFETY: the node's addresses, NULL or whole (their lengths are
        // checked by `from_sockaddr_len` in the library).
        let (src, dst) = hinted_addresses(node);
        assert_eq!((src, dst), self.hinted, "not the hints' addresses");
        let main = if self.passive {
            src.or(dst)
        } else {
            dst.or(src)
        };
        let family = family_of(main).unwrap_or(self.family);
        assert_eq!(node.ai_family, family);
        assert_eq!(node.ai_flags & RAI_PASSIVE != 0, self.passive);
    }

    fn check_node(&self, node: &RdmaAddrinfo) {
        let length = match node.ai_family {
            libc::AF_INET => size_of::<libc::sockaddr_in>(),
            libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
            other => panic!("a node of family {other}"),
        };
        if self.family != libc::AF_UNSPEC {
            assert_eq!(node.ai_family, self.family, "not the family asked for");
        }
        assert_eq!(node.ai_flags & RAI_PASSIVE != 0, self.passive);
        assert_eq!(node.ai_qp_type, IBV_QPT_RC);
        assert_eq!(node.ai_port_space, RDMA_PS_TCP);
        let (addr, len, other, other_len) = if self.passive {
            (
                node.ai_src_addr,
                node.ai_src_len,
                node.ai_dst_addr,
                node.ai_dst_len,
            )
        } else {
            (
                node.ai_dst_addr,
                node.ai_dst_len,
                node.ai_src_addr,
                node.ai_src_len,
            )
        };
        let hinted_other = if self.passive {
            self.hinted.1
        } else {
            self.hinted.0
        };
        match hinted_other {
            // SAFETY: the node's other address, of its length.
            Some(hinted) => assert_eq!(
                unsafe { crate::cm::addrinfo::from_sockaddr_len(other, other_len) },
                Some(hinted),
                "the other side is not the hints' address"
            ),
            None => assert!(
                other.is_null() && other_len == 0,
                "an address on the wrong side"
            ),
        }
        assert_eq!(
            len as usize, length,
            "the address's length is not its family's"
        );
        assert!(!addr.is_null(), "a node without an address");
        // SAFETY: the node's address, `len` octets long (checked above).
        let family = c_int::from(unsafe { (*addr).sa_family });
        assert_eq!(
            family, node.ai_family,
            "the address is not of the node's family"
        );
        // SAFETY: as above.
        let addr = unsafe { from_sockaddr(addr) }.expect("an IPv4 or IPv6 address");
        if let Some(port) = self.port {
            assert_eq!(addr.port(), port, "not the service's port");
        }
        if let Some(ip) = self.ip {
            // An IPv4-mapped node may come back as the IPv4 address.
            assert_eq!(
                addr.ip().to_canonical(),
                ip.to_canonical(),
                "not the node's address"
            );
        }
        let names: [*mut c_char; 2] = [node.ai_src_canonname, node.ai_dst_canonname];
        assert!(names.iter().all(|name| name.is_null()), "canonical names");
        assert!(node.ai_route.is_null() && node.ai_route_len == 0);
        assert!(node.ai_connect.is_null() && node.ai_connect_len == 0);
    }
}
