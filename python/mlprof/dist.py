"""torch.distributed for mlprof: its collectives and point-to-point calls as
spans (domain "torch.distributed", named after the function: "all_reduce",
"broadcast", "send"...), and each rank's clock measured against rank 0's over
its process group, for `mlprof merge`.

    import mlprof, mlprof.dist
    mlprof.set_state("run")
    with mlprof.dist.trace():          # or mlprof.torch.trace(..., distributed=True)
        dist.all_reduce(t)
    mlprof.dump()

An unmodified script: `python3 -m mlprof.dist train.py ARGS` (run()), under
`mlprof run` or with MLPROF_AUTOSTART=1.

Each span has op (the reduction, "SUM"), bytes (what this rank sends: a
root's whole buffer; what it receives when it only receives: broadcast off
the root, recv), count (elements), dtype, group (an id every member computes
alike: torch's name for the group and its ranks, hashed), group_size, rank
(this process's global rank), seq (the group's collectives numbered from 0
in call order, the same on every member; for send/recv the messages of one
(group, source, destination, tag) stream), peer or root (global ranks), tag,
and error (the exception's type, when the call raised: gloo has no
reduce_scatter). `mlprof ranks` matches the collectives across ranks by
(group, seq).

async_op=True (and isend/irecv) gives two spans: the call itself, which only
issues the work (async=1, request=N), and "wait" around the returned work's
wait() with the same request, op and group (not seq: the call is the one
instance `mlprof ranks` matches): the time this rank waited for it. A work
never waited for through wait() has no "wait" span. A receive from any source
learns its peer and seq when the message has come: recv's on its span,
irecv's on its wait (and one never waited for leaves its stream's later
messages numbered one short on this rank).

What is seen: the functions of torch.distributed called by name while tracing
(dist.all_reduce, torch.distributed.distributed_c10d.all_reduce); not a
function imported by `from torch.distributed import all_reduce` before trace()
began, nor the process group's own methods that C++ calls (DDP's gradient
buckets, FSDP's internals).
"""
import contextlib
import threading

import torch
import torch.distributed as _dist

from . import _lib

_lib_ = _lib.lib
_DOMAIN = _lib_.mlprof_domain_create(b"torch.distributed")
_c10d = _dist.distributed_c10d if _dist.is_available() else None

# ------------------------------------------------------------------ groups


def _fnv(text):
    """64-bit FNV-1a of text, kept to 52 bits so that any JSON reader holds it exactly."""
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h & ((1 << 52) - 1)


class _Group:
    """What a span says of its process group; seq counts its collectives."""
    __slots__ = ("id", "size", "ranks", "seq", "streams", "me", "consts")

    def __init__(self, pg):
        ranks = _group_ranks(pg)
        # torch names each group at its creation ("0" the world, then "1", "2"... in new_group's order, which
        # every rank calls alike): with the ranks, the same id on every member and distinct between groups
        self.id = _fnv(f"{_group_name(pg)}|{','.join(map(str, ranks))}")
        self.ranks = ranks
        self.size = len(ranks)
        self.seq = 0
        self.streams = {}  # (src, dst, tag) -> messages sent or received so far
        self.me = _c10d.get_rank()  # this process's global rank, fixed while the group lives
        self.consts = [(b"group", self.id), (b"group_size", self.size), (b"rank", self.me)]


def _group_name(pg):
    names = getattr(_c10d, "_pg_names", None)
    if names is None:  # torch 2: the world's registry
        names = getattr(getattr(_c10d, "_world", None), "pg_names", {})
    return names.get(pg, getattr(pg, "group_name", ""))


def _group_ranks(pg):
    try:
        return sorted(_c10d.get_process_group_ranks(pg))
    except (AttributeError, KeyError, RuntimeError, ValueError):
        return list(range(pg.size()))


_groups = {}  # id(ProcessGroup) -> (the group, its _Group)
_groups_lock = threading.Lock()


def _group(group):
    pg = group if group is not None and group is not getattr(_c10d.GroupMember, "WORLD", None) else None
    if pg is None:
        pg = _c10d._get_default_group()
    got = _groups.get(id(pg))  # the usual case, without the lock (a dict read is atomic)
    if got is not None and got[0] is pg:
        return got[1]
    with _groups_lock:
        got = _groups.get(id(pg))
        if got is None or got[0] is not pg:
            got = (pg, _Group(pg))
            _groups[id(pg)] = got
        return got[1]


# ---------------------------------------------------------------- the spans

_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def _op_name(op):
    name = getattr(op, "name", None)
    if isinstance(name, str):
        return name
    for n in _OPS:
        v = getattr(_dist.ReduceOp, n, None)
        try:
            if v is not None and v == op:
                return n
        except (TypeError, RuntimeError):
            pass
    return str(op).rsplit(".", 1)[-1]


def _size(ts):
    """(bytes, elements, dtype) of a tensor or a list of them."""
    if isinstance(ts, torch.Tensor):
        ts = [ts]
    ts = [t for t in (ts or []) if isinstance(t, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in ts)
    return nbytes, sum(t.numel() for t in ts), str(ts[0].dtype).replace("torch.", "") if ts else ""


def _global_rank():
    return _c10d.get_rank()


def _arg(a, kw, i, name, default=None):
    if name in kw:
        return kw[name]
    return a[i] if len(a) > i else default


# Each function: (its kind, where its group, op and async_op are, what this rank sends or receives).
# kind: "coll" (numbered per group), "p2p" (numbered per stream), "batch" (p2p in a batch: no number)
def _all_gather_tensor(a, kw):
    return _arg(a, kw, 1, "input_tensor")


def _send_or_whole(tensor_pos, list_pos, list_name, root_name, root_pos):
    """A collective with a root: the root sends (or holds) the whole list, the others their tensor."""
    def what(a, kw):
        root = _arg(a, kw, root_pos, root_name, 0)
        lst = _arg(a, kw, list_pos, list_name)
        if root == _global_rank() and lst and root_name == "src":
            return lst
        return _arg(a, kw, tensor_pos, "tensor")
    return what


_SPECS = {
    # name: (kind, group position, op position or None, root/peer (name, position) or None, the bytes)
    "all_reduce": ("coll", 2, 1, None, lambda a, kw: _arg(a, kw, 0, "tensor")),
    "broadcast": ("coll", 2, None, ("src", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "reduce": ("coll", 3, 2, ("dst", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "all_gather": ("coll", 2, None, None, lambda a, kw: _arg(a, kw, 1, "tensor")),
    "all_gather_into_tensor": ("coll", 2, None, None, _all_gather_tensor),
    "_all_gather_base": ("coll", 2, None, None, _all_gather_tensor),
    "reduce_scatter": ("coll", 3, 2, None, lambda a, kw: _arg(a, kw, 1, "input_list")),
    "reduce_scatter_tensor": ("coll", 3, 2, None, lambda a, kw: _arg(a, kw, 1, "input")),
    "_reduce_scatter_base": ("coll", 3, 2, None, lambda a, kw: _arg(a, kw, 1, "input")),
    "all_to_all": ("coll", 2, None, None, lambda a, kw: _arg(a, kw, 1, "input_tensor_list")),
    "all_to_all_single": ("coll", 4, None, None, lambda a, kw: _arg(a, kw, 1, "input")),
    "barrier": ("coll", 0, None, None, lambda a, kw: None),
    "gather": ("coll", 3, None, ("dst", 2), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "scatter": ("coll", 3, None, ("src", 2), _send_or_whole(0, 1, "scatter_list", "src", 2)),
    "send": ("p2p", 2, None, ("dst", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "isend": ("p2p", 2, None, ("dst", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "recv": ("p2p", 2, None, ("src", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "irecv": ("p2p", 2, None, ("src", 1), lambda a, kw: _arg(a, kw, 0, "tensor")),
    "batch_isend_irecv": ("batch", None, None, None, None),
}

_tls = threading.local()  # .inside: a traced call is running on this thread (its inner calls are its own)
_requests = [0]
_requests_lock = threading.Lock()


def _next_request():
    with _requests_lock:
        _requests[0] += 1
        return _requests[0]


def _any_source(g, me, tag, group):
    """What an irecv from any source does once its work is done: its message
    counted in the stream it came by, as the sender counted it; returns the
    arguments the wait span gets (peer and seq)."""
    def done(work):
        try:
            src = work._source_rank()
        except (AttributeError, RuntimeError):
            return []
        if group is not None and group is not getattr(_c10d.GroupMember, "WORLD", None):
            src = _c10d.get_global_rank(group, src)
        return [(b"peer", src), (b"seq", _p2p_stream(g, me, src, False, tag))]
    return done


class _Work:
    """The work an async call returns, whose wait() is a span ("wait", with the
    call's request, op and group; args None: no span, the call was not
    recorded); everything else is the work's own. done: what to run once the
    work is done (an irecv from any source numbers its message then)."""
    __slots__ = ("_work", "_args", "_done")

    def __init__(self, work, args, done=None):
        self._work = work
        self._args = args
        self._done = done

    def _finished(self):
        done, self._done = self._done, None
        return done(self._work) if done else []

    def wait(self, *a, **kw):
        if self._args is None or not _lib_.mlprof_get_state():
            out = self._work.wait(*a, **kw)
            self._finished()
            return out
        _lib_.mlprof_begin_dynamic(_DOMAIN, b"wait")
        try:
            for k, v in self._args:
                (_lib_.mlprof_arg_str if isinstance(v, bytes) else _lib_.mlprof_arg_int)(k, v)
            out = self._work.wait(*a, **kw)
            for k, v in self._finished():
                _lib_.mlprof_arg_int(k, v)
            return out
        finally:
            _lib_.mlprof_end_dynamic(_DOMAIN)

    def __getattr__(self, name):
        return getattr(self._work, name)

    def __repr__(self):
        return f"mlprof.dist traced {self._work!r}"


def _p2p_stream(g, me, peer, sending, tag):
    src, dst = (me, peer) if sending else (peer, me)
    key = (src, dst, tag)
    n = g.streams.get(key, 0)
    g.streams[key] = n + 1
    return n


def _wrap(name, fn):
    kind, gpos, oppos, rootspec, what = _SPECS[name]

    def traced(*a, **kw):
        if getattr(_tls, "inside", False) or not _c10d.is_initialized():
            return fn(*a, **kw)
        if kind == "batch":
            return _batch(fn, a, kw)
        group = _arg(a, kw, gpos, "group")
        if _c10d._rank_not_in_group(group):
            return fn(*a, **kw)  # torch warns and does nothing: neither numbered nor recorded
        g = _group(group)
        if _lazy_sync[0] and kind == "coll" and g.size == _c10d.get_world_size():
            _lazy_sync[0] = False  # the first collective of the world: every rank is here, at the same point
            _sync_if_ready("first collective")
        me = g.me
        peer = _arg(a, kw, rootspec[1], rootspec[0]) if rootspec else None
        if kind == "coll":
            seq = g.seq
            g.seq += 1
        elif peer is not None:  # a receive from any source is numbered when its source is known
            seq = _p2p_stream(g, me, peer, name in ("send", "isend"), _arg(a, kw, 3, "tag", 0))
        if not _lib_.mlprof_get_state():
            _tls.inside = True
            try:
                out = fn(*a, **kw)
            finally:
                _tls.inside = False
            if peer is None and name == "recv" and isinstance(out, int) and out >= 0:
                _p2p_stream(g, me, out, False, _arg(a, kw, 3, "tag", 0))  # counted as the sender counts it
            elif peer is None and name == "irecv" and out is not None:
                out = _Work(out, None, _any_source(g, me, _arg(a, kw, 3, "tag", 0), group))
            return out
        nbytes, count, dtype = _size(what(a, kw))
        is_async = name in ("isend", "irecv") or bool(kw.get("async_op", False))
        # record: the span, its arguments at once (so that they are the span's whatever it calls), the call
        _lib_.mlprof_begin_dynamic(_DOMAIN, name.encode())
        _tls.inside = True
        try:
            args = list(g.consts)
            if oppos is not None:
                args.append((b"op", _op_name(_arg(a, kw, oppos, "op", _dist.ReduceOp.SUM)).encode()))
            if peer is not None:
                args.append((b"peer" if kind == "p2p" else b"root", int(peer)))
            if kind == "coll" or peer is not None:
                args.append((b"seq", seq))
            if kind == "p2p":
                args.append((b"tag", int(_arg(a, kw, 3, "tag", 0))))
            for k, v in args:
                (_lib_.mlprof_arg_str if isinstance(v, bytes) else _lib_.mlprof_arg_int)(k, v)
            _lib_.mlprof_arg_int(b"bytes", nbytes)
            _lib_.mlprof_arg_int(b"count", count)
            if dtype:
                _lib_.mlprof_arg_str(b"dtype", dtype.encode())
            request = 0
            if is_async:
                request = _next_request()
                _lib_.mlprof_arg_int(b"async", 1)
                _lib_.mlprof_arg_int(b"request", request)
            try:
                out = fn(*a, **kw)
            except Exception as e:  # the call failed (gloo lacks reduce_scatter...): said on its span
                _lib_.mlprof_arg_str(b"error", type(e).__name__.encode())
                raise
            if name == "recv" and peer is None and isinstance(out, int) and out >= 0:
                _lib_.mlprof_arg_int(b"peer", out)  # the sender, known now
                _lib_.mlprof_arg_int(b"seq", _p2p_stream(g, me, out, False, _arg(a, kw, 3, "tag", 0)))
            if is_async and out is not None and not isinstance(out, (int, _Work)):
                wait_args = [(b"request", request), (b"op", name.encode())] + \
                    [(k, v) for k, v in args if k in (b"group", b"peer", b"root")]
                done = _any_source(g, me, _arg(a, kw, 3, "tag", 0), group) if name == "irecv" and peer is None \
                    else None
                out = _Work(out, wait_args, done)
            return out
        finally:
            _tls.inside = False
            _lib_.mlprof_end_dynamic(_DOMAIN)

    traced.__wrapped__ = fn
    traced.__name__ = fn.__name__
    traced.__doc__ = fn.__doc__
    traced._mlprof_traced = True
    return traced


def _batch(fn, a, kw):
    """batch_isend_irecv: one span with the batch's size and bytes; its works are returned as they are."""
    ops = _arg(a, kw, 0, "p2p_op_list") or []
    if not _lib_.mlprof_get_state():
        _tls.inside = True
        try:
            return fn(*a, **kw)
        finally:
            _tls.inside = False
    _lib_.mlprof_begin_dynamic(_DOMAIN, b"batch_isend_irecv")
    _tls.inside = True
    try:
        _lib_.mlprof_arg_int(b"ops", len(ops))
        _lib_.mlprof_arg_int(b"bytes", _size([getattr(o, "tensor", None) for o in ops])[0])
        _lib_.mlprof_arg_int(b"rank", _global_rank())
        return fn(*a, **kw)
    finally:
        _tls.inside = False
        _lib_.mlprof_end_dynamic(_DOMAIN)


# ----------------------------------------------------------- on and off

_patched = []  # (module, name, original)
_lazy_sync = [False]  # a clock sample is due at the first collective of the world group (run())
_depth = [0]
_patch_lock = threading.Lock()


def _install():
    for name in _SPECS:
        original = getattr(_c10d, name, None)
        if original is None or getattr(original, "_mlprof_traced", False):
            continue
        traced = _wrap(name, original)
        for module in (_c10d, _dist):
            if getattr(module, name, None) is original:
                setattr(module, name, traced)
                _patched.append((module, name, original))


def _uninstall():
    while _patched:
        module, name, original = _patched.pop()
        setattr(module, name, original)


def _sync_if_ready(where):
    """A clock sample at trace's start and end: only when the default group is up and gloo or NCCL carries it."""
    if not (_c10d.is_initialized() and _c10d.get_world_size() > 1):
        return
    try:
        sync()
    except (RuntimeError, ValueError) as e:
        import warnings
        warnings.warn(f"mlprof.dist: no clock sample at trace's {where}: {e}", RuntimeWarning, stacklevel=3)


@contextlib.contextmanager
def trace(clock_sync=True):
    """Records torch.distributed's calls as spans while inside (nested and
    repeated uses are counted: the functions are put back when the last one
    ends). clock_sync: take a clock sample (sync()) when it begins (or, when
    the default group is not up yet, at its first collective over the whole
    world) and when it ends, collective over the default group: every rank
    must enter and leave trace() at the same point (a rank that leaves by an
    exception takes none at the end)."""
    if _c10d is None:
        raise RuntimeError("mlprof.dist: this torch has no torch.distributed")
    with _patch_lock:
        if _depth[0] == 0:
            _install()
        _depth[0] += 1
    if clock_sync:
        if _c10d.is_initialized():
            _sync_if_ready("start")
        else:  # the group comes later: the sample is taken at its first collective
            _lazy_sync[0] = True
    ok = False
    try:
        yield
        ok = True
    finally:
        if clock_sync and ok:
            _sync_if_ready("end")
        with _patch_lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                _uninstall()
                _lazy_sync[0] = False


def _on_destroy(original):
    """destroy_process_group of the world, under run(): the last moment its group can carry a sample."""
    def destroy(group=None):
        if group is None and _c10d.is_initialized() and not _lazy_sync[0]:
            _sync_if_ready("end")
        return original(group)
    destroy.__wrapped__ = original
    return destroy


def run(argv):
    """python3 -m mlprof.dist SCRIPT [ARGS...] (or -m MODULE [ARGS...]): runs
    an unmodified script with torch.distributed traced, for `mlprof run` and
    torchrun (`mlprof run -- python3 -m mlprof.dist train.py`,
    `torchrun --nproc-per-node 2 -m mlprof.dist train.py`). The clocks are
    sampled at the first collective of the world group and when the script
    calls destroy_process_group(), or ends with the group still up. Records
    while mlprof records: under `mlprof run`, from the start."""
    import runpy
    import sys
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python3 -m mlprof.dist SCRIPT [ARGS...] | -m MODULE [ARGS...]", file=sys.stderr)
        return 2
    module = argv[0] == "-m"
    target = argv[1] if module else argv[0]
    sys.argv = argv[1:] if module else argv[:]
    if not module:
        import os
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    original = _c10d.destroy_process_group
    _c10d.destroy_process_group = _dist.destroy_process_group = _on_destroy(original)
    _lazy_sync[0] = True
    try:
        with trace(clock_sync=False):
            if module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
            if _c10d.is_initialized() and not _lazy_sync[0]:
                _sync_if_ready("end")
    finally:
        _c10d.destroy_process_group = _dist.destroy_process_group = original
        _lazy_sync[0] = False
    return 0


def start(clock_sync=True):
    """trace() without a with block: on until stop()."""
    cm = trace(clock_sync)
    cm.__enter__()
    _open.append(cm)


def stop():
    if _open:
        _open.pop().__exit__(None, None, None)


_open = []

# ----------------------------------------------------------- clock sync

EXCHANGES = 32  # per rank and sample: the smallest round trip of these is kept
_TAG = 0x6d6c  # a tag of our own, apart from the program's


def sync(group=None, exchanges=EXCHANGES):
    """Measures this rank's clock against rank 0's: rank 0 plays ping-pong
    with each rank in turn over torch.distributed (the group's own backend:
    gloo with CPU tensors, NCCL with the current GPU's), `exchanges` round
    trips each, and the one with the smallest round trip is kept: rank 0's
    clock, read between the two messages, is within half that round trip of
    the midpoint of this rank's two readings. The sample goes in the trace's
    otherData.clock_sync (method "torch_pingpong"), as the MPI hook's do; two
    samples or more give the drift, and `mlprof merge` applies them.
    Collective: every rank of the group calls it. The group's rank 0 must be
    the job's rank 0 (the reference of every trace). Returns this rank's
    sample: dict(offset_ns, bound_ns, rtt_ns, at_ns, exchanges)."""
    if _c10d is None or not _c10d.is_initialized():
        raise RuntimeError("mlprof.dist.sync: torch.distributed is not initialized")
    pg = group if group is not None else _c10d._get_default_group()
    ranks = _group_ranks(pg)
    if ranks[0] != 0:
        raise ValueError(f"mlprof.dist.sync: the group's ranks {ranks} do not include rank 0, the reference")
    me, size = pg.rank(), pg.size()
    backend = _c10d.get_backend(pg)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    buf = torch.zeros(1, dtype=torch.int64, device=device)
    now = _lib_.mlprof_now_ns
    best = None
    at0 = now()

    def xfer(send, peer):  # the group's own methods: neither traced nor numbered
        work = pg.send([buf], peer, _TAG) if send else pg.recv([buf], peer, _TAG)
        work.wait()

    for peer in range(1, size):
        if me == 0:
            for _ in range(exchanges):
                xfer(False, peer)
                buf[0] = now()
                xfer(True, peer)
        elif me == peer:
            for _ in range(exchanges):
                t1 = now()
                buf[0] = t1
                xfer(True, 0)
                xfer(False, 0)
                t0 = int(buf[0].item())
                t2 = now()
                if best is None or t2 - t1 < best[2]:
                    mid = t1 + (t2 - t1) // 2
                    best = (mid, t0 - mid, t2 - t1)
    pg.barrier().wait()
    if me == 0:  # the reference: offset 0, exactly
        sample = dict(at_ns=at0, offset_ns=0, bound_ns=0, rtt_ns=0, exchanges=exchanges * (size - 1))
    else:
        at, off, rtt = best
        sample = dict(at_ns=at, offset_ns=off, bound_ns=(rtt + 1) // 2, rtt_ns=rtt, exchanges=exchanges)
    from . import _check
    _check(_lib_.mlprof_dist_clock_sample(b"torch_pingpong", _global_rank(), _c10d.get_world_size(),
                                          sample["at_ns"], sample["offset_ns"], sample["bound_ns"],
                                          sample["rtt_ns"], sample["exchanges"]))
    return sample


if __name__ == "__main__":
    import sys as _sys
    from mlprof.dist import run as _run  # the package's module, which the script's spans go through
    _sys.exit(_run(_sys.argv[1:]))
