/*
 * nvml.c - the "nvml" sampler source: for each NVIDIA GPU, power, GPU and
 * memory utilization, memory in use, SM and memory clocks and temperature,
 * through NVML, which is loaded with dlopen (the nvml_library key) so that
 * one build runs with and without a driver.
 *
 * Power is the change of the GPU's energy counter over the period where the
 * GPU has one (Volta and newer), which is exact for the period; otherwise it
 * is the driver's power reading. A metric that a GPU does not report is said
 * once, and the others go on.
 *
 * The few NVML declarations needed are written here from its documented
 * API, so that building needs no NVIDIA header.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "hw_internal.h"

typedef int nvml_ret;
typedef struct nvml_device_st *nvml_device;
typedef struct {
    unsigned gpu, memory; /* percent of the last sample period */
} nvml_utilization;
typedef struct {
    unsigned long long total, free, used; /* bytes */
} nvml_memory;

#define NVML_SUCCESS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_TEMPERATURE_GPU 0

typedef struct nvml_api {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*handle)(unsigned, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned);
    nvml_ret (*power)(nvml_device, unsigned *);                      /* milliwatts */
    nvml_ret (*energy)(nvml_device, unsigned long long *);           /* millijoules */
    nvml_ret (*utilization)(nvml_device, nvml_utilization *);
    nvml_ret (*memory)(nvml_device, nvml_memory *);
    nvml_ret (*clock)(nvml_device, int, unsigned *);                 /* MHz */
    nvml_ret (*temperature)(nvml_device, int, unsigned *);           /* degrees C */
} nvml_api;

enum { M_POWER, M_UTIL, M_MEM_UTIL, M_MEM_USED, M_SM_CLOCK, M_MEM_CLOCK, M_TEMP, M_N };
static const char *const k_metric[M_N] = {"power (W)",      "utilization (%)",    "memory utilization (%)",
                                          "memory used",    "sm clock (MHz)",     "memory clock (MHz)",
                                          "temperature (C)"};

#define MAX_GPUS 64

typedef struct gpu {
    nvml_device dev;
    mlprof_counter *series[M_N]; /* NULL: not reported by this GPU */
    int by_energy;               /* power from the energy counter */
    unsigned long long last_mj;
    uint64_t last_ns;
} gpu;

typedef struct nvml {
    nvml_api api;
    unsigned n;
    gpu g[MAX_GPUS];
} nvml;

static const char *nvml_error(const nvml_api *a, nvml_ret rc)
{
    const char *s = a->error_string ? a->error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

/* Loads the library and its functions; 0, or -1 with why set. */
static int load(nvml_api *a, const char *path, char *why, size_t len)
{
    memset(a, 0, sizeof *a);
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        const char *e = dlerror();
        snprintf(why, len, "cannot load NVML (%s): %s; it comes with the NVIDIA driver", path, e ? e : "not found");
        return -1;
    }
    struct {
        void **slot;
        const char *name;
        int needed;
    } fns[] = {
        {(void **)&a->init, "nvmlInit_v2", 1},
        {(void **)&a->shutdown, "nvmlShutdown", 1},
        {(void **)&a->error_string, "nvmlErrorString", 0},
        {(void **)&a->count, "nvmlDeviceGetCount_v2", 1},
        {(void **)&a->handle, "nvmlDeviceGetHandleByIndex_v2", 1},
        {(void **)&a->name, "nvmlDeviceGetName", 0},
        {(void **)&a->power, "nvmlDeviceGetPowerUsage", 0},
        {(void **)&a->energy, "nvmlDeviceGetTotalEnergyConsumption", 0},
        {(void **)&a->utilization, "nvmlDeviceGetUtilizationRates", 0},
        {(void **)&a->memory, "nvmlDeviceGetMemoryInfo", 0},
        {(void **)&a->clock, "nvmlDeviceGetClockInfo", 0},
        {(void **)&a->temperature, "nvmlDeviceGetTemperature", 0},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(a->lib, fns[i].name);
        if (!*fns[i].slot && fns[i].needed) {
            snprintf(why, len, "%s has no %s (an NVML older than the driver API 10?)", path, fns[i].name);
            dlclose(a->lib);
            a->lib = NULL;
            return -1;
        }
    }
    return 0;
}

/* Reads metric m of g into *v; the NVML status. */
static nvml_ret read_metric(nvml *s, gpu *g, int m, double *v, uint64_t now_ns)
{
    const nvml_api *a = &s->api;
    nvml_ret rc = -1;
    unsigned u = 0;
    nvml_utilization ut;
    nvml_memory mem;
    switch (m) {
    case M_POWER:
        if (g->by_energy) {
            unsigned long long mj = 0;
            rc = a->energy(g->dev, &mj);
            if (rc == NVML_SUCCESS && now_ns > g->last_ns && mj >= g->last_mj)
                *v = (double)(mj - g->last_mj) * 1e-3 / ((double)(now_ns - g->last_ns) * 1e-9);
            else if (rc == NVML_SUCCESS)
                rc = -1; /* no period yet: nothing to say */
            g->last_mj = mj;
            g->last_ns = now_ns;
            return rc;
        }
        if (a->power && (rc = a->power(g->dev, &u)) == NVML_SUCCESS)
            *v = u * 1e-3;
        return rc;
    case M_UTIL:
    case M_MEM_UTIL:
        if (a->utilization && (rc = a->utilization(g->dev, &ut)) == NVML_SUCCESS)
            *v = m == M_UTIL ? ut.gpu : ut.memory;
        return rc;
    case M_MEM_USED:
        if (a->memory && (rc = a->memory(g->dev, &mem)) == NVML_SUCCESS)
            *v = (double)mem.used;
        return rc;
    case M_SM_CLOCK:
    case M_MEM_CLOCK:
        if (a->clock && (rc = a->clock(g->dev, m == M_SM_CLOCK ? NVML_CLOCK_SM : NVML_CLOCK_MEM, &u)) == NVML_SUCCESS)
            *v = u;
        return rc;
    default:
        if (a->temperature && (rc = a->temperature(g->dev, NVML_TEMPERATURE_GPU, &u)) == NVML_SUCCESS)
            *v = u;
        return rc;
    }
}

static void nvml_close(void *state, int after_fork);

static void *nvml_open(mlprof_domain *d, const void *arg)
{
    (void)arg;
    nvml *s = mlprof__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    char why[MLPROF__PATH_MAX + 300];
    if (load(&s->api, mlprof__g.cfg.nvml_library, why, sizeof why) != 0) {
        mlprof__hw_unavailable("nvml", why);
        mlprof__free(s);
        return NULL;
    }
    nvml_api *a = &s->api;
    nvml_ret rc = a->init();
    unsigned count = 0;
    if (rc != NVML_SUCCESS || (rc = a->count(&count)) != NVML_SUCCESS || count == 0) {
        if (rc != NVML_SUCCESS)
            snprintf(why, sizeof why, "NVML cannot start: %s", nvml_error(a, rc));
        else
            snprintf(why, sizeof why, "NVML sees no GPU");
        mlprof__hw_unavailable("nvml", why);
        if (rc == NVML_SUCCESS)
            a->shutdown();
        dlclose(a->lib);
        mlprof__free(s);
        return NULL;
    }
    uint64_t now = mlprof__clock_monotonic_ns();
    for (unsigned i = 0; i < count && s->n < MAX_GPUS; i++) {
        gpu *g = &s->g[s->n];
        char what[128];
        if ((rc = a->handle(i, &g->dev)) != NVML_SUCCESS) {
            snprintf(what, sizeof what, "nvml gpu%u", i);
            mlprof__hw_unavailable(what, nvml_error(a, rc));
            continue;
        }
        unsigned long long mj;
        g->by_energy = a->energy && a->energy(g->dev, &mj) == NVML_SUCCESS;
        g->last_mj = g->by_energy ? mj : 0;
        g->last_ns = now;
        for (int m = 0; m < M_N; m++) {
            double v;
            rc = read_metric(s, g, m, &v, now);
            if (rc != NVML_SUCCESS && !(m == M_POWER && g->by_energy)) {
                snprintf(what, sizeof what, "nvml gpu%u %s", i, k_metric[m]);
                mlprof__hw_unavailable(what, nvml_error(a, rc));
                continue;
            }
            char name[96];
            snprintf(name, sizeof name, "gpu%u %s", i, k_metric[m]);
            g->series[m] = mlprof_counter_create(d, name);
        }
        s->n++;
    }
    return s;
}

static void nvml_sample(void *state, uint64_t now_ns)
{
    nvml *s = state;
    for (unsigned i = 0; i < s->n; i++) {
        gpu *g = &s->g[i];
        for (int m = 0; m < M_N; m++) {
            double v;
            if (!g->series[m] || read_metric(s, g, m, &v, now_ns) != NVML_SUCCESS)
                continue;
            if (m == M_MEM_USED)
                mlprof_counter_set(g->series[m], (int64_t)v);
            else
                mlprof_counter_set_double(g->series[m], v);
        }
    }
}

static void nvml_close(void *state, int after_fork)
{
    nvml *s = state;
    for (unsigned i = 0; i < s->n && !after_fork; i++) {
        for (int m = 0; m < M_N; m++)
            mlprof_counter_destroy(s->g[i].series[m]);
    }
    if (!after_fork) { /* the driver's state belongs to the parent */
        s->api.shutdown();
        dlclose(s->api.lib);
    }
    mlprof__free(s);
}

const mlprof__source mlprof__nvml_source = {"nvml", nvml_open, nvml_sample, nvml_close};
