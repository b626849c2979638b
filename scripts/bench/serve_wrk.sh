#!/usr/bin/env bash
# Serving under many connections: `keel serve` on loopback under wrk (2
# threads; 1 for one connection), each request a POST of one libsvm record to /invocations, at 1,
# 256 and 1000 concurrent connections (wrk's --latency, its 2 s time-out).
# Prints, for each binary and connection count, requests/s, p50, p99, and
# wrk's time-outs and errors (socket errors, non-2xx answers); then the median
# of each over the rounds. Figures go to docs/BENCHMARKS.md ("Serving under
# many connections").
#
#   scripts/bench/serve_wrk.sh [SECONDS] [ROUNDS]
#
# KEEL (default build/keel) is the binary measured; KEEL_BEFORE, when set, is
# a second one measured in the same run, alternating with KEEL round by round
# (before, then after), so both see the same machine. Each serve process is
# started by this script and stopped by its PID. The tiny model it serves
# (10^4 rows, 1000 features) is trained once under KEEL_BENCH_DIR (default
# /tmp/keel-bench-serve-wrk).
set -euo pipefail
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
seconds="${1:-5}"
rounds="${2:-1}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-serve-wrk}"
keel=$(keel_binary --absolute KEEL)
binaries=()
[ -z "${KEEL_BEFORE:-}" ] || binaries+=("before=$KEEL_BEFORE")
binaries+=("after=$keel")
[ -n "${KEEL_BEFORE:-}" ] || binaries=("keel=$keel")
install_missing wrk wrk
for entry in "${binaries[@]}"; do
  [ -x "${entry#*=}" ] || { echo "serve_wrk.sh: ${entry#*=} is not an executable"; exit 1; }
done
# 1000 connections take 1000 descriptors on each side.
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)"

data="$work/data"
model="$work/model"
cached_datagen "$data" --model=linear --rows=10000 --features=1000 --nnz=20 --seed=5
if [ ! -f "$model/model.manifest" ]; then
  echo "== training the model to serve into $model"
  $keel launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --train="$data/train" --validation="$data/validation" --epochs=1 --model_dir="$model" \
    >/dev/null
fi

out=$(mktemp -d /tmp/keel-bench-serve-wrk.XXXXXX)
track_processes rm -rf "$out"

# The body: the test set's first record, its label removed.
test_file=$(find "$data/test" -type f | sort | head -1)
head -1 "$test_file" | cut -d' ' -f2- > "$out/one.libsvm"
wrk_post_script "$out/post.lua" text/libsvm "$out/one.libsvm"

# serve_start BINARY: starts `serve` (2 threads' worth of defaults: the
# binary's own), sets serve_pid and port once /ping answers 200.
serve_start() {
  rm -f "$out/port"
  "$1" serve --model_dir="$model" --serve_port=0 --port_file="$out/port" --minloglevel=1 \
    2>>"$out/serve.log" &
  serve_pid=$!
  tracked "$serve_pid"
  wait_until 10 0.05 test -s "$out/port"
  port=$(cat "$out/port")
  wait_until 10 0.05 \
    sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/ping)\" = 200 ]"
}
serve_stop() {
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
}

# One line per run: NAME CONNECTIONS RPS P50_MS P99_MS TIMEOUTS ERRORS
results="$out/results"
ms() {  # wrk's "1.23ms", "456.00us", "2.00s" in milliseconds
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else { printf "nan" } }'
}
for round in $(seq "$rounds"); do
  for entry in "${binaries[@]}"; do
    name=${entry%%=*}
    serve_start "${entry#*=}"
    for connections in 1 256 1000; do
      threads=$((connections < 2 ? connections : 2))  # wrk needs a connection per thread
      result=$(wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency -s "$out/post.lua" \
        "http://127.0.0.1:$port/invocations" 2>&1) || { echo "$result"; exit 1; }
      rps=$(echo "$result" | awk '/Requests\/sec/ { print $2 }')
      p50=$(ms "$(echo "$result" | awk '$1 == "50%" { print $2 }')")
      p99=$(ms "$(echo "$result" | awk '$1 == "99%" { print $2 }')")
      # "Socket errors: connect 0, read 0, write 0, timeout 12"
      timeouts=$(echo "$result" | awk '/Socket errors/ { print $NF; found = 1 } END { if (!found) print 0 }')
      errors=$(echo "$result" | awk '
        /Socket errors/ { gsub(/,/, ""); n += $4 + $6 + $8 }
        /Non-2xx/ { n += $NF }
        END { print n + 0 }')
      echo "$name $connections $rps $p50 $p99 $timeouts $errors" >> "$results"
      printf '%-6s round %d, %4d connections: %9s requests/s, p50 %8s ms, p99 %8s ms, %s time-outs, %s errors\n' \
        "$name" "$round" "$connections" "$rps" "$p50" "$p99" "$timeouts" "$errors"
    done
    serve_stop
  done
done

echo "== medians over $rounds round(s) of ${seconds} s"
for entry in "${binaries[@]}"; do
  name=${entry%%=*}
  for connections in 1 256 1000; do
    line="$name $connections"
    for column in 3 4 5 6 7; do
      median=$(awk -v n="$name" -v c="$connections" -v k="$column" \
        '$1 == n && $2 == c { print $k }' "$results" | sort -g \
        | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
      line+=" $median"
    done
    echo "$line" | awk '{ printf "%-6s %4d connections: %9.0f requests/s, p50 %8.3f ms, p99 %8.3f ms, %d time-outs, %d errors\n", $1, $2, $3, $4, $5, $6, $7 }'
  done
done
