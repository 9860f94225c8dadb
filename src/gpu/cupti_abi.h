/*
 * cupti_abi.h - what mlprof uses of CUPTI's binary interface, declared here
 * from NVIDIA's documentation of the activity API so that no CUDA header is
 * needed to build (libcupti itself is found with dlopen at run time).
 *
 * Activity records are packed and 8-byte aligned. Each kind's record grows
 * by appending fields from one CUDA release to the next (CUpti_ActivityKernel4
 * to Kernel10, Memcpy5 to Memcpy6, ...); the prefixes below are the fields
 * every version since CUDA 11 has at these offsets, and the walk from record
 * to record is libcupti's own (cuptiActivityGetNextRecord), so a newer
 * library with longer records reads the same. test_cupti_layout checks every
 * offset against the CUDA headers where they are installed.
 */
#ifndef MLPROF_CUPTI_ABI_H
#define MLPROF_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define MLPROF__CUPTI_PACKED __attribute__((__packed__)) __attribute__((aligned(8)))

enum {
    CUPTI_OK = 0,
    CUPTI_ERR_NOT_INITIALIZED = 15,
    CUPTI_ERR_MAX_LIMIT_REACHED = 12,
    CUPTI_ERR_INSUFFICIENT_PRIVILEGES = 35,
};

/* CUpti_ActivityKind */
enum {
    CUPTI_KIND_MEMCPY = 1,
    CUPTI_KIND_MEMSET = 2,
    CUPTI_KIND_KERNEL = 3, /* serializes kernels: mlprof uses the concurrent kind */
    CUPTI_KIND_DRIVER = 4,
    CUPTI_KIND_RUNTIME = 5,
    CUPTI_KIND_DEVICE = 8,
    CUPTI_KIND_CONTEXT = 9,
    CUPTI_KIND_CONCURRENT_KERNEL = 10,
    CUPTI_KIND_OVERHEAD = 17,
    CUPTI_KIND_MEMCPY2 = 22, /* peer to peer */
    CUPTI_KIND_SYNCHRONIZATION = 38,
};

/* CUpti_CallbackDomain */
enum { CUPTI_DOMAIN_DRIVER = 1, CUPTI_DOMAIN_RUNTIME = 2 };

enum { CUPTI_FLUSH_FORCED = 1 };            /* CUpti_ActivityFlag */
enum { CUPTI_THREAD_ID_SYSTEM = 1 };        /* CUpti_ActivityThreadIdType: gettid() */

/* CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind */
enum { CUPTI_MEMCPY_KINDS = 11, CUPTI_MEMORY_KINDS = 8 };

/* CUpti_ActivitySynchronizationType */
enum { CUPTI_SYNC_KINDS = 5 };

typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
} cupti_record;

/* CUPTI_KIND_CONCURRENT_KERNEL: CUpti_ActivityKernel4 .. Kernel10 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint8_t cache_config;
    uint8_t shared_memory_config;
    uint16_t registers_per_thread;
    uint32_t partitioned_cache_requested;
    uint32_t partitioned_cache_executed;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    int32_t grid[3];
    int32_t block[3];
    int32_t static_shared_memory;
    int32_t dynamic_shared_memory;
    uint32_t local_memory_per_thread;
    uint32_t local_memory_total;
    uint32_t correlation_id;
    int64_t grid_id;
    const char *name;
    void *reserved0;
    uint64_t queued;
    uint64_t submitted;
    uint8_t launch_type;
    uint8_t carveout_requested_set;
    uint8_t carveout_requested;
    uint8_t padding;
    uint32_t shared_memory_executed; /* the shared memory per SM the driver configured, bytes */
} cupti_kernel;

/* CUPTI_KIND_MEMCPY: CUpti_ActivityMemcpy5 and 6 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint8_t copy_kind;
    uint8_t src_kind;
    uint8_t dst_kind;
    uint8_t flags;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t correlation_id;
    uint32_t runtime_correlation_id;
} cupti_memcpy;

/* CUPTI_KIND_MEMCPY2: CUpti_ActivityMemcpyPtoP3 and 4 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint8_t copy_kind;
    uint8_t src_kind;
    uint8_t dst_kind;
    uint8_t flags;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t src_device_id;
    uint32_t src_context_id;
    uint32_t dst_device_id;
    uint32_t dst_context_id;
    uint32_t correlation_id;
} cupti_memcpy_p2p;

/* CUPTI_KIND_MEMSET: CUpti_ActivityMemset3 and 4 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t correlation_id;
    uint16_t flags;
    uint16_t memory_kind;
} cupti_memset;

/* CUPTI_KIND_RUNTIME and CUPTI_KIND_DRIVER: CUpti_ActivityAPI */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t cbid;
    uint64_t start;
    uint64_t end;
    uint32_t process_id;
    uint32_t thread_id;
    uint32_t correlation_id;
    uint32_t return_value;
} cupti_api;

/* CUPTI_KIND_SYNCHRONIZATION: CUpti_ActivitySynchronization and 2 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t type;
    uint64_t start;
    uint64_t end;
    uint32_t correlation_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t cuda_event_id;
} cupti_sync;

/* CUPTI_KIND_DEVICE: CUpti_ActivityDevice4 and 5 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t flags;
    uint64_t global_memory_bandwidth; /* KB/s */
    uint64_t global_memory_size;
    uint32_t constant_memory_size;
    uint32_t l2_cache_size;
    uint32_t threads_per_warp;
    uint32_t core_clock_rate; /* kHz */
    uint32_t memcpy_engines;
    uint32_t multiprocessors;
    uint32_t max_ipc;
    uint32_t max_warps_per_sm;
    uint32_t max_blocks_per_sm;
    uint32_t max_shared_memory_per_sm;
    uint32_t max_registers_per_sm;
    uint32_t max_registers_per_block;
    uint32_t max_shared_memory_per_block;
    uint32_t max_threads_per_block;
    uint32_t max_block_dim[3];
    uint32_t max_grid_dim[3];
    uint32_t cc_major;
    uint32_t cc_minor;
    uint32_t id;
    uint32_t ecc_enabled;
    uint8_t uuid[16];
    const char *name;
} cupti_device;

/* CUPTI_KIND_CONTEXT: CUpti_ActivityContext .. Context3 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t context_id;
    uint32_t device_id;
    uint16_t compute_api_kind;
    uint16_t null_stream_id;
} cupti_context;

/* CUPTI_KIND_OVERHEAD: CUpti_ActivityOverhead .. Overhead3 */
typedef struct MLPROF__CUPTI_PACKED {
    uint32_t kind;
    uint32_t overhead_kind;
    uint32_t object_kind;
    uint32_t object_id[3]; /* process and thread, or device, context and stream */
    uint64_t start;
    uint64_t end;
} cupti_overhead;

#endif /* MLPROF_CUPTI_ABI_H */
