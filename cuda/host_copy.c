/* cuda/host_copy.c — a streaming memcpy, the pinned pool's shape and the mapping of an
 * arena before it is page-locked; no CUDA. */
#include "cuda/host_copy.h"
#include "cuda/staging_pipeline.h"
#include "base/error.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#if defined(__x86_64__)
/* The body: n a multiple of 128, d 64-byte aligned. */
__attribute__((target("avx2"))) static void stream_avx2(char *d, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
        _mm256_stream_si256((__m256i *)(d + i), a);
        _mm256_stream_si256((__m256i *)(d + i + 32), b);
        _mm256_stream_si256((__m256i *)(d + i + 64), c);
        _mm256_stream_si256((__m256i *)(d + i + 96), e);
    }
}

static void stream_sse2(char *d, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
}
#endif

void copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
    char *d = dst;
    const char *s = src;
    if (n < 4096) { /* too short for streaming to pay */
        memcpy(d, s, n);
        return;
    }
    size_t head = (64 - ((uintptr_t)d & 63)) & 63; /* up to the first whole line */
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    size_t body = n & ~(size_t)127;
    if (__builtin_cpu_supports("avx2"))
        stream_avx2(d, s, body);
    else
        stream_sse2(d, s, body);
    _mm_sfence(); /* the streamed lines are visible before anyone is told the copy is done */
    memcpy(d + body, s + body, n - body);
#else
    memcpy(dst, src, n);
#endif
}

/* ---- the pinned pool's shape --------------------------------------------------------- */

static int flag(const char *v, int dflt, int *out)
{
    if (!v || !*v)
        *out = dflt;
    else if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
        *out = *v == '1';
    else
        return -1;
    return 0;
}

fhr_status pin_shape_parse(const char *hostalloc, const char *prefault, const char *hugepage,
                           const char *arena, pin_shape *out, fhr_error *err)
{
    pin_shape sh = {0, PIN_DEFAULT_PREFAULT, PIN_DEFAULT_HUGEPAGE, PIN_ARENA_DEFAULT,
                    PIN_DEFAULT_AHEAD};
    if (flag(hostalloc, 0, &sh.hostalloc))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_PINNED_HOSTALLOC: '%s' is not 0 or 1 (1 pins arenas with "
                        "cudaHostAlloc)",
                        hostalloc);
    if (flag(hugepage, PIN_DEFAULT_HUGEPAGE, &sh.hugepage))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_PINNED_HUGEPAGE: '%s' is not 0 or 1 (1 asks for transparent "
                        "huge pages)",
                        hugepage);
    if (prefault && *prefault) {
        if (strcmp(prefault, "none") == 0)
            sh.prefault = PIN_PREFAULT_NONE;
        else if (strcmp(prefault, "populate") == 0)
            sh.prefault = PIN_PREFAULT_POPULATE;
        else if (strcmp(prefault, "threads") == 0)
            sh.prefault = PIN_PREFAULT_THREADS;
        else
            return fhr_fail(err, FHR_E_INVALID,
                            "FHEPLAN_PINNED_PREFAULT: '%s' is not none, populate or threads",
                            prefault);
    }
    if (arena && *arena) {
        unsigned long long b = 0;
        if (staging_parse_bytes(arena, PIN_ARENA_MIN, PIN_ARENA_LIMIT, &b) || b % PIN_HUGE)
            return fhr_fail(err, FHR_E_INVALID,
                            "FHEPLAN_PINNED_ARENA: '%s' is not an arena size (a multiple of "
                            "2 MiB from 2M to 64G; suffix K, M or G)",
                            arena);
        sh.arena = (size_t)b;
    }
    *out = sh;
    return FHR_OK;
}

fhr_status pin_ahead_parse(const char *v, pin_shape *out, fhr_error *err)
{
    int a = 0;
    if (flag(v, out->ahead, &a))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_PINNED_AHEAD: '%s' is not 0 or 1 (1 pins the next arena "
                        "ahead)",
                        v);
    out->ahead = a;
    return FHR_OK;
}

size_t pin_arena_bytes(size_t nbytes, const pin_shape *sh)
{
    if (nbytes <= sh->arena / 2)
        return sh->arena;
    size_t unit = sh->hugepage ? PIN_HUGE : PIN_SMALL_PAGE;
    if (nbytes > SIZE_MAX - unit)
        return 0;
    return (nbytes + unit - 1) / unit * unit;
}

/* ---- mapping an arena ---------------------------------------------------------------- */

/* Faults [p, p + n) in for writing: MADV_POPULATE_WRITE, or a write per page where the
 * kernel lacks it (EINVAL). Any other failure (no memory) leaves the pages to
 * registration, which then fails cleanly rather than the process being killed on a
 * touch. The src argument is unused (the copy_fn shape). */
static void populate(void *p, const void *src, size_t n)
{
    (void)src;
    if (n == 0 || madvise(p, n, MADV_POPULATE_WRITE) == 0 || errno != EINVAL)
        return;
    volatile char *c = p;
    for (size_t i = 0; i < n; i += PIN_SMALL_PAGE)
        c[i] = 0;
}

void *pin_map(size_t len, const pin_shape *sh, copy_pool *cp)
{
    if (len == 0 || len > SIZE_MAX - PIN_HUGE)
        return NULL;
    /* over-map by a huge page and trim both ends, so that the arena starts on one */
    size_t over = len + PIN_HUGE;
    char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *base = (char *)(((uintptr_t)raw + PIN_HUGE - 1) & ~(uintptr_t)(PIN_HUGE - 1));
    if (base > raw)
        munmap(raw, (size_t)(base - raw));
    if (raw + over > base + len)
        munmap(base + len, (size_t)(raw + over - (base + len)));
#ifdef MADV_HUGEPAGE
    if (sh->hugepage)
        (void)madvise(base, len, MADV_HUGEPAGE); /* a hint: without THP it stays 4 KiB pages */
#endif
    if (sh->prefault == PIN_PREFAULT_POPULATE || (sh->prefault == PIN_PREFAULT_THREADS && !cp))
        populate(base, NULL, len);
    else if (sh->prefault == PIN_PREFAULT_THREADS)
        copy_pool_run(cp, populate, base, NULL, len, PIN_HUGE);
    return base;
}

void pin_unmap(void *base, size_t len)
{
    if (base)
        munmap(base, len);
}
