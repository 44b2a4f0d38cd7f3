//! The rsocket descriptor table (rdma-core's `idm` index map): which
//! descriptors are rsockets. A descriptor is the socket's own completion
//! channel's, so it is a real descriptor of the process that no other
//! socket or file can share while the rsocket lives, and `rpoll` can mix
//! it with ordinary ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::stream::Rsocket;

/// The table, made on first use.
fn table() -> &'static Mutex<HashMap<i32, Arc<Rsocket>>> {
    static TABLE: OnceLock<Mutex<HashMap<i32, Arc<Rsocket>>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// Enters `socket` under its descriptor, which it answers.
pub fn insert(socket: Arc<Rsocket>) -> i32 {
    let fd = socket.fd();
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(fd, socket);
    fd
}

/// The rsocket of descriptor `fd` (`rs_lookup`), if it is one.
pub fn lookup(fd: i32) -> Option<Arc<Rsocket>> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&fd)
        .cloned()
}

/// Takes descriptor `fd` out of the table (`rclose`): the socket, or
/// `None` if `fd` is no rsocket.
pub fn remove(fd: i32) -> Option<Arc<Rsocket>> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&fd)
}
