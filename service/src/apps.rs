//! One application process of the service: its connection (the requests
//! it makes, answered in order) and its net_memif link, made at its
//! hello, on which the service is the server.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use uwarp_dataplane::af_xdp::service::link_socket;
use uwarp_dataplane::{Device, Eal, Mempool, Port, RxQueue, TxQueue};

use crate::uplink::{one_pair, one_queue};

/// The longest request line taken.
const MAX_LINE: usize = 64;

/// The most octets read from one application per pass, so that one that
/// keeps writing cannot starve the others.
const MAX_READ: usize = 512;

/// An application.
pub struct App {
    /// Its connection to the service.
    control: UnixStream,
    /// What it sent that does not yet end with a newline.
    partial: Vec<u8>,
    /// Its link, once it said hello.
    pub link: Option<Link>,
    /// The ports it holds (in the service's `KernelPorts`).
    pub ports: HashSet<u16>,
}

/// An application's link: the service's end of a net_memif pair.
/// Fields drop in order: the queues, then the port (the driver removes
/// the device and its socket file).
pub struct Link {
    /// Frames from the application.
    pub rx: RxQueue,
    /// Frames to the application.
    pub tx: TxQueue,
    _port: Port,
}

impl App {
    /// An application that just connected; its socket does not block the
    /// service: a request that is not all there yet waits for the next
    /// pass, and an application that does not read its answers is
    /// dropped (see [`App::answer`]).
    pub fn new(control: UnixStream) -> io::Result<App> {
        control.set_nonblocking(true)?;
        Ok(App {
            control,
            partial: Vec::new(),
            link: None,
            ports: HashSet::new(),
        })
    }

    /// The request lines it sent since the last call, at most
    /// [`MAX_READ`] octets' worth per call; an error once it closed its
    /// connection (it ended) or sent something no request is.
    pub fn requests(&mut self) -> io::Result<Vec<String>> {
        let mut buf = [0u8; MAX_READ];
        let got = match self.control.read(&mut buf) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")),
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        self.partial.extend_from_slice(&buf[..got]);
        let mut lines = Vec::new();
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8(line)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not text"))?;
            lines.push(line.trim_end().to_owned());
        }
        if self.partial.len() > MAX_LINE {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
        Ok(lines)
    }

    /// Sends the answer `line`. An application that left earlier answers
    /// unread, so that this one does not fit its socket, gets an error
    /// (and is dropped): it cannot hold the service up.
    pub fn answer(&mut self, line: &str) -> io::Result<()> {
        let line = format!("{line}\n");
        let sent = self.control.write(line.as_bytes())?;
        if sent < line.len() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the application does not read its answers",
            ));
        }
        Ok(())
    }

    /// The process at the other end of its connection, as the kernel
    /// says (`SO_PEERCRED`).
    pub fn peer_pid(&self) -> io::Result<u32> {
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` has the `len` octets the kernel may write.
        let got = unsafe {
            libc::getsockopt(
                self.control.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        u32::try_from(cred.pid).map_err(|_| io::Error::other("no peer process"))
    }
}

impl Link {
    /// The link of the application process `pid` on the interface of
    /// index `ifindex`: a net_memif server named after `id`, started; its
    /// link comes up when the application's client port connects.
    pub fn open(
        eal: &'static Eal,
        pool: &Arc<Mempool>,
        ifindex: u32,
        pid: u32,
        id: u64,
    ) -> Result<Link, String> {
        let socket = link_socket(ifindex, pid).map_err(|e| e.to_string())?;
        // A file left by an earlier process of the same id, which died
        // with its link.
        let _ = std::fs::remove_file(&socket);
        let args = format!(
            "role=server,socket={},socket-abstract=no,id=0",
            socket.display()
        );
        let device = Device::create_vdev(eal, &format!("net_memif_app{id}"), &args)
            .map_err(|e| format!("cannot create the link of process {pid}: {e}"))?;
        let mut port = Port::configure(eal, device, &one_queue(), std::slice::from_ref(pool))
            .map_err(|e| format!("cannot set up the link of process {pid}: {e}"))?;
        port.start()
            .map_err(|e| format!("cannot start the link of process {pid}: {e}"))?;
        let (rx, tx) = one_pair(port.take_queues().expect("a started port has its queues"));
        Ok(Link {
            rx,
            tx,
            _port: port,
        })
    }
}
