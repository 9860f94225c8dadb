/*
 * dist_ranks.c - the per-rank summary of a distributed job's trace and the
 * report across ranks (mlprof ranks). A summary keeps the rank's totals
 * (compute, communication, their overlap, its span) and one small record per
 * collective call; the report matches the records of all ranks by their key
 * and sequence number, so that no rank's trace needs to stay in memory.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dist_ranks.h"
#include "gpu.h"

/* ------------------------------------------------------------- names */

void an_dist_names_init(an_dist_names *nm)
{
    memset(nm, 0, sizeof *nm);
    mlprof__map_init(&nm->ids);
}

void an_dist_names_free(an_dist_names *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        mlprof__free(nm->s[i]);
    mlprof__free(nm->s);
    mlprof__map_free(&nm->ids);
    memset(nm, 0, sizeof *nm);
}

int an_dist_name_id(an_dist_names *nm, const char *s, uint32_t *id)
{
    mlprof__map_entry *e = mlprof__map_slot(&nm->ids, s, strlen(s));
    if (!e)
        return -1;
    if (!e->value) {
        char **p = mlprof__grow(nm->s, &nm->cap, nm->n, sizeof *nm->s, 16);
        if (!p)
            return -1;
        nm->s = p;
        if (!(p[nm->n] = mlprof__strdup(s)))
            return -1;
        e->value = (void *)(uintptr_t)(++nm->n);
    }
    *id = (uint32_t)((uintptr_t)e->value - 1);
    return 0;
}

/* ------------------------------------------------------------- one rank */

typedef struct ivl {
    int64_t a, b;
} ivl;

typedef struct ivls {
    ivl *v;
    size_t n, cap;
} ivls;

static int ivl_add(ivls *s, int64_t a, int64_t b)
{
    ivl *v = mlprof__grow(s->v, &s->cap, s->n, sizeof *s->v, 256);
    if (!v)
        return -1;
    s->v = v;
    v[s->n++] = (ivl){a, b};
    return 0;
}

static int ivl_cmp(const void *pa, const void *pb)
{
    const ivl *a = pa, *b = pb;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

/* Sorts and joins overlapping intervals in place; returns their total length. */
static int64_t ivl_union(ivls *s)
{
    mlprof__sort(s->v, s->n, sizeof *s->v, ivl_cmp);
    size_t k = 0;
    int64_t total = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && s->v[i].a <= s->v[k - 1].b) {
            if (s->v[i].b > s->v[k - 1].b)
                s->v[k - 1].b = s->v[i].b;
        } else {
            s->v[k++] = s->v[i];
        }
    }
    s->n = k;
    for (size_t i = 0; i < k; i++)
        total += s->v[i].b - s->v[i].a;
    return total;
}

/* The length of the intersection of two joined, sorted sets. */
static int64_t ivl_common(const ivls *x, const ivls *y)
{
    int64_t total = 0;
    size_t i = 0, j = 0;
    while (i < x->n && j < y->n) {
        int64_t a = x->v[i].a > y->v[j].a ? x->v[i].a : y->v[j].a;
        int64_t b = x->v[i].b < y->v[j].b ? x->v[i].b : y->v[j].b;
        if (b > a)
            total += b - a;
        if (x->v[i].b < y->v[j].b)
            i++;
        else
            j++;
    }
    return total;
}

/* out gets the parts of x (joined) outside y (joined). */
static int ivl_subtract(const ivls *x, const ivls *y, ivls *out)
{
    size_t j = 0;
    for (size_t i = 0; i < x->n; i++) {
        int64_t cur = x->v[i].a, end = x->v[i].b;
        while (j < y->n && y->v[j].b <= cur)
            j++;
        for (size_t k = j; k < y->n && y->v[k].a < end && cur < end; k++) {
            if (y->v[k].a > cur && ivl_add(out, cur, y->v[k].a) != 0)
                return -1;
            if (y->v[k].b > cur)
                cur = y->v[k].b;
        }
        if (cur < end && ivl_add(out, cur, end) != 0)
            return -1;
    }
    return 0;
}

/* A span of a CPU rank, for the per-thread subtraction. */
typedef struct cpu_span {
    int64_t pid, tid, a, b;
    int comm;
} cpu_span;

static int by_thread(const void *pa, const void *pb)
{
    const cpu_span *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* A CPU rank's computation: on each thread, its spans less its communication
 * calls (a step or a function around an MPI call does not compute while the
 * call runs: the call is its child), joined over the threads. */
static int cpu_compute(cpu_span *sp, size_t n, ivls *cs)
{
    mlprof__sort(sp, n, sizeof *sp, by_thread);
    ivls tc = {0}, tm = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        size_t j = i;
        tc.n = tm.n = 0;
        for (; rc == 0 && j < n && sp[j].pid == sp[i].pid && sp[j].tid == sp[i].tid; j++)
            rc = ivl_add(sp[j].comm ? &tm : &tc, sp[j].a, sp[j].b);
        if (rc == 0) {
            ivl_union(&tc);
            ivl_union(&tm);
            rc = ivl_subtract(&tc, &tm, cs);
        }
        i = j;
    }
    mlprof__free(tc.v);
    mlprof__free(tm.v);
    return rc;
}

static int prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* mlprof's own communication spans: the mpi hook's, the nccl hook's (its
 * interposer and NCCL profiler plugin), which carry the same comm and seq
 * (NCCL numbers each function's collectives apart, so its key has the span's
 * name too), and torch.distributed's from mlprof.dist, with group and
 * group_size for comm and comm_size (comm_arg). */
static int is_mpi(const an_event *e)
{
    return strcasecmp(e->cat, "mpi") == 0 || strcasecmp(e->cat, "nccl") == 0 ||
           strcmp(e->cat, "torch.distributed") == 0;
}

static const an_arg *comm_arg(const an_trace *t, const an_event *e)
{
    const an_arg *a = an_event_arg(t, e, "comm");
    return a ? a : an_event_arg(t, e, "group");
}

/* A CPU operator of torch.distributed: the op (nccl:all_reduce, gloo:...),
 * the dispatcher's c10d:: op, or the profiler's record_param_comms. */
static int is_comm_op(const an_event *e)
{
    return prefix(e->name, "nccl:") || prefix(e->name, "gloo:") || prefix(e->name, "c10d::") ||
           strcmp(e->name, "record_param_comms") == 0;
}

/* The operator that is matched across ranks: one per collective call (not
 * the record_param_comms or c10d:: op around it). */
static int is_matched_op(const an_event *e)
{
    return prefix(e->name, "nccl:") || prefix(e->name, "gloo:");
}

/* pids is sorted: a binary search, since every event of a merged trace asks. */
static int in_pids(const an_event *e, const int64_t *pids, size_t npids)
{
    if (!pids)
        return 1;
    size_t lo = 0, hi = npids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pids[mid] < e->pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < npids && pids[lo] == e->pid;
}

/* MPI's collectives carry comm and seq; its point-to-point calls a peer too. */
static int is_mpi_collective(const an_trace *t, const an_event *e)
{
    return is_mpi(e) && an_event_arg(t, e, "seq") && comm_arg(t, e) && !an_event_arg(t, e, "peer");
}

/* "mpi comm ID": the communicator's id as its text, whatever its JSON type. */
static void comm_key(const an_arg *a, const char *what, char *buf, size_t len)
{
    if (a->type != AN_NUM)
        snprintf(buf, len, "%s comm %s", what, a->str);
    else if (a->is_int)
        snprintf(buf, len, "%s comm %lld", what, (long long)a->inum);
    else
        snprintf(buf, len, "%s comm %.17g", what, a->num);
}

static int add_coll(an_dist_rank *r, const an_dist_coll *c)
{
    an_dist_coll *p = mlprof__grow(r->c, &r->cap, r->nc, sizeof *r->c, 64);
    if (!p)
        return -1;
    r->c = p;
    p[r->nc++] = *c;
    return 0;
}

static int by_key_start(const void *pa, const void *pb)
{
    const an_dist_coll *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq; /* seq holds the event's index until numbered */
}

/* Records without a sequence number of their own are numbered 1, 2... per
 * name in the order they start: NCCL and gloo run a group's collectives in
 * the same order on every rank. */
static void number_by_order(an_dist_rank *r)
{
    mlprof__sort(r->c, r->nc, sizeof *r->c, by_key_start);
    int64_t k = 0;
    for (size_t i = 0; i < r->nc; i++) {
        k = i && r->c[i].key == r->c[i - 1].key ? k + 1 : 1;
        r->c[i].seq = k;
    }
}

static int collect_colls(const an_trace *t, const int64_t *pids, size_t npids, an_dist_names *names,
                         an_dist_rank *r)
{
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'X' || !in_pids(e, pids, npids))
            continue;
        an_dist_coll c = {0, 0, (int64_t)i, e->ts, e->ts + (e->dur > 0 ? e->dur : 0), 0, 0};
        static const char *const k_bytes[] = {"bytes", NULL};
        if (r->source == AN_DIST_SRC_MPI) {
            if (!is_mpi_collective(t, e))
                continue;
            char key[300];
            int nccl = strcasecmp(e->cat, "nccl") == 0;
            comm_key(comm_arg(t, e), nccl ? "nccl" : strcasecmp(e->cat, "mpi") == 0 ? "mpi" : "torch", key,
                     sizeof key);
            if (nccl) { /* "nccl comm ID NAME" */
                size_t n = strlen(key);
                snprintf(key + n, sizeof key - n, " %s", e->name);
            }
            const an_arg *seq = an_event_arg(t, e, "seq");
            c.seq = an_to_i64(an_arg_num(seq, 0));
            c.comm_size = an_to_i64(an_event_num(t, e, (const char *const[]){"comm_size", "group_size", NULL}, 0));
            if (an_dist_name_id(names, key, &c.key) != 0)
                return -1;
        } else if (r->source == AN_DIST_SRC_KERNEL ? an_gpu_kind(e) != AN_GPU_COMM : !is_matched_op(e)) {
            continue;
        }
        c.bytes = an_event_num(t, e, k_bytes, 0);
        if (an_dist_name_id(names, e->name, &c.name) != 0)
            return -1;
        if (r->source != AN_DIST_SRC_MPI)
            c.key = c.name;
        if (add_coll(r, &c) != 0)
            return -1;
    }
    if (r->source != AN_DIST_SRC_MPI)
        number_by_order(r);
    else
        mlprof__sort(r->c, r->nc, sizeof *r->c, by_key_start);
    return 0;
}

int an_dist_collect(const an_trace *t, const int64_t *pids, size_t npids, an_dist_names *names, int source,
                    an_dist_rank *r)
{
    memset(r, 0, sizeof *r);
    int have_mpi = 0, have_kernel = 0, have_op = 0;
    r->t0 = INT64_MAX;
    r->t1 = INT64_MIN;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'X' || !in_pids(e, pids, npids) || strcmp(e->cat, "Trace") == 0)
            continue; /* the envelope (PyTorch Profiler (0)) spans the whole trace: not work */
        int kind = an_gpu_kind(e);
        r->on_gpu |= kind != AN_GPU_NONE;
        have_mpi |= is_mpi_collective(t, e);
        have_kernel |= kind == AN_GPU_COMM;
        have_op |= is_matched_op(e);
        if (e->ts < r->t0)
            r->t0 = e->ts;
        if (e->ts + e->dur > r->t1)
            r->t1 = e->ts + e->dur;
    }
    if (r->t0 > r->t1)
        r->t0 = r->t1 = 0;
    if (source != AN_DIST_SRC_NONE)
        r->source = source;
    else if (have_mpi)
        r->source = AN_DIST_SRC_MPI;
    else if (have_kernel)
        r->source = AN_DIST_SRC_KERNEL;
    else if (have_op)
        r->source = AN_DIST_SRC_CPU_OP;
    ivls cs = {0}, ms = {0};
    cpu_span *sp = NULL;
    size_t nsp = 0, spcap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'X' || e->dur <= 0 || !in_pids(e, pids, npids) || strcmp(e->cat, "Trace") == 0)
            continue;
        int kind = an_gpu_kind(e), comm;
        if (r->on_gpu && kind == AN_GPU_NONE)
            continue; /* a GPU rank is measured on its devices */
        comm = r->on_gpu ? kind == AN_GPU_COMM : is_mpi(e) || is_comm_op(e);
        if (comm)
            r->comm_events++;
        else
            r->compute_events++;
        if (comm || r->on_gpu)
            rc = ivl_add(comm ? &ms : &cs, e->ts, e->ts + e->dur);
        if (rc == 0 && !r->on_gpu) {
            cpu_span *p = mlprof__grow(sp, &spcap, nsp, sizeof *sp, 256);
            if (!p) {
                rc = -1;
                break;
            }
            sp = p;
            sp[nsp++] = (cpu_span){e->pid, e->tid, e->ts, e->ts + e->dur, comm};
        }
    }
    if (rc == 0 && !r->on_gpu && r->compute_events)
        rc = cpu_compute(sp, nsp, &cs);
    mlprof__free(sp);
    if (rc == 0) {
        r->comm = ivl_union(&ms);
        if (!r->on_gpu && !r->compute_events) {
            /* only communication was recorded (the MPI hook alone): what it leaves is the program's */
            r->compute_outside = 1; /* the report takes what communication leaves of the job's window */
        } else {
            r->compute = ivl_union(&cs);
            r->overlap = ivl_common(&cs, &ms);
        }
        rc = collect_colls(t, pids, npids, names, r);
    }
    mlprof__free(cs.v);
    mlprof__free(ms.v);
    return rc;
}

void an_dist_rank_free(an_dist_rank *r)
{
    mlprof__free(r->c);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------- across ranks */

/* One collective call of one rank, as the matching sees it. */
typedef struct ref {
    uint32_t key;
    uint32_t rank; /* index into the inputs */
    int64_t seq;
    const an_dist_coll *c;
} ref;

static int by_instance(const void *pa, const void *pb)
{
    const ref *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->c->ts < b->c->ts ? -1 : a->c->ts > b->c->ts;
}

/* A collective matched across ranks: refs[first .. first + m). */
typedef struct instance {
    size_t first, m;
    long long last_rank; /* -1: every rank arrived at once */
    int64_t skew, earliest;
    int complete;
} instance;

typedef struct rank_sum {
    size_t instances, last;
    int64_t late_total, late_max, wait_total, last_by; /* last_by: the skews of the instances it was last at */
} rank_sum;

typedef struct spread {
    int64_t max, min;
    double mean;
    long long max_rank, min_rank;
} spread;

typedef struct report {
    const an_dist_input *in;
    size_t n;
    ref *refs;
    size_t nrefs;
    instance *inst;
    size_t ninst, icap;
    rank_sum *rs;
    size_t alone, duplicates, incomplete, name_mismatch;
    long long straggler; /* the rank last most often, or -1 */
    spread compute, comm;
    int sources; /* bit per AN_DIST_SRC_* seen */
    /* per operation (the instance's name on its first rank): its instances and per rank its sums */
    uint32_t *op_of; /* name -> index + 1 into ops */
    struct op_sum *ops;
    size_t nops;
    int64_t win0, win1; /* the job's window: every rank's events, on the common clock */
} report;

typedef struct op_sum {
    uint32_t name;
    size_t instances;
    int64_t skew_total;
    rank_sum *rs; /* per input */
} op_sum;

static void add_to(rank_sum *s, int64_t late, int64_t wait, int last, int64_t skew)
{
    s->instances++;
    s->late_total += late;
    s->late_max = late > s->late_max ? late : s->late_max;
    s->wait_total += wait;
    if (last) {
        s->last++;
        s->last_by += skew;
    }
}

static int64_t arrival(const report *r, const ref *f)
{
    return f->c->ts + r->in[f->rank].offset;
}

/* The figures of one instance; adds to the ranks' sums. */
static void measure(report *r, instance *x)
{
    int64_t first = INT64_MAX, last = INT64_MIN;
    size_t last_i = 0;
    int64_t expected = 0;
    for (size_t k = 0; k < x->m; k++) {
        const ref *f = &r->refs[x->first + k];
        int64_t a = arrival(r, f);
        first = a < first ? a : first;
        if (a > last) {
            last = a;
            last_i = k;
        }
        if (f->c->comm_size > expected)
            expected = f->c->comm_size;
        if (f->c->name != r->refs[x->first].c->name)
            r->name_mismatch++;
    }
    x->earliest = first;
    x->skew = last - first;
    x->last_rank = last > first ? r->in[r->refs[x->first + last_i].rank].rank : -1;
    x->complete = expected ? (int64_t)x->m >= expected : x->m == r->n;
    r->incomplete += !x->complete;
    op_sum *op = &r->ops[r->op_of[r->refs[x->first].c->name] - 1];
    op->instances++;
    op->skew_total += x->skew;
    for (size_t k = 0; k < x->m; k++) {
        const ref *f = &r->refs[x->first + k];
        int64_t a = arrival(r, f), late = a - first, wait = last - a, dur = f->c->end - f->c->ts;
        int is_last = last > first && k == last_i;
        add_to(&r->rs[f->rank], late, wait < dur ? wait : dur, is_last, x->skew);
        add_to(&op->rs[f->rank], late, wait < dur ? wait : dur, is_last, x->skew);
    }
}

/* An entry per operation that some instance has as its name, in the order of first sight. */
static int make_ops(report *r, size_t nnames)
{
    r->op_of = mlprof__calloc(nnames ? nnames : 1, sizeof *r->op_of);
    r->ops = mlprof__calloc(nnames ? nnames : 1, sizeof *r->ops);
    if (!r->op_of || !r->ops)
        return -1;
    for (size_t i = 0; i < r->nrefs; i++) {
        uint32_t name = r->refs[i].c->name;
        if (r->op_of[name])
            continue;
        op_sum *op = &r->ops[r->nops];
        op->name = name;
        if (!(op->rs = mlprof__calloc(r->n ? r->n : 1, sizeof *op->rs)))
            return -1;
        r->op_of[name] = (uint32_t)++r->nops;
    }
    return 0;
}

static int match(report *r, size_t nnames)
{
    size_t total = 0;
    for (size_t i = 0; i < r->n; i++)
        total += r->in[i].d->nc;
    r->refs = mlprof__calloc(total ? total : 1, sizeof *r->refs);
    r->rs = mlprof__calloc(r->n ? r->n : 1, sizeof *r->rs);
    if (!r->refs || !r->rs)
        return -1;
    for (size_t i = 0; i < r->n; i++) {
        const an_dist_rank *d = r->in[i].d;
        r->sources |= 1 << d->source;
        for (size_t k = 0; k < d->nc; k++)
            r->refs[r->nrefs++] = (ref){d->c[k].key, (uint32_t)i, d->c[k].seq, &d->c[k]};
    }
    mlprof__sort(r->refs, r->nrefs, sizeof *r->refs, by_instance);
    /* a rank's second call under the same (key, seq) is dropped: it cannot be told apart */
    size_t k = 0;
    for (size_t i = 0; i < r->nrefs; i++) {
        if (k && r->refs[i].key == r->refs[k - 1].key && r->refs[i].seq == r->refs[k - 1].seq &&
            r->refs[i].rank == r->refs[k - 1].rank) {
            r->duplicates++;
            continue;
        }
        r->refs[k++] = r->refs[i];
    }
    r->nrefs = k;
    if (make_ops(r, nnames) != 0)
        return -1;
    for (size_t i = 0; i < r->nrefs;) {
        size_t j = i + 1;
        while (j < r->nrefs && r->refs[j].key == r->refs[i].key && r->refs[j].seq == r->refs[i].seq)
            j++;
        if (j - i < 2) {
            r->alone++;
        } else {
            instance *x = mlprof__grow(r->inst, &r->icap, r->ninst, sizeof *r->inst, 256);
            if (!x)
                return -1;
            r->inst = x;
            x = &r->inst[r->ninst++];
            memset(x, 0, sizeof *x);
            x->first = i;
            x->m = j - i;
            measure(r, x);
        }
        i = j;
    }
    return 0;
}

static int by_skew(const void *pa, const void *pb)
{
    const instance *a = pa, *b = pb;
    if (a->skew != b->skew)
        return a->skew > b->skew ? -1 : 1;
    if (a->earliest != b->earliest)
        return a->earliest < b->earliest ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* The job's window: from the first event of any rank to the last one's end. */
static void find_window(report *r)
{
    r->win0 = INT64_MAX;
    r->win1 = INT64_MIN;
    for (size_t i = 0; i < r->n; i++) {
        const an_dist_rank *d = r->in[i].d;
        if (!d->comm_events && !d->compute_events && d->t1 <= d->t0)
            continue; /* no event: nothing to place */
        if (d->t0 + r->in[i].offset < r->win0)
            r->win0 = d->t0 + r->in[i].offset;
        if (d->t1 + r->in[i].offset > r->win1)
            r->win1 = d->t1 + r->in[i].offset;
    }
    if (r->win0 > r->win1)
        r->win0 = r->win1 = 0;
}

static int64_t wall(const report *r)
{
    return r->win1 - r->win0;
}

static int64_t compute_of(const report *r, const an_dist_rank *d)
{
    return d->compute_outside ? wall(r) - d->comm : d->compute;
}

static int64_t idle(const report *r, const an_dist_rank *d)
{
    return wall(r) - (compute_of(r, d) + d->comm - d->overlap);
}

static spread spread_of(const report *r, int which)
{
    spread s = {INT64_MIN, INT64_MAX, 0, -1, -1};
    for (size_t i = 0; i < r->n; i++) {
        int64_t v = which ? r->in[i].d->comm : compute_of(r, r->in[i].d);
        if (v > s.max) {
            s.max = v;
            s.max_rank = r->in[i].rank;
        }
        if (v < s.min) {
            s.min = v;
            s.min_rank = r->in[i].rank;
        }
        s.mean += (double)v;
    }
    if (r->n)
        s.mean /= (double)r->n;
    else
        s.max = s.min = 0;
    return s;
}

static void finish(report *r)
{
    find_window(r);
    mlprof__sort(r->inst, r->ninst, sizeof *r->inst, by_skew);
    r->straggler = -1;
    size_t best = 0;
    int64_t best_by = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rank_sum *s = &r->rs[i];
        if (s->last > best || (s->last == best && s->last && s->last_by > best_by)) {
            best = s->last;
            best_by = s->last_by;
            r->straggler = r->in[i].rank;
        }
    }
    r->compute = spread_of(r, 0);
    r->comm = spread_of(r, 1);
}

static void report_free(report *r)
{
    for (size_t i = 0; r->ops && i < r->nops; i++)
        mlprof__free(r->ops[i].rs);
    mlprof__free(r->ops);
    mlprof__free(r->op_of);
    mlprof__free(r->refs);
    mlprof__free(r->inst);
    mlprof__free(r->rs);
}

/* ------------------------------------------------------------- output */

static const char *const k_sources[] = {"none", "mpi", "communication kernels", "nccl/gloo operators"};

static int64_t mean_of(int64_t total, size_t n)
{
    return n ? (int64_t)((total + (int64_t)n / 2) / (int64_t)n) : 0;
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

static double ratio(const spread *s)
{
    return s->mean > 0 ? (double)s->max / s->mean : 0;
}

static void put_dur(mlprof__sb *out, int64_t ns, int w)
{
    mlprof__sb d;
    mlprof__sb_init(&d);
    if (ns < 0) {
        mlprof__sb_putc(&d, '-');
        ns = -ns;
    }
    an_put_duration(&d, ns);
    for (int i = (int)d.len; i < w; i++)
        mlprof__sb_putc(out, ' ');
    if (w > 0 && (int)d.len >= w) /* wider than its column: still apart from the one before */
        mlprof__sb_putc(out, ' ');
    mlprof__sb_put(out, d.data ? d.data : "", d.len);
    out->failed |= d.failed;
    mlprof__sb_free(&d);
}

static const char *device_of(const an_dist_rank *d)
{
    return d->on_gpu ? "gpu" : "cpu";
}

/* The largest world size the ranks say, or -1. */
static long long world_of(const report *r)
{
    long long w = -1;
    for (size_t i = 0; i < r->n; i++)
        w = r->in[i].world_size > w ? r->in[i].world_size : w;
    return w;
}

/* The inputs come in rank order: a binary search. */
static int is_given(const report *r, long long rank)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->in[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && r->in[lo].rank == rank;
}

/* The ranks below the world size that no input is, comma-separated: each
 * one (JSON), or runs as "2-127" (text); how many in *count. */
static void put_missing(mlprof__sb *out, const report *r, int runs, size_t *count)
{
    long long w = world_of(r);
    int first = 1;
    *count = 0;
    for (long long k = 0; k < w; k++) {
        if (is_given(r, k))
            continue;
        long long end = k;
        while (runs && end + 1 < w && !is_given(r, end + 1))
            end++;
        mlprof__sb_printf(out, "%s%lld", first ? "" : ",", k);
        if (end > k)
            mlprof__sb_printf(out, "-%lld", end);
        first = 0;
        *count += (size_t)(end - k + 1);
        k = end;
    }
}

static void put_rank_json(mlprof__sb *out, const report *r, size_t i)
{
    const an_dist_input *in = &r->in[i];
    const an_dist_rank *d = in->d;
    const rank_sum *s = &r->rs[i];
    mlprof__sb_printf(out, "%s\n{\"rank\":%lld,\"rank_from\":\"%s\",\"path\":", i ? "," : "", in->rank,
                      in->rank_from);
    mlprof__sb_json_str(out, in->path, strlen(in->path));
    mlprof__sb_printf(out, ",\"measured_on\":\"%s\",\"compute_from\":\"%s\",\"collectives_from\":\"%s\","
                           "\"first_ns\":%lld,\"last_ns\":%lld,\"wall_ns\":%lld,\"compute_ns\":%lld,"
                           "\"communication_ns\":%lld,"
                           "\"overlap_ns\":%lld,\"overlap_pct\":",
                      device_of(d), d->compute_outside ? "outside communication" : "spans", k_sources[d->source],
                      (long long)(d->t0 + in->offset), (long long)(d->t1 + in->offset), (long long)wall(r),
                      (long long)compute_of(r, d),
                      (long long)d->comm, (long long)d->overlap);
    if (d->comm)
        mlprof__sb_double(out, pct(d->overlap, d->comm));
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_printf(out, ",\"exposed_communication_ns\":%lld,\"idle_ns\":%lld,\"collectives\":%zu,"
                           "\"matched\":%zu,\"last\":%zu,\"last_by_total_ns\":%lld,\"late_total_ns\":%lld,"
                           "\"late_mean_ns\":%lld,\"late_max_ns\":%lld,\"wait_ns\":%lld}",
                      (long long)(d->comm - d->overlap), (long long)idle(r, d), d->nc, s->instances, s->last,
                      (long long)s->last_by, (long long)s->late_total, (long long)mean_of(s->late_total, s->instances),
                      (long long)s->late_max, (long long)s->wait_total);
}

static void put_spread_json(mlprof__sb *out, const char *what, const spread *s)
{
    mlprof__sb_printf(out, "\"%s\":{\"max_ns\":%lld,\"max_rank\":%lld,\"min_ns\":%lld,\"min_rank\":%lld,"
                           "\"mean_ns\":",
                      what, (long long)s->max, s->max_rank, (long long)s->min, s->min_rank);
    mlprof__sb_double(out, s->mean);
    mlprof__sb_puts(out, ",\"max_over_mean\":");
    mlprof__sb_double(out, ratio(s));
    mlprof__sb_printf(out, ",\"spread_ns\":%lld,\"imbalance_pct\":", (long long)(s->max - s->min));
    mlprof__sb_double(out, s->mean > 0 ? (ratio(s) - 1) * 100 : 0);
    mlprof__sb_putc(out, '}');
}

static void put_instance_json(mlprof__sb *out, const report *r, const an_dist_names *nm, const instance *x,
                              int first)
{
    const an_dist_coll *c0 = r->refs[x->first].c;
    mlprof__sb_puts(out, first ? "\n{\"key\":" : ",\n{\"key\":");
    mlprof__sb_json_str(out, nm->s[c0->key], strlen(nm->s[c0->key]));
    mlprof__sb_puts(out, ",\"name\":");
    mlprof__sb_json_str(out, nm->s[c0->name], strlen(nm->s[c0->name]));
    mlprof__sb_printf(out, ",\"seq\":%lld,\"ranks\":%zu,\"complete\":%s,\"last_rank\":", (long long)r->refs[x->first].seq,
                      x->m, x->complete ? "true" : "false");
    if (x->last_rank >= 0)
        mlprof__sb_printf(out, "%lld", x->last_rank);
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_printf(out, ",\"skew_ns\":%lld,\"earliest_arrival_ns\":%lld,\"arrivals\":[", (long long)x->skew,
                      (long long)x->earliest);
    for (size_t k = 0; k < x->m; k++) {
        const ref *f = &r->refs[x->first + k];
        int64_t a = arrival(r, f), wait = x->earliest + x->skew - a, dur = f->c->end - f->c->ts;
        mlprof__sb_printf(out, "%s{\"rank\":%lld,\"late_ns\":%lld,\"wait_ns\":%lld,\"duration_ns\":%lld", k ? "," : "",
                          r->in[f->rank].rank, (long long)(a - x->earliest), (long long)(wait < dur ? wait : dur),
                          (long long)dur);
        if (f->c->bytes > 0) {
            mlprof__sb_puts(out, ",\"bytes\":");
            mlprof__sb_double(out, f->c->bytes);
        }
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_puts(out, "]}");
}

static size_t shown(const report *r, int top)
{
    return top > 0 && (size_t)top < r->ninst ? (size_t)top : r->ninst;
}

static void put_json(mlprof__sb *out, const report *r, const an_dist_names *nm, const char *what,
                     const char *clock, const an_dist_said *said, int top)
{
    mlprof__sb_puts(out, "{\"input\":");
    mlprof__sb_json_str(out, what, strlen(what));
    mlprof__sb_puts(out, ",\"clock\":");
    mlprof__sb_json_str(out, clock, strlen(clock));
    if (said && said->json)
        mlprof__sb_puts(out, said->json);
    size_t missing;
    mlprof__sb_printf(out, ",\"window\":{\"start_ns\":%lld,\"end_ns\":%lld,\"wall_ns\":%lld}", (long long)r->win0,
                      (long long)r->win1, (long long)wall(r));
    mlprof__sb_printf(out, ",\"world_size\":%lld,\"missing_ranks\":[", world_of(r));
    put_missing(out, r, 0, &missing);
    mlprof__sb_puts(out, "],\"ranks\":[");
    for (size_t i = 0; i < r->n; i++)
        put_rank_json(out, r, i);
    mlprof__sb_puts(out, "\n],\n\"imbalance\":{");
    put_spread_json(out, "compute", &r->compute);
    mlprof__sb_putc(out, ',');
    put_spread_json(out, "communication", &r->comm);
    mlprof__sb_puts(out, "},\n\"straggler\":");
    if (r->straggler >= 0) {
        size_t i = 0;
        while (r->in[i].rank != r->straggler)
            i++;
        mlprof__sb_printf(out, "{\"rank\":%lld,\"last\":%zu,\"of\":%zu,\"last_by_total_ns\":%lld,"
                               "\"last_by_mean_ns\":%lld}",
                          r->straggler, r->rs[i].last, r->ninst, (long long)r->rs[i].last_by,
                          (long long)mean_of(r->rs[i].last_by, r->rs[i].last));
    } else {
        mlprof__sb_puts(out, "null");
    }
    mlprof__sb_printf(out, ",\n\"collectives\":{\"matched\":%zu,\"incomplete\":%zu,\"on_one_rank_only\":%zu,"
                           "\"duplicates\":%zu,\"name_mismatches\":%zu,\"by_skew\":[",
                      r->ninst, r->incomplete, r->alone, r->duplicates, r->name_mismatch);
    size_t m = shown(r, top);
    for (size_t i = 0; i < m; i++)
        put_instance_json(out, r, nm, &r->inst[i], i == 0);
    mlprof__sb_puts(out, "\n]},\n\"by_operation\":[");
    int first = 1;
    for (size_t i = 0; i < r->nops; i++) {
        const op_sum *op = &r->ops[i];
        if (!op->instances)
            continue;
        mlprof__sb_puts(out, first ? "\n{\"name\":" : ",\n{\"name\":");
        first = 0;
        mlprof__sb_json_str(out, nm->s[op->name], strlen(nm->s[op->name]));
        mlprof__sb_printf(out, ",\"instances\":%zu,\"skew_total_ns\":%lld,\"skew_mean_ns\":%lld,\"ranks\":[",
                          op->instances, (long long)op->skew_total, (long long)mean_of(op->skew_total, op->instances));
        for (size_t k = 0, f = 1; k < r->n; k++) {
            const rank_sum *q = &op->rs[k];
            if (!q->instances)
                continue;
            mlprof__sb_printf(out, "%s{\"rank\":%lld,\"instances\":%zu,\"last\":%zu,\"late_total_ns\":%lld,"
                                   "\"late_max_ns\":%lld,\"wait_ns\":%lld}",
                              f ? "" : ",", r->in[k].rank, q->instances, q->last, (long long)q->late_total,
                              (long long)q->late_max, (long long)q->wait_total);
            f = 0;
        }
        mlprof__sb_puts(out, "]}");
    }
    mlprof__sb_puts(out, "\n]}\n");
}

static void put_csv(mlprof__sb *out, const report *r)
{
    mlprof__sb_puts(out, "rank,path,measured_on,wall_ns,compute_ns,communication_ns,overlap_ns,overlap_pct,"
                         "exposed_communication_ns,idle_ns,collectives,matched,last,late_total_ns,late_mean_ns,"
                         "late_max_ns,wait_ns\n");
    for (size_t i = 0; i < r->n; i++) {
        const an_dist_rank *d = r->in[i].d;
        const rank_sum *s = &r->rs[i];
        mlprof__sb_printf(out, "%lld,", r->in[i].rank);
        mlprof__sb_csv(out, r->in[i].path);
        mlprof__sb_printf(out, ",%s,%lld,%lld,%lld,%lld,", device_of(d), (long long)wall(r), (long long)compute_of(r, d),
                          (long long)d->comm, (long long)d->overlap);
        if (d->comm)
            mlprof__sb_printf(out, "%.2f", pct(d->overlap, d->comm));
        mlprof__sb_printf(out, ",%lld,%lld,%zu,%zu,%zu,%lld,%lld,%lld,%lld\n", (long long)(d->comm - d->overlap),
                          (long long)idle(r, d), d->nc, s->instances, s->last, (long long)s->late_total,
                          (long long)mean_of(s->late_total, s->instances), (long long)s->late_max,
                          (long long)s->wait_total);
    }
}

static void put_csv_collectives(mlprof__sb *out, const report *r, const an_dist_names *nm)
{
    mlprof__sb_puts(out, "key,name,seq,rank,arrival_ns,late_ns,wait_ns,duration_ns,bytes,last_rank,skew_ns,"
                         "complete\n");
    for (size_t i = 0; i < r->ninst; i++) {
        const instance *x = &r->inst[i];
        for (size_t k = 0; k < x->m; k++) {
            const ref *f = &r->refs[x->first + k];
            int64_t a = arrival(r, f), wait = x->earliest + x->skew - a, dur = f->c->end - f->c->ts;
            mlprof__sb_csv(out, nm->s[f->c->key]);
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, nm->s[f->c->name]);
            mlprof__sb_printf(out, ",%lld,%lld,%lld,%lld,%lld,%lld,", (long long)f->seq, r->in[f->rank].rank,
                              (long long)a, (long long)(a - x->earliest), (long long)(wait < dur ? wait : dur),
                              (long long)dur);
            if (f->c->bytes > 0)
                mlprof__sb_double(out, f->c->bytes);
            mlprof__sb_putc(out, ',');
            if (x->last_rank >= 0)
                mlprof__sb_printf(out, "%lld", x->last_rank);
            mlprof__sb_printf(out, ",%lld,%s\n", (long long)x->skew, x->complete ? "true" : "false");
        }
    }
}

static void put_spread_table(mlprof__sb *out, const char *what, const spread *s)
{
    mlprof__sb_printf(out, "  %-13s max ", what);
    put_dur(out, s->max, 0);
    mlprof__sb_printf(out, " (rank %lld), mean ", s->max_rank);
    put_dur(out, (int64_t)(s->mean + 0.5), 0);
    mlprof__sb_puts(out, ", min ");
    put_dur(out, s->min, 0);
    mlprof__sb_printf(out, " (rank %lld): max/mean %.3f, spread ", s->min_rank, ratio(s));
    put_dur(out, s->max - s->min, 0);
    mlprof__sb_printf(out, ", imbalance %.1f%%\n", s->mean > 0 ? (ratio(s) - 1) * 100 : 0.0);
}

/* Per operation: its instances, their mean skew, the rank last most often
 * and the rank that waited longest in it. */
static void put_ops_table(mlprof__sb *out, const report *r, const an_dist_names *nm)
{
    int header = 0;
    for (size_t i = 0; i < r->nops; i++) {
        const op_sum *op = &r->ops[i];
        if (!op->instances)
            continue;
        if (!header) {
            mlprof__sb_printf(out, "\nper operation (last most often: the rank and how often; waited longest: the rank "
                                   "and its wait):\n%9s %12s %16s %24s  %s\n",
                              "instances", "mean skew", "last most often", "waited longest", "name");
            header = 1;
        }
        size_t most = 0, longest = 0;
        for (size_t k = 1; k < r->n; k++) {
            if (op->rs[k].last > op->rs[most].last)
                most = k;
            if (op->rs[k].wait_total > op->rs[longest].wait_total)
                longest = k;
        }
        mlprof__sb_printf(out, "%9zu", op->instances);
        put_dur(out, mean_of(op->skew_total, op->instances), 13);
        mlprof__sb f;
        mlprof__sb_init(&f);
        if (op->rs[most].last)
            mlprof__sb_printf(&f, "rank %lld (%zu)", r->in[most].rank, op->rs[most].last);
        else
            mlprof__sb_puts(&f, "-");
        mlprof__sb_printf(out, " %16s ", f.data ? f.data : "");
        mlprof__sb_reset(&f);
        mlprof__sb_printf(&f, "rank %lld: ", r->in[longest].rank);
        put_dur(&f, op->rs[longest].wait_total, 0);
        mlprof__sb_printf(out, "%24s  %s\n", f.data ? f.data : "", nm->s[op->name]);
        out->failed |= f.failed;
        mlprof__sb_free(&f);
    }
}

static void put_table(mlprof__sb *out, const report *r, const an_dist_names *nm, const char *what,
                      const char *clock, const an_dist_said *said, int top)
{
    mlprof__sb_printf(out, "%s: %zu ranks (clock: %s)\n", what, r->n, clock);
    if (said && said->text)
        mlprof__sb_puts(out, said->text);
    size_t missing;
    mlprof__sb list;
    mlprof__sb_init(&list);
    put_missing(&list, r, 1, &missing);
    if (missing)
        mlprof__sb_printf(out, "missing: %zu of the %lld ranks of the job: %s\n", missing, world_of(r),
                          list.data ? list.data : "");
    out->failed |= list.failed;
    mlprof__sb_free(&list);
    mlprof__sb_printf(out, "%5s %4s %11s %11s %11s %11s %8s %11s %6s %5s %11s %11s %11s\n", "rank", "on", "wall",
                      "compute", "comm", "overlap", "overlap%", "idle", "colls", "last", "late total", "late mean",
                      "wait");
    for (size_t i = 0; i < r->n; i++) {
        const an_dist_rank *d = r->in[i].d;
        const rank_sum *s = &r->rs[i];
        mlprof__sb_printf(out, "%5lld %4s", r->in[i].rank, device_of(d));
        put_dur(out, wall(r), 12);
        put_dur(out, compute_of(r, d), 12);
        put_dur(out, d->comm, 12);
        put_dur(out, d->overlap, 12);
        if (d->comm)
            mlprof__sb_printf(out, " %7.1f%%", pct(d->overlap, d->comm));
        else
            mlprof__sb_printf(out, " %8s", "-");
        put_dur(out, idle(r, d), 12);
        mlprof__sb_printf(out, " %6zu %5zu", s->instances, s->last);
        put_dur(out, s->late_total, 12);
        put_dur(out, mean_of(s->late_total, s->instances), 12);
        put_dur(out, s->wait_total, 12);
        mlprof__sb_printf(out, "%s\n", d->compute_outside ? "  (compute: time outside communication)" : "");
    }
    mlprof__sb_puts(out, "\nload imbalance across ranks:\n");
    put_spread_table(out, "compute", &r->compute);
    put_spread_table(out, "communication", &r->comm);
    mlprof__sb_printf(out, "\ncollectives matched across ranks: %zu", r->ninst);
    if (r->incomplete)
        mlprof__sb_printf(out, " (%zu without every rank of their group)", r->incomplete);
    if (r->alone)
        mlprof__sb_printf(out, "; %zu seen on one rank only", r->alone);
    mlprof__sb_putc(out, '\n');
    if (r->straggler >= 0) {
        size_t i = 0;
        while (r->in[i].rank != r->straggler)
            i++;
        mlprof__sb_printf(out, "straggler of the run: rank %lld, last to arrive at %zu of %zu collectives (%.1f%%), "
                               "by ",
                          r->straggler, r->rs[i].last, r->ninst, pct((int64_t)r->rs[i].last, (int64_t)r->ninst));
        put_dur(out, mean_of(r->rs[i].last_by, r->rs[i].last), 0);
        mlprof__sb_puts(out, " on average (");
        put_dur(out, r->rs[i].last_by, 0);
        mlprof__sb_puts(out, " in all)\n");
    } else if (r->ninst) {
        mlprof__sb_puts(out, "straggler of the run: none (every rank arrived at once at every collective)\n");
    }
    size_t m = shown(r, top);
    if (m) {
        mlprof__sb_printf(out, "\ncollectives whose ranks arrived furthest apart (%zu of %zu):\n", m, r->ninst);
        mlprof__sb_printf(out, "%12s %6s %6s %8s  %s\n", "skew", "last", "ranks", "seq", "name (key)");
    }
    for (size_t i = 0; i < m; i++) {
        const instance *x = &r->inst[i];
        const an_dist_coll *c0 = r->refs[x->first].c;
        put_dur(out, x->skew, 12);
        if (x->last_rank >= 0)
            mlprof__sb_printf(out, " %6lld", x->last_rank);
        else
            mlprof__sb_printf(out, " %6s", "-");
        mlprof__sb_printf(out, " %5zu%s %8lld  %s", x->m, x->complete ? " " : "*", (long long)r->refs[x->first].seq,
                          nm->s[c0->name]);
        if (c0->key != c0->name)
            mlprof__sb_printf(out, " (%s)", nm->s[c0->key]);
        mlprof__sb_putc(out, '\n');
    }
    if (r->incomplete && m)
        mlprof__sb_puts(out, "(*: not every rank of its group recorded it)\n");
    put_ops_table(out, r, nm);
}

int an_dist_report(const an_dist_input *in, size_t n, const an_dist_names *names, const char *what,
                   const char *clock, const an_dist_said *said, const an_options *o, int csv, mlprof__sb *out,
                   mlprof__sb *notes)
{
    report r;
    memset(&r, 0, sizeof r);
    r.in = in;
    r.n = n;
    if (match(&r, names->n) != 0) {
        report_free(&r);
        return -1;
    }
    finish(&r);
    int sources = r.sources & ~(1 << AN_DIST_SRC_NONE);
    if (sources & (sources - 1))
        mlprof__sb_printf(notes, "%s: the ranks' collectives come from different sources (MPI spans, kernels, "
                                 "operators): only those of one source match each other\n",
                          what);
    for (size_t i = 0; i < n; i++) {
        if (in[i].d->compute_outside)
            mlprof__sb_printf(notes, "%s: rank %lld recorded only communication: its compute time is the time "
                                     "outside communication, and its idle time 0\n",
                              what, in[i].rank);
        if (in[i].d->source == AN_DIST_SRC_NONE && n > 1)
            mlprof__sb_printf(notes, "%s: rank %lld has no collective (no MPI collective span, NCCL kernel or "
                                     "nccl:/gloo: operator)\n",
                              what, in[i].rank);
    }
    size_t missing;
    mlprof__sb list;
    mlprof__sb_init(&list);
    put_missing(&list, &r, 1, &missing);
    if (missing)
        mlprof__sb_printf(notes, "%s: %zu of the job's %lld ranks (its world size) are not among the inputs: %s\n", what,
                          missing, world_of(&r), list.data ? list.data : "");
    notes->failed |= list.failed;
    mlprof__sb_free(&list);
    if (r.incomplete)
        mlprof__sb_printf(notes, "%s: %zu collectives were not recorded by every rank of their group (a rank "
                                 "missing, or its trace cut short): matched among those that have them\n",
                          what, r.incomplete);
    if (r.duplicates)
        mlprof__sb_printf(notes, "%s: %zu calls repeat another call's communicator and sequence number on the same "
                                 "rank: left out\n",
                          what, r.duplicates);
    if (r.name_mismatch)
        mlprof__sb_printf(notes, "%s: %zu calls differ in name from the other ranks' call of the same communicator "
                                 "and sequence number\n",
                          what, r.name_mismatch);
    if (o->format == AN_JSON) {
        put_json(out, &r, names, what, clock, said, o->top);
    } else if (o->format == AN_CSV) {
        if (csv == AN_DIST_CSV_COLLECTIVES)
            put_csv_collectives(out, &r, names);
        else
            put_csv(out, &r);
        mlprof__sb_printf(notes, "%s: CSV holds one row per %s; the imbalance and the straggler are in --format "
                                 "table and json\n",
                          what, csv == AN_DIST_CSV_COLLECTIVES ? "rank's call of each collective" : "rank");
    } else {
        put_table(out, &r, names, what, clock, said, o->top);
    }
    report_free(&r);
    return out->failed || notes->failed ? -1 : 0;
}

const char an_dist_help[] =
    "Figures per rank (its own events; intervals are joined over all its threads,\n"
    "or on a GPU rank over all its devices and streams, so that work done at the\n"
    "same time counts once):\n"
    "  wall           the job's window, the same for every rank: from the first\n"
    "                 event of any rank to the end of the last (on the common\n"
    "                 clock), so that a rank that starts late or stops early\n"
    "                 (killed) shows the rest as idle\n"
    "  communication  M: time in communication: MPI calls (spans of category mpi);\n"
    "                 on a GPU rank, NCCL's kernels (ncclKernel*, ncclDevKernel*);\n"
    "                 on a CPU rank, nccl:*, gloo:*, c10d::* and record_param_comms\n"
    "  compute        C: the rank's other work: on a GPU rank its other kernels,\n"
    "                 copies and memsets; on a CPU rank its other spans (the\n"
    "                 trace's envelope excepted), less on each thread the time of\n"
    "                 its communication calls (a step around an MPI call does not\n"
    "                 compute while the call runs). A CPU rank that recorded only\n"
    "                 communication (the mpi hook alone) counts the window's time\n"
    "                 outside it: compute = wall - communication (said on\n"
    "                 standard error)\n"
    "  overlap        time in both C and M; overlap% = overlap / communication,\n"
    "                 as HTA's comm/comp overlap (HTA measures GPU kernels only,\n"
    "                 and counts copies and memsets as neither)\n"
    "  exposed comm   communication - overlap\n"
    "  idle           wall - time in C or M; so for every rank\n"
    "                 compute + communication - overlap + idle = wall\n"
    "Collectives across ranks: a collective instance is one call matched on every\n"
    "rank that made it: MPI's by (communicator id, sequence number), PyTorch's by\n"
    "name and order (the k-th NCCL kernel of a name on each rank, else the k-th\n"
    "nccl:/gloo: operator). Its arrival on a rank is the call's start, on the\n"
    "common clock; its duration the call's (a non-blocking collective's call\n"
    "only, not the wait that completes it).\n"
    "  late           arrival - the earliest rank's arrival: how long the first\n"
    "                 rank had been waiting when this one came\n"
    "  wait           min(the last rank's arrival - arrival, the call's duration):\n"
    "                 the time this rank spent in the call before the last came\n"
    "  skew           the last arrival - the earliest arrival\n"
    "  last           the rank that arrives last (none when all come at once);\n"
    "                 per rank: at how many instances it was last\n"
    "  straggler      of the run: the rank last most often (ties: the larger sum\n"
    "                 of the skews where it was last), with that mean skew. HTA's\n"
    "                 straggler analysis differs: per iteration it takes the last\n"
    "                 long NCCL kernel of the (stream, name) whose duration varies\n"
    "                 most across ranks and flags the ranks that start it latest;\n"
    "                 here every matched instance counts\n"
    "  per operation  the same, summed over the instances of one operation\n"
    "                 (MPI_Allreduce, a kernel's name): the rank last most often\n"
    "                 and the rank that waited longest in it\n"
    "  incomplete     an instance not every rank of its group recorded (MPI:\n"
    "                 fewer ranks than its comm_size; else than the inputs): it\n"
    "                 is matched among those that did, and counted; ranks below\n"
    "                 the world size (distributedInfo) with no trace are named\n"
    "Load imbalance across ranks, of compute and of communication: max/mean (1 is\n"
    "balanced), the spread max - min, and imbalance% = (max/mean - 1) x 100.\n";
