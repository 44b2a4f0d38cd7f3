//! The device list and device contexts: `ibv_get_device_list`,
//! `ibv_open_device`, `ibv_close_device`, and the queries of the device,
//! its port, GID and P_Key.
//!
//! There is one device, `uwarp0`, an iWARP RNIC (`IBV_NODE_RNIC`,
//! `IBV_TRANSPORT_IWARP`) with one Ethernet port. Opening it opens the
//! process's uwarp device ([`crate::provider`]).

use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use crate::abi::verbs::*;
use crate::export::{guard, set_errno, symbol_versions};
use crate::limits::{self, PORT_NUM};
use crate::provider;

/// The device, followed by the slot where rdma-core keeps a provider's
/// operations (`verbs_device.ops`): NULL, which the real libmlx5 and
/// libefa, if an application loads them, read as "not my device".
#[repr(C)]
struct DeviceEntry {
    device: IbvDevice,
    provider_ops: *const c_void,
}

/// The address of the one [`DeviceEntry`], made once and never freed
/// (applications keep device pointers after freeing the list).
fn the_device() -> *mut IbvDevice {
    // A pointer, not an address: kept reachable (and its provenance
    // whole) for Miri, whose leak check ignores what statics point to.
    static DEVICE: OnceLock<AtomicPtr<IbvDevice>> = OnceLock::new();
    let entry = DEVICE.get_or_init(|| {
        let mut device = IbvDevice {
            _ops: IbvDeviceOps {
                _dummy1: ptr::null(),
                _dummy2: ptr::null(),
            },
            node_type: IBV_NODE_RNIC,
            transport_type: IBV_TRANSPORT_IWARP,
            name: [0; SYSFS_NAME_MAX],
            dev_name: [0; SYSFS_NAME_MAX],
            dev_path: [0; SYSFS_PATH_MAX],
            ibdev_path: [0; SYSFS_PATH_MAX],
        };
        copy_name(&mut device.name, limits::DEVICE_NAME);
        copy_name(&mut device.dev_name, limits::DEVICE_NAME);
        let entry = Box::new(DeviceEntry {
            device,
            provider_ops: ptr::null(),
        });
        AtomicPtr::new(Box::into_raw(entry).cast())
    });
    // Written once, before `get_or_init` published it.
    entry.load(Ordering::Relaxed)
}

/// Copies `name` into a C character array, NUL-terminated.
fn copy_name(to: &mut [c_char], name: &str) {
    for (slot, octet) in to.iter_mut().zip(name.bytes()) {
        *slot = octet as c_char;
    }
}

/// The context the connection manager puts in its ids' `verbs` (opened
/// once, kept for the life of the process, as librdmacm keeps one per
/// device), or the `errno` of the failed open.
pub fn shared_context() -> Result<*mut IbvContext, c_int> {
    // A pointer, not an address, as `the_device`'s.
    static CONTEXT: OnceLock<Result<AtomicPtr<IbvContext>, c_int>> = OnceLock::new();
    let opened = CONTEXT.get_or_init(|| {
        // SAFETY: the device of the list.
        let context = unsafe { ibv_open_device(the_device()) };
        if context.is_null() {
            // SAFETY: reads the calling thread's errno, which the open set.
            Err(unsafe { *libc::__errno_location() })
        } else {
            Ok(AtomicPtr::new(context))
        }
    });
    // Written once, before `get_or_init` published it.
    opened
        .as_ref()
        .map(|context| context.load(Ordering::Relaxed))
        .map_err(|&errno| errno)
}

/// A context: the [`VerbsContext`] applications reach through the
/// `ibv_context` at its end, and what uwarp keeps beside it.
#[repr(C)]
pub struct Context {
    verbs: VerbsContext,
    /// The write end of the pipe whose read end is `async_fd`
    /// (non-blocking).
    async_write: c_int,
}

impl Context {
    /// The context whose `ibv_context` is at `context` (pointer
    /// arithmetic only: nothing is read).
    pub fn containing(context: *mut IbvContext) -> *mut Context {
        let offset =
            core::mem::offset_of!(Context, verbs) + core::mem::offset_of!(VerbsContext, context);
        context.wrapping_byte_sub(offset).cast()
    }

    /// The write end of the pipe whose read end is the `async_fd` of
    /// `context`: where the context's asynchronous events are queued.
    ///
    /// # Safety
    ///
    /// `context` is open.
    pub unsafe fn async_writer(context: *mut IbvContext) -> c_int {
        // SAFETY: the caller promises an open context, which
        // `ibv_open_device` made as the `verbs.context` of a `Context`.
        unsafe { (*Self::containing(context)).async_write }
    }
}

/// `ibv_get_device_list`: the devices, NULL-terminated; `*num_devices`
/// (when not NULL) is set to their number. Free with
/// [`ibv_free_device_list`].
///
/// # Safety
///
/// `num_devices` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut IbvDevice {
    guard(ptr::null_mut(), || {
        if !num_devices.is_null() {
            // SAFETY: not NULL, and the caller promises it is writable.
            unsafe { *num_devices = 1 };
        }
        let list: Box<[*mut IbvDevice; 2]> = Box::new([the_device(), ptr::null_mut()]);
        Box::into_raw(list).cast()
    })
}

/// `ibv_free_device_list`: frees a list [`ibv_get_device_list`] returned
/// (the devices stay valid).
///
/// # Safety
///
/// `list` is NULL or a list [`ibv_get_device_list`] returned, not yet
/// freed.
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut IbvDevice) {
    if !list.is_null() {
        // SAFETY: the caller promises `list` came from
        // `ibv_get_device_list`, which made it from this Box type.
        drop(unsafe { Box::from_raw(list.cast::<[*mut IbvDevice; 2]>()) });
    }
}

/// `ibv_get_device_name`: the device's name (`uwarp0`).
///
/// # Safety
///
/// `device` is NULL or a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut IbvDevice) -> *const c_char {
    if device.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null();
    }
    // SAFETY: the caller promises a device of the list, which lives
    // forever.
    unsafe { (*device).name.as_ptr() }
}

/// `ibv_get_device_guid`: the node GUID, big-endian.
#[no_mangle]
pub extern "C" fn ibv_get_device_guid(_device: *mut IbvDevice) -> u64 {
    limits::node_guid()
}

/// `ibv_open_device`: a context on the device, which opens the process's
/// uwarp device the first time; NULL with `errno` set if it cannot be
/// opened (the reason is printed on standard error).
///
/// # Safety
///
/// `device` is NULL or a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut IbvDevice) -> *mut IbvContext {
    guard(ptr::null_mut(), || {
        if device != the_device() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        if let Err(errno) = provider::device() {
            set_errno(errno);
            return ptr::null_mut();
        }
        let mut fds = [0; 2];
        // SAFETY: `fds` is valid for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return ptr::null_mut();
        }
        // The writer never waits for a reader: an event that finds the
        // pipe full (a program that never reads its 8192 queued events)
        // is dropped. The read end stays blocking, as the kernel's is.
        // SAFETY: fds[1] is the pipe's write end, just made.
        unsafe { libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK) };
        let context = Box::new(Context {
            verbs: VerbsContext {
                query_port: Some(query_port_ex),
                unoffered: [ptr::null(); 38],
                sz: size_of::<VerbsContext>(),
                context: IbvContext {
                    device,
                    ops: context_ops(),
                    cmd_fd: -1,
                    async_fd: fds[0],
                    num_comp_vectors: 1,
                    // SAFETY: all zeros is PTHREAD_MUTEX_INITIALIZER on
                    // glibc, how rdma-core initialises it too.
                    mutex: unsafe { core::mem::zeroed() },
                    abi_compat: VERBS_ABI_IS_EXTENDED,
                },
            },
            async_write: fds[1],
        });
        let context = Box::into_raw(context);
        // SAFETY: `context` was just made from a Box and is valid.
        unsafe { &raw mut (*context).verbs.context }
    })
}

/// The context's function table: the fast path the header's inline
/// functions call. Memory windows are not offered (NULL: the inlines
/// answer `EOPNOTSUPP`).
fn context_ops() -> IbvContextOps {
    IbvContextOps {
        _compat_1: [ptr::null(); 7],
        alloc_mw: None,
        bind_mw: None,
        dealloc_mw: None,
        _compat_2: ptr::null(),
        poll_cq: Some(crate::cq::poll_cq),
        req_notify_cq: Some(crate::cq::req_notify_cq),
        _compat_3: [ptr::null(); 7],
        post_srq_recv: Some(crate::srq::post_srq_recv),
        _compat_4: [ptr::null(); 4],
        post_send: Some(crate::qp::post_send),
        post_recv: Some(crate::qp::post_recv),
        _compat_5: [ptr::null(); 5],
    }
}

/// `ibv_close_device`: frees the context. 0.
///
/// # Safety
///
/// `context` is one [`ibv_open_device`] returned, not yet closed, and
/// nothing made from it is still in use.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut IbvContext) -> c_int {
    if context.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller promises a live context from ibv_open_device,
    // which made it as the `verbs.context` of a boxed `Context`.
    let context = unsafe { Box::from_raw(Context::containing(context)) };
    // SAFETY: both descriptors are the context's own pipe, closed once.
    unsafe {
        libc::close(context.verbs.context.async_fd);
        libc::close(context.async_write);
    }
    0
}

/// `ibv_query_device`: the device's attributes. 0, or an `errno` value.
///
/// # Safety
///
/// `attr` is NULL or valid for writing an `ibv_device_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut IbvContext,
    attr: *mut IbvDeviceAttr,
) -> c_int {
    if context.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    let mut fw_ver = [0; 64];
    copy_name(&mut fw_ver, concat!("uwarp ", env!("CARGO_PKG_VERSION")));
    let answer = IbvDeviceAttr {
        fw_ver,
        node_guid: limits::node_guid(),
        sys_image_guid: limits::node_guid(),
        max_mr_size: u64::MAX,
        page_size_cap: 4096,
        // 0/0: neither a Chelsio (0x1425) nor an Intel (0x8086) part, so
        // applications that key on vendors take their generic path.
        vendor_id: 0,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: limits::MAX_QP,
        max_qp_wr: limits::MAX_QP_WR,
        device_cap_flags: 0,
        max_sge: limits::MAX_SGE,
        max_sge_rd: limits::MAX_SGE,
        max_cq: limits::MAX_CQ,
        max_cqe: limits::MAX_CQE,
        max_mr: c_int::try_from(uwarp::DeviceConfig::default().max_regions).unwrap_or(c_int::MAX),
        max_pd: limits::MAX_PD,
        max_qp_rd_atom: limits::MAX_RD_ATOM,
        max_ee_rd_atom: 0,
        max_res_rd_atom: limits::MAX_RD_ATOM,
        max_qp_init_rd_atom: limits::MAX_RD_ATOM,
        max_ee_init_rd_atom: 0,
        atomic_cap: IBV_ATOMIC_NONE,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: 0,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: limits::MAX_SRQ,
        max_srq_wr: limits::MAX_QP_WR,
        max_srq_sge: limits::MAX_SGE,
        max_pkeys: 1,
        local_ca_ack_delay: 0,
        phys_port_cnt: 1,
    };
    // SAFETY: the caller promises `attr` is writable for the structure.
    unsafe { attr.write(answer) };
    0
}

/// The port's attributes, or `EINVAL` for a port other than 1.
fn port_attr(port_num: u8) -> Result<IbvPortAttr, c_int> {
    if port_num != PORT_NUM {
        return Err(libc::EINVAL);
    }
    Ok(IbvPortAttr {
        state: IBV_PORT_ACTIVE,
        max_mtu: IBV_MTU_4096,
        active_mtu: IBV_MTU_1024,
        gid_tbl_len: 1,
        port_cap_flags: 0,
        max_msg_sz: limits::MAX_MSG_SZ,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        // 4X at 10 Gbit/s a lane: what ibv_devinfo shows as 40 Gbit/s.
        active_width: 2,
        active_speed: 4,
        // LinkUp.
        phys_state: 5,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        flags: 0,
        port_cap_flags2: 0,
    })
}

/// Writes the first `len` octets (at most the whole structure) of the
/// port's attributes to `attr`. 0, or an `errno` value.
///
/// # Safety
///
/// `attr` is NULL or valid for writing `len` octets.
unsafe fn write_port_attr(port_num: u8, attr: *mut IbvPortAttr, len: usize) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    match port_attr(port_num) {
        Ok(answer) => {
            let len = len.min(size_of::<IbvPortAttr>());
            // SAFETY: the caller promises `len` writable octets at `attr`;
            // `answer` has at least `len` octets.
            unsafe {
                ptr::copy_nonoverlapping(ptr::from_ref(&answer).cast::<u8>(), attr.cast(), len)
            };
            0
        }
        Err(errno) => errno,
    }
}

/// `verbs_context.query_port`: what the header's inline `ibv_query_port`
/// calls, with the size of the application's `ibv_port_attr`.
unsafe extern "C" fn query_port_ex(
    _context: *mut IbvContext,
    port_num: u8,
    attr: *mut IbvPortAttr,
    attr_len: usize,
) -> c_int {
    // SAFETY: the inline passes its caller's structure and its size.
    unsafe { write_port_attr(port_num, attr, attr_len) }
}

/// `ibv_query_port@IBVERBS_1.1`: the exported function applications
/// compiled before the extended context existed call, with the older,
/// shorter structure. 0, or an `errno` value.
///
/// # Safety
///
/// `attr` is NULL or valid for writing the 48-octet compat structure.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    _context: *mut IbvContext,
    port_num: u8,
    attr: *mut IbvPortAttr,
) -> c_int {
    // SAFETY: the caller's structure is the compat one, this long.
    unsafe { write_port_attr(port_num, attr, COMPAT_PORT_ATTR_LEN) }
}

/// `ibv_query_gid`: the port's GID at `index` (only 0). 0, or -1 with
/// `errno` set.
///
/// # Safety
///
/// `gid` is NULL or valid for writing 16 octets.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    _context: *mut IbvContext,
    port_num: u8,
    index: c_int,
    gid: *mut IbvGid,
) -> c_int {
    if port_num != PORT_NUM || index != 0 || gid.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: not NULL, and the caller promises it is writable.
    unsafe { gid.write(IbvGid { raw: limits::gid() }) };
    0
}

/// `ibv_query_gid_type@IBVERBS_PRIVATE_34` (what `ibv_devinfo` asks of
/// each GID): type 0, the only one (`IBV_GID_TYPE_SYSFS_IB_ROCE_V1`, the
/// value an iWARP device's GID reads as). 0, or -1 with `errno` set.
///
/// # Safety
///
/// `kind` is NULL or valid for writing a C `int`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    _context: *mut IbvContext,
    port_num: u8,
    index: u32,
    kind: *mut c_int,
) -> c_int {
    if port_num != PORT_NUM || index != 0 || kind.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: not NULL, and the caller promises it is writable.
    unsafe { kind.write(0) };
    0
}

/// `_ibv_query_gid_ex` (what the header's `ibv_query_gid_ex` calls): the
/// port's GID entry at `gid_index` (only 0), type `IBV_GID_TYPE_IB` (the
/// value an iWARP device's GID has), no network device. 0, or an `errno`
/// value.
///
/// # Safety
///
/// `entry` is NULL or valid for writing `entry_size` octets.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    _context: *mut IbvContext,
    port_num: u32,
    gid_index: u32,
    entry: *mut IbvGidEntry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    if port_num != u32::from(PORT_NUM) || entry.is_null() || flags != 0 {
        return libc::EINVAL;
    }
    if gid_index != 0 {
        return libc::ENODATA;
    }
    let answer = IbvGidEntry {
        gid: IbvGid { raw: limits::gid() },
        gid_index,
        port_num,
        gid_type: 0,
        ndev_ifindex: 0,
    };
    let len = entry_size.min(size_of::<IbvGidEntry>());
    // SAFETY: the caller promises `entry_size` writable octets; `answer`
    // has at least `len`.
    unsafe { ptr::copy_nonoverlapping(ptr::from_ref(&answer).cast::<u8>(), entry.cast(), len) };
    0
}

/// `ibv_query_pkey`: the port's one P_Key (the default, 0xffff). 0, or
/// -1 with `errno` set.
///
/// # Safety
///
/// `pkey` is NULL or valid for writing two octets.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    _context: *mut IbvContext,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if port_num != PORT_NUM || index != 0 || pkey.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: not NULL, and the caller promises it is writable.
    unsafe { pkey.write(0xffff_u16.to_be()) };
    0
}

/// `ibv_read_sysfs_file`: reads a file of the device's sysfs directory.
/// A device without a kernel driver has none: -1 with `errno` `ENOENT`.
#[no_mangle]
pub extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    set_errno(libc::ENOENT);
    -1
}

/// `ibv_fork_init`: nothing to do (no memory is pinned for DMA). 0.
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED`.
#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    IBV_FORK_UNNEEDED
}

symbol_versions! {
    ibv_get_device_list => "IBVERBS_1.1",
    ibv_free_device_list => "IBVERBS_1.1",
    ibv_get_device_name => "IBVERBS_1.1",
    ibv_get_device_guid => "IBVERBS_1.1",
    ibv_open_device => "IBVERBS_1.1",
    ibv_close_device => "IBVERBS_1.1",
    ibv_query_device => "IBVERBS_1.1",
    ibv_query_port => "IBVERBS_1.1",
    ibv_query_gid => "IBVERBS_1.1",
    ibv_query_gid_type => "IBVERBS_PRIVATE_34",
    ibv_query_pkey => "IBVERBS_1.1",
    _ibv_query_gid_ex => "IBVERBS_1.11",
    ibv_read_sysfs_file => "IBVERBS_1.0",
    ibv_fork_init => "IBVERBS_1.1",
    ibv_is_fork_initialized => "IBVERBS_1.13",
}
