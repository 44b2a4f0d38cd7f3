#!/usr/bin/env bash
# Boots two VMs on one link and runs uwarp between them on a PCI NIC
# driven by DPDK's own poll-mode driver: VM a is the server, VM b the
# client. Prints both VMs' output, then a summary line; exits 0 when the
# scenario passed.
#
# Usage: scripts/vm/run.sh [OPTIONS] SCENARIO
#
# Scenarios, NIC-MODE:
#   NIC   virtio  virtio-net-pci, 2 queue pairs, the device's RSS on
#                 (DPDK's net_virtio)
#         e1000e  Intel 82574 (DPDK's net_e1000_em)
#   MODE  write-bw, read-bw, send-bw, write-lat, read-lat, send-lat:
#         uwarp-perf's two-host mode, data checked by both sides
# e.g. virtio-write-bw, e1000e-read-lat.
#
# Options:
#   --size N          message size (default 65536)
#   --iters N         messages, round trips for latency (default 200)
#   --accel MODE      auto (the default: kvm when it can boot a guest here,
#                     tcg otherwise), kvm or tcg
#   --timeout SECS    power the VMs off after SECS (default 300)
#   --perf PATH       the uwarp-perf to run (default target/debug/uwarp-perf)
#   --cache DIR       scripts/siw-vm/build.sh's cache (default target/siw-vm)
#
# Each VM: q35 with an emulated IOMMU (intel-iommu), Debian 12's kernel
# and the siw VM's initramfs plus an archive of uwarp-perf and the DPDK
# libraries it loads; a kernel NIC (virtio-net, eth0: the VM's address,
# and siw) and the NIC for DPDK at 0000:00:04.0, bound to vfio-pci by
# the init, with hugepages for DPDK's memory. The four NICs are taps on
# one bridge, uwvm0, made for the run and removed on every exit path with
# the VMs. Addresses on 10.88.0.0/24: VM a's kernel .2 and uwarp .12,
# VM b's kernel .3 and uwarp .13; the host has none.
#
# Output: each VM's lines prefixed "a: " and "b: ", then "vm: SCENARIO:
# passed" or "vm: SCENARIO: failed: REASON". Exit status: 0 passed, 1
# failed, 2 usage. The kernels' consoles go to CACHE/log/vm-console-*.log.
# Needs root (taps, bridge) and qemu-system-x86, cpio (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

usage() { sed -n 's/^# \{0,1\}//;2,38p' "$0" >&2; exit 2; }

size=65536 iters=200 accel=auto timeout=300
perf="$repo/target/debug/uwarp-perf" cache="$repo/target/siw-vm"
while [ $# -gt 0 ]; do
    case "$1" in
    --size) size="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --accel) accel="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --perf) perf="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] || usage
scenario="$1"
nic="${scenario%%-*}" mode="${scenario#*-}"
case "$nic" in virtio|e1000e) ;; *) usage ;; esac
case "$mode" in write-bw|read-bw|send-bw|write-lat|read-lat|send-lat) ;; *) usage ;; esac
[ -x "$perf" ] || { echo "vm: no uwarp-perf at $perf (cargo build -p uwarp-bench)" >&2; exit 1; }

net=10.88.0 bridge=uwvm0 pci=0000:00:04.0 port=18515
log="$cache/log"
work="$cache/pci"
mkdir -p "$log" "$work"

# One run at a time: the bridge and taps have fixed names.
exec {lock}>"$log/$bridge.lock"
flock -w "$timeout" "$lock" || { echo "vm: $bridge stays busy" >&2; exit 1; }

log_step() { echo "vm [${SECONDS}s]: $*" >&2; }
fail() { echo "vm: $scenario: failed: $*"; exit 1; }

# --- the initramfs: the siw VM's, and uwarp's binaries ------------------

out="$(bash "$repo/scripts/siw-vm/build.sh" "$cache")"

# The archive appended to the siw VM's initramfs (the kernel unpacks the
# two in turn): uwarp-perf without its debug sections, the libraries it
# and the PMDs load, and the PMDs themselves in a plugin directory (named
# *.so, which is all the EAL loads there; no library a PMD links goes in
# it, or the EAL registers that library twice and panics).
overlay="$work/root"
rm -rf "$overlay"
mkdir -p "$overlay/usr/bin" "$overlay/usr/lib/x86_64-linux-gnu" "$overlay/usr/lib/dpdk-pmds"
strip --strip-debug -o "$overlay/usr/bin/uwarp-perf" "$perf"
pmds=(librte_mempool_ring librte_net_virtio librte_net_e1000)
for pmd in "${pmds[@]}"; do
    cp -L "/usr/lib/x86_64-linux-gnu/$pmd.so.23" "$overlay/usr/lib/dpdk-pmds/$pmd.so"
done
for file in "$perf" "$overlay"/usr/lib/dpdk-pmds/*.so; do
    ldd_out="$(ldd "$file")"
    if grep -q 'not found' <<< "$ldd_out"; then
        fail "$(basename "$file") needs libraries this host does not have: $ldd_out"
    fi
    while read -r lib; do
        cp -L "$lib" "$overlay/usr/lib/x86_64-linux-gnu/"
    done < <(sed -n 's/.*=> \(\/[^ ]*\) (0x.*/\1/p' <<< "$ldd_out")
done
(cd "$overlay" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 > "$work/uwarp.cpio.gz"
cat "$out/initramfs.cpio.gz" "$work/uwarp.cpio.gz" > "$work/initramfs.cpio.gz"
rm -rf "$overlay"

# shellcheck source=scripts/siw-vm/accel.sh
. "$repo/scripts/siw-vm/accel.sh"
accel="$(vm_accel "$accel" "$out/vmlinuz" "$log")" || usage

# --- the link and the VMs -----------------------------------------------

taps=(uwvm-ak uwvm-ad uwvm-bk uwvm-bd)
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    local pidfile
    for pidfile in "$work"/qemu-*.pid; do
        [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
        rm -f "$pidfile"
    done
    for tap in "${taps[@]}"; do ip link del "$tap" 2>/dev/null || true; done
    ip link del "$bridge" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
cleanup
ip link add "$bridge" type bridge
ip link set "$bridge" up

# The DPDK NIC's qemu arguments for VM $1's tap $2.
dpdk_nic() {
    local mac="52:54:00:88:0$1:04"
    case "$nic" in
    virtio)
        echo "-netdev tap,id=d0,ifname=$2,script=no,downscript=no,queues=2,vhost=off" \
            "-device virtio-net-pci,netdev=d0,addr=0x4,mac=$mac,disable-legacy=on,iommu_platform=on,mq=on,rss=on,hash=on,vectors=6" ;;
    e1000e)
        echo "-netdev tap,id=d0,ifname=$2,script=no,downscript=no" \
            "-device e1000e,netdev=d0,addr=0x4,mac=$mac" ;;
    esac
}

# Boots VM $1 (a or b; $2 its number) with the shell line $3, in the
# background; its output goes to $work/$1.out.
boot() {
    local name="$1" n="$2" line="$3" ktap="uwvm-$1k" dtap="uwvm-$1d" queues=()
    ip tuntap add dev "$ktap" mode tap
    [ "$nic" = virtio ] && queues=(multi_queue)
    ip tuntap add dev "$dtap" mode tap "${queues[@]}"
    for tap in "$ktap" "$dtap"; do
        ip link set "$tap" master "$bridge" up
    done
    local append="console=ttyS0 panic=-1 intel_iommu=on hugepages=192"
    append+=" uwsiw.ip=$net.$((n + 1))/24 uwsiw.vfio=$pci uwsiw.siw="
    append+=" uwsiw.cmd=$(printf '%s' "$line" | base64 -w0)"
    : > "$work/$name.out"
    # The word splitting of dpdk_nic's output is wanted.
    # shellcheck disable=SC2046
    timeout "$timeout" qemu-system-x86_64 -machine q35 -accel "$accel" -cpu max -m 1024 -smp 2 \
        -nodefaults -display none -no-reboot -pidfile "$work/qemu-$name.pid" \
        -device intel-iommu,intremap=off \
        -kernel "$out/vmlinuz" -initrd "$work/initramfs.cpio.gz" -append "$append" \
        -netdev "tap,id=k0,ifname=$ktap,script=no,downscript=no" \
        -device "virtio-net-pci,netdev=k0,addr=0x3,mac=52:54:00:88:0$n:03,csum=off,guest_csum=off" \
        $(dpdk_nic "$n" "$dtap") \
        -serial "file:$log/vm-console-$name.log" \
        -chardev "file,id=out,path=$work/$name.out" -serial chardev:out \
        < /dev/null > "$work/qemu-$name.log" 2>&1 &
}

eal="-a $pci -d /usr/lib/dpdk-pmds"
server_ip="$net.12"
server="uwarp-perf $mode --server --port $port --eal '$eal' --ip $server_ip/24"
# The client waits until uwarp answers ARP for the server's address (its
# port is up; it listens right after), then connects, again while the
# server refuses (not listening yet), at most 5 times.
client_run="uwarp-perf $mode --connect $server_ip:$port --eal '$eal' --ip $net.13/24 -s $size -n $iters"
client="n=0; until arping -q -c 1 -w 2 -I eth0 $server_ip; do n=\$((n+1)); \
[ \$n -lt 60 ] || { echo 'vm: the server never answered ARP'; exit 1; }; done; \
n=0; while :; do n=\$((n+1)); $client_run > /tmp/client.out 2>&1; rc=\$?; cat /tmp/client.out; \
grep -q 'refused the connection' /tmp/client.out && [ \$n -lt 5 ] || exit \$rc; sleep 1; done"

log_step "booting VMs a (server) and b (client), $nic, $accel"
boot a 1 "$server"
pid_a=$!
boot b 2 "$client"
pid_b=$!

# The exit status VM $1 reported, empty while it runs.
status_of() { sed -n 's/^uwsiw: exit \([0-9]*\).*/\1/p' "$work/$1.out" | tail -n 1; }
# Until both have ended, or one failed (the other would wait for it).
while kill -0 "$pid_a" 2>/dev/null || kill -0 "$pid_b" 2>/dev/null; do
    a="$(status_of a)" b="$(status_of b)"
    [ -n "$a" ] && [ -n "$b" ] && break
    if [ "${a:-0}" != 0 ] || [ "${b:-0}" != 0 ]; then break; fi
    sleep 0.5
done
for name in a b; do
    sed "s/^/$name: /" "$work/$name.out"
done

for name in a b; do
    status="$(status_of "$name")"
    if ! grep -q '^uwsiw: ready' "$work/$name.out"; then
        [ "$status" != 125 ] || fail "VM $name did not set up (above)"
        fail "VM $name did not boot (see $log/vm-console-$name.log and $work/qemu-$name.log)"
    fi
    case "$status" in
    0) ;;
    "") fail "VM $name did not finish within $timeout s, or was stopped after the other failed" ;;
    *) fail "VM $name's command exited $status (above)" ;;
    esac
done
echo "vm: $scenario: passed"
