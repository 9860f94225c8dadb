#!/usr/bin/env python3
"""`mlprof kernels` on traces of the shapes real PyTorch (Kineto) files have,
each written here with figures known to the nanosecond:

- older Kineto's string stream tids ("tid": "stream 7", categories Kernel,
  Memcpy, Runtime), which must count each kernel once, per stream, on a device
  labelled "GPU 0";
- the devices of ROCm and MTIA traces, labelled by their number and type;
- the cuda_profiler_range events of PyTorch's CUPTI counter traces, whose dur
  is a placeholder: no GPU time or rate from it, each range the op stack of
  its kernel launch (the i-th range of a device, the i-th launch), and the raw
  counters one column per metric in the table, JSON and CSV.

usage: analyze_gpu_check.py MLPROF OUTDIR
"""
import csv
import io
import json
import os
import subprocess
import sys

failures = []
MLPROF, OUT = sys.argv[1:3]


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def mlprof(*args, expect=0):
    p = subprocess.run([MLPROF, *args], capture_output=True, text=True, timeout=120)
    check(p.returncode == expect, f"mlprof {' '.join(args)}: exit {p.returncode}, wanted {expect}\n{p.stderr}")
    return p


def kernels_json(path, *opts):
    p = mlprof("kernels", path, "--format", "json", *opts)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"JSON from kernels {path}: {e}\n{p.stdout[:400]}")
        return {"devices": [], "kernel_metrics": []}


def write(name, trace):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(trace, f)
    return path


def meta(what, pid, tid, **args):
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": args}


def x(name, cat, ts, dur, pid, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


# ---------------------------------------------------------------------------
def test_string_stream_tids():
    """Kineto of 2021: GPU tracks named by string tids, categories Kernel,
    Memcpy and Runtime, the device's process named after the program."""
    host = 4242
    ev = [meta("process_name", 0, 0, name="python3"), meta("process_labels", 0, 0, labels="GPU 0"),
          meta("process_name", host, 0, name="python3"),
          meta("thread_name", 0, "stream 7", name="stream 7"), meta("thread_name", 0, "stream 20", name="stream 20"),
          # a numeric tid -1 names the device's own row in later Kineto ("Device 0")
          meta("thread_name", 0, -1, name="Device 0"),
          x("Operator", "Operator", 100, 900, host, "4242")]
    ev[-1]["name"] = "aten::mm"
    kernels = [  # name, cat, stream, ts, dur (us), correlation
        ("volta_sgemm_128x64_nn", "Kernel", 7, 200, 50, 11),
        ("volta_sgemm_128x64_nn", "Kernel", 7, 300, 30, 12),
        ("elementwise_kernel", "Kernel", 20, 310, 40, 13),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy", 20, 400, 25, 14),
    ]
    for name, cat, stream, ts, dur, corr in kernels:
        launch = "cudaMemcpyAsync" if cat == "Memcpy" else "cudaLaunchKernel"
        ev.append(x(launch, "Runtime", 110 + corr * 10, 5, host, "4242", correlation=corr, **{"external id": 1}))
        ev.append(x(name, cat, ts, dur, 0, f"stream {stream}", device=0, stream=stream, correlation=corr,
                    **{"external id": 1}))
    path = write("old_kineto_streams.json", {"schemaVersion": 1, "traceEvents": ev})
    k = kernels_json(path)
    devs = k.get("devices", [])
    check(len(devs) == 1, f"string tids: one device: {devs}")
    d = devs[0] if devs else {}
    check((d.get("kernels"), d.get("compute_ns"), d.get("memory_ns"), d.get("communication_ns"))
          == (4, 120000, 25000, 0), f"string tids: each kernel counted once: {d}")
    # busy [200,250) [300,350) [400,425) = 125 us over [200,425)
    check((d.get("busy_ns"), d.get("span_ns"), d.get("idle_ns")) == (125000, 225000, 100000),
          f"string tids: busy and idle: {d}")
    streams = {s.get("stream"): (s.get("name"), s.get("kernels"), s.get("busy_ns"), s.get("idle_ns"))
               for s in d.get("streams", [])}
    # stream 7: [200,250) [300,330); stream 20: [310,350) [400,425)
    check(streams == {7: ("stream 7", 2, 80000, 50000), 20: ("stream 20", 2, 65000, 50000)},
          f"string tids: the per-stream table, numbered from the names: {streams}")
    check(all(s.get("tid") is None for s in d.get("streams", [])),
          f"string tids: no internal number shown as a tid: {d.get('streams')}")
    check(d.get("name") == "GPU 0" and d.get("device") == 0, f"string tids: the device is GPU 0: {d}")
    check(k.get("kernel_time_ns") == 145000, f"string tids: kernel time {k.get('kernel_time_ns')}")
    p = mlprof("kernels", path)
    check("GPU 0: 4 GPU events, busy 125.000 us of 225.000 us" in p.stdout
          and "  stream 7: 2 events, busy 80.000 us" in p.stdout
          and "  stream 20: 2 events, busy 65.000 us" in p.stdout, f"string tids: the table\n{p.stdout}")
    # by thread in analyze: the names, not internal numbers
    p = mlprof("analyze", path, "--type", "Kernel", "--aggregate-by", "thread", "--format", "json")
    keys = sorted(r["key"] for r in json.loads(p.stdout)["rows"]) if p.returncode == 0 else []
    check(keys == ["0:stream 20", "0:stream 7"], f"string tids: analyze's thread keys {keys}")


def test_device_labels():
    """ROCm (Kineto labels its devices GPU N, deviceProperties names them) and
    MTIA (activity under mtia_runtime and mtia_ccp_events)."""
    host = 597913
    rocm = {"schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "AMD Instinct MI250X"}, {"id": 2, "name": "AMD Radeon Graphics"}],
            "traceEvents": [meta("process_name", 2, 0, name="python3"), meta("process_labels", 2, 0, labels="GPU 2"),
                            meta("thread_name", 2, 0, name="stream 0 "),
                            x("hipLaunchKernel", "cuda_runtime", 10, 5, host, host, correlation=5),
                            x("Cijk_Alik_Bljk_SB", "kernel", 20, 17.6, 2, 0, device=2, stream=0, correlation=5)]}
    k = kernels_json(write("rocm_labels.json", rocm))
    d = (k.get("devices") or [{}])[0]
    check((d.get("name"), d.get("device"), d.get("device_name"), d.get("compute_ns"))
          == ("GPU 2", 2, "AMD Radeon Graphics", 17600), f"ROCm: the device labelled by number and type: {d}")
    p = mlprof("kernels", write("rocm_labels.json", rocm))
    check("GPU 2: 1 GPU events" in p.stdout and "device: AMD Radeon Graphics" in p.stdout
          and "stream 0: 1 events" in p.stdout, f"ROCm: the table\n{p.stdout}")
    mtia = {"schemaVersion": 1, "traceEvents": [
        meta("process_name", 1, 0, name="trainer"),
        x("aten::mm", "cpu_op", 0, 100, 77, 77),
        x("mtiaLaunchKernel", "mtia_runtime", 10, 5, 77, 77, correlation=9),
        x("mm_kernel", "mtia_ccp_events", 30, 12, 1, 3, device=1, correlation=9)]}
    k = kernels_json(write("mtia.json", mtia))
    d = (k.get("devices") or [{}])[0]
    check((d.get("name"), d.get("compute_ns"), k.get("linked_by_correlation")) == ("MTIA 1", 12000, 1),
          f"MTIA: device activity read and linked to its launch: {d} {k.get('linked_by_correlation')}")
    ops = [(o["name"], o["gpu_time_ns"]) for o in k.get("operators", [])]
    check(ops == [("aten::mm", 12000)], f"MTIA: the launching operator {ops}")


# ---------------------------------------------------------------------------
def main():
    os.makedirs(OUT, exist_ok=True)
    for test in (test_string_stream_tids, test_device_labels):
        test()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("analyze_gpu_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
