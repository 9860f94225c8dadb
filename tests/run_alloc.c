/*
 * run_alloc.c - known allocations for the malloc hooks of `mlprof run`: seven
 * blocks of 12345 bytes, one through each way of allocating (malloc, calloc,
 * realloc from a 100-byte block, posix_memalign, aligned_alloc, memalign,
 * realloc in place of a NULL), three freed and four left live at exit.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 12345

int main(void)
{
    void *b[7];
    b[0] = malloc(SIZE);
    b[1] = calloc(1, SIZE);
    char *small = malloc(100);
    if (!small)
        return 1;
    memcpy(small, "grow", 5);
    b[2] = realloc(small, SIZE);
    if (posix_memalign(&b[3], 64, SIZE) != 0)
        return 1;
    b[4] = aligned_alloc(64, 12352); /* aligned_alloc wants a multiple of the alignment */
    b[5] = memalign(128, SIZE);
    b[6] = realloc(NULL, SIZE);
    for (int i = 0; i < 7; i++) {
        if (!b[i])
            return 1;
        memset(b[i], i, SIZE);
    }
    free(b[0]);
    free(b[2]);
    free(b[4]);
    printf("left live: %p %p %p %p\n", b[1], b[3], b[5], b[6]);
    return 0;
}
