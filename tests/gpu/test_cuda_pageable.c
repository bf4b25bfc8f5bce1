/* tests/gpu/test_cuda_pageable.c — pageable copies through both paths (CUDA's own below
 * FHEPLAN_STAGING_DIRECT, the staging pipeline from it), bit-exact at odd sizes, and
 * pinned arenas page-locked by registration (or cudaHostAlloc) released cleanly. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/backend.h"
#include "cuda/host_copy.h"

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (unsigned char)(x >> 24);
    }
}

static void ok(fhr_status st, const fhr_error *err) { cr_assert_eq(st, FHR_OK, "%s", err->message); }

/* host -> cuda -> host with the path chosen by `direct` ("0": always staged; "1T": always
 * CUDA's own), into a destination whose every byte is first poisoned. */
static void round_trip(const char *direct, size_t n)
{
    setenv("FHEPLAN_STAGING_DIRECT", direct, 1);
    fhr_backend *b = cuda_or_skip();
    fhr_error err;
    fhr_error_init(&err);
    fhr_stream *s = NULL;
    ok(fhr_stream_create(b, fhr_loc_cuda(0), &s, &err), &err);
    unsigned char *src = malloc(n), *back = malloc(n);
    cr_assert(src && back);
    fill(src, n, (uint32_t)n);
    memset(back, 0xa5, n);
    void *d = NULL;
    ok(b->ops->alloc(b, fhr_loc_cuda(0), n, s, &d, &err), &err);
    ok(b->ops->copy(b, d, fhr_loc_cuda(0), src, fhr_loc_host(), n, s, &err), &err);
    ok(b->ops->copy(b, back, fhr_loc_host(), d, fhr_loc_cuda(0), n, s, &err), &err);
    ok(fhr_stream_sync(b, s, &err), &err);
    cr_assert_eq(memcmp(src, back, n), 0, "%zu bytes, FHEPLAN_STAGING_DIRECT=%s", n, direct);
    b->ops->free(b, fhr_loc_cuda(0), d, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    free(src), free(back);
}

static void both_paths(size_t n)
{
    round_trip("0", n);
    round_trip("1T", n);
}

Test(cuda_pageable, one_byte) { both_paths(1); }
Test(cuda_pageable, page_minus_one) { both_paths(4095); }
Test(cuda_pageable, odd_below_the_default_threshold) { both_paths((1u << 20) + 4093); }
Test(cuda_pageable, odd_at_the_default_threshold) { both_paths((8u << 20) - 1); }
Test(cuda_pageable, odd_above_the_default_threshold) { both_paths((8u << 20) + 1); }
Test(cuda_pageable, odd_large) { both_paths((67u << 20) + 4099); }
Test(cuda_pageable, default_rule) { round_trip("", (5u << 20) + 3); }

Test(cuda_pageable, bad_direct_environment_is_refused_by_name)
{
    setenv("FHEPLAN_STAGING_DIRECT", "4KB", 1);
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = fhr_backend_cuda_create(&b, &err);
    if (st == FHR_E_UNSUPPORTED && !strstr(err.message, "FHEPLAN"))
        cr_skip("%s", err.message);
    cr_assert_eq(st, FHR_E_INVALID, "%s", err.message);
    cr_assert(strstr(err.message, "FHEPLAN_STAGING_DIRECT") != NULL);
    cr_assert_null(b);
}

/* Pinned arenas: page-locked (CUDA sees host memory), DMA-able, carved and coalesced, and
 * after the backend is destroyed no longer registered with CUDA. */
static void pinned_arenas(int hostalloc)
{
    if (hostalloc)
        setenv("FHEPLAN_PINNED_HOSTALLOC", "1", 1);
    fhr_backend *b = cuda_or_skip();
    fhr_error err;
    fhr_error_init(&err);
    fhr_location P = fhr_loc_pinned(), D = fhr_loc_cuda(0);
    fhr_stream *s = NULL;
    ok(fhr_stream_create(b, D, &s, &err), &err);
    size_t small = (3u << 20) + 5, big = (300u << 20) + 1;
    void *p = NULL, *q = NULL, *d = NULL;
    ok(b->ops->alloc(b, P, small, s, &p, &err), &err);
    ok(b->ops->alloc(b, P, big, s, &q, &err), &err);
    cr_assert_eq((uintptr_t)p % 256, 0);
    cr_assert_eq((uintptr_t)q % 256, 0);
    for (int i = 0; i < 2; i++) {
        struct cudaPointerAttributes a;
        cr_assert_eq(cudaPointerGetAttributes(&a, i ? q : p), cudaSuccess);
        cr_assert_eq(a.type, cudaMemoryTypeHost, "a pinned arena is page-locked host memory");
    }
    fhr_observation o;
    b->ops->observe(b, P, &o);
    pin_shape sh;
    cr_assert_eq(pin_shape_parse(getenv("FHEPLAN_PINNED_HOSTALLOC"),
                                 getenv("FHEPLAN_PINNED_PREFAULT"),
                                 getenv("FHEPLAN_PINNED_HUGEPAGE"), NULL, &sh, NULL),
                 FHR_OK);
    cr_assert_eq(o.pool_reserved_bytes, PIN_ARENA_DEFAULT + pin_arena_bytes(big, &sh));
    fill(p, small, 7);
    ok(b->ops->alloc(b, D, small, s, &d, &err), &err);
    ok(b->ops->copy(b, d, D, p, P, small, s, &err), &err);
    ok(b->ops->copy(b, (char *)q + 11, P, d, D, small, s, &err), &err);
    ok(fhr_stream_sync(b, s, &err), &err);
    cr_assert_eq(memcmp(p, (char *)q + 11, small), 0);
    b->ops->free(b, D, d, small, s);
    b->ops->free(b, P, p, small, s);
    b->ops->free(b, P, q, big, s);
    ok(fhr_stream_sync(b, s, &err), &err);
    b->ops->observe(b, P, &o);
    cr_assert_eq(o.pool_used_bytes, 0);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
    /* released: CUDA no longer knows the arena (unregistered and unmapped, or freed) */
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    cudaGetLastError();
    cr_assert(e != cudaSuccess || a.type == cudaMemoryTypeUnregistered,
              "the arena is still registered after destroy");
}

Test(cuda_pinned, registered_arenas_released_cleanly) { pinned_arenas(0); }
Test(cuda_pinned, hostalloc_arenas_released_cleanly) { pinned_arenas(1); }

/* Every way of mapping an arena before registration gives the same pinned pool. */
static void pinned_arenas_mapped(const char *prefault, const char *hugepage)
{
    setenv("FHEPLAN_PINNED_PREFAULT", prefault, 1);
    setenv("FHEPLAN_PINNED_HUGEPAGE", hugepage, 1);
    pinned_arenas(0);
}

Test(cuda_pinned, arenas_faulted_by_the_driver_4k) { pinned_arenas_mapped("none", "0"); }
Test(cuda_pinned, arenas_populated_huge) { pinned_arenas_mapped("populate", "1"); }
Test(cuda_pinned, arenas_faulted_by_threads_4k) { pinned_arenas_mapped("threads", "0"); }

/* FHEPLAN_PINNED_AHEAD=1: arenas pinned ahead by a thread are the ones handed out next;
 * one spare at most is counted beside them, and destroy waits for the thread. */
Test(cuda_pinned, arenas_pinned_ahead)
{
    setenv("FHEPLAN_PINNED_AHEAD", "1", 1);
    fhr_backend *b = cuda_or_skip();
    fhr_error err;
    fhr_error_init(&err);
    fhr_location P = fhr_loc_pinned(), D = fhr_loc_cuda(0);
    fhr_stream *s = NULL;
    ok(fhr_stream_create(b, D, &s, &err), &err);
    size_t n = (size_t)180 << 20;
    void *p[3], *d = NULL;
    ok(b->ops->alloc(b, D, n, s, &d, &err), &err);
    for (int i = 0; i < 3; i++) {
        ok(b->ops->alloc(b, P, n, s, &p[i], &err), &err);
        struct cudaPointerAttributes a;
        cr_assert_eq(cudaPointerGetAttributes(&a, p[i]), cudaSuccess);
        cr_assert_eq(a.type, cudaMemoryTypeHost, "arena %d is not page-locked", i);
        fill(p[i], n, (uint32_t)i);
    }
    ok(b->ops->copy(b, d, D, p[2], P, n, s, &err), &err);
    ok(b->ops->copy(b, p[0], P, d, D, n, s, &err), &err);
    ok(fhr_stream_sync(b, s, &err), &err);
    cr_assert_eq(memcmp(p[0], p[2], n), 0);
    fhr_observation o;
    b->ops->observe(b, P, &o);
    cr_assert_eq(o.pool_used_bytes, 3 * n);
    cr_assert(o.pool_reserved_bytes == 3 * n || o.pool_reserved_bytes == 4 * n,
              "reserved %llu: three arenas and at most one spare",
              (unsigned long long)o.pool_reserved_bytes);
    for (int i = 0; i < 3; i++)
        b->ops->free(b, P, p[i], n, s);
    b->ops->free(b, D, d, n, s);
    ok(fhr_stream_sync(b, s, &err), &err);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

/* Streaming stores and a deeper DMA queue move the same bytes, both ways. */
static void streamed(const char *depth, size_t n)
{
    setenv("FHEPLAN_STAGING_MEMCPY", "stream", 1);
    setenv("FHEPLAN_STAGING_DEPTH", depth, 1);
    round_trip("0", n);
}

Test(cuda_pageable, streamed_odd_large) { streamed("1", (67u << 20) + 4099); }
Test(cuda_pageable, streamed_deep_odd_large) { streamed("4", (67u << 20) + 4099); }
Test(cuda_pageable, streamed_deep_page_plus_one) { streamed("8", 4097); }
Test(cuda_pageable, deep_small_chunks)
{
    setenv("FHEPLAN_STAGING_DEPTH", "8", 1);
    setenv("FHEPLAN_STAGING_CHUNK", "4K", 1);
    round_trip("0", (1u << 20) + 3);
}

/* The calling thread stages copies below the threshold (FHEPLAN_STAGING_SMALL=caller):
 * 1 byte, odd sizes across the ramp, just below the threshold; the device-to-host copy
 * follows the host-to-device one on the same stream (ordered by the stager's event). */
static void caller_staged(size_t n)
{
    setenv("FHEPLAN_STAGING_SMALL", "caller", 1);
    round_trip("8M", n);
}

Test(cuda_pageable, caller_staged_one_byte) { caller_staged(1); }
Test(cuda_pageable, caller_staged_page_plus_one) { caller_staged(4097); }
Test(cuda_pageable, caller_staged_odd_ramp) { caller_staged((1u << 20) + 4093); }
Test(cuda_pageable, caller_staged_below_the_threshold) { caller_staged((8u << 20) - 1); }
Test(cuda_pageable, caller_staged_small_slots)
{
    setenv("FHEPLAN_STAGING_CHUNK", "4K", 1);
    caller_staged((1u << 20) + 3);
}

/* Parallel small copies (FHEPLAN_STAGING_SMALL=parallel), with and without spinning copy
 * threads (FHEPLAN_COPY_SPIN), and one path per direction: the same bytes, both ways. */
static void parallel_small(const char *spin, const char *paths, size_t n)
{
    setenv("FHEPLAN_STAGING_SMALL", paths, 1);
    setenv("FHEPLAN_COPY_SPIN", spin, 1);
    round_trip("8M", n);
    unsetenv("FHEPLAN_COPY_SPIN");
}

Test(cuda_pageable, parallel_one_byte) { parallel_small("0", "parallel", 1); }
Test(cuda_pageable, parallel_page_plus_one) { parallel_small("50", "parallel", 4097); }
Test(cuda_pageable, parallel_two_chunks) { parallel_small("0", "parallel", (1u << 20) + 4093); }
Test(cuda_pageable, parallel_spinning_below_the_threshold)
{
    parallel_small("200", "parallel", (8u << 20) - 1);
}
Test(cuda_pageable, parallel_towards_caller_from) { parallel_small("50", "parallel,caller", 777777); }
Test(cuda_pageable, parallel_small_slots)
{
    setenv("FHEPLAN_STAGING_CHUNK", "64K", 1);
    parallel_small("50", "direct,parallel", (1u << 20) + 3);
}

/* Split fills (FHEPLAN_STAGING_FILL=split) move the same bytes, both ways. */
static void split(const char *threads, size_t n)
{
    setenv("FHEPLAN_STAGING_FILL", "split", 1);
    setenv("FHEPLAN_COPY_THREADS", threads, 1);
    round_trip("0", n);
}

Test(cuda_pageable, split_odd_large) { split("8", (67u << 20) + 4099); }
Test(cuda_pageable, split_one_thread) { split("1", (9u << 20) + 5); }
Test(cuda_pageable, split_page_plus_one) { split("4", 4097); }

Test(cuda_pinned, bad_pinned_environment_is_refused_by_name)
{
    const char *names[] = {"FHEPLAN_PINNED_HOSTALLOC", "FHEPLAN_PINNED_PREFAULT",
                           "FHEPLAN_PINNED_HUGEPAGE", "FHEPLAN_PINNED_ARENA",
                           "FHEPLAN_STAGING_MEMCPY", "FHEPLAN_STAGING_DEPTH",
                           "FHEPLAN_PINNED_AHEAD",     "FHEPLAN_STAGING_SMALL",
                           "FHEPLAN_STAGING_FILL",     "FHEPLAN_COPY_SPIN"};
    const char *values[] = {"yes", "all", "on", "3M", "nt", "0", "2", "staged", "halves", "1.5"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        for (size_t j = 0; j < sizeof names / sizeof *names; j++)
            unsetenv(names[j]);
        setenv(names[i], values[i], 1);
        fhr_backend *b = NULL;
        fhr_error err;
        fhr_error_init(&err);
        fhr_status st = fhr_backend_cuda_create(&b, &err);
        if (st == FHR_E_UNSUPPORTED && !strstr(err.message, "FHEPLAN"))
            cr_skip("%s", err.message);
        cr_assert_eq(st, FHR_E_INVALID, "%s=%s: %s", names[i], values[i], err.message);
        cr_assert(strstr(err.message, names[i]) != NULL, "%s", err.message);
        cr_assert_null(b);
    }
}
