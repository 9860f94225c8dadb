#!/usr/bin/env python3
"""What `mlprof ranks`, `mlprof kernels DIR` and `mlprof merge` make of inputs
that are not all ranks of one job, on traces written here:

- the launcher's trace beside its ranks' (mlprof run -o job.json -- torchrun
  or -- mpirun leaves trace.PID.json, no rank, in job.json.parts/): ranks and
  kernels DIR leave it out, said in one line, and the ranks' measured clock
  sync still applies; merge keeps it, on the clock of a rank on its host (or
  its start lined up when no rank shares its host), and the clock sync of
  the ranks is applied all the same;
- traces of different jobs (distributedInfo's job_id or world_size differ: a
  rank of an earlier job left in job.json.parts/, a PyTorch trace of another
  run): ranks refuses, naming the files and their jobs, unless --any-job;
  kernels DIR and merge warn (stderr; kernels' JSON too);
- merge of traces merged before (one rank each, or several): a process name
  that carries its label already is not labelled again, and the top-level
  distributedInfo is the lowest rank's.

usage: analyze_ranks_jobs_check.py MLPROF OUTDIR
"""
import json
import os
import shutil
import sys

from analyze_util import as_json, check, command, failures, fresh_folder, write_json as write, load_written as load

MLPROF, OUT = sys.argv[1:3]
os.makedirs(OUT, exist_ok=True)
mlprof = command(MLPROF)
T0 = 5000000  # us: the mlprof traces' monotonic start
US = 1000
BASE_US = 1700000000000000  # epoch us, as Kineto stamps


def fresh_dir(name):
    return fresh_folder(OUT, name)


def span(name, cat, start, end, pid, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": T0 + start, "dur": end - start,
            "args": args}


def process_name(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def mpi_rank(r, world, job, host, arrivals, cs=None, pname="app"):
    """One mlprof rank with the mpi hook's spans: a Barrier on communicator 7
    at each arrival (us from T0, on its own clock), 20 us long; cs: its
    clock sync (offset_ns, drift_ppb, bound_ns) against rank 0."""
    pid = 1000 + r
    ev = [process_name(pid, pname), span("work", "app", 0, arrivals[0], pid)]
    for k, a in enumerate(arrivals):
        ev.append(span("MPI_Barrier", "mpi", a, a + 20, pid, comm=7, seq=k + 1, comm_size=world, bytes=0))
    other = {"mlprof_version": "x", "host": host, "clock_domain": "CLOCK_MONOTONIC", "pid": pid}
    if cs:
        off, drift, bound = cs
        other["clock_sync"] = {"method": "mpi_pingpong", "reference_rank": 0, "rank": r, "world_size": world,
                               "samples": [{"at_ns": T0 * US, "offset_ns": off, "bound_ns": bound,
                                            "rtt_ns": 2 * bound, "exchanges": 24}],
                               "offset_ns": off, "drift_ppb": drift, "bound_ns": bound}
    info = {"rank": r, "world_size": world, "local_rank": 0, "local_world_size": 1, "host": host, "source": "ompi"}
    if job is not None:
        info["job_id"] = job
    return {"traceEvents": ev, "displayTimeUnit": "ms", "distributedInfo": info, "otherData": other}


def launcher(host, start=0, pname="mpirun"):
    """The launcher's own trace, as mlprof run writes it when it wraps
    mpirun or torchrun: mlprof's, no rank, no clock sync."""
    pid = 900
    ev = [process_name(pid, pname), span("launch", "app", start, start + 400, pid)]
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"mlprof_version": "x", "host": host, "clock_domain": "CLOCK_MONOTONIC", "pid": pid}}


# rank 1's clock is 1 ms behind rank 0's (reference = local + 1 ms): its
# local arrival 105 is rank 0's 1105, 5 us after rank 0's 1100
SYNCS = [(0, 0, 200), (1000000, 0, 500)]
ARRIVALS = [[1100, 1200], [105, 190]]


def job_parts(d, launcher_host="h1"):
    """A job's parts: two ranks on two hosts with their clock sync, and the launcher on launcher_host."""
    ranks = [write(os.path.join(d, f"trace.rank{r}.{2000 + r}.json"),
                   mpi_rank(r, 2, "77", f"h{r}", ARRIVALS[r], SYNCS[r])) for r in range(2)]
    lead = write(os.path.join(d, "trace.1999.json"), launcher(launcher_host))
    return ranks, lead


def test_launcher_left_out():
    d = fresh_dir("launcher")
    ranks, lead = job_parts(d)
    want = as_json(mlprof("ranks", *ranks, "--format", "json"), "ranks of the ranks alone")
    for what, args in (("DIR", [d]), ("FILES", [lead] + ranks)):
        p = mlprof("ranks", *args, "--format", "json")
        k = as_json(p, f"ranks {what} with the launcher")
        if not k or not want:
            continue
        check([r["rank"] for r in k["ranks"]] == [0, 1], f"{what}: the launcher is no rank: {k['ranks']}")
        check(k["clock"] == "clock sync, within 500 ns" == want["clock"], f"{what}: clock {k['clock']}")
        left = k.get("left_out") or [{}]
        check([x.get("path") for x in left] == [lead] and "no rank" in left[0].get("why", ""),
              f"{what}: left_out {left}")
        check(k.get("warnings") == [], f"{what}: warnings {k.get('warnings')}")
        check(f"left out: {lead} (no rank: the launcher?)\n" in p.stderr and "numbered" not in p.stderr,
              f"{what}: the line that says so: {p.stderr!r}")
        # the same report as without it
        for key in ("ranks", "imbalance", "straggler", "collectives", "window"):
            check(k[key] == want[key], f"{what}: {key} differs with the launcher: {k[key]} / {want[key]}")
        # on rank 0's clock: the first Barrier 1100 and 1105 (rank 1 last), the second 1200 and 1190
        x = sorted((c["seq"], c["last_rank"], c["skew_ns"], c["earliest_arrival_ns"])
                   for c in k["collectives"]["by_skew"])
        check(x == [(1, 1, 5 * US, (T0 + 1100) * US), (2, 0, 10 * US, (T0 + 1190) * US)],
              f"{what}: on rank 0's clock: {x}")
        check(k["imbalance"]["compute"]["max_rank"] in (0, 1), f"{what}: imbalance {k['imbalance']}")
    t = mlprof("ranks", d).stdout
    check(t.startswith(f"{d}: 2 ranks (clock: clock sync, within 500 ns)\nleft out: {lead} (no rank: the launcher?)\n"),
          f"the table says it: {t[:300]!r}")
    # every trace without a rank: numbered in file-name order, as before
    e = fresh_dir("no_ranks")
    for r in range(2):
        t = mpi_rank(r, 2, "77", "h0", ARRIVALS[0])
        del t["distributedInfo"]
        write(os.path.join(e, f"t{r}.json"), t)
    p = mlprof("ranks", e, "--format", "json")
    k = as_json(p, "no ranks")
    if k:
        check([r["rank_from"] for r in k["ranks"]] == ["file order"] * 2 and k.get("left_out") == [],
              f"no ranks: {k['ranks']} {k.get('left_out')}")


def kineto_rank(r, world, colls, rank_meta=True):
    def x(name, cat, start, end, tid, pid, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE_US + start,
                "dur": end - start, "args": args}

    ev = [x("aten::mm", "cpu_op", 0, 10, 1, 100, **{"External id": 1}),
          x("cudaLaunchKernel", "cuda_runtime", 2, 4, 1, 100, correlation=7, **{"External id": 1}),
          x("gemm", "kernel", 5, 40, 7, 0, device=0, stream=7, correlation=7, **{"External id": 1})]
    for k, start in enumerate(colls):
        ev.append(x(NCCL, "kernel", start, start + 10, 20, 0, device=0, stream=20, correlation=100 + k))
    t = {"schemaVersion": 1, "traceEvents": ev}
    if rank_meta:
        t["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": world}
    return t


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def test_kernels_dir_launcher():
    d = fresh_dir("kernels_launcher")
    for r in range(2):
        write(os.path.join(d, f"rank{r}.pt.trace.json"), kineto_rank(r, 2, [50 + 3 * r, 80 + r]))
    lead = write(os.path.join(d, "launcher.json"), kineto_rank(0, 2, [], rank_meta=False))
    p = mlprof("kernels", d, "--format", "json")
    k = as_json(p, "kernels DIR with the launcher")
    if k:
        check([(r["rank"], os.path.basename(r["path"])) for r in k["ranks"]]
              == [(0, "rank0.pt.trace.json"), (1, "rank1.pt.trace.json")], f"kernels DIR: ranks {k['ranks']}")
        check([x["path"] for x in k.get("left_out") or []] == [lead] and k.get("warnings") == [],
              f"kernels DIR: left out {k.get('left_out')} {k.get('warnings')}")
        st = k["stragglers"]
        check(st["collectives"] == 2 and [r["rank"] for r in st["ranks"]] == [0, 1], f"kernels DIR: stragglers {st}")
    check(f"left out: {lead} (no rank: the launcher?)" in p.stderr, f"kernels DIR: said {p.stderr!r}")
    t = mlprof("kernels", d).stdout
    check("2 ranks, each analysed alone" in t and f"left out: {lead}" in t and "== rank 2" not in t,
          f"kernels DIR table {t[:300]!r}")


def test_merge_launcher_on_a_ranks_clock():
    d = fresh_dir("merge_launcher")
    ranks, lead = job_parts(d)
    out = os.path.join(OUT, "merge_launcher.json")
    p = mlprof("merge", lead, *ranks, "-o", out)
    t = load(out)
    m = t["otherData"]["merge"]
    check(m["method"] == "clock sync" and m.get("clock_sync", {}).get("worst_bound_ns") == 500
          and m["clock_sync"].get("method") == "mpi_pingpong", f"merge with the launcher: {m['method']} {m.get('clock_sync')}")
    ins = {os.path.basename(i["path"]): i for i in m["inputs"]}
    li = ins.get("trace.1999.json", {})
    check(li.get("clock_sync_of_rank") == 1 and li.get("offset_ns") == 1000000 and "rank" not in li,
          f"the launcher on rank 1's clock (its host's): {li}")
    ts = {e["name"]: e["ts"] for e in t["traceEvents"] if e["name"] in ("launch",)}
    check(ts.get("launch") == T0 + 1000, f"the launcher's events moved as rank 1's: {ts}")
    arr = sorted(e["ts"] for e in t["traceEvents"] if e["name"] == "MPI_Barrier")
    check(arr == [T0 + 1100, T0 + 1105, T0 + 1190, T0 + 1200], f"the ranks' clock sync applied: {arr}")
    check("on the clock of rank 1" in p.stderr and "not applied" not in p.stderr, f"merge says it: {p.stderr!r}")
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name")
    check(names == sorted([f"{lead}: mpirun", "rank 0: app", "rank 1: app"]), f"merge names {names}")
    # a launcher on a host of no rank: its start lined up with the ranks' first, said
    far = write(os.path.join(OUT, "launcher_far.json"), launcher("elsewhere", start=-300))
    p = mlprof("merge", far, *ranks, "-o", out)
    t = load(out)
    m = t["otherData"]["merge"]
    fi = [i for i in m["inputs"] if i["path"] == far]
    check(m["method"] == "clock sync" and fi and fi[0].get("aligned_by") == "start",
          f"a launcher elsewhere: {m['method']} {fi}")
    ts = [e["ts"] for e in t["traceEvents"] if e["name"] == "launch"]
    check(ts == [T0], f"its start lined up with the ranks' first event: {ts}")
    check("lined up with the ranks' first" in p.stderr, f"said: {p.stderr!r}")


def test_different_jobs():
    # a 2-rank job's ranks 0 and 1, and rank 2 of an earlier 3-rank job left beside them
    d = fresh_dir("jobs")
    a = [write(os.path.join(d, f"trace.rank{r}.{3000 + r}.json"), mpi_rank(r, 2, "1645", "h0", [100, 200]))
         for r in range(2)]
    b = write(os.path.join(d, "trace.rank2.2500.json"), mpi_rank(2, 3, "1614", "h0", [150, 250]))
    for what, args in (("DIR", [d]), ("FILES", a + [b])):
        p = mlprof("ranks", *args, expect=1)
        check(p.stdout == "", f"{what}: no report across jobs: {p.stdout[:200]!r}")
        check("different jobs" in p.stderr and "job 1645, world size 2" in p.stderr
              and "job 1614, world size 3" in p.stderr and b in p.stderr and a[0] in p.stderr
              and "--any-job" in p.stderr, f"{what}: the files and their jobs named: {p.stderr!r}")
        p = mlprof("ranks", *args, "--any-job", "--format", "json")
        k = as_json(p, f"{what} --any-job")
        if k:
            w = k.get("warnings") or []
            check([r["rank"] for r in k["ranks"]] == [0, 1, 2] and len(w) == 1 and "job 1614, world size 3" in w[0],
                  f"{what} --any-job: {w}")
        check("warning: the traces are of different jobs" in p.stderr, f"{what} --any-job: said {p.stderr!r}")
    t = mlprof("ranks", d, "--any-job").stdout
    check("\nwarning: the traces are of different jobs, compared as one: job 1645" in t, f"--any-job table {t[:400]!r}")
    # the same rank in both jobs: the jobs are said, not the rank twice
    c = write(os.path.join(OUT, "old_rank0.json"), mpi_rank(0, 3, "1614", "h0", [150, 250]))
    p = mlprof("ranks", a[0], a[1], c, expect=1)
    check("different jobs" in p.stderr and "say they are rank 0" not in p.stderr, f"rank 0 of two jobs: {p.stderr!r}")
    # the merged trace of both: refused the same, its inputs' jobs read from otherData.merge
    merged = os.path.join(OUT, "jobs_merged.json")
    p = mlprof("merge", *a, b, "-o", merged)
    check("warning: the traces are of different jobs" in p.stderr and "job 1614, world size 3: " + b in p.stderr,
          f"merge warns: {p.stderr!r}")
    p = mlprof("ranks", merged, expect=1)
    check("different jobs" in p.stderr and "job 1645, world size 2: rank 0, rank 1" in p.stderr,
          f"ranks MERGED of two jobs: {p.stderr!r}")
    # one job: no word of it
    p = mlprof("merge", *a, "-o", merged)
    check("different jobs" not in p.stderr, f"merge of one job: {p.stderr!r}")
    p = mlprof("ranks", *a)
    check("different jobs" not in p.stderr, f"ranks of one job: {p.stderr!r}")
    # a job id said by some only (PyTorch's profiler writes none): the world size decides
    k0 = write(os.path.join(OUT, "kineto_w2.json"), kineto_rank(0, 2, [50]))
    k1 = write(os.path.join(OUT, "kineto_w128.json"), kineto_rank(0, 128, [50]))
    m1 = write(os.path.join(OUT, "mlprof_w2_rank1.json"), mpi_rank(1, 2, "1645", "h0", [100, 200]))
    p = mlprof("ranks", k0, m1)
    check("different jobs" not in p.stderr, f"no job id on one, the same world size: {p.stderr!r}")
    p = mlprof("ranks", k1, m1, expect=1)
    check("no job id, world size 128: " + k1 in p.stderr and "job 1645, world size 2: " + m1 in p.stderr,
          f"world 128 and world 2: {p.stderr!r}")
    # kernels DIR: warned, on stderr, in its table and in its JSON
    e = fresh_dir("kernels_jobs")
    write(os.path.join(e, "rank0.pt.trace.json"), kineto_rank(0, 2, [50]))
    write(os.path.join(e, "rank1.pt.trace.json"), kineto_rank(1, 4, [52]))
    p = mlprof("kernels", e, "--format", "json")
    k = as_json(p, "kernels DIR of two jobs")
    if k:
        w = k.get("warnings") or []
        check(len(w) == 1 and "world size 4" in w[0], f"kernels DIR: warnings {w}")
    check("warning: the traces are of different jobs" in p.stderr, f"kernels DIR: said {p.stderr!r}")
    t = mlprof("kernels", e).stdout
    check("their collectives matched all the same" in t, f"kernels DIR: the stragglers' warning {t[-600:]!r}")


def test_merge_labels_and_top_level():
    d = fresh_dir("relabel")
    r = [write(os.path.join(d, f"r{k}.json"), mpi_rank(k, 2, "5", "h0", [100, 200], pname="python3"))
         for k in range(2)]
    one = []
    for k in (1, 0):  # each rank merged alone first (mlprof run -o job.%r.json leaves such files)
        one.append(os.path.join(OUT, f"job.{k}.json"))
        # merge takes two traces at least: the rank's and its launcher's
        write(os.path.join(d, f"sh{k}.json"), launcher("h0", pname="sh"))
        mlprof("merge", r[k], os.path.join(d, f"sh{k}.json"), "-o", one[-1])
    out = os.path.join(OUT, "relabel_merged.json")
    mlprof("merge", *one, "-o", out)
    t = load(out)
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name")
    check("rank 0: python3" in names and "rank 1: python3" in names
          and not any(n.startswith("rank 1: rank 1") or n.startswith("rank 0: rank 0") for n in names),
          f"labels not doubled: {names}")
    check(t.get("distributedInfo", {}).get("rank") == 0, f"the lowest rank's distributedInfo: {t.get('distributedInfo')}")
    # a merged trace of several ranks merged again with another rank: each keeps its own label
    both = os.path.join(OUT, "relabel_both.json")
    mlprof("merge", r[1], r[0], "-o", both)
    check(load(both).get("distributedInfo", {}).get("rank") == 0, "the lowest rank's, whatever the order")
    r2 = write(os.path.join(d, "r2.json"), mpi_rank(2, 3, "5", "h0", [100, 200], pname="python3"))
    mlprof("merge", r2, both, "-o", out)
    t = load(out)
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name")
    check(names == ["rank 0: python3", "rank 1: python3", "rank 2: python3"], f"ranks kept apart: {names}")
    check(t.get("distributedInfo", {}).get("rank") == 0, f"top level {t.get('distributedInfo')}")
    # labels given: not doubled either; another label is prefixed
    mlprof("merge", r[0], r[1], "--names", "A,B", "-o", both)
    mlprof("merge", both, r2, "--names", "A,C", "-o", out)
    names = sorted(e["args"]["name"] for e in load(out)["traceEvents"] if e["name"] == "process_name")
    check(names == ["A: B: python3", "A: python3", "C: python3"], f"given labels: {names}")
    # no input with a rank: the first input's distributedInfo
    x = launcher("h0")
    x["distributedInfo"] = {"backend": "gloo", "host": "first"}
    y = launcher("h0")
    y["distributedInfo"] = {"backend": "gloo", "host": "second"}
    mlprof("merge", write(os.path.join(d, "x.json"), x), write(os.path.join(d, "y.json"), y), "-o", out)
    check(load(out).get("distributedInfo", {}).get("host") == "first", "no rank: the first input's distributedInfo")


test_launcher_left_out()
test_kernels_dir_launcher()
test_merge_launcher_on_a_ranks_clock()
test_different_jobs()
test_merge_labels_and_top_level()
if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("ok")
