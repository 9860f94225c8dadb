#!/usr/bin/env python3
"""mlprof run on real, unmodified programs: numpy and PyTorch (Debian's), C programs
that fork and exec, allocate known sizes, crash; the one trace read back with json.

usage: run_check.py MLPROF RUN_FORKER RUN_ALLOC RUN_CUDA RUN_NVTX|none OUTDIR [PYTHON]
"""
import csv
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


MLPROF, FORKER, ALLOC, CUDA, NVTX, OUT = sys.argv[1:7]
# in the AddressSanitizer build: the C programs only, and every hook but malloc's
SANITIZED = os.environ.get("RUN_CHECK_SANITIZED") == "1"
NO_MALLOC = ["--hooks", "blas,dnnl,cuda,cublas,cudnn,itt,nvtx"] if SANITIZED else []
PYTHON = sys.argv[7] if len(sys.argv) > 7 else "/usr/bin/python3"


def run(name, cmd, *options, expect_rc=0, env=None):
    """mlprof run -o OUT/name.json [options] -- cmd (name.json.gz when name ends in .gz); returns (process,
    trace)."""
    gz = name.endswith(".gz")
    trace = os.path.join(OUT, name if gz else name + ".json")
    if SANITIZED and "--hooks" not in options:
        options = (*NO_MALLOC, *options)
    p = subprocess.run([MLPROF, "run", "-o", trace, *options, "--", *cmd], capture_output=True, text=True,
                       timeout=300, env=env)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    check(p.returncode == expect_rc, f"{name}: exit status {p.returncode}, {expect_rc} expected")
    t = None
    if os.path.exists(trace):
        with open(trace, "rb") as f:
            data = f.read()
        check((data[:2] == b"\x1f\x8b") == gz, f"{name}: {'gzip' if gz else 'plain JSON'} expected")
        t = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    check(t is not None, f"{name}: the merged trace {trace}")
    return p, t


def spans(t, name=None):
    return [e for e in t["traceEvents"] if e["ph"] == "X" and (name is None or e["name"] == name)]


def plain(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout


def has(module):
    return subprocess.run([PYTHON, "-c", f"import {module}"], capture_output=True).returncode == 0


# ------------------------------------------------------------------- numpy
NUMPY = """
import numpy as np
a = np.arange(64 * 128, dtype=np.float32).reshape(64, 128) / 1000
b = np.ones((128, 32), np.float32)
for i in range(5):
    c = a @ b
d = np.arange(100 * 100, dtype=np.float64).reshape(100, 100) / 1e4
for i in range(3):
    e = d @ d
v = np.ones(100)
for i in range(2):
    w = d @ v
print(round(float(c.sum()), 3), round(float(e.sum()), 3), round(float(w.sum()), 3))
"""


def check_numpy():
    if not has("numpy"):
        print("run: numpy skipped: python3-numpy is not installed")
        return
    cmd = [PYTHON, "-c", NUMPY]
    p, t = run("numpy", cmd)
    if not t:
        return
    check(plain(cmd) in p.stdout, "numpy: the program's output is unchanged")
    sg, dg, dv = spans(t, "cblas_sgemm"), spans(t, "cblas_dgemm"), spans(t, "cblas_dgemv")
    check(len(sg) == 5 and len(dg) == 3 and len(dv) == 2, f"numpy: {len(sg)} sgemm, {len(dg)} dgemm, {len(dv)} dgemv")
    for e in sg:
        a = e["args"]
        check((a["M"], a["N"], a["K"], a["dtype"]) == (64, 32, 128, "float32") and a["flops"] == 2 * 64 * 32 * 128
              and a["bytes"] == 4 * (64 * 128 + 128 * 32 + 64 * 32), f"numpy: sgemm args {a}")
    for e in dg:
        a = e["args"]
        check((a["M"], a["N"], a["K"], a["dtype"], a["flops"]) == (100, 100, 100, "float64", 2 * 10 ** 6),
              f"numpy: dgemm args {a}")
    for e in dv:
        a = e["args"]
        check(a["M"] * a["N"] == 10000 and a["flops"] == 20000, f"numpy: dgemv args {a}")
    check(all(e["cat"] == "blas" for e in sg + dg + dv), "numpy: category blas")
    check("cblas_sgemm" in p.stdout and "where the time went" in p.stdout, "numpy: the summary's table")
    check("memory peak (cpu)" in p.stdout and "dropped events: 0" in p.stdout, "numpy: the summary's memory and drops")
    peak = [e for e in t["traceEvents"] if e["ph"] == "i" and e["name"] == "memory peak (cpu)"]
    check(peak and peak[0]["args"]["used"] > 64 * 128 * 4, f"numpy: the malloc hooks saw the arrays: {peak}")


# ----------------------------------------------------------------- PyTorch
TORCH = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, stride=2))
x = torch.randn(16, 256)
img = torch.randn(4, 3, 32, 32)
with torch.no_grad():
    for i in range(4):
        y = model(x)
        z = conv(img)
print(round(float(y.sum()), 4), round(float(z.sum()), 4))
"""


def check_torch():
    if not has("torch"):
        print("run: PyTorch skipped: python3-torch is not installed")
        return
    cmd = [PYTHON, "-c", TORCH]
    p, t = run("torch", cmd, "--memory_sample_rate", "100000")
    if not t:
        return
    check(plain(cmd) in p.stdout, "torch: the program's output is unchanged")
    gemms = spans(t, "sgemm_")
    shapes = sorted((e["args"]["M"], e["args"]["N"], e["args"]["K"]) for e in gemms)
    # nn.Linear computes x W^T as the column-major product W x^T: M = out features, N = batch, K = in
    want = sorted([(64, 16, 256)] * 4 + [(10, 16, 64)] * 4)
    check(shapes == want, f"torch: the Linear layers' GEMMs {shapes}")
    check(all(e["args"]["flops"] == 2 * e["args"]["M"] * e["args"]["N"] * e["args"]["K"] for e in gemms),
          "torch: FLOPs are 2MNK")
    # the convolutions go through the shared oneDNN: each with its shapes and 2 x outputs x (C_in x k x k)
    convs = spans(t, "convolution_forward")
    got = sorted((e["args"].get("src_shape"), e["args"].get("weights_shape"), e["args"].get("dst_shape"),
                  e["args"].get("flops")) for e in convs)
    want = sorted([("[4,3,32,32]", "[8,3,3,3]", "[4,8,32,32]", 2 * 4 * 8 * 32 * 32 * 27)] * 4
                  + [("[4,8,32,32]", "[16,8,3,3]", "[4,16,15,15]", 2 * 4 * 16 * 15 * 15 * 72)] * 4)
    check(got == want, f"torch: the oneDNN convolutions {got}")
    check(all(e["cat"] == "dnnl" and e["args"].get("impl") and e["args"].get("dtype") == "float32" for e in convs),
          f"torch: category, implementation and type of the convolutions {convs[:1]}")


# ------------------------------------------------------------- ITT
ITT = """
import torch
torch.manual_seed(0)
conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, stride=2))
img = torch.randn(4, 3, 32, 32)
with torch.no_grad():
    for i in range(4):
        z = conv(img)
print(round(float(z.sum()), 4))
"""


def check_itt():
    if not has("torch"):
        print("run: ITT skipped: python3-torch is not installed")
        return
    # oneDNN's own ITT tasks, one per primitive executed on the main thread
    env = dict(os.environ, DNNL_ITT_TASK_LEVEL="1")
    p, t = run("itt", [PYTHON, "-c", ITT], "--hooks", "itt", env=env)
    if not t:
        return
    tasks = [e for e in spans(t) if e["cat"] == "dnnl::primitive::execute"]
    convs = [e for e in tasks if e["name"] == "convolution"]
    check(len(convs) == 8, f"itt: oneDNN's 8 convolution tasks: {len(convs)} of {len(tasks)} tasks")
    check(not spans(t, "convolution_forward"), "itt: only the ITT hook was on")


# ------------------------------------------------------------- NVTX
def check_nvtx():
    if NVTX == "none":
        print("run: NVTX skipped: no nvtx3 headers to build the test program (they come with CUDA)")
        return
    p, t = run("nvtx", [NVTX])
    if not t:
        return
    check("push depth 0, pop left 0" in p.stdout, f"nvtx: push and pop return the depths: {p.stdout!r}")
    epoch = spans(t, "epoch")
    steps = spans(t, "step")
    check(len(epoch) == 1 and epoch[0]["cat"] == "nvtx", f"nvtx: the default domain's range {epoch}")
    check(sorted(e["args"].get("payload") for e in steps) == [100, 101, 102] and all(e["cat"] == "trainer" for e in steps),
          f"nvtx: the domain's registered ranges with payloads {steps}")
    if epoch:
        e = epoch[0]
        check(all(e["ts"] <= s["ts"] and s["ts"] + s["dur"] <= e["ts"] + e["dur"] for s in steps), "nvtx: they nest")
    marks = [e for e in t["traceEvents"] if e["ph"] == "i" and e["name"] == "tick"]
    check(len(marks) == 3, f"nvtx: 3 marks: {len(marks)}")
    loading = [e for e in t["traceEvents"] if e["name"] == "loading" and e["ph"] in "be"]
    check(len(loading) == 2 and {e["ph"] for e in loading} == {"b", "e"}
          and not any(e.get("args", {}).get("unfinished") for e in loading), f"nvtx: the start/end range {loading}")
    if epoch and len(loading) == 2:
        b = min(e["ts"] for e in loading)
        check(b <= epoch[0]["ts"] and max(e["ts"] for e in loading) >= epoch[0]["ts"] + epoch[0]["dur"],
              "nvtx: the start/end range spans the pushes")
    worker = spans(t, "worker")
    check(len(worker) == 1 and epoch and worker[0]["tid"] != epoch[0]["tid"], "nvtx: the worker's range on its thread")
    if worker and len(loading) == 2:  # the worker ended the range the main thread started
        end = max(e["ts"] for e in loading)
        check(end >= worker[0]["ts"] + worker[0]["dur"], "nvtx: the range ends when the worker ended it")
    for part in glob.glob(os.path.join(OUT, "nvtx.json.parts", "trace.*.json")):
        with open(part) as f:
            other = json.load(f)["otherData"]
        check(other["unmatched_ends"] == 0 and other["unfinished_spans"] == 0,
              f"nvtx: nothing unmatched or unfinished in {part}: {other}")
    names = {e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    check("nvtx-main" in names, f"nvtx: the thread's name {names}")


# --------------------------------------------------------- fork and exec
def check_fork_exec():
    p, t = run("forker.json.gz", [FORKER])  # -o X.json.gz: the merged trace gzip
    if not t:
        return
    pids = {int(line.split()[-1]) for line in p.stdout.splitlines()
            if line.startswith(("parent ", "fork child ", "exec child "))}
    check(len(pids) == 3, f"forker: three processes said their pid: {pids}")
    names = {e["pid"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    check(pids <= names, f"forker: every process has its track in the one trace: {names} for {pids}")
    parts = glob.glob(os.path.join(OUT, "forker.json.gz.parts", "trace.*.json"))
    check(len(parts) == 3, f"forker: one part per process: {parts}")
    check("3 processes profiled" in p.stdout, "forker: the summary counts the processes")
    check("wrote no trace" not in p.stderr and "ran another program (exec)" in p.stderr,
          "forker: the child that allocated, then exec'd, is said to have run another program, not to have lost "
          "its trace")
    check("not allocated" not in p.stderr,
          f"forker: the child's frees of blocks its parent allocated before the fork are known: {p.stderr!r}")
    # a program that execs another in its place: both programs' traces are parts of the run, one process
    p, t = run("chain", [FORKER, "chain"])
    if not t:
        return
    pid = next((int(line.split()[-1]) for line in p.stdout.splitlines() if line.startswith("chain ")), None)
    parts = sorted(os.path.basename(f) for f in glob.glob(os.path.join(OUT, "chain.json.parts", "trace.*.json")))
    check(parts == [f"trace.{pid}.d1.json", f"trace.{pid}.json"], f"chain: the two programs' parts: {parts}")
    for part in parts:
        with open(os.path.join(OUT, "chain.json.parts", part)) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") != "M"]
        check(events, f"chain: {part} holds its program's events")
    names = [e for e in t["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name" and e["pid"] == pid]
    check(len(names) == 1 and "1 process profiled" in p.stdout, f"chain: one process: {names} {p.stdout[-200:]!r}")


# ------------------------------------------------------- known allocations
def check_alloc():
    p, t = run("alloc", [ALLOC], "--memory_csv", "auto")
    if not t:
        return
    rows = []
    for path in glob.glob(os.path.join(OUT, "alloc.json.parts", "trace.*.memory.csv")):
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    mine = [r for r in rows if r["bytes"] in ("12345", "12352")]
    check(len([r for r in mine if r["bytes"] == "12345"]) == 6 and len([r for r in mine if r["bytes"] == "12352"]) == 1,
          f"alloc: the seven blocks with their sizes: {[r['bytes'] for r in mine]}")
    live = sorted(r["bytes"] for r in mine if r["end"] == "live")
    check(live == ["12345"] * 4, f"alloc: four left live at exit: {live}")
    grown = [r for r in rows if r["bytes"] == "100" and r["end"] == "freed"]
    check(len(grown) >= 1, "alloc: the block realloc grew is freed")
    # no hooks, no blocks
    p, t = run("alloc_nohooks", [ALLOC], "--hooks", "none", "--memory_csv", "auto")
    rows = glob.glob(os.path.join(OUT, "alloc_nohooks.json.parts", "trace.*.memory.csv"))
    check(not any(open(r).read().count("\n") > 1 for r in rows), "alloc: --hooks none records no block")


# ------------------------------------------- threads that free on their way out
def check_thread_exit():
    prog = os.path.join(os.path.dirname(ALLOC), "run_thread_exit")
    p, t = run("thread_exit", [prog], "--memory_csv", "auto", "--buffer_size", "1048576")
    if not t:
        return
    rows = []
    for path in glob.glob(os.path.join(OUT, "thread_exit.json.parts", "trace.*.memory.csv")):
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    # A recorder that leaks a chunk per thread keeps the blocks of the first
    # threads only, as many as the 1 MiB buffer has chunks. Under a heavy load
    # the collector may fall behind and events be dropped (said, and counted):
    # those blocks may be missing, no more, and far more than a leak keeps.
    dropped, chunks = 0, 0
    for path in glob.glob(os.path.join(OUT, "thread_exit.json.parts", "trace.*.json")):
        other = json.load(open(path)).get("otherData", {})
        dropped += other.get("dropped_events", 0)
        chunks = max(chunks, other.get("buffer_size", 0) // max(other.get("chunk_size", 1), 1))

    def kept(label, found, want):
        missing = want - len(found)
        check(all(r["end"] == "freed" for r in found),
              f"thread_exit: {label}: {len([r for r in found if r['end'] != 'freed'])} not freed")
        check(missing == 0 or (missing <= dropped and len(found) > 2 * chunks),
              f"thread_exit: {label}: {len(found)} of {want}, {dropped} events dropped, "
              f"a leaking recorder keeps at most {chunks}")
        if missing:
            print(f"thread_exit: {label}: {missing} of {want} missing, {dropped} events dropped under load "
                  f"(a leaking recorder would keep at most {chunks})")

    kept("each thread's block, freed", [r for r in rows if r["bytes"] == "11111"], 1500)
    # freed by a key destructor that runs after mlprof's: recorded all the same
    kept("the blocks freed after mlprof's exit handler", [r for r in rows if r["bytes"] == "777"], 1499)
    check("without a free" not in p.stderr, f"thread_exit: no block left unfreed: {p.stderr[-300:]!r}")


# ------------------------- a program that reports the blocks malloc gave it
def check_mem_layers():
    """The interposer and the program's own mlprof_mem_* calls on the same blocks:
    no double free or missed free for a correct program, its one real mistake
    still counted."""
    prog = os.path.join(os.path.dirname(ALLOC), "run_mem_layers")
    p, t = run("mem_layers", [prog], "--memory_csv", "auto")
    if not t:
        return
    rows = []
    for path in glob.glob(os.path.join(OUT, "mem_layers.json.parts", "trace.*.memory.csv")):
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    memory = {}
    for path in glob.glob(os.path.join(OUT, "mem_layers.json.parts", "trace.*.json")):
        memory = json.load(open(path)).get("otherData", {}).get("memory", {}).get("devices", {}).get("cpu", {})
    check(memory.get("double_frees") == 1 and memory.get("implicit_frees") == 0,
          f"mem_layers: only the program's own double free is counted: {memory}")
    check(memory.get("peak_allocated", 0) < 2 * 654336,
          f"mem_layers: the segment counted once in allocated, not as a malloc block too: {memory}")
    check("1 double free" in p.stderr and "double frees" not in p.stderr,
          f"mem_layers: the double free said: {p.stderr[-400:]!r}")
    check("without a free" not in p.stderr, f"mem_layers: no block allocated over: {p.stderr[-400:]!r}")

    def ends(size, tag):
        return sorted(r["end"] for r in rows if r["bytes"] == str(size) and r["tag"] == tag)

    check(ends(23456, "weights") == ["freed"] * 3 and ends(23456, "") == ["taken over"] * 3,
          f"mem_layers: calloc's blocks taken over by the weights: {ends(23456, '')} {ends(23456, 'weights')}")
    check(ends(654336, "") == ["taken over"], f"mem_layers: the segment from malloc: {ends(654336, '')}")
    check(ends(34567, "act") == ["freed"] * 8, f"mem_layers: the tensors: {ends(34567, 'act')}")
    check(ends(45678, "twice") == ["freed"] and ends(45678, "") == ["taken over"],
          f"mem_layers: the block freed twice: {ends(45678, 'twice')} {ends(45678, '')}")


# -------------------------------------------------------- CUDA, faked
def check_cuda():
    p, t = run("cuda", [CUDA])
    if not t:
        return
    check(plain([CUDA]) in p.stdout, "cuda: the program's output is unchanged")
    x = {}
    for e in spans(t):
        x.setdefault(e["name"], []).append(e)
    mallocs = sorted(e["args"]["bytes"] for e in x.get("cudaMalloc", []))
    check(mallocs == [4096, 1 << 20, 3 << 20], f"cuda: cudaMalloc sizes {mallocs}")
    copies = sorted((e["args"]["bytes"], e["args"]["kind"]) for e in x.get("cudaMemcpy", []))
    check(copies == [(4096, "DtoH"), (4096, "HtoD")], f"cuda: copies {copies}")
    check([e["args"]["bytes"] for e in x.get("cudaMemsetAsync", [])] == [3 << 20], "cuda: the memset")
    launch = x.get("vector_add_kernel", [{}])[0].get("args", {})
    check(launch.get("grid") == "[256,2,1]" and launch.get("block") == "[128,1,1]"
          and launch.get("shared_bytes") == 1024, f"cuda: the launch, named by its kernel: {launch}")
    check(len(x.get("cudaStreamSynchronize", [])) == 1 and len(x.get("cudaDeviceSynchronize", [])) == 1
          and len(x.get("cudaFree", [])) == 2, "cuda: waits and frees")
    sg = x.get("cublasSgemm_v2", [{}])[0].get("args", {})
    check((sg.get("M"), sg.get("N"), sg.get("K"), sg.get("trans"), sg.get("flops"), sg.get("bytes"))
          == (128, 64, 32, "NT", 2 * 128 * 64 * 32, 4 * (128 * 32 + 32 * 64 + 128 * 64)), f"cuda: Sgemm {sg}")
    ex = x.get("cublasGemmEx", [{}])[0].get("args", {})
    check((ex.get("dtype"), ex.get("out_dtype"), ex.get("flops"), ex.get("bytes"))
          == ("float16", "float32", 2 * 256 * 256 * 512, 2 * 256 * 512 + 2 * 512 * 256 + 4 * 256 * 256),
          f"cuda: GemmEx with half inputs {ex}")
    sb = x.get("cublasSgemmStridedBatched", [{}])[0].get("args", {})
    check(sb.get("batch") == 8 and sb.get("flops") == 8 * 2 * 16 ** 3, f"cuda: strided batched {sb}")
    check(all(e["cat"] == "cublas" for e in x.get("cublasGemmEx", [])), "cuda: category cublas")
    lt = x.get("cublasLtMatmul", [{}])[0].get("args", {})
    check((lt.get("M"), lt.get("N"), lt.get("K"), lt.get("batch"), lt.get("trans"), lt.get("dtype"), lt.get("out_dtype"),
           lt.get("flops")) == (64, 32, 128, 4, "TN", "bfloat16", "float32", 4 * 2 * 64 * 32 * 128),
          f"cuda: cublasLt matmul from its layouts {lt}")
    conv = x.get("cudnnConvolutionForward", [{}])[0].get("args", {})
    check(conv == {"input_shape": "[8,64,56,56]", "dtype": "float16", "filter_shape": "[128,32,3,3]",
                   "output_shape": "[8,128,28,28]", "padding": "[1,1]", "stride": "[2,2]", "dilation": "[1,1]",
                   "groups": 2, "flops": 2 * 8 * 128 * 28 * 28 * 32 * 9,
                   "bytes": 2 * (8 * 64 * 56 * 56 + 128 * 32 * 9 + 8 * 128 * 28 * 28), "algo": 1},
          f"cuda: the cuDNN convolution {conv}")
    bn = x.get("cudnnBatchNormalizationForwardInference", [{}])[0].get("args", {})
    check(bn == {"input_shape": "[8,128,28,28]", "dtype": "float16"}, f"cuda: the batch norm {bn}")
    # the graph API (cudnn_graph.c): each execution says what its plan computes
    ex = [e.get("args", {}) for e in x.get("cudnnBackendExecute", [])]
    legacy = {k: v for k, v in conv.items() if k != "algo"}
    check(len(ex) == 4, f"cuda: {len(ex)} cudnnBackendExecute spans")
    if len(ex) == 4:
        check(ex[0] == ex[1] == dict(legacy, op="ConvolutionForward", ops=2),
              f"cuda: a forward plan, fused with its ReLU, from the heuristics' config: {ex[0]}")
        check(ex[2] == dict(legacy, op="ConvolutionBackwardFilter"),
              f"cuda: the filter's gradient, its config made of an engine: {ex[2]}")
        check(ex[3] == {}, f"cuda: a plan whose chain is unknown has no shapes: {ex[3]}")
    parts = glob.glob(os.path.join(OUT, "cuda.json.parts", "*.json"))
    od = None
    if len(parts) == 1:
        with open(parts[0]) as f:
            od = json.load(f).get("otherData", {}).get("cudnn")
    check(od == {"plans": 3, "plans_described": 2, "executions_undescribed": 1,
                 "why": "a plan made: its engine config was not seen made from an operation graph (by cuDNN's "
                        "heuristics, or from an engine)"}, f"cuda: otherData.cudnn says what was not described, and why: {od}")
    peak = [e for e in t["traceEvents"] if e["ph"] == "i" and e["name"] == "memory peak (cuda:1)"]
    check(peak and peak[0]["args"]["used"] == (1 << 20) + (3 << 20) + 4096, f"cuda: device memory on cuda:1 {peak}")
    # only the chosen runtime functions
    p, t = run("cuda_chosen", [CUDA], "--cuda_functions", "cudaMalloc,cudaFree")
    names = {e["name"] for e in spans(t)} if t else set()
    check(names == {"cudaMalloc", "cudaFree", "cublasSgemm_v2", "cublasGemmEx", "cublasSgemmStridedBatched", "cublasLtMatmul",
                     "cudnnConvolutionForward", "cudnnBatchNormalizationForwardInference", "cudnnBackendExecute"},
          f"cuda: --cuda_functions cudaMalloc,cudaFree leaves {names}")
    # --gpu on: CUPTI would write the runtime's calls, so the interposer keeps to the allocations
    # (no libcupti here: that is said, and the rest of the run goes on)
    p, t = run("cuda_gpu", [CUDA], "--gpu", "on", "--cupti_library", "/nonexistent/libcupti.so")
    names = {e["name"] for e in spans(t)} if t else set()
    check("cudaMalloc" in names and "cudaFree" in names and "cudaMemcpy" not in names and "cudaLaunchKernel" not in names,
          f"cuda: with --gpu on the interposer records the allocations only: {names}")
    check("gpu activity cannot be measured: cannot load libcupti" in p.stderr, "cuda: no libcupti is said")


# ------------------------------------------------------------------ crash
CRASH = """
import ctypes, numpy as np
d = np.ones((50, 50))
for i in range(3):
    d = d @ d / 50
print("before the crash", flush=True)
ctypes.string_at(0)
"""


def check_crash():
    if not has("numpy"):
        print("run: crash skipped: python3-numpy is not installed")
        return
    p, t = run("crash", [PYTHON, "-c", CRASH], expect_rc=128 + 11)
    if not t:
        return
    check(len(spans(t, "cblas_dgemm")) == 3, f"crash: the three GEMMs before it: {len(spans(t, 'cblas_dgemm'))}")
    check("killed by signal 11" in p.stderr and "was killed by signal 11" in p.stdout,
          "crash: said by the process and by mlprof run")


def check_status_and_errors():
    p, t = run("status", [PYTHON, "-c", "import sys; sys.exit(7)"], expect_rc=7)
    check("exited with status 7" in p.stdout, "status: the summary says it")
    # a program that started and exits 127 itself is not "command not found"
    p, t = run("status127", [PYTHON, "-c", "import sys; sys.exit(127)"], expect_rc=127)
    check("exited with status 127" in p.stdout and "trace: " in p.stdout and "not found" not in p.stderr,
          f"status 127: the summary says it: {p.stderr!r}")
    for args, says in ((["--bogus_key", "1"], 'unknown configuration key "bogus_key"'),
                       (["--counters", "nope"], 'unknown counter "nope"'),
                       (["--hooks", "cuda9"], 'unknown hook "cuda9"'),
                       (["--cuda_functions", "cudaFoo"], 'unknown CUDA runtime function "cudaFoo"'),
                       ([], "which command?")):
        q = subprocess.run([MLPROF, "run", *args, "--"], capture_output=True, text=True)
        check(q.returncode == 2 and says in q.stderr, f"bad usage {args}: {q.returncode} {q.stderr!r}")
    # an output that cannot be the merged trace: refused before the command starts (it would make marker)
    marker = os.path.join(OUT, "bad_output.marker")
    folder = os.path.join(OUT, "an_output_folder")
    os.makedirs(folder, exist_ok=True)
    for out, says in (("", "-o: an empty file name"), (folder, "it is a directory"),
                      (os.path.join(OUT, "no_such_dir", "x.json"), "cannot write in")):
        q = subprocess.run([MLPROF, "run", "-q", "-o", out, "--", PYTHON, "-c", f"open({marker!r}, 'w')"],
                           capture_output=True, text=True, timeout=120)
        check(q.returncode == 2 and says in q.stderr and not os.path.exists(marker),
              f"-o {out!r}: {q.returncode} {q.stderr!r}")
    # a capture_range that never begins: said, by the run for the whole run, by a process of its own alone
    q = subprocess.run([MLPROF, "run", "-q", "-o", os.path.join(OUT, "never.json"), "--capture_range", "span:never",
                        "--", PYTHON, "-c", "pass"], capture_output=True, text=True, timeout=120)
    check(q.returncode == 0 and "captured capture_range=span:never (it never began)" in q.stderr
          and "no span of that name began" not in q.stderr, f"capture_range never began: {q.returncode} {q.stderr!r}")
    q = subprocess.run([PYTHON, "-c", "import mlprof; mlprof.set_state('stop')"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, MLPROF_CAPTURE_RANGE="span:never",
                                             PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     "..", "python")))
    check(q.returncode == 0 and "capture_range=span:never: no span of that name began" in q.stderr,
          f"capture_range never began, alone: {q.returncode} {q.stderr!r}")
    # a device as the output (/dev/null): its parts in a folder of TMPDIR, removed once merged
    tmp = os.path.join(OUT, "tmpdir")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    q = subprocess.run([MLPROF, "run", "-o", "/dev/null", "--", PYTHON, "-c", "pass"], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, TMPDIR=tmp))
    check(q.returncode == 0 and "1 process profiled" in q.stdout and not os.path.exists("/dev/null.parts")
          and os.listdir(tmp) == [] and "each process's trace" not in q.stdout,
          f"-o /dev/null: {q.returncode} {os.listdir(tmp)} {q.stdout!r} {q.stderr!r}")
    # a bad value in the environment: refused once, the command not started (it would make marker)
    marker = os.path.join(OUT, "env_refused.marker")
    for var, value, says in (("MLPROF_BUFFER_SIZE", "12zz", 'ignoring MLPROF_BUFFER_SIZE: bad value "12zz"'),
                             ("MLPROF_CONFIG", os.path.join(OUT, "no_such.conf"), "MLPROF_CONFIG: cannot open"),
                             ("MLPROF_SAMPLNG", "99", '"samplng" (did you mean "sampling"?)')):
        q = subprocess.run([MLPROF, "run", "-q", "-o", os.path.join(OUT, "env_refused.json"), "--", PYTHON, "-c",
                            f"open({marker!r}, 'w')"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, **{var: value}))
        check(q.returncode == 2 and says in q.stderr and q.stderr.count(says) == 1 and "is refused" in q.stderr
              and not os.path.exists(marker), f"{var}={value}: {q.returncode} {q.stderr!r}")
    # a variable that is no near miss of a key may be another tool's: said, and the run goes on
    q = subprocess.run([MLPROF, "run", "-q", "-o", os.path.join(OUT, "env_other.json"), "--", PYTHON, "-c", "pass"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, MLPROF_HOME_OF_SOMETHING="x"))
    check(q.returncode == 0 and q.stderr.count('unknown configuration key "home_of_something"') == 1,
          f"MLPROF_HOME_OF_SOMETHING: said once, by mlprof run: {q.returncode} {q.stderr!r}")
    # a Perfetto name: the merged trace exported as Perfetto's protobuf, read back as the JSON one would be
    pf = os.path.join(OUT, "forker.pftrace")
    q = subprocess.run([MLPROF, "run", "-q", "-o", pf, "--", FORKER], capture_output=True, text=True, timeout=300)
    check(q.returncode == 0, f"-o X.pftrace: exit {q.returncode} {q.stderr!r}")
    with open(pf, "rb") as f:
        head = f.read(2)
    check(head[:1] == b"\x0a", f"-o X.pftrace: not a protobuf trace: {head!r}")
    a = subprocess.run([MLPROF, "analyze", pf, "--format", "json"], capture_output=True, text=True)
    r = json.loads(a.stdout) if a.returncode == 0 else {}
    check(r.get("writer") == "mlprof" and r.get("events", 0) > 0,
          f"-o X.pftrace: analyze: {a.returncode} {a.stderr!r} {a.stdout[:200]!r}")
    check(not [f for f in os.listdir(OUT) if ".tmp-" in f], f"-o X.pftrace: temporary files left: {os.listdir(OUT)}")


OWN_DUMPS = {
    # finished dumps of the run's own name, then more recorded after them
    "dumps": ("""
import mlprof
d = mlprof.Domain("d")
with d.new_task("first"): pass
mlprof.dump(True)
mlprof.set_state("run")
with d.new_task("second"): pass
mlprof.dump(True)
mlprof.set_state("run")
with d.new_task("third"): pass
""", ["first", "second", "third"]),
    # an MXNet script names its own file and dumps it: that file written too
    "own_file": ("""
from mlprof.mxnet import profiler
profiler.set_config(profile_all=True, filename=OWN)
profiler.set_state("run")
with profiler.Domain("d").new_task("user_task"): pass
profiler.dump()
""", ["user_task"]),
    # RAF turns dump_at_exit off and reads its events with get(): no file of its own
    "raf": ("""
from mlprof.raf import profiler
import mlprof
profiler.start()
with mlprof.Domain("d").new_task("raf_task"): pass
profiler.stop()
assert [e for e in profiler.get()["traceEvents"] if e.get("name") == "raf_task"]
""", ["raf_task"]),
}


def check_own_dumps():
    """A program that writes its own traces under mlprof run (finished dumps, its own
    filename, dump_at_exit off): the run's trace still holds all of it, as one process."""
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    for name, (script, want) in OWN_DUMPS.items():
        own = os.path.join(OUT, f"{name}_own.json")
        if os.path.exists(own):
            os.unlink(own)
        p, t = run(f"own_{name}", [PYTHON, "-c", f"OWN = {own!r}\n" + script], env=env)
        if not t:
            continue
        got = sorted(e["name"] for e in spans(t) if e["name"] in want)
        pids = {e["pid"] for e in spans(t) if e["name"] in want}
        names = [e for e in t["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"
                 and e["pid"] in pids]
        check(got == sorted(want) and len(pids) == 1
              and len(names) == 1, f"own dumps {name}: spans {got}, pids {pids}, process names {names}")
        check("1 process profiled" in p.stdout and "error" not in p.stderr,
              f"own dumps {name}: {p.stdout[-300:]!r} {p.stderr!r}")
        if name == "own_file":
            with open(own) as f:
                mine = [e["name"] for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
            check(mine == ["user_task"], f"own dumps: the program's own file {mine}")


def check_not_started():
    """A command that cannot start: the status a shell gives (127 not found,
    126 not executable), a message that says so, and no trace path printed
    for a trace that was never written."""
    notexec = os.path.join(OUT, "not_executable.sh")
    with open(notexec, "w") as f:
        f.write("#!/bin/sh\necho never\n")
    os.chmod(notexec, 0o644)
    for name, cmd, rc, says in (("no_such_file", "/nonexistent/prog", 127, "/nonexistent/prog: No such file"),
                                ("no_such_command", "mlprof-no-such-command", 127,
                                 "mlprof-no-such-command: command not found"),
                                ("not_executable", notexec, 126, "not_executable.sh: Permission denied"),
                                ("a_folder", OUT, 126, ": Is a directory")):
        trace = os.path.join(OUT, name + ".json")
        p = subprocess.run([MLPROF, "run", "-o", trace, "--", cmd], capture_output=True, text=True, timeout=60)
        check(p.returncode == rc and says in p.stderr, f"{name}: exit {p.returncode} ({rc} expected): {p.stderr!r}")
        check("trace:" not in p.stdout and "static program" not in p.stderr and not os.path.exists(trace)
              and not os.path.exists(trace + ".parts"),
              f"{name}: no trace named, none written: {p.stdout!r} {p.stderr!r}")


def main():
    os.makedirs(OUT, exist_ok=True)
    if SANITIZED:
        print("run: under AddressSanitizer: the CUDA and NVTX programs only (python3 has no sanitizer "
              "runtime; a forked child that starts mlprof's threads hangs in clang 14's ASan allocator), "
              "and the malloc hook is left out (ASan's malloc comes first)")
        check_cuda()
        check_nvtx()
        check_not_started()
        if failures:
            sys.exit(f"run: {len(failures)} checks failed")
        print("run: checks passed")
        return
    check_numpy()
    check_torch()
    check_itt()
    check_nvtx()
    check_fork_exec()
    check_alloc()
    check_thread_exit()
    check_mem_layers()
    check_cuda()
    check_crash()
    check_status_and_errors()
    check_own_dumps()
    check_not_started()
    if failures:
        print(f"run: {len(failures)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("run: checks passed")


if __name__ == "__main__":
    main()
