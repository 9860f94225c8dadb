"""mlprof for Python: the C library through ctypes, in three styles.

MXNet's: set_config, set_state, pause/resume, dump, dumps, Domain, Task,
Frame, Event, Counter (+=, -=), Marker, scope(), and the deprecated
profiler_set_config, profiler_set_state, dump_profile.
MegEngine's: Profiler(path=..., format=..., formats=[...], sample_rate=...,
profile_device=...) as a context manager and as a decorator (@profile()).
RAF's: start(prof_level), stop(), get() (the trace as a dict), clear(),
dump(path).

Each style also has a module of its own that takes that framework's names
exactly (mlprof.mxnet, mlprof.megengine, mlprof.raf), so that a script
written for it needs only its import changed.

Errors of the C library are MlprofError, with its message (which names the
key, value or file).
"""
import atexit
import contextlib
import contextvars
import ctypes
import functools
import json
import operator
import os
import sys
import threading
import types
import warnings

from . import _lib
from ._lib import MemInfo, lib

__all__ = [
    "MlprofError", "version", "set_config", "get_config", "load_config", "set_state", "get_state", "pause",
    "resume", "is_paused", "dump", "dump_to", "dumps", "trace_json", "clear", "dropped_events", "output_path", "Domain", "Task",
    "Frame", "Event", "Counter", "Marker", "scope", "add_args", "memory_alloc", "memory_free", "memory_reserve",
    "memory_release", "memory_info", "memory_reset", "memory_trace", "device_number", "thread_name",
    "process_name", "now_ns", "start", "stop", "get", "Profiler", "profile", "profiler_set_config",
    "profiler_set_state", "dump_profile", "set_kvstore_handle", "schedule", "step", "step_number",
    "on_trace_ready",
]

_SORTS = {"total": 0, "avg": 1, "min": 2, "max": 3, "count": 4, "self": 5}
_FORMATS = {"table": 0, "json": 1}
# MXNet's marker scopes "task" and "marker" are drawn on the thread, as
# MXNet's own trace writer does with them
_SCOPES = {"global": 0, "process": 1, "thread": 2, "task": 2, "marker": 2}
_PROCESSES = ("worker", "server")
_CLASSES = {"user": 0, "operator": 1, "api": 2, "memory": 3}


class MlprofError(RuntimeError):
    """A call of the C library failed; .code is its status (negative), .name
    its name ("MLPROF_EKEY"); the message is the library's own."""

    def __init__(self, code, message):
        self.code = code
        self.name = lib.mlprof_err_name(code).decode()
        super().__init__(message)


def _check(rc):
    if rc < 0:
        msg = lib.mlprof_last_error().decode(errors="replace") or lib.mlprof_strerror(rc).decode()
        raise MlprofError(rc, msg)
    return rc


# trace_json() (RAF's get(), MegEngine's get_profile(), the checks for a
# recording not yet dumped) reads the trace as Chrome JSON whatever the file's
# format: a Perfetto trace then keeps a JSON copy (the json_copy key, off in
# the C library, where it costs a Perfetto dump about as much again), unless
# MLPROF_JSON_COPY says otherwise.
if "MLPROF_JSON_COPY" not in os.environ:
    lib.mlprof_set_config(b"json_copy", b"1")


def _b(s):
    return s.encode() if isinstance(s, str) else s


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _submodule(name, members):
    """A module made here and importable by name (mlprof.raf.utils.profiler),
    so that a framework's import paths keep working."""
    module = types.ModuleType(name)
    module.__dict__.update(members)
    sys.modules[name] = module
    return module


def version():
    """The library's version, such as "0.1.0"."""
    return lib.mlprof_version_string().decode()


# ---------------------------------------------------------------- control

def _this_process(profile_process, what):
    """MXNet's profile_process: "worker" is this process; "server" is a
    kvstore server, which mlprof does not control from here (a server run
    under mlprof profiles itself). False for the server, with a warning."""
    if profile_process not in _PROCESSES:
        raise ValueError(f'profile_process must be "worker" or "server", not {profile_process!r}')
    if profile_process == "server":
        warnings.warn(f"mlprof: {what}(profile_process='server') does nothing: mlprof has no kvstore server "
                      "to control from here; run the server under `mlprof run` to profile it", RuntimeWarning,
                      stacklevel=3)
        return False
    return True


def set_config(*args, **kwargs):
    """Sets configuration keys, all or none: set_config(filename="t.json",
    profile_all=True) or set_config("filename", "t.json"). MXNet's keys are
    taken too (profile_symbolic, profile_imperative, profile_process,
    gpu_memory_profile_filename_prefix): see the README's table."""
    if args:
        if len(args) != 2 or kwargs:
            raise TypeError("set_config(key, value) or set_config(key=value, ...)")
        kwargs = {args[0]: args[1]}
    if kwargs.get("profile_process") == "server" and not _this_process("server", "set_config"):
        return  # keys for a kvstore server's profiler
    keys = [_b(k) for k in kwargs]
    values = [_b(_text(v)) for v in kwargs.values()]
    n = len(keys)
    _check(lib.mlprof_set_configs(n, (ctypes.c_char_p * n)(*keys), (ctypes.c_char_p * n)(*values)))


def profiler_set_config(mode="symbolic", filename="profile.json"):
    """MXNet's deprecated form: turns on profile_<mode> ("symbolic", "imperative",
    "all", "api", "memory") and sets the trace's filename."""
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use profiler.set_config() instead",
                  stacklevel=2)  # MXNet's plain warn: a UserWarning, shown wherever it is called
    set_config(**{"profile_" + mode: True, "filename": filename})


def get_config(key):
    """A key's current value, as text."""
    buf = ctypes.create_string_buffer(8192)
    _check(lib.mlprof_get_config(_b(key), buf, len(buf)))
    return buf.value.decode()


def load_config(path):
    """Reads a configuration file (key = value lines)."""
    _check(lib.mlprof_load_config(_b(os.fspath(path))))


def set_state(state="stop", profile_process="worker"):
    """"run" starts recording, "stop" stops it (MXNet's profiler.set_state)."""
    if state not in ("run", "stop"):
        raise ValueError(f'state must be "run" or "stop", not {state!r}')
    if _this_process(profile_process, "set_state"):
        _check(lib.mlprof_set_state(1 if state == "run" else 0))
        if state == "run":
            _tell_os_environ()


def profiler_set_state(state="stop"):
    """MXNet's deprecated set_state."""
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use profiler.set_state() instead",
                  stacklevel=2)  # MXNet's plain warn: a UserWarning, shown wherever it is called
    set_state(state)


def get_state():
    return "run" if lib.mlprof_get_state() == 1 else "stop"


def pause(profile_process="worker"):
    if _this_process(profile_process, "pause"):
        _check(lib.mlprof_pause())


def resume(profile_process="worker"):
    if _this_process(profile_process, "resume"):
        _check(lib.mlprof_resume())


def is_paused():
    return bool(lib.mlprof_is_paused())


def set_kvstore_handle(handle):
    """MXNet's hook for the kvstore that carries server commands: kept, unused
    (mlprof controls this process only)."""
    global _kvstore_handle
    _kvstore_handle = handle


_kvstore_handle = None


def output_path(what="trace"):
    """Where an output goes: "trace", "stats", "memory_csv" or "memory_svg"."""
    buf = ctypes.create_string_buffer(8192)
    _check(lib.mlprof_output_path(_b(what), buf, len(buf)))
    return buf.value.decode()


def dump(finished=True, profile_process="worker"):
    """MXNet's dump: writes the trace to the configured filename; finished
    (the default) also stops recording and ends the trace. Returns the
    trace's path. For RAF's dump(path), a path as the first argument writes
    the trace there, for this dump only, and keeps recording."""
    if isinstance(finished, (str, os.PathLike)):
        return dump_to(finished, finished=False)
    if not _this_process(profile_process, "dump"):
        return None
    _check(lib.mlprof_dump(1 if finished is True else 0))
    return output_path("trace")


def dump_to(path, finished=False):
    """Writes the trace to path, for this dump only: the configured filename
    is neither changed nor written. Returns path."""
    path = os.fspath(path)
    _check(lib.mlprof_dump_to(_b(path), 1 if finished else 0))
    return path


def dump_profile():
    """MXNet's deprecated dump(True)."""
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead",
                  stacklevel=2)  # MXNet's plain warn: a UserWarning, shown wherever it is called
    return dump(True)


def _take_string(out):
    try:
        return ctypes.string_at(out.value).decode(errors="replace")
    finally:
        lib.mlprof_free(out)


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """The aggregate statistics as a table (str) or JSON (str), sorted by total,
    avg, min, max, count or self time (MXNet's dumps, same argument order).
    With aggregate_stats off none were gathered: "" (as MXNet prints nothing
    then), and a warning that names the key."""
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {', '.join(_FORMATS)}, not {format!r}")
    if sort_by not in _SORTS:
        raise ValueError(f"sort_by must be one of {', '.join(_SORTS)}, not {sort_by!r}")
    if get_config("aggregate_stats") != "true":
        warnings.warn("dumps(): aggregate_stats is off, so no statistics were gathered: "
                      "set_config(aggregate_stats=True) before the run", RuntimeWarning, stacklevel=2)
        return ""
    out = ctypes.c_void_p()
    _check(lib.mlprof_dumps(ctypes.byref(out), _FORMATS[format], _SORTS[sort_by], int(bool(ascending)),
                            int(bool(reset))))
    text = _take_string(out)
    _statistics_known[0] = None if reset else _statistics()  # read: an entry may discard them unsaid
    return text


def _statistics():
    """The statistics as dumps(format="json") gives them, in one order."""
    out = ctypes.c_void_p()
    _check(lib.mlprof_dumps(ctypes.byref(out), _FORMATS["json"], _SORTS["total"], 0, 0))
    return _take_string(out)


# The statistics last read with dumps() or left by a MegEngine-style entry
# (already in its files): an entry that discards those discards nothing unread.
_statistics_known = [None]


def _held_events():
    """How many events the recorder holds that a finished dump has not written
    (a clear() would throw them away, and the next dump write a trace without
    them): those of a recording stopped and not yet dumped. Not counted: the
    metadata, and the "memory peak (DEVICE)" instants, which every trace is
    given from the memory figures (kept after a finished dump) and that no
    one recorded."""
    return sum(1 for e in json.loads(trace_json())["traceEvents"] if e.get("ph") != "M" and not (
        e.get("ph") == "i" and e.get("cat") == "memory" and str(e.get("name")).startswith("memory peak (")))


def _unread_statistics():
    """True when the statistics hold rows nobody has read with dumps() (those
    of a recording finished with dump(), which keeps them for dumps())."""
    text = _statistics()
    stats = json.loads(text)
    rows = "memory" in stats or any(rows for d in stats.get("domains", ()) for key, rows in d.items()
                                    if isinstance(rows, list))
    return rows and text != _statistics_known[0]


def trace_json():
    """The trace recorded so far, as the JSON text a dump would write, without
    writing anything."""
    out = ctypes.c_void_p()
    _check(lib.mlprof_dump_string(ctypes.byref(out)))
    return _take_string(out)


def clear():
    """Discards what was recorded (RAF's clear)."""
    _check(lib.mlprof_clear())


def dropped_events():
    return lib.mlprof_dropped_events()


def schedule(*, wait, active, warmup=0, repeat=0, skip_first=0):
    """torch.profiler.schedule's arguments, as the value of the schedule key:
    set_config(schedule=mlprof.schedule(wait=1, warmup=1, active=3)). Steps
    skip_first, then cycles of wait (stopped), warmup (recorded, thrown
    away) and active steps (one finished trace a cycle), repeat times (0:
    until the end)."""
    values = {"skip_first": skip_first, "wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"schedule: {name} must be a count (an int >= 0), not {value!r}")
    if active < 1:
        raise ValueError("schedule: active must be at least 1")
    return ",".join(f"{name}:{value}" for name, value in values.items())


def step():
    """Marks the end of a training step (as torch.profiler's step()): the step
    becomes a ProfilerStep#N span, and a schedule decides what is recorded."""
    _check(lib.mlprof_step())


def step_number():
    """The number of the step under way."""
    return lib.mlprof_step_number()


_trace_ready = None  # the ctypes callback: kept alive while the library may call it


def on_trace_ready(fn):
    """Calls fn(trace_path, cycle) after each cycle of the schedule is written
    (on the thread that called step()); None removes it. An exception in fn
    is printed, not raised through the C library."""
    global _trace_ready
    if fn is None:
        lib.mlprof_on_trace_ready(None, None)
        _trace_ready = None
        return

    def call(path, cycle, user):
        try:
            fn(path.decode(errors="replace"), cycle)
        except Exception:  # an exception cannot cross the C frames
            import traceback
            traceback.print_exc()

    callback = _lib.TRACE_READY(call)
    lib.mlprof_on_trace_ready(ctypes.cast(callback, ctypes.c_void_p), None)
    _trace_ready = callback


def now_ns():
    return lib.mlprof_now_ns()


def thread_name(name):
    lib.mlprof_thread_set_name(_b(name))


def process_name(name):
    lib.mlprof_process_set_name(_b(name))


# ------------------------------------------------------------ instruments

def add_args(**kwargs):
    """Adds key/value arguments to the span just begun on this thread: ints,
    floats and strings (anything else as its str)."""
    for k, v in kwargs.items():  # all or none
        if isinstance(v, int) and not -2 ** 63 <= v < 2 ** 63:
            raise OverflowError(f"add_args: {k}={v} does not fit the trace's 64-bit integers; pass it as a str")
    for k, v in kwargs.items():
        if isinstance(v, bool) or isinstance(v, int):
            lib.mlprof_arg_int(_b(k), int(v))
        elif isinstance(v, float):
            lib.mlprof_arg_double(_b(k), v)
        else:
            lib.mlprof_arg_str(_b(k), _b(str(v)))


class Domain:
    """A named group of tasks, frames, counters and markers (MXNet's Domain)."""

    def __init__(self, name, klass="user", level=None):
        self.name = name
        self._h = lib.mlprof_domain_create(_b(name))
        if not self._h:
            _check(-6)
        if klass != "user":
            _check(lib.mlprof_domain_set_class(self._h, _CLASSES[klass]))
        if level is not None:
            _check(lib.mlprof_domain_set_level(self._h, level))

    def new_task(self, name):
        return Task(self, name)

    def new_frame(self, name):
        return Frame(self, name)

    def new_counter(self, name, value=None):
        return Counter(self, name, value)

    def new_marker(self, name):
        return Marker(self, name)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Domain({self.name!r})"


class _Decorates:
    """Used as a decorator, each call of the function runs inside `with self`."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with self:
                return fn(*a, **kw)
        return wrapper


class _Span(_Decorates):
    """start()/stop(), or with: ...; arguments with args(**kw) while open."""

    def start(self, **args):
        lib.mlprof_begin(self._h)
        if args:
            add_args(**args)
        return self

    def stop(self):
        lib.mlprof_end(self._h)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib:
            lib.mlprof_span_destroy(h)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class Task(_Span):
    def __init__(self, domain, name):
        self.domain, self.name = domain, name
        self._h = lib.mlprof_task_create(domain._h if domain else None, _b(name))


class Frame(_Span):
    def __init__(self, domain, name):
        self.domain, self.name = domain, name
        self._h = lib.mlprof_frame_create(domain._h if domain else None, _b(name))


class Event(_Span):
    def __init__(self, name):
        self.domain, self.name = None, name
        self._h = lib.mlprof_event_create(_b(name))


# MXNet's counters are uint64_t; the trace holds a counter's value as a signed
# 64-bit number, so the values both can hold exactly are these
COUNTER_MAX = 2 ** 63 - 1


def _whole(value, what):
    """value as an int: an int (or an integer of numpy's: anything with
    __index__), or a float with no fraction. Anything else, a bool included,
    is a TypeError naming it: truncating 1.5 to 1 would record a number the
    program never had."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not {value!r}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {value!r}") from None


def _counter_value(value, what="a counter's value"):
    value = _whole(value, what)
    if value < 0:
        raise ValueError(f"{what} must be 0 or more (MXNet's counters are unsigned), not {value}")
    if value > COUNTER_MAX:
        raise OverflowError(f"{what} must be at most {COUNTER_MAX} (the trace records counters as signed 64-bit "
                            f"numbers), not {value}")
    return value


class Counter:
    """MXNet's Counter: an integer from 0 to COUNTER_MAX (2**63 - 1) over
    time, with set_value, increment, decrement, and += / -=. Values are
    integers, as MXNet's are: 1.5 is a TypeError, a value below 0 (set, or
    reached by a decrement) a ValueError, one above COUNTER_MAX an
    OverflowError. Deleting the Counter releases its handle, as MXNet's
    does; a Counter made again under the same name starts at 0 (or value)."""

    def __init__(self, domain, name, value=None):
        self.domain, self.name = domain, name
        if value is not None:
            value = _counter_value(value)
        self._h = lib.mlprof_counter_create(domain._h if domain else None, _b(name))
        if not self._h:
            _check(-6)
        if value is not None:
            lib.mlprof_counter_set(self._h, value)

    def set_value(self, value):
        lib.mlprof_counter_set(self._h, _counter_value(value))

    def _add(self, delta):
        # checked against the value now: adds from other threads in between
        # are not seen, one thread's own never cross the limits unseen
        now = lib.mlprof_counter_value(self._h)
        _counter_value(now + delta, f"the counter {self.name!r} after {now} {'+' if delta >= 0 else '-'} {abs(delta)}")
        lib.mlprof_counter_add(self._h, delta)

    def increment(self, delta=1):
        self._add(_whole(delta, "a counter's increment"))

    def decrement(self, delta=1):
        self._add(-_whole(delta, "a counter's decrement"))

    @property
    def value(self):
        return lib.mlprof_counter_value(self._h)

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib:
            lib.mlprof_counter_destroy(h)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Counter({self.name!r}, value={self.value})"


class Marker:
    """An instant: mark(scope="process"), the scope "global", "process" or
    "thread" ("task" and "marker", MXNet's other two, are drawn on the thread).
    Deleting the Marker releases its handle, as MXNet's does."""

    def __init__(self, domain, name):
        self.domain, self.name = domain, name
        self._h = lib.mlprof_marker_create(domain._h if domain else None, _b(name))
        if not self._h:
            _check(-6)

    def mark(self, scope="process"):
        if scope not in _SCOPES:
            raise ValueError(f"scope must be one of {', '.join(_SCOPES)}, not {scope!r}")
        lib.mlprof_mark(self._h, _SCOPES[scope])

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib:
            lib.mlprof_marker_destroy(h)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Marker({self.name!r})"


# The scope as MXNet's scope() sees it ("model:conv1:"), and how many names
# this module pushed on the library's per-thread scope stack to make it.
_UNKNOWN_SCOPE = "<unk>:"
_scope_now = contextvars.ContextVar("mlprof_scope", default=(_UNKNOWN_SCOPE, 0))


def _push_parts(full):
    parts = [p for p in full.split(":") if p]
    for p in parts:
        lib.mlprof_scope_push(_b(p))
    return len(parts)


def _pop(n):
    for _ in range(n):
        lib.mlprof_scope_pop()


@contextlib.contextmanager
def scope(name=_UNKNOWN_SCOPE, append_mode=True):
    """MXNet's scope: with scope("model"): ... - spans and memory inside carry
    "model:". Nested scopes append ("model:conv1:") unless append_mode is
    False, which replaces the scope this function made for the block. Yields
    the scope's full name."""
    name = name if name.endswith(":") else name + ":"
    outer, outer_depth = _scope_now.get()
    replaced = 0
    if append_mode and outer != _UNKNOWN_SCOPE:
        depth = _push_parts(name)  # under the outer names, still pushed
        name = outer + name
    else:
        _pop(outer_depth)
        replaced = outer_depth
        depth = _push_parts(name)
    token = _scope_now.set((name, outer_depth + depth if not replaced else depth))
    try:
        yield name
    finally:
        _scope_now.reset(token)
        _pop(depth)
        if replaced:
            _push_parts(outer)


# ----------------------------------------------------------------- memory

_DEVICE_WORDS = {"cpu": None, "cuda": 0, "gpu": 0}
CUDA_DEVICES = 64        # cuda:0 to cuda:63 (MLPROF_DEVICE_CUDA(n) in mlprof.h)
BLOCK_BYTES_MAX = 2 ** 48 - 1  # the largest block or segment the memory profiler records


def device_number(device):
    """The library's number for a device: an int as it is (0: cpu, 1 + n:
    cuda:n, up to 1023 for devices of your own), "cpu", "cuda", "cuda:1",
    "cuda(1)" (n from 0 to 63), or an object with an mlprof_device attribute
    (mlprof.raf.Device)."""
    if isinstance(device, bool):
        raise TypeError(f"not a device: {device!r}")
    if isinstance(device, int):
        return device  # the library refuses one out of range (MlprofError, MLPROF_EINVAL)
    if hasattr(device, "mlprof_device"):
        return device.mlprof_device
    text = str(device).strip().lower()
    kind, index = text, None
    for sep, close in ((":", ""), ("(", ")")):
        if sep in text and text.endswith(close):
            kind, _, rest = text.partition(sep)
            index = rest[:len(rest) - len(close)] if close else rest
            break
    if kind not in _DEVICE_WORDS or (index is not None and not index.isdigit()):
        raise ValueError(f"unknown device {device!r}: cpu, cuda, cuda:N or a device number")
    if _DEVICE_WORDS[kind] is None:
        if index not in (None, "0"):
            raise ValueError(f"unknown device {device!r}: there is one cpu device")
        return 0
    if int(index or 0) >= CUDA_DEVICES:
        raise ValueError(f"unknown device {device!r}: mlprof records cuda:0 to cuda:{CUDA_DEVICES - 1}")
    return 1 + int(index or 0)


def _address(address):
    """A block's address: an int from 0 to 2**64 - 1 (TypeError, ValueError
    otherwise, naming it; ctypes would wrap -1 into 0xffff...), or None (a
    NULL pointer, which the library takes as nothing to account)."""
    if address is None:
        return None
    if isinstance(address, float):
        raise TypeError(f"an address must be an integer, not {address!r}")
    address = _whole(address, "an address")
    if not 0 <= address < 2 ** 64:
        raise ValueError(f"an address is from 0 to 2**64 - 1, not {address}")
    return address


def _size(nbytes):
    """A block's or a segment's size in bytes: an integer from 0 to
    BLOCK_BYTES_MAX (256 TiB), which the memory profiler records exactly."""
    nbytes = _whole(nbytes, "a size in bytes")
    if nbytes < 0:
        raise ValueError(f"a size in bytes must be 0 or more, not {nbytes}")
    if nbytes > BLOCK_BYTES_MAX:
        raise OverflowError(f"a size of {nbytes} bytes is more than the memory profiler records "
                            f"(BLOCK_BYTES_MAX, {BLOCK_BYTES_MAX} bytes)")
    return nbytes


def memory_alloc(address, nbytes, device=0, tag=None):
    """Records a block allocated at address (an int) of nbytes on device
    (0 or "cpu"; 1 + n or "cuda:n")."""
    _check(lib.mlprof_mem_alloc(device_number(device), _address(address), _size(nbytes),
                                _b(tag) if tag else None))


def memory_free(address, device=0):
    _check(lib.mlprof_mem_free(device_number(device), _address(address)))


def memory_reserve(address, nbytes, device=0):
    """A pool takes a segment of nbytes at address from the system: what is
    "allocated" grows, what is "used" does not until blocks are allocated in it."""
    _check(lib.mlprof_mem_reserve(device_number(device), _address(address), _size(nbytes)))


def memory_release(address, device=0):
    """A pool gives the segment that starts at address back to the system."""
    _check(lib.mlprof_mem_release(device_number(device), _address(address)))


def memory_info(device=0):
    """Used and allocated bytes, their peaks and the counts, as a dict."""
    info = MemInfo()
    _check(lib.mlprof_mem_info_get(device_number(device), ctypes.byref(info), ctypes.sizeof(info)))
    return {name: getattr(info, name) for name, _ in MemInfo._fields_}


def memory_reset():
    """Starts the memory figures again (peaks from the memory in use now,
    counts and the memory trace emptied); the trace's events are kept."""
    _check(lib.mlprof_mem_reset())


def memory_trace(device=0):
    """A device's memory operations since the start or the last reset, as
    text: one line each, with the memory used and allocated after it."""
    out = ctypes.c_void_p()
    _check(lib.mlprof_mem_trace(device_number(device), ctypes.byref(out)))
    return _take_string(out)


# ------------------------------------------------------------ RAF's style

def start(prof_level=1, level=None):
    """RAF's profiler.start: records domains up to prof_level (level: the
    same). Like RAF, nothing is written unless asked (dump, or dump_to): the
    dump at exit is turned off."""
    set_config(level=prof_level if level is None else level, dump_at_exit=False)
    set_state("run")


def stop():
    set_state("stop")


def get():
    """The trace recorded so far, as a dict (the Chrome trace's JSON); writes
    nothing, and keeps what was recorded (clear() discards it)."""
    return json.loads(trace_json())


# ------------------------------------------------------- MegEngine's style

_DEFAULT = object()
# Held while the entries' counts change and while a recording of theirs begins
# or ends (an entry on another thread waits for the files to be written).
_entry_lock = threading.RLock()
_claimed = set()        # output stems given to entries by this process
# the entries open in this process, the Profiler whose entry is the recording
# and the others that entered while it was open (their entries are part of it)
_open = {"depth": 0, "outer": None, "members": {}}


def _claim(folder, formats):
    """The stem of a new entry's files in folder: PID, then PID.2, PID.3...,
    never one whose files exist or that this process gave out before."""
    pid, n = os.getpid(), 1
    while True:
        stem = os.path.join(folder, str(pid) if n == 1 else f"{pid}.{n}")
        if stem not in _claimed and not any(os.path.lexists(f"{stem}.{f}") for f in formats):
            _claimed.add(stem)
            return stem
        n += 1


def _keeps_earlier_recording(what, this, stacklevel):
    """Before an entry profiles on its own (clear(), run, dump): "held" when
    the recorder holds events recorded and stopped but not yet dumped (the
    entry must then record with them: clearing would lose them, and their
    dump would write an empty trace), else None; statistics nobody has read,
    which the entry's clear() discards, are said in a warning."""
    held = _held_events()
    if held:
        warnings.warn(f"mlprof: {what} while {held} events recorded earlier are not yet dumped: they are kept, and "
                      f"{this} is recorded with them (their dump() writes both), not on its own; dump() or "
                      "clear() them before it to profile it on its own", RuntimeWarning,
                      stacklevel=stacklevel + 1)
        return "held"
    if _unread_statistics():
        warnings.warn(f"mlprof: {what} discards the statistics of the earlier recording, not read with dumps(); "
                      "read them before it, or clear() them", RuntimeWarning, stacklevel=stacklevel + 1)
    return None


class Profiler(_Decorates):
    """MegEngine's Profiler: with Profiler(path="profile"): ... or @Profiler()
    / @profile(). Every entry into the block or the function is profiled on
    its own and written when it ends into the folder path, in files of its
    own: PID.FORMAT for the first, PID.2.FORMAT, PID.3.FORMAT... after it
    (no file is ever overwritten; .entries lists each entry's files, .outputs
    the last one's). An entry that begins inside another one (recursion, a
    nested Profiler) is part of it. Entries that overlap without nesting
    (p1.start(); p2.start(); p1.stop(); p2.stop(), or entries on two threads)
    are one recording too: it ends when the last of them ends, and is written
    then, in the files of the one that began it; every Profiler that took
    part lists those files in its .entries. stop() with no entry of this
    Profiler open is a RuntimeError.

    An entry that begins while recording is on (set_state("run")), or while
    events recorded earlier are stopped but not yet dumped, is recorded with
    them and writes no files of its own (a RuntimeWarning says so): profiling
    it on its own would throw those events away.

    format / formats: among "chrome_timeline.json" (the trace, the default),
    "memory_flow.svg", "memory.csv", "stats.txt" (the statistics table) and
    "stats.json". sample_rate: if not 0, memory is profiled with a sample
    every N memory operations. profile_device: GPU activity (the gpu key);
    MegEngine's default, True, records it where there is an NVIDIA driver.
    Other keyword arguments are configuration keys (counters=..., level=...)."""

    FORMATS = ("chrome_timeline.json", "stats.txt", "stats.json", "memory_flow.svg", "memory.csv")

    def __init__(self, path="profile", format=None, formats=None, sample_rate=0, profile_device=_DEFAULT,
                 **config):
        chosen = [formats] if isinstance(formats, str) else list(formats or ())
        if format is not None or not chosen:
            chosen.insert(0, format or "chrome_timeline.json")
        chosen = list(dict.fromkeys(chosen))
        bad = [f for f in chosen if f not in self.FORMATS]
        if bad:
            raise ValueError(f"unknown format {bad[0]!r} (one of {', '.join(self.FORMATS)})")
        for key in config:  # an unknown key is an error now, not at the first entry
            get_config(key)
        self.path, self.formats, self.config = os.fspath(path), tuple(chosen), dict(config)
        if sample_rate:
            self.config.setdefault("profile_memory", True)
            self.config["memory_sample_rate"] = sample_rate
        if any(f.startswith("memory") for f in chosen):
            self.config.setdefault("profile_memory", True)
        if "gpu" not in self.config:
            if profile_device is _DEFAULT:
                if os.path.exists("/dev/nvidiactl"):
                    self.config["gpu"] = "on"
            else:
                self.config["gpu"] = "on" if profile_device else "off"
        self.entries, self.outputs = [], {}
        self._profile = None
        self._depth = 0  # this Profiler's entries open now

    def __enter__(self):
        with _entry_lock:
            self._depth += 1
            _open["depth"] += 1
            if _open["depth"] > 1:  # part of the recording under way
                if _open["outer"] is not self:
                    _open["members"][id(self)] = self
                return self
            _open["outer"], _open["members"] = self, {}
            try:
                self._begin()
            except BaseException:
                self._depth -= 1
                _open["depth"], _open["outer"] = 0, None
                raise
        return self

    def __exit__(self, *exc):
        with _entry_lock:
            if self._depth == 0:
                raise RuntimeError(f"Profiler(path={self.path!r}).stop(): no entry of this Profiler is open "
                                   "(stop() without start(), or once more than it was started)")
            self._depth -= 1
            _open["depth"] -= 1
            if _open["depth"] > 0:
                return False
            outer, members = _open["outer"], list(_open["members"].values())
            _open["outer"], _open["members"] = None, {}
            outputs = outer._end()  # the lock held: no entry begins before the files are written
            if outputs is not None:
                for member in members:
                    member.entries.append(outputs)
                    member.outputs, member._profile = outputs, outer._profile
        return False

    start = __enter__

    @staticmethod
    def step():
        """Marks the end of a training step (mlprof.step()): with the schedule
        key among the keyword arguments, the schedule decides what is kept."""
        step()

    def stop(self):
        """Ends an entry of this Profiler (started with start()); a
        RuntimeError when none is open."""
        self.__exit__(None, None, None)

    def _begin(self):
        self._joined = "run" if get_state() == "run" else None
        if self._joined:
            warnings.warn("mlprof: Profiler entered while recording was already on (set_state('run')): this entry "
                          "is recorded in that run, not in files of its own", RuntimeWarning, stacklevel=3)
            return
        self._joined = _keeps_earlier_recording("Profiler entered", "this entry", stacklevel=3)
        if self._joined:
            set_state("run")  # with the events kept; stopped again when it ends
            return
        os.makedirs(self.path, exist_ok=True)
        self._stem = stem = _claim(self.path, self.FORMATS)
        keys = dict(filename=stem + ".chrome_timeline.json", stats_file="",
                    memory_svg=stem + ".memory_flow.svg" if "memory_flow.svg" in self.formats else "",
                    memory_csv=stem + ".memory.csv" if "memory.csv" in self.formats else "", **self.config)
        self._saved = {k: get_config(k) for k in keys}  # put back when it ends
        set_config(**keys)
        clear()
        set_state("run")

    def _end(self):
        """Ends the recording this entry began and writes its files; returns
        their paths by format, or None when the entry wrote none."""
        if self._joined:
            if self._joined == "held":
                set_state("stop")
            return None
        stem, outputs = self._stem, {}
        try:
            if "chrome_timeline.json" not in self.formats:
                self._profile = trace_json()
            trace = dump(True)
            if "chrome_timeline.json" in self.formats:
                outputs["chrome_timeline.json"] = trace
                self._profile = None
            else:
                os.unlink(trace)
            for fmt, kind in (("stats.txt", "table"), ("stats.json", "json")):
                if fmt in self.formats:
                    with open(f"{stem}.{fmt}", "x") as f:
                        f.write(dumps(format=kind))
                    outputs[fmt] = f"{stem}.{fmt}"
            for fmt in ("memory_flow.svg", "memory.csv"):
                if fmt in self.formats and os.path.exists(f"{stem}.{fmt}"):
                    outputs[fmt] = f"{stem}.{fmt}"
        finally:
            set_config(**self._saved)
            self.entries.append(outputs)
            self.outputs = outputs
        _statistics_known[0] = _statistics()  # the entry's own: in its files, or not asked for
        return outputs

    def get_profile(self):
        """The last entry's trace, as a dict."""
        if not self.entries:
            with _entry_lock:
                open_now = self._depth or self is _open["outer"] or id(self) in _open["members"]
            if open_now:
                raise RuntimeError("get_profile(): this Profiler's entry has not ended yet (it ends with the last "
                                   "of the entries that overlap it)")
            raise RuntimeError("get_profile(): this Profiler has no entry written yet (not entered, or only "
                               "inside a recording already under way)")
        if self._profile is not None:
            return json.loads(self._profile)
        with open(self.outputs["chrome_timeline.json"]) as f:
            return json.load(f)


def profile(*args, **kwargs):
    """MegEngine's profile, Profiler's alias: @profile() and @profile alike."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return Profiler()(args[0])
    return Profiler(*args, **kwargs)


# ------------------------------------------------------- child processes

def _tell_os_environ():
    """A process that records names its trace's path in the C environment
    (MLPROF_TRACE_OWNER), which its children inherit, so that one started
    with the same MLPROF_FILENAME writes NAME.PID.json instead of replacing
    that trace. os.environ is a copy taken at startup: it gets the variable
    too, for children given env=dict(os.environ, ...)."""
    value = _libc_getenv(b"MLPROF_TRACE_OWNER")
    if value and os.environ.get("MLPROF_TRACE_OWNER") != value.decode(errors="surrogateescape"):
        os.environ["MLPROF_TRACE_OWNER"] = value.decode(errors="surrogateescape")


try:
    _libc_getenv = ctypes.CDLL(None).getenv
    _libc_getenv.restype = ctypes.c_char_p
    _libc_getenv.argtypes = [ctypes.c_char_p]
except (OSError, AttributeError):  # no C library to ask: nothing to tell
    def _libc_getenv(name):
        return None


class _ChildHook:
    """multiprocessing's children (fork, forkserver, spawn) end in os._exit,
    which runs no exit handler, so a child would never write its trace. The
    library's part: multiprocessing runs this hook in each child it starts,
    which adds a finalizer that multiprocessing runs when the child's work is
    done (after its own, and after the child's children are joined), writing
    the trace as the exit handler would (mlprof_exit_dump). A child stopped by
    terminate() (SIGTERM: `with Pool()` does it) writes its trace from the
    library's SIGTERM handler instead."""

    registered = False

    @staticmethod
    def in_child(_hook):
        from multiprocessing import util
        util.Finalize(None, lib.mlprof_exit_dump, exitpriority=-100)

    @classmethod
    def register(cls):
        """Once multiprocessing is imported: at this import, or before a fork."""
        util = sys.modules.get("multiprocessing.util")
        if cls.registered or util is None:
            return
        util.register_after_fork(_child_hook, cls.in_child)  # a weak reference: _child_hook stays
        cls.registered = True


_child_hook = _ChildHook()
_ChildHook.register()
os.register_at_fork(before=_ChildHook.register)


def _dump_before_sigint_exit():
    """An uncaught KeyboardInterrupt (^C) ends Python by a SIGINT it sends
    itself once its own exit handlers (this one) have run, so the C library's
    exit handler never runs and the trace would be lost. Here the trace is
    written as that handler would write it (mlprof_exit_dump), which then
    finds nothing left; any other ending is left to the C handler."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(last, KeyboardInterrupt):
        lib.mlprof_exit_dump()


atexit.register(_dump_before_sigint_exit)
