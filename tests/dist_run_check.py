#!/usr/bin/env python3
"""`mlprof run` under a launcher: 4 ranks started here with OpenMPI's variables
(as mpirun sets them, without MPI) give one trace per rank in OUTPUT.parts/
and one merged timeline, labelled and ordered by rank; the same job again in
the same place is merged once, by its last rank; a second, smaller job in the
same place leaves the first one's ranks out and removes them (the first job
has ended); two jobs in one place at once each merge their own ranks only
and never remove each other's files while they run; a rank whose program is
killed and a rank that never ends are said, and the merge goes on without
them; a rank whose program fails does not wait for the others. Where OpenMPI's mpirun is installed, the same with a real mpirun -n 4.

usage: dist_run_check.py MLPROF RUN_ALLOC OUTDIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

from analyze_util import check, failures

MLPROF, APP, OUT = sys.argv[1:4]
APP = os.path.abspath(APP) if os.sep in APP else APP
# every run of the test starts from nothing: an earlier run's files are not this one's
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
SANITIZED = os.environ.get("RUN_CHECK_SANITIZED") == "1"
# under ASan its own malloc comes before any preloaded one
HOOKS = ["--hooks", "blas"] if SANITIZED else []
LAUNCHER_VARS = re.compile(r"^(OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_|RANK$|WORLD_SIZE$|LOCAL_RANK$|"
                           r"LOCAL_WORLD_SIZE$|TORCHELASTIC_|MLPROF_)")


def rank_env(rank, world, job, launcher="ompi", port=None):
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    env.pop("MASTER_PORT", None)
    if launcher == "torchrun":  # torchrun's job id is "none" unless given --rdzv-id
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   TORCHELASTIC_RUN_ID=job)
        if port:  # the job's rendezvous, given to each of its workers
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    else:
        env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(world),
                   OMPI_COMM_WORLD_LOCAL_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_SIZE=str(world),
                   OMPI_MCA_ess_base_jobid=job)
    return env


def done_files(output, r):
    """Rank r's done files (done.rankR.JOB) in output's parts."""
    return glob.glob(os.path.join(glob.escape(output + ".parts"), f"done.rank{r}.*"))


def start_ranks(output, world, job, ranks=None, cmds=None, options=(), later=(), launcher="ompi", wait=True,
                port=None):
    """The ranks' mlprof run, all at once, as a launcher starts them; the ranks
    in later only once the others have written their done files. With wait
    False, the processes (rank -> Popen) once started."""
    procs = {}

    def start(r):
        cmd = (cmds or {}).get(r, [APP])
        procs[r] = subprocess.Popen([MLPROF, "run", "-o", output, *HOOKS, *options, "--", *cmd],
                                    env=rank_env(r, world, job, launcher, port), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
    for r in ranks if ranks is not None else range(world):
        if r not in later:
            start(r)
    if later:
        # no time is measured: the ranks started wait for the later ones (120 s
        # at most, then they merge without them, which the checks see)
        wait_done(output, procs)
        for r in later:
            start(r)
    return finish_ranks(procs) if wait else procs


def wait_done(output, procs):
    """Until the ranks of procs have written their done files (or one has ended)."""
    while not all(done_files(output, r) for r in procs) and all(p.poll() is None for p in procs.values()):
        time.sleep(0.02)


def finish_ranks(procs):
    out = {}
    for r, p in procs.items():
        so, se = p.communicate(timeout=240)
        out[r] = (p.returncode, so, se)
    return out


def merged_inputs(path):
    if not os.path.exists(path):
        check(False, f"{path} was not written")
        return None
    with open(path) as f:
        t = json.load(f)
    return t


def parts(output):
    d = output + ".parts"
    return sorted(f for f in os.listdir(d) if f.startswith("trace.")) if os.path.isdir(d) else []


def check_job(t, ranks, why, missing=()):
    if t is None:
        return
    mg = t["otherData"]["merge"]
    labels = sorted({i["label"] for i in mg["inputs"]})
    check(labels == [f"rank {r}" for r in ranks], f"{why}: merged ranks {labels}, wanted {list(ranks)}")
    check(mg.get("missing_ranks") == list(missing), f"{why}: missing_ranks {mg.get('missing_ranks')}")
    # one process track per rank, in rank order
    order = {e["pid"]: e["args"]["sort_index"] for e in t["traceEvents"] if e.get("name") == "process_sort_index"}
    names = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
    by_order = [names[p].split(":")[0] for p in sorted(order, key=order.get)]
    check(by_order == [f"rank {r}" for r in ranks], f"{why}: tracks in the order {by_order}")
    if not SANITIZED:  # the malloc hook saw run_alloc's seven blocks in every rank
        for r in ranks:
            pids = [p for p, n in names.items() if n.startswith(f"rank {r}:")]
            peaks = [e for e in t["traceEvents"] if e.get("pid") in pids and e.get("ph") == "i"
                     and e.get("name", "").startswith("memory peak")]
            check(peaks, f"{why}: rank {r} has no memory peak in the merged trace")


def test_simulated():
    out = os.path.join(OUT, "job.json")
    res = start_ranks(out, 4, "101")
    for r, (rc, so, se) in res.items():
        check(rc == 0, f"rank {r}: exit {rc}\n{se}")
    got = parts(out)
    check(len(got) == 4 and [f.split(".")[1] for f in got] == [f"rank{r}" for r in range(4)],
          f"one trace per rank: {got}")
    mergers = [r for r, (_, so, _) in res.items() if f"trace: {out}" in so]
    others = [r for r, (_, so, _) in res.items() if "the last rank to end merges" in so]
    check(len(mergers) == 1 and len(others) == 3, f"one rank merges, the others say so: {mergers}, {others}")
    t = merged_inputs(out)
    check_job(t, range(4), "4 ranks")
    if t:
        di = [i["distributedInfo"] for i in t["otherData"]["merge"]["inputs"]]
        check(all(d["world_size"] == 4 and d["job_id"] == "101" and d["source"] == "ompi" for d in di),
              f"each rank's distributedInfo: {di}")
    # the rank that merged took the done files: none is left for a later job to count
    left = sorted(f for f in os.listdir(out + ".parts") if f.startswith("done."))
    check(not left, f"done files left after the merge: {left}")
    # the same job again, in the same place, ranks 2 and 3 started after 0 and 1
    # have ended: 0 and 1 wait for them (no done file of the first run counts),
    # and one rank merges
    res = start_ranks(out, 4, "101", later=(2, 3))
    check(all(rc == 0 for rc, _, _ in res.values()), f"4 ranks again: {res}")
    mergers = [r for r, (_, so, _) in res.items() if f"trace: {out}" in so]
    check(mergers in ([2], [3]), f"the same job again: merged by ranks {mergers}, wanted 2 or 3")
    check_job(merged_inputs(out), range(4), "4 ranks again")
    # a smaller job in the same place: the first job's ranks 2 and 3 are not its own,
    # and that job has ended: its files are removed, and said
    res = start_ranks(out, 2, "102")
    check(all(rc == 0 for rc, _, _ in res.values()), f"2 ranks: {res}")
    check_job(merged_inputs(out), range(2), "2 ranks after 4")
    got = parts(out)
    check([f.split(".")[1] for f in got] == ["rank0", "rank1"], f"2 ranks after 4: parts left {got}")
    err = "".join(se for _, _, se in res.values())
    check("of another job (job 101, 4 ranks), which has ended" in err, f"2 ranks after 4: the removal is said: {err!r}")


def trace_job_id(path):
    with open(path) as f:
        return json.load(f)["distributedInfo"]["job_id"]


def test_rerun_fewer_torchrun():
    """torchrun's jobs all have the id "none": a job of 3 ranks, then one of 2 in the same place. The second
    merges its 2 ranks and removes the first one's 3 (its world size tells them apart); mlprof ranks then reads
    the 2."""
    out = os.path.join(OUT, "tr.json")
    res = start_ranks(out, 3, "none", launcher="torchrun")
    check(all(rc == 0 for rc, _, _ in res.values()), f"torchrun 3 ranks: {res}")
    check(len(parts(out)) == 3, f"torchrun 3 ranks: {parts(out)}")
    res = start_ranks(out, 2, "none", launcher="torchrun")
    check(all(rc == 0 for rc, _, _ in res.values()), f"torchrun 2 ranks after 3: {res}")
    check_job(merged_inputs(out), range(2), "torchrun 2 ranks after 3")
    got = parts(out)
    check([f.split(".")[1] for f in got] == ["rank0", "rank1"], f"torchrun 2 ranks after 3: parts left {got}")
    p = subprocess.run([MLPROF, "ranks", out + ".parts/"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and ": 2 ranks" in p.stdout, f"mlprof ranks reads the 2 ranks: {p.stdout}{p.stderr}")


def test_two_jobs_at_once(launcher="ompi"):
    """Two jobs with the same -o in one place at once: job A's rank 0 has ended and waits for its rank 1
    while job B runs whole. B merges its own 2 ranks, says that a trace of another job is there, and leaves
    it (A runs on); then A's rank 1 comes, and A merges its own 2 ranks and removes B's files (B has ended).
    OpenMPI's jobs 501 and 502; or two torchrun jobs without --rdzv-id (run id "none" both) on rendezvous
    ports 29501 and 29502, told apart by the port: jobs none.29501 and none.29502."""
    torch = launcher == "torchrun"
    ids = ("none", "none") if torch else ("501", "502")
    ports = (29501, 29502) if torch else (None, None)
    names = ("none.29501", "none.29502") if torch else ids
    what = f"two {launcher} jobs"
    out = os.path.join(OUT, f"shared_{launcher}.json")
    a = start_ranks(out, 2, ids[0], ranks=[0], wait=False, launcher=launcher, port=ports[0])
    wait_done(out, a)
    a_parts = parts(out)
    check(len(a_parts) == 1, f"{what}: job {names[0]}'s rank 0 wrote one trace: {a_parts}")
    b = start_ranks(out, 2, ids[1], launcher=launcher, port=ports[1])
    check(all(rc == 0 for rc, _, _ in b.values()), f"{what}: job {names[1]}: {b}")
    t = merged_inputs(out)
    check_job(t, range(2), f"{what}: job {names[1]}")
    if t:
        jobs = [i["distributedInfo"]["job_id"] for i in t["otherData"]["merge"]["inputs"]]
        check(jobs == [names[1]] * 2, f"{what}: job {names[1]} merged the traces of jobs {jobs}")
    err = "".join(se for _, _, se in b.values())
    check("1 trace in" in err and f"is of another job running there (job {names[0]} (2 ranks)" in err,
          f"{what}: job {names[1]} says job {names[0]}'s trace is there: {err!r}")
    check(set(a_parts) <= set(parts(out)) and done_files(out, 0),
          f"{what}: job {names[0]}'s files were kept while it runs: {parts(out)}")
    a.update(start_ranks(out, 2, ids[0], ranks=[1], wait=False, launcher=launcher, port=ports[0]))
    a = finish_ranks(a)
    check(all(rc == 0 for rc, _, _ in a.values()), f"{what}: job {names[0]}: {a}")
    t = merged_inputs(out)
    check_job(t, range(2), f"{what}: job {names[0]}")
    if t:
        jobs = [i["distributedInfo"]["job_id"] for i in t["otherData"]["merge"]["inputs"]]
        check(jobs == [names[0]] * 2, f"{what}: job {names[0]} merged the traces of jobs {jobs}")
    left = parts(out)
    check(len(left) == 2 and all(trace_job_id(os.path.join(out + ".parts", f)) == names[0] for f in left),
          f"{what}: job {names[1]}'s traces removed once it ended: {left}")
    err = "".join(se for _, _, se in a.values())
    check(f"of another job (job {names[1]}, 2 ranks), which has ended" in err,
          f"{what}: the removal is said: {err!r}")


def test_own_outputs():
    """An output that names its rank (%r, or rankR as a launcher script writes it) is that rank's alone:
    merged by it, with no waiting for the others."""
    for pattern in ("own.rank{r}.json", "pct.%r.json"):
        outs = {r: os.path.join(OUT, pattern.format(r=r)) for r in range(4)}
        procs = {r: subprocess.Popen([MLPROF, "run", "-o", outs[r], "--merge-timeout", "5", *HOOKS, "--", APP],
                                     env=rank_env(r, 4, "301"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True) for r in range(4)}
        for r, p in procs.items():
            so, se = p.communicate(timeout=240)
            own = outs[r].replace("%r", str(r))
            check(p.returncode == 0 and f"trace: {own}" in so, f"{pattern} rank {r}: {p.returncode}\n{so}\n{se}")
            check("warning" not in se, f"{pattern} rank {r} warned: {se!r}")
            d = own + ".parts"
            listing = sorted(os.listdir(d)) if os.path.isdir(d) else []
            check(len([f for f in listing if f.startswith(f"trace.rank{r}.")]) == 1
                  and not any(f.startswith("done.") for f in listing), f"{pattern} rank {r}'s parts: {listing}")
            check_job(merged_inputs(own), [r], f"{pattern} rank {r}", missing=[x for x in range(4) if x != r])


def test_lost_ranks():
    out = os.path.join(OUT, "lost.json")
    if SANITIZED:
        print("dist_run: under AddressSanitizer no killed rank: sh, which kills itself, cannot load the "
              "sanitized preload library (ASan's runtime must come first)")
    else:
        # rank 2's program is killed: its mlprof run ends (and says so), its trace is lost
        res = start_ranks(out, 4, "201", cmds={2: ["sh", "-c", "kill -KILL $$"]})
        check(res[2][0] == 137, f"rank 2's status is its program's: {res[2][0]}")
        err = "".join(se for _, _, se in res.values())
        check("no trace of rank 2 (of 4)" in err, f"the missing rank is said: {err!r}")
        check_job(merged_inputs(out), [0, 1, 3], "rank 2 killed", missing=[2])
    # rank 1 never starts (its launcher lost it): the others wait, then merge without it. Rank 0
    # starts once ranks 2 and 3 have ended (and merged without 0 and 1): started with them, it
    # could end more than the timeout after one of them on a loaded machine, and be left out by
    # the merge of the first whose wait ended. Started last, it is the lowest rank done when its
    # own wait ends, and merges 0, 2 and 3 however long any of them took.
    out = os.path.join(OUT, "never.json")
    res = start_ranks(out, 4, "202", ranks=[2, 3], options=["--merge-timeout", "1"])
    res.update(start_ranks(out, 4, "202", ranks=[0], options=["--merge-timeout", "1"]))
    check(all(rc == 0 for rc, _, _ in res.values()), f"ranks without rank 1: {res}")
    err = "".join(se for _, _, se in res.values())
    check("rank 1 of 4 did not end within 1 s" in err and "no trace of rank 1 (of 4)" in err,
          f"the rank that never ended is said: {err!r}")
    check_job(merged_inputs(out), [0, 2, 3], "rank 1 never ran", missing=[1])


def test_failed_rank():
    """A rank whose program fails ends at once with its status, not waiting for the others (a launcher learns
    of the failure without delay); the last of the others merges every rank, the failed one too."""
    fails = os.path.join(os.path.dirname(APP), "run_signals")
    if not os.path.exists(fails):
        print(f"dist_run: no failing rank: {fails} is not built")
        return
    out = os.path.join(OUT, "failed.json")
    # rank 1 alone first, the others not started: waiting for them, it would wait the whole timeout
    p = subprocess.Popen([MLPROF, "run", "-o", out, "--merge-timeout", "3600", *HOOKS, "--", fails, "exit1"],
                         env=rank_env(1, 4, "203"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        so, se = p.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
        check(False, f"failed rank: its mlprof run waits for the other ranks: {se!r}")
        return
    check(p.returncode == 1 and "rank 1: " in se and "not waiting for the other ranks" in se,
          f"failed rank: status {p.returncode}, {se!r}")
    check(done_files(out, 1), "failed rank: its done file was not written")
    res = start_ranks(out, 4, "203", ranks=[0, 2, 3])
    check(all(rc == 0 for rc, _, _ in res.values()), f"the ranks after the failed one: {res}")
    check_job(merged_inputs(out), range(4), "rank 1 failed")


def test_mpirun():
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("dist_run: skipping the real mpirun: OpenMPI's mpirun is not installed "
              "(apt-get install openmpi-bin)")
        return
    out = os.path.join(OUT, "mpi.json")
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    p = subprocess.run([mpirun, "--oversubscribe", "-n", "4", MLPROF, "run", "-o", out, *HOOKS, "--", APP],
                       env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != 0 and ("not enough slots" in p.stderr or "ORTE" in p.stderr and not parts(out)):
        print(f"dist_run: skipping the real mpirun: it could not start 4 processes here:\n{p.stderr}")
        return
    check(p.returncode == 0, f"mpirun -n 4 mlprof run: exit {p.returncode}\n{p.stderr}")
    got = parts(out)
    check(len(got) == 4, f"mpirun: one trace per rank: {got}")
    t = merged_inputs(out)
    check_job(t, range(4), "mpirun -n 4")
    if t:
        jobs = {i["distributedInfo"]["job_id"] for i in t["otherData"]["merge"]["inputs"]}
        check(len(jobs) == 1 and "" not in jobs, f"mpirun: one job id for every rank: {jobs}")


test_simulated()
test_rerun_fewer_torchrun()
test_two_jobs_at_once()
test_two_jobs_at_once("torchrun")
test_own_outputs()
test_lost_ranks()
test_failed_rank()
test_mpirun()
if failures:
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("dist_run: all checks passed")
