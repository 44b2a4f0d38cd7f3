#!/usr/bin/env bash
# CI's performance guard: a short `uwarp-perf compare` on a release build,
# both transports in one process one after the other, whose same-run
# ratios (DPDK over the socket transport) must not fall far below their
# goals (docs/perf.md, "Regression guard"):
#
#   setup rate dpdk/socket      at least 2    (goal: 10; see docs/perf.md)
#   bandwidth  dpdk/socket      at least 0.9  (goal: 1.5; MTU 9000, CRCs)
#
# Ratios, not absolute rates: CI machines differ and are shared, and a
# disturbance slows both transports of a run alike more often than one.
# Each ratio is the best of RUNS runs (default 3): a regression lowers
# every run, a disturbance one. Prints every run's figures; exits 1 when a
# ratio is below its floor.
#
# Usage: scripts/perf-guard.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-3}
cargo build --quiet --release -p uwarp-bench --bin uwarp-perf
perf=${CARGO_TARGET_DIR:-$PWD/target}/release/uwarp-perf

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in $(seq "$runs"); do
    "$perf" compare --mtu 9000 --crc -n 20000 --latency-iters 1000 --setups 1000 --json \
        >"$work/run-$run.json"
done

python3 - "$work" <<'PYTHON'
import json, pathlib, sys

floors = {"setup": 2.0, "bw": 0.9}
runs = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("run-*.json"))]
for i, run in enumerate(runs, 1):
    d, s, r = run["dpdk"], run["socket"], run["ratios"]
    print(f"perf-guard: run {i}: bw {d['bw_gbps']:.2f}/{s['bw_gbps']:.2f} Gbit/s = {r['bw']:.2f}, "
          f"setup {d['setup_per_s']:.0f}/{s['setup_per_s']:.0f} per s = {r['setup']:.2f}, "
          f"core-to-core {run['calibrate']['core_to_core_ns']:.0f} ns")
failed = False
for name, floor in floors.items():
    best = max(run["ratios"][name] for run in runs)
    verdict = "ok" if best >= floor else "BELOW ITS FLOOR"
    print(f"perf-guard: {name} dpdk/socket best of {len(runs)}: {best:.2f} (floor {floor}): {verdict}")
    failed |= best < floor
sys.exit(1 if failed else 0)
PYTHON
