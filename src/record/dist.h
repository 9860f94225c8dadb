/*
 * dist.h - who this process is in a distributed job: its rank, local rank,
 * world size, host and job id, read from the launcher's environment (or the
 * rank key), for the traces' metadata and the output file names.
 */
#ifndef MLPROF_DIST_H
#define MLPROF_DIST_H

#include "../common/common.h"

typedef struct mlprof__dist {
    int rank, local_rank, world_size, local_size; /* -1 when not known */
    char host[256]; /* gethostname() */
    char job[128];  /* job id: SLURM_JOB_ID, PMIx/OMPI namespace or jobid, TORCHELASTIC_RUN_ID... or "" */
    const char *source; /* where the rank came from: "key", "ompi", "pmix", "pmi", "slurm", "torchrun", "mpi", or NULL */
} mlprof__dist;

/* Read once from the environment; the rank key (MLPROF_RANK), when set,
 * overrides the launcher's rank. Thread-safe; the struct changes only when
 * the rank key or mlprof__dist_set_mpi changes what it says. */
const mlprof__dist *mlprof__dist_get(void);

/* The MPI hook's word after MPI_Init (MPI_COMM_WORLD's rank and size): fills
 * what the launcher did not say; a launcher variable that disagrees is kept
 * out (MPI knows better) with a warning. */
void mlprof__dist_set_mpi(int rank, int size);

/* The rank and size the program measured its clock as
 * (mlprof_dist_clock_sample: mlprof.dist over torch.distributed, whose group
 * torch.multiprocessing.spawn or the script itself may have made with no
 * launcher variable to say it): the view's where neither the launcher nor
 * MPI said one (source "program"), so that %r names the rank's trace. */
void mlprof__dist_set_sampled(int rank, int size);

/* Parses the environment env (NULL-terminated "NAME=value" strings) into d,
 * without the rank key; warnings for malformed values go through
 * mlprof__log, naming the variable. For tests and mlprof__dist_get. */
void mlprof__dist_parse(char *const *env, mlprof__dist *d);

/* distributedInfo's members, {"rank":R,...}, into out; nothing when no rank
 * is known. */
void mlprof__dist_json(const mlprof__dist *d, mlprof__sb *out);

/* What %r expands to: the rank, or "norank" when none is known. */
void mlprof__dist_rank_str(const mlprof__dist *d, char *buf, size_t len);

/* Whether output names get ".rankR" when they hold no %r: a rank is known
 * and the world is not a single process. */
int mlprof__dist_name_ranks(const mlprof__dist *d);

#endif /* MLPROF_DIST_H */
