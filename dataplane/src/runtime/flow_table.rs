//! The per-core flow table: which connection a TCP segment belongs to.
//!
//! Keyed by the 4-tuple ([`FourTuple`]) in a hash map, so a lookup costs
//! the same with ten flows or ten thousand (no linear scans). The hasher
//! is std's randomly keyed SipHash: the keys come from the network, and a
//! predictable hash would let a peer aim all its flows at one bucket.

use std::collections::hash_map::{Entry, HashMap};

use crate::net::FourTuple;

/// The flows one dataplane core owns, each with its protocol state `F`.
#[derive(Debug)]
pub struct FlowTable<F> {
    flows: HashMap<FourTuple, F>,
}

impl<F> Default for FlowTable<F> {
    fn default() -> Self {
        FlowTable {
            flows: HashMap::new(),
        }
    }
}

impl<F> FlowTable<F> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a flow and returns it in place; gives `flow` back if the
    /// tuple is already taken.
    pub fn insert(&mut self, tuple: FourTuple, flow: F) -> Result<&mut F, F> {
        match self.flows.entry(tuple) {
            Entry::Occupied(_) => Err(flow),
            Entry::Vacant(slot) => Ok(slot.insert(flow)),
        }
    }

    /// Removes a flow and returns its state.
    pub fn remove(&mut self, tuple: &FourTuple) -> Option<F> {
        self.flows.remove(tuple)
    }

    /// The state of a flow.
    pub fn get_mut(&mut self, tuple: &FourTuple) -> Option<&mut F> {
        self.flows.get_mut(tuple)
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Removes every flow.
    pub fn drain(&mut self) -> impl Iterator<Item = (FourTuple, F)> + '_ {
        self.flows.drain()
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::Ipv4Address;

    use super::*;

    fn tuple(port: u16) -> FourTuple {
        FourTuple {
            local_ip: Ipv4Address::new(10, 0, 0, 2),
            local_port: 4791,
            remote_ip: Ipv4Address::new(10, 0, 0, 1),
            remote_port: port,
        }
    }

    #[test]
    fn insert_lookup_remove() {
        let mut table = FlowTable::new();
        assert!(table.insert(tuple(1), "a").is_ok());
        assert!(matches!(table.insert(tuple(1), "b"), Err("b")));
        assert!(table.insert(tuple(2), "c").is_ok());
        assert_eq!(table.get_mut(&tuple(1)).map(|f| *f), Some("a"));
        assert_eq!(table.len(), 2);
        assert_eq!(table.remove(&tuple(1)), Some("a"));
        assert!(table.get_mut(&tuple(1)).is_none());
        assert!(table.get_mut(&tuple(3)).is_none());
        assert_eq!(table.drain().count(), 1);
        assert!(table.is_empty());
    }

    #[test]
    fn tens_of_thousands_of_flows() {
        let mut table = FlowTable::new();
        for port in 1..=20_000u16 {
            table.insert(tuple(port), u32::from(port)).unwrap();
        }
        for port in (1..=20_000u16).rev() {
            assert_eq!(table.get_mut(&tuple(port)).copied(), Some(u32::from(port)));
        }
    }
}
