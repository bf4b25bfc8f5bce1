/* cuda/cuda_backend.c — the real CUDA backend: a private stream-ordered pool per device,
 * the ops table, streams (own ones and views of the engine's), events, copies and
 * observations (CUDA runtime API, plain C). */
#include "fheplan/backend.h"
#include "base/error.h"

#if !FHEPLAN_HAVE_CUDA
fhr_status fhr_backend_cuda_create(fhr_backend **out, fhr_error *err)
{
    (void)out;
    return fhr_fail(err, FHR_E_UNSUPPORTED, "cuda: this build of fheplan has no CUDA support");
}
#else
#include "cuda/cuda_internal.h"
#include "cuda/nvml.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Threading: every op may be called from any thread. The CUDA current device is
 * per-thread state, so each op that needs one sets it first. */

struct fhr_stream {
    cudaStream_t st;
    int dev;
    uint64_t id;
    int view; /* fhr_stream_wrap: the engine owns st; destroying the view leaves it alone */
};

/* CUDA records an event only on a stream of the event's device, so an fhr_event
 * holds one CUDA event per device, created on first use; `last` is the device of the
 * latest record (-1: never recorded). */
struct fhr_event {
    pthread_mutex_t mu;
    int last;
    int timed; /* its CUDA events capture completion times */
    cudaEvent_t ev[FHR_MAX_CUDA_DEVICES];
};

typedef struct cu {
    fhr_backend base;
    int ndev;
    cudaMemPool_t pool[FHR_MAX_CUDA_DEVICES];
    uint64_t granule[FHR_MAX_CUDA_DEVICES]; /* what the pool maps for a 1-byte allocation */
    _Atomic uint64_t next_stream_id;
    _Atomic uint64_t host_used;
    pthread_mutex_t peer_mu;
    signed char peer[FHR_MAX_CUDA_DEVICES][FHR_MAX_CUDA_DEVICES]; /* 0 unknown, 1 on, -1 no */
    pin_pool *pinned;
    copy_pool *copiers;
    stager_set *stagers;
    /* A device free that failed (free has no status to return): the first error is kept
     * and reported by the next alloc or stream sync, so it is never lost. */
    _Atomic int free_error;               /* cudaError_t; cudaSuccess when none */
    _Atomic uint64_t free_failures;
    nvml_lib *nvml;                       /* optional */
    char pci[FHR_MAX_CUDA_DEVICES][32];   /* bus ids, for NVML */
} cu;

static cu *C(fhr_backend *b) { return (cu *)b->impl; }

static fhr_status check_loc(cu *c, fhr_location loc, fhr_error *err)
{
    char buf[24];
    if (loc.kind == FHR_LOC_HOST || loc.kind == FHR_LOC_PINNED ||
        (loc.kind == FHR_LOC_CUDA && loc.index >= 0 && loc.index < c->ndev))
        return FHR_OK;
    return fhr_fail(err, FHR_E_LOCATION, "cuda: invalid location %s (%d visible device%s)",
                    fhr_loc_format(loc, buf, sizeof buf), c->ndev, c->ndev == 1 ? "" : "s");
}

static int cu_device_count(fhr_backend *b) { return C(b)->ndev; }

/* Reports (once) a device free that failed since the last report. */
static fhr_status take_free_error(cu *c, fhr_error *err)
{
    int e = atomic_exchange(&c->free_error, (int)cudaSuccess);
    if (e == (int)cudaSuccess)
        return FHR_OK;
    uint64_t n = atomic_exchange(&c->free_failures, 0);
    return fhr_fail(err, FHR_E_BACKEND,
                    "cuda: %llu earlier free%s of device memory failed: %s (%s)",
                    (unsigned long long)n, n == 1 ? "" : "s", cudaGetErrorName((cudaError_t)e),
                    cudaGetErrorString((cudaError_t)e));
}

/* ---- memory ------------------------------------------------------------------------ */

static fhr_status alloc_device(cu *c, int dev, size_t n, fhr_stream *s, void **out,
                               fhr_error *err)
{
    cudaStream_t st = s ? s->st : 0;
    CU_TRY(cudaSetDevice(dev), "cudaSetDevice");
    CU_TRY(cudaMallocFromPoolAsync(out, n, c->pool[dev], st), "cudaMallocFromPoolAsync");
    if (!s) /* no stream: the memory must be usable by any stream on return */
        CU_TRY(cudaStreamSynchronize(0), "cudaStreamSynchronize (alloc without stream)");
    return FHR_OK;
}

static fhr_status cu_alloc(fhr_backend *b, fhr_location loc, size_t nbytes, fhr_stream *s,
                           void **out, fhr_error *err)
{
    cu *c = C(b);
    fhr_status st = check_loc(c, loc, err);
    if (!st)
        st = take_free_error(c, err);
    if (st)
        return st;
    if (nbytes == 0 || !out)
        return fhr_fail(err, FHR_E_INVALID, "cuda: alloc needs a non-zero size and an out pointer");
    switch (loc.kind) {
    case FHR_LOC_CUDA:
        return alloc_device(c, loc.index, nbytes, s, out, err);
    case FHR_LOC_PINNED:
        return pin_alloc(c->pinned, nbytes, out, err);
    default:
        *out = malloc(nbytes);
        if (!*out)
            return fhr_fail(err, FHR_E_BACKEND, "cuda: host malloc of %zu bytes failed", nbytes);
        atomic_fetch_add(&c->host_used, nbytes);
        return FHR_OK;
    }
}

/* A host-memory free deferred to a point in a stream (runs as a CUDA host function:
 * it touches only our own bookkeeping, never CUDA). */
typedef struct deferred_free {
    cu *c;
    fhr_location loc;
    void *p;
    size_t n;
} deferred_free;

static void free_host_now(cu *c, fhr_location loc, void *p, size_t n)
{
    if (loc.kind == FHR_LOC_PINNED) {
        pin_release(c->pinned, p, n);
    } else {
        free(p);
        atomic_fetch_sub(&c->host_used, n);
    }
}

static void run_deferred_free(void *arg)
{
    deferred_free *d = arg;
    free_host_now(d->c, d->loc, d->p, d->n);
    free(d);
}

static void cu_free(fhr_backend *b, fhr_location loc, void *p, size_t nbytes, fhr_stream *s)
{
    cu *c = C(b);
    if (!p || check_loc(c, loc, NULL))
        return;
    if (loc.kind == FHR_LOC_CUDA) {
        cudaError_t e = cudaSetDevice(loc.index);
        if (e == cudaSuccess)
            e = cudaFreeAsync(p, s ? s->st : 0);
        if (e != cudaSuccess && (!s || cudaStreamSynchronize(s->st) == cudaSuccess))
            e = cudaFree(p); /* could not queue the free: the stream's work is done now */
        if (e != cudaSuccess) {
            int none = (int)cudaSuccess;
            atomic_compare_exchange_strong(&c->free_error, &none, (int)e);
            atomic_fetch_add(&c->free_failures, 1);
        }
        return;
    }
    deferred_free *d = s ? malloc(sizeof *d) : NULL;
    if (d) {
        *d = (deferred_free){c, loc, p, nbytes};
        cudaSetDevice(s->dev);
        if (cudaLaunchHostFunc(s->st, run_deferred_free, d) == cudaSuccess)
            return;
        free(d);
    }
    if (s) /* could not defer: wait for the stream instead */
        cudaStreamSynchronize(s->st);
    free_host_now(c, loc, p, nbytes);
}

/* ---- copies ------------------------------------------------------------------------ */

typedef struct host_copy {
    copy_pool *cp;
    void *dst;
    const void *src;
    size_t n;
} host_copy;

static void run_host_copy(void *arg)
{
    host_copy *h = arg;
    copy_pool_memcpy(h->cp, h->dst, h->src, h->n);
    free(h);
}

/* Host <-> host (pageable or pinned): a memcpy by the copy threads, ordered on s. */
static fhr_status copy_host(cu *c, void *dst, const void *src, size_t n, fhr_stream *s,
                            fhr_error *err)
{
    host_copy *h = malloc(sizeof *h);
    if (!h)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a host copy");
    *h = (host_copy){c->copiers, dst, src, n};
    cudaError_t e = cudaLaunchHostFunc(s->st, run_host_copy, h);
    if (e != cudaSuccess) {
        free(h);
        return fhr_cuda_fail(err, e, "cudaLaunchHostFunc (host copy)");
    }
    return FHR_OK;
}

/* Enables peer access between two devices once; returns whether it is on. */
static int peer_on(cu *c, int a, int b)
{
    pthread_mutex_lock(&c->peer_mu);
    if (c->peer[a][b] == 0) {
        int ab = 0, ba = 0;
        cudaDeviceCanAccessPeer(&ab, a, b);
        cudaDeviceCanAccessPeer(&ba, b, a);
        int ok = ab && ba;
        if (ok) {
            cudaSetDevice(a);
            cudaError_t e1 = cudaDeviceEnablePeerAccess(b, 0);
            cudaSetDevice(b);
            cudaError_t e2 = cudaDeviceEnablePeerAccess(a, 0);
            ok = (e1 == cudaSuccess || e1 == cudaErrorPeerAccessAlreadyEnabled) &&
                 (e2 == cudaSuccess || e2 == cudaErrorPeerAccessAlreadyEnabled);
            cudaGetLastError(); /* clear a sticky "already enabled" */
        }
        c->peer[a][b] = c->peer[b][a] = ok ? 1 : -1;
    }
    int on = c->peer[a][b] == 1;
    pthread_mutex_unlock(&c->peer_mu);
    return on;
}

static fhr_status cu_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                          fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    cu *c = C(b);
    fhr_status st = check_loc(c, dloc, err);
    if (!st)
        st = check_loc(c, sloc, err);
    if (st)
        return st;
    if (!s || (n && (!dst || !src)))
        return fhr_fail(err, FHR_E_INVALID, "cuda: copy needs a stream and non-NULL buffers");
    if (n == 0)
        return FHR_OK;
    int dcuda = dloc.kind == FHR_LOC_CUDA, scuda = sloc.kind == FHR_LOC_CUDA;
    CU_TRY(cudaSetDevice(s->dev), "cudaSetDevice");
    if (!dcuda && !scuda)
        return copy_host(c, dst, src, n, s, err);
    if (scuda && sloc.kind == dloc.kind && sloc.index != dloc.index) {
        /* Without peer access the driver stages the copy through host memory itself. */
        peer_on(c, sloc.index, dloc.index);
        CU_TRY(cudaSetDevice(s->dev), "cudaSetDevice");
        CU_TRY(cudaMemcpyPeerAsync(dst, dloc.index, src, sloc.index, n, s->st),
               "cudaMemcpyPeerAsync");
        return FHR_OK;
    }
    if (dloc.kind == FHR_LOC_HOST || sloc.kind == FHR_LOC_HOST)
        return staged_copy(c->stagers, dcuda ? dloc.index : sloc.index, dst, src, n, dcuda,
                           s->st, s->dev, err);
    CU_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->st), "cudaMemcpyAsync");
    return FHR_OK;
}

/* ---- streams ----------------------------------------------------------------------- */

static fhr_status cu_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                   fhr_error *err)
{
    cu *c = C(b);
    fhr_status st = check_loc(c, loc, err);
    if (st)
        return st;
    fhr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a stream");
    s->dev = loc.kind == FHR_LOC_CUDA ? loc.index : 0; /* host queues live on device 0 */
    cudaError_t e = cudaSetDevice(s->dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(s);
        return fhr_cuda_fail(err, e, "cudaStreamCreateWithFlags");
    }
    s->id = atomic_fetch_add(&c->next_stream_id, 1) + 1;
    *out = s;
    return FHR_OK;
}

static void cu_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    if (!s)
        return;
    if (s->view) {
        free(s);
        return;
    }
    cudaSetDevice(s->dev);
    cudaStreamSynchronize(s->st);
    cudaStreamDestroy(s->st);
    free(s);
}

static fhr_status cu_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    if (!s)
        return fhr_fail(err, FHR_E_INVALID, "cuda: stream_sync on a NULL stream");
    CU_TRY(cudaStreamSynchronize(s->st), "cudaStreamSynchronize");
    return take_free_error(C(b), err);
}

static fhr_status cu_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                 fhr_error *err)
{
    (void)b;
    if (!s || !fn)
        return fhr_fail(err, FHR_E_INVALID, "cuda: launch_host needs a stream and a function");
    CU_TRY(cudaLaunchHostFunc(s->st, fn, arg), "cudaLaunchHostFunc");
    return FHR_OK;
}

static uint64_t cu_stream_id(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    return s ? s->id : 0;
}

/* A view of an engine's stream. The special handles (0: the legacy default stream,
 * cudaStreamLegacy, cudaStreamPerThread) name a stream per call: the per-thread one is
 * the stream of whichever thread makes the call that enqueues. */
static fhr_status cu_stream_wrap(fhr_backend *b, fhr_location loc, void *native,
                                 fhr_stream **out, fhr_error *err)
{
    cu *c = C(b);
    fhr_status st = check_loc(c, loc, err);
    if (st)
        return st;
    if (loc.kind != FHR_LOC_CUDA)
        return fhr_fail(err, FHR_E_LOCATION, "cuda: stream_wrap needs a cuda:N location");
    cudaStream_t ns = (cudaStream_t)native;
    if (ns && ns != cudaStreamLegacy && ns != cudaStreamPerThread) {
        int dev = -1;
        CU_TRY(cudaStreamGetDevice(ns, &dev), "cudaStreamGetDevice (stream_wrap)");
        if (dev != loc.index)
            return fhr_fail(err, FHR_E_LOCATION,
                            "cuda: stream_wrap: the stream belongs to cuda:%d, not cuda:%d", dev,
                            loc.index);
    }
    fhr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for a stream view");
    s->st = ns;
    s->dev = loc.index;
    s->view = 1;
    s->id = atomic_fetch_add(&c->next_stream_id, 1) + 1;
    *out = s;
    return FHR_OK;
}

static fhr_status cu_stream_native(fhr_backend *b, fhr_stream *s, void **native, int *device,
                                   fhr_error *err)
{
    (void)b;
    (void)err;
    *native = (void *)s->st;
    *device = s->dev;
    return FHR_OK;
}

/* ---- events ------------------------------------------------------------------------ */

static fhr_status cu_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    (void)b;
    fhr_event *e = calloc(1, sizeof *e);
    if (!e)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory for an event");
    pthread_mutex_init(&e->mu, NULL);
    e->last = -1;
    *out = e;
    return FHR_OK;
}

static fhr_status cu_event_create_timed(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    fhr_status st = cu_event_create(b, out, err);
    if (st == FHR_OK)
        (*out)->timed = 1;
    return st;
}

static void cu_event_destroy(fhr_backend *b, fhr_event *e)
{
    cu *c = C(b);
    if (!e)
        return;
    for (int d = 0; d < c->ndev; d++)
        if (e->ev[d])
            cudaEventDestroy(e->ev[d]);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static fhr_status record_locked(fhr_event *e, fhr_stream *s, fhr_error *err)
{
    CU_TRY(cudaSetDevice(s->dev), "cudaSetDevice");
    if (!e->ev[s->dev])
        CU_TRY(cudaEventCreateWithFlags(&e->ev[s->dev],
                                        e->timed ? cudaEventDefault : cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
    CU_TRY(cudaEventRecord(e->ev[s->dev], s->st), "cudaEventRecord");
    e->last = s->dev;
    return FHR_OK;
}

static fhr_status cu_event_record(fhr_backend *b, fhr_event *e, fhr_stream *s, fhr_error *err)
{
    (void)b;
    if (!e || !s)
        return fhr_fail(err, FHR_E_INVALID, "cuda: event_record needs an event and a stream");
    pthread_mutex_lock(&e->mu);
    fhr_status st = record_locked(e, s, err);
    pthread_mutex_unlock(&e->mu);
    return st;
}

/* The CUDA event of the latest record, or NULL if never recorded. */
static cudaEvent_t latest(fhr_event *e)
{
    pthread_mutex_lock(&e->mu);
    cudaEvent_t ev = e->last >= 0 ? e->ev[e->last] : NULL;
    pthread_mutex_unlock(&e->mu);
    return ev;
}

static int cu_event_query(fhr_backend *b, fhr_event *e)
{
    (void)b;
    if (!e)
        return -1;
    cudaEvent_t ev = latest(e);
    if (!ev)
        return 1;
    cudaError_t r = cudaEventQuery(ev);
    if (r == cudaSuccess)
        return 1;
    if (r == cudaErrorNotReady) {
        cudaGetLastError(); /* not-ready is not an error; keep the last-error slot clean */
        return 0;
    }
    return -1;
}

static fhr_status cu_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    (void)b;
    if (!e)
        return fhr_fail(err, FHR_E_INVALID, "cuda: event_sync on a NULL event");
    cudaEvent_t ev = latest(e);
    if (ev)
        CU_TRY(cudaEventSynchronize(ev), "cudaEventSynchronize");
    return FHR_OK;
}

static fhr_status cu_event_elapsed(fhr_backend *b, fhr_event *from, fhr_event *to,
                                   double *seconds, fhr_error *err)
{
    (void)b;
    if (!from || !to || !seconds)
        return fhr_fail(err, FHR_E_INVALID, "cuda: event_elapsed needs two events and an out");
    if (!from->timed || !to->timed)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "cuda: event_elapsed on an untimed event");
    cudaEvent_t a = latest(from), z = latest(to);
    if (!a || !z)
        return fhr_fail(err, FHR_E_INVALID, "cuda: event_elapsed on an unrecorded event");
    float ms = 0;
    CU_TRY(cudaEventElapsedTime(&ms, a, z), "cudaEventElapsedTime");
    *seconds = (double)ms * 1e-3;
    return FHR_OK;
}

static fhr_status cu_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                       fhr_error *err)
{
    (void)b;
    if (!s || !e)
        return fhr_fail(err, FHR_E_INVALID, "cuda: stream_wait_event needs a stream and an event");
    cudaEvent_t ev = latest(e);
    if (!ev)
        return FHR_OK;
    CU_TRY(cudaSetDevice(s->dev), "cudaSetDevice");
    CU_TRY(cudaStreamWaitEvent(s->st, ev, 0), "cudaStreamWaitEvent");
    return FHR_OK;
}

/* ---- observations ------------------------------------------------------------------ */

static void observe_device(cu *c, int dev, fhr_observation *out)
{
    size_t free_b = 0, total_b = 0;
    uint64_t used = 0, reserved = 0, used_high = 0, reserved_high = 0;
    cudaMemPool_t p = c->pool[dev];
    if (cudaSetDevice(dev) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess ||
        cudaMemPoolGetAttribute(p, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
        cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess ||
        cudaMemPoolGetAttribute(p, cudaMemPoolAttrUsedMemHigh, &used_high) != cudaSuccess ||
        cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemHigh, &reserved_high) != cudaSuccess)
        return;
    out->valid = 1;
    out->device_free_bytes = free_b;
    out->device_total_bytes = total_b;
    out->pool_used_bytes = used;
    out->pool_reserved_bytes = reserved;
    out->pool_used_high_bytes = used_high;
    out->pool_reserved_high_bytes = reserved_high;
    out->pool_granule_bytes = c->granule[dev];
    if (c->nvml && c->pci[dev][0] &&
        nvml_memory(c->nvml, c->pci[dev], &out->nvml_used_bytes, &out->nvml_total_bytes) == 0)
        out->nvml_valid = 1;
}

static void cu_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    cu *c = C(b);
    memset(out, 0, sizeof *out);
    if (check_loc(c, loc, NULL))
        return;
    if (loc.kind == FHR_LOC_CUDA) {
        observe_device(c, loc.index, out);
    } else if (loc.kind == FHR_LOC_PINNED) {
        pin_stats(c->pinned, &out->pool_used_bytes, &out->pool_reserved_bytes);
        /* pageable staging's slots are pinned memory held from the system too */
        out->pool_reserved_bytes += c->stagers ? stager_set_bytes(c->stagers) : 0;
        out->pool_used_high_bytes = out->pool_used_bytes; /* no high-water mark kept */
        out->pool_reserved_high_bytes = out->pool_reserved_bytes;
        out->valid = 1;
    } else {
        out->pool_used_bytes = out->pool_reserved_bytes = atomic_load(&c->host_used);
        out->pool_used_high_bytes = out->pool_reserved_high_bytes = out->pool_used_bytes;
        out->valid = 1;
    }
}

/* ---- lifetime ---------------------------------------------------------------------- */

/* The backend destroys only what it created (its pools, streams, events, pinned arenas,
 * copy threads). It never resets a device (cudaDeviceReset), never destroys or releases a
 * context, primary or not, and leaves the calling thread's current device as it found
 * it: the process's other CUDA users (PyTorch, CuPy, the application) share the primary
 * contexts and the thread's current device with it, before, during and after. */
static void cu_destroy(fhr_backend *b)
{
    cu *c = C(b);
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess)
        current = -1;
    /* Host functions still queued (host copies through the copy threads, deferred host
     * frees into the pinned pool) point at these pools: let them run first. */
    for (int d = 0; d < c->ndev; d++)
        if (cudaSetDevice(d) == cudaSuccess)
            cudaDeviceSynchronize();
    stager_set_destroy(c->stagers);
    pin_pool_settle(c->pinned); /* a growth ahead uses the copy threads */
    copy_pool_destroy(c->copiers);
    for (int d = 0; d < c->ndev; d++)
        if (c->pool[d])
            cudaMemPoolDestroy(c->pool[d]); /* ours alone: created in setup_pools */
    pin_pool_destroy(c->pinned);
    nvml_close(c->nvml);
    pthread_mutex_destroy(&c->peer_mu);
    free(c);
    if (current >= 0)
        cudaSetDevice(current);
    cudaGetLastError(); /* leave no sticky error of ours to the process's next call */
}

/* Profiler ranges: NVTX 3 (header-only, loaded by the profiler when one is attached; a
 * no-op otherwise) in a domain of our own, so Nsight Systems groups fheplan's scopes,
 * copies and bodies under "fheplan". */
static nvtxDomainHandle_t nvtx_domain;
static pthread_once_t nvtx_once = PTHREAD_ONCE_INIT;

static void nvtx_init(void) { nvtx_domain = nvtxDomainCreateA("fheplan"); }

static void cu_range_push(fhr_backend *b, const char *name)
{
    (void)b;
    pthread_once(&nvtx_once, nvtx_init);
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name ? name : "";
    nvtxDomainRangePushEx(nvtx_domain, &a);
}

static void cu_range_pop(fhr_backend *b)
{
    (void)b;
    pthread_once(&nvtx_once, nvtx_init);
    nvtxDomainRangePop(nvtx_domain);
}

static const fhr_backend_ops cuda_ops = {
    .name = "cuda",
    .device_count = cu_device_count,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy = cu_copy,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .event_query = cu_event_query,
    .event_sync = cu_event_sync,
    .stream_wait_event = cu_stream_wait_event,
    .launch_host = cu_launch_host,
    .observe = cu_observe,
    .stream_id = cu_stream_id,
    .destroy = cu_destroy,
    .stream_wrap = cu_stream_wrap,
    .stream_native = cu_stream_native,
    .event_create_timed = cu_event_create_timed,
    .event_elapsed = cu_event_elapsed,
    .range_push = cu_range_push,
    .range_pop = cu_range_pop,
};

/* The pool's growth granule: it maps device memory in whole granules (32 MiB on the
 * drivers measured), so what it holds is what it hands out rounded up to one. Measured
 * once on the fresh pool (a 1-byte allocation), which is then trimmed back to nothing
 * and its high-water marks reset. */
static fhr_status measure_granule(cu *c, int d, fhr_error *err)
{
    void *p = NULL;
    uint64_t g = 0, zero = 0;
    CU_TRY(cudaMallocFromPoolAsync(&p, 1, c->pool[d], 0), "cudaMallocFromPoolAsync (granule)");
    cudaError_t e = cudaMemPoolGetAttribute(c->pool[d], cudaMemPoolAttrReservedMemCurrent, &g);
    cudaFreeAsync(p, 0);
    CU_TRY(e, "cudaMemPoolGetAttribute (granule)");
    CU_TRY(cudaStreamSynchronize(0), "cudaStreamSynchronize (granule)");
    CU_TRY(cudaMemPoolTrimTo(c->pool[d], 0), "cudaMemPoolTrimTo (granule)");
    CU_TRY(cudaMemPoolSetAttribute(c->pool[d], cudaMemPoolAttrUsedMemHigh, &zero),
           "cudaMemPoolSetAttribute (used high-water mark)");
    CU_TRY(cudaMemPoolSetAttribute(c->pool[d], cudaMemPoolAttrReservedMemHigh, &zero),
           "cudaMemPoolSetAttribute (reserved high-water mark)");
    c->granule[d] = g;
    return FHR_OK;
}

/* A pool of our own per device (cudaMemPoolCreate): the device's default pool, which
 * the engine allocates from, and its attributes stay untouched, and our pool's
 * statistics count fheplan's bytes alone. Ours keeps freed memory (release threshold
 * at its maximum) instead of returning it at every synchronisation. */
static fhr_status setup_pools(cu *c, fhr_error *err)
{
    uint64_t keep = UINT64_MAX;
    for (int d = 0; d < c->ndev; d++) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = d;
        CU_TRY(cudaMemPoolCreate(&c->pool[d], &props), "cudaMemPoolCreate");
        CU_TRY(cudaMemPoolSetAttribute(c->pool[d], cudaMemPoolAttrReleaseThreshold, &keep),
               "cudaMemPoolSetAttribute (release threshold of fheplan's pool)");
        CU_TRY(cudaSetDevice(d), "cudaSetDevice");
        fhr_status st = measure_granule(c, d, err);
        if (st)
            return st;
    }
    return FHR_OK;
}

fhr_status fhr_backend_cuda_create(fhr_backend **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "cuda: NULL out pointer");
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return fhr_fail(err, FHR_E_UNSUPPORTED, "cuda: no usable CUDA device (%s)",
                        e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    }
    if (ndev > FHR_MAX_CUDA_DEVICES)
        ndev = FHR_MAX_CUDA_DEVICES;
    cu *c = calloc(1, sizeof *c);
    if (!c)
        return fhr_fail(err, FHR_E_NOMEM, "cuda: out of host memory");
    c->base.ops = &cuda_ops;
    c->base.impl = c;
    c->ndev = ndev;
    pthread_mutex_init(&c->peer_mu, NULL);
    staging_shape shape;
    fhr_status st = staging_shape_parse(getenv("FHEPLAN_COPY_THREADS"),
                                        getenv("FHEPLAN_STAGING_CHUNK"), staging_cores(), &shape,
                                        err);
    if (!st)
        st = staging_direct_parse(getenv("FHEPLAN_STAGING_DIRECT"), &shape, err);
    if (!st)
        st = staging_memcpy_parse(getenv("FHEPLAN_STAGING_MEMCPY"), &shape, err);
    if (!st)
        st = staging_depth_parse(getenv("FHEPLAN_STAGING_DEPTH"), &shape, err);
    if (!st)
        st = staging_small_parse(getenv("FHEPLAN_STAGING_SMALL"), &shape, err);
    if (!st)
        st = staging_fill_parse(getenv("FHEPLAN_STAGING_FILL"), &shape, err);
    if (!st)
        st = staging_spin_parse(getenv("FHEPLAN_COPY_SPIN"), &shape, err);
    pin_shape pins;
    if (!st)
        st = pin_shape_parse(getenv("FHEPLAN_PINNED_HOSTALLOC"), getenv("FHEPLAN_PINNED_PREFAULT"),
                             getenv("FHEPLAN_PINNED_HUGEPAGE"), getenv("FHEPLAN_PINNED_ARENA"),
                             &pins, err);
    if (!st)
        st = pin_ahead_parse(getenv("FHEPLAN_PINNED_AHEAD"), &pins, err);
    if (!st)
        st = setup_pools(c, err);
    if (!st)
        st = copy_pool_create(shape.threads, &c->copiers, err);
    if (!st)
        copy_pool_set_spin(c->copiers, shape.spin_us * 1000);
    if (!st)
        st = pin_pool_create(&pins, c->copiers, &c->pinned, err);
    if (!st)
        st = stager_set_create(c->copiers, &shape, &c->stagers, err);
    if (st) {
        cu_destroy(&c->base);
        return st;
    }
    /* NVML is optional: when the driver ships it, observations add its view */
    c->nvml = nvml_open();
    for (int d = 0; c->nvml && d < ndev; d++)
        if (cudaDeviceGetPCIBusId(c->pci[d], sizeof c->pci[d], d) != cudaSuccess)
            c->pci[d][0] = 0;
    *out = &c->base;
    return FHR_OK;
}

void fhr_cuda_staging_waits(fhr_backend *b, uint64_t *host_ns, uint64_t *dma_ns)
{
    stager_set_waits(C(b)->stagers, host_ns, dma_ns);
}

/* The native cudaStream_t and device of a stream of this backend (for cuda/kernels.cu).
 * Only valid for streams created by the CUDA backend. */
void *fhr_cuda_stream_native(fhr_stream *s, int *dev)
{
    if (dev)
        *dev = s ? s->dev : 0;
    return s ? (void *)s->st : NULL;
}
#endif
