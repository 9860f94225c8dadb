"""stacks_common.py - what stacks_check.py (perf_event), stacks_signal_check.py
(the timer-signal sampler) and stacks_out_check.py check alike, written once:
running stacks_target, parsing `mlprof flame --folded`, and what
stacks_target.c's known CPU shares promise whatever took the samples:
  - hot_a, hot_b, hot_c get 60/30/10% of the main thread's CPU time: their
    sample shares within 5 points (the samples are on CPU time, so a loaded
    machine changes their number, not their shares), of 300 at least;
  - the recursion's stacks are complete: RECURSE_DEPTH frames of recurse;
  - --span span_b keeps the samples inside span_b: hot_b's; a span without
    samples is an error naming it;
  - a thread started and ended while sampling has samples of thread_fn;
  - otherData.sampling has its counts and agrees with the samples, each with
    its frame, time and thread; a refused sampler is a skip (77), said;
  - the folded output parses, and so does the SVG (xml.etree), with its frames
    and script;
  - mlprof run --sample: a rate out of range is refused naming the key; a
    program without mlprof (python) gets samples in its parts, and the
    merged trace has them all.
Each source's own checks stay in its script.
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

RECURSE_DEPTH = 100
# stacks_target.c's main thread spends 60/30/10% of its hot CPU time in these
HOT_SHARES = (("hot_a", 60), ("hot_b", 30), ("hot_c", 10))
# the fewest samples in the hot functions the shares are judged on (1 s of
# CPU at 1 kHz gives about 1000; 5 points is then several standard errors)
MIN_HOT_SAMPLES = 300
SVG_NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    """The whole test cannot run here: said, and status 77 (ctest's SKIP_RETURN_CODE)."""
    print("SKIP: " + msg)
    sys.exit(77)


def folded(mlprof, trace, *extra):
    """mlprof flame TRACE --folded EXTRA...: [(frames outermost first, samples)]."""
    r = subprocess.run([mlprof, "flame", trace, "--folded", *extra], capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        fail("mlprof flame %s %s: status %d: %s" % (trace, " ".join(extra), r.returncode, r.stderr))
    stacks = []
    for line in r.stdout.splitlines():
        m = re.match(r"^(.+) (\d+)$", line)
        if not m:
            fail("folded line does not parse: %r" % line)
        stacks.append((m.group(1).split(";"), int(m.group(2))))
    return stacks


def share(stacks, name):
    """The samples with name anywhere in their stack."""
    return sum(n for frames, n in stacks if name in frames)


def leaf_share(stacks, name):
    """The samples with name as their leaf (innermost frame)."""
    return sum(n for frames, n in stacks if frames[-1] == name)


def deepest_recursion(stacks):
    return max((f.count("recurse") for f, _ in stacks), default=0)


def run_target(target, trace, hz, ms, *keys, env=None):
    """stacks_target TRACE HZ MS KEYS...; fails unless it ends with status 0.
    Returns (its trace, its completed process)."""
    r = subprocess.run([target, trace, str(hz), str(ms), *keys], capture_output=True, text=True, timeout=300,
                       env=env)
    if r.returncode != 0:
        fail("%s %s: status %d: %s" % (os.path.basename(target), " ".join(keys), r.returncode, r.stderr))
    with open(trace) as f:
        return json.load(f), r


def check_shares(label, got):
    """got: {hot function: samples}; hot_a/b/c within 5 points of 60/30/10% of their sum."""
    total = sum(got.get(name, 0) for name, _ in HOT_SHARES)
    print("%s: %s" % (label, ", ".join("%s %d" % (name, got.get(name, 0)) for name, _ in HOT_SHARES)))
    if total < MIN_HOT_SAMPLES:
        fail("%s: too few samples in the hot functions: %d (1 s of CPU at 1 kHz)" % (label, total))
    for name, want in HOT_SHARES:
        pct = 100.0 * got.get(name, 0) / total
        print("  %s, %s: %.1f%% (want %d%%)" % (label, name, pct, want))
        if abs(pct - want) > 5:
            fail("%s: %s has %.1f%% of the samples, not %d%% within 5 points" % (label, name, pct, want))


def check_stack_shares(label, stacks, by_leaf=False):
    """The hot functions' shares, by frames anywhere in the stack or by leaf
    (where the callers are not promised: the sampled address is exact)."""
    count = leaf_share if by_leaf else share
    check_shares(label, {name: count(stacks, name) for name, _ in HOT_SHARES})


def check_recursion(label, stacks):
    """The recursion's stacks are whole: RECURSE_DEPTH frames of recurse."""
    deepest = deepest_recursion(stacks)
    print("%s: deepest recursion %d frames of recurse" % (label, deepest))
    if deepest != RECURSE_DEPTH:
        fail("%s: the recursion's stacks have %d frames of recurse, not %d" % (label, deepest, RECURSE_DEPTH))


def check_span_b(label, inside, b, by_leaf=False):
    """inside: the folded samples that --span span_b kept; b: hot_b's samples
    in the whole trace. At least 95% of those inside are hot_b's, and at
    least 90% of hot_b's are inside."""
    n_in = sum(n for _, n in inside)
    b_in = (leaf_share if by_leaf else share)(inside, "hot_b")
    print("%s: inside span_b %d samples, %d in hot_b (hot_b has %d in all)" % (label, n_in, b_in, b))
    if n_in == 0 or b_in < 0.95 * n_in or b_in < 0.9 * b:
        fail("%s: the samples inside span_b are not hot_b's: %d of %d (hot_b has %d in all)" % (label, b_in, n_in, b))


def sampling_info(doc, stderr, keys=()):
    """otherData.sampling of a trace written with sampling on: skips (77) where
    the sampler was refused (said on stderr), else checks that it has its
    counts (and keys), at 1 kHz, and agrees with the trace's samples, each
    with its frame, time and thread."""
    info = doc["otherData"].get("sampling")
    if info is None:
        fail("otherData.sampling is missing")
    if info.get("refused"):
        if "sampling (call stacks)" not in stderr:
            fail("the refusal was not said on stderr: %r" % stderr)
        skip("perf_event refuses the sampling events here: %s" % info["refused"])
    for key in ("samples", "lost_kernel", "lost_memory", "truncated_stacks", "perf_event_paranoid", "hz", *keys):
        if key not in info:
            fail("otherData.sampling has no %s: %r" % (key, info))
    if info["hz"] != 1000 or info["samples"] != len(doc["samples"]):
        fail("otherData.sampling disagrees with the samples: %r, %d samples" % (info, len(doc["samples"])))
    frames = doc["stackFrames"]
    for s in doc["samples"]:
        if s["sf"] not in frames or "ts" not in s or "tid" not in s:
            fail("a sample without its frame, time or thread: %r" % s)
    return info


def check_trace(mlprof, trace, doc, out, first, stacks=None):
    """What one stacks_target trace shows whatever sampled it. first: its
    folded samples; stacks: those with the samples of reruns (where a source
    needs more draws), for the shares and the recursion; the span, threads
    and SVG are this trace's."""
    stacks = stacks if stacks is not None else first
    print("samples: %d in all" % sum(n for _, n in stacks))
    check_stack_shares("all samples", stacks)
    check_recursion("all samples", stacks)

    check_span_b("this trace", folded(mlprof, trace, "--span", "span_b"), share(first, "hot_b"))
    r = subprocess.run([mlprof, "flame", trace, "--folded", "--span", "no_such_span"], capture_output=True, text=True)
    if r.returncode != 1 or "no_such_span" not in r.stderr:
        fail("a span with no samples: status %d, %r" % (r.returncode, r.stderr))

    frames = doc["stackFrames"]
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

    root = flame_svg(mlprof, trace, os.path.join(out, "flame.svg"))
    titles = [t.text for t in root.iter(SVG_NS + "title")]
    if not any(t.startswith("hot_a (") and "%)" in t for t in titles):
        fail("the SVG has no frame hot_a with its samples and share: %r" % titles[:10])
    if root.find(SVG_NS + "script") is None:
        fail("the SVG has no script (zoom)")


def flame_svg(mlprof, trace, svg):
    """mlprof flame TRACE -o SVG, parsed: its root element."""
    r = subprocess.run([mlprof, "flame", trace, "-o", svg], capture_output=True, text=True)
    if r.returncode != 0:
        fail("mlprof flame -o: %s" % r.stderr)
    return ET.parse(svg).getroot()


def check_run_sample(mlprof, out, preload_ok, source=None):
    """mlprof run --sample: a rate out of range refused naming the key; with the
    preload library, a program without mlprof (python) gets samples in its
    parts and the merged trace has them all."""
    r = subprocess.run([mlprof, "run", "--sample", "50000", "--", "true"], capture_output=True, text=True)
    if r.returncode != 2 or "sampling" not in r.stderr:
        fail("mlprof run --sample 50000: status %d, %r" % (r.returncode, r.stderr))
    if not preload_ok:
        return
    merged = os.path.join(out, "run.json")
    loop = "s = 0\nfor i in range(3000000): s += i\n"
    r = subprocess.run([mlprof, "run", "-q", "--sample", "2000", *(["--sampling_source", source] if source else []),
                        "-o", merged, "--", sys.executable, "-c", loop], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("mlprof run --sample: status %d: %s" % (r.returncode, r.stderr))
    parts = merged + ".parts"
    got = 0
    for name in os.listdir(parts):
        with open(os.path.join(parts, name)) as f:
            # the weights: a timer signal's sample may stand for several periods (perf_event's are 1)
            got += sum(s.get("weight", 1) for s in json.load(f).get("samples", []))
    print("mlprof run --sample 2000 -- python: %d samples (weights) in its parts" % got)
    if got == 0:
        fail("mlprof run --sample: no samples in %s" % parts)
    in_merged = sum(n for _, n in folded(mlprof, merged))  # the merge keeps them
    if in_merged != got:
        fail("the merged trace has %d samples, its parts %d" % (in_merged, got))


def parse_args(usage, options=()):
    """MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP],
    with --NAME=VALUE options among them: (mlprof, target, out, preload_ok,
    nofp, {NAME: VALUE}). OUTDIR is made."""
    opts, args = {}, []
    for a in sys.argv[1:]:
        m = re.match(r"^--([\w-]+)=(.*)$", a)
        if m and m.group(1) in options:
            opts[m.group(1)] = m.group(2)
        elif a.startswith("--"):
            fail("unknown option %s; usage: %s" % (a, usage))
        else:
            args.append(a)
    if len(args) < 3:
        fail("usage: %s" % usage)
    os.makedirs(args[2], exist_ok=True)
    return (args[0], args[1], args[2], len(args) > 3 and args[3] == "preload-ok",
            args[4] if len(args) > 4 else None, opts)
