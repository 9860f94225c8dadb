/*
 * dist_ranks.h - the ranks of a distributed job compared (mlprof ranks): per
 * rank its compute, communication, overlap and idle time, and across ranks
 * the collectives matched instance by instance, who arrives last at each and
 * by how much, and the load imbalance. One per-rank summary serves every
 * input: mlprof's traces (MPI spans of domain "mpi", matched by communicator
 * and sequence number), PyTorch's (NCCL kernels, nccl:/gloo: operators,
 * matched by name and order), and a merged trace split by rank. A summary is
 * small (its totals and one record per collective), so that the traces can be
 * read one at a time.
 */
#ifndef MLPROF_ANALYZE_DIST_RANKS_H
#define MLPROF_ANALYZE_DIST_RANKS_H

#include "analyze.h"

/* Strings shared by every rank's summary (collective names, communicators):
 * an index stands for the same string on every rank. */
typedef struct an_dist_names {
    mlprof__map ids; /* string -> index + 1 */
    char **s;
    size_t n, cap;
} an_dist_names;

void an_dist_names_init(an_dist_names *nm);
void an_dist_names_free(an_dist_names *nm);
/* The index of s (added when new); 0, or -1 when out of memory. */
int an_dist_name_id(an_dist_names *nm, const char *s, uint32_t *id);

/* Where a rank's collectives come from (in this order of preference). */
enum { AN_DIST_SRC_NONE = 0, AN_DIST_SRC_MPI = 1, AN_DIST_SRC_KERNEL = 2, AN_DIST_SRC_CPU_OP = 3 };

/* One collective call of one rank. */
typedef struct an_dist_coll {
    uint32_t key;     /* what is matched with seq: MPI's communicator ("mpi comm ID"), else the name */
    uint32_t name;    /* the operation (MPI_Allreduce, a kernel's name, nccl:all_reduce) */
    int64_t seq;      /* MPI: the communicator's sequence number; else the k-th (from 1) of its name */
    int64_t ts, end;  /* arrival and departure on the rank's own clock, ns */
    int64_t comm_size; /* MPI's comm_size argument, 0 when not given */
    double bytes;     /* its bytes argument, 0 when not given */
} an_dist_coll;

/* A rank's summary. Intervals are unions over every thread and device of the
 * rank, so that concurrent work is counted once. */
typedef struct an_dist_rank {
    int64_t t0, t1;    /* its first event's start, its last event's end (its own clock) */
    int64_t compute;   /* |C|: the union of computation intervals */
    int64_t comm;      /* |M|: the union of communication intervals */
    int64_t overlap;   /* |C and M| */
    int on_gpu;        /* C and M are GPU activity (the rank ran kernels), else CPU spans */
    int compute_outside; /* a CPU rank with no computation span: C is what M leaves of the
                            job's window (the report's, compute 0 here) */
    int source;        /* AN_DIST_SRC_* of its collectives */
    size_t comm_events, compute_events;
    an_dist_coll *c;
    size_t nc, cap;
} an_dist_rank;

/* Summarizes the events of t whose pid is one of pids (sorted ascending; all
 * of t's when pids is NULL). Communication: spans of category "mpi" (mlprof's MPI hook), GPU
 * kernels an_gpu_kind calls communication (ncclKernel*, ncclDevKernel*), and
 * CPU operators named nccl:*, gloo:*, c10d::* or record_param_comms. A rank
 * with GPU activity is measured on the GPU (kernels, copies, memsets), else on
 * the CPU (every span that is not the trace's envelope, less on its own
 * thread the communication calls it encloses). Its collectives: the
 * MPI spans with "comm" and "seq" arguments and no "peer" (point-to-point
 * calls carry a peer), else its communication kernels, else its nccl:/gloo:
 * operators; source (AN_DIST_SRC_*, not NONE) asks for those of one kind
 * whatever else the rank has (kernels DIR: its communication kernels).
 * Records without a sequence number of their own (kernels, operators) are
 * numbered by order; the records come grouped by key (ascending index; the
 * name but for MPI's), in the order they start. Returns 0, or -1 when out of
 * memory. */
int an_dist_collect(const an_trace *t, const int64_t *pids, size_t npids, an_dist_names *names, int source,
                    an_dist_rank *r);
void an_dist_rank_free(an_dist_rank *r);

/* One rank as the report takes it. */
typedef struct an_dist_input {
    long long rank;
    const char *path;
    const char *rank_from; /* "distributedInfo", "file order", "process name" */
    long long world_size;  /* its distributedInfo.world_size, or -1 */
    int64_t offset;        /* ns added to its times to put them on the common clock */
    const an_dist_rank *d;
} an_dist_input;

/* What --format csv writes: one row per rank, or one per rank's call of each
 * matched collective (key, name, seq, rank, arrival, late, wait, duration,
 * bytes, the instance's last rank and skew). */
enum { AN_DIST_CSV_RANKS = 0, AN_DIST_CSV_COLLECTIVES = 1 };

/* What the report says of its inputs besides the ranks (the traces left
 * out, warnings): members of its JSON object (",\"left_out\":[...]", put
 * after "clock"), and lines of text put under the table's first line. */
typedef struct an_dist_said {
    const char *json;
    const char *text;
} an_dist_said;

/* The report over n ranks (in rank order; distinct ranks): as a table, JSON
 * or CSV (o->format; CSV: the table csv says, AN_DIST_CSV_*; notes says where
 * the rest is);
 * o->top bounds the collectives listed one by one (0: all). clock says how
 * the ranks' times were put on one clock; said: NULL, or what is said of
 * the inputs besides. Figures are defined in
 * an_dist_help. The ranks below the largest world_size that no input is are
 * named (notes, JSON's missing_ranks). Returns 0, or -1 when out of memory. */
int an_dist_report(const an_dist_input *in, size_t n, const an_dist_names *names, const char *what,
                   const char *clock, const an_dist_said *said, const an_options *o, int csv, mlprof__sb *out,
                   mlprof__sb *notes);

/* The definitions of every figure, for mlprof ranks --help. */
extern const char an_dist_help[];

#endif /* MLPROF_ANALYZE_DIST_RANKS_H */
