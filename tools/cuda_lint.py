#!/usr/bin/env python3
"""Checks two ownership rules of ember's CUDA code that a build cannot see and a GPU rarely tests.

1. Every cudaEventCreate* runs under a cuda::DeviceGuard made earlier in the same function: a CUDA
   event belongs to the device current at its creation, and recording it on another device's stream
   fails (cuda::Event itself is created lazily, at its first record, under such a guard).
2. Every cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize comes after a
   count_host_sync, capture::check_host_wait or capture::refuse in the same function, so that a
   captured step is refused before the call (the call itself would invalidate the capture). Teardown
   code that never runs inside a capture says "teardown" in a comment on the call's line.

"The same function" is the innermost enclosing brace block whose opening line reads as a function
header (not if/for/while/switch/catch/else/do/try, not a lambda). Usage:
  tools/cuda_lint.py [ROOT]         lint cuda/, dist/, tensor/, train/ and bench/ under ROOT
  tools/cuda_lint.py --self-test    check that the rules flag planted violations and pass fixed ones
Exits 1 and lists file:line for each violation.
"""
import re
import sys
from pathlib import Path

FOLDERS = ("cuda", "dist", "tensor", "train", "bench")
SUFFIXES = (".cpp", ".cu", ".h", ".cuh")

RULES = [
    (re.compile(r"\bcudaEventCreate\w*\s*\("), re.compile(r"\bDeviceGuard\b"), None,
     "cudaEventCreate outside a cuda::DeviceGuard: the event may belong to another device than its stream"),
    (re.compile(r"\bcuda(DeviceSynchronize|StreamSynchronize|EventSynchronize)\s*\("),
     re.compile(r"\bcount_host_sync\s*\(|\bcheck_host_wait\s*\(|\bcapture::refuse\s*\("), "teardown",
     "a host wait with no count_host_sync / capture check before it in the function: inside a captured "
     "step it would invalidate the capture instead of raising CaptureError"),
]

CONTROL = re.compile(r"^\s*(\}\s*)?(if|for|while|switch|catch|else|do|try)\b")
HEADER = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(->\s*[\w:<>*&\s]+)?\{\s*$")


def code_of(line):
    """The line without its // comment and the contents of its string literals."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def is_function_header(code):
    if CONTROL.match(code) or re.search(r"\[[^\]]*\]\s*(\([^)]*\))?\s*(mutable\s*)?(->\s*[\w:<>]+\s*)?\{\s*$", code):
        return False
    return bool(HEADER.search(code)) or bool(re.match(r"^\s*:\s*\w+[({]", code))


def function_start(codes, index):
    """The line of the header of the function that holds line `index`, or 0."""
    depth = 0
    for j in range(index - 1, -1, -1):
        for ch in reversed(codes[j]):
            if ch == "}":
                depth += 1
            elif ch == "{":
                if depth:
                    depth -= 1
                elif is_function_header(codes[j]):
                    return j
    return 0


def violations(text, name):
    lines = text.splitlines()
    codes = [code_of(l) for l in lines]
    found = []
    for i, code in enumerate(codes):
        for call, guard, exempt, message in RULES:
            if not call.search(code) or (exempt and exempt in lines[i]):
                continue
            start = function_start(codes, i)
            before = "\n".join(codes[start:i]) + "\n" + code[:call.search(code).start()]
            if not guard.search(before):
                found.append(f"{name}:{i + 1}: {message}\n    {lines[i].strip()}")
    return found


def lint(root):
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                found += violations(path.read_text(errors="replace"), str(path.relative_to(root)))
    return found


PLANTED = {
    "event without a guard": ("void f() {\n  cudaEvent_t e;\n  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, 0));\n}\n", 1),
    "guard in another function": ("void g() {\n  DeviceGuard guard(1);\n}\nvoid f() {\n  cudaEventCreate(&e);\n}\n", 1),
    "guard inside an if before": ("void f(int d) {\n  if (d) {\n    DeviceGuard guard(d);\n  }\n  cudaEventCreate(&e);\n}\n", 0),
    "event under a guard": ("void f(int d) {\n  DeviceGuard guard(d);\n  if (d) {\n    cudaEventCreate(&e);\n  }\n}\n", 0),
    "sync without a check": ("void f() {\n  EMBER_CUDA_CHECK(cudaStreamSynchronize(s));\n}\n", 1),
    "sync in a lambda, check outside": ("void f() {\n  count_host_sync(\"x\");\n  auto g = [&] {\n    cudaDeviceSynchronize();\n  };\n}\n", 0),
    "sync after its check": ("void f() {\n  count_host_sync(\"f\");\n  cudaStreamSynchronize(s);\n}\n", 0),
    "check after the sync": ("void f() {\n  cudaEventSynchronize(e);\n  count_host_sync(\"f\");\n}\n", 1),
    "check named in a comment only": ("void f() {\n  // count_host_sync(\"f\") is not needed\n  cudaStreamSynchronize(s);\n}\n", 1),
    "teardown": ("Graph::~Graph() {\n  cudaStreamSynchronize(s);  // teardown\n}\n", 0),
    "constructor initialiser list": ("A::A(int d)\n    : d_(d) {\n  DeviceGuard guard(d);\n  cudaEventCreate(&e);\n}\n", 0),
}


def self_test():
    failed = 0
    for name, (text, expected) in PLANTED.items():
        got = len(violations(text, name))
        if got != expected:
            print(f"self-test '{name}': {got} violation(s), expected {expected}")
            failed += 1
    print(f"self-test: {len(PLANTED) - failed} of {len(PLANTED)} planted cases as expected")
    return failed == 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    found = lint(root)
    for v in found:
        print(v)
    print(f"cuda_lint: {len(found)} violation(s) in {', '.join(FOLDERS)}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
