/*
 * gpu.h - GPU activity in a trace: which events are kernels, copies and
 * memsets, the CPU operators that launched each one (through the runtime
 * call that has the same correlation id, a flow from the launch to the
 * kernel, or else the operator's External id), the GPU time of each
 * operator's work, and the breakdown of device time (compute,
 * communication, memory, idle) that `mlprof kernels` prints.
 */
#ifndef MLPROF_ANALYZE_GPU_H
#define MLPROF_ANALYZE_GPU_H

#include "trace.h"

enum { AN_GPU_NONE = 0, AN_GPU_COMPUTE = 1, AN_GPU_COMM = 2, AN_GPU_MEMORY = 3 };

/* A device whose counter ranges and kernel launches differ in number: its
 * ranges keep no operators (device -1: the trace's, when its launches do not
 * say their device and it has ranges on several). */
typedef struct an_gpu_range_mismatch {
    int64_t device;
    size_t ranges, launches;
} an_gpu_range_mismatch;

/* What the linking found: per event (index into t->ev). */
typedef struct an_gpu_links {
    int32_t *launch; /* the runtime call that launched a GPU event (or a counter range), or -1 */
    int32_t *bottom; /* the innermost CPU operator around that call, or -1 */
    int32_t *top;    /* the outermost one, or -1 */
    uint8_t *kind;   /* AN_GPU_* */
    /* GPU events, and how each was linked: by_correlation, to the runtime
     * call with its correlation id; by_flow, to the span a flow starts in;
     * by_external, to the CPU operator with its External id (no runtime
     * call: the operator stands for its launch); unlinked, to nothing */
    size_t gpu_events, by_correlation, by_flow, by_external, unlinked;
    /* Counter ranges (cuda_profiler_range events). PyTorch's carry no
     * correlation id: they come in launch order, so the i-th range of a
     * device is the i-th kernel launch (cudaLaunchKernel, cuLaunchKernel and
     * their forms) of the trace's runtime calls, whose operators it takes.
     * mlprof's carry their correlation id and their operators already. */
    size_t ranges;             /* every counter range */
    size_t ranges_own;         /* with a correlation id or an op_stack of their own: not ordered */
    size_t ranges_by_order;    /* given their kernel launch by launch order */
    size_t ranges_unmatched;   /* left without: their device's launches differ in number */
    size_t kernel_launches;    /* the runtime calls that launch a kernel */
    an_gpu_range_mismatch mismatch[8];
    size_t nmismatch;          /* devices that mismatched (the first 8 kept) */
} an_gpu_links;

/* The GPU kind of an event from its category and name (AN_GPU_NONE for CPU events). */
int an_gpu_kind(const an_event *e);
/* Links every GPU event of t to its launch and its operators (calls
 * an_compute_self). Returns 0, or -1 when out of memory. */
int an_gpu_link(an_trace *t, an_gpu_links *links);
void an_gpu_links_free(an_gpu_links *links);
/* "top > ... > bottom": the operators around the launch of GPU event i. */
void an_gpu_op_stack(const an_trace *t, const an_gpu_links *links, size_t i, mlprof__sb *out);

/* The GPU time of the work each CPU event launched: into *ns (free with
 * mlprof__free), per event of t, the summed durations of the GPU events
 * (kernels, copies, memsets) whose launch lies inside it (it is their bottom
 * operator, their top one, or between), or -1 for an event around no launch.
 * Each event around a launch gets its work, a name nested in itself too, as
 * each has its FLOPs and total time. *ns is NULL when t has no GPU events.
 * What analyze's FLOPS and bandwidth of such operators, and the GPU
 * roofline, divide by. Returns 0, or -1 (out of memory). */
int an_gpu_op_times(const an_trace *t, const an_gpu_links *links, int64_t **ns);

/* The kernel breakdown: per device, time in compute, communication and memory
 * kernels, their overlap, busy and idle time; per stream busy and idle; the
 * GPU time of each bottom-level operator; the top kernels with their
 * operators; the counter ranges per kernel and one by one, with their
 * operators and raw counters (one column per metric). A range's dur is never
 * taken for GPU time (PyTorch's is a placeholder): only its gpu_time_ns or
 * gpu__time_duration.sum. format: AN_TABLE, AN_JSON or AN_CSV (the counter
 * ranges, or the kernels when the trace has none). notes, when not NULL,
 * receives a line (the trace's path first) for each device whose counter
 * ranges could not be given operators. Returns 0, or -1 (out of memory). */
int an_kernels(an_trace *t, int format, int top, mlprof__sb *out, mlprof__sb *notes);

/* What --format csv writes (one table: a per-step run prefixes a step column). */
enum {
    AN_GPU_CSV_DEFAULT = 0, /* the counter ranges, or the kernels when there are none */
    AN_GPU_CSV_KERNELS,     /* the kernels by name */
    AN_GPU_CSV_RANGES,      /* the counter ranges one by one */
    AN_GPU_CSV_IDLE,        /* per stream: idle time by cause */
    AN_GPU_CSV_LAUNCHES,    /* per launch: call and kernel, durations, launch delay, outliers */
    AN_GPU_CSV_OVERLAP      /* per device: time by kind, summed and as a union, and overlaps */
};

/* The thresholds of HTA's analyses, and what CSV writes. */
typedef struct an_gpu_options {
    /* Idle time breakdown (HTA's get_idle_time_breakdown), per stream, of
     * each gap before a GPU event: host wait when the runtime call that
     * launched the event started after the stream's previous event ended;
     * else kernel wait when the gap is shorter than kernel_wait_ns (HTA's
     * consecutive_kernel_delay, 30 ns); else other. */
    int64_t kernel_wait_ns;
    /* Kernel launch statistics (HTA's get_cuda_kernel_launch_stats), per
     * launch through a kernel-launch, cudaMemcpyAsync or cudaMemsetAsync
     * call: launch delay (kernel start minus call start), call (CPU) and
     * kernel (GPU) duration. Outliers: a short GPU kernel (call no longer
     * than runtime_cutoff_ns and kernel shorter than its call), a runtime
     * outlier (call longer than runtime_cutoff_ns, HTA's 50 us), a launch
     * delay outlier (delay longer than launch_delay_cutoff_ns, HTA's 100 us). */
    int64_t runtime_cutoff_ns;
    int64_t launch_delay_cutoff_ns;
    int csv; /* AN_GPU_CSV_* */
} an_gpu_options;

void an_gpu_options_default(an_gpu_options *o);
/* an_kernels with these thresholds, and per device the idle breakdown of
 * each stream, the launch statistics, and the overlap of compute,
 * communication and memory as the union of their intervals (time during
 * which both kinds run), beside the summed durations. */
int an_kernels_with(an_trace *t, int format, int top, const an_gpu_options *go, mlprof__sb *out,
                    mlprof__sb *notes);

#endif /* MLPROF_ANALYZE_GPU_H */
