//! uwarp's TCP on an IEEE 802.1Q VLAN against the Linux kernel's TCP:
//! two network namespaces joined by a veth pair (the trunk), uwarp
//! (`uwarp-perf tcp --vlan 42:5`) on DPDK's net_af_packet in one, and in
//! the other the kernel on VLAN 42.
//!
//! The kernel's VLAN device is `ip link add link DEV name DEV.42 type
//! vlan id 42`, where the kernel has the 8021q module. Where it does not
//! (the test machines' kernels have neither it nor a VLAN-filtering
//! bridge nor tc's vlan action), the test stands in for it with an
//! access port of its own ([`AccessPort`]): it takes the trunk's frames
//! tagged with VLAN 42 (and checks their priority) onto a second veth
//! pair whose far end is the kernel's device on the VLAN, untagged, and
//! tags that device's frames onto the trunk.
//!
//! - A kernel peer on the untagged trunk device (another address in the
//!   subnet) does not reach uwarp: no ARP answer, no ping, no TCP.
//! - Over the VLAN, the kernel resolves uwarp by ARP, `ping` is
//!   answered, and 64 MiB move each way with uwarp as server (a kernel
//!   source through uwarp's echo) and as client (uwarp's source through
//!   a kernel echo), SHA-256 digests equal on both ends.
//!
//! The kernel's side runs on threads of this test that enter its
//! namespace. The namespaces (and the pairs with them) are removed on
//! every exit path. Needs root (namespaces, af_packet).

mod common;

use std::collections::BTreeSet;
use std::ffi::CString;
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::kernel::{in_netns, kernel_echo, kernel_source, the_report};
use common::netns::Namespaces;
use common::{sh, Perf};
use uwarp_testing::{root_or_skip, serial};

/// Octets moved each way.
const BYTES: u64 = 64 << 20;
/// The VLAN, and the priority uwarp tags its frames with.
const VLAN: &str = "42:5";
/// uwarp's address, and the kernel's on the VLAN device.
const UWARP_IP: &str = "10.82.42.2";
const KERNEL_IP: &str = "10.82.42.1";
/// The untagged kernel peer's address, on the parent device.
const UNTAGGED_IP: &str = "10.82.42.3";

/// The VLAN's id and uwarp's priority, as [`VLAN`] says.
const VLAN_ID: u16 = 42;
const PRIORITY: u8 = 5;

/// The TPID of a customer VLAN tag (IEEE 802.1Q).
const TPID: [u8; 2] = [0x81, 0x00];

/// What one direction of an [`AccessPort`] did.
#[derive(Debug, Default)]
struct Tally {
    /// Frames passed on.
    forwarded: u64,
    /// Frames from the trunk not tagged with the VLAN's id.
    dropped: u64,
    /// The priorities of the tagged frames passed on.
    priorities: BTreeSet<u8>,
}

/// An IEEE 802.1Q access port in software, as a switch port on a VLAN
/// is: frames from the trunk device tagged with [`VLAN_ID`] go to the
/// access device untagged (others are dropped), and the access device's
/// frames go to the trunk tagged (priority 0). A packet socket on each
/// device, a thread each way; stopped and joined on drop.
struct AccessPort {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Tally>>,
}

impl AccessPort {
    /// Starts between `trunk` and `access`, devices of the namespace
    /// `ns`.
    fn start(ns: &str, trunk: &str, access: &str) -> Self {
        let (trunk, access) = (trunk.to_owned(), access.to_owned());
        let sockets = in_netns(ns, move || {
            (PacketSocket::bind(&trunk), PacketSocket::bind(&access))
        });
        let (trunk, access) = (Arc::new(sockets.0), Arc::new(sockets.1));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = vec![
            forward(&stop, &trunk, &access, untag),
            forward(&stop, &access, &trunk, tag),
        ];
        AccessPort { stop, threads }
    }

    /// Stops; what went towards the access device, then the trunk.
    fn finish(mut self) -> (Tally, Tally) {
        self.stop.store(true, Ordering::Relaxed);
        let mut tallies = self.threads.drain(..).map(|t| t.join().expect("forwards"));
        (tallies.next().unwrap(), tallies.next().unwrap())
    }
}

impl Drop for AccessPort {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What an [`AccessPort`] does to a frame one way: the frame, with the
/// tag the kernel took out of it if any, to the frame to pass on, or
/// `None` to drop it (counted in the tally).
type Change = fn(&[u8], Option<u16>, &mut Tally) -> Option<Vec<u8>>;

/// Moves frames from `from` to `to` until `stop`, through `change`
/// (which says `None` to drop one) on a thread of its own.
fn forward(
    stop: &Arc<AtomicBool>,
    from: &Arc<PacketSocket>,
    to: &Arc<PacketSocket>,
    change: Change,
) -> JoinHandle<Tally> {
    let (stop, from, to) = (Arc::clone(stop), Arc::clone(from), Arc::clone(to));
    std::thread::spawn(move || {
        let mut tally = Tally::default();
        let mut buf = vec![0u8; 1 << 16];
        while !stop.load(Ordering::Relaxed) {
            let Some((len, tci)) = from.receive(&mut buf) else {
                continue;
            };
            if let Some(frame) = change(&buf[..len], tci, &mut tally) {
                to.send(&frame);
                tally.forwarded += 1;
            }
        }
        tally
    })
}

/// A frame from the trunk, whose tag the kernel may have moved out of
/// the frame (`tci`), untagged if it is the VLAN's.
fn untag(frame: &[u8], tci: Option<u16>, tally: &mut Tally) -> Option<Vec<u8>> {
    let (tci, untagged) = match tci {
        Some(tci) => (tci, frame.to_vec()),
        None if frame.len() >= 18 && frame[12..14] == TPID => {
            let tci = u16::from_be_bytes([frame[14], frame[15]]);
            (tci, [&frame[..12], &frame[16..]].concat())
        }
        None => {
            tally.dropped += 1;
            return None;
        }
    };
    if tci & 0x0fff != VLAN_ID {
        tally.dropped += 1;
        return None;
    }
    tally.priorities.insert((tci >> 13) as u8);
    Some(untagged)
}

/// A frame from the access device, tagged for the trunk.
fn tag(frame: &[u8], _tci: Option<u16>, _tally: &mut Tally) -> Option<Vec<u8>> {
    let tag = [TPID[0], TPID[1], (VLAN_ID >> 8) as u8, VLAN_ID as u8];
    (frame.len() >= 14).then(|| [&frame[..12], &tag[..], &frame[12..]].concat())
}

/// A raw packet socket bound to one device (`packet(7)`), reporting the
/// VLAN tag the kernel takes out of received frames
/// (`PACKET_AUXDATA`), with a 100 ms receive timeout.
struct PacketSocket(OwnedFd);

impl PacketSocket {
    fn bind(device: &str) -> Self {
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket takes no pointers; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(all)) };
        assert!(
            fd >= 0,
            "packet socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: fd is a new descriptor that nothing else owns.
        let socket = PacketSocket(unsafe { OwnedFd::from_raw_fd(fd) });
        let name = CString::new(device).expect("a device name");
        // SAFETY: name is a NUL-terminated string that outlives the call.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(index > 0, "no device {device}");
        // SAFETY: sockaddr_ll is plain data, valid all zero.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = all;
        address.sll_ifindex = index as i32;
        // SAFETY: address is a sockaddr_ll of the length given.
        let bound = unsafe {
            libc::bind(
                fd,
                (&address as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            bound,
            0,
            "bind to {device}: {}",
            std::io::Error::last_os_error()
        );
        socket.set_option(libc::SOL_PACKET, libc::PACKET_AUXDATA, &1i32);
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        socket.set_option(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &timeout);
        socket
    }

    fn set_option<T>(&self, level: i32, name: i32, value: &T) {
        // SAFETY: value points to a T of the size given, for the call.
        let set = unsafe {
            libc::setsockopt(
                self.0.as_raw_fd(),
                level,
                name,
                (value as *const T).cast(),
                std::mem::size_of::<T>() as u32,
            )
        };
        assert_eq!(set, 0, "setsockopt: {}", std::io::Error::last_os_error());
    }

    /// The next frame that arrived on the device (not one it sent), into
    /// `buf`: its length and the tag the kernel took out of it, if any;
    /// `None` after the timeout.
    fn receive(&self, buf: &mut [u8]) -> Option<(usize, Option<u16>)> {
        // SAFETY: plain data, valid all zero.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: plain data, valid all zero.
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        message.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in message is to a live buffer of the
        // length it gives, for the call.
        let len = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut message, 0) };
        if len < 0 || from.sll_pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        let mut tci = None;
        // SAFETY: message is the header recvmsg filled in; its control
        // buffer is still alive, and CMSG_NXTHDR stays within its length.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&message);
            while !header.is_null() {
                let aux = (*header).cmsg_level == libc::SOL_PACKET
                    && (*header).cmsg_type == libc::PACKET_AUXDATA;
                if aux {
                    let data = libc::CMSG_DATA(header).cast::<libc::tpacket_auxdata>();
                    let aux = data.read_unaligned();
                    if aux.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
                        tci = Some(aux.tp_vlan_tci);
                    }
                }
                header = libc::CMSG_NXTHDR(&message, header);
            }
        }
        Some((len as usize, tci))
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: frame is a live buffer of the length given.
        let sent = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            sent,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// `ip netns exec NS COMMAND...`, which must succeed.
fn in_ns(ns: &str, command: &[&str]) {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(command);
    sh("ip", &full);
}

/// Whether `ping` from namespace `ns` (bound to device `dev`) to uwarp
/// is answered, within about `count` seconds.
fn ping(ns: &str, dev: &str, count: u32) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-q", "-I", dev])
        .args(["-c", &count.to_string(), "-W", "1", UWARP_IP])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("ping runs")
        .success()
}

/// What the kernel of `ns` knows of uwarp's address on `dev`.
fn neighbour(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args([
            "netns", "exec", ns, "ip", "neigh", "show", UWARP_IP, "dev", dev,
        ])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `uwarp-perf tcp` in namespace `ns` on its end of the pair, on the
/// VLAN, with `role` arguments.
fn uwarp(ns: &str, role: &[&str]) -> Perf {
    let eal = format!("--vdev net_af_packet0,iface={ns},qpairs=1");
    let mut args: Vec<String> = vec!["tcp".into()];
    args.extend(role.iter().map(|a| a.to_string()));
    let bytes = BYTES.to_string();
    let ip = format!("{UWARP_IP}/24");
    for arg in [
        "--eal",
        &eal,
        "--ip",
        &ip,
        "--vlan",
        VLAN,
        "--bytes",
        &bytes,
        "--json",
        "--timeout",
        "120",
    ] {
        args.push(arg.to_owned());
    }
    Perf::start("uwarp-perf tcp", &["ip", "netns", "exec", ns], &args)
}

/// The one report of a finished `uwarp-perf tcp`, which must have
/// succeeded and closed cleanly.
fn report_of(perf: Perf) -> serde_json::Value {
    let finished = perf.finish();
    let reports: Vec<serde_json::Value> = finished
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let report = the_report(&reports, &finished.stderr);
    assert!(finished.status.success(), "{report}\n{}", finished.stderr);
    assert_eq!(report["end"], "closed", "{report}");
    report
}

#[test]
fn uwarp_on_a_vlan_talks_to_the_kernel_on_it_and_not_to_the_untagged_link() {
    if !root_or_skip("a network namespace") {
        return;
    }
    let _serial = serial();
    let namespaces = Namespaces::new("uwvl");
    // uwarp on the "server" end, the kernel on the "client" end.
    let (uwarp_ns, kernel_ns) = (namespaces.server(), namespaces.client());
    let parent = kernel_ns.clone();

    // uwarp as server first: its echo waits while the untagged peer
    // tries, then serves the kernel's connection over the VLAN.
    let mut server = uwarp(&uwarp_ns, &["--role", "echo", "--listen", "5401"]);
    server.wait_for("listening on");

    // The untagged peer: the parent device alone holds an address.
    in_ns(
        &kernel_ns,
        &[
            "ip",
            "addr",
            "add",
            &format!("{UNTAGGED_IP}/24"),
            "dev",
            &parent,
        ],
    );
    assert!(!ping(&kernel_ns, &parent, 2), "untagged ping answered");
    let refused = in_netns(&kernel_ns, || {
        let uwarp: SocketAddr = SocketAddrV4::new(UWARP_IP.parse().unwrap(), 5401).into();
        TcpStream::connect_timeout(&uwarp, Duration::from_secs(3)).is_err()
    });
    assert!(refused, "an untagged TCP connection reached uwarp");
    let seen = neighbour(&kernel_ns, &parent);
    assert!(!seen.contains("lladdr"), "untagged ARP answered: {seen}");
    in_ns(
        &kernel_ns,
        &[
            "ip",
            "addr",
            "del",
            &format!("{UNTAGGED_IP}/24"),
            "dev",
            &parent,
        ],
    );

    // The kernel on the VLAN: its VLAN device, or the test's access port
    // to a device of its own.
    let (vlan_dev, access_port) = match kernel_vlan_device(&kernel_ns, &parent) {
        Some(dev) => (dev, None),
        None => {
            let (port_side, kernel_side) = (format!("{parent}-t"), format!("{parent}-h"));
            in_ns(
                &kernel_ns,
                &[
                    "ip",
                    "link",
                    "add",
                    &port_side,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &kernel_side,
                ],
            );
            for dev in [&port_side, &kernel_side] {
                quiet_and_up(&kernel_ns, dev);
            }
            let port = AccessPort::start(&kernel_ns, &parent, &port_side);
            (kernel_side, Some(port))
        }
    };
    in_ns(
        &kernel_ns,
        &[
            "ip",
            "addr",
            "add",
            &format!("{KERNEL_IP}/24"),
            "dev",
            &vlan_dev,
        ],
    );
    assert!(ping(&kernel_ns, &vlan_dev, 3), "ping over the VLAN");
    let seen = neighbour(&kernel_ns, &vlan_dev);
    assert!(seen.contains("lladdr"), "uwarp resolved by ARP: {seen}");

    let peer: SocketAddr = SocketAddrV4::new(UWARP_IP.parse().unwrap(), 5401).into();
    let kernel = in_netns(&kernel_ns, move || kernel_source(peer, BYTES));
    let report = report_of(server);
    eprintln!("uwarp echo on VLAN {VLAN}: {} Gbit/s", report["gbps"]);
    assert_eq!((kernel.sent, kernel.received), (BYTES, BYTES));
    assert_eq!(report["bytes_received"], BYTES);
    assert_eq!(report["sha256_received"], kernel.sent_sha256.as_str());
    assert_eq!(report["sha256_sent"], kernel.received_sha256.as_str());
    assert_eq!(kernel.sent_sha256, kernel.received_sha256);

    // uwarp as client: it resolves the kernel by ARP on the VLAN.
    let listener = in_netns(&kernel_ns, || {
        TcpListener::bind((KERNEL_IP, 5402)).expect("the kernel listens")
    });
    let echo = kernel_echo(listener);
    let target = format!("{KERNEL_IP}:5402");
    let client = uwarp(&uwarp_ns, &["--role", "source", "--connect", &target]);
    let report = report_of(client);
    let kernel = echo.join().expect("the echo ends");
    eprintln!("uwarp source on VLAN {VLAN}: {} Gbit/s", report["gbps"]);
    assert_eq!(report["bytes_sent"], BYTES);
    assert_eq!(report["bytes_received"], BYTES);
    assert_eq!(kernel.received, BYTES);
    assert_eq!(report["sha256_sent"], kernel.received_sha256.as_str());
    assert_eq!(report["sha256_received"], kernel.sent_sha256.as_str());
    if let Some(port) = access_port {
        let (to_kernel, to_uwarp) = port.finish();
        eprintln!("access port: to the kernel {to_kernel:?}, to uwarp {to_uwarp:?}");
        // Every frame uwarp sent was tagged with the VLAN and its priority.
        assert_eq!(to_kernel.dropped, 0, "{to_kernel:?}");
        assert_eq!(to_kernel.priorities, BTreeSet::from([PRIORITY]));
        assert!(to_kernel.forwarded > 2 * (BYTES / 1500), "{to_kernel:?}");
    }
}

/// Links `dev` of `ns` up, as the pair's ends are: checksum and
/// segmentation offloads off (the frames carry real checksums), no IPv6.
fn quiet_and_up(ns: &str, dev: &str) {
    in_ns(
        ns,
        &[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
        ],
    );
    in_ns(
        ns,
        &[
            "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro",
            "off",
        ],
    );
    in_ns(ns, &["ip", "link", "set", dev, "up"]);
}

/// The kernel's VLAN device for [`VLAN_ID`] on `parent` in `ns`, up;
/// `None` where the kernel has no VLAN devices (no 8021q).
fn kernel_vlan_device(ns: &str, parent: &str) -> Option<String> {
    let dev = format!("{parent}.{VLAN_ID}");
    let made = Command::new("ip")
        .args([
            "netns", "exec", ns, "ip", "link", "add", "link", parent, "name", &dev,
        ])
        .args(["type", "vlan", "id", &VLAN_ID.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("ip runs")
        .success();
    if !made {
        eprintln!("no VLAN devices in this kernel: the test's access port stands in");
        return None;
    }
    // Its checksums computed in software, as its parent's are.
    quiet_and_up(ns, &dev);
    Some(dev)
}
