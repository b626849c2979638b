#!/usr/bin/env python3
"""Checks the floors of Keel's source: which folder may include which.

Reads every .h, .cc and .cu under src/ and models/ and checks each
`#include "folder/file.h"` against RULES below, then looks for include loops
between the files of one folder (a header and its source count as one unit,
x.h with x.cc and x.cu, so a loop through either is found). On a breach it
prints, per breach, the including file, the line, the included file and the
rule broken, and exits 1; otherwise it prints one line: the files and
includes checked. It also checks that gflags' FLAGS_ variables are read only
in src/cli/*_flags.{cc,h} (the command line turns flags into option structs;
nothing else reads a flag).

Usage: scripts/check_includes.py [--root DIR] [--verbose]
  --root     the tree to check (the folder holding src/ and models/); the
             default is this script's checkout. The tests run it once on the
             checkout, and on copies with a breach planted, which must fail.
  --verbose  lists the known breaches (KNOWN_BREACHES) too.
"""

import argparse
import os
import re
import sys

# What each folder may include besides itself. docs/ARCHITECTURE.md's layer
# picture ("Components and dependencies") shows the same table: change both
# together. A folder that does not exist yet simply has no files. models/ is
# the top-level models/ folder; every other folder is under src/. Generated
# headers (GENERATED) and system or third-party headers are always allowed.
RULES = {
    "base": (),
    "flags": ("base",),
    "models": ("base",),
    "kv": ("base",),
    "io": ("base",),
    "server": ("base", "io", "kv"),
    "worker": ("base", "io", "kv", "models"),
    "scheduler": ("base", "io", "kv", "models"),
    "metrics": ("base", "io", "kv", "models", "scheduler", "server", "worker"),
    "report": ("base", "io", "models"),
    "serve": ("base", "io", "kv", "models", "worker", "metrics"),
    "launch": ("base", "io", "kv", "models", "scheduler"),
    "faults": ("base", "io", "kv", "models", "scheduler", "launch"),
    "bench": ("base", "io", "kv", "models", "server", "worker", "scheduler", "launch", "metrics"),
    "cli": None,  # all of them
}

# Roles kv must not know (rule 1 covers it: kv -> base only; the message says so).
_ROLES = ("worker", "server", "scheduler")

# Breaches known today and awaiting their fix, as (including file, included
# name); they do not fail the check (--verbose lists them). An
# entry no longer found fails the check until it is deleted here, so the list
# only shrinks. src/cli's loops go with its files' moves into launch/,
# faults/ and bench/.
KNOWN_BREACHES = set()

# Headers the build generates (from proto/ and src/cli/keel_version.h.in),
# included by bare name.
GENERATED = re.compile(r"^([a-z_]+\.pb\.h|keel_version\.h)$")

_SOURCE_SUFFIXES = (".h", ".cc", ".cu")
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

# A gflags flag read (FLAGS_name; not gflags' own SET_FLAGS_DEFAULT and the like).
_FLAG_READ = re.compile(r"(?<![A-Za-z0-9_])FLAGS_[a-z][a-z0-9_]*")
# The only files that may read one: the command line's flag families.
_FLAG_FILES = re.compile(r"^src/cli/[a-z_]+_flags\.(cc|h)$")


def folder_of(path):
    """'src/kv/van.cc' -> 'kv'; 'models/linear.h' -> 'models'."""
    parts = path.split("/")
    return parts[1] if parts[0] == "src" else parts[0]


def unit_of(path):
    """A header and its sources are one unit: 'src/kv/van.cc' -> 'src/kv/van'."""
    return os.path.splitext(path)[0]


def included_path(name):
    """The repository path of an include: "models/x.h" is models/x.h, the rest src/<name>."""
    return name if name.startswith("models/") else "src/" + name


def source_files(root):
    files = []
    for top in ("src", "models"):
        for directory, subdirs, names in os.walk(os.path.join(root, top)):
            subdirs.sort()
            for name in sorted(names):
                if name.endswith(_SOURCE_SUFFIXES):
                    files.append(os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/"))
    return files


def read_includes(root, path):
    """[(line number, included name)] for each quoted include of the file."""
    includes = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, 1):
            match = _INCLUDE.match(line)
            if match:
                includes.append((number, match.group(1)))
    return includes


def project_folders(root):
    """The folders that exist: src/<each>, and models."""
    folders = set()
    src = os.path.join(root, "src")
    if os.path.isdir(src):
        folders.update(name for name in os.listdir(src) if os.path.isdir(os.path.join(src, name)))
    if os.path.isdir(os.path.join(root, "models")):
        folders.add("models")
    return folders


def folder_breach(path, name, existing):
    """The rule an include breaks, or None."""
    own = folder_of(path)
    if "/" not in name:
        if GENERATED.match(name):
            return None
        return 'includes are "folder/file.h" relative to src/ (or "models/file.h")'
    target = name.split("/")[0]
    if target not in RULES and target not in existing:
        return None  # a third-party header written with quotes
    if own not in RULES:
        return "folder %s/ is not in the rule table (scripts/check_includes.py RULES)" % own
    if target not in RULES:
        return "folder %s/ is not in the rule table (scripts/check_includes.py RULES)" % target
    allowed = RULES[own]
    if allowed is None or target == own or target in allowed:
        return None
    rule = "%s -> %s" % (own, ", ".join(allowed) if allowed else "nothing")
    message = "%s/ may include only itself and %s" % (own, ", ".join(allowed)) if allowed else \
        "%s/ may include nothing but itself" % own
    if own == "kv" and target in _ROLES:
        message += " (kv knows no role)"
    return "%s [rule %s]" % (message, rule)


def find_cycles(edges):
    """Each elementary loop found by a depth-first search, as a list of units (first repeated last).

    edges: unit -> {unit: (including file, line, included name)}. Reports the loops closed by
    back edges, which is at least one loop per strongly connected component that has one.
    """
    cycles = []
    state = {}  # unit -> 1 on the stack, 2 done
    stack = []

    def visit(unit):
        state[unit] = 1
        stack.append(unit)
        for next_unit in sorted(edges.get(unit, {})):
            if state.get(next_unit) == 1:
                cycles.append(stack[stack.index(next_unit):] + [next_unit])
            elif next_unit not in state:
                visit(next_unit)
        stack.pop()
        state[unit] = 2

    for unit in sorted(edges):
        if unit not in state:
            visit(unit)
    return cycles


def check(root):
    files = source_files(root)
    existing = project_folders(root)
    breaches = []  # (file, line, included, rule)
    edges = {}  # unit -> {unit: (file, line, included)}, within one folder
    include_count = 0
    file_set = set(files)
    for path in files:
        for number, name in read_includes(root, path):
            include_count += 1
            rule = folder_breach(path, name, existing)
            if rule:
                breaches.append((path, number, name, rule))
            if "/" not in name:
                continue
            target = included_path(name)
            if target in file_set and folder_of(target) == folder_of(path):
                source_unit, target_unit = unit_of(path), unit_of(target)
                if source_unit != target_unit:
                    edges.setdefault(source_unit, {}).setdefault(target_unit, (path, number, name))

    for path in files:
        if _FLAG_FILES.match(path):
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, 1):
                match = _FLAG_READ.search(line.split("//")[0])
                if match:
                    breaches.append((path, number, match.group(0),
                                     "a flag is read only in src/cli/*_flags.cc (flags -> option "
                                     "structs -> the code that takes them)"))
                    break

    for cycle in find_cycles(edges):
        loop = " -> ".join(os.path.basename(unit) for unit in cycle)
        rule = "include loop within %s/: %s" % (folder_of(cycle[0]), loop)
        for source_unit, target_unit in zip(cycle, cycle[1:]):
            path, number, name = edges[source_unit][target_unit]
            breaches.append((path, number, name, rule))
    return files, include_count, breaches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the tree to check (holding src/ and models/)")
    parser.add_argument("--verbose", action="store_true",
                        help="list the known breaches (KNOWN_BREACHES) too")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.root, "src")):
        print("check_includes: %s has no src/ folder" % args.root, file=sys.stderr)
        return 2
    files, include_count, breaches = check(args.root)
    failures = 0
    found = set()
    for path, number, name, rule in breaches:
        known = (path, name) in KNOWN_BREACHES
        found.add((path, name))
        failures += 0 if known else 1
        if args.verbose or not known:
            what = "reads %s" % name if name.startswith("FLAGS_") else 'includes "%s"' % name
            print("%s:%d: %s: %s%s" % (path, number, what, rule, " (known)" if known else ""))
    present = set(files)
    for path, name in sorted(KNOWN_BREACHES - found):
        if path in present:
            failures += 1
            print('%s: includes "%s": known breach no longer found; delete it from KNOWN_BREACHES '
                  "in scripts/check_includes.py" % (path, name))
    if failures:
        print("check_includes: %d breach%s in %d files" %
              (failures, "" if failures == 1 else "es", len(files)))
        return 1
    known = len(found & KNOWN_BREACHES)
    if known:
        print("check_includes: %d files, %d includes: no new breach (%d known, awaiting their fix: "
              "--verbose lists them)" % (len(files), include_count, known))
    else:
        print("check_includes: %d files, %d includes: every folder rule holds, no include loop within a folder"
              % (len(files), include_count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
