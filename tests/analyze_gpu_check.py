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

- the idle time of each stream broken down as HTA's idle time breakdown
  (host wait, kernel wait under --kernel-wait, other), kernel launch
  statistics (launch delay, call and kernel durations, HTA's outliers under
  --runtime-cutoff and --launch-delay-cutoff), and the overlap of compute,
  communication and memory as the union of their intervals beside the summed
  durations; each in the table, JSON and CSV (--csv-table), and per step.

usage: analyze_gpu_check.py MLPROF OUTDIR
"""
import csv
import io
import json
import os
import sys

from analyze_util import check, command, failures

MLPROF, OUT = sys.argv[1:3]


mlprof = command(MLPROF)


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
# HTA's analyses. Times in us; every figure below is worked out by hand.
HOST = 100


def launch(name, ts, dur, corr, cat="cuda_runtime"):
    return x(name, cat, ts, dur, HOST, HOST, correlation=corr)


def kernel(name, ts, dur, stream, corr=None, cat="kernel", pid=0):
    args = {"device": pid, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    return x(name, cat, ts, dur, pid, stream, **args)


def hta_trace():
    """Device 0, stream 7 (gaps in us):
    K1 [100,110)      call 90+5
    K2 [110.02,120)   cuLaunchKernel 95+5: 20 ns gap, call before the end: kernel wait
    K3 [150,160)      call 130+5: after 120, the end before it: host wait 30 us
    K4 [160.03,170)   call 100+4: a 30 ns gap is not under 30 ns: other
    K5 [200,210)      call 150+60: before 170: other 30 us
    K6 [220,225)      call 110+3: other 10 us
    K9 [230,231)      no runtime call (correlation 99 has none): other 5 us
    stream 20:
    K7 Memcpy [300,302)  cudaMemcpyAsync 280+5
    K8 [400,405)         cudaGraphLaunch 390+3 (no launch record: many kernels)
                         after 302: host wait 98 us"""
    ev = [meta("process_name", 0, 0, name="python3"), meta("process_labels", 0, 0, labels="GPU 0"),
          launch("cudaLaunchKernel", 90, 5, 1), kernel("k1", 100, 10, 7, 1),
          launch("cuLaunchKernel", 95, 5, 2, cat="cuda_driver"), kernel("k2", 110.02, 9.98, 7, 2),
          launch("cudaLaunchKernel", 130, 5, 3), kernel("k3", 150, 10, 7, 3),
          launch("cudaLaunchKernelExC", 100, 4, 4), kernel("k4", 160.03, 9.97, 7, 4),
          launch("cudaLaunchKernel", 150, 60, 5), kernel("k5", 200, 10, 7, 5),
          launch("cudaLaunchKernel", 110, 3, 6), kernel("k6", 220, 5, 7, 6),
          kernel("k9", 230, 1, 7, 99),
          launch("cudaMemcpyAsync", 280, 5, 7), kernel("Memcpy DtoD (Device -> Device)", 300, 2, 20, 7,
                                                       cat="gpu_memcpy"),
          launch("cudaGraphLaunch", 390, 3, 8), kernel("k8", 400, 5, 20, 8)]
    return {"schemaVersion": 1, "traceEvents": ev}


def idle_of(dev):
    return {s.get("stream"): s.get("idle_breakdown") for s in dev.get("streams", [])}


def test_idle_breakdown():
    path = write("hta_idle.json", hta_trace())
    k = kernels_json(path)
    d = (k.get("devices") or [{}])[0]
    idle = idle_of(d)
    # stream 7: host 30 us (K3); kernel 20 ns (K2); other 30 ns + 30 us + 10 us + 5 us (K4, K5, K6, K9)
    want7 = {"host_wait_ns": 30000, "host_wait_gaps": 1, "kernel_wait_ns": 20, "kernel_wait_gaps": 1,
             "other_ns": 45030, "other_gaps": 4}
    want20 = {"host_wait_ns": 98000, "host_wait_gaps": 1, "kernel_wait_ns": 0, "kernel_wait_gaps": 0,
              "other_ns": 0, "other_gaps": 0}
    check(idle == {7: want7, 20: want20}, f"idle breakdown: {idle}")
    streams = {s.get("stream"): s.get("idle_ns") for s in d.get("streams", [])}
    # the causes add up to the stream's idle time: [100,231) less 55.95 us busy; [300,405) less 7 us
    check(streams == {7: 75050, 20: 98000}, f"idle breakdown: the stream's idle time {streams}")
    check(k.get("thresholds") == {"kernel_wait_ns": 30, "runtime_cutoff_ns": 50000,
                                  "launch_delay_cutoff_ns": 100000}, f"thresholds {k.get('thresholds')}")
    # a wider kernel wait takes K4's 30 ns gap
    idle = idle_of((kernels_json(path, "--kernel-wait", "40ns").get("devices") or [{}])[0])
    check((idle.get(7) or {}).get("kernel_wait_ns") == 50 and (idle.get(7) or {}).get("other_ns") == 45000,
          f"--kernel-wait 40ns: {idle.get(7)}")
    p = mlprof("kernels", path)
    check("  stream 7: 7 events, busy 55.950 us, idle 75.050 us between them: host wait 30.000 us (1), "
          "kernel wait 20 ns (1), other 45.030 us (4)" in p.stdout, f"idle breakdown: the table\n{p.stdout}")
    p = mlprof("kernels", path, "--format", "csv", "--csv-table", "idle")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    got = [(r["device"], r["stream"], r["idle_ns"], r["host_wait_ns"], r["kernel_wait_ns"], r["other_ns"],
            r["other_gaps"]) for r in rows]
    check(got == [("GPU 0", "7", "75050", "30000", "20", "45030", "4"), ("GPU 0", "20", "98000", "98000", "0", "0", "0")],
          f"idle breakdown: the CSV {got}")
    p = mlprof("kernels", path, "--kernel-wait", "soon", expect=2)
    check("--kernel-wait" in p.stderr and "soon" in p.stderr, f"a bad --kernel-wait: {p.stderr!r}")
    p = mlprof("kernels", path, "--csv-table", "nothing", expect=2)
    check("--csv-table" in p.stderr, f"a bad --csv-table: {p.stderr!r}")


def test_launch_stats():
    path = write("hta_launches.json", hta_trace())
    k = kernels_json(path)
    lk = ((k.get("devices") or [{}])[0]).get("launches") or {}
    # launches: K1..K6 (every form of kernel launch) and the copy; not K9 (no call), not K8 (a graph)
    #   delay (kernel start - call start), call, kernel, in ns:
    #   K1 10000 5000 10000; K2 15020 5000 9980; K3 20000 5000 10000; K4 60030 4000 9970;
    #   K5 50000 60000 10000; K6 110000 3000 5000; copy 20000 5000 2000
    check((lk.get("count"), lk.get("kernel_launches"), lk.get("memory_launches")) == (7, 6, 1),
          f"launches: counted {lk}")
    # delays sorted: 10000 15020 20000 20000 50000 60030 110000; p90 at rank 5.4, p99 at 5.94
    dl = lk.get("launch_delay_ns") or {}
    check((dl.get("sum"), dl.get("min"), dl.get("p50"), dl.get("max")) == (285050, 10000, 20000, 110000)
          and abs(dl.get("mean", 0) - 285050 / 7) < 0.001 and abs(dl.get("p90", 0) - 80018) < 0.001
          and abs(dl.get("p99", 0) - 107001.8) < 0.001, f"launches: the launch delay {dl}")
    cpu, gpu = lk.get("cpu_duration_ns") or {}, lk.get("gpu_duration_ns") or {}
    check((cpu.get("sum"), cpu.get("p50"), cpu.get("max"), gpu.get("sum"), gpu.get("p50"), gpu.get("min"))
          == (87000, 5000, 60000, 56950, 9980, 2000), f"launches: call and kernel durations {cpu} {gpu}")
    # HTA's outliers: short (call <= 50 us and kernel < call): the copy; call > 50 us: K5; delay > 100 us: K6
    check((lk.get("short_gpu_kernels"), lk.get("runtime_outliers"), lk.get("launch_delay_outliers"))
          == (1, 1, 1), f"launches: outliers {lk}")
    rows = [(r["kernel"], r["launch"], r["launch_delay_ns"]) for r in lk.get("launch_delay_outlier_rows", [])]
    check(rows == [("k6", "cudaLaunchKernel", 110000)], f"launches: the delay outlier {rows}")
    rows = [(r["kernel"], r["cpu_duration_ns"]) for r in lk.get("runtime_outlier_rows", [])]
    check(rows == [("k5", 60000)], f"launches: the runtime outlier {rows}")
    lk = ((kernels_json(path, "--launch-delay-cutoff", "50us", "--runtime-cutoff", "4us").get("devices")
           or [{}])[0]).get("launches") or {}
    # delay > 50 us: K4, K6 (K5's 50 us is not over); call > 4 us: K1 K2 K3 K5 copy; short: call <= 4 us
    # and kernel shorter: none (K4 9970 > 4000, K6 5000 > 3000)
    check((lk.get("launch_delay_outliers"), lk.get("runtime_outliers"), lk.get("short_gpu_kernels"))
          == (2, 5, 0), f"launches: the cutoffs as options {lk}")
    check([r["kernel"] for r in lk.get("launch_delay_outlier_rows", [])] == ["k6", "k4"],
          f"launches: the delay outliers worst first {lk.get('launch_delay_outlier_rows')}")
    p = mlprof("kernels", path, "--format", "csv", "--csv-table", "launches")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    got = [(r["stream"], r["kernel"], r["launch"], r["memory"], r["cpu_duration_ns"], r["gpu_duration_ns"],
            r["launch_delay_ns"], r["short_gpu_kernel"], r["runtime_outlier"], r["launch_delay_outlier"])
           for r in rows]
    check(got == [("7", "k1", "cudaLaunchKernel", "0", "5000", "10000", "10000", "0", "0", "0"),
                  ("7", "k2", "cuLaunchKernel", "0", "5000", "9980", "15020", "0", "0", "0"),
                  ("7", "k3", "cudaLaunchKernel", "0", "5000", "10000", "20000", "0", "0", "0"),
                  ("7", "k4", "cudaLaunchKernelExC", "0", "4000", "9970", "60030", "0", "0", "0"),
                  ("7", "k5", "cudaLaunchKernel", "0", "60000", "10000", "50000", "0", "1", "0"),
                  ("7", "k6", "cudaLaunchKernel", "0", "3000", "5000", "110000", "0", "0", "1"),
                  ("20", "Memcpy DtoD (Device -> Device)", "cudaMemcpyAsync", "1", "5000", "2000", "20000", "1", "0",
                   "0")], f"launches: the CSV {got}")
    p = mlprof("kernels", path)
    check("  launches: 7 (6 kernel, 1 copy or memset)" in p.stdout
          and "outliers: 1 short GPU kernels (call at most 50.000 us, kernel shorter than its call), 1 calls over "
              "50.000 us, 1 launch delays over 100.000 us" in p.stdout, f"launches: the table\n{p.stdout}")
    line = next((ln for ln in p.stdout.splitlines() if ln.strip().startswith("launch delay ")), "")
    check(line.split() == ["launch", "delay", "40.721", "us", "10.000", "us", "20.000", "us", "80.018", "us",
                           "107.002", "us", "110.000", "us"], f"launches: the table's delay row {line!r}")


def overlap_trace():
    """Device 1: compute [0,100) on stream 1 and [50,150) on stream 2 (summed
    200 us, union 150); NCCL [120,220) on stream 3; copies [140,160) and
    [300,310) on stream 4. Overlaps: compute and communication [120,150),
    compute and memory [140,150), communication and memory [140,160)."""
    ev = [meta("process_name", 1, 0, name="python3"),
          kernel("gemm", 0, 100, 1, pid=1), kernel("gemm", 50, 100, 2, pid=1),
          kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 120, 100, 3, pid=1),
          kernel("Memcpy DtoD (Device -> Device)", 140, 20, 4, cat="gpu_memcpy", pid=1),
          kernel("Memcpy DtoD (Device -> Device)", 300, 10, 4, cat="gpu_memcpy", pid=1)]
    return {"schemaVersion": 1, "traceEvents": ev}


def test_overlap():
    path = write("hta_overlap.json", overlap_trace())
    k = kernels_json(path)
    d = (k.get("devices") or [{}])[0]
    check((d.get("compute_ns"), d.get("communication_ns"), d.get("memory_ns")) == (200000, 100000, 30000),
          f"overlap: the summed durations kept {d}")
    check(d.get("union_ns") == {"compute": 150000, "communication": 100000, "memory": 30000},
          f"overlap: the union per kind {d.get('union_ns')}")
    check(d.get("overlap_ns") == {"compute_communication": 30000, "compute_memory": 10000,
                                  "communication_memory": 20000}, f"overlap: both kinds running {d.get('overlap_ns')}")
    check(d.get("communication_overlapped_pct") == 30.0 and (d.get("busy_ns"), d.get("span_ns")) == (230000, 310000),
          f"overlap: 30 of 100 us of communication overlapped {d.get('communication_overlapped_pct')}")
    p = mlprof("kernels", path)
    check("communication overlapped by compute: 30.00% of its time (30.000 us of 100.000 us)" in p.stdout
          and "overlap (both kinds running): compute and communication 30.000 us, compute and memory 10.000 us, "
              "communication and memory 20.000 us" in p.stdout, f"overlap: the table\n{p.stdout}")
    line = next((ln for ln in p.stdout.splitlines() if ln.strip().startswith("compute ")), "")
    check(line.split() == ["compute", "2", "200.000", "us", "60.6%", "150.000", "us", "65.2%"],
          f"overlap: the table's compute row, summed and union {line!r}")
    p = mlprof("kernels", path, "--format", "csv", "--csv-table", "overlap")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    got = [(r["compute_summed_ns"], r["compute_union_ns"], r["compute_communication_ns"], r["compute_memory_ns"],
            r["communication_memory_ns"], r["communication_overlapped_pct"]) for r in rows]
    check(got == [("200000", "150000", "30000", "10000", "20000", "30.00")], f"overlap: the CSV {got}")


def test_per_step():
    """Two steps: step 1 launches [50,60) (call 10) and [70,80) (call 20:
    other 10 us); step 2 [1200,1210) (call 1010: delay 190 us, an outlier;
    host wait 1120 us over the whole trace) and [1305,1315) (call 1300,
    after 1210: host wait 95 us)."""
    ev = [meta("process_name", 0, 0, name="python3"),
          x("ProfilerStep#1", "user_annotation", 0, 1000, HOST, HOST),
          x("ProfilerStep#2", "user_annotation", 1000, 1000, HOST, HOST),
          launch("cudaLaunchKernel", 10, 5, 1), kernel("a", 50, 10, 7, 1),
          launch("cudaLaunchKernel", 20, 5, 2), kernel("b", 70, 10, 7, 2),
          launch("cudaLaunchKernel", 1010, 5, 3), kernel("c", 1200, 10, 7, 3),
          launch("cudaLaunchKernel", 1300, 5, 4), kernel("d", 1305, 10, 7, 4)]
    path = write("hta_steps.json", {"schemaVersion": 1, "traceEvents": ev})
    d = (kernels_json(path).get("devices") or [{}])[0]
    i7 = idle_of(d).get(7) or {}
    check((i7.get("host_wait_ns"), i7.get("other_ns"), (d.get("launches") or {}).get("launch_delay_outliers"))
          == (1215000, 10000, 1), f"steps: the whole trace {i7} {d.get('launches')}")
    p = mlprof("kernels", path, "--per-step", "--steps", "1-2", "--format", "json")
    try:
        per = json.loads(p.stdout)["per_step"]
        got = []
        for s in per:
            dv = s["analysis"]["devices"][0]
            i = idle_of(dv)[7]
            got.append((s["step"], dv["launches"]["count"], dv["launches"]["launch_delay_ns"]["sum"],
                        dv["launches"]["launch_delay_outliers"], i["host_wait_ns"], i["other_ns"]))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        got = f"{e}: {p.stdout[:300]!r}"
    check(got == [(1, 2, 90000, 0, 0, 10000), (2, 2, 195000, 1, 95000, 0)], f"steps: per step {got}")
    p = mlprof("kernels", path, "--steps", "2", "--format", "json")
    try:
        dv = json.loads(p.stdout)["analysis"]["devices"][0]
        got = (dv["launches"]["count"], idle_of(dv)[7]["host_wait_ns"])
    except (ValueError, KeyError, IndexError, TypeError) as e:
        got = f"{e}: {p.stdout[:300]!r}"
    check(got == (2, 95000), f"steps: --steps 2 {got}")
    p = mlprof("kernels", path, "--per-step", "--steps", "1-2", "--format", "csv", "--csv-table", "launches")
    rows = [(r["step"], r["kernel"], r["launch_delay_ns"]) for r in csv.DictReader(io.StringIO(p.stdout))]
    check(rows == [("1", "a", "40000"), ("1", "b", "50000"), ("2", "c", "190000"), ("2", "d", "5000")],
          f"steps: the launches CSV per step {rows}")


# ---------------------------------------------------------------------------
# The FLOPS and bandwidth of operators that launched GPU work: over the time
# of that work, not their CPU (launch) time. Times in us.
def op_rate_trace():
    """CPU thread 100:
    aten::linear [0,15) 4 GFLOP        > aten::mm [1,11) 2 GFLOP 1 MB > launch corr 1 > gemm 100 us
    aten::mm [200,210) 2 GFLOP 1 MB    > launch corr 2 > gemm 300 us
    aten::foo [400,420) 1 MFLOP        > aten::foo [402,410) 1 MFLOP > launch corr 3 > foo_kernel 60 us
    aten::add [500,510) 1 MFLOP        > launch corr 4 > add_kernel 10 us
    aten::add [520,530) 1 MFLOP          (on the CPU: no launch)
    aten::bmm [600,601) 1 GFLOP, External id 9 > bmm_kernel (External id 9 only) 10 us
    aten::conv [700,710) 1 GFLOP       > a launch without correlation, a flow to conv_kernel 20 us
    aten::relu [800,810) 1 MFLOP 2 MB    (on the CPU)
    orphan_kernel 5 us: linked to nothing"""
    ev = [meta("process_name", 0, 0, name="python3"), meta("process_labels", 0, 0, labels="GPU 0"),
          x("aten::linear", "cpu_op", 0, 15, HOST, HOST, flops=4e9),
          x("aten::mm", "cpu_op", 1, 10, HOST, HOST, flops=2e9, bytes=1e6),
          launch("cudaLaunchKernel", 2, 3, 1), kernel("gemm", 20, 100, 7, 1),
          x("aten::mm", "cpu_op", 200, 10, HOST, HOST, flops=2e9, bytes=1e6),
          launch("cudaLaunchKernel", 202, 3, 2), kernel("gemm", 220, 300, 7, 2),
          x("aten::foo", "cpu_op", 400, 20, HOST, HOST, flops=1e6),
          x("aten::foo", "cpu_op", 402, 8, HOST, HOST, flops=1e6),
          launch("cudaLaunchKernel", 403, 3, 3), kernel("foo_kernel", 530, 60, 7, 3),
          x("aten::add", "cpu_op", 500, 10, HOST, HOST, flops=1e6),
          launch("cudaLaunchKernel", 502, 3, 4), kernel("add_kernel", 590, 10, 7, 4),
          x("aten::add", "cpu_op", 520, 10, HOST, HOST, flops=1e6),
          x("aten::bmm", "cpu_op", 600, 1, HOST, HOST, flops=1e9, **{"External id": 9}),
          x("bmm_kernel", "kernel", 610, 10, 0, 7, device=0, stream=7, **{"External id": 9}),
          x("aten::conv", "cpu_op", 700, 10, HOST, HOST, flops=1e9),
          x("cudaLaunchKernel", "cuda_runtime", 702, 3, HOST, HOST),
          {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": HOST, "tid": HOST, "ts": 702},
          kernel("conv_kernel", 720, 20, 7),
          {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 720, "bp": "e"},
          x("aten::relu", "cpu_op", 800, 10, HOST, HOST, flops=1e6, bytes=2e6),
          kernel("orphan_kernel", 900, 5, 7)]
    return {"schemaVersion": 1, "traceEvents": ev}


def analyze_rows(path, *opts):
    p = mlprof("analyze", path, "--format", "json", "-t", "0", *opts)
    try:
        return {r["key"]: r for r in json.loads(p.stdout)["rows"]}
    except ValueError as e:
        check(False, f"JSON from analyze {opts}: {e}\n{p.stdout[:400]}")
        return {}


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-9 * abs(b)


def test_operator_rates():
    path = write("op_rates.json", op_rate_trace())
    r = analyze_rows(path, "--type", "cpu_op")
    want = {  # key: gpu_ns, gpu_calls, rate_time, flops_per_s, bytes_per_s
        "aten::mm": (400000, 2, "gpu", 4e9 / 400e-6, 2e6 / 400e-6),      # not 4e9 / 20e-6
        "aten::linear": (100000, 1, "gpu", 4e9 / 100e-6, None),          # its mm's kernel
        "aten::foo": (120000, 2, "gpu", 2e6 / 120e-6, None),             # nested in itself: as its FLOPs, twice
        "aten::add": (10000, 1, None, None, None),                       # one call of two on the GPU: no rate
        "aten::bmm": (10000, 1, "gpu", 1e9 / 10e-6, None),               # linked by External id
        "aten::conv": (20000, 1, "gpu", 1e9 / 20e-6, None),              # linked by flow
        "aten::relu": (None, 0, "total", 1e6 / 10e-6, 2e6 / 10e-6),      # on the CPU: as before
    }
    for key, (gns, calls, rt, fps, bps) in want.items():
        g = r.get(key, {})
        got = (g.get("gpu_ns"), g.get("gpu_calls"), g.get("rate_time"))
        check(got == (gns, calls, rt), f"rates: {key}: gpu_ns, gpu_calls, rate_time {got}, wanted {(gns, calls, rt)}")
        check((fps is None and g.get("flops_per_s") is None) or close(g.get("flops_per_s"), fps),
              f"rates: {key}: flops_per_s {g.get('flops_per_s')}, wanted {fps}")
        check((bps is None and g.get("bytes_per_s") is None) or close(g.get("bytes_per_s"), bps),
              f"rates: {key}: bytes_per_s {g.get('bytes_per_s')}, wanted {bps}")
    # a kernel's row keeps its own time (it is the GPU's)
    k = analyze_rows(path, "--type", "kernel").get("gemm", {})
    check((k.get("gpu_ns"), k.get("rate_time"), k.get("total_ns")) == (None, "total", 400000), f"rates: a kernel {k}")
    # --aggregate mean: the gpu time per call that launched work; the rates still over the sums
    m = analyze_rows(path, "--type", "cpu_op", "--aggregate", "mean").get("aten::mm", {})
    check(m.get("gpu_ns") == 200000 and close(m.get("flops_per_s"), 1e13), f"rates: mean {m}")
    # ordered by the GPU time
    p = mlprof("analyze", path, "--type", "cpu_op", "--order-by", "gpu_time", "--format", "json", "-t", "3")
    keys = [x["key"] for x in json.loads(p.stdout)["rows"]] if p.returncode == 0 else []
    check(keys == ["aten::mm", "aten::foo", "aten::linear"], f"rates: --order-by gpu_time {keys}")
    # the table: the gpu time column, and notes saying which time the rates are over
    p = mlprof("analyze", path, "--type", "cpu_op", "-t", "0")
    check("note: FLOPS and bandwidth of operators that launched GPU work (kernels, copies, memsets) are over "
          "that work's time" in p.stdout and "1 row has no FLOPS or bandwidth" in p.stdout,
          f"rates: the table's notes\n{p.stdout}")
    lines = p.stdout.splitlines()
    head = next((ln for ln in lines if ln.startswith("name")), "")
    mm = next((ln for ln in lines if ln.startswith("aten::mm ")), "")
    check("gpu time" in head and "400.000 us" in mm and "10.0 TFLOP/s" in mm and "4.66 GiB/s" in mm,
          f"rates: the table's aten::mm row\n{head}\n{mm}")
    # CSV: the gpu time and the rate's time in the last two columns
    p = mlprof("analyze", path, "--type", "cpu_op", "--format", "csv", "-t", "0")
    c = {row["name"]: row for row in csv.DictReader(io.StringIO(p.stdout))}
    got = {k: (c.get(k, {}).get("gpu_ns"), c.get(k, {}).get("rate_time"), c.get(k, {}).get("flops_per_s"))
           for k in ("aten::mm", "aten::add", "aten::relu")}
    check(got["aten::mm"] == ("400000", "gpu", "10000000000000") and got["aten::add"] == ("10000", "", "")
          and got["aten::relu"][:2] == ("", "total") and close(float(got["aten::relu"][2] or 0), 1e11),
          f"rates: CSV {got}")
    # a CPU-only trace: rates over the total time, no gpu time column, no note
    cpu = {"traceEvents": [x("aten::relu", "cpu_op", 800, 10, HOST, HOST, flops=1e6, bytes=2e6)]}
    cpath = write("op_rates_cpu.json", cpu)
    g = analyze_rows(cpath).get("aten::relu", {})
    check((g.get("rate_time"), g.get("gpu_ns")) == ("total", None) and close(g.get("flops_per_s"), 1e11),
          f"rates: CPU only {g}")
    p = mlprof("analyze", cpath)
    check("gpu time" not in p.stdout and "launched GPU work" not in p.stdout and "100.0 GFLOP/s" in p.stdout,
          f"rates: CPU only, the table as before\n{p.stdout}")


def test_link_counts():
    """Each way a GPU event is linked counted apart (QA's flowlink.json and one
    kernel by correlation): a kernel with only its operator's External id is no
    correlation link."""
    ev = [x("aten::mm", "cpu_op", 0, 100, 10, 10, **{"External id": 5}),
          x("cudaLaunchKernel", "cuda_runtime", 10, 5, 10, 10),
          {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 10, "tid": 10, "ts": 10},
          x("kflow", "kernel", 50, 10, 0, 7, device=0, stream=7),
          {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 50, "bp": "e"},
          x("kext", "kernel", 70, 10, 0, 7, device=0, stream=7, **{"External id": 5}),
          x("korphan", "kernel", 90, 10, 0, 7, device=0, stream=7),
          x("cudaLaunchKernel", "cuda_runtime", 60, 5, 10, 10, correlation=3),
          x("kcorr", "kernel", 110, 10, 0, 7, device=0, stream=7, correlation=3)]
    path = write("link_counts.json", {"traceEvents": ev})
    k = kernels_json(path)
    got = tuple(k.get(f) for f in ("gpu_events", "linked_by_correlation", "linked_by_flow", "linked_by_external_id",
                                   "unlinked"))
    check(got == (4, 1, 1, 1, 1), f"link counts: JSON {got}")
    p = mlprof("kernels", path)
    check("4 GPU events: 1 linked to their launch by correlation id, 1 by flow, 1 to their operator by External id, "
          "1 not linked" in p.stdout, f"link counts: the table\n{p.stdout[:400]}")
    ops = [(o["name"], o["gpu_time_ns"]) for o in k.get("operators", [])]
    check(ops == [("aten::mm", 30000), ("(no operator)", 10000)], f"link counts: the operators' GPU time {ops}")


def test_real_kineto_rates():
    """The real PyTorch trace of an A100 (when ../shared has it): aten::bmm's and
    aten::mm's rates are over their kernels' time, under the A100's peaks."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces", "kineto",
                        "sampled_rank-1.json.gz")
    if not os.path.exists(path):
        print(f"analyze_gpu_check: the real Kineto trace skipped: {path} is not there")
        return
    r = analyze_rows(path, "--name", "aten::*")
    for name in ("aten::bmm", "aten::mm"):
        g = r.get(name, {})
        ok = g.get("rate_time") == "gpu" and g.get("gpu_ns") and close(g.get("flops_per_s"),
                                                                       g["flops"] / (g["gpu_ns"] * 1e-9))
        check(ok and g["flops_per_s"] < 312e12 and g["bytes_per_s"] < 2.1e12 and g["gpu_ns"] > g["total_ns"],
              f"real trace: {name} over its kernels' time, under an A100's peaks: {g}")


# ---------------------------------------------------------------------------
def main():
    os.makedirs(OUT, exist_ok=True)
    for test in (test_string_stream_tids, test_device_labels, test_counter_ranges, test_idle_breakdown,
                 test_launch_stats, test_overlap, test_per_step, test_operator_rates, test_link_counts,
                 test_real_kineto_rates):
        test()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("analyze_gpu_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
