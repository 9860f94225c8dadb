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

from analyze_util import check, command, failures

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


def load(path):
    if not os.path.exists(path):
        check(False, f"{path} was not written")
        return {"traceEvents": [], "otherData": {"merge": {"inputs": []}}}
    with open(path) as f:
        return json.load(f)


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
    check(names == ["rank 0: python", "rank 0: python 0", "rank 1: python", "rank 1: python 1"],
          f"process names say the rank: {names}")

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


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tests = [test_nanoseconds_round_trip, test_links_stay_with_their_rank, test_metadata_and_clock,
             test_odd_ids]
    for test in tests:
        test()
    if failures:
        print(f"analyze_merge_check: {len(failures)} of the checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"analyze_merge_check: {len(tests)} tests passed")
