#!/usr/bin/env python3
"""Continuous dump in Perfetto's protobuf and in gzip JSON, read while it runs.

usage: formats_continuous_check.py TEST_FORMATS_CONTINUOUS OUT_DIR PROTO MLPROF

Runs test_formats_continuous to run.pftrace, to run.json.gz and to run.json
with MLPROF_COMPRESS=gzip (the `compress` key: gzip under the name given);
the collector rewrites the file every 20 ms while three threads record.
While it runs, every new version of the file (its inode, size or mtime
changed) is read and kept open until the next: that one must have replaced
it by a rename (the old one unlinked, its bytes unchanged), and each must
decode completely: protoc and
tests/perfetto_decode.py for the protobuf, Python's gzip module and
json.loads for the gzip. The spans it holds never decrease from one copy to
the next (each copy holds every span of the one before). The program waits
after each phase until a copy holds the spans recorded so far, so copies
are taken however slow the machine is; no time is measured. The final file
holds every span the program recorded, once, and otherData says
dropped_events 0; no temporary file is left beside it. The versions
of the protobuf file read after each phase are read by `mlprof analyze`
too, with as many spans. The span open at
every dump but the last is in each copy once, unfinished in every copy taken
while the phases go on, finished in the final file, and never unfinished
again once a copy showed it finished.

Then the final protobuf file, cut at random packet boundaries, decodes up to
the cut (the events whose packets are whole, as in the full file), and
`mlprof analyze` reads such a cut file, and one cut inside a packet (with a
warning and exit status 1, as for any damaged trace), counting the spans the
cut kept.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

from perfetto_decode import decode_text, resolve, packet_offsets, protoc_decode

failures = []
WAIT_S = 600  # for the whole run: generous, never a measure


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def spans_json(data):
    """The finished "op" spans of a gzip JSON trace as [(thread, i)], whether each "whole run" span
    is unfinished, and its otherData."""
    doc = json.loads(gzip.decompress(data))
    ops, whole, other = [], [], doc.get("otherData", {})
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") == "op" and not e.get("args", {}).get("unfinished"):
            ops.append((e["args"]["thread"], e["args"]["i"]))
        elif e.get("ph") == "X" and e.get("name") == "whole run":
            whole.append(bool(e.get("args", {}).get("unfinished")))
    return ops, whole, other


def spans_protobuf(protoc, proto, data):
    text, err = protoc_decode(protoc, proto, data)
    if text is None:
        raise AssertionError(f"protoc cannot decode it: {err}")
    res = resolve(decode_text(text))
    ops, whole, other = [], [], None
    for e in res.events:
        if e["type"] == "span" and e["name"] == "op" and not e["unfinished"]:
            ops.append((e["args"]["thread"], e["args"]["i"]))
        elif e["type"] == "span" and e["name"] == "whole run":
            whole.append(e["unfinished"])
        elif e["type"] == "other_data":
            other = e["args"]
    return ops, whole, other or {}


def file_id(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def run_continuous(exe, out, protoc, proto, mlprof, name, compress=None):
    d = os.path.join(out, name.replace(".", "_") + (f"_compress_{compress}" if compress else ""))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, name)
    gz = name.endswith(".gz") or compress == "gzip"

    def decode(data):
        if gz:
            assert data[:2] == b"\x1f\x8b", f"not gzip: it starts with {data[:8]!r}"
            return spans_json(data)
        return spans_protobuf(protoc, proto, data)
    log = open(os.path.join(d, "program.log"), "w+")
    env = dict(os.environ)
    if compress:
        env["MLPROF_COMPRESS"] = compress  # the key, read from the environment, the name left as it is
    p = subprocess.Popen([exe, path], stdout=log, stderr=subprocess.STDOUT, env=env)
    last_id, last_ops, copies, acked, held = None, set(), 0, -1, None
    whole_ended, open_copies, acked_copies = False, 0, []
    deadline = time.monotonic() + WAIT_S
    while p.poll() is None:
        if time.monotonic() > deadline:
            p.kill()
            check(False, f"{name}: the program did not finish in {WAIT_S} s")
            break
        fid = file_id(path)
        if fid is not None and fid != last_id:
            try:
                f = open(path, "rb")
            except FileNotFoundError:  # between a rename and our open
                continue
            # the file opened is the version read: a rename between the stat
            # and the open would make the next one look like this one
            st = os.fstat(f.fileno())
            fid = (st.st_ino, st.st_size, st.st_mtime_ns)
            if fid == last_id:
                f.close()
                continue
            data = f.read()
            last_id = fid
            copies += 1
            if held:
                # the version read before, still open: replaced by a rename, never written over
                old_f, old_data = held
                old_f.seek(0)
                check(old_f.read() == old_data and os.fstat(old_f.fileno()).st_nlink == 0,
                      f"{name}: the version read before copy {copies} was written over or is still linked")
                old_f.close()
            held = (f, data)
            try:
                ops, whole, _ = decode(data)
            except (AssertionError, OSError, EOFError, ValueError) as e:
                keep = os.path.join(d, f"copy{copies}.bad")
                with open(keep, "wb") as f:
                    f.write(data)
                check(False, f"{name}: copy {copies} ({len(data)} bytes, kept as {keep}) does not decode: {e}")
                continue
            now = set(ops)
            check(len(now) == len(ops), f"{name}: copy {copies} holds a span twice")
            # open until the phases are over, then ended once and for all
            check(whole == [True] or whole == [False], f"{name}: copy {copies}: the span \"whole run\" is "
                  f"{whole} (unfinished or not), not there once")
            check(not (whole_ended and whole == [True]), f"{name}: copy {copies}: \"whole run\" unfinished again")
            whole_ended = whole_ended or whole == [False]
            open_copies += whole == [True] and not whole_ended
            if not check(last_ops <= now, f"{name}: copy {copies} holds {len(now)} spans and lacks "
                         f"{len(last_ops - now)} of the {len(last_ops)} of the copy before"):
                p.kill()
                break
            last_ops = now
        else:
            time.sleep(0.01)
        # the program's phase, and the spans it had recorded when it ended
        try:
            with open(path + ".ready") as f:
                phase, want = map(int, f.read().split())
        except (FileNotFoundError, ValueError):
            continue
        if phase > acked and len(last_ops) >= want:
            if not gz:  # for mlprof analyze, after the run
                with open(os.path.join(out, f"phase{phase}.pftrace"), "wb") as f:
                    f.write(held[1])
                acked_copies.append((os.path.join(out, f"phase{phase}.pftrace"), len(last_ops)))
            with open(f"{path}.ack.{phase}", "w") as f:
                f.write(f"copy {copies}: {len(last_ops)} spans\n")
            acked = phase
    p.wait()
    if held:
        held[0].close()
    log.seek(0)
    sys.stdout.write(log.read())
    log.close()
    check(p.returncode == 0, f"{name}: test_formats_continuous exited {p.returncode}")
    check(acked == 2, f"{name}: {acked + 1} phases acknowledged, 3 expected")
    check(copies >= 3, f"{name}: only {copies} versions of the file were seen")
    check(open_copies >= 3, f"{name}: only {open_copies} versions show \"whole run\" open, 3 acknowledged it")
    try:
        with open(path + ".counts") as f:
            recorded, dropped = map(int, f.read().split())
    except (FileNotFoundError, ValueError) as e:
        check(False, f"{name}: no counts from the program: {e}")
        return None
    check(dropped == 0, f"{name}: the program says {dropped} events dropped")
    with open(path, "rb") as f:
        data = f.read()
    try:
        ops, whole, other = decode(data)
    except (AssertionError, OSError, EOFError, ValueError) as e:
        check(False, f"{name}: the final file does not decode: {e}")
        return None
    threads = 3
    expected = {(t, i) for t in range(threads) for i in range(recorded // threads)}
    check(len(ops) == recorded and set(ops) == expected,
          f"{name}: the final file holds {len(ops)} spans ({len(set(ops))} distinct), {recorded} recorded; "
          f"missing {sorted(expected - set(ops))[:5]}")
    check(last_ops <= set(ops), f"{name}: the final file lacks spans a copy held")
    check(whole == [False], f"{name}: the final file's \"whole run\" spans (unfinished or not): {whole}")
    check(other.get("dropped_events") == 0, f"{name}: otherData.dropped_events is {other.get('dropped_events')}")
    ours = {name, "program.log", name + ".ready", name + ".counts"} | {f"{name}.ack.{i}" for i in range(3)}
    left = sorted(set(os.listdir(d)) - ours)
    check(not left, f"{name}: files left beside the trace: {left}")
    for copy, held_ops in acked_copies:
        # a version of the continuous dump: the stream so far and a tail with "whole run" unfinished
        rc, count, err = analyze_ops(mlprof, copy, copy)
        check(rc == 0 and count == held_ops, f"{name}: mlprof analyze {copy} exited {rc} and counted {count} "
              f"op, the version holds {held_ops}: {err}")
    print(f"formats_continuous: {name}{' compress=' + compress if compress else ''}: {copies} versions read while recording, final {len(data)} bytes with "
          f"{len(ops)} spans")
    return path


def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def analyze_ops(mlprof, path, label):
    """mlprof analyze on path: (its status, the count of "op" in its table, stderr)."""
    r = subprocess.run([mlprof, "analyze", path], capture_output=True, text=True)
    count = None
    for line in r.stdout.splitlines():
        m = re.match(r"\s*op\s+(\d+)\s", line)
        if m:
            count = int(m.group(1))
    if count is None:
        print(f"{label}: mlprof analyze printed:\n{r.stdout}{r.stderr}", file=sys.stderr)
    return r.returncode, count, r.stderr


def check_cuts(protoc, proto, mlprof, path):
    with open(path, "rb") as f:
        data = f.read()
    text, err = protoc_decode(protoc, proto, data)
    if not check(text is not None, f"cuts: {path} does not decode: {err}"):
        return
    packets = decode_text(text)
    full = resolve(packets).events
    offsets = packet_offsets(data)
    rng = random.Random(1919)
    picks = set(rng.sample(range(1, len(offsets)), min(8, len(offsets) - 1)))
    # and in the tail (sequence 2): after its first packet, and all but the last packet (the footer's)
    tail = [i for i, p in enumerate(packets) if p.get("trusted_packet_sequence_id") == [2]]
    check(tail and tail[-1] == len(packets) - 1, "cuts: the file does not end with a tail (sequence 2)")
    if tail:
        picks |= {tail[0] + 1, len(offsets) - 1}
    picks = sorted(picks)
    d = os.path.dirname(path)
    for k in picks:
        cut = data[:offsets[k - 1]]
        label = f"cut after packet {k} of {len(offsets)} ({len(cut)} bytes)"
        text, err = protoc_decode(protoc, proto, cut)
        if not check(text is not None, f"{label}: does not decode: {err}"):
            continue
        try:
            got = resolve(decode_text(text), prefix=True).events
        except AssertionError as e:
            check(False, f"{label}: {e}")
            continue
        want = [e for e in full if e["last_packet"] < k]
        check(len(got) == len(want) and all(same(g, w) for g, w in zip(got, want)),
              f"{label}: {len(got)} events decoded, the full file's first {k} packets hold {len(want)}")
        ops = sum(1 for e in got if e["type"] == "span" and e["name"] == "op")
        cut_path = os.path.join(d, f"cut{k}.pftrace")
        with open(cut_path, "wb") as f:
            f.write(cut)
        rc, count, _ = analyze_ops(mlprof, cut_path, label)
        check(rc == 0 and count == (ops or None),
              f"{label}: mlprof analyze exited {rc} and counted {count} op, the cut holds {ops}")
    # a cut inside a packet: the whole packets before it are read, with a warning
    k = picks[len(picks) // 2 - 1]
    lo, hi = offsets[k - 1], offsets[k]
    cut = data[:rng.randrange(lo + 1, hi)]
    label = f"cut inside packet {k + 1} ({lo}..{hi}) at byte {len(cut)}"
    ops = sum(1 for e in full if e["last_packet"] < k and e["type"] == "span" and e["name"] == "op")
    cut_path = os.path.join(d, "cut_inside.pftrace")
    with open(cut_path, "wb") as f:
        f.write(cut)
    rc, count, err = analyze_ops(mlprof, cut_path, label)
    # a damaged file: exit status 1, what was read before it still reported (README, mlprof analyze)
    check(rc == 1 and count == (ops or None),
          f"{label}: mlprof analyze exited {rc} (1 expected) and counted {count} op, the whole packets hold {ops}")
    check("warning" in err and "ends inside the packet" in err and "read up to the last whole packet" in err,
          f"{label}: mlprof analyze did not warn of the cut: {err!r}")
    print(f"formats_continuous: {len(picks)} cuts at packet boundaries ({len(picks) - 8} in the tail) and one "
          f"inside a packet checked")


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    exe, out, proto, mlprof = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("formats_continuous: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    os.makedirs(out, exist_ok=True)
    pf = run_continuous(exe, out, protoc, proto, mlprof, "run.pftrace")
    run_continuous(exe, out, protoc, proto, mlprof, "run.json.gz")
    run_continuous(exe, out, protoc, proto, mlprof, "run.json", compress="gzip")
    if pf:
        check_cuts(protoc, proto, mlprof, pf)
    if failures:
        print(f"formats_continuous: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("formats_continuous: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
