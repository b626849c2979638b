# Sourced by scripts/bench/wire.sh and push_filter.sh: the `keel datagen` set
# they train on and the flags of its job.
#
#   wire_set KEEL ROWS JOB OUT   # writes OUT/data; sets $flags to configs/JOB.flags
wire_set() {
  local keel="$1" rows="$2" job="$3" out="$4" model=linear
  [ "$job" = factorization_machines ] && model=fm
  flags="$(dirname "${BASH_SOURCE[0]}")/../../configs/$job.flags"
  "$keel" datagen --model="$model" --rows="$rows" --features=20000 --nnz=20 --num_factors=4 \
    --seed=11 --out="$out/data" >/dev/null
}
