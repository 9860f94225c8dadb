#!/usr/bin/env python3
"""The sqlite sink's database against `mlprof export --sqlite` of the same
events, read back with Python's sqlite3 module:

- parity: test_sqlite_sink drives the sink's ops and writes the same events
  as a Chrome JSON trace (direct.json); the sink's database and the export of
  that trace hold the same rows in every table (ids aside: rows are compared
  by what they say, parents, flows and kernels by the names they point to);
- the continuous dump (test_sqlite_sink continuous): the database published
  by the dump thread, copied while the run goes on, is whole and opens;
- a recorded run (test_sqlite_sink record: nested spans with arguments,
  frames, markers and counters on several threads, sqlite_file=auto beside
  the JSON trace): row counts equal the JSON trace's events; self time per
  slice equals `mlprof analyze`'s; the database written by a dump that is
  not the last (continuous dump) is complete and opens; with
  MLPROF_SQLITE_LIBRARY naming a file that is not there, the dump fails with
  one message naming it, and the JSON trace is still written.

Skips (printing why) when libsqlite3.so.0 cannot be loaded here.

usage: sqlite_sink_check.py MLPROF TEST_SQLITE_SINK OUTDIR
"""
import ctypes
import json
import os
import subprocess
import sys
from collections import Counter

from analyze_util import check, command, failures

MLPROF, TEST, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)

try:
    import sqlite3

    ctypes.CDLL("libsqlite3.so.0")
except (ImportError, OSError) as e:
    print(f"sqlite_sink_check: skipped: SQLite cannot be loaded here ({e})")
    sys.exit(0)

mlprof = command(MLPROF)


def rows(db, sql, *params):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def count(db, table):
    return rows(db, f"SELECT count(*) FROM {table}")[0][0]


TABLES = ("processes", "threads", "tracks", "slices", "instants", "args", "counters", "flows", "kernels",
          "memory_blocks")

# what each table says, without its ids
VIEWS = {
    "processes": "SELECT pid, name FROM processes",
    "threads": "SELECT pid, tid, name FROM threads",
    "tracks": "SELECT kind, pid, tid, name, series FROM tracks",
    "slices": "SELECT t.pid, t.tid, s.name, s.category, s.ts_ns, s.dur_ns, s.depth, p.name, p.ts_ns, s.self_ns"
              " FROM slices s JOIN tracks t ON t.id = s.track_id LEFT JOIN slices p ON p.id = s.parent_id",
    "instants": "SELECT t.pid, t.tid, i.name, i.category, i.ts_ns, i.ph, i.scope, i.async_id"
                " FROM instants i JOIN tracks t ON t.id = i.track_id",
    "args": "SELECT coalesce(s.name, i.name), coalesce(s.ts_ns, i.ts_ns), a.idx, a.key, a.value, a.num FROM args a"
            " LEFT JOIN slices s ON s.id = a.event_id LEFT JOIN instants i ON i.id = a.event_id",
    "counters": "SELECT t.pid, t.name, t.series, c.ts_ns, c.value FROM counters c JOIN tracks t ON t.id = c.track_id",
    "flows": "SELECT f.flow_id, a.name, a.ts_ns, b.name, b.ts_ns FROM flows f LEFT JOIN slices a ON a.id = f.from_slice"
             " LEFT JOIN slices b ON b.id = f.to_slice",
    "kernels": "SELECT s.name, k.kind, k.device, k.stream, k.correlation, l.name, k.bottom_op, k.top_op, k.op_stack"
               " FROM kernels k JOIN slices s ON s.id = k.slice_id LEFT JOIN slices l ON l.id = k.launch_id",
    "memory_blocks": "SELECT device_type, device, addr, bytes, alloc_ts_ns, free_ts_ns FROM memory_blocks",
}


def same_tables(sink_db, export_db, what, tables=TABLES):
    for table in tables:
        got, want = Counter(rows(sink_db, VIEWS[table])), Counter(rows(export_db, VIEWS[table]))
        check(got == want, f"{what}: {table} differs from the export's:\n  sink only {sorted(got - want, key=str)}"
                           f"\n  export only {sorted(want - got, key=str)}")


def export(trace, name):
    db = os.path.join(OUT, name)
    if os.path.exists(db):
        os.unlink(db)
    mlprof("export", "--sqlite", db, trace)
    return db


def run(*args, env=None):
    p = subprocess.run([TEST, OUT, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    return p


# ------------------------------------------------------------- parity
p = run()
check(p.returncode == 0, f"test_sqlite_sink: exit {p.returncode}\n{p.stdout}{p.stderr}")
direct_db, direct_json = os.path.join(OUT, "direct.db"), os.path.join(OUT, "direct.json")
if p.returncode == 0 and os.path.exists(direct_db):
    same_tables(direct_db, export(direct_json, "direct_export.db"), "ops driven directly")

# ------------------------------------------------------- a recorded run
def fresh(name):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    return d


def events_of(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def rows_equal_events(db, trace, what):
    ev = events_of(trace)
    n = Counter(e["ph"] for e in ev)
    check(count(db, "slices") == n["X"], f"{what}: {count(db, 'slices')} slices, the trace has {n['X']} X events")
    want = n["i"] + n["b"] + n["e"]
    check(count(db, "instants") == want, f"{what}: {count(db, 'instants')} instants, the trace has {want}")
    want = sum(len(e.get("args", {})) for e in ev if e["ph"] == "C")
    check(count(db, "counters") == want, f"{what}: {count(db, 'counters')} counter samples, the trace has {want}")
    want = sum(len(e.get("args", {})) for e in ev if e["ph"] in "Xibe")
    check(count(db, "args") == want, f"{what}: {count(db, 'args')} args, the trace has {want}")
    return n


rec = fresh("record")
p = subprocess.run([TEST, rec, "record"], capture_output=True, text=True, timeout=300)
check(p.returncode == 0 and "dump 0: MLPROF_OK" in p.stdout and "dump 1: MLPROF_OK" in p.stdout,
      f"record: exit {p.returncode}\n{p.stdout}{p.stderr}")
run_json, run_db = os.path.join(rec, "run.json"), os.path.join(rec, "run.db")
mid_json, mid_db = os.path.join(rec, "mid.json"), os.path.join(rec, "mid.db")
if os.path.exists(run_db) and os.path.exists(mid_db):
    n = rows_equal_events(run_db, run_json, "recorded run")
    check(n["X"] >= 3 * 2 * 50 * 4 + 1, f"recorded run: {n['X']} spans, fewer than recorded")
    same_tables(run_db, export(run_json, "run_export.db"), "recorded run")
    # self time per slice (compared above with the export's, which is analyze's) and per name
    want = {r["name"]: r["self_sum_ns"] for r in
            json.loads(mlprof("analyze", run_json, "--format", "json", "--top", "0").stdout)["rows"]}
    got = dict(rows(run_db, "SELECT name, sum(self_ns) FROM slices GROUP BY name"))
    check(got == want, f"recorded run: self time per name {got}, analyze says {want}")
    got = rows(run_db, "SELECT s.depth, p.name FROM slices s LEFT JOIN slices p ON p.id = s.parent_id "
                       "WHERE s.name = 'matmul' GROUP BY 1, 2")
    check(got == [(2, "forward")], f"recorded run: matmul's depth and parent {got}")
    # the database of the dump that was not the last: complete, with "outer" still open
    rows_equal_events(mid_db, mid_json, "continuous dump")
    same_tables(mid_db, export(mid_json, "mid_export.db"), "continuous dump")
    got = rows(mid_db, "SELECT a.value FROM slices s JOIN args a ON a.event_id = s.id WHERE s.name = 'outer' "
                       "AND a.key = 'unfinished'")
    check(got == [("true",)], f"continuous dump: the open span 'outer' {got}")
    outer = rows(run_db, "SELECT count(*) FROM slices WHERE name = 'outer'")[0][0]
    check(outer == 1, f"recorded run: 'outer' {outer} times in the final database, wanted once")
    check(not [f for f in os.listdir(rec) if ".tmp-" in f], f"recorded run: temporary files left {os.listdir(rec)}")
else:
    check(False, f"recorded run: no database: {os.listdir(rec)}\n{p.stdout}{p.stderr}")

# the continuous dump: its database, copied while the run went on, opens whole
cont = fresh("continuous")
p = subprocess.run([TEST, cont, "continuous"], capture_output=True, text=True, timeout=300)
check(p.returncode == 0 and "dump 1: MLPROF_OK" in p.stdout, f"continuous: exit {p.returncode}\n{p.stdout}{p.stderr}")
live, final = os.path.join(cont, "live.db"), os.path.join(cont, "cont.db")
if os.path.exists(live) and os.path.exists(final):
    check(rows(live, "PRAGMA integrity_check") == [("ok",)], f"continuous: {live} is damaged")
    n_live, n_final = count(live, "slices"), count(final, "slices")
    check(0 < n_live <= n_final, f"continuous: {n_live} slices in the copy, {n_final} at the end")
    dangling = rows(live, "SELECT count(*) FROM slices s WHERE s.parent_id IS NOT NULL AND NOT EXISTS "
                          "(SELECT 1 FROM slices p WHERE p.id = s.parent_id)")[0][0]
    check(dangling == 0, f"continuous: {dangling} slices of the copy name a parent it does not have")
    names = dict(rows(live, "SELECT key, value FROM meta"))
    check(names.get("trace", "").endswith("cont.json"), f"continuous: the copy's meta {names}")
    rows_equal_events(final, os.path.join(cont, "cont.json"), "continuous, at the end")
    same_tables(final, export(os.path.join(cont, "cont.json"), "cont_export.db"), "continuous, at the end")

# SQLite missing: one message naming it, the dump fails, the JSON trace is written
nolib = fresh("nolib")
missing = os.path.join(nolib, "libnosqlite3.so.0")
p = subprocess.run([TEST, nolib, "record"], capture_output=True, text=True, timeout=300,
                   env={**os.environ, "MLPROF_SQLITE_LIBRARY": missing})
check("dump 1: MLPROF_EUNSUPPORTED" in p.stdout and "libsqlite3-0" in p.stdout,
      f"SQLite missing: the last dump says {p.stdout!r}")
said = [line for line in p.stderr.splitlines() if missing in line]
check(len(said) == 1 and "libsqlite3-0" in said[0], f"SQLite missing: said {len(said)} times on stderr: {p.stderr!r}")
check(os.path.exists(os.path.join(nolib, "run.json")) and len(events_of(os.path.join(nolib, "run.json"))) > 600,
      "SQLite missing: the JSON trace was not written whole")
check(not os.path.exists(os.path.join(nolib, "run.db")) and not [f for f in os.listdir(nolib) if ".tmp-" in f],
      f"SQLite missing: files {os.listdir(nolib)}")

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("sqlite_sink_check: all checks passed")
