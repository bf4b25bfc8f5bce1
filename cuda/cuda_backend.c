/* cuda/cuda_backend.c — the real CUDA backend: stream-ordered device pools, a pinned
 * host pool, staged pageable copies, streams and events (CUDA runtime API, plain C). */
#include "backend.h"
#include "error.h"

#if !FHEPLAN_HAVE_CUDA
fhr_status fhr_backend_cuda_create(fhr_backend **out, fhr_error *err)
{
    (void)out;
    return fhr_fail(err, FHR_E_UNSUPPORTED, "cuda: this build of fheplan has no CUDA support");
}
#endif
