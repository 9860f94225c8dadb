/*
 * layout_check.h - what the layout tests share (test_cupti_layout.c, and
 * test_cupti_prof_layout.cc in C++): a count of checks, and FIELD, which
 * compares a field of mlprof's declaration with CUPTI's by offset and size.
 */
#ifndef MLPROF_LAYOUT_CHECK_H
#define MLPROF_LAYOUT_CHECK_H

#include <stddef.h>
#include <stdio.h>

static int passed, failed;

static void same(const char *what, size_t ours, size_t theirs)
{
    if (ours == theirs) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "layout: %s is %zu in mlprof, %zu in CUPTI\n", what, ours, theirs);
    }
}

#define FIELD(ours, theirs, a, b)                                                     \
    do {                                                                              \
        same(#ours "." #a " offset", offsetof(ours, a), offsetof(theirs, b));         \
        same(#ours "." #a " size", sizeof(((ours *)0)->a), sizeof(((theirs *)0)->b)); \
    } while (0)

#endif /* MLPROF_LAYOUT_CHECK_H */
