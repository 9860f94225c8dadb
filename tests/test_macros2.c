/* test_macros2.c - a translation unit built with MLPROF_DISABLE: every macro
 * compiles to nothing, with no warning under -Wall -Wextra -Werror. */
#define MLPROF_DISABLE
#include "mlprof/mlprof.h"

int macros_disabled_unit(mlprof_domain *d, mlprof_span *s);

int macros_disabled_unit(mlprof_domain *d, mlprof_span *s)
{
    MLPROF_ZONE(d, "disabled_zone"); MLPROF_ZONE(d, "disabled_zone2");
    MLPROF_SCOPE("disabled_scope");
    int only_in_macros = 5;
    MLPROF_BEGIN(s);
    MLPROF_ARG_INT("k", only_in_macros);
    MLPROF_END(s);
    if (d)
        MLPROF_MARK(0, 1);
    return 42;
}
