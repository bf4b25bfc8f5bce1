/* cuda/cuda_internal.h — pieces shared by the real CUDA backend's files: error mapping,
 * the pinned host pool and pageable staging (internal; the copy threads have their own). */
#ifndef FHEPLAN_CUDA_INTERNAL_H
#define FHEPLAN_CUDA_INTERNAL_H

#if FHEPLAN_HAVE_CUDA
#include "fheplan/backend.h"
#include "cuda/copy_threads.h"
#include "cuda/host_copy.h"
#include "cuda/staging_pipeline.h"

#include <cuda_runtime_api.h>

/* cuda_error.c: fills err with FHR_E_BACKEND naming the operation and the CUDA error. */
fhr_status fhr_cuda_fail(fhr_error *err, cudaError_t e, const char *what);

#define CU_TRY(call, what)                                                                     \
    do {                                                                                       \
        cudaError_t cu_e_ = (call);                                                            \
        if (cu_e_ != cudaSuccess)                                                              \
            return fhr_cuda_fail(err, cu_e_, what);                                            \
    } while (0)

/* ---- pinned host pool (cuda_pinned.c) ----------------------------------------------
 * Arenas of shape->arena bytes (256 MiB by default; a request above half of it gets an
 * arena of its own: pin_arena_bytes) of mmap'd memory (pin_map: huge pages, faulted in
 * by cp's threads) page-locked with cudaHostRegister(Portable) -- cudaHostAlloc(Portable)
 * when that fails or shape->hostalloc (FHEPLAN_PINNED_HOSTALLOC=1) -- carved
 * by an address-ordered first-fit free list with coalescing. Thread-safe; pin_release
 * takes only the pool mutex and calls no CUDA function, so a CUDA host function may
 * call it. Arenas are returned to the system only by pin_pool_destroy. cp outlives the
 * pool. */
typedef struct pin_pool pin_pool;
fhr_status pin_pool_create(const pin_shape *shape, copy_pool *cp, pin_pool **out,
                           fhr_error *err);
fhr_status pin_alloc(pin_pool *pp, size_t nbytes, void **out, fhr_error *err);
/* nbytes must be the size given to pin_alloc. Unknown pointers are ignored. */
void pin_release(pin_pool *pp, void *p, size_t nbytes);
void pin_stats(pin_pool *pp, uint64_t *used, uint64_t *reserved);
/* Arenas pinned so far by registration and by the cudaHostAlloc fallback. */
void pin_arenas(pin_pool *pp, unsigned *registered, unsigned *fallback);
/* Waits for a FHEPLAN_PINNED_AHEAD growth in progress and releases its spare arena, so
 * that cp may be destroyed; the pool stays usable. */
void pin_pool_settle(pin_pool *pp);
void pin_pool_destroy(pin_pool *pp);

/* ---- pageable staging (cuda_staging.c) ---------------------------------------------
 * Pageable host <-> device copies through per-device stagers (an internal stream and
 * pinned slots each), the copy threads filling or draining slots while DMA runs; chunk
 * size and slot count follow the copy's size (cuda/staging_pipeline.h). */
typedef struct stager_set stager_set;
fhr_status stager_set_create(copy_pool *cp, const staging_shape *shape, stager_set **out,
                             fhr_error *err);
/* The pinned bytes every stager's slots hold now (the pinned observation counts them). */
uint64_t stager_set_bytes(stager_set *set);
/* A copy below shape.direct_below takes the path staging_small names: CUDA's own
 * pageable cudaMemcpyAsync on s, the caller alone, or a few chunks over the threads.
 * Synchronous for the calling thread: s's earlier work comes first, and it returns once
 * the host side is done. Device-to-host is complete on return; host-to-device leaves its
 * last DMAs in flight, ordered before later work on s. s_dev is s's device: when it is
 * dev, the DMAs run on s itself (no wait for s on the host from the device, and no
 * cross-stream event); otherwise on the stager's own stream, s waited for first and
 * later work on s ordered after the last DMA by an event. */
fhr_status staged_copy(stager_set *set, int dev, void *dst, const void *src, size_t n,
                       int to_device, cudaStream_t s, int s_dev, fhr_error *err);
void stager_set_destroy(stager_set *set);
/* Nanoseconds the callers of staged copies have spent blocked, summed over every copy
 * since the set was made: waiting for host stages (the copy threads behind) and for DMA
 * (the link behind). Where a copy spends its time, for bench/transfer. */
void stager_set_waits(stager_set *set, uint64_t *host_ns, uint64_t *dma_ns);
/* The same for a CUDA backend (cuda_backend.c). */
void fhr_cuda_staging_waits(fhr_backend *b, uint64_t *host_ns, uint64_t *dma_ns);

#endif
#endif
