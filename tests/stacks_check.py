#!/usr/bin/env python3
"""stacks_check.py - the sampling key and mlprof flame (src/hw/stacks.c,
src/analyze/flame.c) with perf_event's samples: what stacks_common.py
expects of any source from stacks_target.c's known CPU shares (hot_a/b/c's
shares, the whole recursion, span_b's samples, the thread's, the folded
output and SVG, mlprof run --sample), and perf_event's own:
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
import mmap
import os
import pwd
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stacks_common import (RECURSE_DEPTH, SVG_NS, check_recursion, check_run_sample, check_stack_shares,  # noqa: E402
                           check_trace, deepest_recursion, fail, flame_svg, folded, parse_args, run_target,
                           sampling_info)

USAGE = "stacks_check.py MLPROF STACKS_TARGET OUTDIR preload-ok|no-preload [STACKS_TARGET_NOFP]"


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
    doc, _ = run_target(nofp, trace, 1000, 1600)
    info = doc["otherData"]["sampling"]
    if not info.get("unwind", "").startswith("dwarf"):
        fail("stacks_target_nofp did not unwind by DWARF: %r" % info)
    stacks = folded(mlprof, trace)
    check_stack_shares("without frame pointers (dwarf)", stacks)
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
    check_recursion("without frame pointers (dwarf)", stacks)
    deep = [f for f, _ in stacks if "recurse" in f]
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
    titles = [t.text for t in flame_svg(mlprof, trace, os.path.join(out, "flame_nofp.svg")).iter(SVG_NS + "title")]
    if not any(t.startswith("hot_a (") and "%) stacks_target.c:" in t for t in titles):
        fail("the SVG's hover text of hot_a has no file:line: %r" % [t for t in titles if "hot_a" in t])
    # a copy too small for the recursion: its walks stop short, counted as off_copy
    small, _ = run_target(nofp, os.path.join(out, "stacks_nofp_1k.json"), 1000, 200, "sampling_stack=1K")
    sinfo = small["otherData"]["sampling"]
    sdeep = deepest_recursion(folded(mlprof, os.path.join(out, "stacks_nofp_1k.json")))
    print("  sampling_stack=1K: %d bytes copied, deepest recursion %d, walks %r"
          % (sinfo.get("stack_bytes"), sdeep, sinfo.get("unwind_stops")))
    if sinfo.get("stack_bytes") != 1024 or sdeep >= RECURSE_DEPTH or not sinfo["unwind_stops"]["off_copy"]:
        fail("sampling_stack=1K: the recursion's walks are not cut and counted: %r" % sinfo)
    stops = info.get("unwind_stops", {})
    print("DWARF unwind on the reader thread: %s ns/sample, %s frames/sample; walks %r"
          % (info.get("unwind_ns_per_sample"), info.get("unwind_frames_per_sample"), stops))
    print("lost at 1 kHz: %d kernel records lost, %d samples kept" % (info["lost_kernel"], info["samples"]))
    doc, _ = run_target(nofp, os.path.join(out, "stacks_nofp_10k.json"), 10000, 1000)
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
    check_stack_shares("without libdw, by leaf", folded(mlprof, trace), by_leaf=True)


# A process of nobody's that holds perf_event rings of about PAGES pages in
# all (the user's locked-memory budget, shared by all its processes), until
# its stdin closes.
HOLDER = r"""
import ctypes, mmap, struct, sys
want, page = int(sys.argv[1]), mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
attr = bytearray(128)
struct.pack_into("IIQ", attr, 0, 1, 128, 0)            # PERF_TYPE_SOFTWARE, its size, CPU_CLOCK
struct.pack_into("Q", attr, 40, 1 | 1 << 5 | 1 << 6)   # disabled, exclude_kernel, exclude_hv
buf = (ctypes.c_char * 128).from_buffer(attr)
held, maps = 0, []
while want - held >= 2:
    k = 1
    while 1 + 2 * k <= want - held:
        k *= 2
    fd = libc.syscall(298, buf, 0, -1, -1, 8)          # this thread, any CPU, FD_CLOEXEC
    if fd < 0:
        sys.exit("perf_event_open: errno %d" % ctypes.get_errno())
    maps.append(mmap.mmap(fd, (1 + k) * page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
    held += 1 + k
print(held, flush=True)
sys.stdin.read()
"""


def check_locked_memory(target, out):
    """As nobody with ulimit -l 0: the rings fit the user's budget on every
    CPU; with the budget nearly spent, the CPUs left without a ring are
    counted and said (perf), or the timer signal takes over (auto)."""
    if os.uname().machine != "x86_64":
        return print("SKIP locked memory: the holder's perf_event_open number is x86-64's")
    if os.geteuid() != 0:
        return print("SKIP locked memory: not root, cannot run a process as nobody")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return print("SKIP locked memory: no user nobody")

    def as_nobody():
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    if subprocess.run(["/bin/sh", "-c", 'test -x "$0"', target], preexec_fn=as_nobody).returncode != 0:
        # a checkout in a private folder (a mktemp -d, a home) is out of another user's reach
        return print("SKIP locked memory: nobody cannot run the build's programs from this folder")
    try:
        with open("/proc/sys/kernel/perf_event_mlock_kb") as f:
            mlock_kb = int(f.read())
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = int(f.read())
    except OSError as e:
        return print("SKIP locked memory: %s" % e)
    if paranoid == -1:
        return print("SKIP locked memory: kernel.perf_event_paranoid is -1 (no limit)")
    page = mmap.PAGESIZE
    budget = mlock_kb * 1024 // page * os.sysconf("SC_NPROCESSORS_ONLN")  # pages, for the user
    ncpu = os.sysconf("SC_NPROCESSORS_CONF")
    work = os.path.join(out, "nobody")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o777)

    def run(name, *keys):
        trace = os.path.join(work, name)
        r = subprocess.run([target, trace, "1000", "300", *keys], capture_output=True, text=True, timeout=300,
                           preexec_fn=as_nobody)
        if r.returncode != 0:
            fail("as nobody, %s: status %d: %s" % (" ".join(keys), r.returncode, r.stderr))
        with open(trace) as f:
            return json.load(f)["otherData"]["sampling"], r.stderr

    # the budget alone: rings of one size on every CPU, none refused (4 kHz
    # with 16 KiB copies wanted 1 MiB or more a CPU, past the default budget)
    info, err = run("fits.json", "sampling=4000", "sampling_source=perf", "sampling_stack=16K")
    if info.get("refused"):
        return print("SKIP locked memory: perf_event refuses nobody: %s" % info["refused"])
    print("as nobody, ulimit -l 0: rings of %s KiB on %d CPUs (budget %d KiB), cpus_without_ring %s" %
          (info.get("ring_kib"), ncpu, budget * page // 1024, info.get("cpus_without_ring", 0)))
    if info.get("cpus_without_ring") or "some CPUs" in err:
        # the budget is the user's, over all its processes: another check
        # beside this one runs nobody's too, whose rings take part of it
        # (sized to it, they fit when alone: ring_kib is checked below): a
        # CPU left without one must then be counted and said, never silent
        if not (info.get("cpus_without_ring") and "some CPUs" in err):
            fail("the rings do not fit the budget on every CPU, and that is not both counted and said: %r, %r"
                 % (info, err))
        print("as nobody: a CPU left without a ring, counted and said (another process of nobody's, such as "
              "a second check beside this one, holds part of the user's budget)")
    if info.get("ring_kib") is None or (info["ring_kib"] * 1024 // page + 1) * ncpu > budget:
        fail("ring_kib %r past the budget of %d pages on %d CPUs" % (info.get("ring_kib"), budget, ncpu))

    # another of nobody's processes holds all but about 20 pages: one ring
    # of the smallest size (17 pages) fits, not one on each CPU
    if ncpu < 2:
        return print("SKIP locked memory, a CPU without a ring: one CPU")
    python = next((p for p in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")
                   if subprocess.run(["/bin/sh", "-c", 'test -x "$0"', p], preexec_fn=as_nobody).returncode == 0),
                  None)
    if python is None:
        return print("SKIP locked memory, a CPU without a ring: nobody can run no Python (%s)" % sys.executable)
    holder = subprocess.Popen([python, "-c", HOLDER, str(budget - 20)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, preexec_fn=as_nobody)
    try:
        held = holder.stdout.readline().strip()
        if not held.isdigit():
            fail("the holder of locked memory did not start (status %r)" % holder.poll())
        print("another process of nobody's holds %s of %d pages" % (held, budget))
        info, err = run("perf.json", "sampling_source=perf")
        print("sampling_source=perf: cpus_without_ring %s, %d samples; stderr: %s" %
              (info.get("cpus_without_ring"), info.get("samples", 0), err.strip()))
        if not info.get("cpus_without_ring") or info.get("source") != "perf":
            fail("sampling_source=perf: the CPUs without a ring are not counted: %r" % info)
        if "sampling on some CPUs" not in err or "got no ring buffer" not in err or "lost" not in err:
            fail("sampling_source=perf: the CPUs without a ring were not said on stderr: %r" % err)
        info, err = run("auto.json")
        print("sampling_source=auto: source %s, cpus_without_ring %s, %d samples" %
              (info.get("source"), info.get("cpus_without_ring"), info.get("samples", 0)))
        if info.get("source") != "signal" or not info.get("cpus_without_ring") or \
                "no ring buffer" not in info.get("perf_refused", ""):
            fail("sampling_source=auto: the timer signal did not take over: %r" % info)
        if "sampling with a timer signal instead" not in err or "no ring buffer" not in err:
            fail("sampling_source=auto: the fallback was not said on stderr: %r" % err)
        if not info.get("samples"):
            fail("sampling_source=auto: no samples from the timer signal: %r" % info)
    finally:
        holder.stdin.close()
        holder.wait()


def main():
    mlprof, target, out, preload_ok, nofp, _ = parse_args(USAGE)
    check_keys_refused(target, out)
    trace = os.path.join(out, "stacks.json")
    doc, r = run_target(target, trace, 1000, 1000)
    info = sampling_info(doc, r.stderr, keys=("unwind",))
    dwarf = info["unwind"].startswith("dwarf")
    print("unwinding: %s%s" % (info["unwind"], "" if dwarf else " (%s)" % info.get("unwind_fallback", "asked for")))
    if not dwarf and "DWARF unwinding" not in r.stderr:
        fail("the DWARF unwinding's absence was not said on stderr: %r" % r.stderr)
    check_trace(mlprof, trace, doc, out, folded(mlprof, trace))
    check_run_sample(mlprof, out, preload_ok)
    check_locked_memory(target, out)

    # the kernel's frame-pointer call chains, asked for
    doc, _ = run_target(target, os.path.join(out, "stacks_fp.json"), 1000, 1000, "sampling_unwind=fp")
    if not doc["otherData"]["sampling"]["unwind"].startswith("fp"):
        fail("sampling_unwind=fp: otherData.sampling.unwind is %r" % doc["otherData"]["sampling"]["unwind"])
    stacks = folded(mlprof, os.path.join(out, "stacks_fp.json"))
    check_stack_shares("sampling_unwind=fp", stacks)
    check_recursion("sampling_unwind=fp", stacks)

    if nofp and dwarf:
        check_dwarf(mlprof, nofp, out)
        check_without_libdw(mlprof, nofp, out)
    elif nofp:
        print("SKIP: the DWARF checks without frame pointers: %s" % info.get("unwind_fallback", "?"))
        run_target(nofp, os.path.join(out, "stacks_nofp.json"), 1000, 1000)
        check_stack_shares("without frame pointers, by leaf", folded(mlprof, os.path.join(out, "stacks_nofp.json")),
                           by_leaf=True)
    print("PASS")


if __name__ == "__main__":
    main()
