//! The interface's service: one long-lived process (`uwarpd`) owns a
//! port beside the kernel (the XDP program, its map, the AF_XDP socket
//! and the ports held in the kernel) and hands each application process
//! its frames over a net_memif link of its own, so that any number of
//! uwarp processes share one interface. This module is what both sides
//! agree on: where the service listens, where an application's link is,
//! and the requests an application makes ([`Request`], one line each,
//! answered by one line: `ok PORT` or `err WHY`), with
//! [`ServicePorts`], the application's [`PortBroker`] through them.
//!
//! The service and its applications run in one network namespace. An
//! application's connection to the service lives as long as it does: the
//! service frees its ports and its link when it closes (also when the
//! process is killed).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use super::broker::PortBroker;
use super::kernel_ports::PortClaimError;

/// Where the services' sockets and links are.
pub const SERVICE_DIR: &str = "/run/uwarp";

/// The network namespace of this process, as the inode of its file:
/// interfaces of two namespaces may share an index.
pub fn network_namespace() -> io::Result<u64> {
    Ok(std::fs::metadata("/proc/self/ns/net")?.ino())
}

/// Where the service of the interface of index `ifindex` in this
/// process's namespace listens.
pub fn service_socket(ifindex: u32) -> io::Result<PathBuf> {
    let netns = network_namespace()?;
    Ok(PathBuf::from(format!(
        "{SERVICE_DIR}/uwarpd-{netns}-{ifindex}.sock"
    )))
}

/// Where the service makes the net_memif link of the application process
/// `pid` on the interface of index `ifindex`.
pub fn link_socket(ifindex: u32, pid: u32) -> io::Result<PathBuf> {
    let netns = network_namespace()?;
    Ok(PathBuf::from(format!(
        "{SERVICE_DIR}/uwarpd-{netns}-{ifindex}-link-{pid}.sock"
    )))
}

/// An application's request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// The first: "make my link".
    Hello {
        /// The application's process id, which names its link.
        pid: u32,
    },
    /// Take `port` (0: any) for a listener.
    Listen(u16),
    /// Take a port for an active open.
    Active,
    /// A listener on the port accepted a connection.
    Connection(u16),
    /// The listener on the port is gone.
    Unlisten(u16),
    /// A connection from the port ended.
    End(u16),
}

impl Request {
    /// The request's line, without its newline.
    pub fn line(&self) -> String {
        match self {
            Request::Hello { pid } => format!("hello {pid}"),
            Request::Listen(port) => format!("listen {port}"),
            Request::Active => "active".to_owned(),
            Request::Connection(port) => format!("conn {port}"),
            Request::Unlisten(port) => format!("unlisten {port}"),
            Request::End(port) => format!("end {port}"),
        }
    }

    /// The request a line holds; `None` for anything else.
    pub fn parse(line: &str) -> Option<Request> {
        let mut words = line.split_whitespace();
        let verb = words.next()?;
        let number = words.next();
        if words.next().is_some() {
            return None;
        }
        let port = || number?.parse::<u16>().ok();
        Some(match verb {
            "hello" => Request::Hello {
                pid: number?.parse().ok()?,
            },
            "listen" => Request::Listen(port()?),
            "active" if number.is_none() => Request::Active,
            "conn" => Request::Connection(port()?),
            "unlisten" => Request::Unlisten(port()?),
            "end" => Request::End(port()?),
            _ => return None,
        })
    }
}

/// The answer's line for `result`.
pub fn reply_line(result: &Result<u16, PortClaimError>) -> String {
    match result {
        Ok(port) => format!("ok {port}"),
        Err(PortClaimError::InUse(port)) => format!("err in-use {port}"),
        Err(PortClaimError::Taken(port)) => format!("err taken {port}"),
        Err(PortClaimError::Exhausted) => "err exhausted".to_owned(),
        Err(PortClaimError::Kernel(e)) => format!("err kernel {}", e.raw_os_error().unwrap_or(0)),
    }
}

/// The result an answer's line gives.
fn parse_reply(line: &str) -> Result<u16, PortClaimError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| words.get(i).and_then(|w| w.parse().ok());
    match words.first().copied() {
        Some("ok") => number(1).ok_or_else(|| garbled(line)),
        Some("err") => Err(match words.get(1).copied() {
            Some("in-use") => PortClaimError::InUse(number(2).unwrap_or(0)),
            Some("taken") => PortClaimError::Taken(number(2).unwrap_or(0)),
            Some("exhausted") => PortClaimError::Exhausted,
            Some("kernel") => PortClaimError::Kernel(io::Error::from_raw_os_error(
                number(2).map_or(libc::EIO, i32::from),
            )),
            _ => garbled(line),
        }),
        _ => Err(garbled(line)),
    }
}

fn garbled(line: &str) -> PortClaimError {
    PortClaimError::Kernel(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the service answered {line:?}"),
    ))
}

/// An application's ports, taken through the interface's service; its
/// connection to the service is its place there, kept while it lives.
#[derive(Debug)]
pub struct ServicePorts {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Set once a request went unanswered: a late answer would be taken
    /// for the next request's, so every later request fails instead.
    broken: bool,
    /// Answers not read yet, of requests sent without waiting
    /// ([`tell`](Self::tell)); they come first, in order.
    unanswered: usize,
}

/// How many answers of requests sent without waiting may stay unread
/// before they are read: far fewer than the socket's buffer holds, so
/// that the service, which drops an application that does not read its
/// answers, never finds its buffer full.
const UNANSWERED_AT_MOST: usize = 64;

impl ServicePorts {
    /// Connects to the service of the interface of index `ifindex` and
    /// says hello, so that it makes this process's link; `Ok(None)` when
    /// no service runs for the interface.
    pub fn connect(ifindex: u32) -> io::Result<Option<ServicePorts>> {
        let path = service_socket(ifindex)?;
        let stream = match UnixStream::connect(&path) {
            Ok(stream) => stream,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        // A service that stopped answering must not hold the control
        // core for good.
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        let mut ports = ServicePorts::over(stream)?;
        let pid = std::process::id();
        ports
            .ask(Request::Hello { pid })
            .map_err(|e| io::Error::other(format!("the interface's service refused: {e}")))?;
        Ok(Some(ports))
    }

    /// Requests and answers over `stream`, nothing sent yet.
    fn over(stream: UnixStream) -> io::Result<ServicePorts> {
        Ok(ServicePorts {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            broken: false,
            unanswered: 0,
        })
    }

    /// Sends `request` and reads its answer (after those of the requests
    /// sent without waiting).
    fn ask(&mut self, request: Request) -> Result<u16, PortClaimError> {
        if self.broken {
            return Err(PortClaimError::Kernel(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an earlier request to the interface's service went unanswered",
            )));
        }
        let answered = self
            .send(request)
            .and_then(|()| self.catch_up())
            .and_then(|()| self.read_answer());
        match answered {
            Ok(answer) => parse_reply(&answer),
            Err(e) => {
                self.broken = true;
                Err(PortClaimError::Kernel(e))
            }
        }
    }

    /// Sends `request`, whose answer the caller does not need: a
    /// connection's use of a port it holds, the end of that use. The service
    /// takes a connection's requests in order, so the answer need not be
    /// waited for (it used to cost the control core a round trip to the
    /// service, up to its 200 us between looks, at every accept and every
    /// close); it is read before the next request's, or once
    /// [`UNANSWERED_AT_MOST`] are waiting.
    fn tell(&mut self, request: Request) {
        if self.broken {
            return;
        }
        let sent = self.send(request).and_then(|()| {
            self.unanswered += 1;
            if self.unanswered >= UNANSWERED_AT_MOST {
                self.catch_up()
            } else {
                Ok(())
            }
        });
        if sent.is_err() {
            self.broken = true;
        }
    }

    /// Writes `request`'s line.
    fn send(&mut self, request: Request) -> io::Result<()> {
        let mut line = request.line();
        line.push('\n');
        self.writer.write_all(line.as_bytes())
    }

    /// Reads the answers of the requests sent without waiting.
    fn catch_up(&mut self) -> io::Result<()> {
        while self.unanswered > 0 {
            self.read_answer()?;
            self.unanswered -= 1;
        }
        Ok(())
    }

    /// Reads the next answer's line.
    fn read_answer(&mut self) -> io::Result<String> {
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the interface's service closed the connection",
            ));
        }
        Ok(answer)
    }
}

impl PortBroker for ServicePorts {
    fn claim_listener(&mut self, port: u16) -> Result<u16, PortClaimError> {
        self.ask(Request::Listen(port))
    }

    fn claim_active(&mut self) -> Result<u16, PortClaimError> {
        self.ask(Request::Active)
    }

    fn add_connection(&mut self, port: u16) {
        self.tell(Request::Connection(port));
    }

    /// Waits for the answer: a listener stopped lets go of its port at
    /// once (another process may listen on it next, and uwarpd serves
    /// its applications in turn), and a listener stops once, not per
    /// connection.
    fn release_listener(&mut self, port: u16) {
        let _ = self.ask(Request::Unlisten(port));
    }

    fn release_connection(&mut self, port: u16) {
        self.tell(Request::End(port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn requests_round_trip_and_garbage_is_refused() {
        for request in [
            Request::Hello { pid: 42 },
            Request::Listen(7174),
            Request::Listen(0),
            Request::Active,
            Request::Connection(1),
            Request::Unlisten(65535),
            Request::End(3),
        ] {
            assert_eq!(Request::parse(&request.line()), Some(request));
        }
        for bad in [
            "",
            "listen",
            "listen 65536",
            "listen -1",
            "active 3",
            "conn 1 2",
            "bye 1",
        ] {
            assert_eq!(Request::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn answers_of_requests_told_are_read_before_the_next_asked() {
        let (near, mut far) = UnixStream::pair().unwrap();
        let mut ports = ServicePorts::over(near).unwrap();
        ports.add_connection(7174);
        ports.release_connection(7174);
        assert_eq!(ports.unanswered, 2, "sent without waiting");
        // The service answers in order: the two told, then the one asked.
        far.write_all(b"ok 7174\nerr taken\nok 40000\n").unwrap();
        assert_eq!(ports.claim_active().unwrap(), 40000);
        assert_eq!(ports.unanswered, 0);
        let mut sent = String::new();
        far.set_read_timeout(Some(std::time::Duration::from_secs(1)))
            .unwrap();
        BufReader::new(&mut far)
            .take(25)
            .read_to_string(&mut sent)
            .unwrap();
        assert_eq!(sent, "conn 7174\nend 7174\nactive");
    }

    #[test]
    fn told_answers_are_read_once_enough_wait() {
        let (near, mut far) = UnixStream::pair().unwrap();
        let mut ports = ServicePorts::over(near).unwrap();
        far.write_all("ok 1\n".repeat(UNANSWERED_AT_MOST).as_bytes())
            .unwrap();
        for _ in 0..UNANSWERED_AT_MOST {
            ports.add_connection(1);
        }
        assert_eq!(ports.unanswered, 0, "read at the limit");
        assert!(!ports.broken);
    }

    #[test]
    fn replies_round_trip() {
        assert_eq!(parse_reply(&reply_line(&Ok(5))).unwrap(), 5);
        let in_use = parse_reply(&reply_line(&Err(PortClaimError::InUse(22))));
        assert!(matches!(in_use, Err(PortClaimError::InUse(22))));
        let kernel = parse_reply(&reply_line(&Err(PortClaimError::Kernel(
            io::Error::from_raw_os_error(libc::EADDRNOTAVAIL),
        ))));
        assert!(
            matches!(kernel, Err(PortClaimError::Kernel(e)) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL))
        );
        assert!(parse_reply("nonsense").is_err());
        assert!(parse_reply("ok").is_err());
    }
}
