#!/bin/sh
# One side of the PCI VMs' scenarios, run inside a VM (run.sh copies it
# into the guests as /usr/bin/uwvm-side; busybox sh).
#
# Usage: uwvm-side server|client SCENARIO...
# SCENARIO: NAME,PCI,MODE,CORES,SIZE,ITERS,QPS,VARIANT, e.g.
#   virtio-write-bw,0000:00:04.0,write-bw,1,65536,200,1,plain
# (VARIANT zero-copy: both sides send payloads of 1024 octets and more
# from registered memory by reference and lose 1% of what they receive).
#
# Runs the scenarios in turn on uwarp on the NIC at PCI (VM a is the
# "server" side, VM b the "client" side; PCI "none" for the baselines
# below). A uwarp-perf MODE: the server
# listens at SERVER_IP; the client waits until uwarp answers ARP for it
# (its port is up; it listens right after), then connects, again while
# the server refuses (not listening yet), at most 10 times. MODE siw-rping:
# Debian's rping, ITERS pings of SIZE octets checked (-V), on uwarp's
# drop-in libraries over DPDK in VM b (uwarp-run) against Debian's rping
# on siw in VM a (eth0, KERNEL_IP), siw serving first, then uwarp. MODE
# kernel-tcp: SIZE octets each way between uwarp's TCP in VM b
# (uwarp-perf tcp) and VM a's kernel TCP (nc); each side prints the
# SHA-256 of what it sent and received ("uwvm: kernel sent|received HEX"
# in VM a), which run.sh compares. MODE siw-perftest: Debian's
# ib_write_bw -R, ITERS messages of SIZE octets, on uwarp's drop-in
# libraries in VM b against siw's in VM a (see siw_perftest_drop_in).
# MODE socket-M: uwarp-perf's mode M on
# uwarp's socket transport over the kernel NICs, served at KERNEL_IP.
# MODE siw-M: perftest's tool for M (ib_write_bw for write-bw, ...) with
# -R on siw in both VMs, served at KERNEL_IP.
# Prints "uwvm-took: NAME ROLE SECONDS" (wall clock, from /proc/uptime:
# perftest's own clock is not to be trusted under TCG) and "uwvm: NAME
# ROLE rc=STATUS" after each and stops at the first failure (the other
# side would wait for it), with that status.

SERVER_IP=10.88.0.12
CLIENT_IP=10.88.0.13
KERNEL_IP=10.88.0.2
PORT=18515
PMDS=/usr/lib/dpdk-pmds
# The longest any one program may run (a few seconds is usual under TCG):
# a hang fails its scenario with status 124, its output shown.
LIMIT=120

# busybox's sh has pipefail: a status survives `| tee`.
# shellcheck disable=SC3040
set -o pipefail
role="$1"
shift

# Waits until something answers ARP for address $1 (at most 2 minutes).
await_arp() {
    n=0
    until arping -q -c 1 -w 2 -I eth0 "$1"; do
        n=$((n + 1))
        [ "$n" -lt 60 ] || { echo "uwvm: nothing answered ARP for $1"; return 1; }
    done
}

# Runs the command line "$@" (its output shown and kept in /tmp/side.out),
# again while it says $RETRY_WHILE (the server is not listening yet), at most 10 times;
# returns its status.
retried() {
    n=0
    while :; do
        n=$((n + 1))
        "$@" 2>&1 | tee /tmp/side.out
        rc=$?
        if ! grep -q "$RETRY_WHILE" /tmp/side.out || [ "$n" -ge 10 ]; then
            return "$rc"
        fi
        sleep 1
    done
}

# Debian's program "$@" on uwarp's drop-in libraries over DPDK on the NIC
# at $pci, uwarp's address $UWARP_IP, saying which device it opened and
# the PMD that probed the NIC; a client holds its first FPDU back after
# the MPA Reply (siw's accept race, docs/siw-interop.md).
on_uwarp() {
    timeout "$LIMIT" uwarp-run --transport dpdk --eal "-a $pci -d $PMDS --log-level=info" \
        --ip "$UWARP_IP/24" --log info --first-fpdu-delay-ms 200 "$@"
}

# Whether the rping run whose output is /tmp/side.out and status $1 went
# well: exit 0, or 255 right after rping's own exit race (its CM thread
# finds the event channel closed as it exits); with $2, that many pings
# printed (-v).
rping_ok() {
    if [ "$1" -ne 0 ]; then
        [ "$1" -eq 255 ] && grep -q 'rdma_get_cm_event: Bad file descriptor' /tmp/side.out \
            || return 1
    fi
    ! grep -q 'data mismatch' /tmp/side.out || return 1
    [ -z "$2" ] || [ "$(grep -c '^ping data: rdma-ping-' /tmp/side.out)" -eq "$2" ]
}

# One side of siw-rping: siw's server and uwarp's client, then uwarp's
# server and siw's client.
siw_rping() {
    RETRY_WHILE='REJECTED\|refused\|unreachable'
    case "$role" in
    server)
        timeout "$LIMIT" rping -s -a "$KERNEL_IP" -C "$iters" -S "$size" -V 2>&1 | tee /tmp/side.out
        rping_ok "$?" || return 1
        await_arp "$CLIENT_IP" || return 1
        retried timeout "$LIMIT" rping -c -a "$CLIENT_IP" -C "$iters" -S "$size" -V -v
        rping_ok "$?" "$iters" ;;
    client)
        UWARP_IP=$CLIENT_IP
        retried on_uwarp rping -c -a "$KERNEL_IP" -C "$iters" -S "$size" -V -v
        rping_ok "$?" "$iters" || return 1
        on_uwarp rping -s -a "$CLIENT_IP" -C "$iters" -S "$size" -V 2>&1 | tee /tmp/side.out
        rping_ok "$?" ;;
    esac
}

# Ports on the kernel NICs for siw-perftest's two messages: "ready" to
# VM b (siw's server listens), the verdict to VM a.
READY_PORT=5301
VERDICT_PORT=5300
CLIENT_KERNEL_IP=10.88.0.3

# Sends the line $3 to port $2 of $1, again while nothing listens there
# yet (at most 2 minutes).
tell() {
    n=0
    until echo "$3" | nc "$1" "$2"; do
        n=$((n + 1))
        [ "$n" -lt 600 ] || return 1
        sleep 0.2
    done
}

# The line the next peer sends to port $1, within the time limit.
heard() {
    timeout "$LIMIT" nc -l -p "$1" < /dev/null
}

# One side of siw-perftest: siw's ib_write_bw server in VM a, uwarp's
# client in VM b. perftest's server listens twice, and a client that comes
# between the two is refused (RDMA_CM_EVENT_REJECTED) and cannot retry in
# the same run, while the server waits for it for good. So the server's
# side says "ready" once siw listens (its port in /proc/net/tcp), the
# client says whether it was refused, and a refused run starts again, at
# most 3 times.
siw_perftest_drop_in() {
    opts="-R -F -p $PORT -s $size -n $iters"
    n=0
    while [ "$n" -lt 3 ]; do
        n=$((n + 1))
        case "$role" in
        server)
            # shellcheck disable=SC2086
            ib_write_bw $opts > /tmp/side.out 2>&1 &
            p=$!
            hex=$(printf '%04X' "$PORT")
            until grep -q ":$hex 00000000:0000 0A" /proc/net/tcp || ! kill -0 "$p" 2>/dev/null; do
                sleep 0.1
            done
            tell "$CLIENT_KERNEL_IP" "$READY_PORT" ready || return 1
            verdict=$(heard "$VERDICT_PORT")
            if [ "$verdict" = refused ]; then
                kill "$p"
                wait "$p"
                echo "uwvm: siw's server run $n stopped: uwarp's client came between its listens"
                continue
            fi
            timeout "$LIMIT" sh -c "while kill -0 $p 2>/dev/null; do sleep 0.2; done" || kill "$p"
            wait "$p"
            rc=$?
            cat /tmp/side.out
            return "$rc" ;;
        client)
            UWARP_IP=$CLIENT_IP
            [ "$(heard "$READY_PORT")" = ready ] || return 1
            # shellcheck disable=SC2086
            on_uwarp ib_write_bw $opts "$KERNEL_IP" 2>&1 | tee /tmp/side.out
            rc=$?
            if grep -q RDMA_CM_EVENT_REJECTED /tmp/side.out; then
                tell "$KERNEL_IP" "$VERDICT_PORT" refused || return 1
                continue
            fi
            tell "$KERNEL_IP" "$VERDICT_PORT" served || return 1
            return "$rc" ;;
        esac
    done
    echo "uwvm: uwarp's ib_write_bw client refused 3 times"
    return 1
}

# One side of kernel-tcp: the kernel receives, then sends; uwarp sends,
# then receives. busybox's nc half-closes when its input ends, and ends
# when the peer closes.
kernel_tcp() {
    RETRY_WHILE='reset: sent 0 B, received 0 B'
    case "$role" in
    server)
        timeout "$LIMIT" nc -l -p 5201 < /dev/null | sha256sum > /tmp/sum || return 1
        echo "uwvm: kernel received $(cut -d' ' -f1 /tmp/sum)"
        mkfifo /tmp/sent
        sha256sum < /tmp/sent > /tmp/sum &
        head -c "$size" /dev/urandom | tee /tmp/sent | timeout "$LIMIT" nc -l -p 5202 > /dev/null \
            || return 1
        wait
        echo "uwvm: kernel sent $(cut -d' ' -f1 /tmp/sum)" ;;
    client)
        set -- --eal "-a $pci -d $PMDS" --ip "$CLIENT_IP/24"
        retried timeout "$LIMIT" uwarp-perf tcp --role source --bytes "$size" \
            --connect "$KERNEL_IP:5201" "$@" || return 1
        retried timeout "$LIMIT" uwarp-perf tcp --role sink --connect "$KERNEL_IP:5202" "$@" ;;
    esac
}

# One side of socket-M: uwarp-perf's mode M over the kernel's TCP.
socket_perf() {
    m="${mode#socket-}"
    case "$role" in
    server)
        timeout "$LIMIT" uwarp-perf "$m" --server --port "$PORT" --transport socket \
            --ip "$KERNEL_IP" 2>&1 ;;
    client)
        RETRY_WHILE='refused the connection'
        # shellcheck disable=SC2086
        retried timeout "$LIMIT" uwarp-perf "$m" --connect "$KERNEL_IP:$PORT" --transport socket \
            $extra ;;
    esac
}

# One side of siw-M: perftest's tool for mode M on siw, rdma_cm (-R).
siw_perftest() {
    m="${mode#siw-}"
    tool="ib_$(echo "$m" | tr - _)"
    # perftest's own options: -s, -n, and -q for the bandwidth tools.
    opts="-R -F -p $PORT -s $size -n $iters"
    case "$m" in *-bw) opts="$opts -q $qps" ;; esac
    case "$role" in
    server)
        # shellcheck disable=SC2086
        timeout "$LIMIT" "$tool" $opts 2>&1 ;;
    client)
        # Not listening yet: rdma_cm's connection is rejected.
        RETRY_WHILE='Unable to perform rdma_client function'
        # shellcheck disable=SC2086
        retried timeout "$LIMIT" "$tool" $opts "$KERNEL_IP" ;;
    esac
}

# uwarp-perf's client, after the server's ARP answer, retried while refused.
connect() {
    await_arp "$SERVER_IP" || return 1
    RETRY_WHILE='refused the connection'
    # $extra is several options; the word splitting is wanted.
    # shellcheck disable=SC2086
    retried timeout "$LIMIT" uwarp-perf "$mode" --connect "$SERVER_IP:$PORT" --eal "-a $pci -d $PMDS" \
        --ip "$CLIENT_IP/24" --cores "$cores" $extra $both
}

for scenario in "$@"; do
    IFS=, read -r name pci mode cores size iters qps variant <<EOF
$scenario
EOF
    extra="-s $size -n $iters"
    case "$mode" in *-bw) extra="$extra -q $qps" ;; esac
    # Options of both sides.
    both=""
    if [ "$variant" = zero-copy ]; then
        both="--payloads-by-reference --zero-copy-from 1024 --impair-rx loss=0.01"
    fi
    started=$(cut -d' ' -f1 /proc/uptime)
    case "$mode,$role" in
    siw-rping,server|siw-rping,client) siw_rping ;;
    siw-perftest,*) siw_perftest_drop_in ;;
    kernel-tcp,server|kernel-tcp,client) kernel_tcp ;;
    socket-*) socket_perf ;;
    siw-*) siw_perftest ;;
    *,server)
        # shellcheck disable=SC2086
        timeout "$LIMIT" uwarp-perf "$mode" --server --port "$PORT" --eal "-a $pci -d $PMDS" \
            --ip "$SERVER_IP/24" --cores "$cores" $both 2>&1 ;;
    *,client) connect ;;
    *) echo "uwvm: no role $role"; exit 2 ;;
    esac
    rc=$?
    echo "uwvm-took: $name $role $(awk -v from="$started" '{printf "%.2f", $1 - from}' /proc/uptime)"
    echo "uwvm: $name $role rc=$rc"
    [ "$rc" -eq 0 ] || exit "$rc"
done
