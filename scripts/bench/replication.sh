#!/usr/bin/env bash
# Replication cost: `keel bench kv` on 2 servers and 1 worker with
# --replication=0 and --replication=1 (every push passed to the other server
# before it is acknowledged), runs alternating for ROUNDS rounds. Prints, per
# case, the median over rounds of each setting's p50 latency and throughput,
# and their ratios (replicated / not). Figures go to docs/BENCHMARKS.md.
#
#   scripts/bench/replication.sh [ROUNDS] [SECONDS_PER_CASE]
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rounds="${1:-3}"
seconds="${2:-2}"
keel=$(keel_binary KEEL)
out="$(mktemp -d /tmp/keel-bench-replication-XXXXXX)"
trap 'rm -rf "$out"' EXIT

for ((round = 0; round < rounds; ++round)); do
  for k in 0 1; do
    $keel bench kv --servers=2 --workers=1 --replication="$k" --zmq_baseline=false \
      --mode=all --dense_sizes=64KiB,1MiB --sparse_widths=1,9 --bench_seconds="$seconds" \
      2>/dev/null | grep '^{"bench":"kv"' >> "$out/replication-$k.jsonl"
  done
done

python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], sys.argv[2]
runs = {k: [json.loads(line) for line in open(f"{out}/replication-{k}.jsonl")] for k in (0, 1)}
names = [case["name"] for case in runs[0][0]["cases"]]
def median(k, name, field):
    return statistics.median(c[field] for run in runs[k] for c in run["cases"] if c["name"] == name)
print(f"2 servers, 1 worker, {rounds} round(s) alternating; medians over rounds")
print("| case | p50 us, k=0 | p50 us, k=1 | p50 ratio | throughput k=0 | k=1 | throughput ratio |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in names:
    field = "mkeys_per_s" if name.startswith("sparse") else "gb_per_s"
    if name.startswith("small"):
        field = "requests"
    p0, p1 = median(0, name, "p50_us"), median(1, name, "p50_us")
    t0, t1 = median(0, name, field), median(1, name, field)
    unit = {"mkeys_per_s": "M keys/s", "gb_per_s": "GB/s", "requests": "requests"}[field]
    print(f"| {name} | {p0:.1f} | {p1:.1f} | {p1 / p0:.2f} | {t0:.3g} {unit} | {t1:.3g} | "
          f"{t1 / t0 if t0 else float('nan'):.2f} |")
PY
