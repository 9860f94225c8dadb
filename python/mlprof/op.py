"""The op profiler (RAF's): one callable measured in isolation by the C
library's mlprof_op_profile, with its workspace, cached by a key.

    import mlprof.op
    res = mlprof.op.profile(numpy.dot, a, b)
    res["latency"], res["workspace_size"]     # microseconds, bytes

The loop that times runs in C: it warms the call up, chooses how many calls
make one repeat (so that a repeat lasts at least min_repeat_us, 1 ms here by
default), and times repeats on CLOCK_MONOTONIC until their spread is small.
Each repeat is one ctypes callback into Python that makes its calls in a
plain Python loop, as timeit does, so the cost of crossing into Python is
paid once per repeat (about a microsecond, 0.1% of a 1 ms repeat), not per
call.

workspace_size is what the call allocated beyond its inputs and outputs at
its peak, seen by mlprof's memory profiler while it runs one extra time: it
needs the profiler recording with profile_memory on (and, for allocations
that are not recorded through mlprof.memory_alloc, `mlprof run`'s malloc
hook). Otherwise it is None. mlprof.torch.profile_op measures torch's own
allocations too.
"""
import ctypes

from . import _lib, _check, MlprofError

lib = _lib.lib

_OPTIONS = ("warmup_ms", "min_repeats", "max_repeats", "budget_ms", "stability", "min_repeat_us", "confidence",
            "cold_cache", "flush_bytes", "workspace", "workspace_device", "gpu", "stream", "cudnn_handle",
            "cudnn_x", "cudnn_w", "cudnn_conv", "cudnn_y", "cudnn_algo")
# Python's call is slower to enter than C's: longer repeats by default
_PY_DEFAULTS = {"min_repeat_us": 1000.0}


def _options(options):
    o = _lib.OpOptions()
    lib.mlprof_op_options_init(ctypes.byref(o))
    for name, value in {**_PY_DEFAULTS, **options}.items():
        if name not in _OPTIONS:
            raise TypeError(f"mlprof.op.profile: unknown option {name!r} (options: {', '.join(_OPTIONS)})")
        if name == "workspace_device":
            from . import device_number
            value = device_number(value)
        elif name in ("cold_cache", "workspace", "gpu"):
            value = int(bool(value))
        setattr(o, name, value)
    return o


def _result(r):
    sources = [name for bit, name in ((1, "memory_profiler"), (2, "malloc")) if r.workspace_from & bit]
    return {
        "latency": r.median_us,  # microseconds, as RAF's op profiler says it
        "median": r.median_us, "min": r.min_us, "max": r.max_us, "mean": r.mean_us,
        "q1": r.q1_us, "q3": r.q3_us, "iqr": r.iqr_us,
        "ci": (r.ci_low_us, r.ci_high_us), "ci_level": r.ci_level,
        "repeats": r.repeats, "inner": r.inner, "stable": bool(r.stable), "cached": bool(r.cached),
        "workspace_size": r.workspace if r.workspace >= 0 else None,  # bytes
        "workspace_from": sources,
        "cudnn_workspace_size": r.cudnn_workspace if r.cudnn_workspace >= 0 else None,
    }


def profile(fn, *args, key=None, setup=None, teardown=None, sync=None, **options):
    """Profiles fn(*args): a dict with latency (the median, microseconds),
    median, min, max, mean, q1, q3, iqr, ci (the median's confidence
    interval) and ci_level, repeats, inner (calls per repeat), stable,
    cached, workspace_size (bytes, or None when not measured) and where it
    came from, and cudnn_workspace_size (GPU mode with descriptors).

    key: a string naming the call in the cache (op, shapes, dtypes, device,
    options); a key seen before returns the kept result without running.
    setup, teardown: called without arguments before and after each repeat,
    untimed. sync: called after the calls of each repeat, timed (for work
    that runs on after fn returns: torch.cuda.synchronize). Options (mlprof_op_options): warmup_ms (10), min_repeats (10),
    max_repeats (1000), budget_ms (2000), stability (0.05, IQR / median),
    min_repeat_us (1000), confidence (0.95), cold_cache, flush_bytes,
    workspace (True), workspace_device ("cpu"), gpu (time with CUDA events
    on stream, an int cudaStream_t; 0 the default stream), cudnn_handle,
    cudnn_x, cudnn_w, cudnn_conv, cudnn_y, cudnn_algo. An exception in fn,
    setup or teardown stops the profile and is raised again here."""
    opts = _options(options)
    raised = []

    def guard(f):
        def run(*a):
            try:
                f(*a)
                return 0
            except BaseException as e:  # noqa: B036 - carried across C and raised again below
                raised.append(e)
                return 1
        return run

    def calls(user, n):
        for _ in range(n):
            fn(*args)
        if sync:
            sync()

    call = _lib.OpCall()
    call.fn_n = _lib.OP_FN_N(guard(calls))
    if setup:
        call.setup = _lib.OP_FN(guard(lambda user: setup()))
    if teardown:
        call.teardown = _lib.OP_FN(guard(lambda user: teardown()))
    res = _lib.OpResult()
    rc = lib.mlprof_op_profile(key.encode() if isinstance(key, str) else key, ctypes.byref(call),
                               ctypes.byref(opts), ctypes.byref(res))
    if raised:
        raise raised[0]
    _check(rc)
    return _result(res)


def stats(samples_us, confidence=0.95, stability=0.05):
    """The statistics mlprof.op.profile reports, of samples a caller timed
    itself (microseconds): the same dict, without workspace or calls."""
    samples = list(samples_us)
    if not samples:
        raise ValueError("mlprof.op.stats: no samples")
    arr = (ctypes.c_double * len(samples))(*samples)
    res = _lib.OpResult()
    _check(lib.mlprof_op_stats(arr, len(samples), confidence, stability, ctypes.byref(res)))
    return _result(res)


def reset_cache():
    """Empties the cache (RAF's ResetCache)."""
    lib.mlprof_op_cache_reset()


def cache_size():
    """How many results the cache holds (RAF's GetCacheSize)."""
    return lib.mlprof_op_cache_size()


__all__ = ["profile", "stats", "reset_cache", "cache_size", "MlprofError"]
