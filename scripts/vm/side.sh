#!/bin/sh
# One side of the PCI VMs' scenarios, run inside a VM (run.sh copies it
# into the guests as /usr/bin/uwvm-side; busybox sh).
#
# Usage: uwvm-side server|client SCENARIO...
# SCENARIO: NAME,PCI,MODE,CORES,SIZE,ITERS,QPS, e.g.
#   virtio-write-bw,0000:00:04.0,write-bw,1,65536,200,1
#
# Runs the scenarios in turn with uwarp-perf on the NIC at PCI: the
# server listens at SERVER_IP; the client waits until uwarp answers ARP
# for it (its port is up; it listens right after), then connects, again
# while the server refuses (not listening yet), at most 5 times. Prints
# "uwvm: NAME ROLE rc=STATUS" after each and stops at the first failure
# (the other side would wait for it), with that status.

SERVER_IP=10.88.0.12
CLIENT_IP=10.88.0.13
PORT=18515
PMDS=/usr/lib/dpdk-pmds

role="$1"
shift

# uwarp-perf's client, after the server's ARP answer, retried while refused.
connect() {
    n=0
    until arping -q -c 1 -w 2 -I eth0 "$SERVER_IP"; do
        n=$((n + 1))
        [ "$n" -lt 60 ] || { echo "uwvm: the server never answered ARP"; return 1; }
    done
    n=0
    while :; do
        n=$((n + 1))
        # $extra is several options; the word splitting is wanted.
        # shellcheck disable=SC2086
        uwarp-perf "$mode" --connect "$SERVER_IP:$PORT" --eal "-a $pci -d $PMDS" \
            --ip "$CLIENT_IP/24" --cores "$cores" $extra > /tmp/client.out 2>&1
        rc=$?
        cat /tmp/client.out
        if ! grep -q 'refused the connection' /tmp/client.out || [ "$n" -ge 5 ]; then
            return "$rc"
        fi
        sleep 1
    done
}

for scenario in "$@"; do
    IFS=, read -r name pci mode cores size iters qps <<EOF
$scenario
EOF
    extra="-s $size -n $iters"
    case "$mode" in *-bw) extra="$extra -q $qps" ;; esac
    case "$role" in
    server)
        uwarp-perf "$mode" --server --port "$PORT" --eal "-a $pci -d $PMDS" \
            --ip "$SERVER_IP/24" --cores "$cores" 2>&1 ;;
    client) connect ;;
    *) echo "uwvm: no role $role"; exit 2 ;;
    esac
    rc=$?
    echo "uwvm: $name $role rc=$rc"
    [ "$rc" -eq 0 ] || exit "$rc"
done
