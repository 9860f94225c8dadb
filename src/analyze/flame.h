/*
 * flame.h - sampled call stacks of a trace (its stackFrames and samples, as
 * mlprof's sampling key and Chrome write them) as folded stacks and as an
 * interactive SVG flame graph (mlprof flame).
 */
#ifndef MLPROF_ANALYZE_FLAME_H
#define MLPROF_ANALYZE_FLAME_H

#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

typedef struct an_flame an_flame;

/* Reads path's samples; with span set, only those taken on a thread while a
 * complete span ('X') of that name was open on it; with lines set, a
 * function's frames of different source lines apart ("f (file.c:12)").
 * NULL with err set. */
an_flame *an_flame_read(const char *path, const char *span, int lines, char *err, size_t errlen);
void an_flame_free(an_flame *f);
/* Samples read (after the span filter), and all in the trace. */
uint64_t an_flame_samples(const an_flame *f);
uint64_t an_flame_all_samples(const an_flame *f);
/* "root;...;leaf count" lines, one per distinct stack (by names). */
int an_flame_folded(const an_flame *f, mlprof__sb *out);
/* The flame graph: hover for name, samples and share, click to zoom. */
int an_flame_svg(const an_flame *f, const char *title, mlprof__sb *out);

/* For the merge: copies path's stackFrames members (which 0) or samples
 * (which 1) to out, each preceded by a comma unless *first; ids get prefix,
 * a sample's pid and time go through map (what 0: a pid, 1: a time in ns).
 * A Perfetto trace gives its PerfSample packets' stacks (pftrace.c) the same
 * way. Returns how many were copied, 0 for a file with none, -1 with err set. */
typedef int64_t (*an_flame_map_fn)(void *ctx, int what, int64_t value);
long an_flame_copy(const char *path, int which, const char *prefix, an_flame_map_fn map, void *ctx, mlprof__sb *out,
                   int *first, char *err, size_t errlen);

/* For the Perfetto export: f's frames and samples as a sink takes them
 * (src/export/sink.h; frames[0] unused, a frame's parent an index there,
 * no mapping), each sample's pid, tid and time through map as above (what 0:
 * a pid, 1: a time in ns, 2: a tid). The arrays are the caller's to free
 * (mlprof__free), and the names f's: keep f until they are written.
 * Returns 0, or -1 when out of memory. Samples whose frame the trace does
 * not define are left out (*skipped counts them). */
struct mlprof__stack_frame_out;
struct mlprof__stack_sample_out;
int an_flame_stacks(const an_flame *f, an_flame_map_fn map, void *ctx, struct mlprof__stack_frame_out **frames,
                    size_t *nframes, struct mlprof__stack_sample_out **samples, size_t *nsamples, size_t *skipped);

#endif /* MLPROF_ANALYZE_FLAME_H */
