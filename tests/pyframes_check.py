#!/usr/bin/env python3
"""pyframes_check.py - the Python frames of sampled threads (src/hw/pyframes.c),
inside real interpreters, through a test-only SIGPROF sampler
(tests/pyframes_shim.c, loaded with ctypes) that calls the capture from its
handler on the sampled thread and resolves and interleaves at the end:
  - the self-test at init passes (the struct offsets of this version are the
    running interpreter's); an unsupported version is refused with a reason;
  - hot_a and hot_b get 70% and 30% of the CPU (the same loop, 7 and 3
    rounds: the shares come from the work, not the clock): their shares
    among the samples within 5 points, each under work, with a line inside
    its own body and this file's name;
  - a nested call outer -> middle -> inner -> (ctypes) shim_raise: the
    Python frames in that order, interleaved with the native ones py-spy's
    way: native startup frames, then the Python ones in place of the eval
    loop, then ctypes/libffi and the handler's native frames;
  - a thread started in Python gets its own frames (thread_fn, not outer);
  - a layout made wrong on purpose (MLPROF_PYFRAMES_BREAK_LAYOUT=1) fails
    the self-test, and a version made unknown (=2) is refused: each with
    the reason, no crash;
  - init works from a thread that holds the GIL too (ctypes.PyDLL: the
    self-test runs there) as from one that does not (CDLL: on its own thread).
Each interpreter given is run (missing ones are said and skipped); exits
77 (skip) when none of them is supported.
And mlprof flame draws Python frames in cool colours, native ones in warm;
mlprof run --sample on a Python program: its Python frames in the trace with
the right shares and its thread apart.
Usage: pyframes_check.py SHIM OUTDIR MLPROF PYTHON... ; or: pyframes_check.py --target SHIM OUT
"""
import ctypes
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time


def hot_loop(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def hot_a(n):
    return hot_loop(7 * n)  # 70% of the work


def hot_b(n):
    return hot_loop(3 * n)  # 30% of the work


def work(lib, samples, n):
    while lib.shim_count() < samples:  # rounds until enough samples, whatever the clock's rate
        hot_a(n)
        hot_b(n)


def inner(lib):
    lib.shim_raise()


def middle(lib):
    inner(lib)


def outer(lib):
    middle(lib)


def torch_mm(torch, a, b):
    return torch.mm(a, b)


def torch_work(lib, torch, samples):
    a, b = torch.rand(256, 256), torch.rand(256, 256)
    while lib.shim_count() < samples:
        torch_mm(torch, a, b)


def outer_bench(lib):
    return middle_bench(lib)


def middle_bench(lib):
    return lib.shim_bench(200000)


def thread_inner(lib):
    lib.shim_raise()


def thread_fn(lib):
    thread_inner(lib)


def has_torch():
    try:
        import importlib.util
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def target(shim, out, gil):
    # ctypes.CDLL lets go of the GIL in calls: init runs its self-test on a
    # thread of its own; PyDLL keeps it: init runs it on the caller's
    lib = ctypes.PyDLL(shim) if gil else ctypes.CDLL(shim)
    lib.shim_dump.argtypes = [ctypes.c_char_p]
    buf = ctypes.create_string_buffer(512)
    if os.environ.get("PYFRAMES_INIT") == "nowait":  # mlprof's reader's way: asks again until it has an answer
        r = lib.shim_init_nowait(buf, 512)
        polls = 0
        while r == 0 and "running" in buf.value.decode() and polls < 3000:
            time.sleep(0.01)
            polls += 1
            r = lib.shim_init_nowait(buf, 512)
        print("init asked %d times" % (polls + 1))
    else:  # waits (the self-test on its own thread where CDLL lets go of the GIL, on this one with PyDLL)
        r = lib.shim_init(buf, 512)
    print("init: %d: %s" % (r, buf.value.decode()))
    if r != 1:
        sys.exit(77)
    lib.shim_bench.restype = ctypes.c_double
    print("capture with warm caches: %.0f ns a sample" % outer_bench(lib))
    outer(lib)
    t = threading.Thread(target=thread_fn, args=(lib,))
    t.start()
    t.join()
    if not gil:
        code_reuse(lib)
        sample_work(lib)
    n = lib.shim_dump(out.encode())
    print("samples: %d" % n)
    with open(out + ".lines", "w") as f:  # where each function's body is
        for fn in (hot_a, hot_b, hot_loop, work, inner, middle, outer, thread_inner, thread_fn):
            c = fn.__code__
            last = max(l for _, _, l in c.co_lines() if l is not None)
            f.write("%s %d %d %d\n" % (fn.__name__, c.co_firstlineno, last, threading.get_native_id()))


def code_proto(lib):
    lib.shim_raise()


def code_reuse(lib):
    """Code objects made and freed one after another, each taking the
    address of the one before (CPython's allocator gives the block just
    freed): each named for what it is, not for the one that had its address
    before. The names are read 3 ms after the code object changed: the
    resolver checks a cached entry again after 2 ms, as its reader names a
    drain's samples within a few ms of taking them."""
    import types
    buf = ctypes.create_string_buffer(300)
    reread, seen, reused = 0, set(), 0
    line = code_proto.__code__.co_firstlineno + 1
    f = None
    for i in range(40):
        f = None  # the last one freed: its address is free for the next
        kw = dict(co_name="gen_%d" % i, co_filename="gen_%d.py" % i)
        if sys.version_info >= (3, 11):
            kw["co_qualname"] = "gen_%d" % i
        f = types.FunctionType(code_proto.__code__.replace(**kw), globals())
        reused += id(f.__code__) in seen
        seen.add(id(f.__code__))
        time.sleep(0.003)
        f(lib)
        reread = lib.shim_last_label(buf, 300)
        want = "gen_%d (gen_%d.py:%d)" % (i, i, line)
        if buf.value.decode() != want:
            print("code reuse: sample %d named %r, expected %r" % (i, buf.value.decode(), want))
            sys.exit(1)
    if reused and not reread:
        print("code reuse: %d addresses taken again, no cache entry read again" % reused)
        sys.exit(1)
    print("code reuse: 40 code objects named right (%d at an address used before; %d entries read again)" % (
        reused, reread))


def sample_work(lib):
    # 1000 samples: the share within 5 points is 3.5 standard deviations
    lib.shim_start(1000)
    work(lib, 1002, 20000)
    if not has_torch():
        lib.shim_stop()
    try:  # PyTorch's native frames under the Python ones, where this Python has it
        import torch
        torch.set_num_threads(1)  # its work on this thread, sampled here
    except ImportError:
        torch = None
    if torch is not None:
        lib.shim_natives(1)
        torch_work(lib, torch, lib.shim_count() + 100)
        lib.shim_natives(0)
        lib.shim_stop()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def py_frames(stack):
    """[(name, file, line)] of the Python frames, root first."""
    out = []
    for f in stack:
        m = re.match(r"py:(.*) \((.*?):(\d+)\)( \[entry\])?$", f)
        if m:
            out.append((m.group(1), m.group(2), int(m.group(3))))
    return out


def check_one(shim, outdir, python, gil=False):
    """gil: init from a thread that holds the GIL, and only the raised samples."""
    name = os.path.basename(os.path.dirname(os.path.dirname(python))) if "pyenv" in python else python
    out = os.path.join(outdir, "pyframes_%s%s.txt" % (re.sub(r"[^\w.]", "_", name), "_gil" if gil else ""))
    env = dict(os.environ, PYFRAMES_INIT="wait" if gil else "nowait")
    r = subprocess.run([python, os.path.abspath(__file__), "--target-gil" if gil else "--target", shim, out],
                       capture_output=True, text=True, timeout=240, env=env)
    python += " (init holding the GIL)" if gil else ""
    print("%s: %s" % (python, r.stdout.strip().replace("\n", "; ")))
    if r.returncode == 77:
        print("SKIP %s: %s" % (python, r.stdout.strip()))
        return False
    if r.returncode != 0:
        fail("%s: status %d: %s%s" % (python, r.returncode, r.stdout, r.stderr))
    lines = {}
    main_tid = None
    for l in open(out + ".lines"):
        fn, first, last, tid = l.split()
        lines[fn] = (int(first), int(last))
        main_tid = tid
    samples = []
    costs = None
    tagged = []  # the same samples, interleaved by the reader's way (tags)
    for l in open(out):
        if l.startswith("=tags\t"):
            tagged.append((len(samples) - 1, l.rstrip("\n").split("\t")[1].split(";")))
            continue
        if l.startswith("#costs"):
            costs = l.split()[1:]
            continue
        tid, _, rest = l.rstrip("\n").partition("\t")
        samples.append((tid, rest.split(";") if rest else []))
    if len(samples) < (2 if gil else 3):
        fail("%s: %d samples" % (python, len(samples)))
    me = os.path.basename(__file__)

    # the nested call, with its native frames (the first sample, raised in outer)
    tid, stack = samples[0]
    py = py_frames(stack)
    names = [p[0] for p in py]
    if names[-3:] != ["outer", "middle", "inner"]:
        fail("%s: nested call: Python frames %s, expected ... outer, middle, inner" % (python, names))
    for fn, f, line in py[-3:]:
        lo, hi = lines[fn]
        if f != me or not lo <= line <= hi:
            fail("%s: %s at %s:%d, expected %s:%d-%d" % (python, fn, f, line, me, lo, hi))
    first_py = next(i for i, f in enumerate(stack) if f.startswith("py:"))
    last_py = max(i for i, f in enumerate(stack) if f.startswith("py:"))
    if first_py == 0 or not any(f.startswith("c:Py_") or f == "c:main" or "start" in f for f in stack[:first_py]):
        fail("%s: no native startup frames before the Python ones: %s" % (python, stack))
    if "c:shim_raise" not in stack[last_py:]:
        fail("%s: shim_raise is not under the Python frames: %s" % (python, stack))
    if any(f.startswith("c:_PyEval_EvalFrameDefault") for f in stack):
        fail("%s: an eval-loop frame was left in place: %s" % (python, stack))
    print("%s: nested: %s" % (python, " > ".join(stack)))

    # the reader's interleaving (eval frames by address, Python frames as
    # interned tags) gives the same stacks as the one by names above
    if len(tagged) < 2:
        fail("%s: %d samples interleaved with tags, expected 2" % (python, len(tagged)))
    for i, stack_t in tagged:
        want = [re.sub(r"@lib(torch|c10)[^;]*$", "", f.replace(" [entry]", "")) for f in samples[i][1]]
        if stack_t != want:
            fail("%s: with tags:\n  %s\nby names:\n  %s" % (python, ";".join(stack_t), ";".join(want)))

    # the thread's own frames
    tid2, stack2 = samples[1]
    names2 = [p[0].split(".")[-1] for p in py_frames(stack2)]
    if tid2 == tid or names2[-2:] != ["thread_fn", "thread_inner"] or "outer" in names2:
        fail("%s: thread sample (tid %s, main %s): %s" % (python, tid2, tid, names2))

    if gil:
        return True

    # shares of hot_a and hot_b among the timer's samples
    count = {"hot_a": 0, "hot_b": 0}
    for t, stack in samples[2:]:
        py = py_frames(stack)
        names = [p[0] for p in py]
        for fn in count:
            if fn in names:
                i = names.index(fn)
                if i == 0 or names[i - 1] != "work":
                    fail("%s: %s not called from work: %s" % (python, fn, names))
                f, line = py[i][1], py[i][2]
                lo, hi = lines[fn]
                if f != me or not lo <= line <= hi:
                    fail("%s: %s at %s:%d, expected %s:%d-%d" % (python, fn, f, line, me, lo, hi))
                count[fn] += 1
    total = count["hot_a"] + count["hot_b"]
    if total < 100:
        fail("%s: only %d samples in hot_a or hot_b (of %d)" % (python, total, len(samples) - 2))
    share = 100.0 * count["hot_a"] / total
    print("%s: hot_a %.1f%%, hot_b %.1f%% of %d samples" % (python, share, 100 - share, total))

    # PyTorch: its native frames interleaved under torch_work > torch_mm
    torch_samples = [st for _, st in samples if any(f.startswith("py:torch_work ") for f in st)]
    if torch_samples:
        both = 0
        for st in torch_samples:
            i = next(k for k, f in enumerate(st) if f.startswith("py:torch_work "))
            if i + 1 < len(st) and st[i + 1].startswith("py:torch_mm ") and \
                    any("@libtorch" in f or "@libc10" in f for f in st[i + 2:]) and \
                    not any(f.startswith("py:") for f in st[i + 2:]):
                both += 1
        print("%s: torch: %d of %d samples with torch_work > torch_mm > PyTorch's native frames" % (
            python, both, len(torch_samples)))
        eg = torch_samples[len(torch_samples) // 2]
        eg = eg[next(k for k, f in enumerate(eg) if f.startswith("py:torch_work ")):]
        print("%s: torch: e.g. %s" % (python, " > ".join(f.split("@")[0] for f in eg[:8])))
        if both < len(torch_samples) // 2:
            fail("%s: torch: only %d of %d samples show both Python and PyTorch frames" % (
                python, both, len(torch_samples)))
    if abs(share - 70) > 5:
        fail("%s: hot_a has %.1f%% of the samples, expected 70 +- 5" % (python, share))
    if costs:
        c = dict(zip(costs[::2], (int(v) for v in costs[1::2])))
        print("%s: capture %.0f ns a sample (median); resolve %.0f ns a new code object, %.0f ns a cached one" % (
            python, c["capture_ns"] / max(c["captures"], 1), c["resolve_cold_ns"] / max(c["cold"], 1),
            c["resolve_warm_ns"] / max(c["warm"], 1)))
    return True


def check_broken(shim, outdir, python):
    """A layout that is not the interpreter's is refused by the self-test,
    and a version mlprof does not know is refused, each with its reason and
    without a crash."""
    out = os.path.join(outdir, "pyframes_broken.txt")
    for knob, what, said in (("1", "a wrong layout", "self-test failed"),
                             ("2", "an unknown version", "3.99 (")):
        env = dict(os.environ, MLPROF_PYFRAMES_BREAK_LAYOUT=knob, PYFRAMES_INIT="wait")
        r = subprocess.run([python, os.path.abspath(__file__), "--target", shim, out], capture_output=True,
                           text=True, timeout=240, env=env)
        if r.returncode != 77 or said not in r.stdout:
            fail("%s: %s: status %d (expected 77, refused): %s%s" % (python, what, r.returncode, r.stdout, r.stderr))
        print("%s: %s refused: %s" % (python, what, r.stdout.strip()))


def e2e_thread():
    hot_loop(3000000)


def e2e_train():
    for _ in range(400):  # about 2000 samples: the timer signal fires at the kernel's tick (250 Hz here)
        hot_a(20000)
        hot_b(20000)


def e2e_target():
    """What mlprof run samples: 70/30 in hot_a/hot_b under e2e_train, and a
    thread of its own in e2e_thread."""
    t = threading.Thread(target=e2e_thread)
    t.start()
    e2e_train()
    t.join()


def check_run(mlprof, outdir, python):
    """mlprof run --sample on a Python program: its Python frames in the
    trace (category python), with the right shares, the thread's apart.
    Skipped, said, where this mlprof does not take Python frames (the
    timer-signal sampler's hooks not wired)."""
    out = os.path.join(outdir, "pyframes_run_%d.json" % (abs(hash(python)) % 10000))
    r = subprocess.run([mlprof, "run", "--sample", "1000", "-o", out, "-q", "--", python, os.path.abspath(__file__),
                        "--e2e-target"], capture_output=True, text=True, timeout=240)
    if r.returncode != 0:
        fail("%s: mlprof run: status %d: %s" % (python, r.returncode, r.stderr))
    sampling = None
    for part in glob.glob(out + ".parts/*.json"):
        d = json.load(open(part))
        sp = d.get("otherData", {}).get("sampling")
        if sp and sp.get("samples"):
            sampling = sp
    if not sampling or "python" not in sampling:
        print("SKIP %s: mlprof run: no Python frames taken (this mlprof's sampling %s: its timer-signal "
              "sampler does not take them yet)" % (python, sampling and sampling.get("method")))
        return
    if not sampling["python"].get("frames"):
        fail("%s: mlprof run: Python frames refused: %s" % (python, sampling["python"]))
    f = subprocess.run([mlprof, "flame", out, "--folded"], capture_output=True, text=True)
    if f.returncode != 0:
        fail("%s: mlprof flame: %s" % (python, f.stderr))
    count = {"hot_a": 0, "hot_b": 0, "e2e_thread": 0}
    for line in f.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        # the Python frames only (the native ones between them, _PyEval_Vector and such, where the native
        # stack is unwound whole)
        names = [x.split(" (")[0] for x in stack.split(";") if re.search(r"\.py:\d+\)$", x)]
        for fn in count:
            if fn in names:
                count[fn] += int(n)
        if "e2e_thread" in names and "e2e_train" in names:
            fail("%s: mlprof run: the thread's frames mixed with the main thread's: %s" % (python, stack))
        if "hot_a" in names and names[names.index("hot_a") - 1] != "e2e_train":
            fail("%s: mlprof run: hot_a not under e2e_train: %s" % (python, stack))
    total = count["hot_a"] + count["hot_b"]
    if total < 500 or not count["e2e_thread"]:
        fail("%s: mlprof run: too few samples: %s" % (python, count))
    share = 100.0 * count["hot_a"] / total
    print("%s: mlprof run: hot_a %.1f%% hot_b %.1f%% (%d samples), the thread %d; %s" % (
        python, share, 100 - share, total, count["e2e_thread"], sampling["python"]))
    if abs(share - 70) > 5:
        fail("%s: mlprof run: hot_a has %.1f%% of the samples, expected 70 +- 5" % (python, share))


def check_flame(mlprof, outdir):
    """mlprof flame colours Python frames ("name (file.py:N)") apart from native ones."""
    trace = os.path.join(outdir, "pyframes_flame.json")
    frames = {"1": {"category": "python3", "name": "main"},
              "2": {"category": "python", "name": "train (main.py:12)", "parent": "1"},
              "3": {"category": "python", "name": "Model.forward (model.py:40)", "parent": "2"},
              "4": {"category": "libtorch_cpu.so", "name": "at::native::addmm_out_cpu", "parent": "3"}}
    samples = [{"cpu": 0, "pid": 1, "tid": 1, "ts": i, "name": "cpu-clock", "sf": "4", "weight": 1} for i in range(5)]
    with open(trace, "w") as f:
        json.dump({"traceEvents": [], "stackFrames": frames, "samples": samples}, f)
    svg = os.path.join(outdir, "pyframes_flame.svg")
    r = subprocess.run([mlprof, "flame", trace, "-o", svg], capture_output=True, text=True)
    if r.returncode != 0:
        fail("mlprof flame: status %d: %s" % (r.returncode, r.stderr))
    fills = {}
    for g in re.finditer(r"<title>(.*?) \(\d+ samples.*?fill=\"rgb\((\d+),(\d+),(\d+)\)", open(svg).read()):
        fills[g.group(1)] = tuple(int(v) for v in g.groups()[1:])
    for name, py in (("main", False), ("train (main.py:12)", True), ("Model.forward (model.py:40)", True),
                     ("at::native::addmm_out_cpu", False)):
        if name not in fills:
            fail("flame: no frame %r in the SVG (%s)" % (name, sorted(fills)))
        red, _, blue = fills[name]
        if py != (blue > red):
            fail("flame: %r coloured %s, expected %s" % (name, fills[name], "cool" if py else "warm"))
    print("flame: Python frames in cool colours, native ones in warm")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--e2e-target":
        e2e_target()
        return
    if len(sys.argv) == 4 and sys.argv[1] in ("--target", "--target-gil"):
        target(sys.argv[2], sys.argv[3], sys.argv[1] == "--target-gil")
        return
    if len(sys.argv) < 5:
        print(__doc__)
        sys.exit(2)
    shim, outdir, mlprof = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    check_flame(mlprof, outdir)
    ran, seen = 0, set()
    for python in sys.argv[4:]:
        try:  # a name (a pyenv shim too) or a path: the interpreter it runs
            r = subprocess.run([python, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                               timeout=60)
            real = os.path.realpath(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            real = None
        if not real and re.match(r"python3\.\d+$", python):  # pyenv's, where its shims do not run it
            try:
                root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=60).stdout.strip()
            except (OSError, subprocess.TimeoutExpired):
                root = ""
            found = sorted(glob.glob(os.path.join(root, "versions", python[6:] + ".*", "bin", python))) if root else []
            real = os.path.realpath(found[-1]) if found else None
        if not real:
            print("SKIP %s: not installed" % python)
            continue
        python = real
        if real in seen:
            continue
        seen.add(real)
        if check_one(shim, outdir, python):
            ran += 1
            check_one(shim, outdir, python, gil=True)
            check_broken(shim, outdir, python)
            check_run(mlprof, outdir, python)
    if not ran:
        print("SKIP: no supported Python among %s" % sys.argv[4:])
        sys.exit(77)
    print("OK: %d interpreters" % ran)


if __name__ == "__main__":
    main()
