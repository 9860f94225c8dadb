/*
 * hw.c - the counters and sampler keys: parsing them, starting what they
 * name at each run, and the registry of what could not be opened, which
 * goes to stderr once and into the trace's metadata.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../record/produce.h"
#include "hw_internal.h"

/* ------------------------------------------------------------- parsing */

static const char k_perf_names[] =
    "cycles, instructions, cache-references, cache-misses, branches, branch-misses, ref-cycles, "
    "task-clock, page-faults, minor-faults, major-faults, context-switches, cpu-migrations";

/* Splits a comma list into items; sampler chooses which names are allowed. */
static int parse(const char *spec, int sampler, mlprof__hw_item *out, size_t *n, char *err, size_t len)
{
    size_t perf = 0, papi = 0;
    *n = 0;
    const char *p = spec;
    for (size_t k; (k = mlprof__list_item(&p)) != 0; p += k) {
        mlprof__hw_item it;
        memset(&it, 0, sizeof it);
        it.perf = -1;
        if ((it.perf = mlprof__perf_find(p, k)) >= 0) {
            it.kind = MLPROF__K_PERF;
        } else if (k == 3 && memcmp(p, "rss", 3) == 0) {
            it.kind = MLPROF__K_RSS;
        } else if (!sampler && k > 5 && memcmp(p, "papi:", 5) == 0) {
            if (k - 5 >= MLPROF__PAPI_NAME) {
                snprintf(err, len, "PAPI event name \"%.*s\" is longer than %d bytes", (int)(k - 5), p + 5,
                         MLPROF__PAPI_NAME - 1);
                return -1;
            }
            it.kind = MLPROF__K_PAPI;
            memcpy(it.papi, p + 5, k - 5);
        } else if (sampler && k == 3 && memcmp(p, "cpu", 3) == 0) {
            it.kind = MLPROF__K_CPU;
        } else if (sampler && k == 4 && memcmp(p, "rapl", 4) == 0) {
            it.kind = MLPROF__K_RAPL;
        } else if (sampler && k == 4 && memcmp(p, "nvml", 4) == 0) {
            it.kind = MLPROF__K_NVML;
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
        if ((it.kind == MLPROF__K_PERF && ++perf > MLPROF__PERF_MAX) ||
            (it.kind == MLPROF__K_PAPI && ++papi > MLPROF__HW_PAPI_MAX)) {
            snprintf(err, len, "more than %d %s counters", it.kind == MLPROF__K_PERF ? MLPROF__PERF_MAX : MLPROF__HW_PAPI_MAX,
                     it.kind == MLPROF__K_PERF ? "perf_event" : "PAPI");
            return -1;
        }
        if (*n == MLPROF__HW_ITEMS) {
            snprintf(err, len, "more than %d items", MLPROF__HW_ITEMS);
            return -1;
        }
        out[(*n)++] = it;
    }
    return 0;
}

int mlprof__hw_check(const char *spec, char *err, size_t len)
{
    mlprof__hw_item items[MLPROF__HW_ITEMS];
    size_t n;
    return parse(spec, 0, items, &n, err, len);
}

int mlprof__hw_check_sampler(const char *spec, char *err, size_t len)
{
    mlprof__hw_item items[MLPROF__HW_ITEMS];
    size_t n;
    return parse(spec, 1, items, &n, err, len);
}

/* --------------------------------------------------------- the slots */

/* The PAPI events of this run (set while stopped, read by the collector). */
static char g_papi[MLPROF__HW_PAPI_MAX][MLPROF__PAPI_NAME];
static size_t g_papi_n;

/* A filter in front of the names: two bits of 256 for every name a counter
 * can have, from its length and a few of its bytes (a Bloom filter). The
 * collector asks for every integer argument of every span, and most
 * arguments (batch, bytes...) are no counter: two bit tests answer for
 * them (a name that is not a counter passes about once in a hundred). Bits
 * are only added (PAPI names as a run starts), so a stale bit costs a
 * search, never a wrong answer. */
static uint64_t g_key_bits[4];
static int g_key_bits_made;

static void key_hashes(const char *key, size_t len, unsigned h[2])
{
    const unsigned char *k = (const unsigned char *)key;
    h[0] = ((unsigned)len * 13u + k[0] * 31u + k[len - 1] * 7u) & 255u;
    h[1] = ((unsigned)len * 5u + k[len / 2] * 17u + k[len > 1] * 3u) & 255u;
}

static void key_bits_add(const char *key)
{
    size_t len = strlen(key);
    if (!len)
        return;
    unsigned h[2];
    key_hashes(key, len, h);
    for (int i = 0; i < 2; i++)
        g_key_bits[h[i] >> 6] |= 1ull << (h[i] & 63u);
}

static int key_bits_maybe(const char *key, size_t len)
{
    if (!g_key_bits_made) {
        for (int i = 0; i < MLPROF__HW_PERF; i++)
            key_bits_add(mlprof__perf_name(i));
        key_bits_add("rss");
        g_key_bits_made = 1;
    }
    unsigned h[2];
    key_hashes(key, len, h);
    return (g_key_bits[h[0] >> 6] >> (h[0] & 63u) & 1u) && (g_key_bits[h[1] >> 6] >> (h[1] & 63u) & 1u);
}

int mlprof__hw_index(const char *key, size_t len)
{
    if (len == 0 || !key_bits_maybe(key, len))
        return -1;
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

/* ------------------------------------------------- shared by back-ends */

int mlprof__hw_observer_on(int *id, const char *name, size_t data_size, mlprof__span_fn begin,
                           mlprof__span_fn end)
{
    if (*id >= 0)
        return MLPROF_OK;
    mlprof_observer o = {sizeof o, name, data_size, NULL, begin, NULL, end};
    int got = mlprof__observer_register_locked(&o);
    if (got < 0)
        return got;
    *id = got;
    return MLPROF_OK;
}

void mlprof__hw_observer_off(int *id)
{
    if (*id < 0)
        return;
    mlprof__observer_unregister_locked(*id);
    *id = -1;
}

void mlprof__rate_start(mlprof__rate *r, mlprof_domain *d, const char *name, double scale, uint64_t wrap,
                        uint64_t value)
{
    r->counter = mlprof_counter_create(d, name);
    r->scale = scale;
    r->wrap = wrap;
    r->last = value;
    r->last_ns = mlprof_now_ns();
}

void mlprof__rate_put(mlprof__rate *r, uint64_t value)
{
    uint64_t now_ns = mlprof_now_ns();
    uint64_t grew;
    if (value >= r->last)
        grew = value - r->last;
    else if (r->wrap >= r->last) /* went past wrap and around once */
        grew = r->wrap - r->last + value;
    else
        grew = UINT64_MAX; /* went back: a reset, nothing to say */
    if (now_ns > r->last_ns && grew != UINT64_MAX)
        mlprof_counter_set_double(r->counter, r->scale * (double)grew / ((double)(now_ns - r->last_ns) * 1e-9));
    r->last = value;
    r->last_ns = now_ns;
}

void mlprof__rate_end(mlprof__rate *r, int after_fork)
{
    if (!after_fork)
        mlprof_counter_destroy(r->counter);
    r->counter = NULL;
}

/* -------------------------------------------------------- start, stop */

static int g_started; /* observers registered, sampler asked to run */
static mlprof__hw_item g_counters[MLPROF__HW_ITEMS], g_sampler[MLPROF__HW_ITEMS]; /* of this run */
static size_t g_ncounters, g_nsampler;

int mlprof__hw_start(void)
{
    const mlprof__config *c = &mlprof__g.cfg;
    if (g_started)
        return MLPROF_OK;
    char err[600];
    g_ncounters = g_nsampler = g_papi_n = 0;
    if (parse(c->counters, 0, g_counters, &g_ncounters, err, sizeof err) != 0)
        return mlprof__fail(MLPROF_EVALUE, "counters: %s", err);
    if (parse(c->sampler, 1, g_sampler, &g_nsampler, err, sizeof err) != 0)
        return mlprof__fail(MLPROF_EVALUE, "sampler: %s", err);
    pthread_mutex_lock(&U.lock); /* each run says again what it cannot measure */
    U.n = U.lost = 0;
    pthread_mutex_unlock(&U.lock);
    if (!g_ncounters && !g_nsampler)
        return MLPROF_OK;

    int perf[MLPROF__PERF_MAX];
    size_t nperf = 0;
    int rss = 0;
    for (size_t i = 0; i < g_ncounters; i++) {
        if (g_counters[i].kind == MLPROF__K_PERF) {
            perf[nperf++] = g_counters[i].perf;
        } else if (g_counters[i].kind == MLPROF__K_RSS) {
            rss = 1;
        } else {
            memcpy(g_papi[g_papi_n], g_counters[i].papi, MLPROF__PAPI_NAME);
            key_bits_add(g_papi[g_papi_n++]);
        }
    }
    int rc = nperf ? mlprof__perf_span_start(perf, nperf) : MLPROF_OK;
    if (rc == MLPROF_OK && rss)
        rc = mlprof__rss_span_start();
    if (rc == MLPROF_OK && g_papi_n)
        rc = mlprof__papi_span_start(g_papi, g_papi_n);
    if (rc == MLPROF_OK)
        rc = mlprof__sampler_start(g_sampler, g_nsampler);
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
    pthread_mutex_init(&U.lock, NULL); /* a parent's thread may have held it */
    mlprof__perf_after_fork();
    mlprof__papi_after_fork();
    mlprof__sampler_after_fork(running);
}

/* Items as a JSON array of their names. */
static void list_json(mlprof__sb *out, const char *key, const mlprof__hw_item *items, size_t n)
{
    static const char *const fixed[] = {"", "rss", "", "cpu", "rapl", "nvml"};
    mlprof__sb_printf(out, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        const mlprof__hw_item *it = &items[i];
        char name[MLPROF__PAPI_NAME + 8];
        snprintf(name, sizeof name, "%s%s", it->kind == MLPROF__K_PAPI ? "papi:" : "",
                 it->kind == MLPROF__K_PERF ? mlprof__perf_name(it->perf)
                 : it->kind == MLPROF__K_PAPI ? it->papi : fixed[it->kind]);
        if (i)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, name, strlen(name));
    }
    mlprof__sb_putc(out, ']');
}

void mlprof__hw_other_data(mlprof__sb *out)
{
    pthread_mutex_lock(&U.lock);
    size_t unavailable = U.n + U.lost;
    pthread_mutex_unlock(&U.lock);
    if (!g_ncounters && !g_nsampler && !unavailable) /* GPU activity says here too */
        return;
    list_json(out, "counters", g_counters, g_ncounters);
    list_json(out, "sampler", g_sampler, g_nsampler);
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

/* ------------------------------------------------- the lifecycle entry */

_Static_assert(MLPROF__HW_KNOWN <= MLPROF__ARG_SLOTS, "the collector sums every counter slot per span");

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    *mask = 0;
    if (strcmp(key, "counters") == 0)
        return mlprof__hw_check(value, why, len) == 0 ? 0 : -1;
    if (strcmp(key, "sampler") == 0)
        return mlprof__hw_check_sampler(value, why, len) == 0 ? 0 : -1;
    return 1;
}

const mlprof__module mlprof__hw_module = {
    .name = "hw",
    .parse_key = parse_key,
    .start = mlprof__hw_start,
    .stop = mlprof__hw_stop,
    .join = mlprof__hw_join,
    .quiesce = mlprof__hw_quiesce,
    .resume = mlprof__sampler_resume,
    .pause = mlprof__sampler_pause,
    .fork_prepare = mlprof__sampler_fork_prepare,
    .fork_parent = mlprof__sampler_fork_parent,
    .after_fork = mlprof__hw_after_fork,
    .arg_slot = mlprof__hw_index,
    .other_data = mlprof__hw_other_data,
};
