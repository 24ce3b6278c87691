#!/usr/bin/env python3
"""The training program under faults: SIGTERM mid-epoch and SIGINT at an epoch's end stop it with a
checkpoint that --resume continues bit for bit; a full disk (write faults preloaded into the
program) while a checkpoint or a metrics line is written fails with one line naming the file and
leaves the earlier files whole; a second run on a work dir in use is refused at once; and SIGKILL at
random moments, again and again on one work dir, leaves every checkpoint whole, last_checkpoint
naming one, no pile of temporary files, and a resume that ends where an uninterrupted run does.
Fashion-MNIST from /usr/share/datasets/fashion-mnist (skipped without it). Every run and every wait
is bounded.

Its summary lines and `--count` are doctest's (tests/script_cases.py).

Usage: tests/test_train_faults.py TRAIN_PROGRAM FAULT_INJECT_LIBRARY [--count]"""
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from script_cases import Cases
from train_jobs import RUN_LIMIT_S, main, run, safetensors_content

# 128 iterations per epoch of a few ms each, and a validation pass over the whole test set: room for
# a signal to land mid-epoch or during the validation and the checkpoints that follow it.
COMMON = ["--model", "mlp", "--train-samples", "4096", "--val-samples", "10000", "--batch-size", "32",
          "--num-workers", "0", "--threads", "1", "--epochs", "2", "--log-interval", "4"]
# Epochs of one iteration, each ending in checkpoints: most of the time goes to writing them. One
# epoch file kept: each save prunes the file last_checkpoint named until just before.
SHORT_EPOCHS = ["--model", "mlp", "--train-samples", "32", "--val-samples", "32", "--batch-size", "32",
                "--num-workers", "0", "--threads", "1", "--log-interval", "1", "--keep-checkpoints", "1"]
KILL_SEED = 20240518
KILL_TRIALS = 15
CASES = Cases()
case = CASES.case
TRAIN = None
INJECTOR = None
_references = {}


def use_program(path):
    global TRAIN
    TRAIN = path


def reference(*flags):
    """The work dir of an uninterrupted run with `flags` (made once; removed at exit)."""
    if flags not in _references:
        wd = tempfile.TemporaryDirectory()
        code, _, err = run([TRAIN, *flags, "--work-dir", wd.name])
        assert code == 0, f"the uninterrupted run: exit status {code}: {err}"
        _references[flags] = wd
    return Path(_references[flags].name)


def model_bytes(path):
    """The model tensors of the checkpoint at `path`, checked whole."""
    _, tensors = safetensors_content(path)
    return {k: v for k, v in tensors.items() if k.startswith("model.")}


def assert_same_model(path, ref_path):
    ours, theirs = model_bytes(path), model_bytes(ref_path)
    assert ours.keys() == theirs.keys() and ours, f"{path}: tensors {sorted(ours)} vs {sorted(theirs)}"
    for name in ours:
        assert ours[name] == theirs[name], f"{path}: {name} differs from the uninterrupted run's {ref_path}"


def temporaries(wd):
    """write_file_atomic's leftovers ("<name>.tmp.<pid>") in the work dir, by name."""
    return sorted(p.name for p in Path(wd).iterdir() if re.search(r".\.tmp\.\d+$", p.name))


def pointed(wd):
    """The checkpoint last_checkpoint names, checked to be one absolute path of a whole file."""
    text = Path(wd, "last_checkpoint").read_text()
    assert text.endswith("\n") and text.count("\n") == 1, f"last_checkpoint holds {text!r}"
    path = Path(text.strip())
    assert path.is_absolute() and path.parent == Path(wd), f"last_checkpoint names {path}, outside {wd}"
    safetensors_content(path)
    return path


def metric_lines(wd):
    """The JSON lines of scalars.json, checked to be whole lines only."""
    text = Path(wd, "scalars.json").read_text()
    assert text.endswith("\n"), f"scalars.json ends in an unfinished line: {text[-200:]!r}"
    return [json.loads(line) for line in text.splitlines()]


def wait_for_line(proc, pattern, limit_s=RUN_LIMIT_S):
    """Reads proc's stdout (a binary pipe) until a line matching `pattern`; returns what was read."""
    seen = b""
    deadline = time.monotonic() + limit_s
    while not re.search(pattern.encode(), seen, re.M):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
        chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
        assert chunk, f"no line matching {pattern!r} ({'timed out' if not ready else 'the program ended'}): {seen[-2000:]!r}"
        seen += chunk
    return seen.decode()


def start(*args, env=None):
    return subprocess.Popen([TRAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def finish(proc, limit_s=RUN_LIMIT_S):
    """(exit status, stdout, stderr) once proc ends, killed if it outlives limit_s."""
    try:
        out, err = proc.communicate(timeout=limit_s)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out.decode(), err.decode()


def stop_with(sig, after_line, wd, delay_s=0):
    """Runs COMMON in `wd`, sends `sig` delay_s after a line matching `after_line` is out, and checks
    the run stopped with status 128 + sig and a checkpoint that last_checkpoint names; returns its
    file name, the iterations run, and the output."""
    proc = start(*COMMON, "--work-dir", wd)
    try:
        out = wait_for_line(proc, after_line)
        time.sleep(delay_s)
    finally:
        proc.send_signal(sig)
        code, rest, err = finish(proc)
    out += rest
    assert code == 128 + sig, f"exit status {code} after {sig.name}: {err}"
    name = pointed(wd).name
    m = re.search(r"^train: stopped after (\d+) iterations", out, re.M)
    assert m, out[-2000:]
    assert not temporaries(wd) and not Path(wd, ".lock").exists(), sorted(os.listdir(wd))
    metric_lines(wd)
    return name, int(m.group(1)), out


def resume_to_the_end(wd, flags=COMMON, final=None):
    """Resumes `flags` from last_checkpoint and checks the weights in `final` (by default the last
    epoch's checkpoint) are the uninterrupted run's."""
    start_from = pointed(wd)
    code, out, err = run([TRAIN, *flags, "--work-dir", wd, "--resume"])
    assert code == 0, f"--resume: exit status {code}: {err}"
    assert f"Resumed from {start_from}" in out, out[-2000:]
    final = final or f"epoch_{flags[flags.index('--epochs') + 1]}.safetensors"
    assert_same_model(Path(wd, final), reference(*flags) / final)
    metric_lines(wd)


@case
def sigterm_mid_epoch_stops_with_a_checkpoint_and_resume_ends_bit_for_bit():
    with tempfile.TemporaryDirectory() as wd:
        # The stop is checked after the line: the signal may still land in iteration 4.
        name, stopped_at, _ = stop_with(signal.SIGTERM, r"^Epoch\(train\)  \[1\]\[  4/128\]", wd)
        assert 4 <= stopped_at < 128 and name == f"iter_{stopped_at}.safetensors", f"{name} after {stopped_at} iterations"
        resume_to_the_end(wd)


@case
def sigint_at_the_epochs_end_lets_validation_and_checkpoints_finish_and_stops_next_epoch():
    # Sent 20 ms after the epoch's last line, it lands in the validation pass (some 100 ms) or in the
    # writing of epoch_1's checkpoints, which finish; the run stops after an iteration of epoch 2 (or,
    # should the signal beat the stop check of iteration 128, at the epoch's end with epoch_1).
    with tempfile.TemporaryDirectory() as wd:
        name, stopped_at, out = stop_with(signal.SIGINT, r"^Epoch\(train\)  \[1\]\[128/128\]", wd, delay_s=0.02)
        print(f"  stopped after {stopped_at} iterations with {name}")
        assert (128 < stopped_at < 256 and name == f"iter_{stopped_at}.safetensors") or \
            (stopped_at == 128 and name == "epoch_1.safetensors"), f"{name} after {stopped_at} iterations"
        assert "Epoch(val) [1][313/313]" in out, out[-2000:]
        assert safetensors_content(Path(wd, "epoch_1.safetensors"))[0]["iteration"] == "128"
        resume_to_the_end(wd)


def full_disk_run(wd, limit_bytes, only=None):
    """COMMON in `wd` with writes to regular files (those whose path contains `only`) failing with
    ENOSPC after limit_bytes; checks it fails with one error line and returns it."""
    env = dict(os.environ, LD_PRELOAD=INJECTOR, EMBER_FAULT_ENOSPC_AFTER_BYTES=str(limit_bytes))
    if only:
        env["EMBER_FAULT_ENOSPC_PATH"] = only
    code, out, err = finish(start(*COMMON, "--work-dir", wd, env=env))
    assert code == 1, f"exit status {code} on a full disk: {err}"
    assert err.count("\n") == 1 and err.startswith("train: error: "), f"not one error line: {err!r}"
    assert not temporaries(wd) and not Path(wd, ".lock").exists(), sorted(os.listdir(wd))
    return err


@case
def a_full_disk_during_a_checkpoint_names_it_and_keeps_the_earlier_ones():
    ref = reference(*COMMON)
    checkpoint = Path(ref, "epoch_1.safetensors").stat().st_size
    # Everything epoch 1 wrote (scalars, epoch_1, best_accuracy_top1, last_checkpoint), epoch 2's
    # scalars, then half of epoch_2.safetensors.
    before = (Path(ref, "scalars.json").stat().st_size + 2 * checkpoint + Path(ref, "last_checkpoint").stat().st_size)
    with tempfile.TemporaryDirectory() as wd:
        err = full_disk_run(wd, before + checkpoint // 2)
        assert f"'{wd}/epoch_2.safetensors': No space left on device" in err, err
        assert pointed(wd) == Path(wd, "epoch_1.safetensors")
        assert sorted(os.listdir(wd)) == ["best_accuracy_top1.safetensors", "epoch_1.safetensors", "last_checkpoint",
                                          "scalars.json"], sorted(os.listdir(wd))
        safetensors_content(Path(wd, "best_accuracy_top1.safetensors"))
        resume_to_the_end(wd)


@case
def a_full_disk_during_a_metrics_line_names_the_file_and_takes_the_part_back():
    ref_lines = Path(reference(*COMMON), "scalars.json").read_text().splitlines(keepends=True)
    epoch_1 = [line for line in ref_lines if json.loads(line)["epoch"] == 1]
    with tempfile.TemporaryDirectory() as wd:
        # Room for epoch 1's lines and 60 bytes of the next: that line is cut short, then refused.
        err = full_disk_run(wd, sum(len(line) for line in epoch_1) + 60, only="scalars.json")
        assert f"{wd}/scalars.json: No space left on device" in err, err
        assert len(metric_lines(wd)) == len(epoch_1), Path(wd, "scalars.json").read_text()[-1000:]
        assert pointed(wd) == Path(wd, "epoch_1.safetensors")
        resume_to_the_end(wd)


@case
def a_second_run_on_a_work_dir_in_use_is_refused_at_once():
    flags = [*SHORT_EPOCHS, "--epochs", "20"]
    with tempfile.TemporaryDirectory() as wd:
        first = start(*flags, "--work-dir", wd)
        try:
            wait_for_line(first, r"^Epoch\(train\)")  # past its Runner's start: it holds the work dir
            first.send_signal(signal.SIGSTOP)  # and keeps it, however fast this machine
            code, out, err = run([TRAIN, *flags, "--work-dir", wd])
        finally:
            first.send_signal(signal.SIGCONT)
            first_code, _, first_err = finish(first)
        assert code == 1 and err == (f"train: error: work dir {wd} is in use by another run (pid {first.pid}); "
                                     "wait for it to end or choose another work dir\n"), f"exit status {code}: {err!r}"
        assert "Epoch(" not in out, out
        assert first_code == 0, f"the first run: exit status {first_code}: {first_err}"
        steps = [(r["mode"], r["step"]) for r in metric_lines(wd)]
        assert steps == [(mode, epoch) for epoch in range(1, 21) for mode in ("train", "val")], steps
        assert pointed(wd) == Path(wd, "epoch_20.safetensors")
        assert not Path(wd, ".lock").exists()
        code, out, err = run([TRAIN, *flags, "--work-dir", wd, "--resume"])  # the lock went with the first run
        assert code == 0 and "at epoch 20, iteration 20" in out, f"exit status {code}: {err}"


@case
def sigkill_at_random_moments_leaves_every_checkpoint_whole_and_resume_ends_bit_for_bit():
    rng = random.Random(KILL_SEED)
    flags = [*SHORT_EPOCHS, "--epochs", "5000"]  # more than any machine gets through in the trials
    print(f"  {KILL_TRIALS} kills, delays from seed {KILL_SEED}")
    after_val = in_write = unnamed = 0
    with tempfile.TemporaryDirectory() as wd:
        pids = []         # of every trial, in order
        cleaned_from = 0  # the first trial whose temporaries may still be there
        for trial in range(KILL_TRIALS):
            resume = ["--resume"] if Path(wd, "last_checkpoint").exists() else []
            proc = start(*flags, "--work-dir", wd, *resume)
            pids.append(proc.pid)
            try:
                # From the header, printed just before the Runner starts: the kill lands anywhere from
                # the lock and the resume to some tens of epochs later.
                out = wait_for_line(proc, r"^train: mlp")
                time.sleep(rng.uniform(0, 0.4))
            finally:
                proc.send_signal(signal.SIGKILL)
                code, rest, err = finish(proc)
            out += rest
            assert code == -signal.SIGKILL, f"trial {trial}: exit status {code}: {err}"
            # After an epoch's val line come its checkpoints (and then the next step's few ms).
            after_val += out.rstrip().splitlines()[-1].startswith("Epoch(val)")
            if "Resumed from" in out or "Epoch(" in out:  # past the Runner's start: earlier leftovers removed
                cleaned_from = trial
            for name in Path(wd).glob("*.safetensors"):
                safetensors_content(name)
            left = temporaries(wd)
            left_pids = [int(name.rsplit(".", 1)[1]) for name in left]
            assert all(pid in pids[cleaned_from:] for pid in left_pids) and left_pids.count(proc.pid) <= 1, \
                f"trial {trial}: temporaries {left} (trials from {cleaned_from} had pids {pids[cleaned_from:]})"
            in_write += proc.pid in left_pids
            if Path(wd, "last_checkpoint").exists():
                last = pointed(wd)
                newest = max(int(p.name[6:-12]) for p in Path(wd).glob("epoch_*.safetensors"))
                unnamed += last.name != f"epoch_{newest}.safetensors"  # written, not yet named
        print(f"  {after_val} after a val line (in the checkpoint writes or the next step), {in_write} inside a "
              f"file's write (its temporary left), {unnamed} after a checkpoint was written and before "
              f"last_checkpoint named it")
        # Five epochs past the last checkpoint, against a run of as many iterations straight.
        stop = int(safetensors_content(pointed(wd))[0]["iteration"]) + 5
        resume_to_the_end(wd, [*flags, "--max-iters", str(stop)], f"epoch_{stop}.safetensors")
        assert not temporaries(wd), temporaries(wd)
        print(f"  resumed from iteration {stop - 5} to {stop}")


if __name__ == "__main__":
    args = sys.argv[1:]
    INJECTOR = args.pop(1) if len(args) > 1 and args[1] != "--count" else None
    if INJECTOR is None and "--count" not in args:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(args, CASES, __doc__, use_program))
