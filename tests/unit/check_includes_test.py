#!/usr/bin/env python3
"""scripts/check_includes.py fails on a breach: so that the include check cannot silently pass.

Copies src/base and src/kv into a temporary tree, checks that the copy passes,
then plants one breach at a time (kv including a role, base including kv, a
loop between two kv headers, a flag read outside src/cli's flag files) and checks that scripts/check_includes.py --root
exits non-zero and names the including file, the line, the included file and
the rule. Exits 0 when every planted breach is caught.
"""

import os
import shutil
import subprocess
import sys
import tempfile

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(SOURCE_DIR, "scripts", "check_includes.py")


def run_check(root):
    result = subprocess.run([sys.executable, CHECK, "--root", root], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True)
    return result.returncode, result.stdout


def append_line(root, path, line):
    """Appends an include to the file; returns its line number."""
    full = os.path.join(root, path)
    with open(full) as source:
        count = len(source.read().splitlines())
    with open(full, "a") as source:
        source.write(line + "\n")
    return count + 1


def fresh_copy(scratch, name):
    root = os.path.join(scratch, name)
    for folder in ("base", "kv"):
        shutil.copytree(os.path.join(SOURCE_DIR, "src", folder), os.path.join(root, "src", folder))
    return root


def expect_caught(name, code, output, wanted):
    if code == 0:
        print("FAIL %s: the check passed a planted breach:\n%s" % (name, output))
        return False
    missing = [text for text in wanted if text not in output]
    if missing:
        print("FAIL %s: the check's output lacks %s:\n%s" % (name, missing, output))
        return False
    print("ok   %s" % name)
    return True


def expect_line_caught(scratch, name, path, line, wanted):
    """Plants `line` at the end of `path` in a fresh copy; the check must fail
    with each of `wanted` (where %d is the planted line's number)."""
    root = fresh_copy(scratch, name.replace(" ", "_"))
    number = append_line(root, path, line)
    code, output = run_check(root)
    return expect_caught(name, code, output,
                         [text % number if "%d" in text else text for text in wanted])


def main():
    passed = True
    with tempfile.TemporaryDirectory(prefix="keel_check_includes_") as scratch:
        root = fresh_copy(scratch, "clean")
        code, output = run_check(root)
        if code != 0:
            print("FAIL clean copy: the check fails on an untouched copy of src/base and src/kv:\n" + output)
            passed = False
        else:
            print("ok   clean copy passes")

        passed &= expect_line_caught(scratch, "kv includes a role", "src/kv/keys.h",
                                     '#include "worker/trainer.h"',
                                     ['src/kv/keys.h:%d: includes "worker/trainer.h"',
                                      "kv knows no role", "rule kv -> base"])
        passed &= expect_line_caught(scratch, "base includes kv", "src/base/error.h",
                                     '#include "kv/keys.h"',
                                     ['src/base/error.h:%d: includes "kv/keys.h"',
                                      "rule base -> nothing"])

        root = fresh_copy(scratch, "loop")
        with open(os.path.join(root, "src", "kv", "planted_a.h"), "w") as header:
            header.write('#include "kv/planted_b.h"\n')
        with open(os.path.join(root, "src", "kv", "planted_b.h"), "w") as header:
            header.write('#include "base/error.h"\n#include "kv/planted_a.h"\n')
        code, output = run_check(root)
        passed &= expect_caught("loop within kv", code, output,
                                ['src/kv/planted_a.h:1: includes "kv/planted_b.h"',
                                 'src/kv/planted_b.h:2: includes "kv/planted_a.h"',
                                 "include loop within kv/: planted_a -> planted_b -> planted_a"])

        passed &= expect_line_caught(scratch, "a flag read outside the flag files", "src/kv/keys.h",
                                     "inline int Planted() { return FLAGS_workers; }",
                                     ["src/kv/keys.h:%d: reads FLAGS_workers",
                                      "a flag is read only in src/cli/*_flags.cc"])
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
