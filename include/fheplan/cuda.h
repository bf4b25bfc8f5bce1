/* fheplan/cuda.h — the CUDA-typed face of foreign streams: wrap an engine's cudaStream_t
 * as a non-owning fhr_stream, and read the native stream of any CUDA fhr_stream. The one
 * public header that includes cuda_runtime.h; the core headers stay CUDA-free. */
#ifndef FHEPLAN_CUDA_H
#define FHEPLAN_CUDA_H

#include <cuda_runtime.h>

#include "fheplan/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A view of the engine's stream `st` on CUDA device `device` (fhr_stream_wrap): fheplan
 * records lease consumer events on it and orders copies on it; it never synchronises,
 * destroys or replaces it. The engine keeps st alive until fhr_stream_destroy(b, view),
 * which frees the view only.
 *
 * st may be one of the special handles. cudaStreamPerThread means "the calling thread's
 * default stream" at every call that enqueues on the view (an engine built with
 * --default-stream per-thread, such as Phantom, computes there): use such a view only
 * from the thread whose stream it means, and never as a transfer stream of a VM or of
 * anything that enqueues from another thread. 0 and cudaStreamLegacy are the legacy
 * default stream, which synchronises with every blocking stream of the device.
 * A stream of another device is refused (FHR_E_LOCATION). */
static inline fhr_status fhr_stream_wrap_cuda(fhr_backend *b, int device, cudaStream_t st,
                                              fhr_stream **out, fhr_error *err)
{
    return fhr_stream_wrap(b, fhr_loc_cuda(device), (void *)st, out, err);
}

/* The native stream of s (a view returns the stream it wraps; a stream fheplan made
 * returns its own) and, when device is not NULL, its device. For the load callback of a
 * source, this is how an engine kernel is launched on the stream fheplan passes in. */
static inline fhr_status fhr_stream_cuda(fhr_backend *b, fhr_stream *s, cudaStream_t *out,
                                         int *device, fhr_error *err)
{
    void *native = NULL;
    fhr_status st = fhr_stream_native(b, s, &native, device, err);
    if (st == FHR_OK)
        *out = (cudaStream_t)native;
    return st;
}

#ifdef __cplusplus
}
#endif
#endif
