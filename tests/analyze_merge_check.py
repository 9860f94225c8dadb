#!/usr/bin/env python3
"""`mlprof merge` on traces shaped as PyTorch's profiler (Kineto) writes them
for two ranks of one job: the ids that link events (correlation, External id,
flows, async ids) must stay with their own rank, times with fractions of a
microsecond must come back to the nanosecond, each rank's distributedInfo and
deviceProperties must be kept, and traces on the system clock must keep it.
The traces are written here.

usage: analyze_merge_check.py MLPROF OUTDIR
"""
import decimal
import json
import os
import subprocess
import sys

failures = []
MLPROF, OUT = sys.argv[1:3]


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def mlprof(*args, expect=0):
    p = subprocess.run([MLPROF, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == expect, f"mlprof {' '.join(args)}: exit {p.returncode}, wanted {expect}\n{p.stderr}")
    return p


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def load_exact(path):
    """A trace with its numbers as Decimal: no double rounds them."""
    with open(path) as f:
        return json.load(f, parse_float=decimal.Decimal, parse_int=decimal.Decimal)


def load(path):
    with open(path) as f:
        return json.load(f)


def test_nanoseconds_round_trip():
    """Epoch microseconds with three decimals, written by merge and read back,
    to the nanosecond (a double holds them only to 256 ns)."""
    base = 1700000000123456
    fracs = [0, 1, 7, 99, 128, 255, 256, 500, 501, 789, 998, 999]
    evs = []
    for k, f in enumerate(fracs):
        evs.append('{"name":"op%d","cat":"cpu_op","ph":"X","pid":1,"tid":1,"ts":%d.%03d,"dur":%d.%03d}'
                   % (k, base + 10 * k, f, k, (f * 7) % 1000))
    # a quoted time and an exponent: the same exact reading
    evs.append('{"name":"quoted","ph":"X","pid":1,"tid":1,"ts":"%d.333","dur":"0.001"}' % (base + 200))
    evs.append('{"name":"exp","ph":"i","s":"t","pid":1,"tid":1,"ts":1.700000000123666777e15}')
    src = write("ns_src.json", '{"traceEvents":[' + ",\n".join(evs) + "]}")
    want = {}
    for k, f in enumerate(fracs):
        want[f"op{k}"] = (decimal.Decimal(f"{base + 10 * k}.{f:03d}"), decimal.Decimal(f"{k}.{(f * 7) % 1000:03d}"))
    want["quoted"] = (decimal.Decimal(f"{base + 200}.333"), decimal.Decimal("0.001"))
    want["exp"] = (decimal.Decimal("1700000000123666.777"), None)

    once = os.path.join(OUT, "ns_once.json")
    mlprof("merge", src, src, "--same-clock", "-o", once)
    twice = os.path.join(OUT, "ns_twice.json")
    mlprof("merge", once, once, "--same-clock", "-o", twice)  # read back, written again
    for path, copies in ((once, 2), (twice, 4)):
        got = {}
        for e in load_exact(path)["traceEvents"]:
            if e["name"] in want:
                got.setdefault(e["name"], []).append((e["ts"], e.get("dur")))
        for name, (ts, dur) in want.items():
            seen = got.get(name, [])
            check(len(seen) == copies and all(s[0] == ts for s in seen),
                  f"{os.path.basename(path)}: {name} at {ts} us, got {[str(s[0]) for s in seen]}")
            if dur is not None:
                check(all(s[1] == dur for s in seen),
                      f"{os.path.basename(path)}: {name} lasts {dur} us, got {[str(s[1]) for s in seen]}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tests = [test_nanoseconds_round_trip]
    for test in tests:
        test()
    if failures:
        print(f"analyze_merge_check: {len(failures)} of the checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"analyze_merge_check: {len(tests)} tests passed")
