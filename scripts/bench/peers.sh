#!/usr/bin/env bash
# Keel beside its peers, on the same machine in one run, in alternating rounds:
#
#   kv        ps-lite's own workload (keys evenly spaced over the key space, one
#             float a key, the same keys every request, summed by ps-lite's
#             KVServerDefaultHandle), 1 server and 1 worker, 10^5 and 10^6 keys a
#             request: push and pull with 1 request in flight, push with 4 in
#             flight; ps-lite through scripts/bench/peers/pslite_kv.cc, Keel
#             through `keel bench kv --workload=pslite` (which measures raw ZeroMQ
#             at the same sizes first; that figure is printed too).
#   train     two sets of 10^6 training rows, 10^5 features (`keel datagen`,
#             feature popularity under a power law): 13 non-zeros a row
#             (powerlaw13) and the training benchmark's 20-non-zero set (linear).
#             Keel: `keel launch`, 1 server and 1 worker,
#             configs/linear_learner.flags, --epochs=EPOCHS, timed from launch to
#             each epoch's validation line; its examples/s per worker after epoch
#             1 (the workers' timeline) beside `keel bench backend` (the compute
#             alone, same flags and data). LIBLINEAR (Debian's liblinear-tools,
#             -s 0 -c 0.1) and Vowpal Wabbit (one pass, logistic loss, defaults)
#             train on the same rows from one text file, reading included, and
#             are scored on the same validation rows.
#
# Each round runs every case's sides in turn, their order reversed every other
# round (A B C, then C B A). Prints each case's median over the rounds per
# side and Keel's ratio to the peer, and writes them as a Markdown table.
#
#   scripts/bench/peers.sh PSLITE_SRC VW_SRC [ROUNDS]
#
# PSLITE_SRC, VW_SRC: folders holding the sources of ps-lite and of Vowpal Wabbit
# (9.11.2 was measured; git submodules not needed: their Debian packages are
# used). They are built under KEEL_PEERS_DIR (default /tmp/keel-peers), outside
# the project, once for each content of the source folder: a second run does not
# rebuild. Keel is built in KEEL_BUILD_DIR (default build) with
# scripts/configure.sh. What the peers need is installed from Debian (apt-get).
# Environment: KEEL_PEERS_CASES ("kv train", the cases to run; "" builds only),
# KEEL_PEERS_EPOCHS (Keel's epochs, 5), KEEL_PEERS_SECONDS (seconds a kv case, 2),
# KEEL_BENCH_DIR (data and logs, /tmp/keel-bench-peers), KEEL_PEERS_TABLE (the
# Markdown table, $KEEL_BENCH_DIR/peers.md).
set -euo pipefail
pslite_src=$(realpath "${1:?usage: peers.sh PSLITE_SRC VW_SRC [ROUNDS]}")
vw_src=$(realpath "${2:?usage: peers.sh PSLITE_SRC VW_SRC [ROUNDS]}")
rounds="${3:-3}"
# shellcheck source=scripts/lib/bench.sh
source "$(dirname "$0")/../lib/bench.sh"
fail() { echo "peers.sh: $*" >&2; exit 1; }
fail_with() {  # LOG MESSAGE: MESSAGE, then the end of LOG
  echo "peers.sh: $2; $1 ends:" >&2
  tail "$1" >&2
  exit 1
}
[ -f "$pslite_src/include/ps/kv_app.h" ] || fail "$pslite_src is not ps-lite"
[ -f "$vw_src/vowpalwabbit/cli/CMakeLists.txt" ] || fail "$vw_src is not Vowpal Wabbit"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "ROUNDS must be a positive integer"
peers="${KEEL_PEERS_DIR:-/tmp/keel-peers}"
work="${KEEL_BENCH_DIR:-/tmp/keel-bench-peers}"
build="${KEEL_BUILD_DIR:-build}"
cases="${KEEL_PEERS_CASES-kv train}"
epochs="${KEEL_PEERS_EPOCHS:-5}"
seconds="${KEEL_PEERS_SECONDS:-2}"
for case in $cases; do
  [[ "$case" =~ ^(kv|train)$ ]] || fail "KEEL_PEERS_CASES: unknown case '$case' (kv, train)"
done
[[ "$epochs" =~ ^[1-9][0-9]*$ ]] || fail "KEEL_PEERS_EPOCHS must be a positive integer"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || fail "KEEL_PEERS_SECONDS must be a positive integer"
table="${KEEL_PEERS_TABLE:-$work/peers.md}"
mkdir -p "$peers" "$work"
results="$work/results.txt"
: > "$results"
track_processes

# --- what the peers need, from Debian -----------------------------------------
packages=(build-essential cmake bc python3 libzmq3-dev libprotobuf-dev protobuf-compiler
  liblinear-tools libfmt-dev libspdlog-dev rapidjson-dev libboost-dev libeigen3-dev zlib1g-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "== installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q "${missing[@]}" >/dev/null
fi

# --- builds -------------------------------------------------------------------
# A folder's content (paths and bytes) with the recipe that builds it.
content_hash() {  # DIR RECIPE
  { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha1sum); echo "$2"; } |
    sha1sum | cut -c1-12
}

pslite_recipe="make DEPS_PATH=/usr PROTOC=/usr/bin/protoc ps; g++ -std=c++11 -O3 pslite_kv.cc
$(sha1sum < scripts/bench/peers/pslite_kv.cc)"
pslite_dir="$peers/pslite-$(content_hash "$pslite_src" "$pslite_recipe")"
if [ ! -x "$pslite_dir/pslite_kv" ]; then
  echo "== building ps-lite in $pslite_dir" >&2
  rm -rf "$pslite_dir.tmp"
  mkdir -p "$pslite_dir.tmp"
  cp -r "$pslite_src" "$pslite_dir.tmp/src"
  make -C "$pslite_dir.tmp/src" DEPS_PATH=/usr PROTOC=/usr/bin/protoc -j2 ps \
    > "$pslite_dir.tmp/build.log" 2>&1 || { tail -20 "$pslite_dir.tmp/build.log" >&2; exit 1; }
  g++ -std=c++11 -O3 -I"$pslite_dir.tmp/src/include" -I"$pslite_dir.tmp/src/src" \
    scripts/bench/peers/pslite_kv.cc "$pslite_dir.tmp/src/build/libps.a" -lzmq -lprotobuf -pthread \
    -o "$pslite_dir.tmp/pslite_kv"
  mv "$pslite_dir.tmp" "$pslite_dir"
fi

vw_options=(-DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DWARNINGS=OFF
  -DVW_BUILD_VW_C_WRAPPER=OFF -DFMT_SYS_DEP=ON -DSPDLOG_SYS_DEP=ON -DRAPIDJSON_SYS_DEP=ON
  -DVW_BOOST_MATH_SYS_DEP=ON -DVW_ZLIB_SYS_DEP=ON -DVW_EIGEN_SYS_DEP=ON)
vw_dir="$peers/vw-$(content_hash "$vw_src" "${vw_options[*]}; --target vw_cli_bin")"
if [ ! -x "$vw_dir/vw" ]; then
  echo "== building Vowpal Wabbit in $vw_dir (long: some 30 minutes on 2 cores)" >&2
  rm -rf "$vw_dir.tmp"
  mkdir -p "$vw_dir.tmp"
  { cmake -S "$vw_src" -B "$vw_dir.tmp/build" "${vw_options[@]}" &&
    cmake --build "$vw_dir.tmp/build" -j2 --target vw_cli_bin; } > "$vw_dir.tmp/build.log" 2>&1 ||
    { tail -20 "$vw_dir.tmp/build.log" >&2; exit 1; }
  cp "$vw_dir.tmp/build/vowpalwabbit/cli/vw" "$vw_dir.tmp/vw"
  mv "$vw_dir.tmp" "$vw_dir"
fi
vw="$vw_dir/vw"

echo "== building keel in $build" >&2
scripts/configure.sh "$build" >/dev/null
cmake --build "$build" -j2 --target keel >/dev/null
keel=$(realpath "$build/keel")

# --- kv -----------------------------------------------------------------------
free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# One ps-lite cluster (scheduler, server, worker) on loopback for each key count.
pslite_kv() {  # KEYS ROUND
  local keys=$1 out="$work/pslite-$1-$2.txt" port pids=() pid status=0
  port=$(free_port)
  # Every role on loopback.
  local cluster=(DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1
    DMLC_PS_ROOT_PORT="$port" DMLC_NODE_HOST=127.0.0.1 DMLC_INTERFACE=lo)
  local run=("$pslite_dir/pslite_kv" "$keys" "$seconds" push:1 pull:1 push:4)
  for role in scheduler server; do
    env "${cluster[@]}" DMLC_ROLE=$role "${run[@]}" > "$work/pslite-$role.log" 2>&1 &
    pids+=($!)
    tracked $!
  done
  env "${cluster[@]}" DMLC_ROLE=worker timeout 300 "${run[@]}" > "$out" 2>&1 || status=$?
  for pid in "${pids[@]}"; do
    wait_until 30 0.1 eval "! kill -0 $pid 2>/dev/null" || { kill_pids "$pid"; status=1; }
  done
  [ "$status" = 0 ] || fail_with "$out" "ps-lite's run failed"
  awk -v k="$keys" '$1 == "pslite" {
      split($4, f, "="); inflight = f[2]; split($7, m, "=")
      print "kv_" k "_" $2 "_inflight" inflight "_mkeys_per_s pslite " m[2] }' "$out" >> "$results"
}

keel_kv() {  # KEYS ROUND
  local keys=$1 inflight out
  for inflight in 1 4; do
    out="$work/keel-kv-$keys-$inflight-$2.txt"
    timeout 300 "$keel" bench kv --workload=pslite --mode=sparse --sparse_widths=1 \
      --sparse_keys="$keys" --inflight="$inflight" --small=false --bench_seconds="$seconds" \
      --minloglevel=1 > "$out" 2>&1 || fail_with "$out" "keel bench kv failed"
    grep '^{"bench":"kv"' "$out" | python3 -c '
import json, sys
run = json.load(sys.stdin)
keys, inflight = sys.argv[1], sys.argv[2]
for case in run["cases"]:
    direction = case["name"].split()[-1]
    if inflight == "4" and direction == "pull":
        continue  # ps-lite is measured pushing only with 4 in flight
    name = "kv_%s_%s_inflight%s_mkeys_per_s" % (keys, direction, inflight)
    print(name, "keel", "%.4f" % case["mkeys_per_s"])
    if "zmq_gb_per_s" in case:  # 4 bytes a key
        print(name, "zmq", "%.4f" % (case["zmq_gb_per_s"] * 1e3 / 4))
' "$keys" "$inflight" >> "$results"
  done
}

# --- train --------------------------------------------------------------------
prepare_set() {  # NAME: the set's folder, its training rows as one libsvm file and as VW text
  local data="$work/$1"
  case "$1" in
    powerlaw13)
      cached_datagen "$data" --model=linear --rows=1000000 --features=100000 --nnz=13 --seed=11 ;;
    linear) cached_train_set "$data" ;;
  esac
  [ -f "$data.train.libsvm" ] || cat "$data"/train/* > "$data.train.libsvm"
  # VW's text (labels -1/1, every feature in one namespace), beside the set's
  # folders, where Keel would read it.
  [ -f "$data.train.vw" ] || awk '{ $1 = ($1 == 1) ? "1 |" : "-1 |"; print }' \
    "$data.train.libsvm" > "$data.train.vw"
  [ -f "$data.validation.vw" ] || awk '{ $1 = ($1 == 1) ? "1 |" : "-1 |"; print }' \
    "$data/validation/part-0.libsvm" > "$data.validation.vw"
}

keel_train() {  # SET ROUND
  local data="$work/$1" model="$work/keel-model-$1" log="$work/keel-train-$1-$2.txt" start
  rm -rf "$model"
  start=$(now)
  # Each line of the launch's output with the time it was read.
  timeout 1800 "$keel" launch --servers=1 --workers=1 --flagfile=configs/linear_learner.flags \
    --epochs="$epochs" --train="$data/train" --validation="$data/validation" \
    --model_dir="$model" --minloglevel=1 2>&1 |
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$log" || true
  grep -q 'job done' "$log" || fail_with "$log" "keel launch failed"
  # "epoch 2/5 ... validation roc_auc_score 0.7701 ...": seconds from launch and the AUC.
  awk -v s="$start" -v set="$1" '/ epoch [0-9]+\/[0-9]+ .*validation roc_auc_score/ {
      split($3, e, "/")
      for (i = 1; i < NF; i++) if ($i == "roc_auc_score") auc = $(i + 1)
      printf "train_%s_keel_epoch%d_seconds keel %.3f\n", set, e[1], $1 - s
      printf "train_%s_keel_epoch%d_auc keel %s\n", set, e[1], auc }' "$log" >> "$results"
  # Examples/s of the worker after epoch 1: the timeline's epochs 2.. (training time alone).
  python3 - "$model/timeline/worker-0.jsonl" "$1" >> "$results" <<'EOF'
import json, sys
examples = seconds = 0
for line in open(sys.argv[1]):
    event = json.loads(line)
    if event.get("event") == "epoch" and event["epoch"] >= 2:
        examples += event["examples"]
        seconds += event["seconds"]
if seconds > 0:
    print("train_%s_keel_examples_per_s_after_epoch1 keel %.0f" % (sys.argv[2], examples / seconds))
EOF
}

keel_backend() {  # SET
  "$keel" bench backend --data="$work/$1/train" --flagfile=configs/linear_learner.flags --epochs=3 \
    --minloglevel=1 2>/dev/null | grep '^{"bench":"backend"' |
    python3 -c 'import json, sys
print("train_%s_keel_examples_per_s_after_epoch1 backend %.0f"
      % (sys.argv[1], json.load(sys.stdin)["examples_per_s"]))' "$1" >> "$results"
}

liblinear_train() {  # SET ROUND
  local data="$work/$1" model="$work/liblinear-$1.model" took
  took=$(liblinear_fit 0.1 "$data.train.libsvm" "$model")
  echo "train_$1_liblinear_seconds liblinear $took" >> "$results"
  local auc
  auc=$(liblinear_auc "$data/validation/part-0.libsvm" "$model" "$model.out")
  echo "train_$1_liblinear_auc liblinear $auc" >> "$results"
}

vw_train() {  # SET ROUND
  local data="$work/$1" model="$work/vw-$1.model" start end
  rm -f "$model"
  start=$(now)
  "$vw" --quiet --loss_function=logistic -d "$data.train.vw" -f "$model"
  end=$(now)
  echo "train_$1_vw_seconds vw $(echo "$end - $start" | bc)" >> "$results"
  "$vw" --quiet -t -i "$model" --link=logistic -d "$data.validation.vw" -p "$model.out"
  local auc
  auc=$(paste -d' ' <(cut -d' ' -f1 "$data/validation/part-0.libsvm") "$model.out" |
    sort -g -k2 | awk -f scripts/bench/auc.awk)
  echo "train_$1_vw_auc vw $auc" >> "$results"
}

# --- rounds -------------------------------------------------------------------
sets=(powerlaw13 linear)
if [[ " $cases " == *" train "* ]]; then
  for set in "${sets[@]}"; do prepare_set "$set"; done
fi
echo "== $rounds rounds on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg): cases $cases" >&2
for round in $(seq "$rounds"); do
  if [[ " $cases " == *" kv "* ]]; then
    for keys in 100000 1000000; do
      if [ $((round % 2)) = 1 ]; then pslite_kv "$keys" "$round"; keel_kv "$keys" "$round"
      else keel_kv "$keys" "$round"; pslite_kv "$keys" "$round"; fi
    done
  fi
  if [[ " $cases " == *" train "* ]]; then
    for set in "${sets[@]}"; do
      if [ $((round % 2)) = 1 ]; then
        keel_train "$set" "$round"; liblinear_train "$set" "$round"; vw_train "$set" "$round"
      else
        vw_train "$set" "$round"; liblinear_train "$set" "$round"; keel_train "$set" "$round"
      fi
      keel_backend "$set"
    done
  fi
  echo "-- round $round of $rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

# --- medians and ratios -------------------------------------------------------
python3 - "$results" "$table" "$rounds" "$epochs" <<'EOF'
import statistics, sys
from collections import defaultdict
results, table, rounds, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
values = defaultdict(list)
for line in open(results):
    case, side, value = line.split()
    values[(case, side)].append(float(value))
med = {k: statistics.median(v) for k, v in values.items()}
def spread(k):
    v = values[k]
    return "%.4g-%.4g" % (min(v), max(v))
rows = []  # case, keel, peer name, peer, ratio (keel / peer, > 1 is Keel ahead), note
for keys in ("100000", "1000000"):
    for direction, inflight in (("push", 1), ("pull", 1), ("push", 4)):
        c = "kv_%s_%s_inflight%d_mkeys_per_s" % (keys, direction, inflight)
        if (c, "keel") not in med or (c, "pslite") not in med:
            continue
        k, p = med[(c, "keel")], med[(c, "pslite")]
        note = "raw ZeroMQ %.1f M keys/s" % med[(c, "zmq")] if (c, "zmq") in med else ""
        rows.append(("kv %s keys %s, %d in flight (M keys/s)" % (keys, direction, inflight),
                     "%.1f (%s)" % (k, spread((c, "keel"))), "ps-lite",
                     "%.1f (%s)" % (p, spread((c, "pslite"))), "%.2f" % (k / p), note))
for s in ("powerlaw13", "linear"):
    if ("train_%s_liblinear_seconds" % s, "liblinear") not in med:
        continue
    # Keel's time to each epoch (median over rounds), its AUC.
    epochs_seen = [e for e in range(1, epochs + 1)
                   if ("train_%s_keel_epoch%d_seconds" % (s, e), "keel") in med]
    keel_t = {e: med[("train_%s_keel_epoch%d_seconds" % (s, e), "keel")] for e in epochs_seen}
    keel_a = {e: med[("train_%s_keel_epoch%d_auc" % (s, e), "keel")] for e in epochs_seen}
    curve = ", ".join("e%d %.2f s AUC %.4f" % (e, keel_t[e], keel_a[e]) for e in epochs_seen)
    for peer, name in (("liblinear", "LIBLINEAR -s 0 -c 0.1"), ("vw", "VW one pass")):
        seconds_key = ("train_%s_%s_seconds" % (s, peer), peer)
        t, a = med[seconds_key], med[("train_%s_%s_auc" % (s, peer), peer)]
        reached = [e for e in epochs_seen if keel_a[e] >= a]
        if reached:
            e = reached[0]
            keel_cell = "%.2f s (epoch %d, AUC %.4f)" % (keel_t[e], e, keel_a[e])
            ratio = "%.2f" % (keel_t[e] / t)
        else:
            keel_cell = "not reached in %d epochs (best AUC %.4f)" % (epochs, max(keel_a.values()))
            ratio = "-"
        rows.append(("%s: time to %s's AUC (s; ratio Keel / peer time)" % (s, name), keel_cell,
                     name, "%.2f s (%s), AUC %.4f" % (t, spread(seconds_key), a), ratio, ""))
    rows.append(("%s: Keel per epoch, from launch" % s, curve, "", "", "", ""))
    c = "train_%s_keel_examples_per_s_after_epoch1" % s
    if (c, "keel") in med and (c, "backend") in med:
        k, b = med[(c, "keel")], med[(c, "backend")]
        rows.append(("%s: examples/s per worker after epoch 1" % s,
                     "%.0f (%s)" % (k, spread((c, "keel"))), "keel bench backend (compute alone)",
                     "%.0f" % b, "%.2f" % (k / b), ""))
with open(table, "w") as out:
    out.write("| case | Keel (median of %s rounds; range) | peer | peer (median; range) "
              "| Keel / peer | note |\n" % rounds)
    out.write("| --- | --- | --- | --- | --- | --- |\n")
    for row in rows:
        out.write("| " + " | ".join(row) + " |\n")
print(open(table).read())
print("table: " + table)
EOF
