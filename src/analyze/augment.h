/*
 * augment.h - time series of a trace's GPU streams, written back into the
 * trace as counter tracks (mlprof augment), as Holistic Trace Analysis's
 * generate_trace_with_counters does: the launch queue's length on each
 * stream, the bandwidth of its copies and memsets, and the time each stream's
 * queue was full (the CPU blocks in its next launch then).
 */
#ifndef MLPROF_ANALYZE_AUGMENT_H
#define MLPROF_ANALYZE_AUGMENT_H

#include "trace.h"

/* HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM: CUDA does not document the launch
 * queue's depth; launches are seen to block from about 1022-1024 queued. */
#define AN_LAUNCH_QUEUE_LIMIT 1024

enum { AN_SERIES_QUEUE = 0, AN_SERIES_FULL = 1, AN_SERIES_BW_STREAM = 2, AN_SERIES_BW_DEVICE = 3 };

/* One counter track: its samples are an_augment.samples[first, first + n),
 * in time order, one at every change of its value. */
typedef struct an_aug_series {
    int kind;            /* AN_SERIES_* */
    int64_t pid, tid;    /* the GPU track (tid unused for a device's) */
    int64_t stream;      /* the stream's number ("stream" argument, else tid), or -1 when only named */
    size_t events;       /* queue: GPU events counted; bandwidth: copies and memsets */
    int64_t max_queue;   /* queue: the longest it was */
    int64_t full_ns;     /* queue: the time it was at or above the limit */
    uint64_t bytes;      /* bandwidth: bytes moved or set */
    int64_t busy_ns;     /* bandwidth: the time some copy ran (union of their intervals) */
    double peak_bps;     /* bandwidth: the highest bytes per second */
    size_t first, n;
} an_aug_series;

typedef struct an_aug_sample {
    int64_t ts;   /* ns, on the trace's clock */
    double value;
} an_aug_sample;

typedef struct an_augment {
    int64_t limit;            /* the queue length that counts as full */
    int until_start;          /* a GPU event leaves its queue when it starts (HTA's), not when it ends */
    an_aug_series *series;
    size_t nseries;
    an_aug_sample *samples;
    size_t nsamples;
    int64_t span_ns;          /* the trace's span */
    int64_t full_ns;          /* the time blocked on a full queue, summed over streams */
    size_t gpu_events;        /* kernels, copies and memsets */
    size_t runtime_calls;     /* cuda_runtime, cuda_driver... calls */
    size_t queued;            /* GPU events counted in a queue (launched by a runtime call) */
    size_t unlinked;          /* GPU events that no runtime call launched (no correlation, no flow) */
    size_t by_operator_only;  /* linked to their CPU operator (External id), not to a call */
    size_t end_before_launch; /* GPU events that end before their runtime call starts */
    size_t copies;            /* copies and memsets */
    size_t copies_no_bytes;   /* without a "bytes" or bandwidth argument: left out */
    size_t copies_no_dur;     /* of no duration: no bandwidth, left out */
} an_augment;

/* Computes the series of t for a queue limit of limit (AN_LAUNCH_QUEUE_LIMIT
 * as HTA). Queue length: +1 when the runtime call that launched a kernel,
 * copy or memset starts, -1 when the GPU event ends, or with until_start
 * when it starts (HTA's definition: what waits to run, not what is unfinished).
 * Bandwidth: each copy or memset moves its "bytes" evenly over its duration;
 * a stream's and a device's bandwidth is the sum of those running. Returns 0,
 * or -1 when out of memory. */
int an_augment_compute(an_trace *t, int64_t limit, int until_start, an_augment *a);
void an_augment_free(an_augment *a);

/* The summary (format AN_TABLE or AN_JSON): per stream launches, longest
 * queue, time full; per stream copies, bytes, busy time, mean and peak
 * bandwidth; the time blocked on a full queue. out_path, counter_events and
 * gzip say what was written. */
void an_augment_report(const an_trace *t, const an_augment *a, int format, const char *out_path,
                       size_t counter_events, int gzip, mlprof__sb *out);
/* A line (the trace's path first) for each thing the trace lacks for the
 * series: runtime calls, correlation, bytes. */
void an_augment_notes(const an_trace *t, const an_augment *a, mlprof__sb *notes);

/* Whether in_path can be augmented: read twice, it must be a regular file
 * (not standard input, a pipe or a device). 0, or -1 with err set. */
int an_augment_input_ok(const char *in_path, char *err, size_t errlen);
/* Writes the trace at in_path (plain or gzip) to out_path with the counter
 * events of a appended to its traceEvents: every other member and event is
 * kept (as compact JSON). The output is gzip when out_path ends in .gz, plain
 * JSON otherwise. out_path is written to a temporary file renamed at the end; it may
 * not be in_path itself (nor a link to it). *written receives the number of
 * counter events. Returns 0, or -1 with err set. */
int an_augment_write(const an_trace *t, const an_augment *a, const char *in_path, const char *out_path,
                     size_t *written, char *err, size_t errlen);

#endif /* MLPROF_ANALYZE_AUGMENT_H */
