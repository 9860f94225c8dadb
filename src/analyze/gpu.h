/*
 * gpu.h - GPU activity in a trace: which events are kernels, copies and
 * memsets, the CPU operators that launched each one (through the runtime
 * call that has the same correlation id, or a flow from the launch to the
 * kernel), and the breakdown of device time (compute, communication, memory,
 * idle) that `mlprof kernels` prints.
 */
#ifndef MLPROF_ANALYZE_GPU_H
#define MLPROF_ANALYZE_GPU_H

#include "trace.h"

enum { AN_GPU_NONE = 0, AN_GPU_COMPUTE = 1, AN_GPU_COMM = 2, AN_GPU_MEMORY = 3 };

/* What the linking found: per event (index into t->ev). */
typedef struct an_gpu_links {
    int32_t *launch; /* the runtime call that launched a GPU event, or -1 */
    int32_t *bottom; /* the innermost CPU operator around that call, or -1 */
    int32_t *top;    /* the outermost one, or -1 */
    uint8_t *kind;   /* AN_GPU_* */
    size_t gpu_events, by_correlation, by_flow, unlinked;
} an_gpu_links;

/* The GPU kind of an event from its category and name (AN_GPU_NONE for CPU events). */
int an_gpu_kind(const an_event *e);
/* Links every GPU event of t to its launch and its operators (calls
 * an_compute_self). Returns 0, or -1 when out of memory. */
int an_gpu_link(an_trace *t, an_gpu_links *links);
void an_gpu_links_free(an_gpu_links *links);
/* "top > ... > bottom": the operators around the launch of GPU event i. */
void an_gpu_op_stack(const an_trace *t, const an_gpu_links *links, size_t i, mlprof__sb *out);

/* The kernel breakdown: per device, time in compute, communication and memory
 * kernels, their overlap, busy and idle time; per stream busy and idle; the
 * GPU time of each bottom-level operator; the top kernels with their
 * operators. format: AN_TABLE or AN_JSON. Returns 0, or -1 (out of memory). */
int an_kernels(an_trace *t, int format, int top, mlprof__sb *out);

#endif /* MLPROF_ANALYZE_GPU_H */
