/*
 * roofline.h - `mlprof roofline`: every operator of a trace (grouped as
 * `mlprof analyze` groups them) placed by arithmetic intensity (FLOPs per
 * byte) and attained FLOP/s against the machine's measured ceilings
 * (ceilings.h): a table (or JSON) and an SVG picture.
 */
#ifndef MLPROF_ANALYZE_ROOFLINE_H
#define MLPROF_ANALYZE_ROOFLINE_H

#include "analyze.h"
#include "ceilings.h"

typedef struct rf_options {
    int one_thread;          /* the one-thread roofs instead of all threads' */
    const char *ceilings;    /* where the ceilings came from, for the header */
} rf_options;

/* Places the groups of t (o: analyze's filters and --aggregate-by; o->format
 * AN_TABLE or AN_JSON for table) against c. An operator is placed when its
 * events carry FLOPs and bytes above 0 and it took time; the others are
 * listed as not placed, with the reason; so are the operators around the
 * launch of GPU work (a kernel, copy or memset): their CPU time is not their
 * work's, and the ceilings are the CPU's (notes says how many; *on_gpu, when
 * not NULL, receives it). Its memory roof is the level its
 * bytes per call fit in (DRAM past the last cache); its compute roof the
 * peak of the precision its dtype argument names (fp32 when it names none,
 * and the table says so). table receives the table; svg (when not NULL) the
 * picture; notes the analyzer's notes, and a line when an all-thread
 * ceiling measured below its one-thread one (a loaded machine) was raised to
 * it. *placed receives how many were placed
 * (0: nothing to draw, svg is then left empty). Returns 0, or -1 (out of
 * memory). */
int rf_roofline(an_trace *t, const an_options *o, const ce_ceilings *c, const rf_options *ro, mlprof__sb *table,
                mlprof__sb *svg, mlprof__sb *notes, size_t *placed, size_t *on_gpu);

#endif /* MLPROF_ANALYZE_ROOFLINE_H */
