"""mlprof ceilings: what it measures holds together (min <= median <= max,
every level and precision present), the triad bandwidth falls from the
smallest working set (L1) to the largest (DRAM), the fp32 FMA peak on all
threads is at least the best sgemm numpy runs here, and the cache file is
reused, keyed by CPU model and thread count, and remade when damaged.
Behaviour only: the rates are compared with each other, with margins and
retries for a loaded machine, never with a time.

usage: ceilings_check.py MLPROF OUT_DIR [SANITIZER]"""
import glob
import json
import os
import shutil
import subprocess
import sys

from analyze_util import check, failures

mlprof, out = sys.argv[1], sys.argv[2]
sanitized = len(sys.argv) > 3 and sys.argv[3] not in ("", "OFF")
# under a sanitizer every load of the triad is checked: a smaller DRAM set
size_args = ["--max-size", "64M"] if sanitized else []
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
cache = os.path.join(out, "cache")


def run(*args, env_extra=None, expect=0, prefix=()):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    env.update(env_extra or {})
    p = subprocess.run([*prefix, mlprof, *args], capture_output=True, text=True, env=env, timeout=900)
    check(p.returncode == expect, f"mlprof {' '.join(args)}: exit {p.returncode}, wanted {expect}\n{p.stderr}")
    return p


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return None


def stats_ok(where, p):
    check(0 < p["min"] <= p["median"] <= p["max"], f"{where}: min <= median <= max fails: {p}")


def measure(refresh=True):
    args = ["ceilings", "--json", *size_args] + (["--refresh"] if refresh and not size_args else [])
    p = run(*args)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"ceilings --json is not JSON: {e}\n{p.stdout[:500]}")
        return None


# ---- a first measurement: its shape, and the cache file it leaves
c = measure(refresh=False)
if c is None:
    sys.exit(1)
threads = len(os.sched_getaffinity(0))
check(c["format"] == "mlprof-ceilings-1", f"format: {c.get('format')}")
check(c["threads"] == threads, f"threads {c['threads']}, this process may use {threads}")
model = cpu_model()
if model:
    check(c["cpu"] == model, f"cpu \"{c['cpu']}\", /proc/cpuinfo says \"{model}\"")
precisions = {(p["what"], p["threads"]) for p in c["compute"]}
for prec in ("fp32", "fp64"):
    check((prec, 1) in precisions and (prec, threads) in precisions,
          f"compute: {prec} on one thread and on {threads}: {sorted(precisions)}")
for p in c["compute"] + c["levels"] + c["curve"]:
    stats_ok(p.get("what", "curve"), p)
levels = [p["what"] for p in c["levels"] if p["threads"] == 1]
check(levels and levels[0] == "L1" and levels[-1] == "DRAM", f"levels from L1 to DRAM: {levels}")
check(len(c["curve"]) >= 5, f"the curve has {len(c['curve'])} points")
sizes = [p["bytes"] for p in c["curve"]]
check(sizes == sorted(sizes), f"the curve's working sets grow: {sizes}")

files = glob.glob(os.path.join(cache, "mlprof", "ceilings-*.json"))
check(len(files) == 1, f"one cache file under {cache}/mlprof: {files}")
cache_file = files[0] if files else None

# ---- reused: the same file, no measurement, the same figures
if cache_file:
    before = open(cache_file).read()
    mtime = os.stat(cache_file).st_mtime_ns
    p = run("ceilings", "--json")
    check("measuring" not in p.stderr, f"a cached run measured again: {p.stderr}")
    check(json.loads(p.stdout) == json.loads(before), "the cached run printed other figures than the cache file")
    check(os.stat(cache_file).st_mtime_ns == mtime, "the cached run rewrote the cache file")
    p = run("ceilings")
    check(cache_file in p.stdout and "median" in p.stdout and "spread" in p.stdout,
          f"the table names the cache file and the spread:\n{p.stdout}")
    # a damaged cache is measured again, with a note naming it
    with open(cache_file, "w") as f:
        f.write('{"format": "mlprof-ceilings-1", "threads": ')
    p = run("ceilings", "--json", *size_args)
    if not size_args:
        check(cache_file in p.stderr and "measuring" in p.stderr, f"a damaged cache: {p.stderr}")
    check(json.load(open(cache_file))["threads"] == threads, "the damaged cache file was not remade")

# ---- keyed by the thread count: one CPU gives another file
taskset = shutil.which("taskset")
if threads > 1 and taskset:
    p = run("ceilings", "--json", "--max-size", "16M", prefix=(taskset, "-c", str(sorted(os.sched_getaffinity(0))[0])))
    one = json.loads(p.stdout) if p.returncode == 0 else {}
    check(one.get("threads") == 1, f"under taskset, threads {one.get('threads')}")
    files = glob.glob(os.path.join(cache, "mlprof", "ceilings-*.json"))
    check(len(files) == 2, f"one cache file per thread count: {files}")
else:
    print(f"skip: the thread-count key (threads {threads}, taskset {taskset})")

# ---- keyed under $HOME/.cache without XDG_CACHE_HOME
home = os.path.join(out, "home")
os.makedirs(home)
env = dict(os.environ, HOME=home)
env.pop("XDG_CACHE_HOME", None)
p = subprocess.run([mlprof, "ceilings", "--json", "--max-size", "16M"], capture_output=True, text=True, env=env,
                   timeout=900)
check(p.returncode == 0, f"ceilings with HOME only: exit {p.returncode}\n{p.stderr}")
check(len(glob.glob(os.path.join(home, ".cache", "mlprof", "ceilings-*.json"))) == 1,
      "without XDG_CACHE_HOME the cache is under $HOME/.cache/mlprof")

# ---- the triad bandwidth falls from L1 to DRAM (the curve's first and last
# working sets), retried when a loaded machine blurs it
for attempt in range(3):
    first, last = c["curve"][0], c["curve"][-1]
    if first["max"] > 1.5 * last["max"]:
        break
    print(f"retry: triad {first['max']:.3g} B/s at {first['bytes']:.0f} B, {last['max']:.3g} at {last['bytes']:.0f}")
    c = measure()
check(first["max"] > 1.5 * last["max"],
      f"the triad does not fall from L1 ({first['max']:.3g} B/s) to DRAM ({last['max']:.3g} B/s)")
l1 = [p for p in c["levels"] if p["what"] == "L1"]
dram = [p for p in c["levels"] if p["what"] == "DRAM"]
check(l1 and dram and max(p["max"] for p in l1) > max(p["max"] for p in dram), "the L1 level is above DRAM")

# ---- the FMA peak is at least numpy's best sgemm (all threads both)
SGEMM = r"""
import time, numpy as np
best = 0.0
for n in (256, 512, 1024, 2048):
    a = np.ones((n, n), np.float32); b = np.ones((n, n), np.float32)
    a @ b
    for _ in range(3):
        t = time.perf_counter(); a @ b; t = time.perf_counter() - t
        best = max(best, 2.0 * n ** 3 / t)
print(best)
"""
py = "/usr/bin/python3"
has_numpy = os.path.exists(py) and subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode == 0
if has_numpy:
    for attempt in range(3):
        peak = max(p["max"] for p in c["compute"] if p["what"] == "fp32")
        s = subprocess.run([py, "-c", SGEMM], capture_output=True, text=True, timeout=600)
        sgemm = float(s.stdout.strip() or 0)
        print(f"fp32 FMA peak {peak:.3g} FLOP/s, numpy sgemm {sgemm:.3g} FLOP/s")
        if peak >= sgemm:
            break
        c = measure()
    check(peak >= sgemm, f"the fp32 FMA peak {peak:.3g} FLOP/s is below numpy's sgemm {sgemm:.3g}")
else:
    print("skip: the sgemm comparison: no numpy on /usr/bin/python3 (scripts/install-deps.sh torch)")

# ---- mistakes on the command line
run("ceilings", "--repeats", "0", expect=2)
run("ceilings", "--max-size", "lots", expect=2)
run("ceilings", "--bogus", expect=2)

if failures:
    print(f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1)
print("ceilings: ok")
