"""mlprof roofline on the demo CNN's trace: every operator analyze groups with
FLOPs and bytes is a point, the others are listed as not placed; against a
ceilings file given with --ceilings (deterministic) the SVG parses, its points
and roofs sit where the axes say, and no point is above its roof; against
this machine's measured ceilings no point is above its roof by more than
the measurement's spread. A trace without FLOPs, a missing trace and a bad
ceilings file give clear errors and a non-zero status.

usage: roofline_check.py MLPROF CNN_INFER OUT_DIR [SANITIZER]"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

from analyze_util import check, command, failures

mlprof_bin, cnn, out = sys.argv[1], sys.argv[2], sys.argv[3]
sanitized = len(sys.argv) > 4 and sys.argv[4] not in ("", "OFF")
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
os.environ["XDG_CACHE_HOME"] = os.path.join(out, "cache")
mlprof = command(mlprof_bin)
SVG = "{http://www.w3.org/2000/svg}"

trace = os.path.join(out, "x.json")
p = subprocess.run([cnn, "--batches", "6"], env=dict(os.environ, MLPROF_FILENAME=trace), capture_output=True,
                   text=True, timeout=600)
check(p.returncode == 0 and os.path.exists(trace), f"cnn_infer: exit {p.returncode}\n{p.stderr}")

# A ceilings file with round figures, far above what a CPU reaches on one
# core of a loaded machine, so that every op is under its roof.
fixed = {
    "format": "mlprof-ceilings-1", "cpu": "test CPU", "threads": 2, "isa": "avx512f",
    "measured": "2026-01-01T00:00:00Z", "repeats": 5, "pinned": True, "note": "",
    "compute": [
        {"what": "fp64", "threads": 1, "min": 4e11, "median": 4.5e11, "max": 5e11},
        {"what": "fp64", "threads": 2, "min": 9e11, "median": 9.5e11, "max": 1e12},
        {"what": "fp32", "threads": 1, "min": 9e11, "median": 9.5e11, "max": 1e12},
        {"what": "fp32", "threads": 2, "min": 1.8e12, "median": 1.9e12, "max": 2e12},
    ],
    "levels": [
        {"what": "L1", "threads": 2, "bytes": 49152, "cache_bytes": 49152, "min": 3e12, "median": 3.5e12, "max": 4e12},
        {"what": "L2", "threads": 2, "bytes": 2097152, "cache_bytes": 2097152, "min": 1e12, "median": 1.1e12,
         "max": 1.2e12},
        {"what": "L3", "threads": 2, "bytes": 16777216, "cache_bytes": 33554432, "min": 4e11, "median": 4.5e11,
         "max": 5e11},
        {"what": "DRAM", "threads": 2, "bytes": 268435456, "min": 1e11, "median": 1.1e11, "max": 1.2e11},
    ],
    "curve": [],
}
fixed_path = os.path.join(out, "fixed.json")
with open(fixed_path, "w") as f:
    json.dump(fixed, f)

# ---- what analyze groups: the rows with FLOPs and bytes are the points
rows = json.loads(mlprof("analyze", trace, "--format", "json", "-t", "0").stdout)["rows"]
with_both = {r["name"] for r in rows if (r.get("flops") or 0) > 0 and (r.get("bytes") or 0) > 0}
check(len(with_both) >= 8, f"the demo CNN has FLOPs and bytes on its operators: {sorted(with_both)}")

svg_path = os.path.join(out, "fixed.svg")
p = mlprof("roofline", trace, "--ceilings", fixed_path, "-o", svg_path, "--format", "json")
r = json.loads(p.stdout)
placed = {o["name"]: o for o in r["placed"]}
check(set(placed) == with_both, f"placed {sorted(placed)}, analyze has FLOPs and bytes on {sorted(with_both)}")
check(len(r["placed"]) + len(r["not_placed"]) == len(rows),
      f"{len(r['placed'])} placed + {len(r['not_placed'])} not placed != {len(rows)} analyze rows")
check({o["name"] for o in r["not_placed"]} == {x["name"] for x in rows} - with_both, "the not placed are the rest")
check(any(o["name"] == "im2col" and "0 FLOPs" in o["reason"] for o in r["not_placed"]),
      f"im2col (0 FLOPs) is listed as not placed: {r['not_placed']}")

peaks = {(c["what"], c["threads"]): c["max"] for c in fixed["compute"]}
bws = [(lv["what"], lv["cache_bytes"] if "cache_bytes" in lv else 0, lv["max"]) for lv in fixed["levels"]]
for o in r["placed"]:
    check(o["precision"] == "fp32" and o["precision_from"] == "float32", f"{o['name']}: dtype float32: {o}")
    # the roof: the precision's peak, or the intensity times the bandwidth
    # of the level the bytes per call fit in
    per_call = o["bytes"] / o["count"]
    level = next((lv for lv in bws if lv[1] and per_call <= lv[1]), bws[-1])
    want = min(peaks[("fp32", 2)], o["ai"] * level[2])
    check(math.isclose(o["roof"], want, rel_tol=1e-4), f"{o['name']}: roof {o['roof']:.4g}, wanted {want:.4g}")
    check(o["bound"] == ("memory" if o["ai"] * level[2] < peaks[("fp32", 2)] else "compute"),
          f"{o['name']}: bound {o['bound']}")
    check(math.isclose(o["ai"], o["flops"] / o["bytes"], rel_tol=1e-4), f"{o['name']}: AI")
    check(o["attained"] <= o["roof"], f"{o['name']}: attained {o['attained']:.3g} above the fixed roof")

# ---- the picture: parses, one point per placed op, where the axes say
root = ET.parse(svg_path).getroot()
x0, x1 = (float(v) for v in root.get("data-x-range").split())
y0, y1 = (float(v) for v in root.get("data-y-range").split())
px0, py0, px1, py1 = (float(v) for v in root.get("data-plot").split())


def to_px(ai, flops):
    x = px0 + (math.log10(ai) - math.log10(x0)) / (math.log10(x1) - math.log10(x0)) * (px1 - px0)
    y = py1 - (math.log10(flops) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)) * (py1 - py0)
    return x, y


circles = [c for c in root.iter(SVG + "circle") if "op" in (c.get("class") or "").split()]
check(len(circles) == len(with_both), f"{len(circles)} points in the SVG, {len(with_both)} ops with FLOPs and bytes")
names = set()
for c in circles:
    title = c.find(SVG + "title").text
    name = title.split("\n")[0]
    names.add(name)
    for word in ("count", "time", "FLOPs", "bytes", "intensity", "attained", "% of the roof", "-bound"):
        check(word in title, f"{name}: the hover text lacks \"{word}\": {title!r}")
    o = placed.get(name)
    if not o:
        continue
    x, y = to_px(float(c.get("data-ai")), float(c.get("data-attained")))
    check(abs(x - float(c.get("cx"))) < 0.05 and abs(y - float(c.get("cy"))) < 0.05, f"{name}: not where the axes say")
    _, roof_y = to_px(o["ai"], o["roof"])
    check(float(c.get("cy")) >= roof_y - 0.05, f"{name}: drawn above its roof")
check(names == with_both, f"points named {sorted(names)}")
roofs = [ln for ln in root.iter(SVG + "line") if "roof" in (ln.get("class") or "").split()]
compute = {ln.get("data-what"): ln for ln in roofs if "compute" in ln.get("class")}
check(set(compute) == {"fp32", "fp64"}, f"compute roofs drawn: {sorted(compute)}")
for what, ln in compute.items():
    _, y = to_px(1, peaks[(what, 2)])
    check(abs(float(ln.get("y1")) - y) < 0.05 and abs(float(ln.get("y2")) - y) < 0.05, f"the {what} roof's height")
memory = [ln for ln in roofs if "memory" in ln.get("class")]
check({ln.get("data-what") for ln in memory} == {"L1", "L2", "L3", "DRAM"}, "a slope per level")
for ln in memory:
    bw = float(ln.get("data-bandwidth"))
    for end in ("1", "2"):
        # a point of the slope: y = bw * x, back from pixels to values
        fx = (float(ln.get("x" + end)) - px0) / (px1 - px0)
        fy = (py1 - float(ln.get("y" + end))) / (py1 - py0)
        ai = 10 ** (math.log10(x0) + fx * (math.log10(x1) - math.log10(x0)))
        fl = 10 ** (math.log10(y0) + fy * (math.log10(y1) - math.log10(y0)))
        check(math.isclose(fl, ai * bw, rel_tol=1e-3), f"the {ln.get('data-what')} slope is off y = bw x")
texts = "".join(t.text or "" for t in root.iter(SVG + "text"))
for word in ("arithmetic intensity", "FLOP/s", "fp32 peak", "L1", "DRAM", "memory-bound", "compute-bound",
             "not placed"):
    check(word in texts, f"the SVG has no text \"{word}\"")
check(root.find(f".//{SVG}g[@id='legend']") is not None, "a legend")
labels = [t for t in root.iter(SVG + "text") if t.get("class") == "label"]
check(len(labels) >= len(circles) // 2, f"{len(labels)} labels for {len(circles)} points")

# ---- the table: every placed op a row, the not placed named
p = mlprof("roofline", trace, "--ceilings", fixed_path, "-o", os.path.join(out, "t.svg"))
for word in ("operator", "AI", "attained", "% of roof", "bound", "not placed ("):
    check(word in p.stdout, f"the table has no \"{word}\":\n{p.stdout}")
# the not placed: a line per reason, naming its operators
check(re.search(r"^  0 FLOPs \(\d+\):.* im2col \(\d+\)", p.stdout, re.M), f"im2col under 0 FLOPs:\n{p.stdout}")
for name in with_both:
    check(any(line.startswith(name + " ") for line in p.stdout.splitlines()), f"no table row for {name}")
check("measured at load" not in p.stderr, f"no load note for ceilings without a load: {p.stderr}")

# ---- ceilings measured on a busy machine: said, since they may be low
busy_path = os.path.join(out, "busy.json")
with open(busy_path, "w") as f:
    json.dump(dict(fixed, load=3.5), f)
p = mlprof("roofline", trace, "--ceilings", busy_path, "-o", os.path.join(out, "busy.svg"))
check("measured at load 3.5 on 2 CPUs" in p.stderr, f"no note of the load the ceilings were measured at: {p.stderr}")

# ---- grouped as analyze groups: --aggregate-by the same keys
for by in ("type", "name,thread"):
    rows_by = json.loads(mlprof("analyze", trace, "--format", "json", "-t", "0", "--aggregate-by", by).stdout)["rows"]
    r_by = json.loads(mlprof("roofline", trace, "--ceilings", fixed_path, "-o", os.path.join(out, "b.svg"),
                             "--format", "json", "--aggregate-by", by).stdout)
    check(len(r_by["placed"]) + len(r_by["not_placed"]) == len(rows_by), f"--aggregate-by {by}: row counts")

# ---- dtype: fp64 from the argument; none: fp32, said so
small = {"traceEvents": [
    {"name": "daxpy", "ph": "X", "ts": 0, "dur": 100, "pid": 1, "tid": 1,
     "args": {"flops": 2000, "bytes": 24000, "dtype": "float64"}},
    {"name": "mystery", "ph": "X", "ts": 200, "dur": 100, "pid": 1, "tid": 1, "args": {"flops": 5e6, "bytes": 1e4}},
    {"name": "idle", "ph": "X", "ts": 400, "dur": 10, "pid": 1, "tid": 1},
]}
small_path = os.path.join(out, "small.json")
json.dump(small, open(small_path, "w"))
r = json.loads(mlprof("roofline", small_path, "--ceilings", fixed_path, "-o", os.path.join(out, "s.svg"),
                      "--format", "json").stdout)
by_name = {o["name"]: o for o in r["placed"]}
check(by_name.get("daxpy", {}).get("precision") == "fp64", f"daxpy is fp64: {by_name.get('daxpy')}")
check(by_name.get("mystery", {}).get("precision") == "fp32" and by_name["mystery"]["precision_from"] is None,
      f"mystery has no dtype: fp32 assumed: {by_name.get('mystery')}")
check(math.isclose(by_name.get("mystery", {}).get("roof", 0), 2e12), "mystery (AI 500) is under the fp32 peak")
check([o["name"] for o in r["not_placed"]] == ["idle"], f"idle is not placed: {r['not_placed']}")
p = mlprof("roofline", small_path, "--ceilings", fixed_path, "-o", os.path.join(out, "s.svg"))
check("fp32 assumed" in p.stdout and "no dtype" in p.stdout, f"the table says fp32 was assumed:\n{p.stdout}")

# ---- an operator that launched a kernel is not placed against the CPU's
# ceilings (its CPU time is the launch's); a CPU operator beside it is
gpu = {"traceEvents": [
    {"name": "aten::mm", "cat": "cpu_op", "ph": "X", "ts": 0, "dur": 50, "pid": 1, "tid": 1,
     "args": {"flops": 2e9, "bytes": 1.2e7}},
    {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "tid": 1,
     "args": {"correlation": 7}},
    {"name": "sgemm_kernel", "cat": "kernel", "ph": "X", "ts": 20, "dur": 300, "pid": 0, "tid": 7,
     "args": {"correlation": 7, "device": 0, "stream": 7}},
    {"name": "cpu_add", "cat": "cpu_op", "ph": "X", "ts": 400, "dur": 100, "pid": 1, "tid": 1,
     "args": {"flops": 1e6, "bytes": 1.2e7}},
]}
gpu_path = os.path.join(out, "gpu.json")
json.dump(gpu, open(gpu_path, "w"))
p = mlprof("roofline", gpu_path, "--ceilings", fixed_path, "-o", os.path.join(out, "g.svg"), "--format", "json")
r = json.loads(p.stdout)
check([o["name"] for o in r["placed"]] == ["cpu_add"], f"only the CPU operator is placed: {r['placed']}")
mm = [o for o in r["not_placed"] if o["name"] == "aten::mm"]
check(mm and "GPU" in mm[0].get("reason", ""), f"aten::mm is not placed, launched GPU work: {r['not_placed']}")
check("1 operator launched GPU kernels" in p.stderr, f"the note says why: {p.stderr}")

# ---- the GPU's roofline (--gpu-ceilings, as mlprof ceilings --gpu --json
# writes): the operators that launched GPU work, timed by that work,
# against the GPU's roofs, fp16 for a half-precision one; the CPU operator
# is not placed
gpu_ceil = {
    "format": "mlprof-ceilings-1", "cpu": "test GPU", "gpu": True, "threads": 8192, "isa": "ptx",
    "measured": "2026-01-01T00:00:00Z", "repeats": 5, "pinned": False, "note": "GPU 0",
    "compute": [
        {"what": "fp64", "threads": 8192, "min": 9e12, "median": 9.5e12, "max": 1e13},
        {"what": "fp32", "threads": 8192, "min": 1.8e13, "median": 1.9e13, "max": 2e13},
        {"what": "fp16", "threads": 8192, "min": 3.6e13, "median": 3.8e13, "max": 4e13},
    ],
    "levels": [
        {"what": "L2", "threads": 8192, "bytes": 2097152, "cache_bytes": 4194304, "min": 4e12, "median": 4.5e12,
         "max": 5e12},
        {"what": "DRAM", "threads": 8192, "bytes": 268435456, "min": 9e11, "median": 9.5e11, "max": 1e12},
    ],
    "curve": [],
}
gpu_ceil_path = os.path.join(out, "gpu_ceilings.json")
with open(gpu_ceil_path, "w") as f:
    json.dump(gpu_ceil, f)
gpu["traceEvents"] += [
    {"name": "aten::addmm", "cat": "cpu_op", "ph": "X", "ts": 600, "dur": 40, "pid": 1, "tid": 1,
     "args": {"flops": 4e9, "bytes": 1e6, "dtype": "c10::Half"}},
    {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 610, "dur": 5, "pid": 1, "tid": 1,
     "args": {"correlation": 8}},
    {"name": "hgemm_kernel", "cat": "kernel", "ph": "X", "ts": 620, "dur": 200, "pid": 0, "tid": 7,
     "args": {"correlation": 8, "device": 0, "stream": 7}},
]
# aten::bmm: one call launched a kernel, the other did not (its FLOPs and
# the GPU time would not be the same calls'); aten::matmul: faster than the
# FMA peak (tensor cores)
gpu["traceEvents"] += [
    {"name": "aten::bmm", "cat": "cpu_op", "ph": "X", "ts": 900, "dur": 40, "pid": 1, "tid": 1,
     "args": {"flops": 1e9, "bytes": 1e6}},
    {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 910, "dur": 5, "pid": 1, "tid": 1,
     "args": {"correlation": 9}},
    {"name": "bmm_kernel", "cat": "kernel", "ph": "X", "ts": 920, "dur": 100, "pid": 0, "tid": 7,
     "args": {"correlation": 9, "device": 0, "stream": 7}},
    {"name": "aten::bmm", "cat": "cpu_op", "ph": "X", "ts": 1000, "dur": 40, "pid": 1, "tid": 1,
     "args": {"flops": 1e9, "bytes": 1e6}},
    {"name": "aten::matmul", "cat": "cpu_op", "ph": "X", "ts": 1100, "dur": 40, "pid": 1, "tid": 1,
     "args": {"flops": 1e11, "bytes": 1e7, "dtype": "c10::Half"}},
    {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 1110, "dur": 5, "pid": 1, "tid": 1,
     "args": {"correlation": 10}},
    {"name": "h884gemm_kernel", "cat": "kernel", "ph": "X", "ts": 1120, "dur": 1000, "pid": 0, "tid": 7,
     "args": {"correlation": 10, "device": 0, "stream": 7}},
]
json.dump(gpu, open(gpu_path, "w"))
gsvg = os.path.join(out, "gpu_roofline.svg")
p = mlprof("roofline", gpu_path, "--gpu-ceilings", gpu_ceil_path, "-o", gsvg, "--format", "json")
r = json.loads(p.stdout)
placed = {o["name"]: o for o in r["placed"]}
check(set(placed) == {"aten::mm", "aten::addmm", "aten::matmul"},
      f"the GPU roofline places the three GPU operators: {r['placed']}")
check(math.isclose(placed.get("aten::matmul", {}).get("percent_of_roof", 0), 250, rel_tol=1e-4),
      f"aten::matmul at 250% of the fp16 FMA peak: {placed.get('aten::matmul')}")
check([o["reason"] for o in r["not_placed"] if o["name"] == "aten::bmm"] == ["some calls launched no GPU work"],
      f"aten::bmm, one call of two on the GPU, is not placed: {r['not_placed']}")
check("tensor cores" in p.stderr and "as 1 operator does" in p.stderr, f"the note on tensor cores: {p.stderr}")
mm = placed.get("aten::mm", {})
check(mm.get("time_ns") == 300000 and math.isclose(mm.get("attained", 0), 2e9 / 300e-6, rel_tol=1e-5),
      f"aten::mm is timed by its kernel (300 us): {mm}")
check(mm.get("precision") == "fp32" and mm.get("bound") == "compute" and math.isclose(mm.get("roof", 0), 2e13),
      f"aten::mm against the GPU's fp32 peak: {mm}")
hm = placed.get("aten::addmm", {})
check(hm.get("precision") == "fp16" and math.isclose(hm.get("roof", 0), 4e13)
      and math.isclose(hm.get("percent_of_roof", 0), 50, rel_tol=1e-4),
      f"aten::addmm (c10::Half) at 50% of the GPU's fp16 peak: {hm}")
check([o["name"] for o in r["not_placed"] if o["reason"] == "no GPU work"] == ["cpu_add"],
      f"cpu_add is not placed on the GPU's roofline: {r['not_placed']}")
check("GPU roofline" in p.stderr and "1 operator with FLOPs and bytes launched none" in p.stderr,
      f"the note says how: {p.stderr}")
root = ET.parse(gsvg).getroot()
roofs = {e.get("data-what") for e in root.iter(SVG + "line") if "compute" in (e.get("class") or "")}
check(roofs == {"fp32", "fp64", "fp16"}, f"the GPU roofline's SVG draws the three peaks: {roofs}")
check(any((e.text or "") == "ceilings (GPU)" for e in root.iter(SVG + "text")), "the SVG's legend says GPU")
p = mlprof("roofline", gpu_path, "--gpu-ceilings", gpu_ceil_path, "-o", gsvg)
check("time: the GPU time of the kernels" in p.stdout and "ceilings of the GPU test GPU" in p.stdout,
      f"the table says whose ceilings and what time:\n{p.stdout}")
check(any(line.startswith("aten::matmul") and "tensor cores?" in line for line in p.stdout.splitlines()),
      f"the table marks aten::matmul above its roof:\n{p.stdout}")
# an operator nested in itself (PyTorch's aten::add in aten::add): both calls
# carry FLOPs, so both are given the kernel's time, and the rate is not
# doubled; analyze's FLOPS is the same figure (one piece of code for both)
nested = {"traceEvents": [
    {"name": "aten::add", "cat": "cpu_op", "ph": "X", "ts": 0, "dur": 50, "pid": 1, "tid": 1,
     "args": {"flops": 1e9, "bytes": 1e6}},
    {"name": "aten::add", "cat": "cpu_op", "ph": "X", "ts": 5, "dur": 30, "pid": 1, "tid": 1,
     "args": {"flops": 1e9, "bytes": 1e6}},
    {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 10, "dur": 5, "pid": 1, "tid": 1,
     "args": {"correlation": 7}},
    {"name": "add_kernel", "cat": "kernel", "ph": "X", "ts": 20, "dur": 100, "pid": 0, "tid": 7,
     "args": {"correlation": 7, "device": 0, "stream": 7}},
]}
nested_path = os.path.join(out, "nested.json")
json.dump(nested, open(nested_path, "w"))
p = mlprof("roofline", nested_path, "--gpu-ceilings", gpu_ceil_path, "-o", gsvg, "--format", "json")
add = {o["name"]: o for o in json.loads(p.stdout)["placed"]}.get("aten::add", {})
check(add.get("time_ns") == 200000 and math.isclose(add.get("attained", 0), 1e13, rel_tol=1e-6),
      f"aten::add in aten::add: 2 GFLOP over the kernel's 100 us twice: {add}")
p = mlprof("analyze", nested_path, "--format", "json")
row = {x["key"]: x for x in json.loads(p.stdout)["rows"]}.get("aten::add", {})
check(row.get("gpu_ns") == 200000 and math.isclose(row.get("flops_per_s") or 0, add.get("attained", -1)),
      f"analyze gives aten::add the roofline's rate: {row}")
p = mlprof("roofline", gpu_path, "--gpu-ceilings", gpu_ceil_path, "--min-time", "1", "-o", gsvg, expect=2)
check("not with --min-time" in p.stderr, f"--gpu-ceilings with a time filter: {p.stderr}")
p = mlprof("roofline", gpu_path, "--gpu-ceilings", fixed_path, "-o", gsvg, expect=1)
check("a CPU's ceilings" in p.stderr, f"--gpu-ceilings with a CPU's file: {p.stderr}")
p = mlprof("roofline", gpu_path, "--ceilings", gpu_ceil_path, "-o", gsvg, expect=1)
check("a GPU's ceilings" in p.stderr and "--gpu-ceilings" in p.stderr, f"--ceilings with a GPU's file: {p.stderr}")
p = mlprof("roofline", gpu_path, "--gpu-ceilings", gpu_ceil_path, "--aggregate-by", "thread", "-o", gsvg, expect=2)
check("groups operators by name" in p.stderr, f"--gpu-ceilings with another grouping: {p.stderr}")

# ---- errors
bare = os.path.join(out, "bare.json")
json.dump({"traceEvents": [{"name": "a", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]}, open(bare, "w"))
bare_svg = os.path.join(out, "bare.svg")
p = mlprof("roofline", bare, "--ceilings", fixed_path, "-o", bare_svg, expect=1)
check(bare in p.stderr and "no operator carries both FLOPs and bytes" in p.stderr, f"no FLOPs: {p.stderr}")
check(not os.path.exists(bare_svg), "no SVG for a trace without FLOPs")
missing = os.path.join(out, "nope.json")
p = mlprof("roofline", missing, "-o", bare_svg, expect=1)
check(missing in p.stderr and "measuring" not in p.stderr, f"a missing trace is named, before measuring: {p.stderr}")
for text, what in (("{", "end"), ('{"format": "other"}', "format"), ("[1,2]", ""),
                   (json.dumps(dict(fixed, compute=[{"what": "fp32", "threads": 1, "min": 3, "median": 2, "max": 1}])),
                    "min <= median"),
                   (json.dumps(dict(fixed, compute=[{"what": "fp\"32<", "threads": 1, "min": 1, "median": 2, "max": 3}])),
                    "letters, digits and _")):
    bad = os.path.join(out, "bad.json")
    open(bad, "w").write(text)
    p = mlprof("roofline", trace, "--ceilings", bad, "-o", bare_svg, expect=1)
    check(bad in p.stderr and what in p.stderr, f"a bad ceilings file ({text[:30]}): {p.stderr}")
mlprof("roofline", expect=2)
mlprof("roofline", trace, "--bogus", expect=2)
p = mlprof("ceilings", "--max-size", "55340232221128667136", expect=2)
check("--max-size" in p.stderr, f"a working set larger than memory is refused: {p.stderr}")

# ---- against this machine's measured ceilings: no point above its roof by
# more than the measurement's spread (remeasured once when load blurs it)
size = ["--max-size", "64M"] if sanitized else []
mlprof("ceilings", *size, "--refresh")
for attempt in range(2):
    r = json.loads(mlprof("roofline", trace, "-o", os.path.join(out, "measured.svg"), "--format", "json").stdout)
    above = [o for o in r["placed"] if o["attained"] > o["roof"] * (1 + o["spread"])]
    if not above:
        break
    print(f"retry: above their roofs: {[(o['name'], o['percent_of_roof']) for o in above]}")
    mlprof("ceilings", *size, "--refresh")
check(not above, f"above their measured roofs by more than the spread: {above}")
check(len(r["placed"]) == len(with_both), "the measured roofline places the same operators")
ET.parse(os.path.join(out, "measured.svg"))

if failures:
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("roofline: ok")
