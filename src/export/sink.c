/*
 * sink.c - what every sink shares: a walk over the JSON members that hold a
 * span's arguments, for the sinks that want them one by one (Perfetto's debug
 * annotations, SQLite's args table).
 */
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
