/* tests/unit/gated_backend.h — a test decorator over any backend whose copies into one
 * location block the calling thread on a gate (as the CUDA backend's staged copies do),
 * which counts host waits as they start and can fail the next event records. */
#ifndef FHEPLAN_TEST_GATED_BACKEND_H
#define FHEPLAN_TEST_GATED_BACKEND_H

#include "fheplan/backend.h"
#include "backend_gate.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct gated {
    fhr_backend base;
    fhr_backend *inner;
    fhr_backend_ops ops;
    gate copy_gate;          /* copies into copy_to wait here while copy_armed */
    int copy_armed;          /* guarded by copy_gate.mu */
    fhr_location copy_to;
    pthread_mutex_t mu;      /* the fields below */
    pthread_cond_t cv;
    int waits_started;       /* stream_sync and event_sync calls that began */
    int fail_records;        /* the next N event_record calls fail */
    int fail_silently;       /* ... without a word in err (as a careless backend might) */
} gated;

static inline gated *G(fhr_backend *b) { return (gated *)b->impl; }

static inline fhr_status gated_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                                    fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    gated *g = G(b);
    pthread_mutex_lock(&g->copy_gate.mu);
    int armed = g->copy_armed && fhr_loc_equal(dloc, g->copy_to);
    pthread_mutex_unlock(&g->copy_gate.mu);
    if (armed)
        gate_wait(&g->copy_gate); /* the caller's thread blocks, as in a staged copy */
    return g->inner->ops->copy(g->inner, dst, dloc, src, sloc, n, s, err);
}

static inline void gated_wait_started(gated *g)
{
    pthread_mutex_lock(&g->mu);
    g->waits_started++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline fhr_status gated_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    gated_wait_started(G(b));
    return G(b)->inner->ops->stream_sync(G(b)->inner, s, err);
}

static inline fhr_status gated_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    gated_wait_started(G(b));
    return G(b)->inner->ops->event_sync(G(b)->inner, e, err);
}

static inline fhr_status gated_event_record(fhr_backend *b, fhr_event *e, fhr_stream *s,
                                            fhr_error *err)
{
    gated *g = G(b);
    pthread_mutex_lock(&g->mu);
    int fail = g->fail_records > 0, silent = g->fail_silently;
    if (fail)
        g->fail_records--;
    pthread_mutex_unlock(&g->mu);
    if (fail) {
        if (err && !silent) {
            fhr_error_clear(err);
            err->status = FHR_E_BACKEND;
            snprintf(err->message, sizeof err->message, "gated: event record refused by the test");
        }
        return FHR_E_BACKEND;
    }
    return g->inner->ops->event_record(g->inner, e, s, err);
}

static inline void gated_destroy(fhr_backend *b)
{
    gated *g = G(b);
    g->inner->ops->destroy(g->inner);
    gate_fini(&g->copy_gate);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Every other op goes straight to the inner backend. */
#define GI(b) (G(b)->inner)
static inline int gated_device_count(fhr_backend *b) { return GI(b)->ops->device_count(GI(b)); }
static inline fhr_status gated_alloc(fhr_backend *b, fhr_location loc, size_t n, fhr_stream *s,
                                     void **out, fhr_error *err)
{
    return GI(b)->ops->alloc(GI(b), loc, n, s, out, err);
}
static inline void gated_free(fhr_backend *b, fhr_location loc, void *p, size_t n, fhr_stream *s)
{
    GI(b)->ops->free(GI(b), loc, p, n, s);
}
static inline fhr_status gated_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                             fhr_error *err)
{
    return GI(b)->ops->stream_create(GI(b), loc, out, err);
}
static inline void gated_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    GI(b)->ops->stream_destroy(GI(b), s);
}
static inline fhr_status gated_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    return GI(b)->ops->event_create(GI(b), out, err);
}
static inline void gated_event_destroy(fhr_backend *b, fhr_event *e)
{
    GI(b)->ops->event_destroy(GI(b), e);
}
static inline int gated_event_query(fhr_backend *b, fhr_event *e)
{
    return GI(b)->ops->event_query(GI(b), e);
}
static inline fhr_status gated_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                                 fhr_error *err)
{
    return GI(b)->ops->stream_wait_event(GI(b), s, e, err);
}
static inline fhr_status gated_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                           fhr_error *err)
{
    return GI(b)->ops->launch_host(GI(b), s, fn, arg, err);
}
static inline void gated_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    GI(b)->ops->observe(GI(b), loc, out);
}
static inline uint64_t gated_stream_id(fhr_backend *b, fhr_stream *s)
{
    return GI(b)->ops->stream_id(GI(b), s);
}

/* Takes ownership of inner. */
static inline fhr_backend *gated_create(fhr_backend *inner)
{
    gated *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->inner = inner;
    g->ops = (fhr_backend_ops){
        .name = "gated",
        .device_count = gated_device_count,
        .alloc = gated_alloc,
        .free = gated_free,
        .stream_create = gated_stream_create,
        .stream_destroy = gated_stream_destroy,
        .event_create = gated_event_create,
        .event_destroy = gated_event_destroy,
        .event_query = gated_event_query,
        .stream_wait_event = gated_stream_wait_event,
        .launch_host = gated_launch_host,
        .observe = gated_observe,
        .stream_id = gated_stream_id,
    };
    g->ops.copy = gated_copy;
    g->ops.stream_sync = gated_stream_sync;
    g->ops.event_sync = gated_event_sync;
    g->ops.event_record = gated_event_record;
    g->ops.destroy = gated_destroy;
    g->base.ops = &g->ops;
    g->base.impl = g;
    gate_init(&g->copy_gate);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    return &g->base;
}

static inline void gated_arm_copies(fhr_backend *b, fhr_location to)
{
    gated *g = G(b);
    pthread_mutex_lock(&g->copy_gate.mu);
    g->copy_armed = 1;
    g->copy_to = to;
    pthread_mutex_unlock(&g->copy_gate.mu);
}

static inline void gated_fail_records(fhr_backend *b, int n)
{
    pthread_mutex_lock(&G(b)->mu);
    G(b)->fail_records = n;
    G(b)->fail_silently = 0;
    pthread_mutex_unlock(&G(b)->mu);
}

static inline void gated_fail_records_silently(fhr_backend *b, int n)
{
    pthread_mutex_lock(&G(b)->mu);
    G(b)->fail_records = n;
    G(b)->fail_silently = 1;
    pthread_mutex_unlock(&G(b)->mu);
}

static inline void gated_await_waits(fhr_backend *b, int n)
{
    gated *g = G(b);
    pthread_mutex_lock(&g->mu);
    while (g->waits_started < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline int gated_waits(fhr_backend *b)
{
    pthread_mutex_lock(&G(b)->mu);
    int n = G(b)->waits_started;
    pthread_mutex_unlock(&G(b)->mu);
    return n;
}

#endif
