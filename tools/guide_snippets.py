#!/usr/bin/env python3
"""The code blocks of docs/guide/*.md, compiled and run in CI so that the guide cannot rot.

Every ```cpp block of a chapter is one of three kinds, told apart by its text:

  program   it has a line `int main() {`: a complete program. It is compiled against libember and
            run; it passes when it returns 0. assert() is live (NDEBUG is undefined), so a block
            asserts what it shows.
  fragment  no main(): its #include lines are kept, and the rest becomes the body of a main()
            that begins with `using namespace ember;` and returns 0 (rustdoc's rule for examples).
  excerpt   its first line is `// excerpt: <path>` (from the repository root): lines quoted from
            that file. Not compiled (the file itself is); checked instead to appear in it, in order
            and contiguously, comparing lines without their leading and trailing blanks. A line
            `// ...` in the block stands for lines left out; comment lines of the file between
            quoted code lines may be left out without one.

A program or fragment whose first line is `// guide: compile-only` is compiled but not run (say why
on the same line); one whose first line is `// guide: ranks=N` is run as N processes through
tools/launch.py (torchrun's variables, a process group over Gloo), by `check --ranks`.
Other blocks (```sh, ```text, ...) are left alone.

  generate -o OUT.cpp --root ROOT CHAPTER_MD...
      writes one translation unit: every program and fragment in a namespace of its own, its main()
      renamed, `#line` directives pointing at the chapter (so a compiler error or a failed assert
      names docs/guide/<chapter>.md and its line), and a main() that runs snippet i when given i
      (`--list` prints them). meson's custom_target calls this; the executable links libember.
  check --root ROOT --exe EXE [--ranks] CHAPTER_MD...
      checks every excerpt against its file, every relative link of the chapters (the file or
      folder exists; a #heading of a chapter exists), and that CHAPTER_MD... are all of
      docs/guide/*.md (a chapter left out of docs/guide/meson.build would go unchecked); then runs
      each snippet in a process of its own: the single-process ones, or with --ranks the
      multi-process ones. Exits 1 when anything failed, naming the chapter and line.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

MAIN = re.compile(r"^\s*int\s+main\s*\(\s*\)")
EXCERPT = re.compile(r"^\s*//\s*excerpt:\s*(\S+)\s*$")
DIRECTIVE = re.compile(r"^\s*//\s*guide:\s*(compile-only|ranks=(\d+))\b")
INCLUDE = re.compile(r"^\s*#\s*include\b")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(\S*)")


class Block:
    def __init__(self, chapter, line, lang, lines):
        self.chapter = chapter  # path relative to the root, as docs/guide/<name>.md
        self.line = line        # 1-based line of the block's first code line
        self.lang = lang
        self.lines = lines
        first = lines[0] if lines else ""
        self.excerpt = EXCERPT.match(first)
        directive = DIRECTIVE.match(first)
        self.compile_only = bool(directive and directive.group(1) == "compile-only")
        self.ranks = int(directive.group(2)) if directive and directive.group(2) else 1
        self.is_program = any(MAIN.match(l) for l in lines)

    def where(self):
        return f"{self.chapter}:{self.line}"


def blocks_of(path, root):
    """The fenced code blocks of a Markdown file, with their language and first line."""
    rel = os.path.relpath(os.path.abspath(path), root)
    out, lines = [], Path(path).read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i + 1
        j = start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        if j == len(lines):
            sys.exit(f"{rel}:{i + 1}: a code block that is never closed")
        out.append(Block(rel, start + 1, lang, lines[start:j]))
        i = j + 1
    return out


def cpp_blocks(chapters, root):
    return [b for c in chapters for b in blocks_of(c, root) if b.lang in ("cpp", "c++")]


# ---- generate

def generate(args):
    root = os.path.abspath(args.root)
    snippets = [b for b in cpp_blocks(args.chapters, root) if not b.excerpt]
    includes, bodies, table = [], [], []
    for k, b in enumerate(snippets):
        if b.is_program and sum(bool(MAIN.match(l)) for l in b.lines) != 1:
            sys.exit(f"{b.where()}: a program has exactly one `int main()`")
        for l in b.lines:
            if INCLUDE.match(l) and l.strip() not in includes:
                includes.append(l.strip())
        # #include lines become blank lines, so that #line keeps counting the chapter's lines.
        code = ["" if INCLUDE.match(l) else (MAIN.sub("int main_()", l) if MAIN.match(l) else l) for l in b.lines]
        ns = f"guide_snippet_{k}"
        text = [f"namespace {ns} {{"]
        if b.is_program:
            text += [f'#line {b.line} "{b.chapter}"'] + code
        else:
            text += ["using namespace ember;", "int main_() {", f'#line {b.line} "{b.chapter}"'] + code + ["return 0;", "}"]
        text += [f"}}  // namespace {ns}", ""]
        bodies.append("\n".join(text))
        kind = "compile-only" if b.compile_only else f"ranks={b.ranks}"
        table.append(f'  {{"{b.where()}", "{kind}", &{ns}::main_}},')
    out = [
        "// Generated by tools/guide_snippets.py from docs/guide/*.md: do not edit; edit the chapter.",
        "#undef NDEBUG  // the snippets assert what they show, in every build type",
        "#include <cassert>",
        "#include <cstdio>",
        "#include <cstdlib>",
        "#include <cstring>",
        "#include <exception>",
    ] + includes + [
        "namespace ember {}  // fragments open it even when they include no ember header",
        "",
    ] + bodies + [
        "namespace {",
        "struct Snippet { const char* where; const char* kind; int (*run)(); };",
        "const Snippet kSnippets[] = {",
    ] + table + [
        "};",
        "}  // namespace",
        "",
        "// guide_snippets --list: one line per snippet (index, chapter:line, kind); guide_snippets I: runs snippet I.",
        "int main(int argc, char** argv) {",
        "  const int n = static_cast<int>(sizeof(kSnippets) / sizeof(kSnippets[0]));",
        "  if (argc != 2) { std::fprintf(stderr, \"usage: %s --list | INDEX\\n\", argv[0]); return 2; }",
        "  if (std::strcmp(argv[1], \"--list\") == 0) {",
        "    for (int i = 0; i < n; ++i) std::printf(\"%d %s %s\\n\", i, kSnippets[i].where, kSnippets[i].kind);",
        "    return 0;",
        "  }",
        "  const int i = std::atoi(argv[1]);",
        "  if (i < 0 || i >= n) { std::fprintf(stderr, \"no snippet %s\\n\", argv[1]); return 2; }",
        "  try {",
        "    return kSnippets[i].run();",
        "  } catch (const std::exception& e) {",
        "    std::fprintf(stderr, \"%s: uncaught exception: %s\\n\", kSnippets[i].where, e.what());",
        "    return 1;",
        "  }",
        "}",
        "",
    ]
    Path(args.output).write_text("\n".join(out))


# ---- check

def check_excerpt(b, root):
    """An error message, or None when the excerpt's lines are in its file."""
    path = Path(root) / b.excerpt.group(1)
    if not path.is_file():
        return f"{b.where()}: excerpt of {b.excerpt.group(1)}, which does not exist"
    have = [l.strip() for l in path.read_text().splitlines()]
    pieces, piece = [], []
    for l in b.lines[1:]:
        if l.strip() == "// ...":
            pieces.append(piece)
            piece = []
        else:
            piece.append(l.strip())
    pieces.append(piece)
    at = 0
    for piece in pieces:
        if not piece:
            continue
        found = next((i for i in range(at, len(have)) if matches(have, i, piece) is not None), None)
        if found is None:
            return (f"{b.where()}: these lines are not in {b.excerpt.group(1)} (after line {at}); "
                    f"update the excerpt:\n    " + "\n    ".join(piece))
        at = matches(have, found, piece)
    return None


def is_comment(line):
    return line.startswith(("//", "/*", "*"))


def matches(have, i, piece):
    """Where the file's lines `have` from i on hold `piece`, line after line, or None. A comment line
    of the file that the piece leaves out is skipped (a doc comment added to the quoted code does
    not make the quote wrong); every other line must match. Returns the index after the match."""
    for line in piece:
        while i < len(have) and have[i] != line and is_comment(have[i]) and not is_comment(line):
            i += 1
        if i == len(have) or have[i] != line:
            return None
        i += 1
    return i


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """The anchor GitHub gives a Markdown heading: lower case, links and code marks dropped,
    punctuation removed, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lstrip("#").strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose_lines(path):
    """(line number, text) of a Markdown file's lines outside fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            out.append((number, line))
    return out


def check_links(chapter, root):
    """Error messages for the chapter's relative links whose target is missing."""
    errors, here = [], Path(chapter).resolve().parent
    rel = os.path.relpath(os.path.abspath(chapter), root)
    for number, line in prose_lines(chapter):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (here / path).resolve() if path else Path(chapter).resolve()
            if not file.exists():
                errors.append(f"{rel}:{number}: link to {target}: no such file or folder")
            elif anchor and file.suffix == ".md":
                anchors = {slug(l) for _, l in prose_lines(file) if l.startswith("#")}
                if anchor not in anchors:
                    errors.append(f"{rel}:{number}: link to {target}: {file.name} has no heading #{anchor}")
    return errors


def check(args):
    root = os.path.abspath(args.root)
    failures = []
    listed = {os.path.abspath(c) for c in args.chapters}
    present = {os.path.abspath(p) for p in (Path(root) / "docs" / "guide").glob("*.md")}
    for missing in sorted(present - listed):
        failures.append(f"{os.path.relpath(missing, root)}: a chapter not listed in docs/guide/meson.build, "
                        "so its snippets are not compiled")
    blocks = cpp_blocks(args.chapters, root)
    if not args.ranks:
        for chapter in args.chapters:
            errors = check_links(chapter, root)
            print(f"{'FAIL' if errors else 'ok  '} {os.path.relpath(os.path.abspath(chapter), root)} links")
            failures += errors
        for b in blocks:
            if b.excerpt:
                error = check_excerpt(b, root)
                print(f"{'FAIL' if error else 'ok  '} {b.where()} excerpt of {b.excerpt.group(1)}")
                if error:
                    failures.append(error)

    listing = subprocess.run([args.exe, "--list"], capture_output=True, text=True, check=True).stdout.split("\n")
    snippets = [line.split(" ") for line in listing if line]
    expected = [b.where() for b in blocks if not b.excerpt]
    if [s[1] for s in snippets] != expected:
        failures.append(f"{args.exe} holds other snippets than the chapters: rebuild it")
        snippets = []
    launcher = Path(root) / "tools" / "launch.py"
    for index, where, kind in snippets:
        if kind == "compile-only":
            if not args.ranks:
                print(f"ok   {where} compiled (compile-only)")
            continue
        ranks = int(kind.split("=")[1])
        if (ranks > 1) != args.ranks:
            continue
        command = [args.exe, index]
        if ranks > 1:
            command = [sys.executable, str(launcher), "-n", str(ranks), "--timeout", str(args.timeout)] + command
        t0 = time.monotonic()
        try:
            r = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout + 5)
            ok, output = r.returncode == 0, r.stdout + r.stderr
            status = f"exit status {r.returncode}" if r.returncode >= 0 else f"killed by signal {-r.returncode}"
        except subprocess.TimeoutExpired as e:
            ok, output, status = False, (e.stdout or b"").decode() + (e.stderr or b"").decode(), "timed out"
        seconds = time.monotonic() - t0
        print(f"{'ok  ' if ok else 'FAIL'} {where} ran in {seconds:.2f} s" + ("" if ranks == 1 else f" on {ranks} ranks"))
        if not ok:
            failures.append(f"{where}: {status}\n" + "".join("    " + l + "\n" for l in output.splitlines()))
    if failures:
        print("\n" + "\n".join(failures), file=sys.stderr)
        print(f"{len(failures)} guide check(s) failed", file=sys.stderr)
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("-o", "--output", required=True)
    g.add_argument("--root", required=True)
    g.add_argument("chapters", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("--root", required=True)
    c.add_argument("--exe", required=True)
    c.add_argument("--ranks", action="store_true", help="run the multi-process snippets instead")
    c.add_argument("--timeout", type=int, default=30, help="seconds per snippet")
    c.add_argument("chapters", nargs="+")
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
