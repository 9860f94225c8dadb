#!/usr/bin/env python3
"""One operator, one count, whoever recorded it: the FLOPs and bytes that
`mlprof analyze` computes from a PyTorch (Kineto) trace's shapes, that
mlprof.torch records, and that the C functions of mlprof/opcost.h return
(called here through ctypes) agree; an operator opcost does not know stays
without a count (not a count of 0); a count the trace gives is kept.

usage: opcost_check.py MLPROF LIBMLPROF OUTDIR [TORCH_PYTHON]
"""
import ctypes
import json
import os
import subprocess
import sys

from analyze_util import check, command, failures

MLPROF, LIB, OUT = sys.argv[1:4]
TORCH_PYTHON = sys.argv[4] if len(sys.argv) > 4 else "/usr/bin/python3"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
mlprof = command(MLPROF)


class Cost(ctypes.Structure):
    _fields_ = [("flops", ctypes.c_int64), ("bytes", ctypes.c_int64)]


I64 = ctypes.c_int64
try:
    lib = ctypes.CDLL(LIB)
    lib.mlprof_opcost_gemm.argtypes = [I64] * 7 + [ctypes.c_int, ctypes.POINTER(Cost)]
    lib.mlprof_opcost_conv.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(I64), ctypes.POINTER(I64),
                                       ctypes.POINTER(I64), I64, ctypes.c_int, ctypes.POINTER(Cost)]
except OSError as e:  # a sanitizer build's library needs its runtime, which python has not
    print(f"opcost: the C functions and mlprof.torch not checked: {LIB} does not load here ({e})")
    lib = None


def gemm(m, n, k, elem):
    """The C function's count, or (a library that does not load) the formula by hand."""
    if lib is None:
        return 2 * m * n * k, elem * (m * k + k * n + m * n)
    c = Cost()
    check(lib.mlprof_opcost_gemm(1, m, n, k, elem, elem, elem, 0, ctypes.byref(c)) == 0, "gemm")
    return c.flops, c.bytes


def conv(x, w, y, elem):
    if lib is None:
        size = [1, 1, 1]
        for i, t in enumerate((x, w, y)):
            for d in t:
                size[i] *= d
        return 2 * size[2] * (size[1] // w[0]), elem * sum(size)
    arr = I64 * len(x)
    c = Cost()
    check(lib.mlprof_opcost_conv(0, len(x), arr(*x), arr(*w), arr(*y), elem, 0, ctypes.byref(c)) == 0, "conv")
    return c.flops, c.bytes


def rows(path):
    p = mlprof("analyze", path, "--format", "json", "-t", "0")
    try:
        return {r["key"]: r for r in json.loads(p.stdout)["rows"]}
    except (ValueError, KeyError) as e:
        check(False, f"analyze {path}: {e}\n{p.stdout[:400]}")
        return {}


def cpu_op(name, ts, dims, types, **more):
    args = {"Input Dims": dims, "Input type": types}
    args.update(more)
    return {"name": name, "cat": "cpu_op", "ph": "X", "ts": ts, "dur": 10, "pid": 1, "tid": 1, "args": args}


def check_kineto():
    """A trace as PyTorch's profiler writes it (record_shapes; Concrete
    Inputs as torch 2.1 and later add them), checked against the C
    functions and against numbers worked out by hand."""
    half = "c10::Half"
    events = [
        # 64x128 by 128x32, float: 2*64*32*128 FLOPs, 4*(64*128 + 128*32 + 64*32) bytes
        cpu_op("aten::mm", 0, [[64, 128], [128, 32]], ["float", "float"]),
        # a grouped, strided half convolution: 8x64x56x56 by 128x32x3x3, stride 2, padding 1 -> 8x128x28x28
        cpu_op("aten::conv2d", 20, [[8, 64, 56, 56], [128, 32, 3, 3], [], [], [], [], []],
               [half, half, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
               **{"Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"]}),
        # the profiler's own FLOPs (with_flops) are kept; the bytes are computed (a bias of 32 read)
        cpu_op("aten::addmm", 40, [[32], [64, 128], [128, 32], [], []], ["float"] * 3 + ["Scalar"] * 2, flops=999),
        # unknown to opcost: no count
        cpu_op("aten::copy_", 60, [[10], [10], []], ["float", "float", "Scalar"]),
        # known, but the dimensions it sums over are not in the trace: no count
        cpu_op("aten::sum", 80, [[2048, 110], [], [], []], ["float", "", "Scalar", ""]),
    ]
    path = os.path.join(OUT, "kineto_shapes.json")
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    r = rows(path)
    want_mm = gemm(64, 32, 128, 4)
    check(want_mm == (2 * 64 * 32 * 128, 4 * (64 * 128 + 128 * 32 + 64 * 32)), f"C gemm {want_mm}")
    mm = r.get("aten::mm", {})
    check((mm.get("flops"), mm.get("bytes")) == want_mm, f"analyzer mm {mm} against C {want_mm}")
    want_conv = conv([8, 64, 56, 56], [128, 32, 3, 3], [8, 128, 28, 28], 2)
    check(want_conv == (2 * (8 * 128 * 28 * 28) * (32 * 9), 2 * (8 * 64 * 56 * 56 + 128 * 32 * 9 + 8 * 128 * 28 * 28)),
          f"C conv {want_conv}")
    c = r.get("aten::conv2d", {})
    check((c.get("flops"), c.get("bytes")) == want_conv, f"analyzer conv2d {c} against C {want_conv}")
    a = r.get("aten::addmm", {})
    check(a.get("flops") == 999 and a.get("bytes") == gemm(64, 32, 128, 4)[1] + 4 * 32,
          f"analyzer addmm keeps the trace's FLOPs, computes bytes: {a}")
    for name in ("aten::copy_", "aten::sum"):
        x = r.get(name, {})
        check(x and x.get("flops") is None and x.get("bytes") is None, f"{name} has no count (not 0): {x}")


TORCH_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import mlprof, mlprof.torch
out = sys.argv[2]
a, b = torch.randn(64, 128), torch.randn(128, 32)
x, w = torch.randn(2, 4, 10, 10), torch.randn(6, 2, 3, 3)
mlprof.set_config(filename=out + "/torch_ops.json", memory_svg="", memory_csv="", profile_memory=False)
mlprof.set_state("run")
with mlprof.torch.trace():
    torch.mm(a, b)
    torch.nn.functional.conv2d(x, w, stride=2, padding=1, groups=2)
mlprof.dump()
mlprof.set_state("stop")
from torch.profiler import profile
with profile(record_shapes=True) as p:
    torch.mm(a, b)
p.export_chrome_trace(out + "/torch_kineto.json")
"""


def check_torch():
    """mlprof.torch's spans against the C functions, and the analyzer on
    torch's own profiler trace of the same matrix product."""
    if lib is None:
        return
    if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"opcost: the torch checks skipped: {TORCH_PYTHON} has no torch")
        return
    env = dict(os.environ, LIBMLPROF_PATH=LIB)
    p = subprocess.run([TORCH_PYTHON, "-c", TORCH_SCRIPT, os.path.join(ROOT, "python"), OUT], env=env,
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"the torch script: {p.stderr[-2000:]}")
    if p.returncode:
        return
    with open(os.path.join(OUT, "torch_ops.json")) as f:
        spans = {e["name"]: e.get("args", {}) for e in json.load(f)["traceEvents"] if e.get("cat") == "aten"}
    mm = spans.get("aten::mm", {})
    check((mm.get("flops"), mm.get("bytes")) == gemm(64, 32, 128, 4), f"mlprof.torch mm {mm}")
    # 2x4x10x10 by 6x2x3x3 (2 groups), stride 2, padding 1: 2x6x5x5
    cv = spans.get("aten::convolution", {})
    want = conv([2, 4, 10, 10], [6, 2, 3, 3], [2, 6, 5, 5], 4)
    check(want == (2 * (2 * 6 * 5 * 5) * (2 * 9), 4 * (800 + 108 + 300)), f"C conv {want}")
    check((cv.get("flops"), cv.get("bytes")) == want, f"mlprof.torch convolution {cv} against C {want}")
    # the analyzer on torch's own trace of the same product: from its Input Dims
    kineto = os.path.join(OUT, "torch_kineto.json")
    with open(kineto) as f:
        text = f.read()
    if '"Input Dims"' not in text:  # a torch built without Kineto writes no shapes
        print("opcost: torch's profiler wrote no Input Dims here (a torch without Kineto): that check skipped")
        return
    k = rows(kineto).get("aten::mm", {})
    check((k.get("flops"), k.get("bytes")) == gemm(64, 32, 128, 4), f"analyzer on torch's profiler trace: {k}")


check_kineto()
check_torch()
if failures:
    print(f"opcost_check: {len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("opcost_check: all passed")
