#!/usr/bin/env bash
# A veth pair into a network namespace, for net_af_packet:
#
#   uwarp (--vdev net_af_packet0,iface=NAME-u) | NAME-u <--veth--> NAME-k (KERNEL_CIDR) | netns NAME
#
# The kernel side's checksum and segmentation offloads are turned off, so
# the frames uwarp reads carry real checksums (veth otherwise leaves them
# to hardware that does not exist), and the uwarp side carries no address,
# so the host's stack stays out of the way.
#
# Usage: scripts/topo-veth.sh up NAME KERNEL_CIDR    e.g. up uwv0 10.78.0.1/24
#        scripts/topo-veth.sh down NAME
#
# `down` deletes the namespace, which removes the veth pair with it.
set -euo pipefail

usage() { sed -n 's/^# \{0,1\}//;2,15p' "$0" >&2; exit 2; }

case "${1:-}" in
up)
    [ $# -eq 3 ] || usage
    name="$2" cidr="$3"
    ip netns add "$name"
    trap 'ip netns del "$name" 2>/dev/null; ip link del "$name-u" 2>/dev/null' ERR
    ip link add "$name-u" type veth peer name "$name-k" netns "$name"
    ip netns exec "$name" ip addr add "$cidr" dev "$name-k"
    ip netns exec "$name" ip link set lo up
    ip netns exec "$name" ip link set "$name-k" up
    ip netns exec "$name" ethtool -K "$name-k" tx off rx off tso off gso off gro off >/dev/null
    ethtool -K "$name-u" tx off rx off tso off gso off gro off >/dev/null
    sysctl -qw "net.ipv6.conf.$name-u.disable_ipv6=1"
    ip link set "$name-u" up
    ;;
down)
    [ $# -eq 2 ] || usage
    name="$2"
    ip netns del "$name" 2>/dev/null || true
    ip link del "$name-u" 2>/dev/null || true
    ;;
*) usage ;;
esac
