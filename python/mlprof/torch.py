"""PyTorch op tracing: every aten operator a model runs, forward and
backward, as a span (domain "aten", named "aten::addmm") with its input
shapes and dtypes, and FLOPs and bytes as mlprof/opcost.h counts them (the
matrix products, convolutions, attention, elementwise operators, reductions
and normalizations: the analyzer's and the interposers' formulas); and each
module's forward and backward as spans named by its path in the model ("model.layer1.0.conv1", "... (backward)"), in which the
operators nest.

    import mlprof, mlprof.torch
    mlprof.set_state("run")
    with mlprof.torch.trace(model):
        loss = model(x).sum()
        loss.backward()
    mlprof.dump()

Operators are seen through a TorchDispatchMode (what the installed torch
offers for this): below autograd, so composite operators appear as what they
are made of (nn.Linear as aten::t and aten::addmm), as torch's own profiler
shows them one level down.

With profile_memory on, the storages of the tensors that operators return go
into the memory profiler (device cpu, or cuda:N), attributed to the operator
and module open then: a storage is allocated when an operator first returns
it, and freed when the last tensor seen on it is collected. Storages made
outside the traced code, and views kept only by torch's internals, are not
seen: this is what torch lets Python observe.

Where its C++ extension loads (mlprof.torch_native), operators and memory
come from torch's own callbacks instead, as torch.profiler sees them: every
operator (aten::conv2d above aten::convolution above the backend's), each
allocation and free of torch's allocators while the trace is open, at about
torch.profiler's cost; the dispatch mode above is the fallback.

An exception ends what it leaves, as torch.profiler's ranges end: the span of
an operator or module that raises, and the module backward spans open when a
backward pass raises, are closed there, with "exception" in their arguments
(the exception's type; "C++ exception" for an operator on the native path),
so that a program that catches it and goes on (a retry loop) is traced right.
"""
import contextlib
import ctypes
import functools
import json
import threading
import types
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _lib

_lib_ = _lib.lib
_OPS = _lib_.mlprof_domain_create(b"aten")
_MODULES = _lib_.mlprof_domain_create(b"module")


def _shape(x):
    return list(x.shape) if isinstance(x, torch.Tensor) else None


def _tensors(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, torch.Tensor))


def _arg_shape(a):
    """An argument's shape as mlprof_opcost_op reads PyTorch's "Input Dims":
    a tensor's dimensions, a list of tensors nested, [] for anything else."""
    if isinstance(a, torch.Tensor):
        return list(a.shape)
    if isinstance(a, (list, tuple)) and a and all(isinstance(t, torch.Tensor) for t in a):
        return [list(t.shape) for t in a]
    return []


def _scalar_text(a):
    """A non-tensor argument as PyTorch's "Concrete Inputs" writes it."""
    if a is None or isinstance(a, torch.Tensor):
        return ""
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_scalar_text(x) for x in a) + "]"
    return str(a)


def cost(name, args, out, kwargs=None, schema=None):
    """(FLOPs, bytes) of one operator call, as mlprof/opcost.h counts them
    (an FMA is 2 FLOPs; bias and activations not counted; bytes are every
    input read and every output written once); None for what is unknown.
    The arguments go to the C library by position, as PyTorch's profiler
    records them, so that a trace of either gives the same counts."""
    kwargs = kwargs or {}
    values = list(args)
    try:
        if schema is not None:  # keyword arguments at their place in the signature
            for i, a in enumerate(schema.arguments):
                if i >= len(values):
                    values.append(kwargs.get(a.name))
        shapes = [_arg_shape(a) for a in values]
        types = [str(a.dtype).replace("torch.", "") if isinstance(a, torch.Tensor) else "" for a in values]
        outs = [t for t in _tensors(out if isinstance(out, (tuple, list)) else [out])]
        texts = (json.dumps(shapes), json.dumps(types), json.dumps([list(t.shape) for t in outs]) if outs else None,
                 json.dumps([_scalar_text(a) for a in values]))
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None, None  # a tensor without a shape to give (never an error in the traced program)
    c = _lib.OpCost()
    found = _lib_.mlprof_opcost_op(name.encode(), *(t.encode() if t is not None else None for t in texts),
                                   ctypes.byref(c))
    return (c.flops if found & 1 else None, c.bytes if found & 2 else None)


def flops(name, args, out):
    """The FLOPs of one operator call (multiply-adds counted as two), or None
    for operators this does not count."""
    return cost(name, args, out)[0]


def _storage(t):
    """(base address, bytes) of a tensor's storage."""
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return st.data_ptr(), st.nbytes()


class _Memory:
    """Storages of the tensors operators return, counted by the tensors that
    hold them, into the memory profiler."""

    def __init__(self):
        self.live = {}  # (device, address) -> tensors seen on it

    def returned(self, out, op):
        for t in _tensors(out if isinstance(out, (tuple, list)) else [out]):
            if t.is_meta or t.layout != torch.strided:
                continue
            try:
                addr, nbytes = _storage(t)
            except (RuntimeError, NotImplementedError):
                continue
            if not addr:
                continue
            dev = 0 if t.device.type == "cpu" else 1 + (t.device.index or 0)
            key = (dev, addr)
            if key not in self.live:
                self.live[key] = 0
                _lib_.mlprof_mem_alloc(dev, addr, nbytes, op.encode())
            self.live[key] += 1
            weakref.finalize(t, self._dropped, key)

    def _dropped(self, key):
        n = self.live.get(key, 0) - 1
        if n > 0:
            self.live[key] = n
            return
        self.live.pop(key, None)
        if _lib_:
            _lib_.mlprof_mem_free(key[0], key[1])


class _Ops(TorchDispatchMode):
    def __init__(self, memory):
        super().__init__()
        self.memory = memory

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _lib_.mlprof_get_state():
            return func(*args, **kwargs)
        name = func._schema.name  # "aten::addmm"
        _lib_.mlprof_begin_dynamic(_OPS, name.encode())
        try:
            shapes = [_shape(a) for a in args if isinstance(a, torch.Tensor)]
            if shapes:
                _lib_.mlprof_arg_str(b"input_shapes", str(shapes).replace(" ", "").encode())
                dtypes = [str(a.dtype).replace("torch.", "") for a in args if isinstance(a, torch.Tensor)]
                _lib_.mlprof_arg_str(b"dtypes", ",".join(dtypes).encode())
            out = func(*args, **kwargs)
            f, b = cost(name, args, out, kwargs, func._schema)
            if f is not None:
                _lib_.mlprof_arg_int(b"flops", f)
            if b is not None:
                _lib_.mlprof_arg_int(b"bytes", b)
            if self.memory:
                self.memory.returned(out, name)
            return out
        except BaseException as exc:  # the span ends all the same, saying why
            _lib_.mlprof_arg_str(b"exception", type(exc).__name__.encode())
            raise
        finally:
            _lib_.mlprof_end_dynamic(_OPS)


class _Backward:
    """One module's backward span for one forward call: begun when the
    gradient reaches the module's output, ended when it reaches its input.
    It begins once, and ends only once begun: an end left on a parameter by a
    forward whose backward never came (its output was lost to an exception,
    or dropped unused) does nothing, where it would end whatever span was
    open at the next step's backward."""

    __slots__ = ("name", "thread", "done", "__weakref__")

    def __init__(self, name):
        self.name = name
        self.thread = None  # the thread it is open on
        self.done = False

    def begin(self):
        if self.thread is None and not self.done:
            _lib_.mlprof_begin_dynamic(_MODULES, self.name)
            self.thread = threading.get_ident()
            _OPEN_BACKWARD.setdefault(self.thread, []).append(self)  # held until it ends

    def end(self, exc_name=None):
        if self.thread is None or self.done:
            return
        if exc_name:
            _lib_.mlprof_arg_str(b"exception", exc_name.encode())
        _lib_.mlprof_end_dynamic(_MODULES)
        self.done = True
        opened = _OPEN_BACKWARD.get(self.thread, [])
        if self in opened:
            opened.remove(self)


# thread -> the backward spans open on it, in the order they began
_OPEN_BACKWARD = {}
# thread -> the exception that stopped a backward pass while spans were open
# on that thread, another than the one that called it (the autograd engine's
# thread of a CUDA device): mlprof ends a span on the thread that began it,
# so these end at that thread's next gradient hook
_FAILED_BACKWARD = {}


def _backward_failed(exc):
    """A backward pass raised: its module spans still open end now, marked
    with the exception, innermost first, as torch.profiler's ranges do; those
    of the autograd engine's other threads at their next hook."""
    me = threading.get_ident()
    name = type(exc).__name__
    # the program's own threads run their own backward passes, which this one's failure does not end
    python = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
    for thread, opened in list(_OPEN_BACKWARD.items()):
        if not opened:
            continue
        if thread == me:
            for span in opened[::-1]:
                span.end(name)
        elif thread not in python:
            _FAILED_BACKWARD[thread] = name


def _end_failed_here():
    """Ends the backward spans a failed backward pass left open on this
    thread (another thread saw it fail)."""
    name = _FAILED_BACKWARD.pop(threading.get_ident(), None)
    if name:
        for span in _OPEN_BACKWARD.get(threading.get_ident(), [])[::-1]:
            span.end(name)


def _on_grad(tensor, span, end):
    """Ends (end=True) or begins span when tensor's gradient is computed. A
    tensor is both the output of one module and the input of the next: when
    its gradient arrives the next module's backward ends before the first
    one's begins. Modules end their forward inner first, so ends run in the
    order they were added (inner first) and begins the other way (outer
    first). Ends are held weakly: a span whose output was never reached (and
    is gone with its graph) is dropped from a parameter's list, which would
    otherwise grow by one at each forward without a backward."""
    acts = getattr(tensor, "_mlprof_grad_actions", None)
    if acts is None:
        acts = ([], [])
        tensor._mlprof_grad_actions = acts

        def run(grad):
            if _FAILED_BACKWARD:
                _end_failed_here()
            ends, begins = [ref() for ref in acts[0]], acts[1][::-1]
            del acts[0][:], acts[1][:]  # once: a parameter's hook stays for the next steps
            for s in ends:
                if s is not None:
                    s.end()
            for s in begins:
                s.begin()
            return grad
        tensor.register_hook(run)
    if end:
        acts[0][:] = [ref for ref in acts[0] if ref() is not None]
        acts[0].append(weakref.ref(span))
    else:
        acts[1].append(span)


class _Forward:
    """A module's forward span (by its path), in one trace."""

    __slots__ = ("name", "backward")

    def __init__(self, path):
        self.name = path.encode()
        self.backward = f"{path} (backward)".encode()

    def begin(self):
        _lib_.mlprof_begin_dynamic(_MODULES, self.name)

    def end(self, module, inputs, output, exc):
        if exc is not None:
            _lib_.mlprof_arg_str(b"exception", type(exc).__name__.encode())
        _lib_.mlprof_end_dynamic(_MODULES)
        if exc is not None:
            return  # no output: no backward
        outs = [t for t in _tensors([output]) if t.requires_grad]
        # the backward ends when the gradient reaches the module's input, or, for the first
        # layers (whose input needs none), its first parameter
        ins = [t for t in _tensors(inputs) if t.requires_grad] or \
            [p for p in module.parameters() if p.requires_grad][:1]
        # (a module that returns its input, nn.Identity, has no backward of its own)
        if outs and ins and outs[0] is not ins[0] and torch.is_grad_enabled():
            # the output's gradient starts the module's backward, the input's ends it
            span = _Backward(self.backward)
            _on_grad(outs[0], span, False)
            _on_grad(ins[0], span, True)


# id(module) -> (module, its forward spans: one per trace open on it). Read
# by Module.__call__, which mlprof wraps while a trace with a model is open:
# a forward hook does not run when forward raises (torch 1.x; the always_call
# hooks of torch 2 run on an Exception only), the wrapper ends the span then too.
_TRACED = {}


def _traced_call(call):
    def __call__(self, *args, **kwargs):
        traced = _TRACED.get(id(self))
        if traced is None or traced[0] is not self:
            return call(self, *args, **kwargs)
        spans = traced[1]
        for s in spans:
            s.begin()
        try:
            output = call(self, *args, **kwargs)
        except BaseException as exc:
            for s in reversed(spans):
                s.end(self, args, None, exc)
            raise
        for s in reversed(spans):
            s.end(self, args, output, None)
        return output
    return __call__


def _traced_backward(backward):
    def wrapper(*args, **kwargs):
        try:
            return backward(*args, **kwargs)
        except BaseException as exc:
            _backward_failed(exc)
            raise
    wrapper.__name__, wrapper.__doc__ = backward.__name__, backward.__doc__
    return wrapper


class _Patch:
    """owner.attr wrapped while installed (counted: traces nest). Put back
    only while it is still mlprof's wrapper: where another wrapped it since
    (torch.fx while it traces), mlprof's stays in their chain, passing
    everything through once no trace is open, and is not wrapped again."""

    lock = threading.Lock()

    def __init__(self, owner, attr, make):
        self.owner, self.attr, self.make = owner, attr, make
        self.count = 0
        self.original = self.wrapper = None  # the wrapper: installed, or left in another's chain

    def install(self):
        with self.lock:
            self.count += 1
            if self.count == 1 and self.wrapper is None:
                self.original = getattr(self.owner, self.attr)
                self.wrapper = self.make(self.original)
                setattr(self.owner, self.attr, self.wrapper)

    def uninstall(self):
        with self.lock:
            self.count -= 1
            if self.count == 0 and getattr(self.owner, self.attr) is self.wrapper:
                setattr(self.owner, self.attr, self.original)
                self.original = self.wrapper = None


_PATCHES = (_Patch(torch.nn.Module, "__call__", _traced_call),
            _Patch(torch.autograd, "backward", _traced_backward),
            _Patch(torch.autograd, "grad", _traced_backward))


class _Modules:
    """Forward and backward spans for every module of a model, by path. The
    forward span ends when forward returns or raises (marked "exception"
    then, with the exception's type, and no backward); a backward pass that
    raises ends its open module backward spans, marked the same way."""

    def __init__(self, model, prefix):
        self.spans = []
        self.patched = True
        for patch in _PATCHES:
            patch.install()
        for path, module in model.named_modules():
            span = _Forward(f"{prefix}.{path}" if path else prefix)
            _, spans = _TRACED.get(id(module), (module, ()))
            _TRACED[id(module)] = (module, spans + (span,))
            self.spans.append((module, span))

    def remove(self):
        for module, span in self.spans:
            _, spans = _TRACED.get(id(module), (module, ()))
            spans = tuple(s for s in spans if s is not span)
            if spans:
                _TRACED[id(module)] = (module, spans)
            else:
                _TRACED.pop(id(module), None)
        if self.patched:
            self.patched = False
            for patch in _PATCHES:
                patch.uninstall()
        self.spans = []


class _Steps:
    """Each step() of the optimizers ends a training step (mlprof.step()):
    through the optimizer's step hooks where torch has them (2.0 and later),
    else by wrapping the instance's step method. remove() puts back exactly
    what the instance had before: an LR scheduler's wrapper of step (torch
    1.x counts the optimizer's steps through it) stays as it was."""

    def __init__(self, optimizers):
        self.undo = []
        for opt in optimizers:
            if hasattr(opt, "register_step_post_hook"):
                self.undo.append(opt.register_step_post_hook(lambda *_: _step()).remove)
                continue
            self.undo.append(self._wrap(opt))

    @staticmethod
    def _wrap(opt):
        had, before = "step" in vars(opt), vars(opt).get("step")
        original, on = opt.step, [True]

        # functools.wraps carries the wrapped one's attributes, such as the
        # _with_counter of a scheduler's wrapper, whose absence makes the
        # scheduler warn that optimizer.step() was overridden
        @functools.wraps(original)
        def wrapped(_opt, *args, **kwargs):
            result = original(*args, **kwargs)
            if on[0]:
                _step()
            return result

        # a method of the instance, as the one it stands for: a scheduler made
        # inside the trace wraps it in turn through its __self__ and __func__
        bound = types.MethodType(wrapped, opt)
        opt.step = bound

        def undo():
            on[0] = False  # wrapped in turn since (a scheduler made inside): it stays, and only calls through
            if vars(opt).get("step") is bound:
                if had:
                    opt.step = before
                else:
                    del opt.step
        return undo

    def remove(self):
        for undo in self.undo:
            undo()
        self.undo = []


def _step():
    from . import step  # mlprof.step: the package is loaded before this module
    step()


_said = []

# this thread's dispatch-mode trace, on (depth 1) or not: a trace inside it
# records no operator more (the native path's sessions count themselves)
_dispatch = threading.local()


def _native(memory, record_shapes, all_threads, native):
    """A session of the native path (torch_native: torch's RecordFunction
    callbacks and allocator reporting, in C++), or None for the dispatch mode,
    saying why on stderr once per process."""
    from . import torch_native
    if native is False:
        return None
    lib = torch_native.load()
    if lib is None and native:
        raise RuntimeError(f"mlprof.torch: native tracing unavailable: {torch_native.why()}")
    if lib is not None:
        return torch_native.Session(lib, record_shapes, memory, all_threads, _OPS)
    if not _said:
        _said.append(1)
        import sys
        print(f"mlprof.torch: native tracing unavailable ({torch_native.why()}); "
              "using the dispatch-mode path", file=sys.stderr)
    return None


@contextlib.contextmanager
def trace(model=None, name="model", memory=None, step_on=None, distributed=None, record_shapes=True,
          all_threads=False, native=None):
    """Traces every aten operator run inside, and, when model is given, its
    modules' forward and backward passes (named name.path). memory: record
    tensor storages (default: when profile_memory is on). step_on: an
    optimizer (or a list of them) whose step() marks the end of each training
    step, as mlprof.step() does (ProfilerStep#N spans; the schedule key).
    distributed: torch.distributed's calls as spans and the ranks' clocks
    measured, as mlprof.dist.trace() does (default: when the environment has
    MLPROF_TORCH_DISTRIBUTED=1). record_shapes: input shapes, dtypes and
    FLOPs of every operator (the dispatch-mode path always records them).
    all_threads: operators of every thread, not only this one's (native path).
    native: None picks the native path where it loads, True requires it,
    False takes the dispatch mode.

    The native path (torch_native) records from torch's own C++ callbacks;
    where its extension is not built or not loadable, or with
    MLPROF_TORCH_NATIVE=0, the dispatch mode does, and stderr says why once."""
    from . import get_config
    if memory is None:
        memory = get_config("profile_memory") == "true" or get_config("profile_all") == "true"
    if distributed is None:
        import os
        distributed = os.environ.get("MLPROF_TORCH_DISTRIBUTED", "") not in ("", "0")
    if distributed:
        from . import dist
        with dist.trace(), trace(model, name, memory, step_on, False, record_shapes,
                                            all_threads, native):
            yield
        return
    if step_on is not None and not isinstance(step_on, (list, tuple)):
        step_on = [step_on]
    modules = steps = None
    try:  # what is set up is undone, even when the native path then refuses to start
        modules = _Modules(model, name) if model is not None else None
        steps = _Steps(step_on) if step_on else None
        from . import torch_native
        if getattr(_dispatch, "depth", 0) or torch_native.Session.running:
            # inside another trace, which records the operators already: once
            # more would record each twice, and its memory too
            yield
            return
        native = _native(memory, record_shapes, all_threads, native)
        if native:
            try:
                yield
            finally:
                native.stop()
        else:
            _dispatch.depth = 1
            try:
                with _Ops(_Memory() if memory else None):
                    yield
            finally:
                _dispatch.depth = 0
    finally:
        if modules:
            modules.remove()
        if steps:
            steps.remove()


def _call_workspace(fn, args, device):
    """Bytes that one fn(*args) allocated beyond its inputs and outputs at
    its peak, from torch's own bookkeeping: on CUDA the caching allocator's
    peak statistics, on the CPU the allocation events of torch's profiler
    (profile_memory), added up in time order. None where neither says."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        out = fn(*args)
        torch.cuda.synchronize(device)
        peak, after = torch.cuda.max_memory_allocated(device), torch.cuda.memory_allocated(device)
        del out
        return max(0, peak - max(before, after))
    if device.type != "cpu":
        return None
    with torch.autograd.profiler.profile(profile_memory=True) as prof:
        out = fn(*args)
    del out
    try:  # one "[memory]" event per allocation (+bytes) and free (-bytes)
        events = [e for e in prof.kineto_results.events()
                  if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")]
    except AttributeError:  # a torch without kineto's results
        return None
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_us()):  # stable: same-microsecond events keep their order
        live += e.nbytes()
        peak = max(peak, live)
    return max(0, peak - max(0, live))


def profile_op(fn, *args, key=None, **options):
    """mlprof.op.profile for a torch function on tensors, e.g.
    profile_op(torch.nn.functional.conv2d, x, w): the same dict, run under
    torch.no_grad() (an operator, not a training step). On CUDA the repeats
    are timed with CUDA events on the current stream (or, where the CUDA
    runtime cannot be reached from C, on the host around a synchronize).
    workspace_size: on the CPU under `mlprof run` with the malloc hook and
    profile_memory, what mlprof's memory profiler saw (every heap allocation,
    torch's object headers included); otherwise torch's own figures (see
    _call_workspace). key=True makes a key of the function's name, the
    tensors' shapes, dtypes and device, and the options."""
    from . import op as _op
    tensors = list(_tensors(args))
    device = tensors[0].device if tensors else torch.device("cpu")
    if key is True:
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
        parts = [f"{tuple(t.shape)}:{str(t.dtype).replace('torch.', '')}" for t in tensors]
        key = f"{getattr(fn, '__module__', '')}.{name}({','.join(parts)});{device};{sorted(options.items())}"
    if device.type == "cuda":
        options.setdefault("gpu", True)
        options.setdefault("stream", torch.cuda.current_stream(device).cuda_stream)
        options.setdefault("workspace_device", f"cuda:{device.index or 0}")
    with torch.no_grad():
        try:
            res = _op.profile(fn, *args, key=key, **options)
        except _op.MlprofError as e:
            if not (options.get("gpu") and e.name == "MLPROF_EUNSUPPORTED"):
                raise
            # no runtime reachable from C: host time, each repeat waited for
            sync = lambda: torch.cuda.synchronize(device)  # noqa: E731
            host = dict(options, gpu=False, stream=None)
            res = _op.profile(fn, *args, key=key, setup=sync, sync=sync, **host)
        # mlprof's memory profiler sees torch's CPU allocations only through the
        # malloc hook of `mlprof run` (c10 calls posix_memalign), and never the
        # blocks of the CUDA caching allocator: torch's own figures otherwise
        seen = device.type == "cpu" and "malloc" in res["workspace_from"]
        if not seen and options.get("workspace", True):
            if res["cached"]:  # a hit runs nothing
                res["workspace_size"] = _TORCH_WORKSPACE.get(key, res["workspace_size"])
            else:
                res["workspace_size"] = _call_workspace(fn, args, device)
                if key:
                    _TORCH_WORKSPACE[key] = res["workspace_size"]
            res["workspace_from"] = ["torch"] if res["workspace_size"] is not None else []
    return res


# key -> the workspace measured through torch, for cache hits (the C cache
# keeps what the memory profiler saw, here nothing)
_TORCH_WORKSPACE = {}
