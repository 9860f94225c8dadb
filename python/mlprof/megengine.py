"""MegEngine's profiler API on mlprof: megengine.utils.profiler's Profiler and
profile, and megengine.jit's trace(profiling=True) with get_profile(). A
script changes only its import:

    from megengine.utils.profiler import profile, Profiler
        ->  from mlprof.megengine import profile, Profiler
    from megengine.jit import trace  ->  from mlprof.megengine import trace

Every entry into a profiled block or function is written to files of its
own (Profiler's docstring says how they are named); none is overwritten.
Neither discards a recording made before it and not yet dumped: an entry, or
a traced call, made then is recorded with it (a RuntimeWarning says so). A
traced call made while a recording is on (a Profiler's, or a whole run's
under `mlprof run`) is part of that recording; get_profile() reads its
events from it.
"""
import functools
import json
import warnings

from . import (MlprofError, Profiler, _keeps_earlier_recording, _submodule, clear, get_state, now_ns, profile,
               set_state, trace_json)

__all__ = ["Profiler", "profile", "trace"]


class _Traced:
    """A function under trace(profiling=True): each call is recorded, and
    get_profile() returns every call's events as one trace (a dict)."""

    def __init__(self, function, profiling):
        functools.update_wrapper(self, function)
        self._function, self._profiling = function, profiling
        self._events, self._meta, self._other, self.calls = [], {}, {}, 0
        # calls made while a recording was on: (began, ended) in ns, their
        # events read from that recording by get_profile()
        self._windows = []

    def __call__(self, *args, **kwargs):
        if not self._profiling:
            return self._function(*args, **kwargs)
        if get_state() == "run":
            # a recording is on: the call is part of it
            began = now_ns()
            try:
                return self._function(*args, **kwargs)
            finally:
                self._windows.append((began, now_ns()))
        if _keeps_earlier_recording(f"{self.__name__}() called with trace(profiling=True)", "the call",
                                    stacklevel=2):
            # recorded with the events kept; the call's own are those since it began
            began = now_ns()
            set_state("run")
            try:
                return self._function(*args, **kwargs)
            finally:
                set_state("stop")
                self._collect(json.loads(trace_json()), since_ns=began)
        clear()
        set_state("run")
        try:
            return self._function(*args, **kwargs)
        finally:
            set_state("stop")
            self._collect(json.loads(trace_json()))
            clear()

    def _collect(self, trace, since_ns=None):
        self.calls += 1
        since_us = None if since_ns is None else since_ns / 1000.0 - 0.001  # ts: microseconds, 3 decimals
        for e in trace.get("traceEvents", []):
            if e.get("ph") == "M":  # names of processes and threads: once each
                self._meta[(e.get("name"), e.get("pid"), e.get("tid"))] = e
            elif since_us is None or e.get("ts", since_us) >= since_us:
                self._events.append(e)
        self._other = trace.get("otherData", {})

    def _collect_windows(self):
        """The events of the calls made during a recording that is still
        there to read: those that began within a call (ts in microseconds,
        3 decimals: a nanosecond's margin each side)."""
        windows, self._windows = self._windows, []
        try:
            trace = json.loads(trace_json())
        except MlprofError as e:  # dumped since, or a Perfetto trace without its JSON copy
            warnings.warn(f"get_profile(): the events of {len(windows)} call(s) made during another recording "
                          f"cannot be read back: {e}", RuntimeWarning, stacklevel=3)
            self.calls += len(windows)
            return
        # a call made before this recording began was part of one dumped since
        start = trace.get("otherData", {}).get("start_ns", 0)
        lost = [w for w in windows if w[0] < start]
        if lost:
            warnings.warn(f"get_profile(): the events of {len(lost)} call(s) cannot be read back: the recording "
                          "they were part of was dumped or cleared since", RuntimeWarning, stacklevel=3)
        spans = [(b / 1000.0 - 0.001, e / 1000.0 + 0.001) for b, e in windows if b >= start]
        for e in trace.get("traceEvents", []):
            if e.get("ph") == "M":
                self._meta[(e.get("name"), e.get("pid"), e.get("tid"))] = e
            elif "ts" in e and any(b <= e["ts"] <= end for b, end in spans):
                self._events.append(e)
        self._other = trace.get("otherData", {})
        self.calls += len(windows)

    def get_profile(self):
        if not self._profiling:
            raise RuntimeError("get_profile(): this function was traced without profiling=True")
        if self._windows:
            self._collect_windows()
        other = dict(self._other, calls=self.calls)
        return {"traceEvents": list(self._meta.values()) + self._events, "displayTimeUnit": "ms",
                "otherData": other}

    def __get__(self, obj, objtype=None):  # a traced method
        return self if obj is None else functools.partial(self.__call__, obj)


def trace(function=None, *, symbolic=False, capture_as_const=False, profiling=False, **options):
    """megengine.jit.trace as a decorator, @trace or @trace(...): with
    profiling=True every call is recorded and f.get_profile() returns the
    trace. symbolic, capture_as_const and the other options of MegEngine's
    graph compiler have no meaning here and are accepted as they are."""
    if function is None:
        return lambda f: _Traced(f, profiling)
    return _Traced(function, profiling)


# from mlprof.megengine.utils.profiler import profile; from mlprof.megengine.jit import trace
utils = _submodule(__name__ + ".utils", dict(
    profiler=_submodule(__name__ + ".utils.profiler", dict(Profiler=Profiler, profile=profile))))
jit = _submodule(__name__ + ".jit", dict(trace=trace))
