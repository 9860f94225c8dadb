/*
 * trace.c - reads a Chrome trace event file into the model of trace.h, in one
 * pass over the stream: each event is parsed into fixed fields and interned
 * arguments, and only what the analyses use is kept. B/E pairs are joined into
 * durations on a stack per thread (an end names the begin it closes, or closes
 * the innermost one); metadata events become process and thread names.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "pftrace.h"
#include "trace.h"

const char *an_intern(an_trace *t, const char *s, size_t n)
{
    if (!s)
        s = "";
    mlprof__map_entry *e = mlprof__map_slot(&t->strings, s, n);
    if (!e)
        return NULL;
    e->value = e->key; /* so that a lookup finds the interned copy */
    return e->key;
}

void an_keyset_init(const an_trace *t, const char *const *names, an_keyset *ks)
{
    ks->n = 0;
    for (; *names && ks->n < 8; names++) {
        const char *k = mlprof__map_get(&t->strings, *names, strlen(*names));
        if (k)
            ks->key[ks->n++] = k;
    }
}

const an_arg *an_event_arg_in(const an_trace *t, const an_event *e, const an_keyset *ks)
{
    for (size_t k = 0; k < ks->n; k++) {
        for (uint32_t i = 0; i < e->nargs; i++) {
            if (t->args[e->args + i].key == ks->key[k])
                return &t->args[e->args + i];
        }
    }
    return NULL;
}

double an_arg_num(const an_arg *a, double def)
{
    if (!a)
        return def;
    if (a->type == AN_NUM)
        return a->num;
    char *end;
    double v = a->str ? strtod(a->str, &end) : 0;
    return a->str && end != a->str && !*end ? v : def;
}

static void *grow_array(void *items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap * 2 : 1024;
    void *p = mlprof__realloc(items, c * size);
    if (p)
        *cap = c;
    return p;
}

/* ---------------------------------------------------------- per event */

typedef struct open_stack {
    size_t *idx;
    size_t n, cap;
} open_stack;

/* Events the reader left out, of one kind, for the trace's note: how many,
 * and what was wrong with the first and where it is. */
typedef struct left_out {
    uint64_t n;
    char first[240];
} left_out;

/* Why an event is left out. A serious reader keeps going past one bad event
 * among good ones, and says what it left out: an event with a time that
 * cannot be taken (NaN, beyond 64-bit nanoseconds, a negative "dur", an end
 * past the range, an "E" before its "B") is left out rather than clamped,
 * since no value put in its place would be true, and an analysis would
 * count it as measured; a malformed one (no "ph", no "ts", an "X" without
 * "dur", a member of the wrong type) cannot be placed; a phase mlprof does
 * not read ("P", "O", ...) is not an error in the file but is lost all the
 * same. */
enum { LEFT_TIME, LEFT_FORM, LEFT_PHASE, LEFT_N };

typedef struct reader {
    an_trace *t;
    an_input in;
    mlprof__sb key, val, raw;
    mlprof__map tracks;     /* (pid, tid) -> open_stack of B events */
    mlprof__map string_ids; /* pid or tid given as a string -> its number */
    int64_t next_string_id;
    int has_events;         /* a traceEvents array, or the file is an array */
    uint64_t entries;       /* the items of that array */
    uint64_t events;        /* those that are events (metadata included) */
    left_out left[LEFT_N];
    left_out misnested;     /* ends that closed a begin other than the innermost */
    uint64_t event_at;      /* the byte offset where the event being read starts */
    int bad;                /* why that event is left out (LEFT_*), or -1 */
    char bad_why[200];
} reader;

/* Where the event being read starts: its byte offset, and its line while
 * the buffer still holds it. */
static void event_place(const reader *r, char *buf, size_t len)
{
    uint64_t line = an_input_line_of(&r->in, r->event_at);
    const char *data = r->in.compressed ? " of the uncompressed data" : "";
    if (line)
        snprintf(buf, len, "line %llu, byte offset %llu%s", (unsigned long long)line,
                 (unsigned long long)r->event_at, data);
    else
        snprintf(buf, len, "byte offset %llu%s", (unsigned long long)r->event_at, data);
}

static void count_left(reader *r, left_out *lo, const char *why)
{
    if (lo->n++)
        return;
    char place[120];
    event_place(r, place, sizeof place);
    if (snprintf(lo->first, sizeof lo->first, "%s, at %s", why, place) >= (int)sizeof lo->first)
        memcpy(lo->first + sizeof lo->first - 4, "...", 4); /* cut: said so */
}

/* The event being read is left out, for the first reason found. */
static void event_bad(reader *r, int kind, const char *fmt, ...) MLPROF_I_PRINTF(3, 4);
static void event_bad(reader *r, int kind, const char *fmt, ...)
{
    if (r->bad >= 0)
        return;
    r->bad = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->bad_why, sizeof r->bad_why, fmt, ap);
    va_end(ap);
}

/* What a JSON value is, from its first byte. */
static const char *json_kind(int c)
{
    switch (c) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't': return "true";
    case 'f': return "false";
    case 'n': return "null";
    default: return "a number";
    }
}

/* A member whose value is true, false, null, an array or an object where a
 * number or a string was expected: valid JSON, so the reading goes on past
 * it, and the event is left out naming the member. 1 when it was so (*rc
 * then says whether the value could be skipped). */
static int wrong_type(reader *r, const char *key, const char *expected, int *rc)
{
    int c = an_json_peek(&r->in);
    if (c != 't' && c != 'f' && c != 'n' && c != '[' && c != '{')
        return 0;
    *rc = an_json_skip(&r->in, NULL);
    event_bad(r, LEFT_FORM, "\"%s\": expected %s, found %s", key, expected, json_kind(c));
    return 1;
}

static an_arg *new_arg(an_trace *t)
{
    an_arg *a = grow_array(t->args, &t->argcap, t->nargs, sizeof *t->args);
    if (!a)
        return NULL;
    t->args = a;
    an_arg *arg = &t->args[t->nargs++];
    memset(arg, 0, sizeof *arg);
    return arg;
}

static int read_args(reader *r, an_event *e)
{
    an_input *in = &r->in;
    an_trace *t = r->t;
    if (!e->nargs) /* a second "args" member goes on after the first */
        e->args = (uint32_t)t->nargs;
    int more = an_json_open(in, '{', "'{' to start args");
    if (more <= 0)
        return more;
    do {
        if (an_json_key(in, &r->key) != 0)
            return -1;
        an_arg *a = new_arg(t);
        if (!a)
            return an_input_fail(in, "out of memory");
        a->key = an_intern(t, r->key.data, r->key.len);
        int c = an_json_peek(in);
        if (c == '"') {
            if (an_json_string(in, &r->val) != 0)
                return -1;
            a->type = AN_STR;
            a->str = an_intern(t, r->val.data, r->val.len);
        } else if (c == '{' || c == '[' || c == 't' || c == 'f' || c == 'n') {
            mlprof__sb_reset(&r->raw);
            if (an_json_skip(in, &r->raw) != 0)
                return -1;
            a->type = AN_RAW; /* true, false and null too: not the strings of those letters */
            a->str = an_intern(t, r->raw.data, r->raw.len);
        } else {
            int is_int;
            if (an_json_number(in, &a->num, &a->inum, &is_int) != 0)
                return -1;
            a->is_int = (uint8_t)is_int;
            a->type = AN_NUM;
        }
        e->nargs++;
        more = an_json_next(in, '}');
    } while (more > 0);
    return more < 0 ? -1 : 0;
}

/* A time in microseconds, as a number or a string holding one (some writers
 * quote their numbers), read exactly into nanoseconds. One that is no time
 * at all, or does not fit, leaves its event out. */
static int read_time(reader *r, const char *key, int64_t *ns)
{
    int rc = 0, fit = AN_TIME_OK;
    if (wrong_type(r, key, "a number", &rc))
        return rc;
    if (an_json_peek(&r->in) != '"') {
        rc = an_json_time_ns_fit(&r->in, ns, &fit);
    } else {
        if (an_json_string(&r->in, &r->val) != 0)
            return -1;
        const char *s = r->val.data ? r->val.data : "";
        char *end;
        if (an_us_text_to_ns(s, r->val.len, ns) != 0) {
            double v = strtod(s, &end);
            if (end == s || *end) {
                event_bad(r, LEFT_FORM, "\"%s\": expected a number, found the string \"%.40s\"", key, s);
                return 0;
            }
            fit = an_us_double_to_ns(v, ns);
        }
    }
    if (rc == 0 && fit == AN_TIME_OK && (*ns >= AN_TIME_LIMIT_NS || *ns <= -AN_TIME_LIMIT_NS))
        fit = AN_TIME_TOO_BIG;
    if (rc == 0 && fit != AN_TIME_OK)
        event_bad(r, LEFT_TIME, "\"%s\" is %s", key,
                  fit == AN_TIME_NOT_FINITE ? "not a finite number"
                                            : "beyond the times mlprof takes (146 years either side of 0)");
    return rc;
}

/* pid and tid: numbers, or strings ("stream 7") given numbers of their own
 * (AN_NAMED_ID_FIRST down, so that none is -1 or another id with a meaning)
 * and kept as the track's name. */
static int read_track_id(reader *r, int64_t *out, int *named)
{
    if (an_json_peek(&r->in) != '"') {
        double v;
        int is_int;
        if (an_json_number(&r->in, &v, out, &is_int) != 0)
            return -1;
        return 0;
    }
    if (an_json_string(&r->in, &r->val) != 0)
        return -1;
    const char *s = r->val.data ? r->val.data : "";
    char *end;
    long long n = strtoll(s, &end, 10);
    if (*s && !*end) {
        *out = n;
        return 0;
    }
    mlprof__map_entry *e = mlprof__map_slot(&r->string_ids, s, r->val.len);
    if (!e)
        return an_input_fail(&r->in, "out of memory");
    if (!e->value)
        e->value = (void *)(uintptr_t)(++r->next_string_id); /* its ordinal, from 1 */
    *out = AN_NAMED_ID_FIRST - (int64_t)(uintptr_t)e->value;
    *named = 1;
    return 0;
}

static uint64_t read_id(reader *r)
{
    if (an_json_peek(&r->in) != '"') {
        double v;
        int64_t iv;
        int is_int;
        if (an_json_number(&r->in, &v, &iv, &is_int) != 0)
            return 0;
        return (uint64_t)iv;
    }
    if (an_json_string(&r->in, &r->val) != 0 || !r->val.data)
        return 0;
    char *end;
    unsigned long long n = strtoull(r->val.data, &end, 0);
    return *end ? mlprof__hash(r->val.data, r->val.len) : n;
}

/* "id2": {"local": ID} or {"global": ID}, the scope into *form. */
static int read_id2(reader *r, uint64_t *id, uint8_t *form)
{
    an_input *in = &r->in;
    if (an_json_peek(in) != '{')
        return an_json_skip(in, NULL);
    int more = an_json_open(in, '{', "'{' to start id2");
    while (more > 0) {
        if (an_json_key(in, &r->val) != 0)
            return -1;
        int local = r->val.len == 5 && memcmp(r->val.data, "local", 5) == 0;
        int global = r->val.len == 6 && memcmp(r->val.data, "global", 6) == 0;
        if (local || global) {
            *id = read_id(r);
            if (in->failed)
                return -1;
            *form = local ? AN_ID2_LOCAL : AN_ID2_GLOBAL;
        } else if (an_json_skip(in, NULL) != 0) {
            return -1;
        }
        more = an_json_next(in, '}');
    }
    return more < 0 ? -1 : 0;
}

int an_trace_add_name(an_trace *t, int64_t pid, int64_t tid, const char *name)
{
    for (size_t i = 0; i < t->nnames; i++) {
        if (t->names[i].pid == pid && t->names[i].tid == tid) {
            t->names[i].name = name;
            return 0;
        }
    }
    an_name *n = grow_array(t->names, &t->namecap, t->nnames, sizeof *t->names);
    if (!n)
        return -1;
    t->names = n;
    t->names[t->nnames++] = (an_name){pid, tid, name};
    return 0;
}

static open_stack *track_stack(reader *r, int64_t pid, int64_t tid)
{
    int64_t key[2] = {pid, tid};
    mlprof__map_entry *e = mlprof__map_slot(&r->tracks, (const char *)key, sizeof key);
    if (!e)
        return NULL;
    if (!e->value)
        e->value = mlprof__calloc(1, sizeof(open_stack));
    return e->value;
}

static void note_span(an_trace *t, int64_t from, int64_t to)
{
    if (from < t->t_min)
        t->t_min = from;
    if (to > t->t_max)
        t->t_max = to;
}

/* An end: closes the innermost begin of that name (or the innermost one).
 * Begins on a thread must nest; when an end closes one that is not the
 * innermost, those inside it stay open for their own ends (as Perfetto's
 * importer does): each is kept with the times the trace gives, the two
 * overlapping, and the end is counted for the note. */
static void close_begin(reader *r, an_event *end)
{
    an_trace *t = r->t;
    open_stack *s = track_stack(r, end->pid, end->tid);
    size_t k = s ? s->n : 0;
    if (k && end->name[0]) {
        while (k > 0 && t->ev[s->idx[k - 1]].name != end->name)
            k--;
    }
    if (k == 0) {
        t->unmatched_ends++;
        note_span(t, end->ts, end->ts);
        return;
    }
    an_event *b = &t->ev[s->idx[k - 1]];
    if (end->ts < b->ts || (b->ts < 0 && end->ts > INT64_MAX + b->ts)) {
        char why[200];
        if (end->ts < b->ts)
            snprintf(why, sizeof why, "an \"E\" of \"%.60s\" %.3f us before its \"B\"", b->name,
                     (double)(b->ts - end->ts) / 1000.0);
        else
            snprintf(why, sizeof why, "an \"E\" of \"%.60s\" beyond what 64-bit nanoseconds hold after its \"B\"",
                     b->name);
        count_left(r, &r->left[LEFT_TIME], why);
        t->skipped++;
        t->nargs = end->args;
        return; /* its begin waits for another end */
    }
    if (k < s->n) {
        char why[200];
        snprintf(why, sizeof why, "\"%.60s\" closed while \"%.60s\" inside it was open", b->name,
                 t->ev[s->idx[s->n - 1]].name);
        count_left(r, &r->misnested, why);
    }
    memmove(&s->idx[k - 1], &s->idx[k], (s->n - k) * sizeof *s->idx);
    s->n--;
    b->ph = 'X';
    b->dur = end->ts - b->ts;
    note_span(t, b->ts, end->ts);
    if (end->nargs) { /* the end's arguments join the begin's */
        if (b->args + b->nargs != end->args) {
            size_t first = t->nargs;
            for (uint32_t i = 0; i < b->nargs; i++) {
                an_arg *a = new_arg(t);
                if (!a)
                    return;
                *a = t->args[b->args + i];
            }
            for (uint32_t i = 0; i < end->nargs; i++) {
                an_arg *a = new_arg(t);
                if (!a)
                    return;
                *a = t->args[end->args + i];
            }
            b->args = (uint32_t)first;
        }
        b->nargs += end->nargs;
    }
}

enum { K_OTHER, K_STRING, K_TIME, K_PID, K_TID, K_ID, K_ARGS, K_ID2, K_BIND_ID, K_FLOW_IN, K_FLOW_OUT };

/* Which member of an event a key is: name, cat, ph, bp and s are strings. */
static int event_key(const char *k, size_t n)
{
    switch (n) {
    case 1: return k[0] == 's' ? K_STRING : K_OTHER;
    case 2:
        if (memcmp(k, "ts", 2) == 0)
            return K_TIME;
        if (memcmp(k, "ph", 2) == 0 || memcmp(k, "bp", 2) == 0)
            return K_STRING;
        return memcmp(k, "id", 2) == 0 ? K_ID : K_OTHER;
    case 3:
        if (memcmp(k, "cat", 3) == 0)
            return K_STRING;
        if (memcmp(k, "dur", 3) == 0)
            return K_TIME;
        if (memcmp(k, "pid", 3) == 0)
            return K_PID;
        if (memcmp(k, "tid", 3) == 0)
            return K_TID;
        return memcmp(k, "id2", 3) == 0 ? K_ID2 : K_OTHER;
    case 4:
        if (memcmp(k, "name", 4) == 0)
            return K_STRING;
        return memcmp(k, "args", 4) == 0 ? K_ARGS : K_OTHER;
    case 7:
        if (memcmp(k, "bind_id", 7) == 0)
            return K_BIND_ID;
        return memcmp(k, "flow_in", 7) == 0 ? K_FLOW_IN : K_OTHER;
    case 8: return memcmp(k, "flow_out", 8) == 0 ? K_FLOW_OUT : K_OTHER;
    default: return K_OTHER;
    }
}

/* What keeps a read event from being kept, when its members were each
 * fine: r->bad is then set. */
static void check_event(reader *r, const an_event *e, int has_ph, int has_ts, int has_dur)
{
    if (!e->ph) {
        event_bad(r, LEFT_FORM, has_ph ? "an empty \"ph\"" : "no \"ph\"");
    } else if (e->ph == 'M') {
        return; /* metadata needs no time */
    } else if (!strchr("XBEiCstfben", e->ph)) {
        event_bad(r, LEFT_PHASE, "\"ph\":\"%c\"", e->ph);
    } else if (!has_ts) {
        event_bad(r, LEFT_FORM, "an \"%c\" without \"ts\"", e->ph);
    } else if (e->ph == 'X' && !has_dur) {
        event_bad(r, LEFT_FORM, "an \"X\" without \"dur\"");
    } else if (has_dur && e->dur < 0) {
        event_bad(r, LEFT_TIME, "\"dur\" is negative (%.3f us)", (double)e->dur / 1000.0);
    } else if (has_dur && e->dur >= AN_TIME_LIMIT_NS - e->ts) { /* both below the limit: no overflow here */
        event_bad(r, LEFT_TIME, "\"ts\" + \"dur\" is beyond the times mlprof takes (146 years either side of 0)");
    }
}

static int read_event(reader *r)
{
    an_input *in = &r->in;
    an_trace *t = r->t;
    an_event e;
    memset(&e, 0, sizeof e);
    e.name = e.cat = "";
    e.parent = -1;
    e.args = (uint32_t)t->nargs;
    int has_ph = 0, has_ts = 0, has_dur = 0, named_pid = 0, named_tid = 0, has_bind = 0;
    uint64_t bind_id = 0;
    uint8_t flow_dir = 0; /* AN_FLOW_IN, AN_FLOW_OUT */
    const char *pid_name = NULL, *tid_name = NULL;
    r->bad = -1;
    if (an_json_peek(in) >= 0)
        r->event_at = in->base + in->pos;
    int more = an_json_open(in, '{', "'{' to start an event");
    if (more <= 0) {
        if (more == 0) {
            count_left(r, &r->left[LEFT_FORM], "an empty object");
            t->skipped++;
        }
        return more;
    }
    do {
        if (an_json_key(in, &r->key) != 0)
            return -1;
        const char *k = r->key.data ? r->key.data : "";
        int rc = 0;
        int which = event_key(k, r->key.len);
        if (which == K_STRING) {
            int c = an_json_peek(in);
            mlprof__sb *text = &r->val;
            if (c == '"') {
                rc = an_json_string(in, text);
            } else if (k[0] == 'p' || c == 'n' || (k[0] != 'n' && k[0] != 'c')) {
                rc = an_json_skip(in, NULL); /* null: none given */
                if (k[0] == 'p')
                    event_bad(r, LEFT_FORM, "\"ph\": expected a string, found %s", json_kind(c));
                text = NULL;
            } else { /* a name or category given as a number (or other value): its text */
                text = &r->raw;
                mlprof__sb_reset(text);
                rc = an_json_skip(in, text);
            }
            if (rc == 0 && text) {
                const char *s = text->data ? text->data : "";
                has_ph |= k[0] == 'p';
                if (k[0] == 'n')
                    e.name = an_intern(t, s, text->len);
                else if (k[0] == 'c')
                    e.cat = an_intern(t, s, text->len);
                else if (k[0] == 'p')
                    e.ph = s[0];
                else if (k[0] == 's')
                    e.scope = s[0] == 'g' || s[0] == 'p' || s[0] == 't' ? s[0] : 0;
                else
                    e.flow_enclosing = s[0] == 'e';
                if (!e.name || !e.cat)
                    return an_input_fail(in, "out of memory");
            }
        } else if (which == K_TIME) {
            int64_t ns = 0;
            if ((rc = read_time(r, k[0] == 't' ? "ts" : "dur", &ns)) == 0) {
                if (k[0] == 't') {
                    e.ts = ns;
                    has_ts = 1;
                } else {
                    e.dur = ns;
                    has_dur = 1;
                }
            }
        } else if (which == K_PID) {
            if (!wrong_type(r, "pid", "a number or a string", &rc)) {
                rc = read_track_id(r, &e.pid, &named_pid);
                if (named_pid)
                    pid_name = an_intern(t, r->val.data, r->val.len);
            }
        } else if (which == K_TID) {
            if (!wrong_type(r, "tid", "a number or a string", &rc)) {
                rc = read_track_id(r, &e.tid, &named_tid);
                if (named_tid)
                    tid_name = an_intern(t, r->val.data, r->val.len);
            }
        } else if (which == K_ID) {
            if (!wrong_type(r, "id", "a number or a string", &rc)) {
                e.id = read_id(r);
                rc = in->failed ? -1 : 0;
            }
        } else if (which == K_ID2) {
            rc = read_id2(r, &e.id, &e.id_form);
        } else if (which == K_BIND_ID) {
            if (!wrong_type(r, "bind_id", "a number or a string", &rc)) {
                bind_id = read_id(r);
                has_bind = 1;
                rc = in->failed ? -1 : 0;
            }
        } else if (which == K_FLOW_IN || which == K_FLOW_OUT) {
            if (an_json_peek(in) == 't')
                flow_dir |= which == K_FLOW_IN ? AN_FLOW_IN : AN_FLOW_OUT;
            rc = an_json_skip(in, NULL);
        } else if (which == K_ARGS && an_json_peek(in) == '{') {
            rc = read_args(r, &e);
        } else {
            rc = an_json_skip(in, NULL);
        }
        if (rc != 0)
            return -1;
        more = an_json_next(in, '}');
    } while (more > 0);
    if (more < 0)
        return -1;
    if ((e.ph == 'X' || e.ph == 'B') && (has_bind || flow_dir)) { /* a flow bound to this slice */
        e.id = has_bind ? bind_id : e.id;
        e.id_form = (uint8_t)(AN_ID_BIND | flow_dir);
    }

    if (e.ph == 'I')
        e.ph = 'i';
    if (r->bad < 0)
        check_event(r, &e, has_ph, has_ts, has_dur);
    if (r->bad >= 0) {
        count_left(r, &r->left[r->bad], r->bad_why);
        t->skipped++;
        t->nargs = e.args;
        r->events += e.ph && has_ts && r->bad != LEFT_PHASE; /* an event, though not one to keep */
        return 0;
    }
    if (pid_name)
        an_trace_add_name(t, e.pid, AN_PROCESS_TID, pid_name);
    if (tid_name)
        an_trace_add_name(t, e.pid, e.tid, tid_name);
    r->events++;
    if (e.ph == 'M') {
        const an_arg *a = an_event_arg(t, &e, "name");
        if (a && a->str && strcmp(e.name, "process_name") == 0)
            an_trace_add_name(t, e.pid, AN_PROCESS_TID, a->str);
        else if (a && a->str && strcmp(e.name, "thread_name") == 0)
            an_trace_add_name(t, e.pid, e.tid, a->str);
        t->nargs = e.args; /* metadata keeps nothing else */
        return 0;
    }
    if (e.ph == 'E') {
        close_begin(r, &e);
        return 0;
    }
    note_span(t, e.ts, e.ts + e.dur);
    an_event *ev = grow_array(t->ev, &t->evcap, t->nev, sizeof *t->ev);
    if (!ev)
        return an_input_fail(in, "out of memory");
    t->ev = ev;
    if (e.ph == 'B') {
        open_stack *s = track_stack(r, e.pid, e.tid);
        size_t *idx = s ? grow_array(s->idx, &s->cap, s->n, sizeof *s->idx) : NULL;
        if (!idx)
            return an_input_fail(in, "out of memory");
        s->idx = idx;
        s->idx[s->n++] = t->nev;
    }
    t->ev[t->nev++] = e;
    return 0;
}

/* The events array. bare: the file is the array itself, whose closing bracket
 * (and a last comma) may be missing, as the format allows for streamed files. */
static int read_events(reader *r, int bare)
{
    an_input *in = &r->in;
    int open = an_json_open(in, '[', "'[' to start the events");
    r->has_events |= open >= 0;
    if (open <= 0)
        return open;
    for (;;) {
        if (bare && an_json_peek(in) < 0)
            return 0;
        r->entries++;
        if (read_event(r) != 0)
            return -1;
        if (bare && an_json_peek(in) < 0)
            return 0;
        int more = an_json_next(in, ']');
        if (more <= 0)
            return more;
    }
}

static int read_object(reader *r)
{
    an_input *in = &r->in;
    an_trace *t = r->t;
    int more = an_json_open(in, '{', "'{'");
    if (more <= 0)
        return more;
    do {
        if (an_json_key(in, &r->key) != 0)
            return -1;
        const char *k = r->key.data ? r->key.data : "";
        int rc;
        if (strcmp(k, "traceEvents") == 0) {
            rc = read_events(r, 0);
        } else if (strcmp(k, "stackFrames") == 0 || strcmp(k, "samples") == 0) {
            t->json_stacks |= k[1] == 't' ? 1 : 2; /* read by flame.c where wanted, not here */
            rc = an_json_skip(in, NULL);
        } else if (strcmp(k, "otherData") == 0 || strcmp(k, "deviceProperties") == 0 ||
                   strcmp(k, "distributedInfo") == 0) {
            int other = k[0] == 'o';
            mlprof__sb_reset(&r->raw);
            rc = an_json_skip(in, &r->raw);
            const char *s = rc == 0 ? an_intern(t, r->raw.data, r->raw.len) : NULL;
            if (other)
                t->other_data = s;
            else if (k[0] == 'd' && k[1] == 'e')
                t->device_props = s;
            else
                t->distributed_info = s;
            if (other && s && strstr(s, "\"mlprof_version\""))
                t->writer = "mlprof";
            if (!other) {
                t->writer = "pytorch";
                t->system_clock = 1;
            }
        } else if (strcmp(k, "baseTimeNanoseconds") == 0 && an_json_peek(in) != '"') {
            double v;
            int is_int;
            int64_t base;
            rc = an_json_number(in, &v, &base, &is_int);
            t->base_time_ns = is_int && base > 0 ? base : 0; /* an epoch time, or none */
            t->system_clock = 1;
        } else {
            /* PyTorch's profiler (Kineto) stamps events with the system clock */
            if (strcmp(k, "schemaVersion") == 0 || strcmp(k, "traceName") == 0) {
                t->writer = "pytorch";
                t->system_clock = 1;
            }
            rc = an_json_skip(in, NULL);
        }
        if (rc != 0)
            return -1;
        more = an_json_next(in, '}');
    } while (more > 0);
    return more < 0 ? -1 : 0;
}

static int read_trace(an_trace *t, const char *path, const void *data, size_t n);

const char *an_json_member(const char *obj, const char *key, size_t *len)
{
    if (!obj || *obj != '{')
        return NULL;
    size_t klen = strlen(key);
    const char *p = obj + 1;
    while (*p && *p != '}') {
        if (*p == ',')
            p++;
        if (*p != '"')
            return NULL;
        const char *k = ++p; /* the key, escapes skipped over */
        while (*p && *p != '"')
            p += p[0] == '\\' && p[1] ? 2 : 1;
        int match = (size_t)(p - k) == klen && memcmp(k, key, klen) == 0;
        if (*p++ != '"' || *p++ != ':')
            return NULL;
        const char *v = p;
        int depth = 0;
        for (; *p; p++) { /* to the end of the value: a ',' or '}' at its own depth */
            if (*p == '"') {
                for (p++; *p && *p != '"'; p++)
                    p += p[0] == '\\' && p[1];
                if (!*p)
                    return NULL;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (depth-- == 0)
                    break;
            } else if (*p == ',' && depth == 0) {
                break;
            }
        }
        if (match) {
            *len = (size_t)(p - v);
            return v;
        }
    }
    return NULL;
}

/* mlprof's traces say who wrote them and on which clock in otherData,
 * whichever of otherData and distributedInfo (Kineto's, which mlprof writes
 * too) came first; a Perfetto trace of mlprof has its rank only there, as
 * distributed_* members, from which distributedInfo is made. */
static void mlprof_identity(an_trace *t)
{
    const char *o = t->other_data;
    if (!o || !strstr(o, "\"mlprof_version\""))
        return;
    t->writer = "mlprof";
    if (strstr(o, "\"clock_domain\":\"CLOCK_MONOTONIC\""))
        t->system_clock = 0;
    if (t->distributed_info || !strstr(o, "\"distributed_rank\":"))
        return;
    static const char *const keys[] = {"rank", "world_size", "local_rank", "local_world_size", "host", "job_id",
                                       "source"};
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[40];
        size_t len;
        snprintf(key, sizeof key, "distributed_%s", keys[i]);
        const char *v = an_json_member(o, key, &len);
        if (!v)
            continue;
        mlprof__sb_printf(&sb, "%s\"%s\":%.*s", sb.len ? "," : "{", keys[i], (int)len, v);
    }
    mlprof__sb_putc(&sb, '}');
    if (!sb.failed && sb.data[0] == '{')
        t->distributed_info = an_intern(t, sb.data, sb.len);
    mlprof__sb_free(&sb);
}

/* A Perfetto trace that mlprof export wrote from JSON keeps the JSON's own
 * top-level members in otherData (pfexport.c): they are read back as if
 * the trace had them. */
static void exported_members(an_trace *t)
{
    const char *o = t->other_data;
    size_t len;
    const char *v;
    if (!o || !t->format || strcmp(t->format, "perfetto") != 0 || !strstr(o, "\"exported_from\":"))
        return;
    if (!t->device_props && (v = an_json_member(o, "deviceProperties", &len)) && *v == '[')
        t->device_props = an_intern(t, v, len);
    if (!t->distributed_info && (v = an_json_member(o, "distributedInfo", &len)) && *v == '{')
        t->distributed_info = an_intern(t, v, len);
    if (!t->base_time_ns && (v = an_json_member(o, "baseTimeNanoseconds", &len)))
        t->base_time_ns = strtoll(v, NULL, 10);
    if ((v = an_json_member(o, "exported_system_clock", &len)) && len == 4 && memcmp(v, "true", 4) == 0)
        t->system_clock = 1;
}

int an_trace_read(an_trace *t, const char *path)
{
    return read_trace(t, path, NULL, 0);
}

int an_trace_read_mem(an_trace *t, const char *name, const void *data, size_t n)
{
    return read_trace(t, name, data ? data : "", n);
}

/* A file read whole that holds no event: valid JSON, but no trace (an
 * analysis of it would find nothing and say so as if all were well). */
static int not_a_trace(an_trace *t, const reader *r)
{
    mlprof__quoted_text short_path = mlprof__shortened(t->path);
    const char *path = short_path.s;
    if (!r->has_events)
        snprintf(t->error, sizeof t->error,
                 "%s: not a trace: a JSON object without a \"traceEvents\" array (a trace is an object with "
                 "one, or an array of events)",
                 path);
    else if (!r->entries)
        snprintf(t->error, sizeof t->error, "%s: not a trace: its array of events is empty", path);
    else
        snprintf(t->error, sizeof t->error,
                 "%s: not a trace: none of the %llu items of its array of events is an event (an object "
                 "with a \"ph\" and a \"ts\")",
                 path, (unsigned long long)r->entries);
    return -1;
}

/* The note of a JSON trace: the events left out, by kind, and the ends
 * that closed a begin out of order, each with its first. */
static void json_note(reader *r)
{
    static const char *const kinds[LEFT_N] = {
        [LEFT_TIME] = "with a time that cannot be taken",
        [LEFT_FORM] = "malformed",
        [LEFT_PHASE] = "of a phase mlprof does not read",
    };
    an_trace *t = r->t;
    mlprof__sb note;
    mlprof__sb_init(&note);
    mlprof__sb_printf(&note, "%s: ", mlprof__shortened(t->path).s);
    size_t head = note.len;
    int nkinds = 0;
    for (int k = 0; k < LEFT_N; k++)
        nkinds += r->left[k].n > 0;
    if (t->skipped)
        mlprof__sb_printf(&note, "%llu event%s left out%s", (unsigned long long)t->skipped,
                          t->skipped == 1 ? "" : "s", nkinds > 1 ? ": " : ", ");
    const char *sep = "";
    for (int k = 0; k < LEFT_N; k++) {
        const left_out *lo = &r->left[k];
        if (!lo->n)
            continue;
        if (nkinds > 1)
            mlprof__sb_printf(&note, "%s%llu ", sep, (unsigned long long)lo->n);
        mlprof__sb_printf(&note, "%s (the first: %s)", kinds[k], lo->first);
        sep = ", ";
    }
    if (r->misnested.n)
        mlprof__sb_printf(&note,
                          "%s%llu end%s (\"E\") closed a begin that was not the innermost on its thread; the "
                          "begins inside it stayed open for their own ends, so they overlap instead of nesting "
                          "(the first: %s)",
                          note.len > head ? "; " : "", (unsigned long long)r->misnested.n,
                          r->misnested.n == 1 ? "" : "s", r->misnested.first);
    if (note.len > head && !note.failed)
        snprintf(t->note, sizeof t->note, "%s", note.data);
    mlprof__sb_free(&note);
}

/* From the file at path, or from data when it is not NULL. */
static int read_trace(an_trace *t, const char *path, const void *data, size_t n)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    t->writer = "";
    t->t_min = INT64_MAX;
    t->t_max = INT64_MIN;
    mlprof__map_init(&t->strings);
    reader r;
    memset(&r, 0, sizeof r);
    r.t = t;
    mlprof__map_init(&r.tracks);
    mlprof__map_init(&r.string_ids);
    int rc = data ? an_input_open_mem(&r.in, path, data, n) : an_input_open(&r.in, path);
    int opened = rc == 0;
    t->format = "json";
    if (rc == 0 && an_pftrace_detect(&r.in, path)) {
        rc = an_pftrace_read(t, &r.in);
    } else if (rc == 0) {
        int c = an_json_peek(&r.in);
        if (c == '[')
            rc = read_events(&r, 1);
        else if (c == '{')
            rc = read_object(&r);
        else if (c < 0 && !r.in.failed)
            rc = an_input_fail(&r.in, "the file is empty");
        else if (!r.in.failed)
            rc = an_input_fail(&r.in, "expected '{' or '[' at the start of a trace, found '%c'", c);
        else
            rc = -1;
        if (rc == 0 && an_json_peek(&r.in) >= 0)
            rc = an_input_fail(&r.in, "unexpected data after the end of the trace");
        if (rc == 0 && !r.events)
            rc = not_a_trace(t, &r);
        else
            json_note(&r);
    }
    if (rc == 0 && opened)
        rc = an_input_finish(&r.in); /* a gzip file whose end is wrong, after all its data was read */
    /* begins never ended are not durations */
    for (size_t i = 0; i < r.tracks.cap; i++) {
        open_stack *s = r.tracks.slots[i].key ? r.tracks.slots[i].value : NULL;
        if (!s)
            continue;
        for (size_t j = 0; j < s->n; j++)
            t->ev[s->idx[j]].ph = 'U';
        t->unclosed_begins += s->n;
        mlprof__free(s->idx);
        mlprof__free(s);
    }
    if (r.in.failed) {
        snprintf(t->error, sizeof t->error, "%s", r.in.error);
        t->partial = opened; /* what was read before the problem is kept */
        rc = -1;
    }
    mlprof__map_free(&r.tracks);
    mlprof__map_free(&r.string_ids);
    mlprof__sb_free(&r.key);
    mlprof__sb_free(&r.val);
    mlprof__sb_free(&r.raw);
    an_input_close(&r.in);
    if (t->t_min == INT64_MAX)
        t->t_min = t->t_max = 0;
    mlprof_identity(t);
    exported_members(t);
    if (!t->writer[0]) {
        for (size_t i = 0; i < t->nev && i < 1000; i++) {
            const char *c = t->ev[i].cat;
            if (strcmp(c, "cpu_op") == 0 || strcmp(c, "kernel") == 0 || strcmp(c, "cuda_runtime") == 0) {
                t->writer = "pytorch";
                break;
            }
        }
    }
    return rc;
}

void an_trace_free(an_trace *t)
{
    mlprof__free(t->ev);
    mlprof__free(t->args);
    mlprof__free(t->names);
    mlprof__map_free(&t->strings);
    mlprof__free(t->snodes);
    mlprof__free(t->ssamples);
    mlprof__map_free(&t->snode_index);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------- queries */

const an_arg *an_event_arg(const an_trace *t, const an_event *e, const char *key)
{
    for (uint32_t i = 0; i < e->nargs; i++) {
        const an_arg *a = &t->args[e->args + i];
        if (strcmp(a->key, key) == 0)
            return a;
    }
    return NULL;
}

const an_arg *an_event_arg_any(const an_trace *t, const an_event *e, const char *const *keys)
{
    for (; *keys; keys++) {
        const an_arg *a = an_event_arg(t, e, *keys);
        if (a)
            return a;
    }
    return NULL;
}

double an_event_num(const an_trace *t, const an_event *e, const char *const *keys, double def)
{
    return an_arg_num(an_event_arg_any(t, e, keys), def);
}

const char *an_other_data_str(const an_trace *t, const char *key, char *buf, size_t len)
{
    /* otherData is kept as compact JSON: "key":"value" with the value escaped */
    if (!t->other_data || !len)
        return NULL;
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(t->other_data, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < len) {
        if (*p == '\\' && p[1])
            p++;
        buf[n++] = *p++;
    }
    buf[n] = '\0';
    return buf;
}

const char *an_thread_name(const an_trace *t, int64_t pid, int64_t tid)
{
    for (size_t i = 0; i < t->nnames; i++) {
        if (t->names[i].pid == pid && t->names[i].tid == tid)
            return t->names[i].name;
    }
    return NULL;
}

const char *an_process_name(const an_trace *t, int64_t pid)
{
    return an_thread_name(t, pid, AN_PROCESS_TID);
}

/* ----------------------------------------------------------- self time */

static const an_event *g_sort_ev;

static int by_track_time(const void *pa, const void *pb)
{
    const an_event *a = &g_sort_ev[*(const size_t *)pa], *b = &g_sort_ev[*(const size_t *)pb];
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->dur != b->dur)
        return a->dur > b->dur ? -1 : 1; /* the enclosing one first */
    return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

void an_sort_by_track(const an_trace *t, size_t *idx, size_t n)
{
    g_sort_ev = t->ev;
    mlprof__sort(idx, n, sizeof *idx, by_track_time);
}

void an_compute_self(an_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nev; i++)
        n += t->ev[i].ph == 'X';
    size_t *order = n ? mlprof__malloc(n * sizeof *order) : NULL;
    size_t *stack = n ? mlprof__malloc(n * sizeof *stack) : NULL;
    if (!order || !stack) {
        mlprof__free(order);
        mlprof__free(stack);
        for (size_t i = 0; i < t->nev; i++)
            t->ev[i].self = t->ev[i].dur;
        return;
    }
    n = 0;
    for (size_t i = 0; i < t->nev; i++) {
        t->ev[i].self = t->ev[i].dur;
        t->ev[i].parent = -1;
        if (t->ev[i].ph == 'X')
            order[n++] = i;
    }
    an_sort_by_track(t, order, n);
    size_t depth = 0;
    for (size_t k = 0; k < n; k++) {
        an_event *e = &t->ev[order[k]];
        /* a parent holds its children whole: leave the spans that ended before
         * this one starts, that it outlasts (they overlap, they do not nest:
         * as PyTorch's profiler decides), or that are on another track */
        while (depth) {
            const an_event *top = &t->ev[stack[depth - 1]];
            if (top->pid == e->pid && top->tid == e->tid && e->ts < top->ts + top->dur &&
                e->ts + e->dur <= top->ts + top->dur)
                break;
            depth--;
        }
        if (depth) {
            an_event *parent = &t->ev[stack[depth - 1]];
            parent->self -= e->dur;
            if (parent->self < 0)
                parent->self = 0;
            e->parent = (int32_t)stack[depth - 1];
        }
        stack[depth++] = order[k];
    }
    mlprof__free(order);
    mlprof__free(stack);
}

/* The rank distributedInfo gives (PyTorch's traces of a distributed job), or -1. */
long long an_trace_rank(const an_trace *t)
{
    const char *p = t->distributed_info ? strstr(t->distributed_info, "\"rank\":") : NULL;
    if (!p)
        return -1;
    char *end;
    long long r = strtoll(p + 7, &end, 10);
    return end != p + 7 && r >= 0 ? r : -1;
}

long long an_dist_info_world_size(const char *info)
{
    size_t len;
    const char *v = info && *info == '{' ? an_json_member(info, "world_size", &len) : NULL;
    if (!v)
        return -1;
    char *end;
    long long w = strtoll(v, &end, 10);
    return end != v && w > 0 ? w : -1;
}

const char *an_dist_info_job_id(const char *info, char *buf, size_t len)
{
    size_t n;
    const char *v = info && *info == '{' && len ? an_json_member(info, "job_id", &n) : NULL;
    if (!v || !n || strncmp(v, "null", n) == 0)
        return NULL;
    size_t k = 0;
    if (*v == '"') { /* a string, its escapes undone (the few a job id may hold) */
        for (const char *p = v + 1; p < v + n - 1 && k + 1 < len; p++) {
            if (*p == '\\' && p + 1 < v + n - 1)
                p++;
            buf[k++] = *p;
        }
    } else { /* a number, as written */
        for (; k < n && k + 1 < len; k++)
            buf[k] = v[k];
    }
    buf[k] = '\0';
    return k ? buf : NULL;
}

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

int an_jobs_differ(const char *const *job, const long long *world, const char *const *what, size_t n,
                   mlprof__sb *desc)
{
    int differ = 0;
    for (size_t i = 1; i < n && !differ; i++) {
        for (size_t j = 0; j < i && !differ; j++)
            differ = (job[i] && job[j] && strcmp(job[i], job[j]) != 0) ||
                     (world[i] > 0 && world[j] > 0 && world[i] != world[j]);
    }
    if (!differ)
        return 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && !(same_str(job[j], job[i]) && world[j] == world[i]))
            j++;
        if (j < i)
            continue; /* in the group of an earlier one */
        mlprof__sb_printf(desc, "%s", i ? "; " : "");
        if (job[i])
            mlprof__sb_printf(desc, "job %s", job[i]);
        else
            mlprof__sb_puts(desc, "no job id");
        if (world[i] > 0)
            mlprof__sb_printf(desc, ", world size %lld", world[i]);
        else
            mlprof__sb_puts(desc, ", no world size");
        mlprof__sb_puts(desc, ": ");
        for (size_t k = i, f = 1; k < n; k++) {
            if (same_str(job[k], job[i]) && world[k] == world[i]) {
                mlprof__sb_printf(desc, "%s%s", f ? "" : ", ", what[k]);
                f = 0;
            }
        }
    }
    return 1;
}
