/*
 * hw.c - the counters and sampler keys: parsing them, starting what they
 * name at each run, and the registry of what could not be opened, which
 * goes to stderr once and into the trace's metadata.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hw_internal.h"

/* ------------------------------------------------------------- parsing */

enum { K_PERF, K_RSS, K_PAPI, K_CPU, K_RAPL, K_NVML };

typedef struct item {
    int kind;
    int perf;                       /* K_PERF: the counter */
    char papi[MLPROF__PAPI_NAME];   /* K_PAPI: the event */
} item;

#define MAX_ITEMS (MLPROF__PERF_MAX + 1 + MLPROF__HW_PAPI_MAX + 3)

static const char k_perf_names[] =
    "cycles, instructions, cache-references, cache-misses, branches, branch-misses, ref-cycles, "
    "task-clock, page-faults, minor-faults, major-faults, context-switches, cpu-migrations";

/* Splits a comma list into items; sampler chooses which names are allowed. */
static int parse(const char *spec, int sampler, item *out, size_t *n, char *err, size_t len)
{
    size_t perf = 0, papi = 0;
    *n = 0;
    for (const char *p = spec; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (!k)
            break;
        item it;
        memset(&it, 0, sizeof it);
        it.perf = -1;
        if ((it.perf = mlprof__perf_find(p, k)) >= 0) {
            it.kind = K_PERF;
        } else if (k == 3 && memcmp(p, "rss", 3) == 0) {
            it.kind = K_RSS;
        } else if (!sampler && k > 5 && memcmp(p, "papi:", 5) == 0) {
            if (k - 5 >= MLPROF__PAPI_NAME) {
                snprintf(err, len, "PAPI event name \"%.*s\" is longer than %d bytes", (int)(k - 5), p + 5,
                         MLPROF__PAPI_NAME - 1);
                return -1;
            }
            it.kind = K_PAPI;
            memcpy(it.papi, p + 5, k - 5);
        } else if (sampler && k == 3 && memcmp(p, "cpu", 3) == 0) {
            it.kind = K_CPU;
        } else if (sampler && k == 4 && memcmp(p, "rapl", 4) == 0) {
            it.kind = K_RAPL;
        } else if (sampler && k == 4 && memcmp(p, "nvml", 4) == 0) {
            it.kind = K_NVML;
        } else {
            snprintf(err, len, "unknown %s \"%.*s\" (one of %s, %s)", sampler ? "sampler source" : "counter",
                     (int)k, p, k_perf_names,
                     sampler ? "cpu, rss, rapl, nvml" : "rss, papi:EVENT such as papi:PAPI_TOT_INS");
            return -1;
        }
        for (size_t i = 0; i < *n; i++) {
            if (out[i].kind == it.kind && out[i].perf == it.perf && strcmp(out[i].papi, it.papi) == 0) {
                snprintf(err, len, "\"%.*s\" named twice", (int)k, p);
                return -1;
            }
        }
        if ((it.kind == K_PERF && ++perf > MLPROF__PERF_MAX) ||
            (it.kind == K_PAPI && ++papi > MLPROF__HW_PAPI_MAX)) {
            snprintf(err, len, "more than %d %s counters", it.kind == K_PERF ? MLPROF__PERF_MAX : MLPROF__HW_PAPI_MAX,
                     it.kind == K_PERF ? "perf_event" : "PAPI");
            return -1;
        }
        if (*n == MAX_ITEMS) {
            snprintf(err, len, "more than %d items", MAX_ITEMS);
            return -1;
        }
        out[(*n)++] = it;
        p += k;
    }
    return 0;
}

int mlprof__hw_check(const char *spec, char *err, size_t len)
{
    item items[MAX_ITEMS];
    size_t n;
    return parse(spec, 0, items, &n, err, len);
}

int mlprof__hw_check_sampler(const char *spec, char *err, size_t len)
{
    item items[MAX_ITEMS];
    size_t n;
    return parse(spec, 1, items, &n, err, len);
}

/* --------------------------------------------------------- the slots */

/* The PAPI events of this run (set while stopped, read by the collector). */
static char g_papi[MLPROF__HW_PAPI_MAX][MLPROF__PAPI_NAME];
static size_t g_papi_n;

int mlprof__hw_index(const char *key, size_t len)
{
    int i = mlprof__perf_find(key, len);
    if (i >= 0)
        return i;
    if (len == 3 && memcmp(key, "rss", 3) == 0)
        return MLPROF__HW_RSS;
    for (size_t k = 0; k < g_papi_n; k++) {
        if (strncmp(g_papi[k], key, len) == 0 && g_papi[k][len] == '\0')
            return MLPROF__HW_PAPI + (int)k;
    }
    return -1;
}

const char *mlprof__hw_name(int index)
{
    if (index >= 0 && index < MLPROF__HW_PERF)
        return mlprof__perf_name(index);
    if (index == MLPROF__HW_RSS)
        return "rss";
    if (index >= MLPROF__HW_PAPI && (size_t)(index - MLPROF__HW_PAPI) < g_papi_n)
        return g_papi[index - MLPROF__HW_PAPI];
    return "";
}

/* ------------------------------------------------- what is unavailable */

#define MAX_UNAVAILABLE 64

static struct {
    pthread_mutex_t lock;
    size_t n;
    unsigned lost; /* more than MAX_UNAVAILABLE */
    struct {
        char what[96];
        char why[256];
    } e[MAX_UNAVAILABLE];
} U = {.lock = PTHREAD_MUTEX_INITIALIZER};

void mlprof__hw_unavailable(const char *what, const char *reason)
{
    pthread_mutex_lock(&U.lock);
    size_t i;
    for (i = 0; i < U.n; i++) {
        if (strcmp(U.e[i].what, what) == 0)
            break;
    }
    int fresh = i == U.n;
    if (fresh && U.n < MAX_UNAVAILABLE) {
        snprintf(U.e[U.n].what, sizeof U.e[U.n].what, "%s", what);
        snprintf(U.e[U.n].why, sizeof U.e[U.n].why, "%s", reason);
        U.n++;
    } else if (fresh) {
        U.lost++;
    }
    pthread_mutex_unlock(&U.lock);
    if (fresh)
        mlprof__log(MLPROF_LOG_WARN, "%s cannot be measured: %s; the rest goes on", what, reason);
}

/* -------------------------------------------------------- start, stop */

static int g_started; /* observers registered, sampler asked to run */
static char g_counters[256], g_sampler[256]; /* as they were at the start */

int mlprof__hw_start(void)
{
    const mlprof__config *c = &mlprof__g.cfg;
    if (g_started)
        return MLPROF_OK;
    snprintf(g_counters, sizeof g_counters, "%s", c->counters);
    snprintf(g_sampler, sizeof g_sampler, "%s", c->sampler);
    g_papi_n = 0;
    if (!c->counters[0] && !c->sampler[0])
        return MLPROF_OK;
    item items[MAX_ITEMS];
    size_t n;
    char err[600];
    if (parse(c->counters, 0, items, &n, err, sizeof err) != 0)
        return mlprof__fail(MLPROF_EVALUE, "counters: %s", err);
    pthread_mutex_lock(&U.lock);
    U.n = U.lost = 0;
    pthread_mutex_unlock(&U.lock);

    int perf[MLPROF__PERF_MAX];
    size_t nperf = 0;
    int rss = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind == K_PERF)
            perf[nperf++] = items[i].perf;
        else if (items[i].kind == K_RSS)
            rss = 1;
        else
            memcpy(g_papi[g_papi_n++], items[i].papi, MLPROF__PAPI_NAME);
    }
    int rc = nperf ? mlprof__perf_span_start(perf, nperf) : MLPROF_OK;
    if (rc == MLPROF_OK && rss)
        rc = mlprof__rss_span_start();
    if (rc == MLPROF_OK && g_papi_n)
        rc = mlprof__papi_span_start(g_papi, g_papi_n);
    if (rc == MLPROF_OK)
        rc = mlprof__sampler_start();
    if (rc != MLPROF_OK) {
        int keep = rc;
        mlprof__hw_stop();
        return keep;
    }
    g_started = 1;
    return MLPROF_OK;
}

void mlprof__hw_stop(void)
{
    mlprof__perf_span_stop();
    mlprof__rss_span_stop();
    mlprof__papi_span_stop();
    mlprof__sampler_stop();
    g_started = 0;
}

void mlprof__hw_join(void) { mlprof__sampler_join(); }

void mlprof__hw_quiesce(void)
{
    mlprof__sampler_stop();
    mlprof__sampler_join();
}

void mlprof__hw_after_fork(int running)
{
    mlprof__sampler_after_fork(running);
}

/* A comma list as a JSON array of its items. */
static void list_json(mlprof__sb *out, const char *key, const char *spec)
{
    mlprof__sb_printf(out, ",\"%s\":[", key);
    int first = 1;
    for (const char *p = spec; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (!k)
            break;
        if (!first)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, p, k);
        first = 0;
        p += k;
    }
    mlprof__sb_putc(out, ']');
}

void mlprof__hw_other_data(mlprof__sb *out)
{
    if (!g_counters[0] && !g_sampler[0])
        return;
    list_json(out, "counters", g_counters);
    list_json(out, "sampler", g_sampler);
    mlprof__sampler_other_data(out);
    mlprof__sb_puts(out, ",\"counters_unavailable\":{");
    pthread_mutex_lock(&U.lock);
    for (size_t i = 0; i < U.n; i++) {
        if (i)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, U.e[i].what, strlen(U.e[i].what));
        mlprof__sb_putc(out, ':');
        mlprof__sb_json_str(out, U.e[i].why, strlen(U.e[i].why));
    }
    if (U.lost)
        mlprof__sb_printf(out, "%s\"(more)\":\"%u more not listed\"", U.n ? "," : "", U.lost);
    pthread_mutex_unlock(&U.lock);
    mlprof__sb_putc(out, '}');
}
