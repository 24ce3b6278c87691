#!/usr/bin/env python3
"""Times in PyTorch the cases the ember bench binaries register: GEMM (bench_gemm), conv2d passes
(bench_conv), attention (bench_ops' attention cases) and training steps (bench_train), read from the
binaries' own case lists (--benchmark_list_tests) so both sides run the same shapes. Writes Google
Benchmark's JSON schema (context + benchmarks, one entry per case under the ember case's name, with
the same counters: TFLOPS, GFLOPS, or img_per_s and peak_MiB), which bench/report.py shows beside ember's.

Usage: bench/torch_compare.py --bench-dir build/bench [--filter REGEX] [--compile] --out results/x/torch.json
       bench/torch_compare.py --bench-dir build/bench --device cpu [--threads N] [--repeats 5] --out results/x/cpu.json
--device cpu runs ember's case and PyTorch's alternately, each in a fresh process (peak RSS per case), and
writes the medians and their ratios, with a Markdown table beside the JSON (BENCHMARKS.md, "CPU against
PyTorch"): the training steps of CPU_CASES, bench_ops' ops at 16M elements and attention cases, and
every CPU conv case.
Training steps run in the precision modes PyTorch eager has (fp32, tf32, autocast with GradScaler for
fp16), channels-last where ember's case is; --compile times them under torch.compile instead.
Needs torch (and torchvision for the ResNets); cases it cannot run are left out, with a note."""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import shlex
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


def list_cases(binary, pattern, extra_args=()):
    """The case names a bench binary registers on this machine that match pattern (given extra_args,
    such as bench_train's --compile --batch=32)."""
    if not binary.exists():
        return []
    out = subprocess.run([str(binary), *extra_args, "--benchmark_list_tests=true", f"--benchmark_filter={pattern}"],
                         capture_output=True, text=True)
    # Manually timed cases are listed as "<name>/manual_time"; torch.json stores "<name>".
    return [line.strip().removesuffix("/manual_time") for line in out.stdout.splitlines() if line.strip()]


def ember_threads():
    """The CPU threads ember's bench binaries run on: OpenMP's default, OMP_NUM_THREADS or one per CPU
    this process may use (torch's default counts physical cores instead)."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return int(first) if first.isdigit() else len(os.sched_getaffinity(0))


def peak_rss_mib():
    """This process's peak resident memory: VmHWM (kB) of /proc/self/status, not getrusage's ru_maxrss,
    which exec carries over from the process it replaced (here the parent, PyTorch imported)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


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


OPS = re.compile(r"^ops/(cpu|cuda)/(\w+)/(\w+)/(\d+)$")


def ops_case(name, min_time):
    """bench_ops' memory-bound ops on the same shapes, writing into preallocated outputs where PyTorch
    has an out= form; GBps counts the bytes bench_ops counts (inputs + outputs of numel elements)."""
    m = OPS.match(name)
    device, dtype, op, numel = torch.device(m[1]), DTYPES[m[2]], m[3], int(m[4])
    flat = torch.randn(numel, dtype=dtype, device=device)
    out = torch.empty_like(flat)
    rows = flat.view(-1, 1024)
    out_rows = out.view(-1, 1024)
    aten = torch.ops.aten
    unary = {"exp": aten.exp.out, "log": aten.log.out, "tanh": aten.tanh.out, "sigmoid": aten.sigmoid.out,
             "silu": aten.silu.out, "relu": lambda x, out: torch.clamp_min(x, 0, out=out),
             "gelu": lambda x, out: aten.gelu.out(x, approximate="none", out=out),
             "gelu_tanh": lambda x, out: aten.gelu.out(x, approximate="tanh", out=out)}
    if op in unary:
        x = flat.abs() if op == "log" else flat
        fn, tensors = (lambda: unary[op](x, out=out)), 2
    elif op in ("add", "mul"):
        other = torch.randn_like(flat)
        fn, tensors = (lambda: getattr(torch, op)(flat, other, out=out)), 3
    elif op == "mul_scalar":
        fn, tensors = (lambda: torch.mul(flat, 0.1, out=out)), 2
    elif op == "sum":
        fn, tensors = (lambda: torch.sum(flat)), 1
    elif op in ("softmax", "log_softmax"):
        kernel = aten._softmax.out if op == "softmax" else aten._log_softmax.out
        fn, tensors = (lambda: kernel(rows, 1, False, out=out_rows)), 2
    elif op == "layer_norm":  # no out= form
        w, b = torch.ones(1024, dtype=dtype, device=device), torch.zeros(1024, dtype=dtype, device=device)
        fn, tensors = (lambda: F.layer_norm(rows, (1024,), w, b)), 2
    elif op == "topk5":
        logits = flat[: numel // 1000 * 1000].view(-1, 1000)
        fn, tensors = (lambda: torch.topk(logits, 5, dim=1)), 1
    elif op == "sort":
        fn, tensors = (lambda: torch.sort(rows, dim=1, stable=True)), 4
    elif op == "cross_entropy":
        logits = flat.view(-1, 1000) if numel % 1000 == 0 else flat[: numel // 1000 * 1000].view(-1, 1000)
        target = torch.randint(0, 1000, (logits.shape[0],), device=device)
        fn, tensors = (lambda: F.cross_entropy(logits, target)), 1
    else:
        raise NotImplementedError(f"op {op}")
    with torch.no_grad():
        seconds = mean_seconds(fn, device, min_time)
    return {"GBps": tensors * numel * flat.element_size() / seconds / 1e9}, seconds


# ---- the model zoo of train/model_zoo.cpp: for 3x32x32 images and 10 classes, and the ImageNet-sized
# workloads of bench_train (3x224x224, 1000 classes)


def mlp(classes, channels=3, size=32):  # train/model_zoo.cpp: Flatten + MLP 256-128
    return nn.Sequential(nn.Flatten(), nn.Linear(channels * size * size, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, classes))


def small_cnn(classes, channels=3, size=32):  # nn/models/mlp.cpp: SmallCNN
    s = size // 4
    return nn.Sequential(nn.Conv2d(channels, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * s * s, 128), nn.ReLU(), nn.Linear(128, classes))


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


# case name's model part: (builder of classes, image channels, image size, classes, channels-last)
MODELS = {
    "mlp": (mlp, 3, 32, 10, False),
    "cnn": (small_cnn, 3, 32, 10, False),
    "mlp_28": (lambda c: mlp(c, 1, 28), 1, 28, 10, False),
    "cnn_28": (lambda c: small_cnn(c, 1, 28), 1, 28, 10, False),
    "resnet18": (lambda c: resnet("resnet18", c), 3, 32, 10, False),
    "resnet50": (lambda c: resnet("resnet50", c), 3, 32, 10, False),
    "vit_tiny": (lambda c: ViT(c, 192, 3), 3, 32, 10, False),
    "vit_small": (lambda c: ViT(c, 384, 6), 3, 32, 10, False),
    "resnet50_224_nhwc": (lambda c: resnet("resnet50", c, small_input=False), 3, 224, 1000, True),
    "vit_b16_224": (lambda c: ViT(c, 768, 12, patch=16, size=224), 3, 224, 1000, False),
}
TRAIN = re.compile(r"^train/(cpu|cuda)/(\w+)/(?:compiled/)?(\w+)/(\d+)$")  # compiled: against PyTorch eager
# ember's precision modes that PyTorch has as such: fp32, tf32, and autocast (GradScaler for fp16). The
# naive_* and pure_bf16 modes (a half model with fp32 masters) have no PyTorch-eager counterpart.
AUTOCAST = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}


def train_case(name, min_time, compile_model=False):
    m = TRAIN.match(name)
    device, prec, model_name, batch = torch.device(m[1]), m[2], m[3], int(m[4])
    if prec not in ("fp32", "tf32") and prec not in AUTOCAST:
        raise NotImplementedError(f"precision {prec}")
    build, channels, size, classes, channels_last = MODELS[model_name]
    set_tf32(prec == "tf32")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = build(classes).to(device, memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(batch, channels, size, size, device=device).to(memory_format=fmt)
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
        peak = peak_rss_mib()
    return {"img_per_s": batch / seconds, "peak_MiB": peak}, seconds


ATTENTION = re.compile(r"^attention/(cpu|cuda)/(\w+)/(\d+)x(\d+)x(\d+)x(\d+)/(fwd|fwdbwd)$")


def attention_case(name, min_time):
    """F.scaled_dot_product_attention on (B, heads, L, E) for q, k, v (L = S); GFLOPS as bench_ops counts."""
    m = ATTENTION.match(name)
    device, prec = torch.device(m[1]), m[2]
    b, h, length, e = (int(m[i]) for i in range(3, 7))
    backward = m[7] == "fwdbwd"
    q, k, v, g = (torch.randn(b, h, length, e, dtype=DTYPES[prec], device=device) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(backward)

    def step():
        out = F.scaled_dot_product_attention(q, k, v)
        if backward:
            q.grad = k.grad = v.grad = None
            out.backward(g)

    with torch.set_grad_enabled(backward):
        seconds = mean_seconds(step, device, min_time)
    return {"GFLOPS": (12 if backward else 4) * b * h * length * length * e / seconds / 1e9}, seconds


def bench_ops_case(name, min_time):
    return (attention_case if name.startswith("attention/") else ops_case)(name, min_time)


RUNNERS = {"bench_gemm": gemm_case, "bench_conv": conv_case, "bench_train": train_case, "bench_ops": bench_ops_case}
BINARY_OF = {"gemm": "bench_gemm", "conv": "bench_conv", "train": "bench_train", "ops": "bench_ops",
             "attention": "bench_ops"}

# --device cpu: the models, precisions and ops the CPU is measured on (bench_train, bench_ops case names),
# plus every CPU case of bench_conv. naive_fp16 has no PyTorch counterpart: it is compared with ember's fp32.
CPU_CASES = ["train/cpu/fp32/mlp_28/128", "train/cpu/fp32/cnn_28/128", "train/cpu/amp_bf16/cnn_28/128",
             "train/cpu/naive_fp16/cnn_28/128", "train/cpu/fp32/resnet18/32", "train/cpu/fp32/vit_tiny/32"] + [
    f"ops/cpu/f32/{op}/16777216" for op in ("exp", "log", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "softmax",
                                           "log_softmax", "layer_norm", "cross_entropy", "topk5", "sort")] + [
    f"attention/cpu/f32/{shape}/{p}" for shape in ("32x3x65x64", "4x8x1024x64") for p in ("fwd", "fwdbwd")]
# The counter each kind of case is compared on (higher is better).
MEASURE = {"train": "img_per_s", "ops": "GBps", "conv": "TFLOPS", "gemm": "TFLOPS", "attention": "GFLOPS"}


def run_ember(bench_dir, name, min_time, threads):
    """One ember case in a process of its own (its peak RSS is the case's): its counters."""
    kind = name.split("/")[0]
    cmd = [str(bench_dir / BINARY_OF[kind])]
    if kind == "train":
        parts = name.split("/")
        cmd += [f"--precision={parts[2]}", f"--batch={parts[-1]}"] + (["--compile"] if "compiled" in parts else [])
    # Google Benchmark's regex is POSIX's, where re.escape's "\-" is undefined: escape metacharacters only.
    pattern = re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", name)
    cmd += [f"--benchmark_filter=^{pattern}(/manual_time)?$", f"--benchmark_min_time={min_time}",
            "--benchmark_format=json"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    cases = json.loads(out)["benchmarks"]
    if not cases:
        raise RuntimeError(f"{cmd[0]} has no case {name}")
    return {k: v for k, v in cases[0].items() if isinstance(v, float) and k not in ("real_time", "cpu_time")}


def run_torch(name, min_time, threads):
    """One PyTorch case in a process of its own: its counters, or None where PyTorch has no such case."""
    cmd = [sys.executable, __file__, "--one", name, "--min-time", str(min_time), "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()
    return json.loads(out[-1]) if out else None


def one_case(name, min_time, threads):
    torch.set_num_threads(threads)
    try:
        counters, _ = RUNNERS[BINARY_OF[name.split("/")[0]]](name, min_time)
    except NotImplementedError:
        return
    print(json.dumps(counters))


def side_by_side_cpu(args):
    """ember and PyTorch alternating, case by case, each run in a fresh process; medians of args.repeats."""
    names = [n for n in CPU_CASES + list_cases(args.bench_dir / "bench_conv", r"^conv/cpu/") if re.search(args.filter, n)]
    rows = []
    for name in names:
        samples = {"ember": [], "torch": []}
        for r in range(args.repeats):  # the order alternates too, so that drift falls on both sides
            for side in (("ember", "torch") if r % 2 == 0 else ("torch", "ember")):
                got = (run_ember(args.bench_dir, name, args.min_time, args.threads) if side == "ember"
                       else run_torch(name, args.min_time, args.threads))
                if got is not None:
                    samples[side].append(got)
        median = {side: {k: statistics.median(s[k] for s in runs) for k in runs[0]} if runs else None
                  for side, runs in samples.items()}
        key = MEASURE[name.split("/")[0]]
        ratio = median["ember"][key] / median["torch"][key] if median["torch"] else None
        rows.append({"name": name, "ember": median["ember"], "torch": median["torch"], "ratio": ratio})
        print(f"{name}: ember {median['ember'][key]:.4g}, torch "
              f"{median['torch'][key] if median['torch'] else float('nan'):.4g} {key}, ratio "
              f"{ratio if ratio else float('nan'):.3f}", flush=True)
    return rows


def cpu_report(rows, threads):
    """The side-by-side table in Markdown: ratio > 1 where ember is faster (or, for RSS, smaller)."""
    fp32 = {r["name"].split("/")[3]: r["ember"]["img_per_s"] for r in rows if r["name"].startswith("train/cpu/fp32/")}
    lines = [f"| case | ember | PyTorch | ember / PyTorch | peak RSS MiB ember / PyTorch |", "|---|---|---|---|---|"]
    for r in rows:
        key = MEASURE[r["name"].split("/")[0]]
        e, t = r["ember"], r["torch"]
        torch_value = f"{t[key]:.4g}" if t else "none"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        if key == "img_per_s" and not r["name"].startswith("train/cpu/fp32/"):
            base = fp32.get(r["name"].split("/")[3])
            ratio += f" ({e[key] / base:.2f} x ember fp32)" if base else ""
        rss = (f"{e['peak_MiB']:.0f} / {t['peak_MiB']:.0f} = {e['peak_MiB'] / t['peak_MiB']:.2f}"
               if key == "img_per_s" and t else (f"{e['peak_MiB']:.0f} / -" if key == "img_per_s" else ""))
        value = f"{e[key]:.4g} {key}" + (f" ({e['ratio']:.2f} of memcpy)" if key == "GBps" else "")
        lines.append(f"| {r['name']} | {value} | {torch_value} | {ratio} | {rss} |")
    return "\n".join(lines) + f"\n\n{threads} threads each; medians of alternating runs, each case in a fresh process.\n"


def main():
    if "--one" in sys.argv:  # a child of --device cpu: one PyTorch case, its counters as JSON
        one = argparse.ArgumentParser()
        one.add_argument("--one")
        one.add_argument("--min-time", type=float)
        one.add_argument("--threads", type=int)
        a = one.parse_args()
        return one_case(a.one, a.min_time, a.threads)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-dir", type=Path, required=True, help="the folder of the bench_* binaries")
    parser.add_argument("--device", choices=["all", "cpu"], default="all",
                        help="cpu: ember and PyTorch side by side on the CPU cases, alternating (writes JSON and a "
                             "Markdown table beside it)")
    parser.add_argument("--threads", type=int, default=ember_threads(), help="--device cpu: threads of each side")
    parser.add_argument("--repeats", type=int, default=5, help="--device cpu: runs of each side per case")
    parser.add_argument("--filter", default=".", help="regex on case names, as --benchmark_filter")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds timed per case")
    parser.add_argument("--bench-args", default="", help="flags for the bench binaries when listing GPU cases "
                        "(bench_train's --compile --batch=32: ember's captured steps against PyTorch eager)")
    parser.add_argument("--compile", action="store_true",
                        help="training steps only, each model wrapped in torch.compile (the first step compiles)")
    args = parser.parse_args()

    if args.device == "cpu":
        rows = side_by_side_cpu(args)
        context = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "library": f"torch {torch.__version__}",
                   "threads": args.threads, "repeats": args.repeats, "cpu": platform.processor() or platform.machine()}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"context": context, "cases": rows}, indent=1))
        table = cpu_report(rows, args.threads)
        args.out.with_suffix(".md").write_text(table)
        print(table)
        return
    if args.compile:
        runners = [("bench_train", lambda name, t: train_case(name, t, compile_model=True))]
    else:
        runners = [(b, RUNNERS[b]) for b in ("bench_gemm", "bench_conv", "bench_train")]
    torch.set_num_threads(ember_threads())
    results, skipped = [], []
    for binary, run in runners:
        for name in list_cases(args.bench_dir / binary, args.filter, shlex.split(args.bench_args)):
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
