#!/usr/bin/env bash
# Serving benchmark: `keel serve` under a real load generator (wrk) on
# loopback, beside the model evaluation alone (`keel predict` on the same
# records). Trains a linear learner on the 10^6-row linear set of the training
# benchmark (one epoch, the defaults), then for single-record and 100-record
# requests (SageMaker's sparse JSON form, and CSV-like libsvm text) with 1 and
# 2 wrk threads (one connection each; the server has 2 threads) prints
# requests/s, records/s and wrk's p50/p99 latency. Figures go to
# docs/BENCHMARKS.md ("Serving").
#
#   scripts/bench/serve.sh [SECONDS]
#
# Data: generated once under KEEL_BENCH_DIR (default /tmp/keel-bench-train).
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
seconds="${1:-10}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-train}"
keel=$(keel_binary --absolute)
data="$work/linear"
command -v wrk >/dev/null || { echo "serve.sh: wrk is not installed (scripts/setup.sh)"; exit 1; }
cached_train_set "$data"

out=$(mktemp -d /tmp/keel-bench-serve.XXXXXX)
serve_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

model="$work/serve-model"
if [ ! -f "$model/model.manifest" ]; then
  echo "== training the model to serve (1 epoch, defaults) into $model"
  $keel launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --train="$data/train" --validation="$data/validation" --epochs=1 --model_dir="$model" \
    >/dev/null
fi

# Request bodies from the test set's first records, labels removed.
test_file=$(ls "$data"/test/* | head -1)
head -100000 "$test_file" | cut -d' ' -f2- > "$out/records.libsvm"
for _ in $(seq 10); do cat "$out/records.libsvm"; done > "$out/million.libsvm"
head -1 "$out/records.libsvm" > "$out/one.libsvm"
python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
lines = open(out + "/records.libsvm").read().split("\n")[:100]
def instance(line):
    pairs = [t.split(":") for t in line.split()]
    # libsvm indices are 1-based; SageMaker's keys are 0-based.
    return {"data": {"features": {"keys": [int(k) - 1 for k, _ in pairs],
                                  "values": [float(v) for _, v in pairs]}}}
for n in (1, 100):
    with open(f"{out}/json{n}.body", "w") as f:
        json.dump({"instances": [instance(l) for l in lines[:n]]}, f)
    with open(f"{out}/libsvm{n}.body", "w") as f:
        f.write("\n".join(lines[:n]) + "\n")
EOF

echo "== the model evaluation alone: keel predict --threads=1 on 10^6 unlabelled records, and on"
echo "   one record (its start-up and model load), 3 runs each"
seconds_of() {
  local start end
  start=$(date +%s.%N)
  $keel predict --model_dir="$model" --data="$1" --out="$out/predictions.csv" --threads=1 >/dev/null
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }'
}
for run in 1 2 3; do
  whole=$(seconds_of "$out/million.libsvm")
  startup=$(seconds_of "$out/one.libsvm")
  awk -v w="$whole" -v s="$startup" 'BEGIN { printf "predict: 10^6 records %.3f s, start-up %.3f s: %.0f records/s scoring alone\n", w, s, 1e6 / (w - s) }'
done

$keel serve --model_dir="$model" --serve_port=0 --port_file="$out/port" --serve_threads=2 \
  --minloglevel=1 &
serve_pid=$!
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.1; done
port=$(cat "$out/port")
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ping")" = 200 ] && break
  sleep 0.1
done

for body in json1 json100 libsvm1 libsvm100; do
  case "$body" in
    json*) type=application/json ;;
    libsvm*) type=text/libsvm ;;
  esac
  records=${body//[a-z]/}
  wrk_post_script "$out/post.lua" "$type" "$out/$body.body"
  for threads in 1 2; do
    result=$(wrk -t"$threads" -c"$threads" -d"${seconds}s" --latency -s "$out/post.lua" \
      "http://127.0.0.1:$port/invocations")
    rps=$(echo "$result" | awk '/Requests\/sec/ { print $2 }')
    p50=$(echo "$result" | awk '$1 == "50%" { print $2 }')
    p99=$(echo "$result" | awk '$1 == "99%" { print $2 }')
    errors=$(echo "$result" | awk '/Non-2xx|Socket errors/ { print }')
    echo "$body ($type, $records records/request), $threads thread(s): $rps requests/s," \
      "$(awk -v r="$rps" -v n="$records" 'BEGIN { printf "%.0f", r * n }') records/s," \
      "p50 $p50, p99 $p99 ${errors:+($errors)}"
  done
done
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^keel_serve_(requests|errors|records)_total'
