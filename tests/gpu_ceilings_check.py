#!/usr/bin/env python3
"""gpu_ceilings_check.py - mlprof ceilings --gpu (src/analyze/gpu_ceilings.c)
without a GPU:
  - against fake_libcuda.c, whose made-up GPU runs the FMA kernels at 10, 20
    and 40 TFLOP/s (fp64, fp32, fp16x2) and the triad at 5 TB/s in its 4 MiB
    L2 and 1 TB/s beyond, counting the work from the PTX it is given: mlprof
    reports those rates within 1% (its FLOP and byte counts agree with its
    kernels), the L2 and DRAM points and a curve that falls past the L2, in
    the table and as JSON;
  - no driver library, a driver that sees no GPU, --device 3: exit status 3
    and a message that says which;
  - --ptx: the kernels' PTX, which ptxas compiles for sm_75 and sm_90 where
    the CUDA toolkit is installed (SKIP with the reason where it is not).
Usage: gpu_ceilings_check.py MLPROF FAKE_LIBCUDA OUTDIR
"""
import json
import os
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def run(mlprof, args, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run([mlprof, "ceilings"] + args, env=env, capture_output=True, text=True, timeout=100)


def near(got, want, what):
    print("  %s: %.4g (want %.4g)" % (what, got, want))
    if abs(got - want) > 0.01 * want:
        fail("%s is %.4g, not %.4g within 1%%" % (what, got, want))


def main():
    if len(sys.argv) != 4:
        fail("usage: gpu_ceilings_check.py MLPROF FAKE_LIBCUDA OUTDIR")
    mlprof, fake, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    fake_env = {"MLPROF_CUDA_LIBRARY": fake}

    r = run(mlprof, ["--gpu", "--json", "--repeats", "3"], fake_env)
    if r.returncode != 0:
        fail("mlprof ceilings --gpu on the fake driver: status %d: %s" % (r.returncode, r.stderr))
    gpu_json = os.path.join(out, "gpu.json")
    with open(gpu_json, "w") as f:
        f.write(r.stdout)
    doc = json.loads(r.stdout)
    print("fake GPU: %s, %d threads a launch; %s" % (doc["cpu"], doc["threads"], doc["note"]))
    if doc["cpu"] != "mlprof fake GPU" or doc.get("gpu") is not True or doc["format"] != "mlprof-ceilings-1":
        fail("the ceilings do not name the fake GPU as a GPU's: %r" % {k: doc.get(k) for k in ("cpu", "gpu", "format")})
    if "compute capability 9.0, 4 SMs" not in doc["note"] or "no tensor cores" not in doc["note"]:
        fail("the note does not describe the fake GPU and the conventions: %r" % doc["note"])
    if doc["threads"] != 4 * 2048:
        fail("the launches do not fill the GPU: %d threads" % doc["threads"])
    compute = {p["what"]: p for p in doc["compute"]}
    for what, rate in (("fp64", 10e12), ("fp32", 20e12), ("fp16", 40e12)):
        if what not in compute:
            fail("no %s peak: %r" % (what, list(compute)))
        near(compute[what]["max"], rate, what + " peak")
        if not compute[what]["min"] <= compute[what]["median"] <= compute[what]["max"]:
            fail("%s: min, median, max out of order: %r" % (what, compute[what]))
    levels = {p["what"]: p for p in doc["levels"]}
    if set(levels) != {"L2", "DRAM"}:
        fail("the levels are %r, not L2 and DRAM" % list(levels))
    near(levels["L2"]["max"], 5e12, "L2 triad")
    near(levels["DRAM"]["max"], 1e12, "DRAM triad")
    if not levels["L2"]["bytes"] <= 4 * 1048576 < levels["DRAM"]["bytes"]:
        fail("the working sets are %g (L2) and %g (DRAM) bytes, for a 4 MiB L2" % (levels["L2"]["bytes"],
                                                                                 levels["DRAM"]["bytes"]))
    curve = doc["curve"]
    print("  curve: " + ", ".join("%.0f MiB %.2g" % (p["bytes"] / 1048576, p["max"]) for p in curve))
    if len(curve) < 6:
        fail("a curve of %d points" % len(curve))
    for p in curve:
        near(p["max"], 5e12 if p["bytes"] <= 4 * 1048576 else 1e12, "curve at %.2f MiB" % (p["bytes"] / 1048576))

    r = run(mlprof, ["--gpu", "--repeats", "2"], fake_env)
    if r.returncode != 0 or "mlprof fake GPU" not in r.stdout or "no tensor cores" not in r.stdout:
        fail("the table: status %d: %s%s" % (r.returncode, r.stdout, r.stderr))
    print(r.stdout)
    if "left behind" in r.stderr:
        fail("mlprof left the driver's resources: %s" % r.stderr)
    sizes = [p["bytes"] for p in curve]
    if len(set(sizes)) != len(sizes) or any(s % (24 * doc["threads"]) for s in sizes):
        fail("the curve's working sets are not distinct whole elements per thread: %r" % sizes)
    for args, want in ((["--device", "1"], "--device chooses a GPU"), (["--gpu", "--refresh"], "measured each time"),
                       (["--gpu", "--max-size", "64M"], "not with --gpu")):
        r = run(mlprof, args, fake_env)
        if r.returncode != 2 or want not in r.stderr:
            fail("%s: status %d (want 2), %r" % (" ".join(args), r.returncode, r.stderr))

    for args, env, want in ((["--gpu"], {"MLPROF_CUDA_LIBRARY": os.path.join(out, "no-such-libcuda.so")},
                             "no NVIDIA driver"),
                            (["--gpu"], dict(fake_env, FAKE_CUDA_DEVICES="0"), "no GPU: the CUDA driver sees no device"),
                            (["--gpu", "--device", "3"], fake_env, "no GPU 3: the CUDA driver sees 1")):
        r = run(mlprof, args, env)
        print("%s %s: status %d, %s" % (" ".join(args), env.get("FAKE_CUDA_DEVICES", ""), r.returncode,
                                        r.stderr.strip()))
        if r.returncode != 3 or want not in r.stderr:
            fail("%s: status %d (want 3), stderr %r (want %r)" % (" ".join(args), r.returncode, r.stderr, want))

    r = run(mlprof, ["--ptx"], {})
    if r.returncode != 0 or ".entry mlprof_triad" not in r.stdout:
        fail("--ptx: status %d: %s" % (r.returncode, r.stderr))
    ptx = os.path.join(out, "kernels.ptx")
    with open(ptx, "w") as f:
        f.write(r.stdout)
    ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.access("/usr/local/cuda/bin/ptxas", os.X_OK)
                                      else None)
    if not ptxas:
        print("SKIP (part): ptxas is not installed (the CUDA toolkit): the PTX is not compiled")
    else:
        for arch in ("sm_75", "sm_90"):
            c = subprocess.run([ptxas, "-arch=" + arch, ptx, "-o", os.path.join(out, arch + ".cubin")],
                               capture_output=True, text=True, timeout=100)
            print("ptxas -arch=%s: status %d %s" % (arch, c.returncode, c.stderr.strip()))
            if c.returncode != 0:
                fail("ptxas -arch=%s refuses the kernels' PTX: %s" % (arch, c.stderr))
    print("PASS")


if __name__ == "__main__":
    main()
