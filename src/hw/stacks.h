/*
 * stacks.h - between stacks.c (call stacks sampled through perf_event) and
 * symbols.c (their names, after the run).
 */
#ifndef MLPROF_HW_STACKS_H
#define MLPROF_HW_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

/* The frames a sample keeps at most (perf_event's sample_max_stack). */
#define MLPROF__STACK_DEPTH 127

/* The executable mappings of this process, read now; objects' symbols are
 * read at their first lookup. */
typedef struct mlprof__syms mlprof__syms;
mlprof__syms *mlprof__syms_load(void);
void mlprof__syms_free(mlprof__syms *s);
/* ip's function name (or OBJECT+0xOFFSET) into name; *object: the
 * object's file name ("?" when no mapping holds ip). */
void mlprof__syms_name(mlprof__syms *s, uint64_t ip, char *name, size_t len, const char **object);

#endif /* MLPROF_HW_STACKS_H */
