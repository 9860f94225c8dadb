#!/usr/bin/env python3
"""The cost of `mlprof run`: a numpy script of many small and middle-sized
GEMMs and the temporaries they allocate, and a short command (`true`), each
timed plain and under mlprof run (all hooks). The variants take turns round
by round (the order flipping every round), so that both see the same machine;
each is given as the median of its rounds with their minimum, with the load.

usage: bench_run.py MLPROF [--python /usr/bin/python3] [--repeat 5] [--short 20]
Last line: mlprof-bench-run: plain_s=... run_s=... slowdown=... gemms=... ...
"""
import argparse
import json
import os
import shutil
import statistics
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


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench_run: {' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return elapsed, p.stdout


def interleaved(variants, rounds):
    """{name: [seconds...]} and the last output of each, the variants taking
    turns within each round."""
    times = {name: [] for name, _ in variants}
    outs = {}
    for r in range(rounds):
        for name, cmd in (variants if r % 2 == 0 else variants[::-1]):
            t, out = timed(cmd)
            times[name].append(t)
            outs[name] = out
    return times, outs


def summary(values):
    return statistics.median(values), min(values)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlprof")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of the numpy script")
    ap.add_argument("--short", type=int, default=20, help="rounds of the short command")
    args = ap.parse_args()
    true_cmd = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "run.json")
        short_trace = os.path.join(tmp, "short.json")
        st, _ = interleaved([("plain", [true_cmd]),
                             ("run", [args.mlprof, "run", "-q", "-o", short_trace, "--", true_cmd])], args.short)
        have_numpy = subprocess.run([args.python, "-c", "import numpy"], capture_output=True).returncode == 0
        if have_numpy:
            nt, outs = interleaved([("plain", [args.python, "-c", SCRIPT]),
                                    ("run", [args.mlprof, "run", "-q", "-o", trace, "--", args.python, "-c", SCRIPT])],
                                   args.repeat)
            with open(trace) as f:
                gemms = sum(1 for e in json.load(f)["traceEvents"] if e["ph"] == "X" and e["name"] == "cblas_sgemm")
            if gemms != GEMMS or outs["plain"].strip() != outs["run"].strip().splitlines()[0]:
                sys.exit(f"bench_run: {gemms} GEMMs recorded of {GEMMS}, or the output changed")
    load = os.getloadavg()
    sp, sr = summary(st["plain"]), summary(st["run"])
    print(f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; medians of the rounds (min), the variants in turns")
    print(f"`{true_cmd}`, {args.short} rounds: plain {1e3 * sp[0]:.1f} ms ({1e3 * sp[1]:.1f}), "
          f"under mlprof run {1e3 * sr[0]:.1f} ms ({1e3 * sr[1]:.1f}): "
          f"{sr[0] / sp[0]:.2f}x, {1e3 * (sr[0] - sp[0]):.1f} ms a command")
    if not have_numpy:
        print("numpy script: skipped (no numpy)")
        print(f"mlprof-bench-run: short_plain_ms={1e3 * sp[0]:.2f} short_run_ms={1e3 * sr[0]:.2f} "
              f"load={load[0]:.2f}")
        return
    np_, nr = summary(nt["plain"]), summary(nt["run"])
    print(f"numpy script, {GEMMS} GEMMs, {args.repeat} rounds: plain {np_[0]:.3f} s ({np_[1]:.3f}), "
          f"under mlprof run {nr[0]:.3f} s ({nr[1]:.3f}): {nr[0] / np_[0]:.2f}x (min over min {nr[1] / np_[1]:.2f}x), "
          f"{1e6 * (nr[0] - np_[0]) / GEMMS:.1f} us per GEMM all costs included")
    print(f"mlprof-bench-run: plain_s={np_[0]:.3f} run_s={nr[0]:.3f} slowdown={nr[0] / np_[0]:.3f} "
          f"plain_min_s={np_[1]:.3f} run_min_s={nr[1]:.3f} gemms={gemms} "
          f"short_plain_ms={1e3 * sp[0]:.2f} short_run_ms={1e3 * sr[0]:.2f} load={load[0]:.2f}")


if __name__ == "__main__":
    main()
