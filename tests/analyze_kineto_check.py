#!/usr/bin/env python3
"""`mlprof analyze` on traces shaped as PyTorch's profiler (Kineto) writes
them: the trace's envelope ("PyTorch Profiler (0)", category Trace, on the
"Spans" process), ProfilerStep#N as a CPU user annotation and again as a GPU
one, operators with "Input Dims" and "Input type". Every table is checked row
by row against times worked out by hand.

usage: analyze_kineto_check.py MLPROF OUTDIR
"""
import csv
import io
import json
import os
import sys

from analyze_util import check, command, failures

MLPROF, OUT = sys.argv[1:3]


mlprof = command(MLPROF)


def analyze_json(path, *opts):
    p = mlprof("analyze", path, "--format", "json", "-t", "0", *opts)
    try:
        return json.loads(p.stdout), p
    except ValueError as e:
        check(False, f"JSON from analyze {opts}: {e}\n{p.stdout[:400]}")
        return {"rows": []}, p


def rows(result):
    """key -> (count, self ns, total ns)"""
    return {r["key"]: (r["count"], r["self_ns"], r["total_ns"]) for r in result["rows"]}


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def x(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


CPU, GPU, STREAM = 100, 0, 7
LINEAR = {"Input Dims": [[8, 64], [32, 64], [32]], "Input type": ["float", "float", "float"]}
ADDMM = {"Input Dims": [[32], [8, 64], [64, 32], [], []],
         "Input type": ["float", "float", "float", "Scalar", "Scalar"]}
RELU = {"Input Dims": [[8, 32]], "Input type": ["float"]}


def op(name, ts, dur, ext, shapes):
    return x(name, "cpu_op", ts, dur, CPU, CPU, **{"External id": ext, "Sequence number": ext}, **shapes)


def launch(ts, dur, corr, ext):
    return x("cudaLaunchKernel", "cuda_runtime", ts, dur, CPU, CPU, **{"External id": ext, "correlation": corr,
                                                                       "cbid": 211})


def kernel(name, ts, dur, corr, ext):
    return x(name, "kernel", ts, dur, GPU, STREAM, **{"External id": ext, "correlation": corr, "device": 0,
                                                      "stream": STREAM, "queued": 0})


# Times in microseconds. CPU: two steps, each a linear (an addmm inside, which
# launches a GEMM) and a relu (which launches its kernel). GPU stream 7: the
# kernels, and each step's GPU annotation around its kernels.
EVENTS = [
    x("PyTorch Profiler (0)", "Trace", 0, 10000, "Spans", "PyTorch Profiler", **{"Op count": 0}),
    x("ProfilerStep#1", "user_annotation", 100, 4000, CPU, CPU, **{"External id": 1}),
    op("aten::linear", 200, 1000, 2, LINEAR),
    op("aten::addmm", 300, 600, 3, ADDMM),
    launch(400, 50, 10, 3),
    op("aten::relu", 1500, 300, 4, RELU),
    launch(1600, 40, 11, 4),
    x("ProfilerStep#2", "user_annotation", 4200, 3000, CPU, CPU, **{"External id": 5}),
    op("aten::linear", 4300, 900, 6, LINEAR),
    op("aten::addmm", 4400, 500, 7, ADDMM),
    launch(4500, 60, 12, 7),
    op("aten::relu", 5500, 200, 8, RELU),
    kernel("ampere_sgemm_32x32", 460, 700, 10, 3),
    kernel("relu_kernel", 1650, 100, 11, 4),
    kernel("ampere_sgemm_32x32", 4560, 800, 12, 7),
    x("ProfilerStep#1", "gpu_user_annotation", 460, 1290, GPU, STREAM, **{"External id": 1}),
    x("ProfilerStep#2", "gpu_user_annotation", 4550, 820, GPU, STREAM, **{"External id": 5}),
    {"name": "process_name", "ph": "M", "pid": CPU, "tid": 0, "args": {"name": "python3"}},
    {"name": "process_labels", "ph": "M", "pid": GPU, "tid": 0, "args": {"labels": "GPU 0"}},
    {"name": "thread_name", "ph": "M", "pid": GPU, "tid": STREAM, "args": {"name": "stream 7"}},
]
TRACE = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
         "traceEvents": EVENTS, "traceName": "rank0.pt.trace.json", "displayTimeUnit": "ms"}

US = 1000
# key -> (count, self, total) in ns: self is the time less the children on the same track
WANT = {
    "ProfilerStep#1": (1, (4000 - 1000 - 300) * US, 4000 * US),
    "ProfilerStep#2": (1, (3000 - 900 - 200) * US, 3000 * US),
    "ampere_sgemm_32x32": (2, 1500 * US, 1500 * US),
    "aten::addmm": (2, (600 - 50 + 500 - 60) * US, 1100 * US),
    "aten::linear": (2, (1000 - 600 + 900 - 500) * US, 1900 * US),
    "ProfilerStep#1 (GPU)": (1, (1290 - 700 - 100) * US, 1290 * US),
    "aten::relu": (2, (300 - 40 + 200) * US, 500 * US),
    "cudaLaunchKernel": (3, 150 * US, 150 * US),
    "relu_kernel": (1, 100 * US, 100 * US),
    "ProfilerStep#2 (GPU)": (1, (820 - 800) * US, 820 * US),
}
ENVELOPE_NOTE = 'the trace\'s envelope "PyTorch Profiler (0)" (category Trace, 10.000 ms) is left out'


def test_envelope_and_gpu_annotations(path):
    r, p = analyze_json(path)
    got = rows(r)
    check(got == WANT, f"default rows:\n got {got}\nwant {WANT}")
    # ordered by self time; the envelope (10 ms, the longest) is not among them
    check([k for k in (x["key"] for x in r["rows"])] == list(WANT), f"order {[x['key'] for x in r['rows']]}")
    check(r.get("envelopes_left_out") == 1 and r["durations_kept"] == 16,
          f"envelopes_left_out {r.get('envelopes_left_out')}, kept {r['durations_kept']}")
    gpu = [x for x in r["rows"] if x["key"] == "ProfilerStep#1 (GPU)"]
    check(len(gpu) == 1 and gpu[0]["name"] == "ProfilerStep#1" and gpu[0]["category"] == "gpu_user_annotation",
          f"the GPU annotation's row keeps its name and category: {gpu}")
    check(p.stderr == "", f"nothing to say on stderr: {p.stderr!r}")

    # the table says what it left out
    t = mlprof("analyze", path, "-t", "3").stdout
    lines = t.splitlines()
    check(any(l.startswith("note: " + ENVELOPE_NOTE) and "--type Trace shows it" in l for l in lines),
          f"table note on the envelope:\n{t}")
    first = next((i for i, l in enumerate(lines) if l.startswith("name ")), None)
    check(first is not None and lines[first + 1].split("  ")[0] == "ProfilerStep#1",
          f"the first row is the CPU step:\n{t}")
    # CSV cannot say it: stderr does
    c = mlprof("analyze", path, "--format", "csv", "-t", "0")
    got = {r["name"]: (int(r["count"]), r["category"]) for r in csv.DictReader(io.StringIO(c.stdout))}
    check(got.get("ProfilerStep#1 (GPU)") == (1, "gpu_user_annotation") and
          got.get("ProfilerStep#1") == (1, "user_annotation") and "PyTorch Profiler (0)" not in got,
          f"CSV rows {got}")
    check(ENVELOPE_NOTE in c.stderr and c.stderr.startswith("mlprof analyze: "), f"CSV stderr {c.stderr!r}")

    # --type Trace (or a --name that names it) shows the envelope
    for opts in (("--type", "Trace"), ("--name", "PyTorch Profiler*")):
        r, p = analyze_json(path, *opts)
        check(rows(r) == {"PyTorch Profiler (0)": (1, 10000 * US, 10000 * US)} and r.get("envelopes_left_out") == 0,
              f"{opts}: {rows(r)}")
    # a pattern that matches anything names no envelope in particular: left out, said
    for opts in (("--name", "*"), ("--name", ""), ("--type", "*")):
        r, p = analyze_json(path, *opts)
        check("PyTorch Profiler (0)" not in rows(r) and r.get("envelopes_left_out") == 1 and r["durations_kept"] == 16,
              f"{opts}: {sorted(rows(r))} {r.get('envelopes_left_out')}")
    # grouped by category: no Trace row, the GPU annotations apart
    r, _ = analyze_json(path, "--aggregate-by", "type")
    got = {k: v[0] for k, v in rows(r).items()}
    check(got == {"user_annotation": 2, "gpu_user_annotation": 2, "cpu_op": 6, "cuda_runtime": 3, "kernel": 3},
          f"by category {got}")
    # one row per event, and the operator type (the name where no argument gives one)
    r, _ = analyze_json(path, "--aggregate-by", "none", "--name", "ProfilerStep#1")
    check(sorted(x["key"] for x in r["rows"]) == ["ProfilerStep#1", "ProfilerStep#1 (GPU)"],
          f"--aggregate-by none: {[x['key'] for x in r['rows']]}")
    r, _ = analyze_json(path, "--aggregate-by", "op_type", "--name", "ProfilerStep")
    check(set(rows(r)) == {"ProfilerStep#1", "ProfilerStep#1 (GPU)", "ProfilerStep#2", "ProfilerStep#2 (GPU)"},
          f"--aggregate-by op_type: {sorted(rows(r))}")
    # diff: the same rows on both sides, the envelope left out (and said) for each run
    d = mlprof("diff", path, path, "--format", "json", "-t", "0")
    keys = sorted(x["key"] for x in json.loads(d.stdout)["rows"])
    check(keys == sorted(WANT), f"diff rows {keys}")
    check(d.stderr.count(ENVELOPE_NOTE) == 2, f"diff stderr {d.stderr!r}")


SHAPE_ROWS = {"[[8,64],[32,64],[32]]": 2, "[[32],[8,64],[64,32],[],[]]": 2, "[[8,32]]": 2}
TYPE_ROWS = {'["float","float","float"]': 2, '["float","float","float","Scalar","Scalar"]': 2, '["float"]': 2}


def counts(result):
    return {k: v[0] for k, v in rows(result).items()}


def test_pytorch_argument_names(path):
    # the README's --aggregate-by input_shape reads PyTorch's "Input Dims"; the explicit name still works
    for key in ("input_shape", "Input Dims"):
        r, p = analyze_json(path, "--type", "cpu_op", "--aggregate-by", key)
        check(counts(r) == SHAPE_ROWS and p.stderr == "" and r.get("grouping_keys_missing") == [],
              f"--aggregate-by {key}: {counts(r)} {p.stderr!r}")
    # and input_type or dtype its "Input type"
    for key in ("input_type", "dtype", "Input type"):
        r, p = analyze_json(path, "--type", "cpu_op", "--aggregate-by", key)
        check(counts(r) == TYPE_ROWS and p.stderr == "", f"--aggregate-by {key}: {counts(r)} {p.stderr!r}")
    r, _ = analyze_json(path, "--type", "cpu_op", "--aggregate-by", "name,input_shape")
    check(counts(r) == {"aten::linear | [[8,64],[32,64],[32]]": 2, "aten::addmm | [[32],[8,64],[64,32],[],[]]": 2,
                        "aten::relu | [[8,32]]": 2}, f"name,input_shape: {counts(r)}")
    # events without the argument get "-": no warning while some kept event has it
    r, p = analyze_json(path, "--aggregate-by", "input_shape")
    check(counts(r).get("-") == 10 and p.stderr == "", f"input_shape over all: {counts(r)} {p.stderr!r}")

    # an explicit key wins over the others of its group
    both = write("both.json", {"traceEvents": [
        x("op", "cpu_op", 0, 10, 1, 1, input_shape="[1]", **{"Input Dims": [[2]]}),
        x("op", "cpu_op", 20, 10, 1, 1, **{"Input Dims": [[3]]})]})
    r, _ = analyze_json(both, "--aggregate-by", "input_shape")
    check(counts(r) == {"[1]": 1, "[[3]]": 1}, f"input_shape first: {counts(r)}")
    r, _ = analyze_json(both, "--aggregate-by", "Input Dims")
    check(counts(r) == {"[[2]]": 1, "[[3]]": 1}, f"Input Dims first: {counts(r)}")

    # a whole model's forward lists hundreds of shapes: the table cuts them as it cuts names, JSON keeps them
    dims = [[2048, 160]] * 40
    wide = write("wide.json", {"traceEvents": [x("forward", "cpu_op", 0, 10, 1, 1, **{"Input Dims": dims})]})
    text = json.dumps(dims, separators=(",", ":"))
    t = mlprof("analyze", wide).stdout.splitlines()
    row = next((l for l in t if l.startswith("forward ")), "")
    check(row.endswith(text[:57] + "...") and len(row) < 200, f"table row {row[:300]!r}")
    r, _ = analyze_json(wide)
    check(r["rows"][0]["input_shapes"] == text, "JSON keeps the shapes whole")


def test_missing_grouping_key(path):
    # no kernel has input shapes: one "-" row, and a warning naming the key and the keys they have
    r, p = analyze_json(path, "--type", "kernel", "--aggregate-by", "input_shape")
    check(counts(r) == {"-": 3} and r.get("grouping_keys_missing") == ["input_shape"],
          f"kernels by input_shape: {counts(r)} {r.get('grouping_keys_missing')}")
    err = p.stderr.strip().splitlines()
    check(len(err) == 1 and err[0].startswith(f"mlprof analyze: {path}: --aggregate-by input_shape: none of the 3 "
                                              'kept durations has an argument "input_shape" (nor ')
          and '"Input Dims"' in err[0] and "External id (3)" in err[0] and "correlation (3)" in err[0],
          f"warning: {p.stderr!r}")
    # a near miss is named
    r, p = analyze_json(path, "--type", "cpu_op", "--aggregate-by", "name,input dims")
    check(r.get("grouping_keys_missing") == ["input dims"] and 'did you mean "Input Dims"?' in p.stderr
          and '"input dims"' in p.stderr, f"near miss: {p.stderr!r}")
    check(counts(r) == {"aten::linear | -": 2, "aten::addmm | -": 2, "aten::relu | -": 2}, f"rows {counts(r)}")
    # the table says it under the header; exit status 0
    t = mlprof("analyze", path, "--aggregate-by", "nosuch")
    check('note: --aggregate-by nosuch: no kept duration has this argument, so every row has "-" there'
          in t.stdout.splitlines(), f"table note:\n{t.stdout}")
    check("nosuch" in t.stderr and "Input Dims (6)" in t.stderr, f"table stderr {t.stderr!r}")
    # keys that name no argument are not warned about; nor is anything when no duration is kept
    r, p = analyze_json(path, "--aggregate-by", "name,type,thread,process")
    check(p.stderr == "" and r.get("grouping_keys_missing") == [], f"built-in keys: {p.stderr!r}")
    r, p = analyze_json(path, "--aggregate-by", "nosuch", "--name", "zzz")
    check("nosuch" not in p.stderr and '--name "zzz"' in p.stderr, f"nothing kept: {p.stderr!r}")
    # an empty key is a mistake on the command line, not an argument named ""
    p = mlprof("analyze", path, "--aggregate-by", "name,", expect=2)
    check('--aggregate-by: an empty key in "name,"' in p.stderr, f"empty key: {p.stderr!r}")


# Steps: ProfilerStep#3..5 whole, #6 begun by the last step() and cut short
# where the profiler stopped. The relu launched late in step 4 runs on the GPU
# in step 5's time: it is step 4's (HTA: a GPU event is its launch's step).
STEP_EVENTS = [
    x("PyTorch Profiler (0)", "Trace", 0, 3100, "Spans", "PyTorch Profiler", **{"Op count": 0}),
    x("ProfilerStep#3", "user_annotation", 0, 1000, CPU, CPU),
    op("aten::mm", 100, 300, 11, RELU),
    launch(300, 10, 1, 11),
    x("ProfilerStep#4", "user_annotation", 1000, 1000, CPU, CPU),
    op("aten::mm", 1100, 300, 12, RELU),
    launch(1300, 10, 2, 12),
    op("aten::relu", 1900, 90, 13, RELU),
    launch(1950, 10, 3, 13),
    x("autograd::engine::evaluate_function", "cpu_op", 1500, 100, CPU, CPU + 1),  # the backward thread
    x("ProfilerStep#5", "user_annotation", 2000, 1000, CPU, CPU),
    op("aten::mm", 2100, 300, 14, RELU),
    launch(2300, 10, 4, 14),
    x("ProfilerStep#6", "user_annotation", 3000, 40, CPU, CPU),
    kernel("sgemm", 350, 200, 1, 11),
    kernel("sgemm", 1350, 200, 2, 12),
    kernel("relu_kernel", 2050, 100, 3, 13),
    kernel("sgemm", 2350, 200, 4, 14),
    x("ProfilerStep#4", "gpu_user_annotation", 1340, 820, GPU, STREAM),
]
STEP4 = {"ProfilerStep#4": 1, "aten::mm": 1, "aten::relu": 1, "cudaLaunchKernel": 2,
         "autograd::engine::evaluate_function": 1, "sgemm": 1, "relu_kernel": 1, "ProfilerStep#4 (GPU)": 1}
LAST_NOTE = ("--steps: ProfilerStep#6, the last step, is left out as incomplete: it ran 40.000 us against "
             "1.000 ms for the others (the median), so the profiler stopped inside it; --steps 6 takes it")


def steps_json(path, *opts, expect=0):
    p = mlprof("analyze", path, "--format", "json", "-t", "0", *opts, expect=expect)
    try:
        return json.loads(p.stdout), p
    except ValueError as e:
        check(False, f"JSON from analyze {opts}: {e}\n{p.stdout[:400]}")
        return {"steps": {}, "analysis": {"rows": []}, "per_step": []}, p


def test_steps(path):
    path = write("steps.json", {"traceEvents": STEP_EVENTS})
    # all: the whole steps, the cut one left out and said
    r, p = steps_json(path, "--steps", "all")
    check(r.get("steps") == {"source": "ProfilerStep#N", "chosen": [3, 4, 5], "left_out": [6], "incomplete": 6},
          f"--steps all: {r.get('steps')}")
    got = counts(r.get("analysis", {"rows": []}))
    check(got == {"ProfilerStep#3": 1, "ProfilerStep#4": 1, "ProfilerStep#5": 1, "aten::mm": 3, "aten::relu": 1,
                  "cudaLaunchKernel": 4, "autograd::engine::evaluate_function": 1, "sgemm": 3, "relu_kernel": 1,
                  "ProfilerStep#4 (GPU)": 1}, f"--steps all rows {got}")
    check(p.stderr.strip() == f"mlprof analyze: {path}: {LAST_NOTE}", f"--steps all stderr {p.stderr!r}")
    # one step: its CPU events by their start on any thread, its GPU events by their launch
    r, _ = steps_json(path, "--steps", "4")
    check(counts(r.get("analysis", {"rows": []})) == STEP4, f"--steps 4: {counts(r.get('analysis', {'rows': []}))}")
    r, _ = steps_json(path, "--steps", "5")
    got = counts(r.get("analysis", {"rows": []}))
    check(got == {"ProfilerStep#5": 1, "aten::mm": 1, "cudaLaunchKernel": 1, "sgemm": 1}, f"--steps 5: {got}")
    # named by number, the cut step is taken (and said)
    r, p = steps_json(path, "--steps", "6")
    check(counts(r.get("analysis", {"rows": []})) == {"ProfilerStep#6": 1} and "is taken as asked" in p.stderr,
          f"--steps 6: {counts(r.get('analysis', {'rows': []}))} {p.stderr!r}")
    # a number the trace lacks is said; the others are taken
    r, p = steps_json(path, "--steps", "2,4")
    check(r.get("steps", {}).get("chosen") == [4] and "the trace has no step 2; its steps are 3 to 6 (4)" in p.stderr,
          f"--steps 2,4: {r.get('steps')} {p.stderr!r}")
    # one table per step
    r, _ = steps_json(path, "--per-step")
    per = [(x["step"], x["name"], x["dur_ns"], counts(x["analysis"])) for x in r.get("per_step", [])]
    check([x[:3] for x in per] == [(3, "ProfilerStep#3", 1000 * US), (4, "ProfilerStep#4", 1000 * US),
                                   (5, "ProfilerStep#5", 1000 * US)] and per[1][3] == STEP4, f"--per-step {per}")
    c = mlprof("analyze", path, "--per-step", "--steps", "4-5", "--format", "csv", "-t", "0")
    got = sorted((r["step"], r["name"], r["count"]) for r in csv.DictReader(io.StringIO(c.stdout)))
    check(c.stdout.startswith("step,name,category,") and c.stdout.count("step,") == 1 and
          ("4", "relu_kernel", "1") in got and ("5", "sgemm", "1") in got and len(got) == 8 + 4,
          f"--per-step csv {got}")
    t = mlprof("analyze", path, "--per-step", "-t", "1").stdout
    check(t.startswith("steps: 3 of 4 (ProfilerStep#3-5), ") and t.count("\n== ProfilerStep#") == 3
          and "== ProfilerStep#4: 1.000 ms, " in t, f"--per-step table:\n{t}")
    # kernels: the GPU work of the chosen steps only
    k = mlprof("kernels", path, "--steps", "4", "--format", "json")
    try:
        a = json.loads(k.stdout)["analysis"]
        check((a["gpu_events"], a["kernel_time_ns"]) == (2, 300 * US), f"kernels --steps 4: {a['gpu_events']}, "
              f"{a['kernel_time_ns']}")
    except (ValueError, KeyError) as e:
        check(False, f"kernels --steps 4 JSON: {e} {k.stdout[:300]!r} {k.stderr!r}")
    # mistakes: exit 2
    for bad in (["--steps", "5-3"], ["--steps", "x"], ["--steps", "4,"]):
        p = mlprof("analyze", path, *bad, expect=2)
        check("--steps" in p.stderr, f"{bad}: {p.stderr!r}")
    # diff: each run restricted to the same steps
    slower = [dict(e, dur=400) if e.get("cat") == "kernel" and e["args"]["correlation"] == 4 else e
              for e in STEP_EVENTS]
    path5 = write("steps_slower_5.json", {"traceEvents": slower})
    for step, want in (("4", {}), ("5", {"sgemm": 200 * US})):
        d = mlprof("diff", path, path5, "--steps", step, "--format", "json", "-t", "0")
        try:
            rows = json.loads(d.stdout)["rows"]
            got = {r["key"]: r["delta_ns"] for r in rows if r["delta_ns"]}
            check(got == want and len(rows) == len(STEP4 if step == "4" else {1, 2, 3, 4}),
                  f"diff --steps {step}: {got} {len(rows)} rows")
        except (ValueError, KeyError) as e:
            check(False, f"diff --steps {step}: {e} {d.stdout[:200]!r}")
    mlprof("diff", path, path5, "--per-step", expect=2)

    # mlprof's frames: passes of the most frequent frame, one still open when the trace was written
    def frame(name, fid, b, e, unfinished=False):
        args = {"unfinished": True} if unfinished else {}
        return [{"ph": "b", "name": name, "cat": "app", "pid": 1, "tid": 1, "id": str(fid), "ts": b, "args": args},
                {"ph": "e", "name": name, "cat": "app", "pid": 1, "tid": 1, "id": str(fid), "ts": e}]
    frames = write("frames.json", {"traceEvents": frame("batch", 21, 0, 100) + frame("batch", 42, 100, 200) +
                                   frame("batch", 63, 200, 300, unfinished=True) + frame("epoch", 7, 0, 300) + [
        x("load", "app", 10, 20, 1, 1), x("load", "app", 110, 20, 1, 1), x("step", "app", 150, 30, 1, 1),
        x("load", "app", 210, 20, 1, 1), x("other thread", "app", 120, 5, 1, 2)]})
    r, p = steps_json(frames, "--steps", "all")
    check(r.get("steps") == {"source": "batch", "chosen": [1, 2], "left_out": [3], "incomplete": 3}
          and counts(r.get("analysis", {"rows": []})) == {"load": 2, "step": 1, "other thread": 1}
          and "batch 3, the last step, is left out as incomplete: it was still open when the trace was written"
          in p.stderr, f"frames: {r.get('steps')} {counts(r.get('analysis', {'rows': []}))} {p.stderr!r}")
    # no steps at all: the whole trace, and said
    none = write("no_steps.json", {"traceEvents": [x("a", "op", 0, 10, 1, 1)]})
    r, p = steps_json(none, "--steps", "all")
    check(counts(r.get("analysis", {"rows": []})) == {"a": 1} and r.get("steps", {}).get("chosen") == []
          and "no ProfilerStep#N range and no mlprof frame" in p.stderr, f"no steps: {r} {p.stderr!r}")
    r, p = steps_json(none, "--per-step")
    check(r.get("per_step") == [] and counts(r.get("analysis", {"rows": []})) == {"a": 1}, f"no steps, per step: {r}")
    c = mlprof("analyze", none, "--per-step", "--format", "csv").stdout.splitlines()
    check(len(c) == 2 and c[0].startswith("step,name,") and c[1].startswith(",a,op,1,"), f"no steps, CSV: {c}")


def test_thread_minus_one_is_a_thread(_):
    """Older Kineto names its GPU track with a thread_name on tid -1 ("Device
    0"): a thread's name, not the process's, in analyze and through merge."""
    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": -1, "args": {"name": "Device 0"}},
        {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 0, "tid": 7, "ts": 10, "dur": 5},
        {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": -1, "ts": 12, "dur": 2}]}
    path = write("device_minus_one.json", trace)
    by_process, _ = analyze_json(path, "--aggregate-by", "process")
    check([r["key"] for r in by_process["rows"]] == ["0 (python3)"], f"the process keeps its name: {by_process['rows']}")
    by_thread, _ = analyze_json(path, "--aggregate-by", "thread")
    check(sorted(r["key"] for r in by_thread["rows"]) == ["0:-1 (Device 0)", "0:7"], f"threads: {by_thread['rows']}")
    merged = os.path.join(OUT, "device_minus_one.merged.json")
    mlprof("merge", path, path, "-o", merged)
    with open(merged) as f:
        meta = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "M"]
    check(sorted(e["args"]["name"] for e in meta if e["name"] == "thread_name" and e["tid"] == -1)
          == ["Device 0", "Device 0"], f"merge keeps the thread -1's name: {meta}")
    check(not [e for e in meta if e["name"] == "process_name" and "Device" in e["args"]["name"]],
          f"merge names no process after the thread: {meta}")


def main():
    os.makedirs(OUT, exist_ok=True)
    path = write("kineto.json", TRACE)
    for test in (test_envelope_and_gpu_annotations, test_pytorch_argument_names, test_missing_grouping_key,
                 test_steps, test_thread_minus_one_is_a_thread):
        try:
            test(path)
        except Exception as e:  # a crash in one test is a failure, and the others still run
            check(False, f"{test.__name__}: {type(e).__name__}: {e}")
    print(f"analyze_kineto: {len(failures)} checks failed" if failures else "analyze_kineto: all checks passed")
    sys.exit(1 if failures else 0)


main()
