/*
 * memory_sink.c - the memory profiler's files as a sink: at each dump, the
 * per-block CSV (memory_csv) and the memory flow picture (memory_svg), when
 * memory is profiled. It needs no events: both read the memory accounting
 * (src/mem), which the collector keeps up to date through the module table.
 */
#include <stdio.h>
#include <string.h>

#include "../mem/mem.h"
#include "../record/produce.h"
#include "../record/record.h"
#include "export.h"

int mlprof__memory_outputs_on(void)
{
    const mlprof__config *c = &mlprof__g.cfg;
    return c->profile_all || c->profile_memory || mlprof__mem_any();
}

int mlprof__memory_output_path(const char *value, const char *suffix, const char *trace_path, char *buf,
                               size_t len)
{
    const char *prefix = mlprof__g.cfg.gpu_memory_profile_filename_prefix;
    if (!value[0] || !mlprof__memory_outputs_on()) {
        buf[0] = '\0';
    } else if (strcmp(value, "auto") != 0) {
        mlprof__expand_path(value, 1, buf, len);
    } else if (prefix[0] && strcmp(suffix, ".memory.csv") == 0) {
        /* MXNet's gpu_memory_profile_filename_prefix: PREFIX-pid_PID.csv */
        char pid[32];
        snprintf(pid, sizeof pid, "-pid_%d.csv", (int)mlprof__g.pid);
        mlprof__expand_path(prefix, 0, buf, len); /* the name holds the pid: no fork suffix */
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s", pid);
    } else {
        char trace[4200];
        if (trace_path)
            snprintf(trace, sizeof trace, "%s", trace_path);
        else
            mlprof__expand_path(mlprof__g.cfg.filename, 1, trace, sizeof trace);
        /* run.json, run.pftrace and run.json.gz all give run.memory.csv;
         * /dev/null.memory.csv is no file to make */
        if (mlprof__sink_auto_path(trace, suffix, buf, len))
            return 1;
    }
    return 0;
}

/* Each output that fails is told (mlprof__sink_wrote, mlprof__sink_failed):
 * said on stderr and named in the dump's error, whichever failed first. */
static int memory_dump(void *st, const mlprof__sink_dump *d)
{
    (void)st;
    if (!mlprof__memory_outputs_on())
        return MLPROF_OK;
    int rc = MLPROF_OK;
    char path[4200];
    const mlprof__config *c = &mlprof__g.cfg;
    if (mlprof__memory_output_path(c->memory_csv, ".memory.csv", d->trace_path, path, sizeof path))
        mlprof__sink_note_skipped("memory_csv", d->trace_path);
    int crc = path[0] ? mlprof__sink_path_check(d, "memory_csv", c->memory_csv, path) : MLPROF_OK;
    if (crc != MLPROF_OK) /* said by the check */
        rc = mlprof__sink_failed(d, "memory_csv", crc, 1);
    else if (path[0] && mlprof__sink_wrote(d, "memory_csv", path, mlprof__mem_write_csv(path)) != MLPROF_OK)
        rc = MLPROF_EIO;
    if (mlprof__memory_output_path(c->memory_svg, ".memory_flow.svg", d->trace_path, path, sizeof path))
        mlprof__sink_note_skipped("memory_svg", d->trace_path);
    crc = path[0] ? mlprof__sink_path_check(d, "memory_svg", c->memory_svg, path) : MLPROF_OK;
    if (crc != MLPROF_OK) {
        mlprof__sink_failed(d, "memory_svg", crc, 1);
        rc = rc != MLPROF_OK ? rc : crc;
    } else if (path[0]) {
        char title[200];
        mlprof__process_name(title, sizeof title);
        if (mlprof__sink_wrote(d, "memory_svg", path, mlprof__mem_write_svg(path, title)) != MLPROF_OK &&
            rc == MLPROF_OK)
            rc = MLPROF_EIO;
    }
    return rc;
}

const mlprof__sink_ops mlprof__memory_sink = {
    .name = "memory",
    /* takes no spans; the memory accounting outlives the trace (reset by a
     * clear only): an output that could not be written is written again at
     * the next dump */
    .flags = MLPROF__SINK_NO_TEXT | MLPROF__SINK_RETRY,
    .dump = memory_dump,
};
