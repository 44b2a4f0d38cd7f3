#!/usr/bin/env bash
# CI's Miri step: the unit tests of the pure-Rust data structures the C ABI
# and the dataplane rely on, run under Miri, whose data-race detector and
# aliasing model (Stacked or Tree Borrows) see the undefined behaviour x86
# never shows: a plain store racing a read, a `&mut` or `Box` made while
# another thread holds a reference (issue 38 rows 19 to 21 were such,
# and passed every other test), and, over several schedules, a use after
# free in a window a few instructions wide (row 1). Miri interprets the
# program: it runs no foreign function (DPDK, sockets, ppoll, mprotect,
# /proc), so only the tests chosen below run, each small enough for it.
#
# Usage: scripts/miri-ci.sh
#
# Installs the pinned nightly below with miri and rust-src through rustup
# when it is missing. When it cannot (a machine that cannot reach the
# Rust toolchain server), prints one line saying Miri was skipped and why,
# and exits 0. Any Miri error or failing test exits non-zero. Builds once,
# into the workspace target's miri/ folder (Miri's own), for all three
# crates together, so that the runs below share that build; each run is
# bounded by `timeout`. Measured on CI's two cores: three minutes from
# nothing (the toolchain's download, Miri's sysroot, a clean build), a
# minute and a half of tests once built, to which the three schedules of
# row 1 add about 35 s (measured on two busy cores: 72 s before them, 106
# to 112 s with them).
set -euo pipefail
cd "$(dirname "$0")/.."

# rustc 1.97.0-nightly (e50aa6fba 2026-05-19): a newer nightly may change
# what Miri reports; move the pin deliberately.
toolchain=nightly-2026-05-20

# Whether the toolchain is there with everything Miri needs.
ready() {
    cargo "+$toolchain" miri --version >/dev/null 2>&1 &&
        [ -d "$(rustc "+$toolchain" --print sysroot)/lib/rustlib/src/rust/library" ]
}

if ! command -v rustup >/dev/null; then
    echo "miri-ci.sh: Miri SKIPPED: no rustup to install $toolchain with"
    exit 0
fi
if ! ready; then
    echo "miri-ci.sh: installing $toolchain with miri and rust-src"
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    # Bounded: an unreachable server must not hold CI up.
    if ! timeout 600 rustup toolchain install "$toolchain" --profile minimal \
        --component miri,rust-src >"$log" 2>&1 || ! ready; then
        echo "miri-ci.sh: Miri SKIPPED: $toolchain with miri and rust-src" \
            "could not be installed (is the Rust toolchain server reachable?):" \
            "$(grep -m 1 '^error' "$log" || tail -n 1 "$log")"
        exit 0
    fi
    grep ' installed - ' "$log" || true
fi

# Miri's standard library, built once per toolchain (~/.cache/miri).
cargo "+$toolchain" miri setup

# All three crates in every run, so that their features unify the same
# way and the second run reuses the first one's build. The filters name
# test modules (libtest matches names by substring, in every crate);
# none of them matches a test in another crate.
crates=(-p uwarp-stack -p uwarp -p uwarp-verbs)

# The handle tables of the C ABI keep addresses as integers: silence
# Miri's warning about the casts back (their provenance is exposed, as
# the warning's own advice allows).
flags=-Zmiri-permissive-provenance

# Stacked Borrows (Miri's default), leaks checked. uwarp-verbs: queue
# pairs shared between threads through the exported verbs (rows 19 and
# 21: qp::tests), the handle registry (export), acknowledgements and
# asynchronous events, a connect's thread beside the application holding
# its id (row 20: cm::connect), and what parses the application's
# arguments. uwarp: work-queue slots, a queue pair's rings handed between
# the application, its link and its flush (qp_link, qp_flush), the
# driver, the counters.
echo "miri-ci.sh: Stacked Borrows: the C ABI's queue pairs, ids and handles, the work queues"
MIRIFLAGS=$flags timeout 900 cargo "+$toolchain" miri test "${crates[@]}" --lib -- \
    qp::tests:: export::tests:: acknowledgements:: async_events:: mr::tests:: \
    cm::connect:: rsocket::wire:: \
    slots:: driver:: counters:: qp_flush:: qp_link::

# Stacked Borrows, leaks checked, three schedules: events taken while
# their id is destroyed (row 1: cm::events). That race's window is a few
# basic blocks wide, inside paths of hundreds, so one schedule rarely
# hits it: each seed is another schedule, and Miri preempts a thread at
# the end of a block with the rate given. With the two steps of row 1 put
# back, seeds 0 to 9 of 0..12 fail at rate 0.002 (with half the test's
# rounds, 10, 11, 8 and 8 of 16 seeds failed at 0.001, 0.002, 0.005 and
# the default 0.01). Each seed runs every crate's test binary (the filter
# leaves the others' tests out), which costs a few seconds: hence few
# seeds, and many rounds in the test.
echo "miri-ci.sh: Stacked Borrows, 3 schedules: connection-manager events against destroy"
MIRIFLAGS="$flags -Zmiri-preemption-rate=0.002 -Zmiri-many-seeds=0..3" timeout 600 \
    cargo "+$toolchain" miri test "${crates[@]}" --lib -- cm::events::

# Tree Borrows, leaks not checked: the STag table the dataplane reads
# lock-free and its grace periods (uwarp-stack's mem), and the revocation
# of registered memory (uwarp). Both stand on crossbeam-epoch, which
# breaks Stacked Borrows' rules (crossbeam's own Miri runs use Tree
# Borrows) and leaves its global collector's thread records allocated at
# exit, behind tagged pointers Miri's leak check cannot follow.
echo "miri-ci.sh: Tree Borrows: the STag table, grace periods, revocation"
MIRIFLAGS="$flags -Zmiri-tree-borrows -Zmiri-ignore-leaks" timeout 900 \
    cargo "+$toolchain" miri test "${crates[@]}" --lib -- \
    mem:: app_memory::revocation::

echo "miri-ci.sh: Miri found nothing"
