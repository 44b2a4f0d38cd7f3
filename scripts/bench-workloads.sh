#!/usr/bin/env bash
# The real workloads on uwarp's drop-ins beside the same workloads on the
# kernel's TCP, in the same minutes, each pair alternated (which one runs
# first swaps every round), over loopback on the socket transport:
#
#   fi_pingpong -e msg -p verbs (uwarp)   vs  -p tcp (libfabric's TCP provider)
#   NPopenmpi, pml cm + mtl ofi "verbs;ofi_rxm" (uwarp)  vs  pml ob1 + btl tcp
#   iscsi-perf on iser:// (tgtd --iser, uwarp)  vs  iscsi:// (the same tgtd's TCP portal),
#     reads of 64 KiB and 256 KiB (libiscsi 1.19's iSER takes no more)
#   rstream on rsockets (uwarp)           vs  rstream -T s (plain sockets)
#
# at 64 octets (latency: microseconds per transfer, or per round trip for
# fi_pingpong and NetPIPE as they report it) and at 64 KiB and 1 MiB
# (bandwidth). Each line: the workload, the size, what uwarp measured,
# what the kernel's path measured, and uwarp/kernel (for times, kernel/
# uwarp: above 1 means uwarp is faster). A benchmark, not a test: run it
# on a quiet machine (nothing else busy), as root (tgtd).
#
# Usage: scripts/bench-workloads.sh [ROUNDS]   (default 3)
# Builds the release drop-ins first; raw outputs go to a temporary folder
# whose name is printed.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-3}"
case "$rounds" in
-h|--help) sed -n 's/^# \{0,1\}//;2,21p' "$0"; exit 0 ;;
esac

cargo build --release -q -p uwarp-verbs
run="${CARGO_TARGET_DIR:-$PWD/target}/release/uwarp-run"
work=$(mktemp -d /tmp/bench-workloads.XXXXXX)
echo "bench-workloads: raw outputs in $work"
tgtd_group=
cleanup() {
    # tgtd ignores SIGTERM, and runs as uwarp-run's child: its session
    # goes whole.
    if [ -n "$tgtd_group" ]; then kill -KILL -- "-$tgtd_group" 2>/dev/null || true; fi
    local jobs
    mapfile -t jobs < <(jobs -p)
    if [ "${#jobs[@]}" -gt 0 ]; then kill "${jobs[@]}" 2>/dev/null || true; fi
}
trap cleanup EXIT

# A TCP port nothing on loopback listens on, below 32768 (tgt keeps its
# iSER port in a short).
free_port() {
    local port
    for port in $(shuf -i 20000-30000 -n 50); do
        if ! ss -Htln "sport = :$port" | grep -q .; then
            echo "$port"
            return
        fi
    done
    echo "bench-workloads: no free port" >&2
    exit 1
}

# Waits until something listens on TCP port $1 (5 s at most).
wait_listening() {
    local tries
    for tries in $(seq 50); do
        ss -Htln "sport = :$1" | grep -q . && return
        sleep 0.1
    done
    echo "bench-workloads: nothing listens on $1 after $tries tries" >&2
}

# Prints "$1 $2 uwarp=$3 kernel=$4 ratio" where ratio compares them as
# $5 says: "rate" (uwarp/kernel) or "time" (kernel/uwarp).
report() {
    awk -v what="$1" -v size="$2" -v u="$3" -v k="$4" -v kind="$5" 'BEGIN {
        r = (kind == "rate") ? (k > 0 ? u / k : 0) : (u > 0 ? k / u : 0)
        printf "%-12s %8s  uwarp %10.2f  kernel %10.2f  %s %.2f\n", what, size, u, k,
            (kind == "rate" ? "uwarp/kernel" : "kernel/uwarp (time)"), r }'
}

# report for ${got[$3_uwarp]} and ${got[$3_kernel]}, each's field $4
# (space-separated): $1 the workload, $2 the size, $5 as for report.
report_field() {
    report "$1" "$2" "$(cut -d' ' -f"$4" <<<"${got[$3_uwarp]}")" \
        "$(cut -d' ' -f"$4" <<<"${got[$3_kernel]}")" "$5"
}

# fi_pingpong between two processes; $1 "uwarp" or "kernel", $2 size,
# $3 iterations. Prints "MB/sec usec/xfer" of the client.
pingpong() {
    local who=$1 size=$2 iters=$3 port prefix=() provider=tcp
    port=$(free_port)
    if [ "$who" = uwarp ]; then prefix=("$run"); provider=verbs; fi
    "${prefix[@]}" fi_pingpong -p "$provider" -e msg -S "$size" -I "$iters" -B "$port" \
        >"$work/pingpong-server-$who.out" 2>&1 &
    local server=$!
    wait_listening "$port"
    "${prefix[@]}" fi_pingpong -p "$provider" -e msg -S "$size" -I "$iters" -P "$port" 127.0.0.1 \
        >"$work/pingpong-$who-$size.out" 2>&1
    wait "$server"
    # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    awk '$1 == "bytes" { getline; print $6, $7; exit }' "$work/pingpong-$who-$size.out"
}

# NetPIPE between two ranks up to 1 MiB; $1 "uwarp" or "kernel". Leaves
# its report in $work/netpipe-$1.out.
netpipe() {
    local who=$1
    local common=(--allow-run-as-root --oversubscribe -np 2)
    local dir="$work/netpipe-$who"
    mkdir -p "$dir"
    if [ "$who" = uwarp ]; then
        (cd "$dir" && timeout 300 "$run" mpirun "${common[@]}" --mca pml cm --mca mtl ofi \
            --mca mtl_ofi_provider_include "verbs;ofi_rxm" --mca btl self \
            NPopenmpi -u 1048576 -n 20 -p 0 >"$work/netpipe-$who.out" 2>&1)
    else
        (cd "$dir" && timeout 300 mpirun "${common[@]}" --mca pml ob1 --mca btl self,tcp \
            --mca btl_tcp_if_include lo NPopenmpi -u 1048576 -n 20 -p 0 \
            >"$work/netpipe-$who.out" 2>&1)
    fi
}

# NetPIPE's "$2" column (Mbps, or usec) at $3 bytes from $1's report.
netpipe_at() {
    awk -v bytes="$3" -v want="$2" '$2 == bytes && $3 == "bytes" {
        for (i = 1; i <= NF; i++) { if ($i == "Mbps") mbps = $(i - 1); if ($i == "usec") usec = $(i - 1) }
        print (want == "Mbps") ? mbps : usec; exit }' "$work/netpipe-$1.out"
}

# tgtd with an iSER and a TCP portal on a file-backed LUN.
iser_target=iqn.2026-11.org.uwarp:bench
iser_initiator=iqn.2026-11.org.uwarp:bench-host
start_tgtd() {
    iser_port=$(free_port)
    tcp_port=$((iser_port + 1))
    control=$((100 + $$ % 800))
    truncate -s 256M "$work/lun.img"
    setsid "$run" tgtd -f -C "$control" --iscsi "portal=127.0.0.1:$tcp_port" \
        --iser "port=$iser_port,pool_sz_mb=64" >"$work/tgtd.out" 2>&1 &
    tgtd_group=$!
    local adm=(tgtadm -C "$control" --lld iser) tries=0
    until "${adm[@]}" --op show --mode target >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -gt 100 ]; then echo "bench-workloads: tgtd did not start" >&2; exit 1; fi
        sleep 0.1
    done
    "${adm[@]}" --op new --mode target --tid 1 -T "$iser_target"
    "${adm[@]}" --op new --mode logicalunit --tid 1 --lun 1 -b "$work/lun.img"
    "${adm[@]}" --op bind --mode target --tid 1 -I ALL
    "${adm[@]}" --op bind --mode target --tid 1 --initiator-name "$iser_initiator"
    # The TCP portal's driver keeps its own ACLs.
    local tcp=(tgtadm -C "$control" --lld iscsi)
    "${tcp[@]}" --op new --mode target --tid 2 -T "$iser_target-tcp"
    "${tcp[@]}" --op new --mode logicalunit --tid 2 --lun 1 -b "$work/lun.img"
    "${tcp[@]}" --op bind --mode target --tid 2 -I ALL
    "${tcp[@]}" --op bind --mode target --tid 2 --initiator-name "$iser_initiator"
}

# iscsi-perf for 5 s reading $2 blocks (512 octets) a request; $1
# "uwarp" or "kernel". Prints its average IOPS.
iscsi_perf() {
    local who=$1 blocks=$2 url prefix=()
    if [ "$who" = uwarp ]; then
        prefix=("$run")
        url="iser://127.0.0.1:$iser_port/$iser_target/1"
    else
        url="iscsi://127.0.0.1:$tcp_port/$iser_target-tcp/1"
    fi
    "${prefix[@]}" iscsi-perf -i "$iser_initiator" -t 5 -b "$blocks" "$url" \
        >"$work/iscsi-perf-$who-$blocks.out" 2>&1 || true
    sed -n 's/.*iops average \([0-9]*\).*/\1/p' "$work/iscsi-perf-$who-$blocks.out" | tail -1
}

# rstream of $2 octets, $3 transfers a round trip, $4 round trips; $1
# "uwarp" (rsockets) or "kernel" (-T s). Prints its "Gb/sec usec/xfer".
rstream() {
    local who=$1 size=$2 count=$3 iters=$4 port prefix=() mode=()
    port=$(free_port)
    if [ "$who" = uwarp ]; then prefix=("$run"); else mode=(-T s); fi
    "${prefix[@]}" /usr/bin/rstream "${mode[@]}" -p "$port" -S "$size" -C "$count" -I "$iters" \
        >"$work/rstream-server-$who.out" 2>&1 &
    local server=$!
    wait_listening "$port"
    "${prefix[@]}" /usr/bin/rstream "${mode[@]}" -s 127.0.0.1 -p "$port" -S "$size" \
        -C "$count" -I "$iters" >"$work/rstream-$who-$size.out" 2>&1
    wait "$server"
    # name bytes xfers iters total time Gb/sec usec/xfer
    awk 'NR > 1 && NF >= 8 { print $(NF - 1), $NF }' "$work/rstream-$who-$size.out" | tail -1
}

declare -A got
start_tgtd
for round in $(seq "$rounds"); do
    echo "--- round $round"
    order=(uwarp kernel)
    if [ $((round % 2)) -eq 0 ]; then order=(kernel uwarp); fi
    got=()
    for who in "${order[@]}"; do
        got[pp64_$who]=$(pingpong "$who" 64 10000)
        got[pp64k_$who]=$(pingpong "$who" 65536 2000)
        got[pp1m_$who]=$(pingpong "$who" 1048576 200)
        netpipe "$who"
        got[iser64k_$who]=$(iscsi_perf "$who" 128)
        got[iser256k_$who]=$(iscsi_perf "$who" 512)
        got[rs64_$who]=$(rstream "$who" 64 1 10000)
        got[rs64k_$who]=$(rstream "$who" 65536 5000 1)
        got[rs1m_$who]=$(rstream "$who" 1048576 500 1)
    done
    report_field fi_pingpong 64 pp64 2 time
    report_field fi_pingpong 64K pp64k 1 rate
    report_field fi_pingpong 1M pp1m 1 rate
    report NetPIPE 64 "$(netpipe_at uwarp usec 64)" "$(netpipe_at kernel usec 64)" time
    report NetPIPE 64K "$(netpipe_at uwarp Mbps 65536)" "$(netpipe_at kernel Mbps 65536)" rate
    report NetPIPE 1M "$(netpipe_at uwarp Mbps 1048576)" "$(netpipe_at kernel Mbps 1048576)" rate
    report_field iscsi-perf 64K iser64k 1 rate
    report_field iscsi-perf 256K iser256k 1 rate
    report_field rstream 64 rs64 2 time
    report_field rstream 64K rs64k 1 rate
    report_field rstream 1M rs1m 1 rate
done
