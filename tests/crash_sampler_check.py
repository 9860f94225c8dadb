#!/usr/bin/env python3
"""crash_sampler_check.py - a crash on mlprof's own sampler thread still
writes the trace (the crash's dump must not wait for good on a lock that
thread held). Under gdb, with the preload library and the timer-signal
sampler (sampling_source=signal), the program is stopped on the "mlprof
stacks" thread (1) at mlprof__unwind's entry, (2) inside libdw's walk
(dwfl_frame_pc, libdw's lock held), and SIGSEGV is delivered to that thread
there. Each run must end by SIGSEGV (not the preload's SIGALRM, which ends a
dump that hangs) with a whole trace; in (2) otherData.sampling says that the
source lines were left out. Skipped (77), said, without gdb or ptrace, or
where the timer-signal sampler or libdw cannot run.

Usage: crash_sampler_check.py PRELOAD SPIN OUTDIR
"""
import json
import os
import shutil
import subprocess
import sys

SKIP = 77


def run(preload, spin, out, where, ignore):
    path = os.path.join(out, where + ".json")
    if os.path.exists(path):
        os.remove(path)
    rt = " ".join("SIG%d" % s for s in range(32, 65))
    cmd = ["gdb", "-batch", "-nx",
           "-ex", "set pagination off", "-ex", "set confirm off",
           "-ex", "set environment LD_PRELOAD=" + preload, "-ex", "set environment MLPROF_FILENAME=" + path,
           "-ex", "set environment MLPROF_AUTOSTART=true", "-ex", "set environment MLPROF_HOOKS=none",
           "-ex", "set environment MLPROF_SAMPLING=1000", "-ex", "set environment MLPROF_SAMPLING_SOURCE=signal",
           "-ex", "handle %s nostop noprint pass" % rt,
           "-ex", "handle SIGALRM nostop print pass", "-ex", "handle SIGSEGV nostop print pass",
           "-ex", "set breakpoint pending on", "-ex", "break " + where, "-ex", "ignore 1 %d" % ignore,
           "-ex", "run", "-ex", "info threads", "-ex", "delete", "-ex", "signal SIGSEGV",
           "--args", spin, "20000", "exit"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    return p.stdout, path


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    preload, spin, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    if not shutil.which("gdb"):
        print("SKIP: gdb is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    failed = 0
    for where, ignore in (("mlprof__unwind", 0), ("dwfl_frame_pc", 200)):
        text, path = run(preload, spin, out, where, ignore)
        if "ptrace" in text and "Operation not permitted" in text:
            print("SKIP: gdb cannot trace here (ptrace refused):\n" + text[-2000:])
            return SKIP
        hit = [ln for ln in text.splitlines() if "hit Breakpoint 1" in ln]
        if not hit:
            if "refused" in text or "signal" not in text:
                print("SKIP: %s was never reached on the sampler thread (no timer-signal sampler or libdw here?):\n%s"
                      % (where, text[-3000:]))
                return SKIP
            print("SKIP: %s never reached:\n%s" % (where, text[-3000:]))
            return SKIP
        if "mlprof stacks" not in hit[0]:
            print("FAIL (%s): the breakpoint stopped another thread than the sampler's: %s" % (where, hit[0]))
            failed += 1
            continue
        if "SIGALRM" in text or "terminated with signal SIGSEGV" not in text:
            print("FAIL (%s): the crash's dump did not end with the SIGSEGV (a dump that hangs ends by the "
                  "preload's SIGALRM):\n%s" % (where, text[-4000:]))
            failed += 1
            continue
        if not os.path.exists(path):
            print("FAIL (%s): no trace at %s:\n%s" % (where, path, text[-4000:]))
            failed += 1
            continue
        with open(path) as f:
            trace = json.load(f)  # a whole trace: it parses
        sampling = trace.get("otherData", {}).get("sampling")
        if not isinstance(sampling, dict) or "samples" not in sampling:
            print("FAIL (%s): otherData.sampling without its counts: %r" % (where, sampling))
            failed += 1
            continue
        if len(trace.get("samples", [])) != sampling["samples"]:
            print("FAIL (%s): %d samples in the trace, otherData says %d" % (where, len(trace.get("samples", [])),
                                                                           sampling["samples"]))
            failed += 1
            continue
        if where == "dwfl_frame_pc" and "source_lines_left_out_at_crash" not in sampling:
            print("FAIL (dwfl_frame_pc): otherData.sampling does not say the source lines were left out: %r"
                  % sampling)
            failed += 1
            continue
        if where == "dwfl_frame_pc" and "source lines" not in text:
            print("FAIL (dwfl_frame_pc): stderr does not say the source lines were left out:\n" + text[-3000:])
            failed += 1
            continue
        print("ok (%s): the trace is written, %d samples%s" % (where, sampling["samples"],
              ", source lines left out (said)" if "source_lines_left_out_at_crash" in sampling else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
