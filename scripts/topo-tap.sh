#!/usr/bin/env bash
# The kernel side of a net_tap topology: DPDK's net_tap PMD creates the tap
# interface when uwarp starts (`--vdev net_tap0,iface=NAME`); this script
# gives it the kernel's address and brings it up, or takes both away.
#
#   kernel (KERNEL_CIDR on NAME) <--tap--> uwarp (net_tap0, its own IP and MAC)
#
# Usage: scripts/topo-tap.sh up NAME KERNEL_CIDR    e.g. up uwtap0 10.77.0.1/24
#        scripts/topo-tap.sh down NAME
#
# `up` waits up to 5 s for the interface (uwarp may still be starting).
# `down` flushes the address and sets the link down; the interface itself
# disappears when the uwarp process that created it exits.
set -euo pipefail

usage() { sed -n 's/^# \{0,1\}//;2,13p' "$0" >&2; exit 2; }

case "${1:-}" in
up)
    [ $# -eq 3 ] || usage
    name="$2" cidr="$3"
    for _ in $(seq 50); do
        ip link show "$name" >/dev/null 2>&1 && break
        sleep 0.1
    done
    ip link show "$name" >/dev/null 2>&1 || { echo "topo-tap.sh: no interface $name (is uwarp running with --vdev net_tap0,iface=$name?)" >&2; exit 1; }
    ip addr replace "$cidr" dev "$name"
    ip link set "$name" up
    ;;
down)
    [ $# -eq 2 ] || usage
    name="$2"
    if ip link show "$name" >/dev/null 2>&1; then
        ip addr flush dev "$name"
        ip link set "$name" down
    fi
    ;;
*) usage ;;
esac
