#!/usr/bin/env python3
"""The same recorded run written as JSON, gzip and protobuf: identical events.

usage: sink_formats_check.py TEST_PERFETTO_FORMATS OUT_DIR PROTO [MLPROF]

Runs test_perfetto_formats (a run whose times are set by hand, so that every
run records the same events) three times, to run.json, run.json.gz and
run.pftrace: the file's name chooses the format. Reads the JSON with json,
the gzip with Python's gzip module, the protobuf with
`protoc --decode=perfetto.protos.Trace PROTO` (events resolved through
interning and track descriptors, tests/perfetto_decode.py), and compares
them event by event: names, categories, times, tracks (threads by name,
their order), arguments with their types, counter values, and otherData.
Process and thread ids differ from run to run: threads are compared by the
names the run gives them. The same holds for the dump each run takes in
the middle (RUN.mid: a tail with a frame and two spans unfinished). Each
run's mlprof_dump_string texts (RUN.str0 before any dump, RUN.str after
the one in the middle) are Chrome JSON whatever the format, holding the
events of the JSON run's: the dump in the middle's, and each other's. Given
the mlprof command, `mlprof analyze` must also print the same table for
the three final files.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

from perfetto_decode import decode_text, resolve

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def run(exe, out, name):
    d = os.path.join(out, name.replace(".", "_"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, name)
    r = subprocess.run([exe, path], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"{name}: test_perfetto_formats exited {r.returncode}")
    with open(path, "rb") as f:
        final = f.read()
    with open(path + ".mid", "rb") as f:
        mid = f.read()
    strings = []
    for suffix in (".str0", ".str"):
        with open(path + suffix, "rb") as f:
            strings.append(f.read())
    return final, mid, path, strings


def ns(us):
    """A JSON timestamp (microseconds, three decimals) in nanoseconds."""
    return int(round(us * 1000))


def from_json(doc):
    """The events of a Chrome JSON trace, as perfetto_decode.resolve shows them
    (without sequences), threads by name; and its tracks and otherData."""
    threads, ranks, process = {}, {}, None
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            threads[e["tid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_sort_index":
            ranks[e["tid"]] = e["args"]["sort_index"]
        elif e["ph"] == "M" and e["name"] == "process_name":
            process = e["args"]["name"]
    events, open_frames = [], {}
    for e in doc["traceEvents"]:
        ph = e["ph"]
        thread = threads.get(e["tid"], e["tid"])
        base = {"name": e["name"], "cat": e.get("cat")}
        args = dict(e.get("args", {}))
        if ph == "X":
            unfinished = args.pop("unfinished", False)
            events.append(dict(base, type="span", ts=ns(e["ts"]), end=ns(e["ts"]) + ns(e["dur"]), thread=thread,
                               unfinished=unfinished, args=args))
        elif ph == "b":
            open_frames[(e["name"], e["id"], e["tid"])] = (e, args)
        elif ph == "e":
            b, bargs = open_frames.pop((e["name"], e["id"], e["tid"]))
            unfinished = bargs.pop("unfinished", False)
            events.append(dict(base, type="frame", ts=ns(b["ts"]), end=ns(e["ts"]), thread=thread,
                               unfinished=unfinished, args=bargs))
        elif ph == "i":
            scoped = e.get("s", "t") == "t"
            events.append(dict(base, type="instant", ts=ns(e["ts"]), thread=thread if scoped else None,
                               scope="thread" if scoped else "process", args=args))
        elif ph == "C":
            events.append(dict(base, type="counter", ts=ns(e["ts"]), value=args["value"]))
        elif ph in ("s", "f"):
            events.append(dict(base, type="flow_start" if ph == "s" else "flow_end", ts=ns(e["ts"]), thread=thread,
                               id=e["id"]))
        elif ph != "M":
            check(False, f"JSON: an event of phase {ph!r}: {e}")
    check(not open_frames, f"JSON: frames begun and never ended: {list(open_frames)}")
    tracks = {name: ranks.get(tid) for tid, name in threads.items()}
    return events, tracks, process, doc.get("otherData", {})


def from_protobuf(text):
    res = resolve(decode_text(text))
    threads, ranks = {}, {}
    process = None
    for t in res.tracks.values():
        if t["kind"] == "thread":
            threads[t["tid"]] = t.get("thread_name")
            ranks[t.get("thread_name")] = t.get("rank")
        elif t["kind"] == "process":
            process = t.get("process_name")
    events, other = [], None
    for e in res.events:
        e = dict(e)
        for key in ("seq", "last_packet", "pid", "int"):
            e.pop(key, None)
        if e["type"] == "other_data":
            other = e["args"]
            continue
        if "tid" in e:
            tid = e.pop("tid")
            e["thread"] = threads.get(tid, tid) if tid is not None else None
        events.append(e)
    return events, ranks, process, other


def canonical(events):
    """Sorted; a span still open ends at the dump, on the collector's real
    clock: only checked to end after its start."""
    out = []
    for e in events:
        if e.get("unfinished"):
            check(e["end"] >= e["ts"], f"an unfinished span ends before it begins: {e}")
            e = dict(e, end="at the dump")
        out.append(e)
    return sorted(out, key=lambda e: json.dumps(e, sort_keys=True))


def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def compare(label, got, want):
    got, want = canonical(got), canonical(want)
    check(len(got) == len(want), f"{label}: {len(got)} events, JSON has {len(want)}")
    for g, w in zip(got, want):
        if not check(same(g, w), f"{label}: event\n  {g}\n  JSON has\n  {w}"):
            return False
    return len(got) == len(want)


# otherData members that differ from one run to the next by nature (the
# collector reads the real clock for the start and the dump)
RUN_SPECIFIC = {"pid", "start_ns", "dump_ns"}


def compare_other(label, got, want):
    if not check(got is not None, f"{label}: no otherData footer"):
        return
    check(set(got) == set(want), f"{label}: otherData has {sorted(got)}, JSON has {sorted(want)}")
    for k in set(got) & set(want) - RUN_SPECIFIC:
        check(same(got[k], want[k]), f"{label}: otherData.{k} is {got[k]!r}, JSON has {want[k]!r}")


def compare_formats(protoc, proto, label, plain, packed, proto_bytes):
    doc = json.loads(plain)
    events, tracks, process, other = from_json(doc)
    check(len(events) >= 12, f"{label}: the run recorded only {len(events)} events")
    kinds = {e["type"] for e in events}
    check({"span", "frame", "instant", "counter"} <= kinds, f"{label}: the run lacks kinds of events: it has {kinds}")
    check(any(e["cat"] == "memory" for e in events), f"{label}: the run has no memory events")
    unfinished = sum(1 for e in events if e.get("unfinished"))
    check(unfinished == (3 if "middle" in label else 0), f"{label}: {unfinished} unfinished spans")

    # gzip: a gzip stream whose text is the same trace
    if check(packed[:2] == b"\x1f\x8b", f"{label}: run.json.gz is not gzip"):
        gz_doc = json.loads(gzip.decompress(packed))
        g_events, g_tracks, g_process, g_other = from_json(gz_doc)
        compare(f"{label}, gzip", g_events, events)
        check(g_tracks == tracks and g_process == process, f"{label}, gzip: tracks {g_tracks} {g_process}, "
              f"JSON has {tracks} {process}")
        compare_other(f"{label}, gzip", g_other, other)

    # protobuf: Perfetto's packets, decoded by protoc
    if not check(proto_bytes[:1] == b"\x0a", f"{label}: run.pftrace does not start with a TracePacket"):
        return
    r = subprocess.run([protoc, "--decode=perfetto.protos.Trace", "-I", os.path.dirname(proto), proto],
                       input=proto_bytes, capture_output=True)
    if not check(r.returncode == 0, f"{label}: protoc cannot decode run.pftrace: "
                 f"{r.stderr.decode(errors='replace')}"):
        return
    try:
        p_events, p_tracks, p_process, p_other = from_protobuf(r.stdout.decode("utf-8"))
    except AssertionError as e:
        check(False, f"{label}, protobuf: {e}")
        return
    compare(f"{label}, protobuf", p_events, events)
    for name, rank in tracks.items():
        check(p_tracks.get(name) == rank, f"{label}, protobuf: thread {name!r} ranked {p_tracks.get(name)}, "
              f"JSON has {rank}")
    check(p_process == process, f"{label}, protobuf: process named {p_process!r}, JSON has {process!r}")
    compare_other(f"{label}, protobuf", p_other, other)
    print(f"sink_formats: {label}: {len(events)} events ({unfinished} unfinished): {len(plain)} bytes of JSON, "
          f"{len(packed)} gzip, {len(proto_bytes)} protobuf")


def compare_strings(runs):
    """mlprof_dump_string gives Chrome JSON whatever the file's format: after
    the dump in the middle, that dump's events (the JSON run's file); before
    any dump, the same events in every format."""
    mid = json.loads(runs[0][1])
    m_events, m_tracks, m_process, m_other = from_json(mid)
    base = None
    for (final, _, path, strings), fmt in zip(runs, ("json", "gzip", "protobuf")):
        docs = []
        for text, name in zip(strings, ("str0", "str")):
            label = f"dump_string ({name}) of the {fmt} trace"
            try:
                docs.append(json.loads(text))
            except ValueError as e:
                check(False, f"{label}: not JSON ({e}): {text[:60]!r}")
                docs.append(None)
        if docs[1] is not None:
            events, tracks, process, other = from_json(docs[1])
            label = f"dump_string after the middle dump of the {fmt} trace"
            compare(label, events, m_events)
            check(tracks == m_tracks and process == m_process, f"{label}: tracks {tracks} {process}, "
                  f"the middle dump has {m_tracks} {m_process}")
            compare_other(label, other, m_other)
        if docs[0] is not None:
            events = from_json(docs[0])[0]
            check(len(events) >= 3, f"dump_string (str0) of the {fmt} trace: {len(events)} events")
            if base is None:
                base = events
            else:
                compare(f"dump_string before any dump, {fmt} against JSON", events, base)


def analyze(mlprof, path):
    """mlprof analyze's table for the trace at path, less its first line (the file's name)."""
    r = subprocess.run([mlprof, "analyze", path], capture_output=True, text=True)
    check(r.returncode == 0, f"mlprof analyze {path} exited {r.returncode}: {r.stderr}")
    lines = r.stdout.splitlines()
    check(lines and lines[0].startswith("trace: "), f"mlprof analyze {path}: {r.stdout[:200]}")
    return "\n".join(lines[1:])


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    exe, out, proto = sys.argv[1:4]
    mlprof = sys.argv[4] if len(sys.argv) == 5 else None
    protoc = shutil.which("protoc")
    if not protoc:
        print("sink_formats: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    os.makedirs(out, exist_ok=True)

    runs = [run(exe, out, name) for name in ("run.json", "run.json.gz", "run.pftrace")]
    for which, label in ((0, "final dump"), (1, "dump in the middle")):
        compare_formats(protoc, proto, label, *(r[which] for r in runs))
    compare_strings(runs)
    if mlprof:
        # the final dump only: the middle one's open spans end at the dump's
        # real-clock time, which differs from run to run
        tables = [analyze(mlprof, r[2]) for r in runs]
        for name, table in zip(("gzip", "protobuf"), tables[1:]):
            check(table == tables[0], f"mlprof analyze of the {name} trace:\n{table}\nof the JSON:\n{tables[0]}")
    if failures:
        print(f"sink_formats: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("sink_formats: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
