#!/usr/bin/env python3
"""stacks_signal_check.py - the timer-signal sampler (sampling_source=signal,
src/hw/sigsample.c) against what stacks_common.py expects of any source
from stacks_target.c's known CPU shares (hot_a/b/c's shares, the whole
recursion, span_b's samples, the thread's, the folded output and SVG,
mlprof run --sample), never skipped, the shares over enough draws (the
kernel's tick bounds the signals: reruns, up to 6 runs, until 1000), and:
  - 100 ms spun while paused (hot_paused) are not sampled, but for what a
    drain period (4 ms) may let through;
  - losses are said on stderr;
  - built without frame pointers: the leaf functions' shares are still
    right (the sampled address is exact; the callers are not promised);
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
Without --source it runs the shared checks on the default source (skipped,
77, where perf_event refuses the sampling events).
Usage: stacks_signal_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP]
       [--source=signal] [--no-perf=NO_PERF]
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stacks_common import (check_run_sample, check_stack_shares, check_trace, fail, folded,  # noqa: E402
                           parse_args, run_target, sampling_info, share)

USAGE = ("stacks_signal_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP] "
         "[--source=signal] [--no-perf=NO_PERF]")


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
        doc, r = run_target(target, os.path.join(out, "bench_%s.json" % hz), hz, 500, "sampling_source=signal")
        blocks, cpu = spin_blocks(r.stdout)
        info = doc["otherData"].get("sampling") or {}
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
        doc, _ = run_target(exe, trace, 1000, ms, *src)
        got += doc["otherData"]["sampling"].get("signals_kept", 0)
        stacks = stacks + folded(mlprof, trace)
        runs += 1
    print("%s: %d signals (draws) over %d runs" % (name, got, runs))
    return stacks


def main():
    mlprof, target, out, preload_ok, nofp, opts = parse_args(USAGE, ("source", "no-perf"))
    source, no_perf = opts.get("source"), opts.get("no-perf")
    src = ["sampling_source=" + source] if source else []
    trace = os.path.join(out, "stacks.json")
    # 2 s for the signal sampler: the kernel checks CPU-time timers at its
    # tick (often 250 Hz), so its shares rest on fewer draws (signals), and
    # fewer still under contention; see draws()
    ms = "2000" if source == "signal" else "1000"
    doc, r = run_target(target, trace, 1000, ms, *src)
    info = doc["otherData"].get("sampling") or {}
    if info.get("refused") and source == "signal":
        fail("the timer-signal sampler was refused: %s" % info["refused"])
    if source and info and info.get("source") != source:
        fail("otherData.sampling.source is %r, not %r" % (info.get("source"), source))
    info = sampling_info(doc, r.stderr)
    lost = {k: info.get(k) for k in ("lost_ring", "cut_by_copy", "stack_copy_failed", "threads_without_timer")
            if info.get(k)}
    if lost and "sampling (timer signal)" not in r.stderr:
        fail("losses not said on stderr: %r, %r" % (lost, r.stderr))

    first = folded(mlprof, trace)
    stacks = draws(mlprof, target, out, "stacks", info, first, src, ms)
    check_trace(mlprof, trace, doc, out, first, stacks)
    paused = share(stacks, "hot_paused")
    print("samples of hot_paused (100 ms spun while paused): %d" % paused)
    if paused > 25:
        fail("%d samples taken while paused (hot_paused)" % paused)
    check_run_sample(mlprof, out, preload_ok, source)

    if nofp:
        trace = os.path.join(out, "stacks_nofp.json")
        doc, _ = run_target(nofp, trace, 1000, ms, *src)
        check_stack_shares("without frame pointers, by leaf",
                           draws(mlprof, nofp, out, "stacks_nofp", doc["otherData"]["sampling"], folded(mlprof, trace),
                                 src, ms), by_leaf=True)
    if source == "signal":
        signal_checks(mlprof, target, out, no_perf)
    print("PASS")


if __name__ == "__main__":
    main()
