#!/usr/bin/env python3
"""Times in PyTorch the cases the ember bench binaries register: GEMM (bench_gemm), conv2d passes
(bench_conv) and training steps (bench_train), read from the binaries' own case lists
(--benchmark_list_tests) so both sides run the same shapes. Writes Google Benchmark's JSON schema
(context + benchmarks, one entry per case under the ember case's name, with the same counters:
TFLOPS, or img_per_s and peak_MiB), which bench/report.py shows beside ember's.

Usage: bench/torch_compare.py --bench-dir build/bench [--filter REGEX] [--compile] --out results/x/torch.json
Training steps run in the precision modes PyTorch eager has (fp32, tf32, autocast with GradScaler for
fp16), channels-last where ember's case is; --compile times them under torch.compile instead.
Needs torch (and torchvision for the ResNets); cases it cannot run are left out, with a note."""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# f32_deterministic: ember's deterministic CPU GEMM; torch runs its usual f32 matmul beside it.
DTYPES = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f32_deterministic": torch.float32}


def list_cases(binary, pattern):
    """The case names a bench binary registers on this machine that match pattern."""
    if not binary.exists():
        return []
    out = subprocess.run([str(binary), "--benchmark_list_tests=true", f"--benchmark_filter={pattern}"],
                         capture_output=True, text=True)
    # Manually timed cases are listed as "<name>/manual_time"; torch.json stores "<name>".
    return [line.strip().removesuffix("/manual_time") for line in out.stdout.splitlines() if line.strip()]


def ember_threads():
    """The CPU threads ember's bench binaries run on: OpenMP's default, OMP_NUM_THREADS or one per CPU
    this process may use (torch's default counts physical cores instead)."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return int(first) if first.isdigit() else len(os.sched_getaffinity(0))


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def mean_seconds(fn, device, min_time):
    """Mean seconds per call of fn after one warm-up call, over at least min_time seconds."""
    fn()
    runs, total = 0, 0.0
    cuda = device.type == "cuda"
    while total < min_time or runs < 2:
        if cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            total += start.elapsed_time(stop) / 1e3
        else:
            t0 = time.perf_counter()
            fn()
            total += time.perf_counter() - t0
        runs += 1
    return total / runs


def stored(shape, transposed, dtype, device):
    """A random operand of logical shape (..., rows, cols), stored transposed when asked."""
    *batch, rows, cols = shape
    if transposed:
        return torch.randn(*batch, cols, rows, dtype=dtype, device=device).transpose(-2, -1)
    return torch.randn(*batch, rows, cols, dtype=dtype, device=device)


GEMM = re.compile(r"^gemm/(cpu|cuda)/(\w+)/(?:(\d+)|(?:(\d+)x)?(\d+)x(\d+)x(\d+)/([nt])([nt]))$")


def gemm_case(name, min_time):
    m = GEMM.match(name)
    device, prec = torch.device(m[1]), m[2]
    if m[3]:
        batch, rows, cols, depth, ta, tb = 1, int(m[3]), int(m[3]), int(m[3]), "n", "n"
    else:
        batch, rows, cols, depth, ta, tb = int(m[4] or 1), int(m[5]), int(m[6]), int(m[7]), m[8], m[9]
    set_tf32(prec == "tf32")
    lead = [batch] if batch > 1 else []
    a = stored(lead + [rows, depth], ta == "t", DTYPES[prec], device)
    b = stored(lead + [depth, cols], tb == "t", DTYPES[prec], device)
    seconds = mean_seconds(lambda: torch.matmul(a, b), device, min_time)
    return {"TFLOPS": 2.0 * batch * rows * cols * depth / seconds / 1e12}, seconds


CONV = re.compile(r"^conv/(cpu|cuda)/(\w+)/(\d+)x(\d+)x(\d+)x(\d+)-(\d+)x(\d+)x\d+-s(\d+)p(\d+)/(nchw|nhwc)/(\w+)$")


def conv_case(name, min_time):
    m = CONV.match(name)
    device, prec = torch.device(m[1]), m[2]
    n, c, h, w, o, k, stride, pad = (int(m[i]) for i in range(3, 11))
    layout, direction = m[11], m[12]
    set_tf32(prec == "tf32")
    torch.backends.cudnn.benchmark = True  # the same search as ember's benchmark mode
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    x = torch.randn(n, c, h, w, dtype=DTYPES[prec], device=device).to(memory_format=fmt)
    weight = torch.randn(o, c, k, k, dtype=DTYPES[prec], device=device).to(memory_format=fmt)
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    dy = torch.randn(n, o, oh, ow, dtype=DTYPES[prec], device=device).to(memory_format=fmt)
    mask = {"fwd": None, "bwd_data": [True, False, False], "bwd_filter": [False, True, False]}[direction]
    if mask is None:
        fn = lambda: F.conv2d(x, weight, None, stride, pad)  # noqa: E731
    else:
        fn = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
            dy, x, weight, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1, mask)
    with torch.no_grad():
        seconds = mean_seconds(fn, device, min_time)
    return {"TFLOPS": 2.0 * n * o * oh * ow * c * k * k / seconds / 1e12}, seconds


# ---- the model zoo of train/model_zoo.cpp: for 3x32x32 images and 10 classes, and the ImageNet-sized
# workloads of bench_train (3x224x224, 1000 classes)


def mlp(classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, classes))


def small_cnn(classes):  # nn/models/mlp.cpp: SmallCNN
    return nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, classes))


def resnet(name, classes, small_input=True):  # torchvision's; small input: a 3x3 stride-1 conv1, no max pool
    import torchvision
    model = getattr(torchvision.models, name)(num_classes=classes)
    if small_input:
        model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    return model


class ViT(nn.Module):  # nn/models/vit.cpp: pre-norm blocks, class token, learned positions, LN eps 1e-6
    def __init__(self, classes, dim, heads, depth=12, patch=4, size=32):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        tokens = (size // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, tokens, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                                           layer_norm_eps=1e-6, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


# case name's model part: (builder of classes, image size, classes, channels-last)
MODELS = {
    "mlp": (mlp, 32, 10, False),
    "cnn": (small_cnn, 32, 10, False),
    "resnet18": (lambda c: resnet("resnet18", c), 32, 10, False),
    "resnet50": (lambda c: resnet("resnet50", c), 32, 10, False),
    "vit_tiny": (lambda c: ViT(c, 192, 3), 32, 10, False),
    "vit_small": (lambda c: ViT(c, 384, 6), 32, 10, False),
    "resnet50_224_nhwc": (lambda c: resnet("resnet50", c, small_input=False), 224, 1000, True),
    "vit_b16_224": (lambda c: ViT(c, 768, 12, patch=16, size=224), 224, 1000, False),
}
TRAIN = re.compile(r"^train/(cpu|cuda)/(\w+)/(\w+)/(\d+)$")
# ember's precision modes that PyTorch has as such: fp32, tf32, and autocast (GradScaler for fp16). The
# naive_* and pure_bf16 modes (a half model with fp32 masters) have no PyTorch-eager counterpart.
AUTOCAST = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}


def train_case(name, min_time, compile_model=False):
    m = TRAIN.match(name)
    device, prec, model_name, batch = torch.device(m[1]), m[2], m[3], int(m[4])
    if prec not in ("fp32", "tf32") and prec not in AUTOCAST:
        raise NotImplementedError(f"precision {prec}")
    build, size, classes, channels_last = MODELS[model_name]
    set_tf32(prec == "tf32")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = build(classes).to(device, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, 3, size, size, device=device).to(memory_format=fmt)
    labels = torch.randint(0, classes, (batch,), device=device)
    forward = torch.compile(model) if compile_model else model
    amp_dtype = AUTOCAST.get(prec)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    def step():
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = F.cross_entropy(forward(images).float(), labels)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = mean_seconds(step, device, min_time)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"img_per_s": batch / seconds, "peak_MiB": peak}, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-dir", type=Path, required=True, help="the folder of the bench_* binaries")
    parser.add_argument("--filter", default=".", help="regex on case names, as --benchmark_filter")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds timed per case")
    parser.add_argument("--compile", action="store_true",
                        help="training steps only, each model wrapped in torch.compile (the first step compiles)")
    args = parser.parse_args()

    if args.compile:
        runners = [("bench_train", lambda name, t: train_case(name, t, compile_model=True))]
    else:
        runners = [("bench_gemm", gemm_case), ("bench_conv", conv_case), ("bench_train", train_case)]
    torch.set_num_threads(ember_threads())
    results, skipped = [], []
    for binary, run in runners:
        for name in list_cases(args.bench_dir / binary, args.filter):
            try:
                counters, seconds = run(name, args.min_time)
            except (ImportError, KeyError, NotImplementedError, RuntimeError) as e:  # no torchvision, a model or dtype it lacks
                skipped.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                continue
            results.append({"name": name, "run_name": name, "run_type": "iteration", "iterations": 1,
                            "real_time": seconds * 1e3, "time_unit": "ms", **counters})
            print(f"torch {name}: " + ", ".join(f"{k} {v:.4g}" for k, v in counters.items()), flush=True)
    context = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "library": f"torch {torch.__version__}" + (" (torch.compile)" if args.compile else ""),
        "cpu_threads": str(torch.get_num_threads()),
        "skipped": skipped,
    }
    if torch.cuda.is_available():
        context["gpu"] = torch.cuda.get_device_name(0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"context": context, "benchmarks": results}, indent=1))
    for s in skipped:
        print(f"torch skipped {s}", file=sys.stderr)
    print(f"wrote {args.out} ({len(results)} cases, {len(skipped)} skipped)")


if __name__ == "__main__":
    main()
