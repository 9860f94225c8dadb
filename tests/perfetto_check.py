#!/usr/bin/env python3
"""Perfetto's protobuf trace, checked with protoc.

usage: perfetto_check.py TEST_PERFETTO OUT_DIR PROTO

Runs test_perfetto (which feeds the sink src/export/perfetto.c and writes
dumpN.pftrace beside dumpN.expect.jsonl, the events it fed), decodes each
trace with `protoc --decode=perfetto.protos.Trace PROTO`, and checks it
event by event: names, categories and argument names resolved through the
interning of their sequence, tracks through their descriptors, timestamps,
arguments with their types. Then every prefix of each trace that ends on a
packet boundary must decode to the events whose packets it holds, and a cut
inside a packet must be refused by protoc.

Exits 77 (ctest's SKIP_RETURN_CODE) when protoc is not installed.
"""
import json
import os
import random
import shutil
import subprocess
import sys

from perfetto_decode import decode_text, resolve, packet_offsets, protoc_decode

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def expected_events(path):
    """The events test_perfetto fed, as perfetto_decode.resolve shows them."""
    out, tracks = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            e = json.loads(line)
            if e["type"] == "track":
                tracks.append(e)
                continue
            d = {"type": e["type"], "seq": e["seq"], "ts": e["ts"]}
            if e["type"] in ("span", "frame"):
                d.update(name=e["name"], cat=e["cat"], end=e["end"], pid=e["pid"], tid=e["tid"],
                         unfinished=e["unfinished"], args=e["args"])
            elif e["type"] == "instant":
                thread = e["scope"] == 2
                d.update(name=e["name"], cat=e["cat"], pid=e["pid"], tid=e["tid"] if thread else None,
                         scope="thread" if thread else "process", args=e["args"])
            elif e["type"] == "counter":
                d.update(name=e["name"], cat=e["cat"], pid=e["pid"], int=e["int"], value=e["value"])
            elif e["type"] in ("flow_start", "flow_end"):
                d.update(name=e["name"], cat=e["cat"], pid=e["pid"], tid=e["tid"], id=e["id"])
            elif e["type"] == "other_data":
                d.update(name="otherData", cat="mlprof", pid=e["pid"], process_name=e["process_name"],
                         args=e["args"])
            out.append(d)
    return out, tracks


def same(a, b):
    """Equal, floats compared exactly, int and float alike when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def compare_events(label, got, want):
    check(len(got) == len(want), f"{label}: {len(got)} events decoded, {len(want)} fed")
    for i, (g, w) in enumerate(zip(got, want)):
        g = {k: v for k, v in g.items() if k != "last_packet"}
        if not check(same(g, w), f"{label}: event {i}:\n  decoded {g}\n  fed     {w}"):
            return


def check_tracks(label, res, tracks):
    """Each track said by name has it in its last descriptor (in the sequence it was said in)."""
    final = {}
    for t in tracks:
        final[(t["kind"], t["pid"], t["tid"])] = t
    for (kind, pid, tid), t in final.items():
        d = res.track_by_ids(kind, pid, tid)
        if not check(d is not None, f"{label}: no descriptor for track {t}"):
            continue
        if kind == 0:
            check(d.get("process_name") == t["name"], f"{label}: process {pid} named {d.get('process_name')!r}, "
                  f"not {t['name']!r}")
        else:
            check(d.get("thread_name") == t["name"], f"{label}: thread {tid} named {d.get('thread_name')!r}, "
                  f"not {t['name']!r}")
            check(d.get("rank") == t["sort_index"], f"{label}: thread {tid} ranked {d.get('rank')}, "
                  f"not {t['sort_index']}")
        if kind == 2:
            check(d.get("name") == t["name"], f"{label}: GPU track {tid} has track name {d.get('name')!r}")
    for t in tracks:
        said = res.named_in_seq.get(t["seq"], set())
        check((t["kind"], t["pid"], t["tid"], t["name"]) in said,
              f"{label}: track {t} was not described in sequence {t['seq']}")


def check_prefixes(label, protoc, proto, data, full_events, npackets):
    offsets = packet_offsets(data)
    check(len(offsets) == npackets, f"{label}: {len(offsets)} packets found in the bytes, protoc shows {npackets}")
    for k, end in enumerate(offsets, 1):
        text, err = protoc_decode(protoc, proto, data[:end])
        if not check(text is not None, f"{label}: the first {k} packets ({end} bytes) do not decode: {err}"):
            continue
        packets = decode_text(text)
        check(len(packets) == k, f"{label}: the first {k} packets decode to {len(packets)}")
        try:
            res = resolve(packets, prefix=True)
        except AssertionError as e:
            check(False, f"{label}: the first {k} packets: {e}")
            continue
        want = [e for e in full_events if e["last_packet"] < k]
        got = res.events
        if not check(len(got) == len(want), f"{label}: the first {k} packets hold {len(got)} whole events, "
                     f"expected {len(want)}"):
            continue
        for g, w in zip(got, want):
            if not check(same(g, w), f"{label}: the first {k} packets: {g} instead of {w}"):
                break
    # cut inside a packet: protoc must refuse it
    rng = random.Random(19)
    starts = [0] + offsets[:-1]
    picks = rng.sample(range(len(offsets)), min(12, len(offsets)))
    for i in picks:
        lo, hi = starts[i], offsets[i]
        cut = rng.randrange(lo + 1, hi)
        text, _ = protoc_decode(protoc, proto, data[:cut])
        check(text is None, f"{label}: a cut at byte {cut}, inside packet {i + 1} ({lo}..{hi}), decoded")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    exe, out, proto = sys.argv[1:]
    protoc = shutil.which("protoc")
    if not protoc:
        print("perfetto: skipped: protoc is not installed (scripts/install-deps.sh build installs it)")
        return 77
    os.makedirs(out, exist_ok=True)
    r = subprocess.run([exe, out], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    check(r.returncode == 0, f"test_perfetto exited {r.returncode}")
    for n in (1, 2, 3):
        label = f"dump{n}"
        path = os.path.join(out, f"dump{n}.pftrace")
        with open(path, "rb") as f:
            data = f.read()
        text, err = protoc_decode(protoc, proto, data)
        if not check(text is not None, f"{label}: protoc cannot decode it: {err}"):
            continue
        with open(path + ".txt", "w", encoding="utf-8") as f:
            f.write(text)
        packets = decode_text(text)
        try:
            res = resolve(packets)
        except AssertionError as e:
            check(False, f"{label}: {e}")
            continue
        want, tracks = expected_events(os.path.join(out, f"dump{n}.expect.jsonl"))
        compare_events(label, res.events, want)
        check_tracks(label, res, tracks)
        check_prefixes(label, protoc, proto, data, res.events, len(packets))
        print(f"{label}: {len(packets)} packets, {len(res.events)} events, {len(data)} bytes checked")
    if failures:
        print(f"perfetto: {len(failures)} checks failed", file=sys.stderr)
        return 1
    print("perfetto: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
