#!/usr/bin/env python3
"""`mlprof merge` on traces shaped as PyTorch's profiler (Kineto) writes them
for two ranks of one job: the ids that link events (correlation, External id,
flows, async ids) must stay with their own rank, times with fractions of a
microsecond must come back to the nanosecond, each rank's distributedInfo and
deviceProperties must be kept, and traces on the system clock must keep it.
The traces are written here.

usage: analyze_merge_check.py MLPROF OUTDIR
"""
import decimal
import json
import os
import sys

from analyze_util import check, command, failures, load_written as load

MLPROF, OUT = sys.argv[1:3]


mlprof = command(MLPROF)


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def load_exact(path):
    """A trace with its numbers as Decimal: no double rounds them."""
    with open(path) as f:
        return json.load(f, parse_float=decimal.Decimal, parse_int=decimal.Decimal)


def test_nanoseconds_round_trip():
    """Epoch microseconds with three decimals, written by merge and read back,
    to the nanosecond (a double holds them only to 256 ns)."""
    base = 1700000000123456
    fracs = [0, 1, 7, 99, 128, 255, 256, 500, 501, 789, 998, 999]
    evs = []
    for k, f in enumerate(fracs):
        evs.append('{"name":"op%d","cat":"cpu_op","ph":"X","pid":1,"tid":1,"ts":%d.%03d,"dur":%d.%03d}'
                   % (k, base + 10 * k, f, k, (f * 7) % 1000))
    # a quoted time and an exponent: the same exact reading
    evs.append('{"name":"quoted","ph":"X","pid":1,"tid":1,"ts":"%d.333","dur":"0.001"}' % (base + 200))
    evs.append('{"name":"exp","ph":"i","s":"t","pid":1,"tid":1,"ts":1.700000000123666777e15}')
    src = write("ns_src.json", '{"traceEvents":[' + ",\n".join(evs) + "]}")
    want = {}
    for k, f in enumerate(fracs):
        want[f"op{k}"] = (decimal.Decimal(f"{base + 10 * k}.{f:03d}"), decimal.Decimal(f"{k}.{(f * 7) % 1000:03d}"))
    want["quoted"] = (decimal.Decimal(f"{base + 200}.333"), decimal.Decimal("0.001"))
    want["exp"] = (decimal.Decimal("1700000000123666.777"), None)

    once = os.path.join(OUT, "ns_once.json")
    mlprof("merge", src, src, "--same-clock", "-o", once)
    twice = os.path.join(OUT, "ns_twice.json")
    mlprof("merge", once, once, "--same-clock", "-o", twice)  # read back, written again
    for path, copies in ((once, 2), (twice, 4)):
        got = {}
        for e in load_exact(path)["traceEvents"]:
            if e["name"] in want:
                got.setdefault(e["name"], []).append((e["ts"], e.get("dur")))
        for name, (ts, dur) in want.items():
            seen = got.get(name, [])
            check(len(seen) == copies and all(s[0] == ts for s in seen),
                  f"{os.path.basename(path)}: {name} at {ts} us, got {[str(s[0]) for s in seen]}")
            if dur is not None:
                check(all(s[1] == dur for s in seen),
                      f"{os.path.basename(path)}: {name} lasts {dur} us, got {[str(s[1]) for s in seen]}")


BASE_US = 1700000000000000  # epoch microseconds


def rank_trace(rank, shift_us=0, base_ns=None, meta=True):
    """One rank of a job as PyTorch's profiler writes it: an operator launches
    a kernel (correlation id and External id on both, and an ac2g flow), one
    kernel is linked only by its External id and one only by a flow. The ids
    are the same on both ranks, as they are in real jobs; the operators' names
    say which rank they belong to. Times are epoch microseconds (less base_ns
    when given, as Kineto writes them then)."""
    t0 = BASE_US + shift_us - (base_ns // 1000 if base_ns else 0)
    cpu, gpu = 100, 0  # the same pids on both hosts

    def x(name, cat, ts, dur, tid, pid=cpu, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": t0 + ts, "dur": dur, "args": args}

    evs = [
        x(f"rank{rank}_op", "cpu_op", 10, 50, 1, **{"External id": 1, "Ev Idx": 0}),
        x("cudaLaunchKernel", "cuda_runtime", 20, 5, 1, correlation=100, **{"External id": 1}),
        x(f"gemm_r{rank}", "kernel", 40, 30, 7, pid=gpu, correlation=100, device=0, stream=7,
          **{"External id": 1}),
        x(f"rank{rank}_ext_op", "cpu_op", 100, 50, 1, **{"External id": 2, "Ev Idx": 1}),
        x(f"relu_r{rank}", "kernel", 160, 10, 7, pid=gpu, device=0, stream=7, **{"External id": 2}),
        x(f"rank{rank}_flow_op", "cpu_op", 200, 50, 1, **{"External id": 3, "Ev Idx": 2}),
        x("cudaLaunchKernel", "cuda_runtime", 210, 5, 1),
        {"ph": "s", "id": 300, "pid": cpu, "tid": 1, "ts": t0 + 211, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 300, "pid": gpu, "tid": 7, "ts": t0 + 260, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        x(f"copy_r{rank}", "kernel", 260, 10, 7, pid=gpu, device=0, stream=7),
        x(f"py_r{rank}", "python_function", 5, 300, 1, **{"Python id": 4, "Python parent id": 3}),
        # async events by id2, and a flow bound by bind_id between two slices
        {"ph": "b", "cat": "user", "name": "req", "pid": cpu, "tid": 1, "ts": t0 + 300, "id2": {"local": 7}},
        {"ph": "e", "cat": "user", "name": "req", "pid": cpu, "tid": 1, "ts": t0 + 320, "id2": {"local": 7}},
        {"ph": "X", "cat": "user", "name": "send", "pid": cpu, "tid": 1, "ts": t0 + 330, "dur": 2, "bind_id": 9,
         "flow_out": True},
        {"ph": "X", "cat": "user", "name": "recv", "pid": cpu, "tid": 2, "ts": t0 + 340, "dur": 2, "bind_id": 9,
         "flow_in": True},
        {"ph": "M", "name": "process_name", "pid": cpu, "tid": 0, "args": {"name": f"python {rank}"}},
        {"ph": "M", "name": "process_name", "pid": gpu, "tid": 0, "args": {"name": "python"}},
    ]
    t = {"traceEvents": evs}
    if meta:
        t["schemaVersion"] = 1
        t["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        t["deviceProperties"] = [{"id": 0, "name": f"GPU of host {rank}", "totalGlobalMem": 42297524224}]
        t["traceName"] = f"rank{rank}.json"
    if base_ns:
        t["baseTimeNanoseconds"] = base_ns
    return t


def kernels_json(path):
    p = mlprof("kernels", path, "--format", "json", "-t", "0")
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"kernels JSON of {path}: {p.stdout[:300]}")
        return {"operators": [], "linked_by_correlation": 0, "linked_by_flow": 0, "unlinked": 0}


def test_links_stay_with_their_rank():
    """Merged, each rank's kernels are linked to their own rank's operators."""
    r0 = write("link_r0.json", rank_trace(0))
    r1 = write("link_r1.json", rank_trace(1))
    out = os.path.join(OUT, "link_merged.json")
    mlprof("merge", r0, r1, "-o", out)
    k = kernels_json(out)
    ops = {o["name"]: o["kernels"] for o in k["operators"]}
    want = {f"rank{r}_{w}op": 1 for r in (0, 1) for w in ("", "ext_", "flow_")}
    check(ops == want, f"kernels per launching operator after merge: {ops}, wanted {want}")
    check(k["unlinked"] == 0 and k["linked_by_flow"] == 2, f"links {k['linked_by_correlation']} by correlation, "
          f"{k['linked_by_flow']} by flow, {k['unlinked']} unlinked")
    # the link ids themselves: the first input's kept, the second's moved apart, each pair still a pair
    t = load(out)
    m = t["otherData"]["merge"]
    step = m.get("id_step", 0)
    check([i.get("id_offset") for i in m["inputs"]] == [0, step] and step > 300, f"id step {m}")
    by_rank = {0: {}, 1: {}}
    for e in t["traceEvents"]:
        name, a = e["name"], e.get("args", {})
        r = 1 if "r1" in name or "rank1" in name or e["pid"] >= 1000000 else 0
        for key in ("correlation", "External id", "Ev Idx", "Python id", "Python parent id"):
            if key in a:
                by_rank[r].setdefault(key, set()).add(a[key])
        for key in ("id", "bind_id"):
            if key in e:
                by_rank[r].setdefault(key, set()).add(e[key])
        if "id2" in e:
            by_rank[r].setdefault("id2", set()).add(json.dumps(e["id2"]))
    check(by_rank[0].get("correlation") == {100} and by_rank[0].get("External id") == {1, 2, 3},
          f"the first input's ids as they were: {by_rank[0]}")
    for key in ("correlation", "External id", "Ev Idx", "Python id", "Python parent id", "id", "bind_id", "id2"):
        a, b = by_rank[0].get(key, set()), by_rank[1].get(key, set())
        check(a and b and not a & b, f"{key}: rank 0 {sorted(a)} and rank 1 {sorted(b)} must be apart")
    check(by_rank[1].get("correlation") == {100 + step}, f"rank 1's correlation {by_rank[1].get('correlation')}")
    ends = [e for e in t["traceEvents"] if e["ph"] in "be"]
    check(len(ends) == 4 and all("local" in e.get("id2", {}) for e in ends), f"async id2 kept local: {ends}")
    binds = [e for e in t["traceEvents"] if "bind_id" in e]
    check(sorted((e["name"], e.get("flow_in", False), e.get("flow_out", False)) for e in binds)
          == [("recv", True, False)] * 2 + [("send", False, True)] * 2, f"flow bindings {binds}")


def test_metadata_and_clock():
    """distributedInfo and deviceProperties kept per input with the rank; the
    system clock kept, since each one's baseTimeNanoseconds."""
    # rank 1 started 3 ms after rank 0 on the same real-time clock; their bases differ by 5 s
    b0, b1 = 1699999990000000000, 1699999995000000000
    r0 = write("clock_r0.json", rank_trace(0, 0, b0))
    r1 = write("clock_r1.json", rank_trace(1, 3000, b1))
    out = os.path.join(OUT, "clock_merged.json")
    p = mlprof("merge", r0, r1, "-o", out)
    check("lined up" not in p.stderr, f"no warning on one clock: {p.stderr!r}")
    t = load_exact(out)
    m = t["otherData"]["merge"]
    check(m["method"] == "system clock" and [int(i["offset_ns"]) for i in m["inputs"]] == [0, b1 - b0],
          f"system clock {m['method']} {[i['offset_ns'] for i in m['inputs']]}")
    check(int(t.get("baseTimeNanoseconds", 0)) == b0, f"the first input's base: {t.get('baseTimeNanoseconds')}")
    ts = {e["name"]: e["ts"] for e in t["traceEvents"] if e["name"] in ("rank0_op", "rank1_op")}
    want = {"rank0_op": decimal.Decimal(BASE_US + 10 - b0 // 1000),
            "rank1_op": decimal.Decimal(BASE_US + 3010 - b0 // 1000)}
    check(ts == want, f"times on the real-time clock since the first base: {ts}, wanted {want}")
    check(t.get("distributedInfo", {}).get("rank") == 0, f"top-level distributedInfo {t.get('distributedInfo')}")
    check(t.get("deviceProperties", [{}])[0].get("name") == "GPU of host 0",
          f"top-level deviceProperties {t.get('deviceProperties')}")
    for r, i in enumerate(m["inputs"]):
        check(i.get("rank") == r and i.get("label") == f"rank {r}", f"input {r}: rank and label {i}")
        check(i.get("distributedInfo", {}).get("rank") == r and i.get("distributedInfo", {}).get("backend") == "nccl",
              f"input {r}: distributedInfo {i.get('distributedInfo')}")
        check(i.get("deviceProperties", [{}])[0].get("name") == f"GPU of host {r}",
              f"input {r}: deviceProperties {i.get('deviceProperties')}")
        check(int(i.get("baseTimeNanoseconds", 0)) == (b0, b1)[r], f"input {r}: base {i.get('baseTimeNanoseconds')}")
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name")
    check(names == ["rank 0: GPU 0 (python)", "rank 0: python 0", "rank 1: GPU 0 (python)", "rank 1: python 1"],
          f"process names say the rank (and a GPU's which GPU): {names}")

    # no base (older Kineto): epoch times as they are, though the starts differ
    r0 = write("epoch_r0.json", rank_trace(0, 0))
    r1 = write("epoch_r1.json", rank_trace(1, 3000))
    mlprof("merge", r0, r1, "-o", out)
    t = load(out)
    m = t["otherData"]["merge"]
    check(m["method"] == "system clock" and [i["offset_ns"] for i in m["inputs"]] == [0, 0], f"epoch times {m}")
    ts = sorted(e["ts"] for e in t["traceEvents"] if e["name"] in ("rank0_op", "rank1_op"))
    check(ts == [BASE_US + 10, BASE_US + 3010], f"epoch times kept {ts}")
    # the options still decide when given
    mlprof("merge", r0, r1, "--offsets", "0,-3ms", "-o", out)
    m = load(out)["otherData"]["merge"]
    check(m["method"] == "given offsets" and m["inputs"][1]["offset_ns"] == -3000000, f"given offsets {m}")
    mlprof("merge", r0, r1, "--sync-marker", "req", "-o", out)
    m = load(out)["otherData"]["merge"]
    check(m["method"] == "sync marker" and m["inputs"][1]["offset_ns"] == -3000000, f"marker {m}")
    # a trace that does not say its clock: the starts, said loudly
    r2 = write("nometa_r1.json", rank_trace(1, 3000, meta=False))
    p = mlprof("merge", r0, r2, "-o", out)
    m = load(out)["otherData"]["merge"]
    check(m["method"] == "trace starts" and "lined up" in p.stderr, f"one trace without a clock: {m}")


def test_odd_ids():
    """A link id that is no number merges (written null); one too large to
    move apart is an error that names its key."""
    evs = '[{"name":"k","cat":"kernel","ph":"X","pid":0,"tid":7,"ts":5,"dur":1,"args":{"correlation":NaN}}]'
    odd = write("odd_ids.json", '{"schemaVersion":1,"traceEvents":' + evs + "}")
    out = os.path.join(OUT, "odd_merged.json")
    mlprof("merge", odd, odd, "-o", out)
    k = [e for e in load(out)["traceEvents"] if e["name"] == "k"]
    check(len(k) == 2 and all(e["args"]["correlation"] is None for e in k), f"NaN ids: {k}")
    huge = write("huge_ids.json", json.dumps({"schemaVersion": 1, "traceEvents": [
        {"name": "k", "cat": "kernel", "ph": "X", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
         "args": {"External id": 9000000000000000000}}]}))
    p = mlprof("merge", huge, huge, "-o", out, expect=1)
    check('"External id" are too large' in p.stderr, f"ids too large: {p.stderr!r}")


def gpu_trace(vendor, devices, used, cpu_pid):
    """A trace as PyTorch's profiler writes it on a host whose GPUs are
    called vendor: deviceProperties lists devices (ids), and a kernel runs on
    each device of used, whose process has the device's number as pid (and as
    "device"); every listed device has a process named as the program."""
    evs = [{"ph": "M", "name": "process_name", "pid": cpu_pid, "tid": 0, "args": {"name": "python3"}}]
    for d in devices:
        evs.append({"ph": "M", "name": "process_name", "pid": d, "tid": 0, "args": {"name": "python3"}})
    for k, d in enumerate(used):
        corr = 10 + k
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": cpu_pid, "tid": 1,
                    "ts": BASE_US + 10 * k, "dur": 2, "args": {"correlation": corr}})
        evs.append({"ph": "X", "cat": "kernel", "name": f"{vendor}_k{d}", "pid": d, "tid": 7,
                    "ts": BASE_US + 10 * k + 3, "dur": 4, "args": {"correlation": corr, "device": d, "stream": 7}})
    return {"schemaVersion": 1, "traceEvents": evs,
            "deviceProperties": [{"id": d, "name": f"{vendor} GPU", "totalGlobalMem": 1 << 34} for d in devices]}


def test_devices_apart():
    """Inputs whose GPUs have the same numbers (every host's first GPU is 0):
    merged, each GPU keeps its own name (kernels' device_name), its own
    number in the output (its events' "device", its deviceProperties' id),
    and its process says which input and which of its GPUs it is."""
    inputs = [("Alpha", [0, 1], [0]), ("Beta", [0], [0]), ("Gamma", [0, 1], [1, 0])]
    paths = [write(f"dev_{v}.json", gpu_trace(v, devs, used, 500)) for v, devs, used in inputs]
    out = os.path.join(OUT, "dev_merged.json")
    mlprof("merge", *paths, "--same-clock", "--names", "A,B,C", "-o", out)
    t = load(out)
    props = t.get("deviceProperties", [])
    ids = [p.get("id") for p in props]
    check(len(ids) == len(set(ids)), f"merged deviceProperties ids must be distinct: {ids}")
    by_id = {p.get("id"): p for p in props}
    pname = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name"}
    kernels = {e["name"]: e for e in t["traceEvents"] if e.get("cat") == "kernel"}
    check(len(kernels) == 4, f"every kernel written: {sorted(kernels)}")
    seen = set()
    for i, (vendor, _, used) in enumerate(inputs):
        devmap = t["otherData"]["merge"]["inputs"][i].get("devices", {})
        for d in used:
            k = kernels.get(f"{vendor}_k{d}", {"pid": None, "args": {}})
            dev = k["args"].get("device")
            seen.add((k["pid"], dev))
            p = by_id.get(dev, {})
            check(p.get("name") == f"{vendor} GPU" and p.get("merge_input") == i and p.get("merge_device") == d
                  and p.get("merge_label") == "ABC"[i],
                  f"{vendor}'s GPU {d}: its kernel says device {dev}, whose properties are {p}")
            check(devmap.get(str(d)) == dev, f"{vendor}: otherData.merge.inputs[{i}].devices {devmap}, kernel on {dev}")
            check(pname.get(k["pid"]) == f"{'ABC'[i]}: GPU {d} (python3)",
                  f"{vendor}'s GPU {d} process named {pname.get(k['pid'])!r}")
    check(len(seen) == 4 and len({p for p, _ in seen}) == 4 and len({d for _, d in seen}) == 4,
          f"four GPUs used, four pids and device numbers: {sorted(seen, key=str)}")
    # the first input's numbers are kept
    check(kernels.get("Alpha_k0", {}).get("args", {}).get("device") == 0 and kernels["Alpha_k0"]["pid"] == 0,
          f"the first input's GPU 0 stays 0: {kernels.get('Alpha_k0')}")
    # the analyzer names each device by its own input's properties
    k = kernels_json(out)
    names = {d.get("pid"): d.get("device_name") for d in k.get("devices", [])}
    for vendor, _, used in inputs:
        for d in used:
            pid = kernels.get(f"{vendor}_k{d}", {}).get("pid")
            check(names.get(pid) == f"{vendor} GPU", f"mlprof kernels names {vendor}'s GPU {d} {names.get(pid)!r}")

    # real traces: an AMD and two NVIDIA hosts, each with a GPU 0 in its own numbering
    kin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "kineto")
    real = [os.path.join(kin, n) for n in ("alexnet_a100.json.gz", "mi250_rocm.json.gz", "triton_a100.json.gz")]
    if not all(os.path.exists(p) for p in real):
        print(f"skipped the Kineto traces' devices: {kin} is absent")
        return
    out = os.path.join(OUT, "dev_kineto.json")
    mlprof("merge", *real, "-o", out)
    devs = [(d.get("device"), d.get("device_name")) for d in kernels_json(out).get("devices", [])]
    want = sorted(["NVIDIA A100-PG509-200", "AMD Radeon Graphics", "NVIDIA A100-PG509-200"])
    check(sorted(n for _, n in devs) == want and len({d for d, _ in devs}) == 3,
          f"Kineto traces merged: devices {devs}, wanted three apart named {want}")


def test_named_ids_survive_doubles():
    """pids and tids given as strings (Kineto's "Spans", "Traces", "") come
    out as numbers that a double holds (JavaScript's, in Perfetto's UI and
    chrome://tracing), apart from each other and from the numbered ones,
    with their strings as the tracks' names."""
    evs = [
        {"ph": "X", "name": "span", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1, "dur": 50},
        {"ph": "X", "name": "span0", "pid": "Spans", "tid": 0, "ts": 2, "dur": 5},
        {"ph": "X", "name": "span1", "pid": "Spans", "tid": 1, "ts": 2, "dur": 5},
        {"ph": "i", "s": "g", "name": "iter", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 3},
        {"ph": "i", "s": "g", "name": "window", "pid": "", "tid": "", "ts": 4},
        {"ph": "X", "name": "op", "pid": 1000000, "tid": 2, "ts": 5, "dur": 1},
        {"ph": "M", "name": "process_name", "pid": 1000000, "tid": 0, "args": {"name": "python3"}},
    ]
    src = write("named_ids.json", {"traceEvents": evs})
    out = os.path.join(OUT, "named_ids_merged.json")
    mlprof("merge", src, src, "--same-clock", "--names", "a,b", "-o", out)
    t = load(out)
    where = {}
    for e in t["traceEvents"]:
        for key in ("pid", "tid"):
            v = e.get(key)
            check(isinstance(v, int) and abs(v) < 2 ** 53, f"{e['name']}: {key} {v!r} is no number a double holds")
        if e["ph"] != "M":
            where.setdefault(e["name"], []).append((e["pid"], e["tid"]))
    tracks = {n: w for n, w in where.items()}
    check(all(len(w) == 2 for w in tracks.values()) and len(tracks) == 6, f"every event twice: {tracks}")
    pids = {n: [p for p, _ in w] for n, w in tracks.items()}
    # per input: "Spans", "Traces", "" and 1000000 are four processes; two inputs, eight
    procs = {float(p) for n in ("span", "iter", "window", "op") for p in pids.get(n, [])}
    check(len(procs) == 8, f"eight processes apart, even as doubles: {pids}")
    for k in range(2):
        sp = [tracks[n][k] for n in ("span", "span0", "span1") if n in tracks]
        check(len({p for p, _ in sp}) == 1 and len({float(tid) for _, tid in sp}) == 3,
              f"input {k}: Spans' three threads apart in one process: {sp}")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M"
             and e["name"] in ("process_name", "thread_name")}
    for k, label in enumerate("ab"):
        for ev, proc, thread in (("span", "Spans", "PyTorch Profiler"), ("iter", "Traces", "Trace PyTorch Profiler"),
                                 ("window", "", "")):
            if ev not in tracks:
                continue
            pid, tid = tracks[ev][k]
            check(names.get((pid, 0)) == f"{label}: {proc}", f"{proc!r} of {label} named {names.get((pid, 0))!r}")
            check(names.get((pid, tid)) == thread, f"{thread!r} of {label} named {names.get((pid, tid))!r}")
        got = t["otherData"]["merge"]["inputs"][k]["pids"]
        check(set(got) == {"Spans", "Traces", "", "1000000"} and got.get("Spans") == tracks["span"][k][0],
              f"input {k}: otherData.merge pids by the names given {got}")

    kin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "kineto")
    real = [os.path.join(kin, n) for n in ("alexnet_a100.json.gz", "mi250_rocm.json.gz")]
    if not all(os.path.exists(p) for p in real):
        print(f"skipped the Kineto traces' named ids: {kin} is absent")
        return
    out = os.path.join(OUT, "named_kineto.json")
    mlprof("merge", *real, "-o", out)
    big = [(e["name"], e["pid"], e["tid"]) for e in load(out)["traceEvents"]
           if not all(isinstance(v, int) and abs(v) < 2 ** 53 for v in (e["pid"], e["tid"]))]
    check(not big, f"Kineto traces merged: ids a double does not hold: {big[:5]}")


def test_nul_kept():
    """A string that holds a NUL ("k\\u0000ey") is written whole, as
    augment writes it: argument keys and values, names, track names."""
    evs = [{"ph": "X", "name": "n\u0000ame", "cat": "c\u0000at", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
            "args": {"k\u0000ey": "v\u0000al", "k": "other", "t": "true\u0000x", "correlation": "7\u00008"}},
           {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "pro\u0000c"}},
           {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thr\u0000ead"}}]
    src = write("nul.json", {"traceEvents": evs})
    out = os.path.join(OUT, "nul_merged.json")
    mlprof("merge", src, src, "--same-clock", "--names", "a,b", "-o", out)
    t = load(out)
    got = [e for e in t["traceEvents"] if e["ph"] == "X"]
    check(len(got) == 2, f"two events: {got}")
    for k, e in enumerate(got):
        want = {"k\u0000ey": "v\u0000al", "k": "other", "t": "true\u0000x",
                "correlation": "7\u00008" if k == 0 else "1:7\u00008"}
        check(e.get("args") == want, f"input {k}: arguments {e.get('args')!r}, wanted {want!r}")
        check(e["name"] == "n\u0000ame" and e.get("cat") == "c\u0000at",
              f"input {k}: name {e['name']!r}, category {e.get('cat')!r}")
    meta = sorted(e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and "name" in e.get("args", {}))
    check(meta == ["a: pro\u0000c", "b: pro\u0000c", "thr\u0000ead", "thr\u0000ead"], f"track names {meta!r}")
    with open(out) as f:
        check("\\u0000" in f.read(), "NUL escaped as \\u0000")


def test_literals_apart_from_strings():
    """The strings "true", "false" and "null" stay strings, and the literals
    stay literals, through merge and through export to Perfetto and back."""
    args = {"s": "true", "f": "false", "z": "null", "b": True, "c": False, "n": None, "o": {"k": [1, True]}}
    evs = [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": args}]
    src = write("literals.json", {"traceEvents": evs})
    out = os.path.join(OUT, "literals_merged.json")
    mlprof("merge", src, src, "--same-clock", "-o", out)
    got = [e.get("args") for e in load(out)["traceEvents"] if e["ph"] == "X"]
    check(got == [args, args], f"merge: arguments {got!r}, wanted {args!r}")
    pf = os.path.join(OUT, "literals.pftrace")
    mlprof("export", "--perfetto", pf, src)
    back = os.path.join(OUT, "literals_back.json")
    mlprof("merge", pf, pf, "--same-clock", "-o", back)
    got = [e.get("args") for e in load(back)["traceEvents"] if e["ph"] == "X"]
    check(got == [args, args], f"export and back: arguments {got!r}, wanted {args!r}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tests = [test_nanoseconds_round_trip, test_links_stay_with_their_rank, test_metadata_and_clock,
             test_odd_ids, test_devices_apart, test_named_ids_survive_doubles, test_nul_kept,
             test_literals_apart_from_strings]
    for test in tests:
        test()
    if failures:
        print(f"analyze_merge_check: {len(failures)} of the checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"analyze_merge_check: {len(tests)} tests passed")
