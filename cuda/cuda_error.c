/* cuda/cuda_error.c — CUDA errors in the library's terms: FHR_E_BACKEND, naming the
 * operation that failed and CUDA's own name and text for the error. */
#include "cuda/cuda_internal.h"

#if FHEPLAN_HAVE_CUDA
#include "base/error.h"

fhr_status fhr_cuda_fail(fhr_error *err, cudaError_t e, const char *what)
{
    return fhr_fail(err, FHR_E_BACKEND, "cuda: %s failed: %s (%s)", what, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

#endif
