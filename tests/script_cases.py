"""The runner of ember's Python test scripts (tests/test_*.py): each case is a function that raises
on failure; the summary is printed as doctest prints it, because `./ember test` counts test cases
from those lines, and `--count` prints the number of cases without running them, as doctest does."""
import subprocess
import time


class SkipCase(Exception):
    """Raised by a case that cannot run in this build or on this machine: reported as skipped, with
    the reason."""


class Cases(list):
    def case(self, fn):
        """Decorator: registers fn as a case."""
        self.append(fn)
        return fn

    def count_requested(self, argv):
        if "--count" not in argv:
            return False
        print(f"[doctest] test cases passing the current filters: {len(self)}")
        return True

    def skip(self, reason):
        """Reports every case skipped; returns meson's exit status for a skipped test."""
        print(f"{reason}: skipped")
        print(f"[doctest] test cases: {len(self)} | 0 passed | 0 failed | {len(self)} skipped")
        return 77

    def run(self):
        """Runs every case; returns the exit status (1 when any failed)."""
        failed = skipped = 0
        for fn in self:
            start = time.monotonic()
            try:
                fn()
                print(f"ok      {fn.__name__} ({time.monotonic() - start:.2f} s)")
            except SkipCase as e:
                skipped += 1
                print(f"skipped {fn.__name__}: {e}")
            except (AssertionError, subprocess.SubprocessError, OSError) as e:
                failed += 1
                print(f"FAILED  {fn.__name__}: {type(e).__name__}: {e}")
        passed = len(self) - failed - skipped
        print(f"[doctest] test cases: {len(self)} | {passed} passed | {failed} failed | {skipped} skipped")
        return 1 if failed else 0
