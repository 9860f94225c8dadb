/*
 * cudnn_graph.c - what a cuDNN 9 execution plan computes, for the span of
 * cudnnBackendExecute (hook "cudnn"). PyTorch 2 runs its convolutions through
 * cuDNN's graph API: a plan made once (cudnnBackendFinalize) and executed
 * many times with nothing in the call but the plan and the data pointers.
 *
 * While a program builds its graphs, the descriptors' attributes are noted
 * as they are set (cudnnBackendSetAttribute): tensors' dimensions and type,
 * convolution descriptors' paddings, strides and dilations, operations'
 * tensors. When an operation is finalized (its tensors still alive), what it
 * computes is summed up: the operation, shapes, type, padding, stride,
 * dilation, groups, FLOPs and bytes (mlprof/opcost.h, as the legacy calls'
 * spans). The summary then travels along each link as it is made, since a
 * framework destroys the tensors, the graph and the heuristics before it
 * makes the plan (PyTorch 2.11 on an H200 does): graph <- its operations
 * (the convolution, else a matmul, and how many), heuristics <- graph,
 * engine configs cuDNN's heuristics hand out (cudnnBackendGetAttribute of
 * ENGINEHEUR_RESULTS) <- heuristics, engine <- graph or <- the config it is
 * read from, config <- engine, plan <- config. When a plan is finalized its
 * summary is copied, by plan, into a table the execution reads without a
 * lock. A graph of several operations (a convolution fused with its bias and
 * activation) says how many (ops); FLOPs and bytes are its convolution's. A
 * plan whose chain was not seen (deserialized from JSON, made before the
 * hook was on) executes as a span without them; otherData.cudnn counts them
 * and says why the first had none.
 *
 * The building calls take a mutex (they are rare and slow: a plan costs
 * milliseconds to make); the descriptors' notes live in a table that grows,
 * and go when the descriptor is destroyed. Attribute numbers are cuDNN 9's
 * documented cudnnBackendAttributeName_t values.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hook.h"
#include "mlprof/opcost.h"

#define EXPORT __attribute__((visibility("default")))

/* cudnnBackendAttributeType_t */
enum { T_DATA_TYPE = 1, T_INT64 = 3, T_DESCRIPTOR = 15 };
/* cudnnBackendAttributeName_t */
enum {
    A_CONV_DILATIONS = 102, A_CONV_STRIDES = 103, A_CONV_POST_PAD = 104, A_CONV_PRE_PAD = 105,
    A_CONV_SPATIAL_DIMS = 106, A_HEUR_GRAPH = 201, A_HEUR_RESULTS = 202, A_CFG_ENGINE = 300, A_PLAN_CFG = 401,
    A_FWD_CONV = 702, A_FWD_W = 703, A_FWD_X = 704, A_FWD_Y = 705, A_BWD_DATA_CONV = 708, A_BWD_DATA_W = 709,
    A_BWD_DATA_DX = 710, A_BWD_DATA_DY = 711, A_BWD_FILTER_CONV = 714, A_BWD_FILTER_DW = 715,
    A_BWD_FILTER_X = 716, A_BWD_FILTER_DY = 717, A_GRAPH_OPS = 801, A_TENSOR_DATA_TYPE = 901,
    A_TENSOR_DIMS = 902, A_ENGINE_GRAPH = 1300, A_MATMUL_A = 1520, A_MATMUL_B = 1521, A_MATMUL_C = 1522
};

#define MAX_DIMS 8
#define MAX_SPATIAL 3
enum { K_NONE, K_TENSOR, K_CONV, K_OP, K_GRAPH, K_ENGINE, K_CFG, K_PLAN, K_HEUR };
enum { OP_NONE, OP_CONV_FWD, OP_CONV_BWD_DATA, OP_CONV_BWD_FILTER, OP_MATMUL };
static const char *const k_op_names[] = {"", "ConvolutionForward", "ConvolutionBackwardData",
                                         "ConvolutionBackwardFilter", "Matmul"};

/* What an operation computes, shared by the descriptors it reached (under
 * g_lock, counted; freed with the last). */
typedef struct summary {
    int refs;
    uint8_t op, nops, n, nsp;
    int32_t dtype, groups;
    int x[MAX_DIMS], w[MAX_DIMS], y[MAX_DIMS];
    int pad[MAX_SPATIAL], post[MAX_SPATIAL], stride[MAX_SPATIAL], dil[MAX_SPATIAL];
    int64_t m, nn, k, batch, flops, bytes;
} summary;

/* One descriptor's notes: a tensor's dimensions, a convolution's
 * parameters, an operation's x (dx, A), w (dw, B), y (dy, C) and
 * convolution; and the summary it leads to. */
typedef struct {
    void *key; /* the descriptor; NULL: free; TOMB: destroyed */
    uint8_t kind, op, n, has_cfg;
    int32_t dtype;
    summary *sum;
    union {
        int64_t dims[MAX_DIMS];
        struct {
            int64_t pre[MAX_SPATIAL], post[MAX_SPATIAL], stride[MAX_SPATIAL], dil[MAX_SPATIAL];
        } conv;
        void *ref[4];
    } u;
} note;
#define TOMB ((void *)(uintptr_t)1)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static note *g_notes;
static size_t g_cap, g_used; /* slots taken, tombstones included */

static size_t slot_of(const void *p, size_t cap) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static note *find(const void *key)
{
    if (!g_notes || !key)
        return NULL;
    for (size_t i = slot_of(key, g_cap), k = 0; k < g_cap; k++, i = (i + 1) & (g_cap - 1)) {
        if (g_notes[i].key == key)
            return &g_notes[i];
        if (!g_notes[i].key)
            return NULL;
    }
    return NULL;
}

/* The note of key, made when missing (with its kind), or NULL when memory
 * runs out. Called under g_lock. */
static note *take(void *key, int kind)
{
    note *n = find(key);
    if (n) {
        if (n->kind == K_NONE)
            n->kind = (uint8_t)kind;
        return n;
    }
    if (2 * (g_used + 1) > g_cap) { /* grow (and drop tombstones) */
        size_t cap = g_cap ? g_cap * 2 : 1024;
        mlprof__busy++;
        note *t = mlprof__malloc(cap * sizeof *t);
        mlprof__busy--;
        if (!t)
            return NULL;
        memset(t, 0, cap * sizeof *t);
        size_t used = 0;
        for (size_t i = 0; i < g_cap; i++) {
            if (!g_notes[i].key || g_notes[i].key == TOMB)
                continue;
            size_t j = slot_of(g_notes[i].key, cap);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = g_notes[i];
            used++;
        }
        mlprof__busy++;
        mlprof__free(g_notes);
        mlprof__busy--;
        g_notes = t, g_cap = cap, g_used = used;
    }
    size_t i = slot_of(key, g_cap);
    while (g_notes[i].key && g_notes[i].key != TOMB)
        i = (i + 1) & (g_cap - 1);
    if (!g_notes[i].key)
        g_used++;
    memset(&g_notes[i], 0, sizeof g_notes[i]);
    g_notes[i].key = key;
    g_notes[i].kind = (uint8_t)kind;
    return &g_notes[i];
}

/* ------------------------------------------------------------ summaries */

static void sum_release(summary *sm)
{
    if (sm && --sm->refs == 0) {
        mlprof__busy++;
        mlprof__free(sm);
        mlprof__busy--;
    }
}

/* n leads to sm (NULL: to nothing known) */
static void lead(note *n, summary *sm)
{
    if (!n || n->sum == sm)
        return;
    if (sm)
        sm->refs++;
    sum_release(n->sum);
    n->sum = sm;
}

static summary *sum_new(void)
{
    mlprof__busy++;
    summary *sm = mlprof__malloc(sizeof *sm);
    mlprof__busy--;
    if (sm) {
        memset(sm, 0, sizeof *sm);
        sm->refs = 1;
    }
    return sm;
}

static void drop(const void *key)
{
    note *n = find(key);
    if (n) {
        lead(n, NULL);
        n->key = TOMB;
    }
}

static int64_t elem_size(int dtype)
{
    /* cudnnDataType_t: float, double, half, int8, int32, ..., bfloat16 (9), int64 (10), fp8 (12, 13) */
    switch (dtype) {
    case 1:
    case 10:
        return 8;
    case 2:
    case 9:
        return 2;
    case 3:
    case 6:
    case 12:
    case 13:
        return 1;
    default:
        return 4;
    }
}

static const note *tensor(void *d)
{
    const note *n = find(d);
    return n && n->kind == K_TENSOR && n->n > 0 ? n : NULL;
}

/* An operation finalized: what it computes, from its tensors and convolution
 * (alive now; a framework may destroy them once the graph is made). */
static void op_made(note *op)
{
    const note *x = tensor(op->u.ref[0]), *w = tensor(op->u.ref[1]), *y = tensor(op->u.ref[2]);
    if (op->op == OP_NONE || !x || !w || !y || x->n != w->n || x->n != y->n)
        return;
    summary *sm = sum_new();
    if (!sm)
        return;
    sm->op = op->op;
    sm->n = x->n;
    sm->dtype = x->dtype;
    int64_t x64[MAX_DIMS], w64[MAX_DIMS], y64[MAX_DIMS];
    for (int i = 0; i < x->n; i++) {
        x64[i] = x->u.dims[i], w64[i] = w->u.dims[i], y64[i] = y->u.dims[i];
        sm->x[i] = (int)x64[i], sm->w[i] = (int)w64[i], sm->y[i] = (int)y64[i];
    }
    int64_t elem = elem_size(x->dtype);
    mlprof_opcost c;
    if (op->op == OP_MATMUL) { /* A [..., M, K] x B [..., K, N] = C [..., M, N] */
        int r = x->n;
        int64_t batch = 1;
        for (int i = 0; i < r - 2; i++)
            batch *= y64[i] > 0 ? y64[i] : 1;
        if (r >= 2) {
            sm->m = x64[r - 2], sm->k = x64[r - 1], sm->nn = w64[r - 1], sm->batch = batch;
            if (mlprof_opcost_gemm(batch, sm->m, sm->nn, sm->k, elem, elem_size(w->dtype), elem_size(y->dtype), 0,
                                   &c) == 0)
                sm->flops = c.flops, sm->bytes = c.bytes;
        }
    } else {
        const note *conv = find(op->u.ref[3]);
        if (conv && conv->kind == K_CONV && conv->n > 0 && conv->n <= MAX_SPATIAL) {
            sm->nsp = conv->n;
            for (int i = 0; i < conv->n; i++) {
                sm->pad[i] = (int)conv->u.conv.pre[i], sm->post[i] = (int)conv->u.conv.post[i];
                sm->stride[i] = (int)conv->u.conv.stride[i], sm->dil[i] = (int)conv->u.conv.dil[i];
            }
        }
        sm->groups = x64[1] > 0 && w64[1] > 0 && x64[1] % w64[1] == 0 ? (int32_t)(x64[1] / w64[1]) : 1;
        int pass = op->op == OP_CONV_FWD        ? MLPROF_CONV_FORWARD
                   : op->op == OP_CONV_BWD_DATA ? MLPROF_CONV_BACKWARD_DATA
                                                : MLPROF_CONV_BACKWARD_FILTER;
        if (mlprof_opcost_conv(pass, x->n, x64, w64, y64, elem, 0, &c) == 0)
            sm->flops = c.flops, sm->bytes = c.bytes;
    }
    lead(op, sm);
    sum_release(sm); /* the op's reference is the one left */
}

/* A graph's operations: its summary is its convolution's (else its
 * matmul's, else none known) with how many operations it has. */
static void graph_made(note *g, void *const *ops, int64_t count)
{
    const summary *best = NULL;
    for (int64_t i = 0; i < count; i++) {
        const note *o = find(ops[i]);
        if (o && o->kind == K_OP && o->sum && (!best || (best->op == OP_MATMUL && o->sum->op != OP_MATMUL)))
            best = o->sum;
    }
    summary *sm = sum_new();
    if (!sm)
        return;
    if (best) {
        *sm = *best;
        sm->refs = 1;
    }
    sm->nops = (uint8_t)(count > 255 ? 255 : count);
    lead(g, sm);
    sum_release(sm);
}

/* ------------------------------------------------------------- the plans */

/* What an execution of a plan writes: kept by plan in a fixed table, each
 * entry filled before its key is published, read without a lock. */
typedef struct {
    void *plan; /* NULL: free; TOMB: destroyed */
    summary s;
} plan_info;
#define PLANS 1024 /* a power of two */
static plan_info g_plans[PLANS];
static int g_plans_full_said;
/* for otherData.cudnn: plans finalized and described; executions of plans
 * not described, and why the first was not */
static uint64_t g_plans_made, g_plans_described, g_exec_unknown;
static char g_why[160];

static plan_info *plan_find(const void *plan)
{
    for (size_t i = slot_of(plan, PLANS), k = 0; k < PLANS; k++, i = (i + 1) & (PLANS - 1)) {
        void *p = __atomic_load_n(&g_plans[i].plan, __ATOMIC_ACQUIRE);
        if (p == plan)
            return &g_plans[i];
        if (!p)
            return NULL;
    }
    return NULL;
}

/* Why a plan has no summary: the first link not seen. */
static const char *why_not(const note *plan)
{
    if (!plan || plan->kind != K_PLAN || !plan->has_cfg)
        return "its making was not seen (no engine config set on it)";
    return "its engine config was not seen made from an operation graph (by cuDNN's heuristics, or from an "
           "engine)";
}

/* A plan finalized: its summary published (under g_lock). */
static void plan_made(void *plan)
{
    const note *n = find(plan);
    if (!n || n->kind != K_PLAN)
        return;
    g_plans_made++;
    if (!n->sum) {
        if (!g_why[0])
            snprintf(g_why, sizeof g_why, "a plan made: %s", why_not(n));
        return;
    }
    g_plans_described++;
    plan_info *slot = plan_find(plan);
    for (size_t i = slot_of(plan, PLANS), k = 0; !slot && k < PLANS; k++, i = (i + 1) & (PLANS - 1)) {
        void *p = g_plans[i].plan;
        if (!p || p == TOMB)
            slot = &g_plans[i];
    }
    if (!slot) {
        if (!g_plans_full_said++)
            mlprof__log(MLPROF_LOG_WARN,
                        "cudnn hook: more than %d live execution plans; the others' spans have no shapes", PLANS);
        return;
    }
    /* a tombstone while it is written: a lookup of another plan probes on past it */
    __atomic_store_n(&slot->plan, TOMB, __ATOMIC_RELEASE);
    slot->s = *n->sum;
    __atomic_store_n(&slot->plan, plan, __ATOMIC_RELEASE);
}

void mlprof__cudnn_plan_args(const void *plan)
{
    const plan_info *pi = plan_find(plan);
    if (!pi) {
        if (__atomic_fetch_add(&g_exec_unknown, 1, __ATOMIC_RELAXED) == 0) { /* the first: why, once */
            pthread_mutex_lock(&g_lock);
            if (!g_why[0])
                snprintf(g_why, sizeof g_why, "a plan executed: %s", why_not(find(plan)));
            pthread_mutex_unlock(&g_lock);
        }
        return;
    }
    const summary *sm = &pi->s;
    if (sm->nops > 1)
        mlprof_arg_int("ops", sm->nops);
    if (sm->op == OP_NONE)
        return;
    mlprof_arg_str("op", k_op_names[sm->op]);
    mlprof_arg_str("dtype", mlprof__cudnn_type_name(sm->dtype));
    if (sm->op == OP_MATMUL) {
        mlprof_arg_int("M", sm->m);
        mlprof_arg_int("N", sm->nn);
        mlprof_arg_int("K", sm->k);
        if (sm->batch > 1)
            mlprof_arg_int("batch", sm->batch);
    } else {
        /* as the legacy calls say it: input, filter and output, whichever are gradients */
        mlprof__cudnn_arg_dims("input_shape", sm->x, sm->n);
        mlprof__cudnn_arg_dims("filter_shape", sm->w, sm->n);
        mlprof__cudnn_arg_dims("output_shape", sm->y, sm->n);
        if (sm->nsp) {
            mlprof__cudnn_arg_dims("padding", sm->pad, sm->nsp);
            if (memcmp(sm->pad, sm->post, sizeof sm->pad) != 0)
                mlprof__cudnn_arg_dims("post_padding", sm->post, sm->nsp);
            mlprof__cudnn_arg_dims("stride", sm->stride, sm->nsp);
            mlprof__cudnn_arg_dims("dilation", sm->dil, sm->nsp);
        }
        if (sm->groups > 1)
            mlprof_arg_int("groups", sm->groups);
    }
    if (sm->flops) {
        mlprof_arg_int("flops", sm->flops);
        mlprof_arg_int("bytes", sm->bytes);
    }
}

/* otherData.cudnn, when the graph API was used: how many plans were made
 * and described, how many executions had no description, and why the first
 * had none. */
void mlprof__cudnn_other_data(mlprof__sb *out)
{
    pthread_mutex_lock(&g_lock);
    uint64_t unknown = __atomic_load_n(&g_exec_unknown, __ATOMIC_RELAXED);
    if (g_plans_made || unknown) {
        mlprof__sb_printf(out, ",\"cudnn\":{\"plans\":%llu,\"plans_described\":%llu,\"executions_undescribed\":%llu",
                          (unsigned long long)g_plans_made, (unsigned long long)g_plans_described,
                          (unsigned long long)unknown);
        if (g_why[0]) {
            mlprof__sb_puts(out, ",\"why\":");
            mlprof__sb_json_str(out, g_why, strlen(g_why));
        }
        mlprof__sb_puts(out, "}");
    }
    pthread_mutex_unlock(&g_lock);
}

/* --------------------------------------------------------- the wrappers */

typedef int set_fn(void *, int, int, int64_t, const void *);
typedef int get_fn(void *, int, int, int64_t, int64_t *, void *);
typedef int desc_fn(void *);
static void *g_set, *g_get, *g_finalize, *g_destroy;

static int tracking(void) { return mlprof__busy == 0 && mlprof__hook_on(MLPROF__HOOK_CUDNN); }

/* An operation's tensor or convolution: its role by attribute. */
static int op_role(int name, int *op)
{
    static const struct {
        int name, op, role;
    } roles[] = {{A_FWD_X, OP_CONV_FWD, 0},
                 {A_FWD_W, OP_CONV_FWD, 1},
                 {A_FWD_Y, OP_CONV_FWD, 2},
                 {A_FWD_CONV, OP_CONV_FWD, 3},
                 {A_BWD_DATA_DX, OP_CONV_BWD_DATA, 0},
                 {A_BWD_DATA_W, OP_CONV_BWD_DATA, 1},
                 {A_BWD_DATA_DY, OP_CONV_BWD_DATA, 2},
                 {A_BWD_DATA_CONV, OP_CONV_BWD_DATA, 3},
                 {A_BWD_FILTER_X, OP_CONV_BWD_FILTER, 0},
                 {A_BWD_FILTER_DW, OP_CONV_BWD_FILTER, 1},
                 {A_BWD_FILTER_DY, OP_CONV_BWD_FILTER, 2},
                 {A_BWD_FILTER_CONV, OP_CONV_BWD_FILTER, 3},
                 {A_MATMUL_A, OP_MATMUL, 0},
                 {A_MATMUL_B, OP_MATMUL, 1},
                 {A_MATMUL_C, OP_MATMUL, 2}};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        if (roles[i].name == name) {
            *op = roles[i].op;
            return roles[i].role;
        }
    }
    return -1;
}

static void conv_array(int64_t *to, int64_t count, const int64_t *from)
{
    for (int64_t i = 0; i < count && i < MAX_SPATIAL; i++)
        to[i] = from[i];
}

/* The summary the descriptor d leads to (NULL: none known). */
static summary *sum_of(const void *d)
{
    const note *n = find(d);
    return n ? n->sum : NULL;
}

/* The note an attribute leaves (under g_lock). */
static void noted(void *d, int name, int type, int64_t count, const void *elems)
{
    if (!elems || count <= 0)
        return;
    int op = OP_NONE, role;
    note *n;
    if (type == T_INT64 && (name == A_TENSOR_DIMS || (name >= A_CONV_DILATIONS && name <= A_CONV_SPATIAL_DIMS))) {
        const int64_t *v = elems;
        if (name == A_TENSOR_DIMS) {
            if (count > MAX_DIMS || !(n = take(d, K_TENSOR)))
                return;
            memcpy(n->u.dims, v, (size_t)count * sizeof *v);
            n->n = (uint8_t)count;
            return;
        }
        if (!(n = take(d, K_CONV)))
            return;
        if (name == A_CONV_SPATIAL_DIMS)
            n->n = v[0] > 0 && v[0] <= MAX_SPATIAL ? (uint8_t)v[0] : 0;
        else
            conv_array(name == A_CONV_DILATIONS ? n->u.conv.dil
                       : name == A_CONV_STRIDES ? n->u.conv.stride
                       : name == A_CONV_POST_PAD ? n->u.conv.post
                                                 : n->u.conv.pre,
                       count, v);
    } else if (type == T_DATA_TYPE && name == A_TENSOR_DATA_TYPE) {
        if ((n = take(d, K_TENSOR)))
            n->dtype = *(const int32_t *)elems;
    } else if (type == T_DESCRIPTOR) {
        void *const *ds = elems;
        if ((role = op_role(name, &op)) >= 0) {
            if ((n = take(d, K_OP))) {
                n->op = (uint8_t)op;
                n->u.ref[role] = ds[0];
            }
        } else if (name == A_GRAPH_OPS) {
            if ((n = take(d, K_GRAPH)))
                graph_made(n, ds, count);
        } else if (name == A_ENGINE_GRAPH || name == A_HEUR_GRAPH || name == A_CFG_ENGINE || name == A_PLAN_CFG) {
            int kind = name == A_ENGINE_GRAPH ? K_ENGINE
                       : name == A_HEUR_GRAPH ? K_HEUR
                       : name == A_CFG_ENGINE ? K_CFG
                                              : K_PLAN;
            summary *sm = sum_of(ds[0]);
            if ((n = take(d, kind))) {
                lead(n, sm);
                if (kind == K_PLAN)
                    n->has_cfg = 1;
            }
        }
    }
}

EXPORT int cudnnBackendSetAttribute(void *d, int name, int type, int64_t count, const void *elems);
EXPORT int cudnnBackendSetAttribute(void *d, int name, int type, int64_t count, const void *elems)
{
    set_fn *real = (set_fn *)mlprof__hook_real_cached(&g_set, "cudnnBackendSetAttribute", 1);
    int rc = real(d, name, type, count, elems);
    /* only the attributes noted take the lock: a framework sets a variant pack's at every execution */
    int op;
    if (rc == 0 && tracking() &&
        ((type == T_INT64 && (name == A_TENSOR_DIMS || (name >= A_CONV_DILATIONS && name <= A_CONV_SPATIAL_DIMS))) ||
         (type == T_DATA_TYPE && name == A_TENSOR_DATA_TYPE) ||
         (type == T_DESCRIPTOR && (op_role(name, &op) >= 0 || name == A_GRAPH_OPS || name == A_ENGINE_GRAPH ||
                                   name == A_HEUR_GRAPH || name == A_CFG_ENGINE || name == A_PLAN_CFG)))) {
        pthread_mutex_lock(&g_lock);
        noted(d, name, type, count, elems);
        pthread_mutex_unlock(&g_lock);
    }
    return rc;
}

/* What cuDNN hands out: the engine configs its heuristics chose for a graph,
 * and the engine of a config; each leads where the descriptor read does. */
EXPORT int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *count, void *elems);
EXPORT int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *count, void *elems)
{
    get_fn *real = (get_fn *)mlprof__hook_real_cached(&g_get, "cudnnBackendGetAttribute", 1);
    int rc = real(d, name, type, req, count, elems);
    if (rc != 0 || !tracking() || type != T_DESCRIPTOR || !elems || (name != A_HEUR_RESULTS && name != A_CFG_ENGINE))
        return rc;
    pthread_mutex_lock(&g_lock);
    summary *sm = sum_of(d);
    if (sm) {
        sm->refs++; /* held while notes are made (take may move the table) */
        int64_t n = count ? *count : req;
        void **ds = elems;
        for (int64_t i = 0; i < n && i < req; i++)
            lead(take(ds[i], name == A_HEUR_RESULTS ? K_CFG : K_ENGINE), sm);
        sum_release(sm);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

EXPORT int cudnnBackendFinalize(void *d);
EXPORT int cudnnBackendFinalize(void *d)
{
    desc_fn *real = (desc_fn *)mlprof__hook_real_cached(&g_finalize, "cudnnBackendFinalize", 1);
    int rc = real(d);
    if (rc == 0 && tracking()) {
        pthread_mutex_lock(&g_lock);
        note *n = find(d);
        if (n && n->kind == K_OP)
            op_made(n);
        else if (n && n->kind == K_PLAN)
            plan_made(d);
        pthread_mutex_unlock(&g_lock);
    }
    return rc;
}

EXPORT int cudnnBackendDestroyDescriptor(void *d);
EXPORT int cudnnBackendDestroyDescriptor(void *d)
{
    if (d) {
        pthread_mutex_lock(&g_lock);
        drop(d);
        plan_info *pi = plan_find(d);
        if (pi)
            __atomic_store_n(&pi->plan, TOMB, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&g_lock);
    }
    desc_fn *real = (desc_fn *)mlprof__hook_real_cached(&g_destroy, "cudnnBackendDestroyDescriptor", 1);
    return real(d);
}
