#!/usr/bin/env bash
# Reserves (or releases) 2 MiB hugepages for DPDK on real NICs. Optional:
# uwarp's virtual-device runs use --no-huge and need none of this.
#
# Usage: scripts/hugepages.sh up [COUNT]   reserve COUNT pages (default 512 = 1 GiB)
#                                         and mount hugetlbfs on /dev/hugepages
#        scripts/hugepages.sh down        release what `up` reserved
#        scripts/hugepages.sh status
#
# `up` records the previous page count in /run/uwarp-hugepages.prev so that
# `down` restores exactly that count, and unmounts only a mount it made.
set -euo pipefail

nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
state=/run/uwarp-hugepages.prev
mnt=/dev/hugepages

usage() { sed -n 's/^# \{0,1\}//;2,9p' "$0" >&2; exit 2; }

case "${1:-}" in
up)
    count="${2:-512}"
    [ -w "$nr" ] || { echo "hugepages.sh: $nr is not writable (run as root)" >&2; exit 1; }
    if [ ! -e "$state" ]; then
        mounted=no
        mountpoint -q "$mnt" || { mkdir -p "$mnt"; mount -t hugetlbfs nodev "$mnt"; mounted=yes; }
        echo "$(cat "$nr") $mounted" > "$state"
    fi
    echo "$count" > "$nr"
    got="$(cat "$nr")"
    echo "hugepages.sh: $got of $count 2 MiB pages reserved, hugetlbfs on $mnt"
    [ "$got" -ge "$count" ] || { echo "hugepages.sh: the kernel could not reserve them all (fragmented memory?)" >&2; exit 1; }
    ;;
down)
    [ -e "$state" ] || { echo "hugepages.sh: nothing to release"; exit 0; }
    read -r prev mounted < "$state"
    echo "$prev" > "$nr"
    # A mount still in use stays (umount says why); the pages go back all the same.
    if [ "$mounted" = yes ]; then
        umount "$mnt" || true
    fi
    rm -f "$state"
    echo "hugepages.sh: restored $prev pages"
    ;;
status)
    grep -E '^Huge' /proc/meminfo
    ;;
*) usage ;;
esac
