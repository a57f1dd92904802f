# SPDX-License-Identifier: BSD-3-Clause
"""Compare two verbose runs of torch_dist_suite.py (unittest -v output):

    suite_compare.py gloo.log mlcomm.log [--list]

Prints per run the counts of passed / skipped / failed tests, then every
test whose outcome differs between the two (a test that passes on the first
and not on the second first). Exit 1 when a test passes on the first run
and fails (not skips) on the second; --list prints the tests passing on
both, space-separated (for MLC_TORCH_SUITE_TESTS)."""

import re
import sys

START = re.compile(r"^(test_\w+) \(__main__\.")


def outcomes(path):
    """{test: "ok" | "skip: reason" | "FAIL" | "ERROR"}."""
    res, cur = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = START.match(line)
            if m:
                cur = m.group(1)
            if cur is None:
                continue
            t = line.rstrip()
            if t == "ok" or t.endswith(" ... ok") or t.endswith(") ... ok"):
                res[cur], cur = "ok", None
            elif t.startswith("skipped ") or " ... skipped " in t:
                res[cur], cur = "skip: " + t.split("skipped ", 1)[1].strip("'\""), None
            elif t in ("ERROR", "FAIL") or t.endswith(" ... ERROR") or t.endswith(" ... FAIL"):
                res[cur], cur = t.split()[-1], None
    return res


def counts(res):
    ok = sum(v == "ok" for v in res.values())
    skip = sum(v.startswith("skip") for v in res.values())
    return ok, skip, len(res) - ok - skip


def main():
    a_path, b_path = sys.argv[1], sys.argv[2]
    a, b = outcomes(a_path), outcomes(b_path)
    if "--list" in sys.argv:
        print(" ".join(t for t in sorted(a) if a[t] == "ok" and b.get(t) == "ok"))
        return 0
    for name, res in ((a_path, a), (b_path, b)):
        print("%s: %d tests: %d passed, %d skipped, %d failed" % ((name, len(res)) + counts(res)))
    lost = []
    for t in sorted(set(a) | set(b)):
        x, y = a.get(t, "not run"), b.get(t, "not run")
        if x != y and not (x.startswith("skip") and y.startswith("skip")):
            print("  %-70s %-8s | %s" % (t, x[:40], y[:60]))
            if x == "ok" and y in ("FAIL", "ERROR"):
                lost.append(t)
    if lost:
        print("passing on the first, failing on the second: %d" % len(lost))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
