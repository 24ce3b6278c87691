#!/usr/bin/env python3
"""ember.einsum against torch.einsum on the same equations and shapes: the matmul forms (batched, and
attention's scores), a batch of dot products and a diagonal. Each library runs in a process of its
own, one after the other; the table holds the best of --repeats timings (ms per call, lower is better).

Usage: PYTHONPATH=build/python python3 bench/einsum_compare.py [--threads 2] [--repeats 5]
           [--torch-python PATH]   (an interpreter that imports torch, when this one does not)
"""
import argparse
import json
import subprocess
import sys
import time

CASES = {  # name: (equation, operand shapes)
    "bij,bjk->bik 32x128x128": ("bij,bjk->bik", [(32, 128, 128), (32, 128, 128)]),
    "bhqd,bhkd->bhqk 8x8x128x64": ("bhqd,bhkd->bhqk", [(8, 8, 128, 64), (8, 8, 128, 64)]),
    "ij,ij->i 4096x256": ("ij,ij->i", [(4096, 256), (4096, 256)]),
    "ii->i 2048x2048": ("ii->i", [(2048, 2048)]),
}


def child(lib, threads, repeats):
    """Times every case with one library; prints {case: ms}."""
    if lib == "torch":
        import torch as library
    else:
        import ember as library
    library.set_num_threads(threads)
    result = {}
    for name, (equation, shapes) in CASES.items():
        operands = [library.randn(*s) for s in shapes]
        for _ in range(3):
            library.einsum(equation, *operands)
        best = float("inf")
        for _ in range(repeats):
            start, calls = time.perf_counter(), 0
            while time.perf_counter() - start < 0.3:
                library.einsum(equation, *operands)
                calls += 1
            best = min(best, (time.perf_counter() - start) / calls)
        result[name] = best * 1e3
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--child", choices=["ember", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.threads, args.repeats)
    times = {}
    for lib, python in (("ember", sys.executable), ("torch", args.torch_python)):
        out = subprocess.run([python, __file__, "--child", lib, "--threads", str(args.threads), "--repeats",
                              str(args.repeats)], capture_output=True, text=True)
        times[lib] = json.loads(out.stdout) if out.returncode == 0 else None
        if out.returncode != 0:
            print(f"{lib}: failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    print(f"| equation, shape | ember ms | PyTorch ms | PyTorch / ember |  ({args.threads} threads)")
    print("|---|---|---|---|")
    for name in CASES:
        e = times["ember"][name] if times["ember"] else None
        t = times["torch"][name] if times["torch"] else None
        ratio = f"{t / e:.2f}" if e and t else "none"
        print(f"| {name} | {e:.3f} | {t:.3f} | {ratio} |" if e and t else f"| {name} | {e} | {t} | {ratio} |")


if __name__ == "__main__":
    main()
