"""No call of the Python API writes, moves or overwrites a file that an
earlier call wrote, unless the user named that file again. Each public entry
point (of mlprof, mlprof.mxnet, mlprof.megengine and mlprof.raf) runs in
turn in a folder that already holds files of the user and of earlier calls;
every file there is compared before and after (inode, size, time, bytes)."""
import hashlib
import inspect
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import mlprof  # noqa: E402
import mlprof.megengine  # noqa: E402
import mlprof.mxnet  # noqa: E402
import mlprof.raf  # noqa: E402


def snapshot(root):
    seen = {}
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            st = os.stat(path)
            with open(path, "rb") as fh:
                digest = hashlib.sha1(fh.read()).hexdigest()
            seen[os.path.relpath(path, root)] = (st.st_ino, st.st_size, st.st_mtime_ns, digest)
    return seen


def changes(before, after):
    return {p for p in set(before) | set(after) if before.get(p) != after.get(p)}


def public_callables():
    names = {f"mlprof.{n}" for n in mlprof.__all__ if callable(getattr(mlprof, n))
             and not (inspect.isclass(getattr(mlprof, n)) and issubclass(getattr(mlprof, n), Exception))}
    names |= {f"mlprof.mxnet.{n}" for n in mlprof.mxnet.__all__ if callable(getattr(mlprof.mxnet, n))}
    names |= {f"mlprof.megengine.{n}" for n in mlprof.megengine.__all__}
    for mod in (mlprof.raf.profiler, mlprof.raf.memory_profiler):
        names |= {f"{mod.__name__}.{n}" for n in vars(mod) if not n.startswith("_") and callable(getattr(mod, n))}
    names.add("mlprof.raf.Device")
    return names


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mlprof.set_state("stop")
    mlprof.clear()
    mlprof.set_config(filename="named.json", profile_all=False, profile_memory=False, memory_csv="auto",
                      memory_svg="auto", stats_file="", level=1, continuous_dump=False, dump_at_exit=True)
    # files of the user's, and of an earlier run of a MegEngine-style Profiler
    for name in ("profile.json", "trace.json", "notes.txt", "profiling.json", "mxnet_profile.json"):
        (tmp_path / name).write_text(f"the user's {name}\n")
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / f"{os.getpid()}.chrome_timeline.json").write_text("an earlier run\n")
    yield tmp_path
    mlprof.set_state("stop")
    mlprof.clear()
    mlprof.set_config(filename="profile.json", dump_at_exit=True, memory_csv="auto", memory_svg="auto")


def test_every_entry_point_writes_only_what_it_was_told(folder):
    dom = mlprof.Domain("files")
    task = dom.new_task("work")

    def record():
        mlprof.set_state("run")
        with task:
            pass

    def within(context):
        with context:
            with task:
                pass

    conf = folder / "keys.conf"
    conf.write_text("level = 1\n")
    def beside(trace):  # a dump's memory outputs go beside its trace, once memory is profiled
        stem = trace[:-len(".json")]
        return {trace, stem + ".memory.csv", stem + ".memory_flow.svg"}

    named = beside("named.json")
    meg = folder / "meg"

    @mlprof.megengine.trace(profiling=True)
    def traced():
        with task:
            pass

    @mlprof.profile(path="profile")
    def profiled():
        with task:
            pass

    # (entry point, what it does, the files it may write, a file it must write)
    steps = [
        ("mlprof.version", mlprof.version, set(), None),
        ("mlprof.set_config", lambda: mlprof.set_config(dump_period=2), set(), None),
        ("mlprof.get_config", lambda: mlprof.get_config("filename"), set(), None),
        ("mlprof.load_config", lambda: mlprof.load_config(conf), set(), None),
        ("mlprof.set_state", record, set(), None),
        ("mlprof.get_state", mlprof.get_state, set(), None),
        ("mlprof.pause", mlprof.pause, set(), None),
        ("mlprof.is_paused", mlprof.is_paused, set(), None),
        ("mlprof.resume", mlprof.resume, set(), None),
        ("mlprof.Domain", lambda: mlprof.Domain("files2"), set(), None),
        ("mlprof.Task", lambda: mlprof.Task(dom, "t"), set(), None),
        ("mlprof.Frame", lambda: mlprof.Frame(dom, "f").start().stop(), set(), None),
        ("mlprof.Event", lambda: mlprof.Event("e").start().stop(), set(), None),
        ("mlprof.Counter", lambda: mlprof.Counter(dom, "c", 3), set(), None),
        ("mlprof.Marker", lambda: mlprof.Marker(dom, "m").mark("task"), set(), None),
        ("mlprof.scope", lambda: within(mlprof.scope("s")), set(), None),
        ("mlprof.add_args", lambda: (task.start(), mlprof.add_args(n=1), task.stop()), set(), None),
        ("mlprof.thread_name", lambda: mlprof.thread_name("main thread"), set(), None),
        ("mlprof.process_name", lambda: mlprof.process_name("files test"), set(), None),
        ("mlprof.now_ns", mlprof.now_ns, set(), None),
        ("mlprof.schedule", lambda: mlprof.schedule(wait=1, active=1), set(), None),
        ("mlprof.step", mlprof.step, set(), None),
        ("mlprof.step_number", mlprof.step_number, set(), None),
        ("mlprof.on_trace_ready", lambda: mlprof.on_trace_ready(None), set(), None),
        ("mlprof.dropped_events", mlprof.dropped_events, set(), None),
        ("mlprof.output_path", mlprof.output_path, set(), None),
        ("mlprof.dumps", mlprof.dumps, set(), None),
        ("mlprof.trace_json", mlprof.trace_json, set(), None),
        ("mlprof.get", mlprof.get, set(), None),
        ("mlprof.dump_to", lambda: mlprof.dump_to("mine.json"), beside("mine.json"), "mine.json"),
        ("mlprof.dump", lambda: mlprof.dump(False), named, "named.json"),
        ("mlprof.dump", lambda: mlprof.dump("raf_dump.json"), beside("raf_dump.json"), "raf_dump.json"),
        ("mlprof.set_kvstore_handle", lambda: mlprof.set_kvstore_handle(object()), set(), None),
        ("mlprof.profiler_set_config", lambda: mlprof.profiler_set_config("symbolic", "named.json"), set(), None),
        ("mlprof.profiler_set_state", lambda: mlprof.profiler_set_state("run"), set(), None),
        ("mlprof.dump_profile", mlprof.dump_profile, named, "named.json"),
        ("mlprof.clear", mlprof.clear, set(), None),
        ("mlprof.device_number", lambda: mlprof.device_number("cuda:1"), set(), None),
        ("mlprof.memory_reserve", lambda: (record(), mlprof.set_config(profile_memory=True),
                                           mlprof.memory_reserve(0x100000, 1 << 20, "cuda")), set(), None),
        ("mlprof.memory_alloc", lambda: mlprof.memory_alloc(0x100000, 4096, "cuda", tag="t"), set(), None),
        ("mlprof.memory_info", lambda: mlprof.memory_info("cuda"), set(), None),
        ("mlprof.memory_trace", lambda: mlprof.memory_trace("cuda"), set(), None),
        ("mlprof.memory_free", lambda: mlprof.memory_free(0x100000, "cuda"), set(), None),
        ("mlprof.memory_release", lambda: mlprof.memory_release(0x100000, "cuda"), set(), None),
        ("mlprof.memory_reset", mlprof.memory_reset, set(), None),
        ("mlprof.stop", mlprof.stop, set(), None),
        ("mlprof.start", lambda: mlprof.start(prof_level=2), set(), None),
        ("mlprof.stop", lambda: (mlprof.stop(), mlprof.clear()), set(), None),
        # MegEngine's: new files in the profiler's folder, numbered past the earlier run's
        ("mlprof.Profiler", lambda: mlprof.Profiler(path=meg, formats=["chrome_timeline.json", "stats.txt"])
         .__enter__().__exit__(None, None, None), {f"meg/{os.getpid()}.chrome_timeline.json",
                                                   f"meg/{os.getpid()}.stats.txt"}, "meg"),
        ("mlprof.profile", profiled, {f"profile/{os.getpid()}.2.chrome_timeline.json"}, "profile"),
        ("mlprof.profile", profiled, {f"profile/{os.getpid()}.3.chrome_timeline.json"}, "profile"),
        ("mlprof.megengine.Profiler", lambda: mlprof.megengine.Profiler(path=meg).start().stop(),
         {f"meg/{os.getpid()}.2.chrome_timeline.json"}, "meg"),
        ("mlprof.megengine.profile", lambda: mlprof.megengine.profile(path=meg)(lambda: None)(),
         {f"meg/{os.getpid()}.3.chrome_timeline.json"}, "meg"),
        ("mlprof.megengine.trace", lambda: (traced(), traced(), traced.get_profile()), set(), None),
        # MXNet's module: the same functions under MXNet's names
        ("mlprof.mxnet.set_config", lambda: mlprof.mxnet.set_config(filename="named.json", profile_imperative=True,
                                                                   profile_process="worker"), set(), None),
        ("mlprof.mxnet.profiler_set_config", lambda: mlprof.mxnet.profiler_set_config("all", "named.json"),
         set(), None),
        ("mlprof.mxnet.set_state", lambda: mlprof.mxnet.set_state("run", profile_process="worker"), set(), None),
        ("mlprof.mxnet.Domain", lambda: mlprof.mxnet.Domain("mx"), set(), None),
        ("mlprof.mxnet.Task", lambda: mlprof.mxnet.Task(dom, "mt").start(), set(), None),
        ("mlprof.mxnet.Frame", lambda: mlprof.mxnet.Frame(dom, "mf"), set(), None),
        ("mlprof.mxnet.Event", lambda: mlprof.mxnet.Event("me"), set(), None),
        ("mlprof.mxnet.Counter", lambda: mlprof.mxnet.Counter(dom, "mc", 1).increment(2), set(), None),
        ("mlprof.mxnet.Marker", lambda: mlprof.mxnet.Marker(dom, "mm").mark("marker"), set(), None),
        ("mlprof.mxnet.scope", lambda: within(mlprof.mxnet.scope(append_mode=False)), set(), None),
        ("mlprof.mxnet.pause", lambda: mlprof.mxnet.pause("worker"), set(), None),
        ("mlprof.mxnet.resume", lambda: mlprof.mxnet.resume("worker"), set(), None),
        ("mlprof.mxnet.dumps", lambda: mlprof.mxnet.dumps(True), set(), None),
        ("mlprof.mxnet.set_kvstore_handle", lambda: mlprof.mxnet.set_kvstore_handle(None), set(), None),
        ("mlprof.mxnet.dump", lambda: mlprof.mxnet.dump(False, "worker"), named, "named.json"),
        ("mlprof.mxnet.profiler_set_state", lambda: mlprof.mxnet.profiler_set_state("stop"), set(), None),
        ("mlprof.mxnet.dump_profile", mlprof.mxnet.dump_profile, named, "named.json"),
        # RAF's
        ("mlprof.raf.utils.profiler.clear", mlprof.raf.utils.profiler.clear, set(), None),
        ("mlprof.raf.utils.profiler.start", mlprof.raf.utils.profiler.start, set(), None),
        ("mlprof.raf.utils.profiler.get", lambda: (record(), mlprof.raf.utils.profiler.get()), set(), None),
        ("mlprof.raf.utils.profiler.dump", lambda: mlprof.raf.utils.profiler.dump("raf.json"), beside("raf.json"),
         "raf.json"),
        ("mlprof.raf.utils.profiler.get", mlprof.raf.utils.profiler.get, set(), None),
        ("mlprof.raf.utils.profiler.stop", mlprof.raf.utils.profiler.stop, set(), None),
        ("mlprof.raf.Device", lambda: mlprof.raf.Device("cuda(0)"), set(), None),
        ("mlprof.raf.utils.memory_profiler.reset", mlprof.raf.utils.memory_profiler.reset, set(), None),
        ("mlprof.raf.utils.memory_profiler.start", mlprof.raf.utils.memory_profiler.start, set(), None),
        ("mlprof.raf.utils.memory_profiler.stop", mlprof.raf.utils.memory_profiler.stop, set(), None),
        ("mlprof.raf.utils.memory_profiler.get_max_memory_info",
         lambda: mlprof.raf.utils.memory_profiler.get_max_memory_info(mlprof.raf.Device("cuda")), set(), None),
        ("mlprof.raf.utils.memory_profiler.get_memory_trace",
         lambda: mlprof.raf.utils.memory_profiler.get_memory_trace(mlprof.raf.Device("cuda")), set(), None),
    ]
    covered = set()
    for name, call, allowed, must in steps:
        before = snapshot(folder)
        call()
        changed = changes(before, snapshot(folder))
        assert changed <= allowed, f"{name} wrote {sorted(changed - allowed)}"
        if must:
            assert any(p == must or p.startswith(must + "/") for p in changed), f"{name} did not write {must}"
        covered.add(name)
    missing = public_callables() - covered
    assert not missing, f"entry points the walk does not cover: {sorted(missing)}"
    # the user's files are as they were
    for name in ("profile.json", "trace.json", "notes.txt", "profiling.json", "mxnet_profile.json"):
        assert (folder / name).read_text() == f"the user's {name}\n", name
    assert (folder / "profile" / f"{os.getpid()}.chrome_timeline.json").read_text() == "an earlier run\n"


EXIT_SCRIPTS = {
    # RAF records and never asks for a file: none at exit either
    "raf": "import mlprof.raf as raf, mlprof\nraf.utils.profiler.start()\nwith mlprof.Domain('d').new_task('t'):\n"
           "    pass\nraf.utils.memory_profiler.start()\n",
    # MegEngine's trace keeps its profile in memory
    "megengine": "import mlprof\nfrom mlprof.megengine import trace\nt = mlprof.Domain('d').new_task('t')\n"
                 "@trace(profiling=True)\ndef f():\n    with t:\n        pass\nf()\nf.get_profile()\n",
}


@pytest.mark.parametrize("style", sorted(EXIT_SCRIPTS))
def test_nothing_written_at_exit(tmp_path, style):
    (tmp_path / "profile.json").write_text("the user's\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"),
               LIBMLPROF_PATH=mlprof._lib.lib.path)
    p = subprocess.run([sys.executable, "-c", EXIT_SCRIPTS[style]], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(tmp_path)) == ["profile.json"] and (tmp_path / "profile.json").read_text() == "the user's\n"
