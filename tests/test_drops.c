/* test_drops.c - with a tiny buffer, events beyond it are dropped and counted
 * exactly, the program never blocks, and the loss is reported. */
#include "testutil.h"

#define PAIRS 10000

static int warnings;
static char advice[512];
static void on_log(int level, const char *msg, void *user)
{
    (void)user;
    if (level == MLPROF_LOG_WARN && strstr(msg, "dropped")) {
        warnings++;
        snprintf(advice, sizeof advice, "%s", msg);
    }
    fprintf(stderr, "log: %s\n", msg);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    mlprof_set_log_handler(on_log, NULL);
    CHECK_OK(mlprof_set_config("filename", tu_path("drops.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "64K"));
    mlprof_span *s = mlprof_task_create(mlprof_domain_create("drops"), "op");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < PAIRS; i++) {
        mlprof_begin(s);
        mlprof_end(s);
    }
    uint64_t dropped = mlprof_dropped_events();
    CHECK(dropped > 0 && dropped < 2 * PAIRS, "dropped %llu", (unsigned long long)dropped);
    CHECK(dropped % 2 == 0, "pairs are dropped whole here: %llu", (unsigned long long)dropped);
    CHECK(mlprof_set_config("buffer_size", "1M") == MLPROF_ESTATE, "buffer_size is fixed now");
    CHECK(strstr(mlprof_last_error(), "buffer_size") != NULL, "%s", mlprof_last_error());
    CHECK_OK(mlprof_dump(1));
    CHECK(warnings == 1, "one warning about the drops, got %d", warnings);
    CHECK(strstr(advice, "raise buffer_size or turn on continuous_dump") != NULL, "the advice fits: %s", advice);
    printf("dropped=%llu\n", (unsigned long long)dropped);
    return tu_finish("test_drops");
}
