//! Who gives a host its ports beside the kernel: [`KernelPorts`] in the
//! process itself, or the interface's service (`uwarpd`) when several
//! processes share the interface ([`super::service::ServicePorts`]).
//! The control core's TCP set-up asks through [`PortBroker`] whichever
//! it is.

use super::kernel_ports::{KernelPorts, PortClaimError};

/// Ports held in the kernel for a host's listeners and connections; see
/// [`KernelPorts`] for what each call means.
pub trait PortBroker: Send + std::fmt::Debug {
    /// Takes `port` (0: one the kernel picks) for a listener.
    fn claim_listener(&mut self, port: u16) -> Result<u16, PortClaimError>;
    /// Takes a port the kernel picks for an active open.
    fn claim_active(&mut self) -> Result<u16, PortClaimError>;
    /// A listener on `port` accepted a connection.
    fn add_connection(&mut self, port: u16);
    /// The listener on `port` is gone.
    fn release_listener(&mut self, port: u16);
    /// A connection from `port` ended.
    fn release_connection(&mut self, port: u16);
}

impl PortBroker for KernelPorts {
    fn claim_listener(&mut self, port: u16) -> Result<u16, PortClaimError> {
        KernelPorts::claim_listener(self, port)
    }

    fn claim_active(&mut self) -> Result<u16, PortClaimError> {
        KernelPorts::claim_active(self)
    }

    fn add_connection(&mut self, port: u16) {
        KernelPorts::add_connection(self, port)
    }

    fn release_listener(&mut self, port: u16) {
        KernelPorts::release_listener(self, port)
    }

    fn release_connection(&mut self, port: u16) {
        KernelPorts::release_connection(self, port)
    }
}
