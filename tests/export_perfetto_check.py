#!/usr/bin/env python3
"""`mlprof export --perfetto OUT TRACE` (and `mlprof merge -o X.pftrace`):
a Chrome JSON trace written as Perfetto's protobuf by the library's own sink.

A trace written here holds every kind of event the exporter takes (nested
and overlapping durations, a B/E pair, a zero-length one, typed and nested
arguments, a kernel with its launch and flow, counters of one and two
series and one that is not a number, instants of each scope, nested and
unmatched async events, a flow step, pids and tids given as names or too
wide for a pid_t). Its export must:
- decode with protoc and follow the format's rules (perfetto_decode.resolve:
  interning, sequences, slices nesting per track...), skipped without protoc;
- hold each event with its times in ns, its arguments and its thread; the
  overlapping duration on a track of its own, "(overlapping)";
- analyse as the JSON does (`mlprof analyze` by name and shape, `mlprof
  kernels`), plain and gzip;
- say what it moved or left out, and fail cleanly on bad input or output.
The real PyTorch traces of ../shared/traces/kineto, when present, must
analyse the same exported (skipped, with the reason, when absent).

usage: export_perfetto_check.py MLPROF OUTDIR PROTO
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyze_util import check as _check, failures  # noqa: E402
from perfetto_decode import decode_text, protoc_decode, resolve  # noqa: E402

MLPROF, OUT, PROTO = sys.argv[1:4]
KINETO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "kineto")
os.makedirs(OUT, exist_ok=True)


def check(cond, what):
    _check(cond, what)
    return bool(cond)


def mlprof(*args):
    return subprocess.run([MLPROF, *args], capture_output=True, text=True, timeout=300)


def X(name, ts, dur, pid=10, tid=11, cat="cpu_op", **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


BIG_TID = 2 ** 40
EVENTS = [
    {"ph": "M", "name": "process_name", "pid": 10, "args": {"name": "trainer"}},
    {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    X("A", 0, 100, **{"Input Dims": [[2, 3], [3]], "n": 5, "f": 1.5, "s": "h\u00e9llo"}),
    X("B", 10, 30),
    X("C", 50, 70),  # ends after A: overlaps without nesting
    X("D", 20, 10.001),
    X("Z", 60, 0),
    X("E", 5, 10, tid=12),
    {"ph": "B", "name": "be", "cat": "user", "ts": 200, "pid": 10, "tid": 11},
    {"ph": "E", "ts": 210.5, "pid": 10, "tid": 11},
    X("cudaLaunchKernel", 25, 3, cat="cuda_runtime", correlation=1),
    X("gemm_kernel", 30, 5, pid=0, tid=7, cat="kernel", correlation=1, device=0, stream=7),
    {"ph": "s", "id": 1, "name": "ac2g", "cat": "ac2g", "ts": 25, "pid": 10, "tid": 11},
    {"ph": "f", "id": 1, "name": "ac2g", "cat": "ac2g", "ts": 30, "pid": 0, "tid": 7, "bp": "e"},
    {"ph": "t", "id": 1, "name": "ac2g", "cat": "ac2g", "ts": 27, "pid": 10, "tid": 11},
    {"ph": "C", "name": "mem", "ts": 10, "pid": 10, "args": {"used": 5}},
    {"ph": "C", "name": "mem", "ts": 20, "pid": 10, "args": {"used": 7}},
    {"ph": "C", "name": "two", "ts": 15, "pid": 10, "args": {"a": 1, "b": 2.5}},
    {"ph": "C", "name": "bad", "ts": 16, "pid": 10, "args": {"s": "x"}},
    {"ph": "i", "name": "mark", "ts": 5, "pid": 10, "tid": 11, "s": "t"},
    {"ph": "i", "name": "proc", "ts": 6, "pid": 10, "tid": 11, "s": "p"},
    {"ph": "i", "name": "glob", "ts": 7, "pid": 10, "tid": 11, "s": "g"},
    {"ph": "b", "name": "req", "cat": "async", "id": 1, "ts": 10, "pid": 10, "tid": 11},
    {"ph": "b", "name": "req", "cat": "async", "id": 1, "ts": 20, "pid": 10, "tid": 11},
    {"ph": "e", "name": "req", "cat": "async", "id": 1, "ts": 30, "pid": 10, "tid": 11},
    {"ph": "e", "name": "req", "cat": "async", "id": 1, "ts": 90, "pid": 10, "tid": 11},
    {"ph": "b", "name": "lost", "cat": "async", "id": 2, "ts": 40, "pid": 10, "tid": 11},
    {"ph": "e", "name": "orphan", "cat": "async", "id": 3, "ts": 41, "pid": 10, "tid": 11},
    X("layer", 0, 10, pid="Spans", tid="Layer"),
    X("wide", 0, 5, tid=BIG_TID),
]
SLICES = {"A": (0, 100), "B": (10, 40), "C": (50, 120), "D": (20, 30.001), "Z": (60, 60), "E": (5, 15),
          "be": (200, 210.5), "cudaLaunchKernel": (25, 28), "gemm_kernel": (30, 35), "layer": (0, 10),
          "wide": (0, 5)}


def ns(us):
    return round(us * 1000)


def table(path, *extra):
    """analyze's rows by name and shape, sorted: what must not change."""
    p = mlprof("analyze", path, "--aggregate-by", "name,input_shape", "--format", "csv", "-t", "0", *extra)
    check(p.returncode == 0, f"analyze {path}: {p.returncode} {p.stderr}")
    return sorted(p.stdout.splitlines()[1:])


def kernels(path):
    """kernels' answer without what depends on event order (a row's example op, the order of lists)."""
    p = mlprof("kernels", path, "--format", "json")
    check(p.returncode == 0, f"kernels {path}: {p.returncode} {p.stderr}")
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return None

    def norm(v):
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()
                    if k not in ("trace", "path", "file", "bottom_op", "top_op", "op_stack")}
        if isinstance(v, list):
            return sorted((norm(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
        return v
    return norm(doc)


def decoded(protoc, data, label):
    text, err = protoc_decode(protoc, PROTO, data)
    if not check(text is not None, f"{label}: protoc does not decode it: {err}"):
        return None
    try:
        return resolve(decode_text(text))
    except AssertionError as e:
        check(False, f"{label}: {e}")
        return None


def check_events(res):
    spans = [e for e in res.events if e.get("type") == "span"]
    by = {e["name"]: e for e in spans}
    check(sorted(by) == sorted(SLICES) and len(spans) == len(SLICES), f"slices: {sorted(e['name'] for e in spans)}")
    for name, (b, e) in SLICES.items():
        s = by.get(name)
        if s:
            check((s["ts"], s["end"]) == (ns(b), ns(e)), f"slice {name}: {s['ts']}..{s['end']}, "
                  f"expected {ns(b)}..{ns(e)}")
    tracks = {(t.get("pid"), t.get("tid")): t for t in res.tracks.values() if t.get("kind") == "thread"}
    a, c = by.get("A"), by.get("C")
    if a and c:
        check((a["pid"], a["tid"]) == (10, 11), f"A is on thread 10/11: {a['pid']}/{a['tid']}")
        ct = tracks.get((c["pid"], c["tid"]), {})
        check(c["pid"] == 10 and c["tid"] != 11 and "(overlapping)" in str(ct.get("thread_name")),
              f"C, which overlaps A, is on a track of its own beside main: {c['pid']}/{c['tid']} {ct}")
        check(a["args"].get("n") == 5 and a["args"].get("f") == 1.5 and a["args"].get("s") == "h\u00e9llo",
              f"A's arguments: {a['args']}")
        check(a.get("cat") == "cpu_op", f"A's category: {a.get('cat')}")
    w = by.get("wide")
    if w:
        check(w["pid"] == 10 and w["tid"] not in (11, 12) and 0 < w["tid"] < 2 ** 31,
              f"a 64-bit tid stands as a pid_t of its own: {w['tid']}")
    frames = sorted((e["name"], e["ts"], e["end"], e["unfinished"]) for e in res.events if e.get("type") == "frame")
    check(frames == [("lost", ns(40), ns(210.5), True), ("req", ns(10), ns(90), False),
                     ("req", ns(20), ns(30), False)], f"async slices: {frames}")
    counters = sorted((e["name"], e["ts"], e["value"]) for e in res.events if e.get("type") == "counter")
    check(counters == [("mem", ns(10), 5), ("mem", ns(20), 7), ("two a", ns(15), 1), ("two b", ns(15), 2.5)],
          f"counters: {counters}")
    flows = sorted((e["type"], e["ts"], e["pid"], e["tid"]) for e in res.events if e.get("type", "").startswith("flow"))
    check(flows == [("flow_end", ns(30), 0, 7), ("flow_start", ns(25), 10, 11)], f"flows: {flows}")
    instants = sorted((e["name"], e["scope"]) for e in res.events if e.get("type") == "instant")
    check(instants == [("glob", "process"), ("mark", "thread"), ("proc", "process")], f"instants: {instants}")
    other = [e for e in res.events if e.get("type") == "other_data"]
    check(len(other) == 1 and str(other[0]["args"].get("exported_from", "")).endswith("synthetic.json"),
          f"otherData says where the events came from: {other}")


def main():
    src = os.path.join(OUT, "synthetic.json")
    with open(src, "w") as f:
        json.dump({"traceEvents": EVENTS, "deviceProperties": [{"id": 0, "name": "Test GPU"}]}, f)
    out = os.path.join(OUT, "synthetic.pftrace")
    p = mlprof("export", "--perfetto", out, src)
    check(p.returncode == 0, f"export: {p.returncode} {p.stderr}")
    check(f"{len(SLICES)} slices, 3 async slices, 3 instants, 4 counter samples, 2 flow events" in p.stdout,
          f"export's summary: {p.stdout!r}")
    for says in ("1 durations overlap", "2 async events without their other end", "2 events or values left out"):
        check(says in p.stderr, f"export says {says!r}: {p.stderr!r}")
    with open(out, "rb") as f:
        data = f.read()
    protoc = shutil.which("protoc")
    if not protoc:
        print("export_perfetto: the packet checks skipped: protoc is not installed "
              "(scripts/install-deps.sh build installs it)")
    else:
        res = decoded(protoc, data, "synthetic.pftrace")
        if res:
            check_events(res)
    want = table(src)
    check(want and table(out) == want, f"analyze differs:\n{want}\n{table(out)}")
    kj = kernels(src)
    check(kj is not None and kernels(out) == kj, "kernels differs on the export")
    dev = mlprof("kernels", out, "--format", "json")
    check("Test GPU" in dev.stdout, "the export keeps deviceProperties (the GPU's name)")

    # gzip by the name; the same analysis
    gz = os.path.join(OUT, "synthetic.pftrace.gz")
    p = mlprof("export", "--perfetto", gz, src)
    with open(gz, "rb") as f:
        zdata = f.read()
    check(p.returncode == 0 and zdata[:2] == b"\x1f\x8b", f"export to .pftrace.gz: {p.returncode} {zdata[:2]!r}")
    if protoc and zdata[:2] == b"\x1f\x8b":
        decoded(protoc, gzip.decompress(zdata), "synthetic.pftrace.gz")
    check(table(gz) == want, "analyze differs on the gzip export")

    # merge -o X.pftrace: the merged JSON, exported
    mj, mp = os.path.join(OUT, "merged.json"), os.path.join(OUT, "merged.pftrace")
    for o in (mj, mp):
        p = mlprof("merge", src, src, "-o", o)
        check(p.returncode == 0, f"merge -o {o}: {p.returncode} {p.stderr}")
    check(table(mp) == table(mj), "merge -o X.pftrace analyses differently from merge -o X.json")
    check(not [f for f in os.listdir(OUT) if ".tmp-" in f], f"temporary files left: {os.listdir(OUT)}")

    # a trace that starts before 0 (as a merge lines traces up): shifted whole, said; a begin never ended:
    # left out, said; to standard output, the summary on stderr
    neg = os.path.join(OUT, "negative.json")
    with open(neg, "w") as f:
        json.dump({"traceEvents": [X("a", -50, 20), {"ph": "B", "name": "open", "ts": 1, "pid": 10, "tid": 11},
                                   X("c", 5, 2)]}, f)
    with open(os.path.join(OUT, "negative.pftrace"), "wb") as f:
        q = subprocess.run([MLPROF, "export", "--perfetto", "-", neg], stdout=f, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    check(q.returncode == 0 and "shifted by that much" in q.stderr and "50000 ns before 0" in q.stderr
          and "1 begins" in q.stderr and "2 slices" in q.stderr, f"negative times: {q.returncode} {q.stderr!r}")
    with open(os.path.join(OUT, "negative.pftrace"), "rb") as f:
        ndata = f.read()
    check(ndata[:1] == b"\x0a", f"standard output holds the protobuf alone: {ndata[:8]!r}")
    rows = table(os.path.join(OUT, "negative.pftrace"))
    check(rows == table(neg), f"the shifted export analyses as the JSON: {rows}")
    if protoc:
        res = decoded(protoc, ndata, "negative.pftrace")
        if res:
            spans = sorted((e["name"], e["ts"], e["end"]) for e in res.events if e.get("type") == "span")
            check(spans == [("a", 0, 20000), ("c", 55000, 57000)], f"times shifted by 50 us: {spans}")

    # 300 durations on one thread, each overlapping the others without nesting: 300
    # lanes (the thread's, then 299 overlap tracks), none left out, times kept
    many = os.path.join(OUT, "many_lanes.json")
    with open(many, "w") as f:
        json.dump({"traceEvents": [X("lane", i, 1000) for i in range(300)]}, f)
    mp = os.path.join(OUT, "many_lanes.pftrace")
    p = mlprof("export", "--perfetto", mp, many)
    check(p.returncode == 0 and "300 slices" in p.stdout and "on 299 tracks" in p.stdout
          and "left out" not in p.stderr, f"300 lanes: {p.returncode} {p.stdout!r} {p.stderr!r}")
    check(table(mp) == table(many), f"300 lanes analyse differently:\n{table(many)}\n{table(mp)}")
    if protoc:
        with open(mp, "rb") as f:
            res = decoded(protoc, f.read(), "many_lanes.pftrace")
        if res:
            spans = sorted((e["ts"], e["end"]) for e in res.events if e.get("type") == "span")
            check(spans == [(i * 1000, i * 1000 + 1000000) for i in range(300)], f"300 lanes' times: {spans[:3]}")

    # a counter whose samples do not all say the same series ({used, free}, then
    # {used} alone) keeps each series on one track; one that only says "value" is
    # a track named after it
    cnt = os.path.join(OUT, "series.json")
    with open(cnt, "w") as f:
        json.dump({"traceEvents": [
            {"ph": "C", "name": "mem", "pid": 10, "ts": 1, "args": {"used": 100, "free": 5}},
            {"ph": "C", "name": "mem", "pid": 10, "ts": 2, "args": {"used": 200}},
            {"ph": "C", "name": "mem", "pid": 10, "ts": 3, "args": {"used": 300, "free": 6}},
            {"ph": "C", "name": "q", "pid": 10, "ts": 1, "args": {"value": 1}},
            {"ph": "C", "name": "q", "pid": 10, "ts": 2, "args": {"value": 2}}, X("a", 0, 5)]}, f)
    cp, cdb = os.path.join(OUT, "series.pftrace"), os.path.join(OUT, "series.db")
    for path in (cp, cdb):
        if os.path.exists(path):
            os.unlink(path)
    mlprof("export", "--perfetto", cp, cnt)
    p = mlprof("export", "--sqlite", cdb, cp)
    if p.returncode == 0:
        import sqlite3
        with sqlite3.connect(cdb) as db:
            got = sorted(db.execute("SELECT t.name, c.ts_ns, c.value FROM counters c JOIN tracks t ON t.id = c.track_id"))
        check(got == [("mem free", 1000, 5.0), ("mem free", 3000, 6.0), ("mem used", 1000, 100.0),
                      ("mem used", 2000, 200.0), ("mem used", 3000, 300.0), ("q", 1000, 1.0), ("q", 2000, 2.0)],
              f"counter series through the export: {got}")
    else:
        print(f"export_perfetto: the counter series check skipped: {p.stderr.strip()}")

    # sampled call stacks (stackFrames and samples): exported as PerfSample packets, the
    # same stacks for mlprof flame; so through merge -o X.pftrace, whose processes differ
    def stacked(pid, hot):
        return {"traceEvents": [X("work", 0, 1000, pid=pid, tid=pid)],
                "stackFrames": {"1": {"name": "main"}, "2": {"name": "compute", "parent": "1"},
                                "3": {"name": hot, "parent": "2"}, "4": {"name": "io", "parent": "1"}},
                "samples": [{"ts": 10 + i, "pid": pid, "tid": pid, "sf": "3" if i % 4 else "4", "weight": 1}
                            for i in range(40)]}
    folded = {}
    for name, pid, hot in (("stacks_a", 10, "gemm"), ("stacks_b", 20, "conv")):
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(stacked(pid, hot), f)
    for names, out in ((["stacks_a.json"], "stacks_a.pftrace"), (["stacks_a.json", "stacks_b.json"], "stacks_ab.pftrace")):
        srcs = [os.path.join(OUT, x) for x in names]
        path = os.path.join(OUT, out)
        if len(srcs) == 1:
            p = mlprof("export", "--perfetto", path, srcs[0])
            check(p.returncode == 0 and "40 sampled call stacks" in p.stdout, f"{out}: {p.stdout!r} {p.stderr!r}")
            want_from = srcs[0]
        else:
            want_from = os.path.join(OUT, "stacks_ab.json")
            for o in (want_from, path):
                p = mlprof("merge", *srcs, "-o", o)
                check(p.returncode == 0, f"merge -o {o}: {p.stderr!r}")
        for q in (want_from, path):
            r = mlprof("flame", q, "--folded")
            folded[q] = sorted(r.stdout.splitlines()) if r.returncode == 0 else r.stderr
        check(folded[path] == folded[want_from] and len(folded[path]) == len(srcs) + 1,
              f"{out}: the stacks as the JSON's: {folded[path]} against {folded[want_from]}")

    # bad input and output: nothing written, what was there kept
    keep = os.path.join(OUT, "kept.pftrace")
    with open(keep, "w") as f:
        f.write("the previous output\n")
    bad = os.path.join(OUT, "damaged.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},{"ph":')
    p = mlprof("export", "--perfetto", keep, bad)
    check(p.returncode == 1 and "damaged.json" in p.stderr and "nothing written" in p.stderr,
          f"damaged input: {p.returncode} {p.stderr!r}")
    with open(keep) as f:
        check(f.read() == "the previous output\n", "a failed export replaced the previous output")
    p = mlprof("export", "--perfetto", keep, os.path.join(OUT, "nope.json"))
    check(p.returncode == 1 and "nope.json" in p.stderr, f"missing input: {p.returncode} {p.stderr!r}")
    p = mlprof("export", "--perfetto", OUT, src)
    check(p.returncode == 1 and "is a directory" in p.stderr, f"a directory as output: {p.returncode} {p.stderr!r}")
    for args, says in ((["--perfetto", src, src], "the trace itself"),
                       (["--perfetto", out, "--sqlite", "x.db", src], "one format at a time"),
                       (["--perfetto"], "needs a value"),
                       (["--perfetto", out], "which trace?")):
        p = mlprof("export", *args)
        check(p.returncode == 2 and says in p.stderr, f"export {args}: {p.returncode} {p.stderr!r}")
    check(not [f for f in os.listdir(OUT) if ".tmp-" in f], f"temporary files left: {os.listdir(OUT)}")

    # the real PyTorch traces
    if not os.path.isdir(KINETO):
        print(f"export_perfetto: the real traces skipped: {KINETO} is not there")
    else:
        for name in sorted(os.listdir(KINETO)):
            if not name.endswith((".json", ".json.gz")):
                continue
            path = os.path.join(KINETO, name)
            pf = os.path.join(OUT, name + ".pftrace")
            p = mlprof("export", "--perfetto", pf, path)
            if not check(p.returncode == 0, f"{name}: export: {p.returncode} {p.stderr}"):
                continue
            check(table(pf) == table(path), f"{name}: analyze differs on the export")
            check(kernels(pf) == kernels(path), f"{name}: kernels differs on the export")
            jb = os.path.getsize(path) if not name.endswith(".gz") else len(gzip.open(path).read())
            print(f"export_perfetto: {name}: {jb} bytes of JSON, {os.path.getsize(pf)} of protobuf")
            if protoc:
                with open(pf, "rb") as f:
                    decoded(protoc, f.read(), name)

    if failures:
        print(f"export_perfetto: {len(failures)} checks failed")
        sys.exit(1)
    print("export_perfetto: all checks passed")


if __name__ == "__main__":
    main()
