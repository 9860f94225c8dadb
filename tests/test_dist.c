/*
 * test_dist.c - rank identity as the library sees it, for dist_check.py,
 * which runs this program under each launcher's variables:
 *   test_dist [--mpi RANK SIZE] [--trace PATH] [NAME...]
 * prints distributedInfo as the traces get it ({} when no rank is known),
 * then each NAME as an output file name expands (mlprof__expand_path), one
 * per line; --mpi gives the MPI hook's word first; --trace records one span
 * and writes the trace to PATH (its name expanded like the others).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/record/dist.h"
#include "../src/record/produce.h"
#include "mlprof/mlprof.h"

int main(int argc, char **argv)
{
    mlprof_get_state(); /* the library reads MLPROF_* (the rank key) */
    const char *trace = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--mpi") == 0 && i + 2 < argc) {
            mlprof__dist_set_mpi(atoi(argv[i + 1]), atoi(argv[i + 2]));
            i += 2;
        } else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            trace = argv[++i];
        } else {
            fprintf(stderr, "test_dist: bad option %s\n", argv[i]);
            return 2;
        }
    }
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__dist_json(mlprof__dist_get(), &sb);
    printf("%s\n", sb.len ? sb.data : "{}");
    mlprof__sb_free(&sb);
    for (; i < argc; i++) {
        char buf[4200];
        mlprof__expand_path(argv[i], 1, buf, sizeof buf);
        printf("%s\n", buf);
    }
    if (trace) {
        if (mlprof_set_config("filename", trace) != MLPROF_OK || mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
            fprintf(stderr, "test_dist: %s\n", mlprof_last_error());
            return 1;
        }
        mlprof_domain *d = mlprof_domain_create("dist");
        mlprof_span *t = mlprof_task_create(d, "step");
        mlprof_begin(t);
        mlprof_end(t);
        if (mlprof_dump(1) != MLPROF_OK) {
            fprintf(stderr, "test_dist: %s\n", mlprof_last_error());
            return 1;
        }
    }
    return 0;
}
