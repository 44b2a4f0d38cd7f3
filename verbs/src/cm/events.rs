//! Event channels and events: `rdma_create_event_channel`,
//! `rdma_destroy_event_channel`, `rdma_get_cm_event`, `rdma_ack_cm_event`,
//! `rdma_event_str`.
//!
//! A channel's descriptor is the read end of a pipe carrying one
//! 8-octet record per event: the address of the event, which the
//! application owns from `rdma_get_cm_event` to `rdma_ack_cm_event`. An
//! event whose id was destroyed before the application read it is dropped
//! when read (the kernel drops such events too).

use core::ffi::{c_char, c_int, CStr};
use core::ptr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::abi::cm::*;
use crate::export::{fail, guard, set_errno, symbol_versions, wait_record, LiveHandles};

/// An event channel: the `rdma_event_channel` applications hold, and
/// its pipe's write end.
#[repr(C)]
pub struct EventChannel {
    ibv: RdmaEventChannel,
    read: OwnedFd,
    write: OwnedFd,
}

impl EventChannel {
    /// A new channel, or the `errno` of the failure.
    pub fn new() -> Result<Box<EventChannel>, c_int> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is valid for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        // SAFETY: both descriptors are open and owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Box::new(EventChannel {
            ibv: RdmaEventChannel {
                fd: read.as_raw_fd(),
            },
            read,
            write,
        }))
    }

    /// The `rdma_event_channel` applications hold.
    pub fn ibv(&mut self) -> *mut RdmaEventChannel {
        &raw mut self.ibv
    }

    /// The channel behind `channel`.
    ///
    /// # Safety
    ///
    /// `channel` is a live channel made by [`EventChannel::new`].
    pub unsafe fn from_ibv<'a>(channel: *mut RdmaEventChannel) -> &'a EventChannel {
        // SAFETY: the caller promises a live channel; `ibv` is the first
        // field of the `#[repr(C)]` `EventChannel` it was boxed as.
        unsafe { &*channel.cast::<EventChannel>() }
    }

    /// Queues `event`; the application takes it with `rdma_get_cm_event`.
    /// The pipe holds 8 Ki events; a channel nobody reads that fills it
    /// loses the event (counted by nothing: the application has stopped
    /// listening).
    pub fn post(&self, event: Box<Event>) {
        let address = Box::into_raw(event) as u64;
        let record = address.to_ne_bytes();
        // SAFETY: writes 8 octets from `record` to the pipe this channel
        // owns.
        let written = unsafe { libc::write(self.write.as_raw_fd(), record.as_ptr().cast(), 8) };
        if written != 8 {
            // SAFETY: the event was not queued; take it back.
            drop(unsafe { Box::from_raw(address as *mut Event) });
        }
    }

    /// Takes the next event, blocking (a synchronous id's own wait).
    pub fn take(&self) -> Result<Box<Event>, c_int> {
        loop {
            let mut address = 0u64;
            // SAFETY: `address` is valid for its 8 octets of writes.
            if unsafe { wait_record(self.read.as_raw_fd(), &raw mut address) } != 0 {
                let errno = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if errno == libc::EINTR {
                    continue;
                }
                return Err(errno);
            }
            // SAFETY: only `post` writes this pipe, and only addresses of
            // boxed events.
            let event = unsafe { Box::from_raw(address as *mut Event) };
            if !event.owner.is_destroyed() {
                return Ok(event);
            }
        }
    }
}

/// What an id shares with its events: whether it was destroyed, and how
/// many of its events the application holds (taken, not acknowledged).
#[derive(Default)]
pub struct Liveness {
    destroyed: AtomicBool,
    held: Mutex<u64>,
    released: Condvar,
}

impl Liveness {
    /// Whether the id was destroyed.
    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Acquire)
    }

    /// Marks the id destroyed: events of it not yet taken are dropped,
    /// and no more are posted.
    pub fn mark_destroyed(&self) {
        self.destroyed.store(true, Ordering::Release);
    }

    /// Waits until the application has acknowledged every event of the id
    /// that it took, as `rdma_destroy_id` must.
    pub fn wait_released(&self) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let _held = self
            .released
            .wait_while(held, |held| *held > 0)
            .unwrap_or_else(|e| e.into_inner());
    }

    fn taken(&self) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    fn acknowledged(&self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = held.saturating_sub(1);
        self.released.notify_all();
    }
}

/// An event: the `rdma_cm_event` applications read, and what it owns.
#[repr(C)]
pub struct Event {
    /// What the application reads.
    pub ibv: RdmaCmEvent,
    /// The octets `ibv.conn.private_data` points at.
    private_data: Vec<u8>,
    /// The id's liveness.
    owner: Arc<Liveness>,
}

impl Event {
    /// An event of type `kind` for `id` (whose liveness is `owner`), with
    /// `status` (0 or a negative `errno` value) and the peer's
    /// `private_data`, and the IRD/ORD to report.
    pub fn new(
        id: *mut RdmaCmId,
        owner: Arc<Liveness>,
        kind: c_int,
        status: c_int,
        private_data: Vec<u8>,
        ird_ord: (u8, u8),
    ) -> Box<Event> {
        let mut event = Box::new(Event {
            ibv: RdmaCmEvent {
                id,
                listen_id: ptr::null_mut(),
                event: kind,
                status,
                conn: RdmaConnParam {
                    private_data: ptr::null(),
                    private_data_len: 0,
                    responder_resources: ird_ord.0,
                    initiator_depth: ird_ord.1,
                    flow_control: 0,
                    retry_count: 0,
                    rnr_retry_count: 0,
                    srq: 0,
                    qp_num: 0,
                },
                _param_rest: [0; 4],
            },
            private_data,
            owner,
        });
        if !event.private_data.is_empty() {
            event.ibv.conn.private_data = event.private_data.as_ptr().cast();
            event.ibv.conn.private_data_len =
                u8::try_from(event.private_data.len()).unwrap_or(u8::MAX);
        }
        event
    }
}

/// The channels `rdma_create_event_channel` made and
/// `rdma_destroy_event_channel` has not destroyed.
static LIVE_CHANNELS: LiveHandles = LiveHandles::new();

/// Whether `channel` is a channel the application made and has not
/// destroyed.
pub(crate) fn is_live(channel: *mut RdmaEventChannel) -> bool {
    LIVE_CHANNELS.contains(channel)
}

/// `rdma_create_event_channel`: a new channel; NULL with `errno` set if
/// its descriptors cannot be made.
#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut RdmaEventChannel {
    guard(ptr::null_mut(), || match EventChannel::new() {
        Ok(channel) => {
            let channel: *mut RdmaEventChannel = Box::into_raw(channel).cast();
            LIVE_CHANNELS.insert(channel);
            channel
        }
        Err(errno) => {
            set_errno(errno);
            ptr::null_mut()
        }
    })
}

/// `rdma_destroy_event_channel`: closes the channel (events still queued
/// are dropped with it); a channel not alive (see `is_live`) is left alone.
///
/// # Safety
///
/// `channel` is not used by any id any more.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut RdmaEventChannel) {
    if !LIVE_CHANNELS.remove(channel) {
        return;
    }
    guard((), || {
        // SAFETY: the caller promises a live channel that
        // rdma_create_event_channel boxed as an `EventChannel`.
        let owned = unsafe { Box::from_raw(channel.cast::<EventChannel>()) };
        // Drain what is queued, so the events are freed.
        // SAFETY: fcntl on the channel's own descriptor.
        unsafe { libc::fcntl(owned.read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        while owned.take().is_ok() {}
    });
}

/// `rdma_get_cm_event`: waits for the next event on `channel` (or, if its
/// descriptor is non-blocking, answers `EAGAIN`). 0, or -1 with `errno`
/// set (`EINTR` when a signal without `SA_RESTART` interrupts the wait).
///
/// Like `ibv_get_cq_event`, it waits in a frame whose only calls are
/// `extern "C"` ones, so a thread cancelled in it unwinds through it.
///
/// # Safety
///
/// `event` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut RdmaEventChannel,
    event: *mut *mut RdmaCmEvent,
) -> c_int {
    // SAFETY: `channel_fd` reads only a live channel.
    let fd = unsafe { channel_fd(channel) };
    if fd < 0 || event as usize == 0 {
        return fail(libc::EINVAL);
    }
    let mut address: u64 = 0;
    loop {
        // SAFETY: `address` is valid for its 8 octets of writes.
        if unsafe { wait_record(fd, &raw mut address) } != 0 {
            return -1;
        }
        // SAFETY: the caller promises `event` is writable.
        if unsafe { take_event(address, event) } == 0 {
            return 0;
        }
    }
}

/// The channel's descriptor, or -1 for a channel not alive, read in a
/// frame of its own.
///
/// # Safety
///
/// No other thread destroys `channel` meanwhile.
unsafe extern "C" fn channel_fd(channel: *mut RdmaEventChannel) -> c_int {
    if !is_live(channel) {
        return -1;
    }
    // SAFETY: a live channel.
    unsafe { (*channel).fd }
}

/// Hands the event at `address` to the application (0), or drops it
/// because its id is gone (1).
///
/// # Safety
///
/// `address` was written by [`EventChannel::post`]; `out` is writable.
unsafe extern "C" fn take_event(address: u64, out: *mut *mut RdmaCmEvent) -> c_int {
    guard(1, || {
        let event = address as *mut Event;
        // SAFETY: a boxed event `post` queued, now ours.
        let owner = unsafe { &(*event).owner };
        if owner.is_destroyed() {
            // SAFETY: as above; nobody else holds it.
            drop(unsafe { Box::from_raw(event) });
            return 1;
        }
        owner.taken();
        // SAFETY: the caller promises `out` is writable; `ibv` is the
        // event's first field.
        unsafe { out.write(event.cast()) };
        0
    })
}

/// `rdma_ack_cm_event`: frees an event `rdma_get_cm_event` returned. 0.
///
/// # Safety
///
/// `event` is NULL or an event taken and not yet acknowledged.
#[no_mangle]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut RdmaCmEvent) -> c_int {
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    guard(-1, || {
        // SAFETY: the caller promises an event from rdma_get_cm_event,
        // boxed as an `Event` starting with it.
        let event = unsafe { Box::from_raw(event.cast::<Event>()) };
        event.owner.acknowledged();
        0
    })
}

/// `rdma_event_str`: the name of an event type.
#[no_mangle]
pub extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    const NAMES: [&CStr; 16] = [
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    ];
    usize::try_from(event)
        .ok()
        .and_then(|i| NAMES.get(i))
        .unwrap_or(&c"UNKNOWN EVENT")
        .as_ptr()
}

symbol_versions! {
    rdma_create_event_channel => "RDMACM_1.0",
    rdma_destroy_event_channel => "RDMACM_1.0",
    rdma_get_cm_event => "RDMACM_1.0",
    rdma_ack_cm_event => "RDMACM_1.0",
    rdma_event_str => "RDMACM_1.0",
}
