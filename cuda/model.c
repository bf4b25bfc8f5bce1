/* cuda/model.c — the model backend for dry runs (`fheplan check`): it allocates and
 * copies nothing, hands out distinct fake addresses, and completes all work at once. */
#include "fheplan/backend.h"
#include "base/error.h"

#include <pthread.h>
#include <stdlib.h>

/* Fake addresses come from a counter over a range no real allocation uses on x86-64
 * Linux (the non-canonical hole is avoided; this sits high in user space). They are
 * never dereferenced: copies do nothing. */
#define MODEL_BASE  UINT64_C(0x7e0000000000)
#define MODEL_ALIGN UINT64_C(256)

struct fhr_stream {
    uint64_t id;
};

struct fhr_event {
    int unused;
};

typedef struct model {
    fhr_backend base;
    int ndev;
    pthread_mutex_t mu; /* next_addr, next_stream_id */
    uint64_t next_addr;
    uint64_t next_stream_id;
} model;

static model *M(fhr_backend *b) { return (model *)b->impl; }

static fhr_status check_loc(model *m, fhr_location loc, fhr_error *err)
{
    char buf[24];
    if (loc.kind == FHR_LOC_HOST || loc.kind == FHR_LOC_PINNED ||
        (loc.kind == FHR_LOC_CUDA && loc.index >= 0 && loc.index < m->ndev))
        return FHR_OK;
    return fhr_fail(err, FHR_E_LOCATION, "model: invalid location %s",
                    fhr_loc_format(loc, buf, sizeof buf));
}

static int model_device_count(fhr_backend *b) { return M(b)->ndev; }

static fhr_status model_alloc(fhr_backend *b, fhr_location loc, size_t nbytes, fhr_stream *s,
                              void **out, fhr_error *err)
{
    model *m = M(b);
    (void)s;
    fhr_status st = check_loc(m, loc, err);
    if (st)
        return st;
    if (nbytes == 0 || !out)
        return fhr_fail(err, FHR_E_INVALID, "model: alloc needs a non-zero size and an out pointer");
    uint64_t span = ((uint64_t)nbytes + MODEL_ALIGN - 1) / MODEL_ALIGN * MODEL_ALIGN + MODEL_ALIGN;
    pthread_mutex_lock(&m->mu);
    uint64_t addr = m->next_addr;
    m->next_addr += span; /* one guard slot between blocks keeps addresses distinct */
    pthread_mutex_unlock(&m->mu);
    *out = (void *)(uintptr_t)addr;
    return FHR_OK;
}

static void model_free(fhr_backend *b, fhr_location loc, void *p, size_t nbytes, fhr_stream *s)
{
    (void)b, (void)loc, (void)p, (void)nbytes, (void)s;
}

static fhr_status model_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                             fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    model *m = M(b);
    (void)dst, (void)src, (void)n, (void)s;
    fhr_status st = check_loc(m, dloc, err);
    return st ? st : check_loc(m, sloc, err);
}

static fhr_status model_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                      fhr_error *err)
{
    model *m = M(b);
    fhr_status st = check_loc(m, loc, err);
    if (st)
        return st;
    fhr_stream *s = malloc(sizeof *s);
    if (!s)
        return fhr_fail(err, FHR_E_NOMEM, "model: out of host memory for a stream");
    pthread_mutex_lock(&m->mu);
    s->id = ++m->next_stream_id;
    pthread_mutex_unlock(&m->mu);
    *out = s;
    return FHR_OK;
}

static void model_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    free(s);
}

static fhr_status model_ok(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    (void)b, (void)s, (void)err;
    return FHR_OK;
}

static fhr_status model_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    (void)b;
    fhr_event *e = calloc(1, sizeof *e);
    if (!e)
        return fhr_fail(err, FHR_E_NOMEM, "model: out of host memory for an event");
    *out = e;
    return FHR_OK;
}

static void model_event_destroy(fhr_backend *b, fhr_event *e)
{
    (void)b;
    free(e);
}

static fhr_status model_event_record(fhr_backend *b, fhr_event *e, fhr_stream *s,
                                     fhr_error *err)
{
    (void)b, (void)e, (void)s, (void)err;
    return FHR_OK;
}

static int model_event_query(fhr_backend *b, fhr_event *e)
{
    (void)b, (void)e;
    return 1;
}

static fhr_status model_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    (void)b, (void)e, (void)err;
    return FHR_OK;
}

static fhr_status model_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                          fhr_error *err)
{
    (void)b, (void)s, (void)e, (void)err;
    return FHR_OK;
}

/* Runs fn at once on the calling thread: all earlier work is already "complete".
 * Dry-run callers pass only bookkeeping functions, never ones that read buffers. */
static fhr_status model_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                    fhr_error *err)
{
    (void)b, (void)s;
    if (!fn)
        return fhr_fail(err, FHR_E_INVALID, "model: launch_host needs a function");
    fn(arg);
    return FHR_OK;
}

static void model_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    (void)b, (void)loc;
    *out = (fhr_observation){0};
}

static uint64_t model_stream_id(fhr_backend *b, fhr_stream *s)
{
    (void)b;
    return s ? s->id : 0;
}

static void model_destroy(fhr_backend *b)
{
    model *m = M(b);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const fhr_backend_ops model_ops = {
    .name = "model",
    .device_count = model_device_count,
    .alloc = model_alloc,
    .free = model_free,
    .copy = model_copy,
    .stream_create = model_stream_create,
    .stream_destroy = model_stream_destroy,
    .stream_sync = model_ok,
    .event_create = model_event_create,
    .event_destroy = model_event_destroy,
    .event_record = model_event_record,
    .event_query = model_event_query,
    .event_sync = model_event_sync,
    .stream_wait_event = model_stream_wait_event,
    .launch_host = model_launch_host,
    .observe = model_observe,
    .stream_id = model_stream_id,
    .destroy = model_destroy,
};

fhr_status fhr_backend_model_create(int ndev, fhr_backend **out, fhr_error *err)
{
    if (ndev < 1 || ndev > FHR_MAX_CUDA_DEVICES || !out)
        return fhr_fail(err, FHR_E_INVALID, "model: device count %d is not in 1..%d", ndev,
                        FHR_MAX_CUDA_DEVICES);
    model *m = calloc(1, sizeof *m);
    if (!m)
        return fhr_fail(err, FHR_E_NOMEM, "model: out of host memory");
    m->base.ops = &model_ops;
    m->base.impl = m;
    m->ndev = ndev;
    m->next_addr = MODEL_BASE;
    pthread_mutex_init(&m->mu, NULL);
    *out = &m->base;
    return FHR_OK;
}
