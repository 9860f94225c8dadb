#!/usr/bin/env python3
"""stacks_out_check.py - where the sampled call stacks go besides one JSON
trace (src/hw/stacks.c, src/export/perfetto.c), and what survives forks,
exec and kills:
  - one run's samples in both formats (test_stacks_perfetto: the JSON that
    mlprof_dump_to wrote, and Perfetto's sink fed the same samples): every
    sample of the JSON is in the protobuf (protoc --decode against
    tests/proto), same pid, thread, time and stack, and nothing else is;
  - a whole trace in Perfetto's format (stacks_target TRACE.pftrace): its
    PerfSample packets resolve through the interned callstacks, frames,
    mappings and names; as many as otherData.sampling says; hot_a, hot_b,
    hot_c as leaves in 60/30/10 within 5 points; the recursion complete; the
    thread started and ended while sampling on its own tid; mlprof flame
    reads the protobuf: the same folded stacks as from the JSON of the same
    run, --span on the protobuf's slices; mlprof merge keeps its samples;
  - fork: a child forked while sampling writes its own trace (TRACE.PID) with
    its own samples (child_fn, on its pid); the parent's has none of them
    and its own (parent_fn);
  - under mlprof run (preload-ok only: a preload library): a program exec'd
    by sh -c 'exec ...' has its samples in the merged trace; so do programs
    killed by SIGTERM and SIGSEGV (the preload's crash handlers write the
    trace), and one killed by SIGKILL after a continuous dump.
Behaviour only: sample counts are checked against a third of what the CPU
time spent gives, never against time. Skipped (77), saying why, where
perf_event refuses the sampling events; the protobuf parts without protoc.
The share, recursion and span checks, and mlprof flame's folded output, are
stacks_common.py's (as in stacks_check.py and stacks_signal_check.py).
Usage: stacks_out_check.py MLPROF STACKS_TARGET STACKS_SPIN TEST_STACKS_PERFETTO OUTDIR PROTO preload-ok|no-preload
"""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perfetto_decode import decode_text, protoc_decode, resolve  # noqa: E402
from stacks_common import check_recursion, check_shares, check_span_b, fail, folded, share, skip  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    return r


def json_samples(doc, whole=False):
    """(pid, tid, ts in ns, stack outermost first) of a JSON trace's samples;
    whole: each frame as (name, object, file, line, inlined), else its name."""
    frames = doc["stackFrames"]
    out = []
    for s in doc["samples"]:
        stack, k = [], s["sf"]
        while k:
            fr = frames[k]
            stack.append((fr["name"], fr["category"], fr.get("file"), fr.get("line"), fr.get("inlined", False))
                         if whole else fr["name"])
            k = frames[k].get("parent")
        out.append((s["pid"], s["tid"], round(s["ts"] * 1000), tuple(reversed(stack))))
    return out


def pf_events(protoc, proto, path):
    with open(path, "rb") as f:
        data = f.read()
    text, err = protoc_decode(protoc, proto, data)
    if text is None:
        fail("protoc cannot decode %s: %s" % (path, err))
    try:
        return resolve(decode_text(text)).events
    except AssertionError as e:
        fail("%s: %s" % (path, e))


def pf_samples(events):
    return [(e["pid"], e["tid"], e["ts"], tuple(e["stack"])) for e in events if e["type"] == "sample"]


def refused(doc, stderr):
    info = doc.get("otherData", {}).get("sampling")
    if info is None:
        fail("otherData.sampling is missing")
    if info.get("refused"):
        skip("perf_event refuses the sampling events here: %s" % info["refused"])
    return info


def folded_counts(mlprof, trace):
    """mlprof flame TRACE --folded as {"outer;...;leaf": samples}, to compare two traces'."""
    out = collections.Counter()
    for frames, n in folded(mlprof, trace):
        out[";".join(frames)] += n
    return out


def same_run(mlprof, tsp, out, protoc, proto):
    js, pf = os.path.join(out, "same.json"), os.path.join(out, "same.pftrace")
    r = run([tsp, js, pf])
    if r.returncode != 0:
        fail("test_stacks_perfetto: status %d: %s%s" % (r.returncode, r.stdout, r.stderr))
    with open(js) as f:
        doc = json.load(f)
    refused(doc, r.stderr)
    want = json_samples(doc)
    # two more dumps, paused since: one names the addresses from what the
    # first kept, the last afresh; each sample's stack the same in all three,
    # to the file:line and inlined calls
    first = json_samples(doc, True)
    for suffix, how in ((".kept.json", "names kept from the first dump"), (".end.json", "named afresh")):
        with open(js + suffix) as f:
            later = {s[:3]: s[3] for s in json_samples(json.load(f), True)}
        same = sum(1 for s in first if later.get(s[:3]) == s[3])
        print("%s (%s): %d of %d samples with the same stack" % (suffix, how, same, len(first)))
        if not first or same != len(first):
            diff = [(s[3], later.get(s[:3])) for s in first if later.get(s[:3]) != s[3]]
            fail("%s (%s) names %d samples' stacks otherwise: %r" % (suffix, how, len(diff), diff[:2]))
    if not protoc:
        print("SKIP (part): protoc is not installed: the protobuf is not decoded")
        return
    got = pf_samples(pf_events(protoc, proto, pf))
    print("same run: %d samples in the JSON, %d in the protobuf" % (len(want), len(got)))
    if len(want) < 100:
        fail("too few samples in the JSON: %d (0.45 s of CPU at 1 kHz)" % len(want))
    cw, cg = collections.Counter(want), collections.Counter(got)
    if cw != cg:
        fail("the samples differ: only in the JSON %r; only in the protobuf %r"
             % (list((cw - cg).items())[:3], list((cg - cw).items())[:3]))
    leaves = collections.Counter(s[3][-1] for s in got)
    pid = doc["otherData"]["pid"]
    if not leaves["pf_hot_a"] or not leaves["pf_hot_b"]:
        fail("the protobuf has no samples in pf_hot_a or pf_hot_b: %r" % leaves.most_common(5))
    if not any(s[1] != pid and "pf_thread_fn" in s[3] for s in got):
        fail("the thread started while sampling has no samples of pf_thread_fn on its own tid")
    fj, fp = folded_counts(mlprof, js), folded_counts(mlprof, pf)
    if fj != fp:
        fail("mlprof flame: the protobuf's folded stacks differ from the JSON's: %r" % list((fj - fp).items())[:3])
    merged = os.path.join(out, "same_merged.json")
    r = run([mlprof, "merge", pf, js, "-o", merged])
    if r.returncode != 0:
        fail("mlprof merge of the protobuf and the JSON: %s" % r.stderr)
    n = sum(folded_counts(mlprof, merged).values())
    if n != 2 * len(want):
        fail("the merge of the protobuf and the JSON has %d samples, not %d" % (n, 2 * len(want)))


def whole_pftrace(mlprof, target, out, protoc, proto):
    trace = os.path.join(out, "stacks.pftrace")
    r = run([target, trace, "1000", "1000"])
    if r.returncode != 0:
        fail("stacks_target .pftrace: status %d: %s" % (r.returncode, r.stderr))
    if not protoc:
        return
    events = pf_events(protoc, proto, trace)
    other = [e for e in events if e["type"] == "other_data"]
    if not other or "sampling" not in other[-1]["args"]:
        fail("the protobuf's otherData has no sampling")
    info = other[-1]["args"]["sampling"]
    if isinstance(info, str):
        info = json.loads(info)
    if info.get("refused"):
        skip("perf_event refuses the sampling events here: %s" % info["refused"])
    samples = pf_samples(events)
    pid = other[-1]["pid"]
    print("whole .pftrace: %d samples (otherData.sampling.samples %d)" % (len(samples), info["samples"]))
    if info["samples"] != len(samples):
        fail("otherData.sampling.samples is %d, the protobuf has %d PerfSample packets"
             % (info["samples"], len(samples)))
    if any(s[0] != pid for s in samples):
        fail("a sample of another pid than the trace's %d" % pid)
    ts = [s[2] for s in samples]
    begins = [e["ts"] for e in events if e["type"] == "span" and e["name"] == "span_b"]
    if not begins or min(ts) > max(begins) or max(ts) < min(begins):
        fail("the samples' times are not on the spans' clock")
    leaves = collections.Counter(s[3][-1] for s in samples if s[1] == pid)
    check_shares("the protobuf's leaves (main thread)", leaves)
    check_recursion("the protobuf", [(s[3], 1) for s in samples])
    if not any(s[1] != pid and "thread_fn" in s[3] for s in samples):
        fail("the thread started while sampling has no samples of thread_fn")
    check_span_b("mlprof flame --span span_b on the protobuf", folded(mlprof, trace, "--span", "span_b"),
                 leaves["hot_b"], by_leaf=True)


def forked(target, out):
    trace = os.path.join(out, "fork.json")
    for old in glob.glob(os.path.join(out, "fork.*json")):
        os.unlink(old)
    r = run([target, trace, "1000", "200", "fork"])
    if r.returncode != 0 and "after multi-threaded fork is not supported" in r.stderr:
        # ThreadSanitizer's runtime refuses the child's own sampler thread
        print("SKIP (part): fork: ThreadSanitizer does not start threads in a forked child")
        return
    if r.returncode != 0:
        fail("stacks_target fork: status %d: %s" % (r.returncode, r.stderr))
    m = re.search(r"child (\d+)", r.stdout)
    if not m:
        fail("stacks_target fork did not say its child: %r" % r.stdout)
    child = int(m.group(1))
    paths = [p for p in glob.glob(os.path.join(out, "fork.*json")) if str(child) in os.path.basename(p)]
    if len(paths) != 1:
        fail("the forked child's trace is not beside the parent's: %r" % os.listdir(out))
    with open(trace) as f:
        parent = json.load(f)
    with open(paths[0]) as f:
        kid = json.load(f)
    ps, ks = json_samples(parent), json_samples(kid)
    k_names = collections.Counter(n for s in ks for n in set(s[3]))
    p_names = collections.Counter(n for s in ps for n in set(s[3]))
    print("fork: the child %d has %d samples (child_fn %d), the parent %d (parent_fn %d)"
          % (child, len(ks), k_names["child_fn"], len(ps), p_names["parent_fn"]))
    if kid["otherData"]["pid"] != child or any(s[0] != child or s[1] != child for s in ks):
        fail("the child's trace has samples of another process or thread")
    if k_names["child_fn"] < 100:
        fail("the child's trace has %d samples of child_fn (0.3 s of CPU at 1 kHz)" % k_names["child_fn"])
    if k_names["parent_fn"] or k_names["hot_a"]:
        fail("the child's trace has the parent's samples")
    if p_names["child_fn"] or any(s[1] == child for s in ps):
        fail("the parent's trace has the child's samples")
    if p_names["parent_fn"] < 100 or not p_names["hot_a"]:
        fail("the parent's trace lost its own samples: %r" % p_names.most_common(6))


def under_run(mlprof, spin, out):
    def spin_samples(name, cmd, extra=(), want_rc=0):
        merged = os.path.join(out, name + ".json")
        shutil.rmtree(merged + ".parts", ignore_errors=True)
        r = run([mlprof, "run", "-q", "--sample", "1000", *extra, "-o", merged, "--", *cmd])
        if r.returncode != want_rc:
            fail("%s: mlprof run: status %d, not %d: %s" % (name, r.returncode, want_rc, r.stderr))
        stacks = folded(mlprof, merged)
        n = share(stacks, "spin_fn")
        print("%s: %d samples of spin_fn in the merged trace" % (name, n))
        if n < 100:
            fail("%s: %d samples of spin_fn (0.3 s of CPU at 1 kHz): %r" % (name, n, stacks[-5:]))

    spin_samples("exec", ["sh", "-c", "exec %s 300" % spin])
    spin_samples("sigterm", [spin, "300", "term"], want_rc=128 + 15)
    spin_samples("sigsegv", [spin, "300", "segv"], want_rc=128 + 11)
    # SIGKILL runs no handler: what the continuous dump wrote before it
    spin_samples("sigkill", [spin, "300", "kill", "sleep"], ("--dump_period", "0.2"), want_rc=128 + 9)


def main():
    mlprof, target, spin, tsp, out, proto = sys.argv[1:7]
    preload_ok = len(sys.argv) > 7 and sys.argv[7] == "preload-ok"
    os.makedirs(out, exist_ok=True)
    protoc = shutil.which("protoc")
    same_run(mlprof, tsp, out, protoc, proto)
    whole_pftrace(mlprof, target, out, protoc, proto)
    forked(target, out)
    if preload_ok:
        under_run(mlprof, spin, out)
    else:
        print("SKIP (part): exec and kills under mlprof run need the preload library (not in sanitized builds)")
    print("PASS")


if __name__ == "__main__":
    main()
