#!/usr/bin/env python3
"""Runs a build's tests from its meson-info/intro-tests.json without meson, as `meson test` would.

For a build carried to another machine (tools/gpu_bundle.sh): `meson test` there refuses a build
directory that another Meson version configured, while the test list is plain JSON. Tests run
several at a time, each under its timeout; exit 77 is a skip, as in meson. Writes a log in meson's
testlog.json shape and prints each result, the failures' output and the totals (tools/test_totals.py).
Usage: tools/run_tests.py BUILD_DIR --suite NAME [--suite NAME] [--jobs N] [--log FILE]
"""
import argparse, concurrent.futures, json, os, subprocess, sys, time
from pathlib import Path

SKIP_EXIT = 77  # meson's (and automake's) exit code for a skipped test


def test_environment(test):
    """The test's variables over ours; a search path it sets (meson sets LD_LIBRARY_PATH to the build
    directory) goes in front of ours instead of replacing it (a bundle's libraries are on ours)."""
    env = dict(os.environ)
    for key, value in (test.get("env") or {}).items():
        env[key] = f"{value}:{env[key]}" if key.endswith("PATH") and env.get(key) else value
    return env


def run_one(test, timeout_scale):
    env = test_environment(test)
    timeout = (test.get("timeout") or 30) * timeout_scale
    start = time.monotonic()
    try:
        proc = subprocess.run(test["cmd"], env=env, cwd=test.get("workdir") or None, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
        result = "OK" if proc.returncode == 0 else "SKIP" if proc.returncode == SKIP_EXIT else "FAIL"
        out, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        result, code = "TIMEOUT", None
    except OSError as e:
        result, out, code = "FAIL", f"could not start {test['cmd'][0]}: {e}", None
    return {"name": test["name"], "result": result, "returncode": code, "duration": time.monotonic() - start,
            "stdout": out, "command": test["cmd"], "env": test.get("env") or {}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--suite", action="append", required=True, help="run the tests of this suite")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout-multiplier", type=float, default=1.0)
    parser.add_argument("--log", type=Path, help="default: BUILD_DIR/meson-logs/testlog.json")
    args = parser.parse_args()

    listing = args.build_dir / "meson-info" / "intro-tests.json"
    try:
        tests = json.loads(listing.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"run_tests: cannot read the test list {listing}: {e}")
    # meson names suites "project:suite"
    chosen = [t for t in tests if any(s.split(":")[-1] in args.suite for s in t.get("suite", []))]
    if not chosen:
        sys.exit(f"run_tests: no test in suite(s) {', '.join(args.suite)} in {listing}")

    log = args.log or args.build_dir / "meson-logs" / "testlog.json"
    log.parent.mkdir(parents=True, exist_ok=True)
    # As meson: the tests marked is_parallel: false run alone, after the others.
    parallel = [t for t in chosen if t.get("is_parallel", True)]
    alone = [t for t in chosen if not t.get("is_parallel", True)]
    finished = 0
    with log.open("w") as out:
        for batch, jobs in ((parallel, args.jobs), (alone, 1)):
            with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
                futures = [pool.submit(run_one, t, args.timeout_multiplier) for t in batch]
                for done in concurrent.futures.as_completed(futures):
                    r = done.result()
                    finished += 1
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    print(f"{finished:3}/{len(chosen)} {r['name']:<28} {r['result']:<8} {r['duration']:6.1f}s", flush=True)
                    if r["result"] in ("FAIL", "TIMEOUT"):
                        print(f"--- output of {r['name']} (exit {r['returncode']}) ---\n{r['stdout'][-20000:]}\n---",
                              flush=True)
    totals = subprocess.run([sys.executable, str(Path(__file__).with_name("test_totals.py")), str(log)])
    sys.exit(totals.returncode)


if __name__ == "__main__":
    main()
