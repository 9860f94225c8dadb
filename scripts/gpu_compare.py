#!/usr/bin/env python3
"""scripts/gpu_compare.py - the workloads and comparisons of scripts/gpu_compare.sh
(issue 24's checks 1, 3 and 6 on a GPU machine).

  gpu_compare.py step MODE MODEL OUT.json   run MODEL (cnn: a small CNN; xfmr: a
      transformer encoder block), forward, backward and SGD step, W warm-up steps,
      then N steps untimed-by-any-profiler ("plain"), then N steps under MODE:
        torch   torch.profiler (CPU and CUDA activity, record_shapes)
        mlprof  mlprof.torch.trace with gpu=on (record_shapes)
        torch_cpu, mlprof_cpu   the same without the GPU's activity
        nvtx    torch.autograd.profiler.emit_nvtx(record_shapes): for mlprof run
        none    N more plain steps
      and prints one JSON line: the ms a step plain and under MODE.
  gpu_compare.py kernels A.json B.json      GPU activity of two traces of the
      same N steps, per kernel name: counts, total and mean time; the worst
      per-name disagreement.
  gpu_compare.py run TRACE                  what mlprof run recorded: categories,
      cuBLAS / cuDNN spans and their arguments, NVTX ranges, kernels linked.
  gpu_compare.py nccl [OUT.json]             a one-rank NCCL job (torch.distributed):
      all_reduce, broadcast, all_gather, reduce_scatter; with OUT.json, the
      trace's NCCL spans are summed up instead.
  gpu_compare.py ncu NCU.csv TRACE           kernel times by ncu against the trace's.
"""
import collections
import json
import os
import sys
import time

W, N = 5, 20


def make(name, dev):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    if name == "cnn":
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, 256), nn.ReLU(),
                              nn.Linear(256, 10)).to(dev)
        x, y = torch.randn(64, 3, 32, 32, device=dev), torch.randint(0, 10, (64,), device=dev)
    else:
        model = nn.Sequential(nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True), nn.Flatten(1),
                              nn.Linear(64 * 256, 10)).to(dev)
        x, y = torch.randn(16, 64, 256, device=dev), torch.randint(0, 10, (16,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model, step


def steps(step, n, sync):
    t = time.perf_counter()
    for _ in range(n):
        step()
    sync()
    return (time.perf_counter() - t) * 1e3 / n


def cmd_step(mode, name, out):
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    model, step = make(name, dev)
    steps(step, W, sync)
    plain = steps(step, N, sync)
    if mode in ("torch", "torch_cpu"):
        from torch.profiler import profile, ProfilerActivity
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" and mode == "torch" else [])
        with profile(activities=acts, record_shapes=True) as p:
            traced = steps(step, N, sync)
        p.export_chrome_trace(out)
    elif mode in ("mlprof", "mlprof_cpu"):
        import mlprof
        import mlprof.torch
        mlprof.set_state("stop")
        gpu = "on" if dev == "cuda" and mode == "mlprof" else "off"
        mlprof.set_config(filename=out, gpu=gpu, memory_svg="", memory_csv="")
        mlprof.set_state("run")
        with mlprof.torch.trace(model, name=name):
            traced = steps(step, N, sync)
        mlprof.set_state("stop")
        mlprof.dump()
    elif mode == "nvtx":
        with torch.autograd.profiler.emit_nvtx(record_shapes=True):
            traced = steps(step, N, sync)
    else:
        traced = steps(step, N, sync)
    print(json.dumps({"model": name, "mode": mode, "device": dev, "steps": N,
                      "plain_ms": round(plain, 4), "traced_ms": round(traced, 4),
                      "slowdown": round(traced / plain, 3)}))


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_events(ev):
    return [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


def by_name(ev):
    t = collections.defaultdict(lambda: [0, 0.0])
    for e in ev:
        key = e["cat"] + ": " + (e["name"] if e["cat"] == "kernel" else e["name"].split(" (")[0])
        t[key][0] += 1
        t[key][1] += float(e.get("dur", 0))
    return t


def cmd_kernels(a_path, b_path):
    a, b = by_name(gpu_events(load(a_path))), by_name(gpu_events(load(b_path)))
    print("A = %s\nB = %s" % (a_path, b_path))
    for cat in GPU_CATS:
        na = sum(v[0] for k, v in a.items() if k.startswith(cat + ":"))
        nb = sum(v[0] for k, v in b.items() if k.startswith(cat + ":"))
        ta = sum(v[1] for k, v in a.items() if k.startswith(cat + ":"))
        tb = sum(v[1] for k, v in b.items() if k.startswith(cat + ":"))
        print("%-11s count A %5d B %5d   time A %10.1f us B %10.1f us   B/A %.4f" %
              (cat, na, nb, ta, tb, tb / ta if ta else float("nan")))
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    diff = [k for k in set(a) & set(b) if a[k][0] != b[k][0]]
    print("names in A only: %d, in B only: %d, with other counts: %d" % (len(only_a), len(only_b), len(diff)))
    for k in only_a[:5]:
        print("  A only: %s x%d" % (k[:110], a[k][0]))
    for k in only_b[:5]:
        print("  B only: %s x%d" % (k[:110], b[k][0]))
    for k in diff[:5]:
        print("  count: %s A %d B %d" % (k[:100], a[k][0], b[k][0]))
    rows = sorted(set(a) & set(b), key=lambda k: -a[k][1])
    print("%-70s %6s %10s %10s %7s" % ("kernel (by A's time)", "calls", "A mean us", "B mean us", "B/A"))
    worst = 0.0
    for k in rows:
        ma, mb = a[k][1] / a[k][0], b[k][1] / b[k][0]
        r = mb / ma if ma else float("nan")
        if k.startswith("kernel:") and a[k][1] >= 0.01 * sum(v[1] for v in a.values()):
            worst = max(worst, abs(r - 1))
    for k in rows[:15]:
        ma, mb = a[k][1] / a[k][0], b[k][1] / b[k][0]
        print("%-70s %6d %10.2f %10.2f %7.4f" % (k[:70], a[k][0], ma, mb, mb / ma if ma else float("nan")))
    print("worst mean-time disagreement among kernels of 1%% or more of A's time: %.2f%%" % (100 * worst))


def cmd_run(path):
    ev = load(path)
    cats = collections.Counter(e.get("cat") for e in ev if e.get("ph") in ("X", "B", "i", "I"))
    print("categories:", cats.most_common(14))
    for cat in ("cublas", "cublasLt", "cudnn"):
        sp = [e for e in ev if e.get("cat") == cat and e.get("ph") == "X"]
        if not sp:
            print("%s: no spans" % cat)
            continue
        names = collections.Counter(e["name"] for e in sp)
        with_flops = sum(1 for e in sp if "flops" in e.get("args", {}))
        print("%s: %d spans %s; with flops %d" % (cat, len(sp), names.most_common(5), with_flops))
        kinds = collections.Counter((e["name"], e.get("args", {}).get("op"), e.get("args", {}).get("ops"))
                                    for e in sp)
        print("  by call, op and fused ops:", kinds.most_common(8))
        for e in sp[:1] + [e for e in sp if e.get("args", {}).get("op")][:2]:
            print("  args:", json.dumps(e.get("args", {}))[:400])
    import glob
    for part in sorted(glob.glob(path + ".parts/*.json"))[:4]:
        with open(part) as f:
            od = json.load(f).get("otherData", {})
        print("otherData of %s: cudnn %s nccl %s" % (os.path.basename(part), od.get("cudnn"), od.get("nccl")))
    nv = [e for e in ev if e.get("cat") == "nvtx" or str(e.get("cat", "")).startswith("nvtx")]
    print("nvtx: %d ranges, e.g. %s" % (len(nv), [e["name"][:60] for e in nv[:3]]))
    k = [e for e in ev if e.get("cat") == "kernel"]
    linked = [e for e in k if e.get("args", {}).get("op")]
    print("kernels: %d, with a launching op: %d; ops: %s" % (len(k), len(linked),
          collections.Counter(e["args"]["op"] for e in linked).most_common(6)))
    stacks = [e for e in linked if e["args"].get("op_stack")]
    if stacks:
        print("  an op stack:", stacks[len(stacks) // 2]["args"]["op_stack"][:300])


def cmd_nccl(out=None):
    if out:
        with open(out) as f:
            d = json.load(f)
        ev = d["traceEvents"]
        sp = [e for e in ev if e.get("cat") == "nccl"]
        print("nccl spans: %d %s" % (len(sp), collections.Counter(e["name"] for e in sp).most_common(8)))
        for e in sp[:6]:
            print("  %s tid %s %s" % (e["name"], e.get("tid"), json.dumps(e.get("args", {}))[:300]))
        print("otherData.nccl:", json.dumps(d.get("otherData", {}).get("nccl"))[:600])
        return
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    print("nccl", torch.cuda.nccl.version())
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(3):
        dist.all_reduce(x)
    dist.broadcast(x, 0)
    g = torch.empty(1 << 20, device="cuda")
    dist.all_gather_into_tensor(g, x)
    r = torch.empty(1 << 20, device="cuda")
    dist.reduce_scatter_tensor(r, x)
    torch.cuda.synchronize()
    print("sum", float(x.sum()))
    dist.destroy_process_group()


def cmd_ncu(csv_path, trace):
    import csv
    t = collections.defaultdict(list)
    with open(csv_path) as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            v = float(row["Metric Value"].replace(",", ""))
            unit = row.get("Metric Unit", "ns")
            v *= {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3}.get(unit, 1e-3)
            t[row["Kernel Name"].split("(")[0]].append(v)
    m = collections.defaultdict(list)
    for e in gpu_events(load(trace)):
        if e["cat"] == "kernel":
            m[e["name"].split("(")[0]].append(float(e["dur"]))
    print("%-16s %6s %6s %12s %12s %7s" % ("kernel", "ncu n", "mlp n", "ncu mean us", "mlprof us", "ratio"))
    for k in sorted(t):
        a = t[k]
        b = m.get(k, [])
        mb = sum(b) / len(b) if b else float("nan")
        ma = sum(a) / len(a)
        print("%-16s %6d %6d %12.3f %12.3f %7.4f" % (k[:16], len(a), len(b), ma, mb, mb / ma))


if __name__ == "__main__":
    c = sys.argv[1]
    if c == "step":
        cmd_step(*sys.argv[2:5])
    elif c == "kernels":
        cmd_kernels(sys.argv[2], sys.argv[3])
    elif c == "run":
        cmd_run(sys.argv[2])
    elif c == "nccl":
        cmd_nccl(*sys.argv[2:3])
    elif c == "ncu":
        cmd_ncu(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
