"""mlprof.dist on 2 ranks of torch.distributed (gloo, a file store: no port),
each a process of its own: the spans of every collective and message with
their exact bytes and the same group and seq on both ranks, `mlprof merge` of
the two traces on one timeline, `mlprof ranks` matching the collectives, and
the clock offset injected in rank 1 (the test-only clock_shift key) found by
mlprof.dist.sync() within the bound it wrote."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this torch has no torch.distributed with gloo", allow_module_level=True)
import mlprof  # noqa: E402

CLI = os.path.join(os.path.dirname(mlprof._lib.lib.path), "mlprof")
needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"no mlprof command beside the library ({CLI})")
SHIFT_NS, DRIFT_PPB = 50_000_000, 100_000  # rank 1's clock: 50 ms ahead, 100 ppm fast


def spawn(tmp, args, shift=""):
    """Runs the 2 ranks; their traces, by rank."""
    store = os.path.join(tmp, "store")
    procs = [subprocess.Popen(args(r, store, shift if r == 1 else ""), cwd=tmp, stdout=subprocess.PIPE,
                              env=dict(os.environ, OMP_NUM_THREADS="1", RANK=str(r), WORLD_SIZE="2"),
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    for p in procs:
        out = p.communicate(timeout=240)[0]
        assert p.returncode == 0, out
    return procs


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("dist"))
    spawn(tmp, lambda r, store, shift: [sys.executable, os.path.join(HERE, "dist_worker.py"), str(r), "2", store,
                                        tmp, shift],
          f"{SHIFT_NS}:{DRIFT_PPB}")
    paths = [os.path.join(tmp, f"rank{r}.json") for r in range(2)]
    return tmp, paths, [json.load(open(p)) for p in paths]


def spans(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "torch.distributed" and e.get("ph") == "X"]


def test_collectives_and_messages(job):
    _, _, traces = job
    expect = [("all_reduce", 0, 4000), ("broadcast", 1, 600), ("all_gather", 2, 80), ("barrier", 3, 0),
              ("reduce", 4, 40), ("gather", 5, 16), ("scatter", 6, None), ("all_to_all_single", 7, 16),
              ("all_to_all", 8, 16), ("all_gather_into_tensor", 9, 8), ("reduce_scatter", 10, 16),
              ("reduce_scatter_tensor", 11, 16), ("all_reduce", 12, 16)]
    groups = set()
    for rank, t in enumerate(traces):
        assert t["distributedInfo"]["rank"] == rank
        s = spans(t)
        colls = [e for e in s if e["name"] not in ("send", "recv", "isend", "irecv", "wait")]
        want = [(n, q, b if b is not None else (48 if rank == 0 else 24)) for n, q, b in expect]  # scatter's root
        assert [(e["name"], e["args"]["seq"], e["args"]["bytes"]) for e in colls] == want
        assert [e["args"].get("error") for e in colls[8:12]] == ["RuntimeError"] * 4
        assert "error" not in colls[7]["args"] and colls[10]["args"]["op"] == "SUM"
        assert colls[5]["args"]["root"] == 0 and colls[6]["args"]["root"] == 0
        for e in colls:
            assert e["args"]["group_size"] == 2 and e["args"]["rank"] == rank
            groups.add(e["args"]["group"])
        assert colls[0]["args"]["op"] == "SUM" and colls[0]["args"]["dtype"] == "float32"
        assert colls[0]["args"]["count"] == 1000
        assert colls[1]["args"]["root"] == 1 and colls[1]["args"]["dtype"] == "int32"
        assert colls[4]["args"]["op"] == "MAX" and colls[4]["args"]["root"] == 0
        # the async all_reduce: its call, then its wait with the same request
        assert colls[12]["args"]["async"] == 1
        wait = [e for e in s if e["name"] == "wait" and e["args"]["op"] == "all_reduce"]
        assert len(wait) == 1 and wait[0]["args"]["request"] == colls[12]["args"]["request"]
        assert "seq" not in wait[0]["args"] and wait[0]["ts"] >= colls[12]["ts"]
        p2p = [(e["name"], e["args"].get("peer"), e["args"]["tag"], e["args"].get("seq"), e["args"]["bytes"])
               for e in s if e["name"] in ("send", "recv", "isend", "irecv")]
        if rank == 0:
            assert p2p == [("send", 1, 0, 0, 56), ("isend", 1, 5, 0, 12), ("send", 1, 9, 0, 8), ("send", 1, 9, 1, 8)]
        else:  # a receive from any source knows its peer and number once it has come: recv's span, irecv's wait
            assert p2p == [("recv", 0, 0, 0, 56), ("irecv", 0, 5, 0, 12), ("irecv", None, 9, None, 8),
                           ("recv", 0, 9, 1, 8)]
            waits = [e["args"] for e in s if e["name"] == "wait" and e["args"]["op"] == "irecv"]
            assert [(w.get("peer"), w.get("seq")) for w in waits] == [(0, None), (0, 0)], waits
    assert len(groups) == 1  # the world's id, alike on both ranks


@needs_cli
def test_merge_one_timeline(job):
    tmp, paths, traces = job
    out = os.path.join(tmp, "merged.json")
    r = subprocess.run([CLI, "merge", *paths, "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = json.load(open(out))
    merge = m["otherData"]["merge"]
    assert merge["method"] == "clock sync" and merge["clock_sync"]["method"] == "torch_pingpong"
    assert [i["rank"] for i in merge["inputs"]] == [0, 1]
    pids = {e["pid"] for e in spans(m)}
    assert len(pids) == 2 and len(spans(m)) == len(spans(traces[0])) + len(spans(traces[1]))
    # rank 1's 50 ms are taken out: neither rank ends an all_reduce, all_gather or barrier before the
    # other began it (it needs the other's data), on the merged clock within the bound (load-proof)
    bound_us = merge["clock_sync"]["worst_bound_ns"] / 1000 + 0.002
    by = {}
    for e in spans(m):
        if "seq" in e["args"] and e["name"] not in ("send", "recv", "isend", "irecv", "wait"):
            by.setdefault(e["args"]["seq"], []).append(e)
    assert sorted(by) == list(range(13)) and all(len(v) == 2 for v in by.values())
    for seq in (0, 2, 3):
        a, b = by[seq]
        assert a["ts"] + a["dur"] + bound_us >= b["ts"] and b["ts"] + b["dur"] + bound_us >= a["ts"], (seq, a, b)


@needs_cli
def test_ranks_match_collectives(job):
    _, paths, _ = job
    r = subprocess.run([CLI, "ranks", *paths], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "collectives matched across ranks: 13" in r.stdout and "torch comm" in r.stdout, r.stdout
    assert "repeat another call" not in r.stderr


def test_sync_recovers_injected_offset(job):
    _, _, traces = job
    cs0, cs1 = (t["otherData"]["clock_sync"] for t in traces)
    assert cs0["offset_ns"] == 0 and cs0["rank"] == 0 and cs1["rank"] == 1
    shift = traces[1]["otherData"]["clock_shift"]
    assert (shift["offset_ns"], shift["drift_ppb"]) == (SHIFT_NS, DRIFT_PPB)
    assert len(cs1["samples"]) == 3  # trace()'s start, sync(), trace()'s end
    for s in cs1["samples"]:
        # rank 1 read T = t + SHIFT + DRIFT * (t - start): rank 0's clock (unshifted, one host) was t then
        T = s["at_ns"]
        t = (T - SHIFT_NS + DRIFT_PPB * shift["start_ns"] / 1e9) / (1 + DRIFT_PPB / 1e9)
        true = t - T
        assert s["bound_ns"] == (s["rtt_ns"] + 1) // 2 and s["exchanges"] == 32
        # within the bound, but for the drift inside one round trip and rounding
        assert abs(s["offset_ns"] - true) <= s["bound_ns"] + DRIFT_PPB * s["rtt_ns"] / 1e9 + 2, (s, true)
    assert cs1["bound_ns"] == max(s["bound_ns"] for s in cs1["samples"])


@needs_cli
def test_unmodified_script_under_mlprof_run(tmp_path):
    """python3 -m mlprof.dist SCRIPT under mlprof run: no line of the script names mlprof."""
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=int(sys.argv[2]),"
        " world_size=2)\n"
        "dist.all_reduce(torch.ones(64))\n"
        "dist.broadcast(torch.ones(8, dtype=torch.float64), src=0)\n"
        "dist.destroy_process_group()\n")
    job = str(tmp_path / "job.json")
    python = os.path.join(HERE, "..", "..", "python")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = python + (os.pathsep + old if old else "")
    try:  # RANK and WORLD_SIZE as torchrun sets them: a trace per rank, merged by the last to finish
        spawn(str(tmp_path), lambda r, store, _: [CLI, "run", "-q", "-o", job, "--", sys.executable, "-m",
                                                   "mlprof.dist", str(script), store, str(r)])
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    m = json.load(open(job))
    got = sorted((e["args"]["rank"], e["name"], e["args"]["seq"], e["args"]["bytes"]) for e in spans(m))
    assert got == [(0, "all_reduce", 0, 256), (0, "broadcast", 1, 64), (1, "all_reduce", 0, 256),
                   (1, "broadcast", 1, 64)]
    assert m["otherData"]["merge"]["method"] == "clock sync"


def test_torch_trace_distributed_before_init(tmp_path):
    """mlprof.torch.trace(distributed=True) entered before the group exists: the
    operators and the collectives, the first clock sample at the first collective."""
    script = tmp_path / "early.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.join(HERE, '..', '..', 'python')!r})\n"
        "import torch, torch.distributed as dist, mlprof, mlprof.torch\n"
        "rank = int(sys.argv[2])\n"
        "mlprof.set_config(filename=os.path.join(os.path.dirname(sys.argv[1]), 'early%r.json'), rank=rank)\n"
        "mlprof.set_state('run')\n"
        "with mlprof.torch.trace(distributed=True):\n"
        "    dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=rank, world_size=2)\n"
        "    t = torch.ones(16) * 2\n"
        "    dist.all_reduce(t)\n"
        "mlprof.dump()\n"
        "dist.destroy_process_group()\n")
    spawn(str(tmp_path), lambda r, store, _: [sys.executable, str(script), store, str(r)])
    for r in range(2):
        t = json.load(open(tmp_path / f"early{r}.json"))
        assert [(e["name"], e["args"]["seq"], e["args"]["bytes"]) for e in spans(t)] == [("all_reduce", 0, 64)]
        assert any(e.get("cat") == "aten" and e["name"] == "aten::mul" for e in t["traceEvents"])
        assert len(t["otherData"]["clock_sync"]["samples"]) == 2  # the first collective's, trace()'s end


def test_rank_from_the_program_without_a_launcher(tmp_path):
    """torch.multiprocessing.spawn's way: no launcher variable says the rank (the
    script gives init_process_group its rank): the clock samples mlprof.dist takes
    say it, so %r names each rank's trace and distributedInfo gives rank and size,
    rather than both ranks writing one "norank" file over each other."""
    script = tmp_path / "spawned.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.join(HERE, '..', '..', 'python')!r})\n"
        "import torch, torch.distributed as dist, mlprof, mlprof.torch\n"
        "rank = int(sys.argv[2])\n"
        "mlprof.set_config(filename=os.path.join(os.path.dirname(sys.argv[1]), 'spawned_rank%r.json'))\n"
        "dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=rank, world_size=2)\n"
        "mlprof.set_state('run')\n"
        "with mlprof.torch.trace(distributed=True):\n"
        "    t = torch.ones(16)\n"
        "    dist.all_reduce(t)\n"
        "mlprof.dump()\n"
        "dist.destroy_process_group()\n")
    store = str(tmp_path / "store")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MLPROF_RANK") and not k.startswith(("OMPI_", "PMI", "SLURM_"))}
    procs = [subprocess.Popen([sys.executable, str(script), store, str(r)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=dict(env, OMP_NUM_THREADS="1"))
             for r in range(2)]
    for p in procs:
        out = p.communicate(timeout=240)[0]
        assert p.returncode == 0, out
    assert not (tmp_path / "spawned_ranknorank.json").exists()
    for r in range(2):
        t = json.load(open(tmp_path / f"spawned_rank{r}.json"))
        info = t.get("distributedInfo", {})
        assert (info.get("rank"), info.get("world_size"), info.get("source")) == (r, 2, "program"), info
        assert [e["name"] for e in spans(t)] == ["all_reduce"]
