#!/usr/bin/env bash
# Key caching on and off side by side: alternating rounds of ps-lite's
# workload (`keel bench kv --workload=pslite`, 1 server, 1 worker, width 1)
# at each keys-per-request and in-flight count, with --key_cache=true and
# --key_cache=false in turn; prints every round's M keys/s and each case's
# median with its ratio (on / off).
#
#   scripts/bench/key_cache.sh KEEL [ROUNDS] [SECONDS] [KEYS...]
set -euo pipefail
keel="${1:?the keel binary}"
rounds="${2:-3}"
seconds="${3:-2}"
shift $(( $# < 3 ? $# : 3 ))
keys=("$@")
[ ${#keys[@]} -gt 0 ] || keys=(100000 1000000)
out="$(mktemp -d /tmp/keel-key-cache-XXXXXX)"
for round in $(seq 1 "$rounds"); do
  for count in "${keys[@]}"; do
    for inflight in 1 4; do
      for cache in true false; do
        "$keel" bench kv --workload=pslite --mode=sparse --sparse_widths=1 \
          --sparse_keys="$count" --inflight="$inflight" --small=false --zmq_baseline=false \
          --bench_seconds="$seconds" --key_cache="$cache" 2>/dev/null |
          grep '^{"bench":"kv"' | python3 -c '
import json, sys
run = json.load(sys.stdin)
for case in run["cases"]:
    print(sys.argv[1], sys.argv[2], sys.argv[3], case["name"].split()[-1], sys.argv[4],
          "%.2f" % case["mkeys_per_s"], "%.0f" % case["p50_us"])
' "$round" "$count" "$inflight" "$cache" >> "$out/rounds.txt"
      done
    done
  done
done
echo "round keys inflight direction key_cache mkeys_per_s p50_us"
cat "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, keys, inflight, direction, cache, mkeys, _ = line.split()
    values[(int(keys), int(inflight), direction, cache)].append(float(mkeys))
print("\nkeys inflight direction: median M keys/s with the cache, without, ratio"
      " [, ps-lite, with the cache / ps-lite, without / ps-lite]")
for (keys, inflight, direction, cache) in sorted(values):
    if cache != "true":
        continue
    on = statistics.median(values[(keys, inflight, direction, "true")])
    off = statistics.median(values[(keys, inflight, direction, "false")])
    line = f"{keys} {inflight} {direction}: {on:.1f} {off:.1f} {on / off:.2f}"
    peer = values.get((keys, inflight, direction, "pslite"))
    if peer:
        ps = statistics.median(peer)
        line += f" {ps:.1f} {on / ps:.2f} {off / ps:.2f}"
    print(line)
PY
rm -rf "$out"
