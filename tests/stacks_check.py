#!/usr/bin/env python3
"""stacks_check.py - the sampling key and mlprof flame (src/hw/stacks.c,
src/analyze/flame.c), from stacks_target.c's known CPU shares:
  - hot_a, hot_b, hot_c get 60/30/10% of the main thread's CPU time: their
    sample shares within 5 points (the samples are on CPU time, so a loaded
    machine changes their number, not their shares);
  - the recursion's stacks are complete: RECURSE_DEPTH frames of recurse;
  - --span span_b keeps the samples inside span_b: hot_b's;
  - a thread started and ended while sampling has samples of thread_fn;
  - the folded output parses, and so does the SVG (xml.etree), with its frames
    and script; lost samples are said in otherData.sampling;
  - mlprof run --sample: a program without mlprof (python) gets samples in its
    parts, and the merged trace has them all;
    a rate out of range is refused naming the key.
Skipped (77), saying why, where perf_event refuses the sampling events.
  - built without frame pointers: the leaf functions' shares are still
    right (the sampled address is exact; the callers are not promised).
Usage: stacks_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP]
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

RECURSE_DEPTH = 100


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def folded(mlprof, trace, *extra):
    r = subprocess.run([mlprof, "flame", trace, "--folded", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        fail("mlprof flame %s: status %d: %s" % (" ".join(extra), r.returncode, r.stderr))
    stacks = []
    for line in r.stdout.splitlines():
        m = re.match(r"^(.+) (\d+)$", line)
        if not m:
            fail("folded line does not parse: %r" % line)
        stacks.append((m.group(1).split(";"), int(m.group(2))))
    return stacks


def share(stacks, name):
    return sum(n for frames, n in stacks if name in frames)


def main():
    mlprof, target, out = sys.argv[1], sys.argv[2], sys.argv[3]
    preload_ok = len(sys.argv) > 4 and sys.argv[4] == "preload-ok"
    nofp = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(out, exist_ok=True)
    trace = os.path.join(out, "stacks.json")
    r = subprocess.run([target, trace, "1000", "1000"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("stacks_target: status %d: %s" % (r.returncode, r.stderr))
    with open(trace) as f:
        doc = json.load(f)
    info = doc["otherData"].get("sampling")
    if info is None:
        fail("otherData.sampling is missing")
    if info.get("refused"):
        if "sampling (call stacks)" not in r.stderr:
            fail("the refusal was not said on stderr: %r" % r.stderr)
        print("SKIP: perf_event refuses the sampling events here: %s" % info["refused"])
        sys.exit(77)
    for key in ("samples", "lost_kernel", "lost_memory", "truncated_stacks", "perf_event_paranoid", "hz"):
        if key not in info:
            fail("otherData.sampling has no %s: %r" % (key, info))
    if info["hz"] != 1000 or info["samples"] != len(doc["samples"]):
        fail("otherData.sampling disagrees with the samples: %r, %d samples" % (info, len(doc["samples"])))
    # every sample names a frame the trace defines
    frames = doc["stackFrames"]
    for s in doc["samples"]:
        if s["sf"] not in frames or "ts" not in s or "tid" not in s:
            fail("a sample without its frame, time or thread: %r" % s)

    stacks = folded(mlprof, trace)
    a, b, c = share(stacks, "hot_a"), share(stacks, "hot_b"), share(stacks, "hot_c")
    total = a + b + c
    print("samples: %d in all; hot_a %d, hot_b %d, hot_c %d" % (sum(n for _, n in stacks), a, b, c))
    if total < 300:
        fail("too few samples in the hot functions: %d (1 s of CPU at 1 kHz)" % total)
    for name, got, want in (("hot_a", a, 60), ("hot_b", b, 30), ("hot_c", c, 10)):
        pct = 100.0 * got / total
        print("  %s: %.1f%% (want %d%%)" % (name, pct, want))
        if abs(pct - want) > 5:
            fail("%s has %.1f%% of the samples, not %d%% within 5 points" % (name, pct, want))

    deepest = max((f.count("recurse") for f, _ in stacks), default=0)
    print("deepest recursion seen: %d frames of recurse" % deepest)
    if deepest != RECURSE_DEPTH:
        fail("the recursion's stacks have %d frames of recurse, not %d" % (deepest, RECURSE_DEPTH))

    inside = folded(mlprof, trace, "--span", "span_b")
    n_in = sum(n for _, n in inside)
    b_in = share(inside, "hot_b")
    print("inside span_b: %d samples, %d in hot_b" % (n_in, b_in))
    if n_in == 0 or b_in < 0.95 * n_in or b_in < 0.9 * b:
        fail("the samples inside span_b are not hot_b's: %d of %d (hot_b has %d in all)" % (b_in, n_in, b))
    r = subprocess.run([mlprof, "flame", trace, "--folded", "--span", "no_such_span"], capture_output=True, text=True)
    if r.returncode != 1 or "no_such_span" not in r.stderr:
        fail("a span with no samples: status %d, %r" % (r.returncode, r.stderr))

    pid = doc["otherData"]["pid"]
    thread_samples = [s for s in doc["samples"] if s["tid"] != pid]
    names = set()
    for s in thread_samples:
        k = s["sf"]
        while k:
            names.add(frames[k]["name"])
            k = frames[k].get("parent")
    print("samples of other threads: %d" % len(thread_samples))
    if not thread_samples or "thread_fn" not in names:
        fail("the thread started while sampling has no samples of thread_fn")

    svg = os.path.join(out, "flame.svg")
    r = subprocess.run([mlprof, "flame", trace, "-o", svg], capture_output=True, text=True)
    if r.returncode != 0:
        fail("mlprof flame -o: %s" % r.stderr)
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in root.iter(ns + "title")]
    if not any(t.startswith("hot_a (") and "%)" in t for t in titles):
        fail("the SVG has no frame hot_a with its samples and share: %r" % titles[:10])
    if root.find(ns + "script") is None:
        fail("the SVG has no script (zoom)")

    r = subprocess.run([mlprof, "run", "--sample", "50000", "--", "true"], capture_output=True, text=True)
    if r.returncode != 2 or "sampling" not in r.stderr:
        fail("mlprof run --sample 50000: status %d, %r" % (r.returncode, r.stderr))
    if preload_ok:
        merged = os.path.join(out, "run.json")
        loop = "s = 0\nfor i in range(3000000): s += i\n"
        r = subprocess.run([mlprof, "run", "-q", "--sample", "2000", "-o", merged, "--", sys.executable, "-c", loop],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("mlprof run --sample: status %d: %s" % (r.returncode, r.stderr))
        parts = os.path.join(merged + ".parts")
        got = 0
        for name in os.listdir(parts):
            with open(os.path.join(parts, name)) as f:
                got += len(json.load(f).get("samples", []))
        print("mlprof run --sample 2000 -- python: %d samples in its parts" % got)
        if got == 0:
            fail("mlprof run --sample: no samples in %s" % parts)
        merged_stacks = folded(mlprof, merged)  # the merge keeps them
        if sum(n for _, n in merged_stacks) != got:
            fail("the merged trace has %d samples, its parts %d" % (sum(n for _, n in merged_stacks), got))
    if nofp:
        trace = os.path.join(out, "stacks_nofp.json")
        r = subprocess.run([nofp, trace, "1000", "1000"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("stacks_target_nofp: status %d: %s" % (r.returncode, r.stderr))
        leaves = {}
        for frames_, n in folded(mlprof, trace):
            leaves[frames_[-1]] = leaves.get(frames_[-1], 0) + n
        a, b, c = leaves.get("hot_a", 0), leaves.get("hot_b", 0), leaves.get("hot_c", 0)
        total = a + b + c
        if total < 300:
            fail("without frame pointers: too few leaf samples in the hot functions: %d" % total)
        for name, got, want in (("hot_a", a, 60), ("hot_b", b, 30), ("hot_c", c, 10)):
            pct = 100.0 * got / total
            print("  without frame pointers, leaf %s: %.1f%% (want %d%%)" % (name, pct, want))
            if abs(pct - want) > 5:
                fail("without frame pointers, leaf %s has %.1f%%, not %d%% within 5 points" % (name, pct, want))
    print("PASS")


if __name__ == "__main__":
    main()
