"""A script written for MXNet's profiler (seed 001, mxnet.profiler), with only
its import changed: `from mxnet import profiler` became the line below. It
profiles a small numpy "model" with every call and key of that API; the
pytest in test_seeds.py runs it and reads its outputs back."""
import numpy as np

from mlprof.mxnet import profiler  # was: from mxnet import profiler

profiler.set_config(profile_all=False, profile_symbolic=True, profile_imperative=True, profile_memory=False,
                    profile_api=False, filename="mxnet_profile.json", continuous_dump=True, dump_period=0.5,
                    aggregate_stats=True, gpu_memory_profile_filename_prefix="gpu_memory_profile",
                    profile_process="worker")
profiler.profiler_set_config(mode="symbolic", filename="mxnet_profile.json")  # the deprecated form

domain = profiler.Domain("model")
print("domain:", domain)
forward, backward = domain.new_task("forward"), domain.new_task("backward")
batch = domain.new_frame("batch")
load = profiler.Event("load_data")
samples = domain.new_counter("samples", 0)
epoch_end = domain.new_marker("epoch_end")
weights = np.ones((64, 64))

profiler.set_state("run", profile_process="worker")
for epoch in range(2):
    for step in range(3):
        batch.start()
        load.start()
        x = np.random.rand(32, 64)
        load.stop()
        with profiler.scope("net"):
            with profiler.scope("dense1"):
                forward.start()
                y = x @ weights
                forward.stop()
            with profiler.scope("loss", append_mode=False):
                backward.start()
                y.T @ x
                backward.stop()
        samples += 32
        batch.stop()
    samples -= 16
    for scope in ("global", "process", "thread", "task", "marker"):
        epoch_end.mark(scope)
    if epoch == 0:
        profiler.pause(profile_process="worker")
        forward.start()  # not recorded: paused
        forward.stop()
        profiler.resume(profile_process="worker")
        profiler.dump(finished=False, profile_process="worker")  # a dump ahead of time, recording goes on

with profiler.scope() as name:
    print("default scope:", name)
profiler.set_state("stop")
profiler.profiler_set_state("stop")  # the deprecated form
print(profiler.dumps(reset=False, format="table", sort_by="total", ascending=False))
with open("mxnet_stats.json", "w") as f:
    f.write(profiler.dumps(format="json", sort_by="count", ascending=True))
profiler.dump_profile()  # the deprecated dump(True)
print("counter:", samples, "task:", forward, "frame:", batch, "event:", load)
