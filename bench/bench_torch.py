#!/usr/bin/env python3
"""The cost of mlprof.torch: a small CNN's training step timed plain and
traced (every aten operator and module as spans), in one process. The two
take turns step by step (the order flipping every round), so that both see
the same machine; each is given as the median of its steps with their
minimum, with the load. Last line: mlprof-bench-torch: plain_ms=...
traced_ms=... slowdown=... ops_per_step=..."""
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
from torch_train import SmallCNN  # noqa: E402


def main(rounds=60):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steadier on a small machine
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def timed(traced):
        t0 = time.perf_counter()
        if traced:
            with mlprof.torch.trace(model, memory=False):
                step()
        else:
            step()
        return (time.perf_counter() - t0) * 1e3

    with tempfile.TemporaryDirectory() as tmp:
        mlprof.set_config(filename=os.path.join(tmp, "bench.json"), memory_svg="", memory_csv="",
                          buffer_size="256M")
        mlprof.set_state("run")
        for traced in (False, True, False, True):
            timed(traced)  # warm up both
        mlprof.clear()
        times = {False: [], True: []}
        for r in range(rounds):
            for traced in ((False, True) if r % 2 == 0 else (True, False)):
                times[traced].append(timed(traced))
        with open(mlprof.dump()) as f:
            ops = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "aten")
    load = os.getloadavg()
    plain, traced = statistics.median(times[False]), statistics.median(times[True])
    plain_min, traced_min = min(times[False]), min(times[True])
    per_step = ops // rounds
    print(f"SmallCNN training step (batch 16, 1 thread), {rounds} rounds in turns, load {load[0]:.2f}: "
          f"plain {plain:.2f} ms (min {plain_min:.2f}), traced {traced:.2f} ms (min {traced_min:.2f}); "
          f"slowdown {traced / plain:.2f}x (min over min {traced_min / plain_min:.2f}x); {per_step} operators "
          f"a step, {1e3 * (traced - plain) / max(per_step, 1):.1f} us each")
    print(f"mlprof-bench-torch: plain_ms={plain:.3f} traced_ms={traced:.3f} slowdown={traced / plain:.3f} "
          f"plain_min_ms={plain_min:.3f} traced_min_ms={traced_min:.3f} ops_per_step={per_step} load={load[0]:.2f}")


if __name__ == "__main__":
    main()
