#!/usr/bin/env python3
"""`mlprof analyze DIR` and `mlprof kernels DIR` on a directory of a job's
traces, one per rank, shaped as PyTorch's profiler (Kineto) writes them: one
section per rank in rank order (the rank from distributedInfo, else the file
order, said), each rank analysed alone (the ranks' ids are the same numbers
and must not mix), gzip files read, other files skipped and named, an empty
directory refused with its name; and the stragglers across ranks: which rank
starts each collective last and by how much, to the nanosecond, on the clock
the ranks share. The traces are written here.

usage: analyze_ranks_check.py MLPROF OUTDIR
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

from analyze_util import check, command, failures

MLPROF, OUT = sys.argv[1:3]
BASE_US = 1700000000000000  # epoch microseconds, as Kineto stamps


mlprof = command(MLPROF)


def as_json(p, what):
    empty = {"ranks": [], "skipped": [], "stragglers": {"clock": None, "collectives": None, "names_matched": None,
                                                         "ranks": [], "by_skew": [], "unmatched": []}}
    try:
        d = json.loads(p.stdout)
    except ValueError:
        check(False, f"{what}: not JSON: {p.stdout[:300]!r}")
        return empty
    if not isinstance(d, dict) or "ranks" not in d:
        check(False, f"{what}: no list of ranks in {p.stdout[:300]!r}")
        return empty
    return d


def fresh_dir(name):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(d, name, obj, gz=False):
    path = os.path.join(d, name)
    text = obj if isinstance(obj, str) else json.dumps(obj)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
    return path


def rank_trace(rank, colls=(), base_ns=None, rank_meta=True, op_us=0):
    """One rank: an operator launches a kernel by correlation id 100 (the same
    id on every rank, as in real jobs; the operator's name says its rank, and
    op_us moves its length so that each rank's table differs), and NCCL
    kernels (name, start in us from the rank's start) on stream 20. With
    base_ns, times are written less it, as Kineto writes them then."""
    t0 = BASE_US - (base_ns // 1000 if base_ns else 0)
    cpu, gpu = 100, 0

    def x(name, cat, ts, dur, tid, pid=cpu, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": t0 + ts, "dur": dur,
                "args": args}

    evs = [
        x(f"rank{rank}_op", "cpu_op", 10, 50 + op_us, 1, **{"External id": 1}),
        x("cudaLaunchKernel", "cuda_runtime", 20, 5, 1, correlation=100, **{"External id": 1}),
        x("gemm", "kernel", 40, 30, 7, pid=gpu, correlation=100, device=0, stream=7, **{"External id": 1}),
    ]
    for k, (name, start) in enumerate(colls):
        evs.append(x(name, "kernel", start, 5, 20, pid=gpu, correlation=1000 + k, device=0, stream=20))
    t = {"schemaVersion": 1, "traceEvents": evs}
    if rank_meta:
        t["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 3}
    if base_ns:
        t["baseTimeNanoseconds"] = base_ns
    return t


AR = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
BC = "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
# the starts (us, on the shared clock) of each rank's collectives: AllReduce
# #1 rank 2 last by 50 us, #2 rank 1 by 20, #3 all at once (no one last);
# AllGather #1 rank 2 by 30, #2 rank 2 by 40. Rank 0 also runs a Broadcast
# that no other rank runs.
STARTS = {
    0: [(AR, 100), (AR, 300), (AR, 500), (AG, 700), (AG, 900), (BC, 1000)],
    1: [(AR, 100), (AR, 320), (AR, 500), (AG, 705), (AG, 900)],
    2: [(AR, 150), (AR, 310), (AR, 500), (AG, 730), (AG, 940)],
}


def straggler_dir():
    """Three ranks, their files named against rank order; rank 2 gzip and on a
    base 1 ms later (its times written 1 ms smaller for the same moment); a
    README and a directory that are not traces."""
    d = fresh_dir("three")
    write(d, "a_worker.pt.trace.json.gz", rank_trace(2, STARTS[2], base_ns=1_000_000), gz=True)
    # ranks 0 and 1 on base 0 (no baseTimeNanoseconds): the epoch itself
    write(d, "b_worker.pt.trace.json", rank_trace(1, STARTS[1], op_us=1))
    write(d, "c_worker.pt.trace.json", rank_trace(0, STARTS[0], op_us=0))
    write(d, "README.txt", "not a trace\n")
    os.makedirs(os.path.join(d, "plots"))
    return d


def test_three_ranks_and_stragglers():
    d = straggler_dir()
    # rank 2's times are since its base; the others' since the epoch: the same
    # moment once the base is added (merge's system-clock alignment)
    p = mlprof("kernels", d, "--format", "json", "-t", "0")
    k = as_json(p, "kernels DIR")
    check([r["rank"] for r in k["ranks"]] == [0, 1, 2], f"ranks in rank order: {[r['rank'] for r in k['ranks']]}")
    check([os.path.basename(r["path"]) for r in k["ranks"]]
          == ["c_worker.pt.trace.json", "b_worker.pt.trace.json", "a_worker.pt.trace.json.gz"],
          f"each rank's file: {[r['path'] for r in k['ranks']]}")
    check(all(r["rank_from"] == "distributedInfo" for r in k["ranks"]), f"rank_from {k['ranks']}")
    check(k.get("each_rank_alone") is True, "each_rank_alone")
    # each rank alone: the kernel with correlation 100 goes to that rank's own operator
    for r in k["ranks"]:
        ops = {o["name"]: o["kernels"] for o in r["analysis"]["operators"]}
        check(ops.get(f"rank{r['rank']}_op") == 1 and len([o for o in ops if o.endswith("_op")]) == 1,
              f"rank {r['rank']}'s operators {ops}")
    skipped = sorted(os.path.basename(s["path"]) for s in k["skipped"])
    check(skipped == ["README.txt", "plots"], f"skipped {k['skipped']}")
    check("README.txt: skipped: not named *.json or *.json.gz" in p.stderr, f"skip note: {p.stderr!r}")
    st = k["stragglers"]
    check(st["clock"] == "system clock", f"clock {st['clock']}")
    check(st["collectives"] == 5 and st["names_matched"] == 2, f"collectives {st['collectives']}, "
          f"names {st['names_matched']}")
    want = [{"rank": 0, "collectives": 5, "last": 0, "late_total_ns": 0, "late_mean_ns": 0},
            {"rank": 1, "collectives": 5, "last": 1, "late_total_ns": 25000, "late_mean_ns": 5000},
            {"rank": 2, "collectives": 5, "last": 3, "late_total_ns": 130000, "late_mean_ns": 26000}]
    check(st["ranks"] == want, f"per rank {st['ranks']}, wanted {want}")
    got = [(c["name"][:20], c["occurrence"], c["last_rank"], c["skew_ns"]) for c in st["by_skew"]]
    wanted = [(AR[:20], 1, 2, 50000), (AG[:20], 2, 2, 40000), (AG[:20], 1, 2, 30000), (AR[:20], 2, 1, 20000),
              (AR[:20], 3, None, 0)]
    check(got == wanted, f"collectives by skew {got}, wanted {wanted}")
    first = st["by_skew"][0]["earliest_start_ns"] if st["by_skew"] else 0
    check(first == (BASE_US + 100) * 1000, f"earliest start of AllReduce #1 {first}")
    check(st["unmatched"] == [{"name": BC, "matched": 0, "counts": [{"rank": 0, "count": 1},
                                                                    {"rank": 1, "count": 0},
                                                                    {"rank": 2, "count": 0}]}],
          f"unmatched {st['unmatched']}")
    # the table says the same
    t = mlprof("kernels", d, "-t", "3").stdout
    check(t.startswith(f"directory {d}: 3 ranks, each analysed alone (2 entries skipped: not traces)"),
          f"table head {t[:200]!r}")
    i0, i1, i2 = (t.find(f"== rank {r}: ") for r in range(3))
    check(0 < i0 < i1 < i2, f"rank sections in order: {i0} {i1} {i2}")
    check("== stragglers: 5 collectives matched across 3 ranks (clock: system clock) ==" in t, "stragglers head")
    rows = [line.split() for line in t.splitlines()]
    check(["2", "5", "3", "130.000", "us", "26.000", "us"] in rows, f"rank 2's straggler row in {t[-1500:]}")
    check(["1", "5", "1", "25.000", "us", "5.000", "us"] in rows, "rank 1's straggler row")
    check("collectives that started furthest apart (3 of 5):" in t, "top 3 of 5")
    check(any(r[:4] == ["50.000", "us", "2", "1"] for r in rows), "AllReduce #1: rank 2 by 50 us")
    check(f"  {BC}: matched 0; per rank 0: 1, 1: 0, 2: 0" in t, "the Broadcast that only rank 0 runs")


def test_analyze_dir_and_csv():
    d = straggler_dir()
    a = as_json(mlprof("analyze", d, "--format", "json", "-t", "0"), "analyze DIR")
    check("stragglers" not in a, "analyze DIR has no stragglers (kernels has)")
    for r in a["ranks"]:
        rows = {row["name"]: row for row in r["analysis"]["rows"]}
        want = 50 + (1 if r["rank"] == 1 else 0)
        op = rows.get(f"rank{r['rank']}_op", {})
        check(op.get("count") == 1 and op.get("total_ns") == want * 1000, f"rank {r['rank']}'s operator {op}")
        check(not [n for n in rows if n.startswith("rank") and n != f"rank{r['rank']}_op"],
              f"rank {r['rank']} holds another rank's operator: {sorted(rows)}")
    c = mlprof("analyze", d, "--format", "csv", "-t", "0").stdout.splitlines()
    check(c and c[0].startswith("rank,name,"), f"CSV header {c[:1]}")
    ops = [(line.split(",")[0], line.split(",")[1]) for line in c[1:] if "_op," in line]
    check(ops == [("0", "rank0_op"), ("1", "rank1_op"), ("2", "rank2_op")], f"CSV rank column {ops}")
    k = mlprof("kernels", d, "--format", "csv")
    check("the stragglers across ranks are in --format table and json" in k.stderr, f"CSV note {k.stderr!r}")
    ps = as_json(mlprof("analyze", d, "--format", "json", "--per-step"), "analyze DIR --per-step")
    check(len(ps["ranks"]) == 3 and all("per_step" in r["analysis"] for r in ps["ranks"]),
          "--per-step runs in each rank")


def test_two_ranks_mlprof_and_order():
    """Traces that say no rank: numbered in file-name order when none does;
    beside traces that say theirs, left out (the launcher's trace among its
    ranks'), said; two traces of one rank are an error naming both."""
    d = fresh_dir("two")
    write(d, "z.json", rank_trace(0, [(AR, 100)], rank_meta=False))
    own = rank_trace(7, [(AR, 130)], rank_meta=False)
    del own["schemaVersion"]
    own["otherData"] = {"mlprof_version": "0", "host": "h", "clock_domain": "CLOCK_REALTIME"}
    write(d, "a.json", own)
    p = mlprof("kernels", d, "--format", "json")
    k = as_json(p, "kernels two")
    check([(r["rank"], r["rank_from"], os.path.basename(r["path"])) for r in k["ranks"]]
          == [(0, "file order", "a.json"), (1, "file order", "z.json")], f"ranks {k['ranks']}")
    check("2 of 2 traces say no rank" in p.stderr and "numbered from 0 in file-name order" in p.stderr,
          f"note on the rank: {p.stderr!r}")
    check([r["late_total_ns"] for r in k["stragglers"]["ranks"]] == [30000, 0],
          f"mlprof's trace on the real-time clock: {k['stragglers']}")
    # one of them says its rank: the other is no rank of the job
    write(d, "z.json", rank_trace(0, [(AR, 100)]))
    p = mlprof("kernels", d, "--format", "json")
    k = as_json(p, "kernels two, one ranked")
    check([(r["rank"], r["rank_from"], os.path.basename(r["path"])) for r in k["ranks"]]
          == [(0, "distributedInfo", "z.json")] and [os.path.basename(x["path"]) for x in k["left_out"]] == ["a.json"],
          f"ranks {k['ranks']} left out {k.get('left_out')}")
    check(f"left out: {os.path.join(d, 'a.json')} (no rank: the launcher?)" in p.stderr and "numbered" not in p.stderr,
          f"note on the trace left out: {p.stderr!r}")
    one = fresh_dir("one")
    write(one, "r.json", rank_trace(0, [(AR, 100)]))
    t = mlprof("kernels", one).stdout
    check("(one rank: no other to compare its collectives with)" in t, f"one rank's stragglers {t[-300:]!r}")
    write(d, "y.json.gz", rank_trace(0, []), gz=True)
    p = mlprof("analyze", d, expect=1)
    check("two traces say they are rank 0" in p.stderr and "y.json.gz" in p.stderr and "z.json" in p.stderr,
          f"duplicate rank: {p.stderr!r}")


def test_no_trace():
    d = fresh_dir("empty")
    for cmd in ("analyze", "kernels"):
        p = mlprof(cmd, d, expect=1)
        check(f"{d}: no trace in the directory" in p.stderr and "0 entries skipped" in p.stderr,
              f"{cmd} on an empty directory: {p.stderr!r}")
        check(p.stdout == "", f"{cmd} on an empty directory wrote {p.stdout!r}")
    write(d, "notes.md", "# not a trace\n")
    p = mlprof("analyze", d, expect=1)
    check("no trace in the directory" in p.stderr and "1 entry skipped" in p.stderr
          and "notes.md: skipped: not named *.json or *.json.gz" in p.stderr, f"only a note file: {p.stderr!r}")


def test_same_file_twice():
    d = fresh_dir("twice")
    path = write(d, "r.json", rank_trace(0, [(AR, 100)], rank_meta=False))
    link = os.path.join(d, "r_link.json")
    os.symlink(path, link)
    p = mlprof("ranks", path, link, expect=2)
    check("r_link.json is given twice" in p.stderr, f"ranks: one trace given twice: {p.stderr!r}")
    # a trace from a pipe is read once: standard input works as a file does
    with open(path) as f:
        q = subprocess.run([MLPROF, "ranks", "-"], stdin=f, capture_output=True, text=True, timeout=60)
    check(q.returncode == 0 and "1 ranks" in q.stdout, f"ranks -: {q.returncode} {q.stderr!r}")


def test_damaged_and_not_traces():
    """A file named like a trace that is none is skipped with the reader's
    reason and the exit status says so; a trace cut short is used, with a
    warning; a JSON file without events is no rank."""
    d = fresh_dir("damaged")
    write(d, "r0.json", rank_trace(0, [(AR, 100)]))
    write(d, "config.json", {"lr": 0.1})
    write(d, "garbage.json", "this is not json")
    write(d, "empty.json", {"traceEvents": []})
    cut = json.dumps(rank_trace(1, [(AR, 100)]))
    write(d, "r1.json", cut[:cut.rindex("{\"ph\"")])  # the last event (the collective) cut off
    p = mlprof("kernels", d, "--format", "json", expect=1)
    k = as_json(p, "kernels damaged")
    check([r["rank"] for r in k["ranks"]] == [0, 1], f"ranks {[r['rank'] for r in k['ranks']]}")
    why = {os.path.basename(s["path"]): s["why"] for s in k["skipped"]}
    check(why.get("config.json", "").startswith("not a trace: a JSON object without"), f"config.json: {why}")
    check(why.get("empty.json") == "not a trace: its array of events is empty", f"empty.json: {why}")
    check(why.get("garbage.json", "").startswith("not read as a trace: 1:1:"), f"garbage.json: {why}")
    check("warning:" in p.stderr and "r1.json" in p.stderr, f"the cut trace's warning {p.stderr!r}")
    st = k["stragglers"]
    check(st["collectives"] == 0 and st["unmatched"] and st["unmatched"][0]["counts"][1]["count"] == 0,
          f"the collective rank 1 lost is unmatched: {st}")


def test_diff_directories():
    """diff DIR_A DIR_B: each rank against the same rank (paired by rank, not
    by file name), a rank in one run only named, --fail-above over every rank."""
    a = straggler_dir()
    b = fresh_dir("three_b")
    write(b, "x.json", rank_trace(0, STARTS[0], op_us=0))
    write(b, "w.json.gz", rank_trace(1, STARTS[1], op_us=30), gz=True)  # rank 1's operator 30 us longer
    p = mlprof("diff", a, b, "--format", "json", "--fail-above", "10", expect=3)
    k = as_json(p, "diff DIR DIR")
    got = [(r["rank"], os.path.basename(r["a"] or "-"), os.path.basename(r["b"] or "-")) for r in k["ranks"]]
    check(got == [(0, "c_worker.pt.trace.json", "x.json"), (1, "b_worker.pt.trace.json", "w.json.gz"),
                  (2, "a_worker.pt.trace.json.gz", "-")], f"ranks paired {got}")
    rows = {r["rank"]: {w["key"]: w for w in (r["diff"] or {"rows": []})["rows"]} for r in k["ranks"]}
    op1 = rows.get(1, {}).get("rank1_op", {})
    check(op1.get("time_a_ns") == 46000 and op1.get("time_b_ns") == 75000 and op1.get("delta_ns") == 29000,
          f"rank 1's operator {op1}")
    check(all(w["delta_ns"] == 0 for w in rows.get(0, {}).values()) and rows.get(0), f"rank 0 unchanged {rows.get(0)}")
    check(k["ranks"] and k["ranks"][-1]["diff"] is None, "rank 2: no diff")
    check("rank 2 is only in" in p.stderr and "1 operators regressed by more than 10%" in p.stderr,
          f"diff notes {p.stderr!r}")
    t = mlprof("diff", a, b, "-t", "2").stdout
    check(f"== rank 1: {a}/b_worker.pt.trace.json -> {b}/w.json.gz ==" in t
          and f"== rank 2: only in A ({a}/a_worker.pt.trace.json.gz) ==" in t, f"diff table {t[:400]!r}")
    p = mlprof("diff", a, os.path.join(b, "x.json"), expect=2)
    check("give two traces or two directories" in p.stderr, f"a directory against a trace: {p.stderr!r}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tests = [test_three_ranks_and_stragglers, test_analyze_dir_and_csv, test_two_ranks_mlprof_and_order,
             test_no_trace, test_same_file_twice, test_damaged_and_not_traces, test_diff_directories]
    for test in tests:
        test()
    if failures:
        print(f"analyze_ranks_check: {len(failures)} of the checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"analyze_ranks_check: {len(tests)} tests passed")
