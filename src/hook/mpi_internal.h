/*
 * mpi_internal.h - what the MPI interposers (mpi.c) and the clock alignment
 * over MPI (mpi_sync.c) share: the MPI library's ABI as read at run time, and
 * the PMPI functions found by name. No mpi.h is needed to build: every handle
 * (communicator, datatype, request, window, group) is an opaque value passed
 * through as wide as a pointer, and what differs between MPI libraries is in
 * one table (mpi_sync.c, mlprof__mpi_abi_get).
 */
#ifndef MLPROF_MPI_INTERNAL_H
#define MLPROF_MPI_INTERNAL_H

#include <stdint.h>

/* A handle of any MPI object. MPICH's are ints, Open MPI's pointers: an int
 * argument passed in a 64-bit slot is read back by MPICH from its low half,
 * so passing it through unchanged is right for both; comparisons and table
 * keys go through mlprof__mpi_norm. */
typedef intptr_t mlprof__mpi_h;

/* The constants and layouts an MPI library chose where the standard leaves
 * them open. */
typedef struct mlprof__mpi_abi {
    const char *name;      /* "openmpi", "mpich" */
    int handle_size;       /* bytes of a handle in arrays (requests) and out-parameters */
    int status_size;       /* bytes of an MPI_Status */
    int source_offset;     /* of MPI_SOURCE in an MPI_Status */
    int tag_offset;        /* of MPI_TAG */
    intptr_t status_ignore; /* MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE */
    int any_source, any_tag, proc_null, root;
    intptr_t in_place;
    mlprof__mpi_h comm_world, comm_null, request_null, byte;
} mlprof__mpi_abi;

/* The running MPI library's table, found from MPI_Get_library_version (which
 * may be called before MPI_Init); NULL when it is neither Open MPI nor MPICH
 * (or one of MPICH's derivatives: Intel MPI, MVAPICH, Cray MPICH). */
const mlprof__mpi_abi *mlprof__mpi_abi_get(void);

/* A handle as the library compares it: the low 32 bits for int handles. */
static inline mlprof__mpi_h mlprof__mpi_norm(const mlprof__mpi_abi *abi, mlprof__mpi_h h)
{
    return abi->handle_size == 4 ? (mlprof__mpi_h)(uint32_t)h : h;
}

/* Reads and writes one handle of an array or out-parameter. */
mlprof__mpi_h mlprof__mpi_handle_at(const mlprof__mpi_abi *abi, const void *array, int i);

/* The PMPI function of that name, found once (abort when the program called
 * an MPI function whose PMPI twin no library defines). */
void *mlprof__mpi_fn(void **slot, const char *name);

/* Flow ends and requests lost since the start (a full queue or table). */
uint64_t mlprof__mpi_lost(void);
/* At each drain (ctl_lock held): the flow ends the threads buffered go to
 * the producers' queue, or are dropped when the drain discards (mpi.c). */
void mlprof__mpi_flush(int discard);
/* In a forked child: the hook records nothing more (mpi.c). */
void mlprof__mpi_after_fork(void);

/* Clock alignment (mpi_sync.c). After MPI_Init: makes the private
 * communicator and takes the first sample; before MPI_Finalize: the last
 * sample, then frees the communicator. Both are collective over
 * MPI_COMM_WORLD. */
void mlprof__mpi_sync_init(void);
void mlprof__mpi_sync_finalize(void);

#endif /* MLPROF_MPI_INTERNAL_H */
