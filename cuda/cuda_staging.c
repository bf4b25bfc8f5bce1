/* cuda/cuda_staging.c — the pageable <-> device pipeline of the CUDA backend: per-device
 * stagers of pinned slots, copy threads filling or draining them while DMA runs. */
#include "cuda/cuda_internal.h"

#if FHEPLAN_HAVE_CUDA
#include "base/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- stagers ----------------------------------------------------------------------- *
 * A stager belongs to one device and to one copy at a time: an internal DMA stream (for
 * copies whose stream is another device's) and up to STAGING_MAX_SLOTS pinned slots of
 * shape.max_chunk bytes, each allocated when a copy first needs it and kept while the
 * stager is the one idle stager of its device (stager_put frees the others); the bytes
 * are in the pinned observation. ev[i] is the last DMA touching slot i, on the caller's
 * stream or the stager's (armed[i]: recorded and not yet waited for); job[i] its host
 * copy, or split[i] when the copy is split into pieces (split fills and parallel small
 * copies; made with the slot). */

typedef struct stager {
    int dev;
    cudaStream_t st;
    cudaEvent_t done; /* the last DMA of a host-to-device copy */
    cudaEvent_t ev[STAGING_MAX_SLOTS];
    int armed[STAGING_MAX_SLOTS];
    void *buf[STAGING_MAX_SLOTS];
    copy_job job[STAGING_MAX_SLOTS];
    copy_split *split[STAGING_MAX_SLOTS];
    struct stager *next;
} stager;

struct stager_set {
    copy_pool *cp;
    staging_shape shape;
    pthread_mutex_t mu; /* idle list and bytes */
    stager *idle;
    uint64_t bytes; /* pinned bytes of every slot allocated */
    _Atomic uint64_t wait_ns[2]; /* callers blocked on host stages [0] and on DMA [1] */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void stager_set_waits(stager_set *set, uint64_t *host_ns, uint64_t *dma_ns)
{
    *host_ns = atomic_load(&set->wait_ns[0]);
    *dma_ns = atomic_load(&set->wait_ns[1]);
}

fhr_status stager_set_create(copy_pool *cp, const staging_shape *shape, stager_set **out,
                             fhr_error *err)
{
    stager_set *set = calloc(1, sizeof *set);
    if (!set)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for staging");
    set->cp = cp;
    set->shape = *shape;
    pthread_mutex_init(&set->mu, NULL);
    *out = set;
    return FHR_OK;
}

uint64_t stager_set_bytes(stager_set *set)
{
    pthread_mutex_lock(&set->mu);
    uint64_t b = set->bytes;
    pthread_mutex_unlock(&set->mu);
    return b;
}

/* Frees g and returns the pinned bytes it held, once no DMA uses its slots (a slot's last
 * DMA may have run on a caller's stream: its event says when it is done). */
static uint64_t stager_free(stager *g, size_t slot_bytes)
{
    uint64_t held = 0;
    cudaSetDevice(g->dev);
    if (g->st)
        cudaStreamSynchronize(g->st);
    for (int i = 0; i < STAGING_MAX_SLOTS; i++)
        if (g->armed[i])
            cudaEventSynchronize(g->ev[i]);
    for (int i = 0; i < STAGING_MAX_SLOTS; i++) {
        if (g->buf[i]) {
            cudaFreeHost(g->buf[i]);
            held += slot_bytes;
        }
        if (g->ev[i])
            cudaEventDestroy(g->ev[i]);
        free(g->split[i]);
    }
    if (g->done)
        cudaEventDestroy(g->done);
    if (g->st)
        cudaStreamDestroy(g->st);
    free(g);
    return held;
}

static fhr_status stager_init(stager *g, fhr_error *err)
{
    CU_TRY(cudaSetDevice(g->dev), "cudaSetDevice (staging)");
    CU_TRY(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking), "cudaStreamCreate (staging)");
    CU_TRY(cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "cudaEventCreate (staging)");
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
        stager_free(g, set->shape.max_chunk);
        return st;
    }
    *out = g;
    return FHR_OK;
}

/* Gives g back. At most one idle stager per device keeps its slots (so that the next copy
 * reuses them): a second one, left by copies that ran at once, is freed, so the pinned
 * bytes held between copies stay within one copy's slots per device. */
static void stager_put(stager_set *set, stager *g)
{
    pthread_mutex_lock(&set->mu);
    int spare = 0;
    for (stager *i = set->idle; i && !spare; i = i->next)
        spare = i->dev == g->dev;
    if (!spare) {
        g->next = set->idle;
        set->idle = g;
    }
    pthread_mutex_unlock(&set->mu);
    if (spare) {
        uint64_t held = stager_free(g, set->shape.max_chunk);
        pthread_mutex_lock(&set->mu);
        set->bytes -= held;
        pthread_mutex_unlock(&set->mu);
    }
}

/* Slot b's event, pinned buffer and (split fill) pieces, made on first use. */
static fhr_status slot_ready(stager_set *set, stager *g, int b, fhr_error *err)
{
    if (!g->split[b] && !(g->split[b] = calloc(1, sizeof *g->split[b])))
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a staging slot");
    if (!g->ev[b])
        CU_TRY(cudaEventCreateWithFlags(&g->ev[b], cudaEventDisableTiming),
               "cudaEventCreate (staging slot)");
    if (!g->buf[b]) {
        CU_TRY(cudaHostAlloc(&g->buf[b], set->shape.max_chunk, cudaHostAllocPortable),
               "cudaHostAlloc (staging slot)");
        pthread_mutex_lock(&set->mu);
        set->bytes += set->shape.max_chunk;
        pthread_mutex_unlock(&set->mu);
    }
    return FHR_OK;
}

/* Waits until no DMA uses slot b. */
static fhr_status dma_wait(stager_set *set, stager *g, int b, fhr_error *err)
{
    if (g->armed[b]) {
        uint64_t t0 = now_ns();
        cudaError_t e = cudaEventSynchronize(g->ev[b]);
        atomic_fetch_add(&set->wait_ns[1], now_ns() - t0);
        if (e != cudaSuccess)
            return fhr_cuda_fail(err, e, "cudaEventSynchronize (staging)");
    }
    g->armed[b] = 0;
    return FHR_OK;
}

/* One chunk's DMA on st (the caller's stream or the stager's), slot b's event after it. */
static fhr_status dma(stager *g, cudaStream_t st, int b, void *dst, const void *src, size_t len,
                      enum cudaMemcpyKind kind, fhr_error *err)
{
    CU_TRY(cudaMemcpyAsync(dst, src, len, kind, st), "cudaMemcpyAsync (staged chunk)");
    cudaError_t e = cudaEventRecord(g->ev[b], st);
    if (e != cudaSuccess) { /* a failed start leaves nothing running: no event tracks it */
        cudaStreamSynchronize(st);
        return fhr_cuda_fail(err, e, "cudaEventRecord (staging)");
    }
    g->armed[b] = 1;
    return FHR_OK;
}

/* ---- one copy through the pipeline (cuda/staging_pipeline.c orders the stages) ------ */

typedef struct run {
    stager_set *set;
    stager *g;
    const staging_plan *p;
    char *dev;        /* device side */
    char *host;       /* pageable side */
    cudaStream_t st;  /* where the DMAs run: the caller's stream, or the stager's */
} run;

/* The host stage of chunk i (staging_host_start). */
static void host_copy(run *r, size_t i, int b, int to_slot)
{
    size_t off, len;
    staging_chunk(r->p, i, &off, &len);
    void *dst = to_slot ? r->g->buf[b] : r->host + off;
    const void *src = to_slot ? (const void *)(r->host + off) : r->g->buf[b];
    staging_host_start(r->p, r->set->cp, &r->g->job[b], r->g->split[b], i,
                       staging_stream_copy(r->p->n, &r->set->shape, to_slot) ? copy_stream
                                                                            : copy_plain,
                       dst, src, len);
}

static fhr_status host_wait(void *ctx, size_t i, int b, fhr_error *err)
{
    (void)i, (void)err;
    run *r = ctx;
    if (r->p->caller_all) /* done by the caller when started */
        return FHR_OK;
    uint64_t t0 = now_ns();
    staging_host_join(r->p, r->set->cp, &r->g->job[b], r->g->split[b]);
    atomic_fetch_add(&r->set->wait_ns[0], now_ns() - t0);
    return FHR_OK;
}

static void quiesce(void *ctx)
{
    run *r = ctx;
    for (int b = 0; b < r->p->slots; b++)
        staging_host_join(r->p, r->set->cp, &r->g->job[b], r->g->split[b]);
}

static fhr_status h2d_fill(void *ctx, size_t i, int b, fhr_error *err)
{
    run *r = ctx;
    fhr_status st = slot_ready(r->set, r->g, b, err);
    if (!st)
        st = dma_wait(r->set, r->g, b, err); /* a DMA an earlier copy left in flight */
    if (!st)
        host_copy(r, i, b, 1);
    return st;
}

static fhr_status h2d_dma(void *ctx, size_t i, int b, fhr_error *err)
{
    run *r = ctx;
    size_t off, len;
    staging_chunk(r->p, i, &off, &len);
    return dma(r->g, r->st, b, r->dev + off, r->g->buf[b], len, cudaMemcpyHostToDevice, err);
}

static fhr_status dma_wait_op(void *ctx, size_t i, int b, fhr_error *err)
{
    (void)i;
    run *r = ctx;
    return dma_wait(r->set, r->g, b, err);
}

static fhr_status d2h_dma(void *ctx, size_t i, int b, fhr_error *err)
{
    run *r = ctx;
    fhr_status st = slot_ready(r->set, r->g, b, err);
    if (!st)
        st = dma_wait(r->set, r->g, b, err);
    if (st)
        return st;
    size_t off, len;
    staging_chunk(r->p, i, &off, &len);
    return dma(r->g, r->st, b, r->g->buf[b], r->dev + off, len, cudaMemcpyDeviceToHost, err);
}

static fhr_status d2h_drain(void *ctx, size_t i, int b, fhr_error *err)
{
    (void)err;
    host_copy(ctx, i, b, 0);
    return FHR_OK;
}

static const staging_ops to_device_ops = {h2d_fill, host_wait, h2d_dma, dma_wait_op, quiesce};
static const staging_ops to_host_ops = {d2h_dma, dma_wait_op, d2h_drain, host_wait, quiesce};

/* Waits until s has no work left: a query first, which costs about half a sync on an
 * idle stream (0.40 against 0.69 us on the H200 host, bench/transfer --direct-probe),
 * and a sync only if work is left. */
static cudaError_t stream_idle(cudaStream_t s)
{
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not-ready is not an error; keep the last-error slot clean */
        e = cudaStreamSynchronize(s);
    }
    return e;
}

/* CUDA's own pageable copy, for the sizes where it beats the pipeline (staging_small).
 * Same contract as the staged one: s's earlier work first, the pageable side finished
 * with on return. Towards the device CUDA's call does not keep the first part by itself:
 * behind a 20 ms kernel and a host function that writes the source, it copied the bytes
 * from before the host function on the H200 (bench/transfer --caller-probe, `order`;
 * tests/gpu fails without this wait), though stream order and CUDA's "API
 * synchronization behavior" ("may synchronize with the stream") suggest otherwise. So s
 * is waited for first. From the device, CUDA documents that an asynchronous copy into
 * pageable memory returns only once the copy has completed (so after s's earlier work,
 * in stream order): no wait of ours. */
static fhr_status direct_copy(int dev, void *dst, const void *src, size_t n, int to_dev,
                              cudaStream_t s, int s_dev, fhr_error *err)
{
    if (to_dev)
        CU_TRY(stream_idle(s), "waiting for the stream before a pageable copy");
    if (s_dev != dev) /* the caller made s's device current */
        CU_TRY(cudaSetDevice(dev), "cudaSetDevice (pageable copy)");
    CU_TRY(cudaMemcpyAsync(dst, src, n, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                           s),
           "cudaMemcpyAsync (pageable)");
    return FHR_OK;
}

fhr_status staged_copy(stager_set *set, int dev, void *dst, const void *src, size_t n,
                       int to_dev, cudaStream_t s, int s_dev, fhr_error *err)
{
    /* below the direct threshold: CUDA's own copy, the caller alone, or a few chunks
     * split over the threads */
    int path = staging_small(n, &set->shape, to_dev);
    if (path == STAGING_SMALL_DIRECT)
        return direct_copy(dev, dst, src, n, to_dev, s, s_dev, err);
    int small = path == STAGING_SMALL_CALLER;
    stager *g = NULL;
    fhr_status st = stager_take(set, dev, &g, err);
    if (st)
        return st;
    staging_plan p;
    staging_plan_for(path, n, &set->shape, to_dev, &p);
    /* s of the copy's device: the DMAs run on s, in its order. Otherwise (a host queue
     * lives on device 0) on the stager's stream, after s's earlier work. */
    int on_s = s_dev == dev;
    run r = {set, g, &p, to_dev ? dst : (void *)src, to_dev ? (void *)src : dst,
             on_s ? s : g->st};
    const staging_ops *ops = to_dev ? &to_device_ops : &to_host_ops;
    /* The host reads the pageable source only after s's earlier work (which may write
     * it); from the device, DMAs on s follow that work by themselves. */
    cudaError_t e = to_dev || !on_s ? stream_idle(s) : cudaSuccess;
    if (e == cudaSuccess && !on_s) /* on s, the caller made dev current */
        e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        st = fhr_cuda_fail(err, e, "waiting for the stream before a staged copy");
    else if (small)
        st = staging_small_run(&p, to_dev, ops, &r, err);
    else
        st = staging_run(&p, !to_dev, ops, &r, err);
    if (!st && to_dev && !on_s) {
        e = cudaEventRecord(g->done, g->st);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(s, g->done, 0);
        if (e != cudaSuccess)
            st = fhr_cuda_fail(err, e, "ordering the stream after a staged copy");
    }
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
        set->bytes -= stager_free(g, set->shape.max_chunk);
    }
    pthread_mutex_destroy(&set->mu);
    free(set);
}
#endif
