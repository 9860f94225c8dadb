#!/usr/bin/env python3
"""mlprof merge streams: its peak memory stays near one input's whatever the
number of inputs (12 rank traces of about 12 MB each merged in well under their
sum, and in about what two of them take); the output is complete (every event
of every input, ranks in order, otherData.merge); `-o -` and no -o write the
same bytes to standard output; a write that fails (a full disk, simulated with
RLIMIT_FSIZE; a missing or unwritable folder; a directory as output) says why,
exits non-zero and leaves no partial file: an older output stays as it was.

usage: analyze_merge_stream_check.py MLPROF OUTDIR [SANITIZER]
"""
import json
import gzip
import os
import resource
import signal
import subprocess
import sys
import tempfile

MLPROF, OUT = sys.argv[1], sys.argv[2]
SANITIZER = sys.argv[3] if len(sys.argv) > 3 else ""
RANKS, MB = 12, 12
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def rank_trace(path, rank, world, target):
    """A rank's trace of about target bytes: operator spans with correlation
    ids, flows, counters; the same pid on every rank (renumbered by merge)."""
    lines = []
    size = 0
    k = 0
    while size < target:
        ts = 1000.0 + 25.0 * k
        for line in ('{"name":"aten::mm","cat":"cpu_op","ph":"X","pid":77,"tid":78,"ts":%.3f,"dur":9.000,'
                     '"args":{"correlation":%d,"Input Dims":[[64,64],[64,64]]}}' % (ts, k + 1),
                     '{"name":"flow","cat":"ac2g","ph":"s","id":%d,"pid":77,"tid":78,"ts":%.3f}' % (k + 1, ts + 1),
                     '{"name":"mem","ph":"C","pid":77,"tid":78,"ts":%.3f,"args":{"used":%d}}' % (ts + 2, k)):
            lines.append(line)
            size += len(line) + 2
        k += 1
    with open(path, "w") as f:
        f.write('{"traceEvents":[\n')
        f.write('{"name":"process_name","ph":"M","pid":77,"tid":0,"args":{"name":"train"}},\n')
        f.write(",\n".join(lines))
        f.write('\n],\n"distributedInfo":{"rank":%d,"world_size":%d},\n'
                '"otherData":{"host":"h","clock_domain":"CLOCK_MONOTONIC"}\n}\n' % (rank, world))
    return len(lines)


def run(argv, limit_fsize=None, stdin=None):
    """Runs argv alone: (status, stdout, stderr, its peak RSS in bytes, from wait4)."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as on a full disk
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
    # files, not pipes: the child is waited for with wait4, which gives its own peak
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err, preexec_fn=limit)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read(), err.read().decode(errors="replace"), ru.ru_maxrss * 1024


def leftovers(folder):
    return [n for n in os.listdir(folder) if ".tmp-" in n]


def merged_tail(path):
    """otherData of a merged trace, read from its end (the file may be large)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - (1 << 20)))
        tail = f.read().decode()
    at = tail.rindex('"otherData":')
    return json.JSONDecoder().raw_decode(tail[at + len('"otherData":'):])[0]


def count_events(path):
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b'{"name"') or line.startswith(b',{"name"'):
                n += 1
    return n


def main():
    os.makedirs(OUT, exist_ok=True)
    paths, events = [], []
    for r in range(RANKS):
        p = os.path.join(OUT, "job.rank%d.json" % (RANKS - 1 - r))  # given out of rank order
        events.append(rank_trace(p, RANKS - 1 - r, RANKS, MB * 10**6))
        paths.append(p)
    sizes = [os.path.getsize(p) for p in paths]
    total = sum(sizes)

    # --- memory: bounded by one input, not the sum
    out = os.path.join(OUT, "merged.json")
    rc, _, err, peak_all = run([MLPROF, "merge", *paths, "-o", out])
    check(rc == 0, "merge of %d inputs: status %d: %s" % (RANKS, rc, err))
    rc, _, err, peak_two = run([MLPROF, "merge", *paths[:2], "-o", os.path.join(OUT, "two.json")])
    check(rc == 0, "merge of 2 inputs: status %d: %s" % (rc, err))
    print("merge: %d inputs, %.0f MB in all (largest %.1f MB): peak RSS %.0f MiB (%.2f of their sum); "
          "2 of them: %.0f MiB" % (RANKS, total / 1e6, max(sizes) / 1e6, peak_all / 2**20, peak_all / total,
                                   peak_two / 2**20))
    if SANITIZER:
        print("skipped the memory checks: under the %s sanitizer memory is its shadow and quarantine" % SANITIZER)
    else:
        check(peak_all < total / 2, "peak RSS %d not well under the inputs' sum %d" % (peak_all, total))
        # a merge that held every input would take about 6 times the two-input one
        check(peak_all < 1.5 * peak_two + (8 << 20),
              "peak RSS grows with the inputs: %d for %d, %d for 2" % (peak_all, RANKS, peak_two))

    # --- the output: complete, in the order given, ranks sorted by their index
    if os.path.exists(out):
        od = merged_tail(out)
        m = od["merge"]
        check(m["method"] == "shared clock", "method %s" % m["method"])
        check([i["rank"] for i in m["inputs"]] == [RANKS - 1 - r for r in range(RANKS)], "inputs' ranks in order")
        check([i["events"] for i in m["inputs"]] == events, "events per input")
        check(len({next(iter(i["pids"].values())) for i in m["inputs"]}) == RANKS, "pids renumbered apart")
        check(m["missing_ranks"] == [], "no rank missing")
        n = count_events(out)
        # every event, and per input its process name and sort index
        check(n == sum(events) + 2 * RANKS, "events written: %d, expected %d" % (n, sum(events) + 2 * RANKS))
        check(not leftovers(OUT), "temporary files left: %s" % leftovers(OUT))

    # --- standard output: the same bytes as the file
    small = [os.path.join(OUT, "s0.json"), os.path.join(OUT, "s1.json")]
    for r, p in enumerate(small):
        rank_trace(p, r, 2, 200_000)
    file_out = os.path.join(OUT, "small.json")
    rc, _, err, _ = run([MLPROF, "merge", *small, "-o", file_out])
    check(rc == 0, "small merge: %s" % err)
    with open(file_out, "rb") as f:
        want = f.read()
    for extra in (["-o", "-"], []):
        rc, got, err, _ = run([MLPROF, "merge", *small, *extra])
        check(rc == 0 and got == want, "merge %s to standard output differs from the file (%d)" % (extra, rc))

    # --- OUT.json.gz: gzip holding the same bytes; a full disk keeps the old file there too
    gz_out = os.path.join(OUT, "small.json.gz")
    rc, _, err, _ = run([MLPROF, "merge", *small, "-o", gz_out])
    with open(gz_out, "rb") as f:
        data = f.read()
    check(rc == 0 and data[:2] == b"\x1f\x8b", "merge -o X.json.gz: not gzip (%d %r)" % (rc, err))
    check(data[:2] == b"\x1f\x8b" and gzip.decompress(data) == want, "merge -o X.json.gz: not the JSON of -o X.json")
    check(len(data) * 4 < len(want), "merge -o X.json.gz: %d bytes for %d of JSON" % (len(data), len(want)))
    rc, _, err, _ = run([MLPROF, "merge", *paths[:3], "-o", gz_out], limit_fsize=64 << 10)
    check(rc != 0 and "cannot write" in err and "small.json.gz" in err, "full disk, gzip: %d %r" % (rc, err))
    with open(gz_out, "rb") as f:
        check(f.read() == data, "full disk, gzip: the previous output was replaced")
    check(not leftovers(OUT), "temporary files left after a failed gzip write: %s" % leftovers(OUT))

    # --- an input that cannot be read twice (standard input, a pipe): kept from the first read
    with open(small[0], "rb") as f:
        rc, got, err, _ = run([MLPROF, "merge", "/dev/stdin", small[1]], stdin=f)
    check(rc == 0 and got == want.replace(small[0].encode(), b"/dev/stdin"),
          "merge of standard input differs from the file's (%d %s)" % (rc, err))

    # --- the same for a trace with what the merge renumbers or must keep whole: pids and tids
    # given as strings, GPUs numbered alike in both inputs, a NUL in a key; from the file, and
    # kept from standard input
    odd = os.path.join(OUT, "odd.json")
    with open(odd, "w") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "G"}], "traceEvents": [
            {"ph": "X", "name": "span", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1, "dur": 9},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1,
             "args": {"device": 0, "k\u0000ey": "v\u0000al"}}]}, f)
    other = os.path.join(OUT, "odd-copy.json")
    with open(odd, "rb") as f, open(other, "wb") as g:
        g.write(f.read())
    rc, want, err, _ = run([MLPROF, "merge", odd, other, "--same-clock"])
    check(rc == 0, "merge of string ids: %s" % err)
    with open(odd, "rb") as f:
        rc, got, err, _ = run([MLPROF, "merge", "/dev/stdin", other, "--same-clock"], stdin=f)
    check(rc == 0 and got == want.replace(odd.encode(), b"/dev/stdin"),
          "merge of string ids from standard input differs from the file's (%d %s)" % (rc, err))
    try:
        t = json.loads(want)
    except ValueError:
        t = {"traceEvents": [], "deviceProperties": []}
    ids = [e[k] for e in t["traceEvents"] for k in ("pid", "tid")]
    check(ids and all(isinstance(v, int) and abs(v) < 2 ** 53 for v in ids), "ids a double holds: %s" % ids)
    ks = [e for e in t["traceEvents"] if e["name"] == "k"]
    check(len(ks) == 2 and len({e["args"]["device"] for e in ks}) == 2
          and all(e["args"].get("k\u0000ey") == "v\u0000al" for e in ks), "two GPUs apart, NUL kept: %s" % ks)
    check(sorted(d["id"] for d in t.get("deviceProperties", [])) == sorted(e["args"]["device"] for e in ks),
          "deviceProperties under the output's numbers: %s" % t.get("deviceProperties"))

    # --- a full disk: an error naming the file, no partial output, the old one kept
    full = os.path.join(OUT, "full.json")
    with open(full, "w") as f:
        f.write("the previous output\n")
    rc, _, err, _ = run([MLPROF, "merge", *paths[:3], "-o", full], limit_fsize=1 << 20)
    check(rc != 0, "a write past RLIMIT_FSIZE succeeded")
    check("cannot write" in err and "full.json" in err and "File too large" in err,
          "full disk: unclear error: %r" % err)
    with open(full) as f:
        check(f.read() == "the previous output\n", "the previous output was replaced by a partial one")
    check(not leftovers(OUT), "temporary files left after a failed write: %s" % leftovers(OUT))

    # --- a folder that does not exist; an output that is a directory
    missing = os.path.join(OUT, "no-such-folder", "m.json")
    rc, _, err, _ = run([MLPROF, "merge", *small, "-o", missing])
    check(rc != 0 and "no-such-folder" in err and "No such file" in err, "missing folder: %d %r" % (rc, err))
    check(not os.path.exists(os.path.dirname(missing)), "the missing folder was made")
    rc, _, err, _ = run([MLPROF, "merge", *small, "-o", OUT])
    check(rc != 0 and "is a directory" in err, "a directory as output: %d %r" % (rc, err))

    # --- a folder without write permission (root writes anyway)
    ro = os.path.join(OUT, "read-only")
    os.makedirs(ro, exist_ok=True)
    os.chmod(ro, 0o555)
    try:
        if os.geteuid() == 0:
            print("skipped the read-only folder: running as root, which may write there")
        else:
            rc, _, err, _ = run([MLPROF, "merge", *small, "-o", os.path.join(ro, "m.json")])
            check(rc != 0 and "Permission denied" in err, "read-only folder: %d %r" % (rc, err))
            check(os.listdir(ro) == [], "files left in the read-only folder: %s" % os.listdir(ro))
    finally:
        os.chmod(ro, 0o755)

    # --- an input missing: said, nothing written
    gone = os.path.join(OUT, "gone.json")
    rc, _, err, _ = run([MLPROF, "merge", small[0], os.path.join(OUT, "nope.json"), "-o", gone])
    check(rc != 0 and "nope.json" in err and not os.path.exists(gone), "missing input: %d %r" % (rc, err))

    for p in paths + [out, os.path.join(OUT, "two.json")]:  # large: not kept
        if os.path.exists(p):
            os.unlink(p)
    if failures:
        print("analyze_merge_stream_check: %d failure(s)" % len(failures))
        sys.exit(1)
    print("analyze_merge_stream_check: all checks passed")


if __name__ == "__main__":
    main()
