/*
 * mpi_app.c - an MPI program with known messages and collectives, run on 4
 * ranks under `mlprof run --hooks mpi` by mpi_check.py, which checks the
 * spans, the flows and the clock alignment in the ranks' traces. Built with
 * mpicc (mpi.h is needed here, never by mlprof).
 *
 * Rank r, of n:
 *   - MPI_Send of 100*(r+1) bytes, tag 7, twice to (r+1)%n; the matching
 *     MPI_Recv from (r-1)%n, the second with MPI_ANY_SOURCE and MPI_ANY_TAG;
 *   - MPI_Isend of 64 ints, tag 9, to (r-1)%n and MPI_Irecv from (r+1)%n,
 *     completed by one MPI_Waitall (after an MPI_Barrier, so that the
 *     wildcard receive can only match the tag 7 message);
 *   - MPI_Isend/MPI_Irecv, tag 11, 8 bytes, to and from the same peers,
 *     completed by MPI_Wait each;
 *   - MPI_Sendrecv of 16 bytes, tag 13, to (r+2)%n;
 *   - MPI_Barrier, MPI_Bcast (1000 bytes, root 0), MPI_Allreduce (8
 *     doubles), MPI_Reduce (4 ints, root 2), MPI_Allgather (2 ints),
 *     MPI_Alltoall (1 int each), MPI_Gather and MPI_Scatter (root 1, 3 ints),
 *     MPI_Scan (1 long); MPI_Iallreduce (8 doubles) and MPI_Ibarrier, each
 *     completed by MPI_Wait;
 *   - MPI_Comm_split by r%2 and one MPI_Allreduce (1 int) on the half;
 *   - MPI_Put of 1 int to (r+1)%n between two MPI_Win_fence.
 * With an argument SECONDS it sleeps that long before MPI_Finalize (the
 * clock test, so that drift shows between the two samples).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                          \
    do {                                                                                                  \
        if ((x) != MPI_SUCCESS) {                                                                         \
            fprintf(stderr, "mpi_app: %s failed\n", #x);                                                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                 \
        }                                                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    int provided;
    CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided));
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int next = (r + 1) % n, prev = (r + n - 1) % n;

    char big[1000] = {0}, in[1000];
    CHECK(MPI_Send(big, 100 * (r + 1), MPI_BYTE, next, 7, MPI_COMM_WORLD));
    CHECK(MPI_Send(big, 100 * (r + 1), MPI_BYTE, next, 7, MPI_COMM_WORLD));
    CHECK(MPI_Recv(in, sizeof in, MPI_BYTE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_Status st;
    CHECK(MPI_Recv(in, sizeof in, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    if (st.MPI_SOURCE != prev)
        return 2;
    CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* no other message can match the wildcards before it */

    int ints_out[64] = {0}, ints_in[64];
    MPI_Request reqs[2];
    CHECK(MPI_Isend(ints_out, 64, MPI_INT, prev, 9, MPI_COMM_WORLD, &reqs[0]));
    CHECK(MPI_Irecv(ints_in, 64, MPI_INT, next, 9, MPI_COMM_WORLD, &reqs[1]));
    CHECK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));

    char small_out[8] = {0}, small_in[8];
    MPI_Request a, b;
    CHECK(MPI_Irecv(small_in, 8, MPI_BYTE, next, 11, MPI_COMM_WORLD, &b));
    CHECK(MPI_Isend(small_out, 8, MPI_BYTE, prev, 11, MPI_COMM_WORLD, &a));
    CHECK(MPI_Wait(&b, MPI_STATUS_IGNORE));
    CHECK(MPI_Wait(&a, MPI_STATUS_IGNORE));

    char sr_out[16] = {0}, sr_in[16];
    CHECK(MPI_Sendrecv(sr_out, 16, MPI_BYTE, (r + 2) % n, 13, sr_in, 16, MPI_BYTE, (r + n - 2) % n, 13,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE));

    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(MPI_Bcast(big, 1000, MPI_BYTE, 0, MPI_COMM_WORLD));
    double d[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dsum[8];
    CHECK(MPI_Allreduce(d, dsum, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    int i4[4] = {r, r, r, r}, i4sum[4];
    CHECK(MPI_Reduce(i4, i4sum, 4, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD));
    int two[2] = {r, r}, *all = calloc((size_t)n * 3, sizeof(int));
    CHECK(MPI_Allgather(two, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
    int *one = calloc((size_t)n, sizeof(int));
    CHECK(MPI_Alltoall(one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
    int three[3] = {r, r, r};
    CHECK(MPI_Gather(three, 3, MPI_INT, all, 3, MPI_INT, 1, MPI_COMM_WORLD));
    CHECK(MPI_Scatter(all, 3, MPI_INT, three, 3, MPI_INT, 1, MPI_COMM_WORLD));
    long lv = r, lsum;
    CHECK(MPI_Scan(&lv, &lsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    MPI_Request ra, rb;
    CHECK(MPI_Iallreduce(d, dsum, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &ra));
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &rb));
    CHECK(MPI_Wait(&ra, MPI_STATUS_IGNORE));
    CHECK(MPI_Wait(&rb, MPI_STATUS_IGNORE));

    MPI_Comm half;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half));
    int hv = 1, hsum;
    CHECK(MPI_Allreduce(&hv, &hsum, 1, MPI_INT, MPI_SUM, half));
    CHECK(MPI_Comm_free(&half));

    int winbuf = -1, val = r;
    MPI_Win win;
    CHECK(MPI_Win_create(&winbuf, sizeof winbuf, sizeof winbuf, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK(MPI_Win_fence(0, win));
    CHECK(MPI_Put(&val, 1, MPI_INT, next, 0, 1, MPI_INT, win));
    CHECK(MPI_Win_fence(0, win));
    CHECK(MPI_Win_free(&win));
    if (winbuf != prev)
        return 3;

    if (argc > 1) {
        double s = atof(argv[1]);
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    free(all);
    free(one);
    CHECK(MPI_Finalize());
    return 0;
}
