#!/usr/bin/env python3
"""Times the ImageNet input pipeline in ember (bench_data) and in torchvision on the same files, side
by side in one run: for each set under --data (an ImageFolder tree each, bench/make_image_set.py makes
them), the training pipeline (RandomResizedCrop 224, flip, normalise) and the evaluation one (Resize 256,
CenterCrop 224, normalise), with 1 worker and with one per core, batches of 256 in bfloat16 channels-last.

torchvision's side: datasets.ImageFolder (PIL decoding) and a DataLoader with num_workers workers,
the transforms ending in ToTensor and Normalize, each batch then cast to bfloat16 channels-last
(persistent workers across epochs). Both are timed over --batches batches after the first, with their
workers running. The two alternate, case by case.

  bench/torchvision_data.py --bench build/bench/bench_data --data results/images [--batches 8]
  bench/torchvision_data.py --bench build/bench/bench_data --data results/images --check

--check compares pixels instead of timing: the first files of each set decoded whole by ember and by
PIL (both libjpeg-turbo: expected bit-equal), and the evaluation pipeline's output (Resize 256,
CenterCrop 224, normalised) of ember against torchvision's on PIL images, in units of 1/255 before
normalisation. PIL resizes in 8 bits with rounding after each pass; ember in float, rounding once.

Prints a Markdown table (images/s and the ratio ember / torchvision) and writes it with --out. PyTorch
and torchvision are needed here only, never by the tests."""
import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def torchvision_rate(root, train, workers, batches, batch_size):
    tf = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()] if train else \
         [transforms.Resize(256), transforms.CenterCrop(224)]
    folder = datasets.ImageFolder(root, transform=transforms.Compose(tf + [transforms.ToTensor(),
                                                                             transforms.Normalize(MEAN, STD)]))
    loader = DataLoader(folder, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=workers > 0)
    images, seen, start = 0, 0, None
    while seen <= batches:
        for x, _ in loader:
            x = x.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
            if seen == 0:  # timed from the first batch on, the workers running (as bench_data)
                start = time.perf_counter()
            else:
                images += x.shape[0]
            seen += 1
            if seen > batches:
                break
    return images / (time.perf_counter() - start)


def ember_rate(bench, root, set_name, train, workers, batches, batch_size):
    case = f"^data/{set_name}/{'train' if train else 'eval'}/{workers}/"
    out = subprocess.run([bench, f"--data={root.parent}", f"--batches={batches}", f"--batch={batch_size}",
                          f"--benchmark_filter={case}", "--benchmark_format=json"], check=True,
                         capture_output=True, text=True).stdout
    runs = json.loads(out)["benchmarks"]
    if not runs:
        raise SystemExit(f"bench_data ran no case {case}")
    return runs[0]["img_per_s"]


def check(bench, data):
    """Prints ember's pixels against PIL's and torchvision's (see the file's description)."""
    from safetensors.numpy import load_file
    from PIL import Image
    import numpy as np
    dumped = Path("/tmp") / f"ember_pixels_{os.getpid()}.safetensors"
    subprocess.run([bench, f"--data={data}", f"--dump={dumped}"], check=True)
    ours = load_file(str(dumped))
    dumped.unlink()
    rows = ["| set | decode: files bit-equal to PIL's | eval vs torchvision: max, mean difference (1/255) | "
            "the same, JPEGs decoded whole |", "| --- | --- | --- | --- |"]
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                             transforms.Normalize(MEAN, STD)])
    std = np.array(STD, dtype=np.float64).reshape(3, 1, 1)
    for root in sorted(p for p in Path(data).iterdir() if p.is_dir()):
        folder = datasets.ImageFolder(str(root))
        keys = sorted(k for k in ours if k.startswith(root.name + "/decoded/"))
        equal = sum(np.array_equal(ours[k], np.asarray(Image.open(folder.samples[int(k.rsplit("/", 1)[1])][0]).convert("RGB")))
                    for k in keys)
        n = ours[root.name + "/eval"].shape[0]
        theirs = np.stack([tf(Image.open(folder.samples[i][0]).convert("RGB")).numpy() for i in range(n)])
        diffs = []
        for key in ("eval", "eval_whole_decode"):
            d = np.abs(ours[root.name + "/" + key].astype(np.float64) - theirs) * std * 255  # back to 0..255 units
            diffs.append(f"{d.max():.2f}, {d.mean():.3f}")
        rows.append(f"| {root.name} | {equal} of {len(keys)} | {diffs[0]} | {diffs[1]} |")
    print("\n".join(rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="build/bench/bench_data")
    ap.add_argument("--data", required=True, type=Path, help="a folder of image sets")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--check", action="store_true", help="compare pixels instead of timing")
    args = ap.parse_args()
    if args.check:
        check(args.bench, args.data)
        return
    cores = os.cpu_count() or 1
    torch.set_num_threads(1)
    rows = ["| set | pipeline | workers | ember img/s | torchvision img/s | ember / torchvision |",
            "| --- | --- | --- | --- | --- | --- |"]
    for root in sorted(p for p in args.data.iterdir() if p.is_dir()):
        for train in (True, False):
            for workers in sorted({1, cores}):
                e = ember_rate(args.bench, root, root.name, train, workers, args.batches, args.batch_size)
                t = torchvision_rate(str(root), train, workers, args.batches, args.batch_size)
                rows.append(f"| {root.name} | {'train' if train else 'eval'} | {workers} | {e:.0f} | {t:.0f} | {e / t:.2f} |")
                print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
