//! The service's loop, on one thread: frames from the interface go to
//! the application holding their destination port on uwarp's address,
//! frames from an application go out on the interface when they are TCP
//! from the interface's MAC address and uwarp's address and from a port
//! it holds (it cannot speak for another's connections, nor for the
//! host's other addresses or other hosts), and requests are answered
//! between bursts. Frames no one may take are dropped and counted. An application whose connection closes, or that sends
//! nothing a request is, loses its ports and its link.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use uwarp_dataplane::af_xdp::service::{reply_line, service_socket, Request, SERVICE_DIR};
use uwarp_dataplane::af_xdp::{KernelInterface, PortClaimError};
use uwarp_dataplane::{Eal, EalConfig, Mbuf};

use crate::apps::{App, Link};
use crate::dispatch::{incoming, outgoing, DropReason};
use crate::uplink::Uplink;

/// Frames per burst.
const BURST: u16 = 32;

/// Empty polls in a row before the service sleeps between polls.
const IDLE_POLLS: u32 = 64;

/// How long an idle service sleeps between polls.
const IDLE_SLEEP: Duration = Duration::from_micros(10);

/// How often requests and new applications are looked at.
const CONTROL_EVERY: Duration = Duration::from_micros(200);

/// What the service dropped.
#[derive(Debug, Default)]
struct Dropped {
    /// Either way, not an IPv4 TCP frame the service reads.
    not_tcp: u64,
    /// From the interface, to another address than uwarp's.
    not_our_address: u64,
    /// From the interface, for a port no application holds.
    unowned: u64,
    /// From an application, with another Ethernet source than the
    /// interface's.
    foreign_mac: u64,
    /// From an application, with another IPv4 source than uwarp's
    /// address.
    foreign_address: u64,
    /// From an application, from a port it does not hold.
    not_its_own: u64,
    /// For want of room on the way out.
    full: u64,
    /// For an application whose link is not up yet.
    no_link: u64,
}

impl Dropped {
    /// Counts a frame dropped for `reason`.
    fn record(&mut self, reason: DropReason) {
        *match reason {
            DropReason::NotTcp => &mut self.not_tcp,
            DropReason::NotOurAddress => &mut self.not_our_address,
            DropReason::Unowned => &mut self.unowned,
            DropReason::ForeignMac => &mut self.foreign_mac,
            DropReason::ForeignAddress => &mut self.foreign_address,
            DropReason::NotItsPort => &mut self.not_its_own,
        } += 1;
    }
}

/// The running service.
pub struct Service {
    eal: &'static Eal,
    uplink: Uplink,
    listener: UnixListener,
    socket: PathBuf,
    apps: HashMap<u64, App>,
    /// Which application holds each port.
    owners: HashMap<u16, u64>,
    next_id: u64,
    dropped: Dropped,
}

impl Service {
    /// Starts the EAL, the port on `iface`, and the service's socket.
    pub fn start(iface: &str) -> Result<Service, String> {
        // A mistyped interface is refused before anything starts.
        let interface = KernelInterface::named(iface).map_err(|e| e.to_string())?;
        let eal = Eal::init(
            &EalConfig::virtual_devices(Vec::<String>::new())
                .file_prefix(&format!("uwarpd-{}", std::process::id())),
        )
        .map_err(|e| format!("the EAL did not start: {e}"))?;
        let uplink = Uplink::open(eal, interface)?;
        std::fs::create_dir_all(SERVICE_DIR).map_err(|e| format!("{SERVICE_DIR}: {e}"))?;
        let socket = service_socket(uplink.interface.index).map_err(|e| e.to_string())?;
        // The claim on the interface is the service's: a file left there
        // is a dead service's.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        // Its user's alone (root's), whatever the umask: whoever connects
        // can take free ports and receive their frames.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        eprintln!(
            "uwarpd: serving {iface} ({}) on {}",
            uplink.interface.ipv4.0,
            socket.display()
        );
        Ok(Service {
            eal,
            uplink,
            listener,
            socket,
            apps: HashMap::new(),
            owners: HashMap::new(),
            next_id: 0,
            dropped: Dropped::default(),
        })
    }

    /// Runs until `stop` is set.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), String> {
        let mut frames: Vec<Mbuf> = Vec::with_capacity(usize::from(BURST));
        let mut to_apps: HashMap<u64, Vec<Mbuf>> = HashMap::new();
        let mut to_wire: Vec<Mbuf> = Vec::with_capacity(usize::from(BURST) * 2);
        let mut next_control = Instant::now();
        let mut idle = 0u32;
        let mac = self.uplink.interface.mac;
        let ip = self.uplink.interface.ipv4.0;
        while !stop.load(Ordering::Relaxed) {
            let mut moved = self.uplink.rx.rx_burst(&mut frames, BURST);
            for frame in frames.drain(..) {
                // The program steers only segments to uwarp's address; the
                // comparison costs nothing beside the parse.
                match incoming(frame.data(), &self.owners, ip) {
                    Ok(id) => to_apps.entry(id).or_default().push(frame),
                    Err(reason) => self.dropped.record(reason),
                }
            }
            // The batch of an application that is gone goes with it.
            to_apps.retain(|id, batch| {
                let app = self.apps.get_mut(id);
                let live = app.is_some();
                match app.and_then(|app| app.link.as_mut()) {
                    Some(link) => {
                        link.tx.tx_burst(batch);
                        self.dropped.full += batch.len() as u64;
                    }
                    None => self.dropped.no_link += batch.len() as u64,
                }
                batch.clear();
                live
            });
            for (id, app) in self.apps.iter_mut() {
                let Some(link) = app.link.as_mut() else {
                    continue;
                };
                moved += link.rx.rx_burst(&mut frames, BURST);
                for frame in frames.drain(..) {
                    match outgoing(frame.data(), *id, &self.owners, mac, ip) {
                        Ok(()) => to_wire.push(frame),
                        Err(reason) => self.dropped.record(reason),
                    }
                }
            }
            if !to_wire.is_empty() {
                self.uplink.tx.tx_burst(&mut to_wire);
                self.dropped.full += to_wire.len() as u64;
                to_wire.clear();
            }
            // Idle for a while: sleep a little. The service shares its
            // CPUs with the applications' polling cores, which never
            // yield; a spinning service would get its CPU only when the
            // scheduler's time slice runs out (4 ms here, per hop). A
            // sleeping one is woken by its timer and takes the CPU at once.
            idle = if moved == 0 { idle + 1 } else { 0 };
            if idle > IDLE_POLLS {
                std::thread::sleep(IDLE_SLEEP);
            }
            let now = Instant::now();
            if now >= next_control {
                next_control = now + CONTROL_EVERY;
                self.accept();
                self.serve();
            }
        }
        let dropped = &self.dropped;
        eprintln!(
            "uwarpd: stopping; dropped {} not IPv4 TCP, {} to another address, {} for no application, \
             {} for an application without its link, {} from an application's foreign MAC address, \
             {} from its foreign IPv4 address, {} from its foreign port, {} for want of room",
            dropped.not_tcp,
            dropped.not_our_address,
            dropped.unowned,
            dropped.no_link,
            dropped.foreign_mac,
            dropped.foreign_address,
            dropped.not_its_own,
            dropped.full
        );
        Ok(())
    }

    /// Takes new applications.
    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            let id = self.next_id;
            self.next_id += 1;
            if let Ok(app) = App::new(stream) {
                self.apps.insert(id, app);
            }
        }
    }

    /// Answers every application's requests; forgets those that ended.
    fn serve(&mut self) {
        let ids: Vec<u64> = self.apps.keys().copied().collect();
        for id in ids {
            let app = self.apps.get_mut(&id).expect("listed above");
            let served = app
                .requests()
                .and_then(|lines| lines.iter().try_for_each(|line| self.answer(id, line)));
            if served.is_err() {
                self.forget(id);
            }
        }
    }

    /// Carries out the request `line` of application `id` and answers it.
    /// An application acts only on ports it holds: a port another holds
    /// is refused as taken, and `conn`, `unlisten` and `end` of a port not
    /// its own are refused the same way.
    fn answer(&mut self, id: u64, line: &str) -> std::io::Result<()> {
        let Some(request) = Request::parse(line) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not a request: {line:?}"),
            ));
        };
        let owner = |port: u16| self.owners.get(&port).copied();
        let ports = &mut self.uplink.ports;
        let result = match request {
            Request::Hello { .. } => {
                let app = self.apps.get_mut(&id).expect("asked by a live one");
                if app.link.is_some() {
                    return Err(std::io::Error::other("a second hello"));
                }
                // The link is named after the process the kernel says is
                // at the other end, whatever the hello claims.
                let pid = app.peer_pid()?;
                let link = Link::open(
                    self.eal,
                    &self.uplink.pool,
                    self.uplink.interface.index,
                    pid,
                    id,
                )
                .map_err(std::io::Error::other)?;
                app.link = Some(link);
                Ok(0)
            }
            Request::Listen(port) if port != 0 && owner(port).is_some_and(|o| o != id) => {
                Err(PortClaimError::Taken(port))
            }
            Request::Connection(port) | Request::Unlisten(port) | Request::End(port)
                if owner(port) != Some(id) =>
            {
                Err(PortClaimError::Taken(port))
            }
            Request::Listen(port) => ports.claim_listener(port),
            Request::Active => ports.claim_active(),
            Request::Connection(port) => {
                ports.add_connection(port);
                Ok(port)
            }
            Request::Unlisten(port) => {
                ports.release_listener(port);
                Ok(port)
            }
            Request::End(port) => {
                ports.release_connection(port);
                Ok(port)
            }
        };
        if let (Request::Listen(_) | Request::Active, Ok(port)) = (request, &result) {
            self.owners.insert(*port, id);
            self.apps
                .get_mut(&id)
                .expect("asked by a live one")
                .ports
                .insert(*port);
        }
        // A port the kernel has back is no one's.
        if let Request::Unlisten(port) | Request::End(port) = request {
            if !self.uplink.ports.holds(port) {
                self.owners.remove(&port);
            }
        }
        let app = self.apps.get_mut(&id).expect("asked by a live one");
        app.answer(&reply_line(&result))
    }

    /// Frees what the ended application `id` held: its ports, whatever
    /// still uses them, and its link.
    fn forget(&mut self, id: u64) {
        let Some(app) = self.apps.remove(&id) else {
            return;
        };
        for port in &app.ports {
            if self.owners.get(port) == Some(&id) {
                self.owners.remove(port);
                self.uplink.ports.release(*port);
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}
