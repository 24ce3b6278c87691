#!/usr/bin/env python3
"""What calling ember from Python costs: the same work timed three ways, side by side on one machine.

  dispatch/cpu/f32/add/<nograd|grad>  host microseconds per add of two 1-element tensors (lower is better):
      C++      bench_ops' case of that name (ember::add in a loop)
      Python   `x + y` through the ember package
      PyTorch  `x + y` on torch tensors
  train/cpu/fp32/<model>/<batch>      training steps per second as images/s (higher is better):
      C++      bench_train --plain-step's case (train/cpu/fp32/plain/<model>/<batch>): the zoo's model
               and the same step as below, written in C++
      Python   the same step written in Python: zero_grad, forward, cross_entropy, backward, SGD step
               (lr 0.01, momentum 0.9, as bench_train). cnn_28's model is a Python nn.Module subclass
               built from ember.nn layers (nn::SmallCNN's layers, its forward run layer by layer from
               Python); resnet18's is ember.nn.models.resnet18 (its forward one call into C++).
      PyTorch  bench/torch_compare.py's case of that name (torchvision's ResNet-18)
  data/cpu/<set>/<workers>            examples per second through a DataLoader over a Python Dataset
                                      with num_workers=<workers> (persistent), higher is better:
      Python   ember.utils.data.DataLoader
      PyTorch  torch.utils.data.DataLoader
               over the same data set, whose __getitem__ returns NumPy arrays that the default collate
               stacks into the library's tensors. augment: 3x32x32 float32 images, each made by 40
               NumPy passes (work a Python augmentation does), batches of 32; transfer: one 3x224x224
               float32 image, batches of 128 (77 MB to move from a worker per batch).

Every measurement runs in a fresh process, the three sides alternating in a rotating order so that
drift falls on each; the table holds the medians of --repeats runs. PyTorch is optional: without it
that column says none.

Usage: PYTHONPATH=build/python python3 bench/python_overhead.py --bench-dir build/bench
           [--repeats 5] [--threads N] [--torch-python PATH] [--filter REGEX] [--out results.json]
--torch-python: an interpreter that imports torch (and torchvision) when this one does not.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CASES = ["dispatch/cpu/f32/add/nograd", "dispatch/cpu/f32/add/grad", "train/cpu/fp32/cnn_28/128",
         "train/cpu/fp32/resnet18/32", "data/cpu/augment/0", "data/cpu/augment/2", "data/cpu/transfer/0",
         "data/cpu/transfer/2"]
# The counter each kind of case is measured by: microseconds per call, images (examples) per second.
MEASURE = {"dispatch": "us", "train": "img_per_s", "data": "img_per_s"}
ADD_CALLS = 1000        # adds per timed batch, as bench_ops' dispatch case
MIN_SECONDS = 1.0       # each side times at least this long per run


# ---- the Python sides, run in a child process (`--one SIDE CASE`) --------------------------------


def time_batches(fn, min_seconds):
    """Seconds per call of fn (after one warm-up call), over at least min_seconds and 3 calls."""
    fn()
    calls, total = 0, 0.0
    while total < min_seconds or calls < 3:
        start = time.perf_counter()
        fn()
        total += time.perf_counter() - start
        calls += 1
    return total / calls


def add_us(lib, record, min_seconds):
    """Microseconds per `x + y` of 1-element float32 tensors; record: inputs require grad."""
    x = lib.ones(1, requires_grad=record)
    y = lib.ones(1, requires_grad=record)

    def batch():
        for _ in range(ADD_CALLS):
            x + y

    with lib.enable_grad() if record else lib.no_grad():
        return time_batches(batch, min_seconds) * 1e6 / ADD_CALLS


def small_cnn_module(ember, channels, size, classes):
    """nn::SmallCNN's layers as a Python Module subclass: its forward runs layer by layer from Python."""
    nn = ember.nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, 32, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(32)
            self.conv2 = nn.Conv2d(32, 64, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(64)
            self.pool = nn.MaxPool2d(2)
            self.fc1 = nn.Linear(64 * (size // 4) ** 2, 128)
            self.fc2 = nn.Linear(128, classes)

        def forward(self, x):
            x = self.pool(self.bn1(self.conv1(x)).relu())
            x = self.pool(self.bn2(self.conv2(x)).relu())
            return self.fc2(self.fc1(x.flatten(1)).relu())

    return SmallCNN()


# The case name's model part: the images' channels, size and classes (bench_train's workloads).
TRAIN_MODELS = {"cnn_28": (1, 28, 10), "resnet18": (3, 32, 10)}
TRAIN = re.compile(r"^train/cpu/fp32/(\w+)/(\d+)$")


def ember_train_img_per_s(ember, name, min_seconds):
    m = TRAIN.match(name)
    model_name, batch = m[1], int(m[2])
    channels, size, classes = TRAIN_MODELS[model_name]
    ember.manual_seed(0)
    if model_name == "cnn_28":
        model = small_cnn_module(ember, channels, size, classes)
    else:
        model = ember.nn.models.resnet18(num_classes=classes, small_input=True)
    model.train()
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = ember.randn(batch, channels, size, size)
    labels = ember.randint(0, classes, (batch,))

    def step():
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()

    return batch / time_batches(step, min_seconds)


class AugmentSet:
    """1024 images of 3x32x32, each made by NumPy work as a Python augmentation would do."""

    def __len__(self):
        return 1024

    def __getitem__(self, i):
        import numpy as np

        image = np.random.default_rng(i).random((3, 32, 32), dtype=np.float32)
        for _ in range(40):
            image = np.sqrt(image * image + 0.1)
        return image, i


class TransferSet:
    """1024 copies of one 3x224x224 image: the loader's own cost of moving large batches."""

    def __init__(self):
        import numpy as np

        self.image = np.ones((3, 224, 224), dtype=np.float32)

    def __len__(self):
        return 1024

    def __getitem__(self, i):
        return self.image, i


DATA = re.compile(r"^data/cpu/(augment|transfer)/(\d+)$")


def loader_examples_per_s(lib, name, min_seconds):
    m = DATA.match(name)
    dataset, batch = (AugmentSet(), 32) if m[1] == "augment" else (TransferSet(), 128)
    workers = int(m[2])
    loader = lib.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers,
                                       persistent_workers=workers > 0)

    def epoch():
        for images, _ in loader:
            pass

    return len(dataset) / time_batches(epoch, min_seconds)


def one_python_case(side, name, min_seconds, threads):
    """The counters of one case on the ember-Python or PyTorch side, as bench_ops/bench_train name them."""
    kind = name.split("/")[0]
    if side == "torch":
        import torch

        torch.set_num_threads(threads)
        if kind == "dispatch":
            return {"us": add_us(torch, name.endswith("/grad"), min_seconds)}
        if kind == "data":
            import torch.utils.data

            return {"img_per_s": loader_examples_per_s(torch, name, min_seconds)}
        sys.path.insert(0, str(HERE))
        import torch_compare

        counters, _ = torch_compare.train_case(name, min_seconds)
        return counters
    import ember

    if kind == "dispatch":
        return {"us": add_us(ember, name.endswith("/grad"), min_seconds)}
    if kind == "data":
        return {"img_per_s": loader_examples_per_s(ember, name, min_seconds)}
    return {"img_per_s": ember_train_img_per_s(ember, name, min_seconds)}


# ---- the parent: runs every side of every case in fresh processes --------------------------------


def run_cpp(bench_dir, name, threads):
    binary = bench_dir / ("bench_ops" if name.startswith("dispatch/") else "bench_train")
    cmd, case = [str(binary)], name
    if name.startswith("train/"):
        cmd += ["--plain-step", f"--batch={name.split('/')[-1]}"]
        case = name.replace("/fp32/", "/fp32/plain/")
    cmd += [f"--benchmark_filter=^{case}(/manual_time)?$", f"--benchmark_min_time={MIN_SECONDS}",
            "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads))).stdout
    found = json.loads(out)["benchmarks"]
    if not found:
        raise SystemExit(f"python_overhead: {binary} has no case {case}")
    return {k: v for k, v in found[0].items() if k in ("us", "img_per_s")}


def run_child(python, side, name, threads):
    cmd = [python, __file__, "--one", side, name, "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if done.returncode != 0:
        raise SystemExit(f"python_overhead: {side} side of {name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def torch_interpreter(args):
    """The interpreter to run PyTorch in, or None when there is none."""
    python = args.torch_python or sys.executable
    if subprocess.run([python, "-c", "import torch, torchvision"], capture_output=True).returncode == 0:
        return python
    if args.torch_python:
        raise SystemExit(f"python_overhead: {args.torch_python} cannot import torch and torchvision")
    return None


def measure(args):
    torch_python = torch_interpreter(args)
    sides = {"C++": lambda name: run_cpp(args.bench_dir, name, args.threads),
             "Python": lambda name: run_child(sys.executable, "ember", name, args.threads)}
    if torch_python:
        sides["PyTorch"] = lambda name: run_child(torch_python, "torch", name, args.threads)
    rows = []
    for name in [n for n in CASES if re.search(args.filter, n)]:
        key = MEASURE[name.split("/")[0]]
        order = [side for side in sides if not (side == "C++" and name.startswith("data/"))]  # no C++ side
        samples = {side: [] for side in order}
        for r in range(args.repeats):
            for side in order[r % len(order):] + order[:r % len(order)]:
                samples[side].append(sides[side](name)[key])
        medians = {side: statistics.median(values) for side, values in samples.items()}
        rows.append({"name": name, "measure": key, "medians": medians, "samples": samples})
        print(name, {side: f"{value:.4g}" for side, value in medians.items()}, flush=True)
    return rows, torch_python


def table(rows, threads):
    """Markdown: each side's median and range, and the ratios the targets are stated in, of the medians and
    of the best runs (noise on a shared machine only ever slows a run down)."""
    lines = ["| case | C++ | Python | PyTorch | Python against C++ | Python against PyTorch |",
             "|---|---|---|---|---|---|", ]
    for row in rows:
        key, samples = row["measure"], row["samples"]
        lower_is_better = key == "us"
        stats = {"median": row["medians"],
                 "best": {side: (min if lower_is_better else max)(values) for side, values in samples.items()}}

        def against(other):
            if other not in samples:
                return "-"
            if lower_is_better and other == "C++":  # what Python adds to the call
                return " / ".join(f"+{s['Python'] - s[other]:.2f} us" for s in stats.values())
            return " / ".join(f"{s['Python'] / s[other]:.2f}x" for s in stats.values()) + (
                " the time" if lower_is_better else "")

        def cell(side):
            if side not in samples:
                return "none"
            return f"{row['medians'][side]:.4g} ({min(samples[side]):.4g}-{max(samples[side]):.4g}) {key}"

        lines.append(f"| {row['name']} | {cell('C++')} | {cell('Python')} | {cell('PyTorch')} | "
                     f"{against('C++')} | {against('PyTorch')} |")
    return "\n".join(lines) + (f"\n\n{threads} threads each; median (range) of rotating runs, each in a fresh "
                                "process; the comparisons are of the medians / of the best runs.\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench-dir", type=Path, default=Path("build/bench"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--torch-python", help="an interpreter that imports torch and torchvision")
    parser.add_argument("--filter", default="", help="only the cases this regex finds")
    parser.add_argument("--out", type=Path, help="write the samples and medians here as JSON")
    parser.add_argument("--one", nargs=2, metavar=("SIDE", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1 or args.threads < 1:
        parser.error(f"--repeats and --threads must be at least 1, got {args.repeats} and {args.threads}")
    if args.one:
        print(json.dumps(one_python_case(*args.one, MIN_SECONDS, args.threads)))
        return
    rows, torch_python = measure(args)
    report = table(rows, args.threads)
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rows": rows, "threads": args.threads, "torch_python": torch_python}, indent=1))


if __name__ == "__main__":
    main()
