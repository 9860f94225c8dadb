/*
 * run_nccl.c - one rank of a 2-rank NCCL job for nccl_check.py, over the fake
 * NCCL (fake_nccl.c): usage run_nccl RANK ID. Both ranks give the same ID,
 * so their communicators are the same one; each makes the same calls:
 *   AllReduce x2 (1024 float32), Broadcast (256 int32, root 0),
 *   a group of Send and Recv (100 uint8, to and from the other rank),
 *   a group of AllGather (64 float64) and ReduceScatter (32 bfloat16),
 *   Reduce (16 int64, root 1),
 *   then on a communicator split from it (both ranks in color 7):
 *   AllReduce (8 float16).
 * usage run_nccl RANK ID N: then N AllReduce calls more, and the mean time
 * of one said on stdout (the hook's cost per call, for the README; no test
 * reads it).
 * usage run_nccl solo ID: one process, a communicator of one rank:
 *   AllReduce x2 (1024 float32), Broadcast (256 int32, root 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    char internal[128];
} ncclUniqueId;
typedef void *ncclComm_t;
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(ncclComm_t comm);
int ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *out, void *config);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st);
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st);
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, void *st);
int ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st);
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st);
int ncclSend(const void *s, size_t n, int dt, int peer, ncclComm_t c, void *st);
int ncclRecv(void *r, size_t n, int dt, int peer, ncclComm_t c, void *st);

enum { INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 };

static void ok(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "run_nccl: %s failed: %d\n", what, rc);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: run_nccl RANK ID [N]\n");
        return 2;
    }
    int rank = atoi(argv[1]), peer = 1 - rank;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    snprintf(id.internal, sizeof id.internal, "%s", argv[2]);
    static char buf[2][16384];
    ncclComm_t comm;
    if (strcmp(argv[1], "solo") == 0) {
        ok(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank");
        for (int i = 0; i < 2; i++)
            ok(ncclAllReduce(buf[0], buf[1], 1024, FLOAT32, 0, comm, NULL), "ncclAllReduce");
        ok(ncclBroadcast(buf[0], buf[1], 256, INT32, 0, comm, NULL), "ncclBroadcast");
        ok(ncclCommDestroy(comm), "ncclCommDestroy");
        return 0;
    }
    ok(ncclCommInitRank(&comm, 2, id, rank), "ncclCommInitRank");
    for (int i = 0; i < 2; i++)
        ok(ncclAllReduce(buf[0], buf[1], 1024, FLOAT32, 0, comm, NULL), "ncclAllReduce");
    ok(ncclBroadcast(buf[0], buf[1], 256, INT32, 0, comm, NULL), "ncclBroadcast");
    ok(ncclGroupStart(), "ncclGroupStart");
    ok(ncclSend(buf[0], 100, UINT8, peer, comm, NULL), "ncclSend");
    ok(ncclRecv(buf[1], 100, UINT8, peer, comm, NULL), "ncclRecv");
    ok(ncclGroupEnd(), "ncclGroupEnd");
    ok(ncclGroupStart(), "ncclGroupStart");
    ok(ncclAllGather(buf[0], buf[1], 64, FLOAT64, comm, NULL), "ncclAllGather");
    ok(ncclReduceScatter(buf[0], buf[1], 32, BFLOAT16, 0, comm, NULL), "ncclReduceScatter");
    ok(ncclGroupEnd(), "ncclGroupEnd");
    ok(ncclReduce(buf[0], buf[1], 16, INT64, 0, 1, comm, NULL), "ncclReduce");
    ncclComm_t sub;
    ok(ncclCommSplit(comm, 7, rank, &sub, NULL), "ncclCommSplit");
    ok(ncclAllReduce(buf[0], buf[1], 8, FLOAT16, 0, sub, NULL), "ncclAllReduce");
    ok(ncclCommDestroy(sub), "ncclCommDestroy");
    if (argc == 4) {
        long n = atol(argv[3]);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++)
            ok(ncclAllReduce(buf[0], buf[1], 1024, FLOAT32, 0, comm, NULL), "ncclAllReduce");
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)(n > 0 ? n : 1);
        printf("%.1f ns per ncclAllReduce\n", ns);
    }
    ok(ncclCommDestroy(comm), "ncclCommDestroy");
    return 0;
}
