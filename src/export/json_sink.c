/*
 * json_sink.c - the Chrome trace event JSON sink: {"traceEvents":[ ... ],
 * "displayTimeUnit":"ms","otherData":{...}}. Each event is formatted by
 * chrome.c; this file keeps the one piece of stream state JSON has (whether
 * an event was written yet, for the commas) and writes the head and the
 * footer. Metadata (process and thread names) is written in the tail only.
 */
#include <string.h>

#include "export.h"

typedef struct json_state {
    int first;      /* no event in the stream yet */
    int tail_first; /* the same, inside a tail */
} json_state;

static void *json_create(void)
{
    json_state *st = mlprof__calloc(1, sizeof *st);
    if (st)
        st->first = 1;
    return st;
}

static void json_destroy(void *st) { mlprof__free(st); }

static void json_reset(void *p)
{
    json_state *st = p;
    st->first = 1;
}

static void json_head(void *st, mlprof__sb *sb)
{
    (void)st;
    mlprof__sb_puts(sb, "{\"traceEvents\":[\n");
}

/* The comma state the event goes with: the stream's, or the tail's copy. */
static int *first_of(json_state *st, const mlprof__sink_out *out)
{
    return out->tail ? &st->tail_first : &st->first;
}

static void json_span(void *p, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    mlprof__chrome_span(out->sb, first_of(p, out), s);
}

static void json_instant(void *p, const mlprof__sink_out *out, const mlprof__instant_out *e)
{
    mlprof__chrome_instant(out->sb, first_of(p, out), e->name, e->name_len, e->domain, e->ts_ns, e->scope, e->pid,
                           e->tid, e->args, e->args_len);
}

static void json_counter(void *p, const mlprof__sink_out *out, const mlprof__counter_out *c)
{
    mlprof__chrome_counter(out->sb, first_of(p, out), c->name, c->domain, c->ts_ns, c->value, c->is_int, c->ivalue,
                           c->pid, c->tid);
}

static void json_flow(void *p, const mlprof__sink_out *out, const mlprof__flow_out *f)
{
    mlprof__chrome_flow(out->sb, first_of(p, out), f->ph, f->id, f->name, f->domain, f->ts_ns, f->pid, f->tid);
}

static void json_track(void *p, const mlprof__sink_out *out, const mlprof__track_out *t)
{
    if (t->kind == MLPROF__TRACK_PROCESS)
        mlprof__chrome_process_meta(out->sb, first_of(p, out), t->pid, t->name);
    else
        mlprof__chrome_thread_meta(out->sb, first_of(p, out), t->pid, t->tid, t->name, t->sort_index);
}

static void json_tail_begin(void *p, const mlprof__sink_out *out)
{
    json_state *st = p;
    (void)out;
    st->tail_first = st->first;
}

static void json_tail_end(void *p, const mlprof__sink_out *out, const mlprof__trace_meta *m)
{
    (void)p;
    mlprof__sb_puts(out->sb, "\n],\n\"displayTimeUnit\":\"ms\",\n");
    if (m->distributed_info) { /* Kineto's member: HTA and Perfetto read the rank there */
        mlprof__sb_puts(out->sb, "\"distributedInfo\":");
        mlprof__sb_put(out->sb, m->distributed_info, m->distributed_info_len);
        mlprof__sb_puts(out->sb, ",\n");
    }
    if (m->trace_members)
        mlprof__sb_put(out->sb, m->trace_members, m->trace_members_len);
    mlprof__sb_puts(out->sb, "\"otherData\":{");
    mlprof__sb_put(out->sb, m->other_data ? m->other_data : "", m->other_data_len);
    mlprof__sb_puts(out->sb, "}\n}\n");
}

const mlprof__sink_ops mlprof__json_sink = {
    .name = "json",
    .create = json_create,
    .destroy = json_destroy,
    .reset = json_reset,
    .head = json_head,
    .span = json_span,
    .instant = json_instant,
    .counter = json_counter,
    .flow = json_flow,
    .track = json_track,
    .tail_begin = json_tail_begin,
    .tail_end = json_tail_end,
};
