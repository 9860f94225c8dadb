#!/bin/bash
# scripts/gpu_check.sh OUT - the GPU checks of docs/gpu-validation.md that fit
# one short lease of a GPU machine (run from the repository's root there):
# builds the library, the preload, the CLI and examples/cuda_kernels, then
#   1. mlprof ceilings --gpu, as a table and as JSON (OUT/gpu.json);
#   2. examples/cuda_kernels under gpu=on, and with --metrics (the range
#      profiler's FLOPs and DRAM bytes); mlprof kernels on each trace;
#   3. a torch CUDA training step (a small CNN, forward and backward) traced
#      by torch.profiler (record_shapes) and run under mlprof run --gpu on:
#      kernel counts and GPU time of both (mlprof kernels), and mlprof
#      roofline --gpu-ceilings on torch's trace;
#   4. mlprof run --sampler nvml on the same step;
#   5. ncu on the example's GEMM: time, DRAM bytes and FMAs against what
#      step 2's range profiler measured.
# Every step has its own time limit; the logs go to OUT/logs, packed into
# OUT/gpu_check.tgz, and what to read first into OUT/summary.txt.
set -u
OUT=${1:-${OUT:-/tmp/gpu_check}}
L=$OUT/logs
mkdir -p "$L"
exec > >(tee "$OUT/summary.txt") 2>&1
t0=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s)"; }

step "the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

step "build"
B=/tmp/mlprof-build
if cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLPROF_BUILD_EXAMPLES=ON >"$L/cmake.txt" 2>&1 &&
   cmake --build $B -j16 --target mlprof_cli mlprof mlprof_preload cuda_kernels >"$L/build.txt" 2>&1; then
    echo "built"
else
    echo "BUILD FAILED"; tail -30 "$L/cmake.txt" "$L/build.txt"
fi
M=$B/mlprof

step "1. mlprof ceilings --gpu"
timeout 120 $M ceilings --gpu 2>"$L/ceilings.err" | tee "$L/ceilings.txt"; echo "status ${PIPESTATUS[0]}"
cat "$L/ceilings.err"
timeout 120 $M ceilings --gpu --json -o "$OUT/gpu.json" 2>>"$L/ceilings.err"; echo "json status $?"

step "2. examples/cuda_kernels under gpu=on"
( cd "$L" && MLPROF_FILENAME="$L/ck.json" timeout 120 $B/cuda_kernels --steps 5 ) >"$L/ck.txt" 2>&1; echo "status $?"
tail -15 "$L/ck.txt"
timeout 60 $M kernels "$L/ck.json" >"$L/ck_kernels.txt" 2>&1; head -40 "$L/ck_kernels.txt"
( cd "$L" && MLPROF_FILENAME="$L/ck_metrics.json" timeout 120 $B/cuda_kernels --steps 3 --metrics ) >"$L/ck_metrics.txt" 2>&1
echo "metrics status $?"; tail -15 "$L/ck_metrics.txt"
timeout 60 $M kernels "$L/ck_metrics.json" >"$L/ck_metrics_kernels.txt" 2>&1; head -40 "$L/ck_metrics_kernels.txt"

step "3. a torch CUDA step: torch.profiler and mlprof run --gpu on"
cat >"$L/step.py" <<'PY'
import sys, time, torch, torch.nn as nn
torch.manual_seed(0)
dev = "cuda"
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, 256), nn.ReLU(),
                      nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 3, 32, 32, device=dev), torch.randint(0, 10, (64,), device=dev)
def step():
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
for _ in range(3):
    step()
torch.cuda.synchronize()
if sys.argv[1] == "torch":
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as p:
        for _ in range(10):
            step()
        torch.cuda.synchronize()
    p.export_chrome_trace(sys.argv[2])
    ka = p.key_averages()
    print("torch.profiler: %d kernels' device time %.3f ms" % (
        sum(e.count for e in ka if e.device_type == torch.autograd.DeviceType.CUDA),
        sum(e.self_device_time_total for e in ka) / 1e3))
else:
    t = time.perf_counter()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    print("plain: 10 steps in %.3f ms" % ((time.perf_counter() - t) * 1e3))
PY
timeout 120 python3 "$L/step.py" torch "$L/torch.json" >"$L/torch.txt" 2>&1; echo "torch status $?"; tail -5 "$L/torch.txt"
timeout 60 $M kernels "$L/torch.json" >"$L/torch_kernels.txt" 2>&1; head -30 "$L/torch_kernels.txt"
timeout 60 $M roofline "$L/torch.json" --gpu-ceilings "$OUT/gpu.json" -o "$L/torch_roofline.svg" \
    >"$L/torch_roofline.txt" 2>&1; echo "roofline status $?"; head -40 "$L/torch_roofline.txt"
timeout 150 $M run --gpu on -o "$L/mlrun.json" -- python3 "$L/step.py" plain >"$L/mlrun.txt" 2>&1
echo "mlprof run status $?"; tail -8 "$L/mlrun.txt"
timeout 60 $M kernels "$L/mlrun.json" >"$L/mlrun_kernels.txt" 2>&1; head -30 "$L/mlrun_kernels.txt"
# the driver calls gpu=on records (those that launch work) and whether any
# lies inside a runtime call (the runtime's own use of the driver)
python3 - "$L/mlrun.json" <<'PY'
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
drv = [e for e in ev if e.get("cat") == "cuda_driver"]
rt = collections.defaultdict(list)
for e in ev:
    if e.get("cat") == "cuda_runtime":
        rt[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
inside = [e for e in drv if any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in rt[e["tid"]])]
print("driver calls:", collections.Counter(e["name"] for e in drv).most_common(6), "; inside a runtime call:", len(inside))
PY

step "4. NVML sampler"
timeout 90 $M run --sampler nvml -o "$L/nvml.json" -- python3 "$L/step.py" plain >"$L/nvml.txt" 2>&1
echo "status $?"; tail -5 "$L/nvml.txt"
python3 - "$L/nvml.json" <<'PY' 2>&1 | head -20
import json, sys, collections
d = json.load(open(sys.argv[1]))
c = collections.Counter(e["name"] for e in d["traceEvents"] if e.get("ph") == "C")
print("counter series:", dict(c))
PY

step "5. ncu on the GEMM against the range profiler's figures (step 2's --metrics)"
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum \
    -k regex:gemm --launch-count 3 $B/cuda_kernels --steps 3 >"$L/ncu.txt" 2>&1
echo "ncu status $?"; grep -E "gemm_kernel|gpu__time|dram__bytes|ffma|ERR" "$L/ncu.txt" | head -12
grep -A4 "Kernel metrics" "$L/ck_metrics_kernels.txt"

step "done"
# what comes back: this summary, the GPU's ceilings, and the logs packed
# (the traces left out, but for the small ones)
find "$L" -name '*.json' -size +4M -delete
tar czf "$OUT/gpu_check.tgz" -C "$OUT" logs && rm -rf "$L"
ls -la "$OUT"
