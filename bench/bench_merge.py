#!/usr/bin/env python3
"""`mlprof merge` of a distributed job's rank traces: its throughput and its
peak memory, which streaming keeps near one input's (not the sum of them).

Generates N ranks' traces of S MB each (default 16 x 50 MB), shaped as
mlprof's own rank files are: distributedInfo with rank and world size,
otherData with host and CLOCK_MONOTONIC, operator spans with correlation ids,
flows and counters. Runs `mlprof merge` on them in a process of its own, whose
peak resident memory is read from the kernel (wait4's ru_maxrss), and prints
MB/s (input bytes per second of wall time) and the peak against the largest
input and against the sum of the inputs. The last line is machine-readable.

usage: bench_merge.py MLPROF [--ranks N] [--mb S] [--keep] [--dir D]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def body(target_bytes):
    """The events of one rank (the same for each: only the header differs), as bytes."""
    parts = []
    size = 0
    ts = 1_000_000.0
    corr = 1
    n = 0
    while size < target_bytes:
        chunk = []
        for k in range(200):
            chunk.append('{"name":"aten::linear","cat":"cpu_op","ph":"X","pid":4242,"tid":4243,"ts":%.3f,'
                         '"dur":12.500,"args":{"correlation":%d,"Input Dims":[[32,1024],[1024,1024]],'
                         '"layer":"encoder.%d"}}' % (ts, corr, k % 24))
            chunk.append('{"name":"cudaLaunchKernel","cat":"cuda_runtime","ph":"X","pid":4242,"tid":4243,'
                         '"ts":%.3f,"dur":4.000,"args":{"correlation":%d}}' % (ts + 2.0, corr))
            chunk.append('{"name":"ac2g","cat":"ac2g","ph":"s","id":%d,"pid":4242,"tid":4243,"ts":%.3f}'
                         % (corr, ts + 2.0))
            chunk.append('{"name":"MPI_Allreduce","cat":"mpi","ph":"X","pid":4242,"tid":4244,"ts":%.3f,'
                         '"dur":30.000,"args":{"bytes":4194304,"comm":1,"seq":%d}}' % (ts + 5.0, corr))
            chunk.append('{"name":"memory","ph":"C","pid":4242,"tid":4243,"ts":%.3f,"args":{"used":%d}}'
                         % (ts + 6.0, 1 << 30 | corr))
            ts += 40.0
            corr += 1
            n += 5
        text = ",\n".join(chunk)
        parts.append(text)
        size += len(text) + 2
    return (",\n".join(parts)).encode(), n


def write_rank(path, rank, world, events):
    header = ('{"traceEvents":[\n'
              '{"name":"process_name","ph":"M","pid":4242,"tid":0,"args":{"name":"train.py"}},\n'
              '{"name":"thread_name","ph":"M","pid":4242,"tid":4243,"args":{"name":"main"}},\n')
    footer = ('\n],\n"displayTimeUnit":"ms",\n"distributedInfo":{"rank":%d,"world_size":%d},\n'
              '"otherData":{"host":"bench-host","clock_domain":"CLOCK_MONOTONIC"}\n}\n' % (rank, world))
    with open(path, "wb") as f:
        f.write(header.encode())
        f.write(events)
        f.write(footer.encode())


def run_alone(argv):
    """Runs argv in a child of its own: (seconds, peak RSS in bytes, status, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - t0, ru.ru_maxrss * 1024, p.returncode, err.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mlprof")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--mb", type=float, default=50, help="MB per rank's trace")
    ap.add_argument("--dir", help="where to write the traces (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the traces and the merged output")
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="mlprof-bench-merge-")
    os.makedirs(d, exist_ok=True)
    try:
        events, n = body(int(a.mb * 1e6))
        paths = []
        for r in range(a.ranks):
            p = os.path.join(d, "job.rank%d.json" % r)
            write_rank(p, r, a.ranks, events)
            paths.append(p)
        sizes = [os.path.getsize(p) for p in paths]
        total = sum(sizes)
        out = os.path.join(d, "merged.json")
        s, rss, rc, err = run_alone([a.mlprof, "merge", *paths, "-o", out])
        if rc != 0:
            sys.exit("bench_merge: mlprof merge failed (%d): %s" % (rc, err.strip()))
        mb = total / 1e6
        print(f"inputs: {a.ranks} ranks x {max(sizes) / 1e6:.1f} MB ({n + 2} events each), {mb:.0f} MB in all; "
              f"output {os.path.getsize(out) / 1e6:.0f} MB")
        print(f"mlprof merge  {s:7.2f} s  {mb / s:7.1f} MB/s  peak RSS {rss / 2**20:6.0f} MiB  "
              f"= {rss / max(sizes):.2f} x the largest input, {rss / total:.3f} x their sum")
        print(f"mlprof-bench-merge: ranks={a.ranks} input_mb={mb:.0f} seconds={s:.2f} mb_per_s={mb / s:.1f} "
              f"peak_mib={rss / 2**20:.0f} peak_over_largest={rss / max(sizes):.2f} "
              f"peak_over_sum={rss / total:.3f}")
    finally:
        if a.keep:
            print(f"kept: {d}")
        elif a.dir:
            for name in os.listdir(d):
                if name.startswith("job.rank") or name.startswith("merged.json"):
                    os.unlink(os.path.join(d, name))
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
