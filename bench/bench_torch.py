#!/usr/bin/env python3
"""The cost of mlprof.torch: a small CNN's training step timed plain and
traced (every aten operator and module as spans), best of several runs each,
in one process. Last line: mlprof-bench-torch: plain_ms=... traced_ms=...
slowdown=... ops_per_step=..."""
import json
import os
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


def main(repeat=20):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # steadier on a small machine
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    def best(traced):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            if traced:
                with mlprof.torch.trace(model, memory=False):
                    step()
            else:
                step()
            times.append(time.perf_counter() - t0)
        return min(times) * 1e3

    for _ in range(3):
        step()  # warm up
    with tempfile.TemporaryDirectory() as tmp:
        mlprof.set_config(filename=os.path.join(tmp, "bench.json"), memory_svg="", memory_csv="",
                          buffer_size="256M")
        mlprof.set_state("run")
        plain = best(False)
        traced = best(True)
        with open(mlprof.dump()) as f:
            ops = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "aten")
    per_step = ops // repeat
    print(f"SmallCNN training step (batch 16, 1 thread): plain {plain:.2f} ms, traced {traced:.2f} ms "
          f"(slowdown {traced / plain:.2f}x; {per_step} operators a step, "
          f"{1e3 * (traced - plain) / max(per_step, 1):.1f} us each)")
    print(f"mlprof-bench-torch: plain_ms={plain:.3f} traced_ms={traced:.3f} slowdown={traced / plain:.3f} "
          f"ops_per_step={per_step}")


if __name__ == "__main__":
    main()
