#!/usr/bin/env bash
# CI's bounded fuzz step: runs every cargo-fuzz target of stack/fuzz/ (the
# wire parsers and the queue-pair engine) and verbs/fuzz/ (the C entry
# points) for a few seconds from the seed corpora the tests write, so
# that a broken oracle or a new crash fails CI the day it appears. Exits
# non-zero when any target crashes; libFuzzer leaves the input in
# <crate>/fuzz/artifacts/<target>/ (see that crate's fuzz/README.md for
# turning it into a regression test).
#
# Usage: scripts/fuzz-ci.sh [SECONDS_PER_TARGET]   (default 5)
#
# Installs cargo-fuzz (pinned below) when it is missing or another version,
# as a debug build: it only drives cargo and libFuzzer, and compiling it
# unoptimized takes about half as long.
# Builds every target once, optimized with debug assertions and
# AddressSanitizer (cargo-fuzz's defaults), on the stable compiler through
# RUSTC_BOOTSTRAP=1, both fuzz crates into one target folder (the
# workspace's, or $CARGO_TARGET_DIR), so that what they share (uwarp-stack
# above all) is compiled once. The seeds come from the ignored
# seed-writing tests of stack/tests/fuzz_inputs.rs, stack/tests/qp_fuzz.rs
# and verbs/tests/fuzz_inputs.rs, so this step is cheapest after
# `cargo test --workspace` has built them. Corpora grow in a temporary
# folder, removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
cargo_fuzz_version=0.13.2

if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $cargo_fuzz_version" ]; then
    echo "fuzz-ci.sh: installing cargo-fuzz $cargo_fuzz_version"
    cargo install cargo-fuzz --locked --debug --version "$cargo_fuzz_version"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The three files name their seed writers write_*; --ignored runs only
# those, and each writes its targets' seeds to $UWARP_FUZZ_CORPUS/<target>/.
# --workspace, not -p: with the features the whole workspace unifies,
# these are the binaries `cargo test --workspace` has built; -p would
# rebuild the crates' dependencies with fewer features.
UWARP_FUZZ_CORPUS=$work cargo test --quiet --workspace \
    --test fuzz_inputs --test qp_fuzz -- --ignored write_

export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
failed=()

# Builds the fuzz crate of $1 (a crate's folder) and runs each target.
fuzz_crate() {
    local crate=$1 target log
    (cd "$crate" && cargo fuzz build)
    for target in $(cd "$crate" && cargo fuzz list); do
        mkdir -p "$work/$target"
        log=$work/$target.log
        local extra=()
        # private_data's connection events reach the application as
        # addresses written into a pipe: one still in the pipe when an
        # input ends is reachable from no user memory, and LeakSanitizer's
        # check after each input calls it a leak (not reproducible input
        # by input).
        if [ "$target" = private_data ]; then
            extra=(-detect_leaks=0)
        fi
        # -timeout: one input running this long is a hang, and a failure.
        if (cd "$crate" && cargo fuzz run "$target" "$work/$target" -- \
            -max_total_time="$seconds" -timeout=10 "${extra[@]}") >"$log" 2>&1; then
            echo "fuzz-ci.sh: $crate: $target: $(grep -E '^#[0-9]+' "$log" | tail -n 1)"
        else
            cat "$log"
            failed+=("$crate/fuzz/artifacts/$target")
        fi
    done
}

fuzz_crate stack
fuzz_crate verbs

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-ci.sh: crashed, inputs in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz-ci.sh: ${seconds}s each, no crash"
