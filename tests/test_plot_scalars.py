#!/usr/bin/env python3
"""Tests of tools/plot_scalars.py: how it reads a work dir's scalars.json (the curves, their tags
and steps, a resumed run's lines for a step winning, NaN where the log has null), its errors, and
its PNG: drawn where matplotlib imports, else refused in one line that names the package.

Its summary lines and `--count` are doctest's (tests/script_cases.py).

Usage: tests/test_plot_scalars.py [--count]"""
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from script_cases import Cases

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))
import plot_scalars  # noqa: E402

CASES = Cases()
case = CASES.case

# Two train lines, a validation line, then a run resumed from iteration 2 that logs step 4 again.
LINES = [
    {"mode": "train", "epoch": 1, "iter": 2, "step": 2, "lr": 0.1, "eta": 9.0, "loss": 2.0, "memory": 0},
    {"mode": "train", "epoch": 1, "iter": 4, "step": 4, "lr": 0.05, "eta": 5.0, "loss": None,
     "nonfinite": "forward 1 (linear)"},
    {"mode": "val", "epoch": 1, "iter": 3, "step": 1, "accuracy/top1": 50.0, "time": 0.5},
    {"mode": "train", "epoch": 1, "iter": 4, "step": 4, "lr": 0.05, "eta": 4.0, "loss": 1.5},
]


def work_dir_with(lines, folder):
    Path(folder, "scalars.json").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return folder


def tool(*args):
    r = subprocess.run([sys.executable, str(TOOLS / "plot_scalars.py"), *args], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


@case
def reads_every_numeric_field_by_mode_and_step_the_last_line_for_a_step_winning():
    with tempfile.TemporaryDirectory() as d:
        curves = plot_scalars.read_scalars(Path(work_dir_with(LINES, d), "scalars.json"))
    assert list(curves) == ["train/lr", "train/loss", "train/memory", "val/accuracy/top1", "val/time"], list(curves)
    assert curves["train/lr"] == ([2, 4], [0.1, 0.05]), curves["train/lr"]
    assert curves["train/loss"] == ([2, 4], [2.0, 1.5]), curves["train/loss"]  # the resumed run's step 4
    assert curves["val/accuracy/top1"] == ([1], [50.0])
    only = plot_scalars.chosen(curves, {"loss", "accuracy/top1"})
    assert list(only) == ["train/loss", "val/accuracy/top1"], list(only)


@case
def null_reads_as_nan_and_a_broken_line_is_named():
    with tempfile.TemporaryDirectory() as d:
        curves = plot_scalars.read_scalars(Path(work_dir_with(LINES[:2], d), "scalars.json"))
        assert math.isnan(curves["train/loss"][1][1]), curves["train/loss"]
        with open(Path(d, "scalars.json"), "a") as f:
            f.write('{"mode": "train", "step":\n')
        code, _, err = tool(d)
        assert code == 1 and err.startswith("plot_scalars.py: error: ") and "scalars.json:3: " in err, err
        code, _, err = tool(str(Path(d, "absent")))
        assert code == 1 and "absent/scalars.json" in err, err


@case
def draws_a_png_where_matplotlib_imports_else_names_the_package():
    try:
        import matplotlib  # noqa: F401
        has_matplotlib = True
    except ImportError:
        has_matplotlib = False
    with tempfile.TemporaryDirectory() as d:
        work_dir_with(LINES, d)
        code, out, err = tool(d, "-o", str(Path(d, "curves.png")))
        if has_matplotlib:
            assert code == 0 and "wrote" in out, f"exit status {code}: {err}"
            assert Path(d, "curves.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        else:
            assert code == 1 and err.count("\n") == 1 and "python3-matplotlib" in err, f"exit status {code}: {err}"
            assert not Path(d, "curves.png").exists()
        code, _, err = tool(d, "--fields", "no_such_field")
        assert code == 1 and "no numeric field to draw among --fields no_such_field" in err, err


def main(argv):
    return 0 if CASES.count_requested(argv) else CASES.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
