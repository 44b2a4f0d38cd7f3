#!/usr/bin/env bash
# Runs one test binary (or one test of it) many times while other
# processes keep CPUs busy, to catch what fails only now and then (races,
# hangs, crashes), and keeps the output of every run that failed.
#
# Usage: scripts/loop-test.sh [-n N] [--load K] [--release] [--stop]
#                             [--timeout SECONDS] [--out DIR]
#                             -p CRATE --test FILE [TESTNAME] [-- ARGS...]
#
#   -n N             runs (default 100)
#   --load K         K busy loops (`yes >/dev/null`) run meanwhile (default 0)
#   --release        the release build
#   --stop           stop at the first failure (default: run all N)
#   --timeout S      a run still going after S seconds is killed and counts
#                    as failed (exit 124; default: no limit)
#   --out DIR        where failing runs' output goes (default: a new
#                    directory under /tmp)
#   -p CRATE --test FILE   the test binary: `cargo test -p CRATE --test FILE`
#   TESTNAME         a filter for the test binary, as for `cargo test`
#   ARGS             more arguments for the test binary (e.g. --exact)
#
# Builds once (`cargo test --no-run`), then runs the test binary itself N
# times (not through cargo), from the crate's directory as cargo does. A
# failing run's standard output and error are kept as run-I.stdout and
# run-I.stderr in the output directory, and their last lines are printed.
# The busy loops (and a run under way) are killed when the script ends,
# however it ends (Ctrl-C too). The last line is "N passed, M failed";
# the exit status is 1 if a run failed. Core dumps follow the shell's
# `ulimit -c` and the kernel's core_pattern.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n 's/^# \{0,1\}//;2,29p' "$0"
}

runs=100
load=0
release=()
stop=false
timeout=0
out=""
crate=""
test_file=""
filter=()
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    -n) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --release) release=(--release); shift ;;
    --stop) stop=true; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -p) crate="$2"; shift 2 ;;
    --test) test_file="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "loop-test.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) filter=("$1"); shift ;;
    esac
done
for number in "$runs" "$load" "$timeout"; do
    if ! [[ $number =~ ^[0-9]+$ ]]; then
        echo "loop-test.sh: expected a number, got '$number'" >&2
        exit 2
    fi
done
if [ -z "$crate" ] || [ -z "$test_file" ]; then
    echo "loop-test.sh: name the test binary with -p CRATE --test FILE" >&2
    usage >&2
    exit 2
fi

# The test binary and its crate's manifest, from cargo's report of the
# build (the artifact of kind "test"; the binaries it needs are built too).
artifact=$(cargo test "${release[@]}" -p "$crate" --test "$test_file" --no-run \
    --message-format=json-render-diagnostics | grep '"kind":\["test"\]' | tail -n 1)
binary=$(sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' <<<"$artifact")
manifest=$(sed -n 's/.*"manifest_path":"\([^"]*\)".*/\1/p' <<<"$artifact")
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
    echo "loop-test.sh: cargo built no test binary for -p $crate --test $test_file" >&2
    exit 1
fi
crate_dir=$(dirname "$manifest")

if [ -z "$out" ]; then
    out=$(mktemp -d /tmp/loop-test.XXXXXX)
else
    mkdir -p "$out"
fi
out=$(cd "$out" && pwd)

# The busy loops and the run under way, killed at the end; the counts,
# reported then.
background=()
passed=0
failed=0
finish() {
    if [ ${#background[@]} -gt 0 ]; then
        kill "${background[@]}" 2>/dev/null || true
        wait "${background[@]}" 2>/dev/null || true
    fi
    echo "$passed passed, $failed failed"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for ((i = 0; i < load; i++)); do
    yes >/dev/null &
    background+=("$!")
done

run_cmd=("$binary" "${filter[@]}" "${extra[@]}")
if [ "$timeout" -gt 0 ]; then
    run_cmd=(timeout --kill-after=10 "$timeout" "${run_cmd[@]}")
fi
echo "loop-test.sh: $runs runs of ${run_cmd[*]} (in $crate_dir) with $load busy loops;" \
    "failing runs' output goes to $out"

hogs=${#background[@]}
for ((run = 1; run <= runs; run++)); do
    # In the background, so that a signal to the script is handled at once.
    (cd "$crate_dir" && exec "${run_cmd[@]}") \
        >"$out/run-$run.stdout" 2>"$out/run-$run.stderr" &
    background[hogs]=$!
    status=0
    wait "${background[hogs]}" || status=$?
    unset 'background[hogs]'
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        rm -f "$out/run-$run.stdout" "$out/run-$run.stderr"
        continue
    fi
    failed=$((failed + 1))
    echo "run $run failed (exit status $status): $out/run-$run.stdout, $out/run-$run.stderr"
    for stream in stdout stderr; do
        echo "--- last lines of its $stream:"
        tail -n 20 "$out/run-$run.$stream"
    done
    echo "---"
    if $stop; then
        break
    fi
done
[ "$failed" -eq 0 ]
