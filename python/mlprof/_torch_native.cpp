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
 * path writes them, and "flops" and "bytes" from libmlprof's shared formulas
 * (mlprof_opcost_op) for the operators they know.
 *
 * Memory (with MEMORY): every tensor allocation and free torch's allocators
 * report; and, where torch has CUDA (built with MLPROF_TORCH_CUDA), the CUDA
 * caching allocator's segments as mlprof_mem_reserve/release, from its trace
 * tracker (torch 2.6 and later; expandable segments are not followed): "used" against "allocated" is then torch's
 * own caching and fragmentation. The segments already reserved when a trace
 * starts are reported first, from the allocator's snapshot, and those still
 * reserved when it stops are released in mlprof's view.
 *
 * An operator that throws ends as the exception unwinds it, with "exception"
 * on its span.
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
#ifdef MLPROF_TORCH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

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
#include <exception>
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
    /* mlprof_mem_reserve and mlprof_mem_release: the CUDA allocator's segments */
    int (*mem_reserve)(int device, const void *addr, uint64_t bytes);
    int (*mem_release)(int device, const void *addr);
};

enum { SHAPES = 1, MEMORY = 2, GLOBAL = 4 };

Api api;
int flags_;
std::atomic<int> active{0};

/* ---- operator name -> span handle, filled once per name (lock-free reads) */

struct Entry {
    void *span;
    /* mlprof_opcost_op on this operator: COST_TRY while it has not counted
     * yet (tries left in tries), COST_YES once it has, COST_NO for names it
     * does not know (it gave nothing four times) and the composites below. */
    std::atomic<int> cost, tries;
    char name[1]; /* the name's copy (allocated to its length) */
};
enum { COST_TRY, COST_YES, COST_NO };

/* Operators made of others above autograd (CompositeImplicitAutograd): their
 * parts are counted, as the dispatch-mode path sees them (aten::convolution,
 * not aten::conv2d; aten::addmm, not aten::linear). */
bool composite(const char *name)
{
    static const char *const names[] = {
        "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
        "aten::conv_transpose3d", "aten::linear", "aten::matmul", "aten::layer_norm", "aten::batch_norm",
        "aten::group_norm", "aten::softmax", "aten::log_softmax", "aten::scaled_dot_product_attention", nullptr};
    for (const char *const *n = names; *n; n++)
        if (!strcmp(*n, name))
            return true;
    return false;
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
        new (&e->cost) std::atomic<int>(composite(name) ? COST_NO : COST_TRY);
        new (&e->tries) std::atomic<int>(4);
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
    int uncaught[DEPTH]; /* std::uncaught_exceptions() at the begin: more at the end is an unwinding */
    int depth;
    int counted; /* the level of the operator that has FLOPs/bytes, whose parts are not counted again; -1 */
    Backward bwd[DEPTH];
    int bwd_depth;
    unsigned session; /* the session this stack is of */
};
thread_local Stack tls = {{}, {}, 0, -1, {}, 0, 0};

/* Sessions started: a thread's stack from an earlier one is emptied at its
 * first callback in a new one (a stop while a thread was inside operators,
 * whose ends then never came, would otherwise leave it deep, or counting). */
std::atomic<unsigned> g_session{0};

Stack &stack()
{
    Stack &st = tls;
    unsigned now = g_session.load(std::memory_order_relaxed);
    if (st.session != now) {
        st.depth = 0;
        st.counted = -1;
        st.bwd_depth = 0;
        st.session = now;
    }
    return st;
}

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

/* One argument's text in PyTorch's "Concrete Inputs" form: an integer, a
 * list of them, a bool, a list of them, a float; empty for tensors and
 * anything else. */
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
    } else if (v.isBoolList()) { /* convolution_backward's output_mask: which gradients it computes */
        auto l = v.toBoolList();
        o.put("[");
        for (size_t i = 0; i < l.size(); i++) {
            if (i)
                o.put(", ");
            o.put(l.get(i) ? "True" : "False");
        }
        o.put("]");
    } else if (v.isDouble()) {
        char b[32];
        snprintf(b, sizeof b, "%g", v.toDouble());
        o.put(b);
    }
}

/* What one call's arguments give, kept per thread by a hash of the
 * arguments: a training loop calls each operator on the same shapes again
 * and again, and the texts and the cost are then copied, not made again
 * (parsing them is most of mlprof_opcost_op's time). */
constexpr size_t TEXT = 192;
struct Memo {
    uint64_t hash;
    const Entry *op;
    bool any;       /* a tensor among the arguments */
    int found;      /* mlprof_opcost_op's answer; -1: not asked yet */
    int64_t cost[2];
    char shapes[TEXT], dtypes[TEXT]; /* tensors only, as the dispatch-mode path writes them */
};
constexpr size_t MEMO = 128;
thread_local Memo memo[MEMO];

inline uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

/* A hash of everything the texts are made of: each tensor's sizes and type,
 * each scalar's kind and value. 0: an argument it cannot say (not cached). */
uint64_t hash_args(const Entry *op, c10::ArrayRef<const c10::IValue> in)
{
    uint64_t h = mix(1469598103934665603ull, (uintptr_t)op);
    for (const c10::IValue &v : in) {
        if (v.isTensor()) {
            const at::Tensor &t = v.toTensor();
            if (!t.defined()) {
                h = mix(h, 1);
                continue;
            }
            h = mix(mix(h, 2), (uint64_t)t.scalar_type());
            h = mix(h, (uint64_t)t.dim());
            for (int64_t d : t.sizes())
                h = mix(h, (uint64_t)d);
        } else if (v.isInt()) {
            h = mix(mix(h, 3), (uint64_t)v.toInt());
        } else if (v.isBool()) {
            h = mix(h, v.toBool() ? 4 : 5);
        } else if (v.isDouble()) {
            double x = v.toDouble();
            uint64_t bits;
            memcpy(&bits, &x, sizeof bits);
            h = mix(mix(h, 6), bits);
        } else if (v.isIntList()) {
            auto l = v.toIntList();
            h = mix(mix(h, 7), l.size());
            for (size_t i = 0; i < l.size(); i++)
                h = mix(h, (uint64_t)l.get(i));
        } else if (v.isBoolList()) {
            auto l = v.toBoolList();
            h = mix(mix(h, 9), l.size());
            for (size_t i = 0; i < l.size(); i++)
                h = mix(h, l.get(i) ? 10 : 11);
        } else if (v.isNone()) {
            h = mix(h, 8);
        } else {
            return 0; /* a tensor list, a string...: made each time */
        }
    }
    return h ? h : 1;
}

/* FLOPs and bytes from libmlprof's shared formulas (mlprof_opcost_op,
 * mlprof/opcost.h): every argument by position, as torch.profiler records
 * them ("Input Dims", "Input type", "Concrete Inputs"). Returns its answer
 * (MLPROF_OPCOST_HAS_FLOPS | _HAS_BYTES, 0: nothing). */
int opcost(const char *name, c10::ArrayRef<const c10::IValue> in, int64_t cost[2])
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
        return 0; /* cut: not something to count from */
    return api.opcost_op(name, shapes, types, nullptr, scalars, cost);
}

/* The tensors' shapes and types into m (tensors only). False when cut. */
bool texts(Memo &m, c10::ArrayRef<const c10::IValue> in)
{
    Out s(m.shapes, TEXT), d(m.dtypes, TEXT);
    s.put("[");
    m.any = false;
    for (const c10::IValue &v : in) {
        if (!v.isTensor())
            continue;
        const at::Tensor &t = v.toTensor();
        if (!t.defined())
            continue;
        if (m.any) {
            s.put(",");
            d.put(",");
        }
        m.any = true;
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
    return !s.full && !d.full;
}

void record_inputs(const at::RecordFunction &fn, const Entry *e)
{
    c10::ArrayRef<const c10::IValue> in = fn.inputs();
    uint64_t h = hash_args(e, in);
    Memo scratch, &m = h ? memo[h % MEMO] : scratch;
    if (!h || m.hash != h || m.op != e) {
        m.hash = 0;
        m.op = e;
        m.found = -1;
        if (texts(m, in))
            m.hash = h; /* kept for the next call, unless cut */
    }
    if (m.any) {
        api.arg_str("input_shapes", m.shapes);
        api.arg_str("dtypes", m.dtypes);
    }
    /* Only the outermost operator that counts: its parts (aten::sum calling
     * its other overload, aten::convolution its backend's) are the same work. */
    Stack &st = stack();
    Entry *w = const_cast<Entry *>(e);
    int state = w->cost.load(std::memory_order_relaxed);
    if (!api.opcost_op || st.counted >= 0 || state == COST_NO)
        return;
    if (m.found < 0)
        m.found = opcost(e->name, in, m.cost);
    if (m.found) {
        if (m.found & 1)
            api.arg_int("flops", m.cost[0]);
        if (m.found & 2)
            api.arg_int("bytes", m.cost[1]);
        st.counted = st.depth; /* this operator's level, pushed just after */
        if (state != COST_YES)
            w->cost.store(COST_YES, std::memory_order_relaxed);
    } else if (state == COST_TRY && w->tries.fetch_sub(1, std::memory_order_relaxed) <= 1) {
        w->cost.store(COST_NO, std::memory_order_relaxed); /* a name it does not know */
    }
}

std::unique_ptr<at::ObserverContext> op_begin(const at::RecordFunction &fn)
{
    Stack &st = stack();
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
    if (st.depth < DEPTH) {
        st.ops[st.depth] = e;
        st.uncaught[st.depth] = e ? std::uncaught_exceptions() : 0;
    } else if (e) {
        api.end(e->span); /* too deep to remember: an empty span rather than a lost end */
    }
    st.depth++;
    return nullptr;
}

void op_end(const at::RecordFunction &fn, at::ObserverContext *)
{
    Stack &st = stack();
    if (fn.isAsync() || st.depth <= 0)
        return;
    st.depth--;
    if (st.counted == st.depth)
        st.counted = -1;
    if (st.depth < DEPTH && st.ops[st.depth]) {
        /* An operator that throws ends all the same (RecordFunction's
         * destructor runs the end callbacks as the exception unwinds it), as
         * torch.profiler's ranges do: said on the span, the exception's type
         * being out of reach before it is caught. */
        if (std::uncaught_exceptions() > st.uncaught[st.depth])
            api.arg_str("exception", "C++ exception");
        api.end(st.ops[st.depth]->span);
    }
}

/* Backward nodes (autograd::engine::evaluate_function: XBackward0, and the
 * node's own XBackward0) are not spans: the module backward spans begin and
 * end in gradient hooks that run inside them, and would not nest. Their link
 * to the forward operator goes on the operators they run. */
std::unique_ptr<at::ObserverContext> node_begin(const at::RecordFunction &fn)
{
    Stack &st = stack();
    if (fn.isAsync())
        return nullptr;
    if (st.bwd_depth < DEPTH)
        st.bwd[st.bwd_depth] = Backward{fn.seqNr(), fn.forwardThreadId()};
    st.bwd_depth++;
    return nullptr;
}

void node_end(const at::RecordFunction &fn, at::ObserverContext *)
{
    Stack &st = stack();
    if (!fn.isAsync() && st.bwd_depth > 0)
        st.bwd_depth--;
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
            const Stack &st = stack();
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

#ifdef MLPROF_TORCH_CUDA
/* The CUDA caching allocator's segments: its trace tracker sees each one
 * reserved (cudaMalloc) and released. Expandable segments (mapped and
 * unmapped in ranges that need not match) are not followed: used and
 * allocated then both count the tensors. Called under the allocator's lock:
 * mlprof's memory calls take only mlprof's own locks, which never call back
 * into torch, nor the GIL. */
namespace cca = c10::cuda::CUDACachingAllocator;
std::once_flag tracker_attached;
bool tracker_ok = false;
std::atomic<int> segments_on{0};

void on_segment(const cca::TraceEntry &te)
{
    if (!segments_on.load(std::memory_order_relaxed))
        return;
    int dev = 1 + (te.device_ < 0 ? 0 : te.device_ % 64);
    const void *addr = reinterpret_cast<const void *>(static_cast<uintptr_t>(te.addr_));
    if (te.action_ == cca::TraceEntry::Action::SEGMENT_ALLOC)
        api.mem_reserve(dev, addr, (uint64_t)te.size_);
    else if (te.action_ == cca::TraceEntry::Action::SEGMENT_FREE)
        api.mem_release(dev, addr);
}

/* From now on, the segments; those reserved before first. Nothing where the
 * process has no CUDA device, or another allocator backend than torch's
 * own (cudaMallocAsync refuses trackers): the tensors are still recorded. */
void segments_start()
{
    try {
        if (!api.mem_reserve || !api.mem_release || !at::globalContext().hasCUDA())
            return;
        /* the tracker reaches only the devices' allocators that exist: CUDA
         * first (what torch.profiler's CUDA activity does too) */
        at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
        std::call_once(tracker_attached, [] {
            cca::attachAllocatorTraceTracker(on_segment);
            tracker_ok = true;
        });
        if (!tracker_ok)
            return;
        for (const auto &seg : cca::snapshot().segments)
            if (!seg.is_expandable)
                api.mem_reserve(1 + (seg.device < 0 ? 0 : seg.device % 64),
                                reinterpret_cast<const void *>(static_cast<uintptr_t>(seg.address)),
                                (uint64_t)seg.total_size);
        segments_on.store(1, std::memory_order_relaxed);
    } catch (const std::exception &) {
        segments_on.store(0, std::memory_order_relaxed); /* the operators and tensors go on */
    }
}

/* Not followed from now on: the segments still reserved are released in
 * mlprof's view, so that the next trace, which reports them again, does not
 * count them twice. */
void segments_stop()
{
    if (!segments_on.exchange(0, std::memory_order_relaxed))
        return;
    try {
        for (const auto &seg : cca::snapshot().segments)
            if (!seg.is_expandable)
                api.mem_release(1 + (seg.device < 0 ? 0 : seg.device % 64),
                                reinterpret_cast<const void *>(static_cast<uintptr_t>(seg.address)));
    } catch (const std::exception &) {
    }
}
#else
void segments_start() {}
void segments_stop() {}
#endif

struct Session {
    at::CallbackHandle ops = 0, nodes = 0;
    bool pushed = false;
    bool segments = false;
};

} // namespace

extern "C" {

/* The layout version and size of Api, checked by the loader. */
__attribute__((visibility("default"))) int mlprof_torch_native_abi(void) { return (int)sizeof(Api); }

__attribute__((visibility("default"))) int mlprof_torch_native_version(void) { return TORCH_VERSION_MAJOR; }

/* 1 where this build follows the CUDA caching allocator's segments. */
__attribute__((visibility("default"))) int mlprof_torch_native_segments(void)
{
#ifdef MLPROF_TORCH_CUDA
    return 1;
#else
    return 0;
#endif
}

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
        g_session.fetch_add(1, std::memory_order_relaxed); /* the threads' stacks start empty */
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
        if (flags & MEMORY) {
            segments_start();
            s->segments = true;
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
        if (s->segments)
            segments_stop();
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
