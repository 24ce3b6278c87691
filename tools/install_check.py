#!/usr/bin/env python3
"""Builds programs against an installed ember, as a user of the install would: a header that a
program needs and `meson install` leaves out, or a symbol the installed library lacks, fails here
while the in-tree build (which sees the whole source tree) would pass.

  install_check.py --meson MESON --build-dir BUILD [--link SOURCE]... [--run SOURCE]... SOURCE...

1. `meson install --no-rebuild --destdir TMP` of BUILD into a temporary directory;
2. the compile and link flags from the installed ember.pc (`pkg-config --cflags --libs ember`, its
   prefix moved under TMP);
3. each SOURCE checked by the compiler alone (-fsyntax-only: every include resolved and every template
   instantiated, at less than half the time of code generation) with only those flags, from a
   directory outside the tree (a program's own "..." includes still resolve beside it, as
   examples/fit.h does), in parallel; each --link SOURCE is also compiled and linked against the
   installed library (every symbol it uses exported), and each --run SOURCE then run, exiting 0.
Prints one line per program and exits 1 when any failed, with the compiler's output.
"""
import argparse
import concurrent.futures
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def pkg_config_flags(root: Path) -> list:
    pcs = sorted(root.rglob("pkgconfig/ember.pc"))
    if not pcs:
        sys.exit(f"install_check: meson install wrote no pkgconfig/ember.pc under {root}")
    pc_dir = pcs[0].parent
    env = dict(os.environ, PKG_CONFIG_PATH=str(pc_dir))
    pkg = shutil.which("pkg-config") or sys.exit("install_check: pkg-config not found (Debian: pkgconf)")
    prefix = subprocess.run([pkg, "--variable=prefix", "ember"], env=env, check=True, capture_output=True,
                            text=True).stdout.strip()
    moved = str(root) + prefix  # the install's prefix, now under the destdir
    out = subprocess.run([pkg, "--define-variable=prefix=" + moved, "--cflags", "--libs", "ember"], env=env,
                         check=True, capture_output=True, text=True).stdout
    flags = shlex.split(out)
    libdirs = [f[2:] for f in flags if f.startswith("-L")]
    if not libdirs or not all(d.startswith(str(root)) for d in libdirs):
        sys.exit(f"install_check: ember.pc's library path {libdirs} is not under the install {root}")
    return flags + ["-Wl,-rpath," + d for d in libdirs]


def build(source: Path, out_dir: Path, flags: list, cxx: str, link: bool):
    exe = out_dir / (source.stem + "_" + source.parent.name)
    cmd = [cxx, "-std=c++20", "-O0"] + (["-o", str(exe)] if link else ["-fsyntax-only"]) + [str(source)] + flags
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    return exe, proc, time.monotonic() - t0, cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meson", required=True, nargs="+", help="the meson command (meson.build passes its own)")
    ap.add_argument("--build-dir", required=True, type=Path)
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--link", action="append", default=[], type=Path, help="also compile and link this program")
    ap.add_argument("--run", action="append", default=[], type=Path, help="also link and run this program (exit 0)")
    ap.add_argument("sources", nargs="+", type=Path)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="ember-install-") as tmp:
        root, out_dir = Path(tmp) / "destdir", Path(tmp) / "programs"
        out_dir.mkdir()
        inst = subprocess.run(args.meson + ["install", "-C", str(args.build_dir), "--no-rebuild", "--quiet",
                                            "--destdir", str(root)], capture_output=True, text=True)
        if inst.returncode != 0:
            print(inst.stdout + inst.stderr)
            sys.exit(f"install_check: meson install failed (exit {inst.returncode})")
        flags = pkg_config_flags(root)
        print("flags from the installed ember.pc:", " ".join(flags))
        failures = 0
        sources = list(dict.fromkeys(s.resolve() for s in args.sources + args.link + args.run))  # each built once
        to_run = {s.resolve() for s in args.run}
        to_link = to_run | {s.resolve() for s in args.link}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda s: build(s, out_dir, flags, args.cxx, s in to_link), sources))
        for source, (exe, proc, seconds, cmd) in zip(sources, results):
            if proc.returncode != 0:
                failures += 1
                print(f"FAILED  {source}: does not build against the install ({seconds:.0f} s)\n  "
                      + " ".join(cmd) + "\n" + proc.stdout + proc.stderr)
                continue
            if source not in to_run:
                print(f"ok      {source} {'built' if source in to_link else 'compiles'} ({seconds:.0f} s)")
                continue
            ran = subprocess.run([str(exe)], cwd=out_dir, capture_output=True, text=True, timeout=300)
            if ran.returncode != 0:
                failures += 1
                print(f"FAILED  {source}: built, but exited {ran.returncode}\n" + ran.stdout + ran.stderr)
            else:
                print(f"ok      {source} built ({seconds:.0f} s) and ran")
        print(f"{len(sources) - failures} of {len(sources)} programs compile against the installed ember")
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
