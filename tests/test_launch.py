#!/usr/bin/env python3
"""Tests of `./ember launch` (tools/launch.py) on shell commands: the variables each rank gets, the
ports, a failing rank ending the job within seconds, signals, and the errors for bad arguments.
Every launcher run is bounded by a timeout, so that a broken launcher fails the test, never hangs it.

Its summary lines and `--count` are doctest's (tests/script_cases.py).

Usage: tests/test_launch.py [--count]"""
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from script_cases import Cases

EMBER = Path(__file__).resolve().parent.parent / "ember"
RUN_LIMIT_S = 15     # no launcher run here may take longer
FAIL_FAST_S = 2.0    # from a rank's failure to the launcher's exit
GRACE_S = 3.0        # the launcher's SIGTERM-to-SIGKILL grace (tools/launch.py)
STARTUP_S = 1.0      # the launcher's own start, where a bound counts from it (CI runs tests 2 at a time)
CASES = Cases()
case = CASES.case


def launch(*args, env=None, **kw):
    """Runs ./ember launch ARGS, returns (exit status, stdout, stderr)."""
    r = subprocess.run([str(EMBER), "launch", *args], capture_output=True, text=True,
                       timeout=RUN_LIMIT_S, env=env, **kw)
    return r.returncode, r.stdout, r.stderr


@contextlib.contextmanager
def launcher_in_background(*args, **kw):
    """./ember launch ARGS started in a session of its own; SIGKILLed on the way out if still running."""
    launcher = subprocess.Popen([str(EMBER), "launch", *args], start_new_session=True, **kw)
    try:
        yield launcher
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=5)


def env_without(*names):
    return {k: v for k, v in os.environ.items() if k not in names}


def port_is_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def gone(pid):
    """True when pid runs nothing any more: no such process, or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def save_pid(pid, path):
    """A shell command that writes pid to path whole before path appears (a rename is atomic),
    so that whoever sees the file reads the number."""
    return f"echo {pid} > {path}.tmp && mv {path}.tmp {path}"


def saved_pids(folder, prefix, n):
    """The n pids saved as folder/prefix.<rank>, waiting (bounded) for all of them."""
    paths = [Path(folder, f"{prefix}.{rank}") for rank in range(n)]
    wait_for(lambda: all(p.exists() for p in paths), f"{n} ranks to save their pids")
    return [int(p.read_text()) for p in paths]


def wait_for(predicate, what, limit_s=10.0):
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"waited {limit_s} s for {what}"
        time.sleep(0.05)


VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "MASTER_PORT", "EMBER_STORE_PORT", "OMP_NUM_THREADS"]
PRINT_VARS = 'echo "' + " ".join(f"{v}=[${v}]" for v in VARS) + '"'  # RANK=[0] ...


def rank_vars(stdout):
    """{rank: {variable: value}} from each rank's PRINT_VARS line."""
    ranks = {}
    for line in stdout.splitlines():
        values = dict(re.findall(r"(\w+)=\[([^]]*)\]", line))
        assert set(values) == set(VARS), f"line {line!r} lacks some of {VARS}"
        ranks[int(values["RANK"])] = values
    return ranks


@case
def torchrun_variables_for_each_rank():
    code, out, err = launch("-n", "3", "sh", "-c", PRINT_VARS, env=env_without("OMP_NUM_THREADS"))
    assert code == 0, f"exit status {code}: {err}"
    ranks = rank_vars(out)
    assert sorted(ranks) == [0, 1, 2], f"ranks {sorted(ranks)} in {out!r}"
    for rank, v in ranks.items():
        assert v["LOCAL_RANK"] == str(rank) and v["GROUP_RANK"] == "0", v
        assert v["WORLD_SIZE"] == "3" and v["LOCAL_WORLD_SIZE"] == "3", v
        assert v["MASTER_ADDR"] == "127.0.0.1", v
        assert v["OMP_NUM_THREADS"] == "1", v  # torchrun's default for several ranks
    ports = {(v["MASTER_PORT"], v["EMBER_STORE_PORT"]) for v in ranks.values()}
    assert len(ports) == 1, f"ranks disagree on the ports: {ports}"
    master, store = map(int, ports.pop())
    assert master != store, f"MASTER_PORT and EMBER_STORE_PORT are both {master}"
    for port in (master, store):
        assert 1024 <= port <= 65535 and port_is_free(port), f"port {port} is not a free one"
    assert f"MASTER_PORT={master}" in err, f"the launcher does not say its ports: {err}"


@case
def given_values_are_kept():
    env = dict(os.environ, OMP_NUM_THREADS="4")
    with socket.socket() as a, socket.socket() as b:  # two ports free now, released just before the run
        a.bind(("", 0))
        b.bind(("", 0))
        master, store = a.getsockname()[1], b.getsockname()[1]
    code, out, err = launch("-n", "2", "--master-addr", "localhost", "--master-port", str(master),
                            "--store-port", str(store), "sh", "-c", PRINT_VARS, env=env)
    assert code == 0, f"exit status {code}: {err}"
    for v in rank_vars(out).values():
        assert (v["MASTER_ADDR"], v["MASTER_PORT"], v["EMBER_STORE_PORT"], v["OMP_NUM_THREADS"]) == \
            ("localhost", str(master), str(store), "4"), v


@case
def a_busy_port_is_an_error_naming_it():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for option in ("--master-port", "--store-port"):
            code, _, err = launch("-n", "2", option, str(port), "true")
            assert code != 0 and f"port {port}" in err, f"{option} {port}: exit status {code}, {err!r}"


@case
def bad_arguments_are_errors_naming_them():
    for args, says in [(["-n", "0", "true"], "'0'"), (["-n", "-2", "true"], "'-2'"),
                       (["-n", "two", "true"], "'two'"), (["-n", "100000", "true"], "'100000'"),
                       (["true"], "-n"), (["-n", "2"], "no program"),
                       (["-n", "2", "no-such-program-ember"], "'no-such-program-ember'"),
                       (["-n", "2", "--master-port", "70000", "true"], "'70000'"),
                       (["-n", "2", "--master-addr", "192.0.2.1", "true"], "'192.0.2.1'")]:
        code, out, err = launch(*args)
        assert code == 2 and says in err, f"{args}: exit status {code}, stderr {err!r}"
        assert out == "", f"{args} ran something: {out!r}"


@case
def a_failing_rank_ends_the_others_within_seconds():
    with tempfile.TemporaryDirectory() as tmp:
        # Rank 1 fails once the others have started sleeping; they write their pids first.
        script = f'''
            if [ "$RANK" = 1 ]; then
                while [ ! -e {tmp}/sleep.0 ] || [ ! -e {tmp}/sleep.2 ]; do sleep 0.05; done
                date +%s.%N > {tmp}/failed_at; exit 3
            fi
            sleep 60 & {save_pid("$!", f"{tmp}/sleep.$RANK")}; wait'''
        code, _, err = launch("-n", "3", "sh", "-c", script)
        ended = time.time()
        assert code == 3, f"exit status {code}, not rank 1's 3: {err}"
        assert "rank 1 ended with exit status 3" in err, err
        took = ended - float(Path(tmp, "failed_at").read_text())
        assert took < FAIL_FAST_S, f"the launcher exited {took:.2f} s after rank 1 failed"
        for rank in (0, 2):
            pid = int(Path(tmp, f"sleep.{rank}").read_text())
            assert gone(pid), f"rank {rank}'s sleep (pid {pid}) outlived the launcher"
        print(f"  from rank 1's failure to the launcher's exit: {took:.3f} s")


@case
def a_rank_that_ignores_sigterm_is_killed_after_the_grace_period():
    start = time.monotonic()
    code, _, err = launch("-n", "2", "sh", "-c", 'trap "" TERM; [ "$RANK" = 1 ] && exit 1; sleep 60')
    took = time.monotonic() - start
    assert code == 1 and "rank 0 signal SIGKILL" in err, f"exit status {code}: {err}"
    assert took < STARTUP_S + GRACE_S + FAIL_FAST_S, f"took {took:.2f} s"


@case
def a_rank_killed_by_a_signal_fails_the_job():
    code, _, err = launch("-n", "2", "sh", "-c", '[ "$RANK" = 0 ] && kill -KILL $$; sleep 60')
    assert code == 128 + signal.SIGKILL and "rank 0 ended with signal SIGKILL" in err, \
        f"exit status {code}: {err}"


@case
def sigterm_to_the_launcher_ends_every_rank():
    with tempfile.TemporaryDirectory() as tmp:
        with launcher_in_background("-n", "3", "sh", "-c",
                                    f"sleep 60 & {save_pid('$!', f'{tmp}/sleep.$RANK')}; wait",
                                    stderr=subprocess.PIPE, text=True) as launcher:
            pids = saved_pids(tmp, "sleep", 3)
            launcher.send_signal(signal.SIGTERM)
            _, err = launcher.communicate(timeout=GRACE_S + FAIL_FAST_S)
        assert launcher.returncode == 128 + signal.SIGTERM, f"exit status {launcher.returncode}: {err}"
        assert "received SIGTERM" in err, err
        for rank, pid in enumerate(pids):
            wait_for(lambda: gone(pid), f"rank {rank}'s sleep (pid {pid}) to end", limit_s=2)


@case
def a_sigkilled_launcher_leaves_no_rank_behind():
    with tempfile.TemporaryDirectory() as tmp:
        with launcher_in_background("-n", "2", "sh", "-c",
                                    f"{save_pid('$$', f'{tmp}/rank.$RANK')}; exec sleep 60",
                                    stderr=subprocess.DEVNULL) as launcher:
            pids = saved_pids(tmp, "rank", 2)
            launcher.kill()
        for rank, pid in enumerate(pids):
            wait_for(lambda: gone(pid), f"rank {rank} (pid {pid}) to die with its launcher", limit_s=2)


@case
def all_ranks_succeeding_is_success_and_tagged_lines_stay_whole():
    # Rank 0 finishes first; the launcher waits for rank 1 all the same.
    code, out, err = launch("-n", "2", "--tag-output", "sh", "-c",
                            '[ "$RANK" = 1 ] && sleep 0.3; echo "line of rank $RANK"; echo "error of rank $RANK" >&2')
    assert code == 0, f"exit status {code}: {err}"
    assert sorted(out.splitlines()) == ["[rank0]: line of rank 0", "[rank1]: line of rank 1"], out
    for rank in (0, 1):
        assert f"[rank{rank}]: error of rank {rank}\n" in err, err


@case
def timeout_ends_the_job():
    start = time.monotonic()
    code, _, err = launch("-n", "2", "--timeout", "0.5", "sleep", "60")
    assert code == 124 and "--timeout 0.5" in err, f"exit status {code}: {err}"
    assert time.monotonic() - start < STARTUP_S + 0.5 + FAIL_FAST_S


def main(argv):
    return 0 if CASES.count_requested(argv) else CASES.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
