#!/usr/bin/env bash
# The push filter: bytes on the wire per example and test AUC at each
# --push_filter_threshold given, `keel bench train` (1 server, 1 worker,
# configs/<job>.flags, key caching as the flags' default) on one `keel datagen`
# set, in alternating rounds (each round every threshold in turn); prints every
# round and each threshold's medians beside threshold 0's.
#
#   scripts/bench/push_filter.sh KEEL [ROUNDS] [ROWS] [JOB] [THRESHOLDS] [EXTRA_FLAGS...]
#   (THRESHOLDS: comma-separated, 0 first; default 0,0.0002,0.001,0.005)
set -euo pipefail
keel="${1:?the keel binary}"
rounds="${2:-3}"
rows="${3:-200000}"
job="${4:-linear_learner}"
thresholds="${5:-0,0.0002,0.001,0.005}"
shift $(( $# < 5 ? $# : 5 ))
source "$(dirname "$0")/wire_set.sh"
out="$(mktemp -d /tmp/keel-push-filter-XXXXXX)"
wire_set "$keel" "$rows" "$job" "$out"
for round in $(seq 1 "$rounds"); do
  for threshold in ${thresholds//,/ }; do
    model_dir="$out/model-$round-$threshold"
    "$keel" bench train --data="$out/data" --flagfile="$flags" --epochs=4 \
      --early_stopping_patience=10 --test="$out/data/test" --model_dir="$model_dir" \
      --push_filter_threshold="$threshold" --progress=none --metrics=off "$@" 2>/dev/null |
      grep '^{"bench":"train"' |
      python3 -c '
import json, sys
run = json.load(sys.stdin)
metrics = json.load(open(sys.argv[3] + "/metrics.json"))
print(sys.argv[1], sys.argv[2], "%.1f" % run["wire_bytes_per_example_after_first_epoch"],
      "%.1f" % run["wire_bytes_per_example"], "%.0f" % run["examples_per_s_after_first_epoch"],
      "%.5f" % metrics["test:roc_auc_score"])
' "$round" "$threshold" "$model_dir" >> "$out/rounds.txt"
    rm -rf "$model_dir"
  done
done
echo "round threshold bytes_per_example_after_first_epoch bytes_per_example examples_per_s test_auc"
cat "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(lambda: ([], [], [], []))
for line in open(sys.argv[1]):
    _, threshold, later, every, rate, auc = line.split()
    for column, figure in zip(values[threshold], (later, every, rate, auc)):
        column.append(float(figure))
base = {name: statistics.median(column) for name, column in zip(("later", "every", "rate", "auc"), values["0"])}
print("threshold median_bytes_per_example_after_first (of 0) over_every_epoch (of 0) "
      "median_examples_per_s median_test_auc (minus 0's)")
for threshold, (later, every, rate, auc) in sorted(values.items(), key=lambda kv: float(kv[0])):
    l, e, a = statistics.median(later), statistics.median(every), statistics.median(auc)
    print(threshold, "%.1f" % l, "(%.3f)" % (l / base["later"]), "%.1f" % e, "(%.3f)" % (e / base["every"]),
          "%.0f" % statistics.median(rate), "%.4f" % a, "(%+.4f)" % (a - base["auc"]))
PY
rm -rf "$out"
