"""mpi_check.py - the mpi hook and the clock alignment over MPI, end to end:
mpi_app.c (built here with mpicc) and mpi_app.py (mpi4py) on 4 ranks with
`mpirun --oversubscribe -n 4`, each rank under `mlprof run --hooks mpi` with a
file of its own; then the ranks' traces are read back:
  - exact counts, bytes, peers, tags and message numbers per rank;
  - every send's flow has exactly one end, on another rank, with the same id,
    and both ends lie inside the right MPI spans; `mlprof merge` keeps them
    linked;
  - the collectives match across ranks by communicator and sequence number;
  - clock_sync: two samples a rank; ranks of this host are within the written
    bound of each other; with injected offsets of +-50 ms and drifts of
    +-100 ppm (the test-only clock_shift key), the recovered offset of every
    sample is within its bound of the true one, and the drift within the
    bound that the two samples' bounds give over the time between them.
Skips (exit 0, saying why) without mpicc or mpirun.

The C program is also linked with libmlprof (LIBDIR) and run without mlprof
run: the same wrappers, from the library itself.

usage: mpi_check.py MLPROF OUTDIR [PYTHON [LIBDIR]]"""
import glob
import json
import os
import shutil
import subprocess
import sys

MLPROF, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PYTHON = sys.argv[3] if len(sys.argv) > 3 else "/usr/bin/python3"
LIBDIR = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
HERE = os.path.dirname(os.path.abspath(__file__))
N = 4
SANITIZED = os.environ.get("RUN_CHECK_SANITIZED") == "1"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def skip(why):
    print("mpi: skipped:", why)
    sys.exit(0)


# One file per rank until mlprof names them itself: the rank from Open MPI's
# (or a PMI's) environment in the output's name, and the rank's clock shift.
WRAPPER = """#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
out=$1; shift
if [ -n "$MPI_CHECK_SHIFTS" ]; then
  MLPROF_CLOCK_SHIFT=$(echo "$MPI_CHECK_SHIFTS" | cut -d' ' -f$((r + 1))); export MLPROF_CLOCK_SHIFT
fi
if [ -n "$MPI_CHECK_LINKED" ]; then  # linked with libmlprof: the library's own start
  mkdir -p "$out.rank$r.json.parts"
  MLPROF_FILENAME="$out.rank$r.json.parts/trace.json" MLPROF_AUTOSTART=1 exec "$@"
fi
exec "$MPI_CHECK_MLPROF" run -q --hooks mpi -o "$out.rank$r.json" -- "$@"
"""


def mpirun(name, *cmd, shifts=None, linked=False):
    """Runs cmd on N ranks; returns each rank's own trace (rank order)."""
    for old in glob.glob(os.path.join(OUT, name + ".rank*")):
        shutil.rmtree(old, ignore_errors=True) if os.path.isdir(old) else os.remove(old)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               MPI_CHECK_MLPROF=MLPROF, OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("MPI_CHECK_SHIFTS", None)
    env.pop("MPI_CHECK_LINKED", None)
    if linked:
        env["MPI_CHECK_LINKED"] = "1"
    if shifts:
        env["MPI_CHECK_SHIFTS"] = " ".join(shifts)
    p = subprocess.run([MPIRUN, "--oversubscribe", "-n", str(N), "sh", os.path.join(OUT, "rank.sh"),
                        os.path.join(OUT, name)] + list(cmd), env=env, cwd=OUT, timeout=300,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(p.stdout)
        sys.exit("mpi: %s: mpirun exited with %d" % (name, p.returncode))
    traces = []
    for r in range(N):
        parts = glob.glob(os.path.join(OUT, "%s.rank%d.json.parts" % (name, r), "*.json"))
        if len(parts) != 1:
            sys.exit("mpi: %s: rank %d left %d traces" % (name, r, len(parts)))
        with open(parts[0]) as f:
            traces.append(json.load(f))
    return traces


def mpi_spans(t):
    return [e for e in t["traceEvents"] if e.get("cat") == "mpi" and e.get("ph") == "X"]


def by_name(t, name):
    return [e for e in mpi_spans(t) if e["name"] == name]


def counts(t):
    c = {}
    for e in mpi_spans(t):
        c[e["name"]] = c.get(e["name"], 0) + 1
    return c


def check_flows(name, traces, senders, receivers, per_rank):
    """Every start has one end on another rank with its id, each inside a
    span of the right names on its own thread."""
    starts, ends = {}, {}
    for r, t in enumerate(traces):
        spans = mpi_spans(t)
        flows = [e for e in t["traceEvents"] if e.get("cat") == "mpi" and e.get("ph") in "sf"]
        check(sum(e["ph"] == "s" for e in flows) == per_rank and sum(e["ph"] == "f" for e in flows) == per_rank,
              "%s rank %d: %d flow starts and ends each" % (name, r, per_rank))
        for e in flows:
            inside = [s["name"] for s in spans if s["tid"] == e["tid"] and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
            want = senders if e["ph"] == "s" else receivers
            check(len(inside) == 1 and inside[0] in want,
                  "%s rank %d: flow %s %s inside %s, not one of %s" % (name, r, e["ph"], e["id"], inside, want))
            (starts if e["ph"] == "s" else ends).setdefault(e["id"], []).append(r)
    check(sorted(starts) == sorted(ends), "%s: every flow start has its end (%d starts, %d ends)"
          % (name, len(starts), len(ends)))
    for i, rs in starts.items():
        check(len(rs) == 1 and len(ends.get(i, [])) == 1 and ends[i][0] != rs[0],
              "%s: flow %s from rank %s to %s" % (name, i, rs, ends.get(i)))


def check_collectives(name, traces, expected):
    """The same collectives in the same order on every rank, numbered 0, 1...
    on each communicator; expected: the world's names in order."""
    seqs = []
    for t in traces:
        coll = [e for e in mpi_spans(t) if "seq" in e.get("args", {}) and "peer" not in e["args"]
                and e["name"] not in ("MPI_Wait", "MPI_Waitall")]
        seqs.append([(e["name"], e["args"]["comm"], e["args"]["seq"]) for e in coll])
    world = [[x for x in s if x[1] == 1] for s in seqs]
    check(all(w == world[0] for w in world), "%s: the world's collectives match across ranks" % name)
    check([x[0] for x in world[0]] == expected, "%s: the world's collectives are %s, not %s"
          % (name, expected, [x[0] for x in world[0]]))
    check([x[2] for x in world[0]] == list(range(len(expected))), "%s: numbered from 0" % name)
    return seqs


def check_clock(name, traces, shifts=None):
    syncs = [t.get("otherData", {}).get("clock_sync") for t in traces]
    check(all(s and len(s["samples"]) == 2 for s in syncs), "%s: two clock samples on every rank" % name)
    if not all(syncs):
        return
    check(all(s["samples"][i]["offset_ns"] == 0 for s in syncs[:1] for i in range(2)), "%s: rank 0 is 0" % name)
    for r, s in enumerate(syncs):
        check(s["rank"] == r and s["world_size"] == N, "%s rank %d: clock_sync's rank" % (name, r))
        check(s["bound_ns"] == max(x["bound_ns"] for x in s["samples"]), "%s rank %d: the worst bound" % (name, r))
    if shifts is None:  # one host, one CLOCK_MONOTONIC: the true offset is 0
        for r, s in enumerate(syncs):
            for x in s["samples"]:
                check(abs(x["offset_ns"]) <= x["bound_ns"] + 2,
                      "%s rank %d: offset %d ns beyond its bound %d ns" % (name, r, x["offset_ns"], x["bound_ns"]))
        return
    cs = [t["otherData"]["clock_shift"] for t in traces]

    def local(r, m):  # rank r's clock at monotonic time m
        return m + cs[r]["offset_ns"] + cs[r]["drift_ppb"] * (m - cs[r]["start_ns"]) / 1e9

    def mono(r, t):  # the inverse
        d = cs[r]["drift_ppb"] / 1e9
        return (t - cs[r]["offset_ns"] + d * cs[r]["start_ns"]) / (1 + d)

    worst = 0
    for r in range(1, N):
        s = syncs[r]
        for x in s["samples"]:
            m = mono(r, x["at_ns"])
            truth = local(0, m) - local(r, m)
            err = abs(x["offset_ns"] - truth)
            worst = max(worst, x["bound_ns"])
            check(err <= x["bound_ns"] * 1.001 + 2, "%s rank %d: offset %d ns, true %.0f ns: off by %.0f ns, bound %d"
                  % (name, r, x["offset_ns"], truth, err, x["bound_ns"]))
        a, b = s["samples"]
        true_drift = 1e9 * ((1 + cs[0]["drift_ppb"] / 1e9) / (1 + cs[r]["drift_ppb"] / 1e9) - 1)
        span = b["at_ns"] - a["at_ns"]
        room = (a["bound_ns"] + b["bound_ns"]) * 1e9 / span + 1
        check(abs(s["drift_ppb"] - true_drift) <= room, "%s rank %d: drift %d ppb, true %.0f, room %.0f"
              % (name, r, s["drift_ppb"], true_drift, room))
        print("mpi: %s rank %d: offset %+.3f ms (true %+.3f), bound %d ns; drift %+d ppb (true %+.0f, room %.0f "
              "over %.2f s)" % (name, r, a["offset_ns"] / 1e6, (local(0, mono(r, a["at_ns"])) - a["at_ns"]) / 1e6,
                                a["bound_ns"], s["drift_ppb"], true_drift, room, span / 1e9))
    print("mpi: %s: worst bound %d ns" % (name, worst))


def check_merge(name):
    merged = os.path.join(OUT, name + ".merged.json")
    ins = [glob.glob(os.path.join(OUT, "%s.rank%d.json.parts" % (name, r), "*.json"))[0] for r in range(N)]
    p = subprocess.run([MLPROF, "merge", "-o", merged] + ins, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(p.returncode == 0, "%s: mlprof merge: %s" % (name, p.stdout))
    if p.returncode:
        return
    with open(merged) as f:
        ev = json.load(f)["traceEvents"]
    ends = {}
    for e in ev:
        if e.get("cat") == "mpi" and e.get("ph") in "sf":
            ends.setdefault(str(e["id"]), []).append((e["ph"], e["pid"]))
    check(ends and all(sorted(x[0] for x in v) == ["f", "s"] and v[0][1] != v[1][1] for v in ends.values()),
          "%s: the merged trace links every message across two processes" % name)


# ------------------------------------------------------------------ main

MPICC, MPIRUN = shutil.which("mpicc"), shutil.which("mpirun")
if not MPIRUN:
    skip("no mpirun (Debian: openmpi-bin)")
if not MPICC:
    skip("no mpicc (Debian: libopenmpi-dev)")
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "rank.sh"), "w") as f:
    f.write(WRAPPER)
app = os.path.join(OUT, "mpi_app")
# a sanitizer build's preload library needs its runtime in the program (OMPI_CC names the compiler)
CFLAGS = os.environ.get("MPI_CHECK_CFLAGS", "").split()
subprocess.run([MPICC, "-O1"] + CFLAGS + ["-o", app, os.path.join(HERE, "mpi_app.c")], check=True)

def check_c(name, traces):
    """mpi_app.c's messages and collectives, exactly."""
    for r, t in enumerate(traces):
        check_c_rank(name, r, t)
    check_flows(name, traces, ("MPI_Send", "MPI_Isend", "MPI_Sendrecv"),
                ("MPI_Recv", "MPI_Waitall", "MPI_Wait", "MPI_Sendrecv"), 5)
    seqs = check_collectives(name, traces, ["MPI_Barrier", "MPI_Barrier", "MPI_Bcast", "MPI_Allreduce",
                                            "MPI_Reduce", "MPI_Allgather", "MPI_Alltoall", "MPI_Gather",
                                            "MPI_Scatter", "MPI_Scan", "MPI_Iallreduce", "MPI_Ibarrier"])
    halves = [[x for x in s if x[1] != 1] for s in seqs]
    check(all(len(h) == 1 and h[0][0] == "MPI_Allreduce" and h[0][2] == 0 for h in halves),
          "%s: one split allreduce each" % name)
    if all(len(h) == 1 for h in halves):
        check(halves[0][0][1] == halves[2][0][1] and halves[1][0][1] == halves[3][0][1] and
              halves[0][0][1] != halves[1][0][1], "%s: the halves' communicator ids (even ranks, odd ranks)" % name)
    check_clock(name, traces)
    check_merge(name)


want = {"MPI_Send": 2, "MPI_Recv": 2, "MPI_Isend": 2, "MPI_Irecv": 2, "MPI_Waitall": 1, "MPI_Wait": 4,
        "MPI_Sendrecv": 1, "MPI_Barrier": 2, "MPI_Bcast": 1, "MPI_Allreduce": 2, "MPI_Reduce": 1,
        "MPI_Allgather": 1, "MPI_Alltoall": 1, "MPI_Gather": 1, "MPI_Scatter": 1, "MPI_Scan": 1,
        "MPI_Win_fence": 2, "MPI_Put": 1, "MPI_Iallreduce": 1, "MPI_Ibarrier": 1}
def check_c_rank(name, r, t):
    nxt, prv = (r + 1) % N, (r - 1) % N
    check("mpi_flows_lost" not in t.get("otherData", {}), name + " rank %d: flows lost" % r)
    check(counts(t) == want, name + " rank %d: counts %s" % (r, counts(t)))
    sends = by_name(t, "MPI_Send")
    check([(e["args"]["bytes"], e["args"]["peer"], e["args"]["tag"], e["args"]["seq"]) for e in sends] ==
          [(100 * (r + 1), nxt, 7, 0), (100 * (r + 1), nxt, 7, 1)], name + " rank %d: MPI_Send %s" % (r, sends))
    recvs = by_name(t, "MPI_Recv")
    check([(e["args"]["bytes"], e["args"]["peer"], e["args"]["tag"], e["args"]["seq"]) for e in recvs] ==
          [(100 * (prv + 1), prv, 7, 0), (100 * (prv + 1), prv, 7, 1)], name + " rank %d: MPI_Recv %s" % (r, recvs))
    isends = by_name(t, "MPI_Isend")
    check([(e["args"]["bytes"], e["args"]["peer"], e["args"]["tag"]) for e in isends] == [(256, prv, 9), (8, prv, 11)],
          name + " rank %d: MPI_Isend %s" % (r, isends))
    irecvs = by_name(t, "MPI_Irecv")
    check([(e["args"]["peer"], e["args"]["tag"]) for e in irecvs] == [(nxt, 9), (nxt, 11)],
          name + " rank %d: MPI_Irecv %s" % (r, irecvs))
    wall = by_name(t, "MPI_Waitall")[0]["args"]
    check(wall == {"completed": 2, "bytes": 512}, name + " rank %d: MPI_Waitall %s" % (r, wall))
    waits = [e["args"] for e in by_name(t, "MPI_Wait")]
    check([(w["request"], w["bytes"], w["peer"], w["tag"], w["seq"]) for w in waits[:2]] ==
          [(irecvs[1]["args"]["request"], 8, nxt, 11, 0), (isends[1]["args"]["request"], 8, prv, 11, 0)],
          name + " rank %d: MPI_Wait %s" % (r, waits))
    icoll = [by_name(t, "MPI_Iallreduce")[0]["args"], by_name(t, "MPI_Ibarrier")[0]["args"]]
    check([(w["request"], w["bytes"], w["comm"], w["seq"]) for w in waits[2:]] ==
          [(icoll[0]["request"], 64, 1, 10), (icoll[1]["request"], 0, 1, 11)],
          name + " rank %d: MPI_Wait of the nonblocking collectives %s" % (r, waits[2:]))
    sr = by_name(t, "MPI_Sendrecv")[0]["args"]
    check((sr["bytes"], sr["peer"], sr["recv_bytes"], sr["recv_peer"], sr["seq"], sr["recv_seq"]) ==
          (16, (r + 2) % N, 16, (r + 2) % N, 0, 0), name + " rank %d: MPI_Sendrecv %s" % (r, sr))
    coll = {e["name"]: e["args"] for e in mpi_spans(t) if e.get("args", {}).get("comm") == 1 and "peer" not in e["args"]}
    check(coll["MPI_Bcast"]["bytes"] == 1000 and coll["MPI_Bcast"]["root"] == 0, name + " rank %d: MPI_Bcast" % r)
    check(coll["MPI_Reduce"]["bytes"] == 16 and coll["MPI_Reduce"]["root"] == 2, name + " rank %d: MPI_Reduce" % r)
    check(coll["MPI_Scatter"]["bytes"] == (48 if r == 1 else 12), name + " rank %d: MPI_Scatter bytes" % r)
    check(coll["MPI_Alltoall"]["bytes"] == 16 and coll["MPI_Allgather"]["bytes"] == 8, name + " rank %d: all-to-all" % r)
    put = by_name(t, "MPI_Put")[0]["args"]
    check(put == {"bytes": 4, "peer": nxt}, name + " rank %d: MPI_Put %s" % (r, put))


# --- the C program, under mlprof run and linked with libmlprof
check_c("c", mpirun("c", app))
if LIBDIR and not SANITIZED:
    linked = os.path.join(OUT, "mpi_app_linked")
    subprocess.run([MPICC, "-O1", "-o", linked, os.path.join(HERE, "mpi_app.c"), "-L" + LIBDIR, "-lmlprof",
                    "-Wl,-rpath," + LIBDIR], check=True)
    check_c("linked", mpirun("linked", linked, linked=True))

# --- mpi4py
if SANITIZED:
    print("mpi: mpi4py skipped: python3 has no sanitizer runtime")
elif subprocess.run([PYTHON, "-c", "import mpi4py"], stderr=subprocess.DEVNULL).returncode != 0:
    print("mpi: mpi4py skipped: python3-mpi4py is not installed")
else:
    traces = mpirun("py", PYTHON, os.path.join(HERE, "mpi_app.py"))
    for r, t in enumerate(traces):
        nxt, prv = (r + 1) % N, (r - 1) % N
        c = {k: v for k, v in counts(t).items() if k in ("MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv",
                                                         "MPI_Wait", "MPI_Barrier", "MPI_Bcast", "MPI_Allreduce")}
        check(c == {"MPI_Send": 3, "MPI_Recv": 3, "MPI_Isend": 1, "MPI_Irecv": 1, "MPI_Wait": 2, "MPI_Barrier": 1,
                    "MPI_Bcast": 1, "MPI_Allreduce": 1}, "py rank %d: counts %s" % (r, counts(t)))
        sends = [(e["args"]["bytes"], e["args"]["peer"], e["args"]["seq"]) for e in by_name(t, "MPI_Send")]
        check(sends == [(10 * (r + 1), nxt, i) for i in range(3)], "py rank %d: MPI_Send %s" % (r, sends))
        recvs = [(e["args"]["bytes"], e["args"]["peer"], e["args"]["seq"]) for e in by_name(t, "MPI_Recv")]
        check(recvs == [(10 * (prv + 1), prv, i) for i in range(3)], "py rank %d: MPI_Recv %s" % (r, recvs))
        bc = by_name(t, "MPI_Bcast")[0]["args"]
        check(bc["bytes"] == 50 and bc["root"] == 3, "py rank %d: MPI_Bcast %s" % (r, bc))
    check_flows("py", traces, ("MPI_Send", "MPI_Isend"), ("MPI_Recv", "MPI_Wait"), 4)
    check_clock("py", traces)

# --- injected clock offsets and drifts (the test-only clock_shift key)
shifts = ["50000000:100000", "-50000000:-100000", "-50000000:100000", "50000000:0"]
traces = mpirun("clock", app, "2", shifts=shifts)
check_clock("clock", traces, shifts)

if failures:
    sys.exit("mpi: %d failures" % len(failures))
print("mpi: all checks passed")
