/* tests/gpu/test_cuda_backend.c — the real CUDA backend on a GPU: pools, copies in every
 * direction (staged pageable ones included), peer copies, events, ordering, observations. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/backend.h"
#include "../unit/backend_gate.h"
#include "cuda/kernels.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>

static fhr_stream *stream(fhr_backend *b, fhr_location loc)
{
    fhr_stream *s = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(fhr_stream_create(b, loc, &s, &err), FHR_OK, "%s", err.message);
    return s;
}

static void *alloc(fhr_backend *b, fhr_location loc, size_t n, fhr_stream *s)
{
    void *p = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(b->ops->alloc(b, loc, n, s, &p, &err), FHR_OK, "%s", err.message);
    cr_assert_not_null(p);
    return p;
}

static void copy(fhr_backend *b, void *dst, fhr_location dl, const void *src, fhr_location sl,
                 size_t n, fhr_stream *s)
{
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(b->ops->copy(b, dst, dl, src, sl, n, s, &err), FHR_OK, "%s", err.message);
}

static fhr_observation observe(fhr_backend *b, fhr_location loc)
{
    fhr_observation o;
    b->ops->observe(b, loc, &o);
    return o;
}

Test(cuda, device_and_pinned_alloc_free_with_observations)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location D = fhr_loc_cuda(0), P = fhr_loc_pinned();
    fhr_stream *s = stream(b, D);
    fhr_observation before = observe(b, D);
    cr_assert(before.valid);
    cr_assert_gt(before.device_total_bytes, 0);
    cr_assert_leq(before.device_free_bytes, before.device_total_bytes);

    void *d = alloc(b, D, 64u << 20, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    fhr_observation mid = observe(b, D);
    cr_assert_geq(mid.pool_used_bytes, before.pool_used_bytes + (64u << 20));
    cr_assert_geq(mid.pool_reserved_bytes, mid.pool_used_bytes);
    b->ops->free(b, D, d, 64u << 20, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    fhr_observation after = observe(b, D);
    cr_assert_eq(after.pool_used_bytes, before.pool_used_bytes);
    cr_assert_geq(after.pool_reserved_bytes, 64u << 20, "the pool must keep freed memory");

    void *p = alloc(b, P, 1000, s), *q = alloc(b, P, 5000, s);
    fhr_observation po = observe(b, P);
    cr_assert(po.valid);
    cr_assert_eq(po.pool_used_bytes, 1024 + 5120, "pinned blocks are rounded to 256 bytes");
    cr_assert_geq(po.pool_reserved_bytes, 256u << 20);
    b->ops->free(b, P, p, 1000, NULL);
    b->ops->free(b, P, q, 5000, NULL);
    cr_assert_eq(observe(b, P).pool_used_bytes, 0);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

/* NVML is optional: when the driver ships it, device observations carry its view. */
Test(cuda, nvml_observations_when_present)
{
    void *so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!so)
        cr_skip_test("no libnvidia-ml.so.1 on this host");
    dlclose(so);
    fhr_backend *b = cuda_or_skip();
    fhr_observation o = observe(b, fhr_loc_cuda(0));
    cr_assert(o.nvml_valid, "NVML is present but the backend did not use it");
    cr_assert_gt(o.nvml_total_bytes, 0);
    cr_assert_geq(o.nvml_total_bytes, o.device_total_bytes / 2);
    cr_assert_leq(o.nvml_used_bytes, o.nvml_total_bytes);
    cr_assert_not(observe(b, fhr_loc_pinned()).nvml_valid);
    fhr_backend_destroy(b);
}

Test(cuda, pinned_pool_coalesces_and_grows)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location P = fhr_loc_pinned();
    size_t m = 100u << 20;
    void *x = alloc(b, P, m, NULL), *y = alloc(b, P, m, NULL);
    uint64_t reserved = observe(b, P).pool_reserved_bytes;
    cr_assert_eq(reserved, 256u << 20, "two 100 MiB blocks share one arena");
    b->ops->free(b, P, x, m, NULL);
    b->ops->free(b, P, y, m, NULL);
    void *whole = alloc(b, P, 256u << 20, NULL);
    cr_assert_eq(observe(b, P).pool_reserved_bytes, reserved, "freed ranges must coalesce");
    cr_assert_eq(whole, x < y ? x : y);
    void *big = alloc(b, P, 300u << 20, NULL); /* bigger than an arena: its own */
    cr_assert_eq(observe(b, P).pool_reserved_bytes, reserved + (300u << 20));
    memset(big, 0x5a, 300u << 20); /* really host-accessible */
    b->ops->free(b, P, whole, 256u << 20, NULL);
    b->ops->free(b, P, big, 300u << 20, NULL);
    cr_assert_eq(observe(b, P).pool_used_bytes, 0);
    fhr_backend_destroy(b);
}

/* host -> cuda (staged) -> pinned -> cuda (d2d) -> host (staged) -> host -> pinned -> host */
static void all_directions(size_t n)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location H = fhr_loc_host(), P = fhr_loc_pinned(), D = fhr_loc_cuda(0);
    fhr_stream *s = stream(b, D);
    unsigned char *src = malloc(n), *h1 = calloc(1, n), *h2 = calloc(1, n), *h3 = calloc(1, n);
    cr_assert(src && h1 && h2 && h3);
    fill_pattern(src, n, (uint32_t)n);
    void *d1 = alloc(b, D, n, s), *d2 = alloc(b, D, n, s), *p1 = alloc(b, P, n, s),
         *p2 = alloc(b, P, n, s);
    copy(b, d1, D, src, H, n, s);
    copy(b, p1, P, d1, D, n, s);
    copy(b, d2, D, p1, P, n, s);
    copy(b, h1, H, d2, D, n, s);
    copy(b, h2, H, h1, H, n, s);
    copy(b, p2, P, h2, H, n, s);
    copy(b, h3, H, p2, P, n, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(memcmp(src, p1, n), 0, "device -> pinned, %zu bytes", n);
    cr_assert_eq(memcmp(src, h1, n), 0, "staged device -> host, %zu bytes", n);
    cr_assert_eq(memcmp(src, h3, n), 0, "host copies, %zu bytes", n);
    b->ops->free(b, D, d1, n, s);
    b->ops->free(b, D, d2, n, s);
    b->ops->free(b, P, p1, n, s);
    b->ops->free(b, P, p2, n, s);
    fhr_stream_destroy(b, s);
    cr_assert_eq(observe(b, P).pool_used_bytes, 0);
    fhr_backend_destroy(b);
    free(src), free(h1), free(h2), free(h3);
}

Test(cuda_copy, one_byte) { all_directions(1); }
Test(cuda_copy, bytes_4097) { all_directions(4097); }
/* the small-copy rule's paths: towards the device CUDA's own call (100 and 300 KiB) and
 * parallel chunks (400 KiB), from it the caller in one chunk and in two */
Test(cuda_copy, small_rule_100k) { all_directions((100u << 10) + 3); }
Test(cuda_copy, small_rule_300k) { all_directions((300u << 10) + 5); }
Test(cuda_copy, small_rule_400k) { all_directions((400u << 10) + 7); }
Test(cuda_copy, three_mib_plus_7) { all_directions((3u << 20) + 7); }
Test(cuda_copy, spans_three_chunks) { all_directions((40u << 20) + 13); }
Test(cuda_copy, reuses_every_staging_buffer) { all_directions((100u << 20) + 1); }

/* A fixed small chunk (Criterion forks each test, so the environment stays its own):
 * sizes around a chunk and many trips through every slot. */
static void small_chunks(const char *threads, size_t n)
{
    setenv("FHEPLAN_COPY_THREADS", threads, 1);
    setenv("FHEPLAN_STAGING_CHUNK", "4K", 1);
    setenv("FHEPLAN_STAGING_DIRECT", "0", 1); /* these sizes would take CUDA's own path */
    all_directions(n);
}

Test(cuda_copy, fixed_chunk_minus_one) { small_chunks("3", 4095); }
Test(cuda_copy, fixed_chunk_plus_one) { small_chunks("3", 4097); }
Test(cuda_copy, fixed_chunk_many_trips) { small_chunks("5", (1u << 20) + 3); }
Test(cuda_copy, one_thread_many_trips) { small_chunks("1", (256u << 10) + 1); }

Test(cuda, bad_staging_environment_is_refused_by_name)
{
    setenv("FHEPLAN_STAGING_CHUNK", "3K", 1);
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = fhr_backend_cuda_create(&b, &err);
    if (st == FHR_E_UNSUPPORTED && !strstr(err.message, "FHEPLAN"))
        cr_skip("%s", err.message);
    cr_assert_eq(st, FHR_E_INVALID, "%s", err.message);
    cr_assert(strstr(err.message, "FHEPLAN_STAGING_CHUNK") != NULL);
    cr_assert_null(b);
}

typedef struct later {
    unsigned char *p;
    size_t n;
} later;

static void fill_later(void *arg)
{
    later *l = arg;
    fill_pattern(l->p, l->n, 99);
}

/* A pageable copy towards the device reads its source only after the stream's earlier
 * work, here a 20 ms kernel and then a host function that writes that source, and is
 * done with the source when it returns (the source is scribbled over at once), on every
 * path: the caller's (60 KiB), CUDA's own (200 KiB, and 40 KiB forced, CUDA's path for
 * the smallest copies), parallel chunks (5 MiB) and the pipeline (9 MiB). */
static void waits_for_earlier_work(size_t n)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location H = fhr_loc_host(), D = fhr_loc_cuda(0);
    fhr_stream *s = stream(b, D);
    unsigned char *src = calloc(1, n), *back = calloc(1, n), *want = malloc(n);
    fill_pattern(want, n, 99);
    void *d = alloc(b, D, n, s);
    later l = {src, n};
    cr_assert_eq(fhk_spin(s, 20000000, NULL), FHR_OK);
    cr_assert_eq(fhr_launch_host(b, s, fill_later, &l, NULL), FHR_OK);
    copy(b, d, D, src, H, n, s); /* must read src only after fill_later ran */
    memset(src, 0xab, n);        /* and be done with it on return */
    copy(b, back, H, d, D, n, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    size_t early = 0, late = 0, wrong = 0; /* bytes from before fill_later, or after return */
    for (size_t i = 0; i < n; i++)
        if (back[i] != want[i])
            back[i] == 0 ? early++ : back[i] == 0xab ? late++ : wrong++;
    cr_assert_eq(early + late + wrong, 0,
                 "%zu bytes: %zu read before the stream's earlier work, %zu after the call "
                 "returned, %zu otherwise wrong", n, early, late, wrong);
    b->ops->free(b, D, d, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    free(src), free(back), free(want);
}

Test(cuda_copy, staged_copy_waits_for_earlier_stream_work) { waits_for_earlier_work(5u << 20); }
Test(cuda_copy, caller_copy_waits_for_earlier_stream_work) { waits_for_earlier_work(60u << 10); }
Test(cuda_copy, direct_copy_waits_for_earlier_stream_work) { waits_for_earlier_work(200u << 10); }
Test(cuda_copy, direct_small_copy_waits_for_earlier_stream_work)
{
    setenv("FHEPLAN_STAGING_SMALL", "direct", 1);
    waits_for_earlier_work(40u << 10);
}
Test(cuda_copy, pipeline_copy_waits_for_earlier_stream_work) { waits_for_earlier_work(9u << 20); }

Test(cuda_copy, peer_copy_between_devices)
{
    fhr_backend *b = cuda_or_skip();
    if (b->ops->device_count(b) < 2) {
        fhr_backend_destroy(b);
        cr_skip("needs two CUDA devices");
    }
    fhr_location H = fhr_loc_host(), D0 = fhr_loc_cuda(0), D1 = fhr_loc_cuda(1);
    fhr_stream *s = stream(b, D1);
    size_t n = (33u << 20) + 5;
    unsigned char *src = malloc(n), *back = calloc(1, n);
    fill_pattern(src, n, 7);
    void *a = alloc(b, D0, n, s), *c = alloc(b, D1, n, s);
    copy(b, a, D0, src, H, n, s);
    copy(b, c, D1, a, D0, n, s);
    copy(b, back, H, c, D1, n, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(memcmp(src, back, n), 0);
    b->ops->free(b, D0, a, n, s);
    b->ops->free(b, D1, c, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    free(src), free(back);
}

Test(cuda_events, pending_complete_and_rerecord)
{
    fhr_backend *b = cuda_or_skip();
    fhr_stream *slow = stream(b, fhr_loc_cuda(0)), *idle = stream(b, fhr_loc_cuda(0)),
               *w = stream(b, fhr_loc_cuda(0));
    fhr_event *e = NULL, *after = NULL;
    cr_assert_eq(b->ops->event_create(b, &e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create(b, &after, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1, "never recorded reads complete");
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, slow, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e, slow, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, w, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, after, w, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(b->ops->event_query(b, e), 0);
    cr_assert_eq(b->ops->event_query(b, after), 0, "w must wait for slow's gate");

    cr_assert_eq(b->ops->event_record(b, e, idle, NULL), FHR_OK); /* replaces the capture */
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_eq(b->ops->event_query(b, after), 0, "an earlier wait keeps its capture");

    gate_open(&g);
    cr_assert_eq(b->ops->event_sync(b, after, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, after), 1);
    b->ops->event_destroy(b, e);
    b->ops->event_destroy(b, after);
    fhr_stream_destroy(b, slow);
    fhr_stream_destroy(b, idle);
    fhr_stream_destroy(b, w);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(cuda_events, event_recorded_on_a_host_queue)
{
    fhr_backend *b = cuda_or_skip();
    fhr_stream *h = stream(b, fhr_loc_host());
    fhr_event *e = NULL;
    cr_assert_eq(b->ops->event_create(b, &e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e, h, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_neq(b->ops->stream_id(b, h), 0);
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, h);
    fhr_backend_destroy(b);
}

Test(cuda_memory, pinned_free_is_stream_ordered)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location P = fhr_loc_pinned();
    fhr_stream *s = stream(b, fhr_loc_cuda(0));
    gate g;
    gate_init(&g);
    void *p = alloc(b, P, 4096, s);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    b->ops->free(b, P, p, 4096, s);
    gate_await_entered(&g, 1);
    cr_assert_eq(observe(b, P).pool_used_bytes, 4096, "freed before earlier work finished");
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(observe(b, P).pool_used_bytes, 0);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    gate_fini(&g);
}

Test(cuda_memory, invalid_device_is_a_location_error)
{
    fhr_backend *b = cuda_or_skip();
    void *p = NULL;
    fhr_error err;
    fhr_error_init(&err);
    int n = b->ops->device_count(b);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(n), 8, NULL, &p, &err), FHR_E_LOCATION);
    fhr_backend_destroy(b);
}

typedef struct worker_arg {
    fhr_backend *b;
    int index, ok;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *a = arg;
    fhr_backend *b = a->b;
    fhr_location H = fhr_loc_host(), D = fhr_loc_cuda(0);
    size_t n = (20u << 20) + (size_t)a->index * 4099;
    unsigned char *src = malloc(n), *back = calloc(1, n);
    fhr_stream *s = NULL;
    void *d = NULL;
    a->ok = src && back && fhr_stream_create(b, D, &s, NULL) == FHR_OK &&
            b->ops->alloc(b, D, n, s, &d, NULL) == FHR_OK;
    for (int r = 0; a->ok && r < 3; r++) {
        fill_pattern(src, n, (uint32_t)(a->index * 10 + r));
        a->ok = b->ops->copy(b, d, D, src, H, n, s, NULL) == FHR_OK &&
                b->ops->copy(b, back, H, d, D, n, s, NULL) == FHR_OK &&
                fhr_stream_sync(b, s, NULL) == FHR_OK && memcmp(src, back, n) == 0;
    }
    if (d)
        b->ops->free(b, D, d, n, s);
    if (s)
        fhr_stream_destroy(b, s);
    free(src), free(back);
    return NULL;
}

Test(cuda_threads, concurrent_staged_copies)
{
    fhr_backend *b = cuda_or_skip();
    /* one copy's staging slots, counted in the pinned observation */
    fhr_location P = fhr_loc_pinned();
    uint64_t r0 = observe(b, P).pool_reserved_bytes;
    worker_arg one = {b, 0, 0};
    worker(&one);
    cr_assert(one.ok);
    uint64_t single = observe(b, P).pool_reserved_bytes - r0;
    cr_assert_gt(single, 0, "the staging slots are not in the pinned observation");
    pthread_t t[4];
    worker_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (worker_arg){b, i, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, worker, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert(a[i].ok, "worker %d", i);
    }
    /* copies of that size ran at once with slots each; idle, one copy's are kept */
    cr_assert_leq(observe(b, P).pool_reserved_bytes - r0, single,
                  "idle staging keeps the slots of more than one copy per device");
    fhr_backend_destroy(b);
}

/* A device free that fails (here: a pointer the pool never handed out) cannot return a
 * status; the next alloc reports it, once, instead of losing it. */
Test(cuda_memory, a_failed_device_free_is_reported_by_the_next_call)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location D = fhr_loc_cuda(0);
    fhr_stream *s = stream(b, D);
    static char not_device_memory[64];
    b->ops->free(b, D, not_device_memory, sizeof not_device_memory, s);
    void *p = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_expect_eq(b->ops->alloc(b, D, 4096, s, &p, &err), FHR_E_BACKEND, "the failed free was lost");
    cr_expect(strstr(err.message, "earlier free"), "%s", err.message);
    cr_assert_eq(b->ops->alloc(b, D, 4096, s, &p, &err), FHR_OK, "reported once: %s", err.message);
    b->ops->free(b, D, p, 4096, s);
    cr_assert_eq(fhr_stream_sync(b, s, &err), FHR_OK, "%s", err.message);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

/* Destroying the backend right after staged and host copies (their host functions use
 * the copy threads and the staging buffers) is clean, every time. */
Test(cuda_memory, destroy_right_after_staged_copies)
{
    size_t n = (40u << 20) + 13;
    char *src = malloc(n), *back = malloc(n);
    cr_assert(src && back);
    for (size_t i = 0; i < n; i++)
        src[i] = (char)(i * 7);
    for (int round = 0; round < 8; round++) {
        fhr_backend *b = cuda_or_skip();
        fhr_location D = fhr_loc_cuda(0), H = fhr_loc_host();
        fhr_stream *s = stream(b, D);
        void *d = alloc(b, D, n, s);
        copy(b, d, D, src, H, n, s);
        copy(b, back, H, d, D, n, s);
        b->ops->free(b, D, d, n, s);
        fhr_stream_destroy(b, s);
        fhr_backend_destroy(b);
        cr_assert_eq(memcmp(src, back, n), 0, "round %d", round);
    }
    free(src);
    free(back);
}
