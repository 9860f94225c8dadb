/*
 * cost.c - FLOPs and bytes of a trace's operators from their shapes (cost.h),
 * through mlprof_opcost_op.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cost.h"
#include "mlprof/opcost.h"

void an_cost_keys_init(const an_trace *t, an_cost_keys *k)
{
    static const char *const in[] = {"Input Dims", "input_shapes", "Input dims", "input_shape", "in_shapes", NULL};
    static const char *const types[] = {"Input type", "dtypes", "input_types", "input_type", "dtype", NULL};
    static const char *const out[] = {"Output Dims", "output_shapes", "Output dims", "output_shape", "out_shapes",
                                      NULL};
    static const char *const scalars[] = {"Concrete Inputs", NULL};
    an_keyset_init(t, in, &k->in);
    an_keyset_init(t, types, &k->types);
    an_keyset_init(t, out, &k->out);
    an_keyset_init(t, scalars, &k->scalars);
    memset(k->memo, 0, sizeof k->memo);
}

static const char *text_of(const an_trace *t, const an_event *e, const an_keyset *ks)
{
    const an_arg *a = an_event_arg_in(t, e, ks);
    return a && a->str ? a->str : NULL;
}

void an_event_cost(const an_trace *t, an_cost_keys *k, const an_event *e, double *flops, double *bytes)
{
    *flops = *bytes = NAN;
    const char *shapes = k->in.n ? text_of(t, e, &k->in) : NULL;
    if (!shapes)
        return;
    const char *types = text_of(t, e, &k->types), *out = text_of(t, e, &k->out);
    const char *scalars = text_of(t, e, &k->scalars);
    uintptr_t h = (uintptr_t)e->name * 31 ^ (uintptr_t)shapes * 17 ^ (uintptr_t)types * 7 ^ (uintptr_t)out ^
                  (uintptr_t)scalars * 3;
    an_cost_memo *m = &k->memo[(h >> 4) % AN_COST_CACHE];
    if (m->name == e->name && m->in == shapes && m->types == types && m->out == out && m->scalars == scalars) {
        *flops = m->flops;
        *bytes = m->bytes;
        return;
    }
    mlprof_opcost c;
    int got = mlprof_opcost_op(e->name, shapes, types, out, scalars, &c);
    if (got & MLPROF_OPCOST_HAS_FLOPS)
        *flops = (double)c.flops;
    if (got & MLPROF_OPCOST_HAS_BYTES)
        *bytes = (double)c.bytes;
    *m = (an_cost_memo){e->name, shapes, types, out, scalars, *flops, *bytes};
}
