//! uwarp's TCP ports on an interface shared with the kernel. Each port is
//! held in the kernel by a TCP socket bound to it and never listening,
//! as Linux's iwpmd holds a hardware RNIC's ports: the kernel's TCP then
//! neither listens on it nor picks it for a connection of its own, and a
//! port the kernel uses already is refused. Each is also put into the
//! steering program's map, so that segments to it reach uwarp; a segment
//! that reaches the kernel all the same (the queue has no AF_XDP socket)
//! is answered by its TCP with a reset, as for any port without a
//! listener.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::port_map::PortMap;

/// Why a port could not be taken.
#[derive(Debug)]
pub enum PortClaimError {
    /// The kernel's TCP uses the port (`EADDRINUSE`).
    InUse(u16),
    /// uwarp holds the port already.
    Taken(u16),
    /// The kernel has no port left to give (an active open).
    Exhausted,
    /// The kernel refused otherwise.
    Kernel(io::Error),
}

impl fmt::Display for PortClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortClaimError::InUse(port) => write!(f, "the kernel's TCP uses port {port}"),
            PortClaimError::Taken(port) => write!(f, "uwarp holds port {port} already"),
            PortClaimError::Exhausted => write!(f, "the kernel has no free port left"),
            PortClaimError::Kernel(e) => write!(f, "the kernel refused to hold the port: {e}"),
        }
    }
}

impl std::error::Error for PortClaimError {}

/// A TCP socket bound to `ip`:`port` (0: a free port the kernel picks),
/// not listening, and the port it holds.
pub fn hold_port(ip: Ipv4Addr, port: u16) -> Result<(OwnedFd, u16), PortClaimError> {
    // SAFETY: plain call; it returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(PortClaimError::Kernel(io::Error::last_os_error()));
    }
    // SAFETY: the descriptor was just made and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `addr` is a sockaddr_in of `len` octets.
    let bound = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    if bound < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EADDRINUSE) if port == 0 => PortClaimError::Exhausted,
            Some(libc::EADDRINUSE) => PortClaimError::InUse(port),
            _ => PortClaimError::Kernel(err),
        });
    }
    let mut len = len;
    // SAFETY: `addr` has room for the `len` octets the kernel may write.
    let named = unsafe {
        libc::getsockname(
            socket.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    };
    if named < 0 {
        return Err(PortClaimError::Kernel(io::Error::last_os_error()));
    }
    Ok((socket, u16::from_be(addr.sin_port)))
}

/// A port uwarp holds, and what uses it.
#[derive(Debug)]
struct Held {
    /// The kernel's placeholder.
    _socket: OwnedFd,
    /// Whether a listener is on it.
    listener: bool,
    /// Connections from it still alive (a listener's accepted ones, or
    /// the one active open it was taken for).
    connections: u32,
}

/// uwarp's ports on one address of an interface shared with the kernel.
/// A port is held while a listener or a connection uses it: a listener
/// closed before the connections it accepted leaves their port to them,
/// since the kernel would answer their segments with resets.
#[derive(Debug)]
pub struct KernelPorts {
    ip: Ipv4Addr,
    map: PortMap,
    held: HashMap<u16, Held>,
}

impl KernelPorts {
    /// Ports on `ip`, steered through `map`.
    pub fn new(ip: Ipv4Addr, map: PortMap) -> Self {
        KernelPorts {
            ip,
            map,
            held: HashMap::new(),
        }
    }

    /// Takes `port` for a listener (0: a free port the kernel picks);
    /// returns the port. A port uwarp's connections hold already is
    /// uwarp's to listen on.
    pub fn claim_listener(&mut self, port: u16) -> Result<u16, PortClaimError> {
        if let Some(held) = self.held.get_mut(&port).filter(|_| port != 0) {
            if held.listener {
                return Err(PortClaimError::Taken(port));
            }
            held.listener = true;
            return Ok(port);
        }
        self.claim(port, true, 0)
    }

    /// Takes a free port, which the kernel picks, for an active open; it
    /// is given back when [`release_connection`](Self::release_connection)
    /// says the connection ended.
    pub fn claim_active(&mut self) -> Result<u16, PortClaimError> {
        self.claim(0, false, 1)
    }

    fn claim(
        &mut self,
        port: u16,
        listener: bool,
        connections: u32,
    ) -> Result<u16, PortClaimError> {
        let (socket, port) = hold_port(self.ip, port)?;
        self.map.insert(port).map_err(PortClaimError::Kernel)?;
        let held = Held {
            _socket: socket,
            listener,
            connections,
        };
        self.held.insert(port, held);
        Ok(port)
    }

    /// A connection a listener on `port` accepted: the port stays held
    /// until it ends too.
    pub fn add_connection(&mut self, port: u16) {
        if let Some(held) = self.held.get_mut(&port) {
            held.connections += 1;
        }
    }

    /// The listener on `port` is gone.
    pub fn release_listener(&mut self, port: u16) {
        if let Some(held) = self.held.get_mut(&port) {
            held.listener = false;
        }
        self.release_if_unused(port);
    }

    /// A connection from `port` (accepted, or opened actively) ended.
    pub fn release_connection(&mut self, port: u16) {
        if let Some(held) = self.held.get_mut(&port) {
            held.connections = held.connections.saturating_sub(1);
        }
        self.release_if_unused(port);
    }

    /// Gives `port` back to the kernel once nothing of uwarp's uses it.
    fn release_if_unused(&mut self, port: u16) {
        let unused = self
            .held
            .get(&port)
            .is_some_and(|held| !held.listener && held.connections == 0);
        if unused {
            self.release(port);
        }
    }

    /// Whether `port` is held.
    pub fn holds(&self, port: u16) -> bool {
        self.held.contains_key(&port)
    }

    /// Gives `port` back to the kernel whatever still uses it (its owner
    /// is gone).
    pub fn release(&mut self, port: u16) {
        if self.held.remove(&port).is_some() {
            let _ = self.map.remove(port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_port_is_refused_to_the_kernel_and_given_back_on_drop() {
        let (held, port) = hold_port(Ipv4Addr::LOCALHOST, 0).unwrap();
        assert_ne!(port, 0);
        // The kernel's own listener cannot take it.
        let taken = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port));
        assert_eq!(
            taken.unwrap_err().kind(),
            io::ErrorKind::AddrInUse,
            "port {port}"
        );
        // Nor can a second hold.
        assert!(matches!(
            hold_port(Ipv4Addr::LOCALHOST, port),
            Err(PortClaimError::InUse(p)) if p == port
        ));
        drop(held);
        std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn a_port_the_kernel_listens_on_is_refused() {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let err = hold_port(Ipv4Addr::LOCALHOST, port).unwrap_err();
        assert!(matches!(err, PortClaimError::InUse(p) if p == port));
        assert_eq!(
            err.to_string(),
            format!("the kernel's TCP uses port {port}")
        );
    }

    #[test]
    fn an_address_not_the_hosts_is_refused() {
        // 192.0.2.0/24 is TEST-NET-1: no interface of the test's has it.
        let err = hold_port(Ipv4Addr::new(192, 0, 2, 1), 0).unwrap_err();
        assert!(
            matches!(&err, PortClaimError::Kernel(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL)),
            "{err}"
        );
    }
}
