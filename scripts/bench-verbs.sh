#!/usr/bin/env bash
# What the C ABI costs: Debian's unmodified perftest on uwarp's drop-in
# libraries against uwarp-perf's own two-host modes, side by side in one
# run, on the same link: two processes joined by net_memif (uwarp's TCP on
# DPDK), then the same perftest tools on the socket transport (loopback).
#
#   ib_write_bw -R -s 65536        vs  uwarp-perf write-bw -s 65536
#   ib_write_lat -R -s 8           vs  uwarp-perf write-lat -s 8
#
# Usage: scripts/bench-verbs.sh [ITERATIONS]   (as root; default 20000)
# Builds the release binaries first. Prints each tool's result line.
set -euo pipefail
cd "$(dirname "$0")/.."

iters="${1:-20000}"
case "$iters" in
-h|--help) sed -n 's/^# \{0,1\}//;2,12p' "$0"; exit 0 ;;
esac

cargo build --release -q -p uwarp-verbs -p uwarp-bench
bin="${CARGO_TARGET_DIR:-target}/release"
sock=/run/uwarp/bench-verbs.sock
port=18615
trap 'scripts/topo-memif.sh down "$sock"; kill $(jobs -p) 2>/dev/null || true' EXIT

# Runs `$1 server SERVER_VDEV` in the background, then `$1 client
# CLIENT_VDEV`, on a fresh memif link.
memif_pair() {
    local side="$1" server client
    read -r server client < <(scripts/topo-memif.sh up "$sock")
    "$side" server "$server" &
    sleep 2
    "$side" client "$client"
    wait
}

# uwarp-perf's two-host mode $mode, one side.
uwarp_perf_side() {
    if [ "$1" = server ]; then
        "$bin/uwarp-perf" "$mode" --server -p "$port" --transport dpdk --eal "--vdev $2" \
            --ip 10.82.0.1/24 >/dev/null
    else
        "$bin/uwarp-perf" "$mode" --connect "10.82.0.1:$port" --transport dpdk --eal "--vdev $2" \
            --ip 10.82.0.2/24 -s "$size" -n "$iters"
    fi
}

# Debian's $tool on uwarp's DPDK transport, one side.
perftest_side() {
    if [ "$1" = server ]; then
        "$bin/uwarp-run" --transport dpdk --eal "--vdev $2" --ip 10.82.0.1/24 \
            "$tool" -R -p "$port" -s "$size" -n "$iters" >/dev/null
    else
        "$bin/uwarp-run" --transport dpdk --eal "--vdev $2" --ip 10.82.0.2/24 \
            "$tool" -R -p "$port" -s "$size" -n "$iters" 10.82.0.1 | grep -A1 '#bytes'
    fi
}

# Debian's $tool on uwarp's socket transport over loopback.
perftest_socket() {
    "$bin/uwarp-run" "$tool" -R -p "$port" -s "$size" -n "$iters" >/dev/null &
    sleep 1
    "$bin/uwarp-run" "$tool" -R -p "$port" -s "$size" -n "$iters" 127.0.0.1 | grep -A1 '#bytes'
    wait
}

for run in "write-bw ib_write_bw 65536" "write-lat ib_write_lat 8"; do
    read -r mode tool size <<<"$run"
    echo "== uwarp-perf $mode -s $size (dpdk, net_memif)"
    memif_pair uwarp_perf_side
    echo "== $tool -R -s $size (uwarp-run, dpdk, net_memif)"
    memif_pair perftest_side
    echo "== $tool -R -s $size (uwarp-run, socket, loopback)"
    perftest_socket
done
