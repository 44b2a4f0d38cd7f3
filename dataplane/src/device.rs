//! [`Device`]: an ethdev port claimed by this process, and the virtual
//! devices the dataplane creates at run time.
//!
//! A port is claimed by at most one `Device` at a time (a process-wide set
//! of claimed port ids), so two [`Port`](crate::Port)s never configure the
//! same ethdev. Virtual devices created here are removed again
//! (`rte_vdev_uninit`) when their `Device` goes, and the rings behind a
//! [`ring_pair`] are drained of mbufs and freed once both ports are gone.
//!
//! ## net_ring pairs
//!
//! `--vdev=net_ring0` gives a port whose transmit and receive share one
//! ring: a loopback. The `nodeaction=name:node:CREATE|ATTACH` argument does
//! not make a pair either. Tried on DPDK 22.11 with
//! `net_ring1,nodeaction=r0:0:CREATE` and `net_ring2,nodeaction=r0:0:ATTACH`:
//! CREATE makes one port named `r0` (not `net_ring1`) whose rings
//! (`ETH_RXTX<q>_r0`) serve both directions, so a frame sent on `r0` comes
//! back on `r0`; ATTACH then fails to probe ("failed to initialize net_ring2
//! device") because the port `r0` exists already. A cross-connected pair
//! needs `rte_eth_from_rings` with two sets of rings, A's transmit rings
//! being B's receive rings and the other way round, which is what
//! [`ring_pair`] does.

use std::collections::BTreeSet;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::eal::Eal;
use crate::error::{c_name, Error, Result};

static CLAIMED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

fn claim(port_id: u16) -> Result<()> {
    let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
    if !claimed.insert(port_id) {
        return Err(Error::InvalidArgument(format!(
            "port {port_id} is already claimed by another Device"
        )));
    }
    Ok(())
}

fn unclaim(port_id: u16) {
    CLAIMED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&port_id);
}

/// How a device is given back when its [`Device`] is dropped.
#[derive(Debug)]
enum Release {
    /// A port the EAL probed (PCI, `--vdev`): `rte_eth_dev_close`.
    Close,
    /// A virtual device created at run time: `rte_vdev_uninit(name)`, then
    /// the rings behind it (if any) lose one user.
    Uninit {
        name: CString,
        _rings: Option<Arc<RingSet>>,
    },
}

/// An ethdev port claimed by this process.
#[derive(Debug)]
pub struct Device {
    port_id: u16,
    release: Release,
}

impl Device {
    /// Claims the port DPDK knows by `name` (a PCI address such as
    /// `0000:03:00.0`, or a `--vdev` name such as `net_tap0`).
    pub fn by_name(_eal: &Eal, name: &str) -> Result<Device> {
        let cname = c_name("device name", name, 255)?;
        let mut port_id = 0u16;
        // SAFETY: the EAL is initialised; cname and port_id outlive the call.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut port_id) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_get_port_by_name", ret));
        }
        claim(port_id)?;
        Ok(Device {
            port_id,
            release: Release::Close,
        })
    }

    /// Creates the virtual device `name` with `args` (the part after the
    /// comma of a `--vdev` argument, e.g. `iface=uwarp0` for net_tap) and
    /// claims its port; the device is removed again on drop.
    pub fn create_vdev(_eal: &Eal, name: &str, args: &str) -> Result<Device> {
        let cname = c_name("vdev name", name, 63)?;
        let cargs = CString::new(args)
            .map_err(|_| Error::InvalidArgument(format!("vdev arguments {args:?} contain NUL")))?;
        // SAFETY: the EAL is initialised; the strings outlive the call.
        let ret = unsafe { dpdk_sys::rte_vdev_init(cname.as_ptr(), cargs.as_ptr()) };
        if ret != 0 {
            return Err(Error::from_neg("rte_vdev_init", ret));
        }
        let mut port_id = 0u16;
        // SAFETY: as above.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut port_id) };
        if ret != 0 {
            // SAFETY: the vdev was created above and has no user.
            unsafe { dpdk_sys::rte_vdev_uninit(cname.as_ptr()) };
            return Err(Error::from_neg("rte_eth_dev_get_port_by_name", ret));
        }
        claim(port_id)?;
        Ok(Device {
            port_id,
            release: Release::Uninit {
                name: cname,
                _rings: None,
            },
        })
    }

    /// Whether this is an end of a [`ring_pair`] (or a [`ring_loopback`]):
    /// its frames pass as mbuf pointers between ports of this process and
    /// never leave memory.
    pub fn is_memory_link(&self) -> bool {
        matches!(
            self.release,
            Release::Uninit {
                _rings: Some(_),
                ..
            }
        )
    }

    /// What the device can do: queue counts, offloads, RSS.
    pub fn capabilities(&self) -> Result<crate::port::Capabilities> {
        crate::port::capabilities(self.port_id)
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The name DPDK gives the port.
    pub fn name(&self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; dpdk_sys::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: buf has room for RTE_ETH_NAME_MAX_LEN bytes.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_name_by_port(self.port_id, buf.as_mut_ptr()) };
        if ret != 0 {
            return Err(Error::from_neg("rte_eth_dev_get_name_by_port", ret));
        }
        // SAFETY: DPDK wrote a NUL-terminated name.
        Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the port is claimed by self alone, and the Port that used
        // it (if any) has stopped it and is gone.
        unsafe {
            match &self.release {
                Release::Close => {
                    dpdk_sys::uwarp_memif_dev_close(self.port_id);
                }
                Release::Uninit { name, .. } => {
                    dpdk_sys::rte_vdev_uninit(name.as_ptr());
                }
            }
        }
        unclaim(self.port_id);
    }
}

/// The rings behind a [`ring_pair`] or a [`ring_loopback`]; freed, with any
/// mbufs still in them, when the last port over them is removed.
#[derive(Debug)]
struct RingSet {
    rings: Vec<*mut dpdk_sys::rte_ring>,
}

// SAFETY: the rings are only touched by the ports' queues (through DPDK)
// and by Drop, which runs after both ports are removed.
unsafe impl Send for RingSet {}
// SAFETY: as above.
unsafe impl Sync for RingSet {}

impl Drop for RingSet {
    fn drop(&mut self) {
        for &ring in &self.rings {
            let mut objs = [std::ptr::null_mut::<c_void>(); 64];
            // SAFETY: no port uses the ring any more; every object in it is
            // an mbuf a port transmitted and nobody received.
            unsafe {
                loop {
                    let n = dpdk_sys::shim_rte_ring_dequeue_burst(
                        ring,
                        objs.as_mut_ptr(),
                        objs.len() as u32,
                        std::ptr::null_mut(),
                    );
                    if n == 0 {
                        break;
                    }
                    for &m in &objs[..n as usize] {
                        dpdk_sys::shim_rte_pktmbuf_free(m.cast());
                    }
                }
                dpdk_sys::rte_ring_free(ring);
            }
        }
    }
}

static RING_PAIRS: AtomicU32 = AtomicU32::new(0);

/// Creates two net_ring ports wired to each other: what one transmits on
/// queue `q`, the other receives on queue `q`. Each of the `queues` queue
/// pairs (at most 16, the net_ring limit) has a ring of `ring_size` slots
/// (a power of two) per direction.
///
/// The ports are named `net_ring_uwp<n>a` and `net_ring_uwp<n>b`, `<n>`
/// counting the pairs made by this process.
pub fn ring_pair(_eal: &Eal, queues: u16, ring_size: u32) -> Result<(Device, Device)> {
    let n = RING_PAIRS.fetch_add(1, Ordering::Relaxed);
    // The first `queues` rings carry A's transmit queues to B's receive
    // queues, the others the way back.
    let mut set = create_rings(&format!("uwp{n}ab"), queues, ring_size)?;
    let mut back = create_rings(&format!("uwp{n}ba"), queues, ring_size)?;
    set.rings.append(&mut back.rings);
    let q = usize::from(queues);
    let (a_to_b, b_to_a) = set.rings.split_at(q);
    let (a_to_b, b_to_a) = (a_to_b.to_vec(), b_to_a.to_vec());
    let set = Arc::new(set);
    let a = from_rings(&format!("uwp{n}a"), &b_to_a, &a_to_b, &set)?;
    let b = from_rings(&format!("uwp{n}b"), &a_to_b, &b_to_a, &set)?;
    Ok((a, b))
}

/// Creates `queues` rings of `ring_size` slots named `<prefix><q>`, each
/// with a single producer (one transmit queue writes it) and a single
/// consumer (one receive queue reads it).
fn create_rings(prefix: &str, queues: u16, ring_size: u32) -> Result<RingSet> {
    if queues == 0 || u32::from(queues) > dpdk_sys::RTE_PMD_RING_MAX_RX_RINGS {
        return Err(Error::InvalidArgument(format!(
            "{queues} queues (net_ring takes 1 to {})",
            dpdk_sys::RTE_PMD_RING_MAX_RX_RINGS
        )));
    }
    if !ring_size.is_power_of_two() {
        return Err(Error::InvalidArgument(format!(
            "ring size {ring_size} (a power of two)"
        )));
    }
    let mut set = RingSet { rings: Vec::new() };
    for q in 0..queues {
        let name = c_name("ring name", &format!("{prefix}{q}"), 29)?;
        // SAFETY: the EAL is initialised; name outlives the call.
        let ring = unsafe {
            dpdk_sys::rte_ring_create(
                name.as_ptr(),
                ring_size,
                dpdk_sys::SOCKET_ID_ANY,
                dpdk_sys::RING_F_SP_ENQ | dpdk_sys::RING_F_SC_DEQ,
            )
        };
        if ring.is_null() {
            return Err(Error::from_errno("rte_ring_create"));
        }
        set.rings.push(ring);
    }
    Ok(set)
}

/// Creates a net_ring port whose transmit queue `q` feeds its own receive
/// queue `q`: a loopback with `queues` queue pairs (at most 16), each over
/// one ring of `ring_size` slots (a power of two), named
/// `net_ring_uwl<n>`.
pub fn ring_loopback(_eal: &Eal, queues: u16, ring_size: u32) -> Result<Device> {
    let n = RING_PAIRS.fetch_add(1, Ordering::Relaxed);
    let set = Arc::new(create_rings(&format!("uwl{n}"), queues, ring_size)?);
    let rings = set.rings.clone();
    from_rings(&format!("uwl{n}"), &rings, &rings, &set)
}

/// One port over the given rings; the port's name is `net_ring_<name>`.
fn from_rings(
    name: &str,
    rx: &[*mut dpdk_sys::rte_ring],
    tx: &[*mut dpdk_sys::rte_ring],
    set: &Arc<RingSet>,
) -> Result<Device> {
    let cname = c_name("ring port name", name, 22)?;
    // SAFETY: the rings are alive (held by set); DPDK copies the arrays.
    let ret = unsafe {
        dpdk_sys::rte_eth_from_rings(
            cname.as_ptr(),
            rx.as_ptr(),
            rx.len() as u32,
            tx.as_ptr(),
            tx.len() as u32,
            dpdk_sys::rte_socket_id(),
        )
    };
    if ret < 0 {
        return Err(Error::from_errno("rte_eth_from_rings"));
    }
    let port_id = u16::try_from(ret).expect("port ids fit u16");
    claim(port_id)?;
    Ok(Device {
        port_id,
        release: Release::Uninit {
            name: CString::new(format!("net_ring_{name}")).expect("no NUL"),
            _rings: Some(Arc::clone(set)),
        },
    })
}
