/*
 * chrome.c - Chrome trace event JSON, the format that Perfetto, chrome://tracing
 * and speedscope open. Timestamps are microseconds with the nanoseconds kept
 * as three decimals. Durations are complete ("X") events; frames are async
 * ("b"/"e") events so that they get a track of their own.
 *
 * This runs for every event of a trace: each event reserves room for its
 * longest form once, then writes its fields straight into the buffer
 * (src/common/fmt.h), with no call, length count or reserve per field.
 */
#include <string.h>

#include "../common/fmt.h"
#include "export.h"

/* Copies a string literal. */
#define LIT(p, s) ((p) = mlprof__fmt_raw((p), (s), sizeof(s) - 1))

/* Room for the separator, the braces and the fields that every event has
 * (put_common), its name and domain given, but for numbers past these. */
#define EVENT_FIXED 192

static size_t common_max(size_t name_len, size_t domain_len)
{
    return EVENT_FIXED + MLPROF__FMT_JSON_STR_MAX(name_len) + MLPROF__FMT_JSON_STR_MAX(domain_len) +
           2 * MLPROF__FMT_I64_MAX;
}

/* Points p at the end of out's bytes with room for max more: NULL when the
 * buffer cannot grow (it is then marked failed). */
static char *event_room(mlprof__sb *out, size_t max)
{
    if (!mlprof__sb_reserve(out, max))
        return NULL;
    return out->data + out->len;
}

static void event_done(mlprof__sb *out, char *p)
{
    out->len = (size_t)(p - out->data);
    out->data[out->len] = '\0';
}

static char *begin_event(char *p, int *first)
{
    if (*first) {
        *first = 0;
    } else {
        *p++ = ',';
        *p++ = '\n';
    }
    *p++ = '{';
    return p;
}

static char *put_common(char *p, char ph, const char *name, size_t name_len, const char *domain,
                        size_t domain_len, pid_t pid, pid_t tid)
{
    LIT(p, "\"ph\":\"");
    *p++ = ph;
    LIT(p, "\",\"name\":");
    p = mlprof__fmt_json_str(p, name, name_len);
    if (domain) {
        LIT(p, ",\"cat\":");
        p = mlprof__fmt_json_str(p, domain, domain_len);
    }
    LIT(p, ",\"pid\":");
    p = mlprof__fmt_i64(p, pid);
    LIT(p, ",\"tid\":");
    p = mlprof__fmt_i64(p, tid);
    return p;
}

static const char k_unfinished[] = "\"unfinished\":true";

/* ,"args":{ARGS} with "unfinished":true added when asked; nothing when both
 * are empty. At most args_len + 32 bytes. */
static char *put_args(char *p, const char *args, size_t len, int unfinished)
{
    if (!len && !unfinished)
        return p;
    LIT(p, ",\"args\":{");
    if (len)
        p = mlprof__fmt_raw(p, args, len);
    if (unfinished) {
        if (len)
            *p++ = ',';
        LIT(p, k_unfinished);
    }
    *p++ = '}';
    return p;
}

void mlprof__chrome_span(mlprof__sb *out, int *first, const mlprof__span_out *s)
{
    size_t domain_len = s->domain ? strlen(s->domain) : 0;
    size_t max = common_max(s->name_len, domain_len) + 2 * MLPROF__FMT_US_MAX + s->args_len + 32;
    if (s->kind == MLPROF__OUT_FRAME)
        max *= 2;
    char *p = event_room(out, max);
    if (!p)
        return;
    if (s->kind == MLPROF__OUT_FRAME) {
        for (int edge = 0; edge < 2; edge++) {
            p = begin_event(p, first);
            p = put_common(p, edge ? 'e' : 'b', s->name, s->name_len, s->domain, domain_len, s->pid, s->tid);
            LIT(p, ",\"id\":\"");
            p = mlprof__fmt_u64(p, s->frame_id);
            LIT(p, "\",\"ts\":");
            p = mlprof__fmt_us(p, edge ? s->end_ns : s->begin_ns);
            if (!edge)
                p = put_args(p, s->args, s->args_len, s->unfinished);
            *p++ = '}';
        }
        event_done(out, p);
        return;
    }
    p = begin_event(p, first);
    p = put_common(p, 'X', s->name, s->name_len, s->domain, domain_len, s->pid, s->tid);
    LIT(p, ",\"ts\":");
    p = mlprof__fmt_us(p, s->begin_ns);
    LIT(p, ",\"dur\":");
    p = mlprof__fmt_us(p, s->end_ns - s->begin_ns);
    p = put_args(p, s->args, s->args_len, s->unfinished);
    *p++ = '}';
    event_done(out, p);
}

void mlprof__chrome_instant(mlprof__sb *out, int *first, const char *name, size_t name_len,
                            const char *domain, uint64_t ts_ns, int scope, pid_t pid, pid_t tid,
                            const char *args, size_t args_len)
{
    static const char scopes[] = {'g', 'p', 't'};
    size_t domain_len = domain ? strlen(domain) : 0;
    char *p = event_room(out, common_max(name_len, domain_len) + MLPROF__FMT_US_MAX + args_len + 32);
    if (!p)
        return;
    p = begin_event(p, first);
    p = put_common(p, 'i', name, name_len, domain, domain_len, pid, tid);
    LIT(p, ",\"ts\":");
    p = mlprof__fmt_us(p, ts_ns);
    LIT(p, ",\"s\":\"");
    *p++ = scopes[scope >= 0 && scope <= 2 ? scope : 1];
    *p++ = '"';
    p = put_args(p, args, args_len, 0);
    *p++ = '}';
    event_done(out, p);
}

void mlprof__chrome_flow(mlprof__sb *out, int *first, char ph, uint64_t id, const char *name, const char *domain,
                         uint64_t ts_ns, pid_t pid, pid_t tid)
{
    size_t name_len = strlen(name), domain_len = domain ? strlen(domain) : 0;
    char *p = event_room(out, common_max(name_len, domain_len) + MLPROF__FMT_US_MAX + MLPROF__FMT_U64_MAX + 32);
    if (!p)
        return;
    p = begin_event(p, first);
    p = put_common(p, ph, name, name_len, domain, domain_len, pid, tid);
    LIT(p, ",\"ts\":");
    p = mlprof__fmt_us(p, ts_ns);
    LIT(p, ",\"id\":");
    p = mlprof__fmt_u64(p, id);
    if (ph == 'f') /* bound to the slice that encloses it, not to the next one */
        LIT(p, ",\"bp\":\"e\"");
    *p++ = '}';
    event_done(out, p);
}

void mlprof__chrome_counter(mlprof__sb *out, int *first, const char *name, const char *domain,
                            uint64_t ts_ns, double value, int is_int, int64_t ivalue, pid_t pid,
                            pid_t tid)
{
    size_t name_len = strlen(name), domain_len = domain ? strlen(domain) : 0;
    char *p = event_room(out, common_max(name_len, domain_len) + MLPROF__FMT_US_MAX + 32);
    if (!p)
        return;
    p = begin_event(p, first);
    p = put_common(p, 'C', name, name_len, domain, domain_len, pid, tid);
    LIT(p, ",\"ts\":");
    p = mlprof__fmt_us(p, ts_ns);
    LIT(p, ",\"args\":{\"value\":");
    if (is_int) {
        p = mlprof__fmt_i64(p, ivalue);
        LIT(p, "}}");
        event_done(out, p);
        return;
    }
    event_done(out, p); /* a double goes through sb.c's shortest form */
    mlprof__sb_double(out, value);
    mlprof__sb_put(out, "}}", 2);
}

/* A metadata event: {"ph":"M","name":NAME,"pid":..,"tid":..,"args":{"KEY": */
static char *meta_begin(char *p, int *first, const char *name, size_t name_len, pid_t pid, pid_t tid,
                        const char *key)
{
    p = begin_event(p, first);
    p = put_common(p, 'M', name, name_len, NULL, 0, pid, tid);
    LIT(p, ",\"args\":{\"");
    p = mlprof__fmt_raw(p, key, strlen(key));
    LIT(p, "\":");
    return p;
}

void mlprof__chrome_thread_meta(mlprof__sb *out, int *first, pid_t pid, pid_t tid,
                                const char *name, uint32_t sort_index)
{
    size_t name_len = strlen(name);
    char *p = event_room(out, 2 * common_max(17, 0) + MLPROF__FMT_JSON_STR_MAX(name_len) + MLPROF__FMT_U64_MAX);
    if (!p)
        return;
    p = meta_begin(p, first, "thread_name", 11, pid, tid, "name");
    p = mlprof__fmt_json_str(p, name, name_len);
    LIT(p, "}}");
    p = meta_begin(p, first, "thread_sort_index", 17, pid, tid, "sort_index");
    p = mlprof__fmt_u64(p, sort_index);
    LIT(p, "}}");
    event_done(out, p);
}

void mlprof__chrome_process_meta(mlprof__sb *out, int *first, pid_t pid, const char *name)
{
    size_t name_len = strlen(name);
    char *p = event_room(out, common_max(12, 0) + MLPROF__FMT_JSON_STR_MAX(name_len));
    if (!p)
        return;
    p = meta_begin(p, first, "process_name", 12, pid, pid, "name");
    p = mlprof__fmt_json_str(p, name, name_len);
    LIT(p, "}}");
    event_done(out, p);
}
