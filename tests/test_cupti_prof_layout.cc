/*
 * test_cupti_prof_layout.cc - mlprof's declarations of CUPTI's callback,
 * profiler, host and range profiler parameter blocks
 * (src/gpu/cupti_prof_abi.h) against the CUDA headers installed here: every
 * field at CUPTI's offset and size, each block's size as CUPTI's
 * *_STRUCT_SIZE, and the ids and codes mlprof uses. C++, because
 * cupti_profiler_host.h includes <string>; built only where a C++ compiler
 * and the headers are found.
 */
#include <cstddef>
#include <cstdio>

#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_target.h>

#include "../src/gpu/cupti_abi.h"
#include "../src/gpu/cupti_prof_abi.h"
#include "layout_check.h"

/* the block's size as mlprof gives it, against CUPTI's macro */
#define BLOCK(ours, last, theirs) same(#ours " block size", MLPROF__CUPTI_SIZE(ours, last), theirs##_STRUCT_SIZE)

int main()
{
    FIELD(cupti_callback_data, CUpti_CallbackData, site, callbackSite);
    FIELD(cupti_callback_data, CUpti_CallbackData, symbol_name, symbolName);
    FIELD(cupti_callback_data, CUpti_CallbackData, context, context);
    FIELD(cupti_callback_data, CUpti_CallbackData, correlation_id, correlationId);
    FIELD(cupti_resource_data, CUpti_ResourceData, context, context);

    FIELD(cupti_chip_name, CUpti_Device_GetChipName_Params, device, deviceIndex);
    FIELD(cupti_chip_name, CUpti_Device_GetChipName_Params, chip, pChipName);
    BLOCK(cupti_chip_name, chip, CUpti_Device_GetChipName_Params);
    BLOCK(cupti_prof_init, priv, CUpti_Profiler_Initialize_Params);
    FIELD(cupti_counter_avail, CUpti_Profiler_GetCounterAvailability_Params, context, ctx);
    FIELD(cupti_counter_avail, CUpti_Profiler_GetCounterAvailability_Params, image_size, counterAvailabilityImageSize);
    FIELD(cupti_counter_avail, CUpti_Profiler_GetCounterAvailability_Params, image, pCounterAvailabilityImage);
    BLOCK(cupti_counter_avail, image, CUpti_Profiler_GetCounterAvailability_Params);

    FIELD(cupti_host_init, CUpti_Profiler_Host_Initialize_Params, profiler_type, profilerType);
    FIELD(cupti_host_init, CUpti_Profiler_Host_Initialize_Params, chip, pChipName);
    FIELD(cupti_host_init, CUpti_Profiler_Host_Initialize_Params, availability, pCounterAvailabilityImage);
    FIELD(cupti_host_init, CUpti_Profiler_Host_Initialize_Params, host, pHostObject);
    BLOCK(cupti_host_init, host, CUpti_Profiler_Host_Initialize_Params);
    FIELD(cupti_host_deinit, CUpti_Profiler_Host_Deinitialize_Params, host, pHostObject);
    BLOCK(cupti_host_deinit, host, CUpti_Profiler_Host_Deinitialize_Params);
    FIELD(cupti_host_add_metrics, CUpti_Profiler_Host_ConfigAddMetrics_Params, metrics, ppMetricNames);
    FIELD(cupti_host_add_metrics, CUpti_Profiler_Host_ConfigAddMetrics_Params, n, numMetrics);
    BLOCK(cupti_host_add_metrics, n, CUpti_Profiler_Host_ConfigAddMetrics_Params);
    FIELD(cupti_host_config_image, CUpti_Profiler_Host_GetConfigImageSize_Params, host, pHostObject);
    FIELD(cupti_host_config_image, CUpti_Profiler_Host_GetConfigImageSize_Params, image_size, configImageSize);
    BLOCK(cupti_host_config_image, image_size, CUpti_Profiler_Host_GetConfigImageSize_Params);
    FIELD(cupti_host_config_image, CUpti_Profiler_Host_GetConfigImage_Params, image_size, configImageSize);
    FIELD(cupti_host_config_image, CUpti_Profiler_Host_GetConfigImage_Params, image, pConfigImage);
    BLOCK(cupti_host_config_image, image, CUpti_Profiler_Host_GetConfigImage_Params);
    FIELD(cupti_host_passes, CUpti_Profiler_Host_GetNumOfPasses_Params, image_size, configImageSize);
    FIELD(cupti_host_passes, CUpti_Profiler_Host_GetNumOfPasses_Params, image, pConfigImage);
    FIELD(cupti_host_passes, CUpti_Profiler_Host_GetNumOfPasses_Params, passes, numOfPasses);
    BLOCK(cupti_host_passes, passes, CUpti_Profiler_Host_GetNumOfPasses_Params);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, host, pHostObject);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, counter_data, pCounterDataImage);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, counter_data_size,
          counterDataImageSize);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, range, rangeIndex);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, metrics, ppMetricNames);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, n, numMetrics);
    FIELD(cupti_host_evaluate, CUpti_Profiler_Host_EvaluateToGpuValues_Params, values, pMetricValues);
    BLOCK(cupti_host_evaluate, values, CUpti_Profiler_Host_EvaluateToGpuValues_Params);

    FIELD(cupti_rp_enable, CUpti_RangeProfiler_Enable_Params, context, ctx);
    FIELD(cupti_rp_enable, CUpti_RangeProfiler_Enable_Params, object, pRangeProfilerObject);
    BLOCK(cupti_rp_enable, object, CUpti_RangeProfiler_Enable_Params);
    FIELD(cupti_rp_object, CUpti_RangeProfiler_Start_Params, object, pRangeProfilerObject);
    BLOCK(cupti_rp_object, object, CUpti_RangeProfiler_Start_Params);
    BLOCK(cupti_rp_object, object, CUpti_RangeProfiler_Disable_Params);
    FIELD(cupti_rp_stop, CUpti_RangeProfiler_Stop_Params, all_passes_submitted, isAllPassSubmitted);
    BLOCK(cupti_rp_stop, all_passes_submitted, CUpti_RangeProfiler_Stop_Params);
    FIELD(cupti_rp_decode, CUpti_RangeProfiler_DecodeData_Params, ranges_dropped, numOfRangeDropped);
    BLOCK(cupti_rp_decode, ranges_dropped, CUpti_RangeProfiler_DecodeData_Params);
    FIELD(cupti_rp_data_size, CUpti_RangeProfiler_GetCounterDataSize_Params, metrics, pMetricNames);
    FIELD(cupti_rp_data_size, CUpti_RangeProfiler_GetCounterDataSize_Params, max_ranges, maxNumOfRanges);
    FIELD(cupti_rp_data_size, CUpti_RangeProfiler_GetCounterDataSize_Params, max_range_tree_nodes,
          maxNumRangeTreeNodes);
    FIELD(cupti_rp_data_size, CUpti_RangeProfiler_GetCounterDataSize_Params, counter_data_size, counterDataSize);
    BLOCK(cupti_rp_data_size, counter_data_size, CUpti_RangeProfiler_GetCounterDataSize_Params);
    FIELD(cupti_rp_data_init, CUpti_RangeProfiler_CounterDataImage_Initialize_Params, counter_data_size,
          counterDataSize);
    FIELD(cupti_rp_data_init, CUpti_RangeProfiler_CounterDataImage_Initialize_Params, counter_data, pCounterData);
    BLOCK(cupti_rp_data_init, counter_data, CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, config_size, configSize);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, config, pConfig);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, counter_data_size, counterDataImageSize);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, counter_data, pCounterDataImage);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, range, range);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, replay_mode, replayMode);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, max_ranges_per_pass, maxRangesPerPass);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, num_nesting_levels, numNestingLevels);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, min_nesting_level, minNestingLevel);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, pass_index, passIndex);
    FIELD(cupti_rp_set_config, CUpti_RangeProfiler_SetConfig_Params, target_nesting_level, targetNestingLevel);
    BLOCK(cupti_rp_set_config, target_nesting_level, CUpti_RangeProfiler_SetConfig_Params);
    FIELD(cupti_rp_data_info, CUpti_RangeProfiler_GetCounterDataInfo_Params, counter_data, pCounterDataImage);
    FIELD(cupti_rp_data_info, CUpti_RangeProfiler_GetCounterDataInfo_Params, ranges, numTotalRanges);
    BLOCK(cupti_rp_data_info, ranges, CUpti_RangeProfiler_GetCounterDataInfo_Params);

    same("domain resource", CUPTI_DOMAIN_RESOURCE, CUPTI_CB_DOMAIN_RESOURCE);
    same("api enter", CUPTI_SITE_ENTER, CUPTI_API_ENTER);
    same("api exit", CUPTI_SITE_EXIT, CUPTI_API_EXIT);
    same("context created", CUPTI_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
    same("context destroy", CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    same("auto range", CUPTI_AUTO_RANGE, CUPTI_AutoRange);
    same("kernel replay", CUPTI_KERNEL_REPLAY, CUPTI_KernelReplay);
    same("range profiler", CUPTI_PROFILER_RANGE_PROFILER, CUPTI_PROFILER_TYPE_RANGE_PROFILER);
    same("invalid metric", CUPTI_ERR_INVALID_METRIC_NAME, CUPTI_ERROR_INVALID_METRIC_NAME);
    same("not supported", CUPTI_ERR_NOT_SUPPORTED, CUPTI_ERROR_NOT_SUPPORTED);
    same("multiple subscribers", CUPTI_ERR_MULTIPLE_SUBSCRIBERS, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    same("insufficient privileges", CUPTI_ERR_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);

    /* the launches counters.c subscribes to, by id */
    static const unsigned rt[] = {MLPROF__CUPTI_RUNTIME_LAUNCHES}, drv[] = {MLPROF__CUPTI_DRIVER_LAUNCHES};
    static const unsigned rt_graph[] = {MLPROF__CUPTI_RUNTIME_GRAPHS}, drv_graph[] = {MLPROF__CUPTI_DRIVER_GRAPHS};
    same("runtime launches", sizeof rt / sizeof rt[0], 8);
    same("cudaLaunchKernel", rt[0], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    same("cudaLaunchKernel_ptsz", rt[1], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000);
    same("cudaLaunchCooperativeKernel", rt[2], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000);
    same("cudaLaunchCooperativeKernel_ptsz", rt[3], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000);
    same("cudaLaunchKernelExC", rt[4], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060);
    same("cudaLaunchKernelExC_ptsz", rt[5], CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060);
    same("__cudaLaunchKernel", rt[6], CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
    same("__cudaLaunchKernel_ptsz", rt[7], CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000);
    same("cudaGraphLaunch", rt_graph[0], CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);
    same("cudaGraphLaunch_ptsz", rt_graph[1], CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000);
    same("driver launches", sizeof drv / sizeof drv[0], 6);
    same("cuLaunchKernel", drv[0], CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
    same("cuLaunchKernel_ptsz", drv[1], CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
    same("cuLaunchCooperativeKernel", drv[2], CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel);
    same("cuLaunchCooperativeKernel_ptsz", drv[3], CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz);
    same("cuLaunchKernelEx", drv[4], CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
    same("cuLaunchKernelEx_ptsz", drv[5], CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
    same("cuGraphLaunch", drv_graph[0], CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
    same("cuGraphLaunch_ptsz", drv_graph[1], CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
    printf("cupti profiler layout: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
