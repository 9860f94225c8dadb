/*
 * run_nvtx.c - a program annotated with NVTX 3 (header only), for mlprof
 * run's NVTX injection: nested pushes in the default domain and in a domain
 * of its own with registered strings and payloads, a start/end range that a
 * worker thread ends, marks, a thread name, and the worker's own ranges.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static nvtxRangeId_t g_loading;

static void *worker(void *arg)
{
    (void)arg;
    nvtxRangePushA("worker");
    nvtxRangePop();
    nvtxRangeEnd(g_loading); /* started on the main thread */
    return NULL;
}

int main(void)
{
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx-main");
    g_loading = nvtxRangeStartA("loading");
    int depth = nvtxRangePushA("epoch");
    nvtxDomainHandle_t dom = nvtxDomainCreateA("trainer");
    nvtxStringHandle_t step = nvtxDomainRegisterStringA(dom, "step");
    for (int i = 0; i < 3; i++) {
        nvtxEventAttributes_t a = {0};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = step;
        a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        a.payload.llValue = 100 + i;
        nvtxDomainRangePushEx(dom, &a);
        nvtxMarkA("tick");
        nvtxDomainRangePop(dom);
    }
    int left = nvtxRangePop();
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    printf("push depth %d, pop left %d\n", depth, left);
    return 0;
}
