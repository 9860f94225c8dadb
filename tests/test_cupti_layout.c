/*
 * test_cupti_layout.c - mlprof's declarations of CUPTI's records
 * (src/gpu/cupti_abi.h) against the CUDA headers installed here: every
 * field mlprof reads at the offset and with the size that CUPTI writes, and
 * the enumerations' values. Built only where cupti_activity.h is found.
 */
#include <stddef.h>
#include <stdio.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include "../src/gpu/cupti_abi.h"
#include "layout_check.h"


int main(void)
{
    FIELD(cupti_kernel, CUpti_ActivityKernel10, registers_per_thread, registersPerThread);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, start, start);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, end, end);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, device_id, deviceId);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, context_id, contextId);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, stream_id, streamId);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, grid[0], gridX);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, grid[2], gridZ);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, block[0], blockX);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, block[2], blockZ);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, static_shared_memory, staticSharedMemory);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, dynamic_shared_memory, dynamicSharedMemory);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, local_memory_per_thread, localMemoryPerThread);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, correlation_id, correlationId);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, grid_id, gridId);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, name, name);
    FIELD(cupti_kernel, CUpti_ActivityKernel10, shared_memory_executed, sharedMemoryExecuted);

    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, copy_kind, copyKind);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, src_kind, srcKind);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, dst_kind, dstKind);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, bytes, bytes);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, start, start);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, end, end);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, device_id, deviceId);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, stream_id, streamId);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, correlation_id, correlationId);
    FIELD(cupti_memcpy, CUpti_ActivityMemcpy6, runtime_correlation_id, runtimeCorrelationId);

    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, copy_kind, copyKind);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, dst_kind, dstKind);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, bytes, bytes);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, end, end);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, device_id, deviceId);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, context_id, contextId);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, start, start);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, stream_id, streamId);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, src_device_id, srcDeviceId);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, dst_device_id, dstDeviceId);
    FIELD(cupti_memcpy_p2p, CUpti_ActivityMemcpyPtoP4, correlation_id, correlationId);

    FIELD(cupti_memset, CUpti_ActivityMemset4, value, value);
    FIELD(cupti_memset, CUpti_ActivityMemset4, bytes, bytes);
    FIELD(cupti_memset, CUpti_ActivityMemset4, start, start);
    FIELD(cupti_memset, CUpti_ActivityMemset4, end, end);
    FIELD(cupti_memset, CUpti_ActivityMemset4, device_id, deviceId);
    FIELD(cupti_memset, CUpti_ActivityMemset4, stream_id, streamId);
    FIELD(cupti_memset, CUpti_ActivityMemset4, correlation_id, correlationId);
    FIELD(cupti_memset, CUpti_ActivityMemset4, memory_kind, memoryKind);

    FIELD(cupti_api, CUpti_ActivityAPI, cbid, cbid);
    FIELD(cupti_api, CUpti_ActivityAPI, start, start);
    FIELD(cupti_api, CUpti_ActivityAPI, end, end);
    FIELD(cupti_api, CUpti_ActivityAPI, thread_id, threadId);
    FIELD(cupti_api, CUpti_ActivityAPI, correlation_id, correlationId);
    FIELD(cupti_api, CUpti_ActivityAPI, return_value, returnValue);

    FIELD(cupti_sync, CUpti_ActivitySynchronization2, type, type);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, start, start);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, end, end);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, correlation_id, correlationId);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, context_id, contextId);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, stream_id, streamId);
    FIELD(cupti_sync, CUpti_ActivitySynchronization2, cuda_event_id, cudaEventId);

    FIELD(cupti_device, CUpti_ActivityDevice5, threads_per_warp, numThreadsPerWarp);
    FIELD(cupti_device, CUpti_ActivityDevice5, multiprocessors, numMultiprocessors);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_warps_per_sm, maxWarpsPerMultiprocessor);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_blocks_per_sm, maxBlocksPerMultiprocessor);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_shared_memory_per_sm, maxSharedMemoryPerMultiprocessor);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_registers_per_sm, maxRegistersPerMultiprocessor);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_registers_per_block, maxRegistersPerBlock);
    FIELD(cupti_device, CUpti_ActivityDevice5, max_threads_per_block, maxThreadsPerBlock);
    FIELD(cupti_device, CUpti_ActivityDevice5, cc_major, computeCapabilityMajor);
    FIELD(cupti_device, CUpti_ActivityDevice5, cc_minor, computeCapabilityMinor);
    FIELD(cupti_device, CUpti_ActivityDevice5, id, id);
    FIELD(cupti_device, CUpti_ActivityDevice5, name, name);

    FIELD(cupti_context, CUpti_ActivityContext3, context_id, contextId);
    FIELD(cupti_context, CUpti_ActivityContext3, device_id, deviceId);

    FIELD(cupti_overhead, CUpti_ActivityOverhead3, start, start);
    FIELD(cupti_overhead, CUpti_ActivityOverhead3, end, end);

    same("kind memcpy", CUPTI_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY);
    same("kind memcpy2", CUPTI_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMCPY2);
    same("kind memset", CUPTI_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET);
    same("kind kernel", CUPTI_KIND_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL);
    same("kind concurrent kernel", CUPTI_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    same("kind driver", CUPTI_KIND_DRIVER, CUPTI_ACTIVITY_KIND_DRIVER);
    same("kind runtime", CUPTI_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_RUNTIME);
    same("kind device", CUPTI_KIND_DEVICE, CUPTI_ACTIVITY_KIND_DEVICE);
    same("kind context", CUPTI_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_CONTEXT);
    same("kind overhead", CUPTI_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_OVERHEAD);
    same("kind synchronization", CUPTI_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
    same("domain driver", CUPTI_DOMAIN_DRIVER, CUPTI_CB_DOMAIN_DRIVER_API);
    same("domain runtime", CUPTI_DOMAIN_RUNTIME, CUPTI_CB_DOMAIN_RUNTIME_API);
    same("flush forced", CUPTI_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    same("thread id system", CUPTI_THREAD_ID_SYSTEM, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    same("max limit reached", CUPTI_ERR_MAX_LIMIT_REACHED, CUPTI_ERROR_MAX_LIMIT_REACHED);
    same("memcpy kinds", CUPTI_MEMCPY_KINDS, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP + 1);
    same("memory kinds", CUPTI_MEMORY_KINDS, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC + 1);
    same("sync kinds", CUPTI_SYNC_KINDS, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE + 1);
    printf("cupti layout: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
