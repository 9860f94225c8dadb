#!/usr/bin/env python3
"""The cost of tracing a PyTorch training step (a small CNN, batch 16, one
thread), in one process: plain; mlprof.torch's native path (torch's
RecordFunction callbacks) and its dispatch-mode path; and torch.profiler;
each with shapes recorded (record_shapes), then with memory as well
(profile_memory). mlprof's modes record the module spans as well (Python: a
Module.__call__ wrapper and gradient hooks), but for native_ops(_mem): the operators only, as torch.profiler here;
torchprof_stack adds its Python stacks (the modules are in them). The modes
take turns block by block (the order rotating every round) so that all see the
same machine: a block opens the profiler, runs a few steps timed one by one,
and closes it. A step's cost is the median
of its steps' times, in the thread's CPU time (torch runs on this thread
alone): on a loaded machine the wall time counts other processes' turns
(it is given too). The profiler's opening and closing (torch.profiler's
processing of its events) is given apart, per block, in wall time.

    /usr/bin/python3 bench/bench_torch.py [--rounds 15] [--steps 5]

Then the cost of one operator alone: 2000 additions of 4x4 tensors, in the
same turns, each mode's best round (CPU time) less plain's, per operator.

Last line: mlprof-bench-torch: plain_ms=... then MODE_ms and MODE_x (the
slowdown against plain) for each mode, ops_per_step=..., load=..."""
import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
try:
    import torch
except ImportError:
    print("mlprof-bench-torch: skipped (no torch)")
    sys.exit(0)
import mlprof  # noqa: E402
import mlprof.torch  # noqa: E402
from mlprof import torch_native  # noqa: E402
from torch_train import SmallCNN  # noqa: E402


def modes(model):
    """name -> a function returning the context manager of one block."""
    from torch.profiler import ProfilerActivity, profile
    cpu = [ProfilerActivity.CPU]
    m = {"plain": contextlib.nullcontext}
    if torch_native.load() is not None:
        m["native_ops"] = lambda: mlprof.torch.trace(memory=False, native=True)  # no module spans (Python)
        m["native_ops_mem"] = lambda: mlprof.torch.trace(memory=True, native=True)
        m["native"] = lambda: mlprof.torch.trace(model, memory=False, native=True)
        m["native_mem"] = lambda: mlprof.torch.trace(model, memory=True, native=True)
    else:
        print(f"native path unavailable: {torch_native.why()}")
    m["dispatch"] = lambda: mlprof.torch.trace(model, memory=False, native=False)
    m["dispatch_mem"] = lambda: mlprof.torch.trace(model, memory=True, native=False)
    m["torchprof"] = lambda: profile(activities=cpu, record_shapes=True)
    m["torchprof_mem"] = lambda: profile(activities=cpu, record_shapes=True, profile_memory=True)
    # the module of every operator, as mlprof's module spans give it: torch.profiler has it in its stacks
    m["torchprof_stack"] = lambda: profile(activities=cpu, record_shapes=True, with_stack=True)
    return m


def per_op(ms, rounds, n=2000):
    """ns an operator costs in each mode that records operators only."""
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    names = [k for k in ms if k == "plain" or k.startswith(("native_ops", "dispatch", "torchprof"))
             and k != "torchprof_stack"]
    best = {k: float("inf") for k in names}
    for r in range(-1, rounds):
        mlprof.clear()
        for i in range(len(names)):
            name = names[(i + max(r, 0)) % len(names)]
            with ms[name]():
                c0 = time.thread_time()
                for _ in range(n):
                    torch.add(a, b)
                c = time.thread_time() - c0
            if r >= 0:
                best[name] = min(best[name], c)
    return {k: (best[k] - best["plain"]) / n * 1e9 for k in names if k != "plain"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=5, help="timed steps in each block")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steadier on a small machine
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    ms = modes(model)
    steps = {k: [] for k in ms}
    walls = {k: [] for k in ms}
    blocks = {k: [] for k in ms}  # opening and closing, per block
    with tempfile.TemporaryDirectory() as tmp:
        mlprof.set_config(filename=os.path.join(tmp, "bench.json"), memory_svg="", memory_csv="",
                          buffer_size="256M", profile_memory=True)
        mlprof.set_state("run")
        order = list(ms)
        for r in range(-1, a.rounds):  # round -1 warms every mode up
            mlprof.clear()
            for i in range(len(order)):
                name = order[(i + max(r, 0)) % len(order)]
                t0 = time.perf_counter()
                inside = 0.0
                with ms[name]():
                    for _ in range(a.steps):
                        s0, c0 = time.perf_counter(), time.thread_time()
                        step()
                        c, s = time.thread_time() - c0, time.perf_counter() - s0
                        inside += s
                        if r >= 0:
                            steps[name].append(c * 1e3)
                            walls[name].append(s * 1e3)
                if r >= 0:
                    blocks[name].append((time.perf_counter() - t0 - inside) * 1e3)
        op_ns = per_op(ms, a.rounds)
        ops = {}
        for native in ([True] if "native" in ms else []) + [False]:  # operators in a step, as each path sees them
            mlprof.clear()
            with mlprof.torch.trace(model, memory=False, native=native):
                step()
            with open(mlprof.dump()) as f:
                ops["native" if native else "dispatch"] = sum(
                    1 for e in json.load(f)["traceEvents"] if e.get("cat") == "aten" and e["ph"] == "X")
            mlprof.set_state("run")
        mlprof.set_state("stop")
        mlprof.set_config(dump_at_exit=False)  # the folder goes now
    load = os.getloadavg()[0]
    plain, plain_wall = statistics.median(steps["plain"]), statistics.median(walls["plain"])
    print(f"SmallCNN training step (batch 16, 1 thread), {a.rounds} rounds of {a.steps} steps per mode, "
          f"in turns, load {load:.2f}; torch {torch.__version__}")
    print(f"{'mode':14} {'cpu ms':>7} {'slowdown':>8} {'+us/step':>9} {'wall ms':>8} {'slowdown':>8} "
          f"{'open+close ms':>13}")
    fields = [f"plain_ms={plain:.3f}"]
    for name in ms:
        med, wall = statistics.median(steps[name]), statistics.median(walls[name])
        blk = statistics.median(blocks[name])
        print(f"{name:14} {med:7.2f} {med / plain:7.3f}x {1e3 * (med - plain):9.0f} {wall:8.2f} "
              f"{wall / plain_wall:7.3f}x {blk:13.2f}")
        if name != "plain":
            fields += [f"{name}_ms={med:.3f}", f"{name}_x={med / plain:.3f}"]
    print("operators a step: " + ", ".join(f"{k} {v}" for k, v in ops.items()))
    print("one operator alone (torch.add, 4x4), ns more than plain: " +
          ", ".join(f"{k} {v:.0f}" for k, v in op_ns.items()))
    fields += [f"{k}_ns_per_op={v:.0f}" for k, v in op_ns.items()]
    fields += [f"ops_per_step_{k}={v}" for k, v in ops.items()]
    print("mlprof-bench-torch: " + " ".join(fields) + f" load={load:.2f}")


if __name__ == "__main__":
    main()
