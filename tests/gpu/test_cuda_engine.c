/* tests/gpu/test_cuda_engine.c — the real CUDA backend beside an engine: fheplan's private
 * pool leaves the default pool alone, views of the engine's streams and the per-thread one. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/backend.h"
#include "fheplan/cuda.h"

#include <criterion/criterion.h>
#include <string.h>

static uint64_t pool_attr(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    cr_assert_eq(cudaMemPoolGetAttribute(p, a, &v), cudaSuccess);
    return v;
}

Test(cuda_engine, the_default_pool_and_its_attributes_are_left_alone)
{
    cudaMemPool_t def;
    if (cudaDeviceGetDefaultMemPool(&def, 0) != cudaSuccess)
        cr_skip("no CUDA device");
    uint64_t threshold = pool_attr(def, cudaMemPoolAttrReleaseThreshold);
    fhr_backend *b = cuda_or_skip();
    cr_assert_eq(pool_attr(def, cudaMemPoolAttrReleaseThreshold), threshold);
    uint64_t def_used = pool_attr(def, cudaMemPoolAttrUsedMemCurrent);
    fhr_observation o0, o1, o2;
    b->ops->observe(b, fhr_loc_cuda(0), &o0);
    void *p = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 64u << 20, NULL, &p, NULL), FHR_OK);
    cr_assert_eq(pool_attr(def, cudaMemPoolAttrUsedMemCurrent), def_used,
                 "fheplan's bytes never come from the default pool");
    b->ops->observe(b, fhr_loc_cuda(0), &o1);
    cr_assert_eq(o1.pool_used_bytes, o0.pool_used_bytes + (64u << 20));
    /* the engine's allocation shows in the device totals, never in fheplan's pool */
    void *q = NULL;
    cr_assert_eq(cudaMallocAsync(&q, 32u << 20, cudaStreamPerThread), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    b->ops->observe(b, fhr_loc_cuda(0), &o2);
    cr_assert_eq(o2.pool_used_bytes, o1.pool_used_bytes);
    cr_assert(o2.device_total_bytes > 0 && o2.device_free_bytes < o2.device_total_bytes);
    cudaFreeAsync(q, cudaStreamPerThread);
    cudaStreamSynchronize(cudaStreamPerThread);
    b->ops->free(b, fhr_loc_cuda(0), p, 64u << 20, NULL);
    fhr_backend_destroy(b);
    cr_assert_eq(pool_attr(def, cudaMemPoolAttrReleaseThreshold), threshold);
}

Test(cuda_engine, a_view_orders_work_on_the_engine_stream_and_leaves_it_alive)
{
    fhr_backend *b = cuda_or_skip();
    cudaStream_t st;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    fhr_stream *view = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(fhr_stream_wrap_cuda(b, 0, st, &view, &err), FHR_OK, "%s", err.message);
    cudaStream_t back = NULL;
    int dev = -1;
    cr_assert_eq(fhr_stream_cuda(b, view, &back, &dev, NULL), FHR_OK);
    cr_assert_eq(back, st);
    cr_assert_eq(dev, 0);
    /* a copy ordered on the view runs on the engine's stream */
    size_t n = 8u << 20;
    void *h = NULL, *d = NULL, *h2 = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), n, NULL, &h, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), n, NULL, &h2, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), n, view, &d, NULL), FHR_OK);
    memset(h, 0x5a, n);
    memset(h2, 0, n);
    cr_assert_eq(b->ops->copy(b, d, fhr_loc_cuda(0), h, fhr_loc_pinned(), n, view, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, h2, fhr_loc_pinned(), d, fhr_loc_cuda(0), n, view, NULL), FHR_OK);
    cr_assert_eq(cudaStreamSynchronize(st), cudaSuccess, "the engine's stream carried the copies");
    cr_assert_eq(memcmp(h, h2, n), 0);
    fhr_event *ev = NULL;
    cr_assert_eq(b->ops->event_create(b, &ev, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, ev, view, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_sync(b, ev, NULL), FHR_OK);
    b->ops->event_destroy(b, ev);
    b->ops->free(b, fhr_loc_cuda(0), d, n, view);
    fhr_stream_destroy(b, view);
    cr_assert_eq(cudaStreamQuery(st), cudaSuccess, "the view's end leaves the stream alive");
    cr_assert_eq(cudaStreamDestroy(st), cudaSuccess);
    b->ops->free(b, fhr_loc_pinned(), h, n, NULL);
    b->ops->free(b, fhr_loc_pinned(), h2, n, NULL);
    fhr_backend_destroy(b);
}

Test(cuda_engine, the_per_thread_stream_and_other_devices)
{
    fhr_backend *b = cuda_or_skip();
    fhr_stream *view = NULL;
    cr_assert_eq(fhr_stream_wrap_cuda(b, 0, cudaStreamPerThread, &view, NULL), FHR_OK);
    cudaStream_t back = NULL;
    cr_assert_eq(fhr_stream_cuda(b, view, &back, NULL, NULL), FHR_OK);
    cr_assert_eq(back, cudaStreamPerThread);
    fhr_event *ev = NULL;
    cr_assert_eq(b->ops->event_create(b, &ev, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, ev, view, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_sync(b, ev, NULL), FHR_OK);
    b->ops->event_destroy(b, ev);
    fhr_stream_destroy(b, view);
    cr_assert_eq(fhr_stream_wrap_cuda(b, 0, cudaStreamPerThread, &view, NULL), FHR_OK);
    fhr_stream_destroy(b, view);
    fhr_stream *v = NULL;
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_pinned(), cudaStreamPerThread, &v, NULL), FHR_E_LOCATION);
    if (b->ops->device_count(b) >= 2) {
        cudaStream_t st;
        cr_assert_eq(cudaSetDevice(0), cudaSuccess);
        cr_assert_eq(cudaStreamCreate(&st), cudaSuccess);
        fhr_error err;
        fhr_error_init(&err);
        cr_assert_eq(fhr_stream_wrap_cuda(b, 1, st, &v, &err), FHR_E_LOCATION);
        cr_assert(strstr(err.message, "cuda:0"), "%s", err.message);
        cudaStreamDestroy(st);
    }
    cr_assert_null(v);
    fhr_backend_destroy(b);
}
