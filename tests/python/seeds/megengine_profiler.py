"""A script written for MegEngine's profiler (seed 002), with only its imports
changed. The training step is a stand-in made of numpy work inside operator
spans named as MegEngine names its operators; it is profiled three ways, as
the seed shows: the @profile() decorator, `with Profiler`, and
trace(profiling=True) with get_profile()."""
import json

import numpy as np

import mlprof  # the stand-in's operators record through mlprof's spans
from mlprof.megengine import Profiler, profile, trace  # was: megengine.utils.profiler, megengine.jit

ops = mlprof.Domain("megengine", klass="operator")
conv, matmul, relu = (ops.new_task(n) for n in ("ConvolutionForward", "MatrixMulForward", "Elemwise"))
arena = 0x10000000


def model_step(data):
    global arena
    with conv:
        mlprof.add_args(type="ConvolutionForward", input_shape=str(list(data.shape)))
        out = np.convolve(data.ravel(), np.ones(9), mode="same").reshape(data.shape)
        mlprof.memory_alloc(arena, out.nbytes, device="cuda:0", tag="conv_out")
    with matmul:
        out = out @ np.ones((data.shape[1], 16))
    with relu:
        out = np.maximum(out, 0)
    mlprof.memory_free(arena, device="cuda:0")
    arena += 0x1000
    return float(out.sum())


# the decorator: every call is profiled, each into files of its own
@profile()
def train_step(data, label):
    return model_step(data) - label


# the `with` form, with the arguments the seed lists
profiler = Profiler(path="profile_with", format="chrome_timeline.json", formats=["memory_flow.svg"],
                    sample_rate=1, profile_device=False)


def train_step_with(data, label):
    with profiler:
        return model_step(data) - label


@trace(symbolic=True, profiling=True)
def train_func(data, label):
    return model_step(data) - label


data = np.random.rand(8, 32)
for _ in range(3):
    train_step(data, 1.0)
    train_step_with(data, 1.0)
    train_func(data, 1.0)

prof_result = train_func.get_profile()
with open("profiling.json", "w") as fout:
    json.dump(prof_result, fout, indent=2)
print("with-entries:", len(profiler.entries))
