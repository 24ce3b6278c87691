#!/usr/bin/env python3
"""Turns a results folder of `./ember bench` (bench_*.json from the ember binaries, torch.json from
bench/torch_compare.py, all in Google Benchmark's JSON schema) into report.md: Markdown tables per
binary, device and precision, with PyTorch beside ember where torch.json has the same case, and PNG
plots: GEMM TFLOP/s against size per precision with the raw library beside it, the ratio of every
GEMM/conv case, and training img/s per precision. matplotlib is imported only to draw; without it
(Debian: python3-matplotlib) the tables are still written and the report says the plots are missing.

Usage: bench/report.py RESULTS_DIR"""
import json
import math
import sys
from collections import defaultdict
from pathlib import Path


def load(folder):
    """{binary: report} for every bench_*.json, and torch.json's report (or None)."""
    reports = {}
    for path in sorted(folder.glob("bench_*.json")):
        text = path.read_text()
        if text.strip():  # a binary none of whose cases matched the filter leaves an empty file
            reports[path.stem] = json.loads(text)
    torch_path = folder / "torch.json"
    torch_report = json.loads(torch_path.read_text()) if torch_path.exists() else None
    for report in list(reports.values()) + [torch_report or {}]:
        for case in report.get("benchmarks", []):
            case["name"] = case_name(case)
    return reports, torch_report


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def case_name(case):
    """A case's name without the "/manual_time" Google Benchmark appends to manually timed cases."""
    name = case["name"]
    return name[: -len("/manual_time")] if name.endswith("/manual_time") else name


def group_of(name):
    """(family, device, precision) from a case name 'family/device/precision/...'."""
    parts = name.split("/")
    return parts[0], parts[1], parts[2]


def size_of(name):
    return "/".join(name.split("/")[3:])


# Per family: the counters shown, in order, and the torch counter compared (None: no torch column).
COLUMNS = {
    "gemm": (["TFLOPS", "raw_TFLOPS", "ratio", "pct_peak"], "TFLOPS"),
    "conv": (["TFLOPS", "raw_TFLOPS", "ratio", "pct_peak"], "TFLOPS"),
    "ops": (["GBps", "copy_GBps", "ratio"], None),
    "dispatch": (["us"], None),
    "train": (["img_per_s", "peak_MiB"], "img_per_s"),
}


def tables(reports, torch_cases):
    """Markdown lines: one table per (family, device, precision), and the cases that reported an error."""
    lines, errors = [], []
    groups = defaultdict(list)
    for report in reports.values():
        for case in report.get("benchmarks", []):
            if case.get("run_type", "iteration") != "iteration":
                continue
            if case.get("error_occurred"):
                errors.append(f"- `{case['name']}`: {case.get('error_message', '')}")
                continue
            groups[group_of(case["name"])].append(case)
    for (family, device, precision), cases in sorted(groups.items()):
        counters, torch_counter = COLUMNS.get(family, ([], None))
        counters = [k for k in counters if any(k in c for c in cases)]  # pct_peak: GPUs in the table only
        with_torch = torch_counter and any(c["name"] in torch_cases for c in cases)
        head = ["case"] + counters + (["torch " + torch_counter, "ember / torch"] if with_torch else []) + ["source"]
        lines += [f"### {family} · {device} · {precision}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)]
        for c in cases:
            row = [f"`{size_of(c['name'])}`"] + [fmt(c.get(k)) for k in counters]
            if with_torch:
                t = torch_cases.get(c["name"], {}).get(torch_counter)
                row += [fmt(t), fmt(c[torch_counter] / t if t else None)]
            row.append(c.get("label", ""))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if errors:
        lines += ["### Cases not measured", ""] + errors + [""]
    return lines


def save(plt, fig, ax, folder, name, made):
    """Writes the figure as folder/name and notes its name in made."""
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / name, dpi=120)
    plt.close(fig)
    made.append(name)


def plots(reports, torch_cases, folder):
    """Draws the PNGs; returns their file names, or raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    cases = [c for r in reports.values() for c in r.get("benchmarks", []) if not c.get("error_occurred")]
    # GEMM TFLOP/s against square size, per device: one colour per precision, raw dashed, torch dotted.
    for device in sorted({group_of(c["name"])[1] for c in cases if c["name"].startswith("gemm/")}):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        by_precision = defaultdict(list)
        for c in cases:
            fam, dev, prec = group_of(c["name"])
            if fam == "gemm" and dev == device and size_of(c["name"]).isdigit():
                by_precision[prec].append(c)
        for i, (prec, rows) in enumerate(sorted(by_precision.items())):
            rows.sort(key=lambda c: int(size_of(c["name"])))
            n = [int(size_of(c["name"])) for c in rows]
            colour = f"C{i}"
            ax.plot(n, [c["TFLOPS"] for c in rows], "o-", color=colour, label=f"ember {prec}")
            ax.plot(n, [c["raw_TFLOPS"] for c in rows], "s--", color=colour, alpha=0.6, label=f"raw {prec}")
            t = [(x, torch_cases[c["name"]]["TFLOPS"]) for x, c in zip(n, rows) if c["name"] in torch_cases]
            if t:
                ax.plot(*zip(*t), "^:", color=colour, alpha=0.6, label=f"torch {prec}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n (n x n @ n x n)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"GEMM on {device}")
        ax.grid(alpha=0.3)
        save(plt, fig, ax, folder, f"gemm_{device}.png", made)
    # Ratios (ember / raw) of every GEMM and conv case, per family and device.
    for family in ("gemm", "conv"):
        for device in sorted({group_of(c["name"])[1] for c in cases if c["name"].startswith(family + "/")}):
            rows = [c for c in cases if group_of(c["name"])[:2] == (family, device) and "ratio" in c]
            fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(rows)), 4.5))
            precisions = sorted({group_of(c["name"])[2] for c in rows})
            for i, prec in enumerate(precisions):
                xs = [j for j, c in enumerate(rows) if group_of(c["name"])[2] == prec]
                ax.scatter(xs, [rows[j]["ratio"] for j in xs], color=f"C{i}", label=prec, s=14)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels([size_of(c["name"]) for c in rows], rotation=90, fontsize=6)
            ax.set_ylabel("ember / raw")
            ax.set_title(f"{family} on {device}: ratio to the raw library")
            save(plt, fig, ax, folder, f"ratio_{family}_{device}.png", made)
    # Training img/s per model, one bar per precision (and torch's beside it).
    train = [c for c in cases if c["name"].startswith("train/")]
    for device in sorted({group_of(c["name"])[1] for c in train}):
        rows = [c for c in train if group_of(c["name"])[1] == device]
        models = sorted({c["name"].split("/")[3] for c in rows})
        series = defaultdict(dict)
        for c in rows:
            prec, model = c["name"].split("/")[2:4]
            series[f"ember {prec}"][model] = c["img_per_s"]
            if c["name"] in torch_cases:
                series[f"torch {prec}"][model] = torch_cases[c["name"]]["img_per_s"]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        width = 0.8 / max(1, len(series))
        for i, (label, values) in enumerate(sorted(series.items())):
            ax.bar([m + i * width for m in range(len(models))], [values.get(m, 0) for m in models], width, label=label)
        ax.set_xticks([m + 0.4 - width / 2 for m in range(len(models))])
        ax.set_xticklabels(models)
        ax.set_yscale("log")
        ax.set_ylabel("images / s")
        ax.set_title(f"training step on {device}")
        save(plt, fig, ax, folder, f"train_{device}.png", made)
    return made


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    folder = Path(sys.argv[1])
    reports, torch_report = load(folder)
    if not reports:
        print(f"report.py: no bench_*.json in {folder}")
        return 1
    torch_cases = {c["name"]: c for c in (torch_report or {}).get("benchmarks", [])}
    lines = ["# ember benchmarks", ""]
    for binary, report in reports.items():
        ctx = report.get("context", {})
        extra = ", ".join(f"{k} {ctx[k]}" for k in ("gpu", "cpu_threads", "cpu_gemm_baseline", "cpu_conv_baseline")
                          if k in ctx)
        lines.append(f"- {binary}: {ctx.get('date', '?')} on {ctx.get('host_name', '?')}, "
                     f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz"
                     + (f", {extra}" if extra else ""))
    if torch_report:
        ctx = torch_report.get("context", {})
        lines.append(f"- PyTorch: {ctx.get('library', '?')}, {ctx.get('date', '?')}"
                     + (f", {ctx['gpu']}" if "gpu" in ctx else ""))
    lines.append("")
    try:
        images = plots(reports, torch_cases, folder)
        lines += [f"![{name}]({name})" for name in images] + [""]
    except ImportError:
        note = "matplotlib is not installed (Debian: python3-matplotlib): tables only, no plots."
        print(f"report.py: {note}")
        lines += [f"_{note}_", ""]
    lines += tables(reports, torch_cases)
    (folder / "report.md").write_text("\n".join(lines))
    print(f"report.py: wrote {folder / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
