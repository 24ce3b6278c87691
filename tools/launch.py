#!/usr/bin/env python3
"""Runs a program N times on this machine as ranks 0..N-1 of one job, with the variables torchrun
gives its workers, so that ember's process group (or any program that reads torchrun's environment)
starts as it would under torchrun. `./ember launch` calls it.

Each rank gets RANK, LOCAL_RANK (= RANK), WORLD_SIZE and LOCAL_WORLD_SIZE (= N), GROUP_RANK=0,
MASTER_ADDR, MASTER_PORT and EMBER_STORE_PORT: torchrun's agent serves its own store on MASTER_PORT,
so ember's store listens on a port of its own, under torchrun and here alike. Like torchrun, it sets
OMP_NUM_THREADS=1 when it is unset and N > 1, so that N ranks do not each start a thread per core.

Each rank runs in a process group of its own. When a rank exits non-zero or is killed by a signal,
the launcher sends SIGTERM to every rank's group, SIGKILL after a grace period, and exits non-zero
naming the rank and its status; SIGINT, SIGTERM and SIGHUP sent to the launcher are forwarded the
same way. A launcher killed without a chance to clean up (SIGKILL) still takes the ranks along:
the kernel kills each (the rank's own process; what it started survives that case).

Usage: tools/launch.py -n N [options] PROGRAM [ARGS...]   (--help lists the options)"""
import argparse
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

MAX_RANKS = 256     # ranks of one machine; more is a typo, not a job
GRACE_S = 3.0       # between SIGTERM and SIGKILL
POLL_S = 0.05       # how often the ranks are checked: a failure ends the job within this
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def fail(message):
    print(f"ember launch: {message}", file=sys.stderr)
    sys.exit(2)


def rank_count(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_RANKS:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_RANKS}, got '{text}'")
    return n


def port_number(text):
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got '{text}'")
    return port


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="./ember launch",
        description="Run PROGRAM N times on this machine as the ranks of one job, with torchrun's "
                    "environment. A shell command runs as: sh -c '...'.")
    p.add_argument("-n", "--nproc", type=rank_count, required=True, metavar="N", help="number of ranks")
    p.add_argument("--master-addr", default="127.0.0.1", metavar="A",
                   help="MASTER_ADDR, an address of this machine (default 127.0.0.1)")
    p.add_argument("--master-port", type=port_number, metavar="P",
                   help="MASTER_PORT (default: a free port)")
    p.add_argument("--store-port", type=port_number, metavar="P",
                   help="EMBER_STORE_PORT, where rank 0 serves ember's store (default: a free port)")
    p.add_argument("--tag-output", action="store_true",
                   help="prefix each line a rank prints with [rankR]: (whole lines; stdout and stderr apart)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="end the job after S seconds and exit 124")
    p.add_argument("program", nargs="?", help="the program each rank runs")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = p.parse_args(argv)
    if args.program is None:
        p.error("no program given: ./ember launch -n N PROGRAM [ARGS...]")
    if shutil.which(args.program) is None:
        where = "is not an executable file" if os.sep in args.program else "is not found on PATH"
        fail(f"program '{args.program}' {where}")
    if args.master_port is not None and args.master_port == args.store_port:
        fail(f"--master-port and --store-port must differ, both are {args.master_port}")
    if args.timeout is not None and not args.timeout > 0:
        fail(f"--timeout must be a positive number of seconds, got {args.timeout}")
    return args


def master_family(addr):
    """The address family of addr, after checking that it belongs to this machine: every rank
    runs here, and rank 0's store listens on it."""
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(addr, 0, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        fail(f"master address '{addr}' does not resolve: {e.strerror}")
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind(sockaddr)
        except OSError as e:
            fail(f"master address '{addr}' is not an address of this machine ({e.strerror})")
    return family


def choose_ports(family, wanted):
    """The ports in wanted, each checked free, with None replaced by a free port the kernel picks.
    Checked and picked on every interface (the store may listen on any), all held open together
    so that two picks differ; another process may still take one before rank 0 binds it."""
    held = []
    try:
        for port in wanted:
            s = socket.socket(family, socket.SOCK_STREAM)
            held.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds
            try:
                s.bind(("", port or 0))
            except OSError as e:
                fail(f"port {port} is not free on this machine ({e.strerror})")
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def rank_env(rank, args, master_port, store_port):
    env = dict(os.environ,
               RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0",
               WORLD_SIZE=str(args.nproc), LOCAL_WORLD_SIZE=str(args.nproc),
               MASTER_ADDR=args.master_addr, MASTER_PORT=str(master_port),
               EMBER_STORE_PORT=str(store_port))
    if args.nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def die_with(launcher_pid):
    """A function to run in each rank between fork and exec: the kernel sends the rank SIGKILL if
    the launcher dies first, which is how a SIGKILLed launcher still leaves no rank behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1

    def set_death_signal():
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != launcher_pid:  # it died before prctl took effect
            os._exit(1)
    return set_death_signal


def pump(stream, out, tag, lock):
    """Copies a rank's output to out a whole line at a time, each behind the rank's tag. Keeps
    reading when out is closed, so that a rank never blocks on a full pipe."""
    for line in iter(stream.readline, b""):
        if out is None:
            continue
        if not line.endswith(b"\n"):
            line += b"\n"
        try:
            with lock:
                out.write(tag + line)
                out.flush()
        except OSError:
            out = None


def signal_groups(procs, sig):
    for p in procs:
        try:
            os.killpg(p.pid, sig)  # the rank's group: the rank and whatever it started
        except ProcessLookupError:
            pass


def living_groups(procs):
    """The ranks whose process group still has a process that is not a zombie. A zombie runs
    nothing; an orphan's waits for init to reap it, which can take seconds."""
    for p in procs:
        p.poll()  # reap the rank itself
    pgids = {p.pid: rank for rank, p in enumerate(procs)}
    living = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # it just ended
            continue
        state, _ppid, pgrp = stat[stat.rindex(")") + 2:].split()[:3]  # the name may hold spaces
        if state != "Z" and int(pgrp) in pgids:
            living.add(pgids[int(pgrp)])
    return living


def end_all(procs, sig):
    """Sends sig to every rank's group, waits up to GRACE_S for them to empty, then SIGKILLs what
    is left. Returns the ranks that had to be killed."""
    signal_groups(procs, sig)
    deadline = time.monotonic() + GRACE_S
    while living_groups(procs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    stubborn = [r for r, p in enumerate(procs) if p.poll() is None]
    signal_groups(procs, signal.SIGKILL)
    for p in procs:
        try:
            p.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): say so below
            pass
    return stubborn


def status(code):
    return f"exit status {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"


def supervise(procs, timeout, received):
    """Waits for the ranks, or for a signal in received. Returns (exit code, None) when every rank
    succeeded, else (exit code, (why the job ends, the signal to send the ranks))."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if received:
            name = signal.Signals(received[0]).name
            return 128 + received[0], (f"received {name}, forwarded it to every rank", received[0])
        for rank, p in enumerate(procs):
            code = p.poll()
            if code:
                return (code if code > 0 else 128 - code), (f"rank {rank} ended with {status(code)}",
                                                             signal.SIGTERM)
        if all(p.returncode is not None for p in procs):
            return 0, None
        if deadline is not None and time.monotonic() > deadline:
            return 124, (f"the job ran past --timeout {timeout:g} s", signal.SIGTERM)
        time.sleep(POLL_S)


def main(argv):
    args = parse_args(argv)
    family = master_family(args.master_addr)
    master_port, store_port = choose_ports(family, [args.master_port, args.store_port])
    print(f"ember launch: {args.nproc} rank(s) of {args.program}, MASTER_ADDR={args.master_addr} "
          f"MASTER_PORT={master_port} EMBER_STORE_PORT={store_port}"
          + (", OMP_NUM_THREADS=1 (unset here)" if args.nproc > 1 and "OMP_NUM_THREADS" not in os.environ
             else ""), file=sys.stderr)

    received = []  # signals to the launcher, caught from before the first rank starts: none is lost
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, _frame: received.append(signum))
    pipe = subprocess.PIPE if args.tag_output else None
    set_death_signal = die_with(os.getpid())
    procs = []
    try:
        for rank in range(args.nproc):
            procs.append(subprocess.Popen(
                [args.program] + args.args, env=rank_env(rank, args, master_port, store_port),
                stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe,
                start_new_session=True,  # a group per rank; the launcher alone gets the terminal's ^C
                preexec_fn=set_death_signal))
    except OSError as e:
        end_all(procs, signal.SIGKILL)
        fail(f"cannot start rank {len(procs)}: {e}")

    # Threads start after the last fork: preexec_fn is not safe while other threads run.
    pumps = []
    if args.tag_output:
        lock = threading.Lock()
        for rank, p in enumerate(procs):
            tag = f"[rank{rank}]: ".encode()
            for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                pumps.append(threading.Thread(target=pump, args=(stream, out, tag, lock), daemon=True))
                pumps[-1].start()

    code, ended = supervise(procs, args.timeout, received)
    if ended is None:
        end_all(procs, signal.SIGTERM)  # whatever the ranks left running in their groups
    else:
        reason, sig = ended
        print(f"ember launch: {reason}; ending the job", file=sys.stderr)
        stubborn = end_all(procs, sig)
        statuses = ", ".join(f"rank {r} {status(p.returncode) if p.returncode is not None else 'still running'}"
                             + (f" (SIGKILL after {GRACE_S:g} s)" if r in stubborn else "")
                             for r, p in enumerate(procs))
        # Repeated at the end, where it is not lost among the ranks' last lines.
        print(f"ember launch: {reason}; the ranks ended: {statuses}; exiting with status {code}",
              file=sys.stderr)
    for t in pumps:
        t.join(timeout=GRACE_S)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
