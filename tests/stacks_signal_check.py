#!/usr/bin/env python3
"""stacks_signal_check.py - the timer-signal sampler (sampling_source=signal,
src/hw/sigsample.c) against stacks_check.py's expectations, from
stacks_target.c's known CPU shares:
  - hot_a, hot_b, hot_c get 60/30/10% of the main thread's CPU time: their
    sample shares within 5 points (the samples are on CPU time, so a loaded
    machine changes their number, not their shares);
  - the recursion's stacks are complete: RECURSE_DEPTH frames of recurse;
  - --span span_b keeps the samples inside span_b: hot_b's;
  - a thread started and ended while sampling has samples of thread_fn;
  - 100 ms spun while paused (hot_paused) are not sampled, but for what a
    drain period (4 ms) may let through;
  - the folded output parses, and so does the SVG (xml.etree), with its frames
    and script; lost samples are said in otherData.sampling;
  - mlprof run --sample: a program without mlprof (python) gets samples in its
    parts, and the merged trace has them all;
    a rate out of range is refused naming the key.
Skipped (77), saying why, where perf_event refuses the sampling events.
  - built without frame pointers: the leaf functions' shares are still
    right (the sampled address is exact; the callers are not promised).
With --source=signal the same expectations hold for the timer-signal
sampler (sampling_source=signal, src/hw/sigsample.c), never skipped, and:
  - with --no-perf=NO_PERF (perf_event_open refused by seccomp):
    sampling_source=perf says the refusal clearly, auto falls back to the
    signal sampler and says why once; with process_vm_readv refused too, the
    failed stack copies are counted and said, the leaves still sampled;
  - an unknown sampling_source is refused naming the key (library and
    mlprof run);
  - a program that handles the sampler's first choice of signal keeps its
    handler (another signal is used, and said); one that handles them all
    keeps them, and sampling is refused saying why;
  - a forked child that goes on recording samples itself (its own timers);
  - a bench line: the work the sampled threads did at 1 kHz and 10 kHz
    against unsampled, and the cost per sample that follows (printed only).
Usage: stacks_signal_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP]
       [--source=signal] [--no-perf=NO_PERF]
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


def spin_blocks(stdout):
    m = re.search(r"stacks_target: (\d+) spin blocks; process CPU ([\d.]+) s", stdout)
    if not m:
        fail("stacks_target did not say its work: %r" % stdout)
    return int(m.group(1)), float(m.group(2))


def signal_checks(mlprof, target, out, no_perf):
    """What only the timer-signal sampler has: its choice of signal, the
    fallback from a refused perf_event, the key's errors, its cost."""
    r = subprocess.run([target, os.path.join(out, "bogus.json"), "1000", "10", "sampling_source=bogus"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 1 or "sampling_source" not in r.stderr or "bogus" not in r.stderr:
        fail("sampling_source=bogus: status %d, %r" % (r.returncode, r.stderr))
    r = subprocess.run([mlprof, "run", "--sampling_source", "bogus", "--", "true"], capture_output=True, text=True)
    if r.returncode != 2 or "sampling_source" not in r.stderr:
        fail("mlprof run --sampling_source bogus: status %d, %r" % (r.returncode, r.stderr))
    print("an unknown sampling_source is refused naming the key")

    for hold in ("first", "all"):
        trace = os.path.join(out, "hold_%s.json" % hold)
        env = dict(os.environ, STACKS_TARGET_HOLD=hold)
        r = subprocess.run([target, trace, "1000", "200", "sampling_source=signal"], capture_output=True, text=True, timeout=300,
                           env=env)
        if r.returncode != 0:
            fail("a program with its own handler (%s): status %d (3: its handler was taken): %s" %
                 (hold, r.returncode, r.stderr))
        with open(trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        if hold == "first":
            if info.get("refused") or not info.get("samples") or not info.get("signal_note"):
                fail("with SIGRTMAX-2 taken: no samples on another signal, or not said: %r" % info)
            print("SIGRTMAX-2 held by the program: sampled on %s, %d samples; %s" %
                  (info["signal_name"], info["samples"], info["signal_note"]))
        else:
            if not info.get("refused") or "handler" not in info["refused"] or "sampling (call stacks)" not in r.stderr:
                fail("with every real-time signal taken: not refused clearly: %r, %r" % (info, r.stderr))
            print("every real-time signal held by the program: refused: %s" % info["refused"])

    trace = os.path.join(out, "fork.json")
    r = subprocess.run([target, trace, "1000", "100", "fork", "sampling_source=signal"], capture_output=True,
                       text=True, timeout=300)
    m = re.search(r"^child (\d+)$", r.stdout, re.M)
    if "starting new threads after multi-threaded fork is not supported" in r.stderr:
        print("the forked child is not checked: TSan does not let it start mlprof's reader thread")
    elif r.returncode != 0 or not m:
        fail("a forking program: status %d, %r, %r" % (r.returncode, r.stdout, r.stderr))
    else:
        child_trace = os.path.join(out, "fork.%s.json" % m.group(1))
        with open(child_trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        in_child = share(folded(mlprof, child_trace), "child_fn")
        in_parent = share(folded(mlprof, trace), "child_fn")
        print("forked child: %d samples (weights) of child_fn in its trace, %d in its parent's; source %s" %
              (in_child, in_parent, info.get("source")))
        if info.get("source") != "signal" or in_child < 20 or in_parent:
            fail("the forked child's samples: %d in its trace (%r), %d in its parent's" % (in_child, info, in_parent))

    if no_perf:
        trace = os.path.join(out, "no_perf_perf.json")
        r = subprocess.run([no_perf, target, trace, "1000", "100", "sampling_source=perf"], capture_output=True, text=True,
                           timeout=300)
        if r.returncode == 77:
            print("no seccomp here (%s): the refused-perf_event cases are not run" % r.stderr.strip())
            return
        with open(trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        if r.returncode != 0 or not info.get("refused") or "sampling (call stacks) cannot be measured" not in r.stderr:
            fail("sampling_source=perf where perf_event is refused: status %d, %r, %r" % (r.returncode, info, r.stderr))
        print("sampling_source=perf, perf_event refused: %s" % info["refused"])
        trace = os.path.join(out, "no_perf_auto.json")
        r = subprocess.run([no_perf, target, trace, "1000", "200"], capture_output=True, text=True, timeout=300)
        with open(trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        said = [l for l in r.stderr.splitlines() if "perf_event is refused" in l]
        if (r.returncode != 0 or info.get("source") != "signal" or not info.get("samples") or
                not info.get("perf_refused") or len(said) != 1 or "timer signal" not in said[0]):
            fail("sampling_source=auto where perf_event is refused: status %d, %r, %r" % (r.returncode, info, r.stderr))
        print("sampling_source=auto, perf_event refused: %d samples by the timer signal; said: %s" %
              (info["samples"], said[0]))
        # where process_vm_readv is refused too, the stacks are their leaves, and that is said
        trace = os.path.join(out, "no_readv.json")
        r = subprocess.run([no_perf, "--no-vm-readv", target, trace, "1000", "200", "sampling_source=signal"], capture_output=True,
                           text=True, timeout=300)
        with open(trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        if (r.returncode != 0 or not info.get("stack_copy_failed") or "stack copies failed" not in r.stderr or
                share(folded(mlprof, trace), "hot_a") == 0):
            fail("process_vm_readv refused: status %d, %r, %r" % (r.returncode, info, r.stderr))
        print("process_vm_readv refused: %d stack copies failed (said), %d samples of their leaves" %
              (info["stack_copy_failed"], info["samples"]))

    # the cost: the sampled threads' handlers run on their CPU time, so the
    # fixed CPU time of the spins does less work (blocks) when sampled
    runs = {}
    for hz in ("0", "1000", "10000"):
        trace = os.path.join(out, "bench_%s.json" % hz)
        r = subprocess.run([target, trace, hz, "500", "sampling_source=signal"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("stacks_target at %s Hz: %s" % (hz, r.stderr))
        blocks, cpu = spin_blocks(r.stdout)
        with open(trace) as f:
            info = json.load(f)["otherData"].get("sampling") or {}
        runs[hz] = (blocks, cpu, info.get("signals_taken", 0), info.get("weight", 0),
                    info.get("handler_ns_per_sample", 0), info.get("handler_ns_min", 0))
    base = runs["0"][0]
    spun_ns = (500 + 150 + 200) * 1e6  # the spins' CPU time: hot functions, recursion, thread
    for hz in ("1000", "10000"):
        blocks, cpu, taken, weight, handler_ns, handler_min = runs[hz]
        print("bench: signal sampler at %s Hz over %.2f s of CPU: %d signals (weight %d), %d ns in the handler per "
              "sample (%d at least; %.3f%% of the sampled threads' CPU); their work %.3f of unsampled; process CPU "
              "%.3f s vs %.3f s unsampled (reader thread included; load average %s)" %
              (hz, spun_ns / 1e9, taken, weight, handler_ns, handler_min, 100.0 * taken * handler_ns / spun_ns,
               blocks / base,
               cpu, runs["0"][1], " ".join(open("/proc/loadavg").read().split()[:3])))


def draws(mlprof, exe, out, name, info, stacks, src, ms):
    """The signal sampler's stacks over enough draws: runs exe again while
    the signals kept are fewer than 1000 (as many as perf_event's 1 s at
    1 kHz: a standard error of 1.5 points on a share of 30%), at most 6
    runs in all. How many the tick lets through depends on the load, not
    on the sampler; the shares do not."""
    if not src:
        return stacks
    got, runs = info.get("signals_kept", 0), 1
    while got < 1000 and runs < 6:
        trace = os.path.join(out, "%s_more%d.json" % (name, runs))
        r = subprocess.run([exe, trace, "1000", ms, *src], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("%s (run %d): status %d: %s" % (exe, runs + 1, r.returncode, r.stderr))
        with open(trace) as f:
            got += json.load(f)["otherData"]["sampling"].get("signals_kept", 0)
        stacks = stacks + folded(mlprof, trace)
        runs += 1
    print("%s: %d signals (draws) over %d runs" % (name, got, runs))
    return stacks


def main():
    source = None
    no_perf = None
    args = []
    for a in sys.argv[1:]:
        if a.startswith("--source="):
            source = a.split("=", 1)[1]
        elif a.startswith("--no-perf="):
            no_perf = a.split("=", 1)[1]
        else:
            args.append(a)
    sys.argv[1:] = args
    src = ["sampling_source=" + source] if source else []
    mlprof, target, out = sys.argv[1], sys.argv[2], sys.argv[3]
    preload_ok = len(sys.argv) > 4 and sys.argv[4] == "preload-ok"
    nofp = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(out, exist_ok=True)
    trace = os.path.join(out, "stacks.json")
    # 2 s for the signal sampler: the kernel checks CPU-time timers at its
    # tick (often 250 Hz), so its shares rest on fewer draws (signals), and
    # fewer still under contention; see draws()
    ms = "2000" if source == "signal" else "1000"
    r = subprocess.run([target, trace, "1000", ms, *src], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("stacks_target: status %d: %s" % (r.returncode, r.stderr))
    with open(trace) as f:
        doc = json.load(f)
    info = doc["otherData"].get("sampling")
    if info is None:
        fail("otherData.sampling is missing")
    if info.get("refused") and source == "signal":
        fail("the timer-signal sampler was refused: %s" % info["refused"])
    if source and info.get("source") != source:
        fail("otherData.sampling.source is %r, not %r" % (info.get("source"), source))
    if info.get("refused"):
        if "sampling (call stacks)" not in r.stderr:
            fail("the refusal was not said on stderr: %r" % r.stderr)
        print("SKIP: perf_event refuses the sampling events here: %s" % info["refused"])
        sys.exit(77)
    for key in ("samples", "lost_kernel", "lost_memory", "truncated_stacks", "perf_event_paranoid", "hz"):
        if key not in info:
            fail("otherData.sampling has no %s: %r" % (key, info))
    lost = {k: info.get(k) for k in ("lost_ring", "cut_by_copy", "stack_copy_failed", "threads_without_timer")
            if info.get(k)}
    if lost and "sampling (timer signal)" not in r.stderr:
        fail("losses not said on stderr: %r, %r" % (lost, r.stderr))
    if info["hz"] != 1000 or info["samples"] != len(doc["samples"]):
        fail("otherData.sampling disagrees with the samples: %r, %d samples" % (info, len(doc["samples"])))
    # every sample names a frame the trace defines
    frames = doc["stackFrames"]
    for s in doc["samples"]:
        if s["sf"] not in frames or "ts" not in s or "tid" not in s:
            fail("a sample without its frame, time or thread: %r" % s)

    first = folded(mlprof, trace)
    stacks = draws(mlprof, target, out, "stacks", info, first, src, ms)
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

    paused = share(stacks, "hot_paused")
    print("samples of hot_paused (100 ms spun while paused): %d" % paused)
    if paused > 25:
        fail("%d samples taken while paused (hot_paused)" % paused)

    deepest = max((f.count("recurse") for f, _ in stacks), default=0)
    print("deepest recursion seen: %d frames of recurse" % deepest)
    if deepest != RECURSE_DEPTH:
        fail("the recursion's stacks have %d frames of recurse, not %d" % (deepest, RECURSE_DEPTH))

    inside = folded(mlprof, trace, "--span", "span_b")
    n_in = sum(n for _, n in inside)
    b_in = share(inside, "hot_b")
    print("inside span_b: %d samples, %d in hot_b" % (n_in, b_in))
    b = share(first, "hot_b")  # this trace's
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
        r = subprocess.run([mlprof, "run", "-q", "--sample", "2000", *(["--sampling_source", source] if source else []),
                            "-o", merged, "--", sys.executable, "-c", loop],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("mlprof run --sample: status %d: %s" % (r.returncode, r.stderr))
        parts = os.path.join(merged + ".parts")
        got = 0
        for name in os.listdir(parts):
            with open(os.path.join(parts, name)) as f:
                # the weights: a timer signal's sample may stand for several periods
                got += sum(s.get("weight", 1) for s in json.load(f).get("samples", []))
        print("mlprof run --sample 2000 -- python: %d samples (weights) in its parts" % got)
        if got == 0:
            fail("mlprof run --sample: no samples in %s" % parts)
        merged_stacks = folded(mlprof, merged)  # the merge keeps them
        if sum(n for _, n in merged_stacks) != got:
            fail("the merged trace has %d samples, its parts %d" % (sum(n for _, n in merged_stacks), got))
    if nofp:
        trace = os.path.join(out, "stacks_nofp.json")
        r = subprocess.run([nofp, trace, "1000", ms, *src], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("stacks_target_nofp: status %d: %s" % (r.returncode, r.stderr))
        with open(trace) as f:
            info = json.load(f)["otherData"]["sampling"]
        leaves = {}
        for frames_, n in draws(mlprof, nofp, out, "stacks_nofp", info, folded(mlprof, trace), src, ms):
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
    if source == "signal":
        signal_checks(mlprof, target, out, no_perf)
    print("PASS")


if __name__ == "__main__":
    main()
