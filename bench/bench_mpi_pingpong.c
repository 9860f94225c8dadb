/*
 * bench_mpi_pingpong.c - the mpi hook's cost per call, built with mpicc by
 * bench_mpi.py and run on 2 ranks under `mlprof run --hooks mpi`. Rank 0 and
 * rank 1 bounce an 8-byte message; blocks of round trips through MPI_Send and
 * MPI_Recv (the hook's: spans, arguments, a flow per message) take turns with
 * blocks through PMPI_Send and PMPI_Recv (the library's, past the hook), in
 * one run, so both see the same machine. A round trip is 4 calls (2 on each
 * rank) on the critical path.
 *
 * usage: bench_mpi_pingpong ROUNDS ITERATIONS
 * Rank 0 prints: plain_ns=median round trip through PMPI, hooked_ns=... (MPI)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ITERATIONS round trips; the mean in ns. */
static double block(int hooked, int rank, int iterations)
{
    char msg[8] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    for (int i = 0; i < iterations; i++) {
        if (rank == 0) {
            if (hooked) {
                MPI_Send(msg, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(msg, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                PMPI_Send(msg, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                PMPI_Recv(msg, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        } else if (rank == 1) {
            if (hooked) {
                MPI_Recv(msg, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(msg, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            } else {
                PMPI_Recv(msg, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                PMPI_Send(msg, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
    }
    return (now_ns() - t0) / iterations;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 10, iterations = argc > 2 ? atoi(argv[2]) : 10000;
    double *plain = calloc((size_t)rounds, sizeof(double)), *hooked = calloc((size_t)rounds, sizeof(double));
    block(1, rank, iterations / 10); /* warm-up */
    for (int r = 0; r < rounds; r++) { /* the order flips every round */
        int first = r % 2;
        double a = block(first, rank, iterations), b = block(!first, rank, iterations);
        plain[r] = first ? b : a;
        hooked[r] = first ? a : b;
    }
    qsort(plain, (size_t)rounds, sizeof(double), cmp);
    qsort(hooked, (size_t)rounds, sizeof(double), cmp);
    if (rank == 0)
        printf("plain_ns=%.0f hooked_ns=%.0f plain_min_ns=%.0f hooked_min_ns=%.0f\n", plain[rounds / 2],
               hooked[rounds / 2], plain[0], hooked[0]);
    free(plain);
    free(hooked);
    MPI_Finalize();
    return 0;
}
