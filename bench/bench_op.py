#!/usr/bin/env python3
"""The op profiler against torch.utils.benchmark, on a few CPU operators:
each op measured by mlprof.torch.profile_op and by Timer.blocked_autorange,
taking turns round by round (so that both see the same machine); per op the
median of each tool's round medians, their ratio, the median's confidence
interval and repeats mlprof used, the wall time each tool spent, and the
workspace. Then a memory-bound op warm and with cold_cache. Last line:
mlprof-bench-op: worst_ratio=... ops=..."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
try:
    import torch
    from torch.utils.benchmark import Timer
except ImportError:
    print("mlprof-bench-op: skipped (no torch)")
    sys.exit(0)
import mlprof.op  # noqa: E402
import mlprof.torch  # noqa: E402

F = torch.nn.functional


def ops():
    torch.manual_seed(0)
    yield "matmul 128x128", torch.matmul, (torch.randn(128, 128), torch.randn(128, 128))
    yield "matmul 256x256", torch.matmul, (torch.randn(256, 256), torch.randn(256, 256))
    yield "conv2d 8x16x32x32 * 32x16x3x3", F.conv2d, (torch.randn(8, 16, 32, 32), torch.randn(32, 16, 3, 3))
    yield "relu 1M", F.relu, (torch.randn(1 << 20),)
    yield "softmax 256x1000", lambda x: torch.softmax(x, -1), (torch.randn(256, 1000),)
    yield "add 1K", torch.add, (torch.randn(1024), torch.randn(1024))


def main(rounds=5):
    import resource

    def preempted():
        return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs; medians of {rounds} interleaved rounds [lowest, highest round]; "
          f"preempted: involuntary switches per timed repeat or block")
    print(f"{'op':30} {'mlprof us':>9} {'[rounds]':>19} {'pre':>5} {'s':>5}  {'Timer us':>9} {'[rounds]':>19}"
          f" {'pre':>5} {'s':>5}  {'ratio':>6} {'workspace':>9}")
    worst = 1.0
    for name, fn, args in ops():
        env = {"fn": fn, **{f"a{i}": a for i, a in enumerate(args)}}
        timer = Timer(f"fn({', '.join(f'a{i}' for i in range(len(args)))})", globals=env,
                      num_threads=torch.get_num_threads())
        ours, theirs, t_ours, t_theirs, last = [], [], 0.0, 0.0, None
        pre_ours = pre_theirs = reps = blocks = 0
        for r in range(rounds):
            t0, p0 = time.perf_counter(), preempted()
            last = mlprof.torch.profile_op(fn, *args, budget_ms=500)
            t1, p1 = time.perf_counter(), preempted()
            m = timer.blocked_autorange(min_run_time=0.5)
            t_theirs += time.perf_counter() - t1
            pre_theirs += preempted() - p1
            pre_ours += p1 - p0
            t_ours += t1 - t0
            reps += last["repeats"]
            blocks += len(m.times)
            ours.append(last["median"])
            theirs.append(m.median * 1e6)
        m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
        ratio = m_ours / m_theirs
        worst = max(worst, ratio, 1 / ratio)
        ws = last["workspace_size"]
        print(f"{name:30} {m_ours:9.2f} [{min(ours):8.2f},{max(ours):8.2f}] {pre_ours / reps:5.2f} {t_ours / rounds:5.2f}"
              f"  {m_theirs:9.2f} [{min(theirs):8.2f},{max(theirs):8.2f}] {pre_theirs / blocks:5.2f}"
              f" {t_theirs / rounds:5.2f}  {ratio:6.3f} {ws if ws is not None else '-':>9}")

    # warm against cold: a sum over 32 MiB, read once per call
    x = torch.randn(8 << 20)
    warm = mlprof.op.profile(torch.sum, x, budget_ms=500)
    cold = mlprof.op.profile(torch.sum, x, cold_cache=True, budget_ms=3000, max_repeats=20)
    print(f"sum 32 MiB: warm {warm['median']:.1f} us, cold_cache {cold['median']:.1f} us "
          f"({cold['repeats']} repeats, {cold['inner']} call each)")
    print(f"mlprof-bench-op: worst_ratio={worst:.4f} ops={len(list(ops()))} rounds={rounds}")


if __name__ == "__main__":
    main()
