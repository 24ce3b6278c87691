#!/usr/bin/env python3
"""Writes the Python package's docstrings from the `///` comments of ember's headers, the comments
Doxygen reads, so that help(ember.exp) and the C++ reference say the same thing.

usage: docstrings.py OUTPUT DEPFILE SOURCE_ROOT DIR...
  Reads every .h under SOURCE_ROOT/DIR (recursively) and writes OUTPUT, a C++ header with one
  constant per documented declaration in namespace ember::python::doc, named by its qualified name
  without `ember::`, `::` turned into `_`:
      Tensor exp(const Tensor& x);        ///< e^x elementwise.   ->  doc::exp
      class Tensor { ... void backward(); }                      ->  doc::Tensor_backward
      namespace nn { class Linear ... }                          ->  doc::nn_Linear
  A binding that names a declaration without a comment fails to compile. Overloads' distinct
  comments are joined, in the header's order. DEPFILE lists the headers read, for the build's
  dependency tracking.

A declaration's comment is the block of `///` lines above it (above its `template <...>` line for a
template), its trailing `///<` comment, or that of the member group (`/// ... @{` to `/// @}`) it is in. Declarations are read as ember's headers write them: the
name is the identifier before the first `(` (functions, constructors), after class/struct/enum, or
before `=`, `{` or `;` (constants, aliases). Operators and `@file` blocks are skipped.
"""
import re
import sys
from pathlib import Path

# Names that cannot be C++ identifiers in namespace ember::python::doc as they stand.
CPP_RESERVED = {"and", "or", "not", "xor", "bool", "char", "default", "delete", "double", "float", "int", "long",
                "new", "operator", "short", "signed", "unsigned", "void", "std", "register", "switch", "union"}


def strip_strings_and_comments(line):
    """The line without string and character literals and without its // comment (for brace counting)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0]


# A statement that declares a class (ending at its `{`, or `;` for a forward declaration), without
# its template head: the class's name.
CLASS_HEAD = re.compile(r"\s*(?:class|struct|union)\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?(?::[^{;(]*)?[{;]$")


def without_template_head(statement):
    return re.sub(r"^\s*template\s*<.*?>\s*", "", statement, flags=re.S)


def declared_name(statement):
    """The name a declaration statement declares, or None (operators, friends, blocks, statements)."""
    s = re.sub(r"\[\[[^\]]*\]\]", "", without_template_head(statement)).strip()
    if not s or s.startswith(("friend", "return", "static_assert", "#", "public:", "private:", "protected:")):
        return None
    m = CLASS_HEAD.match(s)
    if m:
        return m.group(1)
    m = re.match(r"enum\s+(?:class\s+|struct\s+)?(\w+)", s)
    if m:
        return m.group(1)
    m = re.match(r"using\s+(\w+)\s*=", s)
    if m:
        return m.group(1)
    while (m := re.search(r"\b(?:decltype|noexcept|alignas)\s*\(", s)):  # type operators are not the name
        depth, i = 1, m.end()
        while i < len(s) and depth:
            depth += {"(": 1, ")": -1}.get(s[i], 0)
            i += 1
        s = s[:m.start()] + s[i:]
    if re.search(r"\boperator\b", s.split("(", 1)[0]):
        return None
    initialised = re.match(r"[^(=]*=", s)  # a constant or alias: the name is before its `=`
    head = s.split("=", 1)[0] if initialised else s.split("(", 1)[0] if "(" in s else re.split(r"[{;]", s, maxsplit=1)[0]
    m = re.search(r"(~?\w+)\s*$", head)
    if not m or m.group(1).startswith("~"):
        return None
    return m.group(1)


def comment_text(lines):
    """Docstring text of `///` lines: lines joined into paragraphs, indented lines (code) kept as they are."""
    out, paragraph = [], []
    # Doxygen's conditional sections are markup, not text.
    lines = [re.sub(r"^@(?:cond(?:\s+[A-Z_]+)?|endcond)\b\s*", "", line) for line in lines]
    for line in lines:
        if not line.strip():
            if paragraph:
                out.append(" ".join(paragraph))
                paragraph = []
            out.append("")
        elif line.startswith("  "):  # an indented example keeps its line breaks
            if paragraph:
                out.append(" ".join(paragraph))
                paragraph = []
            out.append(line.rstrip())
        else:
            paragraph.append(line.strip())
    if paragraph:
        out.append(" ".join(paragraph))
    return "\n".join(out).strip("\n")


def header_docs(text):
    """(qualified name, docstring) for each documented declaration of one header."""
    docs = []
    scopes = []       # one per open brace: ("namespace" | "class", name) or ("block", None)
    pending = []      # the /// lines above the next declaration
    statement = ""    # the declaration being read, at the innermost namespace or class
    statement_doc = []
    parens = 0        # open ( and [ of the statement
    group = []        # the comment of the member group (/// ... @{ to /// @}) the lines are in
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("///") and not stripped.startswith("///<"):
            body = stripped[3:]
            body = body[1:] if body.startswith(" ") else body
            if body.strip() == "@}":  # a member group ends
                group, pending = [], []
            elif not statement:
                pending.append(body)
            continue
        if pending and pending[0].startswith("@file"):
            pending = []
        if pending and pending[-1].rstrip().endswith("@{"):  # a member group: its comment is each member's
            group = pending[:-1] + [pending[-1].rstrip()[:-2].rstrip()]
            pending = []
        code = strip_strings_and_comments(raw)
        code = re.sub(r"^\s*(public|private|protected)\s*:", "", code)
        trailing = re.search(r"///<\s?(.*)$", raw)
        in_body = any(kind == "block" for kind, _ in scopes)
        if code.strip().startswith("#"):
            continue
        if not in_body:
            if not code.strip():
                if not stripped:  # a blank line parts a comment from what follows
                    pending = []
                continue
            if not statement:
                statement_doc, pending = pending or group, []
        doc = statement_doc + ([trailing.group(1)] if trailing else [])
        ended = False
        for ch in code:
            if in_body:
                if ch == "{":
                    scopes.append(("block", None))
                elif ch == "}":
                    scopes.pop()
                    in_body = any(kind == "block" for kind, _ in scopes)
                continue
            if not statement and ch.isspace():
                continue
            statement += ch
            if ch in "([":
                parens += 1
            elif ch in ")]":
                parens -= 1
            if parens > 0:  # braces of default arguments and lambdas in a parameter list are text
                continue
            if ch == ";":
                record(docs, scopes, statement, doc)
                statement, parens, ended = "", 0, True
            elif ch == "{":
                ns = re.match(r"\s*(?:inline\s+)?namespace\s*([\w:]*)\s*\{$", statement)
                cls = CLASS_HEAD.match(without_template_head(statement))
                if not ns:  # a class, or a declaration whose body or initializer begins here
                    record(docs, scopes, statement, doc)
                    ended = True
                scopes.append(("namespace", ns.group(1)) if ns else ("class", cls.group(1)) if cls else ("block", None))
                in_body = scopes[-1][0] == "block"
                statement = ""
            elif ch == "}":  # a namespace or class closes
                if scopes:
                    scopes.pop()
                statement = ""
        if ended:
            statement_doc = []
    return docs


def record(docs, scopes, statement, doc_lines):
    if not doc_lines:
        return
    name = declared_name(statement)
    if not name or re.match(r"\s*(?:inline\s+)?namespace\b", statement):
        return
    qualified = [n for kind, n in scopes if kind in ("namespace", "class") and n] + [name]
    text = comment_text(doc_lines)
    if text:
        docs.append(("::".join(qualified), text))


def identifier(qualified):
    parts = qualified.split("::")
    if parts[0] == "ember":
        parts = parts[1:]
    name = "_".join(parts)
    return name + "_" if name in CPP_RESERVED else name


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    output, depfile, root, dirs = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
    headers = sorted(h for d in dirs for h in (root / d).rglob("*.h"))
    joined = {}  # identifier -> distinct texts, in order
    for header in headers:
        for qualified, text in header_docs(header.read_text()):
            if not qualified.startswith("ember::"):
                continue
            texts = joined.setdefault(identifier(qualified), [])
            if text not in texts:
                texts.append(text)
    lines = ["// Generated by tools/docstrings.py from the /// comments of ember's headers: do not edit.",
             "#pragma once", "", "namespace ember::python::doc {", ""]
    for name in sorted(joined):
        text = "\n\n".join(joined[name])
        if ')doc"' in text:
            sys.exit(f"docstrings.py: the comment of {name} contains )doc\"")
        lines.append(f'inline constexpr char {name}[] = R"doc({text})doc";')
    lines += ["", "}  // namespace ember::python::doc", ""]
    output.write_text("\n".join(lines))
    depfile.write_text(f"{output}: " + " ".join(str(h).replace(" ", "\\ ") for h in headers) + "\n")


if __name__ == "__main__":
    main()
