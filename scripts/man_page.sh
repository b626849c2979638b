#!/usr/bin/env bash
# Writes keel(1) with help2man from the binary's own help: `keel --help` for the
# synopsis, then a COMMANDS section with each command's `keel COMMAND --help`,
# for every command `keel --help` lists that has a usage of its own (the list
# is the binary's: a new command needs no edit here).
# The build runs it (target keel_man, when help2man is installed).
#   scripts/man_page.sh KEEL VERSION OUT
set -euo pipefail
keel=$1 version=$2 out=$3
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
  echo "[COMMANDS]"
  # The commands section of `keel --help`: "  COMMAND ..." lines up to its
  # first blank line, in their order there.
  commands=$("$keel" --help | awk '/^commands:/ { listed = 1; next }
                                   listed && /^$/ { exit }
                                   listed && /^  [a-z]/ && !seen[$1]++ { print $1 }')
  [ -n "$commands" ] || { echo "man_page.sh: $keel --help lists no command" >&2; exit 1; }
  for command in $commands; do
    # version and completion have no usage of their own.
    help=$("$keel" "$command" --help 2>/dev/null) || continue
    [[ $help == usage:* ]] || continue
    echo ".SS $command"
    echo ".nf"
    # A line that starts with a dot or a quote would be read as a request.
    printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"
    echo ".fi"
  done
  echo "[SEE ALSO]"
  echo "The guide and the examples: /usr/share/doc/keel/ (README.md, guide/, examples/*.flags)."
  echo "Bash completion: \`keel completion bash\`."
} >"$include"
help2man --no-info --no-discard-stderr --name="a parameter-server training runtime" \
  --version-string="$version" --include="$include" --output="$out" "$keel"
