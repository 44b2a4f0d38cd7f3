//! One socket's MPA startup phase (RFC 5044 section 7.1, RFC 6581): the
//! socket, read as octets arrive, and the sans-IO [`Startup`] they feed.

use std::io::{self, Read};
use std::net::TcpStream;

use uwarp_stack::mpa::Micros;

use super::descriptors::Registered;
use uwarp_control::startup::{Progress, Side, Startup};

/// A socket in its startup phase.
#[derive(Debug)]
pub(crate) struct Setup {
    pub(crate) stream: Registered<TcpStream>,
    pub(crate) startup: Startup,
}

impl Setup {
    /// A socket (already non-blocking) starting as `side`.
    pub(crate) fn new(stream: Registered<TcpStream>, side: Side) -> Self {
        Self {
            stream,
            startup: Startup::new(side),
        }
    }

    /// Reads what the socket has and advances the startup.
    pub(crate) fn poll(&mut self, now: Micros) -> Progress {
        let mut chunk = [0u8; 2048];
        loop {
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => return self.startup.on_closed(),
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.startup.on_closed(),
            };
            match self.startup.feed(&chunk[..n]) {
                Progress::Pending => {}
                other => return other,
            }
        }
        self.startup.on_timer(now)
    }
}
