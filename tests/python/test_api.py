"""The Python bindings against the C library, each API read back from the
trace (json) or the statistics: MXNet's, MegEngine's and RAF's styles, and
the errors. Run by make check with pytest; the library comes from the build
tree (or LIBMLPROF_PATH)."""
import ctypes
import json
import os
import re
import sys
import threading
import warnings

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mlprof  # noqa: E402
import mlprof.mxnet  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(tmp_path):
    """Each test starts stopped, with nothing recorded and its own files."""
    mlprof.set_state("stop")
    mlprof.clear()
    mlprof.set_config(filename=str(tmp_path / "trace.json"), profile_all=False, profile_memory=False,
                      aggregate_stats=True, memory_svg="", memory_csv="", level=1, stats_file="")
    yield
    mlprof.set_state("stop")


def events(trace, ph=None, name=None):
    return [e for e in trace["traceEvents"] if (ph is None or e["ph"] == ph) and (name is None or e["name"] == name)]


def test_version_and_library():
    assert mlprof.version().count(".") == 2
    assert "libmlprof.so" in os.path.basename(mlprof._lib.lib.path)


def test_every_function_is_declared():
    # argtypes and restype on each, so that a wrong call is a TypeError
    for name, (restype, argtypes) in mlprof._lib.PROTOTYPES.items():
        fn = getattr(mlprof._lib.lib, name)
        assert fn.argtypes == argtypes and fn.restype == restype, name
    with pytest.raises(ctypes.ArgumentError):
        mlprof._lib.lib.mlprof_set_state("run")


def test_config_round_trip_and_errors():
    mlprof.set_config(dump_period=2.5, continuous_dump=False)
    assert mlprof.get_config("dump_period") == "2.5"
    mlprof.set_config("profile_api", True)
    assert mlprof.get_config("profile_api") == "true"
    with pytest.raises(mlprof.MlprofError) as e:
        mlprof.set_config(no_such_key=1)
    assert e.value.name == "MLPROF_EKEY" and "no_such_key" in str(e.value)
    with pytest.raises(mlprof.MlprofError) as e:
        mlprof.set_config(dump_period="soon")
    assert e.value.name == "MLPROF_EVALUE" and "dump_period" in str(e.value) and "soon" in str(e.value)
    # all or none: a bad key leaves the good one unset
    with pytest.raises(mlprof.MlprofError):
        mlprof.set_config(dump_period=7, level="high")
    assert mlprof.get_config("dump_period") == "2.5"
    with pytest.raises(ValueError):
        mlprof.set_state("go")
    with pytest.raises(ValueError):
        mlprof.dumps(sort_by="speed")


def test_config_file(tmp_path):
    path = tmp_path / "mlprof.conf"
    path.write_text("dump_period = 3\nbogus = 1\n")
    with pytest.raises(mlprof.MlprofError) as e:
        mlprof.load_config(path)
    assert str(e.value) == f'{path}:2: unknown configuration key "bogus"' and e.value.name == "MLPROF_EKEY"


def test_mxnet_style(tmp_path):
    dom = mlprof.Domain("py")
    task, frame, ev = dom.new_task("step"), dom.new_frame("batch"), mlprof.Event("load")
    counter, marker = dom.new_counter("images", 0), dom.new_marker("epoch_end")
    before_run = mlprof.now_ns()
    mlprof.set_state("run")
    for i in range(3):
        with frame:
            with ev:
                pass
            task.start(flops=1000 * (i + 1), shape="[8,3]")
            counter += 8
            task.stop()
    counter -= 4
    marker.mark("global")
    mlprof.pause()
    assert mlprof.is_paused()
    with task:  # not recorded while paused
        pass
    mlprof.resume()
    with mlprof.scope("model"):
        with mlprof.scope("conv1") as where:
            assert where == "model:conv1:"
            with task:
                pass
    path = mlprof.dump(True)
    assert path == str(tmp_path / "trace.json") and mlprof.get_state() == "stop"
    with open(path) as f:
        t = json.load(f)
    steps = events(t, "X", "step")
    assert len(steps) == 4
    assert [s["args"].get("flops") for s in steps[:3]] == [1000, 2000, 3000] and steps[0]["args"]["shape"] == "[8,3]"
    assert steps[3]["args"]["scope"] == "model:conv1:"
    assert len(events(t, "X", "load")) == 3
    assert len([e for e in events(t, "b") if e["name"] == "batch"]) == 3
    values = [e["args"]["value"] for e in events(t, "C", "images")]
    assert values == [8, 16, 24, 20] and counter.value == 20  # its first value was set before the run
    assert events(t, "i", "epoch_end")[0]["s"] == "g"
    # the trace began recording at set_state("run"), before its first event
    first = min(e["ts"] for e in t["traceEvents"] if e.get("ph") in ("X", "b", "C", "i"))
    assert before_run <= t["otherData"]["start_ns"] <= first * 1000 + 1000, (before_run, t["otherData"], first)


def test_dumps_table_and_json():
    dom = mlprof.Domain("stats")
    fast, slow = dom.new_task("fast"), dom.new_task("slow")
    mlprof.set_state("run")
    for _ in range(5):
        with fast:
            pass
    with slow:
        sum(range(200000))
    mlprof.set_state("stop")
    table = mlprof.dumps()
    assert "Domain: stats" in table and table.index("slow") < table.index("fast")
    by_count = mlprof.dumps(sort_by="count")
    assert by_count.index("fast") < by_count.index("slow")
    assert mlprof.dumps(sort_by="count", ascending=True).index("slow") < by_count.index("slow") + len(by_count)
    doc = json.loads(mlprof.dumps(format="json", reset=True))
    rows = {r["name"]: r for d in doc["domains"] if d["name"] == "stats" for r in d["durations"]}
    assert rows["fast"]["count"] == 5 and rows["slow"]["count"] == 1
    after = json.loads(mlprof.dumps(format="json"))
    assert not [d for d in after["domains"] if d["name"] == "stats"]
    # MXNet's scripts often turn the statistics off: dumps() is then "", said
    mlprof.set_config(aggregate_stats=False)
    try:
        with pytest.warns(RuntimeWarning, match="aggregate_stats"):
            assert mlprof.dumps() == "" and mlprof.dumps(format="json", reset=True) == ""
    finally:
        mlprof.set_config(aggregate_stats=True)


def test_threads_and_decorators():
    dom = mlprof.Domain("threads")
    work = dom.new_task("work")

    @work
    def job():
        return 42

    mlprof.set_state("run")
    results = []
    threads = [threading.Thread(target=lambda: results.append(job()), name=f"w{i}") for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t = mlprof.get()
    assert results == [42] * 4
    assert len({e["tid"] for e in events(t, "X", "work")}) == 4


def test_raf_style(tmp_path):
    dom = mlprof.Domain("raf")
    op = dom.new_task("op")
    deep = mlprof.Domain("raf_deep", level=3).new_task("deep")
    mlprof.start(level=1)
    with op:
        pass
    with deep:  # above the level: not recorded
        pass
    live = mlprof.get()
    assert len(events(live, "X", "op")) == 1 and not events(live, "X", "deep")
    mlprof.stop()
    mlprof.clear()
    mlprof.start(level=3)
    with deep:
        pass
    out = mlprof.dump(str(tmp_path / "raf.json"))
    assert out == str(tmp_path / "raf.json")
    with open(out) as f:
        t = json.load(f)
    assert len(events(t, "X", "deep")) == 1 and not events(t, "X", "op")


def test_memory():
    mlprof.set_config(profile_memory=True)
    mlprof.set_state("run")
    with mlprof.scope("tensors"):
        mlprof.memory_alloc(0x1000, 4096, tag="a")
        mlprof.memory_alloc(0x9000, 1024, device=1, tag="b")
        mlprof.memory_free(0x1000)
    cpu, gpu = mlprof.memory_info(0), mlprof.memory_info(1)
    assert cpu["peak_used"] == 4096 and cpu["used"] == 0 and cpu["allocs"] == 1 and cpu["frees"] == 1
    assert gpu["used"] == 1024
    with pytest.raises(mlprof.MlprofError):
        mlprof.memory_info(5000)


def test_megengine_style(tmp_path):
    out = tmp_path / "prof"
    dom = mlprof.Domain("meg")
    step = dom.new_task("train_step")

    @mlprof.profile(path=out, formats=["chrome_timeline.json", "stats.txt", "memory_flow.svg"], sample_rate=1)
    def train():
        for i in range(2):
            with step:
                mlprof.memory_alloc(0x5000 + i * 0x1000, 100, tag="act")
                mlprof.memory_free(0x5000 + i * 0x1000)
        return "done"

    assert train() == "done"
    stem = out / str(os.getpid())
    with open(f"{stem}.chrome_timeline.json") as f:
        t = json.load(f)
    assert len(events(t, "X", "train_step")) == 2
    assert "train_step" in open(f"{stem}.stats.txt").read()
    assert open(f"{stem}.memory_flow.svg").read().startswith("<?xml") or "<svg" in open(f"{stem}.memory_flow.svg").read()
    with mlprof.Profiler(path=out / "again") as p:
        with step:
            pass
    assert set(p.outputs) == {"chrome_timeline.json"} and os.path.exists(p.outputs["chrome_timeline.json"])
    with pytest.raises(ValueError):
        mlprof.Profiler(formats=["flamegraph.html"])
    assert mlprof.get_config("profile_memory") == "false"  # the profiler's keys are put back


def test_a_second_finished_dump_keeps_the_trace(tmp_path, capfd):
    # MXNet's dump() then dump_profile(): nothing recorded in between, so the
    # trace written first must not be replaced by an empty one
    task = mlprof.Domain("again").new_task("kept")
    mlprof.set_state("run")
    with task:
        pass
    path = mlprof.dump(True)
    first = open(path).read()
    assert '"kept"' in first
    mlprof.dump(True)
    mlprof.dump(False)
    assert open(path).read() == first
    assert "is kept as it is" in capfd.readouterr().err
    mlprof.clear()  # asked for: the next dump writes the empty trace
    mlprof.dump(True)
    assert '"kept"' not in open(path).read()
    mlprof.set_state("run")  # a new run, even an empty one, is a new trace
    with task:
        pass
    mlprof.dump(True)
    assert '"kept"' in open(path).read()


def test_mxnet_names_and_values(tmp_path):
    import mlprof.mxnet as mx
    dom = mx.profiler.Domain("named")
    assert str(dom) == "named" and str(dom.new_task("t")) == "t" and str(dom.new_counter("c")) == "c"
    assert str(dom.new_marker("m")) == "m" and str(mx.Event("e")) == "e" and str(dom.new_frame("f")) == "f"
    with pytest.warns(UserWarning, match="deprecated"):  # MXNet's category: shown even from a library's module
        mx.profiler_set_config(mode="imperative", filename=str(tmp_path / "dep.json"))
    assert mlprof.get_config("profile_imperative") == "true" and mlprof.get_config("filename").endswith("dep.json")
    mx.set_config(profile_symbolic=False, profile_imperative=False)
    assert mlprof.get_config("profile_operator") == "false"
    mx.set_config(profile_symbolic=True)
    # the server's profiler is not this process: a warning, and nothing changes here
    with pytest.warns(RuntimeWarning, match="kvstore server"):
        mx.set_state("run", profile_process="server")
    assert mlprof.get_state() == "stop"
    with pytest.warns(RuntimeWarning):
        mx.set_config(profile_process="server", filename="elsewhere.json")
    assert mlprof.get_config("filename").endswith("dep.json")
    with pytest.raises(ValueError):
        mx.set_state("run", profile_process="both")
    with pytest.raises(mlprof.MlprofError, match="profile_process"):
        mx.set_config(profile_process="both")
    # scope(): "<unk>:" by default, appended to the outer one unless append_mode=False
    with mx.scope() as unknown:
        assert unknown == "<unk>:"
    with mx.scope("net") as a, mx.scope("fc") as b, mx.scope("loss", append_mode=False) as c:
        assert (a, b, c) == ("net:", "net:fc:", "loss:")
        assert mlprof._lib.lib.mlprof_scope_current() == b"loss:"
    assert mlprof._lib.lib.mlprof_scope_current() == b""


def test_megengine_traced_calls_during_a_recording(tmp_path):
    # a call made while a recording is on (a script's own, or a whole run's under
    # mlprof run) is part of it: get_profile() reads the calls' events from it
    from mlprof.megengine import trace
    mlprof.clear()
    mlprof.set_config(filename=str(tmp_path / "run.json"))
    dom = mlprof.Domain("meg_rec")
    outside, inside = dom.new_task("outside_call"), dom.new_task("in_call")

    @trace(symbolic=True, profiling=True)
    def f(x):
        with inside:
            pass
        return x * 2

    mlprof.set_state("run")
    with outside:
        pass
    assert [f(i) for i in range(3)] == [0, 2, 4]
    with outside:
        pass
    prof = f.get_profile()
    assert len(events(prof, "X", "in_call")) == 3 and not events(prof, "X", "outside_call")
    assert prof["otherData"]["calls"] == 3
    # once that recording is dumped before get_profile(), the call's events are said lost
    f(5)
    mlprof.dump(True)
    with pytest.warns(RuntimeWarning, match="cannot be read back"):
        prof = f.get_profile()
    assert prof["otherData"]["calls"] == 4 and len(events(prof, "X", "in_call")) == 3


def test_megengine_arguments(tmp_path, monkeypatch):
    from mlprof.megengine import Profiler, profile
    monkeypatch.chdir(tmp_path)  # @profile writes into ./profile
    p = Profiler(path=tmp_path, format="memory.csv", formats=["chrome_timeline.json"], profile_device=False)
    assert p.formats == ("memory.csv", "chrome_timeline.json") and p.config["gpu"] == "off"
    assert Profiler(profile_device=True).config["gpu"] == "on"
    with pytest.raises(mlprof.MlprofError, match="no_such_key"):
        Profiler(no_such_key=1)

    @profile  # without parentheses too
    def f():
        return 7

    assert f() == 7
    assert os.listdir(tmp_path / "profile") == [f"{os.getpid()}.chrome_timeline.json"]
    with p:
        with p:  # an entry inside an entry is part of it
            pass
    assert len(p.entries) == 1 and p.get_profile()["traceEvents"] is not None


def test_raf_devices_and_figures():
    import mlprof.raf as raf
    assert [raf.Device(d).mlprof_device for d in ("cpu", "cuda", "cuda(1)", "cuda:2")] == [0, 1, 2, 3]
    assert str(raf.Device("cuda:1")) == "cuda(1)"
    with pytest.raises(ValueError, match="tpu"):
        raf.Device("tpu")
    mlprof.set_state("run")
    raf.memory_profiler.reset()
    raf.memory_profiler.start()
    mlprof.memory_reserve(0x100000, 3 << 20, "cuda:3")
    mlprof.memory_alloc(0x100000, 1 << 19, "cuda:3")
    info = raf.memory_profiler.get_max_memory_info(raf.Device("cuda(3)"))
    assert info["max_used"].value == 0.5 and info["max_allocated"] == 3.0
    raf.memory_profiler.stop()
    assert mlprof.get_state() == "run"  # it was on before: left on


def test_steps_and_schedule(tmp_path):
    # torch.profiler.schedule's meaning: wait 1, warmup 1, active 2, repeat 2 over 10 steps
    got = []
    mlprof.set_config(filename=str(tmp_path / "sched_%c.json"),
                      schedule=mlprof.schedule(wait=1, warmup=1, active=2, repeat=2))
    mlprof.on_trace_ready(lambda path, cycle: got.append((path, cycle, mlprof.get_state())))
    task = mlprof.Domain("py_steps").new_task("work")
    try:
        mlprof.set_state("run")
        states = []
        for i in range(10):
            states.append(mlprof.get_state())
            with task:
                mlprof.add_args(step=i)
            mlprof.Profiler.step()
        assert mlprof.step_number() == 10
    finally:
        mlprof.on_trace_ready(None)
        mlprof.set_config(schedule="")
    assert states == ["stop", "run", "run", "run", "stop", "run", "run", "run", "stop", "stop"]
    assert [(os.path.basename(p), c) for p, c, _ in got] == [("sched_0.json", 0), ("sched_1.json", 1)]
    for path, cycle, _ in got:
        with open(path) as f:
            trace = json.load(f)
        assert sorted(e["args"]["step"] for e in events(trace, "X", "work")) == [2 + 4 * cycle, 3 + 4 * cycle]
        assert sorted(e["name"] for e in events(trace, "X") if e["name"].startswith("ProfilerStep")) == \
            [f"ProfilerStep#{2 + 4 * cycle}", f"ProfilerStep#{3 + 4 * cycle}"]
    with pytest.raises(ValueError):
        mlprof.schedule(wait=1, active=0)
    with pytest.raises(mlprof.MlprofError, match="unknown item"):
        mlprof.set_config(schedule="active:1,nap:2")


def test_megengine_entry_keeps_a_recording_not_yet_dumped(tmp_path):
    # MXNet's style records and stops; a MegEngine entry before its dump()
    # must not throw it away (nor its statistics): the entry is recorded with it
    from mlprof.megengine import Profiler, trace
    mx = tmp_path / "mx.json"
    mlprof.set_config(filename=str(mx))
    dom = mlprof.Domain("mix")
    before, inside = dom.new_task("recorded_before"), dom.new_task("inside_megengine")
    mlprof.set_state("run")
    for _ in range(3):
        with before:
            pass
    mlprof.set_state("stop")
    p = Profiler(path=tmp_path / "meg")
    with pytest.warns(RuntimeWarning, match="3 events recorded earlier are not yet dumped"):
        with p:
            with inside:
                pass
    assert mlprof.get_state() == "stop" and p.entries == [] and not (tmp_path / "meg").exists()
    with pytest.raises(RuntimeError, match="no entry written"):
        p.get_profile()
    assert mlprof.dump() == str(mx)
    t = json.load(open(mx))
    assert len(events(t, "X", "recorded_before")) == 3 and len(events(t, "X", "inside_megengine")) == 1
    stats = json.loads(mlprof.dumps(format="json"))
    counts = {d["name"]: d["count"] for dom_ in stats["domains"] for d in dom_["durations"]}
    assert counts == {"recorded_before": 3, "inside_megengine": 1}

    # trace(profiling=True) likewise; its get_profile() has the call's events only
    mlprof.clear()
    mlprof.set_state("run")
    with before:
        pass
    mlprof.set_state("stop")

    @trace(profiling=True)
    def f():
        with inside:
            pass

    with pytest.warns(RuntimeWarning, match="not yet dumped"):
        f()
    prof = f.get_profile()
    assert len(events(prof, "X", "inside_megengine")) == 1 and not events(prof, "X", "recorded_before")
    mlprof.dump()
    t = json.load(open(mx))
    assert len(events(t, "X", "recorded_before")) == 1 and len(events(t, "X", "inside_megengine")) == 1

    # once dumped, an entry profiles on its own; the statistics the dump kept
    # for dumps() are said to be discarded unless they were read
    with pytest.warns(RuntimeWarning, match="discards the statistics"):
        with p:
            with inside:
                pass
    assert len(p.entries) == 1 and len(events(p.get_profile(), "X", "inside_megengine")) == 1
    assert not events(p.get_profile(), "X", "recorded_before")
    mlprof.set_state("run")
    with before:
        pass
    mlprof.dump()
    mlprof.dumps()  # read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with p:
            pass
        with p:  # the statistics an entry leaves are its own: no warning either
            pass
    assert len(p.entries) == 3 and mlprof.get_state() == "stop"


def test_megengine_overlapping_entries_end(tmp_path):
    from mlprof.megengine import Profiler
    op = mlprof.Domain("meg_overlap").new_task("op")
    p1, p2 = Profiler(path=tmp_path / "p1"), Profiler(path=tmp_path / "p2")
    # started and stopped in an order that does not nest: one recording, from
    # the first start to the last stop, written as p1's entry and listed by both
    p1.start()
    with op:
        pass
    p2.start()
    with op:
        pass
    p1.stop()
    assert mlprof.get_state() == "run"  # p2's entry goes on
    with pytest.raises(RuntimeError, match="not ended yet"):
        p1.get_profile()
    with op:
        pass
    p2.stop()
    assert mlprof.get_state() == "stop"
    assert len(p1.entries) == 1 and p2.entries == p1.entries
    assert os.path.dirname(p1.outputs["chrome_timeline.json"]) == str(tmp_path / "p1")
    assert len(events(p1.get_profile(), "X", "op")) == 3 and p2.get_profile() == p1.get_profile()
    assert not (tmp_path / "p2").exists()

    # entries on two threads that overlap: the same
    a_in, a_out = threading.Event(), threading.Event()

    def first():
        with p1:
            with op:
                pass
            a_in.set()
            b_in.wait()
        a_out.set()

    def second():
        a_in.wait()
        with p2:
            b_in.set()
            a_out.wait()
            with op:
                pass

    b_in = threading.Event()
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert mlprof.get_state() == "stop" and len(p1.entries) == 2 and p2.entries[-1] == p1.entries[-1]
    assert len(events(p1.get_profile(), "X", "op")) == 2

    # a stop() with no entry open is an error that changes nothing
    p3 = Profiler(path=tmp_path / "p3")
    with pytest.raises(RuntimeError, match="no entry of this Profiler is open"):
        p3.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "recording was already on"
        with p3:
            with op:
                pass
            with p3:  # part of the outer entry
                with op:
                    pass
    assert len(p3.entries) == 1 and len(events(p3.get_profile(), "X", "op")) == 2
    assert mlprof.get_state() == "stop"
    with pytest.raises(RuntimeError):
        p3.stop()
    with Profiler(path=tmp_path / "p4") as p4:
        pass
    assert len(p4.entries) == 1 and mlprof.get_state() == "stop"


def test_raf_profilers_stop_each_other_not():
    # RAF's latency and memory profilers are separate global states
    import mlprof.raf as raf
    op = mlprof.Domain("Default Stream").new_task("op")
    raf.utils.memory_profiler.reset()
    raf.utils.memory_profiler.start()
    raf.utils.profiler.clear()
    raf.utils.profiler.start()
    with op:
        mlprof.memory_alloc(0x1000, 1 << 20)
        mlprof.memory_free(0x1000)
    raf.utils.memory_profiler.stop()
    assert mlprof.get_state() == "run" and mlprof.get_config("profile_memory") == "false"
    with op:
        pass
    raf.utils.profiler.stop()
    assert mlprof.get_state() == "stop"
    assert len(events(raf.utils.profiler.get(), "X", "op")) == 2
    assert raf.utils.memory_profiler.get_max_memory_info(raf.Device("cpu"))["max_used"].value == 1.0
    # the other order: the memory profiler keeps recording after the latency one stops
    raf.utils.profiler.clear()
    raf.utils.profiler.start()
    raf.utils.memory_profiler.start()
    raf.utils.profiler.stop()
    assert mlprof.get_state() == "run"
    raf.utils.memory_profiler.reset()
    mlprof.memory_alloc(0x2000, 1 << 21)
    mlprof.memory_free(0x2000)
    raf.utils.memory_profiler.stop()
    assert mlprof.get_state() == "stop"
    assert raf.utils.memory_profiler.get_max_memory_info(raf.Device("cpu"))["max_used"].value == 2.0


def test_counters_and_markers_release_their_handles():
    # MXNet's Counter and Marker destroy their handle when deleted: made
    # again in a loop, they take the same handle instead of a new one each
    dom = mlprof.Domain("handles")
    handles = set()
    for i in range(100):
        handles.add(mlprof.Counter(dom, "loss", i)._h)
    assert len(handles) == 1
    handles = set()
    for _ in range(100):
        m = mlprof.mxnet.Marker(dom, "epoch_end")
        m.mark()
        handles.add(m._h)
        del m
    assert len(handles) == 1
    c = dom.new_counter("images", 5)
    c += 3
    h = c._h
    del c
    again = dom.new_counter("images")
    assert again._h == h and again.value == 0  # a new counter starts at 0, as MXNet's does
    again += 1
    assert again.value == 1


def test_counter_values_are_integers_in_range():
    dom = mlprof.Domain("counter_values")
    mlprof.set_state("run")
    for value, error in ((2 ** 64, OverflowError), (2 ** 63, OverflowError), (-1, ValueError),
                         (1.5, TypeError), ("3", TypeError), (True, TypeError)):
        with pytest.raises(error, match=re.escape(repr(value))):
            dom.new_counter("bad", value)
    c = dom.new_counter("big", mlprof.COUNTER_MAX)
    assert c.value == 2 ** 63 - 1
    with pytest.raises(OverflowError, match=str(2 ** 63)):
        c += 1
    assert c.value == 2 ** 63 - 1
    c.set_value(2.0)  # a float with no fraction is the integer it is
    c += 1
    assert c.value == 3  # MXNet: int(value), then += 1
    with pytest.raises(TypeError, match="1.5"):
        c.set_value(1.5)
    with pytest.raises(TypeError, match="0.5"):
        c += 0.5
    with pytest.raises(ValueError, match="-1"):
        c -= 4
    assert c.value == 3
    mlprof.set_state("stop")
    samples = [e["args"] for e in events(mlprof.get(), "C") if e["name"] == "big"]
    assert [list(a.values())[0] for a in samples] == [2 ** 63 - 1, 2, 3]
    # below the Python classes: the C library's integer arguments are checked
    with pytest.raises(ctypes.ArgumentError, match="OverflowError"):
        mlprof._lib.lib.mlprof_counter_set(c._h, 2 ** 63)
    with pytest.raises(ctypes.ArgumentError, match="TypeError"):
        mlprof._lib.lib.mlprof_counter_add(c._h, 1.5)
    with pytest.raises(OverflowError, match="big_arg"):
        mlprof.add_args(big_arg=2 ** 64)


def test_memory_sizes_addresses_and_devices_are_checked():
    mlprof.set_config(profile_memory=True)
    mlprof.set_state("run")
    mlprof.memory_reset()
    with pytest.raises(ValueError, match="-1"):
        mlprof.memory_alloc(0x1000, -1)
    with pytest.raises(ValueError, match="-1"):
        mlprof.memory_reserve(0x1000, -1)
    with pytest.raises(OverflowError, match=str(2 ** 48)):
        mlprof.memory_alloc(0x1000, 2 ** 48)
    with pytest.raises(TypeError, match="1.5"):
        mlprof.memory_alloc(0x1000, 1.5)
    with pytest.raises(ValueError, match="-16"):
        mlprof.memory_alloc(-16, 8)
    with pytest.raises(TypeError):
        mlprof.memory_free(0x1000 + 0.5)
    info = mlprof.memory_info(0)
    assert info["allocs"] == 0 and info["peak_used"] == info["used"]  # nothing was recorded
    mlprof.memory_alloc(0x1000, mlprof.BLOCK_BYTES_MAX)
    mlprof.memory_free(0x1000)
    assert mlprof.memory_info(0)["peak_used"] == info["used"] + 2 ** 48 - 1
    mlprof.memory_free(None)  # free(NULL): nothing to account
    # cuda:0 to cuda:63
    assert mlprof.device_number("cuda:63") == 64 and mlprof.device_number("cuda(63)") == 64
    for device in ("cuda:64", "cuda(64)", "gpu:100"):
        with pytest.raises(ValueError, match=re.escape(device)):
            mlprof.device_number(device)
    import mlprof.raf as raf
    with pytest.raises(ValueError, match="cuda"):
        raf.Device("cuda(64)")
