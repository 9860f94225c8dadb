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

void mlprof__sink_note_skipped(const char *key, const char *trace_path)
{
    if (first_time(key, trace_path))
        mlprof__log(MLPROF_LOG_INFO,
                    "%s=auto is not written: its name comes from the trace's file, and the trace goes to %s, "
                    "written in place (a device, a FIFO, a descriptor); set %s to a path to have it",
                    key, trace_path, key);
}
