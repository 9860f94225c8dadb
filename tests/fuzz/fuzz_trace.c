/*
 * fuzz_trace.c - the trace reader and every analysis on arbitrary bytes (and
 * the same bytes as a ceilings file, and the roofline against fixed ones): no
 * input may crash, hang, leak or read out of bounds. Built with libFuzzer
 * (clang -fsanitize=fuzzer) in the ASan suite, and with replay.c as a plain
 * program that runs the kept corpus in every suite.
 */
#include <stddef.h>
#include <stdint.h>

#include "../../src/analyze/analyze.h"
#include "../../src/analyze/dist_ranks.h"
#include "../../src/analyze/gpu.h"
#include "../../src/analyze/merge.h"
#include "../../src/analyze/roofline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    an_trace t;
    an_trace_read_mem(&t, "fuzz.json", data, size); /* damaged input is fine; what was read is used */
    an_options o;
    an_options_default(&o);
    mlprof__sb out;
    mlprof__sb_init(&out);
    static const char *const groupings[] = {"name", "type,thread", "none", "input_shape,process",
                                            "bottom_op,op_stack"};
    for (size_t g = 0; g < sizeof groupings / sizeof groupings[0]; g++) {
        o.aggregate_by = groupings[g];
        o.aggregate = (int)(g % 5);
        o.format = (int)(g % 3);
        an_analyze(&t, &o, &out);
        mlprof__sb_reset(&out);
    }
    /* the filters, and the notes on those that keep nothing or on an order no row has */
    mlprof__sb notes;
    mlprof__sb_init(&notes);
    o.type = "op,Conv*,aten::mm";
    o.name = "a*";
    o.min_ns = 1000;
    o.order_by = "memory";
    o.notes = &notes;
    an_analyze(&t, &o, &out);
    mlprof__sb_reset(&out);
    o.format = AN_TABLE;
    an_analyze(&t, &o, &out);
    mlprof__sb_reset(&out);
    for (int f = AN_TABLE; f <= AN_CSV; f++) {
        an_kernels(&t, f, 5, &out, &notes);
        mlprof__sb_reset(&out);
    }
    an_gpu_options go;
    an_gpu_options_default(&go);
    for (go.csv = AN_GPU_CSV_IDLE; go.csv <= AN_GPU_CSV_OVERLAP; go.csv++) {
        an_kernels_with(&t, AN_CSV, 0, &go, &out, &notes);
        mlprof__sb_reset(&out);
    }
    an_diff_options d = {0, 10, 0};
    size_t regressions;
    an_diff(&t, &t, &o, &d, &out, &regressions);
    mlprof__sb_reset(&out);
    mlprof__sb_free(&notes);
    an_trace *two[2] = {&t, &t};
    an_merge_options mo = {NULL, NULL, NULL, 0};
    int method;
    char err[200];
    an_merge(two, 2, &mo, &out, &method, err, sizeof err);
    mlprof__sb_reset(&out);
    /* mlprof ranks: the trace as two ranks, the second later by 1 ms */
    an_dist_names names;
    an_dist_names_init(&names);
    an_dist_rank dr;
    if (an_dist_collect(&t, NULL, 0, &names, AN_DIST_SRC_NONE, &dr) == 0) {
        an_dist_input in[2] = {{0, "a", "file order", 3, 0, &dr}, {1, "b", "file order", -1, 1000000, &dr}};
        mlprof__sb_init(&notes);
        for (int f = 0; f <= AN_CSV + 1; f++) {
            o.format = f > AN_CSV ? AN_CSV : f;
            an_dist_report(in, 2, &names, "fuzz", "shared clock", NULL, &o, f > AN_CSV, &out, &notes);
            mlprof__sb_reset(&out);
        }
        mlprof__sb_free(&notes);
    }
    an_dist_rank_free(&dr);
    an_dist_names_free(&names);
    /* the bytes as a ceilings file; the roofline against them when they
     * read, else against round figures, to a table, JSON and a picture */
    ce_ceilings c;
    if (ce_read_mem(&c, "fuzz-ceilings.json", data, size, err, sizeof err) != 0) {
        memset(&c, 0, sizeof c);
        c.threads = 2;
        c.compute[c.ncompute++] = (ce_point){"fp32", 2, 0, 0, {1e11, 1.5e11, 2e11}};
        c.compute[c.ncompute++] = (ce_point){"fp64", 1, 0, 0, {4e10, 5e10, 6e10}};
        c.levels[c.nlevels++] = (ce_point){"L1", 2, 32768, 49152, {1e11, 2e11, 3e11}};
        c.levels[c.nlevels++] = (ce_point){"DRAM", 2, 1 << 26, 0, {1e10, 1.1e10, 1.2e10}};
    }
    mlprof__sb svg;
    mlprof__sb_init(&svg);
    mlprof__sb_init(&notes);
    rf_options ro = {0, "fuzz-ceilings.json"};
    size_t placed;
    an_options_default(&o);
    for (int f = AN_TABLE; f <= AN_JSON; f++) {
        o.format = f;
        rf_roofline(&t, &o, &c, &ro, &out, &svg, &notes, &placed, NULL);
        mlprof__sb_reset(&out);
        mlprof__sb_reset(&svg);
        ro.one_thread = 1;
    }
    mlprof__sb_free(&svg);
    mlprof__sb_free(&notes);
    mlprof__sb_free(&out);
    an_trace_free(&t);
    return 0;
}
