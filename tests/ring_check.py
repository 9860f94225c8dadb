#!/usr/bin/env python3
"""The flight recorder (mode=ring): the last events, nothing older, what was
overwritten counted, spans cut by the ring's start marked; after a crash too.

usage: ring_check.py TEST_RING LIBMLPROF PRELOAD OUT_DIR PROTO MLPROF

Runs test_ring (an "outer" span around N "work" spans in "mid" spans of
1000, a "tick" every 100)
with mode=ring, configured by the environment; N = 3400000 (10.2 M events,
about 160 MiB of records) into a 4 MiB ring in a 256 MiB pool, as the issue
asks, where one thread records (the pool leaves the collector room to fall
behind on a loaded machine: with 64 MiB it keeps up here at load 6, not
always at load 9):
- to ring.json and ring.pftrace, dumped at the end (libmlprof.so preloaded);
- to threads.json, with a second thread recording "side" spans all along
  (N = 400000 into a 256 KiB ring: two threads recording flat out on a
  2-core machine leave the collector no time to evict);
- to crash.json and crash.pftrace under libmlprof_preload.so, killed by
  SIGSEGV with the outer span open: the preload's handler writes the ring.
Each trace must decode whole (json; protoc through tests/perfetto_decode.py
and `mlprof analyze` with nothing left out), hold the last work spans (the
last one recorded, N - 1, and every one before it down to the first kept,
no gap), no event before the ring's start (otherData.ring_start_ns), the
outer span from exactly the ring's start with cut_by_ring (and the mid span
across the start, if the start fell inside one; Perfetto's slices nesting
as tests/perfetto_decode.py checks), and
otherData.overwritten_events + the events in the file = the events recorded.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import os
import shutil
import signal
import subprocess
import sys

from ring_events import events_json, events_pftrace

N = 3400000
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def sizes(how):
    """(N, ring_size, buffer_size) of a run."""
    return (400000, "256K", "64M") if how == "threads" else (N, "4M", "256M")


def run(exe, lib, path, how, out_env=None):
    env = dict(os.environ)
    env.update(LD_PRELOAD=lib, MLPROF_FILENAME=path, MLPROF_AUTOSTART="true", MLPROF_MODE="ring",
               MLPROF_RING_SIZE=sizes(how)[1], MLPROF_BUFFER_SIZE=sizes(how)[2], MLPROF_STATS_FILE="", MLPROF_HOOKS="none")
    env["ASAN_OPTIONS"] = "handle_segv=0:handle_abort=0:detect_leaks=0:verify_asan_link_order=0"
    env["UBSAN_OPTIONS"] = "handle_segv=0:handle_abort=0"
    args = [exe, str(sizes(how)[0])] + ([how] if how else [])
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    want = -signal.SIGSEGV if how == "crash" else 0
    check(r.returncode == want, f"{path}: exit status {r.returncode}, {want} expected")
    words = r.stdout.split()
    if not check(len(words) >= 4 and words[0] == "recorded", f"{path}: the program said {r.stdout!r}"):
        return None
    check(words[3] == "0", f"{path}: {words[3]} events dropped in a {sizes(how)[2]} pool")
    return int(words[1])


def verify(label, evs, other, recorded, crashed, threads):
    N = sizes("threads" if threads else None)[0]
    start = other.get("ring_start_ns", 0)
    over = other.get("overwritten_events", -1)
    check(other.get("mode") == "ring" and start > 0 and over > 0, f"{label}: otherData {other}")
    works = [a.get("i") for (nm, _, _, a) in evs if nm == "work"]
    # two threads: the ring holds the process's last events, the second
    # thread's; the main thread's last ones are kept only if they are as new
    check(threads or (works and works[-1] == N - 1), f"{label}: the last work span is {works[-1] if works else None}, not {N - 1}")
    check(sorted(works) == list(range(N - len(works), N)) and sorted(works) == works,
          f"{label}: the work spans kept are not the last ones without a gap ({len(works)} kept)")
    check(len(works) < N // 10 and len(evs) < N // 10, f"{label}: {len(works)} work spans kept: the ring kept far more than its size")
    old = [e for e in evs if e[1] < start]
    check(not old, f"{label}: {len(old)} events before the ring's start {start}: {old[:3]}")
    outer = [e for e in evs if e[0] == "outer"]
    if threads and not outer:
        pass  # ended before the ring's start
    elif check(len(outer) == 1, f"{label}: outer spans {outer}"):
        o = outer[0]
        check(o[1] == start and o[3].get("cut_by_ring") in (True, 1),
              f"{label}: the outer span {o} is not shown from the ring's start {start}, cut")
        check(bool(o[3].get("unfinished")) == crashed, f"{label}: the outer span {o}: unfinished {crashed} expected")
    mids = [e for e in evs if e[0] == "mid"]
    cut = [e for e in mids if e[3].get("cut_by_ring")]
    check(len(cut) <= 1 and all(e[1] == start for e in cut) and (not cut or mids[0] is cut[0] or
          sorted(mids, key=lambda e: e[1])[0] is cut[0]),
          f"{label}: the mid spans cut by the ring: {cut}, not the first one kept, from the ring's start {start}")
    check(over + len(evs) == recorded,
          f"{label}: overwritten_events {over} + {len(evs)} events in the file != {recorded} recorded")
    check(other.get("dropped_events") == 0 and other.get("unmatched_ends") == 0, f"{label}: otherData {other}")
    print(f"ring: {label}: {len(evs)} events kept ({len(works)} work spans), {over} overwritten")


def main():
    if len(sys.argv) != 7:
        print(__doc__, file=sys.stderr)
        return 2
    exe, lib, preload, out, proto, mlprof = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("ring: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, library, how in (("ring.json", lib, None), ("ring.pftrace", lib, None),
                               ("threads.json", lib, "threads"),
                               ("crash.json", preload, "crash"), ("crash.pftrace", preload, "crash")):
        path = os.path.join(out, name)
        recorded = run(exe, library, path, how)
        if recorded is None or not check(os.path.exists(path), f"{name}: not written"):
            continue
        with open(path, "rb") as f:
            data = f.read()
        try:
            if name.endswith(".pftrace"):
                evs, other = events_pftrace(protoc, proto, data)
                a = subprocess.run([mlprof, "analyze", path], capture_output=True, text=True)
                check(a.returncode == 0 and "left out" not in a.stderr,
                      f"{name}: mlprof analyze exited {a.returncode}: {a.stderr}")
            else:
                evs, other = events_json(data)
        except (AssertionError, ValueError) as e:
            check(False, f"{name}: the trace ({len(data)} bytes) does not decode: {e}")
            continue
        verify(name, evs, other, recorded, how == "crash", how == "threads")
        if how == "threads":
            # its last 1000 spans came after everything of the main thread
            side = [e for e in evs if e[0] == "side"]
            check(len(side) >= 1000, f"{name}: {len(side)} spans of the second thread kept, not its last 1000")
    if failures:
        print(f"ring: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("ring: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
