"""RAF's profilers on mlprof: raf.utils.profiler (latency) and
raf.utils.memory_profiler, and raf.Device. A script changes only its import:

    import raf  ->  import mlprof.raf as raf

profiler: start(prof_level=1), stop(), get() (the trace as a dict, no file
written), clear(), dump(filename) (that file, for that dump only).
memory_profiler: reset(), start(), stop(), get_max_memory_info(device)
(max_used, max_allocated in MB, each with .value as RAF gives them),
get_memory_trace(device) (text). The two are separate global states, as in
RAF: stopping one leaves the other started. Memory operations come from whatever
records them: mlprof.memory_alloc/free/reserve/release, the torch tracer,
the malloc and CUDA hooks of `mlprof run`.
"""

from . import (_submodule, clear as _clear, device_number, dump_to, get as _get, get_config, get_state,
               memory_info, memory_reset, memory_trace, set_config, set_state, start as _start, stop as _stop)

__all__ = ["Device", "profiler", "memory_profiler", "utils"]

_MB = 1024.0 * 1024.0


class Device:
    """raf.Device("cuda"), Device("cuda(1)"), Device("cpu"): a device of the
    memory profiler."""

    def __init__(self, device="cpu"):
        self.mlprof_device = device_number(device)

    def __str__(self):
        d = self.mlprof_device
        return "cpu" if d == 0 else f"cuda({d - 1})"

    def __repr__(self):
        return f"Device({str(self)!r})"


class _Figure(float):
    """A number that also has .value, as RAF's figures (TVM's FloatImm) do."""

    @property
    def value(self):
        return float(self)


class _Profilers:
    """RAF's two profilers are global states of their own: each is started
    and stopped by itself, and stopping one leaves the other as it is. They
    share mlprof's recording, which is on while either is started (when one
    of them turned it on; a recording the program started with set_state is
    the program's to stop, but for profiler.stop(), which stops it as RAF's
    stop does)."""
    latency = False   # profiler.start(), and no stop() since
    memory = False    # memory_profiler.start(), and no stop() since
    ran = False       # the recording was turned on by one of them
    saved = None      # profile_memory before memory_profiler.start()


def _start_latency(prof_level=1):
    """Starts the latency profiler; prof_level 1 records the operators, 2 also
    what runs around them (domains of level 2)."""
    if get_state() == "stop":
        _Profilers.ran = True
    _start(prof_level=prof_level)
    _Profilers.latency = True


def _stop_latency():
    """Stops the latency profiler. With the memory profiler still started, the
    recording goes on for it (memory_profiler.stop() ends it)."""
    _Profilers.latency = False
    if _Profilers.memory and get_state() == "run":
        _Profilers.ran = True
        return
    _stop()
    _Profilers.ran = False


def _dump(filename):
    """Writes the trace recorded so far to filename; later dumps are not
    affected, and recording goes on."""
    return dump_to(filename)


profiler_functions = dict(start=_start_latency, stop=_stop_latency, get=_get, clear=_clear, dump=_dump)


def _mem_reset():
    """Starts the memory figures and the memory trace again."""
    memory_reset()


def _mem_start():
    """Records memory operations (and, while it is on, starts recording if it
    was off)."""
    if _Profilers.saved is None:
        _Profilers.saved = get_config("profile_memory")
    set_config(profile_memory=True, dump_at_exit=False)
    if get_state() == "stop":
        set_state("run")
        _Profilers.ran = True
    _Profilers.memory = True


def _mem_stop():
    """Stops recording memory operations, and the recording when one of the
    two profilers turned it on and the latency profiler is not started."""
    _Profilers.memory = False
    if _Profilers.ran and not _Profilers.latency:
        set_state("stop")
        _Profilers.ran = False
    if _Profilers.saved is not None:
        set_config(profile_memory=_Profilers.saved)
        _Profilers.saved = None


def _max_memory_info(device):
    """{"max_used": MB, "max_allocated": MB}: the peaks of the memory in live
    blocks and of what the program held (pools' segments included)."""
    info = memory_info(device)
    return {"max_used": _Figure(info["peak_used"] / _MB), "max_allocated": _Figure(info["peak_allocated"] / _MB)}


def _memory_trace(device):
    """The device's memory operations, one line each, as text."""
    return memory_trace(device)


memory_functions = dict(reset=_mem_reset, start=_mem_start, stop=_mem_stop,
                        get_max_memory_info=_max_memory_info, get_memory_trace=_memory_trace)


# raf.utils.profiler.start(), from mlprof.raf.utils import memory_profiler, ...
profiler = _submodule(__name__ + ".utils.profiler", profiler_functions)
memory_profiler = _submodule(__name__ + ".utils.memory_profiler", memory_functions)
utils = _submodule(__name__ + ".utils", dict(profiler=profiler, memory_profiler=memory_profiler))
