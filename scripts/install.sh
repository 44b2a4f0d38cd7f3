#!/usr/bin/env bash
# Installs uwarp's drop-in RDMA libraries, `uwarp-run` and `uwarpd` (the
# service that shares an interface beside the kernel among processes)
# outside the build tree, for users who want them there:
#
#   PREFIX/bin/uwarp-run
#   PREFIX/bin/uwarpd (when built; scripts/uwarpd@.service runs it)
#   PREFIX/lib/uwarp/libuwarp_verbs.so
#   PREFIX/lib/uwarp/uwarp-libs/{libibverbs.so.1,librdmacm.so.1} -> ../libuwarp_verbs.so
#
# `uwarp-run` finds the library there by itself; programs started by hand
# need LD_LIBRARY_PATH=PREFIX/lib/uwarp/uwarp-libs. Nothing else on the
# system changes: rdma-core's own libraries stay where they are.
#
# Usage: scripts/install.sh [--from DIR] [PREFIX]   PREFIX defaults to /usr/local
# Builds the release binaries first (cargo build --release -p uwarp-verbs
# -p uwarp-service),
# or installs those already built in DIR (e.g. target/debug) with --from.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n 's/^# \{0,1\}//;2,18p' "$0"; exit "$1"; }

from=""
case "${1:-}" in
-h|--help) usage 0 ;;
--from) [ $# -ge 2 ] || usage 2; from="$2"; shift 2 ;;
esac
[ $# -le 1 ] || usage 2
prefix="${1:-/usr/local}"

if [ -z "$from" ]; then
    cargo build --release -p uwarp-verbs -p uwarp-service
    from="${CARGO_TARGET_DIR:-target}/release"
fi
library="$from/libuwarp_verbs.so"
[ -f "$library" ] || library="$from/deps/libuwarp_verbs.so"
for built in "$from/uwarp-run" "$library"; do
    [ -f "$built" ] || { echo "install.sh: no $built (build it: cargo build --release -p uwarp-verbs)" >&2; exit 1; }
done

install -d "$prefix/bin" "$prefix/lib/uwarp/uwarp-libs"
install -m 0755 "$from/uwarp-run" "$prefix/bin/uwarp-run"
install -m 0755 "$library" "$prefix/lib/uwarp/libuwarp_verbs.so"
if [ -f "$from/uwarpd" ]; then
    install -m 0755 "$from/uwarpd" "$prefix/bin/uwarpd"
fi
lib="$(cd "$prefix/lib/uwarp" && pwd -P)/libuwarp_verbs.so"
for name in libibverbs.so.1 librdmacm.so.1; do
    ln -sfn "$lib" "$prefix/lib/uwarp/uwarp-libs/$name"
done
echo "install.sh: installed $prefix/bin/uwarp-run and $prefix/lib/uwarp/ (run: $prefix/bin/uwarp-run ibv_devinfo)"
