/*
 * sinks.c - every output the collector can feed, one line each (sinks.h).
 * Trace sinks make the trace file's bytes; file sinks write their own files.
 */
#include <stddef.h>

#include "../record/record.h"
#include "sinks.h"

static const char *const json_names[] = {".json", NULL};
static const char *const perfetto_names[] = {".pftrace", ".perfetto-trace", NULL};

static int sqlite_on(void) { return mlprof__g.cfg.sqlite_file[0] != '\0'; }

const mlprof__sink_entry mlprof__sink_table[] = {
    {&mlprof__json_sink, "json", json_names, NULL},
    {&mlprof__perfetto_sink, "perfetto", perfetto_names, NULL},
    {&mlprof__stats_sink, NULL, NULL, NULL},
    {&mlprof__memory_sink, NULL, NULL, NULL},
    {&mlprof__sqlite_sink, NULL, NULL, sqlite_on},
};
const size_t mlprof__nsinks = sizeof mlprof__sink_table / sizeof mlprof__sink_table[0];
