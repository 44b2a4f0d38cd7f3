//! uwarp: the API applications use.
//!
//! Open a [`Device`], then create what libibverbs and librdmacm users
//! expect: a [`ProtectionDomain`], [`MemoryRegion`]s, a
//! [`CompletionQueue`], [`QueuePair`]s and shared receive queues; connect
//! with [`Device::connect`] or listen with [`Device::listen`] and decide on
//! each [`IncomingRequest`]; post [`SendWr`]s and [`RecvWr`]s and poll
//! [`WorkCompletion`]s.
//!
//! The device runs two threads, the shape the DPDK transport uses: a
//! control thread for listen/connect/accept/reject and the MPA startup
//! phase (RFC 5044 section 7, RFC 6581), and a dataplane thread that polls
//! every established connection and drives its RDMAP/DDP/MPA engine
//! (RFC 5040, RFC 5041, RFC 5044). This transport carries the streams over
//! the kernel's TCP sockets, like Linux siw; the STag table is shared and
//! lock-free for the dataplane.
//!
//! [`DeviceConfig::transport`] picks the transport: those sockets by
//! default, or uwarp's own TCP over a DPDK port
//! ([`TransportConfig::Dpdk`] with a [`DpdkConfig`]: the port, as a
//! [`DpdkPort`], the EAL's arguments, the host's addresses), whose
//! control core and dataplane cores run on threads or inline on the
//! application's. The library starts the process's DPDK EAL with the
//! first DPDK device; a [`VirtualLink`] joins two devices in one process
//! without a NIC. Everything after the open is the same on both.
//!
//! ```
//! use std::time::Duration;
//! use uwarp::*;
//!
//! let device = Device::open(DeviceConfig::default())?;
//! let pd = device.alloc_pd()?;
//! let cq = device.create_cq(64);
//! let listener = device.listen("127.0.0.1:0")?;
//! let addr = listener.local_addr();
//!
//! // The passive side accepts on its own thread.
//! let server_qp = device.create_qp(&pd, QpInit::new(&cq));
//! let inbox = pd.alloc_mr(64, Access::LOCAL_WRITE)?;
//! server_qp.post_recv(RecvWr { wr_id: 1, sgl: vec![inbox.whole()] })?;
//! let server = std::thread::spawn(move || {
//!     let request = listener.get_request(Duration::from_secs(5)).unwrap();
//!     request.accept(&server_qp, LocalParams::default()).unwrap();
//!     server_qp
//! });
//!
//! let client_cq = device.create_cq(64);
//! let client_qp = device.create_qp(&pd, QpInit::new(&client_cq));
//! device.connect(addr, &client_qp, ConnectParams::default())?;
//! let _server_qp = server.join().unwrap();
//! let wr = SendWr::new(7, SendOp::Send, Payload::Inline(b"hello".to_vec()));
//! client_qp.post_send(wr)?;
//!
//! let sent = client_cq.poll_blocking(Duration::from_secs(5)).unwrap();
//! assert_eq!((sent.wr_id, sent.status), (7, WcStatus::Success));
//! let received = cq.poll_blocking(Duration::from_secs(5)).unwrap();
//! assert_eq!((received.wr_id, received.byte_len), (1, 5));
//! let mut got = [0u8; 5];
//! inbox.buffer().read_at(0, &mut got).unwrap();
//! assert_eq!(&got, b"hello");
//! # Ok::<(), uwarp::Error>(())
//! ```

pub mod app_memory;
mod bell;
mod channel;
mod cm;
mod counters;
mod cq;
mod device;
mod driver;
mod error;
mod fork;
mod pd;
mod qp;
mod qp_flush;
mod qp_link;
mod slots;
mod sockaddr;
mod srq;
mod transport;

pub use channel::CompletionChannel;
pub use cm::{ConnectParams, Connection, IncomingRequest, ListenOptions, Listener};
pub use counters::QpCounters;
pub use cq::CompletionQueue;
pub use device::{Device, DeviceConfig};
pub use error::Error;
pub use fork::fork_generation;
pub use pd::{MemoryRegion, ProtectionDomain};
pub use qp::{post_together, QpCaps, QpInit, QueuePair};
pub use sockaddr::c_sockaddr;
pub use srq::SharedReceiveQueue;
pub use transport::dpdk::{
    CoreThreads, DpdkConfig, DpdkPort, LinkEnd, VirtualLink, ZERO_COPY_FROM,
};
pub use transport::TransportConfig;
pub use uwarp_control::{parse_mac, HostConfig, HostReport};
pub use uwarp_dataplane::net::Vlan;
pub use uwarp_dataplane::runtime::{ImpairConfig, ImpairSwitch, Impairment, Placement};
pub use uwarp_dataplane::MempoolConfig;

pub use uwarp_stack::mem::{Access, MemError, MemoryBuffer, Stag};
pub use uwarp_stack::mpa::{ConnectRequest, LocalParams, Negotiated, Rtr, RtrSet};
pub use uwarp_stack::rdmap::QpEvent;
pub use uwarp_stack::verbs::{
    Payload, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
pub use uwarp_stack::wire::mpa::Revision;
pub use uwarp_stack::wire::terminate::TermError;
