#!/usr/bin/env python3
"""The nccl hook and mlprof's NCCL profiler plugin, over the fake NCCL
(fake_nccl.c), two ranks of run_nccl.c under `mlprof run` (started here with
OpenMPI's variables, as a launcher would):

- by interposition (NCCL_PROFILER_PLUGIN=none): every call a span with its
  exact arguments, collectives numbered per communicator and function;
- through the plugin, NCCL_PROFILER_PLUGIN set by mlprof run itself, at each
  version the fake may ask for (5, then 4, 3, 2, 1): the same collectives with
  NCCL's own numbers, a group per launch, nothing recorded twice by the
  interposer beside it, the version taken said in otherData.nccl;
- --nccl_proxy 1: the proxy operations and steps on the proxy thread;
- --hooks without nccl: no plugin (its init refuses) and no span;
- mlprof ranks on the two ranks' traces: every collective matched by
  (comm, name, seq) across the ranks, on the world communicator and one
  split from it (ncclCommSplit: the same id on both ranks);
- a communicator of one rank, with the plugin loaded: NCCL runs its
  collectives without a word to its profiler (a local copy), so the
  interposer records them.

usage: nccl_check.py MLPROF RUN_NCCL OUTDIR
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from analyze_util import check, failures

MLPROF, APP, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
SANITIZED = os.environ.get("RUN_CHECK_SANITIZED") == "1"
# under ASan its own malloc comes before any preloaded one
HOOKS = "blas,nccl" if SANITIZED else "all"
LAUNCHER_VARS = re.compile(r"^(OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_|RANK$|WORLD_SIZE$|LOCAL_RANK$|"
                           r"LOCAL_WORLD_SIZE$|TORCHELASTIC_|MLPROF_|NCCL_|FAKE_NCCL_)")

# (name, op, bytes, dtype, count, seq, root) of each rank's collectives, in order
COLLS = [("ncclAllReduce", "AllReduce", 4096, "ncclFloat32", 1024, 0, None),
         ("ncclAllReduce", "AllReduce", 4096, "ncclFloat32", 1024, 1, None),
         ("ncclBroadcast", "Broadcast", 1024, "ncclInt32", 256, 0, 0),
         ("ncclAllGather", "AllGather", 512, "ncclFloat64", 64, 0, None),
         ("ncclReduceScatter", "ReduceScatter", 64, "ncclBfloat16", 32, 0, None),
         ("ncclReduce", "Reduce", 128, "ncclInt64", 16, 0, 1),
         ("ncclAllReduce", "AllReduce", 16, "ncclFloat16", 8, 0, None)]  # on the communicator split off


def rank_env(rank, extra):
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    env.update(OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
               OMPI_COMM_WORLD_LOCAL_SIZE="2", OMPI_MCA_ess_base_jobid="nccl-job", **extra)
    return env


def run_job(mode, extra_env, options=()):
    """Both ranks at once; their traces (rank -> trace), read from OUT/mode.parts."""
    d = os.path.join(OUT, mode)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    out = os.path.join(d, "job.json")
    procs = {r: subprocess.Popen([MLPROF, "run", "-o", out, "--hooks", HOOKS, "--merge-timeout", "60", *options,
                                  "--", APP, str(r), "job-" + mode],
                                 env=rank_env(r, dict(extra_env, FAKE_NCCL_LOG=os.path.join(d, f"log{r}"))),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)}
    traces = {}
    for r, p in procs.items():
        so, se = p.communicate(timeout=240)
        check(p.returncode == 0, f"{mode}: rank {r} exited {p.returncode}: {se[-2000:]}")
        files = glob.glob(os.path.join(out + ".parts", f"trace.rank{r}.*.json"))
        check(len(files) == 1, f"{mode}: rank {r}'s traces {files}")
        if files:
            with open(files[0]) as f:
                traces[r] = json.load(f)
    return d, traces


def nccl_spans(t, name=None):
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "nccl"
            and (name is None or e["name"] == name)]


def check_calls(mode, traces, plugin):
    comms = set()
    per_rank = {}
    for r, t in traces.items():
        spans = nccl_spans(t)
        names = [e["name"] for e in spans]
        app_tids = {e["tid"] for e in spans if e["name"] != "ncclProxyOp" and e["name"] != "ncclProxyStep"}
        check(len(app_tids) == 1, f"{mode}: rank {r}: NCCL's calls on threads {app_tids}, wanted the caller's")
        colls = sorted((e for e in spans if e["name"] in {c[0] for c in COLLS}), key=lambda e: e["ts"])
        got = [(e["name"], e["args"].get("op"), e["args"].get("bytes"), e["args"].get("dtype"), e["args"].get("count"),
                e["args"].get("seq"), e["args"].get("root")) for e in colls]
        check(got == COLLS, f"{mode}: rank {r}: collectives {got}")
        for i, e in enumerate(colls):
            a = e["args"]
            # plugin v1-v3 learn the size from ncclCommInitRank's interposer, not from a split
            size = None if plugin in (1, 2, 3) and i == len(COLLS) - 1 else 2
            check(a.get("rank") == r and a.get("comm_size") == size and isinstance(a.get("comm"), int),
                  f"{mode}: rank {r}: {e['name']} args {a}")
            comms.add(a.get("comm"))
            if plugin and plugin > 1:
                check(a.get("algo") == "RING" and a.get("proto") == "SIMPLE", f"{mode}: rank {r}: algo {a}")
        per_rank[r] = [e["args"].get("comm") for e in colls]
        # the interposer's split: its id is the one its calls carry (the plugin's is NCCL's commHash)
        split = nccl_spans(t, "ncclCommSplit")
        check(len(split) == 1 and (plugin or split[0]["args"].get("comm") == per_rank[r][-1])
              and split[0]["args"].get("rank") == r and split[0]["args"].get("comm_size") == 2,
              f"{mode}: rank {r}: ncclCommSplit {[e['args'] for e in split]}")
        p2p = sorted(nccl_spans(t, "ncclSend") + nccl_spans(t, "ncclRecv"), key=lambda e: e["name"])
        got = [(e["name"], e["args"].get("bytes"), e["args"].get("dtype"), e["args"].get("count"),
                e["args"].get("peer"), e["args"].get("rank"), e["args"].get("comm") in comms) for e in p2p]
        check(got == [("ncclRecv", 100, "ncclUint8", 100, 1 - r, r, True),
                      ("ncclSend", 100, "ncclUint8", 100, 1 - r, r, True)], f"{mode}: rank {r}: p2p {got}")
        # a group per launch through the plugin (alone, a call is its own); the program's two by interposition
        groups = nccl_spans(t, "ncclGroup")
        check(len(groups) == (7 if plugin else 2), f"{mode}: rank {r}: {len(groups)} groups")
        for g in groups:  # each around its calls
            inside = [e for e in spans if e["tid"] == g["tid"] and e is not g and e["name"] != "ncclGroup"
                      and g["ts"] <= e["ts"] and e["ts"] + e["dur"] <= g["ts"] + g["dur"]]
            check(inside, f"{mode}: rank {r}: group at {g['ts']} holds no call")
        init = nccl_spans(t, "ncclCommInitRank")
        check(len(init) == 1 and init[0]["args"].get("rank") == r and init[0]["args"].get("comm_size") == 2,
              f"{mode}: rank {r}: ncclCommInitRank {[e['args'] for e in init]}")
        check(names.count("ncclAllReduce") == 3, f"{mode}: rank {r}: {names.count('ncclAllReduce')} AllReduce spans "
              "(the plugin and the interposer both recorded?)")
        od = t["otherData"].get("nccl")
        if plugin:
            check(od == {"plugin_version": plugin, "communicators": 2, "events_lost": 0},
                  f"{mode}: rank {r}: otherData.nccl {od}")
        else:
            check(od is None, f"{mode}: rank {r}: otherData.nccl {od} without the plugin")
    # one id per communicator, the same on both ranks
    check(len(comms) == 2 and per_rank.get(0) == per_rank.get(1) and len(set(per_rank.get(0, [])[:6])) == 1,
          f"{mode}: the ranks' comm ids {per_rank}")


def check_ranks(mode, d, traces):
    """mlprof ranks matches the seven collectives across the two ranks."""
    files = sorted(glob.glob(os.path.join(d, "job.json.parts", "trace.rank*.json")))
    p = subprocess.run([MLPROF, "ranks", *files, "--format", "json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0, f"{mode}: mlprof ranks exited {p.returncode}: {p.stderr}")
    if p.returncode != 0:
        return
    k = json.loads(p.stdout)
    c = k["collectives"]
    check(c["matched"] == 7 and c["incomplete"] == 0 and c["on_one_rank_only"] == 0, f"{mode}: collectives {c}")
    froms = {r["rank"]: (r["collectives_from"], r["collectives"]) for r in k["ranks"]}
    check(froms == {0: ("mpi", 7), 1: ("mpi", 7)}, f"{mode}: per rank {froms}")
    names = sorted({(x["name"], x["seq"], x["ranks"]) for x in c["by_skew"]})
    want = sorted({(n, s, 2) for n, _, _, _, _, s, _ in COLLS})
    check(names == want, f"{mode}: matched {names}")


def main():
    global HOOKS
    # by interposition
    d, traces = run_job("interpose", {"NCCL_PROFILER_PLUGIN": "none"})
    if len(traces) == 2:
        check_calls("interpose", traces, 0)
        check_ranks("interpose", d, traces)
    # the plugin, every version the fake may ask for; mlprof run names the plugin itself
    for v in (5, 4, 3, 2, 1):
        d, traces = run_job(f"plugin_v{v}", {"FAKE_NCCL_PROFILER_VERSION": str(v)})
        if len(traces) != 2:
            continue
        with open(os.path.join(d, "log0")) as f:
            log = f.read().splitlines()
        asked = [x for x in log if x.startswith("dlsym")]
        check(asked == [f"dlsym ncclProfiler_v{v}"] * 2, f"plugin v{v}: the fake asked {asked}")  # per communicator
        check(f"init v{v} rc 0 mask 7" in log and "finalize" in log, f"plugin v{v}: {log[:4]}")
        check_calls(f"plugin_v{v}", traces, v)
        check_ranks(f"plugin_v{v}", d, traces)
    # a version the plugin lacks: the fake goes down to the next (v6, then v5)
    d, traces = run_job("plugin_v6", {"FAKE_NCCL_PROFILER_VERSION": "6"})
    with open(os.path.join(d, "log1")) as f:
        log = f.read().splitlines()
    check(log[:3] == ["dlsym ncclProfiler_v6", "dlsym ncclProfiler_v5", "init v5 rc 0 mask 7"],
          f"plugin v6: {log[:3]}")
    # proxy operations and steps, when asked
    d, traces = run_job("proxy", {}, ["--nccl_proxy", "1"])
    for r, t in traces.items():
        ops = nccl_spans(t, "ncclProxyOp")
        steps = nccl_spans(t, "ncclProxyStep")
        app = {e["tid"] for e in nccl_spans(t, "ncclAllReduce")}
        check(len(ops) == 9 and len(steps) == 18, f"proxy: rank {r}: {len(ops)} ops, {len(steps)} steps")
        check(sorted(e["args"].get("bytes") for e in steps) == [1000] * 9 + [1001] * 9,
              f"proxy: rank {r}: step bytes {[e['args'] for e in steps[:2]]}")
        check(all(e["tid"] not in app for e in ops + steps), f"proxy: rank {r}: proxy events on the caller's thread")
        check(sorted((e["args"]["send"], e["args"]["peer"]) for e in ops) == [(0, 1 - r)] + [(1, 1 - r)] * 8,
              f"proxy: rank {r}: ops {[e['args'] for e in ops]}")
        check(len(nccl_spans(t, "ncclAllReduce")) == 3, f"proxy: rank {r}: AllReduce spans")
    # one rank alone: the plugin loaded, yet its collectives come from the interposer
    d = os.path.join(OUT, "solo")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    out = os.path.join(d, "solo.json")
    env = {k: v for k, v in os.environ.items() if not LAUNCHER_VARS.match(k)}
    env["FAKE_NCCL_LOG"] = os.path.join(d, "log")
    p = subprocess.run([MLPROF, "run", "-q", "-o", out, "--hooks", HOOKS, "--", APP, "solo", "job-solo"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    check(p.returncode == 0, f"solo: exited {p.returncode}: {p.stderr[-2000:]}")
    files = glob.glob(os.path.join(out + ".parts", "trace.*.json"))
    check(len(files) == 1, f"solo: traces {files}")
    if files:
        with open(files[0]) as f:
            t = json.load(f)
        got = [(e["name"], e["args"].get("count"), e["args"].get("comm_size"), e["args"].get("seq"),
                e["args"].get("root")) for e in nccl_spans(t) if e["name"] != "ncclCommInitRank"]
        check(got == [("ncclAllReduce", 1024, 1, 0, None), ("ncclAllReduce", 1024, 1, 1, None),
                      ("ncclBroadcast", 256, 1, 0, 0)], f"solo: collectives {got}")
        od = t.get("otherData", {}).get("nccl")
        check(od == {"plugin_version": 5, "communicators": 1, "events_lost": 0}, f"solo: otherData.nccl {od}")
    # the hook off: the plugin refuses (NCCL goes on without it) and nothing is recorded
    saved, HOOKS = HOOKS, "blas"
    d, traces = run_job("off", {})
    HOOKS = saved
    for r, t in traces.items():
        check(nccl_spans(t) == [], f"off: rank {r}: {[e['name'] for e in nccl_spans(t)][:5]}")
    with open(os.path.join(d, "log0")) as f:
        log = f.read().splitlines()
    check(any(x.startswith("init v5 rc 3") for x in log), f"off: the plugin's init said {log[:3]}")
    if failures:
        print(f"{len(failures)} failures", file=sys.stderr)
        return 1
    print("nccl: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
