#!/usr/bin/env python3
"""`mlprof analyze DIR` and `mlprof kernels DIR` on a generated directory of 8
ranks' traces shaped as PyTorch's profiler (Kineto) writes them: about 1 GB in
all (--mb, or BENCH_MB through the Makefile, scales it), one
rank-N.pt.trace.json per rank with distributedInfo, deviceProperties and
baseTimeNanoseconds; ProfilerStep#N annotations around operators that launch
kernels (cudaLaunchKernel with correlation and External ids, ac2g flows),
copies, and NCCL all-reduces on their own stream whose starts differ per rank
(rank 5 the usual straggler). Each command runs in a process of its own, timed
with its peak resident memory (wait4). The last line is machine-readable.

usage: bench_ranks.py MLPROF [--mb N] [--ranks R] [--keep]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

OPS = [("aten::conv2d", "[[32, 64, 56, 56], [64, 64, 3, 3]]", "implicit_convolve_sgemm<float, 1024, 5, 5, 3, 3>"),
       ("aten::relu", "[[32, 64, 56, 56]]", "void at::native::vectorized_elementwise_kernel<4, relu>"),
       ("aten::addmm", "[[2048], [32, 2048], [2048, 2048]]", "ampere_sgemm_128x64_tn"),
       ("aten::batch_norm", "[[32, 64, 56, 56], [64], [64]]", "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>"),
       ("aten::add_", "[[32, 256, 56, 56], [32, 256, 56, 56], []]", "void at::native::elementwise_kernel<128, 2>")]
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
BASE_NS = 1_700_000_000_000_000_000


def generate(path, rank, target_bytes):
    """Writes one rank's trace until it has target_bytes; returns the event count."""
    pid, tid, gpu = 1000 + rank, 1000 + rank, 0
    events = 0
    corr = ext = 1
    with open(path, "w", buffering=1 << 22) as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 8}, '
                '"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912}], '
                '"baseTimeNanoseconds": %d, "traceEvents": [\n' % (rank, BASE_NS))
        ts = 1000.0
        step = 1
        first = True
        while f.tell() < target_bytes:
            parts = []
            t0 = ts
            parts.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d, '
                         '"ts": %.3f, "dur": %.3f, "args": {"External id": %d}}' % (step, pid, tid, t0, 790.0, ext))
            ext += 1
            t = t0 + 2.0
            for layer in range(8):
                for name, dims, kernel in OPS:
                    parts.append('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %.3f, '
                                 '"dur": %.3f, "args": {"External id": %d, "Input Dims": %s, '
                                 '"Input type": ["float", "float"]}}' % (name, pid, tid, t, 14.0, ext, dims))
                    parts.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, '
                                 '"tid": %d, "ts": %.3f, "dur": %.3f, "args": {"External id": %d, '
                                 '"correlation": %d}}' % (pid, tid, t + 3.0, 6.0, ext, corr))
                    parts.append('{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f, "cat": "ac2g", '
                                 '"name": "ac2g"}' % (corr, pid, tid, t + 3.0))
                    parts.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": 7, "ts": %.3f, '
                                 '"dur": %.3f, "args": {"External id": %d, "correlation": %d, "device": 0, '
                                 '"stream": 7, "grid": [128, 1, 1], "block": [256, 1, 1]}}'
                                 % (kernel, gpu, t + 12.0, 9.5, ext, corr))
                    parts.append('{"ph": "f", "id": %d, "pid": %d, "tid": 7, "ts": %.3f, "cat": "ac2g", '
                                 '"name": "ac2g", "bp": "e"}' % (corr, gpu, t + 12.0))
                    corr += 1
                    ext += 1
                    t += 16.0
            # a copy, then the gradients' all-reduce: rank 5 usually late, the others jittered
            parts.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": %d, "tid": %d, '
                         '"ts": %.3f, "dur": %.3f, "args": {"External id": %d, "correlation": %d}}'
                         % (pid, tid, t - 10.0, 4.0, ext - 1, corr))
            parts.append('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": %d, '
                         '"tid": 8, "ts": %.3f, "dur": %.3f, "args": {"device": 0, "stream": 8, "correlation": %d, '
                         '"bytes": 4194304, "memory bandwidth (GB/s)": 20.1}}' % (gpu, t, 12.0, corr))
            corr += 1
            late = (step * 7 + rank * 3) % 5 + (40.0 if rank == 5 and step % 4 else 0.0)
            parts.append('{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": %d, "tid": %d, '
                         '"ts": %.3f, "dur": %.3f, "args": {"External id": %d}}' % (pid, tid, t + late, 9.0, ext))
            parts.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, "tid": %d, '
                         '"ts": %.3f, "dur": %.3f, "args": {"External id": %d, "correlation": %d}}'
                         % (pid, tid, t + late + 2.0, 5.0, ext, corr))
            parts.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": 20, "ts": %.3f, '
                         '"dur": %.3f, "args": {"External id": %d, "correlation": %d, "device": 0, "stream": 20}}'
                         % (NCCL, gpu, t + late + 10.0, 120.0 - late, ext, corr))
            corr += 1
            ext += 1
            events += 1 + 8 * len(OPS) * 5 + 5
            ts += 800.0
            step += 1
            chunk = ",\n".join(parts)
            f.write(chunk if first else ",\n" + chunk)
            first = False
        f.write('\n], "traceName": "rank-%d.pt.trace.json"}\n' % rank)
    return events


def run_alone(argv):
    """Runs argv in a fresh Python child so that RUSAGE_CHILDREN holds its peak alone."""
    code = ("import resource,subprocess,sys,time\n"
            "t=time.perf_counter()\n"
            "p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE)\n"
            "s=time.perf_counter()-t\n"
            "sys.stderr.buffer.write(p.stderr if p.returncode else b'')\n"
            "print(s,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024,p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        sys.stderr.write(p.stderr)
        return 0.0, 0, 1
    s, rss, rc = p.stdout.split()
    if int(rc) != 0:
        sys.stderr.write(p.stderr)
    return float(s), int(rss), int(rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlprof")
    ap.add_argument("--mb", type=int, default=1024, help="the whole directory's size (default 1024)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="mlprof-bench-ranks-")
    try:
        t0 = time.perf_counter()
        events = 0
        for r in range(a.ranks):
            events += generate(os.path.join(d, f"rank-{r}.pt.trace.json"), r, a.mb * 1024 * 1024 // a.ranks)
        size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
        mb = size / 1e6
        print(f"directory: {a.ranks} ranks, {size / 2**20:.0f} MiB, {events} events, "
              f"generated in {time.perf_counter() - t0:.1f} s")
        results = {}
        for cmd in ("analyze", "kernels"):
            s, rss, rc = run_alone([a.mlprof, cmd, d, "-t", "5"])
            if rc != 0:
                sys.exit(f"bench: mlprof {cmd} DIR failed")
            results[cmd] = (s, rss)
            print(f"mlprof {cmd:8s} DIR  {s:7.2f} s  {mb / s:8.1f} MB/s  peak RSS {rss / 2**20:7.0f} MiB")
        one = os.path.join(d, "rank-0.pt.trace.json")
        s1, rss1, rc = run_alone([a.mlprof, "kernels", one, "-t", "5"])
        if rc == 0:
            print(f"mlprof kernels one rank  {s1:7.2f} s  peak RSS {rss1 / 2**20:7.0f} MiB "
                  f"(a directory holds one rank's trace at a time)")
        print(f"mlprof-bench-ranks: ranks={a.ranks} dir_mb={mb:.0f} events={events} "
              f"analyze_s={results['analyze'][0]:.2f} analyze_rss_mb={results['analyze'][1] / 2**20:.0f} "
              f"kernels_s={results['kernels'][0]:.2f} kernels_rss_mb={results['kernels'][1] / 2**20:.0f}")
    finally:
        if a.keep:
            print(f"kept: {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
