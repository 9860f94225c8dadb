"""What the analyzer's checks share: a check that records failures instead
of stopping at the first, and the mlprof command run with its exit status
checked. Imported by tests/analyze*_check.py (which ctest runs from here)."""
import json
import os
import shutil
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


def fresh_folder(parent, name):
    """parent/name, emptied (made when missing)."""
    d = os.path.join(parent, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write_json(path, obj):
    """Writes obj as JSON (a str as it is) to path; returns path."""
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def load_written(path):
    """The JSON at path; a failed check and an empty merged trace when the
    command did not write it."""
    if not os.path.exists(path):
        check(False, f"{path} was not written")
        return {"traceEvents": [], "otherData": {"merge": {"inputs": []}}}
    with open(path) as f:
        return json.load(f)


def as_json(p, what):
    """The JSON a command printed, or None with a failed check naming what."""
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"{what}: not JSON: {p.stdout[:300]!r} {p.stderr[:300]!r}")
        return None
