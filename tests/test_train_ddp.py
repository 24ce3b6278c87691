#!/usr/bin/env python3
"""The training program with --strategy ddp on 2 ranks over Gloo: rank 0 alone logs and writes the
work dir (its TensorBoard event file too), a plain one-process run resumes its checkpoint, every CPU precision mode trains, SIGTERM
stops every rank at the same step with a checkpoint, and a rank killed mid-epoch makes the other
exit non-zero within the timeout, naming it, with the last checkpoint still loadable. Fashion-MNIST
from /usr/share/datasets/fashion-mnist (skipped without it). Every run is bounded by a timeout.

Its summary lines and `--count` are doctest's (tests/script_cases.py).

Usage: tests/test_train_ddp.py TRAIN_PROGRAM [--count]"""
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from script_cases import Cases
from train_jobs import DIST_TIMEOUT_S, ROOT, RUN_LIMIT_S, kill_rank_1_in_epoch_2, main, run

TINY = ["--model", "mlp", "--train-samples", "1024", "--val-samples", "256", "--batch-size", "32",
        "--num-workers", "0", "--threads", "1", "--log-interval", "8"]
CASES = Cases()
case = CASES.case
TRAIN = None


def use_program(path):
    global TRAIN
    TRAIN = path


def launch_train(n, *args):
    return run([sys.executable, str(ROOT / "tools" / "launch.py"), "-n", str(n), "--timeout", str(RUN_LIMIT_S - 10),
                TRAIN, *args])


@case
def rank_0_alone_logs_and_writes_and_one_process_resumes():
    with tempfile.TemporaryDirectory() as wd:
        code, out, err = launch_train(2, "--strategy", "ddp", "--epochs", "1", "--work-dir", wd, "--tensorboard", *TINY)
        assert code == 0, f"exit status {code}: {err}"
        assert "ddp on 2 ranks (gloo), global batch 64" in out and "global_batch: 64" in out, out
        assert out.count("Epoch(val)") == 1 and out.count("Epoch(train)  [1][16/16]") == 1, out
        assert out.count("train: done") == 1, out
        names = sorted(os.listdir(wd))
        assert names == ["best_accuracy_top1.safetensors", "epoch_1.safetensors", "last_checkpoint", "scalars.json",
                         "tensorboard"], names
        events = os.listdir(Path(wd, "tensorboard"))
        assert len(events) == 1 and events[0].startswith("events.out.tfevents."), events
        # The checkpoint holds the module's state, not DDP's: plain train resumes it.
        code, out, err = run([TRAIN, "--epochs", "2", "--work-dir", wd, "--resume", *TINY])
        assert code == 0, f"exit status {code}: {err}"
        assert "Resumed from" in out and "at epoch 1, iteration 16" in out, out
        assert "Epoch(val) [2]" in out, out


@case
def every_cpu_precision_mode_trains_under_ddp():
    # tf32 changes only GPU kernels; the others run on the CPU, 16-bit buckets included (naive_*, pure_bf16).
    for precision in ("fp32", "amp_fp16", "amp_bf16", "naive_fp16", "naive_bf16", "pure_bf16"):
        with tempfile.TemporaryDirectory() as wd:
            code, out, err = launch_train(2, "--strategy", "ddp", "--precision", precision, "--epochs", "1",
                                          "--work-dir", wd, *TINY)
            assert code == 0, f"{precision}: exit status {code}: {err}"
            assert out.count("Epoch(val)") == 1 and "accuracy/top1" in out, f"{precision}: {out}"
            losses = [float(line.split("loss: ")[1].split()[0]) for line in out.splitlines() if "loss: " in line]
            assert losses and all(0 < x < 10 for x in losses), f"{precision}: losses {losses}"


@case
def sigterm_stops_every_rank_at_the_same_step_with_a_checkpoint():
    with tempfile.TemporaryDirectory() as wd:
        args = [sys.executable, str(ROOT / "tools" / "launch.py"), "-n", "2", "--timeout", str(RUN_LIMIT_S - 10), TRAIN,
                "--strategy", "ddp", "--epochs", "8", "--work-dir", wd, "--dist-timeout", str(DIST_TIMEOUT_S),
                *TINY[:2], "--train-samples", "4096", *TINY[4:6], "--batch-size", "32", "--num-workers", "0",
                "--threads", "1", "--log-interval", "4"]
        job = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for line in job.stdout:
                if line.startswith("Epoch(train)  [1]"):
                    break
            job.send_signal(signal.SIGTERM)  # the launcher forwards it to every rank
            out, err = job.communicate(timeout=30)
        finally:
            job.kill()
            job.wait()
        assert job.returncode == 128 + signal.SIGTERM, f"exit status {job.returncode}: {err}"
        assert "error" not in err, err  # no rank failed waiting for another
        pointer = Path(wd, "last_checkpoint").read_text().strip()
        assert Path(pointer).name.startswith("iter_"), pointer
        stopped_at = int(Path(pointer).name[len("iter_"):-len(".safetensors")])
        assert stopped_at % 4 == 0, f"stopped after iteration {stopped_at}, not at a log line"
        code, out, err = run([TRAIN, "--epochs", "1", "--work-dir", wd, "--resume", *TINY[:2], "--train-samples", "4096",
                              *TINY[4:]])
        assert code == 0 and f"iteration {stopped_at}" in out, f"exit status {code}: {out}{err}"


@case
def a_killed_rank_makes_the_other_fail_within_the_timeout_and_checkpoints_stay_loadable():
    with tempfile.TemporaryDirectory() as wd:
        kill_rank_1_in_epoch_2([TRAIN, "--strategy", "ddp", "--epochs", "3", "--work-dir", wd, "--dist-timeout",
                                str(DIST_TIMEOUT_S), *TINY[:2], "--train-samples", "4096", *TINY[4:]])
        pointer = Path(wd, "last_checkpoint").read_text().strip()
        assert pointer.endswith("epoch_1.safetensors"), pointer
        code, out, err = run([TRAIN, "--epochs", "2", "--work-dir", wd, "--resume", *TINY[:2], "--train-samples", "4096",
                              *TINY[4:]])
        assert code == 0 and "at epoch 1, iteration 64" in out, f"exit status {code}: {out}{err}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], CASES, __doc__, use_program))
