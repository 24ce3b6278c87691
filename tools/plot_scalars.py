#!/usr/bin/env python3
"""Draws a training run's curves: the numeric fields of WORK_DIR/scalars.json (the JSON lines that the
training program's log writes, train/log.h) to one PNG, a panel per field, named as the TensorBoard
tags of `train --tensorboard` are: train/loss, train/lr, val/accuracy/top1, ... Training lines are
drawn against the iteration, validation lines against the epoch (each line's "step"). eta is left
out (it is no curve of the run). A run resumed from an earlier checkpoint logs some steps again: the
line written last for a step is drawn.

matplotlib is imported only to draw (Debian: python3-matplotlib); reading needs nothing but Python.

Usage: tools/plot_scalars.py WORK_DIR [-o OUT.png] [--fields loss,lr,accuracy/top1]"""
import argparse
import json
import math
import sys
from pathlib import Path

HEADER = {"mode", "epoch", "iter", "step"}  # where a line sits, not what it measured
LEFT_OUT = {"eta"}


def read_scalars(path):
    """{"<mode>/<field>": ([steps], [values])} from a scalars.json, in the order the tags first
    appear, each sorted by step; null (a NaN or an infinity in the log) reads as NaN. ValueError,
    naming the line, for a line that is not a JSON object with a mode and a step."""
    by_tag = {}  # tag -> {step: value}, the last line for a step winning
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                mode, step = record["mode"], record["step"]
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(f"{path}:{number}: not a log line with a mode and a step ({e})") from None
            for name, value in record.items():
                if name in HEADER or name in LEFT_OUT or isinstance(value, (str, bool)):
                    continue
                if value is None:
                    value = math.nan
                if isinstance(value, (int, float)):
                    by_tag.setdefault(f"{mode}/{name}", {})[step] = float(value)
    return {tag: (sorted(points), [points[s] for s in sorted(points)]) for tag, points in by_tag.items()}


def chosen(curves, fields):
    """The curves whose field (the tag without its mode) is one of `fields`; all when it is empty."""
    if not fields:
        return curves
    return {tag: curve for tag, curve in curves.items() if tag.split("/", 1)[1] in fields}


def draw(curves, out):
    """One panel per curve, three to a row, written to the PNG `out`."""
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    columns = min(3, len(curves))
    rows = math.ceil(len(curves) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    for ax, (tag, (steps, values)) in zip(axes.flat, curves.items()):
        ax.plot(steps, values, marker="o" if len(steps) < 30 else None, markersize=3)
        ax.set_title(tag)
        ax.set_xlabel("epoch" if tag.startswith("val/") else "iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps count iterations or epochs
        if tag.endswith("/lr") and all(v > 0 for v in values):
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(curves):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw the curves of WORK_DIR/scalars.json to a PNG.")
    parser.add_argument("work_dir", metavar="WORK_DIR", help="a training run's work dir (train --work-dir)")
    parser.add_argument("-o", "--out", help="the PNG to write (default: WORK_DIR/scalars.png)")
    parser.add_argument("--fields", default="",
                        help="comma-separated fields to draw, e.g. loss,lr,accuracy/top1 (default: every numeric one)")
    args = parser.parse_args(argv)
    scalars = Path(args.work_dir) / "scalars.json"
    out = Path(args.out) if args.out else Path(args.work_dir) / "scalars.png"
    try:
        curves = chosen(read_scalars(scalars), {f for f in args.fields.split(",") if f})
    except (OSError, ValueError) as e:
        print(f"plot_scalars.py: error: {e}", file=sys.stderr)
        return 1
    if not curves:
        print(f"plot_scalars.py: error: {scalars} has no numeric field to draw"
              + (f" among --fields {args.fields}" if args.fields else ""), file=sys.stderr)
        return 1
    try:
        import matplotlib  # noqa: F401 (draw uses it)
    except ImportError:
        print("plot_scalars.py: error: drawing needs matplotlib, which is not installed "
              "(Debian: apt-get install python3-matplotlib; pip: pip install matplotlib)", file=sys.stderr)
        return 1
    try:
        draw(curves, out)
    except OSError as e:
        print(f"plot_scalars.py: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"plot_scalars.py: wrote {out} ({len(curves)} curves)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
