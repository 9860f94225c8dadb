/*
 * test_compat_off.c - MLPROF_WITH and MLPROF_WITH_GPU compiled with
 * MLPROF_DISABLE, linked into test_compat: the code inside still runs, once,
 * and break acts on the loop around the macro.
 */
#define MLPROF_DISABLE
#include "mlprof/mlprof.h"

int compat_off_run(void);

int compat_off_run(void)
{
    int runs = 0;
    MLPROF_WITH(NULL, "off_span", "cat", "args", { runs++; });
    MLPROF_WITH_GPU(NULL, "off_gpu", NULL, NULL, int a = 1, b = 2; runs += a + b - 2;);
    for (int i = 0; i < 3; i++)
        MLPROF_WITH((mlprof_domain *)0, "off_loop", NULL, NULL, {
            if (i == 1)
                break;
            runs++;
        });
    return runs; /* 1 + 1 + 1 */
}
