#!/usr/bin/env python3
"""`mlprof analyze` on traces with known answers: written here in the shapes
other tools write (complete events, B/E pairs, a bare array without its
closing bracket, gzip, string thread ids, damaged files), and one made by the
bundled example. Every option is run and its JSON (or CSV, or table) read back.

usage: analyze_check.py MLPROF CNN_INFER OUTDIR [TORCH_PYTHON]
"""
import csv
import gzip
import io
import json
import os
import re
import subprocess
import sys

from analyze_util import check, command, failures

MLPROF, CNN, OUT = sys.argv[1:4]
TORCH_PYTHON = sys.argv[4] if len(sys.argv) > 4 else "/usr/bin/python3"


mlprof = command(MLPROF)


def analyze_json(path, *opts, expect=0):
    p = mlprof("analyze", path, "--format", "json", *opts, expect=expect)
    try:
        return json.loads(p.stdout), p
    except ValueError as e:
        check(False, f"JSON from analyze {opts}: {e}\n{p.stdout[:400]}")
        return {"rows": []}, p


def rows_by_key(result):
    return {r["key"]: r for r in result["rows"]}


def write(name, text):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def ev(name, ts, dur, tid=1, pid=1, cat="op", **args):
    e = {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        e["args"] = args
    return e


# ---------------------------------------------------------------- nesting

# thread 1: A [0,1000) holds B [100,400) and C [500,600); B holds D [150,200)
# thread 2: A [0,200); and E on thread 2 with FLOPs and bytes
NESTED = [
    ev("A", 0, 1000, input_shape="[8,3]"),
    ev("B", 100, 300, cat="kernelish", input_shape="[8,3]"),
    ev("D", 150, 50),
    ev("C", 500, 100, input_shape="[4,4]"),
    ev("A", 0, 200, tid=2, input_shape="[8,3]"),
    ev("E", 300, 1000000, tid=2, cat="gemm", flops=2e9, bytes=1 << 30, input_shape="[64,64]",
       output_shape="[64,64]"),
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "worker"}},
    {"name": "marker", "ph": "i", "s": "t", "ts": 5, "pid": 1, "tid": 1},
    {"name": "cnt", "ph": "C", "ts": 5, "pid": 1, "args": {"value": 3}},
]


def test_nesting():
    path = write("nested.json", json.dumps({"traceEvents": NESTED, "displayTimeUnit": "ms"}))
    r, _ = analyze_json(path, "-t", "0")
    rows = rows_by_key(r)
    check(set(rows) == {"A", "B", "C", "D", "E"}, f"rows {sorted(rows)}")
    check((rows["A"]["count"], rows["A"]["self_ns"], rows["A"]["total_ns"]) == (2, 600000 + 200000, 1200000),
          f"A {rows['A']}")
    check((rows["B"]["self_ns"], rows["D"]["self_ns"], rows["C"]["self_ns"]) == (250000, 50000, 100000),
          "self times of B, D, C")
    # ordered by self time, descending: E (1 s), A, B, C, D; cumulative percent of self time
    order = [x["key"] for x in r["rows"]]
    check(order == ["E", "A", "B", "C", "D"], f"order {order}")
    total_self = 1e9 + 800000 + 250000 + 100000 + 50000
    check(abs(r["rows"][1]["cumulative_percent"] - 100 * (1e9 + 800000) / total_self) < 1e-9, "cumulative")
    e = rows["E"]
    check(e["flops"] == 2e9 and abs(e["flops_per_s"] - 2e9) < 1 and abs(e["bytes_per_s"] - (1 << 30)) < 1,
          f"FLOPS and bandwidth {e}")
    check(rows["A"]["flops"] is None and rows["A"]["input_shapes"] == "[8,3]", f"A {rows['A']}")
    check(rows["E"]["output_shapes"] == "[64,64]", "output shapes")

    # --aggregate mean, max, min, count
    for how, want in (("mean", 400000), ("max", 600000), ("min", 200000)):
        rr = rows_by_key(analyze_json(path, "--aggregate", how, "-t", "0")[0])
        check(rr["A"]["self_ns"] == want, f"--aggregate {how}: A self {rr['A']['self_ns']} != {want}")
    rc = analyze_json(path, "--aggregate", "count", "-t", "0")[0]
    check([x["key"] for x in rc["rows"]][0] == "A", f"--aggregate count orders by count {rc['rows'][0]}")
    check(rc["order_by"] == "count", "ordered by count")

    # grouping
    rt = rows_by_key(analyze_json(path, "--aggregate-by", "type")[0])
    check(set(rt) == {"op", "kernelish", "gemm"} and rt["op"]["count"] == 4, f"by type {sorted(rt)}")
    rth = rows_by_key(analyze_json(path, "--aggregate-by", "thread")[0])
    check("1:2 (worker)" in rth and rth["1:2 (worker)"]["count"] == 2, f"by thread {sorted(rth)}")
    rs = rows_by_key(analyze_json(path, "--aggregate-by", "input_shape")[0])
    check(rs.get("[8,3]", {}).get("count") == 3 and rs.get("-", {}).get("count") == 1, f"by shape {sorted(rs)}")
    rns = rows_by_key(analyze_json(path, "--aggregate-by", "name,input_shape")[0])
    check(set(rns) == {"A | [8,3]", "B | [8,3]", "C | [4,4]", "D | -", "E | [64,64]"}, f"by two {sorted(rns)}")
    rn = analyze_json(path, "--aggregate-by", "none", "-t", "0")[0]
    check(len(rn["rows"]) == 6 and sum(x["key"] == "A" for x in rn["rows"]) == 2, "one row per event")

    # order and top
    ra = analyze_json(path, "--order-by", "+total", "-t", "2")[0]
    check([x["key"] for x in ra["rows"]] == ["D", "C"], f"+total top 2 {[x['key'] for x in ra['rows']]}")
    rname = analyze_json(path, "--order-by", "name", "-t", "0")[0]
    check([x["key"] for x in rname["rows"]] == ["E", "D", "C", "B", "A"], "by name, descending")
    rf = analyze_json(path, "--order-by", "flops", "-t", "0")[0]
    check(rf["rows"][0]["key"] == "E" and rf["rows"][-1]["flops"] is None, "rows without FLOPs last")

    # filters
    rmin = rows_by_key(analyze_json(path, "--min-time", "150us", "-t", "0")[0])
    check(set(rmin) == {"A", "B", "E"} and rmin["A"]["count"] == 2, f"--min-time {sorted(rmin)}")
    rmax = rows_by_key(analyze_json(path, "--max-time", "1e-4", "-t", "0")[0])
    check(set(rmax) == {"C", "D"}, f"--max-time {sorted(rmax)}")
    rty = rows_by_key(analyze_json(path, "--type", "gemm,kernelish")[0])
    check(set(rty) == {"B", "E"}, f"--type {sorted(rty)}")
    rgl = rows_by_key(analyze_json(path, "--name", "[AB]")[0])
    check(set(rgl) == {"A", "B"}, f"--name glob {sorted(rgl)}")
    rsub = rows_by_key(analyze_json(path, "--name", "E")[0])
    check(set(rsub) == {"E"}, f"--name substring {sorted(rsub)}")

    # CSV and table
    p = mlprof("analyze", path, "--format", "csv", "-t", "0")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    check([x["name"] for x in rows] == ["E", "A", "B", "C", "D"] and rows[1]["self_ns"] == "800000",
          f"CSV {rows[:2]}")
    p = mlprof("analyze", path)
    check(re.search(r"^A\s+2\s+800\.000 us\s+1\.200 ms", p.stdout, re.M) is not None, f"table\n{p.stdout}")
    check("FLOPS" in p.stdout and "2.00 GFLOP/s" in p.stdout, "FLOPS column in the table")
    out = os.path.join(OUT, "nested_table.txt")
    mlprof("analyze", path, "-o", out)
    with open(out) as f:
        check(f.read() == p.stdout, "-o writes what stdout shows")


# ------------------------------------------------ the shapes of other writers

def test_begin_end():
    # MXNet and RAF write B/E pairs; an end's args join its begin's
    events = [
        {"name": "conv", "cat": "operator", "ph": "B", "ts": 10, "pid": 0, "tid": 0, "args": {"in": "[1]"}},
        {"name": "relu", "cat": "operator", "ph": "B", "ts": 12, "pid": 0, "tid": 0},
        {"name": "relu", "cat": "operator", "ph": "E", "ts": 15, "pid": 0, "tid": 0},
        {"name": "conv", "cat": "operator", "ph": "E", "ts": 30, "pid": 0, "tid": 0, "args": {"flops": 100}},
        {"name": "stray", "ph": "E", "ts": 31, "pid": 0, "tid": 0},
        {"name": "open", "ph": "B", "ts": 40, "pid": 0, "tid": 0},
    ]
    path = write("begin_end.json", json.dumps(events))
    r, _ = analyze_json(path)
    rows = rows_by_key(r)
    check(set(rows) == {"conv", "relu"}, f"B/E rows {sorted(rows)}")
    check((rows["conv"]["total_ns"], rows["conv"]["self_ns"], rows["relu"]["total_ns"]) == (20000, 17000, 3000),
          f"B/E times {rows}")
    check(rows["conv"]["flops"] == 100, "the end's args join")
    check(r["unmatched_ends"] == 1 and r["unclosed_begins"] == 1, f"counted {r['unmatched_ends']} {r['unclosed_begins']}")
    p = mlprof("analyze", path)
    check("1 ends (\"E\") had no begin" in p.stdout and "never ended" in p.stdout, "noted in the table")


def test_begin_end_span_and_order():
    """The span covers the ends of B/E pairs; an end that closes a begin
    other than the innermost keeps both (overlapping) and says so; an end
    before its begin is left out and said."""
    step = [{"ph": "B", "name": "step", "pid": 1, "tid": 1, "ts": 0},
            {"ph": "B", "name": "work", "pid": 1, "tid": 1, "ts": 10},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 900},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 1000}]
    path = write("be_span.json", json.dumps({"traceEvents": step}))
    r, p = analyze_json(path)
    check(r["span_ns"] == 1000000, f"B/E span: {r['span_ns']} ns, wanted 1 ms (the last end)")
    p = mlprof("analyze", path)
    check("over 1.000 ms" in p.stdout and p.stderr == "", f"B/E span in the table: {p.stdout!r} {p.stderr!r}")
    # B A, B B, E A, E B on one thread: they do not nest; each is kept with its times
    lines = ['{"ph":"B","name":"A","pid":1,"tid":1,"ts":0}', '{"ph":"B","name":"B","pid":1,"tid":1,"ts":10}',
             '{"ph":"E","name":"A","pid":1,"tid":1,"ts":20}', '{"ph":"E","name":"B","pid":1,"tid":1,"ts":30}']
    text = '{"traceEvents":[\n' + ",\n".join(lines) + "\n]}"
    path = write("be_interleaved.json", text)
    r, p = analyze_json(path)
    rows = rows_by_key(r)
    check(set(rows) == {"A", "B"} and rows["A"]["total_ns"] == 20000 and rows["B"]["total_ns"] == 20000
          and rows["A"]["self_ns"] == 20000 and r["unmatched_ends"] == 0 and r["unclosed_begins"] == 0,
          f"interleaved B/E: {r['rows']} {r['unmatched_ends']} {r['unclosed_begins']}")
    at = text.index(lines[2])
    check("1 end (\"E\") closed a begin that was not the innermost" in p.stderr
          and '"A" closed while "B" inside it was open' in p.stderr and f"line 4, byte offset {at}" in p.stderr,
          f"interleaved B/E said: {p.stderr!r}")
    p = mlprof("analyze", path)
    check("note: " in p.stdout and "overlap instead of nesting" in p.stdout, f"said in the table: {p.stdout!r}")
    # an end before its begin: left out; the begin is closed by the next end
    early = [{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 10}, {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
             {"ph": "E", "pid": 1, "tid": 1}, {"ph": "E", "pid": 1, "tid": 1, "ts": 30}]
    r, p = analyze_json(write("be_early.json", json.dumps(early)))
    rows = rows_by_key(r)
    check(set(rows) == {"a"} and rows["a"]["total_ns"] == 20000 and r["unmatched_ends"] == 0,
          f"an end before its begin: {r['rows']}")
    check("2 events left out" in p.stderr and 'an "E" of "a" 5.000 us before its "B"' in p.stderr
          and 'an "E" without "ts"' in p.stderr, f"an end before its begin said: {p.stderr!r}")


def test_bad_times():
    """Times that cannot be taken (negative, beyond the 2^62 ns either side of
    0 the model holds, NaN, an end past that range) leave their events out, counted and said with the
    first's key and place; the good events around them are read."""
    lines = ['{"ph":"X","name":"neg","pid":1,"tid":1,"ts":100,"dur":-50}',
             '{"ph":"X","name":"ok","pid":1,"tid":1,"ts":0,"dur":500}',
             '{"ph":"X","name":"huge","pid":1,"tid":1,"ts":1e30,"dur":1e30}',
             '{"ph":"X","name":"huge2","pid":1,"tid":3,"ts":1,"dur":9300000000000000}',
             '{"ph":"X","name":"over","pid":1,"tid":2,"ts":3000000000000000,"dur":3000000000000000}',
             '{"ph":"X","name":"nan","pid":1,"tid":1,"ts":NaN,"dur":10}',
             '{"ph":"X","name":"quoted","pid":1,"tid":1,"ts":"1","dur":"1e40"}',
             '{"ph":"X","name":"child","pid":1,"tid":1,"ts":10,"dur":20}']
    text = '{"traceEvents":[\n' + ",\n".join(lines) + "\n]}"
    path = write("bad_times.json", text)
    r, p = analyze_json(path, "-t", "0")
    rows = rows_by_key(r)
    check(set(rows) == {"ok", "child"} and rows["ok"]["self_ns"] == 480000 and not r["partial"],
          f"bad times left out: {r['rows']}")
    check(r["span_ns"] == 500000, f"the span of the events kept: {r['span_ns']}")
    at = text.index(lines[0])
    check("6 events left out, with a time that cannot be taken" in p.stderr
          and f'"dur" is negative (-50.000 us), at line 2, byte offset {at}' in p.stderr, f"said: {p.stderr!r}")
    for line, says in ((lines[2], '"ts" is beyond the times mlprof takes'),
                       (lines[3], '"dur" is beyond the times mlprof takes'),
                       (lines[4], '"ts" + "dur" is beyond the times mlprof takes'),
                       (lines[5], '"ts" is not a finite number'),
                       (lines[6], '"dur" is beyond the times mlprof takes')):
        one = write("bad_time_one.json", '{"traceEvents":[' + line + "," + lines[1] + "]}")
        r, p = analyze_json(one)
        check([x["key"] for x in r["rows"]] == ["ok"] and "1 event left out" in p.stderr and says in p.stderr
              and "byte offset 16" in p.stderr, f"{line}: {r['rows']} {p.stderr!r}")
    p = mlprof("analyze", path)
    check("note: " in p.stdout and "left out" in p.stdout and "0 ns" not in p.stdout, f"the table: {p.stdout!r}")


def test_events_left_out():
    """Events that cannot be read (no "ph", no "ts", a phase mlprof does not
    read, a member of the wrong type) are counted and said, with the first
    of each kind; a member's wrong type names the member and what it held."""
    lines = ['{"ph":"X","name":"nots","pid":1,"tid":1,"dur":10}',
             '{"ph":"X","name":"nodur","pid":1,"tid":1,"ts":5}',
             '{"ph":"Q","name":"badph","pid":1,"tid":1,"ts":5,"dur":3}',
             '{"name":"noph","pid":1,"tid":1,"ts":5,"dur":3}',
             '{"ph":"X","name":"ok","pid":1,"tid":1,"ts":0,"dur":10}']
    text = '{"traceEvents":[' + ",".join(lines) + "]}"
    path = write("missing_members.json", text)
    r, p = analyze_json(path)
    check([x["key"] for x in r["rows"]] == ["ok"], f"left out: {r['rows']}")
    check("4 events left out: 3 malformed (the first: an \"X\" without \"ts\", at line 1, byte offset 16)"
          in p.stderr and f'1 of a phase mlprof does not read (the first: "ph":"Q", at line 1, byte offset '
          f'{text.index(lines[2])})' in p.stderr, f"said: {p.stderr!r}")
    p = mlprof("analyze", path)
    check("1 durations kept of 1 events" in p.stdout and "note: " in p.stdout and "4 events left out" in p.stdout,
          f"the table: {p.stdout!r}")
    ok = '{"ph":"X","name":"ok","pid":1,"tid":1,"ts":0,"dur":10}'
    for member, says in (('"tid":true', '"tid": expected a number or a string, found true'),
                         ('"pid":null', '"pid": expected a number or a string, found null'),
                         ('"tid":[1]', '"tid": expected a number or a string, found an array'),
                         ('"ts":true', '"ts": expected a number, found true'),
                         ('"dur":null', '"dur": expected a number, found null'),
                         ('"ts":"soon"', '"ts": expected a number, found the string "soon"'),
                         ('"id":true', '"id": expected a number or a string, found true'),
                         ('"ph":5', '"ph": expected a string, found a number')):
        bad = '{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":10,' + member + "}"
        one = write("wrong_type.json", '{"traceEvents":[' + bad + "," + ok + "]}")
        r, p = analyze_json(one)
        check([x["key"] for x in r["rows"]] == ["ok"] and "1 event left out, malformed" in p.stderr
              and says in p.stderr and "byte offset 16" in p.stderr, f"{member}: {r['rows']} {p.stderr!r}")
    # a name written as a number is its text
    r, _ = analyze_json(write("number_name.json", '[{"ph":"X","name":123,"cat":null,"pid":1,"tid":1,"ts":0,"dur":1}]'))
    check([x["key"] for x in r["rows"]] == ["123"], f"a number for a name: {r['rows']}")


def test_streamed_array():
    # the JSON Array Format: the closing bracket may be missing, and a last comma left
    text = "[\n" + ",\n".join(json.dumps(e) for e in NESTED[:4]) + ",\n"
    path = write("streamed.json", text)
    r, _ = analyze_json(path)
    check(len(r["rows"]) == 4 and not r["partial"], f"streamed array: {len(r['rows'])} rows")


def test_gzip_and_string_tids():
    events = [ev("k1", 0, 10, tid="stream 7", pid="GPU 0", cat="kernel"),
              ev("k1", 20, 10, tid="stream 7", pid="GPU 0", cat="kernel"),
              ev("k2", 40, 5, tid="stream 8", pid="GPU 0", cat="kernel")]
    path = os.path.join(OUT, "kernels.json.gz")
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    r, _ = analyze_json(path, "--aggregate-by", "thread")
    keys = sorted(x["key"] for x in r["rows"])
    check(keys == ["GPU 0:stream 7", "GPU 0:stream 8"], f"string tids named {keys}")
    check(sum(x["count"] for x in r["rows"]) == 3, "gzip read")
    # standard input, a pipe: plain and gzip (the magic read from the pipe is given to zlib again)
    for name in ("kernels.json.gz", "plain"):
        with open(path, "rb") as f:
            data = f.read() if name != "plain" else gzip.decompress(f.read())
        p = subprocess.run([MLPROF, "analyze", "-", "--format", "json", "--aggregate-by", "thread"], input=data,
                           capture_output=True, timeout=120)
        rows = json.loads(p.stdout)["rows"] if p.returncode == 0 else []
        check(sum(x["count"] for x in rows) == 3, f"{name} from a pipe: exit {p.returncode}, {rows} {p.stderr!r}")


def test_damaged():
    good = ",\n".join(json.dumps(e) for e in NESTED[:4])
    # cut in the middle of the fifth event (line 6 of the file)
    text = '{"traceEvents": [\n' + good + ',\n{"name": "A", "ph": "X", "ts": 5, "du'
    path = write("truncated.json", text)
    r, p = analyze_json(path, expect=1)
    check(r.get("partial") is True and len(r["rows"]) == 4, f"partial result {r.get('partial')} {len(r['rows'])}")
    m = re.search(r"truncated\.json:(\d+):(\d+): .*byte offset (\d+)", p.stderr)
    check(m is not None and int(m.group(1)) == 6 and int(m.group(3)) == len(text),
          f"names line and offset: {p.stderr!r} (file {len(text)} bytes)")
    # a bad character on line 3
    bad = '{"traceEvents": [\n' + json.dumps(NESTED[0]) + ',\n{"name": "x", "ph": "X", "ts": @}]}'
    path = write("bad.json", bad)
    r, p = analyze_json(path, expect=1)
    col = bad.split("\n")[2].index("@") + 1
    check(f"bad.json:3:{col}:" in p.stderr and "expected a value" in p.stderr, f"bad token: {p.stderr!r}")
    check(len(r["rows"]) == 1, "the event before it is kept")
    p = mlprof("analyze", os.path.join(OUT, "missing.json"), expect=1)
    check("missing.json: cannot open" in p.stderr, f"missing file: {p.stderr!r}")
    path = write("empty.json", "  \n")
    p = mlprof("analyze", path, expect=1)
    check("the file is empty" in p.stderr, f"empty: {p.stderr!r}")
    path = write("notjson.json", "hello")
    p = mlprof("analyze", path, expect=1)
    check("notjson.json:1:1: expected '{' or '['" in p.stderr, f"not JSON: {p.stderr!r}")
    path = write("trailing.json", '{"traceEvents": []} x')
    p = mlprof("analyze", path, expect=1)
    check("unexpected data after the end" in p.stderr, f"trailing data: {p.stderr!r}")
    # gzip: a file cut after its header, cut inside its data, or followed by garbage is
    # said as such, with the events before the problem; several members are one file
    data = gzip.compress(json.dumps({"traceEvents": NESTED[:4]}).encode())
    for name, blob, says, rows in (("only_header.json.gz", data[:10], "truncated gzip", 0),
                                   ("cut.json.gz", data[:-4], "truncated gzip", 4),
                                   ("garbage.json.gz", data + b"garbage!!", "trailing garbage", 4)):
        path = os.path.join(OUT, name)
        with open(path, "wb") as f:
            f.write(blob)
        r, p = analyze_json(path, expect=1)
        check(says in p.stderr and "empty" not in p.stderr and r.get("partial") is True and len(r["rows"]) == rows,
              f"{name}: {p.stderr!r} {r.get('partial')} {len(r['rows'])} rows")
        p = subprocess.run([MLPROF, "analyze", "-"], input=blob, capture_output=True, timeout=120)
        check(p.returncode == 1 and says.encode() in p.stderr, f"{name} from a pipe: {p.returncode} {p.stderr!r}")
    check("at byte offset %d of the file" % len(data) in
          mlprof("analyze", os.path.join(OUT, "garbage.json.gz"), expect=1).stderr, "where the garbage starts")
    text = json.dumps({"traceEvents": NESTED[:4]})
    path = os.path.join(OUT, "members.json.gz")
    with open(path, "wb") as f:
        f.write(gzip.compress(text[:50].encode()) + gzip.compress(text[50:].encode()))
    r, p = analyze_json(path)
    check(len(r["rows"]) == 4 and p.stderr == "", f"two gzip members: {len(r['rows'])} rows {p.stderr!r}")


def test_not_a_trace():
    """JSON that holds no trace events is an error naming the file, for every
    command: a diff against it must not pass a CI gate with every operator
    "missing"."""
    good = write("good.json", json.dumps({"traceEvents": NESTED[:4]}))
    cases = (("foo.json", '{"foo": 1}', "without a \"traceEvents\" array"),
             ("no_events.json", '{"traceEvents": []}', "its array of events is empty"),
             ("empty_array.json", "[]", "its array of events is empty"),
             ("not_events.json", '[{"a": 1}, {"b": 2}]', "none of the 2 items"))
    for name, text, says in cases:
        bad = write(name, text)
        p = mlprof("diff", good, bad, "--fail-above", "10", expect=1)
        check(f"{name}: not a trace: " in p.stderr and says in p.stderr and "missing" not in p.stdout,
              f"diff against {text}: {p.stderr!r} {p.stdout!r}")
        p = mlprof("diff", bad, good, expect=1)
        check(f"{name}: not a trace" in p.stderr, f"diff from {text}: {p.stderr!r}")
        for cmd in ("analyze", "kernels"):
            p = mlprof(cmd, bad, expect=1)
            check(f"{name}: not a trace: " in p.stderr and says in p.stderr, f"{cmd} {text}: {p.stderr!r}")
        p = mlprof("merge", good, bad, "-o", os.path.join(OUT, "merged_bad.json"), expect=1)
        check(f"{name}: not a trace" in p.stderr, f"merge with {text}: {p.stderr!r}")
    # what holds events, even metadata alone, is a trace
    meta = write("meta_only.json", json.dumps([{"name": "process_name", "ph": "M", "pid": 1,
                                                  "args": {"name": "idle"}}]))
    mlprof("analyze", meta)
    mlprof("diff", good, good, "--fail-above", "10")


def test_usage():
    path = os.path.join(OUT, "nested.json")
    for args, needle in ((["--order-by", "speed"], "unknown column \"speed\""),
                         (["--aggregate", "median"], "--aggregate: expected"),
                         (["--min-time", "soon"], "--min-time: expected a time"),
                         (["--format", "xml"], "--format: expected"),
                         (["--bogus"], "unknown option \"--bogus\"\n"),
                         (["--formt", "json"], "unknown option \"--formt\" (did you mean --format?)"),
                         (["--aggregate-bi=name"], "(did you mean --aggregate-by?)"),
                         (["--top"], "needs a value")):
        p = mlprof("analyze", path, *args, expect=2)
        check(needle in p.stderr, f"{args}: {p.stderr!r}")
    p = mlprof("merge", "--ouput", "x.json", path, path, expect=2)
    check("(did you mean --output?)" in p.stderr, f"merge --ouput: {p.stderr!r}")
    p = mlprof("analyze", expect=2)
    check("which trace" in p.stderr, "no trace named")
    p = mlprof("frobnicate", expect=2)
    check("unknown command \"frobnicate\"\n" in p.stderr, f"unknown command: {p.stderr!r}")
    p = mlprof("analyse", path, expect=2)
    check("unknown command \"analyse\" (did you mean \"analyze\"?)" in p.stderr, f"analyse: {p.stderr!r}")
    p = mlprof("analyze", "--help")
    check("--aggregate-by" in p.stdout, "help")


def test_own_trace():
    path = os.path.join(OUT, "cnn.json")
    env = dict(os.environ, MLPROF_FILENAME=path, MLPROF_MEMORY_SVG="", MLPROF_MEMORY_CSV="")
    p = subprocess.run([CNN, "--batches", "6", "--threads", "2"], capture_output=True, text=True, env=env,
                       timeout=120)
    check(p.returncode == 0, f"cnn_infer: {p.stderr}")
    r, _ = analyze_json(path, "-t", "0")
    rows = rows_by_key(r)
    check(r["writer"] == "mlprof", "writer detected")
    check(rows["conv1"]["count"] == 7 and rows["gemm"]["count"] == 21, f"counts {rows['conv1']['count']}")
    # a convolution's self time is what its im2col and gemm children leave
    with open(path) as f:
        t = json.load(f)
    conv = [e for e in t["traceEvents"] if e["ph"] == "X" and e["name"] == "conv2"]
    check(rows["conv2"]["total_ns"] == round(sum(e["dur"] for e in conv) * 1000), "total time of conv2")
    check(rows["conv2"]["self_ns"] < rows["conv2"]["total_ns"] / 2, "children taken out of conv2")
    check(rows["conv1"]["flops"] == 7 * 2 * 16 * (8 * 32 * 32) * 27, f"conv1 FLOPs {rows['conv1']['flops']}")
    rb = analyze_json(path, "--aggregate-by", "thread")[0]
    check(any("(worker-0)" in x["key"] for x in rb["rows"]), "thread names from the metadata")


def test_diff():
    a = [ev("X", 0, 100), ev("X", 200, 100), ev("Y", 400, 500), ev("Z", 1000, 50), ev("S", 2000, 10)]
    b = [ev("X", 0, 150), ev("X", 200, 150), ev("Y", 400, 400), ev("W", 1000, 30), ev("S", 2000, 10)]
    pa = write("diff_a.json", json.dumps({"traceEvents": a}))
    pb = write("diff_b.json", json.dumps({"traceEvents": b}))
    p = mlprof("diff", pa, pb, "--format", "json")
    r = json.loads(p.stdout)
    got = [(x["key"], x["status"], x["count_a"], x["count_b"], x["delta_ns"]) for x in r["rows"]]
    check(got == [("X", "changed", 2, 2, 100000), ("Y", "changed", 1, 1, -100000), ("Z", "missing", 1, 0, -50000),
                  ("W", "new", 0, 1, 30000), ("S", "unchanged", 1, 1, 0)], f"diff rows {got}")
    check(r["rows"][0]["delta_percent"] == 50 and r["rows"][1]["delta_percent"] == -20, "percent change")
    check(r["rows"][2]["delta_percent"] is None, "no percent for a missing operator")
    check((r["total_a_ns"], r["total_b_ns"]) == (760000, 740000), f"totals {r['total_a_ns']} {r['total_b_ns']}")
    p = mlprof("diff", pa, pb, "--fail-above", "40", expect=3)
    check("1 operators regressed by more than 40%" in p.stdout and "regressed" in p.stderr, f"CI gate {p.stdout}")
    mlprof("diff", pa, pb, "--fail-above", "60")
    mlprof("diff", pa, pb, "--fail-above", "40", "--min-delta", "200us")
    r = json.loads(mlprof("diff", pa, pb, "--format", "json", "--aggregate", "mean").stdout)
    check(r["rows"][0]["key"] == "Y" and r["rows"][0]["delta_ns"] == -100000 and r["rows"][1]["delta_ns"] == 50000,
          f"per-call diff {r['rows'][:2]}")
    rows = list(csv.DictReader(io.StringIO(mlprof("diff", pa, pb, "--format", "csv").stdout)))
    check([x["status"] for x in rows] == ["changed", "changed", "missing", "new", "unchanged"], f"CSV {rows}")
    p = mlprof("diff", pa, pb)
    check(re.search(r"^X\s+2\s+2\s+200\.000 us\s+300\.000 us\s+\+100\.000 us\s+\+50\.0%", p.stdout, re.M),
          f"diff table\n{p.stdout}")
    check(re.search(r"^W\s+-\s+1\s+-\s+30\.000 us\s+\+30\.000 us\s+new", p.stdout, re.M), "new in the table")
    p = mlprof("diff", pa, expect=2)
    check("which two traces" in p.stderr, "diff needs two")
    p = mlprof("diff", pa, pb, "--fail-above", "x", expect=2)
    check("--fail-above: expected a percentage" in p.stderr, "bad percentage")


TORCH_RUN = r"""
import json, sys, torch
from torch.profiler import profile, ProfilerActivity, record_function
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                            torch.nn.Flatten(), torch.nn.Linear(8 * 15 * 15, 10))
x = torch.randn(4, 3, 32, 32)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(5):
        with record_function("step"):
            model(x).sum().backward()
prof.export_chrome_trace(sys.argv[1])
rows = {e.key: {"count": e.count, "total_us": e.cpu_time_total, "self_us": e.self_cpu_time_total}
        for e in prof.key_averages()}
json.dump({"version": torch.__version__, "rows": rows}, open(sys.argv[2], "w"))
"""


def test_pytorch():
    # a real trace of PyTorch's profiler, checked against what torch itself reports
    trace = os.path.join(OUT, "torch_trace.json")
    truth = os.path.join(OUT, "torch_key_averages.json")
    p = subprocess.run([TORCH_PYTHON, "-c", TORCH_RUN, trace, truth], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"the PyTorch run ({TORCH_PYTHON}; scripts/install-deps.sh torch installs it): "
                             f"{p.stderr[-600:]}")
    if p.returncode != 0:
        return
    with open(truth) as f:
        want = json.load(f)
    r, _ = analyze_json(trace, "-t", "0")
    rows = rows_by_key(r)
    check(set(rows) == set(want["rows"]), f"operators: only mlprof {set(rows) - set(want['rows'])}, "
                                          f"only torch {set(want['rows']) - set(rows)}")
    bad, self_off = [], []
    for key, w in want["rows"].items():
        g = rows.get(key)
        if not g:
            continue
        slack = 1000 * w["count"]  # the trace keeps microseconds; torch sums them unrounded
        if g["count"] != w["count"] or abs(g["total_ns"] - w["total_us"] * 1000) > slack:
            bad.append((key, g["count"], w["count"], g["total_ns"], w["total_us"]))
        if abs(g["self_ns"] - w["self_us"] * 1000) > slack:
            self_off.append((key, g["self_ns"], w["self_us"]))
    check(not bad, f"torch {want['version']}: counts or total times that differ from key_averages(): {bad[:5]}")
    # Self times: torch decides nesting on unrounded times; in the exported microseconds a
    # child can end with its parent, or just after, and move one level. So most rows, not all.
    check(len(self_off) <= len(rows) // 10, f"self times off by more than rounding: {self_off}")
    print(f"pytorch {want['version']}: {len(rows)} operators: counts and total times match key_averages(); "
          f"self times match for {len(rows) - len(self_off)} (within rounding), differ for {self_off}")


def test_merge():
    def trace(host, pid, marker_ts, shift, flow=True):
        evs = [ev("op", 1000 + shift, 50, pid=pid, tid=7),
               {"name": "sync", "ph": "i", "s": "g", "ts": marker_ts, "pid": pid, "tid": 7},
               {"name": "thread_name", "ph": "M", "pid": pid, "tid": 7, "args": {"name": "main"}},
               {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "trainer"}}]
        if flow:
            evs += [{"name": "launch", "ph": "s", "id": 5, "ts": 1010 + shift, "pid": pid, "tid": 7, "cat": "ac2g"},
                    {"name": "launch", "ph": "f", "bp": "e", "id": 5, "ts": 1020 + shift, "pid": pid, "tid": 8,
                     "cat": "ac2g"}]
        other = {"host": host, "clock_domain": "CLOCK_MONOTONIC"} if host else {}
        return {"traceEvents": evs, "otherData": other}

    pa = write("merge_a.json", json.dumps(trace("h1", 1, 100, 0)))
    pb = write("merge_b.json", json.dumps(trace("h1", 1, 5000, 0)))
    out = os.path.join(OUT, "merged_shared.json")
    mlprof("merge", pa, pb, "--names", "rank 0,rank 1", "-o", out)
    with open(out) as f:
        t = json.load(f)
    m = t["otherData"]["merge"]
    check(m["method"] == "shared clock" and [i["offset_ns"] for i in m["inputs"]] == [0, 0], f"shared clock {m}")
    check(m["inputs"][1]["pids"] == {"1": 1000000}, f"the colliding pid renumbered: {m['inputs'][1]['pids']}")
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name")
    check(names == ["rank 0: trainer", "rank 1: trainer"], f"process names {names}")
    ops = sorted((e["pid"], e["ts"]) for e in t["traceEvents"] if e["name"] == "op")
    check(ops == [(1, 1000), (1000000, 1000)], f"ops {ops}")
    flows = sorted(e["id"] for e in t["traceEvents"] if e["ph"] in "sf")
    check(flows == ["0:5", "0:5", "1:5", "1:5"], f"flow ids per input {flows}")
    check(any(e["ph"] == "f" and e.get("bp") == "e" for e in t["traceEvents"]), "binding point kept")
    tn = [e for e in t["traceEvents"] if e["name"] == "thread_name" and e["pid"] == 1000000]
    check(tn and tn[0]["args"]["name"] == "main", "thread names follow their process")
    r, _ = analyze_json(out, "--aggregate-by", "process")
    check(len(r["rows"]) == 2 and sum(x["count"] for x in r["rows"]) == 2, "the merged trace reads back")

    # two hosts: aligned on a marker, or by offsets given, or (warned) by their starts
    pc = write("merge_c.json", json.dumps(trace("h2", 1, 5000, 4900)))
    out = os.path.join(OUT, "merged_marker.json")
    mlprof("merge", pa, pc, "--sync-marker", "sync", "-o", out)
    with open(out) as f:
        t = json.load(f)
    m = t["otherData"]["merge"]
    check(m["method"] == "sync marker" and [i["offset_ns"] for i in m["inputs"]] == [0, -4900000], f"marker {m}")
    ops = sorted(e["ts"] for e in t["traceEvents"] if e["name"] == "op")
    check(ops == [1000, 1000], f"ops aligned on the marker {ops}")
    mlprof("merge", pa, pc, "--offsets", "0,-4.9ms", "-o", out)
    with open(out) as f:
        m = json.load(f)["otherData"]["merge"]
    check(m["method"] == "given offsets" and m["inputs"][1]["offset_ns"] == -4900000, f"given {m}")
    pd = write("merge_d.json", json.dumps(trace(None, 3, 0, 300)))
    p = mlprof("merge", pa, pd, "-o", out)
    with open(out) as f:
        m = json.load(f)["otherData"]["merge"]
    check(m["method"] == "trace starts" and "lined up" in p.stderr, f"starts {m} {p.stderr!r}")
    # trace A starts with its marker at 100 us, trace D with its own at 0
    check(m["inputs"][1]["offset_ns"] == 100000, f"start offset {m['inputs'][1]}")

    p = mlprof("merge", pa, pd, "--sync-marker", "nope", "-o", out, expect=1)
    check("has no event named \"nope\"" in p.stderr, f"missing marker {p.stderr!r}")
    for args, needle in (([pa], "which traces"), ([pa, pb, "--offsets", "1", "--sync-marker", "x"], "choose one"),
                         ([pa, pb, "--names", "a"], "one label per trace"),
                         ([pa, pb, "--offsets", "1,soon"], "--offsets: expected")):
        p = mlprof("merge", *args, expect=2)
        check(needle in p.stderr, f"merge {args}: {p.stderr!r}")


def kineto_trace():
    """A trace in the shape PyTorch's profiler writes on a GPU machine, with known answers:
    times in microseconds; the CPU thread is pid 100 tid 1, the GPU is pid 0 with streams 7-9."""
    cpu = dict(pid=100, tid=1)

    def op(name, ts, dur, **a):
        return {"name": name, "cat": "cpu_op", "ph": "X", "ts": ts, "dur": dur, **cpu, "args": a}

    def rt(name, ts, dur, corr):
        return {"name": name, "cat": "cuda_runtime", "ph": "X", "ts": ts, "dur": dur, **cpu,
                "args": {"correlation": corr, "External id": 0}}

    def k(name, ts, dur, stream, corr=None, cat="kernel"):
        a = {"device": 0, "stream": stream}
        if corr is not None:
            a["correlation"] = corr
        return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": 0, "tid": stream, "args": a}

    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU"}], "traceEvents": [
        op("aten::linear", 0, 100, **{"External id": 1}),
        op("aten::addmm", 10, 50, **{"External id": 2, "Input Dims": [[8, 64], [64, 32]]}),
        rt("cudaLaunchKernel", 20, 10, 1),
        op("aten::relu", 100, 30, **{"External id": 3}),
        rt("cudaLaunchKernel", 105, 5, 2),
        rt("cudaMemcpyAsync", 140, 5, 3),
        op("nccl:all_reduce", 165, 15, **{"External id": 4}),
        {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": 168, "dur": 7, **cpu, "args": {}},
        {"name": "ac2g", "cat": "ac2g", "ph": "s", "id": 99, "ts": 168, **cpu},
        k("gemm_kernel", 40, 50, 7, 1),
        k("relu_kernel", 120, 5, 7, 2),
        k("Memcpy HtoD (Pageable -> Device)", 150, 10, 8, 3, cat="gpu_memcpy"),
        k("ncclKernel_AllReduce_RING_LL_Sum_float", 200, 60, 9),
        {"name": "ac2g", "cat": "ac2g", "ph": "f", "bp": "e", "id": 99, "ts": 200, "pid": 0, "tid": 9},
        k("orphan_kernel", 300, 4, 7),
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]}


def test_kernels():
    path = write("kineto.json", json.dumps(kineto_trace()))
    r, _ = analyze_json(path, "--type", "kernel,gpu_memcpy", "--aggregate-by", "bottom_op", "-t", "0")
    rows = rows_by_key(r)
    got = {k: (v["count"], v["total_ns"]) for k, v in rows.items()}
    check(got == {"aten::addmm": (1, 50000), "aten::relu": (1, 5000), "nccl:all_reduce": (1, 60000),
                  "(no operator)": (2, 14000)}, f"kernel time per bottom-level operator {got}")
    rt = rows_by_key(analyze_json(path, "--type", "kernel", "--aggregate-by", "top_op")[0])
    check(rt["aten::linear"]["total_ns"] == 50000, f"top-level operator {sorted(rt)}")
    rs = rows_by_key(analyze_json(path, "--type", "kernel", "--aggregate-by", "op_stack")[0])
    check("aten::linear > aten::addmm" in rs, f"op stack {sorted(rs)}")
    rl = rows_by_key(analyze_json(path, "--type", "gpu_memcpy", "--aggregate-by", "launch")[0])
    check(set(rl) == {"cudaMemcpyAsync"}, f"launch {sorted(rl)}")
    ra = rows_by_key(analyze_json(path, "--type", "cpu_op", "--aggregate-by", "name")[0])
    check(ra["aten::addmm"]["input_shapes"] == "[[8,64],[64,32]]", f"Input Dims {ra['aten::addmm']}")
    check(ra["aten::linear"]["self_ns"] == 50000, "cpu_op self time: addmm taken out, runtime calls are inside")

    p = mlprof("kernels", path, "--format", "json")
    k = json.loads(p.stdout)
    check((k["gpu_events"], k["linked_by_correlation"], k["linked_by_flow"], k["linked_by_external_id"],
           k["unlinked"]) == (5, 3, 1, 0, 1), f"linking {k}")
    d = k["devices"][0]
    check((d["name"], d["compute_ns"], d["communication_ns"], d["memory_ns"]) == ("GPU 0", 59000, 60000, 10000),
          f"breakdown {d}")
    # busy: [40,90) [120,125) [150,160) [200,260) [300,304) = 129 us over [40,304) = 264 us
    check((d["busy_ns"], d["span_ns"], d["idle_ns"]) == (129000, 264000, 135000), f"busy and idle {d}")
    streams = {s["tid"]: (s["kernels"], s["busy_ns"], s["idle_ns"]) for s in d["streams"]}
    check(streams == {7: (3, 59000, 205000), 8: (1, 10000, 0), 9: (1, 60000, 0)}, f"streams {streams}")
    ops = [(o["name"], o["gpu_time_ns"]) for o in k["operators"]]
    check(ops == [("nccl:all_reduce", 60000), ("aten::addmm", 50000), ("(no operator)", 14000),
                  ("aten::relu", 5000)], f"GPU time per operator {ops}")
    kr = {x["name"]: (x["kind"], x["count"], x["time_ns"], x["bottom_op"], x["top_op"]) for x in k["kernels"]}
    check(kr["gemm_kernel"] == ("compute", 1, 50000, "aten::addmm", "aten::linear")
          and kr["ncclKernel_AllReduce_RING_LL_Sum_float"][0] == "communication"
          and kr["orphan_kernel"][3] is None, f"kernels with their operators {kr}")
    p = mlprof("kernels", path)
    check(re.search(r"gemm_kernel\s+compute\s+1\s+50\.000 us\s+aten::addmm\s+aten::linear", p.stdout),
          f"top kernels table\n{p.stdout}")
    check("5 GPU events: 3 linked to their launch by correlation id, 1 by flow, 0 to their operator by External "
          "id, 1 not linked" in p.stdout
          and "GPU 0: 5 GPU events, busy 129.000 us of 264.000 us" in p.stdout, f"kernels table\n{p.stdout}")
    for opt in (["--type", "kernel"], ["--name", "gemm"], ["--min-time", "1us"], ["--aggregate-by", "launch"]):
        p = mlprof("kernels", path, *opt, expect=2)
        check(f"kernels: {opt[0]} is an option of analyze" in p.stderr, f"kernels {opt}, which it would ignore: {p.stderr!r}")
    p = mlprof("kernels", write("cpu_only.json", json.dumps({"traceEvents": NESTED})))
    check("no kernels" in p.stdout, "a CPU-only trace")


def test_flame_span_frames():
    """flame --span NAME keeps the samples taken while a span NAME was open on
    their thread: a task ("X") or a frame ("b"/"e" of one id, as mlprof writes
    frames), in the JSON trace and in its Perfetto export."""
    evs = [{"name": "iter", "cat": "frame", "ph": "b", "id": 1, "ts": 100, "pid": 1, "tid": 1},
           {"name": "iter", "cat": "frame", "ph": "e", "id": 1, "ts": 200, "pid": 1, "tid": 1},
           {"name": "iter", "cat": "frame", "ph": "b", "id": 2, "ts": 300, "pid": 1, "tid": 1},
           {"name": "iter", "cat": "frame", "ph": "e", "id": 2, "ts": 400, "pid": 1, "tid": 1},
           ev("step", 500, 100)]
    trace = {"traceEvents": evs,
             "stackFrames": {"1": {"name": "main"}, "2": {"name": "inner", "parent": "1"}},
             "samples": [{"ts": ts, "pid": 1, "tid": 1, "sf": "2", "weight": 1} for ts in range(50, 700, 10)]}
    path = write("flame_frames.json", json.dumps(trace))
    pf = os.path.join(OUT, "flame_frames.pftrace")
    mlprof("export", "--perfetto", pf, path)
    for src in (path, pf):
        for span, want in (("iter", 22), ("step", 11)):  # 100..200 and 300..400 every 10 us; 500..600
            p = mlprof("flame", src, "--folded", "--span", span)
            check(p.stdout.strip() == f"main;inner {want}", f"{os.path.basename(src)} --span {span}: {p.stdout!r}")


def test_order_independent():
    """A row's shapes and a kernel's operators are its earliest call's: the same
    answers whatever order the file holds the events in (a trace and its Perfetto
    export, a merge)."""
    def launch(op, ts, corr):
        return [{"name": op, "cat": "cpu_op", "ph": "X", "ts": ts, "dur": 20, "pid": 100, "tid": 1, "args": {}},
                {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ph": "X", "ts": ts + 1, "dur": 5, "pid": 100,
                 "tid": 1, "args": {"correlation": corr}},
                {"name": "k1", "cat": "kernel", "ph": "X", "ts": ts + 10, "dur": 4, "pid": 0, "tid": 7,
                 "args": {"device": 0, "stream": 7, "correlation": corr}}]
    evs = [ev("mm", 0, 5, input_shape="[2,2]"), ev("mm", 10, 5, input_shape="[4,4]"),
           ev("mm", 20, 5, input_shape="[2,2]")] + launch("first_op", 100, 1) + launch("second_op", 200, 2)
    fwd = write("order_fwd.json", json.dumps({"traceEvents": evs}))
    rev = write("order_rev.json", json.dumps({"traceEvents": evs[::-1]}))
    csvs = [mlprof("analyze", path, "--name", "mm", "--format", "csv").stdout for path in (fwd, rev)]
    row = next(csv.DictReader(io.StringIO(csvs[0])), {})
    check(csvs[0] == csvs[1] and row.get("input_shapes") == "[2,2]" and row.get("shapes_vary") == "true",
          f"shapes in file order and reversed:\n{csvs[0]}\n{csvs[1]}")
    ks = [json.loads(mlprof("kernels", path, "--format", "json").stdout) for path in (fwd, rev)]
    k1 = [(x["bottom_op"], x["count"]) for k in ks for x in k["kernels"] if x["name"] == "k1"]
    check(k1 == [("first_op", 2), ("first_op", 2)], f"a kernel's operators in file order and reversed: {k1}")


def test_other_writers():
    # RAF: B/E pairs on a string thread, microsecond epochs, shapes in "args_string"
    raf = {"traceEvents": [], "displayTimeUnit": "ms"}
    for name, b, e, shapes in (("raf_op_tvm_cast_76", 1648086040982992, 1648086040983008, "T<768xf32>,|T<768xf16>"),
                               ("raf_op_tvm_cast_77", 1648086040983026, 1648086040983039,
                                "T<768x768xf32>,|T<768x768xf16>")):
        for ph, ts in (("B", b), ("E", e)):
            raf["traceEvents"].append({"name": name, "cat": "Default Stream", "ph": ph, "ts": ts,
                                       "args": {"args_string": shapes}, "pid": 2364, "tid": "Default Stream"})
    r = rows_by_key(analyze_json(write("raf.json", json.dumps(raf, indent=4)))[0])
    c = r.get("raf_op_tvm_cast_77", {})
    check((c.get("total_ns"), c.get("input_shapes"), c.get("output_shapes")) == (13000, "T<768x768xf32>",
                                                                                 "T<768x768xf16>"),
          f"RAF op {c}")
    rt = analyze_json(write("raf.json", json.dumps(raf)), "--aggregate-by", "thread")[0]
    check([x["key"] for x in rt["rows"]] == ["2364:Default Stream"], f"RAF stream {rt['rows']}")
    # MXNet: operators as B/E pairs on numeric threads, memory counters beside them
    mx = {"traceEvents": [
        {"name": "Convolution", "cat": "operator", "ph": "B", "ts": 100, "pid": 0, "tid": 9},
        {"name": "Convolution", "cat": "operator", "ph": "E", "ts": 180, "pid": 0, "tid": 9},
        {"name": "Activation", "cat": "operator", "ph": "B", "ts": 190, "pid": 0, "tid": 9},
        {"name": "Activation", "cat": "operator", "ph": "E", "ts": 200, "pid": 0, "tid": 9},
        {"name": "Memory: gpu/0", "cat": "memory", "ph": "C", "ts": 150, "pid": 1, "args": {"Memory": 4096}},
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "MXNet"}}], "displayTimeUnit": "ms"}
    r = rows_by_key(analyze_json(write("mxnet.json", json.dumps(mx)), "--aggregate-by", "type,name")[0])
    check(set(r) == {"operator | Convolution", "operator | Activation"} and
          r["operator | Convolution"]["total_ns"] == 80000, f"MXNet {r}")
    # MegEngine: complete events with in_shapes, out_shapes, flops and memory
    mge = [ev("ConvolutionForward", 0, 200, cat="op", in_shapes="[[1,3,224,224],[64,3,7,7]]",
              out_shapes="[[1,64,112,112]]", flops=236027904, memory=3211264),
           ev("ConvolutionForward", 300, 100, cat="op", in_shapes="[[1,3,224,224],[64,3,7,7]]",
              out_shapes="[[1,64,112,112]]", flops=236027904, memory=3211264)]
    r = rows_by_key(analyze_json(write("megengine.json", json.dumps({"traceEvents": mge})), "--order-by",
                                 "memory")[0])
    c = r["ConvolutionForward"]
    check(c["flops"] == 2 * 236027904 and abs(c["flops_per_s"] - 2 * 236027904 / 300e-6) < 1
          and c["bytes"] == 2 * 3211264 and c["input_shapes"] == "[[1,3,224,224],[64,3,7,7]]",
          f"MegEngine {c}")


# ------------------------------------------- operator types and empty filters

def op_type_trace():
    """Durations that name their operator type in each of the ways writers do: MegEngine's
    dynamic graph (the name is the type), its static graph (an instance name, and the type
    in a "type" or "opr_type" argument), an "op_type" argument, PyTorch's profiler (the name,
    "aten::conv2d", in category cpu_op), and a GPU kernel. Times in microseconds."""
    meg = [ev("ConvolutionForward", 0, 200, memory=3211264, flops=236027904),
           ev("ConvolutionForward", 250, 50, memory=3211264),      # 50 us: under --min-time 1e-4
           ev("conv2", 400, 150, type="ConvolutionForward", memory=9437184),
           ev("conv3", 600, 120, opr_type="ConvolutionForward", memory=64),
           ev("fc", 800, 300, op_type="MatrixMulForward", memory=4096),
           ev("ElemwiseForward", 1200, 100, memory=512)]            # exactly 1e-4 s
    torch = [ev("aten::conv2d", 2000, 500, pid=2, cat="cpu_op", **{"External id": 1}),
             ev("aten::convolution", 2010, 400, pid=2, cat="cpu_op", **{"External id": 2}),
             ev("aten::relu", 2600, 40, pid=2, cat="cpu_op", **{"External id": 3}),
             ev("implicit_gemm_kernel", 2100, 300, pid=3, tid=7, cat="kernel")]
    return {"traceEvents": meg + torch + [{"name": "cnt", "ph": "C", "ts": 5, "pid": 1, "args": {"v": 1}}]}


def keys(result):
    return [x["key"] for x in result["rows"]]


def test_operator_types():
    path = write("op_types.json", json.dumps(op_type_trace()))
    # an operator type: the name, or a "type", "opr_type" or "op_type" argument
    r = rows_by_key(analyze_json(path, "--type", "ConvolutionForward", "-t", "0")[0])
    got = {k: v["count"] for k, v in r.items()}
    check(got == {"ConvolutionForward": 2, "conv2": 1, "conv3": 1}, f"--type ConvolutionForward: {got}")
    r = analyze_json(path, "--type", "MatrixMulForward")[0]
    check(keys(r) == ["fc"], f"--type from op_type: {keys(r)}")
    r = analyze_json(path, "--type", "aten::conv2d", "-t", "0")[0]
    check(keys(r) == ["aten::conv2d"] and r["rows"][0]["count"] == 1, f"--type aten::conv2d: {keys(r)}")
    # a category, as before; a comma list mixing both; globs; --type given twice adds to the list
    r = analyze_json(path, "--type", "cpu_op", "-t", "0")[0]
    check(sorted(keys(r)) == ["aten::conv2d", "aten::convolution", "aten::relu"], f"--type cpu_op: {keys(r)}")
    r = analyze_json(path, "--type", "kernel,MatrixMulForward", "-t", "0")[0]
    check(sorted(keys(r)) == ["fc", "implicit_gemm_kernel"], f"--type kernel,MatrixMulForward: {keys(r)}")
    r = analyze_json(path, "--type", "aten::conv*", "-t", "0")[0]
    check(sorted(keys(r)) == ["aten::conv2d", "aten::convolution"], f"--type glob: {keys(r)}")
    r = analyze_json(path, "--type", "*Forward", "--aggregate-by", "none", "-t", "0")[0]
    check(len(r["rows"]) == 6, f"--type *Forward, one row per event: {keys(r)}")
    r = analyze_json(path, "--type", "MatrixMulForward", "--type", "aten::relu", "-t", "0")[0]
    check(sorted(keys(r)) == ["aten::relu", "fc"], f"--type twice: {keys(r)}")
    p = mlprof("analyze", path, "--type", "", expect=2)
    check("--type" in p.stderr, f"--type empty: {p.stderr!r}")

    # MegEngine's example, unchanged: the ConvolutionForward operators of at least 0.1 ms
    # (a bare --min-time is in seconds), ordered by memory (the bytes column), at most 5
    cmd = ("-t", "5", "--order-by", "memory", "--min-time", "1e-4", "--type", "ConvolutionForward")
    r = analyze_json(path, *cmd)[0]
    got = [(x["key"], x["count"], x["bytes"]) for x in r["rows"]]
    check(got == [("conv2", 1, 9437184), ("ConvolutionForward", 1, 3211264), ("conv3", 1, 64)],
          f"MegEngine's --order-by memory --min-time 1e-4 --type ConvolutionForward: {got}")
    check(r["order_by"] == "bytes" and r["durations_kept"] == 3, f"ordered by {r['order_by']}")
    p = mlprof("analyze", path, *cmd)
    check(p.stderr == "" and re.search(r"^conv2\s+1\s.*9\.00 MiB", p.stdout, re.M), f"table\n{p.stdout}{p.stderr}")
    r = rows_by_key(analyze_json(path, "--min-time", "1e-4", "-t", "0")[0])
    check("ElemwiseForward" in r and r["ConvolutionForward"]["count"] == 1 and "aten::relu" not in r,
          f"--min-time 1e-4 is 100 us: {sorted(r)}")
    check(rows_by_key(analyze_json(path, "--min-time", "100us", "-t", "0")[0]).keys() == r.keys(),
          "--min-time 1e-4 and 100us agree")
    # ordered by a column no kept row has: said on stderr and in the table, rows in name order
    r, p = analyze_json(path, "--type", "cpu_op", "--order-by", "memory")
    check(keys(r) == ["aten::conv2d", "aten::convolution", "aten::relu"]
          and "--order-by memory: no row has bytes" in p.stderr and '"memory"' in p.stderr, f"no bytes: {p.stderr!r}")
    p = mlprof("analyze", path, "--type", "cpu_op", "--order-by", "memory")
    check("note: --order-by memory: no row has bytes" in p.stdout, f"no bytes, table\n{p.stdout}")
    # MegEngine's --aggregate-by type (operator types) is op_type here; type stays the category
    r = analyze_json(path, "--aggregate-by", "op_type", "--aggregate", "sum", "-t", "5")[0]
    check(keys(r) == ["ConvolutionForward", "aten::convolution", "MatrixMulForward", "implicit_gemm_kernel",
                      "ElemwiseForward"] and (r["rows"][0]["count"], r["rows"][0]["total_ns"]) == (4, 520000),
          f"--aggregate-by op_type: {[(x['key'], x['count'], x['total_ns']) for x in r['rows']]}")
    r = analyze_json(path, "--aggregate-by", "type")[0]
    check(sorted(keys(r)) == ["cpu_op", "kernel", "op"], f"--aggregate-by type: {keys(r)}")
    p = mlprof("analyze", "--help")
    check(re.search(r"memory", p.stdout) and "operator type" in p.stdout and "exit status" in p.stdout.lower(),
          f"help names memory, operator types and the exit status:\n{p.stdout}")


def test_filters_matching_nothing():
    path = write("op_types.json", json.dumps(op_type_trace()))
    # a misspelt type: exit 0, a line on stderr naming the option and value and what the trace has
    r, p = analyze_json(path, "--type", "ConvolutionForwad")
    check(r["durations_kept"] == 0 and r["rows"] == [], f"nothing kept {r['rows']}")
    check(r.get("filters_matching_nothing") == [{"option": "--type", "value": "ConvolutionForwad"}],
          f"the JSON says which filter matched nothing: {r.get('filters_matching_nothing')}")
    line = p.stderr.strip()
    check(line.startswith("mlprof analyze: ") and '--type "ConvolutionForwad"' in line and "op_types.json" in line
          and "categories: op (6), cpu_op (3), kernel (1)" in line and "ConvolutionForward (4)" in line
          and 'did you mean "ConvolutionForward"' in line and len(p.stderr.splitlines()) == 1,
          f"--type that matches nothing: {p.stderr!r}")
    p = mlprof("analyze", path, "--type", "ConvolutionForwad")
    check("matches nothing" in p.stdout and "--type \"ConvolutionForwad\"" in p.stdout and "(no durations" in p.stdout,
          f"the table says so\n{p.stdout}")
    check('--type "ConvolutionForwad"' in p.stderr, f"table: stderr {p.stderr!r}")
    p = mlprof("analyze", path, "--type", "ConvolutionForwad", "--format", "csv")
    check(p.stdout.count("\n") == 1 and '--type "ConvolutionForwad"' in p.stderr, f"csv: {p.stdout!r} {p.stderr!r}")
    # one item of a list that matches nothing is named, the rest is shown
    r, p = analyze_json(path, "--type", "kernel,Nope")
    check(keys(r) == ["implicit_gemm_kernel"] and r.get("filters_matching_nothing") == [{"option": "--type", "value": "Nope"}]
          and '--type "Nope"' in p.stderr and "kernel,Nope" in p.stderr, f"one item: {keys(r)} {p.stderr!r}")
    # --name, --min-time, --max-time
    r, p = analyze_json(path, "--name", "convolution_fwd")
    check(r.get("filters_matching_nothing") == [{"option": "--name", "value": "convolution_fwd"}]
          and '--name "convolution_fwd"' in p.stderr and "names: " in p.stderr and "aten::conv2d" in p.stderr,
          f"--name: {p.stderr!r}")
    r, p = analyze_json(path, "--name", "relu*")
    check('--name "relu*"' in p.stderr and 'did you mean "*relu*"' in p.stderr, f"--name glob: {p.stderr!r}")
    r, p = analyze_json(path, "--min-time", "2")
    check(r.get("filters_matching_nothing") == [{"option": "--min-time", "value": "2.000 s"}]
          and "--min-time" in p.stderr and "the longest is 500.000 us" in p.stderr, f"--min-time: {p.stderr!r}")
    r, p = analyze_json(path, "--max-time", "10us")
    check("--max-time" in p.stderr and "the shortest is 40.000 us" in p.stderr, f"--max-time: {p.stderr!r}")
    # each filter keeps some, together none
    r, p = analyze_json(path, "--type", "aten::relu", "--min-time", "300us")
    check(r["durations_kept"] == 0 and "together" in p.stderr and "--type \"aten::relu\" keeps 1" in p.stderr
          and "--min-time 300.000 us keeps 4" in p.stderr, f"together: {p.stderr!r}")
    check(r.get("filters_matching_nothing") == [], f"none alone: {r.get('filters_matching_nothing')}")
    # filters that match: nothing on stderr
    r, p = analyze_json(path, "--type", "cpu_op", "--name", "aten::*", "--min-time", "1us", "--max-time", "1")
    check(p.stderr == "" and len(r["rows"]) == 3 and r.get("filters_matching_nothing") == [], f"quiet: {p.stderr!r}")
    # diff: a filter that matches nothing in a run is named too
    p = mlprof("diff", path, path, "--type", "ConvolutionForwad", "--fail-above", "10")
    check(p.stderr.count('--type "ConvolutionForwad"') == 2 and "mlprof diff: " in p.stderr, f"diff: {p.stderr!r}")
    # a trace without durations
    meta = write("counters_only.json", json.dumps([{"name": "c", "ph": "C", "ts": 1, "pid": 1, "args": {"v": 1}}]))
    r, p = analyze_json(meta, "--type", "op")
    check("no durations" in p.stderr and '--type "op"' in p.stderr, f"no durations: {p.stderr!r}")


def test_output_is_input():
    """No command writes its output over a trace it read: named, exit 1, the trace intact."""
    src = write("victim.json", json.dumps({"traceEvents": [
        {"name": "a", "ph": "X", "ts": 1, "dur": 5, "pid": 1, "tid": 1},
        {"name": "kernel", "cat": "kernel", "ph": "X", "ts": 2, "dur": 1, "pid": 0, "tid": 7}]}))
    with open(src, "rb") as f:
        before = f.read()
    link = os.path.join(OUT, "victim_link.json")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(src, link)
    other = write("other.json", json.dumps([{"name": "b", "ph": "X", "ts": 1, "dur": 2, "pid": 2, "tid": 2}]))
    for args in (["analyze", src, "-o", src], ["kernels", src, "-o", link], ["sequences", src, "-o", src],
                 ["diff", src, other, "-o", src], ["merge", other, src, "-o", link], ["ranks", src, other, "-o", src],
                 ["export", "--perfetto", link, src], ["export", "--sqlite", link, src]):
        p = mlprof(*args, expect=1)
        check("is a trace this command read" in p.stderr or "is the trace itself" in p.stderr,
              f"{args[0]} -o INPUT: {p.stderr!r}")
        with open(src, "rb") as f:
            check(f.read() == before, f"{' '.join(args[:1])} -o INPUT wrote over the trace")
    p = mlprof("analyze", src, "-o", os.path.join(OUT, "victim_table.txt"))
    check(p.returncode == 0, "analyze -o another file works")
    # standard output that cannot be written (a full disk: /dev/full) is said, exit 1,
    # whether the text is small (it fails at the flush) or large (at the write itself)
    if os.path.exists("/dev/full"):
        big = write("many.json", json.dumps([ev(f"op{i}", i * 10, 5) for i in range(3000)]))
        for args in (["analyze", src], ["analyze", big, "--format", "json", "--top", "0"], ["kernels", src],
                     ["analyze", "--help"]):
            with open("/dev/full", "w") as full:
                p = subprocess.run([MLPROF, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
            check(p.returncode == 1 and "cannot write the output to standard output" in p.stderr,
                  f"{' '.join(args)} > /dev/full: exit {p.returncode}, {p.stderr!r}")
    else:
        print("analyze: /dev/full is missing: a failing standard output is not checked")


for test in (test_flame_span_frames, test_order_independent, test_output_is_input, test_operator_types, test_filters_matching_nothing, test_other_writers, test_kernels, test_merge, test_pytorch, test_diff, test_nesting, test_begin_end, test_streamed_array, test_gzip_and_string_tids, test_damaged,
             test_not_a_trace, test_usage, test_own_trace, test_begin_end_span_and_order, test_bad_times,
             test_events_left_out):
    test()
print(f"analyze: {len(failures)} checks failed" if failures else "analyze: all checks passed")
sys.exit(1 if failures else 0)
