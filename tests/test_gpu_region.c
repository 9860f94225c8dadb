/*
 * test_gpu_region.c - GPU-timed regions against the fake CUDA runtime
 * (fake_cuda.c): regions whose "GPU" work takes a known time become spans of
 * that length on the "GPU regions" track, a region still running at a final
 * dump is waited for, the macro form ends at the closing brace, and nothing
 * is recorded while stopped. check_trace.py (area "gpu_region") reads it.
 */
#include <time.h>

#include "fake_cuda.h"
#include "testutil.h"

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("gpu_region.json")));
    CHECK(mlprof_gpu_region_begin("stopped", NULL) == NULL, "nothing while stopped");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < 3; i++) {
        mlprof_gpu_region *r = mlprof_gpu_region_begin("gemm_block", (void *)0x7);
        CHECK(r != NULL, "begin: %s", mlprof_last_error());
        fake_cuda_gpu_busy(20.0 * (i + 1)); /* 20, 40, 60 ms of GPU work */
        CHECK_OK(mlprof_gpu_region_end(r));
    }
    {
        MLPROF_GPU_REGION("scoped", NULL);
        fake_cuda_gpu_busy(30.0);
    }
    /* still running when the trace is finished: the final dump waits for it */
    mlprof_gpu_region *late = mlprof_gpu_region_begin("late", NULL);
    fake_cuda_gpu_busy(50.0);
    CHECK_OK(mlprof_gpu_region_end(late));
    CHECK_OK(mlprof_dump(1));
    CHECK(fake_cuda_events_alive() == 0, "every event destroyed: %d left", fake_cuda_events_alive());
    return tu_finish("test_gpu_region");
}
