//! A port on a queue of an interface the kernel keeps: AF_XDP beside the
//! kernel's own stack, through DPDK's `net_af_xdp` driver.
//!
//! The kernel keeps the interface, its address and everything on it that
//! is not uwarp's: ARP, ICMP, its own TCP connections, other protocols
//! and ports. uwarp's share is the TCP ports it listens on or opens
//! connections from, and only on the interface's first IPv4 address:
//!
//! - [`program`]: the XDP program (`bpf/uwarp_steer.bpf.c`) that hands
//!   segments to uwarp's ports to its AF_XDP socket and passes the rest
//!   to the kernel, and the `--vdev` that loads it with the port.
//! - [`port_map`]: that program's maps of uwarp's ports and address,
//!   found through the program attached to the interface.
//! - [`kernel_ports`]: each port uwarp takes, held in the kernel by a
//!   bound socket (as Linux's iwpmd holds a hardware RNIC's ports), so
//!   that the kernel's TCP never takes it, and put into the map.
//! - [`claim`]: one uwarp process per interface, holding a lock from
//!   before its port attaches the program until after it closed; a
//!   program a killed process left attached is detached.
//! - [`kernel_interface`]: the interface's index, address, MAC address,
//!   MTU and gateway, as the kernel has them.
//!
//! - [`broker`]: [`PortBroker`], how the control core asks for ports:
//!   of [`KernelPorts`] in the process, or of the interface's service.
//! - [`service`]: the interface's service (`uwarpd`), which owns the port
//!   when several processes share the interface, and hands each its
//!   frames over a net_memif link: where it listens, the requests, and
//!   [`ServicePorts`], an application's ports through it.
//!
//! Next hops come from the kernel's neighbour table
//! ([`crate::net::kernel_neighbours`]), since ARP replies go to the
//! kernel.

pub mod broker;
pub mod claim;
pub mod kernel_interface;
pub mod kernel_ports;
pub mod port_map;
pub mod program;
pub mod service;

pub use broker::PortBroker;
pub use claim::InterfaceClaim;
pub use kernel_interface::KernelInterface;
pub use kernel_ports::{KernelPorts, PortClaimError};
pub use port_map::PortMap;
pub use program::SteeringObject;
pub use service::ServicePorts;
