#!/usr/bin/env python3
"""`mlprof augment` and `mlprof sequences` on Kineto-shaped traces written
here with figures known to the nanosecond:

- the launch queue of each stream over time (+1 when the runtime call that
  launched a kernel, copy or memset starts, -1 when the GPU event ends), one
  sample at every change, and the time at or above the queue's limit (HTA's
  time blocked on a full queue), with a small limit and with the default 1024;
- the bandwidth of copies and memsets per stream and per device;
- the output: every event and member of the input kept, the counters added,
  gzip input, a .gz output name (plain JSON, said on stderr), an unfinished
  bare array, a string stream tid; analyze and kernels read it back with the
  input's figures;
- what the trace lacks (runtime calls, correlation, bytes) on stderr, and bad
  input refused with a clear error, a non-zero status and no output;
- recurring kernel sequences: counts (without overlap), GPU time, the op stack
  of the first kernel, the defaults (length 3, top 5 per length).

usage: analyze_augment_check.py MLPROF OUTDIR
"""
import gzip
import json
import os
import subprocess
import sys

from analyze_util import check, command, failures

MLPROF, OUT = sys.argv[1:3]
GPU, HOST = 0, 100


mlprof = command(MLPROF)


def as_json(p, what):
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"JSON from {what}: {e}\n{p.stdout[:400]}")
        return {}


def write(name, trace, gz=False):
    path = os.path.join(OUT, name)
    data = json.dumps(trace).encode()
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def meta(what, pid, tid, **args):
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": args}


def x(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


class Trace:
    """A PyTorch-shaped trace: CPU operators on HOST, runtime calls with a
    correlation id inside them, GPU events on device GPU's streams."""

    def __init__(self):
        self.ev = [meta("process_name", GPU, 0, name="python3"), meta("process_labels", GPU, 0, labels="GPU 0"),
                   meta("process_name", HOST, 0, name="python3")]
        self.corr = 0

    def launch(self, at, kernel, stream, ts, dur, cat="kernel", call="cudaLaunchKernel", linked=True, **args):
        """A runtime call at `at` (us) launching `kernel` on `stream` at ts."""
        self.corr += 1
        if linked:
            self.ev.append(x(call, "cuda_runtime", at, 0.5, HOST, HOST, correlation=self.corr))
        self.ev.append(x(kernel, cat, ts, dur, GPU, stream, device=GPU, stream=stream,
                         correlation=self.corr if linked else 0, **args))

    def op(self, name, ts, dur):
        self.ev.append(x(name, "cpu_op", ts, dur, HOST, HOST))

    def doc(self, **more):
        d = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
             "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": self.ev}
        d.update(more)
        return d


def counters(doc, name):
    """{(pid, tid or None, id or None): [(ts_ns, value)]} of the counter events called name."""
    out = {}
    for e in doc.get("traceEvents", []):
        if e.get("ph") == "C" and e.get("name") == name:
            key = (e.get("pid"), e.get("tid"), e.get("id"))
            (value,) = e["args"].values()
            out.setdefault(key, []).append((round(e["ts"] * 1000), value))
    return out


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    gz = data[:2] == b"\x1f\x8b"
    check(gz == path.endswith(".gz"), f"{path}: {'gzip' if gz else 'plain'}, against its name")
    return json.loads(gzip.decompress(data) if gz else data)


def augment(src, dst, *opts, expect=0):
    p = mlprof("augment", src, "-o", dst, "--format", "json", *opts, expect=expect)
    return p, (as_json(p, f"augment {src}") if expect == 0 else {})


# ---------------------------------------------------------------------------
def queue_trace():
    t = Trace()
    t.op("aten::mm", 0, 4)
    # four launches on stream 7 at 0, 1, 2.125, 3 us; kernels run 10-20, 20-30, 30-40, 40-50
    for i, at in enumerate((0, 1, 2.125, 3)):
        t.launch(at, f"gemm_{i}", 7, 10 + 10 * i, 10)
    # no correlation: left out of the queue, said on stderr
    t.launch(None, "lonely_kernel", 8, 60, 10, linked=False)
    # a copy on stream 9 (launched at 90) and a memset on stream 10 (at 95)
    t.launch(90, "Memcpy HtoD (Pageable -> Device)", 9, 100, 100, cat="gpu_memcpy", call="cudaMemcpyAsync",
             bytes=1000000, **{"memory bandwidth (GB/s)": 10})
    t.launch(95, "Memset (Device)", 10, 150, 100, cat="gpu_memset", call="cudaMemsetAsync", bytes=500000)
    return t


def test_queue_and_bandwidth():
    t = queue_trace()
    src = write("queue.json", t.doc())
    dst = os.path.join(OUT, "queue_aug.json")
    p, r = augment(src, dst, "--queue-limit", "3")
    # span: 0 (first launch) to 250 us (the memset's end)
    check(r.get("span_ns") == 250000, f"queue: span {r.get('span_ns')}")
    check(r.get("queue_limit") == 3, f"queue: limit {r.get('queue_limit')}")
    # stream 7 holds 3 or more from 2.125 us (third launch) to 30 us (second kernel's end)
    check(r.get("blocked_on_full_queue_ns") == 27875, f"queue: blocked {r.get('blocked_on_full_queue_ns')}")
    check(abs(r.get("blocked_on_full_queue_pct", 0) - 11.15) < 1e-9, f"queue: pct {r.get('blocked_on_full_queue_pct')}")
    q = {s["stream"]: s for s in r.get("queues", [])}
    check(sorted(q) == [7, 9, 10], f"queue: streams {sorted(q)}")
    s7 = q.get(7, {})
    check((s7.get("launches"), s7.get("max_queue_length"), s7.get("full_ns")) == (4, 4, 27875),
          f"queue: stream 7 {s7}")
    check(r.get("unlinked") == 1 and r.get("queued") == 6 and r.get("gpu_events") == 7,
          f"queue: counts {r}")
    check("1 of 7 GPU events have no correlation id" in p.stderr, f"queue: unlinked said: {p.stderr!r}")
    doc = load(dst)
    ql = counters(doc, "Queue Length")
    check(ql.get((GPU, 7, 7)) == [(0, 1), (1000, 2), (2125, 3), (3000, 4), (20000, 3), (30000, 2), (40000, 1),
                                  (50000, 0)], f"queue: stream 7 series {ql.get((GPU, 7, 7))}")
    check(ql.get((GPU, 9, 9)) == [(90000, 1), (200000, 0)], f"queue: stream 9 series {ql.get((GPU, 9, 9))}")
    check((GPU, 8, 8) not in ql, "queue: the unlinked kernel's stream has no queue")
    full = counters(doc, "Queue Full")
    check(full == {(GPU, 7, 7): [(2125, 1), (30000, 0)]}, f"queue: full series {full}")
    bw = counters(doc, "Memory Bandwidth")
    check(bw.get((GPU, 9, 9)) == [(100000, 1e10), (200000, 0)], f"bandwidth: stream 9 {bw.get((GPU, 9, 9))}")
    check(bw.get((GPU, 10, 10)) == [(150000, 5e9), (250000, 0)], f"bandwidth: stream 10 {bw.get((GPU, 10, 10))}")
    dev = counters(doc, "Memory Bandwidth (device)")
    check(dev.get((GPU, None, None)) == [(100000, 1e10), (150000, 1.5e10), (200000, 5e9), (250000, 0)],
          f"bandwidth: device {dev}")
    b = {s["stream"]: s for s in r.get("bandwidth", [])}
    check(b.get(9, {}).get("bytes") == 1000000 and b.get(9, {}).get("busy_ns") == 100000
          and b.get(9, {}).get("peak_bytes_per_s") == 1e10, f"bandwidth: stream 9 summary {b.get(9)}")
    d = r.get("device_bandwidth", [{}])[0]
    check(d.get("bytes") == 1500000 and d.get("busy_ns") == 150000 and d.get("peak_bytes_per_s") == 1.5e10
          and d.get("mean_bytes_per_s") == 1e10, f"bandwidth: device summary {d}")
    n_counters = sum(len(v) for c in (ql, full, bw, dev) for v in c.values())
    check(r.get("counter_events") == n_counters, f"augment: {r.get('counter_events')} counters said, {n_counters} written")
    # the whole input kept, in order, with its other members
    src_doc = json.load(open(src))
    kept = [e for e in doc["traceEvents"] if e.get("ph") != "C"]
    check(kept == src_doc["traceEvents"], "augment: the input's events kept as they were")
    check(all(doc.get(k) == src_doc[k] for k in ("schemaVersion", "deviceProperties", "distributedInfo")),
          "augment: the input's other members kept")
    # the table says the same
    p = mlprof("augment", src, "-o", dst, "--queue-limit", "3")
    check("Time blocked on a full launch queue: 27.875 us (11.15% of the trace's span" in p.stdout,
          f"augment table: {p.stdout}")
    round_trip(src, dst, n_counters)
    # HTA's count: a kernel leaves its queue when it starts (10, 20, 30, 40 us);
    # 3 or more from 2.125 us to 20 us
    p, r = augment(src, dst, "--queue-limit", "3", "--queue-until", "start")
    check(r.get("queue_until") == "start" and r.get("blocked_on_full_queue_ns") == 17875,
          f"queue until start: {r.get('queue_until')} {r.get('blocked_on_full_queue_ns')}")
    ql = counters(load(dst), "Queue Length")
    check(ql.get((GPU, 7, 7)) == [(0, 1), (1000, 2), (2125, 3), (3000, 4), (10000, 3), (20000, 2), (30000, 1),
                                  (40000, 0)], f"queue until start: stream 7 series {ql.get((GPU, 7, 7))}")
    mlprof("augment", src, "-o", dst, "--queue-until", "later", expect=2)


def round_trip(src, dst, n_counters):
    """analyze and kernels give the same figures on the augmented trace."""
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ("trace", "path", "events")}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o
    for cmd in ("analyze", "kernels", "sequences"):
        a = as_json(mlprof(cmd, src, "--format", "json"), f"{cmd} {src}")
        b = as_json(mlprof(cmd, dst, "--format", "json"), f"{cmd} {dst}")
        check(strip(a) == strip(b), f"round trip: {cmd} differs on {dst}:\n{a}\n{b}")
        if cmd == "analyze":
            check(b.get("events") == a.get("events", 0) + n_counters,
                  f"round trip: {b.get('events')} events read back, {a.get('events')} + {n_counters} written")


def test_default_limit():
    """1030 launches on one stream, 1 us apart, kernels of 10 us from 2000 us:
    the queue reaches 1024 at the 1024th launch (1023 us) and falls to 1023
    when the 7th kernel ends (2070 us)."""
    t = Trace()
    for i in range(1030):
        t.launch(i, "tiny_kernel", 7, 2000 + 10 * i, 10)
    src = write("deep_queue.json.gz", t.doc(), gz=True)
    dst = os.path.join(OUT, "deep_queue_aug.json.gz")
    p, r = augment(src, dst)
    check(r.get("queue_limit") == 1024, f"deep queue: default limit {r.get('queue_limit')}")
    check(r.get("blocked_on_full_queue_ns") == 1047000, f"deep queue: blocked {r.get('blocked_on_full_queue_ns')}")
    q = r.get("queues", [{}])[0]
    check(q.get("max_queue_length") == 1030 and q.get("full_ns") == 1047000, f"deep queue: {q}")
    with open(dst, "rb") as f:
        magic = f.read(2)
    check(magic == b"\x1f\x8b" and r.get("output_gzip") is True, f"deep queue: OUT.json.gz is not gzip: {magic!r} {r}")
    doc = load(dst)
    full = counters(doc, "Queue Full")
    check(full == {(GPU, 7, 7): [(1023000, 1), (2070000, 0)]}, f"deep queue: full series {full}")
    ql = counters(doc, "Queue Length")[(GPU, 7, 7)]
    check(len(ql) == 2060 and ql[1029] == (1029000, 1030) and ql[-1] == (12300000, 0),
          f"deep queue: {len(ql)} samples, {ql[1029]}, {ql[-1]}")
    round_trip(src, dst, r.get("counter_events", 0))


def test_shapes():
    """An unfinished bare array, string stream tids (older Kineto)."""
    ev = [meta("thread_name", GPU, "stream 7", name="stream 7"),
          x("cudaLaunchKernel", "Runtime", 0, 1, HOST, HOST, correlation=1),
          x("cudaLaunchKernel", "Runtime", 2, 1, HOST, HOST, correlation=2),
          x("k1", "Kernel", 5, 10, GPU, "stream 7", correlation=1),
          x("k2", "Kernel", 15, 10, GPU, "stream 7", correlation=2)]
    path = os.path.join(OUT, "unfinished.json")
    with open(path, "w") as f:
        f.write("[" + ",\n".join(json.dumps(e) for e in ev) + ",\n")
    dst = os.path.join(OUT, "unfinished_aug.json")
    p, r = augment(path, dst)
    doc = load(dst)
    check(isinstance(doc, list) and len([e for e in doc if e.get("ph") != "C"]) == len(ev),
          "unfinished array: written whole and closed")
    ql = counters({"traceEvents": doc if isinstance(doc, list) else []}, "Queue Length")
    check(ql == {(GPU, "stream 7", 7): [(0, 1), (2000, 2), (15000, 1), (25000, 0)]},
          f"string tid: the stream's queue on its named track: {ql}")


def test_lacks_and_errors():
    # a trace without runtime calls: only bandwidth, and a line that says so
    t = Trace()
    t.ev.append(x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", 10, 4, GPU, 7, stream=7, bytes=4000))
    t.ev.append(x("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 20, 4, GPU, 7, stream=7))
    src = write("no_runtime.json", t.doc())
    p, r = augment(src, os.path.join(OUT, "no_runtime_aug.json"))
    check("no runtime calls" in p.stderr, f"no runtime: said: {p.stderr!r}")
    check("1 of 2 copies and memsets give no \"bytes\"" in p.stderr, f"no bytes: said: {p.stderr!r}")
    check(r.get("bandwidth", [{}])[0].get("peak_bytes_per_s") == 1e9, f"no runtime: bandwidth {r.get('bandwidth')}")
    # no GPU at all
    t = Trace()
    t.op("aten::add", 0, 5)
    src = write("cpu_only.json", t.doc())
    p, r = augment(src, os.path.join(OUT, "cpu_only_aug.json"))
    check("no GPU activity" in p.stderr and r.get("counter_events") == 0, f"cpu only: {p.stderr!r}")
    # refused: no -o, -o the input, a bad limit, a missing file, damaged JSON
    mlprof("augment", src, expect=2)
    mlprof("augment", src, "-o", os.path.join(OUT, "x.json"), "--queue-limit", "0", expect=2)
    before = open(src, "rb").read()
    p = mlprof("augment", src, "-o", src, expect=1)
    check("never writes over its input" in p.stderr and open(src, "rb").read() == before,
          f"-o INPUT: refused, input untouched: {p.stderr!r}")
    link = os.path.join(OUT, "link_to_input.json")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(src, link)
    p = mlprof("augment", src, "-o", link, expect=1)
    check("never writes over its input" in p.stderr and open(src, "rb").read() == before,
          f"-o a link to the input: refused: {p.stderr!r}")
    # -o -: the trace alone on standard output, the summary on standard error
    q = subprocess.run([MLPROF, "augment", src, "-o", "-"], capture_output=True, text=True, timeout=60)
    try:
        doc = json.loads(q.stdout)
    except ValueError:
        doc = None
    check(q.returncode == 0 and doc is not None and "counter events added" in q.stderr,
          f"augment -o -: {q.returncode} {q.stdout[-200:]!r} {q.stderr!r}")
    # read twice: standard input and pipes are refused before anything is read
    for stdin_path in ("-", "/dev/stdin"):
        with open(src) as f:
            q = subprocess.run([MLPROF, "augment", stdin_path, "-o", os.path.join(OUT, "piped.json")],
                               capture_output=True, text=True, timeout=60, input=f.read())
        check(q.returncode == 1 and "reads the trace twice" in q.stderr, f"augment {stdin_path}: {q.stderr!r}")
    missing = os.path.join(OUT, "no_such_trace.json")
    p = mlprof("augment", missing, "-o", os.path.join(OUT, "y.json"), expect=1)
    check("no_such_trace.json" in p.stderr, f"missing file named: {p.stderr!r}")
    bad = os.path.join(OUT, "damaged.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},{"ph":"X","name":')
    out = os.path.join(OUT, "damaged_aug.json")
    if os.path.exists(out):
        os.remove(out)
    p = mlprof("augment", bad, "-o", out, expect=1)
    check("damaged.json:1:" in p.stderr and not os.path.exists(out), f"damaged: refused, no output: {p.stderr!r}")


# ---------------------------------------------------------------------------
def test_sequences():
    t = Trace()
    ts = 0
    launch_at = 0

    def run(names, durs, stream, op):
        nonlocal ts, launch_at
        t.op(op, launch_at, len(names) + 0.5)
        t.op("aten::addmm" if op == "aten::linear" else op + "_inner", launch_at, len(names) + 0.25)
        for n, d in zip(names, durs):
            t.launch(launch_at + 0.1, n, stream, ts, d)
            launch_at += 1
            ts += d
        launch_at += 1

    for _ in range(4):
        run(["A", "B", "C"], [10, 20, 30], 7, "aten::linear")
    run(["D"], [5], 7, "aten::relu")
    ts = 1000
    run(["E", "E", "E", "E"], [1, 1, 1, 1], 8, "aten::fill_")
    ts = 2000
    for op in ("opX", "opY", "opX", "opY"):
        run(["F", "G"], [2, 3], 9, op)
    src = write("sequences.json", t.doc())
    r = as_json(mlprof("sequences", src, "--format", "json", "--top", "0"), "sequences")
    rows = [(s["length"], s["count"], s["gpu_time_ns"], "".join(s["kernels"]), s["op_stack"])
            for s in r.get("sequences", [])]
    lin, x_, y_ = "aten::linear > aten::addmm", "opX > opX_inner", "opY > opY_inner"
    # stream 7: (A B C) x4, D; stream 8: E E E E; stream 9: F G from opX, opY, opX, opY.
    # E E E E holds "E E" twice without overlap and "E E E" once (not shown);
    # F G F and G F G recur only as launched from opX (their first kernel's).
    want = [(3, 4, 240000, "ABC", lin), (3, 3, 180000, "BCA", lin), (3, 3, 180000, "CAB", lin),
            (3, 2, 16000, "GFG", x_), (3, 2, 14000, "FGF", x_),
            (2, 4, 200000, "BC", lin), (2, 4, 120000, "AB", lin), (2, 3, 120000, "CA", lin),
            (2, 2, 10000, "FG", x_), (2, 2, 10000, "GF", x_), (2, 2, 10000, "FG", y_),
            (2, 2, 4000, "EE", "aten::fill_ > aten::fill__inner")]
    check(rows == want, f"sequences: rows\n{rows}\nwanted\n{want}")
    r5 = as_json(mlprof("sequences", src, "--format", "json"), "sequences")
    check(r5.get("max_length") == 3 and r5.get("top") == 5,
          f"sequences: defaults {r5.get('max_length')} {r5.get('top')}")
    rows5 = [(s["length"], s["count"], s["gpu_time_ns"], "".join(s["kernels"]), s["op_stack"])
             for s in r5.get("sequences", [])]
    check(rows5 == want[:10], f"sequences: the top 5 of each length\n{rows5}")
    first = r.get("sequences", [{}])[0]
    check(first.get("bottom_op") == "aten::addmm" and first.get("top_op") == "aten::linear",
          f"sequences: bottom and top op {first}")
    r2 = as_json(mlprof("sequences", src, "--format", "json", "-n", "2", "-t", "1"), "sequences -n 2 -t 1")
    check([(s["length"], "".join(s["kernels"])) for s in r2.get("sequences", [])] == [(2, "BC")],
          f"sequences -n 2 -t 1: {r2.get('sequences')}")
    p = mlprof("sequences", src, "--format", "csv", "-n", "2", "-t", "2")
    check(p.stdout.splitlines()[:3] == ["length,count,gpu_time_ns,kernels,op_stack,bottom_op,top_op",
                                         f"2,4,200000,B | C,{lin},aten::addmm,aten::linear",
                                         f"2,4,120000,A | B,{lin},aten::addmm,aten::linear"],
          f"sequences csv: {p.stdout[:300]!r}")
    p = mlprof("sequences", src)
    check("Length 3:" in p.stdout and "1. A" in p.stdout and "240.000 us" in p.stdout, f"sequences table: {p.stdout}")
    mlprof("sequences", src, "-n", "1", expect=2)
    mlprof("sequences", src, "--format", "xml", expect=2)
    dst = os.path.join(OUT, "sequences_aug.json")
    p, r = augment(src, dst)
    round_trip(src, dst, r.get("counter_events", 0))


def main():
    os.makedirs(OUT, exist_ok=True)
    for test in (test_queue_and_bandwidth, test_default_limit, test_shapes, test_lacks_and_errors, test_sequences):
        test()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("analyze_augment_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
