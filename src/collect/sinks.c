/*
 * sinks.c - every output the collector can feed, one line each (sinks.h).
 * Trace sinks make the trace file's bytes; file sinks write their own files.
 */
#include <stddef.h>
#include <string.h>

#include "../record/record.h"
#include "collect.h"
#include "sinks.h"

static const char *const json_names[] = {".json", NULL};
static const char *const perfetto_names[] = {".pftrace", ".perfetto-trace", NULL};

/* sqlite_file=auto names the database after the trace's file: none when the
 * trace is written in place (/dev/null, /dev/stdout), nor its working copy
 * beside it. Asked at each drain. */
static int sqlite_on(void)
{
    const char *value = mlprof__g.cfg.sqlite_file;
    if (!value[0])
        return 0;
    if (strcmp(value, "auto") != 0)
        return 1;
    char trace[MLPROF__PATH_MAX + 64];
    mlprof__collect_trace_path(trace, sizeof trace);
    if (!mlprof__sink_auto_skipped(trace))
        return 1;
    mlprof__sink_note_skipped("sqlite_file", trace);
    return 0;
}

const mlprof__sink_entry mlprof__sink_table[] = {
    {&mlprof__json_sink, "json", json_names, NULL},
    {&mlprof__perfetto_sink, "perfetto", perfetto_names, NULL},
    {&mlprof__stats_sink, NULL, NULL, NULL},
    {&mlprof__memory_sink, NULL, NULL, NULL},
    {&mlprof__sqlite_sink, NULL, NULL, sqlite_on},
};
const size_t mlprof__nsinks = sizeof mlprof__sink_table / sizeof mlprof__sink_table[0];
