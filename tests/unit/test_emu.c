/* tests/unit/test_emu.c — the emulated device: stream ordering, CUDA event semantics,
 * capacity, stream-ordered free, bit-exact copies and use from several threads. */
#include "fheplan/backend.h"
#include "backend_gate.h"

#include <criterion/criterion.h>

static fhr_backend *emu(int ndev, uint64_t cap)
{
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(fhr_backend_emu_create(ndev, cap, &b, &err), FHR_OK, "%s", err.message);
    return b;
}

static fhr_stream *stream(fhr_backend *b, fhr_location loc)
{
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(b, loc, &s, NULL), FHR_OK);
    return s;
}

static fhr_event *event(fhr_backend *b)
{
    fhr_event *e = NULL;
    cr_assert_eq(b->ops->event_create(b, &e, NULL), FHR_OK);
    return e;
}

Test(threads_emu, copy_waits_behind_host_op_on_same_stream)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    gate g;
    gate_init(&g);
    char src[64], dst[64];
    memset(src, 'x', sizeof src);
    memset(dst, 0, sizeof dst);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, dst, fhr_loc_cuda(0), src, fhr_loc_host(), sizeof src, s, NULL),
                 FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(dst[0], 0, "the copy ran before the host op ahead of it finished");
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_arr_eq(dst, src, sizeof src);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(threads_emu, wait_event_blocks_only_the_waiting_stream)
{
    fhr_backend *b = emu(2, 0);
    fhr_stream *a = stream(b, fhr_loc_cuda(0));
    fhr_stream *w = stream(b, fhr_loc_cuda(1));
    fhr_stream *other = stream(b, fhr_loc_cuda(1));
    fhr_event *ea = event(b), *before = event(b), *after = event(b);
    gate g;
    gate_init(&g);
    char src[32], d1[32] = {0}, d2[32] = {0}, d3[32] = {0};
    memset(src, 7, sizeof src);

    cr_assert_eq(fhr_launch_host(b, a, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, ea, a, NULL), FHR_OK);
    /* w: work before the wait runs; work after it waits for a's gate */
    cr_assert_eq(b->ops->copy(b, d1, fhr_loc_cuda(1), src, fhr_loc_host(), 32, w, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, before, w, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, w, ea, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, d2, fhr_loc_cuda(1), src, fhr_loc_host(), 32, w, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, after, w, NULL), FHR_OK);
    /* an unrelated stream is not blocked */
    cr_assert_eq(b->ops->copy(b, d3, fhr_loc_cuda(1), src, fhr_loc_host(), 32, other, NULL),
                 FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, other, NULL), FHR_OK);
    cr_assert_arr_eq(d3, src, 32);

    cr_assert_eq(b->ops->event_sync(b, before, NULL), FHR_OK);
    cr_assert_arr_eq(d1, src, 32);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->event_query(b, ea), 0);
    cr_assert_eq(b->ops->event_query(b, after), 0);
    cr_assert_eq(d2[0], 0, "work behind stream_wait_event ran before the event completed");

    gate_open(&g);
    cr_assert_eq(b->ops->event_sync(b, after, NULL), FHR_OK);
    cr_assert_arr_eq(d2, src, 32);
    cr_assert_eq(b->ops->event_query(b, ea), 1);
    b->ops->event_destroy(b, ea);
    b->ops->event_destroy(b, before);
    b->ops->event_destroy(b, after);
    fhr_stream_destroy(b, a);
    fhr_stream_destroy(b, w);
    fhr_stream_destroy(b, other);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(threads_emu_events, never_recorded_is_complete_and_waits_for_nothing)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s = stream(b, fhr_loc_host());
    fhr_event *e = event(b);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, s, e, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

Test(threads_emu_events, query_pending_then_complete)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    fhr_event *e = event(b);
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e, s, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->event_query(b, e), 0);
    gate_open(&g);
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(threads_emu_events, rerecord_replaces_the_capture_but_not_earlier_waits)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *slow = stream(b, fhr_loc_cuda(0));
    fhr_stream *idle = stream(b, fhr_loc_cuda(0));
    fhr_stream *w = stream(b, fhr_loc_cuda(0));
    fhr_event *e = event(b), *after = event(b);
    gate g;
    gate_init(&g);
    char src[8] = "abcdefg", dst[8] = {0};

    cr_assert_eq(fhr_launch_host(b, slow, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e, slow, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, w, e, NULL), FHR_OK); /* captures slow */
    cr_assert_eq(b->ops->copy(b, dst, fhr_loc_cuda(0), src, fhr_loc_host(), 8, w, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, after, w, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->event_query(b, e), 0);

    cr_assert_eq(b->ops->event_record(b, e, idle, NULL), FHR_OK); /* replaces the capture */
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_eq(b->ops->event_query(b, after), 0, "an earlier wait must keep its capture");
    cr_assert_eq(dst[0], 0);

    gate_open(&g);
    cr_assert_eq(b->ops->event_sync(b, after, NULL), FHR_OK);
    cr_assert_str_eq(dst, src);
    b->ops->event_destroy(b, e);
    b->ops->event_destroy(b, after);
    fhr_stream_destroy(b, slow);
    fhr_stream_destroy(b, idle);
    fhr_stream_destroy(b, w);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(threads_emu_events, event_outlives_its_stream)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    fhr_event *e = event(b);
    cr_assert_eq(b->ops->event_record(b, e, s, NULL), FHR_OK);
    fhr_stream_destroy(b, s);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    b->ops->event_destroy(b, e);
    fhr_backend_destroy(b);
}

Test(threads_emu_memory, capacity_limit_and_observations)
{
    fhr_backend *b = emu(2, 1 << 20);
    fhr_error err;
    fhr_error_init(&err);
    void *p = NULL, *q = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), 600 << 10, NULL, &p, &err), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), 600 << 10, NULL, &q, &err), FHR_E_BACKEND);
    cr_assert(strstr(err.message, "out of memory on emu cuda:1"), "%s", err.message);
    /* the other device has its own capacity */
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 600 << 10, NULL, &q, &err), FHR_OK);

    fhr_observation o;
    b->ops->observe(b, fhr_loc_cuda(1), &o);
    cr_assert_eq(o.valid, 1);
    cr_assert_eq(o.device_total_bytes, 1 << 20);
    cr_assert_eq(o.pool_used_bytes, 600 << 10);
    cr_assert_eq(o.pool_reserved_bytes, 600 << 10);
    cr_assert_eq(o.device_free_bytes, (1 << 20) - (600 << 10));

    b->ops->free(b, fhr_loc_cuda(1), p, 600 << 10, NULL);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), 1 << 20, NULL, &p, &err), FHR_OK);
    b->ops->free(b, fhr_loc_cuda(1), p, 1 << 20, NULL);
    b->ops->free(b, fhr_loc_cuda(0), q, 600 << 10, NULL);
    b->ops->observe(b, fhr_loc_cuda(1), &o);
    cr_assert_eq(o.pool_used_bytes, 0);

    b->ops->observe(b, fhr_loc_cuda(2), &o);
    cr_assert_eq(o.valid, 0);
    fhr_backend_destroy(b);
}

Test(threads_emu_memory, host_and_pinned_are_accounted_without_capacity)
{
    fhr_backend *b = emu(1, 16);
    void *p = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), 4096, NULL, &p, NULL), FHR_OK);
    fhr_observation o;
    b->ops->observe(b, fhr_loc_pinned(), &o);
    cr_assert_eq(o.valid, 1);
    cr_assert_eq(o.pool_used_bytes, 4096);
    cr_assert_eq(o.device_total_bytes, 0);
    b->ops->free(b, fhr_loc_pinned(), p, 4096, NULL);
    fhr_backend_destroy(b);
}

Test(threads_emu_memory, invalid_locations_and_arguments)
{
    fhr_backend *b = emu(1, 0);
    fhr_error err;
    fhr_error_init(&err);
    void *p = NULL;
    fhr_stream *s = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), 8, NULL, &p, &err), FHR_E_LOCATION);
    cr_assert(strstr(err.message, "cuda:1"), "%s", err.message);
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(7), &s, NULL), FHR_E_LOCATION);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 0, NULL, &p, NULL), FHR_E_INVALID);
    fhr_location bad = {FHR_LOC_INVALID, 0};
    cr_assert_eq(b->ops->alloc(b, bad, 8, NULL, &p, NULL), FHR_E_LOCATION);
    cr_assert_eq(b->ops->device_count(b), 1);
    fhr_backend_destroy(b);
    cr_assert_eq(fhr_backend_emu_create(0, 0, &b, NULL), FHR_E_INVALID);
    cr_assert_eq(fhr_backend_emu_create(FHR_MAX_CUDA_DEVICES + 1, 0, &b, NULL), FHR_E_INVALID);
}

Test(threads_emu_memory, free_is_stream_ordered)
{
    fhr_backend *b = emu(1, 1 << 20);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    gate g;
    gate_init(&g);
    void *p = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1 << 20, s, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    b->ops->free(b, fhr_loc_cuda(0), p, 1 << 20, s);
    gate_await_entered(&g, 1);
    fhr_observation o;
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 1 << 20, "freed before earlier work on the stream finished");
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1, NULL, &p, NULL), FHR_E_BACKEND);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 0);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

/* As a stream-ordered pool: bytes whose free is queued on a stream are reused by a later
 * allocation on that stream at once, never by one on another stream; the high-water mark
 * counts what the device held at most. */
Test(threads_emu_memory, a_free_queued_on_a_stream_is_reused_by_that_stream_only)
{
    fhr_backend *b = emu(1, 1 << 20);
    fhr_stream *s = stream(b, fhr_loc_cuda(0)), *t = stream(b, fhr_loc_cuda(0));
    gate g;
    gate_init(&g);
    void *p = NULL, *q = NULL, *r = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1 << 20, s, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    b->ops->free(b, fhr_loc_cuda(0), p, 1 << 20, s);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1 << 19, t, &q, NULL), FHR_E_BACKEND,
                 "another stream cannot reuse a free still queued");
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1 << 19, s, &q, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1 << 19, s, &r, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1, s, &p, NULL), FHR_E_BACKEND,
                 "the free's bytes are reused once");
    fhr_observation o;
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 1 << 20);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 1 << 20, "the reused bytes stay counted for their new owner");
    b->ops->free(b, fhr_loc_cuda(0), q, 1 << 19, s);
    b->ops->free(b, fhr_loc_cuda(0), r, 1 << 19, NULL);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 0);
    cr_assert_eq(o.pool_used_high_bytes, 1 << 20);
    cr_assert_eq(o.pool_reserved_high_bytes, 1 << 20);
    cr_assert_eq(o.pool_granule_bytes, 0, "the emulated pool has no growth granule");
    fhr_stream_destroy(b, s);
    fhr_stream_destroy(b, t);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

static void round_trip(size_t n)
{
    fhr_backend *b = emu(2, 0);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    unsigned char *src = malloc(n), *back = calloc(1, n);
    cr_assert(src && back);
    fill_pattern(src, n, (uint32_t)n);
    void *d0 = NULL, *pin = NULL, *d1 = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), n, s, &d0, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), n, s, &pin, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), n, s, &d1, NULL), FHR_OK);
    fhr_location H = fhr_loc_host(), P = fhr_loc_pinned(), C0 = fhr_loc_cuda(0),
                 C1 = fhr_loc_cuda(1);
    cr_assert_eq(b->ops->copy(b, d0, C0, src, H, n, s, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, pin, P, d0, C0, n, s, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, d1, C1, pin, P, n, s, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, back, H, d1, C1, n, s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(memcmp(src, back, n), 0, "round trip of %zu bytes is not bit-exact", n);
    b->ops->free(b, C0, d0, n, s);
    b->ops->free(b, P, pin, n, s);
    b->ops->free(b, C1, d1, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    free(src);
    free(back);
}

Test(threads_emu_copy, round_trip_1) { round_trip(1); }
Test(threads_emu_copy, round_trip_4097) { round_trip(4097); }
Test(threads_emu_copy, round_trip_3MiB_plus_7) { round_trip((3u << 20) + 7); }

Test(threads_emu_copy, stream_ids_are_small_and_unique)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s[4];
    for (int i = 0; i < 4; i++)
        s[i] = stream(b, i % 2 ? fhr_loc_host() : fhr_loc_cuda(0));
    for (int i = 0; i < 4; i++) {
        uint64_t id = b->ops->stream_id(b, s[i]);
        cr_assert(id >= 1 && id <= 4);
        for (int j = 0; j < i; j++)
            cr_assert_neq(id, b->ops->stream_id(b, s[j]));
    }
    for (int i = 0; i < 4; i++)
        fhr_stream_destroy(b, s[i]);
    fhr_backend_destroy(b);
}

/* ---- several threads sharing one backend ------------------------------------------- */

typedef struct worker_arg {
    fhr_backend *b;
    int index;
    int ok;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    fhr_backend *b = a->b;
    fhr_stream *s = NULL;
    size_t n = 10000 + (size_t)a->index * 37;
    unsigned char *src = malloc(n), *back = calloc(1, n);
    a->ok = src && back && fhr_stream_create(b, fhr_loc_cuda(a->index % 2), &s, NULL) == FHR_OK;
    for (int round = 0; a->ok && round < 20; round++) {
        void *d = NULL;
        fill_pattern(src, n, (uint32_t)(a->index * 100 + round));
        a->ok = b->ops->alloc(b, fhr_loc_cuda(a->index % 2), n, s, &d, NULL) == FHR_OK &&
                b->ops->copy(b, d, fhr_loc_cuda(a->index % 2), src, fhr_loc_host(), n, s,
                             NULL) == FHR_OK &&
                b->ops->copy(b, back, fhr_loc_host(), d, fhr_loc_cuda(a->index % 2), n, s,
                             NULL) == FHR_OK;
        if (d)
            b->ops->free(b, fhr_loc_cuda(a->index % 2), d, n, s);
        a->ok = a->ok && fhr_stream_sync(b, s, NULL) == FHR_OK && memcmp(src, back, n) == 0;
    }
    fhr_stream_destroy(b, s);
    free(src);
    free(back);
    return NULL;
}

Test(threads_emu_shared, many_threads_one_backend)
{
    fhr_backend *b = emu(2, 0);
    pthread_t t[6];
    worker_arg a[6];
    for (int i = 0; i < 6; i++) {
        a[i] = (worker_arg){b, i, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, worker, &a[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        cr_assert(a[i].ok, "worker %d saw a wrong result", i);
    }
    fhr_observation o;
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 0);
    fhr_backend_destroy(b);
}

typedef struct recorder_arg {
    fhr_backend *b;
    fhr_stream *s;
    fhr_event *e;
    gate *g;
} recorder_arg;

static void *recorder(void *p)
{
    recorder_arg *a = p;
    fhr_launch_host(a->b, a->s, gate_wait, a->g, NULL);
    a->b->ops->event_record(a->b, a->e, a->s, NULL);
    return NULL;
}

Test(threads_emu_shared, event_recorded_on_one_thread_waited_on_another)
{
    fhr_backend *b = emu(1, 0);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    fhr_event *e = event(b);
    gate g;
    gate_init(&g);
    recorder_arg a = {b, s, e, &g};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, recorder, &a), 0);
    pthread_join(t, NULL);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->event_query(b, e), 0);
    gate_open(&g);
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

/* ---- the virtual clock ------------------------------------------------------------- */

static fhr_backend *emu_virtual(int ndev)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_emu_create_virtual(ndev, 0, &b, NULL), FHR_OK);
    return b;
}

static uint64_t now(fhr_backend *b)
{
    int virt = 0;
    uint64_t t = fhr_backend_clock_ns(b, &virt);
    cr_assert_eq(virt, 1);
    return t;
}

static uint64_t elapsed_ns(fhr_backend *b, fhr_event *from, fhr_event *to)
{
    double s = -1;
    cr_assert_eq(b->ops->event_elapsed(b, from, to, &s, NULL), FHR_OK);
    return (uint64_t)(s * 1e9 + 0.5);
}

/* A copy lasts its bytes over its direction's rate, rounded up to whole ns; the host's
 * time moves only when it waits. */
Test(threads_emu_virtual, copies_last_their_bytes_over_their_direction_rate)
{
    fhr_backend *b = emu_virtual(2);
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    size_t n = 1000000;
    void *pin, *host, *d0, *d0b, *d1;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), n, NULL, &pin, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), n, NULL, &host, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), n, s, &d0, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), n, s, &d0b, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(1), n, s, &d1, NULL), FHR_OK);
    memset(pin, 7, n);
    struct { void *dst; fhr_location dl; void *src; fhr_location sl; uint64_t ns; } c[] = {
        {d0, fhr_loc_cuda(0), pin, fhr_loc_pinned(), 18019},   /* 1e6 B / 55.5 GB/s */
        {host, fhr_loc_host(), d0, fhr_loc_cuda(0), 38462},    /* pageable: 26 GB/s */
        {d1, fhr_loc_cuda(1), d0, fhr_loc_cuda(0), 2223},      /* peer: 450 GB/s */
        {d0b, fhr_loc_cuda(0), d0, fhr_loc_cuda(0), 334},      /* one device: 3000 GB/s */
        {pin, fhr_loc_pinned(), host, fhr_loc_host(), 38462},  /* host memories: 26 GB/s */
    };
    uint64_t t = 0;
    cr_assert_eq(now(b), 0);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cr_assert_eq(b->ops->copy(b, c[i].dst, c[i].dl, c[i].src, c[i].sl, n, s, NULL), FHR_OK);
        cr_assert_eq(now(b), t, "enqueueing takes no time");
        cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
        t += c[i].ns;
        cr_assert_eq(now(b), t, "copy %zu: %llu ns", i, (unsigned long long)now(b));
    }
    cr_assert_eq(((unsigned char *)host)[n - 1], 7, "the bytes were really copied");
    b->ops->free(b, fhr_loc_cuda(1), d1, n, s);
    b->ops->free(b, fhr_loc_cuda(0), d0b, n, s);
    b->ops->free(b, fhr_loc_cuda(0), d0, n, s);
    b->ops->free(b, fhr_loc_host(), host, n, NULL);
    b->ops->free(b, fhr_loc_pinned(), pin, n, NULL);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

static void read_clock(void *arg)
{
    void **a = arg;
    *(uint64_t *)a[1] = fhr_backend_clock_ns(a[0], NULL);
}

/* Each stream is a timeline: work starts after the stream's earlier work, after the
 * host's time when it was enqueued and after an event it waits for; an event is complete
 * for the host once the host's time reached it, whatever the workers have done. */
Test(threads_emu_virtual, streams_are_timelines_and_waits_take_the_latest)
{
    fhr_backend *b = emu_virtual(1);
    fhr_stream *s1 = stream(b, fhr_loc_cuda(0)), *s2 = stream(b, fhr_loc_cuda(0)),
               *s3 = stream(b, fhr_loc_cuda(0));
    fhr_event *e0, *e1, *e2, *e3;
    cr_assert_eq(b->ops->event_create_timed(b, &e0, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create_timed(b, &e1, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create_timed(b, &e2, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create_timed(b, &e3, NULL), FHR_OK);
    uint64_t in_fn = 0;
    void *args[2] = {b, &in_fn};
    cr_assert_eq(b->ops->event_record(b, e0, s1, NULL), FHR_OK); /* at 0 */
    cr_assert_eq(b->ops->advance(b, s1, 100, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e1, s1, NULL), FHR_OK); /* at 100 */
    cr_assert_eq(b->ops->advance(b, s2, 30, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, s2, e1, NULL), FHR_OK); /* max(30, 100) */
    cr_assert_eq(b->ops->advance(b, s2, 5, NULL), FHR_OK);
    cr_assert_eq(fhr_launch_host(b, s2, read_clock, args, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e2, s2, NULL), FHR_OK); /* at 105 */
    cr_assert_eq(b->ops->event_query(b, e2), 0, "the host is still at 0");
    cr_assert_eq(b->ops->event_query(b, e0), 1, "recorded at 0: complete at once");
    cr_assert_eq(b->ops->event_sync(b, e1, NULL), FHR_OK);
    cr_assert_eq(now(b), 100);
    cr_assert_eq(b->ops->event_query(b, e2), 0, "105 is not reached at 100");
    cr_assert_eq(b->ops->event_sync(b, e2, NULL), FHR_OK);
    cr_assert_eq(now(b), 105);
    cr_assert_eq(b->ops->event_query(b, e2), 1);
    cr_assert_eq(in_fn, 105, "a host function reads the time it runs at: %llu",
                 (unsigned long long)in_fn);
    cr_assert_eq(elapsed_ns(b, e0, e1), 100);
    cr_assert_eq(elapsed_ns(b, e1, e2), 5);
    /* work enqueued now starts at the host's 105 on an idle stream */
    cr_assert_eq(b->ops->advance(b, s3, 10, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e3, s3, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s3, NULL), FHR_OK);
    cr_assert_eq(now(b), 115);
    cr_assert_eq(elapsed_ns(b, e2, e3), 10);
    /* a wait never moves the host back */
    cr_assert_eq(b->ops->event_sync(b, e0, NULL), FHR_OK);
    cr_assert_eq(now(b), 115);
    b->ops->event_destroy(b, e0);
    b->ops->event_destroy(b, e1);
    b->ops->event_destroy(b, e2);
    b->ops->event_destroy(b, e3);
    fhr_stream_destroy(b, s1);
    fhr_stream_destroy(b, s2);
    fhr_stream_destroy(b, s3);
    fhr_backend_destroy(b);
}

/* The wall clock (the default) has no simulated time and cannot advance; a fault
 * decorator keeps its inner backend's clock. */
Test(threads_emu_virtual, the_wall_clock_does_not_advance_and_the_fault_decorator_forwards)
{
    fhr_backend *w = emu(1, 0);
    fhr_stream *s = stream(w, fhr_loc_cuda(0));
    int virt = 1;
    fhr_backend_clock_ns(w, &virt);
    cr_assert_eq(virt, 0);
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(w->ops->advance(w, s, 10, &err), FHR_E_UNSUPPORTED);
    fhr_error_clear(&err);
    fhr_stream_destroy(w, s);
    fhr_backend_destroy(w);
    fhr_backend *f = NULL;
    cr_assert_eq(fhr_backend_fault_create(emu_virtual(1), &f, NULL), FHR_OK);
    s = stream(f, fhr_loc_cuda(0));
    cr_assert_eq(f->ops->advance(f, s, 42, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(f, s, NULL), FHR_OK);
    cr_assert_eq(now(f), 42);
    fhr_stream_destroy(f, s);
    fhr_backend_destroy(f);
}
