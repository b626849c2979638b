#!/usr/bin/env bash
# What several factorization machines (or linear learners) cost against one,
# for two keel binaries side by side (for example before and after a change):
# alternating rounds of `keel bench backend` (the CPU pass alone, no servers)
# and `keel bench train` (1 server, 1 worker; examples/s after the first
# epoch), both with configs/factorization_machines.flags and --num_models 1
# and 8, on `keel datagen --model=fm` data (KEEL_MODELS_JOB=linear:
# configs/linear_learner.flags on `--model=linear` data). Prints each case's
# median over the rounds and range, then what 8 models cost over one (time
# ratio of the medians) for each binary. KEEL_MODELS_DATA=DIR takes a data
# folder of one's own instead (train/, validation/; for example the peers'
# power-law set, scripts/bench/peers.sh), ROWS then unused.
#
#   scripts/bench/fm_models.sh BEFORE_KEEL AFTER_KEEL [ROUNDS] [ROWS]
set -euo pipefail
cd "$(dirname "$0")/../.."
before="${1:?the keel binary before}"
after="${2:?the keel binary after}"
rounds="${3:-5}"
rows="${4:-200000}"
case "${KEEL_MODELS_JOB:-fm}" in
  fm) flags="$PWD/configs/factorization_machines.flags" model=fm ;;
  linear) flags="$PWD/configs/linear_learner.flags" model=linear ;;
  *) echo "fm_models.sh: KEEL_MODELS_JOB is fm or linear" >&2; exit 2 ;;
esac
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-$model-models}"
data="${KEEL_MODELS_DATA:-$work/data-$model-$rows}"
mkdir -p "$work"
[ -n "${KEEL_MODELS_DATA:-}" ] || [ -f "$data/oracle.json" ] ||
  "$after" datagen --model="$model" --num_factors=4 --rows="$rows" --seed=11 --out="$data" \
    >/dev/null
[ -d "$data/train" ] || { echo "fm_models.sh: no $data/train" >&2; exit 2; }

results="$work/results.txt"
: > "$results"
for round in $(seq "$rounds"); do
  for label in before after; do
    keel="$before"
    [ "$label" = after ] && keel="$after"
    for models in 1 8; do
      backend=$("$keel" bench backend --flagfile="$flags" --data="$data/train" --epochs=5 \
        --num_models="$models" 2>&1 | grep -o '"examples_per_s":[0-9.]*' | cut -d: -f2)
      echo "$label backend_${models}_models $backend" >> "$results"
      train=$(timeout 600 "$keel" bench train --flagfile="$flags" --data="$data" --epochs=4 \
        --num_models="$models" 2>&1 | grep -o '"examples_per_s_after_first_epoch":[0-9.]*' |
        cut -d: -f2)
      echo "$label train_${models}_models $train" >> "$results"
    done
  done
  echo "round $round done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

python3 - "$results" <<'EOF'
import statistics, sys
values = {}
for line in open(sys.argv[1]):
    label, case, value = line.split()
    values.setdefault((case, label), []).append(float(value))
print("%-22s %26s %26s %8s" % ("examples/s (median)", "before [range]", "after [range]", "after/before"))
for case in sorted({case for case, _ in values}):
    b, a = values[(case, "before")], values[(case, "after")]
    print("%-22s %10.0f [%6.0f-%6.0fk] %10.0f [%6.0f-%6.0fk] %8.2f" % (
        case, statistics.median(b), min(b) / 1e3, max(b) / 1e3, statistics.median(a),
        min(a) / 1e3, max(a) / 1e3, statistics.median(a) / statistics.median(b)))
for kind in ("backend", "train"):
    for label in ("before", "after"):
        one = statistics.median(values[(kind + "_1_models", label)])
        eight = statistics.median(values[(kind + "_8_models", label)])
        print("%s, %s: 8 models take %.2fx one model's time" % (kind, label, one / eight))
EOF
