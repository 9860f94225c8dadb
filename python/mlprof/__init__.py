"""mlprof for Python: the C library through ctypes, in three styles.

MXNet's: set_config, set_state, pause/resume, dump, dumps, Domain, Task,
Frame, Event, Counter (+=, -=), Marker, scope().
MegEngine's: Profiler(path=..., formats=[...], sample_rate=...) as a context
manager and as a decorator (@profile()).
RAF's: start(level), stop(), get() (the trace as a dict), clear(), dump(path).

Errors of the C library are MlprofError, with its message (which names the
key, value or file).
"""
import contextlib
import ctypes
import functools
import json
import os

from ._lib import MemInfo, lib

__all__ = [
    "MlprofError", "version", "set_config", "get_config", "load_config", "set_state", "get_state", "pause",
    "resume", "is_paused", "dump", "dumps", "clear", "dropped_events", "output_path", "Domain", "Task", "Frame",
    "Event", "Counter", "Marker", "scope", "add_args", "memory_alloc", "memory_free", "memory_info",
    "thread_name", "process_name", "now_ns", "start", "stop", "get", "Profiler", "profile",
]

_SORTS = {"total": 0, "avg": 1, "min": 2, "max": 3, "count": 4, "self": 5}
_FORMATS = {"table": 0, "json": 1}
_SCOPES = {"global": 0, "process": 1, "thread": 2}
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


def _b(s):
    return s.encode() if isinstance(s, str) else s


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def version():
    """The library's version, such as "0.1.0"."""
    return lib.mlprof_version_string().decode()


# ---------------------------------------------------------------- control

def set_config(*args, **kwargs):
    """Sets configuration keys, all or none: set_config(filename="t.json",
    profile_all=True) or set_config("filename", "t.json")."""
    if args:
        if len(args) != 2 or kwargs:
            raise TypeError("set_config(key, value) or set_config(key=value, ...)")
        kwargs = {args[0]: args[1]}
    keys = [_b(k) for k in kwargs]
    values = [_b(_text(v)) for v in kwargs.values()]
    n = len(keys)
    _check(lib.mlprof_set_configs(n, (ctypes.c_char_p * n)(*keys), (ctypes.c_char_p * n)(*values)))


def get_config(key):
    """A key's current value, as text."""
    buf = ctypes.create_string_buffer(8192)
    _check(lib.mlprof_get_config(_b(key), buf, len(buf)))
    return buf.value.decode()


def load_config(path):
    """Reads a configuration file (key = value lines)."""
    _check(lib.mlprof_load_config(_b(os.fspath(path))))


def set_state(state="stop"):
    """"run" starts recording, "stop" stops it (MXNet's profiler.set_state)."""
    if state not in ("run", "stop"):
        raise ValueError(f'state must be "run" or "stop", not {state!r}')
    _check(lib.mlprof_set_state(1 if state == "run" else 0))


def get_state():
    return "run" if lib.mlprof_get_state() == 1 else "stop"


def pause():
    _check(lib.mlprof_pause())


def resume():
    _check(lib.mlprof_resume())


def is_paused():
    return bool(lib.mlprof_is_paused())


def output_path(what="trace"):
    """Where an output goes: "trace", "stats", "memory_csv" or "memory_svg"."""
    buf = ctypes.create_string_buffer(8192)
    _check(lib.mlprof_output_path(_b(what), buf, len(buf)))
    return buf.value.decode()


def dump(finished=True):
    """Writes the trace (MXNet: dump(finished=True) also stops; RAF:
    dump(path) writes it to path). Returns the trace's path."""
    if isinstance(finished, (str, os.PathLike)):
        set_config(filename=os.fspath(finished))
        finished = True
    _check(lib.mlprof_dump(1 if finished else 0))
    return output_path("trace")


def dumps(format="table", sort_by="total", ascending=False, reset=False):
    """The aggregate statistics as a table (str) or JSON (str), sorted by total,
    avg, min, max, count or self time."""
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {', '.join(_FORMATS)}, not {format!r}")
    if sort_by not in _SORTS:
        raise ValueError(f"sort_by must be one of {', '.join(_SORTS)}, not {sort_by!r}")
    out = ctypes.c_void_p()
    _check(lib.mlprof_dumps(ctypes.byref(out), _FORMATS[format], _SORTS[sort_by], int(bool(ascending)),
                            int(bool(reset))))
    try:
        return ctypes.string_at(out.value).decode(errors="replace")
    finally:
        lib.mlprof_free(out)


def clear():
    """Discards what was recorded (RAF's clear)."""
    _check(lib.mlprof_clear())


def dropped_events():
    return lib.mlprof_dropped_events()


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


class Counter:
    """A value over time: set_value, increment, decrement, and += / -=."""

    def __init__(self, domain, name, value=None):
        self.domain, self.name = domain, name
        self._h = lib.mlprof_counter_create(domain._h if domain else None, _b(name))
        if value is not None:
            self.set_value(value)

    def set_value(self, value):
        if isinstance(value, float) and not value.is_integer():
            lib.mlprof_counter_set_double(self._h, value)
        else:
            lib.mlprof_counter_set(self._h, int(value))

    def increment(self, delta=1):
        lib.mlprof_counter_add(self._h, int(delta))

    def decrement(self, delta=1):
        lib.mlprof_counter_add(self._h, -int(delta))

    @property
    def value(self):
        return lib.mlprof_counter_value(self._h)

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __repr__(self):
        return f"Counter({self.name!r}, value={self.value})"


class Marker:
    """An instant: mark(scope="process"), the scope "global", "process" or "thread"."""

    def __init__(self, domain, name):
        self.domain, self.name = domain, name
        self._h = lib.mlprof_marker_create(domain._h if domain else None, _b(name))

    def mark(self, scope="process"):
        if scope not in _SCOPES:
            raise ValueError(f"scope must be one of {', '.join(_SCOPES)}, not {scope!r}")
        lib.mlprof_mark(self._h, _SCOPES[scope])


@contextlib.contextmanager
def scope(name):
    """with scope("model"): ... - spans and memory inside carry "model:"."""
    lib.mlprof_scope_push(_b(name))
    try:
        yield lib.mlprof_scope_current().decode()
    finally:
        lib.mlprof_scope_pop()


# ----------------------------------------------------------------- memory

def memory_alloc(address, nbytes, device=0, tag=None):
    """Records a block allocated at address (an int) of nbytes on device
    (0: cpu, 1 + n: cuda:n)."""
    _check(lib.mlprof_mem_alloc(device, address, nbytes, _b(tag) if tag else None))


def memory_free(address, device=0):
    _check(lib.mlprof_mem_free(device, address))


def memory_info(device=0):
    """Used and allocated bytes, their peaks and the counts, as a dict."""
    info = MemInfo()
    _check(lib.mlprof_mem_info_get(device, ctypes.byref(info), ctypes.sizeof(info)))
    return {name: getattr(info, name) for name, _ in MemInfo._fields_}


# ------------------------------------------------------------ RAF's style

def start(level=1):
    """Starts recording with this level (domains up to it are recorded)."""
    set_config(level=level)
    set_state("run")


def stop():
    set_state("stop")


def get():
    """The trace recorded so far, as a dict (the Chrome trace's JSON)."""
    path = dump(False)
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------- MegEngine's style

class Profiler(_Decorates):
    """with Profiler(path="profile"): ... or @Profiler() / @profile(): records
    what runs inside and writes the outputs when it ends, into the folder path:
    formats among "chrome_timeline.json" (the trace), "stats.txt" (the
    statistics table), "stats.json", "memory_flow.svg" and "memory.csv".
    sample_rate: one memory sample every N memory operations. Other keyword
    arguments are configuration keys (profile_memory=True, counters=...)."""

    FORMATS = ("chrome_timeline.json", "stats.txt", "stats.json", "memory_flow.svg", "memory.csv")

    def __init__(self, path="profile", formats=("chrome_timeline.json",), sample_rate=None, **config):
        if isinstance(formats, str):
            formats = (formats,)
        bad = [f for f in formats if f not in self.FORMATS]
        if bad:
            raise ValueError(f"unknown format {bad[0]!r} (one of {', '.join(self.FORMATS)})")
        self.path, self.formats, self.config = os.fspath(path), tuple(formats), dict(config)
        if sample_rate is not None:
            self.config["memory_sample_rate"] = sample_rate
        if any(f.startswith("memory") for f in formats):
            self.config.setdefault("profile_memory", True)
        self.outputs = {}

    def _stem(self):
        return os.path.join(self.path, str(os.getpid()))

    def __enter__(self):
        os.makedirs(self.path, exist_ok=True)
        stem = self._stem()
        keys = dict(filename=stem + ".chrome_timeline.json",
                    memory_svg=stem + ".memory_flow.svg" if "memory_flow.svg" in self.formats else "",
                    memory_csv=stem + ".memory.csv" if "memory.csv" in self.formats else "", **self.config)
        self._saved = {k: get_config(k) for k in keys}  # put back when it ends
        set_config(**keys)
        clear()
        set_state("run")
        return self

    def __exit__(self, *exc):
        stem = self._stem()
        trace = dump(True)
        if "chrome_timeline.json" in self.formats:
            self.outputs["chrome_timeline.json"] = trace
        else:
            os.unlink(trace)
        for fmt, kind in (("stats.txt", "table"), ("stats.json", "json")):
            if fmt in self.formats:
                with open(f"{stem}.{fmt}", "w") as f:
                    f.write(dumps(format=kind))
                self.outputs[fmt] = f"{stem}.{fmt}"
        for fmt in ("memory_flow.svg", "memory.csv"):
            if fmt in self.formats:
                self.outputs[fmt] = f"{stem}.{fmt}"
        set_config(**self._saved)
        return False


profile = Profiler
