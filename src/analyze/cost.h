/*
 * cost.h - an operator's FLOPs and bytes computed from the shapes a trace
 * gives, for the operators whose writer gave no count (PyTorch's profiler
 * records "Input Dims" and "Input type" but FLOPs only with with_flops, and
 * never bytes): mlprof/opcost.h's formulas by the operator's name, the same
 * that mlprof.torch and the interposers count with.
 */
#ifndef MLPROF_ANALYZE_COST_H
#define MLPROF_ANALYZE_COST_H

#include "trace.h"

/* The last counts computed, by their texts (interned: one pointer per
 * text): a trace repeats the same calls, and a count is parsed once. */
#define AN_COST_CACHE 128
typedef struct an_cost_memo {
    const char *name, *in, *types, *out, *scalars;
    double flops, bytes;
} an_cost_memo;

/* The argument keys read, interned once per trace, and the memo. */
typedef struct an_cost_keys {
    an_keyset in, types, out, scalars;
    an_cost_memo memo[AN_COST_CACHE];
} an_cost_keys;

void an_cost_keys_init(const an_trace *t, an_cost_keys *k);
/* The FLOPs and bytes of e from its name and its arguments' shapes, types
 * and values (PyTorch's "Input Dims", "Input type", "Concrete Inputs";
 * mlprof.torch's input_shapes and dtypes); NAN for what is not known (an
 * operator opcost does not know, no shapes, no types for the bytes). */
void an_event_cost(const an_trace *t, an_cost_keys *k, const an_event *e, double *flops, double *bytes);

#endif /* MLPROF_ANALYZE_COST_H */
