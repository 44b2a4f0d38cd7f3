#!/usr/bin/env bash
# Boots two VMs on one link and runs uwarp between them on PCI NICs
# driven by DPDK's own poll-mode drivers: VM a is the server, VM b the
# client. Runs the scenarios in turn in one boot, prints both VMs' output,
# then a line per scenario; exits 0 when every scenario passed.
#
# Usage: scripts/vm/run.sh [OPTIONS] SCENARIO...
#
# Scenarios, NIC-MODE:
#   NIC   virtio  virtio-net-pci, 2 queue pairs, the device's RSS on
#                 (DPDK's net_virtio)
#         e1000e  Intel 82574 (DPDK's net_e1000_em)
#         socket  no DPDK: uwarp-perf on uwarp's socket transport, over
#                 the VMs' kernel NICs and kernel TCP (a baseline)
#         siw     no uwarp: perftest's ib_MODE -R (ib_write_bw, ...) on
#                 Linux siw in both VMs, over the kernel NICs (a baseline)
#   MODE  write-bw, read-bw, send-bw, write-lat, read-lat, send-lat:
#         uwarp-perf's two-host mode, data checked by both sides; with
#         -zero-copy after it (virtio-write-bw-zero-copy), payloads of
#         1024 octets and more sent from registered memory by reference,
#         that memory DMA-mapped for the NIC, through 1% loss on each
#         side's receive path
# e.g. virtio-write-bw, e1000e-read-lat; and
#   virtio-rss        write-bw with 2 dataplane cores on each side, one
#                     per queue of the virtio NIC, over 8 connections
#   siw-rping         Debian's rping on uwarp's drop-in libraries over
#                     DPDK (virtio) in VM b against Debian's rping on siw
#                     in VM a, both roles (--iters pings of --size octets,
#                     default 10 of 3000 here)
#   siw-perftest      Debian's ib_write_bw -R on uwarp's drop-in libraries
#                     over DPDK (virtio) in VM b against ib_write_bw -R on
#                     siw in VM a (siw serving; --iters messages of
#                     --size octets, default 200 of 65536)
#   kernel-tcp        uwarp's TCP (uwarp-perf tcp, virtio) in VM b against
#                     VM a's kernel TCP, --size octets each way (default
#                     16 MiB here; at most a few hundred MiB in 1 GiB VMs),
#                     SHA-256 compared
#
# Options:
#   --size N          message size (default 65536)
#   --iters N         messages, round trips for latency (default 200)
#   --cores N         dataplane cores on each side (default 1)
#   --qps N           connections, bandwidth modes (default 1)
#   --accel MODE      auto (the default: kvm when it can boot a guest here,
#                     tcg otherwise), kvm or tcg
#   --timeout SECS    power the VMs off after SECS (default 300)
#   --bin DIR         where cargo put uwarp-perf, uwarp-run and
#                     libuwarp_verbs.so (default target/debug)
#   --cache DIR       scripts/siw-vm/build.sh's cache (default target/siw-vm)
#
# Each VM: q35 with an emulated IOMMU (intel-iommu), Debian 12's kernel
# and the siw VM's initramfs plus an archive of uwarp-perf, the DPDK
# libraries it loads and side.sh; a kernel NIC (virtio-net, eth0: the
# VM's address, and siw) and two NICs for DPDK, virtio at 0000:00:04.0
# and e1000e at 0000:00:05.0, bound to vfio-pci by the init, with
# hugepages for DPDK's memory. The six NICs are taps on one bridge, uwvm0,
# made for the run and removed on every exit path with the VMs. Addresses
# on 10.88.0.0/24: VM a's kernel .2 and uwarp .12, VM b's kernel .3 and
# uwarp .13; the host has none. The kernel NIC has no event index
# (event_idx=off), as the siw VM's (scripts/siw-vm/run.sh says why: the
# guest's kernel virtio-net driver stopped transmitting now and then
# under TCG with it); DPDK's virtio PMD polls its rings and keeps it.
#
# Output: each VM's lines prefixed "a: " and "b: ", then for each
# scenario "vm: SCENARIO: passed" or "vm: SCENARIO: failed: REASON" (the
# first failure ends the run). Exit status: 0 all passed, 1 a failure, 2
# usage. The kernels' consoles go to CACHE/log/vm-console-*.log.
# Needs root (taps, bridge) and qemu-system-x86, cpio (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

usage() { sed -n 's/^# \{0,1\}//;2,65p' "$0" >&2; exit 2; }

size=65536 iters=200 cores=1 qps=1 accel=auto timeout=300 size_given="" iters_given=""
needs_perf="" needs_verbs=""
bin="$repo/target/debug" cache="$repo/target/siw-vm"
while [ $# -gt 0 ]; do
    case "$1" in
    --size) size="$2" size_given="$2"; shift 2 ;;
    --iters) iters="$2" iters_given="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --qps) qps="$2"; shift 2 ;;
    --accel) accel="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
scenarios=("$@")
# What side.sh runs: NAME,PCI,MODE,CORES,SIZE,ITERS,QPS,VARIANT per
# scenario.
specs=()
for scenario in "${scenarios[@]}"; do
    s="$size" i="$iters" c="$cores" q="$qps" variant=plain
    case "$scenario" in
    virtio-rss) nic=virtio mode=write-bw c=2 q=8 ;;
    siw-rping) nic=virtio mode=siw-rping s="${size_given:-3000}" i="${iters_given:-10}" ;;
    siw-perftest) nic=virtio mode=siw-perftest ;;
    kernel-tcp) nic=virtio mode=kernel-tcp s="${size_given:-16777216}" ;;
    *-bw-zero-copy|*-lat-zero-copy)
        variant=zero-copy
        nic="${scenario%%-*}" mode="${scenario#*-}" mode="${mode%-zero-copy}" ;;
    *) nic="${scenario%%-*}" mode="${scenario#*-}" ;;
    esac
    case "$nic" in
    virtio) pci=0000:00:04.0 ;;
    e1000e) pci=0000:00:05.0 ;;
    socket|siw) pci=none mode="$nic-$mode" ;;
    *) usage ;;
    esac
    case "${mode#socket-}" in
    write-bw|read-bw|send-bw|write-lat|read-lat|send-lat|kernel-tcp) needs_perf=1 ;;
    siw-rping|siw-perftest) needs_verbs=1 ;;
    siw-write-bw|siw-read-bw|siw-send-bw|siw-write-lat|siw-read-lat|siw-send-lat) ;;
    *) usage ;;
    esac
    specs+=("$scenario,$pci,$mode,$c,$s,$i,$q,$variant")
done
perf="$bin/uwarp-perf" run="$bin/uwarp-run"
if [ -n "$needs_perf" ] && [ ! -x "$perf" ]; then
    echo "vm: no uwarp-perf in $bin (cargo build -p uwarp-bench)" >&2; exit 1
fi
# The drop-in library: the newer of where cargo build and cargo test put it.
library=""
for candidate in "$bin/libuwarp_verbs.so" "$bin/deps/libuwarp_verbs.so"; do
    if [ -f "$candidate" ] && { [ -z "$library" ] || [ "$candidate" -nt "$library" ]; }; then
        library="$candidate"
    fi
done
if [ -n "$needs_verbs" ] && { [ ! -x "$run" ] || [ -z "$library" ]; }; then
    echo "vm: no uwarp-run or libuwarp_verbs.so in $bin (cargo build -p uwarp-verbs)" >&2; exit 1
fi

net=10.88.0 bridge=uwvm0
log="$cache/log"
work="$cache/pci"
mkdir -p "$log" "$work"

# One run at a time: the bridge and taps have fixed names.
exec {lock}>"$log/$bridge.lock"
flock -w "$timeout" "$lock" || { echo "vm: $bridge stays busy" >&2; exit 1; }

log_step() { echo "vm [${SECONDS}s]: $*" >&2; }
fail() { echo "vm: failed: $*"; exit 1; }

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
install -m 0755 "$here/side.sh" "$overlay/usr/bin/uwvm-side"
binaries=()
if [ -n "$needs_perf" ]; then
    strip --strip-debug -o "$overlay/usr/bin/uwarp-perf" "$perf"
    binaries+=("$perf")
fi
if [ -n "$needs_verbs" ]; then
    # The installed layout uwarp-run looks for: PREFIX/lib/uwarp/ beside
    # PREFIX/bin/.
    mkdir -p "$overlay/usr/lib/uwarp"
    strip --strip-debug -o "$overlay/usr/bin/uwarp-run" "$run"
    strip --strip-debug -o "$overlay/usr/lib/uwarp/libuwarp_verbs.so" "$library"
    binaries+=("$run" "$library")
fi
pmds=(librte_mempool_ring librte_net_virtio librte_net_e1000)
for pmd in "${pmds[@]}"; do
    cp -L "/usr/lib/x86_64-linux-gnu/$pmd.so.23" "$overlay/usr/lib/dpdk-pmds/$pmd.so"
done
for file in "${binaries[@]}" "$overlay"/usr/lib/dpdk-pmds/*.so; do
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

taps=(uwvm-ak uwvm-av uwvm-ae uwvm-bk uwvm-bv uwvm-be)
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

# Boots VM $1 (a or b; $2 its number) with the shell line $3, in the
# background; its output goes to $work/$1.out.
boot() {
    local name="$1" n="$2" line="$3" tap
    ip tuntap add dev "uwvm-${name}k" mode tap
    ip tuntap add dev "uwvm-${name}v" mode tap multi_queue
    ip tuntap add dev "uwvm-${name}e" mode tap
    for tap in k v e; do
        ip link set "uwvm-$name$tap" master "$bridge" up
    done
    local append="console=ttyS0 panic=-1 intel_iommu=on hugepages=192"
    append+=" uwsiw.ip=$net.$((n + 1))/24 uwsiw.vfio=0000:00:04.0,0000:00:05.0 uwsiw.siw="
    append+=" uwsiw.cmd=$(printf '%s' "$line" | gzip -9n | base64 -w0)"
    : > "$work/$name.out"
    timeout "$timeout" qemu-system-x86_64 -machine q35 -accel "$accel" -cpu max -m 1024 -smp 2 \
        -nodefaults -display none -no-reboot -pidfile "$work/qemu-$name.pid" \
        -device intel-iommu,intremap=off,aw-bits=48 \
        -kernel "$out/vmlinuz" -initrd "$work/initramfs.cpio.gz" -append "$append" \
        -netdev "tap,id=k0,ifname=uwvm-${name}k,script=no,downscript=no" \
        -device "virtio-net-pci,netdev=k0,addr=0x3,mac=52:54:00:88:0$n:03,event_idx=off" \
        -netdev "tap,id=v0,ifname=uwvm-${name}v,script=no,downscript=no,queues=2,vhost=off" \
        -device "virtio-net-pci,netdev=v0,addr=0x4,mac=52:54:00:88:0$n:04,disable-legacy=on,iommu_platform=on,mq=on,rss=on,hash=on,vectors=6" \
        -netdev "tap,id=e0,ifname=uwvm-${name}e,script=no,downscript=no" \
        -device "e1000e,netdev=e0,addr=0x5,mac=52:54:00:88:0$n:05" \
        -serial "file:$log/vm-console-$name.log" \
        -chardev "file,id=out,path=$work/$name.out" -serial chardev:out \
        < /dev/null > "$work/qemu-$name.log" 2>&1 &
}

log_step "booting VMs a (server) and b (client), $accel: ${scenarios[*]}"
boot a 1 "uwvm-side server ${specs[*]}"
pid_a=$!
boot b 2 "uwvm-side client ${specs[*]}"
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
    tr -d '\r' < "$work/$name.out" | sed "s/^/$name: /"
done

for name in a b; do
    status="$(status_of "$name")"
    if ! grep -q '^uwsiw: ready' "$work/$name.out"; then
        [ "$status" != 125 ] || fail "VM $name did not set up (above)"
        fail "VM $name did not boot (see $log/vm-console-$name.log and $work/qemu-$name.log)"
    fi
done
# kernel-tcp's digests: what the kernel received against what uwarp's
# source sent, what the kernel sent against what uwarp's sink received.
compare_digests() {
    local got
    got="$(tr -d '\r' < "$work/a.out")"
    local kernel_received kernel_sent uwarp_sent uwarp_received
    kernel_received="$(sed -n 's/^uwvm: kernel received //p' <<< "$got")"
    kernel_sent="$(sed -n 's/^uwvm: kernel sent //p' <<< "$got")"
    got="$(tr -d '\r' < "$work/b.out")"
    # The source's last attempt and the sink's (an attempt the kernel's
    # nc refused, not listening yet, reports the digests of nothing).
    uwarp_sent="$(awk '/^source /{s=1} /^sink /{s=0} s && /^  sha256 sent/{d=$3} END{print d}' <<< "$got")"
    uwarp_received="$(awk '/^sink /{k=1} k && /^  sha256 received/{d=$3} END{print d}' <<< "$got")"
    if [ -z "$kernel_received" ] || [ "$kernel_received" != "$uwarp_sent" ]; then
        echo "vm: kernel-tcp: failed: uwarp sent SHA-256 ${uwarp_sent:-none}, the kernel received ${kernel_received:-none}"
        return 1
    fi
    if [ -z "$kernel_sent" ] || [ "$kernel_sent" != "$uwarp_received" ]; then
        echo "vm: kernel-tcp: failed: the kernel sent SHA-256 ${kernel_sent:-none}, uwarp received ${uwarp_received:-none}"
        return 1
    fi
    echo "vm: kernel-tcp: SHA-256 equal both ways ($uwarp_sent, $kernel_sent)"
}

# Each scenario: both sides' verdicts, in turn.
for scenario in "${scenarios[@]}"; do
    server="$(sed -n "s/^uwvm: $scenario server rc=\([0-9]*\).*/\1/p" "$work/a.out")"
    client="$(sed -n "s/^uwvm: $scenario client rc=\([0-9]*\).*/\1/p" "$work/b.out")"
    if [ "$server" = 0 ] && [ "$client" = 0 ]; then
        if [ "$scenario" = kernel-tcp ]; then
            compare_digests || exit 1
        fi
        echo "vm: $scenario: passed"
        continue
    fi
    why="the server exited ${server:-no status} and the client ${client:-no status}"
    [ -n "$(status_of a)" ] && [ -n "$(status_of b)" ] || why+=" (stopped: one side failed, or $timeout s passed)"
    echo "vm: $scenario: failed: $why"
    exit 1
done
