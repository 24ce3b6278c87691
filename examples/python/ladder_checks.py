"""Checks: how each Python example of the ladder states what it demonstrates (examples/checks.h's
twin). Every claim is printed with its verdict, and one that fails makes the script exit non-zero,
so the CI test that runs the example fails with it."""

import sys

import ember


class Checks:
    """Prints "[ok] what" or "[FAILED] what" (also on stderr) and counts the failures.

    verbose=False prints only failures (the ranks of a job but one)."""

    def __init__(self, verbose=True):
        self.verbose = verbose
        self.failures = 0

    def expect(self, holds, what):
        """Records the claim `what` with its verdict `holds`; returns holds."""
        holds = bool(holds)
        if self.verbose:
            print(f"  [{'ok' if holds else 'FAILED'}] {what}", flush=True)
        if not holds:
            print(f"claim failed: {what}", file=sys.stderr, flush=True)
            self.failures += 1
        return holds

    def expect_raises(self, error, call, what, label):
        """Calls call(); the claim `what` holds when it raises `error`, whose message is printed after label."""
        try:
            call()
        except error as e:
            print(f"{label}: {e}")
            return self.expect(True, what)
        return self.expect(False, what)

    def exit_code(self):
        """The script's exit status: 0 when every claim held, 1 otherwise."""
        if self.failures:
            print(f"{self.failures} claim(s) failed", file=sys.stderr)
        return 1 if self.failures else 0


def run_checked(program, body):
    """Runs body(checks) with fresh Checks and exits with their status; an ember.Error it raises is
    printed after the program's name and fails the run too (examples/checks.h's run_checked)."""
    checks = Checks()
    try:
        body(checks)
    except ember.Error as e:
        sys.stdout.flush()
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(checks.exit_code())
