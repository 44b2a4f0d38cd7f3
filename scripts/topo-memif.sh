#!/usr/bin/env bash
# A memif link between two uwarp processes. memif needs no kernel
# interface: one process is the server, the other the client, and they
# meet on a Unix socket. This script prints the --vdev argument of each
# side and removes the socket afterwards.
#
# Usage: scripts/topo-memif.sh up SOCKET     prints "SERVER_VDEV CLIENT_VDEV"
#        scripts/topo-memif.sh down SOCKET   removes the socket file
#
# e.g.   read -r server client < <(scripts/topo-memif.sh up /run/uwarp/memif0.sock)
#        uwarp-perf ... --eal "--vdev $server" &   uwarp-perf ... --eal "--vdev $client"
#
# The socket is a file (socket-abstract=no) so that `down` can clean it up;
# the two sides get distinct MAC addresses (memif's default is one for all);
# either side may start first: the client retries until the server listens.
set -euo pipefail

usage() { sed -n 's/^# \{0,1\}//;2,15p' "$0" >&2; exit 2; }

case "${1:-}" in
up)
    [ $# -eq 2 ] || usage
    sock="$2"
    mkdir -p "$(dirname "$sock")"
    rm -f "$sock"
    echo "net_memif0,role=server,socket=$sock,socket-abstract=no,mac=02:fe:00:00:00:01" \
         "net_memif0,role=client,socket=$sock,socket-abstract=no,mac=02:fe:00:00:00:02"
    ;;
down)
    [ $# -eq 2 ] || usage
    rm -f "$2"
    ;;
*) usage ;;
esac
