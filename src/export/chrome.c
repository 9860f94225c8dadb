/*
 * chrome.c - Chrome trace event JSON, the format that Perfetto, chrome://tracing
 * and speedscope open. Timestamps are microseconds with the nanoseconds kept
 * as three decimals. Durations are complete ("X") events; frames are async
 * ("b"/"e") events so that they get a track of their own.
 */
#include <string.h>

#include "export.h"

static void begin_event(mlprof__sb *out, int *first)
{
    if (*first)
        *first = 0;
    else
        mlprof__sb_put(out, ",\n", 2);
    mlprof__sb_putc(out, '{');
}

static void put_common(mlprof__sb *out, const char *ph, const char *name, size_t name_len,
                       const char *domain, pid_t pid, pid_t tid)
{
    mlprof__sb_puts(out, "\"ph\":\"");
    mlprof__sb_puts(out, ph);
    mlprof__sb_puts(out, "\",\"name\":");
    mlprof__sb_json_str(out, name, name_len);
    if (domain) {
        mlprof__sb_puts(out, ",\"cat\":");
        mlprof__sb_json_str(out, domain, strlen(domain));
    }
    mlprof__sb_puts(out, ",\"pid\":");
    mlprof__sb_i64(out, pid);
    mlprof__sb_puts(out, ",\"tid\":");
    mlprof__sb_i64(out, tid);
}

static void put_ts(mlprof__sb *out, const char *key, uint64_t ns)
{
    mlprof__sb_puts(out, key);
    mlprof__sb_us(out, ns);
}

static void put_args(mlprof__sb *out, const char *args, size_t len, const char *extra)
{
    if (!len && !extra)
        return;
    mlprof__sb_puts(out, ",\"args\":{");
    if (len)
        mlprof__sb_put(out, args, len);
    if (extra) {
        if (len)
            mlprof__sb_putc(out, ',');
        mlprof__sb_puts(out, extra);
    }
    mlprof__sb_putc(out, '}');
}

void mlprof__chrome_span(mlprof__sb *out, int *first, const mlprof__span_out *s)
{
    const char *extra = s->unfinished ? "\"unfinished\":true" : NULL;
    if (s->kind == MLPROF__OUT_FRAME) {
        for (int edge = 0; edge < 2; edge++) {
            begin_event(out, first);
            put_common(out, edge ? "e" : "b", s->name, s->name_len, s->domain, s->pid, s->tid);
            mlprof__sb_puts(out, ",\"id\":\"");
            mlprof__sb_u64(out, s->frame_id);
            mlprof__sb_putc(out, '"');
            put_ts(out, ",\"ts\":", edge ? s->end_ns : s->begin_ns);
            if (!edge)
                put_args(out, s->args, s->args_len, extra);
            mlprof__sb_putc(out, '}');
        }
        return;
    }
    begin_event(out, first);
    put_common(out, "X", s->name, s->name_len, s->domain, s->pid, s->tid);
    put_ts(out, ",\"ts\":", s->begin_ns);
    put_ts(out, ",\"dur\":", s->end_ns - s->begin_ns);
    put_args(out, s->args, s->args_len, extra);
    mlprof__sb_putc(out, '}');
}

void mlprof__chrome_instant(mlprof__sb *out, int *first, const char *name, size_t name_len,
                            const char *domain, uint64_t ts_ns, int scope, pid_t pid, pid_t tid,
                            const char *args, size_t args_len)
{
    static const char *const scopes[] = {"g", "p", "t"};
    begin_event(out, first);
    put_common(out, "i", name, name_len, domain, pid, tid);
    put_ts(out, ",\"ts\":", ts_ns);
    mlprof__sb_puts(out, ",\"s\":\"");
    mlprof__sb_puts(out, scopes[scope >= 0 && scope <= 2 ? scope : 1]);
    mlprof__sb_putc(out, '"');
    put_args(out, args, args_len, NULL);
    mlprof__sb_putc(out, '}');
}

void mlprof__chrome_flow(mlprof__sb *out, int *first, char ph, uint64_t id, const char *name, const char *domain,
                         uint64_t ts_ns, pid_t pid, pid_t tid)
{
    char p[2] = {ph, 0};
    begin_event(out, first);
    put_common(out, p, name, strlen(name), domain, pid, tid);
    put_ts(out, ",\"ts\":", ts_ns);
    mlprof__sb_puts(out, ",\"id\":");
    mlprof__sb_u64(out, id);
    if (ph == 'f') /* bound to the slice that encloses it, not to the next one */
        mlprof__sb_puts(out, ",\"bp\":\"e\"");
    mlprof__sb_putc(out, '}');
}

void mlprof__chrome_counter(mlprof__sb *out, int *first, const char *name, const char *domain,
                            uint64_t ts_ns, double value, int is_int, int64_t ivalue, pid_t pid,
                            pid_t tid)
{
    begin_event(out, first);
    put_common(out, "C", name, strlen(name), domain, pid, tid);
    put_ts(out, ",\"ts\":", ts_ns);
    mlprof__sb_puts(out, ",\"args\":{\"value\":");
    if (is_int)
        mlprof__sb_i64(out, ivalue);
    else
        mlprof__sb_double(out, value);
    mlprof__sb_puts(out, "}}");
}

void mlprof__chrome_thread_meta(mlprof__sb *out, int *first, pid_t pid, pid_t tid,
                                const char *name, uint32_t sort_index)
{
    begin_event(out, first);
    put_common(out, "M", "thread_name", 11, NULL, pid, tid);
    mlprof__sb_puts(out, ",\"args\":{\"name\":");
    mlprof__sb_json_str(out, name, strlen(name));
    mlprof__sb_puts(out, "}}");
    begin_event(out, first);
    put_common(out, "M", "thread_sort_index", 17, NULL, pid, tid);
    mlprof__sb_puts(out, ",\"args\":{\"sort_index\":");
    mlprof__sb_u64(out, sort_index);
    mlprof__sb_puts(out, "}}");
}

void mlprof__chrome_process_meta(mlprof__sb *out, int *first, pid_t pid, const char *name)
{
    begin_event(out, first);
    put_common(out, "M", "process_name", 12, NULL, pid, pid);
    mlprof__sb_puts(out, ",\"args\":{\"name\":");
    mlprof__sb_json_str(out, name, strlen(name));
    mlprof__sb_puts(out, "}}");
}
