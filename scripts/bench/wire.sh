#!/usr/bin/env bash
# Bytes on the wire and examples/s: `keel bench train` (1 server, 1 worker,
# configs/<job>.flags) with --wire_precision=fp32, bf16 and fp16, each with
# --key_cache=false and true, in alternating rounds on one `keel datagen` set;
# prints every round and each case's medians (bytes per example trained after
# the first epoch, examples/s per worker after the first epoch).
#
#   scripts/bench/wire.sh KEEL [ROUNDS] [ROWS] [JOB]
set -euo pipefail
keel="${1:?the keel binary}"
rounds="${2:-3}"
rows="${3:-200000}"
job="${4:-linear_learner}"
source "$(dirname "$0")/wire_set.sh"
out="$(mktemp -d /tmp/keel-wire-XXXXXX)"
wire_set "$keel" "$rows" "$job" "$out"
for round in $(seq 1 "$rounds"); do
  for precision in fp32 bf16 fp16; do
    for cache in false true; do
      "$keel" bench train --data="$out/data" --flagfile="$flags" --epochs=4 \
        --early_stopping_patience=10 --wire_precision="$precision" --key_cache="$cache" \
        --progress=none --metrics=off 2>/dev/null | grep '^{"bench":"train"' |
        python3 -c '
import json, sys
run = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], sys.argv[3], "%.1f" % run["wire_bytes_per_example_after_first_epoch"],
      "%.0f" % run["examples_per_s_after_first_epoch"])
' "$round" "$precision" "$cache" >> "$out/rounds.txt"
    done
  done
done
echo "round precision key_cache bytes_per_example examples_per_s"
cat "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    _, precision, cache, size, rate = line.split()
    values[precision, cache][0].append(float(size))
    values[precision, cache][1].append(float(rate))
base = statistics.median(values["fp32", "false"][0])
print("precision key_cache median_bytes_per_example (of fp32 without key cache) median_examples_per_s")
for (precision, cache), (sizes, rates) in sorted(values.items()):
    size = statistics.median(sizes)
    print(precision, cache, "%.1f" % size, "(%.3f)" % (size / base), "%.0f" % statistics.median(rates))
PY
rm -rf "$out"
