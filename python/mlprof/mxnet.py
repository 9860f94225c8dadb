"""MXNet's profiler API (mxnet.profiler) on mlprof, under MXNet's names,
parameters and semantics. A script changes only its import:

    from mxnet import profiler           ->  from mlprof.mxnet import profiler
    import mxnet as mx; mx.profiler...   ->  import mlprof.mxnet as mx

Keys that only mean something inside MXNet's engine are accepted and mapped
to the nearest mlprof behaviour (the README's compatibility table).
"""
import sys

from . import (Counter, Domain, Event, Frame, Marker, Task, dump, dump_profile, dumps, pause,
               profiler_set_config, profiler_set_state, resume, scope, set_config, set_kvstore_handle,
               set_state)

__all__ = ["set_config", "profiler_set_config", "set_state", "profiler_set_state", "dump", "dump_profile",
           "dumps", "pause", "resume", "Domain", "Task", "Frame", "Event", "Counter", "Marker", "scope",
           "set_kvstore_handle", "profiler"]

# mx.profiler.set_config(...) as well as profiler.set_config(...)
profiler = sys.modules[__name__]
