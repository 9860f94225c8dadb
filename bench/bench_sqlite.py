#!/usr/bin/env python3
"""SQLite export of a 1 M-event trace: `mlprof export --sqlite` of a trace
generated here (bench_analyze.py's shape: 8 threads, spans nested four deep
with shapes, FLOPs and bytes arguments, a B/E pair per batch, counter
samples), --events events (1 M). Prints the time, the rate in events per
second, the database's size and its bytes per event, and the peak resident
memory of the export; then the same database read back (one query over every
slice) to show it opens. Skips (saying why) when SQLite cannot be loaded.
The last line is machine-readable.

usage: bench_sqlite.py MLPROF [--events N] [--keep]
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
    finally:
        if a.keep:
            print(f"kept: {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
