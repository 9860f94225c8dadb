#!/usr/bin/env python3
"""The cost of `mlprof run` on a BLAS-heavy program: a numpy script of many
small and middle-sized GEMMs and the temporaries they allocate, timed plain
and under mlprof run (all hooks), each the best of a few runs.

usage: bench_run.py MLPROF [--python /usr/bin/python3] [--repeat 3]
Last line: mlprof-bench-run: plain_s=... run_s=... slowdown=... gemms=...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SCRIPT = """
import numpy as np
rng = np.random.default_rng(0)
a = rng.random((256, 256), dtype=np.float32)
b = rng.random((256, 256), dtype=np.float32)
s = rng.random((32, 64), dtype=np.float32)
t = rng.random((64, 48), dtype=np.float32)
acc = 0.0
for i in range(100):
    c = a @ b  # a temporary of 256 KiB each time
    acc += float(c[0, 0])
    for j in range(10):
        acc += float((s @ t)[0, 0])
print(round(acc, 3))
"""
GEMMS = 100 * 11


def best(cmd, repeat, env=None):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            sys.exit(f"bench_run: {cmd[0]} failed: {p.stderr}")
        out = p.stdout
    return min(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlprof")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if subprocess.run([args.python, "-c", "import numpy"], capture_output=True).returncode != 0:
        print("mlprof-bench-run: skipped (no numpy)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        plain_s, plain_out = best([args.python, "-c", SCRIPT], args.repeat)
        trace = os.path.join(tmp, "run.json")
        run_s, run_out = best([args.mlprof, "run", "-q", "-o", trace, "--", args.python, "-c", SCRIPT], args.repeat)
        with open(trace) as f:
            gemms = sum(1 for e in json.load(f)["traceEvents"] if e["ph"] == "X" and e["name"] == "cblas_sgemm")
    if gemms != GEMMS or plain_out.strip() != run_out.strip().splitlines()[0]:
        sys.exit(f"bench_run: {gemms} GEMMs recorded of {GEMMS}, or the output changed")
    print(f"numpy script, {GEMMS} GEMMs: plain {plain_s:.3f} s, under mlprof run {run_s:.3f} s "
          f"(slowdown {run_s / plain_s:.2f}x, {1e6 * (run_s - plain_s) / GEMMS:.1f} us per GEMM all costs included)")
    print(f"mlprof-bench-run: plain_s={plain_s:.3f} run_s={run_s:.3f} slowdown={run_s / plain_s:.3f} gemms={gemms}")


if __name__ == "__main__":
    main()
