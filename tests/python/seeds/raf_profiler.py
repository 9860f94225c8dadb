"""A script written for RAF's profilers (seed 003), with only its import
changed (`import raf` became the line below). The model is a stand-in for
RAF's VM: operator spans named as RAF names them (level 1), the VM's own
work around them (level 2), and a memory pool on the GPU that reserves
segments and allocates tensors in them (the memory profiler's bookkeeping:
no GPU is needed)."""
import json

import mlprof  # the stand-in's operators and memory record through mlprof
import mlprof.raf as raf  # was: import raf

kernels = mlprof.Domain("Default Stream", klass="operator")
vm = mlprof.Domain("VM", level=2)
casts = [kernels.new_task(f"raf_op_tvm_cast_{i}") for i in (76, 77)]
vm_step = vm.new_task("vm_invoke")
POOL = 0x7F0000000000


def run_vm_executor(with_memory=False):
    if with_memory:
        mlprof.memory_reserve(POOL, 64 << 20, device="cuda")
    for i, cast in enumerate(casts):
        with vm_step:
            with cast:
                mlprof.add_args(args_string="T<768xf32>,|T<768xf16>" if i == 0 else "T<768x768xf32>,|T<768x768xf16>")
                if with_memory:
                    mlprof.memory_alloc(POOL + i * (8 << 20), (4 << 20) * (i + 1), device="cuda", tag=f"cast_{i}")
                sum(range(20000))
    if with_memory:
        for i in range(len(casts)):
            mlprof.memory_free(POOL + i * (8 << 20), device="cuda")
        mlprof.memory_release(POOL, device="cuda")


for _ in range(3):  # warm-up, not profiled
    run_vm_executor()

# Clean the existing profiled stats and enable latency profiler.
raf.utils.profiler.clear()
raf.utils.profiler.start()
run_vm_executor()
raf.utils.profiler.stop()
result = raf.utils.profiler.get()
with open("profile.json", "w") as filep:
    json.dump(result, filep, indent=4)
raf.utils.profiler.clear()

# level 2: the VM's work too, written with dump(filename)
raf.utils.profiler.start(prof_level=2)
run_vm_executor()
raf.utils.profiler.stop()
raf.utils.profiler.dump("profile_level2.json")
raf.utils.profiler.clear()

# the memory profiler
raf.utils.memory_profiler.reset()
raf.utils.memory_profiler.start()
run_vm_executor(with_memory=True)
raf.utils.memory_profiler.stop()
result = raf.utils.memory_profiler.get_max_memory_info(raf.Device("cuda"))
print("Max used memory (MBs):", result["max_used"].value)
print("Max allocated memory (MBs):", result["max_allocated"].value)
print("Memory Trace:")
print(raf.utils.memory_profiler.get_memory_trace(raf.Device("cuda")))
