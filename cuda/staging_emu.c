/* cuda/staging_emu.c — the staging pipeline driven through a backend's ops: copy threads
 * fill and drain pinned slots, the backend's stream copies them to or from cuda:0. */
#include "cuda/staging_emu.h"
#include "base/error.h"
#include "cuda/host_copy.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct staging_emu {
    fhr_backend *b;
    fhr_stream *s;
    copy_pool *cp;
    staging_shape shape;
    size_t slot_bytes;
    void *slot[STAGING_MAX_SLOTS];
    fhr_event *ev[STAGING_MAX_SLOTS];
    int armed[STAGING_MAX_SLOTS];
    copy_job job[STAGING_MAX_SLOTS];
    copy_split *split[STAGING_MAX_SLOTS]; /* split host stages: made with the slot */
    /* the copy under way */
    const staging_plan *p;
    char *dev, *host;
    uint64_t t0, first_dma;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

fhr_status staging_emu_create(fhr_backend *b, copy_pool *cp, const staging_shape *shape,
                              staging_emu **out, fhr_error *err)
{
    staging_emu *x = calloc(1, sizeof *x);
    if (!x)
        return fhr_fail(err, FHR_E_NOMEM, "staging: out of host memory");
    x->b = b;
    x->cp = cp;
    x->shape = *shape;
    x->slot_bytes = shape->max_chunk;
    fhr_status st = fhr_stream_create(b, fhr_loc_cuda(0), &x->s, err);
    if (st) {
        free(x);
        return st;
    }
    *out = x;
    return FHR_OK;
}

static fhr_status dma_wait(void *ctx, size_t i, int k, fhr_error *err)
{
    (void)i;
    staging_emu *x = ctx;
    fhr_status st = x->armed[k] ? x->b->ops->event_sync(x->b, x->ev[k], err) : FHR_OK;
    x->armed[k] = 0;
    return st;
}

/* Slot k's event, pinned buffer and (split fill) pieces, made on first use, and no DMA
 * still on it. */
static fhr_status slot_ready(staging_emu *x, int k, fhr_error *err)
{
    fhr_status st = FHR_OK;
    if (!x->split[k] && !(x->split[k] = calloc(1, sizeof *x->split[k])))
        return fhr_fail(err, FHR_E_NOMEM, "staging: out of host memory for a slot");
    if (!x->ev[k])
        st = x->b->ops->event_create(x->b, &x->ev[k], err);
    if (!st && !x->slot[k])
        st = x->b->ops->alloc(x->b, fhr_loc_pinned(), x->slot_bytes, x->s, &x->slot[k], err);
    return st ? st : dma_wait(x, 0, k, err);
}

static fhr_status dma(staging_emu *x, size_t i, int k, int to_device, fhr_error *err)
{
    size_t off, len;
    staging_chunk(x->p, i, &off, &len);
    if (!x->first_dma)
        x->first_dma = now_ns();
    fhr_status st = to_device ? x->b->ops->copy(x->b, x->dev + off, fhr_loc_cuda(0), x->slot[k],
                                                fhr_loc_pinned(), len, x->s, err)
                              : x->b->ops->copy(x->b, x->slot[k], fhr_loc_pinned(), x->dev + off,
                                                fhr_loc_cuda(0), len, x->s, err);
    if (!st && (st = x->b->ops->event_record(x->b, x->ev[k], x->s, err)) != FHR_OK)
        fhr_stream_sync(x->b, x->s, NULL); /* a failed start leaves nothing running */
    if (!st)
        x->armed[k] = 1;
    return st;
}

/* The host stage of chunk i (staging_host_start). */
static void host_copy(staging_emu *x, size_t i, int k, int to_slot)
{
    size_t off, len;
    staging_chunk(x->p, i, &off, &len);
    void *dst = to_slot ? x->slot[k] : x->host + off;
    const void *src = to_slot ? (const void *)(x->host + off) : x->slot[k];
    staging_host_start(x->p, x->cp, &x->job[k], x->split[k], i,
                       staging_stream_copy(x->p->n, &x->shape, to_slot) ? copy_stream
                                                                        : copy_plain,
                       dst, src, len);
}

static fhr_status fill(void *ctx, size_t i, int k, fhr_error *err)
{
    fhr_status st = slot_ready(ctx, k, err);
    if (!st)
        host_copy(ctx, i, k, 1);
    return st;
}

static fhr_status host_wait(void *ctx, size_t i, int k, fhr_error *err)
{
    (void)i, (void)err;
    staging_emu *x = ctx;
    staging_host_join(x->p, x->cp, &x->job[k], x->split[k]);
    return FHR_OK;
}

static fhr_status to_dev(void *ctx, size_t i, int k, fhr_error *err) { return dma(ctx, i, k, 1, err); }

static fhr_status from_dev(void *ctx, size_t i, int k, fhr_error *err)
{
    fhr_status st = slot_ready(ctx, k, err);
    return st ? st : dma(ctx, i, k, 0, err);
}

static fhr_status drain(void *ctx, size_t i, int k, fhr_error *err)
{
    (void)err;
    host_copy(ctx, i, k, 0);
    return FHR_OK;
}

static void quiesce(void *ctx)
{
    staging_emu *x = ctx;
    for (int k = 0; k < STAGING_MAX_SLOTS; k++) {
        copy_pool_wait(x->cp, &x->job[k]);
        if (x->split[k])
            copy_pool_wait_split(x->cp, x->split[k]);
    }
}

static const staging_ops to_device_ops = {fill, host_wait, to_dev, dma_wait, quiesce};
static const staging_ops to_host_ops = {from_dev, dma_wait, drain, host_wait, quiesce};

fhr_status staging_emu_copy(staging_emu *x, void *dev, void *host, size_t n, int to_device,
                            uint64_t *first_dma_ns, fhr_error *err)
{
    staging_plan p;
    int path = staging_small(n, &x->shape, to_device);
    int small = path == STAGING_SMALL_CALLER;
    staging_plan_for(path, n, &x->shape, to_device, &p);
    x->p = &p;
    x->dev = dev;
    x->host = host;
    x->first_dma = 0;
    x->t0 = now_ns();
    const staging_ops *ops = to_device ? &to_device_ops : &to_host_ops;
    fhr_status st = small ? staging_small_run(&p, to_device, ops, x, err)
                          : staging_run(&p, !to_device, ops, x, err);
    /* the DMAs the pipeline leaves in flight (towards the device), or all after a failure */
    fhr_status ss = fhr_stream_sync(x->b, x->s, st ? NULL : err);
    if (!st)
        st = ss;
    for (int k = 0; k < STAGING_MAX_SLOTS; k++)
        x->armed[k] = 0;
    if (first_dma_ns)
        *first_dma_ns = x->first_dma ? x->first_dma - x->t0 : 0;
    x->p = NULL;
    return st;
}

int staging_emu_idle(const staging_emu *x)
{
    for (int k = 0; k < STAGING_MAX_SLOTS; k++)
        if (x->job[k].pending || (x->split[k] && x->split[k]->pending))
            return 0;
    return 1;
}

void staging_emu_destroy(staging_emu *x)
{
    if (!x)
        return;
    fhr_stream_sync(x->b, x->s, NULL);
    for (int k = 0; k < STAGING_MAX_SLOTS; k++) {
        if (x->slot[k])
            x->b->ops->free(x->b, fhr_loc_pinned(), x->slot[k], x->slot_bytes, x->s);
        if (x->ev[k])
            x->b->ops->event_destroy(x->b, x->ev[k]);
        free(x->split[k]);
    }
    fhr_stream_sync(x->b, x->s, NULL);
    fhr_stream_destroy(x->b, x->s);
    free(x);
}
