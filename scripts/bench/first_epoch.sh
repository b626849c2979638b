#!/usr/bin/env bash
# What a user waits for first, for keel binaries side by side (for example
# before and after a change): `keel launch` with 1 server and 1 worker,
# configs/linear_learner.flags, --epochs=EPOCHS, on the peers' training sets
# (scripts/bench/peers.sh: powerlaw13, 13 non-zeros a row, and linear, 20; 10^6
# rows, 10^5 features each), alternating rounds. For each binary and set, the
# median over the rounds (and range) of:
#   - seconds from launch to epoch 1's validation line (the terminal's), as
#     the peers' "time to" figures count it;
#   - epoch 1's training seconds and the bytes its worker sent then (the
#     worker's timeline);
#   - examples/s per worker in the epochs after the first (the same).
#
#   scripts/bench/first_epoch.sh KEEL [KEEL...]   (ROUNDS=5, EPOCHS=4, SETS="powerlaw13 linear")
#
# Each binary must write timeline/worker-0.jsonl into its model folder.
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
[ $# -ge 1 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rounds="${ROUNDS:-5}"
epochs="${EPOCHS:-4}"
read -r -a sets <<< "${SETS:-powerlaw13 linear}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-first-epoch}"
keel=$(keel_binary)  # makes the data
mkdir -p "$work"
for set in "${sets[@]}"; do
  case "$set" in
    powerlaw13)
      cached_datagen "$work/$set" --model=linear --rows=1000000 --features=100000 --nnz=13 --seed=11 ;;
    linear) cached_train_set "$work/$set" ;;
    *) echo "first_epoch.sh: unknown set '$set' (powerlaw13, linear)" >&2; exit 2 ;;
  esac
done

results="$work/results.txt"
: > "$results"
for round in $(seq 1 "$rounds"); do
  for set in "${sets[@]}"; do
    for b in $(seq 1 $#); do
      binary=${!b}
      model="$work/model-$b-$set"
      rm -rf "$model"
      start=$EPOCHREALTIME
      "$binary" launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
        --epochs="$epochs" --train="$work/$set/train" --validation="$work/$set/validation" \
        --model_dir="$model" --minloglevel=1 2>&1 |
        while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done \
          > "$work/launch-$b-$set.txt"
      first=$(awk -v s="$start" '/ epoch 1\/[0-9]+ .*validation/ { printf "%.3f", $1 - s; exit }' \
        "$work/launch-$b-$set.txt")
      [ -n "$first" ] || { echo "no epoch 1 line: see $work/launch-$b-$set.txt" >&2; exit 1; }
      python3 - "$model/timeline/worker-0.jsonl" "$b" "$set" "$first" >> "$results" <<'PY'
import json, sys
path, binary, name, first = sys.argv[1:5]
epochs = [e for e in map(json.loads, open(path)) if e.get("event") == "epoch"]
later = epochs[1:]
rate = sum(e["examples"] for e in later) / sum(e["seconds"] for e in later) if later else 0
print(binary, name, first, "%.3f" % epochs[0]["seconds"], epochs[0]["wire_bytes_sent"], "%.0f" % rate)
PY
    done
  done
  echo "round $round of $rounds done (load $(cut -d' ' -f1-3 /proc/loadavg))"
done

echo "| set | binary | epoch 1 from launch, s | epoch 1's training, s | MB sent in epoch 1 | examples/s after epoch 1 |"
echo "| --- | --- | --- | --- | --- | --- |"
for set in "${sets[@]}"; do
  for b in $(seq 1 $#); do
    python3 - "$results" "$b" "$set" "${!b}" <<'PY'
import statistics, sys
path, binary, name, label = sys.argv[1:5]
rows = [l.split() for l in open(path) if l.split()[:2] == [binary, name]]
def cell(i, scale=1.0, digits=2):
    v = [float(r[i]) * scale for r in rows]
    f = "%%.%df" % digits
    return (f + " (" + f + "-" + f + ")") % (statistics.median(v), min(v), max(v))
print("| %s | %s | %s | %s | %s | %s |" % (name, label, cell(2), cell(3), cell(4, 1e-6, 0),
                                           cell(5, 1.0, 0)))
PY
  done
done
