//! Memory regions: `ibv_reg_mr`, `ibv_reg_mr_iova2`, `ibv_dereg_mr`,
//! `ibv_reg_dmabuf_mr` (RFC 5040 section 2.1 and RFC 5041 section 5.1.1:
//! the Tagged Buffers a peer places into and reads from).
//!
//! The application's own memory is registered where it lies
//! ([`uwarp::ProtectionDomain::register_memory`]): any alignment, any
//! non-zero length, overlapping registrations allowed. As with the
//! kernel's `ibv_reg_mr`, the range must be mapped (readable, and writable
//! when the region allows writes), or the registration fails with
//! `EFAULT`. When `ibv_dereg_mr` returns, uwarp will never touch the
//! memory again, so the application may free it at once. A program that
//! unmaps registered memory before deregistering it gets the region
//! revoked ([`crate::unmap`]) or, where uwarp does not see the unmap, a
//! copy that fails instead of faulting ([`uwarp::app_memory`]): the peer
//! gets a Terminate, the program keeps running.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::sync::atomic::Ordering;

use uwarp::{Access, MemError, MemoryRegion};

use crate::abi::verbs::*;
use crate::export::{errno_of, guard, set_errno, symbol_versions};
use crate::pd::Pd;

/// A memory region: the `ibv_mr` applications hold, and uwarp's.
#[repr(C)]
pub struct Mr {
    ibv: IbvMr,
    region: MemoryRegion,
}

/// uwarp's access rights for verbs access flags (hints masked off), or
/// the `errno` for flags it cannot honour. Remote write and remote atomic
/// access need local write, as in verbs (`ib_check_mr_access`). Remote
/// atomic access is accepted and grants nothing: RFC 5040 has no atomic
/// operations, and a program that posts one gets its error then, as on
/// siw (qperf asks for the right on every region, whatever it measures).
fn access_of(flags: c_int) -> Result<Access, c_int> {
    let flags = flags & !(IBV_ACCESS_OPTIONAL_RANGE | IBV_ACCESS_HUGETLB | IBV_ACCESS_ZERO_BASED);
    if flags & IBV_ACCESS_ON_DEMAND != 0 {
        // uwarp has no page faults to serve.
        return Err(libc::EOPNOTSUPP);
    }
    let known = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE
        | IBV_ACCESS_REMOTE_READ
        | IBV_ACCESS_REMOTE_ATOMIC
        | IBV_ACCESS_MW_BIND;
    if flags & !known != 0 {
        return Err(libc::EINVAL);
    }
    let needs_local_write = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if flags & needs_local_write != 0 && flags & IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(libc::EINVAL);
    }
    let mut access = Access::NONE;
    for (bit, right) in [
        (IBV_ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, Access::REMOTE_READ),
    ] {
        if flags & bit != 0 {
            access = access.union(right);
        }
    }
    Ok(access)
}

/// The kernel's checks of the range (`ib_umem_get`, siw's `reg_user_mr`)
/// that come before it looks at the memory: `EINVAL` for a length of 0 or
/// a range wrapping past the end of the address space, `EFAULT` for a
/// null address (nothing is ever mapped there). Passes `access` on.
fn check_range(addr: *mut c_void, len: usize, access: Access) -> Result<Access, c_int> {
    if len == 0 || (addr as usize).checked_add(len).is_none() {
        return Err(libc::EINVAL);
    }
    if addr.is_null() {
        return Err(libc::EFAULT);
    }
    Ok(access)
}

/// Registers `len` octets at `addr` in `pd` with Tagged Offset `iova` for
/// its first octet (`IBV_ACCESS_ZERO_BASED`: 0).
///
/// # Safety
///
/// As `ibv_reg_mr`: the range stays valid until the region is
/// deregistered.
unsafe fn register(
    pd: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    flags: c_int,
) -> *mut IbvMr {
    guard(ptr::null_mut(), || {
        if pd.is_null() {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
        let access = match access_of(flags).and_then(|access| check_range(addr, len, access)) {
            Ok(access) => access,
            Err(errno) => {
                set_errno(errno);
                return ptr::null_mut();
            }
        };
        let iova = if flags & IBV_ACCESS_ZERO_BASED != 0 {
            0
        } else {
            iova
        };
        // SAFETY: the caller promises a live domain.
        let domain = unsafe { Pd::from_ibv(pd) };
        // SAFETY: the caller keeps the range valid until ibv_dereg_mr,
        // which drops the region, the contract register_memory states.
        let registered = unsafe {
            domain
                .pd
                .register_memory(addr.cast(), len, Some(iova), access)
        };
        match registered {
            Ok(region) => {
                domain.users.fetch_add(1, Ordering::AcqRel);
                let stag = region.lkey().0;
                let ibv = IbvMr {
                    // SAFETY: the caller promises a live domain.
                    context: unsafe { (*pd).context },
                    pd,
                    addr,
                    length: len,
                    handle: stag,
                    lkey: stag,
                    rkey: region.rkey(),
                };
                Box::into_raw(Box::new(Mr { ibv, region })).cast()
            }
            Err(error) => {
                set_errno(match error {
                    uwarp::Error::Mem(MemError::NotMapped { .. }) => libc::EFAULT,
                    uwarp::Error::Mem(_) => libc::ENOMEM,
                    other => errno_of(&other),
                });
                ptr::null_mut()
            }
        }
    })
}

/// `ibv_reg_mr`: registers `length` octets at `addr`, their virtual
/// addresses as Tagged Offsets; NULL with `errno` set (`EINVAL` for bad
/// arguments or flags, a length of 0 or a wrapping range, `EFAULT` for a
/// range not wholly mapped, or read-only with local or remote write
/// access, `EOPNOTSUPP` for on-demand paging, `ENOMEM` when the STag
/// table is full).
///
/// # Safety
///
/// `pd` is NULL or live; the range stays valid until `ibv_dereg_mr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut IbvMr {
    // SAFETY: forwarded.
    unsafe { register(pd, addr, length, addr as u64, access) }
}

/// `ibv_reg_mr_iova2`: [`ibv_reg_mr`] with `iova` the Tagged Offset of the
/// first octet (what the header's `ibv_reg_mr` macro calls when the access
/// flags are not a compile-time constant).
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut IbvMr {
    // SAFETY: forwarded.
    unsafe { register(pd, addr, length, iova, access as c_int) }
}

/// `ibv_reg_dmabuf_mr`: memory of another device, by dma-buf. uwarp has
/// no device to map it into: NULL with `errno` `EOPNOTSUPP` (as siw).
#[no_mangle]
pub extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut IbvPd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut IbvMr {
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

/// `ibv_dereg_mr`: deregisters the region; when it returns, no placement
/// or read of uwarp touches the memory any more. 0, or an `errno` value.
///
/// # Safety
///
/// `mr` is NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    guard(libc::EIO, || {
        // SAFETY: the caller promises a live region, boxed as an `Mr`.
        let owned = unsafe { Box::from_raw(mr.cast::<Mr>()) };
        let pd = owned.ibv.pd;
        // Dropping the region waits for its grace period.
        drop(owned);
        // SAFETY: the region's domain outlives it.
        unsafe { Pd::from_ibv(pd) }
            .users
            .fetch_sub(1, Ordering::AcqRel);
        0
    })
}

symbol_versions! {
    ibv_reg_mr => "IBVERBS_1.1",
    ibv_reg_mr_iova2 => "IBVERBS_1.8",
    ibv_reg_dmabuf_mr => "IBVERBS_1.12",
    ibv_dereg_mr => "IBVERBS_1.1",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_flags_map_as_the_kernel_checks_them() {
        let all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        let rights = Access::LOCAL_WRITE
            .union(Access::REMOTE_WRITE)
            .union(Access::REMOTE_READ);
        assert_eq!(access_of(all), Ok(rights));
        // qperf's flags: remote atomic access is accepted and grants nothing.
        assert_eq!(access_of(all | IBV_ACCESS_REMOTE_ATOMIC), Ok(rights));
        assert_eq!(access_of(IBV_ACCESS_REMOTE_ATOMIC), Err(libc::EINVAL));
        assert_eq!(access_of(IBV_ACCESS_REMOTE_WRITE), Err(libc::EINVAL));
        assert_eq!(access_of(IBV_ACCESS_REMOTE_READ), Ok(Access::REMOTE_READ));
        assert_eq!(
            access_of(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
            Err(libc::EOPNOTSUPP)
        );
        assert_eq!(access_of(1 << 30), Err(libc::EINVAL));
    }

    #[test]
    fn ranges_are_checked_as_the_kernel_checks_them() {
        let at = |addr: usize| ptr::null_mut::<c_void>().with_addr(addr);
        let read = Access::REMOTE_READ;
        assert_eq!(check_range(at(0x1000), 1, read), Ok(read));
        assert_eq!(check_range(at(0x1000), 0, read), Err(libc::EINVAL));
        assert_eq!(check_range(at(usize::MAX - 3), 8, read), Err(libc::EINVAL));
        assert_eq!(check_range(at(0), 8, read), Err(libc::EFAULT));
        assert_eq!(check_range(at(0), 0, read), Err(libc::EINVAL));
    }
}
