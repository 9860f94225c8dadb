/*
 * stacks.h - between stacks.c (call stacks sampled through perf_event) and
 * symbols.c (their names, after the run).
 */
#ifndef MLPROF_HW_STACKS_H
#define MLPROF_HW_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"
#include "unwind.h"

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
/* The executable mapping that holds ip: its object's full path, its
 * addresses [start, end) and file offset; 0 when none does. */
int mlprof__syms_mapping(mlprof__syms *s, uint64_t ip, const char **path, uint64_t *start, uint64_t *end,
                         uint64_t *offset);

/* The samples of the trace being written, as a tree of frames, for the
 * binary formats (sink.h's mlprof__stacks_out): built by the sampling
 * module's trace_members at each dump and kept until the next one, a reset
 * or a fork; NULL when nothing is sampled. */
struct mlprof__stacks_out;
const struct mlprof__stacks_out *mlprof__stacks_view(void);
/* Forgets how the code addresses were named at earlier dumps (kept so that
 * continuous dumps do not name them again): the next dump names each
 * afresh. For tests, which compare the two. */
void mlprof__stacks_names_drop(void);
/* ip's source positions, the function that holds it then the calls inlined
 * there (unwind.h's mlprof__unwind_srcpos): how many, 0 where debug info
 * says nothing, -1 where it cannot say yet. */
int mlprof__syms_srcpos(mlprof__syms *s, uint64_t ip, mlprof__srcpos *out, int max);

#endif /* MLPROF_HW_STACKS_H */
