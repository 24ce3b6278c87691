#!/usr/bin/env python3
"""Smoke check of a bench binary: runs it (the command after --) with --benchmark_format=json and
fails unless it ran at least one case, no case reported an error, and every case carries each
counter named in --counters with a finite value. With --expect-failure it checks the opposite
outcome: every case reported an error and the binary said so in its exit status (1), as a script
running it needs."""
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


def expect_failure(command, run):
    """0 when the run failed as it should: exit status 1 and an error in every case of its JSON."""
    try:
        cases = json.loads(run.stdout).get("benchmarks", [])
    except json.JSONDecodeError as e:
        print(f"{command[0]} did not print JSON ({e}):\n{run.stdout[:2000]}")
        return 1
    problems = [] if cases else ["no benchmark case ran"]
    problems += [f"{c.get('name', '?')}: no error reported" for c in cases if not c.get("error_occurred")]
    if run.returncode != 1:
        problems.append(f"{command[0]} exited with {run.returncode}, expected 1 after a failed case")
    for p in problems:
        print(p)
    if not problems:
        print(f"ok: {len(cases)} failed case(s), exit status 1")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counters", default="", help="comma-separated counter names every case must carry")
    parser.add_argument("--expect-failure", action="store_true",
                        help="pass only when every case failed and the binary exited 1")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the bench binary and its arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    run = subprocess.run(command, capture_output=True, text=True)
    sys.stderr.write(run.stderr)
    if args.expect_failure:
        return expect_failure(command, run)
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
