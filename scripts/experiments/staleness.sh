#!/usr/bin/env bash
# Consistency experiment: the linear learner on `keel datagen` data with one
# worker slowed down on purpose (--slow_worker), for staleness 0 (BSP), 1, 4,
# 16 and inf (asynchronous). For each: wall time, the share of training time
# workers spent waiting on pulls, time to reach a target validation loss, the
# final validation loss, the largest staleness a pull saw. Writes the table to
# stdout and to docs/experiments/staleness.md, and the plot (validation loss
# against wall time, one line per staleness) to docs/experiments/staleness.png.
# Every figure comes from what the jobs recorded in their model folders
# (history.jsonl, metrics.json; read by scripts/experiments/timeline.py), not
# from log text; each run's own report is <work>/s<staleness>/report.html.
#
#   scripts/experiments/staleness.sh            (ROWS, FEATURES, EPOCHS, SLOW, WORKERS override)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${ROWS:-300000}"
features="${FEATURES:-30000}"
epochs="${EPOCHS:-6}"
slow="${SLOW:-1:3}"
workers="${WORKERS:-3}"
batch="${BATCH:-200}"
work="${KEEL_EXPERIMENT_DIR:-/tmp/keel-staleness}"
out=docs/experiments
keel=$(keel_binary)
install_missing gnuplot gnuplot-nox
mkdir -p "$work" "$out"
cached_datagen "$work/data" --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5

timeline=scripts/experiments/timeline.py
field() { python3 "$timeline" metric "$(dirname "$1")" "$2"; }
stalenesses=(0 1 4 16 inf)
for s in "${stalenesses[@]}"; do
  start=$(date +%s.%N)
  $keel launch --servers=2 --workers="$workers" --flagfile=configs/linear_learner.flags \
    --train="$work/data/train" --validation="$work/data/validation" --epochs="$epochs" \
    --mini_batch_size="$batch" --early_stopping_patience=1000 --staleness="$s" --slow_worker="$slow" \
    --model_dir="$work/s$s" --minloglevel=1 --report > "$work/log-$s.txt" 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc > "$work/s$s/wall"
  # seconds and validation loss per epoch
  python3 "$timeline" history "$work/s$s" validation:objective_loss > "$work/s$s/loss.dat"
done

# The target: within 0.5% of the worst of the runs' best losses, so that every
# run reaches it and the time to it measures convergence, not the epoch count.
target=$(for s in "${stalenesses[@]}"; do sort -g -k2 "$work/s$s/loss.dat" | head -1 | awk '{print $2}'; done \
  | sort -g | tail -1 | awk '{printf "%.6f", $1 * 1.005}')

{
  echo "Command: ROWS=$rows FEATURES=$features EPOCHS=$epochs SLOW=$slow WORKERS=$workers BATCH=$batch scripts/experiments/staleness.sh"
  echo
  echo "Linear learner, $rows training rows x $features features (keel datagen, 20 non-zeros a row),"
  echo "2 servers and $workers workers on one 2-core machine, worker ${slow%%:*} slowed ${slow#*:}x"
  echo "(--slow_worker=$slow), $epochs epochs, minibatches of $batch, configs/linear_learner.flags."
  echo "Target validation loss: $target (0.5% above the highest of the runs' best losses)."
  echo
  echo "| staleness | wall s | pull wait share | pulls held | max staleness seen | s to target loss | final validation loss |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for s in "${stalenesses[@]}"; do
    m="$work/s$s/metrics.json"
    to_target=$(awk -v t="$target" '$2 <= t + 1e-12 { print $1; exit }' "$work/s$s/loss.dat")
    printf '| %s | %.1f | %.1f%% | %d of %d | %d | %.1f | %.5f |\n' "$s" "$(cat "$work/s$s/wall")" \
      "$(echo "$(field "$m" train:gate_wait_share) * 100" | bc -l)" \
      "$(field "$m" train:parked_pulls)" "$(field "$m" train:pulls)" \
      "$(field "$m" train:max_staleness)" "${to_target:-0}" \
      "$(field "$m" validation:objective_loss)"
  done
} | tee "$out/staleness.md"

plot="set terminal pngcairo size 900,540 font 'DejaVu Sans,11';"
plot+=" set output '$out/staleness.png';"
plot+=" set title 'Validation loss against wall time (worker ${slow%%:*} slowed ${slow#*:}x)';"
plot+=" set xlabel 'wall time (s)'; set ylabel 'validation logistic loss'; set key top right; set grid;"
plot+=" plot"
for s in "${stalenesses[@]}"; do
  plot+=" '$work/s$s/loss.dat' using 1:2 with linespoints title 'staleness $s',"
done
gnuplot -e "${plot%,}"
echo "plot: $out/staleness.png"
