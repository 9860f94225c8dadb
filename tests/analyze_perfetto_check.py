#!/usr/bin/env python3
"""`mlprof analyze`, `kernels`, `diff`, `merge` (and what reads traces the same
way) on Perfetto's protobuf trace: the same run written as Chrome JSON and as
TracePackets (perfetto_encode.py, in the shape mlprof's perfetto sink writes)
must give the same answers. A real run of cnn_infer recorded as JSON, and a
GPU trace written here (streams, launches, flows, counters), are each encoded
twice: spans written when they end (a parent after its children, BEGIN and
END together) and in time order (B B E E); plain and gzip. Damaged files: a
file cut inside a packet is read up to the last whole packet with a warning
naming the offset (exit 1); garbage is an error naming the file and offset;
packets that need the incremental state of a sequence that never cleared it
are left out and counted. With a library that writes .pftrace itself, the
same program recorded both ways gives the same analysis.

The library's own sink is checked too: test_perfetto feeds it events and
writes the traces beside the events it fed; those events, written here as the
JSON sink writes them, must read back as the same model.

test_perfetto_formats records one run at times set by hand through the
library, once per format chosen by the file's name: its .pftrace (and the
dump taken in the middle, with spans still open) must analyse as its .json.

usage: analyze_perfetto_check.py MLPROF CNN_INFER OUTDIR [TEST_PERFETTO [TEST_PERFETTO_FORMATS]]
"""
import collections
import decimal
import gzip
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfetto_encode as pe  # noqa: E402
from analyze_util import check, command, failures  # noqa: E402

MLPROF, CNN, OUT = sys.argv[1:4]
TEST_PERFETTO = sys.argv[4] if len(sys.argv) > 4 else None
TEST_FORMATS = sys.argv[5] if len(sys.argv) > 5 else None
os.makedirs(OUT, exist_ok=True)

mlprof = command(MLPROF)


def write(name, data):
    path = os.path.join(OUT, name)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)
    return path


def same_output(what, json_path, pf_path, *args, expect=0, ids=None):
    """The command's output on both files, the file's name aside (and, for
    two runs of one program, their process and thread ids: ids maps the
    protobuf run's to the JSON run's)."""
    a = mlprof(*args[:1], json_path, *args[1:], expect=expect)
    b = mlprof(*args[:1], pf_path, *args[1:], expect=expect)
    out_b = b.stdout.replace(pf_path, json_path).replace(os.path.basename(pf_path), os.path.basename(json_path))
    if ids:
        out_b = re.sub(r"\b(%s)\b" % "|".join(str(k) for k in ids), lambda m: str(ids[int(m.group(1))]), out_b)
    check(a.stdout == out_b and a.stdout, f"{what}: mlprof {' '.join(args)} differs on the protobuf trace:\n"
          + "\n".join(l for l in difflines(a.stdout, out_b))[:1500])
    return a, b


def difflines(a, b):
    import difflib
    return list(difflib.unified_diff(a.splitlines(), b.splitlines(), "json", "pftrace", lineterm="", n=1))


def same_figures(what, json_path, pf_path, *args):
    """For a file in another order than the JSON: the same rows, each with
    the same figures, whatever the first event of a group (its shapes)."""
    def rows(path):
        p = mlprof(*args[:1], path, *args[1:], "--format", "json")
        try:
            out = json.loads(p.stdout)
        except ValueError:
            return None
        return sorted((r.get("key"), r.get("count"), r.get("self_ns"), r.get("total_ns"), r.get("flops"))
                      for r in out.get("rows", [])) or out.get("devices")
    a, b = rows(json_path), rows(pf_path)
    check(a == b and a, f"{what}: mlprof {' '.join(args)}: other figures on the protobuf trace: {a} vs {b}"[:1500])


def encode_pair(name, trace_path, ext_tids=()):
    """name.pftrace (spans at their end), name.time.pftrace (time order) and
    name.pftrace.gz beside the JSON."""
    trace = pe.load(trace_path)
    pf = write(name + ".pftrace", pe.encode(trace, ext_tids))
    timed = write(name + ".time.pftrace", pe.encode(trace, ext_tids, time_order=True))
    gz = os.path.join(OUT, name + ".pftrace.gz")
    with gzip.open(gz, "wb") as f:
        f.write(pe.encode(trace, ext_tids))
    plain = write(name + ".plain.pftrace", pe.encode(trace, ext_tids, intern=False))
    return pf, timed, gz, plain


def record_cnn(path, extra_env=None):
    env = dict(os.environ, MLPROF_FILENAME=path, MLPROF_MEMORY_SVG="", MLPROF_MEMORY_CSV="")
    env.update(extra_env or {})
    p = subprocess.run([CNN], env=env, capture_output=True, text=True, timeout=240)
    check(p.returncode == 0 and os.path.exists(path), f"cnn_infer ({path}): {p.returncode} {p.stderr[-800:]}")
    return p.returncode == 0 and os.path.exists(path)


def run_ids(mj, mp):
    """Two runs merged each with itself (JSON, protobuf): the protobuf run's
    pid and tids -> the JSON run's, matched by thread name."""
    def ids(path):
        with open(path) as f:
            t = json.load(f)
        pid = int(next(iter(t["otherData"]["merge"]["inputs"][0]["pids"])))
        names = {e["args"]["name"]: e["tid"] for e in t["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == pid}
        return pid, names
    (pj, nj), (pp, np_) = ids(mj), ids(mp)
    out = {pp: pj}
    out.update({tid: nj[name] for name, tid in np_.items() if name in nj})
    return out


def normalized_merge(path, ids=None, open_ends=False):
    """A merged trace's events with what differs by construction put aside: the
    ids of frames (the protobuf trace has no frame id: the reader numbers
    them), the threads of counter samples (on a process's counter track) and
    of process-wide instants, and the inputs' paths; with open_ends, where
    the spans a dump showed still open end (the dump's own time)."""
    with open(path) as f:
        t = json.load(f)
    evs = []
    for e in t["traceEvents"]:
        e = dict(e)
        for k in ("pid", "tid"):
            if ids and e.get(k) in ids:
                e[k] = ids[e[k]]
        if e.get("ph") in ("b", "e"):
            e.pop("id", None)
        if open_ends and (e.get("ph") == "e" or (e.get("args") or {}).get("unfinished")):
            e.pop("dur" if e.get("ph") == "X" else "ts", None)  # shown up to the dump: its real time
        if e.get("ph") == "C" or (e.get("ph") == "i" and e.get("s") in ("p", "g")):
            e.pop("tid", None)
            e.pop("s", None)
        if e.get("ph") == "M" and e.get("name") == "process_name":
            e["args"] = {}
        evs.append(json.dumps(e, sort_keys=True))
    return collections.Counter(evs)


# ---------------------------------------------------------------------------
def test_real_run():
    """cnn_infer recorded as JSON by the library; its protobuf twins analysed."""
    src = os.path.join(OUT, "cnn.json")
    if not record_cnn(src):
        return
    for pf in encode_pair("cnn", src):
        what = f"cnn_infer {os.path.basename(pf)}"
        if ".time." in pf:
            for args in (("analyze",), ("analyze", "--aggregate-by", "input_shape")):
                same_figures(what, src, pf, *args)
            continue
        for args in (("analyze",), ("analyze", "--format", "json"), ("analyze", "--format", "csv"),
                     ("analyze", "--aggregate-by", "thread"), ("analyze", "--aggregate-by", "none", "-t", "0"),
                     ("analyze", "--aggregate-by", "input_shape", "--order-by", "total"),
                     ("kernels",), ("sequences",)):
            same_output(what, src, pf, *args)
        # steps are mlprof's frames (b/e on a child track of the thread): the same steps, the same rows
        a = json.loads(mlprof("analyze", src, "--per-step", "--format", "json").stdout or "{}")
        b = json.loads(mlprof("analyze", pf, "--per-step", "--format", "json").stdout or "{}")
        check(a.get("steps") == b.get("steps") and a.get("steps", {}).get("source") == "batch",
              f"{what}: the steps {a.get('steps')} vs {b.get('steps')}")
        rows = lambda x: [(s.get("step"), s.get("analysis", {}).get("rows")) for s in x.get("per_step", [])]
        check(rows(a) == rows(b) and rows(a), f"{what}: per step, the same rows")
        d = mlprof("diff", src, pf, "--format", "json")
        dj = json.loads(d.stdout or "{}")
        check(dj.get("rows") and all(r.get("count_a") == r.get("count_b") and r.get("delta_ns", 0) == 0
                                     for r in dj["rows"]), f"{what}: diff against its JSON: {d.stdout[:600]}")
        check(dj.get("regressions") == 0, f"{what}: diff finds no regression: {dj.get('regressions')}")
    # counters on per-thread tracks (children of the thread's): their samples keep their thread,
    # so the steps (windows per thread) count every event as the JSON's do
    pt = write("cnn.threads.pftrace", pe.encode(pe.load(src), counter_threads=True))
    for args in (("analyze", "--per-step"), ("analyze", "--per-step", "--format", "json")):
        same_output("cnn_infer, counters per thread", src, pt, *args)
    pf = os.path.join(OUT, "cnn.pftrace")
    # merge: two protobuf traces, as the same two JSON traces
    mj, mp = os.path.join(OUT, "merge_json.json"), os.path.join(OUT, "merge_pf.json")
    mlprof("merge", src, src, "-o", mj)
    p = mlprof("merge", pf, pf, "-o", mp)
    check("shared clock" in p.stdout + p.stderr or json.load(open(mp))["otherData"]["merge"]["method"] == "shared clock",
          f"merge: the protobuf traces' otherData says they share a clock: {p.stderr}")
    a, b = normalized_merge(mj), normalized_merge(mp)
    check(a == b, f"merge of two protobuf traces: {sum((a - b).values())} events differ from the JSON's merge, "
          f"e.g. {list((a - b))[:2]} / {list((b - a))[:2]}")
    # a directory of ranks' traces: protobuf files are traces too
    ranks = os.path.join(OUT, "ranks")
    os.makedirs(ranks, exist_ok=True)
    for k in range(2):
        with open(pf, "rb") as f, open(os.path.join(ranks, f"rank{k}.pftrace"), "wb") as g:
            g.write(f.read())
    p = mlprof("analyze", ranks, "--format", "json")
    got = json.loads(p.stdout or "{}").get("ranks", [])
    check(len(got) == 2, f"analyze DIR of .pftrace files: {len(got)} ranks\n{p.stderr}")
    # augment rewrites JSON text: a protobuf trace is refused, clearly
    p = mlprof("augment", pf, "-o", os.path.join(OUT, "aug.json"), expect=1)
    check("Perfetto protobuf trace" in p.stderr and not os.path.exists(os.path.join(OUT, "aug.json")),
          f"augment on a protobuf trace: {p.stderr}")


def gpu_trace():
    """mlprof's shape of a GPU run: launches on the main thread, kernels and
    copies on two stream tracks (ext tids), flows from each launch to its
    kernel, counters, instants, and an otherData footer with nested members."""
    D = decimal.Decimal
    pid, main, s7, s8 = 4000, 4000, 1000000, 1000001
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "tid": pid, "args": {"name": "trainer"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": main, "args": {"name": "main"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": s7, "args": {"name": "GPU 0 stream 7"}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": s8, "args": {"name": "GPU 0 stream 8"}}]
    ts = D("1000.000")
    for step in range(3):
        t0 = ts
        for k in range(4):
            corr = step * 10 + k + 1
            kind = ["gemm_kernel", "relu_kernel", "Memcpy HtoD", "ncclAllReduce_kernel"][k]
            cat = "gpu_memcpy" if k == 2 else "gpu_kernel"
            stream = s8 if k == 3 else s7
            kts = ts + 20 + 3 * k
            ev += [
                {"ph": "X", "name": "cudaLaunchKernel" if k != 2 else "cudaMemcpyAsync", "cat": "cuda_runtime",
                 "pid": pid, "tid": main, "ts": ts + D("1.5"), "dur": D("4.250"),
                 "args": {"correlation": corr, "grid": [64, 1, 1]}},
                {"ph": "s", "name": "launch", "cat": "gpu_launch", "pid": pid, "tid": main, "ts": ts + 2, "id": corr},
                {"ph": "X", "name": f"layer{k}", "cat": "torch", "pid": pid, "tid": main, "ts": ts, "dur": D("10.000"),
                 "args": {"input_shape": f"[8,{16 << k}]", "flops": 1000 * (k + 1), "scale": D("0.5") + k,
                          "note": None, "fused": k % 2 == 0}},
                {"ph": "X", "name": kind, "cat": cat, "pid": pid, "tid": stream, "ts": kts, "dur": D("7.125") + k,
                 "args": {"device": 0, "stream": 7 if stream == s7 else 8, "correlation": corr,
                          **({"bytes": 65536} if k == 2 else {})}},
                {"ph": "f", "name": "launch", "cat": "gpu_launch", "pid": pid, "tid": stream, "ts": kts, "id": corr,
                 "bp": "e"},
                {"ph": "C", "name": "GPU 0 memory used", "cat": "memory", "pid": pid, "tid": pid, "ts": kts,
                 "args": {"value": 1 << (20 + k)}},
                {"ph": "C", "name": "power", "cat": "nvml", "pid": pid, "tid": pid, "ts": kts,
                 "args": {"value": D("51.25") + k}}]
            ts += 12
        ev.append({"ph": "i", "name": "checkpoint", "cat": "app", "pid": pid, "tid": main, "ts": ts, "s": "t",
                   "args": {"path": "/tmp/ck\u00e9 \"x\""}})
        ev.append({"ph": "X", "name": "step", "cat": "torch", "pid": pid, "tid": main, "ts": t0 - D("0.5"),
                   "dur": ts - t0 + 1, "args": {"n": step}})
        ts += 50
    ev.append({"ph": "X", "name": "epilogue", "cat": "torch", "pid": pid, "tid": main, "ts": ts, "dur": D("2.000"),
               "args": {"unfinished": True}})
    other = {"mlprof_version": "0.1.0", "host": "testhost", "pid": pid, "process_name": "trainer",
             "clock": "clock_gettime", "clock_domain": "CLOCK_MONOTONIC", "start_ns": 900000,
             "dump_ns": int(ts * 1000) + 5000, "dropped_events": 3, "counters": [],
             "gpu": {"kernels": 9, "devices": [{"id": 0, "name": "Fake GPU"}]}}
    text = '{"traceEvents":[\n' + ",\n".join(pe.to_json(e) for e in ev) + '\n],\n"otherData":' + pe.to_json(other) + "}\n"
    return write("gpu.json", text), (s7, s8)


def test_gpu():
    src, ext = gpu_trace()
    for pf in encode_pair("gpu", src, ext):
        what = f"GPU {os.path.basename(pf)}"
        if ".time." in pf:
            for args in (("analyze",), ("kernels",), ("analyze", "--type", "gpu_kernel", "--aggregate-by", "bottom_op")):
                same_figures(what, src, pf, *args)
            continue
        for args in (("kernels",), ("kernels", "--format", "json"), ("kernels", "--format", "csv"),
                     ("analyze",), ("analyze", "--format", "json"),
                     ("analyze", "--type", "gpu_kernel", "--aggregate-by", "bottom_op"),
                     ("analyze", "--type", "gpu_kernel", "--aggregate-by", "op_stack", "--format", "csv"),
                     ("analyze", "--aggregate-by", "thread"), ("analyze", "--aggregate-by", "input_shape")):
            same_output(what, src, pf, *args)
        k = json.loads(mlprof("kernels", pf, "--format", "json").stdout or "{}")
        devs = k.get("devices", [])
        check(devs and devs[0].get("kernels") == 12 and len(devs[0].get("streams", [])) == 2,
              f"{what}: 12 GPU events on two streams: {devs}")
    # the arguments as typed values, and otherData kept whole
    pf = os.path.join(OUT, "gpu.pftrace")
    m = os.path.join(OUT, "gpu_merged.json")
    mlprof("merge", pf, pf, "-o", m)
    t = json.load(open(m))
    layer = next(e for e in t["traceEvents"] if e.get("name") == "layer0")
    check(layer["args"] == {"input_shape": "[8,16]", "flops": 1000, "scale": 0.5, "note": None, "fused": True},
          f"GPU: layer0's arguments come back typed: {layer['args']}")
    ck = next(e for e in t["traceEvents"] if e.get("name") == "checkpoint")
    check(ck["args"] == {"path": "/tmp/ck\u00e9 \"x\""}, f"GPU: a string argument with a quote: {ck['args']}")
    unf = next(e for e in t["traceEvents"] if e.get("name") == "epilogue")
    check(unf["args"].get("unfinished") is True, f"GPU: an unfinished span says so: {unf}")
    with open(src) as f:
        other = json.load(f)["otherData"]
    inputs = t["otherData"]["merge"]["inputs"]
    check(inputs and inputs[0].get("host") == "testhost", f"GPU: otherData's host is read: {inputs}")
    # the analyzer's own reading of otherData: export keeps it as a row of meta
    db = os.path.join(OUT, "gpu.db")
    p = subprocess.run([MLPROF, "export", "--sqlite", db, pf], capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        import sqlite3
        con = sqlite3.connect(db)
        row = con.execute("select value from meta where key='other_data'").fetchone()
        check(row and json.loads(row[0]) == other, f"GPU: otherData as written: {row}")
        n_pf = con.execute("select count(*) from slices").fetchone()[0]
        db2 = os.path.join(OUT, "gpu_json.db")
        subprocess.run([MLPROF, "export", "--sqlite", db2, src], capture_output=True, timeout=60)
        n_js = sqlite3.connect(db2).execute("select count(*) from slices").fetchone()[0]
        check(n_pf == n_js and n_pf > 0, f"GPU: export --sqlite: {n_pf} slices from the protobuf, {n_js} from JSON")
    else:
        print(f"skip: export --sqlite: {p.stderr.strip()[:200]}")


def test_truncated():
    """Cut anywhere: inside a packet, a warning naming both offsets and the
    events of the whole packets before it; on a boundary, a shorter trace."""
    src = os.path.join(OUT, "gpu.pftrace")
    with open(src, "rb") as f:
        data = f.read()
    bounds = pe.packet_bounds(data)
    rng = random.Random(19)
    for k in range(6):
        start, end = bounds[rng.randrange(3, len(bounds) - 1)]
        cut = rng.randrange(start + 1, end)
        path = write(f"cut{k}.pftrace", data[:cut])
        whole = write(f"cut{k}_whole.pftrace", data[:start])
        p = mlprof("analyze", path, "--format", "json", expect=1)
        check(f"inside the packet at byte offset {start}" in p.stderr and f"cut at byte offset {cut}" in p.stderr,
              f"cut at {cut} (packet {start}..{end}): the warning names the offsets: {p.stderr}")
        q = subprocess.run([MLPROF, "analyze", whole, "--format", "json"], capture_output=True, text=True)
        a, b = json.loads(p.stdout or "{}"), json.loads(q.stdout or "{}")
        check(a.get("partial") is True and a.get("rows") == b.get("rows") and a.get("events") == b.get("events"),
              f"cut at {cut}: the same events as the file cut at the packet before it ({start})")
    # cut at every packet boundary: each prefix loads (those with events), never an error
    bad = []
    for start, _ in bounds[1:]:
        path = write("prefix.pftrace", data[:start])
        q = subprocess.run([MLPROF, "kernels", path], capture_output=True, text=True)
        if q.returncode != 0 and "not a trace" not in q.stderr:
            bad.append((start, q.returncode, q.stderr[:200]))
    check(not bad, f"prefixes on packet boundaries load: {bad[:3]}")
    # gzip, cut: the same warning, offsets in the uncompressed data
    gz = os.path.join(OUT, "cut.pftrace.gz")
    start, end = bounds[len(bounds) // 2]
    with gzip.open(gz, "wb") as f:
        f.write(data[:start + 3])
    p = mlprof("analyze", gz, expect=1)
    check(f"inside the packet at byte offset {start}" in p.stderr and "uncompressed" in p.stderr,
          f"gzip, cut: {p.stderr}")


def test_garbage():
    rng = random.Random(7)
    junk = bytes(rng.randrange(256) for _ in range(4000))
    path = write("junk.pftrace", b"\x00" + junk)
    p = mlprof("analyze", path, expect=1)
    check(path in p.stderr and "byte offset 0" in p.stderr and "0x00" in p.stderr, f"garbage: {p.stderr}")
    # a valid start, then damage: a warning naming where, the events before it kept
    with open(os.path.join(OUT, "gpu.pftrace"), "rb") as f:
        data = f.read()
    bounds = pe.packet_bounds(data)
    start = bounds[len(bounds) // 2][0]
    path = write("damaged.pftrace", data[:start] + b"\x12\x05hello" + data[start:])
    p = mlprof("kernels", path, expect=1)
    check(f"byte offset {start}" in p.stderr and "0x12" in p.stderr and "warning" in p.stderr,
          f"damage after valid packets: {p.stderr}")
    # a packet whose contents are not a TracePacket
    path = write("badpacket.pftrace", data[:start] + pe.packet(b"\x0f\x01") + data[start:])
    p = mlprof("analyze", path, expect=1)
    check(f"packet at byte offset {start} is not a valid TracePacket" in p.stderr, f"bad packet: {p.stderr}")
    # JSON named .pftrace is JSON; protobuf named .json is protobuf; JSON after a blank line is JSON
    src = os.path.join(OUT, "gpu.json")
    with open(src) as f:
        text = f.read()
    a = mlprof("analyze", src).stdout
    for name, payload in (("isjson.pftrace", text), ("isproto.json", data), ("blank.json", "\n" + text)):
        path = write(name, payload)
        out = mlprof("analyze", path).stdout.replace(path, src)
        check(out == a, f"{name}: told apart by its content")
    p = mlprof("analyze", write("empty.pftrace", b""), expect=1)
    check("empty" in p.stderr, f"an empty file: {p.stderr}")


def test_incremental_state():
    """Sequence 3 never clears its state: its packets that need it are left
    out and counted; a sequence cleared again forgets its interned names."""
    s1 = pe.Sequence(1)
    track = pe.track_uuid("thread", 1, 1)
    pkts = [s1.packet(b""), s1.packet(pe.descriptor(track, thread=(1, 1, "main")), needs_state=False),
            s1.event(1000, pe.SLICE_BEGIN, track, "a", "c"), s1.event(2000, pe.SLICE_END, track)]
    s3 = pe.Sequence(3)
    s3.first = False  # as if its first packet was lost
    pkts += [s3.event(1500, pe.INSTANT, track, "lost", "c"), s3.event(1600, pe.INSTANT, track, "lost2", "c")]
    # sequence 1 cleared again: name iid 1 no longer means "a"
    again = pe.Sequence(1)
    pkts.append(again.packet(b""))
    pkts.append(pe.packet(pe.f_varint(pe.P_SEQ_ID, 1) + pe.f_varint(pe.P_SEQ_FLAGS, pe.SEQ_NEEDS_STATE)
                          + pe.f_varint(pe.P_TIMESTAMP, 3000)
                          + pe.f_bytes(pe.P_TRACK_EVENT, pe.f_varint(pe.E_TYPE, pe.INSTANT)
                                       + pe.f_varint(pe.E_TRACK_UUID, track) + pe.f_varint(pe.E_NAME_IID, 1))))
    # time order with a parent begun before its child (B B E E) on one track
    pkts += [again.event(4000, pe.SLICE_BEGIN, track, "parent", "c"), again.event(4100, pe.SLICE_BEGIN, track, "child", "c"),
             again.event(4200, pe.SLICE_END, track), again.event(4900, pe.SLICE_END, track)]
    path = write("state.pftrace", b"".join(pkts))
    p = mlprof("analyze", path, "--aggregate-by", "none", "-t", "0")
    check("2 packets needed the incremental state of a sequence that had not cleared it" in p.stderr
          and "1 packets named interned strings their sequence never gave" in p.stderr,
          f"incremental state: the packets left out are counted on stderr: {p.stderr}")
    check("left out" in p.stdout, f"incremental state: and in the table: {p.stdout}")
    rows = json.loads(mlprof("analyze", path, "--aggregate-by", "none", "-t", "0", "--format", "json").stdout)["rows"]
    got = sorted((r["key"], r["total_ns"], r["self_ns"]) for r in rows)
    check(got == [("a", 1000, 1000), ("child", 100, 100), ("parent", 900, 800)],
          f"incremental state: the slices kept, nested in time order: {got}")


def test_sequence_clocks():
    """A thread's sequence as mlprof writes it: timestamps as deltas on its
    incremental clock 64 (set by its clock snapshot beside CLOCK_MONOTONIC),
    its track a default, an absolute packet on CLOCK_MONOTONIC that leaves
    the incremental clock where it was, an end's annotations joined to its
    slice; a sequence timed on a clock no snapshot set is left out, counted."""
    s1 = pe.Sequence(1)
    track = pe.track_uuid("thread", 1, 1)
    pkts = [s1.packet(b""), s1.packet(pe.descriptor(track, thread=(1, 1, "main")), needs_state=False)]

    def te(kind, name=None, extra=b""):
        body = pe.f_varint(pe.E_TYPE, kind) + (pe.f_bytes(pe.E_NAME, name) if name else b"")
        return pe.f_bytes(pe.P_TRACK_EVENT, body + extra)

    def pkt(seq, ts, body, clock=None):
        head = pe.f_varint(pe.P_SEQ_ID, seq) + pe.f_varint(pe.P_SEQ_FLAGS, pe.SEQ_NEEDS_STATE)
        head += pe.f_varint(pe.P_TIMESTAMP, ts)
        if clock is not None:
            head += pe.f_varint(pe.P_CLOCK_ID, clock)
        return pe.packet(head + body)

    def start(seq):
        defaults = pe.f_varint(58, 64) + pe.f_bytes(11, pe.f_varint(11, track))
        return pe.packet(pe.f_varint(pe.P_SEQ_ID, seq) + pe.f_varint(pe.P_SEQ_FLAGS, pe.SEQ_CLEARED)
                         + pe.f_bytes(pe.P_DEFAULTS, defaults))

    clocks = (pe.f_bytes(1, pe.f_varint(1, pe.CLOCK_MONOTONIC) + pe.f_varint(2, 10000))
              + pe.f_bytes(1, pe.f_varint(1, 64) + pe.f_varint(2, 10000) + pe.f_varint(3, 1)))
    unfinished = pe.f_bytes(pe.E_ANNOTATIONS, pe.f_bytes(10, "unfinished") + pe.f_varint(2, 1))
    pkts += [start(5), pe.packet(pe.f_varint(pe.P_SEQ_ID, 5) + pe.f_bytes(pe.P_CLOCK_SNAPSHOT, clocks)),
             pkt(5, 500, te(pe.SLICE_BEGIN, "x")),  # 10500
             pkt(5, 100, te(pe.SLICE_BEGIN, "y")),  # 10600
             pkt(5, 10550, te(pe.SLICE_BEGIN, "z"), pe.CLOCK_MONOTONIC),  # absolute: a clock that stepped back
             pkt(5, 10560, te(pe.SLICE_END), pe.CLOCK_MONOTONIC),
             pkt(5, 300, te(pe.SLICE_END)),  # 10900: from 10600, not from 10560
             pkt(5, 1100, te(pe.SLICE_END, extra=unfinished))]  # 12000
    # a sequence whose clock 64 no snapshot set: its events cannot be placed
    pkts += [start(6), pkt(6, 5, te(pe.INSTANT, "nowhere"))]
    path = write("seqclock.pftrace", b"".join(pkts))
    p = mlprof("analyze", path, "--aggregate-by", "none", "-t", "0", "--format", "json")
    check("1 packets were timed on a clock of their sequence that no clock snapshot set" in p.stderr,
          f"sequence clocks: the packet without its clock is counted: {p.stderr}")
    rows = json.loads(p.stdout or "{}").get("rows", [])
    got = sorted((r["key"], r["total_ns"], r["self_ns"]) for r in rows)
    check(got == [("x", 1500, 1190), ("y", 300, 300), ("z", 10, 10)],
          f"sequence clocks: deltas followed, the absolute packet beside them: {got}")


def chrome_from_fed(path):
    """The events test_perfetto fed the sink (JSON lines), as the Chrome JSON
    sink writes them (src/export/chrome.c)."""
    ev, other, frame = [], None, 0
    us = lambda ns: decimal.Decimal(ns) / 1000
    with open(path) as f:
        lines = [json.loads(l, parse_float=decimal.Decimal) for l in f if l.strip()]
    for e in lines:
        kind = e["type"]
        base = {"name": e.get("name"), "cat": e.get("cat"), "pid": e.get("pid"), "tid": e.get("tid", e.get("pid"))}
        args = dict(e.get("args") or {})
        if kind in ("span", "frame") and e.get("unfinished"):
            args["unfinished"] = True
        if kind == "span":
            ev.append(dict(base, ph="X", ts=us(e["ts"]), dur=us(e["end"] - e["ts"]), args=args))
        elif kind == "frame":
            frame += 1
            ev.append(dict(base, ph="b", id=str(frame), ts=us(e["ts"]), args=args))
            ev.append(dict(base, ph="e", id=str(frame), ts=us(e["end"])))
        elif kind == "instant":
            ev.append(dict(base, ph="i", ts=us(e["ts"]), s="gpt"[e["scope"]], args=args))
        elif kind == "counter":
            ev.append(dict(base, ph="C", ts=us(e["ts"]), args={"value": e["value"]}))
        elif kind in ("flow_start", "flow_end"):
            ev.append(dict(base, ph="s" if kind == "flow_start" else "f", ts=us(e["ts"]), id=e["id"],
                           **({"bp": "e"} if kind == "flow_end" else {})))
        elif kind == "track":
            meta = "process_name" if e["kind"] == 0 else "thread_name"
            ev.append({"ph": "M", "name": meta, "pid": e["pid"], "tid": e["pid"] if e["kind"] == 0 else e["tid"],
                       "args": {"name": e["name"]}})
        elif kind == "other_data":
            other = e["args"]
        else:
            check(False, f"{path}: an event of type {kind} this test does not know")
    text = '{"traceEvents":[\n' + ",\n".join(pe.to_json(e) for e in ev) + "]"
    if other is not None:
        text += ',"otherData":' + pe.to_json(other)
    return text + "}\n"


def test_sink_traces():
    """The perfetto sink's own output (test_perfetto: spans with every kind of
    argument, frames, instants of each scope, counters, flows, a GPU stream
    track, two dumps, a reset) reads as the JSON of the events it was fed."""
    if not TEST_PERFETTO:
        print("skip: no test_perfetto given: the sink's own traces are not read back")
        return
    d = os.path.join(OUT, "sink")
    os.makedirs(d, exist_ok=True)
    p = subprocess.run([TEST_PERFETTO, d], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"test_perfetto: {p.returncode} {p.stderr[-500:]}")
    n = 0
    while os.path.exists(os.path.join(d, f"dump{n + 1}.pftrace")):
        n += 1
        pf = os.path.join(d, f"dump{n}.pftrace")
        js = write(f"sink_dump{n}.json", chrome_from_fed(os.path.join(d, f"dump{n}.expect.jsonl")))
        what = f"the sink's dump{n}.pftrace"
        for args in (("analyze", "--aggregate-by", "none", "-t", "0"), ("analyze", "--format", "json"),
                     ("analyze", "--aggregate-by", "thread"), ("kernels", "--format", "json")):
            same_output(what, js, pf, *args)
        mj, mp = os.path.join(OUT, f"sink_mj{n}.json"), os.path.join(OUT, f"sink_mp{n}.json")
        mlprof("merge", js, js, "--same-clock", "-o", mj)
        mlprof("merge", pf, pf, "--same-clock", "-o", mp)
        a, b = normalized_merge(mj), normalized_merge(mp)
        check(a == b and a, f"{what}: {sum((a - b).values())} events differ from the JSON of the events fed, "
              f"e.g. {list(a - b)[:2]} / {list(b - a)[:2]}")
        oa, ob = (json.load(open(m))["otherData"]["merge"]["inputs"][0] for m in (mj, mp))
        check({**oa, "path": 0, "label": 0} == {**ob, "path": 0, "label": 0},
              f"{what}: otherData read as the JSON's: {oa} vs {ob}")
    check(n >= 2, f"test_perfetto wrote {n} traces")


def test_same_run_both_formats():
    """One run, the same to the nanosecond each time, written by the library
    as .json and as .pftrace: every analysis the same."""
    if not TEST_FORMATS:
        print("skip: no test_perfetto_formats given")
        return
    paths = {}
    for ext in ("json", "pftrace"):
        path = os.path.join(OUT, f"formats.{ext}")
        p = subprocess.run([TEST_FORMATS, path], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and os.path.exists(path), f"test_perfetto_formats {path}: {p.stderr[-500:]}")
        paths[ext] = path
    with open(paths["pftrace"], "rb") as f:
        if f.read(1) != b"\x0a":
            print("skip: the library does not write Perfetto's protobuf trace for a .pftrace name")
            return
    for mid in ("", ".mid"):
        js, pf = paths["json"] + mid, paths["pftrace"] + mid
        if not os.path.exists(js):
            continue
        check(os.path.exists(pf), f"{pf}: not written beside {js}")
        what = f"the library's {os.path.basename(pf)}"
        mj, mp = os.path.join(OUT, f"formats_mj{mid}.json"), os.path.join(OUT, f"formats_mp{mid}.json")
        mlprof("merge", js, js, "--same-clock", "-o", mj)
        mlprof("merge", pf, pf, "--same-clock", "-o", mp)
        ids = run_ids(mj, mp)  # two runs: two pids
        a, b = normalized_merge(mj, open_ends=bool(mid)), normalized_merge(mp, ids, open_ends=bool(mid))
        check(a == b and a, f"{what}: {sum((a - b).values())} events differ from the JSON's, "
              f"e.g. {list(a - b)[:2]} / {list(b - a)[:2]}")
        if mid:  # the open spans end at the dump's real time, another in each run: the events only
            ja, jb = (json.loads(mlprof("analyze", x, "--format", "json").stdout or "{}") for x in (js, pf))
            check((ja.get("events"), ja.get("durations_kept")) == (jb.get("events"), jb.get("durations_kept")),
                  f"{what}: {jb.get('events')} events, the JSON {ja.get('events')}")
            continue
        for args in (("analyze", "--aggregate-by", "none", "-t", "0"), ("analyze", "--format", "json"),
                     ("analyze", "--format", "csv"), ("analyze", "--aggregate-by", "thread"),
                     ("kernels", "--format", "json"), ("sequences",)):
            same_output(what, js, pf, *args, ids=ids)
        d = json.loads(mlprof("diff", js, pf, "--format", "json").stdout or "{}")
        check(d.get("rows") and all(r.get("delta_ns") == 0 and r.get("count_a") == r.get("count_b")
                                    for r in d["rows"]), f"{what}: diff against the JSON: {d}"[:800])


def test_library_writes_pftrace():
    """The library itself writing .pftrace (the perfetto sink, chosen by the
    file name): the same program recorded as JSON gives the same analysis."""
    js, pf = os.path.join(OUT, "lib.json"), os.path.join(OUT, "lib.pftrace")
    for path in (js, pf):
        if os.path.exists(path):
            os.remove(path)
    if not record_cnn(js):
        return
    env = dict(os.environ, MLPROF_FILENAME=pf, MLPROF_MEMORY_SVG="", MLPROF_MEMORY_CSV="")
    p = subprocess.run([CNN], env=env, capture_output=True, text=True, timeout=240)
    with open(pf, "rb") if os.path.exists(pf) else open(os.devnull, "rb") as f:
        head = f.read(1)
    if p.returncode != 0 or head != b"\x0a":
        print(f"skip: the library does not write Perfetto's protobuf trace for {os.path.basename(pf)} "
              f"(exit {p.returncode}, first byte {head!r})")
        return
    a = json.loads(mlprof("analyze", js, "--format", "json", "--aggregate-by", "name", "--order-by", "name",
                          "-t", "0").stdout or "{}")
    b = json.loads(mlprof("analyze", pf, "--format", "json", "--aggregate-by", "name", "--order-by", "name",
                          "-t", "0").stdout or "{}")
    # two runs: the same operators, as many of each (times differ run to run)
    ka = [(r["key"], r["count"]) for r in a.get("rows", [])]
    kb = [(r["key"], r["count"]) for r in b.get("rows", [])]
    check(ka == kb and ka, f"library .pftrace: the same operators and counts as its JSON run: {ka} vs {kb}")
    k = mlprof("kernels", pf)
    check(k.returncode == 0, "library .pftrace: kernels reads it")
    d = mlprof("diff", js, pf)
    check(d.returncode == 0, "library .pftrace: diff against the JSON run")


test_real_run()
test_gpu()
test_truncated()
test_garbage()
test_incremental_state()
test_sequence_clocks()
test_sink_traces()
test_same_run_both_formats()
test_library_writes_pftrace()
if failures:
    print(f"{len(failures)} failed", file=sys.stderr)
    sys.exit(1)
print("ok: mlprof's analyses read Perfetto's protobuf trace as its JSON")
