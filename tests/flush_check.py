#!/usr/bin/env python3
"""Flushes of the flight recorder (mode=ring): `mlprof capture PID --flush`
and dump_signal write the ring while the program goes on.

usage: flush_check.py TEST_RING LIBMLPROF OUT_DIR PROTO MLPROF

test_ring N wait records without end (an "outer" span around "work" spans i
in "mid" spans of 1000, a "tick" every 100) with a 256 KiB ring in a 64 MiB
pool, says "ready" after N iterations and takes commands on its input:
- flushed twice by `mlprof capture PID --flush` (the second with -o; in
  JSON after one to a folder that does not exist: status 1, the ring left
  as it was), in
  JSON and in Perfetto: two files, each the ring at that moment (work spans
  without a gap, the older ones overwritten, nothing before its ring_start_ns,
  the outer span from that start, cut_by_ring and unfinished), each newer
  than the one before, then the program goes on, exits 0, and its exit trace
  holds what came after the second flush; the files' events (the spans shown
  unfinished aside) and their overwritten_events add up to what was recorded;
- under `mlprof run --mode ring` (dump_signal=USR2 by default): kill -USR2
  twice gives two files, the program goes on and exits 0; --tree flushes it
  through the mlprof command's pid;
- with a SIGUSR2 handler of its own (test_ring N own): the handler is kept
  (it counts both signals), said on stderr, no file is written;
- errors: --flush to a process that waits for captures but is not in ring
  mode (7), to a process without mlprof (4), to a dead pid (3), with
  --duration (2); dump_signal=KILL and dump_signal=FOO (2, naming the key).
Behaviour only: the test waits for lines and files, never for a time.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ring_events import events_json, events_pftrace

N = 100000
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def read_events(path, protoc, proto):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return events_pftrace(protoc, proto, data) if path.endswith(".pftrace") else events_json(data)
    except (AssertionError, ValueError, OSError) as e:
        check(False, f"{path}: does not decode: {e}")
        return None, None


def verify(label, evs, other, unfinished):
    """One file's ring: returns its work spans' numbers."""
    start = other.get("ring_start_ns", 0)
    check(other.get("mode") == "ring" and start > 0, f"{label}: otherData {other}")
    # a work span open at the flush (unfinished in its tail) may not have its
    # argument yet: it is in the next file, whole
    works = [a.get("i") for (nm, _, _, a) in evs if nm == "work" and not a.get("unfinished")]
    check(works and sorted(works) == works and works == list(range(works[0], works[0] + len(works))),
          f"{label}: the work spans are not a run without a gap ({len(works)})")
    # far more was recorded since the file before than the ring holds: the
    # oldest of it went (what a lagging collector had not evicted yet goes at
    # the flush, newer than the ring's start, so no bound on the count)
    check(other.get("overwritten_events", 0) > 0, f"{label}: nothing overwritten: not a ring")
    old = [e for e in evs if e[1] < start]
    check(not old, f"{label}: {len(old)} events before the ring's start {start}: {old[:3]}")
    outer = [e for e in evs if e[0] == "outer"]
    if check(len(outer) == 1, f"{label}: outer spans {outer}"):
        o = outer[0]
        check(o[1] == start and o[3].get("cut_by_ring") in (True, 1) and bool(o[3].get("unfinished")) == unfinished,
              f"{label}: the outer span {o}: not from the ring's start {start}, cut, unfinished={unfinished}")
    check(other.get("dropped_events") == 0 and other.get("unmatched_ends") == 0, f"{label}: otherData {other}")
    print(f"flush: {label}: {len(evs)} events, work spans {works[0] if works else None}.."
          f"{works[-1] if works else None}, {other.get('overwritten_events')} overwritten")
    return works


class Program:
    """test_ring in wait/own mode, driven through its input."""

    def __init__(self, args, env, label):
        self.label = label
        self.err_path = os.path.join(OUT, label + ".stderr")
        self.err = open(self.err_path, "w")
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                  env=env)

    def line(self, prefix):
        """The next line of the program's output that starts with prefix (None at its end)."""
        for line in self.p.stdout:
            sys.stdout.write(f"[{self.label}] {line}")
            if line.startswith(prefix):
                return line.split()
        check(False, f"{self.label}: ended before saying {prefix!r}")
        return None

    def say(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def finish(self):
        """quit; returns (exit status, the recorded count, stderr)."""
        self.say("quit")
        words = self.line("recorded")
        self.p.stdin.close()
        rest = self.p.stdout.read()
        sys.stdout.write(rest)
        rc = self.p.wait(timeout=300)
        self.err.close()
        with open(self.err_path) as f:
            err = f.read()
        sys.stderr.write(err)
        return rc, int(words[1]) if words else None, err

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def capture(*args):
    r = subprocess.run([MLPROF, "capture", *[str(a) for a in args]], capture_output=True, text=True, timeout=300,
                       env=BASE)
    print(f"$ mlprof capture {' '.join(str(a) for a in args)} -> {r.returncode}\n{r.stdout}{r.stderr}", end="")
    return r


def wait_file(path, proc):
    """Waits for path to appear while proc lives (a file is renamed into place whole)."""
    while not os.path.exists(path):
        if proc.poll() is not None:
            return check(os.path.exists(path), f"{path}: not written before the program ended")
        time.sleep(0.05)
    return True


def ring_env(path, **more):
    env = dict(BASE, LD_PRELOAD=LIB, MLPROF_FILENAME=path, MLPROF_AUTOSTART="true", MLPROF_MODE="ring",
               MLPROF_RING_SIZE="256K", MLPROF_BUFFER_SIZE="64M", MLPROF_STATS_FILE="", MLPROF_HOOKS="none")
    env.update(more)
    return env


def flushed_twice(ext, protoc, proto):
    """Two flushes by mlprof capture --flush, then the exit."""
    path = os.path.join(OUT, "ring" + ext)
    prog = Program([EXE, str(N), "wait"], ring_env(path), "flush" + ext)
    try:
        if not prog.line("ready"):
            return
        if ext == ".json":  # a flush that cannot be written says why, and takes nothing from the ring
            bad = capture(prog.p.pid, "--flush", "-o", "/nonexistent-mlprof-dir/r.json")
            check(bad.returncode == 1 and "/nonexistent-mlprof-dir/r.json" in bad.stderr,
                  f"an unwritable flush: status {bad.returncode}, 1 expected, naming the file")
        c1 = capture(prog.p.pid, "--flush")
        first = os.path.join(OUT, "ring.flush1" + ext)
        check(c1.returncode == 0 and c1.stdout.strip() == first, f"flush 1: status {c1.returncode}, {c1.stdout!r}")
        prog.say("next")
        if not prog.line("ready"):
            return
        second = os.path.join(OUT, "second" + ext)
        c2 = capture(prog.p.pid, "--flush", "-o", second)
        check(c2.returncode == 0 and c2.stdout.strip() == second, f"flush 2: status {c2.returncode}, {c2.stdout!r}")
        prog.say("next")  # recording goes on after it
        if not prog.line("ready"):
            return
        rc, recorded, _ = prog.finish()
    finally:
        prog.kill()
    check(rc == 0, f"{path}: exit status {rc}")
    total, last = 0, -1
    for label, p, unfinished in ((first, first, True), (second, second, True), (path, path, False)):
        if not check(os.path.exists(p), f"{p}: not written"):
            return
        evs, other = read_events(p, protoc, proto)
        if evs is None:
            return
        works = verify(os.path.basename(label), evs, other, unfinished)
        check(works and works[0] > last, f"{label}: holds work spans of the file before ({works[:1]}, after {last})")
        last = works[-1] if works else last
        total += sum(1 for e in evs if not e[3].get("unfinished")) + other.get("overwritten_events", 0)
    check(total == recorded, f"ring{ext}: the files' events and overwritten_events add up to {total}, "
                             f"not the {recorded} recorded")


def signals_under_run(protoc, proto):
    """mlprof run --mode ring: USR2 by default, twice; then --tree."""
    out = os.path.join(OUT, "run.json")
    env = dict(BASE)
    env.pop("MLPROF_DUMP_SIGNAL", None)
    err_path = os.path.join(OUT, "run.stderr")
    err = open(err_path, "w")
    run = subprocess.Popen([MLPROF, "run", "-q", "--mode", "ring", "--ring_size", "256K", "--buffer_size", "64M",
                            "--hooks", "none", "--profile_memory", "0", "-o", out, "--", EXE, str(N), "wait"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    prog = Program.__new__(Program)
    prog.label, prog.p, prog.err, prog.err_path = "run", run, err, err_path
    try:
        if not prog.line("ready"):
            return
        m = None
        while not m and run.poll() is None:  # said once the program started
            with open(err_path) as f:
                m = re.search(r"is process (\d+), a flight recorder", f.read())
            time.sleep(0.05)
        if not check(m, "mlprof run --mode ring does not say the program's pid"):
            return
        pid = int(m.group(1))
        parts = out + ".parts"
        files = []
        for k in (1, 2):
            os.kill(pid, signal.SIGUSR2)
            files.append(os.path.join(parts, f"trace.{pid}.flush{k}.json"))
            if not wait_file(files[-1], run):
                return
            prog.say("next")  # the program goes on after it
            if not prog.line("ready"):
                return
        c = capture(run.pid, "--flush", "--tree")
        files.append(os.path.join(parts, f"trace.{pid}.flush3.json"))
        check(c.returncode == 0 and c.stdout.strip() == files[-1],
              f"--tree --flush of mlprof run: status {c.returncode}, {c.stdout!r}, {files[-1]} expected")
        rc, _, text = prog.finish()
    finally:
        prog.kill()
    check(rc == 0, f"mlprof run --mode ring: exit status {rc}")
    check(text.count("dump_signal: the ring is written to") == 2, "mlprof run: two dump_signal dumps said")
    check(os.path.exists(out), f"{out}: the run's trace is not written")
    last = -1
    for p in files:
        if not check(os.path.exists(p), f"{p}: not written"):
            return
        evs, other = read_events(p, protoc, proto)
        if evs is None:
            return
        works = verify(os.path.basename(p), evs, other, True)
        check(works and works[0] > last, f"{p}: holds work spans of the file before")
        last = works[-1] if works else last


def own_handler():
    """A program with a SIGUSR2 handler of its own keeps it."""
    path = os.path.join(OUT, "own.json")
    prog = Program([EXE, str(N), "own"], ring_env(path, MLPROF_DUMP_SIGNAL="USR2"), "own")
    try:
        if not prog.line("ready"):
            return
        counts = []
        for _ in range(2):
            os.kill(prog.p.pid, signal.SIGUSR2)
            prog.say("count")
            words = prog.line("usr2")
            counts.append(int(words[1]) if words else None)
        rc, _, err = prog.finish()
    finally:
        prog.kill()
    check(rc == 0, f"own: exit status {rc}")
    check(counts == [1, 2], f"own: the program's handler counted {counts}, [1, 2] expected")
    check("handles SIGUSR2 itself" in err, "own: the kept handler is not said on stderr")
    check(not glob.glob(os.path.join(OUT, "own.flush*")), "own: a signal of the program's wrote a trace")


def errors():
    # waits for captures, not in ring mode
    path = os.path.join(OUT, "ondemand.json")
    env = dict(BASE, LD_PRELOAD=LIB, MLPROF_FILENAME=path, MLPROF_ON_DEMAND="1", MLPROF_HOOKS="none")
    prog = Program([EXE, str(N), "wait"], env, "ondemand")
    try:
        if prog.line("ready"):
            c = capture(prog.p.pid, "--flush")
            check(c.returncode == 7 and "no flight recorder" in c.stderr,
                  f"--flush of a process not in ring mode: status {c.returncode}, 7 expected")
        prog.finish()
    finally:
        prog.kill()
    plain = subprocess.Popen(["sleep", "60"])
    try:
        c = capture(plain.pid, "--flush")
        check(c.returncode == 4 and "not profiled by mlprof" in c.stderr,
              f"--flush of a process without mlprof: status {c.returncode}, 4 expected")
    finally:
        plain.kill()
        plain.wait()
    dead = subprocess.Popen(["true"])
    dead.wait()
    c = capture(dead.pid, "--flush")
    check(c.returncode == 3 and "no such process" in c.stderr, f"--flush of a dead pid: status {c.returncode}")
    c = capture(os.getpid(), "--flush", "--duration", "1s")
    check(c.returncode == 2 and "--flush" in c.stderr, f"--flush --duration: status {c.returncode}, 2 expected")
    for bad in ("KILL", "FOO"):
        r = subprocess.run([MLPROF, "run", "-q", "-o", os.path.join(OUT, "bad.json"), "--dump_signal", bad, "--",
                            "true"], capture_output=True, text=True, env=BASE, timeout=300)
        check(r.returncode == 2 and "dump_signal" in r.stderr,
              f"mlprof run --dump_signal {bad}: status {r.returncode}, {r.stderr!r}")


def main():
    global EXE, LIB, OUT, MLPROF, BASE
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    EXE, LIB, OUT, proto, MLPROF = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("flush: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    rt = tempfile.mkdtemp(prefix="mlprof-flush-rt-")  # the sockets' folder, this test's own
    BASE = dict(os.environ, XDG_RUNTIME_DIR=rt)
    BASE["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    for k in [k for k in BASE if k.startswith("MLPROF_")]:
        del BASE[k]
    try:
        flushed_twice(".json", protoc, proto)
        flushed_twice(".pftrace", protoc, proto)
        signals_under_run(protoc, proto)
        own_handler()
        errors()
    finally:
        shutil.rmtree(rt, ignore_errors=True)
    if failures:
        print(f"flush: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("flush: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
