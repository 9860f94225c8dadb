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
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"


def counter_trace(drop_launch=False):
    """PyTorch's CUPTI counter trace (profiler_metrics, measure per kernel):
    cuda_profiler_range events with no correlation id, their ts and dur
    spreading the trace's span evenly, the counters in their args; the CPU
    side as usual. Four kernel launches: cudaLaunchKernel under aten::addmm
    (under aten::linear), cudaLaunchKernelExC under aten::relu, Triton's
    cuLaunchKernel, and a cudaLaunchKernel whose driver call cuLaunchKernel is
    recorded inside it (one launch), with a cudaMemcpyAsync that launches no
    kernel."""
    cpu = dict(pid=1000, tid=1000)
    ev = [meta("process_name", 0, 0, name="python3"), meta("process_labels", 0, 0, labels="GPU 0"),
          x("aten::linear", "cpu_op", 0, 105, **cpu), x("aten::addmm", "cpu_op", 10, 90, **cpu),
          x("cudaLaunchKernel", "cuda_runtime", 20, 10, correlation=1, **cpu),
          x("cudaMemcpyAsync", "cuda_runtime", 40, 5, correlation=2, **cpu),
          x("aten::relu", "cpu_op", 110, 80, **cpu),
          x("cudaLaunchKernelExC", "cuda_runtime", 120, 5, correlation=3, **cpu),
          x("triton_poi_fused_add_0", "cpu_op", 300, 100, **cpu),
          x("cuLaunchKernel", "cuda_driver", 310, 10, correlation=4, **cpu),
          x("aten::mul", "cpu_op", 490, 30, **cpu),
          x("cudaLaunchKernel", "cuda_runtime", 500, 10, correlation=5, **cpu),
          x("cuLaunchKernel", "cuda_driver", 502, 6, correlation=6, **cpu)]
    if drop_launch:
        ev = [e for e in ev if e.get("name") != "cudaLaunchKernelExC"]
    # the ranges: 600 us of trace over 4 ranges, 150 us each, whatever the kernels took
    ranges = [("ampere_sgemm_32x32", {FFMA: 1000000, "dram__bytes_read.sum": 4000000, "dram__bytes_write.sum": 1000000}),
              ("relu_kernel", {"dram__bytes_read.sum": 8192, "dram__bytes_write.sum": 8192}),
              ("triton_poi_fused_add_0", {FFMA: 0, "dram__bytes_read.sum": 4096, "kineto__tensor_core_insts": 512}),
              ("mul_kernel", {FFMA: 1000000, "gpu__time_duration.sum": 2000})]
    for n, (name, counters) in enumerate(ranges):
        ev.append(x(name, "cuda_profiler_range", n * 150, 150, 0, 0, **counters))
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], "traceEvents": ev}


def test_counter_ranges():
    path = write("cupti_counters.json", counter_trace())
    k = kernels_json(path)
    check(k.get("gpu_events") == 0 and k.get("kernel_time_ns") == 0 and k.get("devices") == [],
          f"counter ranges: no GPU time from a range's dur: {k.get('gpu_events')} {k.get('kernel_time_ns')}")
    km = {r["name"]: r for r in k.get("kernel_metrics", [])}
    g = km.get("ampere_sgemm_32x32", {})
    check((g.get("count"), g.get("gpu_time_ns"), g.get("gflops"), g.get("dram_gbps"), g.get("flops"), g.get("bytes"),
           g.get("arithmetic_intensity")) == (1, None, None, None, 2e6, 5e6, 0.4),
          f"counter ranges: FLOPs and bytes, but no time or rate from the placeholder dur: {g}")
    m = km.get("mul_kernel", {})
    # 2e6 FLOPs (an FMA is two) over the measured 2 us: 1000 GFLOP/s
    check((m.get("gpu_time_ns"), m.get("gflops"), m.get("flops")) == (2000, 1000, 2e6),
          f"counter ranges: a measured gpu__time_duration gives time and rate: {m}")
    cr = k.get("counter_ranges", {})
    check((cr.get("count"), cr.get("by_launch_order"), cr.get("without_operators"), cr.get("kernel_launches"),
           cr.get("mismatches")) == (4, 4, 0, 4, []),
          f"counter ranges: each given its launch by launch order: {dict((a, b) for a, b in cr.items() if a != 'rows')}")
    metrics = [FFMA, "dram__bytes_read.sum", "dram__bytes_write.sum", "kineto__tensor_core_insts",
               "gpu__time_duration.sum"]
    check(cr.get("metrics") == metrics, f"counter ranges: one column per metric found: {cr.get('metrics')}")
    rows = [(r["index"], r["device"], r["name"], r["op_stack"], r["bottom_op"], r["top_op"]) for r in cr.get("rows", [])]
    check(rows == [(0, 0, "ampere_sgemm_32x32", "aten::linear > aten::addmm", "aten::addmm", "aten::linear"),
                   (1, 0, "relu_kernel", "aten::relu", "aten::relu", "aten::relu"),
                   (2, 0, "triton_poi_fused_add_0", "triton_poi_fused_add_0", "triton_poi_fused_add_0",
                    "triton_poi_fused_add_0"),
                   (3, 0, "mul_kernel", "aten::mul", "aten::mul", "aten::mul")],
          f"counter ranges: the i-th range, the i-th launch's operators: {rows}")
    counters = [r["counters"] for r in cr.get("rows", [])]
    check(counters[2:3] == [{FFMA: 0, "dram__bytes_read.sum": 4096, "dram__bytes_write.sum": None,
                             "kineto__tensor_core_insts": 512, "gpu__time_duration.sum": None}],
          f"counter ranges: raw counters, null where a range lacks one: {counters[2:3]}")
    p = mlprof("kernels", path, "--format", "csv")
    table = list(csv.reader(io.StringIO(p.stdout)))
    check(table[:1] == [["index", "device", "name", "op_stack", "bottom_op", "top_op"] + metrics],
          f"counter ranges: the CSV's columns: {table[:1]}")
    check(table[1:2] == [["0", "0", "ampere_sgemm_32x32", "aten::linear > aten::addmm", "aten::addmm", "aten::linear",
                          "1000000", "4000000", "1000000", "", ""]] and len(table) == 5,
          f"counter ranges: the CSV's rows: {table[1:2]} ({len(table)} lines)")
    p = mlprof("kernels", path)
    check("  [1] " + FFMA in p.stdout and "  [5] gpu__time_duration.sum" in p.stdout
          and "4 ranges: 0 with their own operators (mlprof's), 4 given those of their kernel launch by launch order"
          in p.stdout, f"counter ranges: the table's legend\n{p.stdout}")
    line = next((ln for ln in p.stdout.splitlines() if ln.strip().startswith("0  ampere_sgemm_32x32")), "")
    check(line.split() == ["0", "ampere_sgemm_32x32", "aten::addmm", "aten::linear", "1e+06", "4e+06", "1e+06", "-",
                           "-"], f"counter ranges: a row of the table: {line!r}")
    sg = next((ln for ln in p.stdout.splitlines() if ln.startswith("  ampere_sgemm_32x32")), "")
    check(sg.split()[1:5] == ["1", "-", "-", "-"], f"counter ranges: no GPU time or GFLOP/s from dur: {sg!r}")

    # a launch missing: counts differ, so no range is given operators, and that is said
    path = write("cupti_counters_mismatch.json", counter_trace(drop_launch=True))
    p = mlprof("kernels", path, "--format", "json")
    cr = json.loads(p.stdout).get("counter_ranges", {}) if p.returncode == 0 else {}
    check((cr.get("by_launch_order"), cr.get("without_operators"), cr.get("mismatches"))
          == (0, 4, [{"device": 0, "ranges": 4, "launches": 3}])
          and all(r["op_stack"] is None for r in cr.get("rows", [])),
          f"counter ranges: counts that differ give no operators: {cr}")
    check("device 0 has 4 counter ranges but 3 kernel launches: their operators are unknown" in p.stderr,
          f"counter ranges: the mismatch said on standard error: {p.stderr!r}")


# ---------------------------------------------------------------------------
def main():
    os.makedirs(OUT, exist_ok=True)
    for test in (test_string_stream_tids, test_device_labels, test_counter_ranges):
        test()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("analyze_gpu_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
