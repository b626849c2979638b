#!/usr/bin/env bash
# Elastic servers: a linear-learner job on `keel datagen` data starts on 2
# servers (8 key ranges), grows to 4 while it trains (two servers started
# with --join), and shrinks back to 2 (both drained: keel admin drain, here
# through launch's fault schedule). Writes to stdout and to
# docs/experiments/elastic.md the throughput over time with the view changes,
# the longest push wait near each change and away from them, and the plot to
# docs/experiments/elastic.png. Every figure comes from what the job recorded
# in its model folder (timeline/*.jsonl, read by scripts/experiments/timeline.py).
#
#   scripts/experiments/elastic.sh   (ROWS, FEATURES, EPOCHS, JOIN, DRAIN1, DRAIN2 override)
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
rows="${ROWS:-1000000}"
features="${FEATURES:-100000}"
epochs="${EPOCHS:-20}"
join_at="${JOIN:-8}"
drain1_at="${DRAIN1:-18}"
drain2_at="${DRAIN2:-28}"
work="${KEEL_EXPERIMENT_DIR:-/tmp/keel-elastic}"
out=docs/experiments
keel=$(keel_binary)
install_missing gnuplot gnuplot-nox
mkdir -p "$work" "$out"
cached_datagen "$work/data" --model=linear --rows="$rows" --features="$features" --nnz=20 --seed=11
rm -rf "$work/model"
faults="join:server@${join_at}s,join:server@${join_at}s,drain:server:3@${drain1_at}s"
faults+=",drain:server:2@${drain2_at}s"
command=($keel launch --servers=2 --workers=2 --key_ranges=8 --flagfile=configs/linear_learner.flags
  --train="$work/data/train" --validation="$work/data/validation" --epochs="$epochs"
  --early_stopping_patience=1000 --model_dir="$work/model" --faults="$faults"
  --event_log="$work/events.jsonl")
start=$(date +%s.%N)
"${command[@]}" > "$work/log.txt" 2>&1 || { tail -30 "$work/log.txt"; exit 1; }
end=$(date +%s.%N)

timeline=scripts/experiments/timeline.py
t0=$(python3 "$timeline" start "$work/model")
python3 "$timeline" rate "$work/model" "$t0" 2 > "$work/rate.dat"
python3 "$timeline" views "$work/model" "$t0" > "$work/views.dat"
python3 "$timeline" pushes "$work/model" "$t0" > "$work/pushes.dat"
# Server count over time, as steps.
awk 'BEGIN{n=0} {if ($2 != n) {print $1, n; print $1, $2; n=$2}}' "$work/views.dat" > "$work/servers.dat"

# The view changes of each resize (a join or a drain, and the moves it made):
# from the first view of the resize to the last, 3 s apart at least between
# resizes. A sample's longest push counts as "near" a resize if its 2 s window
# overlapped one.
awk 'NR==1{b=$1; e=$1; s=$2; next} {if ($1 - e > 3) {print b, e, s; b=$1; s=$2} e=$1; s2=$2}
     END{print b, e, s}' "$work/views.dat" | awk 'NR>1' > "$work/resizes.dat"
report() {
  printf 'Command: %s\n\n' "ROWS=$rows FEATURES=$features EPOCHS=$epochs JOIN=$join_at DRAIN1=$drain1_at DRAIN2=$drain2_at scripts/experiments/elastic.sh"
  printf 'Linear learner (configs/linear_learner.flags), %s training rows x %s features, 2 workers,\n' "$rows" "$features"
  printf '8 key ranges; 2 servers at the start, 2 more join at %ss, server 3 is drained at %ss and\n' "$join_at" "$drain1_at"
  printf 'server 2 at %ss. Wall time %.1f s. Run of %s on the shared 2-core machine (load %s).\n\n' \
    "$drain2_at" "$(echo "$end - $start" | bc)" "$(date +%F)" "$(cut -d' ' -f1 /proc/loadavg)"
  printf '| resize | views from (s) | to (s) | servers after | longest push near it (ms) |\n'
  printf '| --- | --- | --- | --- | --- |\n'
  while read -r b e s; do
    after=$(awk -v e="$e" '$1 <= e {n=$2} END{print n}' "$work/views.dat")
    near=$(awk -v b="$b" -v e="$e" '$1 >= b - 0.01 && $1 - 2.1 <= e {if ($2 > m) m=$2} END{printf "%.1f", m}' "$work/pushes.dat")
    printf '| %s | %.2f | %.2f | %s | %s |\n' "$( [ "$after" -gt "$s" ] && echo join || echo drain )" "$b" "$e" "$after" "$near"
  done < "$work/resizes.dat"
  away=$(awk 'NR==FNR{b[NR]=$1; e[NR]=$2; n=NR; next}
    {near=0; for (i=1;i<=n;i++) if ($1 >= b[i] - 0.01 && $1 - 2.1 <= e[i]) near=1; if (!near && $2 > m) m=$2}
    END{printf "%.1f", m}' "$work/resizes.dat" "$work/pushes.dat")
  printf '\nLongest push wait in a 2 s sample away from every resize: %s ms.\n\n' "$away"
  printf '| t (s) | examples/s (both workers) | servers |\n| --- | --- | --- |\n'
  while read -r t r; do
    n=$(awk -v t="$t" '$1 <= t {n=$2} END{print n+0}' "$work/views.dat")
    printf '| %s | %s | %s |\n' "$t" "$r" "$n"
  done < "$work/rate.dat"
}
report | tee "$out/elastic.md"

plot="set terminal pngcairo size 900,540 font 'DejaVu Sans,11';"
plot+=" set output '$out/elastic.png';"
plot+=" set title 'Training throughput while servers join and are drained';"
plot+=" set xlabel 'seconds since the start'; set ylabel 'examples/s (both workers)';"
plot+=" set y2label 'servers'; set y2range [0:5]; set y2tics 1; set ytics nomirror; set grid;"
plot+=" set key bottom right; set yrange [0:*];"
plot+=" plot '$work/rate.dat' using 1:2 with linespoints title 'examples/s (2 s bins)',"
plot+=" '$work/servers.dat' using 1:2 axes x1y2 with lines lw 2 title 'servers in the view',"
plot+=" '$work/views.dat' using 1:(4.8) axes x1y2 with impulses lc rgb '#999999' title 'view changes'"
gnuplot -e "$plot"
echo "plot: $out/elastic.png"
