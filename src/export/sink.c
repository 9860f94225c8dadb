/*
 * sink.c - what every sink shares: a walk over the JSON members that hold a
 * span's arguments, for the sinks that want them one by one (Perfetto's debug
 * annotations, SQLite's args table), and the checks of where a file sink's
 * output goes beside the trace.
 */
#include <stdio.h>
#include <string.h>

#include "sink.h"

/* The end of the JSON string that starts at s[i] (a quote), past its closing
 * quote; 0 if it does not end before n. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* The end of the JSON value that starts at s[i]: a string, an object or an
 * array (nested ones skipped whole), or a bare number, true, false or null. */
static size_t value_end(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return 0;
    if (s[i] == '"')
        return string_end(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = string_end(s, n, i);
                if (!i)
                    return 0;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return 0;
    }
    size_t start = i;
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']')
        i++;
    return i > start ? i : 0;
}

int mlprof__args_next(const char *args, size_t len, size_t *pos, mlprof__arg_view *a)
{
    size_t i = *pos;
    if (!args)
        return 0;
    while (i < len && (args[i] == ',' || args[i] == ' ' || args[i] == '\n'))
        i++;
    if (i >= len || args[i] != '"')
        return 0;
    size_t kend = string_end(args, len, i);
    if (!kend || kend >= len || args[kend] != ':')
        return 0;
    size_t vend = value_end(args, len, kend + 1);
    if (!vend)
        return 0;
    a->key = args + i + 1;
    a->key_len = kend - i - 2;
    a->value = args + kend + 1;
    a->value_len = vend - kend - 1;
    *pos = vend;
    return 1;
}

/* ------------------------------------------ where a file sink writes */

/* Nonzero the first time key and path come together (the last few kept):
 * what is said at every dump is said once. Under the control lock. */
static int first_time(const char *key, const char *path)
{
    static struct {
        const char *key;
        uint64_t hash;
    } said[16];
    static size_t next;
    uint64_t h = mlprof__hash(path, strlen(path));
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        if (said[i].key && strcmp(said[i].key, key) == 0 && said[i].hash == h)
            return 0;
    said[next].key = key;
    said[next].hash = h;
    next = (next + 1) % (sizeof said / sizeof said[0]);
    return 1;
}

int mlprof__sink_path_check(const mlprof__sink_dump *d, const char *key, const char *value, const char *path)
{
    if (!d->trace_path || !path[0] || mlprof__out_in_place(d->trace_path) || mlprof__out_in_place(path) ||
        !mlprof__same_file(path, d->trace_path))
        return MLPROF_OK;
    char msg[1024];
    snprintf(msg, sizeof msg,
             "%s=%s: %s is the trace's file, which it would replace: not written (the trace is); name another "
             "file",
             key, value, path);
    if (first_time(key, path))
        mlprof__log(MLPROF_LOG_ERROR, "%s", msg);
    return mlprof__fail(MLPROF_EINVAL, "%s", msg);
}

int mlprof__sink_auto_skipped(const char *trace_path) { return mlprof__out_in_place(trace_path); }

int mlprof__sink_auto_path(const char *trace_path, const char *suffix, char *buf, size_t len)
{
    buf[0] = '\0';
    if (mlprof__sink_auto_skipped(trace_path))
        return 1;
    const char *slash = strrchr(trace_path, '/'), *base = slash ? slash + 1 : trace_path;
    size_t stem = strlen(trace_path), n = strlen(base);
    if (n > 3 && strcmp(base + n - 3, ".gz") == 0) { /* run.json.gz and run.json give run.SUFFIX */
        stem -= 3;
        n -= 3;
    }
    for (size_t i = n; i-- > 1;) /* the extension, not a leading dot */
        if (base[i] == '.') {
            stem = (size_t)(base - trace_path) + i;
            break;
        }
    snprintf(buf, len, "%.*s%s", (int)stem, trace_path, suffix);
    return 0;
}

void mlprof__sink_note_skipped(const char *key, const char *trace_path)
{
    if (first_time(key, trace_path))
        mlprof__log(MLPROF_LOG_INFO,
                    "%s=auto is not written: its name comes from the trace's file, and the trace goes to %s, "
                    "written in place (a device, a FIFO, a descriptor); set %s to a path to have it",
                    key, trace_path, key);
}

/* ------------------------------------- the outputs a dump cannot write */

int mlprof__sink_failed(const mlprof__sink_dump *d, const char *key, int rc, int said)
{
    mlprof__sink_failures *f = d->failures;
    if (!f || rc == MLPROF_OK)
        return rc;
    if (f->n++ == 0) {
        const char *msg = mlprof_last_error();
        size_t k = strlen(key);
        f->rc = rc;
        /* "key: message", where the message does not start with its key */
        if (strncmp(msg, key, k) == 0 && (msg[k] == ' ' || msg[k] == ':' || msg[k] == '='))
            snprintf(f->first, sizeof f->first, "%s", msg[0] ? msg : key);
        else
            snprintf(f->first, sizeof f->first, "%s: %s", key, msg[0] ? msg : mlprof_err_name(rc));
    }
    size_t n = strlen(f->keys);
    if (n + strlen(key) + 3 < sizeof f->keys)
        snprintf(f->keys + n, sizeof f->keys - n, "%s%s", n ? ", " : "", key);
    if (!said)
        f->unsaid = 1;
    return rc;
}

/* What was said last of each output's failure, by key ("" once written
 * again). Under the control lock. */
static struct {
    char key[32];
    char said[1024];
} g_said[8];

static char *said_of(const char *key)
{
    size_t free_slot = sizeof g_said / sizeof g_said[0];
    for (size_t i = 0; i < sizeof g_said / sizeof g_said[0]; i++) {
        if (strcmp(g_said[i].key, key) == 0)
            return g_said[i].said;
        if (!g_said[i].key[0] && free_slot == sizeof g_said / sizeof g_said[0])
            free_slot = i;
    }
    if (free_slot == sizeof g_said / sizeof g_said[0] || strlen(key) >= sizeof g_said[0].key)
        return NULL; /* said every time */
    snprintf(g_said[free_slot].key, sizeof g_said[free_slot].key, "%s", key);
    g_said[free_slot].said[0] = '\0';
    return g_said[free_slot].said;
}

void mlprof__failure_text(const char *msg, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < len;) {
        if (strncmp(p, ".tmp-", 5) == 0) {
            const char *q = p + 5;
            while (*q >= '0' && *q <= '9')
                q++;
            if (q > p + 5 && *q == '-') {
                const char *e = ++q;
                while ((*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z'))
                    e++;
                if (e - q == 6) {
                    p = e;
                    continue;
                }
            }
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
}

int mlprof__sink_wrote(const mlprof__sink_dump *d, const char *key, const char *path, int rc)
{
    char *said = said_of(key);
    if (rc == MLPROF_OK) {
        if (said && said[0])
            mlprof__log(MLPROF_LOG_INFO, "%s: %s is written again", key, path);
        if (said)
            said[0] = '\0';
        return rc;
    }
    const char *msg = mlprof_last_error();
    char text[sizeof g_said[0].said];
    mlprof__failure_text(msg[0] ? msg : mlprof_err_name(rc), text, sizeof text);
    if (!said || strcmp(said, text) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: %s (what it holds is kept: the next dump writes it)", key,
                    msg[0] ? msg : mlprof_err_name(rc));
        if (said)
            snprintf(said, sizeof g_said[0].said, "%s", text);
    }
    return mlprof__sink_failed(d, key, rc, 1);
}

void mlprof__sink_forget_said(void) { memset(g_said, 0, sizeof g_said); }
