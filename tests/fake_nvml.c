/*
 * fake_nvml.c - a stand-in for libnvidia-ml.so.1 with the functions that
 * mlprof's NVML sampler looks up, for testing on machines without a GPU.
 * Two GPUs with known readings: gpu0 has an energy counter that grows at
 * exactly 250 W of the monotonic clock; gpu1 has none (its power reading is
 * 80 W) and reports no temperature. FAKE_NVML_FAIL=1 makes nvmlInit fail as
 * a machine without a loaded driver does.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    unsigned gpu, memory;
} util_t;
typedef struct {
    unsigned long long total, free, used;
} mem_t;

/* what libnvidia-ml exports, as mlprof calls it */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetCount_v2(unsigned *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev);
int nvmlDeviceGetName(void *dev, char *name, unsigned len);
int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj);
int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw);
int nvmlDeviceGetUtilizationRates(void *dev, util_t *u);
int nvmlDeviceGetMemoryInfo(void *dev, mem_t *m);
int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz);
int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *c);

static int fake_devices[2];
static int inited;

#define OK 0
#define NOT_SUPPORTED 3
#define DRIVER_NOT_LOADED 9
#define UNINITIALIZED 1
#define INVALID_ARGUMENT 2

static int dev_index(void *d)
{
    return d == &fake_devices[0] ? 0 : d == &fake_devices[1] ? 1 : -1;
}

int nvmlInit_v2(void)
{
    const char *f = getenv("FAKE_NVML_FAIL");
    if (f && *f == '1')
        return DRIVER_NOT_LOADED;
    inited++;
    return OK;
}

int nvmlShutdown(void)
{
    if (!inited)
        return UNINITIALIZED;
    inited--;
    return OK;
}

const char *nvmlErrorString(int rc)
{
    switch (rc) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inited)
        return UNINITIALIZED;
    *n = 2;
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    if (!inited)
        return UNINITIALIZED;
    if (i > 1)
        return INVALID_ARGUMENT;
    *dev = &fake_devices[i];
    return OK;
}

int nvmlDeviceGetName(void *dev, char *name, unsigned len)
{
    strncpy(name, dev_index(dev) ? "Fake GPU B" : "Fake GPU A", len);
    return OK;
}

int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj)
{
    if (dev_index(dev) != 0)
        return NOT_SUPPORTED;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* 250 W: 250 mJ per millisecond, a quarter of a millijoule per microsecond */
    *mj = (unsigned long long)ts.tv_sec * 250000ull + (unsigned long long)ts.tv_nsec / 4000ull;
    return OK;
}

int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    *mw = dev_index(dev) ? 80000 : 249000;
    return OK;
}

int nvmlDeviceGetUtilizationRates(void *dev, util_t *u)
{
    u->gpu = dev_index(dev) ? 5 : 37;
    u->memory = dev_index(dev) ? 1 : 12;
    return OK;
}

int nvmlDeviceGetMemoryInfo(void *dev, mem_t *m)
{
    m->total = 80ull << 30;
    m->used = dev_index(dev) ? 512ull << 20 : 3ull << 30;
    m->free = m->total - m->used;
    return OK;
}

int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    (void)dev;
    if (type == 1)
        *mhz = 1980;
    else if (type == 2)
        *mhz = 2619;
    else
        return INVALID_ARGUMENT;
    return OK;
}

int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *c)
{
    if (dev_index(dev) != 0 || sensor != 0)
        return NOT_SUPPORTED;
    *c = 61;
    return OK;
}
