# Steps with their times, for the set-up, demo, test and CI scripts (sourced).
#   step "what it does"   prints "<script>: what it does ..." and starts its clock
#   step_done             prints "<script>: what it does: N s" and, when
#                         KEEL_STEP_TIMES names a file, appends "N<TAB>what" to it
#   quiet COMMAND...      runs COMMAND; with KEEL_SETUP_QUIET=1 its output goes to a
#                         log that is printed only if it fails
# Steps do not nest: a step started before the last one ended is closed first.
keel_step_script=$(basename "$0" .sh)
keel_step_what=""
keel_step_start=0

step() {
  [ -z "$keel_step_what" ] || step_done
  keel_step_what=$1
  keel_step_start=$(date +%s.%N)
  echo "$keel_step_script: $keel_step_what ..."
}

step_done() {
  [ -n "$keel_step_what" ] || return 0
  local seconds
  seconds=$(awk -v a="$keel_step_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  echo "$keel_step_script: $keel_step_what: $seconds s"
  if [ -n "${KEEL_STEP_TIMES:-}" ]; then
    printf '%s\t%s: %s\n' "$seconds" "$keel_step_script" "$keel_step_what" >>"$KEEL_STEP_TIMES"
  fi
  keel_step_what=""
}

quiet() {
  if [ "${KEEL_SETUP_QUIET:-0}" != 1 ]; then
    "$@"
    return
  fi
  local log status=0
  log=$(mktemp "${TMPDIR:-/tmp}/keel-step.XXXXXX")
  "$@" >"$log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    cat "$log" >&2
    echo "$keel_step_script: failed ($status): $*" >&2
  fi
  rm -f "$log"
  return "$status"
}
