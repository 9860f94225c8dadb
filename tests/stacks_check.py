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
  - a bad sampling_stack or sampling_unwind is refused naming the key;
  - sampling_unwind=fp (the kernel's frame-pointer chains) still gives the
    shares and the whole recursion;
Skipped (77), saying why, where perf_event refuses the sampling events.
  - built without frame pointers (STACKS_TARGET_NOFP), DWARF unwinding (the
    default where libdw loads; each check says SKIP with the reason where it
    does not): the shares within 5 points at 1 kHz over about 2 s, each hot
    function's whole stack (_start ... main, its phase function, itself),
    the recursion complete to RECURSE_DEPTH (cut short, and counted, with
    sampling_stack=1K), and hot_a's file:line (this
    file's stacks_target.c, the line of its definition; phase_a's: its call
    of hot_a); the unwind's cost per sample and what the kernel lost at 1 and
    10 kHz are printed. Without libdw (hidden by a mount namespace where the
    test runs as root, or really missing): the kernel's chains, said on
    stderr and in otherData, and the leaf functions' shares alone (the
    sampled address is exact; the callers are not promised).
Usage: stacks_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP]
"""
import json
import os
import re
import shutil
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


def run_target(target, trace, hz, ms, *keys):
    r = subprocess.run([target, trace, str(hz), str(ms), *keys], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("%s %s: status %d: %s" % (os.path.basename(target), " ".join(keys), r.returncode, r.stderr))
    with open(trace) as f:
        return json.load(f)


def check_shares(label, stacks, in_stack=True):
    """hot_a/b/c's shares (by frames in the stack, or by leaf) within 5 points of 60/30/10."""
    got = {}
    for frames_, n in stacks:
        for name in ("hot_a", "hot_b", "hot_c"):
            if (name in frames_) if in_stack else frames_[-1] == name:
                got[name] = got.get(name, 0) + n
    total = sum(got.values())
    if total < 300:
        fail("%s: too few samples in the hot functions: %d" % (label, total))
    for name, want in (("hot_a", 60), ("hot_b", 30), ("hot_c", 10)):
        pct = 100.0 * got.get(name, 0) / total
        print("  %s, %s: %.1f%% (want %d%%)" % (label, name, pct, want))
        if abs(pct - want) > 5:
            fail("%s: %s has %.1f%% of the samples, not %d%% within 5 points" % (label, name, pct, want))


def source_line(text):
    """The line number in stacks_target.c of the line that holds text."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks_target.c")
    with open(src) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    fail("stacks_target.c has no line with %r" % text)


def check_keys_refused(target, out):
    """A bad sampling_stack or sampling_unwind: refused, naming the key (no perf_event needed)."""
    for kv, key in (("sampling_stack=100", "sampling_stack"), ("sampling_stack=1M", "sampling_stack"),
                    ("sampling_stack=lots", "sampling_stack"), ("sampling_unwind=frames", "sampling_unwind"),
                    ("sampling_unwind=", "sampling_unwind")):
        r = subprocess.run([target, os.path.join(out, "refused.json"), "1000", "10", kv], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 1 or ('"%s"' % key) not in r.stderr:
            fail("%s: status %d, %r (want 1 and an error naming %s)" % (kv, r.returncode, r.stderr, key))
    print("bad sampling_stack and sampling_unwind values are refused naming the key")


def check_dwarf(mlprof, nofp, out):
    """Without frame pointers, by DWARF CFI: shares, whole stacks, the recursion, file:line, cost, loss."""
    trace = os.path.join(out, "stacks_nofp.json")
    doc = run_target(nofp, trace, 1000, 1600)
    info = doc["otherData"]["sampling"]
    if not info.get("unwind", "").startswith("dwarf"):
        fail("stacks_target_nofp did not unwind by DWARF: %r" % info)
    stacks = folded(mlprof, trace)
    check_shares("without frame pointers (dwarf)", stacks)
    # whole stacks: from _start down to main, the phase function and the hot one
    for hot, phase in (("hot_a", "phase_a"), ("hot_b", "phase_b"), ("hot_c", "phase_c")):
        good = bad = 0
        example = None
        for frames_, n in stacks:
            if hot not in frames_:
                continue
            k = frames_.index(hot)
            if frames_[0] == "_start" and k >= 2 and frames_[k - 2:k + 1] == ["main", phase, hot]:
                good += n
            else:
                bad += n
                example = example or frames_
        print("  without frame pointers, %s: %d of %d samples under _start ... main;%s;%s" %
              (hot, good, good + bad, phase, hot))
        if good == 0 or bad > 0.01 * (good + bad):
            fail("without frame pointers, %s's callers are wrong in %d of %d samples, such as %s" %
                 (hot, bad, good + bad, ";".join(example or [])))
    deep = [f for f, _ in stacks if "recurse" in f]
    deepest = max((f.count("recurse") for f in deep), default=0)
    print("  without frame pointers, deepest recursion: %d frames of recurse" % deepest)
    if deepest != RECURSE_DEPTH:
        fail("without frame pointers, the recursion's stacks have %d frames of recurse, not %d"
             % (deepest, RECURSE_DEPTH))
    whole = [f for f in deep if f.count("recurse") == RECURSE_DEPTH and f[0] == "_start"
             and f[f.index("recurse") - 1] == "main"]
    if not whole:
        fail("without frame pointers, no recursion stack goes from _start through main: %r" % deep[:1])
    # file:line: hot_a's frames at its definition's line, phase_a's at its call of hot_a
    frames = doc["stackFrames"]
    for name, text in (("hot_a", "void hot_a(uint64_t ns) {"), ("phase_a", "    hot_a(ns);")):
        want = source_line(text)
        lines = {}
        for fr in frames.values():
            if fr["name"] == name:
                if not fr.get("file", "").endswith("stacks_target.c"):
                    fail("the frame %s has no file stacks_target.c: %r" % (name, fr))
                lines[fr.get("line")] = lines.get(fr.get("line"), 0) + 1
        print("  file:line of %s: stacks_target.c:%s (want %d)" % (name, sorted(lines), want))
        if want not in lines or any(not isinstance(l, int) or abs(l - want) > 3 for l in lines):
            fail("%s's frames name lines %r of stacks_target.c, not %d" % (name, sorted(lines), want))
    by_line = folded(mlprof, trace, "--lines")
    if not any("hot_a (stacks_target.c:%d)" % source_line("void hot_a(uint64_t ns) {") in f for f, _ in by_line):
        fail("mlprof flame --lines does not name hot_a's line: %r" % by_line[:2])
    svg = os.path.join(out, "flame_nofp.svg")
    r = subprocess.run([mlprof, "flame", trace, "-o", svg], capture_output=True, text=True)
    if r.returncode != 0:
        fail("mlprof flame -o: %s" % r.stderr)
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in ET.parse(svg).getroot().iter(ns + "title")]
    if not any(t.startswith("hot_a (") and "%) stacks_target.c:" in t for t in titles):
        fail("the SVG's hover text of hot_a has no file:line: %r" % [t for t in titles if "hot_a" in t])
    # a copy too small for the recursion: its walks stop short, counted as off_copy
    small = run_target(nofp, os.path.join(out, "stacks_nofp_1k.json"), 1000, 200, "sampling_stack=1K")
    sinfo = small["otherData"]["sampling"]
    sdeep = max((f.count("recurse") for f, _ in folded(mlprof, os.path.join(out, "stacks_nofp_1k.json"))), default=0)
    print("  sampling_stack=1K: %d bytes copied, deepest recursion %d, walks %r"
          % (sinfo.get("stack_bytes"), sdeep, sinfo.get("unwind_stops")))
    if sinfo.get("stack_bytes") != 1024 or sdeep >= RECURSE_DEPTH or not sinfo["unwind_stops"]["off_copy"]:
        fail("sampling_stack=1K: the recursion's walks are not cut and counted: %r" % sinfo)
    stops = info.get("unwind_stops", {})
    print("DWARF unwind on the reader thread: %s ns/sample, %s frames/sample; walks %r"
          % (info.get("unwind_ns_per_sample"), info.get("unwind_frames_per_sample"), stops))
    print("lost at 1 kHz: %d kernel records lost, %d samples kept" % (info["lost_kernel"], info["samples"]))
    doc = run_target(nofp, os.path.join(out, "stacks_nofp_10k.json"), 10000, 1000)
    info = doc["otherData"]["sampling"]
    print("lost at 10 kHz: %d kernel records lost, %d samples kept; unwind %s ns/sample"
          % (info["lost_kernel"], info["samples"], info.get("unwind_ns_per_sample")))
    if info["samples"] != len(doc["samples"]) or not info["samples"]:
        fail("at 10 kHz: otherData.sampling disagrees with the samples: %r" % info)


def check_without_libdw(mlprof, nofp, out):
    """libdw made unloadable (a mount namespace hides it, as root): the kernel's frame-pointer chains,
    said on stderr and in otherData.sampling.unwind_fallback; the leaves' shares still right."""
    lib = os.path.realpath("/usr/lib/x86_64-linux-gnu/libdw.so.1")
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.exists(lib):
        print("SKIP: libdw's absence: needs root, unshare and %s to hide it" % lib)
        return
    trace = os.path.join(out, "stacks_nolibdw.json")
    r = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', lib, nofp, trace,
                        "1000", "600"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "mount" in r.stderr:
        print("SKIP: libdw's absence: cannot hide it here: %s" % r.stderr.strip())
        return
    if r.returncode != 0:
        fail("stacks_target_nofp without libdw: status %d: %s" % (r.returncode, r.stderr))
    with open(trace) as f:
        info = json.load(f)["otherData"]["sampling"]
    if not info["unwind"].startswith("fp") or "libdw" not in info.get("unwind_fallback", ""):
        fail("without libdw: otherData.sampling says %r" % info)
    if r.stderr.count("DWARF unwinding") != 1:
        fail("without libdw: not said once on stderr: %r" % r.stderr)
    print("without libdw: %s" % info["unwind_fallback"])
    check_shares("without libdw, by leaf", folded(mlprof, trace), in_stack=False)


def main():
    mlprof, target, out = sys.argv[1], sys.argv[2], sys.argv[3]
    preload_ok = len(sys.argv) > 4 and sys.argv[4] == "preload-ok"
    nofp = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(out, exist_ok=True)
    check_keys_refused(target, out)
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
    for key in ("samples", "lost_kernel", "lost_memory", "truncated_stacks", "perf_event_paranoid", "hz", "unwind"):
        if key not in info:
            fail("otherData.sampling has no %s: %r" % (key, info))
    if info["hz"] != 1000 or info["samples"] != len(doc["samples"]):
        fail("otherData.sampling disagrees with the samples: %r, %d samples" % (info, len(doc["samples"])))
    # every sample names a frame the trace defines
    frames = doc["stackFrames"]
    for s in doc["samples"]:
        if s["sf"] not in frames or "ts" not in s or "tid" not in s:
            fail("a sample without its frame, time or thread: %r" % s)

    dwarf = info["unwind"].startswith("dwarf")
    print("unwinding: %s%s" % (info["unwind"], "" if dwarf else " (%s)" % info.get("unwind_fallback", "asked for")))
    if not dwarf and "DWARF unwinding" not in r.stderr:
        fail("the DWARF unwinding's absence was not said on stderr: %r" % r.stderr)
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

    # the kernel's frame-pointer call chains, asked for
    doc = run_target(target, os.path.join(out, "stacks_fp.json"), 1000, 1000, "sampling_unwind=fp")
    if not doc["otherData"]["sampling"]["unwind"].startswith("fp"):
        fail("sampling_unwind=fp: otherData.sampling.unwind is %r" % doc["otherData"]["sampling"]["unwind"])
    stacks = folded(mlprof, os.path.join(out, "stacks_fp.json"))
    check_shares("sampling_unwind=fp", stacks)
    deepest = max((f.count("recurse") for f, _ in stacks), default=0)
    if deepest != RECURSE_DEPTH:
        fail("sampling_unwind=fp: the recursion's stacks have %d frames of recurse, not %d" % (deepest, RECURSE_DEPTH))

    if nofp and dwarf:
        check_dwarf(mlprof, nofp, out)
        check_without_libdw(mlprof, nofp, out)
    elif nofp:
        print("SKIP: the DWARF checks without frame pointers: %s" % info.get("unwind_fallback", "?"))
        doc = run_target(nofp, os.path.join(out, "stacks_nofp.json"), 1000, 1000)
        check_shares("without frame pointers, by leaf", folded(mlprof, os.path.join(out, "stacks_nofp.json")),
                     in_stack=False)
    print("PASS")


if __name__ == "__main__":
    main()
