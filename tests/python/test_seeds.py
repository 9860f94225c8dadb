"""Scripts written for MXNet's, MegEngine's and RAF's profilers (the seeds in
../shared/seeds), each with only its import changed, run as their users run
them (python3 script.py, in a folder of their own). Each must finish, and its
outputs must hold what that profiler's documentation says they hold."""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)
import mlprof  # noqa: E402


def run_script(name, cwd):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR), LIBMLPROF_PATH=mlprof._lib.lib.path)
    for k in [k for k in env if k.startswith("MLPROF_")]:
        del env[k]  # the script's own configuration only
    p = subprocess.run([sys.executable, os.path.join(HERE, "seeds", name)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{name} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def load(path):
    with open(path) as f:
        return json.load(f)


def spans(trace, name):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == name]


def files_in(folder):
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)


def test_mxnet_script(tmp_path):
    p = run_script("mxnet_profiler.py", tmp_path)
    assert "domain: model" in p.stdout and "default scope: <unk>:" in p.stdout
    assert "counter: samples task: forward frame: batch event: load_data" in p.stdout
    assert re.search(r"forward\s+6\s", p.stdout), p.stdout  # the statistics table: 6 recorded, not the paused one
    # the deprecated calls warn, as MXNet's do; nothing else is said
    assert "deprecated" in p.stderr and "Traceback" not in p.stderr
    # the trace, written by the last dump; the continuous dump's temporary files are gone
    assert files_in(tmp_path) == ["mxnet_profile.json", "mxnet_stats.json"]
    t = load(tmp_path / "mxnet_profile.json")
    fwd, bwd = spans(t, "forward"), spans(t, "backward")
    assert len(fwd) == 6 and len(bwd) == 6 and len(spans(t, "load_data")) == 6
    assert {e["cat"] for e in fwd} == {"model"}
    assert {e["args"]["scope"] for e in fwd} == {"net:dense1:"}
    assert {e["args"]["scope"] for e in bwd} == {"loss:"}  # append_mode=False replaces the scope
    assert len([e for e in t["traceEvents"] if e["ph"] == "b" and e["name"] == "batch"]) == 6
    samples = [e["args"]["value"] for e in t["traceEvents"] if e["ph"] == "C" and e["name"] == "samples"]
    assert samples == [32, 64, 96, 80, 112, 144, 176, 160]
    marks = [e["s"] for e in t["traceEvents"] if e["ph"] == "i" and e["name"] == "epoch_end"]
    assert marks == ["g", "p", "t", "t", "t"] * 2
    stats = json.loads((tmp_path / "mxnet_stats.json").read_text())
    rows = [r for d in stats["domains"] if d["name"] == "model" for r in d["durations"]]
    assert [r["count"] for r in rows] == sorted(r["count"] for r in rows)  # ascending by count


def test_megengine_script(tmp_path):
    p = run_script("megengine_profiler.py", tmp_path)
    assert "with-entries: 3" in p.stdout
    pid = None
    decorated = files_in(tmp_path / "profile")
    # three calls of the decorated function: three traces, none overwritten
    assert len(decorated) == 3, decorated
    pid = decorated[0].split(".")[0]
    assert decorated == sorted([f"{pid}.chrome_timeline.json", f"{pid}.2.chrome_timeline.json",
                                f"{pid}.3.chrome_timeline.json"])
    for f in decorated:
        t = load(tmp_path / "profile" / f)
        assert len(spans(t, "ConvolutionForward")) == 1 and len(spans(t, "MatrixMulForward")) == 1
    with_files = files_in(tmp_path / "profile_with")
    assert len(with_files) == 6, with_files  # three entries, a trace and a memory picture each
    for stem in (pid, f"{pid}.2", f"{pid}.3"):
        t = load(tmp_path / "profile_with" / f"{stem}.chrome_timeline.json")
        assert len(spans(t, "ConvolutionForward")) == 1
        used = [e for e in t["traceEvents"] if e["ph"] == "C" and e["name"] == "memory used (cuda:0)"]
        assert used and max(e["args"]["value"] for e in used) == 8 * 32 * 8  # sample_rate=1: every operation
        ET.parse(tmp_path / "profile_with" / f"{stem}.memory_flow.svg")
    prof = load(tmp_path / "profiling.json")  # trace(profiling=True).get_profile(), saved by the script
    assert prof["otherData"]["calls"] == 3 and len(spans(prof, "ConvolutionForward")) == 3
    assert spans(prof, "ConvolutionForward")[0]["args"]["type"] == "ConvolutionForward"
    # MegEngine's profile_analyze commands, on mlprof analyze
    cli = os.path.join(os.path.dirname(mlprof._lib.lib.path), "mlprof")
    if not os.path.exists(cli):
        pytest.skip(f"no mlprof command beside {mlprof._lib.lib.path}")
    out = subprocess.run([cli, "analyze", "./profiling.json", "-t", "5", "--aggregate-by", "type", "--aggregate",
                          "sum", "--format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([cli, "analyze", "./profiling.json", "-t", "5", "--type", "ConvolutionForward",
                          "--format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["count"] for r in rows if r["name"] == "ConvolutionForward"] == [3], out.stdout
    assert all(r["name"] == "ConvolutionForward" for r in rows), out.stdout


def test_raf_script(tmp_path):
    p = run_script("raf_profiler.py", tmp_path)
    # get() wrote no file, dump(filename) only that one, and nothing was written at exit
    assert files_in(tmp_path) == ["profile.json", "profile_level2.json"]
    t = load(tmp_path / "profile.json")
    assert t["displayTimeUnit"] == "ms"
    ops = [e for e in t["traceEvents"] if e["name"].startswith("raf_op_tvm_cast_")]
    assert sorted(e["name"] for e in ops) == ["raf_op_tvm_cast_76", "raf_op_tvm_cast_77"]
    for e in ops:
        assert e["cat"] == "Default Stream" and e["args"]["args_string"].startswith("T<768")
        assert {"ts", "pid", "tid"} <= set(e)
    assert not spans(t, "vm_invoke")  # level 1: the kernels only
    t2 = load(tmp_path / "profile_level2.json")
    assert len(spans(t2, "vm_invoke")) == 2 and len(spans(t2, "raf_op_tvm_cast_76")) == 1
    used = re.search(r"Max used memory \(MBs\): ([0-9.]+)", p.stdout)
    allocated = re.search(r"Max allocated memory \(MBs\): ([0-9.]+)", p.stdout)
    assert used and allocated, p.stdout
    assert float(used.group(1)) == 12.0 and float(allocated.group(1)) == 64.0  # tensors in a 64 MB pool
    trace = p.stdout.split("Memory Trace:", 1)[1]
    for word in ("reserve", "alloc", "free", "release", "cast_0", "cast_1"):
        assert word in trace, trace
