"""The C library under the bindings: found, loaded with ctypes, and every
function given its argtypes and restype, so that a wrong call is a Python
TypeError and not a crash."""
import ctypes
import ctypes.util
import operator
import os

c_char_p, c_int, c_size_t, c_void_p = ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
c_int64, c_uint64, c_double, c_uint = ctypes.c_int64, ctypes.c_uint64, ctypes.c_double, ctypes.c_uint


class MemInfo(ctypes.Structure):
    """mlprof_mem_info, field for field."""
    _fields_ = [(name, c_uint64) for name in (
        "used", "peak_used", "allocated", "peak_allocated", "peak_used_ns", "live_blocks", "allocs", "frees",
        "reserves", "releases", "unknown_frees", "double_frees", "unknown_releases", "implicit_frees")]


class OpCost(ctypes.Structure):
    """mlprof_opcost (mlprof/opcost.h), field for field."""
    _fields_ = [("flops", c_int64), ("bytes", c_int64)]


# mlprof_op_call's functions: int (*)(void *user) and int (*)(void *user, uint64_t n)
OP_FN = ctypes.CFUNCTYPE(c_int, c_void_p)
OP_FN_N = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64)


class OpCall(ctypes.Structure):
    """mlprof_op_call."""
    _fields_ = [("fn", OP_FN), ("fn_n", OP_FN_N), ("setup", OP_FN), ("teardown", OP_FN), ("user", c_void_p)]


class OpOptions(ctypes.Structure):
    """mlprof_op_options, field for field."""
    _fields_ = [("warmup_ms", c_double), ("min_repeats", ctypes.c_uint32), ("max_repeats", ctypes.c_uint32),
                ("budget_ms", c_double), ("stability", c_double), ("min_repeat_us", c_double),
                ("confidence", c_double), ("cold_cache", c_int), ("flush_bytes", c_uint64), ("workspace", c_int),
                ("workspace_device", c_int), ("gpu", c_int), ("stream", c_void_p), ("cudnn_handle", c_void_p),
                ("cudnn_x", c_void_p), ("cudnn_w", c_void_p), ("cudnn_conv", c_void_p), ("cudnn_y", c_void_p),
                ("cudnn_algo", c_int)]


class OpResult(ctypes.Structure):
    """mlprof_op_result, field for field."""
    _fields_ = [(name, c_double) for name in (
        "median_us", "min_us", "max_us", "mean_us", "q1_us", "q3_us", "iqr_us", "ci_low_us", "ci_high_us",
        "ci_level")] + [("repeats", ctypes.c_uint32), ("inner", c_uint64), ("stable", c_int), ("cached", c_int),
                        ("workspace", c_int64), ("workspace_from", c_uint), ("cudnn_workspace", c_int64)]


# name: (restype, argtypes); pointers to handles are opaque void pointers
PROTOTYPES = {
    "mlprof_version": (c_uint, []),
    "mlprof_version_string": (c_char_p, []),
    "mlprof_strerror": (c_char_p, [c_int]),
    "mlprof_err_name": (c_char_p, [c_int]),
    "mlprof_last_error": (c_char_p, []),
    "mlprof_set_config": (c_int, [c_char_p, c_char_p]),
    "mlprof_set_configs": (c_int, [c_int, ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p)]),
    "mlprof_get_config": (c_int, [c_char_p, c_char_p, c_size_t]),
    "mlprof_load_config": (c_int, [c_char_p]),
    "mlprof_set_state": (c_int, [c_int]),
    "mlprof_get_state": (c_int, []),
    "mlprof_pause": (c_int, []),
    "mlprof_resume": (c_int, []),
    "mlprof_is_paused": (c_int, []),
    "mlprof_trace_path": (c_int, [c_char_p, c_size_t]),
    "mlprof_output_path": (c_int, [c_char_p, c_char_p, c_size_t]),
    "mlprof_dump": (c_int, [c_int]),
    "mlprof_dump_to": (c_int, [c_char_p, c_int]),
    "mlprof_exit_dump": (c_int, []),
    "mlprof_dump_string": (c_int, [ctypes.POINTER(c_void_p)]),
    "mlprof_dumps": (c_int, [ctypes.POINTER(c_void_p), c_int, c_int, c_int, c_int]),
    "mlprof_clear": (c_int, []),
    "mlprof_free": (None, [c_void_p]),
    "mlprof_dropped_events": (c_uint64, []),
    "mlprof_buffer_usage": (None, [ctypes.POINTER(c_uint64), ctypes.POINTER(c_uint64)]),
    "mlprof_domain_create": (c_void_p, [c_char_p]),
    "mlprof_domain_set_class": (c_int, [c_void_p, c_int]),
    "mlprof_domain_set_level": (c_int, [c_void_p, c_int]),
    "mlprof_domain_name": (c_char_p, [c_void_p]),
    "mlprof_task_create": (c_void_p, [c_void_p, c_char_p]),
    "mlprof_frame_create": (c_void_p, [c_void_p, c_char_p]),
    "mlprof_event_create": (c_void_p, [c_char_p]),
    "mlprof_span_destroy": (None, [c_void_p]),
    "mlprof_span_name": (c_char_p, [c_void_p]),
    "mlprof_begin": (None, [c_void_p]),
    "mlprof_end": (None, [c_void_p]),
    "mlprof_begin_dynamic": (None, [c_void_p, c_char_p]),
    "mlprof_end_dynamic": (None, [c_void_p]),
    "mlprof_begin_with": (c_void_p, [c_void_p, c_char_p, c_char_p, c_char_p]),
    "mlprof_counter_create": (c_void_p, [c_void_p, c_char_p]),
    "mlprof_counter_destroy": (None, [c_void_p]),
    "mlprof_counter_set": (None, [c_void_p, c_int64]),
    "mlprof_counter_add": (None, [c_void_p, c_int64]),
    "mlprof_counter_set_double": (None, [c_void_p, c_double]),
    "mlprof_counter_value": (c_int64, [c_void_p]),
    "mlprof_marker_create": (c_void_p, [c_void_p, c_char_p]),
    "mlprof_marker_destroy": (None, [c_void_p]),
    "mlprof_mark": (None, [c_void_p, c_int]),
    "mlprof_mark_dynamic": (None, [c_void_p, c_char_p, c_int]),
    "mlprof_arg_int": (None, [c_char_p, c_int64]),
    "mlprof_arg_double": (None, [c_char_p, c_double]),
    "mlprof_arg_str": (None, [c_char_p, c_char_p]),
    "mlprof_scope_push": (None, [c_char_p]),
    "mlprof_scope_pop": (None, []),
    "mlprof_scope_current": (c_char_p, []),
    "mlprof_mem_alloc": (c_int, [c_int, c_void_p, c_uint64, c_char_p]),
    "mlprof_mem_free": (c_int, [c_int, c_void_p]),
    "mlprof_mem_reserve": (c_int, [c_int, c_void_p, c_uint64]),
    "mlprof_mem_release": (c_int, [c_int, c_void_p]),
    "mlprof_mem_device_name": (c_int, [c_int, c_char_p]),
    "mlprof_mem_info_get": (c_int, [c_int, ctypes.POINTER(MemInfo), c_size_t]),
    "mlprof_gpu_region_begin_with": (c_void_p, [c_char_p, c_void_p, c_char_p, c_char_p]),
    "mlprof_mem_reset": (c_int, []),
    "mlprof_mem_trace": (c_int, [c_int, ctypes.POINTER(c_void_p)]),
    "mlprof_thread_set_name": (None, [c_char_p]),
    "mlprof_process_set_name": (None, [c_char_p]),
    "mlprof_now_ns": (c_uint64, []),
    "mlprof_dist_sync": (c_int, []),
    "mlprof_dist_clock_sample": (c_int, [c_char_p, c_int, c_int, c_uint64, c_int64, c_uint64, c_uint64, c_int]),
    "mlprof_step": (c_int, []),
    "mlprof_step_number": (c_uint64, []),
    "mlprof_on_trace_ready": (None, [c_void_p, c_void_p]),
    "mlprof_opcost_op": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, ctypes.POINTER(OpCost)]),
    "mlprof_opcost_gemm": (c_int, [c_int64] * 7 + [c_int, ctypes.POINTER(OpCost)]),
    "mlprof_opcost_conv": (c_int, [c_int, c_int, ctypes.POINTER(c_int64), ctypes.POINTER(c_int64),
                                   ctypes.POINTER(c_int64), c_int64, c_int, ctypes.POINTER(OpCost)]),
    "mlprof_opcost_type_size": (c_int, [c_char_p]),
    "mlprof_op_options_init": (None, [ctypes.POINTER(OpOptions)]),
    "mlprof_op_profile": (c_int, [c_char_p, ctypes.POINTER(OpCall), ctypes.POINTER(OpOptions),
                                  ctypes.POINTER(OpResult)]),
    "mlprof_op_stats": (c_int, [ctypes.POINTER(c_double), ctypes.c_uint32, c_double, c_double,
                                ctypes.POINTER(OpResult)]),
    "mlprof_op_cache_reset": (None, []),
    "mlprof_op_cache_size": (c_size_t, []),
}



def _checked(ctype):
    """ctype as an argument type that takes only an integer it can hold:
    ctypes itself wraps any int into the type's width (-1 becomes 2**64 - 1
    for a uint64_t, 2**64 becomes 0), which would record a wrong number
    without a word. A float or text is a TypeError, a number out of range an
    OverflowError, each naming the value (ctypes reports both as an
    ArgumentError that gives the argument's position)."""
    bits = 8 * ctypes.sizeof(ctype)
    signed = ctype(-1).value < 0
    low, high = (-2 ** (bits - 1), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)

    def from_param(cls, value):
        if type(value) is int:
            number = value
        elif isinstance(value, ctypes._SimpleCData):
            return value
        else:
            try:
                number = operator.index(value)
            except TypeError:
                raise TypeError(f"an integer is required, not {value!r}") from None
        if not low <= number <= high:
            raise OverflowError(f"{number} does not fit the C argument's type ({low} to {high})")
        return ctype(number)

    return type(ctype.__name__, (ctype,), {"from_param": classmethod(from_param), "range": (low, high)})


# argument types only: a subclass of a simple type as a result or a field
# would give its ctypes object, not the number
_CHECKED = {t: _checked(t) for t in (ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_int64,
                                     ctypes.c_uint64, ctypes.c_uint32)}
PROTOTYPES = {name: (restype, [_CHECKED.get(t, t) for t in argtypes])
              for name, (restype, argtypes) in PROTOTYPES.items()}

# mlprof_trace_ready_fn: void (*)(const char *trace_path, int cycle, void *user)
TRACE_READY = ctypes.CFUNCTYPE(None, c_char_p, c_int, c_void_p)


def _preloaded():
    """The preload library of `mlprof run`, when this process has it: the
    bindings then drive the recorder that writes the run's trace, not a second
    one of their own that nobody dumps."""
    for path in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        if os.path.basename(path).startswith("libmlprof_preload") and os.path.exists(path):
            try:
                with open("/proc/self/maps") as maps:
                    if any(line.rstrip().endswith(os.path.realpath(path)) for line in maps):
                        return path
            except OSError:
                return None
    return None


def _candidates():
    """Where libmlprof.so may be: the preload library of `mlprof run` when it
    is loaded, LIBMLPROF_PATH, beside this package (an installed copy), the
    build tree of the checkout, then the system's."""
    pre = _preloaded()
    if pre:
        yield pre
    env = os.environ.get("LIBMLPROF_PATH")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libmlprof.so")
    root = os.path.dirname(os.path.dirname(here))
    for build in ("build", "build-asan", "build-tsan"):
        yield os.path.join(root, build, "libmlprof.so")
    found = ctypes.util.find_library("mlprof")
    if found:
        yield found


def load():
    tried = []
    for path in _candidates():
        if path != os.path.basename(path) and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        try:
            for name, (restype, argtypes) in PROTOTYPES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
        except AttributeError as e:  # an older library than these bindings
            tried.append(f"{path} ({e})")
            continue
        lib.path = path
        return lib
    raise ImportError("mlprof: cannot find libmlprof.so (build it with `make`, or set LIBMLPROF_PATH); tried: "
                      + ", ".join(tried))


lib = load()
