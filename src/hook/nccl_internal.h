/*
 * nccl_internal.h - what the NCCL interposer (nccl.c) and mlprof's NCCL
 * profiler plugin (nccl_plugin.c) share, and the plugin interface's ABI.
 *
 * No NCCL header is needed to build: the structs below are written from the
 * layout that NCCL's ext-profiler documentation gives for each version of the
 * interface (ncclProfiler_v1, the first, in NCCL 2.23, then _v2 to _v5;
 * an NCCL that knows a newer one goes down to the newest mlprof exports),
 * field by field in the documented order, so that the compiler lays
 * them out as NCCL's own compiler does. Only the parts mlprof reads are
 * named; a union member is kept whole where it decides the union's size.
 */
#ifndef MLPROF_HOOK_NCCL_INTERNAL_H
#define MLPROF_HOOK_NCCL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

typedef int nccl_result; /* ncclResult_t: ncclSuccess is 0 */
enum { NCCL_OK = 0, NCCL_INTERNAL_ERROR = 3 };

/* Event types (the activation mask's bits), versions 1 to 4. */
enum {
    NCCL_PROF_GROUP = 1 << 0,
    NCCL_PROF_COLL = 1 << 1,
    NCCL_PROF_P2P = 1 << 2,
    NCCL_PROF_PROXY_OP = 1 << 3,
    NCCL_PROF_PROXY_STEP = 1 << 4,
    NCCL_PROF_PROXY_CTRL = 1 << 5,
    NCCL_PROF_KERNEL_CH = 1 << 6,
    NCCL_PROF_NET_PLUGIN = 1 << 7,
};

/* ncclDebugLogger_t (v4's init): level, flags, file, line, format, ... */
typedef void (*nccl_logger)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

typedef struct {
    pid_t pid;
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
} nccl_proxy_op_descr;

/* v1 (NCCL 2.23): func and datatype are NCCL's enum values, one byte each. */
typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            uint8_t func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            uint8_t datatype;
            uint32_t op;
            size_t trafficBytes;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            uint8_t algo;
            uint8_t proto;
            int isCollnet;
            int isNvls;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            uint8_t func;
            void *buff;
            uint8_t datatype;
            size_t count;
            int peer;
        } p2p;
        nccl_proxy_op_descr proxyOp;
        struct {
            int step;
        } proxyStep;
    };
} nccl_descr_v1;

/* v2: func, datatype, algo and proto become strings. */
typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            const char *func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            size_t trafficBytes;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
        } p2p;
        nccl_proxy_op_descr proxyOp;
        struct {
            int step;
        } proxyStep;
    };
} nccl_descr_v2;

/* v3: trafficBytes goes; kernel-channel and network events come. */
typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            const char *name;
            uint64_t commHash;
            uint64_t seqNumber;
            const char *func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nMaxChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *name;
            uint64_t commHash;
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
        } p2p;
        nccl_proxy_op_descr proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} nccl_descr_v3;

/* v4: the communicator's name and hash move to init. */
typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            uint64_t seqNumber;
            const char *func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
        } p2p;
        nccl_proxy_op_descr proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} nccl_descr_v4;

/* v5: the type widens to 64 bits, and API events (the calls themselves:
 * group, collective, p2p, kernel launch) come before the launch's events.
 * mlprof asks for the launch's (group, coll, p2p), as of v1 to v4. */
typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        struct {
            int graphCaptured;
            int groupDepth;
        } groupApi;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            int root;
            void *stream;
            _Bool graphCaptured;
        } collApi;
        struct {
            const char *func;
            size_t count;
            const char *datatype;
            void *stream;
            _Bool graphCaptured;
        } p2pApi;
        struct {
            void *stream;
        } kernelLaunch;
        struct {
            uint64_t seqNumber;
            const char *func;
            const void *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
            void *parentGroup;
        } coll;
        struct {
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
            void *parentGroup;
        } p2p;
        nccl_proxy_op_descr proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} nccl_descr_v5;

/* recordEventState's arguments: v1 to v3 ... */
typedef union {
    struct {
        size_t transSize;
        int steps;
    } proxyOp;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
} nccl_state_args_v1;
/* ... and v4 and v5, where the size moves to the step. */
typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void *data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} nccl_state_args_v4;

/* The exported structs: a name, then five functions. The descriptor and
 * state argument pointers differ by version only in their pointed-to type. */
#define NCCL_PLUGIN_STRUCT(V, INIT_ARGS, DESCR, ARGS)                                                    \
    typedef struct {                                                                                   \
        const char *name;                                                                              \
        nccl_result (*init) INIT_ARGS;                                                                 \
        nccl_result (*startEvent)(void *context, void **eHandle, DESCR *eDescr);                       \
        nccl_result (*stopEvent)(void *eHandle);                                                       \
        nccl_result (*recordEventState)(void *eHandle, int eState, ARGS *eStateArgs);                  \
        nccl_result (*finalize)(void *context);                                                        \
    } nccl_profiler_##V;
NCCL_PLUGIN_STRUCT(v1, (void **context, int *eActivationMask), nccl_descr_v1, nccl_state_args_v1)
NCCL_PLUGIN_STRUCT(v2, (void **context, int *eActivationMask), nccl_descr_v2, nccl_state_args_v1)
NCCL_PLUGIN_STRUCT(v3, (void **context, int *eActivationMask), nccl_descr_v3, nccl_state_args_v1)
NCCL_PLUGIN_STRUCT(v4,
                   (void **context, int *eActivationMask, const char *commName, uint64_t commHash, int nNodes,
                    int nranks, int rank, nccl_logger logfn),
                   nccl_descr_v4, nccl_state_args_v4)
NCCL_PLUGIN_STRUCT(v5,
                   (void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                    int nranks, int rank, nccl_logger logfn),
                   nccl_descr_v5, nccl_state_args_v4)
#undef NCCL_PLUGIN_STRUCT

/* ------------------------------------------------ shared by both files */

/* ncclDataType_t's names as NCCL prints them (ncclFloat32...), by value,
 * and their sizes; NULL and 0 past the table. */
const char *mlprof__nccl_dtype_name(int dtype);
int mlprof__nccl_dtype_size_of(int dtype);
/* The size of a type NCCL names (the plugin's v2+ datatype strings); 0 when unknown. */
int mlprof__nccl_dtype_size(const char *name);

/* Live plugin contexts with collective, p2p or group events on: while there
 * is one, the interposer leaves those calls to the plugin (never twice). */
extern int mlprof__nccl_plugin_live;

/* The communicator being created on this thread by ncclCommInitRank (the
 * interposer sets it around the real call): the plugin's v1-v3 init, which
 * NCCL makes from inside that call, learns the size from it. */
extern __thread int mlprof__nccl_init_nranks, mlprof__nccl_init_rank;

/* otherData.nccl: the plugin's version, communicators and lost events. */
void mlprof__nccl_other_data(mlprof__sb *out);

#endif /* MLPROF_HOOK_NCCL_INTERNAL_H */
