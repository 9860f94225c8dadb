/*
 * mem.h - the memory profiler. The collector reaches it only through its
 * lifecycle entry (mlprof__mem_module, see src/record/produce.h): it hands
 * every decoded memory record to memory_op (mlprof__mem_push); account
 * (mlprof__mem_apply) then
 * accounts them in time order over all threads (a block may be freed on
 * another thread than the one that allocated it), up to a watermark taken
 * before the threads were read, so that an event published late by a
 * preempted thread still finds its place. The outputs (counter samples and
 * peak instants queued as typed events, the report in the statistics, the CSV
 * and the memory flow picture of src/export/memory_sink.c) read the
 * accounting. Every function is called with ctl_lock held.
 */
#ifndef MLPROF_MEM_H
#define MLPROF_MEM_H

#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

struct mlprof__scope_node;
struct mlprof__produced;

/* Queues one memory operation (op: MLPROF__MEM_*). tag and opname are copied
 * (interned); either may be NULL. */
void mlprof__mem_push(uint64_t ns, int device, unsigned op, uint64_t addr, uint64_t bytes,
                      const struct mlprof__scope_node *scope, const char *tag, size_t tag_len,
                      const char *opname, size_t opname_len, pid_t tid);
/* Accounts the queued operations with a time <= upto_ns (UINT64_MAX: all), in
 * time order. Timeline samples are queued into out as counter events (none
 * when out is NULL). */
void mlprof__mem_apply(uint64_t upto_ns, struct mlprof__produced *out);
/* Nonzero once any memory operation was accounted. */
int mlprof__mem_any(void);
/* For the end of the trace: the last sample of each device when the sample
 * rate skipped it, and an instant at each device's peak. */
void mlprof__mem_trace_tail(struct mlprof__produced *out);
/* Appends `,"memory":{...}` (counts of what went wrong) to the trace's otherData. */
void mlprof__mem_other_data(mlprof__sb *out);
/* The peak report: a table, or (json) a JSON object. final: the run has ended,
 * so live blocks are reported as never freed. */
void mlprof__mem_report(mlprof__sb *out, int json, int final);
/* One row per block, and the memory flow picture. Atomic writes. */
int mlprof__mem_write_csv(const char *path);
int mlprof__mem_write_svg(const char *path, const char *title);
/* Warns on the log about new unknown or double frees, late events and
 * dropped history rows since the last call. */
void mlprof__mem_warn(void);
/* Starts the peaks and the counts again from the memory in use now; freed
 * blocks are forgotten, live ones kept (so that their frees still match). */
void mlprof__mem_reset(void);
int mlprof__mem_info(int device, mlprof_mem_info *info, size_t size);
/* The op profiler's workspace window (src/record/op_profile.c): open starts
 * every device's window peak at its memory used now; while open, accounting
 * raises it with used; close ends it and gives one device's used and window
 * peak (0 and 0 for a device never seen). Opened right after a drain, closed
 * right after another, so that it covers what was recorded between them. */
void mlprof__mem_window_open(void);
void mlprof__mem_window_close(int device, uint64_t *used, uint64_t *peak);
/* The device's memory used now (0 for a device never seen; returns whether seen). */
int mlprof__mem_used(int device, uint64_t *used);
/* The device's memory trace as text (mlprof_mem_trace's format) into out.
 * MLPROF_EINVAL for a bad device. */
int mlprof__mem_trace_text(int device, mlprof__sb *out);
int mlprof__mem_set_device_name(int device, const char *name);

#endif /* MLPROF_MEM_H */
