"""What the analyzer's checks share: a check that records failures instead
of stopping at the first, and the mlprof command run with its exit status
checked. Imported by tests/analyze*_check.py (which ctest runs from here)."""
import subprocess
import sys

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def command(binary):
    """mlprof(*args, expect=0): runs `binary args`, checks its exit status and
    returns the CompletedProcess (text output)."""

    def mlprof(*args, expect=0):
        p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
        check(p.returncode == expect, f"mlprof {' '.join(args)}: exit {p.returncode}, wanted {expect}\n{p.stderr}")
        return p

    return mlprof
