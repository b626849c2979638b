#!/usr/bin/env bash
# Writes keel(1) with help2man from the binary's own help: `keel --help` for the
# synopsis, then a COMMANDS section with each command's `keel COMMAND --help`.
# The build runs it (target keel_man, when help2man is installed).
#   scripts/man_page.sh KEEL VERSION OUT
set -euo pipefail
keel=$1 version=$2 out=$3
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
  echo "[COMMANDS]"
  for command in scheduler server worker launch predict serve datagen bench keygen checkpoint \
                 report admin; do
    echo ".SS $command"
    echo ".nf"
    # A line that starts with a dot or a quote would be read as a request.
    "$keel" "$command" --help | sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"
    echo ".fi"
  done
  echo "[SEE ALSO]"
  echo "The guide and the examples: /usr/share/doc/keel/ (README.md, guide/, examples/*.flags)."
  echo "Bash completion: \`keel completion bash\`."
} >"$include"
help2man --no-info --no-discard-stderr --name="a parameter-server training runtime" \
  --version-string="$version" --include="$include" --output="$out" "$keel"
