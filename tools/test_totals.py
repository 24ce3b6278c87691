#!/usr/bin/env python3
"""Prints "N passed, N failed, N skipped" from a meson test log (testlog.json), in doctest test cases.

A doctest binary's own summary gives passed and failed; cases it skips (skip-decorated) and the cases
of a binary reported SKIP (exit 77: its suite needs a GPU) are counted with doctest's --count. A pytest
run (the Python package's suite) is counted from its summary line. A test with neither summary counts
as one case. Exits 1 when any failed.
Usage: tools/test_totals.py TESTLOG   (./ember test and tools/run_tests.py call it)
"""
import json, os, re, subprocess, sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed\s*\|\s*(\d+) skipped")
COUNT = re.compile(r"test cases passing the current filters:\s*(\d+)")
PYTEST_LINE = re.compile(r"^=*\s*(\d+ (passed|failed|skipped|errors?)\b.*) in [\d.]+s", re.M)
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")

def count_cases(test):
    """Cases a run with this test's filters would execute, skip-decorated ones included."""
    # --ember-* flags belong to ember's test runner (e.g. --ember-require-cuda exits 77 first).
    cmd = [a for a in test.get("command") or [] if not a.startswith("--ember-")] + ["--count", "--no-skip"]
    env = dict(os.environ, **(test.get("env") or {}))
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = COUNT.search(out)
    return int(m.group(1)) if m else None

passed = failed = skipped = 0
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for line in lines:
    if not line.strip():
        continue
    t = json.loads(line)
    result = t.get("result", "")
    ok = result in ("OK", "EXPECTEDFAIL")
    found = SUMMARY.findall(t.get("stdout") or "")
    pytest_line = PYTEST_LINE.findall(t.get("stdout") or "")
    if pytest_line and not found:
        counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                  for n, kind in PYTEST_COUNT.findall(pytest_line[-1][0])}
        passed += counts.get("passed", 0)
        skipped += counts.get("skipped", 0)
        bad = counts.get("failed", 0) + counts.get("error", 0)
        failed += bad if (bad or ok) else 1  # pytest itself failed after its tests passed
        continue
    if result == "SKIP":
        n = count_cases(t)
        skipped += 1 if n is None else n
    elif found:
        _, p, f, _ = map(int, found[-1])
        passed += p
        failed += f if (f or ok) else 1  # a binary that failed after its cases all passed
        n = count_cases(t)
        if n is not None and n > p + f:
            skipped += n - p - f
    elif ok:
        passed += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
