#!/usr/bin/env bash
# What 1% message drops cost a training job: the linear learner on `keel
# datagen` data (the fault experiment's job: scripts/experiments/faults.sh),
# `keel launch` with 2 servers and 2 workers, run without drops and with
# --drop_rate=0.01 on every role (1% of every node's outgoing data messages
# lost), the two alternating, RUNS times each. Everything else is the
# defaults: the workers resend on their round-trip estimates
# (--request_min_timeout_ms and --request_timeout_ms as shipped). Prints each
# run (wall time of the whole `keel launch`, the workers' resends and the late
# answers they ignored, validation log loss), the median of each kind and
# their ratio, and writes the same under its heading in docs/BENCHMARKS.md.
#
#   scripts/bench/drops.sh     (RUNS, ROWS, FEATURES, EPOCHS, BATCH, DROP_RATE override;
#                               EXTRA: more flags for every run)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
runs="${RUNS:-3}"
rows="${ROWS:-600000}"
features="${FEATURES:-60000}"
epochs="${EPOCHS:-8}"
batch="${BATCH:-200}"
drop_rate="${DROP_RATE:-0.01}"
read -r -a extra <<< "${EXTRA:-}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-drops}"
keel=$(keel_binary KEEL)
heading="## Message drops: what 1% lost messages cost a job (scripts/bench/drops.sh)"
mkdir -p "$work"
data="$work/data-$rows-$features"
cached_datagen "$data" --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=5

field() { grep -o "\"$2\": [-0-9.e]*" "$1" | awk '{print $2}'; }
# sum_of DIR WORD WHAT: the workers' "WORD N WHAT" log lines, N summed.
sum_of() { (grep -rho "$2 [0-9]* $3" "$1" || true) | awk '{ s += $2 } END { print s + 0 }'; }

lines=()
declare -A times
run() {  # kind index [flags]
  local kind=$1 i=$2; shift 2
  local dir="$work/$kind-$i" start end wall
  rm -rf "$dir" "$dir-logs"
  start=$EPOCHREALTIME
  $keel launch --servers=2 --workers=2 --flagfile=configs/linear_learner.flags \
    --train="$data/train" --validation="$data/validation" --epochs="$epochs" \
    --mini_batch_size="$batch" --early_stopping_patience=1000 --model_dir="$dir" --log_dir="$dir-logs" \
    "${extra[@]}" "$@" > "$dir.log" 2>&1 || { echo "$kind run $i failed: see $dir.log" >&2; exit 1; }
  end=$EPOCHREALTIME
  wall=$(echo "$end - $start" | bc)
  times[$kind]+="$wall "
  lines+=("$(printf '| %s | %d | %.1f | %s | %s | %s |' "$kind" "$i" "$wall" \
    "$(sum_of "$dir-logs" resent 'request part')" "$(sum_of "$dir-logs" ignored 'late response')" \
    "$(field "$dir/metrics.json" validation:objective_loss)")")
  echo "${lines[-1]}"
}

command="RUNS=$runs ROWS=$rows FEATURES=$features EPOCHS=$epochs BATCH=$batch DROP_RATE=$drop_rate${EXTRA:+ EXTRA=\"$EXTRA\"} scripts/bench/drops.sh"
echo "$command"
echo "| run | # | wall s | parts resent | late answers ignored | validation loss |"
echo "| --- | --- | --- | --- | --- | --- |"
for i in $(seq 1 "$runs"); do
  run clean "$i"
  run drops "$i" --drop_rate="$drop_rate"
done
# shellcheck disable=SC2086
clean=$(printf '%s\n' ${times[clean]} | median)
# shellcheck disable=SC2086
drops=$(printf '%s\n' ${times[drops]} | median)
ratio=$(echo "scale=3; $drops / $clean" | bc)
summary="$(printf 'Median wall time: %.1f s without drops, %.1f s with --drop_rate=%s on every role: %.2fx.' \
  "$clean" "$drops" "$drop_rate" "$ratio")"
echo "$summary"

section="$work/section.md"
{
  echo "$heading"
  echo
  echo "Command: \`$command\`"
  echo "($(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)."
  echo "The fault experiment's job (linear learner, \`keel datagen\` data, $rows rows, $features features,"
  echo "$epochs epochs of minibatches of $batch), launched with 2 servers and 2 workers, with every resend"
  echo "flag at its default; runs alternate, without and with drops. Wall time is the whole \`keel launch\`."
  echo
  echo "| run | # | wall s | parts resent | late answers ignored | validation loss |"
  echo "| --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${lines[@]}"
  echo
  echo "$summary"
  echo
} > "$section"
python3 - "$section" "$heading" <<'PY'
import sys
# Replaces the section under `heading` (up to the next heading) with the new
# figures, keeping any prose after a line "<!-- notes -->"; appends it if absent.
section, heading = open(sys.argv[1]).read(), sys.argv[2]
path = "docs/BENCHMARKS.md"
text = open(path).read()
start = text.find(heading + "\n")
if start < 0:
    text = text.rstrip("\n") + "\n\n" + section
else:
    end = text.find("\n## ", start + len(heading))
    end = len(text) if end < 0 else end + 1
    old = text[start:end]
    mark = old.find("<!-- notes -->")
    notes = old[mark:] if mark >= 0 else ""
    text = text[:start] + section + notes + text[end:]
open(path, "w").write(text)
PY
