#!/usr/bin/env bash
# What the C ABI costs: Debian's unmodified perftest on uwarp's drop-in
# libraries against uwarp-perf's own two-host modes, side by side in one
# run, on the same link: two processes joined by net_memif (uwarp's TCP on
# DPDK), then the same perftest tools on the socket transport (loopback).
#
#   ib_write_bw -R -s 65536        vs  uwarp-perf write-bw -s 65536
#   ib_write_lat -R -s 8           vs  uwarp-perf write-lat -s 8
#
# The drop-in runs each process's cores on threads of their own (a C
# program may spin on memory and never call the library); uwarp-perf runs
# them so too here (`--cpus`, the same placement for both: the control
# core on CPU CONTROL, the dataplane core on CPU DATAPLANE): once with
# its measuring thread waiting its own way (sleeping for completions,
# yielding between polls), once spinning as perftest does (`--spin`),
# the like-for-like comparison of the C ABI; and once more inline on its
# measuring thread, its own default, for reference.
#
# Usage: scripts/bench-verbs.sh [ITERATIONS [CONTROL,DATAPLANE]]
#        (as root; defaults 20000 and 0,1)
# Builds the release binaries first. Prints each tool's result line.
set -euo pipefail
cd "$(dirname "$0")/.."

iters="${1:-20000}"
cpus="${2:-0,1}"
case "$iters" in
-h|--help) sed -n 's/^# \{0,1\}//;2,21p' "$0"; exit 0 ;;
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

# uwarp-perf's two-host mode $mode, one side, with "${placement[@]}".
uwarp_perf_side() {
    if [ "$1" = server ]; then
        "$bin/uwarp-perf" "$mode" --server -p "$port" --transport dpdk --eal "--vdev $2" \
            --ip 10.82.0.1/24 "${placement[@]}" >/dev/null
    else
        "$bin/uwarp-perf" "$mode" --connect "10.82.0.1:$port" --transport dpdk --eal "--vdev $2" \
            --ip 10.82.0.2/24 -s "$size" -n "$iters" "${placement[@]}" \
            | grep -A1 -E '^ +size'
    fi
}

# Debian's $tool on uwarp's DPDK transport, one side.
perftest_side() {
    if [ "$1" = server ]; then
        "$bin/uwarp-run" --transport dpdk --eal "--vdev $2" --ip 10.82.0.1/24 --cpus "$cpus" \
            "$tool" -R -p "$port" -s "$size" -n "$iters" >/dev/null
    else
        "$bin/uwarp-run" --transport dpdk --eal "--vdev $2" --ip 10.82.0.2/24 --cpus "$cpus" \
            "$tool" -R -p "$port" -s "$size" -n "$iters" 10.82.0.1 | grep -A1 '#bytes'
    fi
}

# Debian's $tool on uwarp's socket transport over loopback; run again
# (at most three times) when perftest's client was refused between its
# server's two listens, which leaves that server waiting for good.
perftest_socket() {
    local attempt out
    for attempt in 1 2 3; do
        "$bin/uwarp-run" "$tool" -R -p "$port" -s "$size" -n "$iters" >/dev/null 2>&1 &
        local server=$!
        until ss -ltn "sport = :$port" | grep -q LISTEN; do sleep 0.05; done
        if out=$("$bin/uwarp-run" "$tool" -R -p "$port" -s "$size" -n "$iters" 127.0.0.1 2>&1); then
            grep -A1 '#bytes' <<<"$out"
            wait "$server"
            return 0
        fi
        echo "(attempt $attempt refused between perftest's two listens: again)"
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    done
    return 1
}

for run in "write-bw ib_write_bw 65536" "write-lat ib_write_lat 8"; do
    read -r mode tool size <<<"$run"
    echo "== uwarp-perf $mode -s $size (dpdk, net_memif, cores on threads: --cpus $cpus)"
    placement=(--cpus "$cpus")
    memif_pair uwarp_perf_side
    echo "== uwarp-perf $mode -s $size (dpdk, net_memif, --cpus $cpus, spinning as perftest: --spin)"
    placement=(--cpus "$cpus" --spin)
    memif_pair uwarp_perf_side
    echo "== uwarp-perf $mode -s $size (dpdk, net_memif, cores inline: uwarp-perf's default)"
    placement=()
    memif_pair uwarp_perf_side
    echo "== $tool -R -s $size (uwarp-run, dpdk, net_memif, --cpus $cpus)"
    memif_pair perftest_side
    echo "== $tool -R -s $size (uwarp-run, socket, loopback)"
    perftest_socket
done
