//! The steering program's maps (`bpf/uwarp_steer.bpf.c`): uwarp's TCP
//! ports (`uwarp_ports`) and uwarp's address (`uwarp_addr`), found
//! through the program attached to the interface: the maps are not
//! pinned, so each load of the program has its own, and they go with the
//! program.
//!
//! Through libbpf's low-level calls (the kernel's `bpf` system call, and
//! netlink for the interface's program).

use std::ffi::{c_int, c_void};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The ports map's name, as the kernel keeps it.
const PORTS_MAP: &[u8] = b"uwarp_ports";
/// The address map's name.
const ADDR_MAP: &[u8] = b"uwarp_addr";

// libbpf 1.x: each returns a negative errno on failure.
#[link(name = "bpf")]
extern "C" {
    fn bpf_xdp_query_id(ifindex: c_int, flags: c_int, prog_id: *mut u32) -> c_int;
    fn bpf_prog_get_fd_by_id(id: u32) -> c_int;
    fn bpf_map_get_fd_by_id(id: u32) -> c_int;
    fn bpf_obj_get_info_by_fd(bpf_fd: c_int, info: *mut c_void, info_len: *mut u32) -> c_int;
    fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const c_void) -> c_int;
}

/// Detaches whatever XDP program the interface of index `ifindex` has.
pub(super) fn detach_program(ifindex: u32) -> io::Result<()> {
    // SAFETY: plain call; libbpf takes no options (NULL).
    check(unsafe { bpf_xdp_detach(ifindex as c_int, 0, std::ptr::null()) }).map(drop)
}

/// The leading fields of the kernel's `struct bpf_prog_info` (UAPI
/// `linux/bpf.h`) up to the map identifiers; the kernel fills as much of
/// it as the length given says.
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    kind: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
}

/// The leading fields of the kernel's `struct bpf_map_info`, up to the
/// name.
#[repr(C)]
#[derive(Default)]
struct MapInfo {
    kind: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; 16],
}

/// The result of a libbpf call: the non-negative value, or the error of
/// its negative errno.
fn check(result: c_int) -> io::Result<c_int> {
    if result < 0 {
        Err(io::Error::from_raw_os_error(-result))
    } else {
        Ok(result)
    }
}

/// A descriptor a libbpf call returned.
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    let fd = check(fd)?;
    // SAFETY: libbpf returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What the kernel says of the object behind `fd`, into `info`.
fn object_info<T>(fd: &OwnedFd, info: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as u32;
    // SAFETY: `info` is a plain-data struct of `len` octets, which the
    // kernel writes at most.
    check(unsafe { bpf_obj_get_info_by_fd(fd.as_raw_fd(), (info as *mut T).cast(), &mut len) })?;
    Ok(())
}

/// The maps of the XDP program attached to the interface of index
/// `ifindex`, each with what the kernel says of it; an error when no
/// program is attached.
fn program_maps(ifindex: u32) -> io::Result<Vec<(MapInfo, OwnedFd)>> {
    let mut prog_id = 0u32;
    // SAFETY: `prog_id` is a valid place for the identifier.
    check(unsafe { bpf_xdp_query_id(ifindex as c_int, 0, &mut prog_id) })?;
    if prog_id == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no XDP program is attached to the interface",
        ));
    }
    // SAFETY: plain call with an identifier.
    let prog = owned(unsafe { bpf_prog_get_fd_by_id(prog_id) })?;
    // First the number of maps, then their identifiers.
    let mut info = ProgInfo::default();
    object_info(&prog, &mut info)?;
    let mut ids = vec![0u32; info.nr_map_ids as usize];
    let mut info = ProgInfo {
        nr_map_ids: ids.len() as u32,
        map_ids: ids.as_mut_ptr() as u64,
        ..ProgInfo::default()
    };
    object_info(&prog, &mut info)?;
    // The kernel wrote at most as many as it was given room for.
    ids.truncate(info.nr_map_ids as usize);
    ids.into_iter()
        .map(|id| {
            // SAFETY: plain call with an identifier.
            let map = owned(unsafe { bpf_map_get_fd_by_id(id) })?;
            let mut map_info = MapInfo::default();
            object_info(&map, &mut map_info)?;
            Ok((map_info, map))
        })
        .collect()
}

impl MapInfo {
    /// Whether it is the map named `name` with keys of `key_size` octets.
    fn is(&self, name: &[u8], key_size: u32) -> bool {
        let own = self.name.split(|&c| c == 0).next().unwrap_or(&[]);
        own == name && self.key_size == key_size
    }
}

/// Whether the XDP program attached to the interface of index `ifindex`
/// is uwarp's (it has a `uwarp_ports` map).
pub(super) fn uwarps_program_attached(ifindex: u32) -> bool {
    program_maps(ifindex).is_ok_and(|maps| maps.iter().any(|(info, _)| info.is(PORTS_MAP, 2)))
}

/// The port map of the steering program attached to an interface.
#[derive(Debug)]
pub struct PortMap {
    fd: OwnedFd,
}

impl PortMap {
    /// The port map of the program attached to the interface of index
    /// `ifindex`, once the program's address map says that `address` is
    /// uwarp's (so that the program steers only segments to it); an
    /// error when no program is attached, or the program attached is not
    /// uwarp's.
    pub fn of_interface(ifindex: u32, address: Ipv4Addr) -> io::Result<PortMap> {
        let mut ports = None;
        let mut addr = None;
        for (info, map) in program_maps(ifindex)? {
            if info.is(PORTS_MAP, 2) {
                ports = Some(map);
            } else if info.is(ADDR_MAP, 4) && info.value_size == 4 {
                addr = Some(map);
            }
        }
        let (Some(ports), Some(addr)) = (ports, addr) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the XDP program attached to the interface is not uwarp's \
                 (it lacks the uwarp_ports or uwarp_addr map)",
            ));
        };
        let index = 0u32;
        // In network order, as the program compares it with a header's.
        let octets = address.octets();
        // SAFETY: key and value have the map's sizes (4 and 4 octets).
        check(unsafe {
            bpf_map_update_elem(
                addr.as_raw_fd(),
                (&index as *const u32).cast(),
                octets.as_ptr().cast(),
                0,
            )
        })?;
        Ok(PortMap { fd: ports })
    }

    /// Steers segments to `port` to uwarp.
    pub fn insert(&self, port: u16) -> io::Result<()> {
        let value = 1u8;
        // SAFETY: key and value have the map's sizes (2 and 1 octets).
        check(unsafe {
            bpf_map_update_elem(
                self.fd.as_raw_fd(),
                (&port as *const u16).cast(),
                (&value as *const u8).cast(),
                0,
            )
        })
        .map(drop)
    }

    /// Leaves segments to `port` to the kernel again.
    pub fn remove(&self, port: u16) -> io::Result<()> {
        // SAFETY: the key has the map's key size.
        match check(unsafe {
            bpf_map_delete_elem(self.fd.as_raw_fd(), (&port as *const u16).cast())
        }) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
