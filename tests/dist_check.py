#!/usr/bin/env python3
"""Rank identity (src/record/dist.c) and what reads it: test_dist run under
each launcher's variables (OpenMPI, PMIx, MPICH's PMI, Slurm, torchrun, the
rank key, the MPI hook's word), malformed values warned about by name; output
names with %r, %h, %p and the default .rankR; distributedInfo in JSON and
Perfetto traces, read back by mlprof merge and mlprof ranks; and merge
applying the clock sync that hand-written traces carry, checked to the
nanosecond.

usage: dist_check.py TEST_DIST MLPROF OUTDIR
"""
import decimal
import json
import os
import re
import socket
import subprocess
import sys

from analyze_util import check, command, failures

TEST, MLPROF, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
mlprof = command(MLPROF)
HOST = socket.gethostname()

# every variable that could say a rank, so that the test's own surroundings
# (a CI job under Slurm, say) do not leak in
LAUNCHER_VARS = re.compile(r"^(OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_|RANK$|WORLD_SIZE$|LOCAL_RANK$|"
                           r"LOCAL_WORLD_SIZE$|TORCHELASTIC_|MASTER_|MLPROF_)")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(env, *args):
    p = subprocess.run([TEST, *args], env=clean_env(**env), capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"test_dist {args} under {env}: exit {p.returncode}\n{p.stderr}")
    lines = p.stdout.splitlines()
    info = json.loads(lines[0]) if lines else {}
    return info, lines[1:], p.stderr


def expect(env, want, *args, warn=None, why=""):
    info, _, err = run(env, *args)
    if want is not None:
        want = dict(want, host=HOST) if want else {}
        check(info == want, f"{why or env}: distributedInfo {info}, wanted {want}")
    if warn:
        check(all(w in err for w in warn), f"{why or env}: stderr should say {warn}, got {err!r}")
    elif warn is None:
        check("warning" not in err.lower(), f"{why or env}: unexpected warning {err!r}")
    return info


def test_launchers():
    expect({}, {}, why="no launcher")
    expect({"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 4, "OMPI_COMM_WORLD_LOCAL_RANK": 0,
            "OMPI_COMM_WORLD_LOCAL_SIZE": 2, "OMPI_MCA_ess_base_jobid": 55},
           {"rank": 2, "world_size": 4, "local_rank": 0, "local_world_size": 2, "job_id": "55", "source": "ompi"})
    expect({"PMIX_RANK": 3, "PMIX_NAMESPACE": "ns1"}, {"rank": 3, "job_id": "ns1", "source": "pmix"})
    # PMIx says no world size: Slurm's, which agrees on the rank, does
    expect({"PMIX_RANK": 3, "PMIX_NAMESPACE": "ns1", "SLURM_PROCID": 3, "SLURM_NTASKS": 8, "SLURM_LOCALID": 1,
            "SLURM_JOB_ID": 77},
           {"rank": 3, "world_size": 8, "local_rank": 1, "job_id": "ns1", "source": "pmix"})
    expect({"PMI_RANK": 1, "PMI_SIZE": 2, "MPI_LOCALRANKID": 1, "MPI_LOCALNRANKS": 2},
           {"rank": 1, "world_size": 2, "local_rank": 1, "local_world_size": 2, "job_id": "", "source": "pmi"})
    expect({"SLURM_PROCID": 5, "SLURM_NTASKS": 6, "SLURM_LOCALID": 1, "SLURM_JOB_ID": 123, "SLURM_STEP_ID": 0},
           {"rank": 5, "world_size": 6, "local_rank": 1, "job_id": "123.0", "source": "slurm"})
    expect({"RANK": 1, "WORLD_SIZE": 2, "LOCAL_RANK": 1, "LOCAL_WORLD_SIZE": 2, "TORCHELASTIC_RUN_ID": "abc"},
           {"rank": 1, "world_size": 2, "local_rank": 1, "local_world_size": 2, "job_id": "abc",
            "source": "torchrun"})
    # torchrun's default run id is every job's: the rendezvous port tells two at once apart
    expect({"RANK": 0, "WORLD_SIZE": 2, "TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": 29500},
           {"rank": 0, "world_size": 2, "job_id": "none.29500", "source": "torchrun"})
    expect({"RANK": 0, "WORLD_SIZE": 2, "TORCHELASTIC_RUN_ID": "abc", "MASTER_PORT": 29500},
           {"rank": 0, "world_size": 2, "job_id": "abc", "source": "torchrun"}, why="--rdzv-id given")
    expect({"RANK": 1}, {}, why="RANK alone is no launcher")
    # the innermost launcher wins: torchrun's workers under srun, mpirun's ranks in an allocation
    expect({"RANK": 3, "WORLD_SIZE": 8, "SLURM_PROCID": 0, "SLURM_NTASKS": 2, "SLURM_JOB_ID": 9},
           {"rank": 3, "world_size": 8, "job_id": "9", "source": "torchrun"}, why="torchrun under srun")
    expect({"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 4, "SLURM_PROCID": 0, "SLURM_NTASKS": 1,
            "SLURM_JOB_ID": 9},
           {"rank": 2, "world_size": 4, "job_id": "9", "source": "ompi"}, why="mpirun in an allocation")


def test_key_and_mpi():
    ompi = {"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 8}
    expect(dict(ompi, MLPROF_RANK=7), {"rank": 7, "world_size": 8, "job_id": "", "source": "key"},
           why="the rank key overrides")
    expect({"MLPROF_RANK": 4}, {"rank": 4, "job_id": "", "source": "key"}, why="the rank key alone")
    expect(dict(ompi, MLPROF_RANK=9), {"rank": 9, "job_id": "", "source": "key"},
           why="a key rank past the launcher's world")
    expect(dict(ompi, MLPROF_RANK="abc"), {"rank": 2, "world_size": 8, "job_id": "", "source": "ompi"},
           warn=["MLPROF_RANK", "\"abc\"", "\"rank\""], why="a bad rank key")
    # the MPI hook's word: fills what no launcher said; wins over one that disagrees, said
    expect({}, {"rank": 1, "world_size": 4, "job_id": "", "source": "mpi"}, "--mpi", "1", "4", why="MPI only")
    expect(ompi, {"rank": 2, "world_size": 8, "job_id": "", "source": "ompi"}, "--mpi", "2", "8",
           why="MPI agrees")
    expect(ompi, {"rank": 1, "world_size": 4, "job_id": "", "source": "mpi"}, "--mpi", "1", "4",
           warn=["says rank 2", "MPI_Comm_rank says 1"], why="MPI disagrees")


def test_malformed():
    expect({"OMPI_COMM_WORLD_RANK": "x2", "OMPI_COMM_WORLD_SIZE": 4}, {},
           warn=["OMPI_COMM_WORLD_RANK", "x2"], why="a rank that is no number")
    expect({"OMPI_COMM_WORLD_RANK": 3, "OMPI_COMM_WORLD_SIZE": 2}, {"rank": 3, "job_id": "", "source": "ompi"},
           warn=["OMPI_COMM_WORLD_SIZE=2", "not below"], why="a rank past the world")
    expect({"SLURM_PROCID": -1, "PMI_RANK": 0, "PMI_SIZE": 2}, {"rank": 0, "world_size": 2, "job_id": "",
                                                                 "source": "pmi"},
           warn=["SLURM_PROCID"], why="a negative rank")
    expect({"SLURM_PROCID": 0, "SLURM_NTASKS": "0"}, {"rank": 0, "job_id": "", "source": "slurm"},
           warn=["SLURM_NTASKS"], why="an empty world")


def names(env, *names_in):
    _, lines, err = run(env, *names_in)
    check(len(lines) == len(names_in), f"names {names_in}: got {lines} ({err})")
    return lines


def test_names():
    four = {"OMPI_COMM_WORLD_RANK": 2, "OMPI_COMM_WORLD_SIZE": 4}
    got = names(four, "t.json", "dir.x/t", "t.json.gz", "t_%r.json", "a%%b.pftrace", "t.%h.json", "out/.hidden",
                "t.%r.%p.json")
    want = ["t.rank2.json", "dir.x/t.rank2", "t.rank2.json.gz", "t_2.json", "a%b.rank2.pftrace",
            f"t.{HOST.replace('/', '_')}.rank2.json", "out/.hidden.rank2"]
    check(got[:7] == want, f"names of rank 2 of 4: {got[:7]}, wanted {want}")
    check(len(got) == 8 and re.fullmatch(r"t\.2\.\d+\.json", got[7]) is not None, f"%r and %p: {got[7:]}")
    # one process in its world, no launcher: the names stay; %r says there is no rank
    for env in ({"OMPI_COMM_WORLD_RANK": 0, "OMPI_COMM_WORLD_SIZE": 1}, {}):
        got = names(env, "t.json", "t.%r.json")
        check(got == ["t.json", "t.norank.json" if not env else "t.0.json"], f"names under {env}: {got}")
    # a rank with no world size (the key alone) still keeps ranks apart
    check(names({"MLPROF_RANK": 7}, "t.json") == ["t.rank7.json"], "the rank key names files")
    # every rank of a job a name of its own
    seen = set()
    for r in range(4):
        seen.update(names({"OMPI_COMM_WORLD_RANK": r, "OMPI_COMM_WORLD_SIZE": 4}, "job.json"))
    check(seen == {f"job.rank{r}.json" for r in range(4)}, f"4 ranks' default names collide: {seen}")


def test_traces():
    """distributedInfo in both formats, read by the analyzer."""
    for f in os.listdir(OUT):
        if f.startswith("tr."):
            os.unlink(os.path.join(OUT, f))
    envs = {r: {"OMPI_COMM_WORLD_RANK": r, "OMPI_COMM_WORLD_SIZE": 4, "OMPI_MCA_ess_base_jobid": 5} for r in range(4)}
    run(envs[2], "--trace", os.path.join(OUT, "tr.json"))
    run(envs[3], "--trace", os.path.join(OUT, "tr.pftrace"))
    run(envs[0], "--trace", os.path.join(OUT, "tr.%r.json.gz"))
    path2, path3, path0 = (os.path.join(OUT, n) for n in ("tr.rank2.json", "tr.rank3.pftrace", "tr.0.json.gz"))
    for p in (path2, path3, path0):
        check(os.path.exists(p), f"{p} was not written: {sorted(os.listdir(OUT))}")
    if not all(os.path.exists(p) for p in (path2, path3, path0)):
        return
    t = json.load(open(path2))
    want = {"rank": 2, "world_size": 4, "host": HOST, "job_id": "5", "source": "ompi"}
    check(t.get("distributedInfo") == want, f"JSON distributedInfo {t.get('distributedInfo')}, wanted {want}")
    od = t["otherData"]
    check(od.get("distributed_rank") == 2 and od.get("distributed_world_size") == 4
          and od.get("distributed_job_id") == "5", f"JSON otherData's distributed_*: {od}")
    # the analyzer reads the rank from both formats: merge labels by it and keeps each one's
    m = os.path.join(OUT, "tr.merged.json")
    p = mlprof("merge", path3, path0, path2, "-o", m)
    merged = json.load(open(m))
    inputs = merged["otherData"]["merge"]["inputs"]
    check([i.get("label") for i in inputs] == ["rank 3", "rank 0", "rank 2"], f"merge labels: {inputs}")
    check([i.get("rank") for i in inputs] == [3, 0, 2], f"merge ranks: {inputs}")
    check(inputs[0].get("distributedInfo") == dict(want, rank=3), f"distributedInfo from the pftrace: {inputs[0]}")
    check(merged["otherData"]["merge"].get("missing_ranks") == [1] and "rank 1 of 4 missing" in p.stderr,
          f"rank 1 is missing from the merge: {merged['otherData']['merge']}, {p.stderr!r}")
    # ordered by rank: the process tracks' sort indexes
    order = {}
    for e in merged["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_sort_index":
            order[e["pid"]] = e["args"]["sort_index"]
    names_ = {e["pid"]: e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name"}
    ranked = [names_[pid].split(":")[0] for pid in sorted(order, key=order.get)]
    check(ranked == ["rank 0", "rank 2", "rank 3"], f"tracks by sort index: {ranked}")
    # mlprof ranks finds the ranks in mlprof's own traces, not by file name
    d = os.path.join(OUT, "ranks_dir")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    for r in (1, 0):  # file names in the other order than the ranks
        run(envs[r], "--trace", os.path.join(d, "%s.%%r.json" % "ab"[r == 0]))
    p = mlprof("analyze", d)
    check("say no rank" not in p.stderr, f"mlprof analyze DIR numbered mlprof's traces by name: {p.stderr!r}")
    sections = re.findall(r"== rank (\d+): (\S+) ==", p.stdout)
    check([(r, os.path.basename(f)) for r, f in sections] == [("0", "b.0.json"), ("1", "a.1.json")],
          f"mlprof analyze DIR's ranks: {sections}")


def sync_trace(name, rank, events, cs, host="h"):
    other = {"mlprof_version": "x", "host": host, "clock_domain": "CLOCK_MONOTONIC"}
    if cs is not None:
        off, drift, at, bound = cs
        other["clock_sync"] = {"method": "mpi_pingpong", "reference_rank": 0,
                               "samples": [{"at_ns": at, "offset_ns": off, "bound_ns": bound, "rtt_ns": 2 * bound,
                                            "exchanges": 10}],
                               "offset_ns": off, "drift_ppb": drift, "bound_ns": bound}
    evs = ['{"name":"%s","ph":"X","pid":%d,"tid":1,"ts":%s,"dur":%s}' % (n, 100 + rank, ts, dur)
           for n, ts, dur in events]
    text = ('{"traceEvents":[' + ",".join(evs) + '],"distributedInfo":{"rank":%d,"world_size":3},"otherData":%s}'
            % (rank, json.dumps(other)))
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_clock_sync():
    """reference(t) = t + offset + drift_ppb * (t - at) / 1e9, to the nearest ns, applied to each end."""
    a = sync_trace("cs0.json", 0, [("r0", "1000000.000", "10.000")], (0, 0, 1000000000, 1000))
    # -50 ms and +100 ppm from 1 s: at 2 s the shift is -49.9 ms, at 2.001 s -49.8999 ms
    b = sync_trace("cs1.json", 1, [("r1a", "1000000.000", "1.000"), ("r1b", "2000000.000", "1000.000")],
                   (-50000000, 100000, 1000000000, 2500))
    # +333 ppb for 1.5 s: 499.5 ns, rounded away from zero
    c = sync_trace("cs2.json", 2, [("r2", "1500000.000", "0.000")], (20, 333, 0, 700))
    out = os.path.join(OUT, "cs.merged.json")
    p = mlprof("merge", b, a, c, "-o", out)
    check("warning" not in p.stderr, f"merge with clock sync warned: {p.stderr!r}")
    t = json.load(open(out), parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    got = {e["name"]: (e["ts"], e["dur"]) for e in t["traceEvents"] if e.get("ph") == "X"}
    D = decimal.Decimal
    want = {"r0": (D("1000000.000"), D("10.000")),
            "r1a": (D("950000.000"), D("1.000")),        # -50 ms + 100 ppm of 0..1 us: 0.1 ns, rounds to 0
            "r1b": (D("1950100.000"), D("1000.100")),    # 2 s - 49.9 ms; the end moves 0.1 us more
            "r2": (D("1500000.520"), D("0.000"))}        # 20 ns + 499.5 -> 500 ns
    for k, v in want.items():
        check(k in got and got[k] == v, f"clock sync applied to {k}: {got.get(k)}, wanted {v}")
    mg = t["otherData"]["merge"]
    check(mg["method"] == "clock sync", f"merge method {mg['method']}")
    check(mg.get("clock_sync") == {"method": "mpi_pingpong", "reference_rank": 0, "worst_bound_ns": 2500},
          f"merge clock_sync {mg.get('clock_sync')}")
    ins = {i["rank"]: i for i in mg["inputs"]}
    check(ins[1]["offset_ns"] == -50000000 and ins[1]["drift_ppb"] == 100000 and ins[1]["bound_ns"] == 2500,
          f"input 1's clock sync in the output: {ins[1]}")
    # one input without it: not applied, and said
    d = sync_trace("cs3.json", 2, [("r3", "1500000.000", "0.000")], None)
    p = mlprof("merge", a, b, d, "-o", os.path.join(OUT, "cs.partial.json"))
    t = json.load(open(os.path.join(OUT, "cs.partial.json")))
    check(t["otherData"]["merge"]["method"] == "shared clock", f"partial clock sync: {t['otherData']['merge']}")
    check("only 2 of 3 traces have a clock_sync" in p.stderr, f"partial clock sync not said: {p.stderr!r}")


test_launchers()
test_key_and_mpi()
test_malformed()
test_names()
test_traces()
test_clock_sync()
if failures:
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("dist: all checks passed")
