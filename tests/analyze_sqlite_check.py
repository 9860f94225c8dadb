#!/usr/bin/env python3
"""`mlprof export --sqlite OUT.db TRACE` on traces written here, read back
with Python's sqlite3 module:

- mlprof-shaped spans nested on two threads (complete events and a B/E pair),
  with string, number and object arguments, instants, async events, counter
  samples of two series, a flow across threads; the same trace gzip-compressed;
- a Kineto-shaped GPU trace: CPU operators around runtime calls, kernels and a
  copy on two streams linked by correlation id (and ac2g flows), a kernel that
  nothing launched, PyTorch's [memory] instants;
- per table, the row counts equal the trace's events; self time per name
  equals `mlprof analyze --format json`'s; each kernel's bottom op, top op and
  op stack equal the attribution of `mlprof analyze --type kernel
  --aggregate-by bottom_op|top_op|op_stack`; depth and parent of each slice;
  the README's three example queries and their rows;
- errors: a damaged trace (file:line:column, nothing written), OUT a directory
  or a device (refused, left as it was), OUT the trace itself, OUT in a
  missing directory, SQLite missing (MLPROF_SQLITE_LIBRARY names a library
  that is not there: the message names it, status 1), usage mistakes (status
  2); an existing regular OUT is replaced whole; no temporary file is left.

Skips (printing why) when libsqlite3.so.0 cannot be loaded here.

usage: analyze_sqlite_check.py MLPROF OUTDIR
"""
import ctypes
import gzip
import json
import os
import subprocess
import sys

from analyze_util import check, command, failures

MLPROF, OUT = sys.argv[1:3]
os.makedirs(OUT, exist_ok=True)

try:
    import sqlite3

    ctypes.CDLL("libsqlite3.so.0")
except (ImportError, OSError) as e:
    print(f"analyze_sqlite_check: skipped: SQLite cannot be loaded here ({e})")
    sys.exit(0)

mlprof = command(MLPROF)


def write(name, trace, gz=False):
    path = os.path.join(OUT, name)
    data = json.dumps(trace).encode()
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def export(trace, name, expect=0, env=None):
    db = os.path.join(OUT, name)
    if expect == 0 and os.path.exists(db):
        os.unlink(db)
    if env is None:
        p = mlprof("export", "--sqlite", db, trace, expect=expect)
    else:
        p = subprocess.run([MLPROF, "export", "--sqlite", db, trace], capture_output=True, text=True,
                           timeout=120, env={**os.environ, **env})
        check(p.returncode == expect, f"export with {env}: exit {p.returncode}, wanted {expect}\n{p.stderr}")
    return db, p


def rows(db, sql, *params):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def count(db, table):
    return rows(db, f"SELECT count(*) FROM {table}")[0][0]


def analyze_json(path, *opts):
    p = mlprof("analyze", path, "--format", "json", "--top", "0", *opts)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"JSON from analyze {path}: {e}\n{p.stdout[:400]}")
        return {"rows": []}


def no_temporaries(what):
    left = [f for f in os.listdir(OUT) if ".tmp-" in f]
    check(not left, f"{what}: temporary files left beside the output: {left}")


# ------------------------------------------------ spans, instants, counters, flows
def x(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


cpu = [
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "trainer"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 11, "args": {"name": "main"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 12, "args": {"name": "loader"}},
    x("step", "frame", 0, 1000, 1, 11, step=1),
    x("forward", "zone", 100, 500, 1, 11, layer="conv", shape=[32, 3, 224, 224], flops=1.5e9),
    x("conv", "zone", 150, 200, 1, 11, kernel_size=3),
    x("relu", "zone", 400, 100, 1, 11),
    x("backward", "zone", 650, 300, 1, 11, note="12.5"),
    {"ph": "B", "name": "load", "cat": "io", "pid": 1, "tid": 12, "ts": 50},
    {"ph": "E", "name": "load", "cat": "io", "pid": 1, "tid": 12, "ts": 250, "args": {"bytes": 4096}},
    x("decode", "io", 300, 100, 1, 12),
    x("decode", "io", 500, 100, 1, 12),
    {"ph": "i", "name": "checkpoint", "cat": "mark", "pid": 1, "tid": 11, "ts": 640, "s": "t",
     "args": {"why": "epoch"}},
    {"ph": "i", "name": "oom-warning", "cat": "mark", "pid": 1, "tid": 12, "ts": 700, "s": "p"},
    {"ph": "b", "name": "request", "cat": "async", "id": 5, "pid": 1, "tid": 12, "ts": 60},
    {"ph": "e", "name": "request", "cat": "async", "id": 5, "pid": 1, "tid": 12, "ts": 900},
    {"ph": "C", "name": "queue", "pid": 1, "tid": 11, "ts": 100, "args": {"depth": 3, "waiting": 1}},
    {"ph": "C", "name": "queue", "pid": 1, "tid": 11, "ts": 200, "args": {"depth": 5, "waiting": 0}},
    {"ph": "C", "name": "memory used (CPU)", "pid": 1, "tid": 11, "ts": 300, "args": {"value": 1048576}},
    {"ph": "s", "name": "batch", "cat": "handoff", "id": 77, "pid": 1, "tid": 12, "ts": 320},
    {"ph": "f", "name": "batch", "cat": "handoff", "id": 77, "pid": 1, "tid": 11, "ts": 660, "bp": "e"},
]
cpu_trace = {"traceEvents": cpu, "otherData": {"generator": "analyze_sqlite_check"}}
plain = write("cpu.json", cpu_trace)
zipped = write("cpu.json.gz", cpu_trace, gz=True)

for path, name in ((plain, "cpu.db"), (zipped, "cpu_gz.db")):
    db, p = export(path, name)
    check(f"{name}: 8 slices, 4 instants" in p.stdout, f"{name}: summary line: {p.stdout!r}")
    check(count(db, "slices") == 8, f"{name}: slices {count(db, 'slices')}, wanted 8 (7 X, 1 B/E pair)")
    check(count(db, "instants") == 4, f"{name}: instants {count(db, 'instants')}, wanted 4 (2 i, b, e)")
    check(count(db, "counters") == 5, f"{name}: counter samples {count(db, 'counters')}, wanted 5")
    check(count(db, "flows") == 1, f"{name}: flows {count(db, 'flows')}, wanted 1")
    mask = os.umask(0)
    os.umask(mask)
    check(os.stat(db).st_mode & 0o777 == 0o666 & ~mask, f"{name}: mode {os.stat(db).st_mode & 0o777:o}")
    check(count(db, "kernels") == 0, f"{name}: kernels {count(db, 'kernels')}, wanted 0")
    check(count(db, "memory_blocks") == 0, f"{name}: memory blocks {count(db, 'memory_blocks')}, wanted 0")
    nargs = sum(len(e.get("args", {})) for e in cpu if e["ph"] in "XEi")
    check(count(db, "args") == nargs, f"{name}: args {count(db, 'args')}, wanted {nargs}")
    check(rows(db, "SELECT pid, name FROM processes") == [(1, "trainer")], f"{name}: processes")
    check(rows(db, "SELECT pid, tid, name FROM threads ORDER BY tid") == [(1, 11, "main"), (1, 12, "loader")],
          f"{name}: threads {rows(db, 'SELECT * FROM threads')}")
    series = rows(db, "SELECT name, series FROM tracks WHERE kind = 'counter' ORDER BY name, series")
    check(series == [("memory used (CPU)", "value"), ("queue", "depth"), ("queue", "waiting")],
          f"{name}: counter tracks {series}")
    depth = rows(db, "SELECT t.name, c.ts_ns, c.value FROM counters c JOIN tracks t ON t.id = c.track_id "
                     "WHERE t.series = 'depth' ORDER BY c.ts_ns")
    check(depth == [("queue", 100000, 3.0), ("queue", 200000, 5.0)], f"{name}: queue depth samples {depth}")
    # nesting: depth, parent, self
    s = {r[0]: r[1:] for r in rows(db, "SELECT c.name, c.depth, p.name, c.self_ns, c.ts_ns, c.dur_ns, t.tid "
                                       "FROM slices c LEFT JOIN slices p ON p.id = c.parent_id "
                                       "JOIN tracks t ON t.id = c.track_id WHERE c.name != 'decode'")}
    check(s.get("step") == (0, None, 200000, 0, 1000000, 11), f"{name}: step {s.get('step')}")
    check(s.get("forward") == (1, "step", 200000, 100000, 500000, 11), f"{name}: forward {s.get('forward')}")
    check(s.get("conv") == (2, "forward", 200000, 150000, 200000, 11), f"{name}: conv {s.get('conv')}")
    check(s.get("load") == (0, None, 200000, 50000, 200000, 12), f"{name}: the B/E pair {s.get('load')}")
    a = dict(rows(db, "SELECT a.key, a.value FROM args a JOIN slices s ON s.id = a.event_id "
                      "WHERE s.name = 'forward'"))
    check(a == {"layer": "conv", "shape": "[32,3,224,224]", "flops": "1500000000"},
          f"{name}: forward's args {a}")
    nums = dict(rows(db, "SELECT a.key, a.num FROM args a JOIN slices s ON s.id = a.event_id "
                         "WHERE s.name IN ('forward', 'backward', 'load')"))
    check(nums == {"layer": None, "shape": None, "flops": 1.5e9, "note": 12.5, "bytes": 4096},
          f"{name}: args as numbers {nums}")
    inst = rows(db, "SELECT i.name, i.ph, i.scope, i.ts_ns, a.value FROM instants i "
                    "LEFT JOIN args a ON a.event_id = i.id ORDER BY i.ts_ns")
    check(inst == [("request", "b", None, 60000, None), ("checkpoint", "i", "t", 640000, "epoch"),
                   ("oom-warning", "i", "p", 700000, None), ("request", "e", None, 900000, None)],
          f"{name}: instants {inst}")
    fl = rows(db, "SELECT f.flow_id, a.name, a.ts_ns, b.name FROM flows f JOIN slices a ON a.id = f.from_slice "
                  "JOIN slices b ON b.id = f.to_slice")
    check(fl == [(77, "decode", 300000, "backward")], f"{name}: flow {fl}")
    # self time per name, as analyze computes it
    want = {r["name"]: r["self_sum_ns"] for r in analyze_json(path)["rows"]}
    got = dict(rows(db, "SELECT name, sum(self_ns) FROM slices GROUP BY name"))
    check(got == want, f"{name}: self time per name {got}, analyze says {want}")
    meta = dict(rows(db, "SELECT key, value FROM meta"))
    check(meta.get("trace") == path and "analyze_sqlite_check" in meta.get("other_data", ""),
          f"{name}: meta {meta}")

# flows given as bind_id on durations (flow_out, then flow_in), and a counter
# value that is not a number (no sample, said on stderr)
bound = write("bind.json", {"traceEvents": [
    {"ph": "X", "name": "send", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "bind_id": "0x1f", "flow_out": True},
    {"ph": "X", "name": "relay", "pid": 1, "tid": 2, "ts": 20, "dur": 10, "bind_id": "0x1f", "flow_in": True,
     "flow_out": True},
    {"ph": "X", "name": "recv", "pid": 1, "tid": 3, "ts": 40, "dur": 10, "bind_id": "0x1f", "flow_in": True},
    {"ph": "C", "name": "state", "pid": 1, "tid": 1, "ts": 5, "args": {"value": 2, "label": "warm"}},
]})
db, p = export(bound, "bind.db")
fl = rows(db, "SELECT a.name, b.name FROM flows f JOIN slices a ON a.id = f.from_slice "
              "JOIN slices b ON b.id = f.to_slice ORDER BY a.ts_ns")
check(fl == [("send", "relay"), ("relay", "recv")], f"bind_id flows: {fl}")
check(count(db, "counters") == 1 and "1 counter values are not numbers" in p.stderr,
      f"a counter value that is not a number: {count(db, 'counters')} samples, stderr {p.stderr!r}")

# a flow that ends at its start's time, its "f" before its "s" in the file (as
# Kineto writes a stream sync's), kept; so through a Perfetto export of the trace
same_ts = write("same_ts_flows.json", {"traceEvents": [
    {"ph": "X", "name": "sync", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
    {"ph": "X", "name": "wait", "pid": 1, "tid": 2, "ts": 5, "dur": 10},
    {"ph": "f", "bp": "e", "id": 7, "cat": "ac2g", "name": "fl", "pid": 1, "tid": 2, "ts": 5},
    {"ph": "s", "id": 7, "cat": "ac2g", "name": "fl", "pid": 1, "tid": 1, "ts": 5},
    {"ph": "s", "id": 8, "cat": "ac2g", "name": "fl", "pid": 1, "tid": 1, "ts": 2},
    {"ph": "f", "bp": "e", "id": 8, "cat": "ac2g", "name": "fl", "pid": 1, "tid": 2, "ts": 6},
]})
pf = os.path.join(OUT, "same_ts_flows.pftrace")
mlprof("export", "--perfetto", pf, same_ts)
for src in (same_ts, pf):
    db, p = export(src, "same_ts_flows.db")
    fl = rows(db, "SELECT f.flow_id, a.name, b.name FROM flows f JOIN slices a ON a.id = f.from_slice "
                  "JOIN slices b ON b.id = f.to_slice ORDER BY f.flow_id")
    check(fl == [(7, "sync", "wait"), (8, "sync", "wait")], f"{os.path.basename(src)}: same-time flows: {fl}")

# ------------------------------------------------------------------ Kineto GPU
HOST, GPU = 100, 0
ev = [
    {"ph": "M", "name": "process_name", "pid": HOST, "tid": 0, "args": {"name": "python"}},
    {"ph": "M", "name": "process_name", "pid": GPU, "tid": 0, "args": {"name": "GPU 0"}},
    {"ph": "M", "name": "thread_name", "pid": GPU, "tid": 7, "args": {"name": "stream 7"}},
    {"ph": "M", "name": "thread_name", "pid": GPU, "tid": 8, "args": {"name": "stream 8"}},
]
corr = [0]


def op(name, ts, dur, **args):
    ev.append(x(name, "cpu_op", ts, dur, HOST, HOST, **args))


def launch(at, kernel, stream, ts, dur, cat="kernel", call="cudaLaunchKernel", linked=True):
    corr[0] += 1
    c = corr[0]
    ev.append(x(call, "cuda_runtime", at, 2, HOST, HOST, correlation=c))
    ev.append(x(kernel, cat, ts, dur, GPU, stream, device=0, stream=stream, correlation=c if linked else 0))
    if linked:
        ev.append({"ph": "s", "id": c, "pid": HOST, "tid": HOST, "ts": at, "cat": "ac2g", "name": "ac2g"})
        ev.append({"ph": "f", "id": c, "pid": GPU, "tid": stream, "ts": ts, "cat": "ac2g", "name": "ac2g",
                   "bp": "e"})


op("ProfilerStep#1", 0, 400)
op("aten::linear", 10, 100, **{"Input Dims": [[64, 512], [256, 512]]})
op("aten::addmm", 20, 80, **{"Input Dims": [[256], [64, 512], [512, 256]]})
launch(30, "sgemm_128x64", 7, 60, 50)
launch(50, "bias_add", 7, 115, 10)
op("aten::relu", 120, 40, **{"Input Dims": [[64, 256]]})
launch(130, "relu_kernel", 8, 170, 20)
op("aten::copy_", 200, 50, **{"Input Dims": [[64, 256], [64, 256]]})
launch(210, "Memcpy DtoH (Device -> Pinned)", 8, 230, 30, cat="gpu_memcpy", call="cudaMemcpyAsync")
op("aten::mm", 300, 60, **{"Input Dims": [[64, 256], [256, 10]]})
launch(310, "sgemm_32x32", 7, 330, 25)
ev.append(x("stray_kernel", "kernel", 380, 5, GPU, 7, device=0, stream=7))  # nothing launched it
for ts, addr, nbytes in ((25, 4096, 1024), (125, 8192, 512), (205, 4096, -1024), (305, 16384, 256)):
    ev.append({"ph": "i", "s": "t", "name": "[memory]", "pid": HOST, "tid": HOST, "ts": ts,
               "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": nbytes,
                        "Total Allocated": 0, "Total Reserved": 0}})
kineto = write("kineto.json", {"schemaVersion": 1, "traceEvents": ev,
                               "deviceProperties": [{"id": 0, "name": "Fake GPU"}]})
db, p = export(kineto, "kineto.db")
nx = sum(1 for e in ev if e["ph"] == "X")
check(count(db, "slices") == nx, f"kineto: slices {count(db, 'slices')}, wanted {nx}")
check(count(db, "instants") == 4, f"kineto: instants {count(db, 'instants')}, wanted 4")
check(count(db, "flows") == 5, f"kineto: flows {count(db, 'flows')}, wanted 5")
check(count(db, "kernels") == 6, f"kineto: kernels {count(db, 'kernels')}, wanted 6 (5 launched, 1 stray)")
nargs = sum(len(e.get("args", {})) for e in ev if e["ph"] in "Xi")
check(count(db, "args") == nargs, f"kineto: args {count(db, 'args')}, wanted {nargs}")
k = rows(db, "SELECT s.name, k.kind, k.device, k.stream, k.correlation, l.name, k.bottom_op, k.top_op, k.op_stack "
             "FROM kernels k JOIN slices s ON s.id = k.slice_id LEFT JOIN slices l ON l.id = k.launch_id "
             "ORDER BY s.ts_ns")
check(k == [
    ("sgemm_128x64", "compute", 0, 7, 1, "cudaLaunchKernel", "aten::addmm", "ProfilerStep#1",
     "ProfilerStep#1 > aten::linear > aten::addmm"),
    ("bias_add", "compute", 0, 7, 2, "cudaLaunchKernel", "aten::addmm", "ProfilerStep#1",
     "ProfilerStep#1 > aten::linear > aten::addmm"),
    ("relu_kernel", "compute", 0, 8, 3, "cudaLaunchKernel", "aten::relu", "ProfilerStep#1",
     "ProfilerStep#1 > aten::relu"),
    ("Memcpy DtoH (Device -> Pinned)", "memory", 0, 8, 4, "cudaMemcpyAsync", "aten::copy_", "ProfilerStep#1",
     "ProfilerStep#1 > aten::copy_"),
    ("sgemm_32x32", "compute", 0, 7, 5, "cudaLaunchKernel", "aten::mm", "ProfilerStep#1",
     "ProfilerStep#1 > aten::mm"),
    ("stray_kernel", "compute", 0, 7, None, None, None, None, None)], f"kineto: kernels {k}")
# the attribution analyze makes, per grouping key
for key in ("bottom_op", "top_op", "op_stack"):
    want = {r["key"]: (r["count"], r["total_sum_ns"])
            for r in analyze_json(kineto, "--type", "kernel,gpu_memcpy", "--aggregate-by", key)["rows"]}
    got = {r[0]: (r[1], r[2]) for r in rows(
        db, f"SELECT coalesce(k.{key}, ''), count(*), sum(s.dur_ns) FROM kernels k "
            f"JOIN slices s ON s.id = k.slice_id GROUP BY 1")}
    linked_want = {kk: v for kk, v in want.items() if kk != "(no operator)"}
    linked_got = {kk: v for kk, v in got.items() if kk}
    check(linked_got == linked_want, f"kineto: kernels per {key} {linked_got}, analyze says {linked_want}")
    check(sum(c for c, _ in got.values()) == sum(c for c, _ in want.values()),
          f"kineto: kernels counted per {key}: {got} against analyze's {want}")
want = {r["name"]: r["self_sum_ns"] for r in analyze_json(kineto, "--type", "*")["rows"]}
got = dict(rows(db, "SELECT name, sum(self_ns) FROM slices GROUP BY name"))
check(got == want, f"kineto: self time per name {got}, analyze says {want}")
mem = rows(db, "SELECT device_type, device, addr, bytes, alloc_ts_ns, free_ts_ns, s.name FROM memory_blocks m "
               "LEFT JOIN slices s ON s.id = m.slice_id ORDER BY alloc_ts_ns")
check(mem == [(1, 0, 4096, 1024, 25000, 205000, "aten::addmm"), (1, 0, 8192, 512, 125000, None, "aten::relu"),
              (1, 0, 16384, 256, 305000, None, "aten::mm")], f"kineto: memory blocks {mem}")

# the README's example queries
q1 = rows(db, "SELECT name, count(*) AS calls, sum(self_ns) AS self_ns FROM slices "
              "WHERE category = 'cpu_op' GROUP BY name ORDER BY self_ns DESC LIMIT 3")
check(q1 == [("ProfilerStep#1", 1, 150000), ("aten::addmm", 1, 76000), ("aten::mm", 1, 58000)],
      f"README query 1 (operators by self time): {q1}")
q2 = rows(db, "SELECT k.bottom_op, count(*) AS kernels, sum(s.dur_ns) AS gpu_ns FROM kernels k "
              "JOIN slices s ON s.id = k.slice_id WHERE k.bottom_op IS NOT NULL "
              "GROUP BY k.bottom_op ORDER BY gpu_ns DESC")
check(q2 == [("aten::addmm", 2, 60000), ("aten::copy_", 1, 30000), ("aten::mm", 1, 25000),
             ("aten::relu", 1, 20000)], f"README query 2 (GPU time per launching operator): {q2}")
q3 = rows(db, "SELECT s.name, s.dur_ns, a.value AS input_dims FROM slices s "
              "JOIN args a ON a.event_id = s.id AND a.key = 'Input Dims' "
              "WHERE s.name GLOB 'aten::*' ORDER BY s.dur_ns DESC LIMIT 2")
check(q3 == [("aten::linear", 100000, "[[64,512],[256,512]]"), ("aten::addmm", 80000, "[[256],[64,512],[512,256]]")],
      f"README query 3 (longest calls with their input shapes): {q3}")
no_temporaries("successful exports")

# ------------------------------------------- the span of B/E pairs, events left out
# meta's t_max_ns is the last end, not the last begin; an event whose duration cannot be
# taken is not a slice of 0 ns: it is left out and said
be = write("be_span.json", {"traceEvents": [
    {"ph": "B", "name": "step", "pid": 1, "tid": 1, "ts": 0},
    {"ph": "B", "name": "work", "pid": 1, "tid": 1, "ts": 10},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 900},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 1000},
    {"ph": "X", "name": "neg", "pid": 1, "tid": 1, "ts": 100, "dur": -50}]})
db, p = export(be, "be_span.db")
meta = dict(rows(db, "SELECT key, value FROM meta"))
check((meta.get("t_min_ns"), meta.get("t_max_ns")) == ("0", "1000000"), f"B/E span in meta: {meta}")
check(sorted(r[0] for r in rows(db, "SELECT name FROM slices")) == ["step", "work"], "the slices of B/E")
check("1 event left out" in p.stderr and '"dur" is negative' in p.stderr, f"left out, said: {p.stderr!r}")

# ------------------------------------------------------------------ errors
# an existing regular file is replaced whole
old = os.path.join(OUT, "replace.db")
with open(old, "w") as f:
    f.write("not a database\n" * 100)
db, p = export(plain, "replace.db")
check(count(db, "slices") == 8, "an existing OUT replaced by the database")

# a symbolic link: the file it names is replaced, the link kept
target = os.path.join(OUT, "target.db")
with open(target, "w") as f:
    f.write("old\n")
via = os.path.join(OUT, "via.db")
if os.path.lexists(via):
    os.unlink(via)
os.symlink(target, via)
mlprof("export", "--sqlite", via, plain)
check(os.path.islink(via) and count(target, "slices") == 8, "OUT a symbolic link: the file it names replaced")

bad = os.path.join(OUT, "bad.json")
with open(bad, "w") as f:
    f.write('{"traceEvents":[\n{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":5},\n{"ph":"X","name": oops}\n]}')
db, p = export(bad, "bad.db", expect=1)
check(f"{bad}:3:" in p.stderr and "nothing written" in p.stderr, f"damaged trace: message {p.stderr!r}")
check(not os.path.exists(db), "damaged trace: a database was written")

d = os.path.join(OUT, "a_directory.db")
os.makedirs(d, exist_ok=True)
db, p = export(plain, "a_directory.db", expect=1)
check("not a regular file" in p.stderr and "directory" in p.stderr, f"OUT a directory: message {p.stderr!r}")
check(os.path.isdir(d) and not os.listdir(d), "OUT a directory: it was changed")

p = mlprof("export", "--sqlite", "/dev/null", plain, expect=1)
check("not a regular file" in p.stderr, f"OUT a device: message {p.stderr!r}")
check(os.path.exists("/dev/null") and not os.path.isfile("/dev/null"), "OUT a device: /dev/null replaced")

p = mlprof("export", "--sqlite", plain, plain, expect=2)
check("trace itself" in p.stderr, f"OUT the trace: message {p.stderr!r}")
link = os.path.join(OUT, "same.json")
if os.path.lexists(link):
    os.unlink(link)
os.symlink(plain, link)
p = mlprof("export", "--sqlite", link, plain, expect=1)
check("is a trace this command read" in p.stderr, f"OUT the trace through a link: message {p.stderr!r}")
with open(plain) as f:
    check(json.load(f) == cpu_trace, "OUT the trace: the trace was changed")

missing_dir = os.path.join(OUT, "no", "such", "dir", "x.db")
p = mlprof("export", "--sqlite", missing_dir, plain, expect=1)
check(missing_dir in p.stderr, f"OUT in a missing directory: message {p.stderr!r}")

db, p = export(plain, "nolib.db", expect=1, env={"MLPROF_SQLITE_LIBRARY": os.path.join(OUT, "libnosqlite.so.0")})
check("libnosqlite.so.0" in p.stderr and "libsqlite3-0" in p.stderr, f"SQLite missing: message {p.stderr!r}")
check(not os.path.exists(db), "SQLite missing: a file was left at OUT")

p = mlprof("export", plain, expect=2)
check("--sqlite" in p.stderr, f"no format: message {p.stderr!r}")
p = mlprof("export", "--sqlite", os.path.join(OUT, "x.db"), expect=2)
check("which trace" in p.stderr, f"no trace: message {p.stderr!r}")
mlprof("export", "--sqlite", os.path.join(OUT, "x.db"), plain, "--bogus", expect=2)
p = mlprof("export", "--help")
check("processes" in p.stdout and "MLPROF_SQLITE_LIBRARY" in p.stdout, "export --help: schema and library")
no_temporaries("failed exports")

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("analyze_sqlite_check: all checks passed")
