#!/usr/bin/env python3
"""The crash path in each format: a program killed by SIGSEGV or SIGABRT
leaves its trace as Perfetto's protobuf and as gzip JSON.

usage: formats_crash_check.py TEST_FORMATS_CRASH PRELOAD OUT_DIR PROTO

Runs test_formats_crash as `mlprof run` runs a program (PRELOAD, the path of
libmlprof_preload.so, in LD_PRELOAD; MLPROF_FILENAME and MLPROF_AUTOSTART in
the environment; the interposers off, which this program does not need) to
crash.pftrace, crash.json.gz and crash.json, once dying of SIGSEGV and once
of SIGABRT. The process must die of that signal, say that the trace up to it
is written, and the trace must decode completely (protoc and
tests/perfetto_decode.py, gzip and json) and hold the SPANS spans the
program recorded before it died, each once, the span open when it died
once, unfinished, and otherData. Then the same with the continuous dump
writing every millisecond (.pftrace and .json.gz): if it held the collector
when the signal came, the handler must say it did not write, and the last
version on disk must still decode whole.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys

from perfetto_decode import decode_text, protoc_decode, resolve

failures = []
SPANS = 2000
OPEN = "open at the crash"


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def ops_of(protoc, proto, path, data):
    """The "op" spans' indexes, whether each span OPEN is unfinished, and the otherData of a trace (AssertionError when it does not decode)."""
    if path.endswith(".pftrace"):
        text, err = protoc_decode(protoc, proto, data)
        if text is None:
            raise AssertionError(f"protoc cannot decode it: {err}")
        res = resolve(decode_text(text))
        ops = [e["args"]["i"] for e in res.events if e["type"] == "span" and e["name"] == "op"]
        opened = [e["unfinished"] for e in res.events if e["type"] == "span" and e["name"] == OPEN]
        other = [e["args"] for e in res.events if e["type"] == "other_data"]
        return ops, opened, other[0] if other else None
    text = gzip.decompress(data) if path.endswith(".gz") else data
    doc = json.loads(text)
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ops = [e["args"]["i"] for e in spans if e["name"] == "op"]
    opened = [bool(e.get("args", {}).get("unfinished")) for e in spans if e["name"] == OPEN]
    return ops, opened, doc.get("otherData")


def crash(exe, preload, out, protoc, proto, name, how, continuous=False):
    d = os.path.join(out, f"{how}_{name.replace('.', '_')}{'_continuous' if continuous else ''}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, name)
    env = dict(os.environ)
    env.update(LD_PRELOAD=preload, MLPROF_FILENAME=path, MLPROF_AUTOSTART="true", MLPROF_HOOKS="none")
    if continuous:
        env.update(MLPROF_CONTINUOUS_DUMP="true", MLPROF_DUMP_PERIOD="0.001")
    # under a sanitizer its runtime keeps the signals to itself unless told not to (the build's runtime
    # is linked into the program, so it comes first whatever LD_PRELOAD says)
    env["ASAN_OPTIONS"] = "handle_segv=0:handle_abort=0:detect_leaks=0:verify_asan_link_order=0"
    env["UBSAN_OPTIONS"] = "handle_segv=0:handle_abort=0"
    env["TSAN_OPTIONS"] = "handle_segv=0:handle_abort=0:report_signal_unsafe=0"
    r = subprocess.run([exe, str(SPANS), how], capture_output=True, text=True, env=env, timeout=300)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    sig = signal.SIGSEGV if how == "segv" else signal.SIGABRT
    label = f"{name}, {how}{', continuous dump' if continuous else ''}"
    check(r.returncode == -sig, f"{label}: exit status {r.returncode}, killed by signal {int(sig)} expected")
    check(f"recorded {SPANS}" in r.stdout, f"{label}: the program did not record its spans")
    written = f"killed by signal {int(sig)}" in r.stderr and "the trace up to it is written" in r.stderr
    # the continuous dump may hold the collector when the signal comes: the handler waits for it
    check(written, f"{label}: the handler did not say the trace is written")
    if not written and not os.path.exists(path):
        print(f"formats_crash: {label}: not written by the handler, and no version written before")
        return
    if not check(os.path.exists(path), f"{label}: no trace at {path}"):
        return
    with open(path, "rb") as f:
        data = f.read()
    try:
        ops, opened, other = ops_of(protoc, proto, path, data)
    except (AssertionError, OSError, EOFError, ValueError) as e:
        check(False, f"{label}: the trace ({len(data)} bytes) does not decode: {e}")
        return
    check(other is not None and other.get("dropped_events") == 0, f"{label}: otherData {other}")
    check(opened == [True], f"{label}: the span open at the crash: {opened}, not once unfinished")
    if not written:
        check(len(set(ops)) == len(ops) and set(ops) <= set(range(SPANS)),
              f"{label}: the last continuous version holds {len(ops)} spans, not distinct ones of those recorded")
        print(f"formats_crash: {label}: not written by the handler (the continuous dump held the collector); "
              f"the last version holds {len(ops)} spans in {len(data)} bytes")
        return
    check(sorted(ops) == list(range(SPANS)), f"{label}: {len(ops)} spans ({len(set(ops))} distinct), "
          f"{SPANS} recorded before the signal")
    # a version of the continuous dump being written when the signal came stays as a temporary
    # file (the next run with this path removes it)
    left = sorted(f for f in set(os.listdir(d)) - {name} if not (continuous and f.startswith(name + ".tmp-")))
    check(not left, f"{label}: files left beside the trace: {left}")
    print(f"formats_crash: {label}: {len(ops)} spans in {len(data)} bytes")


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    exe, preload, out, proto = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("formats_crash: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    os.makedirs(out, exist_ok=True)
    for how in ("segv", "abort"):
        for name in ("crash.pftrace", "crash.json.gz", "crash.json"):
            crash(exe, preload, out, protoc, proto, name, how)
    # with the continuous dump writing every millisecond
    for name in ("crash.pftrace", "crash.json.gz"):
        crash(exe, preload, out, protoc, proto, name, "segv", continuous=True)
    if failures:
        print(f"formats_crash: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("formats_crash: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
