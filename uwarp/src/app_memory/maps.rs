//! Whether a range of this process's address space is mapped with the
//! access a registration needs: what the kernel's `ib_umem_get` finds when
//! it pins the pages (`get_user_pages` fails with `EFAULT` on a hole, and
//! on a read-only page when the region is writable).
//!
//! Registration is the slow path: the whole of `/proc/self/maps` is read
//! once per registration of a non-empty range.

use std::fs;

use uwarp_stack::mem::MemError;

/// Checks that every octet of the `len` octets at `addr` (non-empty, not
/// wrapping) lies in a mapping that is readable and, if `write`, also
/// writable; [`MemError::NotMapped`] otherwise, or when the map cannot be
/// read.
pub(crate) fn check_mapped(addr: usize, len: usize, write: bool) -> Result<(), MemError> {
    let not_mapped = MemError::NotMapped { addr, len };
    let maps = fs::read_to_string("/proc/self/maps").map_err(|_| not_mapped)?;
    if covers(&maps, addr, addr + len, write) {
        Ok(())
    } else {
        Err(not_mapped)
    }
}

/// Whether the mappings `maps` lists (in `/proc/<pid>/maps`' format, in
/// address order) cover `start .. end` without a hole, each readable and,
/// if `write`, writable.
fn covers(maps: &str, start: usize, end: usize, write: bool) -> bool {
    let mut covered_to = start;
    for mapping in maps.lines().filter_map(Mapping::parse) {
        if mapping.end <= covered_to {
            continue;
        }
        let allowed = mapping.read && (mapping.write || !write);
        if mapping.start > covered_to || !allowed {
            return false;
        }
        covered_to = mapping.end;
        if covered_to >= end {
            return true;
        }
    }
    false
}

/// One line of the map: `start-end perms offset dev inode path`.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    read: bool,
    write: bool,
}

impl Mapping {
    /// The line's range and permissions; `None` for a line that is not a
    /// mapping's.
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_ascii_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?.as_bytes();
        Some(Self {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            read: perms.first() == Some(&b'r'),
            write: perms.get(1) == Some(&b'w'),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/prog
00651000-00652000 rw-p 00051000 08:02 173521      /usr/bin/prog
00652000-00655000 rw-p 00000000 00:00 0           [heap]
7f0000000000-7f0000001000 ---p 00000000 00:00 0
7f0000001000-7f0000003000 r--p 00000000 00:00 0
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]
";

    #[test]
    fn parses_a_line() {
        let line = "7f0000001000-7f0000003000 rw-s 00000000 00:05 42 /dev/shm/x";
        assert_eq!(
            Mapping::parse(line),
            Some(Mapping {
                start: 0x7f00_0000_1000,
                end: 0x7f00_0000_3000,
                read: true,
                write: true,
            })
        );
        assert_eq!(Mapping::parse(""), None);
        assert_eq!(Mapping::parse("zz-1 rw-p"), None);
    }

    #[test]
    fn adjacent_mappings_cover_a_range_across_them() {
        assert!(covers(MAPS, 0x651000, 0x655000, true));
        assert!(covers(MAPS, 0x651fff, 0x652001, true));
        assert!(covers(MAPS, 0x400000, 0x452000, false));
    }

    #[test]
    fn holes_and_missing_rights_are_refused() {
        assert!(!covers(MAPS, 0x451000, 0x453000, false), "runs into a hole");
        assert!(!covers(MAPS, 0x660000, 0x661000, false), "in a hole");
        assert!(
            !covers(MAPS, 0x400000, 0x401000, true),
            "read-only, for writes"
        );
        assert!(covers(MAPS, 0x7f00_0000_1000, 0x7f00_0000_3000, false));
        assert!(!covers(MAPS, 0x7f00_0000_1000, 0x7f00_0000_3000, true));
        assert!(
            !covers(MAPS, 0x7f00_0000_0000, 0x7f00_0000_2000, false),
            "PROT_NONE"
        );
        assert!(
            !covers(MAPS, 0x7f00_0000_2000, 0x7f00_0000_4000, false),
            "past the end"
        );
        assert!(!covers("", 0x1000, 0x2000, false));
    }

    #[test]
    fn this_process_maps_its_stack_and_not_its_null_page() {
        let local = [0u8; 64];
        let at = local.as_ptr() as usize;
        assert_eq!(check_mapped(at, local.len(), true), Ok(()));
        assert_eq!(
            check_mapped(0x10, 16, false),
            Err(MemError::NotMapped {
                addr: 0x10,
                len: 16
            })
        );
    }
}
