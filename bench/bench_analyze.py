#!/usr/bin/env python3
"""How fast `mlprof analyze` reads and analyzes a large trace, against Python's
json module reading the same file in the same run. The trace is generated
here: at least 500 MB (or --mb) of complete events on 8 threads, nested four
deep, with shapes, FLOPs and bytes arguments, a B/E pair in every batch and
counter samples, as a profiler writes them. Each reader runs in a process of
its own, timed with its peak resident memory (wait4). Then `mlprof export
--sqlite` of a trace of the same shape with --sqlite-events events (1 M; 0
skips it, as it does when SQLite cannot be loaded): its time, rate and the
database's size. The last lines are machine-readable.

usage: bench_analyze.py MLPROF [--mb N] [--sqlite-events N] [--keep]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

OPS = [("aten::conv2d", "[32,64,56,56]", 231211008), ("aten::relu", "[32,64,56,56]", 6422528),
       ("aten::addmm", "[32,2048]", 262144000), ("aten::batch_norm", "[32,64,56,56]", 25690112),
       ("aten::add_", "[32,256,56,56]", 25690112), ("aten::max_pool2d", "[32,64,112,112]", 0)]


def generate(path, target_bytes, max_events=None):
    """Writes events until the file has target_bytes (or max_events events);
    returns the event count."""
    events = 0
    with open(path, "w", buffering=1 << 22) as f:
        f.write('{"traceEvents":[\n')
        ts = 1000.0
        first = True
        while f.tell() < target_bytes and (max_events is None or events < max_events):
            parts = []
            for tid in range(8):
                # one batch on this thread: a step span around layers around ops around kernels
                t0 = ts + tid * 0.5
                parts.append('{"name":"step","cat":"user","ph":"B","pid":1,"tid":%d,"ts":%.3f}' % (tid, t0))
                t = t0 + 1.0
                for layer in range(12):
                    lt = t
                    parts.append('{"name":"layer%d","cat":"module","ph":"X","pid":1,"tid":%d,"ts":%.3f,'
                                 '"dur":%.3f,"args":{"scope":"model:layer%d:"}}' % (layer, tid, lt, 60.0, layer))
                    t += 1.0
                    for k, (name, shape, flops) in enumerate(OPS):
                        parts.append('{"name":"%s","cat":"cpu_op","ph":"X","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f,'
                                     '"args":{"input_shape":"%s","flops":%d,"bytes":%d,"External id":%d}}'
                                     % (name, tid, t, 8.25, shape, flops, flops // 4, events + k))
                        parts.append('{"name":"gemm","cat":"kernelish","ph":"X","pid":1,"tid":%d,"ts":%.3f,'
                                     '"dur":%.3f}' % (tid, t + 1.0, 5.5))
                        t += 9.0
                    t = lt + 61.0
                parts.append('{"name":"step","cat":"user","ph":"E","pid":1,"tid":%d,"ts":%.3f}' % (tid, t))
                parts.append('{"name":"memory","ph":"C","pid":1,"tid":%d,"ts":%.3f,"args":{"value":%d}}'
                             % (tid, t, events))
                events += 2 + 12 * (1 + 2 * len(OPS)) + 1
            ts += 800.0
            chunk = ",\n".join(parts)
            f.write(chunk if first else ",\n" + chunk)
            first = False
        f.write('\n],"displayTimeUnit":"ms","otherData":{"generator":"bench_analyze.py"}}\n')
    return events


def timed(argv):
    """Runs argv; returns (seconds, peak RSS in bytes, exit status, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(err.decode(errors="replace"))
    return seconds, usage.ru_maxrss * 1024, p.returncode, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlprof")
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--sqlite-events", type=int, default=1000000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="mlprof-bench-")
    os.close(fd)
    try:
        t0 = time.perf_counter()
        events = generate(path, a.mb * 1024 * 1024)
        size = os.path.getsize(path)
        mb = size / 1e6
        print(f"trace: {size / 2**20:.0f} MiB, {events} events, generated in {time.perf_counter() - t0:.1f} s")
        m_s, m_rss, rc, out = timed([a.mlprof, "analyze", path, "--format", "json", "-t", "5"])
        if rc != 0:
            sys.exit("bench: mlprof analyze failed")
        py = ("import json,sys\n"
              "d=json.load(open(sys.argv[1]))\n"
              "print(len(d['traceEvents']))\n")
        p_s, p_rss, rc, pout = timed([sys.executable, "-c", py, path])
        if rc != 0:
            sys.exit("bench: python json failed")
        print(f"mlprof analyze (read + analyze)  {m_s:7.2f} s  {mb / m_s:8.1f} MB/s  peak RSS {m_rss / 2**20:7.0f} MiB")
        print(f"python json.load (read only)     {p_s:7.2f} s  {mb / p_s:8.1f} MB/s  peak RSS {p_rss / 2**20:7.0f} MiB")
        print(f"mlprof is {p_s / m_s:.1f}x faster and uses {p_rss / max(m_rss, 1):.1f}x less memory")
        print(f"mlprof-bench-analyze: trace_mb={mb:.0f} events={events} mlprof_mb_s={mb / m_s:.1f} "
              f"mlprof_rss_mb={m_rss / 2**20:.0f} python_mb_s={mb / p_s:.1f} python_rss_mb={p_rss / 2**20:.0f}")
    finally:
        if a.keep:
            print(f"kept: {path}")
        else:
            os.unlink(path)
    if a.sqlite_events > 0:
        bench_sqlite(a.mlprof, a.sqlite_events)


def bench_sqlite(mlprof, max_events):
    """mlprof export --sqlite of a trace of max_events events: time and size."""
    try:
        import ctypes
        ctypes.CDLL("libsqlite3.so.0")
    except OSError as e:
        print(f"mlprof export --sqlite: skipped, SQLite cannot be loaded ({e})")
        return
    d = tempfile.mkdtemp(prefix="mlprof-bench-sqlite-")
    path, db = os.path.join(d, "trace.json"), os.path.join(d, "trace.db")
    try:
        events = generate(path, 1 << 40, max_events)
        size = os.path.getsize(path)
        s, rss, rc, out = timed([mlprof, "export", "--sqlite", db, path])
        if rc != 0:
            sys.exit("bench: mlprof export --sqlite failed")
        dbsize = os.path.getsize(db)
        print(f"mlprof export --sqlite ({events} events, {size / 2**20:.0f} MiB JSON)  {s:7.2f} s  "
              f"{events / s / 1e6:6.2f} M events/s  database {dbsize / 2**20:.0f} MiB "
              f"({dbsize / events:.0f} B/event)  peak RSS {rss / 2**20:.0f} MiB")
        print(f"mlprof-bench-sqlite: events={events} seconds={s:.2f} events_per_s={events / s:.0f} "
              f"json_mb={size / 2**20:.0f} db_mb={dbsize / 2**20:.0f} rss_mb={rss / 2**20:.0f}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
