#!/usr/bin/env python3
"""Every document and citation in ember points at something that exists in the repository.

  tools/check_docs.py ROOT

1. The relative links of every Markdown page outside docs/guide/ (README.md, BENCHMARKS.md,
   docs/*.md; the guide's chapters are checked with their snippets by tools/guide_snippets.py) lead
   to a file or folder that exists, and a #heading of a Markdown page to a heading it has.
2. Every citation of a project document in the sources, comments and pages (a path under docs/,
   `docs/reference.md#zero`, or a capitalised root document, `BENCHMARKS.md`) names a file of the
   repository (from the root, or from the citing file's folder), and its #anchor a heading of that
   file. A reader who clones ember can follow every reference. (Lower-case names such as report.md
   are files the tools write, not citations.)
Prints each failure as FILE:LINE and exits 1 when there is one.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guide_snippets import check_links, prose_lines, slug  # noqa: E402

# A project document named in text, with an optional #anchor: a path under docs/, or a capitalised
# name (README.md, BENCHMARKS.md); not part of a URL or of a longer path.
CITATION = re.compile(r"(?<![\w/.:-])(docs/[\w./-]+\.md|[A-Z][A-Z0-9_]*\.md)(#[\w-]+)?")
TEXT_SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".md", ".build", ".txt", ".json", ".toml", ".dox", ""}
SKIPPED_DIRS = {".git", "subprojects"}


def tracked_files(root):
    """The repository's files: git's list in a checkout, else a walk that skips build folders."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout
        return [root / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith(("build", "."))]
            files += [Path(dirpath) / f for f in filenames]
        return files


def anchors_of(path):
    return {slug(line) for _, line in prose_lines(path) if line.startswith("#")}


def check_citations(path, root):
    errors = []
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return errors
    for number, line in enumerate(text.splitlines(), 1):
        for m in CITATION.finditer(line):
            name, anchor = m.group(1), m.group(2)
            targets = [c for c in (path.parent / name, root / name) if c.is_file()]
            where = f"{path.relative_to(root)}:{number}"
            if not targets:
                errors.append(f"{where}: cites {name}, which is not a file of the repository")
            elif anchor and not any(anchor[1:] in anchors_of(t) for t in targets):
                errors.append(f"{where}: cites {name}{anchor}, but {name} has no such heading")
    return errors


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    failures = []
    files = [f for f in tracked_files(root) if f.is_file()]
    pages = [f for f in files if f.suffix == ".md" and "docs/guide" not in f.relative_to(root).as_posix()]
    for page in sorted(pages):
        errors = check_links(str(page), str(root))
        print(f"{'FAIL' if errors else 'ok  '} {page.relative_to(root)} links")
        failures += errors
    cited = 0
    for f in sorted(files):
        if f.suffix in TEXT_SUFFIXES and "tests/fuzz/corpus" not in f.as_posix():
            errors = check_citations(f, root)
            cited += 1
            failures += errors
    print(f"{'FAIL' if failures else 'ok  '} citations of Markdown files in {cited} files")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
