/*
 * cupti_prof_abi.h - what mlprof uses of CUPTI's callback API, its profiler
 * (cupti_profiler_target.h, cupti_target.h), its profiler host API
 * (cupti_profiler_host.h, which C cannot include: it includes <string>) and
 * its range profiler (cupti_range_profiler.h, CUDA 12.6 and later), declared
 * here from NVIDIA's documentation so that no CUDA header is needed to build.
 *
 * Every parameter block starts with its size: CUPTI reads only the fields a
 * caller's size covers, so the sizes below (those of CUDA 13.0) keep working
 * with a newer libcupti whose blocks have grown. test_cupti_layout checks
 * every offset and size against the CUDA headers where they are installed.
 */
#ifndef MLPROF_CUPTI_PROF_ABI_H
#define MLPROF_CUPTI_PROF_ABI_H

#include <stddef.h>
#include <stdint.h>

/* offsetof(last field) + its size: CUPTI's *_STRUCT_SIZE */
#define MLPROF__CUPTI_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

enum {
    CUPTI_ERR_INVALID_METRIC_NAME = 17,
    CUPTI_ERR_NOT_SUPPORTED = 27,
    CUPTI_ERR_MULTIPLE_SUBSCRIBERS = 39,
};

/* CUpti_CallbackDomain, CUpti_ApiCallbackSite, resource callback ids */
enum { CUPTI_DOMAIN_RESOURCE = 3 };
enum { CUPTI_SITE_ENTER = 0, CUPTI_SITE_EXIT = 1 };
enum { CUPTI_RESOURCE_CONTEXT_CREATED = 1, CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING = 2 };

/* CUpti_ProfilerRange, CUpti_ProfilerReplayMode, CUpti_ProfilerType */
enum { CUPTI_AUTO_RANGE = 1, CUPTI_KERNEL_REPLAY = 2, CUPTI_PROFILER_RANGE_PROFILER = 0 };

/* The callback ids of the calls that launch kernels (cupti_runtime_cbid.h,
 * cupti_driver_cbid.h), in this order: cudaLaunchKernel, its _ptsz,
 * cooperative, cooperative _ptsz, ExC and ExC _ptsz forms, and CUDA 13's
 * __cudaLaunchKernel and its _ptsz; cuLaunchKernel, _ptsz, cooperative,
 * cooperative _ptsz, Ex, Ex _ptsz; the graph launches of both, and _ptsz. */
#define MLPROF__CUPTI_RUNTIME_LAUNCHES 211, 214, 269, 270, 430, 431, 505, 506
#define MLPROF__CUPTI_DRIVER_LAUNCHES 307, 442, 477, 478, 652, 653
#define MLPROF__CUPTI_RUNTIME_GRAPHS 311, 312
#define MLPROF__CUPTI_DRIVER_GRAPHS 514, 515

typedef void (*cupti_callback_fn)(void *userdata, uint32_t domain, uint32_t cbid, const void *data);

/* CUpti_CallbackData: what a runtime or driver callback is given */
typedef struct {
    uint32_t site; /* CUPTI_SITE_* */
    const char *function_name;
    const void *function_params;
    void *function_return_value;
    const char *symbol_name; /* the kernel's, for launches */
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
} cupti_callback_data;

/* CUpti_ResourceData */
typedef struct {
    void *context;
    void *stream;
    void *descriptor;
} cupti_resource_data;

/* CUpti_Profiler_Initialize_Params and _DeInitialize_Params */
typedef struct {
    size_t size;
    void *priv;
} cupti_prof_init;

/* CUpti_Device_GetChipName_Params */
typedef struct {
    size_t size;
    void *priv;
    size_t device;
    const char *chip;
} cupti_chip_name;

/* CUpti_Profiler_GetCounterAvailability_Params */
typedef struct {
    size_t size;
    void *priv;
    void *context;
    size_t image_size;
    uint8_t *image;
} cupti_counter_avail;

/* ------------------------------------------------------------ the host API */

/* CUpti_Profiler_Host_Initialize_Params */
typedef struct {
    size_t size;
    void *priv;
    int profiler_type;
    const char *chip;
    const uint8_t *availability;
    void *host; /* out */
} cupti_host_init;

/* CUpti_Profiler_Host_Deinitialize_Params */
typedef struct {
    size_t size;
    void *priv;
    void *host;
} cupti_host_deinit;

/* CUpti_Profiler_Host_ConfigAddMetrics_Params */
typedef struct {
    size_t size;
    void *priv;
    void *host;
    const char **metrics;
    size_t n;
} cupti_host_add_metrics;

/* CUpti_Profiler_Host_GetConfigImageSize_Params and _GetConfigImage_Params */
typedef struct {
    size_t size;
    void *priv;
    void *host;
    size_t image_size;
    uint8_t *image; /* absent from the size query's block */
} cupti_host_config_image;

/* CUpti_Profiler_Host_GetNumOfPasses_Params */
typedef struct {
    size_t size;
    void *priv;
    size_t image_size;
    uint8_t *image;
    size_t passes; /* out */
} cupti_host_passes;

/* CUpti_Profiler_Host_EvaluateToGpuValues_Params */
typedef struct {
    size_t size;
    void *priv;
    void *host;
    const uint8_t *counter_data;
    size_t counter_data_size;
    size_t range;
    const char **metrics;
    size_t n;
    double *values; /* out, n of them */
} cupti_host_evaluate;

/* ---------------------------------------------------- the range profiler */

/* CUpti_RangeProfiler_Enable_Params */
typedef struct {
    size_t size;
    void *priv;
    void *context;
    void *object; /* out */
} cupti_rp_enable;

/* CUpti_RangeProfiler_Disable_Params, _Start_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
} cupti_rp_object;

/* CUpti_RangeProfiler_Stop_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
    size_t pass_index;
    size_t target_nesting_level;
    uint8_t all_passes_submitted;
} cupti_rp_stop;

/* CUpti_RangeProfiler_DecodeData_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
    size_t ranges_dropped; /* out */
} cupti_rp_decode;

/* CUpti_RangeProfiler_GetCounterDataSize_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
    const char **metrics;
    size_t n;
    size_t max_ranges;
    uint32_t max_range_tree_nodes;
    size_t counter_data_size; /* out */
} cupti_rp_data_size;

/* CUpti_RangeProfiler_CounterDataImage_Initialize_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
    size_t counter_data_size;
    uint8_t *counter_data;
} cupti_rp_data_init;

/* CUpti_RangeProfiler_SetConfig_Params */
typedef struct {
    size_t size;
    void *priv;
    void *object;
    size_t config_size;
    const uint8_t *config;
    size_t counter_data_size;
    uint8_t *counter_data;
    int range;       /* CUPTI_AUTO_RANGE */
    int replay_mode; /* CUPTI_KERNEL_REPLAY */
    size_t max_ranges_per_pass;
    uint16_t num_nesting_levels;
    uint16_t min_nesting_level;
    size_t pass_index;
    uint16_t target_nesting_level;
} cupti_rp_set_config;

/* CUpti_RangeProfiler_GetCounterDataInfo_Params */
typedef struct {
    size_t size;
    void *priv;
    const uint8_t *counter_data;
    size_t counter_data_size;
    size_t ranges; /* out */
} cupti_rp_data_info;

#endif /* MLPROF_CUPTI_PROF_ABI_H */
