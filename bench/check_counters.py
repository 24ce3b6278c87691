#!/usr/bin/env python3
"""Smoke check of a bench binary: runs it (the command after --) with --benchmark_format=json and
fails unless it ran at least one case, no case reported an error, and every case carries each
counter named in --counters with a finite value."""
import argparse
import json
import math
import subprocess
import sys


def check(report, counters):
    """The problems found in one Google Benchmark JSON report (empty when it passes)."""
    problems = []
    cases = report.get("benchmarks", [])
    if not cases:
        problems.append("no benchmark case ran (does the filter match a registered case?)")
    for case in cases:
        name = case.get("name", "?")
        if case.get("error_occurred"):
            problems.append(f"{name}: error: {case.get('error_message', '')}")
            continue
        for counter in counters:
            if counter not in case:
                problems.append(f"{name}: counter {counter} is missing")
            elif not isinstance(case[counter], (int, float)) or not math.isfinite(case[counter]):
                problems.append(f"{name}: counter {counter} = {case[counter]!r} is not finite")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counters", required=True, help="comma-separated counter names every case must carry")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the bench binary and its arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    run = subprocess.run(command, capture_output=True, text=True)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        print(f"{command[0]} exited with {run.returncode}")
        return 1
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError as e:
        print(f"{command[0]} did not print JSON ({e}):\n{run.stdout[:2000]}")
        return 1
    problems = check(report, [c for c in args.counters.split(",") if c])
    for p in problems:
        print(p)
    if not problems:
        names = ", ".join(c["name"] for c in report["benchmarks"])
        print(f"ok: {names} carry {args.counters}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
