/*
 * dist.c - rank identity: which rank of which job this process is, read from
 * the launcher's environment, so that every trace says it and the output
 * names of the ranks never collide.
 *
 * Launchers, innermost first (the one that started this very process wins,
 * since an outer one's variables are only inherited):
 *   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID
 *              (its default "none" followed by MASTER_PORT: "none.29500")
 *              (torchrun always starts its workers itself: under mpirun or
 *              srun, the workers inherit the outer launcher's node rank)
 *   OpenMPI    OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, OMPI_MCA_ess_base_jobid
 *   PMIx       PMIX_RANK, PMIX_NAMESPACE
 *   MPICH PMI  PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS (Hydra)
 *   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID.SLURM_STEP_ID
 *              (last: mpirun inside an allocation leaves every rank the
 *              batch step's SLURM_PROCID)
 * The chosen launcher gives the rank; what it does not say (PMIx has no
 * world size) comes from another that agrees on the rank. The rank key
 * (MLPROF_RANK) overrides them all; the MPI hook's word after MPI_Init
 * (mlprof__dist_set_mpi) comes before the launchers'.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dist.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "produce.h"
#include "record.h"

extern char **environ;

typedef struct launcher {
    const char *name;
    const char *rank, *size, *local_rank, *local_size; /* variables; NULL when it has none */
    const char *job, *step;
} launcher;

static const launcher k_launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", NULL},
    {"ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", NULL},
    {"pmix", "PMIX_RANK", NULL, NULL, NULL, "PMIX_NAMESPACE", NULL},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL, NULL},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "SLURM_JOB_ID", "SLURM_STEP_ID"},
};
#define NLAUNCHERS (sizeof k_launchers / sizeof k_launchers[0])

static const char *env_get(char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = env; e && *e; e++) {
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    }
    return NULL;
}

/* The integer in variable name (at least min), or -1: absent, or malformed
 * (said, naming the variable). */
static int env_int(char *const *env, const char *name, int min)
{
    const char *v = name ? env_get(env, name) : NULL;
    if (!v)
        return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < min || n > INT_MAX) {
        mlprof__log(MLPROF_LOG_WARN, "ignoring %s=%s: expected an integer from %d", name,
                    mlprof__quoted(v).s, min);
        return -1;
    }
    return (int)n;
}

static void set_host(mlprof__dist *d)
{
    if (gethostname(d->host, sizeof d->host) != 0)
        snprintf(d->host, sizeof d->host, "unknown");
    d->host[sizeof d->host - 1] = '\0';
}

void mlprof__dist_parse(char *const *env, mlprof__dist *d)
{
    memset(d, 0, sizeof *d);
    d->rank = d->local_rank = d->world_size = d->local_size = -1;
    set_host(d);
    mlprof__dist found[NLAUNCHERS];
    int chosen = -1;
    for (size_t i = 0; i < NLAUNCHERS; i++) {
        const launcher *l = &k_launchers[i];
        mlprof__dist *f = &found[i];
        f->rank = env_int(env, l->rank, 0);
        f->world_size = env_int(env, l->size, 1);
        f->local_rank = env_int(env, l->local_rank, 0);
        f->local_size = env_int(env, l->local_size, 1);
        f->source = l->name;
        f->job[0] = '\0';
        const char *job = l->job ? env_get(env, l->job) : NULL, *step = l->step ? env_get(env, l->step) : NULL;
        if (job && *job)
            snprintf(f->job, sizeof f->job, "%s%s%s", job, step && *step ? "." : "", step && *step ? step : "");
        /* torchrun's run id is "none" unless --rdzv-id gives one: two jobs at
         * once on one machine differ by their rendezvous port, which every
         * worker of a job is given (MASTER_PORT) */
        const char *port = i == 0 ? env_get(env, "MASTER_PORT") : NULL;
        if (i == 0 && strcmp(f->job, "none") == 0 && port && *port) {
            size_t used = strlen(f->job);
            snprintf(f->job + used, sizeof f->job - used, ".%s", port);
        }
        /* RANK alone is too common a name: torchrun sets WORLD_SIZE with it */
        if (i == 0 && f->world_size < 0)
            f->rank = -1;
        if (f->rank >= 0 && f->world_size >= 0 && f->rank >= f->world_size) {
            mlprof__log(MLPROF_LOG_WARN, "ignoring %s=%d: rank %d (%s) is not below it", l->size, f->world_size,
                        f->rank, l->rank);
            f->world_size = -1;
        }
        if (f->local_rank >= 0 && f->local_size >= 0 && f->local_rank >= f->local_size) {
            mlprof__log(MLPROF_LOG_WARN, "ignoring %s=%d: local rank %d (%s) is not below it", l->local_size,
                        f->local_size, f->local_rank, l->local_rank);
            f->local_size = -1;
        }
        if (chosen < 0 && f->rank >= 0)
            chosen = (int)i;
    }
    if (chosen >= 0) {
        const mlprof__dist *c = &found[chosen];
        d->rank = c->rank;
        d->world_size = c->world_size;
        d->local_rank = c->local_rank;
        d->local_size = c->local_size;
        d->source = c->source;
        /* what the chosen one does not say, from those that agree on the rank */
        for (size_t i = 0; i < NLAUNCHERS; i++) {
            if (found[i].rank != d->rank)
                continue;
            if (d->world_size < 0 && found[i].world_size > d->rank)
                d->world_size = found[i].world_size;
            if (d->local_rank < 0)
                d->local_rank = found[i].local_rank;
            if (d->local_size < 0 && found[i].local_size > d->local_rank)
                d->local_size = found[i].local_size;
        }
    }
    /* the job is the whole job's: any launcher's, the chosen one's first */
    if (chosen >= 0 && found[chosen].job[0])
        snprintf(d->job, sizeof d->job, "%s", found[chosen].job);
    for (size_t i = 0; i < NLAUNCHERS && !d->job[0]; i++)
        snprintf(d->job, sizeof d->job, "%s", found[i].job);
}

/* ------------------------------------------------------- the process's */

static struct {
    pthread_mutex_t lock;
    pthread_once_t once;
    mlprof__dist env;   /* the launcher's word */
    int mpi_rank, mpi_size; /* the MPI hook's, or -1 */
    int sampled_rank, sampled_size; /* mlprof__dist_set_sampled's, or -1 */
    char key[sizeof mlprof__g.cfg.rank]; /* the rank key that view was made with */
    int made;
    mlprof__dist view;  /* what mlprof__dist_get returns */
} D = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT, .mpi_rank = -1, .mpi_size = -1,
       .sampled_rank = -1, .sampled_size = -1};

/* D.lock is a leaf held for a few instructions: a forked child whose parent
 * had another thread inside it starts with it free. */
static void dist_after_fork(void) { pthread_mutex_init(&D.lock, NULL); }

static void read_env(void)
{
    mlprof__dist_parse(environ, &D.env);
    pthread_atfork(NULL, NULL, dist_after_fork);
}

/* The view from the launcher's, the MPI hook's and the key's words. D.lock held. */
static void make_view(const char *key)
{
    mlprof__dist v = D.env;
    if (D.mpi_rank >= 0) {
        if (v.rank != D.mpi_rank) {
            v.rank = D.mpi_rank;
            v.local_rank = v.local_size = -1; /* the launcher's were another rank's */
            v.source = "mpi";
        }
        v.world_size = D.mpi_size;
    } else if (v.rank < 0 && D.sampled_rank >= 0) {
        v.rank = D.sampled_rank;
        v.world_size = D.sampled_size;
        v.source = "program";
    }
    if (key[0]) { /* checked when it was set: an integer from 0 */
        v.rank = atoi(key);
        v.source = "key";
        if (v.world_size >= 0 && v.rank >= v.world_size)
            v.world_size = -1;
    }
    /* only written when it changes: readers use it without the lock */
    if (!D.made || memcmp(&v, &D.view, sizeof v) != 0)
        D.view = v;
    snprintf(D.key, sizeof D.key, "%s", key);
    D.made = 1;
}

const mlprof__dist *mlprof__dist_get(void)
{
    pthread_once(&D.once, read_env);
    char key[sizeof D.key];
    /* the configuration changes under ctl_lock, which callers hold (a dump),
     * or before any thread records (mlprof run) */
    snprintf(key, sizeof key, "%s", mlprof__g.cfg.rank);
    pthread_mutex_lock(&D.lock);
    if (!D.made || strcmp(key, D.key) != 0)
        make_view(key);
    pthread_mutex_unlock(&D.lock);
    return &D.view;
}

/* The view again with the rank key it was made with, after a word of MPI's
 * or the program's. D.lock held. */
static void remake_view(void)
{
    char key[sizeof D.key];
    snprintf(key, sizeof key, "%s", D.key);
    make_view(key);
}

void mlprof__dist_set_mpi(int rank, int size)
{
    if (rank < 0 || size < 1 || rank >= size)
        return;
    pthread_once(&D.once, read_env);
    pthread_mutex_lock(&D.lock);
    if (D.env.rank >= 0 && D.env.rank != rank)
        mlprof__log(MLPROF_LOG_WARN, "the launcher (%s) says rank %d, MPI_Comm_rank says %d: using MPI's",
                    D.env.source, D.env.rank, rank);
    else if (D.env.world_size >= 0 && D.env.world_size != size)
        mlprof__log(MLPROF_LOG_WARN, "the launcher (%s) says %d ranks, MPI_Comm_size says %d: using MPI's",
                    D.env.source, D.env.world_size, size);
    D.mpi_rank = rank;
    D.mpi_size = size;
    remake_view();
    pthread_mutex_unlock(&D.lock);
}

void mlprof__dist_set_sampled(int rank, int size)
{
    if (rank < 0 || size < 1 || rank >= size)
        return;
    pthread_once(&D.once, read_env);
    pthread_mutex_lock(&D.lock);
    if (D.sampled_rank != rank || D.sampled_size != size) {
        D.sampled_rank = rank;
        D.sampled_size = size;
        remake_view();
    }
    pthread_mutex_unlock(&D.lock);
}

/* ----------------------------------------------------------- writing */

void mlprof__dist_json(const mlprof__dist *d, mlprof__sb *out)
{
    if (d->rank < 0)
        return;
    mlprof__sb_printf(out, "{\"rank\":%d", d->rank);
    if (d->world_size >= 0)
        mlprof__sb_printf(out, ",\"world_size\":%d", d->world_size);
    if (d->local_rank >= 0)
        mlprof__sb_printf(out, ",\"local_rank\":%d", d->local_rank);
    if (d->local_size >= 0)
        mlprof__sb_printf(out, ",\"local_world_size\":%d", d->local_size);
    mlprof__sb_puts(out, ",\"host\":");
    mlprof__sb_json_str(out, d->host, strlen(d->host));
    mlprof__sb_puts(out, ",\"job_id\":");
    mlprof__sb_json_str(out, d->job, strlen(d->job));
    if (d->source) {
        mlprof__sb_puts(out, ",\"source\":");
        mlprof__sb_json_str(out, d->source, strlen(d->source));
    }
    mlprof__sb_putc(out, '}');
}

void mlprof__dist_rank_str(const mlprof__dist *d, char *buf, size_t len)
{
    if (d->rank >= 0)
        snprintf(buf, len, "%d", d->rank);
    else
        snprintf(buf, len, "norank");
}

int mlprof__dist_name_ranks(const mlprof__dist *d) { return d->rank >= 0 && d->world_size != 1; }

/* otherData: distributedInfo's members prefixed distributed_ (the Perfetto
 * trace has no top level of its own; the JSON trace has both). */
static void dist_other_data(mlprof__sb *out)
{
    const mlprof__dist *d = mlprof__dist_get();
    if (d->rank < 0)
        return;
    mlprof__sb_printf(out, ",\"distributed_rank\":%d", d->rank);
    if (d->world_size >= 0)
        mlprof__sb_printf(out, ",\"distributed_world_size\":%d", d->world_size);
    if (d->local_rank >= 0)
        mlprof__sb_printf(out, ",\"distributed_local_rank\":%d", d->local_rank);
    if (d->local_size >= 0)
        mlprof__sb_printf(out, ",\"distributed_local_world_size\":%d", d->local_size);
    mlprof__sb_puts(out, ",\"distributed_host\":");
    mlprof__sb_json_str(out, d->host, strlen(d->host));
    mlprof__sb_puts(out, ",\"distributed_job_id\":");
    mlprof__sb_json_str(out, d->job, strlen(d->job));
    if (d->source) {
        mlprof__sb_puts(out, ",\"distributed_source\":");
        mlprof__sb_json_str(out, d->source, strlen(d->source));
    }
}

const mlprof__module mlprof__dist_module = {
    .name = "dist",
    .other_data = dist_other_data,
};
