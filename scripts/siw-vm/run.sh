#!/usr/bin/env bash
# Boots the siw VM (build.sh's kernel and initramfs) under qemu, runs one
# command in it, prints the command's output and exits with its status.
#
# Usage: scripts/siw-vm/run.sh [OPTIONS] SCENARIO [ARGS...]
#
# Scenarios, the command the VM runs once siw0 is attached to its eth0:
#   rping-server ARGS...   rping -s -a VM_IP ARGS      (e.g. -V -C 1 -S 3000)
#   rping-client ARGS...   rping -c -a HOST_IP ARGS    (e.g. -V -C 100 -S 64)
#   exec COMMAND...        any busybox sh command line (e.g. exec rdma link)
#
# Options:
#   --siw PARAMS      siw.ko parameters, e.g. "mpa_crc_required=1 peer_to_peer=1
#                     rtr_write=0" (see build.sh for all of them)
#   --accel MODE      auto (the default: kvm when it can boot a guest here,
#                     tcg otherwise), kvm or tcg
#   --tap NAME        the host's tap device (default uwsiw0)
#   --net PREFIX      a /24: the host is PREFIX.1, the VM PREFIX.2 (default 10.79.0)
#   --timeout SECS    power the VM off after SECS (default 120)
#   --append ARGS     more kernel command line, e.g. "ignore_loglevel" with
#                     --siw dyndbg=+p for siw's debug messages on the console
#   --cache DIR       build.sh's cache (default target/siw-vm), built when empty
#                     (run build.sh itself to pick up new package versions)
#
# Output: the line "uwsiw: ready" once siw is attached and the command
# starts (a peer on the host may start then), then the command's output.
# stderr says how long the boot took; the kernel's console goes to
# CACHE/log/console-TAP.log. Exit status: the command's, 125 when the VM
# failed to set up, 124 on timeout, 1 on any other failure.
#
# Needs root (the tap device) and qemu-system-x86. The tap (PREFIX.1/24 on
# the host side) is created for the run and removed on every exit path,
# and qemu with it; runs on the same tap wait for each other. A blackhole
# route for PREFIX.0/24 (metric 4242, below the tap's own route) stays
# behind on purpose: a peer on the host that connects to the VM's address
# after the VM powered off is dropped here instead of leaving by the
# default route. `ip route del blackhole PREFIX.0/24 metric 4242` removes it.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

usage() { sed -n 's/^# \{0,1\}//;2,37p' "$0" >&2; exit 2; }

siw_params="" extra="" accel=auto tap=uwsiw0 net=10.79.0 timeout=120 cache="$repo/target/siw-vm"
while [ $# -gt 0 ]; do
    case "$1" in
    --siw) siw_params="$2"; shift 2 ;;
    --accel) accel="$2"; shift 2 ;;
    --tap) tap="$2"; shift 2 ;;
    --net) net="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --append) extra="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
host_ip="$net.1" vm_ip="$net.2"
scenario="$1"
shift
case "$scenario" in
rping-server) command=(rping -s -a "$vm_ip" "$@") ;;
rping-client) command=(rping -c -a "$host_ip" "$@") ;;
exec) command=("$@") ;;
*) usage ;;
esac
[ "${#command[@]}" -gt 0 ] || usage

out="$cache/out"
[ -f "$out/versions" ] || "$here/build.sh" "$cache" >/dev/null
mkdir -p "$cache/log"

# shellcheck source=scripts/siw-vm/accel.sh
. "$here/accel.sh"
accel="$(vm_accel "$accel" "$out/vmlinuz" "$cache/log")" || usage
console="$cache/log/console-$tap.log"
pidfile="$cache/log/qemu-$tap.pid"

# One run per tap at a time; a tap left by a run that was killed is stale.
exec {lock}>"$cache/log/$tap.lock"
flock -w "$timeout" "$lock" || { echo "siw-vm: $tap stays busy" >&2; exit 1; }

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    if [ -s "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    ip link del "$tap" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ip route replace blackhole "$net.0/24" metric 4242
ip link del "$tap" 2>/dev/null || true
ip tuntap add dev "$tap" mode tap
ip addr add "$host_ip/24" dev "$tap"
ip link set "$tap" up

# The command as one shell line, each word quoted.
line="$(printf '%q ' "${command[@]}")"
append="console=ttyS0 panic=-1 $extra uwsiw.ip=$vm_ip/24"
append+=" uwsiw.siw=$(printf '%s' "$siw_params" | base64 -w0)"
append+=" uwsiw.cmd=$(printf '%s' "$line" | gzip -9n | base64 -w0)"
# The kernel keeps 2048 octets of its command line (x86), and qemu
# refuses a longer one.
[ "${#append}" -lt 2048 ] \
    || { echo "siw-vm: the command is too long for the kernel's command line (${#append} octets)" >&2; exit 1; }

start="$EPOCHREALTIME"
status=""
while IFS= read -r text; do
    text="${text%$'\r'}"
    case "$text" in
    "uwsiw: exit "*) status="${text#uwsiw: exit }" ;;
    "uwsiw: ready")
        awk -v a="$start" -v b="$EPOCHREALTIME" -v m="$accel" \
            'BEGIN { printf "siw-vm: booted in %.2f s (%s)\n", b - a, m }' >&2
        echo "$text" ;;
    *) echo "$text" ;;
    esac
# The NIC: virtio-net without checksum offloads (frames carry real
# checksums for net_af_packet), and without the event index
# (event_idx=off): with it, under TCG on a loaded 2-core host, the
# guest's NIC now and then stopped transmitting for good in the middle of
# siw's bulk sends (the tap saw nothing from the VM, not even ping
# replies, for a minute while the host's window was open): 3 of about 13
# runs of siw_perftest's socket half under 2-3 busy loops; none in 29
# with event_idx=off.
done < <(timeout "$timeout" qemu-system-x86_64 -accel "$accel" -cpu max -m 384 -smp 1 \
    -nodefaults -display none -no-reboot -pidfile "$pidfile" \
    -kernel "$out/vmlinuz" -initrd "$out/initramfs.cpio.gz" -append "$append" \
    -netdev "tap,id=net0,ifname=$tap,script=no,downscript=no" \
    -device virtio-net-pci,netdev=net0,csum=off,guest_csum=off,event_idx=off \
    -serial "file:$console" -chardev stdio,id=out,signal=off -serial chardev:out \
    < /dev/null 2>&1 || echo "uwsiw: exit $?")

case "$status" in
"") echo "siw-vm: the VM stopped without an exit status (see $console)" >&2; exit 1 ;;
124) echo "siw-vm: timed out after $timeout s (see $console)" >&2; exit 124 ;;
*) exit "$status" ;;
esac
