/*
 * sinks.h - the table of sinks the collector drives (sinks.c): a new output
 * format is one file in src/export and one line there.
 */
#ifndef MLPROF_SINKS_H
#define MLPROF_SINKS_H

#include "../export/sink.h"

typedef struct mlprof__sink_entry {
    const mlprof__sink_ops *ops;
    /* trace sinks: the value of the format key that chooses it, and the file
     * names that choose it at format=auto (before a ".gz"); NULL for a file
     * sink. The first trace sink is the one auto falls back to. */
    const char *format;
    const char *const *suffixes;
    /* file sinks: on for the trace (NULL: always) */
    int (*on)(void);
} mlprof__sink_entry;

extern const mlprof__sink_entry mlprof__sink_table[];
extern const size_t mlprof__nsinks;

#endif /* MLPROF_SINKS_H */
