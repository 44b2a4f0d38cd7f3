#!/usr/bin/env bash
# CI's sanitizer step: the drop-in libibverbs/librdmacm built with
# AddressSanitizer, driven by the C test programs of verbs/tests/c/
# (compiled with -fsanitize=address, whose runtime the instrumented library
# then uses), so that a read or write of freed or foreign memory anywhere
# in the library, in any thread, fails CI with ASan's report instead of
# passing by luck. Each program runs bounded, on the socket transport, with
# the arguments listed below (racy scenarios looped fewer times than in
# `cargo test`: ASan slows them).
#
# Usage: scripts/sanitize-ci.sh
#
# Builds uwarp-verbs (library and uwarp-run) once, on the stable compiler
# through RUSTC_BOOTSTRAP=1 (as scripts/fuzz-ci.sh does), into
# target/asan/ so the ordinary build is untouched. Ends with a line
# "N passed, M failed"; exits non-zero when any program failed.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-$PWD/target}/asan
triple=x86_64-unknown-linux-gnu
RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" \
    cargo build --quiet -p uwarp-verbs --lib --bin uwarp-run \
    --target "$triple" --target-dir "$target"
run=$target/$triple/debug/uwarp-run

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# PROGRAM ARGS... : one run each. Not here: the programs that cancel
# threads waiting in the library (completion_queues, cm_lifetimes
# cancellation): a forced unwind skips the epilogues that unpoison an
# instrumented frame's stack, and ASan then reports its own thread
# teardown (sigaltstack) as a stack-buffer-underflow, a false positive.
runs=(
    "device_queries"
    "cm_connect"
    "cm_ird_ord 4 0"
    "cm_ird_ord 0 2"
    "cm_lifetimes event-vs-destroy 1000"
    "cm_lifetimes request-vs-listener-destroy 300"
    "cm_lifetimes held-request"
    "cm_lifetimes children-follow-migrated-listener 100"
    "cm_lifetimes unread-events 2000"
    "cm_lifetimes migrate-sync"
    "cm_lifetimes sync-wait-interrupted"
    "cm_lifetimes destroy-while-connecting"
    "cm_lifetimes unread-request-of-destroyed-listener"
    "cm_lifetimes unread-request-of-destroyed-channel"
    "cm_lifetimes stale-handles"
    "cm_lifetimes sync-event-kept"
)

passed=0
failed=0
compiled=()
for line in "${runs[@]}"; do
    read -r -a words <<<"$line"
    program=${words[0]}
    if [[ ! " ${compiled[*]} " =~ \ $program\  ]]; then
        gcc -fsanitize=address -fno-omit-frame-pointer -g -O1 -Wall -Werror \
            -o "$work/$program" "verbs/tests/c/$program.c" -lrdmacm -libverbs -pthread
        compiled+=("$program")
    fi
    log=$work/run.log
    # Leaks are not checked: a C test exits with what it made still open,
    # as programs do.
    if ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 timeout 120 \
        "$run" "$work/$program" "${words[@]:1}" >"$log" 2>&1 &&
        [ "$(tail -n 1 "$log")" = ok ]; then
        passed=$((passed + 1))
        echo "sanitize-ci.sh: $line: ok"
    else
        failed=$((failed + 1))
        echo "sanitize-ci.sh: $line: FAILED"
        cat "$log"
    fi
done

echo "sanitize-ci.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
