#!/usr/bin/env python3
"""SQLite export of a 1 M-event trace: `mlprof export --sqlite` of a trace
generated here (bench_analyze.py's shape: 8 threads, spans nested four deep
with shapes, FLOPs and bytes arguments, a B/E pair per batch, counter
samples), --events events (1 M). Prints the time, the rate in events per
second, the database's size and its bytes per event, and the peak resident
memory of the export; then the same database read back (one query over every
slice) to show it opens. Then the library's sqlite sink: --spans spans (1 M
spans, 2 M records: an outer span with an integer argument around an inner
one) recorded through libmlprof.so (found beside MLPROF) and dumped once with
sqlite_file set and once without: the difference is what the sink costs per
event. Skips (saying why) when SQLite cannot be loaded. The lines starting
with "mlprof-bench-" are machine-readable.

usage: bench_sqlite.py MLPROF [--events N] [--spans N] [--keep]
"""
import argparse
import ctypes
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_analyze import generate, timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlprof")
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--spans", type=int, default=1000000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    try:
        import sqlite3

        ctypes.CDLL("libsqlite3.so.0")
    except (ImportError, OSError) as e:
        print(f"bench_sqlite: skipped, SQLite cannot be loaded ({e})")
        return
    d = tempfile.mkdtemp(prefix="mlprof-bench-sqlite-")
    path, db = os.path.join(d, "trace.json"), os.path.join(d, "trace.db")
    try:
        events = generate(path, 1 << 40, a.events)
        size = os.path.getsize(path)
        s, rss, rc, out = timed([a.mlprof, "export", "--sqlite", db, path])
        if rc != 0:
            sys.exit("bench_sqlite: mlprof export --sqlite failed")
        dbsize = os.path.getsize(db)
        t0 = time.perf_counter()
        con = sqlite3.connect(db)
        slices, self_ns = con.execute("SELECT count(*), sum(self_ns) FROM slices").fetchone()
        con.close()
        q = time.perf_counter() - t0
        print(f"SQLite export of {events} events ({size / 2**20:.0f} MiB of JSON, {size / events:.0f} B/event):")
        print(f"  mlprof export --sqlite  {s:7.2f} s  {events / s / 1e3:7.0f} k events/s  "
              f"database {dbsize / 2**20:.0f} MiB ({dbsize / events:.0f} B/event)  peak RSS {rss / 2**20:.0f} MiB")
        print(f"  read back: {slices} slices, their self time summed in {q:.2f} s")
        print(f"mlprof-bench-sqlite-export: events={events} seconds={s:.2f} events_per_s={events / s:.0f} "
              f"json_bytes={size} db_bytes={dbsize} db_bytes_per_event={dbsize / events:.1f} "
              f"rss_mb={rss / 2**20:.0f}")
        if a.spans > 0:
            bench_sink(a.mlprof, d, a.spans)
    finally:
        if a.keep:
            print(f"kept: {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


SINK = r"""
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
lib.mlprof_set_config.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
lib.mlprof_set_config.restype = ctypes.c_int
lib.mlprof_set_state.argtypes = [ctypes.c_int]
lib.mlprof_set_state.restype = ctypes.c_int
lib.mlprof_domain_create.argtypes = [ctypes.c_char_p]
lib.mlprof_domain_create.restype = ctypes.c_void_p
lib.mlprof_task_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.mlprof_task_create.restype = ctypes.c_void_p
lib.mlprof_begin.argtypes = [ctypes.c_void_p]
lib.mlprof_begin.restype = None
lib.mlprof_end.argtypes = [ctypes.c_void_p]
lib.mlprof_end.restype = None
lib.mlprof_arg_int.argtypes = [ctypes.c_char_p, ctypes.c_int64]
lib.mlprof_arg_int.restype = None
lib.mlprof_dump.argtypes = [ctypes.c_int]
lib.mlprof_dump.restype = ctypes.c_int
lib.mlprof_last_error.argtypes = []
lib.mlprof_last_error.restype = ctypes.c_char_p
trace, sqlite, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
for k, v in (("filename", trace), ("sqlite_file", sqlite), ("buffer_size", "1073741824"),
             ("aggregate_stats", "0"), ("dump_at_exit", "0")):
    if lib.mlprof_set_config(k.encode(), v.encode()) != 0:
        sys.exit(f"{k}: {lib.mlprof_last_error().decode()}")
dom = lib.mlprof_domain_create(b"bench")
outer, inner = lib.mlprof_task_create(dom, b"outer"), lib.mlprof_task_create(dom, b"inner")
lib.mlprof_set_state(1)
begin, end, arg = lib.mlprof_begin, lib.mlprof_end, lib.mlprof_arg_int
for i in range(n // 2):
    begin(outer)
    arg(b"i", i)
    begin(inner)
    end(inner)
    end(outer)
t0, c0 = time.perf_counter(), time.process_time()
rc = lib.mlprof_dump(1)
print(time.perf_counter() - t0, time.process_time() - c0, rc)
"""


def bench_sink(mlprof, d, spans):
    """The sink's cost: mlprof_dump(1) of spans spans with and without sqlite_file."""
    lib = os.path.join(os.path.dirname(os.path.abspath(mlprof)), "libmlprof.so")
    if not os.path.exists(lib):
        print(f"sqlite sink: skipped, no {lib}")
        return
    times = {}
    for name, sqlite in (("json", ""), ("json+sqlite", os.path.join(d, "run.db"))):
        s, rss, rc, out = timed([sys.executable, "-c", SINK, lib, os.path.join(d, "run.json"), sqlite, str(spans)])
        fields = out.decode().split()
        if rc != 0 or len(fields) != 3 or fields[2] != "0":
            sys.exit(f"bench_sqlite: the {name} dump failed ({out!r})")
        times[name] = (float(fields[0]), float(fields[1]), rss)
    dbsize = os.path.getsize(os.path.join(d, "run.db"))
    (w0, c0, r0), (w1, c1, r1) = times["json"], times["json+sqlite"]
    per_span = (c1 - c0) / spans * 1e9  # CPU time: wall time on a shared machine says more of the others
    print(f"sqlite sink, {spans} spans recorded through the library, dumped once:")
    print(f"  dump without sqlite_file {w0:6.2f} s ({c0:6.2f} s CPU)   with {w1:6.2f} s ({c1:6.2f} s CPU)  "
          f"the sink: {per_span:.0f} ns CPU and {dbsize / spans:.0f} B per span, database {dbsize / 2**20:.0f} MiB, "
          f"peak RSS {r0 / 2**20:.0f} / {r1 / 2**20:.0f} MiB")
    print(f"mlprof-bench-sqlite-sink: spans={spans} dump_s={w0:.2f} dump_cpu_s={c0:.2f} dump_sqlite_s={w1:.2f} "
          f"dump_sqlite_cpu_s={c1:.2f} sink_cpu_ns_per_span={per_span:.0f} db_bytes={dbsize} "
          f"db_bytes_per_span={dbsize / spans:.1f}")


if __name__ == "__main__":
    main()
