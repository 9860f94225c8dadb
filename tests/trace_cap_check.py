#!/usr/bin/env python3
"""max_trace_size: a trace stops growing at its cap, stays whole, and counts
what it left out, in every format.

usage: trace_cap_check.py TEST_TRACE_CAP OUT_DIR PROTO MLPROF

Runs test_trace_cap (an "outer" span around N "work" spans and a "tick"
every 100) to cap.json, cap.json.gz and cap.pftrace with max_trace_size
64K, and once per format with no events (the head and the tail alone). Each
capped file must be at most the cap + one event + the empty trace's size,
whole (JSON and gzip parse; the protobuf decodes with protoc through
tests/perfetto_decode.py, and `mlprof analyze` reads it with nothing left
out), hold the first events in order (work i = 0, 1, 2 ... with no gap), say
max_trace_size and capped_events in otherData, and capped_events + the
events in the file = the events recorded; stderr says it once. A run
without a cap leaves nothing out and says nothing of it.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

from perfetto_decode import decode_text, protoc_decode, resolve

CAP = 65536
N = 20000
SLACK = 1024  # the event that reaches the cap (and a Perfetto slice's end)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def run(exe, path, cap, n):
    r = subprocess.run([exe, path, str(cap), str(n)], capture_output=True, text=True)
    check(r.returncode == 0, f"{path}: test_trace_cap exited {r.returncode}: {r.stderr}")
    recorded = int(r.stdout.split()[1]) if r.stdout.startswith("recorded") else -1
    check(r.stdout.split()[3:4] == ["0"], f"{path}: events dropped: {r.stdout}")
    return recorded, r.stderr


def events_json(data):
    doc = json.loads(data)
    evs = []
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            evs.append((e["name"], e.get("args", {}).get("i"), e.get("args", {}).get("unfinished", False)))
        elif e["ph"] in ("i", "I"):
            evs.append((e["name"], None, False))
    return evs, doc.get("otherData", {})


def events_pftrace(protoc, proto, data, label):
    text, err = protoc_decode(protoc, proto, data)
    if not check(text is not None, f"{label}: protoc cannot decode it: {err}"):
        return [], {}
    res = resolve(decode_text(text))
    evs, other = [], {}
    for e in res.events:
        if e["type"] == "other_data":
            other = e["args"]
        elif e["type"] == "span":
            args = e.get("args", {})
            evs.append((e["name"], args.get("i"), e.get("unfinished", False)))
        elif e["type"] == "instant":
            evs.append((e["name"], None, False))
    return evs, other


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    exe, out, proto, mlprof = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("SKIP: protoc is not installed (apt-get install protobuf-compiler)")
        return 77
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name in ("cap.json", "cap.json.gz", "cap.pftrace"):
        path = os.path.join(out, name)
        empty = os.path.join(out, "empty." + name)
        whole = os.path.join(out, "whole." + name)
        run(exe, empty, CAP, 0)
        recorded, err = run(exe, path, CAP, N)
        check(recorded == N + 1 + (N + 99) // 100, f"{name}: recorded {recorded}")
        size, empty_size = os.path.getsize(path), os.path.getsize(empty)
        check(size <= CAP + SLACK + empty_size,
              f"{name}: {size} bytes, more than the cap {CAP} + {SLACK} + the empty trace's {empty_size}")
        with open(path, "rb") as f:
            data = f.read()
        if name.endswith(".gz"):
            data = gzip.decompress(data)
            # compressed, the cap must still let in many more events than plain
        if name.endswith(".pftrace"):
            evs, other = events_pftrace(protoc, proto, data, name)
            a = subprocess.run([mlprof, "analyze", path], capture_output=True, text=True)
            check(a.returncode == 0 and "left out" not in a.stderr,
                  f"{name}: mlprof analyze exited {a.returncode}: {a.stderr}")
        else:
            evs, other = events_json(data)
        check(other.get("max_trace_size") == CAP, f"{name}: otherData.max_trace_size {other.get('max_trace_size')}")
        capped = other.get("capped_events", -1)
        check(capped > 0, f"{name}: nothing was left out ({capped})")
        check(capped + len(evs) == recorded,
              f"{name}: capped_events {capped} + {len(evs)} events in the file != {recorded} recorded")
        works = [i for (nm, i, _) in evs if nm == "work"]
        check(works == list(range(len(works))), f"{name}: the work spans kept are not the first ones in order")
        check(len(works) > 100, f"{name}: only {len(works)} work spans kept")
        check(not any(u for (_, _, u) in evs), f"{name}: an unfinished span in a finished trace")
        if name.endswith(".pftrace"):
            # the outer span began before the cap: its end is written past it
            check(any(nm == "outer" for (nm, _, _) in evs), f"{name}: the outer span's end was left out")
        check(err.count("max_trace_size") == 1, f"{name}: stderr does not say the cap once: {err!r}")
        print(f"{name}: {size} bytes (cap {CAP}, empty trace {empty_size}), {len(evs)} events, {capped} capped")
        # with no cap: everything, and nothing said
        recorded, err = run(exe, whole, 0, 2000)
        with open(whole, "rb") as f:
            data = f.read()
        if name.endswith(".gz"):
            data = gzip.decompress(data)
        evs, other = (events_pftrace(protoc, proto, data, "whole." + name) if name.endswith(".pftrace")
                      else events_json(data))
        check(len(evs) == recorded and "capped_events" not in other and "max_trace_size" not in err,
              f"whole.{name}: {len(evs)} events of {recorded}, otherData {other.get('capped_events')}, {err!r}")
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print("trace_cap: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
