/* cuda/cuda_staging.c — the pageable <-> device pipeline of the CUDA backend: pinned
 * staging chunks, host memcpy of one chunk (copy threads) overlapping DMA of the last. */
#include "cuda/cuda_internal.h"

#if FHEPLAN_HAVE_CUDA
#include "base/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- stagers ----------------------------------------------------------------------- */

#define STAGE_CHUNK ((size_t)16 << 20)
#define STAGE_BUFS 4

typedef struct stager {
    int dev;
    cudaStream_t st;              /* internal DMA stream on dev */
    cudaEvent_t done;             /* the last DMA of a host-to-device copy */
    cudaEvent_t ev[STAGE_BUFS];   /* last DMA touching buf[i] */
    int armed[STAGE_BUFS];        /* ev[i] has been recorded */
    void *buf[STAGE_BUFS];
    struct stager *next;
} stager;

struct stager_set {
    copy_pool *cp;
    pthread_mutex_t mu; /* idle list */
    stager *idle;
};

fhr_status stager_set_create(copy_pool *cp, stager_set **out, fhr_error *err)
{
    stager_set *set = calloc(1, sizeof *set);
    if (!set)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for staging");
    set->cp = cp;
    pthread_mutex_init(&set->mu, NULL);
    *out = set;
    return FHR_OK;
}

static void stager_free(stager *g)
{
    cudaSetDevice(g->dev);
    if (g->st)
        cudaStreamSynchronize(g->st);
    for (int i = 0; i < STAGE_BUFS; i++) {
        if (g->buf[i])
            cudaFreeHost(g->buf[i]);
        if (g->ev[i])
            cudaEventDestroy(g->ev[i]);
    }
    if (g->done)
        cudaEventDestroy(g->done);
    if (g->st)
        cudaStreamDestroy(g->st);
    free(g);
}

static fhr_status stager_init(stager *g, fhr_error *err)
{
    CU_TRY(cudaSetDevice(g->dev), "cudaSetDevice (staging)");
    CU_TRY(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking), "cudaStreamCreate (staging)");
    CU_TRY(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "cudaEventCreate (staging)");
    for (int i = 0; i < STAGE_BUFS; i++) {
        CU_TRY(cudaEventCreateWithFlags(&g->ev[i], cudaEventDisableTiming),
               "cudaEventCreate (staging)");
        CU_TRY(cudaHostAlloc(&g->buf[i], STAGE_CHUNK, cudaHostAllocPortable),
               "cudaHostAlloc (staging buffer)");
    }
    return FHR_OK;
}

/* An idle stager for dev, or a new one. */
static fhr_status stager_take(stager_set *set, int dev, stager **out, fhr_error *err)
{
    pthread_mutex_lock(&set->mu);
    for (stager **link = &set->idle; *link; link = &(*link)->next) {
        if ((*link)->dev == dev) {
            *out = *link;
            *link = (*out)->next;
            pthread_mutex_unlock(&set->mu);
            return FHR_OK;
        }
    }
    pthread_mutex_unlock(&set->mu);
    stager *g = calloc(1, sizeof *g);
    if (!g)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a stager");
    g->dev = dev;
    fhr_status st = stager_init(g, err);
    if (st) {
        stager_free(g);
        return st;
    }
    *out = g;
    return FHR_OK;
}

static void stager_put(stager_set *set, stager *g)
{
    pthread_mutex_lock(&set->mu);
    g->next = set->idle;
    set->idle = g;
    pthread_mutex_unlock(&set->mu);
}

/* Waits until no DMA uses buf[b]. */
static fhr_status buf_ready(stager *g, int b, fhr_error *err)
{
    if (g->armed[b])
        CU_TRY(cudaEventSynchronize(g->ev[b]), "cudaEventSynchronize (staging)");
    g->armed[b] = 0;
    return FHR_OK;
}

static fhr_status dma(stager *g, int b, void *dst, const void *src, size_t len,
                      enum cudaMemcpyKind kind, fhr_error *err)
{
    CU_TRY(cudaMemcpyAsync(dst, src, len, kind, g->st), "cudaMemcpyAsync (staged chunk)");
    CU_TRY(cudaEventRecord(g->ev[b], g->st), "cudaEventRecord (staging)");
    g->armed[b] = 1;
    return FHR_OK;
}

static size_t chunk_len(size_t n, size_t i)
{
    size_t off = i * STAGE_CHUNK;
    return n - off < STAGE_CHUNK ? n - off : STAGE_CHUNK;
}

static fhr_status to_device(stager_set *set, stager *g, char *dst, const char *src, size_t n,
                            cudaStream_t s, fhr_error *err)
{
    size_t nch = (n + STAGE_CHUNK - 1) / STAGE_CHUNK;
    for (size_t i = 0; i < nch; i++) {
        int b = (int)(i % STAGE_BUFS);
        size_t off = i * STAGE_CHUNK, len = chunk_len(n, i);
        fhr_status st = buf_ready(g, b, err);
        if (st)
            return st;
        copy_pool_memcpy(set->cp, g->buf[b], src + off, len);
        st = dma(g, b, dst + off, g->buf[b], len, cudaMemcpyHostToDevice, err);
        if (st)
            return st;
    }
    CU_TRY(cudaEventRecord(g->done, g->st), "cudaEventRecord (staging done)");
    CU_TRY(cudaStreamWaitEvent(s, g->done, 0), "cudaStreamWaitEvent (staging done)");
    return FHR_OK;
}

static fhr_status to_host(stager_set *set, stager *g, char *dst, const char *src, size_t n,
                          fhr_error *err)
{
    size_t nch = (n + STAGE_CHUNK - 1) / STAGE_CHUNK;
    fhr_status st = FHR_OK;
    for (size_t i = 0; i < nch && i < STAGE_BUFS && !st; i++) {
        int b = (int)i;
        st = buf_ready(g, b, err);
        if (!st)
            st = dma(g, b, g->buf[b], src + i * STAGE_CHUNK, chunk_len(n, i),
                     cudaMemcpyDeviceToHost, err);
    }
    for (size_t i = 0; i < nch && !st; i++) {
        int b = (int)(i % STAGE_BUFS);
        st = buf_ready(g, b, err);
        if (st)
            break;
        copy_pool_memcpy(set->cp, dst + i * STAGE_CHUNK, g->buf[b], chunk_len(n, i));
        size_t k = i + STAGE_BUFS;
        if (k < nch)
            st = dma(g, b, g->buf[b], src + k * STAGE_CHUNK, chunk_len(n, k),
                     cudaMemcpyDeviceToHost, err);
    }
    return st;
}

fhr_status staged_copy(stager_set *set, int dev, void *dst, const void *src, size_t n,
                       int to_dev, cudaStream_t s, fhr_error *err)
{
    stager *g = NULL;
    fhr_status st = stager_take(set, dev, &g, err);
    if (st)
        return st;
    /* s may belong to another device (a host queue lives on device 0), so wait for its
     * earlier work with a stream sync rather than an event of dev. */
    cudaError_t e = cudaStreamSynchronize(s);
    if (e == cudaSuccess)
        e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        st = fhr_cuda_fail(err, e, "waiting for the stream before a staged copy");
    else if (to_dev)
        st = to_device(set, g, dst, src, n, s, err);
    else
        st = to_host(set, g, dst, src, n, err);
    stager_put(set, g);
    return st;
}

void stager_set_destroy(stager_set *set)
{
    if (!set)
        return;
    while (set->idle) {
        stager *g = set->idle;
        set->idle = g->next;
        stager_free(g);
    }
    pthread_mutex_destroy(&set->mu);
    free(set);
}
#endif
