#!/usr/bin/env python3
"""`mlprof ranks`: the ranks of a distributed job compared. Traces with known
answers, written here: four mlprof ranks with the mpi hook's spans (two
collectives on the world communicator and one on a communicator of two
ranks, a send and its receive, work overlapping a collective), given as
files, as a directory and as their merged trace; two PyTorch (Kineto) GPU
ranks with NCCL kernels; two gloo CPU ranks. Every figure is checked to the
nanosecond. Then bad input (not a trace, two traces of one rank, nothing),
the real Kineto traces of ../shared/traces/kineto as a smoke test of the
invariants (compute + communication - overlap + idle = wall on every rank);
ranks on two hosts with measured clock offsets and drift; and a real
`mpirun -n 4 mlprof run` of a program whose rank 3 comes late to every
Allreduce, read from the job's merged trace and from its ranks' files.

usage: analyze_dist_check.py MLPROF OUTDIR
"""
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys

from analyze_util import as_json, check, command, failures, fresh_folder, write_json as write

MLPROF, OUT = sys.argv[1:3]
mlprof = command(MLPROF)
T0 = 5000000  # us: the mlprof traces' monotonic start
US = 1000


def fresh_dir(name):
    return fresh_folder(OUT, name)


def span(name, cat, start, end, tid=1, pid=1000, **args):
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": T0 + start, "dur": end - start,
            "args": args}


def mpi_coll(name, start, end, comm, seq, size, pid):
    return span(name, "mpi", start, end, pid=pid, comm=comm, seq=seq, comm_size=size, bytes=4096)


# rank: (spans as (name, cat, start, end, tid, args)); times in us from T0.
# Allreduce (comm 7, seq 1): arrivals 50, 60, 70, 80 -> rank 3 last by 30.
# Barrier (comm 7, seq 2): arrivals 110, 130, 105, 101 -> rank 1 last by 29.
# Allreduce (comm 9 of ranks 2 and 3, seq 1): arrivals 141, 143 -> rank 3 by 2.
def mpi_rank(r):
    pid = 1000 + r
    arrive1 = 50 + 10 * r
    arrive2 = [110, 130, 105, 101][r]
    ev = [span("work", "app", 0, arrive1, pid=pid),
          mpi_coll("MPI_Allreduce", arrive1, 100, 7, 1, 4, pid),
          span("work2", "app", 100, arrive2, pid=pid),
          mpi_coll("MPI_Barrier", arrive2, 140, 7, 2, 4, pid)]
    if r == 0:
        # a step around everything on the thread: not computation while its MPI calls run
        ev.append(span("step", "app", 0, 150, pid=pid))
        ev.append(span("MPI_Send", "mpi", 140, 150, pid=pid, comm=7, peer=1, tag=3, seq=1, bytes=64))
    if r == 1:
        ev.append(span("MPI_Recv", "mpi", 140, 150, pid=pid, comm=7, peer=0, tag=3, seq=1, bytes=64))
    if r == 2:
        ev.append(span("helper", "app", 90, 100, tid=2, pid=pid))  # overlaps its Allreduce by 10
        ev.append(mpi_coll("MPI_Allreduce", 141, 145, 9, 1, 2, pid))
    if r == 3:
        ev.append(mpi_coll("MPI_Allreduce", 143, 145, 9, 1, 2, pid))
    if r >= 2:
        ev.append(span("tail", "app", 149, 150, pid=pid))
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "distributedInfo": {"rank": r, "world_size": 4, "local_rank": r, "local_world_size": 4,
                                "host": "node1", "job_id": "42", "source": "key"},
            "otherData": {"host": "node1", "clock_domain": "CLOCK_MONOTONIC", "pid": pid}}


# expected per rank (us): wall, compute, communication, overlap, idle,
# matched instances, times last, late total, late max, wait
MPI_EXPECT = {
    0: dict(wall=150, compute=60, comm=90, overlap=0, idle=0, matched=2, last=0, late=9, late_max=9, wait=50),
    1: dict(wall=150, compute=90, comm=60, overlap=0, idle=0, matched=2, last=1, late=39, late_max=29, wait=20),
    2: dict(wall=150, compute=86, comm=69, overlap=10, idle=5, matched=3, last=0, late=24, late_max=20, wait=37),
    3: dict(wall=150, compute=82, comm=61, overlap=0, idle=7, matched=3, last=2, late=32, late_max=30, wait=29),
}


def check_mpi_report(d, what, rank_from="distributedInfo"):
    if not d:
        return
    got = {r["rank"]: r for r in d["ranks"]}
    check(sorted(got) == [0, 1, 2, 3], f"{what}: ranks {sorted(got)}")
    for rank, e in MPI_EXPECT.items():
        r = got.get(rank)
        if not r:
            continue
        have = dict(wall=r["wall_ns"], compute=r["compute_ns"], comm=r["communication_ns"], overlap=r["overlap_ns"],
                    idle=r["idle_ns"], matched=r["matched"], last=r["last"], late=r["late_total_ns"],
                    late_max=r["late_max_ns"], wait=r["wait_ns"])
        want = {k: v * US if k not in ("matched", "last") else v for k, v in e.items()}
        check(have == want, f"{what}: rank {rank}: got {have}, wanted {want}")
        check(r["wall_ns"] == r["compute_ns"] + r["communication_ns"] - r["overlap_ns"] + r["idle_ns"],
              f"{what}: rank {rank}: the parts do not add up to the wall time")
        check(r["rank_from"] == rank_from and r["measured_on"] == "cpu" and r["collectives_from"] == "mpi"
              and r["collectives"] == e["matched"], f"{what}: rank {rank}: {r}")
    check(got.get(2, {}).get("overlap_pct") == 10 / 69 * 100, f"{what}: rank 2's overlap% {got.get(2)}")
    check(got.get(0, {}).get("late_mean_ns") == 4500 and got.get(3, {}).get("late_mean_ns") == 10667,
          f"{what}: mean lateness")
    st = d["straggler"]
    check(st == {"rank": 3, "last": 2, "of": 3, "last_by_total_ns": 32 * US, "last_by_mean_ns": 16 * US},
          f"{what}: straggler {st}")
    c = d["collectives"]
    check(c["matched"] == 3 and c["incomplete"] == 0 and c["on_one_rank_only"] == 0, f"{what}: collectives {c}")
    by = [(x["key"], x["name"], x["seq"], x["ranks"], x["last_rank"], x["skew_ns"]) for x in c["by_skew"]]
    check(by == [("mpi comm 7", "MPI_Allreduce", 1, 4, 3, 30 * US), ("mpi comm 7", "MPI_Barrier", 2, 4, 1, 29 * US),
                 ("mpi comm 9", "MPI_Allreduce", 1, 2, 3, 2 * US)], f"{what}: by skew {by}")
    barrier = c["by_skew"][1]
    arr = {a["rank"]: (a["late_ns"], a["wait_ns"]) for a in barrier["arrivals"]}
    check(arr == {0: (9 * US, 20 * US), 1: (29 * US, 0), 2: (4 * US, 25 * US), 3: (0, 29 * US)},
          f"{what}: the barrier's arrivals {arr}")
    check(barrier["earliest_arrival_ns"] == (T0 + 101) * US and barrier["complete"], f"{what}: barrier {barrier}")
    ops = {o["name"]: (o["instances"], o["skew_total_ns"], {q["rank"]: (q["last"], q["wait_ns"]) for q in o["ranks"]})
           for o in d["by_operation"]}
    check(ops == {"MPI_Allreduce": (2, 32 * US, {0: (0, 30 * US), 1: (0, 20 * US), 2: (0, 12 * US), 3: (2, 0)}),
                  "MPI_Barrier": (1, 29 * US, {0: (0, 20 * US), 1: (1, 0), 2: (0, 25 * US), 3: (0, 29 * US)})},
          f"{what}: per operation {ops}")
    im = d["imbalance"]["compute"]
    check(im["max_ns"] == 90 * US and im["max_rank"] == 1 and im["min_ns"] == 60 * US and im["min_rank"] == 0
          and im["mean_ns"] == 79.5 * US and abs(im["max_over_mean"] - 90 / 79.5) < 1e-12
          and im["spread_ns"] == 30 * US, f"{what}: compute imbalance {im}")
    im = d["imbalance"]["communication"]
    check(im["max_ns"] == 90 * US and im["max_rank"] == 0 and im["min_ns"] == 60 * US and im["min_rank"] == 1
          and im["mean_ns"] == 70 * US, f"{what}: communication imbalance {im}")


def test_mpi_ranks():
    d = fresh_dir("mpi")
    # file names in the reverse of rank order: the rank comes from distributedInfo
    paths = [write(os.path.join(d, f"job.{chr(ord('z') - r)}.json"), mpi_rank(r)) for r in range(4)]
    p = mlprof("ranks", *paths, "--format", "json")
    check_mpi_report(as_json(p, "ranks FILES"), "ranks FILES")
    check(d not in p.stderr or "warning" not in p.stderr, f"no warning on a shared clock: {p.stderr!r}")
    check_mpi_report(as_json(mlprof("ranks", d, "--format", "json"), "ranks DIR"), "ranks DIR")
    merged = os.path.join(OUT, "mpi_merged.json")
    mlprof("merge", *paths, "-o", merged)
    check_mpi_report(as_json(mlprof("ranks", merged, "--format", "json"), "ranks MERGED"), "ranks MERGED",
                     "otherData.merge")
    # the merged timeline beside the ranks' files (as mlprof run leaves it): skipped, said
    beside = fresh_dir("mpi_beside")
    for q in paths + [merged]:
        shutil.copy(q, beside)
    p = mlprof("ranks", beside, "--format", "json")
    check_mpi_report(as_json(p, "ranks DIR with the merged trace"), "ranks DIR with the merged trace")
    check("mpi_merged.json: skipped: a merged trace of several ranks" in p.stderr, f"merged beside: {p.stderr!r}")
    p = mlprof("ranks", paths[0], merged, expect=1)
    check("mpi_merged.json: a merged trace of several ranks" in p.stderr, f"merged among files: {p.stderr!r}")
    # labels of the user's: the ranks come from otherData.merge.inputs alone
    named = os.path.join(OUT, "mpi_merged_named.json")
    mlprof("merge", *paths, "--names", "w,x,y,z", "-o", named)
    check_mpi_report(as_json(mlprof("ranks", named, "--format", "json"), "ranks MERGED --names"),
                     "ranks MERGED --names", "otherData.merge")
    # without otherData.merge (another tool's merge): the processes' names "rank N: ..."
    with open(merged) as f:
        m = json.load(f)
    del m["otherData"]["merge"]
    bare = write(os.path.join(OUT, "mpi_merged_bare.json"), m)
    check_mpi_report(as_json(mlprof("ranks", bare, "--format", "json"), "ranks MERGED bare"), "ranks MERGED bare",
                     "process name")
    t = mlprof("ranks", *paths, "-t", "2").stdout
    check("straggler of the run: rank 3, last to arrive at 2 of 3 collectives (66.7%), by 16.000 us on average"
          in t and "(2 of 3)" in t and "MPI_Barrier (mpi comm 7)" in t and "clock: shared clock" in t,
          f"table {t!r}")
    rows = list(csv.DictReader(io.StringIO(mlprof("ranks", d, "--format", "csv").stdout)))
    check([(int(r["rank"]), int(r["compute_ns"]), int(r["idle_ns"])) for r in rows]
          == [(k, e["compute"] * US, e["idle"] * US) for k, e in MPI_EXPECT.items()], f"csv {rows}")
    # a rank missing (killed): named; the world's collectives matched among the others
    p = mlprof("ranks", paths[0], paths[1], paths[3], "--format", "json")
    k = as_json(p, "rank 2 missing")
    if k:
        c = k["collectives"]
        check(k["missing_ranks"] == [2] and k["world_size"] == 4 and c["matched"] == 2 and c["incomplete"] == 2
              and c["on_one_rank_only"] == 1 and [x["complete"] for x in c["by_skew"]] == [False, False],
              f"rank 2 missing: {k['missing_ranks']} {c}")
    check("1 of the job's 4 ranks (its world size) are not among the inputs: 2" in p.stderr
          and "2 collectives were not recorded by every rank of their group" in p.stderr,
          f"rank 2 missing: notes {p.stderr!r}")
    t = mlprof("ranks", paths[0], paths[1], paths[3]).stdout
    check("missing: 1 of the 4 ranks of the job: 2\n" in t, f"rank 2 missing: table {t[:300]!r}")
    rows = list(csv.DictReader(io.StringIO(mlprof("ranks", d, "--format", "csv", "--csv-table", "collectives").stdout)))
    barrier = sorted((int(r["rank"]), int(r["late_ns"]), int(r["wait_ns"]), r["last_rank"]) for r in rows
                     if r["name"] == "MPI_Barrier")
    check(len(rows) == 10 and barrier == [(0, 9 * US, 20 * US, "1"), (1, 29 * US, 0, "1"), (2, 4 * US, 25 * US, "1"),
                                          (3, 0, 29 * US, "1")], f"csv collectives {rows}")
    mlprof("ranks", d, "--csv-table", "kernels", expect=2)
    h = mlprof("ranks", "--help").stdout
    check("compute + communication - overlap + idle = wall" in h and "HTA" in h and "straggler" in h,
          f"help {h[:200]!r}")


def test_mpi_only():
    """Ranks that recorded nothing but their MPI calls: compute is what the
    calls leave, said on standard error."""
    d = fresh_dir("mpi_only")
    for r in range(2):
        ev = [mpi_coll("MPI_Barrier", 10 + 5 * r, 30, 7, 1, 2, 1000 + r),
              mpi_coll("MPI_Barrier", 50, 60, 7, 2, 2, 1000 + r)]
        ev.insert(0, span("MPI_Init", "mpi", 2 * r, 5, pid=1000 + r))  # rank 1's first event 2 us late
        write(os.path.join(d, f"r{r}.json"), {"traceEvents": ev, "distributedInfo": {"rank": r, "world_size": 2},
                                              "otherData": {"host": "h", "clock_domain": "CLOCK_MONOTONIC"}})
    p = mlprof("ranks", d, "--format", "json")
    k = as_json(p, "mpi only")
    if k:
        got = [(r["compute_ns"], r["communication_ns"], r["idle_ns"], r["compute_from"]) for r in k["ranks"]]
        # compute: what communication leaves of the job's window (0 to 60 us), rank 1's first 2 us included
        check(got == [(25 * US, 35 * US, 0, "outside communication"), (32 * US, 28 * US, 0, "outside communication")],
              f"mpi only: {got}")
        check(k["straggler"]["rank"] == 1 and k["collectives"]["by_skew"][0]["skew_ns"] == 5 * US,
              f"mpi only: straggler {k['straggler']}")
    check("recorded only communication" in p.stderr, f"mpi only: the note {p.stderr!r}")


def test_clock_sync():
    """Two hosts' ranks with the offsets and drift they measured (contract:
    reference(t) = t + offset_ns + drift_ppb * (t - at_ns) / 1e9): arrivals
    compared on rank 0's clock, as merge puts them, to the nanosecond."""
    d = fresh_dir("clock_sync")
    at_ns = T0 * US
    # rank 1's clock is 1 ms behind and gains 1000 ppm: its local T0 + 100 us is rank 0's T0 + 1100.1 us
    syncs = [{"offset_ns": 0, "drift_ppb": 0, "bound_ns": 200},
             {"offset_ns": 1000000, "drift_ppb": 1000000, "bound_ns": 500}]
    starts = [1100, 100]
    paths = []
    for r in range(2):
        cs = dict(method="mpi_pingpong", reference_rank=0,
                  samples=[{"at_ns": at_ns, "offset_ns": syncs[r]["offset_ns"], "bound_ns": syncs[r]["bound_ns"],
                            "rtt_ns": 1000, "exchanges": 24}], **syncs[r])
        ev = [span("work", "app", starts[r] - 100, starts[r], pid=1000 + r),
              mpi_coll("MPI_Barrier", starts[r], starts[r] + 50, 1, 0, 2, 1000 + r)]
        paths.append(write(os.path.join(d, f"r{r}.json"), {
            "traceEvents": ev, "distributedInfo": {"rank": r, "world_size": 2},
            "otherData": {"host": f"host{r}", "clock_domain": "CLOCK_MONOTONIC", "clock_sync": cs}}))
    k = as_json(mlprof("ranks", *paths, "--format", "json"), "clock sync")
    if k:
        x = k["collectives"]["by_skew"]
        check(k["clock"] == "clock sync, within 500 ns" and x and x[0]["last_rank"] == 1 and x[0]["skew_ns"] == 100
              and x[0]["earliest_arrival_ns"] == (T0 + 1100) * US, f"clock sync: {k['clock']} {x}")
    merged = os.path.join(OUT, "clock_sync_merged.json")
    mlprof("merge", *paths, "-o", merged)
    m = as_json(mlprof("ranks", merged, "--format", "json"), "clock sync merged")
    if m:
        x = m["collectives"]["by_skew"]
        check(x and x[0]["last_rank"] == 1 and x[0]["skew_ns"] == 100, f"clock sync merged: {x}")


BASE_US = 1700000000000000  # epoch us, as Kineto stamps


def kineto_rank(r, kernels, ops=()):
    def x(name, cat, start, end, tid, pid, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE_US + start,
                "dur": end - start, "args": args}

    ev = [x("PyTorch Profiler (0)", "Trace", 0, 200, 1, 100)]
    for name, cat, start, end in ops:
        ev.append(x(name, cat, start, end, 1, 100))
    for k, (name, start, end) in enumerate(kernels):
        ev.append(x(name, "kernel", start, end, 7 if "nccl" not in name else 20, 0, device=0,
                    stream=7 if "nccl" not in name else 20, correlation=100 + k))
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2},
            "traceEvents": ev}


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def test_kineto_gpu():
    d = fresh_dir("kineto")
    cpu = [("aten::mm", "cpu_op", 0, 10), ("record_param_comms", "cpu_op", 11, 14),
           ("nccl:all_reduce", "user_annotation", 12, 13)]
    write(os.path.join(d, "a.pt.trace.json"),
          kineto_rank(0, [("gemm", 10, 40), (NCCL, 30, 60), ("gemm", 70, 80), (NCCL, 80, 90)], cpu))
    write(os.path.join(d, "b.pt.trace.json"),
          kineto_rank(1, [("gemm", 10, 50), (NCCL, 50, 60), ("gemm", 60, 85), (NCCL, 85, 90)], cpu))
    k = as_json(mlprof("ranks", d, "--format", "json"), "kineto")
    if not k:
        return
    got = [(r["measured_on"], r["wall_ns"], r["compute_ns"], r["communication_ns"], r["overlap_ns"], r["idle_ns"],
            r["last"], r["wait_ns"], r["collectives_from"]) for r in k["ranks"]]
    want = [("gpu", 90 * US, 40 * US, 40 * US, 10 * US, 20 * US, 0, 25 * US, "communication kernels"),
            ("gpu", 90 * US, 65 * US, 15 * US, 0, 10 * US, 2, 0, "communication kernels")]
    check(got == want, f"kineto: {got}, wanted {want}")
    check(k["ranks"][0]["overlap_pct"] == 25 and k["ranks"][1]["overlap_pct"] == 0, f"kineto overlap% {k['ranks']}")
    check(k["straggler"] == {"rank": 1, "last": 2, "of": 2, "last_by_total_ns": 25 * US,
                             "last_by_mean_ns": 12500}, f"kineto straggler {k['straggler']}")
    by = [(x["seq"], x["last_rank"], x["skew_ns"]) for x in k["collectives"]["by_skew"]]
    check(by == [(1, 1, 20 * US), (2, 1, 5 * US)] and k["clock"] == "system clock", f"kineto by skew {by} {k['clock']}")
    # the same stragglers as kernels DIR finds
    kd = as_json(mlprof("kernels", d, "--format", "json"), "kernels DIR")
    if kd:
        late = [(r["rank"], r["last"], r["late_total_ns"]) for r in kd["stragglers"]["ranks"]]
        mine = [(r["rank"], r["last"], r["late_total_ns"]) for r in k["ranks"]]
        check(late == mine, f"kernels DIR {late} and ranks {mine} disagree")


def test_gloo_cpu():
    d = fresh_dir("gloo")
    ops0 = [("ProfilerStep#1", "user_annotation", 0, 30), ("aten::add", "cpu_op", 0, 20),
            ("gloo:all_reduce", "user_annotation", 20, 30)]
    # rank 1 starts 5 us late: the job's window still starts at rank 0's first event, and the 5 us are idle
    ops1 = [("aten::add", "cpu_op", 5, 24), ("record_param_comms", "cpu_op", 24, 30),
            ("gloo:all_reduce", "user_annotation", 25, 30)]
    p0 = write(os.path.join(d, "r0.json"), kineto_rank(0, [], ops0))
    p1 = write(os.path.join(d, "r1.json"), kineto_rank(1, [], ops1))
    k = as_json(mlprof("ranks", p0, p1, "--format", "json"), "gloo")
    if not k:
        return
    got = [(r["measured_on"], r["wall_ns"], r["compute_ns"], r["communication_ns"], r["idle_ns"], r["last"],
            r["collectives_from"]) for r in k["ranks"]]
    check(got == [("cpu", 30 * US, 20 * US, 10 * US, 0, 0, "nccl/gloo operators"),
                  ("cpu", 30 * US, 19 * US, 6 * US, 5 * US, 1, "nccl/gloo operators")], f"gloo: {got}")
    check(k["window"] == {"start_ns": BASE_US * US, "end_ns": (BASE_US + 30) * US, "wall_ns": 30 * US}
          and k["ranks"][1]["first_ns"] == (BASE_US + 5) * US, f"gloo: window {k['window']} {k['ranks'][1]}")
    check([(x["name"], x["skew_ns"]) for x in k["collectives"]["by_skew"]] == [("gloo:all_reduce", 5 * US)],
          f"gloo collectives {k['collectives']}")


def test_bad_input():
    d = fresh_dir("bad")
    a = write(os.path.join(d, "a.json"), mpi_rank(0))
    b = write(os.path.join(d, "b.json"), mpi_rank(1))
    same = write(os.path.join(d, "same.json"), mpi_rank(1))
    text = write(os.path.join(d, "notes.json"), "this is not a trace\n")
    other = write(os.path.join(d, "config.json"), {"learning_rate": 0.1})
    p = mlprof("ranks", a, b, same, expect=1)
    check("two traces say they are rank 1" in p.stderr and "same.json" in p.stderr and not p.stdout,
          f"same rank twice: {p.stderr!r}")
    p = mlprof("ranks", a, text, expect=1)
    check("notes.json" in p.stderr and not p.stdout, f"not a trace: {p.stderr!r}")
    p = mlprof("ranks", a, other, expect=1)
    check("config.json" in p.stderr and "not a trace" in p.stderr, f"JSON that is no trace: {p.stderr!r}")
    p = mlprof("ranks", os.path.join(d, "missing.json"), expect=1)
    check("missing.json" in p.stderr, f"missing file: {p.stderr!r}")
    p = mlprof("ranks", fresh_dir("empty"), expect=1)
    check("no trace in the directory" in p.stderr, f"empty directory: {p.stderr!r}")
    mlprof("ranks", expect=2)
    mlprof("ranks", a, "--bogus", expect=2)
    mlprof("ranks", a, "--format", "xml", expect=2)


def test_real_kineto():
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "kineto")
    names = ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]
    if not all(os.path.exists(os.path.join(src, n)) for n in names):
        print(f"analyze_dist_check: skipping the real Kineto traces: {src} has none")
        return
    d = fresh_dir("real")
    for n in names:
        shutil.copy(os.path.join(src, n), d)
    k = as_json(mlprof("ranks", d, "--format", "json", "-t", "0"), "real")
    if not k:
        return
    check([r["rank"] for r in k["ranks"]] == [0, 1] and k["clock"] == "system clock", f"real: ranks {k['ranks']}")
    for r in k["ranks"]:
        check(r["wall_ns"] == r["compute_ns"] + r["communication_ns"] - r["overlap_ns"] + r["idle_ns"]
              and min(r["compute_ns"], r["communication_ns"], r["idle_ns"]) > 0
              and 0 <= r["overlap_ns"] <= min(r["compute_ns"], r["communication_ns"])
              and r["measured_on"] == "gpu" and r["collectives_from"] == "communication kernels",
              f"real: rank {r}")
    c = k["collectives"]
    check(c["matched"] == 10 and len(c["by_skew"]) == 10 and all(x["ranks"] == 2 for x in c["by_skew"])
          and sum(r["last"] for r in k["ranks"]) <= 10, f"real: collectives {c['matched']}")
    for x in c["by_skew"]:
        lates = sorted(a["late_ns"] for a in x["arrivals"])
        check(lates[0] == 0 and lates[-1] == x["skew_ns"], f"real: an instance's lateness {x}")
    # the merged trace of the two says the same
    merged = os.path.join(OUT, "real_merged.json")
    mlprof("merge", *[os.path.join(d, n) for n in names], "-o", merged)
    m = as_json(mlprof("ranks", merged, "--format", "json", "-t", "0"), "real merged")
    if m:
        strip = lambda rs: [{k: v for k, v in r.items() if k not in ("path", "rank_from")} for r in rs]
        check(strip(m["ranks"]) == strip(k["ranks"]) and m["collectives"] == c and m["straggler"] == k["straggler"],
              "real: the merged trace and the directory disagree")


MPI_APP = r"""
#include <mpi.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double x = rank, y = 0;
    for (int i = 0; i < 3; i++) {
        if (rank == 3)
            usleep(300000); /* the straggler: the others wait for it at every Allreduce */
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""

def test_mpirun():
    """Four ranks of a real MPI program under mlprof run: rank 3 arrives last
    at every Allreduce, by at least most of the time it sleeps before each."""
    mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
    if not mpicc or not mpirun:
        print("analyze_dist_check: skipping the mpirun run: no mpicc or mpirun (openmpi-bin, libopenmpi-dev)")
        return
    if os.environ.get("RUN_CHECK_SANITIZED") == "1":
        print("analyze_dist_check: skipping the mpirun run: a sanitized preload library in mpirun's ranks")
        return
    probe = subprocess.run([MLPROF, "run", "-q", "--hooks", "mpi", "-o", os.path.join(OUT, "probe.json"), "--",
                            "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[0]
        print(f"analyze_dist_check: skipping the mpirun run: this mlprof has no mpi hook ({why})")
        return
    d = fresh_dir("mpirun")
    traces = fresh_dir("mpirun_job")
    app = os.path.join(d, "app")
    write(app + ".c", MPI_APP)
    b = subprocess.run([mpicc, "-O1", "-o", app, app + ".c"], capture_output=True, text=True)
    if b.returncode != 0:
        print(f"analyze_dist_check: skipping the mpirun run: mpicc failed: {b.stderr[:300]}")
        return
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    job = os.path.join(traces, "job.json")
    p = subprocess.run([mpirun, "--oversubscribe", "-n", "4", os.path.abspath(MLPROF), "run", "-q", "-o", job, "--",
                        app], env=env, cwd=d, capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"mpirun: exit {p.returncode}: {p.stdout[-500:]} {p.stderr[-500:]}")
    # the job's merged timeline, and its ranks' own files: the same answer
    for what in (job, job + ".parts"):
        check_mpirun(as_json(mlprof("ranks", what, "--format", "json", "-t", "0"), f"mpirun: {what}"), what)


def check_mpirun(k, what):
    if not k:
        return
    check([r["rank"] for r in k["ranks"]] == [0, 1, 2, 3] and k["clock"] != "trace starts",
          f"{what}: ranks {[r['rank'] for r in k['ranks']]}, clock {k['clock']}")
    for r in k["ranks"]:
        check(r["wall_ns"] == r["compute_ns"] + r["communication_ns"] - r["overlap_ns"] + r["idle_ns"]
              and r["collectives_from"] == "mpi" and r["rank_from"] != "file order", f"{what}: rank {r}")
    ops = {o["name"]: o for o in k["by_operation"]}
    allreduce = ops.get("MPI_Allreduce", {"instances": 0, "ranks": []})
    last = {q["rank"]: q["last"] for q in allreduce["ranks"]}
    check(allreduce["instances"] == 3 and last.get(3) == 3, f"{what}: the Allreduces {allreduce}")
    skews = [x["skew_ns"] for x in k["collectives"]["by_skew"] if x["name"] == "MPI_Allreduce"]
    check(len(skews) == 3 and min(skews) >= 100000000 and k["straggler"]["rank"] == 3,
          f"{what}: skews {skews}, straggler {k['straggler']}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tests = [test_mpi_ranks, test_mpi_only, test_clock_sync, test_kineto_gpu, test_gloo_cpu, test_bad_input, test_real_kineto,
             test_mpirun]
    for test in tests:
        test()
    if failures:
        print(f"analyze_dist_check: {len(failures)} of the checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"analyze_dist_check: {len(tests)} tests passed")
