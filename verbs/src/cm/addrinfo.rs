//! Addresses: `rdma_getaddrinfo` and `rdma_freeaddrinfo`, and the
//! conversions between C socket addresses and Rust's.

use core::ffi::{c_char, c_int};
use core::ptr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::abi::cm::*;
use crate::export::{guard, set_errno, symbol_versions};

/// The address `addr` points at (IPv4 or IPv6), if it is one.
///
/// # Safety
///
/// `addr` is NULL or points at a socket address as long as its family
/// says.
pub unsafe fn from_sockaddr(addr: *const libc::sockaddr) -> Option<SocketAddr> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: the caller promises a socket address; its family field is
    // first in every one.
    match c_int::from(unsafe { (*addr).sa_family }) {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*addr.cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*addr.cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let port = u16::from_be(sin6.sin6_port);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                port,
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The address `len` octets at `addr` hold (IPv4 or IPv6), if they hold
/// a whole one: what `rdma_getaddrinfo` reads of its hints' addresses.
///
/// # Safety
///
/// `addr` is NULL or readable for `len` octets.
pub unsafe fn from_sockaddr_len(
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = usize::try_from(len).ok()?;
    if addr.is_null() || len < size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: the family field is first, and within `len`.
    let needed = match c_int::from(unsafe { (*addr).sa_family }) {
        libc::AF_INET => size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => size_of::<libc::sockaddr_in6>(),
        _ => return None,
    };
    // SAFETY: a whole address of its family is readable.
    (len >= needed)
        .then(|| unsafe { from_sockaddr(addr) })
        .flatten()
}

/// `addr` as a C socket address, in a `sockaddr_storage`, and its length.
pub use uwarp::c_sockaddr as to_sockaddr;

/// `rdma_getaddrinfo`: resolves `node` and `service` (as `getaddrinfo`
/// does) into connection-manager address information: with `RAI_PASSIVE`
/// in the hints' flags, source addresses to listen on; otherwise
/// destinations to connect to. With `RAI_NUMERICHOST`, `node` must be a
/// numeric address: no name is looked up (no DNS query is sent).
///
/// As rdma-core's: with neither `node` nor `service`, the one entry is
/// made of the hints' own addresses (libfabric's verbs provider asks so
/// for every endpoint); an entry without a source address takes the
/// hints' `ai_src_addr`, and one without a destination the hints'
/// `ai_dst_addr`. 0, or -1 with `errno` set (`EINVAL` with neither node,
/// service nor hints).
///
/// # Safety
///
/// `node` and `service` are NULL or C strings; `hints` is NULL or
/// readable, its addresses NULL or socket addresses; `res` is writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const RdmaAddrinfo,
    res: *mut *mut RdmaAddrinfo,
) -> c_int {
    guard(-1, || {
        // SAFETY: the caller promises readable hints, if any.
        let hints = unsafe { hints.as_ref() };
        if res.is_null() || (node.is_null() && service.is_null() && hints.is_none()) {
            set_errno(libc::EINVAL);
            return -1;
        }
        let flags = hints.map_or(0, |hints| hints.ai_flags);
        let (hinted_src, hinted_dst) = hints.map_or((None, None), hinted_addresses);
        let passive = flags & RAI_PASSIVE != 0;
        let entries = if node.is_null() && service.is_null() {
            vec![(hinted_src, hinted_dst)]
        } else {
            let family = hints.map_or(libc::AF_UNSPEC, |hints| hints.ai_family);
            // SAFETY: forwarded.
            match unsafe { resolve(node, service, flags, family) } {
                Ok(found) => found
                    .into_iter()
                    .map(|addr| {
                        if passive {
                            (Some(addr), hinted_dst)
                        } else {
                            (hinted_src, Some(addr))
                        }
                    })
                    .collect(),
                Err(errno) => {
                    set_errno(errno);
                    return -1;
                }
            }
        };
        let mut list: *mut RdmaAddrinfo = ptr::null_mut();
        let hinted_family = hints.map_or(libc::AF_UNSPEC, |hints| hints.ai_family);
        for (src, dst) in entries.into_iter().rev() {
            // The family of the address the entry is for: the source to
            // listen on, or the destination to connect to.
            let main = if passive { src.or(dst) } else { dst.or(src) };
            let family = family_of(main).unwrap_or(hinted_family);
            list = Box::into_raw(entry(src, dst, flags & RAI_PASSIVE, family, list));
        }
        if list.is_null() {
            set_errno(libc::ENOENT);
            return -1;
        }
        // SAFETY: the caller promises `res` is writable.
        unsafe { res.write(list) };
        0
    })
}

/// The addresses `getaddrinfo` finds for `node` and `service` (with the
/// `RAI_` `flags` that have a `getaddrinfo` meaning, and `family`), or the
/// `errno` to answer.
///
/// # Safety
///
/// `node` and `service` are NULL or C strings.
unsafe fn resolve(
    node: *const c_char,
    service: *const c_char,
    flags: c_int,
    family: c_int,
) -> Result<Vec<SocketAddr>, c_int> {
    // SAFETY: all zeros is a valid addrinfo (the hints getaddrinfo
    // takes).
    let mut ask: libc::addrinfo = unsafe { core::mem::zeroed() };
    ask.ai_family = family;
    ask.ai_socktype = libc::SOCK_STREAM;
    ask.ai_flags = [
        (RAI_PASSIVE, libc::AI_PASSIVE),
        (RAI_NUMERICHOST, libc::AI_NUMERICHOST),
    ]
    .into_iter()
    .filter(|&(rai, _)| flags & rai != 0)
    .fold(0, |ai_flags, (_, ai)| ai_flags | ai);
    let mut found: *mut libc::addrinfo = ptr::null_mut();
    // SAFETY: the strings are the caller's; `found` receives a list freed
    // below.
    let code = unsafe { libc::getaddrinfo(node, service, &ask, &mut found) };
    if code != 0 {
        return Err(if code == libc::EAI_SYSTEM {
            libc::EIO
        } else {
            libc::ENOENT
        });
    }
    let mut addresses = Vec::new();
    let mut next = found;
    while !next.is_null() {
        // SAFETY: a node of the list getaddrinfo returned.
        let info = unsafe { &*next };
        // SAFETY: getaddrinfo's address of the family it says.
        if let Some(addr) = unsafe { from_sockaddr(info.ai_addr) } {
            addresses.push(addr);
        }
        next = info.ai_next;
    }
    // SAFETY: the list getaddrinfo returned, freed once.
    unsafe { libc::freeaddrinfo(found) };
    Ok(addresses)
}

/// The hints' source and destination addresses, those that are whole
/// addresses of their length.
pub fn hinted_addresses(hints: &RdmaAddrinfo) -> (Option<SocketAddr>, Option<SocketAddr>) {
    // SAFETY: the caller of rdma_getaddrinfo promises the hints'
    // addresses are NULL or readable for their lengths.
    unsafe {
        (
            from_sockaddr_len(hints.ai_src_addr, hints.ai_src_len),
            from_sockaddr_len(hints.ai_dst_addr, hints.ai_dst_len),
        )
    }
}

/// The address family of `addr`, if any.
pub fn family_of(addr: Option<SocketAddr>) -> Option<c_int> {
    addr.map(|addr| match addr.ip() {
        IpAddr::V4(_) => libc::AF_INET,
        IpAddr::V6(_) => libc::AF_INET6,
    })
}

/// One entry of an `rdma_addrinfo` list with these addresses, `flags` and
/// `family`, followed by `next`.
fn entry(
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    flags: c_int,
    family: c_int,
    next: *mut RdmaAddrinfo,
) -> Box<RdmaAddrinfo> {
    let boxed = |addr: Option<SocketAddr>| match addr {
        Some(addr) => {
            let (storage, len) = to_sockaddr(addr);
            (
                Box::into_raw(Box::new(storage)).cast::<libc::sockaddr>(),
                len,
            )
        }
        None => (ptr::null_mut(), 0),
    };
    let ((src_addr, src_len), (dst_addr, dst_len)) = (boxed(src), boxed(dst));
    Box::new(RdmaAddrinfo {
        ai_flags: flags,
        ai_family: family,
        ai_src_len: src_len,
        ai_dst_len: dst_len,
        ai_src_addr: src_addr,
        ai_dst_addr: dst_addr,
        ai_next: next,
        ..RdmaAddrinfo::reliable_connected()
    })
}

/// `rdma_freeaddrinfo`: frees a list [`rdma_getaddrinfo`] returned.
///
/// # Safety
///
/// `res` is NULL or a list `rdma_getaddrinfo` returned, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut RdmaAddrinfo) {
    let mut next = res;
    while !next.is_null() {
        // SAFETY: an entry `entry` boxed, with its addresses boxed too.
        let node = unsafe { Box::from_raw(next) };
        for addr in [node.ai_src_addr, node.ai_dst_addr] {
            if !addr.is_null() {
                // SAFETY: boxed as a sockaddr_storage by `entry`.
                drop(unsafe { Box::from_raw(addr.cast::<libc::sockaddr_storage>()) });
            }
        }
        next = node.ai_next;
    }
}

symbol_versions! {
    rdma_getaddrinfo => "RDMACM_1.0",
    rdma_freeaddrinfo => "RDMACM_1.0",
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rdma_getaddrinfo` on `node` with `flags`, active side: the answer
    /// and the list (freed).
    fn resolve(node: &core::ffi::CStr, flags: c_int) -> c_int {
        // SAFETY: all zeros is a valid addrinfo of no address.
        let mut hints: RdmaAddrinfo = unsafe { core::mem::zeroed() };
        hints.ai_flags = flags;
        let mut res = ptr::null_mut();
        // SAFETY: a C string, hints and a writable `res`.
        let answer = unsafe { rdma_getaddrinfo(node.as_ptr(), ptr::null(), &hints, &mut res) };
        // SAFETY: the list returned, if any, freed once.
        unsafe { rdma_freeaddrinfo(res) };
        answer
    }

    /// Regression: `RAI_NUMERICHOST` was ignored, so a name was looked up
    /// (a DNS query, for a name not in /etc/hosts) where the application
    /// (and the `getaddrinfo` fuzz target) asked for a numeric address
    /// only.
    #[test]
    fn numeric_host_looks_up_no_name() {
        assert_eq!(resolve(c"localhost", RAI_NUMERICHOST), -1);
        assert_eq!(resolve(c"127.0.0.1", RAI_NUMERICHOST), 0);
        assert_eq!(resolve(c"localhost", 0), 0, "/etc/hosts names localhost");
    }

    /// Regression (issue 39): libfabric's verbs provider asks with hints
    /// alone; rdma-core answers with the hints' addresses, where uwarp
    /// answered `EINVAL`. And a destination found takes the hints'
    /// source.
    #[test]
    fn hints_alone_give_their_addresses() {
        let src: SocketAddr = "127.0.0.1:7471".parse().unwrap();
        let dst: SocketAddr = "127.0.0.2:4420".parse().unwrap();
        let (mut src_c, _) = to_sockaddr(src);
        let (mut dst_c, _) = to_sockaddr(dst);
        // SAFETY: all zeros is a valid addrinfo of no address.
        let mut hints: RdmaAddrinfo = unsafe { core::mem::zeroed() };
        hints.ai_src_addr = ptr::from_mut(&mut src_c).cast();
        hints.ai_src_len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        hints.ai_dst_addr = ptr::from_mut(&mut dst_c).cast();
        hints.ai_dst_len = hints.ai_src_len;
        let mut res = ptr::null_mut();
        // SAFETY: hints with two addresses, and a writable `res`.
        let answer = unsafe { rdma_getaddrinfo(ptr::null(), ptr::null(), &hints, &mut res) };
        assert_eq!(answer, 0);
        // SAFETY: the list returned, read then freed once.
        unsafe {
            assert_eq!(from_sockaddr((*res).ai_src_addr), Some(src));
            assert_eq!(from_sockaddr((*res).ai_dst_addr), Some(dst));
            assert_eq!((*res).ai_family, libc::AF_INET);
            assert!((*res).ai_next.is_null());
            rdma_freeaddrinfo(res);
        }
        hints.ai_dst_addr = ptr::null_mut();
        hints.ai_dst_len = 0;
        // SAFETY: as above, with a numeric node.
        let answer =
            unsafe { rdma_getaddrinfo(c"127.0.0.3".as_ptr(), c"9".as_ptr(), &hints, &mut res) };
        assert_eq!(answer, 0);
        // SAFETY: as above.
        unsafe {
            assert_eq!(from_sockaddr((*res).ai_src_addr), Some(src));
            assert_eq!(
                from_sockaddr((*res).ai_dst_addr),
                Some("127.0.0.3:9".parse().unwrap())
            );
            rdma_freeaddrinfo(res);
        }
        // Neither node, service nor hints.
        // SAFETY: a writable `res`.
        let answer = unsafe { rdma_getaddrinfo(ptr::null(), ptr::null(), ptr::null(), &mut res) };
        assert_eq!(answer, -1);
    }
}
