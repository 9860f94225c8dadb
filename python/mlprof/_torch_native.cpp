/*
 * mlprof.torch's native path: PyTorch's operators recorded from torch's own
 * C++ RecordFunction callbacks (what torch.profiler observes), and tensor
 * allocations from its allocators' memory reporting (what profile_memory
 * uses), straight into libmlprof's per-thread buffers.
 *
 * C++ only because torch's API is; everything recorded goes through
 * libmlprof's public C functions, whose addresses python/mlprof/torch_native.py
 * hands over (mlprof_torch_native_start): this library links torch, not
 * libmlprof, so it records into whichever libmlprof the bindings loaded (the
 * preload library of `mlprof run` included). It is loaded with ctypes, not
 * as a Python module: no pybind11, one translation unit.
 *
 * Per operator (RecordScope::FUNCTION): a span in the "aten" domain from an
 * interned handle (one per operator name), "seq" (its autograd sequence
 * number, when it records a backward node), and, inside the backward pass,
 * "fwd_seq" and "fwd_thread" (the forward operator's sequence number and
 * thread: the forward/backward link torch's profiler draws). With shapes:
 * "input_shapes" and "dtypes" of the tensor arguments, as the dispatch-mode
 * path writes them, and "flops" for the products and convolutions.
 *
 * Hot path (each operator): no lock, no allocation, no system call; the
 * handle cache takes a lock only the first time a name is seen.
 */
/* torch's release builds have NDEBUG: inputs() must not assert what they do not track */
#ifndef NDEBUG
#define NDEBUG 1
#endif
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#if __has_include(<torch/csrc/api/include/torch/version.h>)
#include <torch/csrc/api/include/torch/version.h>
#elif __has_include(<torch/version.h>)
#include <torch/version.h>
#endif
#ifndef TORCH_VERSION_MAJOR
#define TORCH_VERSION_MAJOR 1
#endif

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

namespace {

/* libmlprof's functions, as python/mlprof/torch_native.py fills them (same
 * order; it passes its size so that a mismatch is refused, not followed). */
struct Api {
    int (*get_state)(void);
    void *(*task_create)(void *domain, const char *name);
    void (*begin)(void *span);
    void (*end)(void *span);
    void (*arg_int)(const char *key, int64_t value);
    void (*arg_str)(const char *key, const char *value);
    int (*mem_alloc)(int device, const void *addr, uint64_t bytes, const char *tag);
    int (*mem_free)(int device, const void *addr);
    void *domain; /* "aten" */
    /* mlprof_opcost_op (mlprof/opcost.h), or null where the library has none */
    int (*opcost_op)(const char *name, const char *shapes, const char *types, const char *out_shapes,
                     const char *scalars, int64_t cost[2]);
};

enum { SHAPES = 1, MEMORY = 2, GLOBAL = 4 };

Api api;
int flags_;
std::atomic<int> active{0};

/* ---- operator name -> span handle, filled once per name (lock-free reads) */

enum Kind { K_NONE, K_MM, K_ADDMM, K_BMM, K_CONV, K_CONV_BACKWARD, K_ATTENTION };

struct Entry {
    void *span;
    int kind; /* which FLOP formula (Kind), found once per name */
    char name[1]; /* the name's copy (allocated to its length) */
};

int kind_of(const char *name)
{
    if (strncmp(name, "aten::", 6))
        return K_NONE;
    const char *op = name + 6;
    size_t len = strlen(op);
    if (!strcmp(op, "mm"))
        return K_MM;
    if (!strcmp(op, "addmm") || !strcmp(op, "baddbmm"))
        return K_ADDMM;
    if (!strcmp(op, "bmm"))
        return K_BMM;
    if (!strcmp(op, "convolution"))
        return K_CONV;
    if (!strcmp(op, "convolution_backward"))
        return K_CONV_BACKWARD;
    if (!strncmp(op, "_scaled_dot_product", 19) && len >= 9 && !strcmp(op + len - 9, "attention"))
        return K_ATTENTION;
    return K_NONE;
}
constexpr size_t TABLE = 4096;
std::atomic<Entry *> table[TABLE];
std::mutex table_lock;

uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The handle of name, or null when the table is full (the span is then not
 * recorded; the table holds 4096 distinct operator names). */
Entry *lookup(const char *name)
{
    uint32_t h = hash(name);
    for (size_t i = 0; i < TABLE; i++) {
        Entry *e = table[(h + i) % TABLE].load(std::memory_order_acquire);
        if (!e)
            break;
        if (!strcmp(e->name, name))
            return e;
    }
    std::lock_guard<std::mutex> g(table_lock);
    for (size_t i = 0; i < TABLE; i++) {
        std::atomic<Entry *> &slot = table[(h + i) % TABLE];
        Entry *e = slot.load(std::memory_order_acquire);
        if (e && !strcmp(e->name, name))
            return e;
        if (e)
            continue;
        size_t n = strlen(name);
        e = static_cast<Entry *>(malloc(sizeof(Entry) + n));
        if (!e)
            return nullptr;
        memcpy(e->name, name, n + 1);
        e->kind = kind_of(name);
        e->span = api.task_create(api.domain, e->name);
        if (!e->span) {
            free(e);
            return nullptr;
        }
        slot.store(e, std::memory_order_release);
        return e;
    }
    return nullptr;
}

/* ---- per thread: the open operators (their entries) and backward nodes */

constexpr int DEPTH = 128;
struct Backward {
    int64_t seq;
    uint64_t fwd_thread;
};
struct Stack {
    Entry *ops[DEPTH]; /* null: begun while not recording, or not recorded */
    int depth;
    Backward bwd[DEPTH];
    int bwd_depth;
};
thread_local Stack tls;

/* ---- shapes, dtypes and FLOPs */

const char *dtype_name(c10::ScalarType t)
{
    switch (t) { /* as str(torch.dtype) without "torch.", what the dispatch-mode path writes */
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::ComplexHalf: return "complex32";
    default: return "other";
    }
}

/* A bounded writer: text past the buffer is cut, never overflows. */
struct Out {
    char *p, *end;
    bool full = false;
    Out(char *buf, size_t n) : p(buf), end(buf + n - 1) { *p = 0; }
    void put(const char *s)
    {
        while (*s && p < end)
            *p++ = *s++;
        full |= *s != 0;
        *p = 0;
    }
    void num(int64_t v)
    {
        char b[24], *q = b + sizeof b;
        uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
        *--q = 0;
        do
            *--q = (char)('0' + u % 10);
        while (u /= 10);
        if (v < 0)
            *--q = '-';
        put(q);
    }
};

int64_t numel_from(c10::IntArrayRef s, size_t from)
{
    int64_t n = 1;
    for (size_t i = from; i < s.size(); i++)
        n *= s[i];
    return n;
}

int64_t list_at(const c10::IValue &v, size_t i, int64_t dflt)
{
    if (!v.isIntList())
        return dflt;
    auto l = v.toIntList();
    if (l.empty())
        return dflt;
    return l.get(i < l.size() ? i : l.size() - 1);
}

/* The FLOPs of the operators today's python flops() counts (mlprof.torch),
 * multiply-adds as two; -1 for the others. Where the library has
 * mlprof_opcost_op (the formulas shared with the interposers and the
 * analyzer), the same operators are counted by it instead, with their bytes;
 * these are for a library without it. Convolutions are counted at
 * aten::convolution only: torch's profiler sees the backend operators it
 * calls nested inside, and counting them too would count the work twice. */
int64_t flops(int kind, c10::ArrayRef<const c10::IValue> in)
{
    auto tensor = [&](size_t i) -> const at::Tensor * {
        if (i >= in.size() || !in[i].isTensor() || !in[i].toTensor().defined())
            return nullptr;
        return &in[i].toTensor();
    };
    switch (kind) {
    case K_MM: {
        auto a = tensor(0), b = tensor(1);
        if (!a || !b || a->dim() != 2 || b->dim() != 2)
            return -1;
        return 2 * a->size(0) * a->size(1) * b->size(1);
    }
    case K_ADDMM: /* addmm, baddbmm: (input, a, b) */
    case K_BMM: {
        auto a = tensor(kind == K_BMM ? 0 : 1), b = tensor(kind == K_BMM ? 1 : 2);
        if (!a || !b || a->dim() < 2 || b->dim() < 1)
            return -1;
        int64_t batch = a->dim() == 3 ? a->size(0) : 1;
        return 2 * batch * a->size(-2) * a->size(-1) * b->size(-1);
    }
    case K_CONV: {
        /* input, weight, bias, stride, padding, dilation, transposed, output_padding, groups */
        auto x = tensor(0), w = tensor(1);
        if (!x || !w || in.size() < 7 || x->dim() < 3 || w->dim() != x->dim())
            return -1;
        int64_t per_out = numel_from(w->sizes(), 1);
        if (in[6].isBool() && in[6].toBool())
            return 2 * x->numel() * per_out; /* each input element meets the weights once */
        int64_t out = x->size(0) * w->size(0);
        for (int64_t d = 2; d < x->dim(); d++) {
            int64_t s = list_at(in[3], d - 2, 1), p = list_at(in[4], d - 2, 0), dl = list_at(in[5], d - 2, 1);
            if (s <= 0)
                return -1;
            int64_t o = (x->size(d) + 2 * p - dl * (w->size(d) - 1) - 1) / s + 1;
            out *= o > 0 ? o : 0;
        }
        return 2 * out * per_out;
    }
    case K_CONV_BACKWARD: {
        /* grad_output, input, weight, bias_sizes, ..., output_mask (last) */
        auto g = tensor(0), w = tensor(2);
        if (!g || !w)
            return -1;
        int64_t one = 2 * g->numel() * numel_from(w->sizes(), 1), n = 2;
        const c10::IValue &m = in[in.size() - 1];
        if (m.isBoolList()) {
            auto l = m.toBoolList();
            n = (l.size() > 0 && l.get(0)) + (l.size() > 1 && l.get(1));
        }
        return one * n;
    }
    case K_ATTENTION: { /* [B.., L, E] x [B.., S, E]: QK^T and the product with V */
        auto q = tensor(0), k = tensor(1);
        if (!q || !k || q->dim() < 2 || k->dim() < 2)
            return -1;
        return 4 * numel_from(q->sizes().slice(0, q->dim() - 1), 0) * k->size(-2) * q->size(-1);
    }
    default:
        return -1;
    }
}

/* One argument's text in PyTorch's "Concrete Inputs" form: an integer, a
 * list of them, a bool, a float; empty for tensors and anything else. */
void scalar_text(Out &o, const c10::IValue &v)
{
    if (v.isInt()) {
        o.num(v.toInt());
    } else if (v.isBool()) {
        o.put(v.toBool() ? "True" : "False");
    } else if (v.isIntList()) {
        auto l = v.toIntList();
        o.put("[");
        for (size_t i = 0; i < l.size(); i++) {
            if (i)
                o.put(", ");
            o.num(l.get(i));
        }
        o.put("]");
    } else if (v.isDouble()) {
        char b[32];
        snprintf(b, sizeof b, "%g", v.toDouble());
        o.put(b);
    }
}

/* FLOPs and bytes from libmlprof's shared formulas (mlprof_opcost_op), for
 * the operators this counts: every argument by position, as torch.profiler
 * records them ("Input Dims", "Input type", "Concrete Inputs"). Returns
 * whether it counted. */
bool opcost(const char *name, c10::ArrayRef<const c10::IValue> in)
{
    char shapes[512], types[256], scalars[512];
    Out s(shapes, sizeof shapes), t(types, sizeof types), c(scalars, sizeof scalars);
    s.put("[");
    t.put("[");
    c.put("[");
    for (size_t i = 0; i < in.size(); i++) {
        const c10::IValue &v = in[i];
        if (i) {
            s.put(",");
            t.put(",");
            c.put(",");
        }
        t.put("\""); /* quoted: an empty type (a non-tensor) keeps its place */
        c.put("\"");
        if (v.isTensor() && v.toTensor().defined()) {
            const at::Tensor &x = v.toTensor();
            s.put("[");
            for (int64_t d = 0; d < x.dim(); d++) {
                if (d)
                    s.put(",");
                s.num(x.size(d));
            }
            s.put("]");
            t.put(dtype_name(x.scalar_type()));
        } else {
            s.put("[]");
            scalar_text(c, v);
        }
        t.put("\"");
        c.put("\"");
    }
    s.put("]");
    t.put("]");
    c.put("]");
    if (s.full || t.full || c.full)
        return false; /* cut: not something to count from */
    int64_t cost[2] = {0, 0};
    int found = api.opcost_op(name, shapes, types, nullptr, scalars, cost);
    if (found & 1)
        api.arg_int("flops", cost[0]);
    if (found & 2)
        api.arg_int("bytes", cost[1]);
    return found != 0;
}

void record_inputs(const at::RecordFunction &fn, const Entry *e)
{
    c10::ArrayRef<const c10::IValue> in = fn.inputs();
    char shapes[256], dtypes[256];
    Out s(shapes, sizeof shapes), d(dtypes, sizeof dtypes);
    s.put("[");
    bool any = false;
    for (const c10::IValue &v : in) {
        if (!v.isTensor())
            continue;
        const at::Tensor &t = v.toTensor();
        if (!t.defined())
            continue;
        if (any) {
            s.put(",");
            d.put(",");
        }
        any = true;
        s.put("[");
        c10::IntArrayRef sz = t.sizes();
        for (size_t i = 0; i < sz.size(); i++) {
            if (i)
                s.put(",");
            s.num(sz[i]);
        }
        s.put("]");
        d.put(dtype_name(t.scalar_type()));
    }
    s.put("]");
    if (any) {
        api.arg_str("input_shapes", shapes);
        api.arg_str("dtypes", dtypes);
    }
    if (e->kind == K_NONE)
        return;
    if (api.opcost_op && opcost(e->name, in))
        return;
    int64_t f = flops(e->kind, in);
    if (f > 0)
        api.arg_int("flops", f);
}

std::unique_ptr<at::ObserverContext> op_begin(const at::RecordFunction &fn)
{
    Stack &st = tls;
    if (fn.isAsync())
        return nullptr; /* ends on another thread: not on this stack */
    Entry *e = nullptr;
    if (active.load(std::memory_order_relaxed) && api.get_state()) {
        const char *name = fn.name();
        e = strncmp(name, "autograd::engine::", 18) ? lookup(name) : nullptr;
        if (e) {
            api.begin(e->span);
            if (fn.seqNr() >= 0)
                api.arg_int("seq", fn.seqNr());
            if (st.bwd_depth > 0 && st.bwd_depth <= DEPTH) {
                const Backward &b = st.bwd[st.bwd_depth - 1];
                api.arg_int("fwd_seq", b.seq);
                api.arg_int("fwd_thread", (int64_t)b.fwd_thread);
            }
            if (flags_ & SHAPES) {
                try {
                    record_inputs(fn, e);
                } catch (...) { /* the span stays, without its shapes; the stack must stay in step */
                }
            }
        }
    }
    if (st.depth < DEPTH)
        st.ops[st.depth] = e;
    else if (e)
        api.end(e->span); /* too deep to remember: an empty span rather than a lost end */
    st.depth++;
    return nullptr;
}

void op_end(const at::RecordFunction &fn, at::ObserverContext *)
{
    Stack &st = tls;
    if (fn.isAsync() || st.depth <= 0)
        return;
    st.depth--;
    if (st.depth < DEPTH && st.ops[st.depth])
        api.end(st.ops[st.depth]->span);
}

/* Backward nodes (autograd::engine::evaluate_function: XBackward0, and the
 * node's own XBackward0) are not spans: the module backward spans begin and
 * end in gradient hooks that run inside them, and would not nest. Their link
 * to the forward operator goes on the operators they run. */
std::unique_ptr<at::ObserverContext> node_begin(const at::RecordFunction &fn)
{
    Stack &st = tls;
    if (fn.isAsync())
        return nullptr;
    if (st.bwd_depth < DEPTH)
        st.bwd[st.bwd_depth] = Backward{fn.seqNr(), fn.forwardThreadId()};
    st.bwd_depth++;
    return nullptr;
}

void node_end(const at::RecordFunction &fn, at::ObserverContext *)
{
    if (!fn.isAsync() && tls.bwd_depth > 0)
        tls.bwd_depth--;
}

/* ---- memory: torch's allocators report each allocation and free here */

int device_of(c10::Device dev)
{
    if (dev.is_cpu())
        return 0;
    if (dev.is_cuda())
        return 1 + (dev.index() < 0 ? 0 : dev.index() % 64);
    return 100 + (int)dev.type(); /* other device types: named "device N" */
}

#if TORCH_VERSION_MAJOR >= 2
using total_t = size_t; /* torch 2 reports the totals unsigned */
#else
using total_t = int64_t;
#endif

struct Memory final : c10::MemoryReportingInfoBase {
    void reportMemoryUsage(void *ptr, int64_t alloc_size, total_t, total_t, c10::Device device) override
    {
        if (!active.load(std::memory_order_relaxed) || !ptr)
            return;
        int dev = device_of(device);
        if (alloc_size > 0) {
            /* the tag is the outermost operator (what the program called:
             * aten::ones), the span the innermost (aten::empty) */
            const Stack &st = tls;
            int top = st.depth < DEPTH ? st.depth : DEPTH;
            const char *tag = nullptr;
            for (int i = 0; i < top && !tag; i++)
                tag = st.ops[i] ? st.ops[i]->name : nullptr;
            api.mem_alloc(dev, ptr, (uint64_t)alloc_size, tag);
        } else if (alloc_size < 0) {
            api.mem_free(dev, ptr);
        }
    }
    bool memoryProfilingEnabled() const override { return true; }
};

struct Session {
    at::CallbackHandle ops = 0, nodes = 0;
    bool pushed = false;
};

} // namespace

extern "C" {

/* The layout version and size of Api, checked by the loader. */
__attribute__((visibility("default"))) int mlprof_torch_native_abi(void) { return (int)sizeof(Api); }

__attribute__((visibility("default"))) int mlprof_torch_native_version(void) { return TORCH_VERSION_MAJOR; }

/* Starts recording on the calling thread (or every thread with GLOBAL).
 * Returns a session to stop, or null with a reason in why. One session at a
 * time: the callbacks share this library's state. */
__attribute__((visibility("default"))) void *mlprof_torch_native_start(const Api *a, int api_size, int flags,
                                                                       char *why, int why_size)
{
    try {
        if (api_size != (int)sizeof(Api) || !a || !a->get_state || !a->task_create || !a->begin || !a->end ||
            !a->arg_int || !a->arg_str || !a->mem_alloc || !a->mem_free || !a->domain) {
            snprintf(why, why_size, "the bindings and the extension disagree on the API table");
            return nullptr;
        }
        int expected = 0;
        if (!active.compare_exchange_strong(expected, 1)) {
            snprintf(why, why_size, "a native trace is already running");
            return nullptr;
        }
        api = *a;
        flags_ = flags;
        auto *s = new Session;
        at::RecordFunctionCallback ops(op_begin, op_end);
        ops.needsInputs((flags & SHAPES) != 0).scopes({at::RecordScope::FUNCTION});
        at::RecordFunctionCallback nodes(node_begin, node_end);
        nodes.scopes({at::RecordScope::BACKWARD_FUNCTION});
        if (flags & GLOBAL) {
            s->ops = at::addGlobalCallback(ops);
            s->nodes = at::addGlobalCallback(nodes);
        } else {
            s->ops = at::addThreadLocalCallback(ops);
            s->nodes = at::addThreadLocalCallback(nodes);
        }
        if ((flags & MEMORY) && !c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE)) {
            /* torch.profiler holds this slot while it runs: then it gets the memory, not mlprof */
            c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<Memory>());
            s->pushed = true;
        }
        return s;
    } catch (const std::exception &e) {
        active.store(0);
        snprintf(why, why_size, "%s", e.what());
        return nullptr;
    }
}

/* Stops a session, on the thread that started it. 0, or -1 (why says). */
__attribute__((visibility("default"))) int mlprof_torch_native_stop(void *session, char *why, int why_size)
{
    auto *s = static_cast<Session *>(session);
    if (!s)
        return -1;
    try {
        at::removeCallback(s->ops);
        at::removeCallback(s->nodes);
        if (s->pushed)
            c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
    } catch (const std::exception &e) {
        snprintf(why, why_size, "%s", e.what());
        delete s;
        active.store(0);
        return -1;
    }
    delete s;
    active.store(0);
    return 0;
}

} // extern "C"
