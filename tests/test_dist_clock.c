/*
 * test_dist_clock.c - mlprof_dist_clock_sample, the one writer of
 * otherData.clock_sync (the MPI hook's and mlprof.dist.sync()'s samples):
 * what a trace says of the samples given (offset, drift, worst bound), the
 * samples of one method and rank only, bad arguments refused by name, the
 * first kept and the newest last past 64, and samples given from several
 * threads at once.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlprof/mlprof.h"
#include "testutil.h"

static char *trace_now(void)
{
    char *s = NULL;
    CHECK_OK(mlprof_dump_string(&s));
    return s;
}

static void *sampler(void *arg)
{
    for (int i = 0; i < 50; i++)
        mlprof_dist_clock_sample("torch_pingpong", 1, 2, 1000000 + (uint64_t)(intptr_t)arg * 100 + (uint64_t)i, -5,
                                 7, 14, 3);
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_state(1));
    char *s = trace_now();
    CHECK(s && !strstr(s, "\"clock_sync\""), "no sample, no clock_sync");
    mlprof_free(s);

    /* two samples: offset -50 ms at 1 s, -50.1 ms at 2 s: a drift of -100000 ppb */
    CHECK_OK(mlprof_dist_clock_sample("torch_pingpong", 1, 2, 1000000000ull, -50000000, 20000, 40000, 32));
    CHECK_OK(mlprof_dist_clock_sample("torch_pingpong", 1, 2, 2000000000ull, -50100000, 30000, 60000, 32));
    s = trace_now();
    CHECK(s && strstr(s, "\"clock_sync\":{\"method\":\"torch_pingpong\",\"reference_rank\":0,\"rank\":1,"
                         "\"world_size\":2,\"samples\":[{\"at_ns\":1000000000,\"offset_ns\":-50000000,"
                         "\"bound_ns\":20000,\"rtt_ns\":40000,\"exchanges\":32},{\"at_ns\":2000000000,"
                         "\"offset_ns\":-50100000,\"bound_ns\":30000,\"rtt_ns\":60000,\"exchanges\":32}],"
                         "\"offset_ns\":-50000000,\"drift_ppb\":-100000,\"bound_ns\":30000}"),
          "clock_sync as the contract writes it: %.400s", s ? strstr(s, "clock_sync") : "(none)");
    mlprof_free(s);

    /* one trace, one method and one rank: the others refused, naming both */
    CHECK(mlprof_dist_clock_sample("mpi_pingpong", 1, 2, 3, 0, 1, 2, 1) == MLPROF_ESTATE, "another method");
    CHECK(strstr(mlprof_last_error(), "torch_pingpong") && strstr(mlprof_last_error(), "mpi_pingpong"), "%s",
          mlprof_last_error());
    CHECK(mlprof_dist_clock_sample("torch_pingpong", 0, 2, 3, 0, 1, 2, 1) == MLPROF_ESTATE, "another rank");
    /* bad arguments */
    CHECK(mlprof_dist_clock_sample(NULL, 1, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL, "no method");
    CHECK(mlprof_dist_clock_sample("", 1, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL, "empty method");
    CHECK(mlprof_dist_clock_sample("a\"b", 1, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL, "a quote in the method");
    CHECK(mlprof_dist_clock_sample("0123456789012345678901234567890123", 1, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL,
          "a method of 34 bytes");
    CHECK(mlprof_dist_clock_sample("torch_pingpong", 2, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL, "rank 2 of 2");
    CHECK(mlprof_dist_clock_sample("torch_pingpong", -1, 2, 3, 0, 1, 2, 1) == MLPROF_EINVAL, "rank -1");
    CHECK(mlprof_dist_clock_sample("torch_pingpong", 1, 2, 3, 0, 1, 2, -1) == MLPROF_EINVAL, "-1 exchanges");
    CHECK(strstr(mlprof_last_error(), "mlprof_dist_clock_sample"), "the error names the call: %s",
          mlprof_last_error());

    /* many threads at once, past the 64 kept: the first stays, the newest is last */
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, sampler, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_OK(mlprof_dist_clock_sample("torch_pingpong", 1, 2, 9000000000ull, -7, 5, 10, 3));
    s = trace_now();
    const char *cs = s ? strstr(s, "\"clock_sync\"") : NULL;
    CHECK(cs && tu_count(cs, "\"at_ns\"") == 64, "64 samples kept: %d", cs ? tu_count(cs, "\"at_ns\"") : -1);
    CHECK(cs && strstr(cs, "\"samples\":[{\"at_ns\":1000000000,"), "the first sample kept");
    CHECK(cs && strstr(cs, "{\"at_ns\":9000000000,\"offset_ns\":-7,\"bound_ns\":5,\"rtt_ns\":10,\"exchanges\":3}]"),
          "the newest last");
    mlprof_free(s);
    CHECK_OK(mlprof_set_state(0));
    return tu_finish("dist_clock");
}
