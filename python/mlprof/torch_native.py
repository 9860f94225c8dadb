"""The native path of mlprof.torch: the C++ extension (_torch_native.cpp)
that records every operator from torch's RecordFunction callbacks and every
tensor allocation from torch's allocator reporting, found, loaded with
ctypes after torch, and given libmlprof's functions.

load() returns the library, or None with the reason in why(): no extension
built (no torch headers where it was built), not loadable (built against
another torch: an ABI mismatch shows as an undefined symbol), or turned off
with MLPROF_TORCH_NATIVE=0. mlprof.torch then uses its dispatch-mode path."""
import ctypes
import glob
import os

from . import _lib

SHAPES, MEMORY, GLOBAL = 1, 2, 4

_fn = ctypes.c_void_p


class _Api(ctypes.Structure):
    """struct Api of _torch_native.cpp, field for field."""
    _fields_ = [(name, _fn) for name in (
        "get_state", "task_create", "begin", "end", "arg_int", "arg_str", "mem_alloc", "mem_free", "domain",
        "opcost_op", "mem_reserve", "mem_release")]


_state = {"lib": None, "why": None, "tried": False}


def _candidates():
    """MLPROF_TORCH_NATIVE_PATH alone when set; else beside this package
    (pip's build), then the build trees of the checkout (CMake's)."""
    env = os.environ.get("MLPROF_TORCH_NATIVE_PATH")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield from sorted(glob.glob(os.path.join(here, "_torch_native*.so")))
    root = os.path.dirname(os.path.dirname(here))
    for build in ("build", "build-asan", "build-tsan"):
        yield os.path.join(root, build, "libmlprof_torch.so")


def load():
    """The extension's library, or None (why() says why); tried once."""
    if _state["tried"]:
        return _state["lib"]
    _state["tried"] = True
    if os.environ.get("MLPROF_TORCH_NATIVE", "") in ("0", "off", "no", "false"):
        _state["why"] = "turned off (MLPROF_TORCH_NATIVE=0)"
        return None
    import torch  # noqa: F401  (its libraries first: the extension links them)
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            if path == os.environ.get("MLPROF_TORCH_NATIVE_PATH"):
                tried.append(f"{path}: no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.mlprof_torch_native_abi.restype = ctypes.c_int
            lib.mlprof_torch_native_version.restype = ctypes.c_int
            lib.mlprof_torch_native_start.restype = ctypes.c_void_p
            lib.mlprof_torch_native_start.argtypes = [ctypes.POINTER(_Api), ctypes.c_int, ctypes.c_int,
                                                      ctypes.c_char_p, ctypes.c_int]
            lib.mlprof_torch_native_stop.restype = ctypes.c_int
            lib.mlprof_torch_native_stop.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        except (OSError, AttributeError) as e:
            tried.append(f"{path}: {e}")
            continue
        if lib.mlprof_torch_native_abi() != ctypes.sizeof(_Api):
            tried.append(f"{path}: another version of the extension")
            continue
        built = lib.mlprof_torch_native_version()
        if str(built) != torch.__version__.split(".")[0]:
            tried.append(f"{path}: built for torch {built}.x, this is torch {torch.__version__}")
            continue
        _state["lib"] = lib
        return lib
    _state["why"] = "; ".join(tried) if tried else "the extension is not built (no torch headers at build time)"
    return None


def why():
    return _state["why"]


def segments():
    """True where the loaded extension follows the CUDA caching allocator's
    segments (built against a torch with CUDA, 2.1 or later)."""
    lib = load()
    try:
        return bool(lib and lib.mlprof_torch_native_segments())
    except AttributeError:
        return False


def _opcost(lib_):
    """mlprof_opcost_op's address (the shared FLOP and byte formulas), or
    None for a library without them: the extension then counts FLOPs itself."""
    try:
        return ctypes.cast(lib_.mlprof_opcost_op, _fn)
    except AttributeError:
        return None


class Session:
    """Recording from torch's callbacks on this thread (every thread with
    all_threads), until stop(). A session inside another (a trace nested in
    a trace) records nothing more: the outer one's callbacks see its
    operators already, with the outer one's options."""

    running = 0

    def __init__(self, lib, shapes, memory, all_threads, domain):
        self.handle = None
        Session.running += 1
        if Session.running > 1:
            return
        lib_ = _lib.lib
        self.api = _Api(*[ctypes.cast(getattr(lib_, "mlprof_" + n), _fn) for n in (
            "get_state", "task_create", "begin", "end", "arg_int", "arg_str", "mem_alloc", "mem_free")],
            domain, _opcost(lib_), ctypes.cast(lib_.mlprof_mem_reserve, _fn), ctypes.cast(lib_.mlprof_mem_release, _fn))
        self.lib = lib
        why = ctypes.create_string_buffer(256)
        flags = (SHAPES if shapes else 0) | (MEMORY if memory else 0) | (GLOBAL if all_threads else 0)
        self.handle = lib.mlprof_torch_native_start(ctypes.byref(self.api), ctypes.sizeof(_Api), flags, why, 256)
        if not self.handle:
            Session.running -= 1
            raise RuntimeError(f"mlprof.torch: the native path did not start: {why.value.decode()}")

    def stop(self):
        Session.running -= 1
        if self.handle:
            why = ctypes.create_string_buffer(256)
            rc = self.lib.mlprof_torch_native_stop(self.handle, why, 256)
            self.handle = None
            if rc:
                raise RuntimeError(f"mlprof.torch: the native path did not stop: {why.value.decode()}")
