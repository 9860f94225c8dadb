/* test_errors.c - the error table (codes, names, messages), the per-thread
 * last error, the version queries, and the allocator and log hooks. */
#include <pthread.h>

#include "testutil.h"

static size_t allocs;
static void *count_malloc(size_t n)
{
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    return malloc(n);
}
static void *count_realloc(void *p, size_t n)
{
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    return realloc(p, n);
}

static char logged[512];
static void on_log(int level, const char *msg, void *user)
{
    (void)level;
    snprintf(logged, sizeof logged, "%s|%s", (const char *)user, msg);
}

static void *other_thread(void *arg)
{
    (void)arg;
    /* a fresh thread has no error, and its errors stay its own */
    CHECK(strcmp(mlprof_last_error(), "") == 0, "fresh thread: %s", mlprof_last_error());
    CHECK(mlprof_set_config("level", "99") == MLPROF_EVALUE, "bad level");
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK(mlprof_set_allocator(NULL, realloc, free) == MLPROF_EINVAL, "incomplete allocator");
    CHECK_OK(mlprof_set_allocator(count_malloc, count_realloc, free));
    mlprof_domain_create("uses the allocator");
    CHECK(allocs > 0, "allocations went through the hook: %zu", allocs);

    CHECK(mlprof_version() == MLPROF_VERSION_NUMBER, "version %u", mlprof_version());
    CHECK(strcmp(mlprof_version_string(), MLPROF_VERSION_STRING) == 0, "version string");

    static const int codes[] = {MLPROF_OK, MLPROF_EINVAL, MLPROF_EKEY, MLPROF_EVALUE, MLPROF_ESTATE,
                                MLPROF_EIO, MLPROF_ENOMEM, MLPROF_EPARSE, MLPROF_EUNSUPPORTED,
                                MLPROF_ELIMIT};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *msg = mlprof_strerror(codes[i]), *name = mlprof_err_name(codes[i]);
        CHECK(msg && *msg && strcmp(msg, "unknown error") != 0, "message for %d", codes[i]);
        CHECK(strncmp(name, "MLPROF_", 7) == 0 && strcmp(name, "MLPROF_UNKNOWN") != 0, "name %s", name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(msg, mlprof_strerror(codes[j])) != 0, "distinct messages");
    }
    CHECK(strcmp(mlprof_err_name(MLPROF_EKEY), "MLPROF_EKEY") == 0, "EKEY's name");
    CHECK(strcmp(mlprof_strerror(12345), "unknown error") == 0, "unknown code");

    CHECK(mlprof_set_config("nope", "1") == MLPROF_EKEY, "unknown key");
    char mine[512];
    snprintf(mine, sizeof mine, "%s", mlprof_last_error());
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(strcmp(mine, mlprof_last_error()) == 0, "another thread's error does not touch ours");
    CHECK(strstr(mine, "nope") != NULL, "%s", mine);

    mlprof_set_log_handler(on_log, "ctx");
    CHECK_OK(mlprof_set_config("filename", "/nonexistent-dir/x/trace.json"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_span *s = mlprof_task_create(NULL, "t");
    mlprof_begin(s);
    mlprof_end(s);
    CHECK(mlprof_dump(0) == MLPROF_EIO, "unwritable path");
    CHECK(strstr(mlprof_last_error(), "/nonexistent-dir/x/trace.json") != NULL, "%s", mlprof_last_error());
    /* what was recorded is still there: written once the path works */
    CHECK_OK(mlprof_set_config("filename", tu_path("errors.json")));
    CHECK_OK(mlprof_dump(1));
    char *trace = tu_read_file(tu_path("errors.json"));
    CHECK(trace && strstr(trace, "\"name\":\"t\""), "event kept after a failed dump");
    free(trace);
    mlprof_set_log_handler(NULL, NULL);
    (void)logged;

    /* a folder is not a config file: an error naming it, not an empty file */
    CHECK(mlprof_load_config(tu_dir) == MLPROF_EIO, "config file that is a folder: %s", mlprof_last_error());
    CHECK(strstr(mlprof_last_error(), tu_dir) != NULL && strstr(mlprof_last_error(), "directory") != NULL,
          "the message names the folder: %s", mlprof_last_error());

    /* a long bad value: the message still names its key, shortened in the
     * middle and with its length */
    static char longv[6001];
    memset(longv, 'a', sizeof longv - 1);
    memcpy(longv + sizeof longv - 5, "TAIL", 4);
    CHECK(mlprof_set_config("counters", longv) == MLPROF_EVALUE, "6000-byte counters list");
    const char *msg = mlprof_last_error();
    CHECK(strstr(msg, "\"counters\"") != NULL && strstr(msg, "a...a") != NULL &&
              strstr(msg, "aTAIL\" (6000 bytes)") != NULL && strlen(msg) < 600,
          "key, shortened value and its length in: %s", msg);
    CHECK(mlprof_set_config(longv, "1") == MLPROF_EKEY, "6000-byte key");
    CHECK(strstr(mlprof_last_error(), "(6000 bytes)") != NULL, "shortened key: %s", mlprof_last_error());
    /* the same from a file: the file, the line and the key */
    const char *conf = tu_path("long_value.conf");
    FILE *f = fopen(conf, "w");
    if (f) {
        fprintf(f, "# a value too long\nlevel = 1\nhooks = %s\n", longv);
        fclose(f);
    }
    CHECK(mlprof_load_config(conf) == MLPROF_EVALUE, "long value in a file");
    msg = mlprof_last_error();
    CHECK(strstr(msg, conf) != NULL && strstr(msg, ":3: ") != NULL && strstr(msg, "\"hooks\"") != NULL &&
              strstr(msg, "(6000 bytes)") != NULL,
          "file, line, key and length in: %s", msg);

    /* NULL keys and values of arguments: an error or an empty string, never a crash */
    CHECK_OK(mlprof_set_config("filename", tu_path("errors_args.json")));
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(s);
    mlprof_arg_str(NULL, NULL);
    CHECK(strstr(mlprof_last_error(), "NULL key") != NULL, "NULL key is an error: %s", mlprof_last_error());
    mlprof_arg_str(NULL, "lost");
    mlprof_arg_int(NULL, 424242);
    CHECK(strstr(mlprof_last_error(), "mlprof_arg_int: NULL key") != NULL, "%s", mlprof_last_error());
    mlprof_arg_double(NULL, 4.5);
    CHECK(strstr(mlprof_last_error(), "mlprof_arg_double: NULL key") != NULL, "%s", mlprof_last_error());
    mlprof_arg_str("nullvalue", NULL);
    mlprof_arg_str("kept", "yes");
    mlprof_end(s);
    /* run-time names that are NULL are empty names */
    mlprof_begin_dynamic(NULL, NULL);
    mlprof_end_dynamic(NULL);
    mlprof_mark_dynamic(NULL, NULL, MLPROF_SCOPE_THREAD);
    CHECK_OK(mlprof_dump(1));
    trace = tu_read_file(tu_path("errors_args.json"));
    CHECK(trace && strstr(trace, "\"args\":{\"nullvalue\":\"\",\"kept\":\"yes\"}") != NULL &&
              strstr(trace, "lost") == NULL && strstr(trace, ":424242") == NULL && strstr(trace, ":4.5") == NULL,
          "NULL value is empty, NULL key not recorded: %s", trace ? trace : "(no trace)");
    free(trace);
    return tu_finish("test_errors");
}
