/* Must not compile: MLPROF_ZONE is a declaration, not an expression. The test
 * passes when the compiler rejects this file. */
#include "mlprof/mlprof.h"

int misuse(mlprof_domain *d);

int misuse(mlprof_domain *d)
{
    return (MLPROF_ZONE(d, "zone"), 1);
}
