#!/usr/bin/env bash
# A server's apply path, two builds side by side: BEFORE (a keel without
# --server_apply_threads) and AFTER with --server_apply_threads=1 and =2, in
# alternating rounds (the three sides' order reversed every other round):
#   kv     ps-lite's workload (`keel bench kv --workload=pslite`, 1 server,
#          1 worker, width 1, summed), 10^5 and 10^6 keys a request, 1 and 4
#          in flight: push and pull M keys/s;
#   train  `keel bench train` of configs/linear_learner.flags (FTRL), 1 server,
#          1 worker, on `keel datagen` rows: examples/s per worker after the
#          first epoch, and the share of the epoch spent pushing.
# Prints every round's figures and each case's median per side with its ratio
# to BEFORE.
#
#   scripts/bench/apply_threads.sh BEFORE_KEEL AFTER_KEEL [ROUNDS] [ROWS] [EPOCHS]
#
# BEFORE_KEEL "-": only AFTER's two sides. ROUNDS: 3; ROWS: training rows,
# 500000; EPOCHS: 3. Environment:
# KEEL_APPLY_CASES ("kv train"), KEEL_BENCH_DIR (/tmp/keel-bench-apply).
set -euo pipefail
cd "$(dirname "$0")/../.."
before="${1:?usage: apply_threads.sh BEFORE_KEEL AFTER_KEEL [ROUNDS] [ROWS] [EPOCHS]}"
[ "$before" = - ] || before=$(realpath "$before")
after=$(realpath "${2:?usage: apply_threads.sh BEFORE_KEEL AFTER_KEEL [ROUNDS] [ROWS] [EPOCHS]}")
rounds="${3:-3}"
rows="${4:-500000}"
epochs="${5:-3}"
cases="${KEEL_APPLY_CASES-kv train}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-apply}"
mkdir -p "$work"
results="$work/results.txt"
: > "$results"
if [[ " $cases " == *" train "* ]] && [ ! -f "$work/data/oracle.json" ]; then
  "$after" datagen --model=linear --rows="$rows" --features=100000 --nnz=20 --seed=11 \
    --out="$work/data" > /dev/null
fi

# "<side> <case> <value>" lines on standard output.
kv() {  # SIDE BINARY FLAGS...
  local side=$1 binary=$2 keys inflight
  shift 2
  for keys in 100000 1000000; do
    for inflight in 1 4; do
      "$binary" bench kv --workload=pslite --mode=sparse --sparse_widths=1 --sparse_keys="$keys" \
        --inflight="$inflight" --small=false --zmq_baseline=false --bench_seconds=2 \
        --minloglevel=1 "$@" 2> /dev/null | grep '^{"bench":"kv"' | python3 -c '
import json, sys
run = json.load(sys.stdin)
for case in run["cases"]:
    print(sys.argv[1], "kv_%s_inflight%s_%s_mkeys_per_s" % (sys.argv[2], sys.argv[3],
          case["name"].split()[-1]), "%.2f" % case["mkeys_per_s"])
' "$side" "$keys" "$inflight"
    done
  done
}

train() {  # SIDE BINARY FLAGS...
  local side=$1 binary=$2
  shift 2
  "$binary" bench train --data="$work/data" --flagfile=configs/linear_learner.flags \
    --num_models=1 --epochs="$epochs" --minloglevel=1 "$@" 2> /dev/null |
    grep '^{"bench":"train"' | python3 -c '
import json, sys
run = json.load(sys.stdin)
print(sys.argv[1], "train_examples_per_s", run["examples_per_s_after_first_epoch"])
print(sys.argv[1], "train_push_share", run["shares"]["push"])
' "$side"
}

run_side() {  # SIDE
  case "$1" in
    before) "$kind" before "$before" ;;
    after1) "$kind" after1 "$after" --server_apply_threads=1 ;;
    after2) "$kind" after2 "$after" --server_apply_threads=2 ;;
  esac
}

for round in $(seq 1 "$rounds"); do
  order="before after1 after2"
  [ $((round % 2)) -eq 0 ] && order="after2 after1 before"
  [ "$before" = - ] && order="${order/before/}"
  for kind in $cases; do
    for side in $order; do
      run_side "$side" | sed "s/^/$round /" >> "$results"
    done
  done
  echo "round $round of $rounds done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
echo "round side case value"
cat "$results"
python3 - "$results" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    round_, side, case, value = line.split()
    values[(case, side)].append(float(value))
print("%-40s %10s %10s %10s %8s %8s %8s" % ("case (median of rounds)", "before", "after 1",
                                             "after 2", "1/before", "2/before", "2/1"))
for case in sorted({c for c, _ in values}):
    m = {s: statistics.median(values[(case, s)]) for s in ("before", "after1", "after2")
         if values[(case, s)]}
    ratio = lambda x, y: "%8.2f" % (m[x] / m[y]) if x in m and y in m and m[y] else "%8s" % "-"
    print("%-40s %10s %10.2f %10.2f %s %s %s" % (
        case, "%.2f" % m["before"] if "before" in m else "-", m.get("after1", 0),
        m.get("after2", 0), ratio("after1", "before"), ratio("after2", "before"),
        ratio("after2", "after1")))
PY
