#!/bin/bash
# scripts/gpu_torch_check.sh OUT - mlprof.torch on the GPU machine's torch
# (issue 23): builds libmlprof and the native extension (libmlprof_torch.so)
# against that torch, runs tests/python/test_torch.py on both paths, and
# traces a CUDA model through the native path with gpu=on: its operators,
# their kernels linked, and the CUDA caching allocator's blocks. Summary in
# OUT/summary_torch.txt, logs packed in OUT/torch_check.tgz.
set -u
OUT=${1:-/tmp/gpu_torch_check}
L=$OUT/tlogs
mkdir -p "$L"
exec > >(tee "$OUT/summary_torch.txt") 2>&1
t0=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s)"; }
PY=$(command -v python3)
B=/tmp/mlprof-torch-build
step "build against $($PY -c 'import torch; print(torch.__version__)')"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLPROF_TORCH_NATIVE=ON -DMLPROF_TORCH_PYTHON="$PY" \
    >"$L/cmake.txt" 2>&1 && cmake --build $B -j16 --target mlprof mlprof_torch >"$L/build.txt" 2>&1
echo "build status $?"; grep -iE "error|native extension" "$L/cmake.txt" "$L/build.txt" | head -20
export LIBMLPROF_PATH=$B/libmlprof.so MLPROF_TORCH_NATIVE_PATH=$B/libmlprof_torch.so PYTHONPATH=$PWD/python
step "tests/python/test_torch.py (native and dispatch paths)"
timeout 300 $PY -m pytest -q -p no:cacheprovider tests/python/test_torch.py -rs >"$L/pytest.txt" 2>&1
echo "pytest status $?"; tail -25 "$L/pytest.txt"
[ "${PYTEST_ONLY:-}" ] && { step done; tar czf "$OUT/torch_check.tgz" -C "$OUT" tlogs; rm -rf "$L"; exit 0; }
step "a CUDA model through the native path, gpu=on"
cat >"$L/cuda_native.py" <<'PY'
import json, sys, collections, torch, mlprof, mlprof.torch
from mlprof import torch_native
print("native:", torch_native.load() is not None, torch_native.why())
mlprof.set_state("stop")
mlprof.set_config(filename=sys.argv[1], gpu="on", profile_memory=True, memory_svg="", memory_csv="")
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 32 * 32, 10)).cuda()
x = torch.randn(8, 3, 32, 32, device="cuda")
model(x).sum().backward()
torch.cuda.synchronize()
mlprof.set_state("run")
with mlprof.torch.trace(model, name="model", native=True):
    for _ in range(3):
        model(x).sum().backward()
    torch.cuda.synchronize()
ev = json.load(open(mlprof.dump()))["traceEvents"]
ops = collections.Counter(e["name"] for e in ev if e.get("ph") == "X" and e["name"].startswith("aten::"))
k = [e for e in ev if e.get("cat") == "kernel"]
print("aten ops:", sum(ops.values()), ops.most_common(6))
print("kernels:", len(k), "with an aten op:", sum(1 for e in k if str(e["args"].get("op", "")).startswith("aten::")))
print("memory events:", collections.Counter(e.get("cat") for e in ev if "mem" in str(e.get("cat", ""))).most_common(5))
PY
timeout 180 $PY "$L/cuda_native.py" "$L/cuda_native.json" >"$L/cuda_native.txt" 2>&1
echo "status $?"; tail -15 "$L/cuda_native.txt"
step done
rm -f "$L"/*.json; tar czf "$OUT/torch_check.tgz" -C "$OUT" tlogs && rm -rf "$L"
