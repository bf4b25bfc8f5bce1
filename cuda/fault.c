/* cuda/fault.c — a fault-injecting decorator over any backend: counts alloc, copy and
 * event_record calls and fails the armed k-th one without calling the inner backend. */
#include "fheplan/backend.h"
#include "base/error.h"
#include "cuda/counter_gen.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct fault {
    fhr_backend base;
    fhr_backend *inner; /* owned */
    _Atomic uint64_t count[FHR_FAULT_KINDS_];
    _Atomic uint64_t armed[FHR_FAULT_KINDS_]; /* 0: disarmed */
} fault;

static fault *F(fhr_backend *b) { return (fault *)b->impl; }
static fhr_backend *IN(fhr_backend *b) { return F(b)->inner; }

static const char *const kind_names[FHR_FAULT_KINDS_] = {"alloc", "copy", "event_record"};

static const char *ordinal_suffix(uint64_t k)
{
    if (k % 100 >= 11 && k % 100 <= 13)
        return "th";
    switch (k % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
    }
}

/* Counts one call of kind; FHR_E_BACKEND (with err filled) when it is the armed one. */
static fhr_status tick(fhr_backend *b, fhr_fault_kind kind, fhr_error *err)
{
    fault *f = F(b);
    uint64_t n = atomic_fetch_add(&f->count[kind], 1) + 1;
    uint64_t k = atomic_load(&f->armed[kind]);
    if (k == 0 || n != k)
        return FHR_OK;
    return fhr_fail(err, FHR_E_BACKEND, "injected fault: %llu%s %s", (unsigned long long)k,
                    ordinal_suffix(k), kind_names[kind]);
}

static int f_device_count(fhr_backend *b) { return IN(b)->ops->device_count(IN(b)); }

static fhr_status f_alloc(fhr_backend *b, fhr_location loc, size_t nbytes, fhr_stream *s,
                          void **out, fhr_error *err)
{
    fhr_status st = tick(b, FHR_FAULT_ALLOC, err);
    return st ? st : IN(b)->ops->alloc(IN(b), loc, nbytes, s, out, err);
}

static void f_free(fhr_backend *b, fhr_location loc, void *p, size_t nbytes, fhr_stream *s)
{
    IN(b)->ops->free(IN(b), loc, p, nbytes, s);
}

static fhr_status f_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                         fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    fhr_status st = tick(b, FHR_FAULT_COPY, err);
    return st ? st : IN(b)->ops->copy(IN(b), dst, dloc, src, sloc, n, s, err);
}

static fhr_status f_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                  fhr_error *err)
{
    return IN(b)->ops->stream_create(IN(b), loc, out, err);
}

static void f_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    IN(b)->ops->stream_destroy(IN(b), s);
}

static fhr_status f_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    return IN(b)->ops->stream_sync(IN(b), s, err);
}

static fhr_status f_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    return IN(b)->ops->event_create(IN(b), out, err);
}

static fhr_status f_event_create_timed(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    if (!IN(b)->ops->event_create_timed)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "fault: the inner backend has no timed events");
    return IN(b)->ops->event_create_timed(IN(b), out, err);
}

static fhr_status f_event_elapsed(fhr_backend *b, fhr_event *from, fhr_event *to,
                                  double *seconds, fhr_error *err)
{
    if (!IN(b)->ops->event_elapsed)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "fault: the inner backend has no timed events");
    return IN(b)->ops->event_elapsed(IN(b), from, to, seconds, err);
}

static int f_clock(fhr_backend *b, uint64_t *ns)
{
    return IN(b)->ops->clock && IN(b)->ops->clock(IN(b), ns);
}

static fhr_status f_advance(fhr_backend *b, fhr_stream *s, uint64_t ns, fhr_error *err)
{
    if (!IN(b)->ops->advance)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "fault: the inner backend has no virtual clock");
    return IN(b)->ops->advance(IN(b), s, ns, err);
}

static void f_event_destroy(fhr_backend *b, fhr_event *e)
{
    IN(b)->ops->event_destroy(IN(b), e);
}

static fhr_status f_event_record(fhr_backend *b, fhr_event *e, fhr_stream *s, fhr_error *err)
{
    fhr_status st = tick(b, FHR_FAULT_EVENT, err);
    return st ? st : IN(b)->ops->event_record(IN(b), e, s, err);
}

static int f_event_query(fhr_backend *b, fhr_event *e)
{
    return IN(b)->ops->event_query(IN(b), e);
}

static fhr_status f_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    return IN(b)->ops->event_sync(IN(b), e, err);
}

static fhr_status f_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                      fhr_error *err)
{
    return IN(b)->ops->stream_wait_event(IN(b), s, e, err);
}

static fhr_status f_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                fhr_error *err)
{
    return IN(b)->ops->launch_host(IN(b), s, fn, arg, err);
}

static void f_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    IN(b)->ops->observe(IN(b), loc, out);
}

static uint64_t f_stream_id(fhr_backend *b, fhr_stream *s)
{
    return IN(b)->ops->stream_id(IN(b), s);
}

static fhr_status f_stream_wrap(fhr_backend *b, fhr_location loc, void *native,
                                fhr_stream **out, fhr_error *err)
{
    if (!IN(b)->ops->stream_wrap)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "fault: the %s backend has no native streams",
                        IN(b)->ops->name);
    return IN(b)->ops->stream_wrap(IN(b), loc, native, out, err);
}

static fhr_status f_stream_native(fhr_backend *b, fhr_stream *s, void **native, int *device,
                                  fhr_error *err)
{
    if (!IN(b)->ops->stream_native)
        return fhr_fail(err, FHR_E_UNSUPPORTED, "fault: the %s backend has no native streams",
                        IN(b)->ops->name);
    return IN(b)->ops->stream_native(IN(b), s, native, device, err);
}

static void f_destroy(fhr_backend *b)
{
    fault *f = F(b);
    f->inner->ops->destroy(f->inner);
    free(f);
}

static const fhr_backend_ops fault_ops = {
    .name = "fault",
    .device_count = f_device_count,
    .alloc = f_alloc,
    .free = f_free,
    .copy = f_copy,
    .stream_create = f_stream_create,
    .stream_destroy = f_stream_destroy,
    .stream_sync = f_stream_sync,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .event_sync = f_event_sync,
    .stream_wait_event = f_stream_wait_event,
    .launch_host = f_launch_host,
    .observe = f_observe,
    .stream_id = f_stream_id,
    .destroy = f_destroy,
    .stream_wrap = f_stream_wrap,
    .stream_native = f_stream_native,
    .event_create_timed = f_event_create_timed,
    .event_elapsed = f_event_elapsed,
    .clock = f_clock,
    .advance = f_advance,
};

fhr_status fhr_backend_fault_create(fhr_backend *inner, fhr_backend **out, fhr_error *err)
{
    if (!inner || !out)
        return fhr_fail(err, FHR_E_INVALID, "fault: needs an inner backend and an out pointer");
    fault *f = calloc(1, sizeof *f);
    if (!f)
        return fhr_fail(err, FHR_E_NOMEM, "fault: out of host memory");
    f->base.ops = &fault_ops;
    f->base.impl = f;
    f->inner = inner;
    for (int k = 0; k < FHR_FAULT_KINDS_; k++) {
        atomic_init(&f->count[k], 0);
        atomic_init(&f->armed[k], 0);
    }
    *out = &f->base;
    return FHR_OK;
}

/* Both functions accept only a backend made by fhr_backend_fault_create; others are
 * ignored (arm) or read as 0 (count). */
void fhr_backend_fault_arm(fhr_backend *b, fhr_fault_kind kind, uint64_t k)
{
    if (!b || b->ops != &fault_ops || (unsigned)kind >= FHR_FAULT_KINDS_)
        return;
    atomic_store(&F(b)->armed[kind], 0);
    atomic_store(&F(b)->count[kind], 0);
    atomic_store(&F(b)->armed[kind], k);
}

uint64_t fhr_backend_fault_count(fhr_backend *b, fhr_fault_kind kind)
{
    if (!b || b->ops != &fault_ops || (unsigned)kind >= FHR_FAULT_KINDS_)
        return 0;
    return atomic_load(&F(b)->count[kind]);
}

const char *fhr_backend_kind(fhr_backend *b)
{
    while (b && b->ops && b->ops->name && strcmp(b->ops->name, "fault") == 0)
        b = IN(b);
    return b && b->ops && b->ops->name ? b->ops->name : "";
}
