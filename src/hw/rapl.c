/*
 * rapl.c - the "rapl" sampler source: CPU package, core and memory power in
 * watts, from the energy counters of Intel's (and AMD's) Running Average
 * Power Limit. Read through the powercap zones in sysfs (powercap_dir,
 * /sys/class/powercap: intel-rapl:N/energy_uj, in microjoules, wrapping at
 * max_energy_range_uj), or, where those are missing or not readable, the
 * perf_event "power" PMU (energy-pkg and friends, counted system-wide on one
 * CPU of each package, scaled to joules by the PMU's .scale files).
 * Power is the change of energy over the period.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hw_internal.h"

#define MAX_ZONES 16
#define MAX_CPUS 16 /* packages counted through the power PMU */

typedef struct zone {
    mlprof__rate rate;
    int fd[MAX_CPUS];  /* powercap: fd[0] is energy_uj; perf: one per package */
    int nfd;
    int perf;          /* read through perf_event */
    double joules;     /* per unit read */
    uint64_t max;      /* powercap: where energy_uj wraps */
    /* A virtual machine may show the power PMU and count nothing: a zone's
     * samples start when its energy first moves, and one still at its first
     * value after STILL_NS is given up on, and said so. */
    uint64_t first, opened_ns;
    int moved, dead;
    char label[96];
} zone;

#define STILL_NS 100000000u

typedef struct rapl {
    size_t n;
    zone z[MAX_ZONES];
} rapl;

/* A small file's text, trailing newline cut; -1 with errno. */
static int read_text(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, len - 1);
    int err = errno;
    close(fd);
    if (got < 0) {
        errno = err;
        return -1;
    }
    buf[got] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int read_u64_fd(int fd, uint64_t *v)
{
    char buf[32];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    *v = strtoull(buf, NULL, 10);
    return 0;
}

static uint64_t zone_read(const zone *z)
{
    uint64_t sum = 0, v;
    for (int i = 0; i < z->nfd; i++) {
        if (z->perf ? read(z->fd[i], &v, sizeof v) == (ssize_t)sizeof v : read_u64_fd(z->fd[i], &v) == 0)
            sum += v;
    }
    return sum;
}

static void zone_start(zone *z, mlprof_domain *d, const char *label)
{
    char name[128];
    snprintf(z->label, sizeof z->label, "%s", label);
    snprintf(name, sizeof name, "power %s (W)", label);
    z->first = zone_read(z);
    mlprof__rate_start(&z->rate, d, name, z->joules, z->perf ? 0 : z->max, z->first);
    z->opened_ns = z->rate.last_ns;
}

/* A zone that never counted: said, as "rapl LABEL". */
static void zone_still(zone *z, uint64_t now_ns)
{
    char what[128], why[160];
    snprintf(what, sizeof what, "rapl %s", z->label);
    snprintf(why, sizeof why, "its energy counter did not move in %.0f ms (a virtual machine that shows RAPL "
                              "but does not pass it through?)", (double)(now_ns - z->opened_ns) * 1e-6);
    mlprof__hw_unavailable(what, why);
    z->dead = 1;
}

/* ------------------------------------------------------------ powercap */

static int zone_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The zones under dir that have an energy counter; 0 with *why set when
 * there are none or none can be read. */
static size_t open_powercap(rapl *r, mlprof_domain *d, const char *dir, char *why, size_t len)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        snprintf(why, len, "no %s (%s)", dir, strerror(errno));
        return 0;
    }
    char *names[64];
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL && nn < 64) {
        if (strncmp(e->d_name, "intel-rapl:", 11) == 0)
            names[nn++] = mlprof__strdup(e->d_name);
    }
    closedir(dp);
    qsort(names, nn, sizeof names[0], zone_cmp); /* intel-rapl:0 before intel-rapl:0:0 */
    snprintf(why, len, "no intel-rapl zones under %s", dir);
    char path[MLPROF__PATH_MAX + 128], label[160], text[64];
    for (size_t i = 0; i < nn; i++) {
        if (!names[i] || r->n == MAX_ZONES)
            continue;
        zone *z = &r->z[r->n];
        memset(z, 0, sizeof *z);
        snprintf(path, sizeof path, "%s/%s/energy_uj", dir, names[i]);
        z->fd[0] = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t probe;
        if (z->fd[0] < 0 || read_u64_fd(z->fd[0], &probe) != 0) {
            int err = errno;
            if (z->fd[0] >= 0)
                close(z->fd[0]);
            snprintf(why, len, "%s: %s%s", path, strerror(err),
                     err == EACCES ? " (readable by root only: run as root, or make it readable)" : "");
            continue;
        }
        z->nfd = 1;
        z->joules = 1e-6;
        snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", dir, names[i]);
        z->max = read_text(path, text, sizeof text) == 0 ? strtoull(text, NULL, 10) : UINT64_MAX;
        snprintf(path, sizeof path, "%s/%s/name", dir, names[i]);
        if (read_text(path, text, sizeof text) != 0)
            snprintf(text, sizeof text, "%s", names[i]);
        /* a subzone (intel-rapl:0:1) is named after its package too */
        const char *colon = strchr(names[i] + 11, ':');
        label[0] = '\0';
        char pname[64];
        snprintf(path, sizeof path, "%s/%.*s/name", dir, colon ? (int)(colon - names[i]) : 0, names[i]);
        if (colon && read_text(path, pname, sizeof pname) == 0)
            snprintf(label, sizeof label, "%s/", pname);
        size_t used = strlen(label);
        snprintf(label + used, sizeof label - used, "%s", text);
        zone_start(z, d, label);
        r->n++;
    }
    for (size_t i = 0; i < nn; i++)
        mlprof__free(names[i]);
    return r->n;
}

/* ------------------------------------------------------ the power PMU */

#define PMU "/sys/bus/event_source/devices/power"

/* The CPUs of cpumask ("0" or "0,28" or "0-1"), one per package. */
static int pmu_cpus(int *cpus)
{
    char text[256];
    if (read_text(PMU "/cpumask", text, sizeof text) != 0)
        return 0;
    int n = 0;
    for (char *p = text; *p && n < MAX_CPUS;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            break;
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long c = a; c <= b && n < MAX_CPUS; c++)
            cpus[n++] = (int)c;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
    return n;
}

static size_t open_pmu(rapl *r, mlprof_domain *d, char *why, size_t len)
{
    char text[128];
    if (read_text(PMU "/type", text, sizeof text) != 0) {
        snprintf(why, len, "no perf_event power PMU (%s)", PMU);
        return 0;
    }
    int type = atoi(text);
    int cpus[MAX_CPUS];
    int ncpu = pmu_cpus(cpus);
    DIR *dp = opendir(PMU "/events");
    if (!dp || !ncpu) {
        if (dp)
            closedir(dp);
        snprintf(why, len, "the perf_event power PMU lists no events or CPUs");
        return 0;
    }
    struct dirent *e;
    char path[512];
    while ((e = readdir(dp)) != NULL && r->n < MAX_ZONES) {
        if (strncmp(e->d_name, "energy-", 7) != 0 || strchr(e->d_name, '.'))
            continue; /* energy-pkg, not energy-pkg.scale */
        snprintf(path, sizeof path, PMU "/events/%s", e->d_name);
        const char *ev;
        if (read_text(path, text, sizeof text) != 0 || (ev = strstr(text, "event=")) == NULL)
            continue;
        zone *z = &r->z[r->n];
        memset(z, 0, sizeof *z);
        z->perf = 1;
        snprintf(path, sizeof path, PMU "/events/%s.scale", e->d_name);
        z->joules = read_text(path, text, sizeof text) == 0 ? strtod(text, NULL) : 0;
        if (z->joules <= 0)
            continue;
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = (uint32_t)type;
        snprintf(path, sizeof path, PMU "/events/%s", e->d_name);
        read_text(path, text, sizeof text);
        a.config = strtoull(strstr(text, "event=") + 6, NULL, 0);
        int err = 0;
        for (int c = 0; c < ncpu; c++) {
            int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpus[c], -1, PERF_FLAG_FD_CLOEXEC);
            if (fd >= 0)
                z->fd[z->nfd++] = fd;
            else
                err = errno;
        }
        if (!z->nfd) {
            snprintf(why, len, "perf_event power/%s/: %s", e->d_name, mlprof__perf_why(err));
            continue;
        }
        zone_start(z, d, e->d_name + 7);
        r->n++;
    }
    closedir(dp);
    return r->n;
}

/* ---------------------------------------------------------- the source */

static void rapl_close(void *state, int after_fork);

static void *rapl_open(mlprof_domain *d, const void *arg)
{
    (void)arg;
    rapl *r = mlprof__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    char why_powercap[MLPROF__PATH_MAX + 200], why_pmu[600];
    if (open_powercap(r, d, mlprof__g.cfg.powercap_dir, why_powercap, sizeof why_powercap) ||
        open_pmu(r, d, why_pmu, sizeof why_pmu))
        return r;
    char why[sizeof why_powercap + sizeof why_pmu + 80];
    snprintf(why, sizeof why, "no RAPL energy counter can be read: %s; %s", why_powercap, why_pmu);
    mlprof__hw_unavailable("rapl", why);
    rapl_close(r, 0);
    return NULL;
}

static void rapl_sample(void *state, uint64_t now_ns)
{
    rapl *r = state;
    for (size_t i = 0; i < r->n; i++) {
        zone *z = &r->z[i];
        if (z->dead)
            continue;
        uint64_t v = zone_read(z);
        z->moved |= v != z->first;
        if (z->moved) {
            mlprof__rate_put(&z->rate, v);
        } else if (now_ns - z->opened_ns >= STILL_NS) {
            zone_still(z, now_ns);
        } else {
            z->rate.last_ns = mlprof_now_ns(); /* nothing yet: the first sample covers only its own period */
        }
    }
}

static void rapl_close(void *state, int after_fork)
{
    rapl *r = state;
    for (size_t i = 0; i < r->n; i++) {
        if (!after_fork && !r->z[i].moved && !r->z[i].dead)
            zone_still(&r->z[i], mlprof__clock_monotonic_ns());
        for (int k = 0; k < r->z[i].nfd; k++)
            close(r->z[i].fd[k]);
        mlprof__rate_end(&r->z[i].rate, after_fork);
    }
    mlprof__free(r);
}

const mlprof__source mlprof__rapl_source = {"rapl", rapl_open, rapl_sample, rapl_close};
