#!/bin/bash
# scripts/gpu_compare.sh OUT - issue 24's comparisons on a GPU machine (run from
# the repository's root there; a few minutes): builds the library, preload, CLI
# and examples/cuda_kernels, then
#   1. examples/cuda_kernels' kernel times under gpu=on against ncu's
#      gpu__time_duration (caches and clocks left alone);
#   2. a small CNN and a transformer block (forward, backward, SGD; 20 steps
#      after 5 of warm-up) under torch.profiler and under mlprof.torch.trace
#      with gpu=on, each in its own process: kernel counts, GPU time and each
#      kernel's mean time against Kineto's, and each tracer's slowdown of the
#      steps against the same process's untraced steps;
#   3. the same under mlprof run --gpu on --hooks cuda,cublas,cudnn,nvtx with
#      PyTorch's emit_nvtx: cuBLAS/cuDNN spans, NVTX ranges, kernels' ops;
#   4. a one-rank NCCL job under mlprof run: the profiler plugin, then the
#      interposer (NCCL_PROFILER_PLUGIN=none); NCCL's log of its calls;
#   5. mlprof.torch's native path (the extension built against that torch):
#      each model's slowdown under torch.profiler and mlprof.torch.trace, on
#      the native and the dispatch-mode paths, with and without GPU activity.
# usage: gpu_compare.sh OUT [PART...] (parts: ncu torch run spread nccl native;
# default all). The summary is OUT/summary_cmp.txt; logs packed in OUT/cmp.tgz.
set -u
OUT=${1:-/tmp/gpu_compare}
shift
PARTS=" ${*:-ncu torch run spread nccl native} "
want() { [[ $PARTS == *" $1 "* ]]; }
L=$OUT/clogs
mkdir -p "$L"
exec > >(tee "$OUT/summary_cmp.txt") 2>&1
t0=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - t0 )) s)"; }
S=$PWD/scripts/gpu_compare.py

step "the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"

step "build"
B=/tmp/mlprof-build
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLPROF_BUILD_EXAMPLES=ON >"$L/cmake.txt" 2>&1 &&
    cmake --build $B -j16 --target mlprof_cli mlprof mlprof_preload cuda_kernels >"$L/build.txt" 2>&1
echo "build status $?"; grep -E "error" "$L/build.txt" | head
M=$B/mlprof
export LIBMLPROF_PATH=$B/libmlprof.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1

if want ncu; then
step "1. cuda_kernels: gpu=on against ncu"
( cd "$L" && MLPROF_FILENAME="$L/ck.json" timeout 60 $B/cuda_kernels --steps 5 ) >"$L/ck.txt" 2>&1; echo "status $?"
( cd "$L" && MLPROF_FILENAME="$L/ck_ncu.json" timeout 120 ncu --csv --print-units base --cache-control none \
    --clock-control none --metrics gpu__time_duration.sum $B/cuda_kernels --steps 5 ) >"$L/ncu.csv" 2>"$L/ncu.err"
echo "ncu status $?"; grep -i "error" "$L/ncu.err" | head -3
python3 $S ncu "$L/ncu.csv" "$L/ck.json"
fi

want torch && for model in cnn xfmr; do
    step "2. $model: torch.profiler and mlprof.torch.trace (gpu=on), each in its own process"
    timeout 120 python3 $S step torch $model "$L/torch_$model.json" 2>"$L/torch_$model.err" | tail -1; tail -3 "$L/torch_$model.err"
    timeout 120 python3 $S step mlprof $model "$L/mlprof_$model.json" 2>"$L/mlprof_$model.err" | tail -1; tail -3 "$L/mlprof_$model.err"
    timeout 60 python3 $S kernels "$L/torch_$model.json" "$L/mlprof_$model.json"
    timeout 60 python3 $S run "$L/mlprof_$model.json" | grep -E "^kernels|op stack"
done
want run && for model in cnn xfmr; do
    step "3. $model under mlprof run --gpu on --hooks cuda,cublas,cudnn,nvtx (emit_nvtx)"
    timeout 150 $M run -q --gpu on --hooks cuda,cublas,cudnn,nvtx -o "$L/run_$model.json" -- \
        python3 $S step nvtx $model "$L/unused.json" >"$L/run_$model.txt" 2>&1
    echo "status $?"; grep -E "^\{|rror|arning" "$L/run_$model.txt" | head -8
    timeout 60 python3 $S run "$L/run_$model.json"
done
if want spread; then
step "2b. the cnn once more under each, for the run-to-run spread"
timeout 120 python3 $S step torch cnn "$L/torch_cnn2.json" 2>/dev/null | tail -1
timeout 120 python3 $S step mlprof cnn "$L/mlprof_cnn2.json" 2>/dev/null | tail -1
timeout 60 python3 $S kernels "$L/torch_cnn.json" "$L/torch_cnn2.json" | grep -E "^kernel |worst"
timeout 60 python3 $S kernels "$L/mlprof_cnn.json" "$L/mlprof_cnn2.json" | grep -E "^kernel |worst"
fi

if want nccl; then
step "4. NCCL, one rank: the profiler plugin"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,PROFILE,COLL timeout 120 $M run -q --hooks nccl -o "$L/nccl.json" -- \
    python3 $S nccl >"$L/nccl.txt" 2>&1; echo "status $?"
grep -iE "profiler|plugin|mlprof|^nccl|rror" "$L/nccl.txt" | head -12
grep -E "(AllReduce|Broadcast|AllGather|ReduceScatter|Reduce): opCount" "$L/nccl.txt" | cut -c1-140 | head -8
timeout 60 python3 $S nccl "$L/nccl.json"
step "4b. NCCL, one rank: NCCL_PROFILER_PLUGIN=none (the interposer)"
NCCL_PROFILER_PLUGIN=none timeout 120 $M run -q --hooks nccl -o "$L/nccl_none.json" -- \
    python3 $S nccl >"$L/nccl_none.txt" 2>&1; echo "status $?"; grep -iE "rror|warn" "$L/nccl_none.txt" | head -5
timeout 60 python3 $S nccl "$L/nccl_none.json"
fi

if want native; then
step "5. mlprof.torch's native path: build against this torch"
cmake -S . -B $B -DMLPROF_TORCH_NATIVE=ON -DMLPROF_TORCH_PYTHON="$(command -v python3)" >"$L/cmake_native.txt" 2>&1 &&
    cmake --build $B -j16 --target mlprof mlprof_torch >"$L/build_native.txt" 2>&1
echo "build status $?"; grep -iE "error|native extension" "$L/cmake_native.txt" "$L/build_native.txt" | head -5
for model in cnn xfmr; do
    step "5. $model: slowdown of 20 steps against the same process's untraced ones"
    for mode in torch torch_cpu mlprof mlprof_cpu; do
        MLPROF_TORCH_NATIVE_PATH=$B/libmlprof_torch.so timeout 120 python3 $S step $mode $model "$L/n_${mode}_$model.json" \
            2>"$L/n_${mode}_$model.err" | tail -1; grep -i "native" "$L/n_${mode}_$model.err" | head -2
    done
    for mode in mlprof mlprof_cpu; do
        MLPROF_TORCH_NATIVE=0 timeout 120 python3 $S step $mode $model "$L/d_${mode}_$model.json" 2>/dev/null | \
            sed 's/"mode": "/"mode": "dispatch /' | tail -1
    done
    timeout 60 python3 $S kernels "$L/n_torch_$model.json" "$L/n_mlprof_$model.json" | grep -E "^(kernel|gpu_m|names|worst)"
    timeout 60 python3 $S run "$L/n_mlprof_$model.json" | grep -E "^kernels|op stack"
done
fi

step "done"
find "$L" -name '*.json' -size +3M -delete
tar czf "$OUT/cmp.tgz" -C "$OUT" clogs && rm -rf "$L"
ls -la "$OUT"
