/* cuda/staging_pipeline.c — pageable staging without the device: its shape (from the
 * environment), one copy's chunk plan (threads by size, the ramp) and the pipeline order. */
#include "cuda/staging_pipeline.h"
#include "base/error.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int staging_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < 4096 ? n : 4096) : 1;
}

/* A whole decimal number, nothing else; -1 when v is not one or exceeds max. */
static long long whole(const char *v, const char **end, long long max)
{
    if (*v < '0' || *v > '9')
        return -1;
    errno = 0;
    char *e;
    unsigned long long x = strtoull(v, &e, 10);
    if (errno || x > (unsigned long long)max)
        return -1;
    *end = e;
    return (long long)x;
}

int staging_parse_bytes(const char *v, unsigned long long lo, unsigned long long hi,
                        unsigned long long *out)
{
    const char *e = v;
    long long x = whole(v, &e, (long long)hi);
    unsigned shift = 0;
    if (x >= 0 && *e) {
        shift = *e == 'K' || *e == 'k'   ? 10
                : *e == 'M' || *e == 'm' ? 20
                : *e == 'G' || *e == 'g' ? 30
                : *e == 'T' || *e == 't' ? 40
                                         : 99;
        e++;
        if (e[0] == 'i' && e[1] == 'B')
            e += 2;
    }
    unsigned long long bytes = x >= 0 && shift < 64 ? (unsigned long long)x << shift : 0;
    if (x < 0 || *e || shift >= 64 || (x > 0 && bytes >> shift != (unsigned long long)x) ||
        bytes < lo || bytes > hi)
        return -1;
    *out = bytes;
    return 0;
}

static fhr_status parse_chunk(const char *v, size_t *out, fhr_error *err)
{
    unsigned long long bytes = 0;
    if (staging_parse_bytes(v, STAGING_ALIGN, STAGING_CHUNK_LIMIT, &bytes) ||
        bytes % STAGING_ALIGN)
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_CHUNK: '%s' is not a chunk size (a multiple of 4 KiB "
                        "from 4K to 1G; suffix K, M or G)",
                        v);
    *out = (size_t)bytes;
    return FHR_OK;
}

fhr_status staging_direct_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    unsigned long long bytes = 0;
    if (staging_parse_bytes(v, 0, STAGING_DIRECT_LIMIT, &bytes))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_DIRECT: '%s' is not a size (bytes from 0 to 1T; "
                        "suffix K, M, G or T; 0 stages every pageable copy)",
                        v);
    sh->direct_below = (size_t)bytes;
    return FHR_OK;
}

int staging_direct(size_t n, const staging_shape *sh) { return n < sh->direct_below; }

int staging_small(size_t n, const staging_shape *sh, int to_device)
{
    if (!staging_direct(n, sh))
        return -1;
    int k = sh->small[to_device ? 1 : 0];
    if (k != STAGING_SMALL_AUTO)
        return k;
    if (!to_device)
        return n < STAGING_AUTO_CALLER_BELOW_FROM ? STAGING_SMALL_CALLER : STAGING_SMALL_PARALLEL;
    return n <= STAGING_AUTO_CALLER_MAX_TO    ? STAGING_SMALL_CALLER
           : n < STAGING_AUTO_DIRECT_BELOW    ? STAGING_SMALL_DIRECT
                                              : STAGING_SMALL_PARALLEL;
}

int staging_stream_copy(size_t n, const staging_shape *sh, int to_device)
{
    if (sh->stream_copy != STAGING_MEMCPY_AUTO)
        return sh->stream_copy == STAGING_MEMCPY_STREAM;
    return to_device && n < STAGING_AUTO_STREAM_BELOW;
}

/* The index in names[0..count) of the word w[0..len), or -1. */
static int name_index(const char *w, size_t len, const char *const *names, int count)
{
    for (int k = 0; k < count; k++)
        if (strlen(names[k]) == len && strncmp(w, names[k], len) == 0)
            return k;
    return -1;
}

static int small_kind(const char *w, size_t len)
{
    /* in the order of STAGING_SMALL_* */
    static const char *const names[] = {"direct", "caller", "parallel", "auto"};
    return name_index(w, len, names, 4);
}

fhr_status staging_small_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    const char *comma = strchr(v, ',');
    int to = small_kind(v, comma ? (size_t)(comma - v) : strlen(v));
    int from = comma ? small_kind(comma + 1, strlen(comma + 1)) : to;
    if (to < 0 || from < 0)
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_SMALL: '%s' is not a small-copy path (auto, direct, "
                        "caller or parallel; or two of them, towards the device first: "
                        "parallel,caller)",
                        v);
    sh->small[1] = to;
    sh->small[0] = from;
    return FHR_OK;
}

/* v, all of it, a whole number from lo to hi: 1 and *out, else 0. */
static int whole_in(const char *v, long long lo, long long hi, long long *out)
{
    const char *e = v;
    long long x = whole(v, &e, hi);
    if (x < lo || *e)
        return 0;
    *out = x;
    return 1;
}

fhr_status staging_spin_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    long long us;
    if (!whole_in(v, 0, STAGING_SPIN_LIMIT_US, &us))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_COPY_SPIN: '%s' is not a spin time (whole microseconds, 0 to %d)",
                        v, STAGING_SPIN_LIMIT_US);
    sh->spin_us = (long)us;
    return FHR_OK;
}

fhr_status staging_fill_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    static const char *const kinds[] = {"whole", "split"};
    int k = name_index(v, strlen(v), kinds, 2);
    if (k < 0)
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_FILL: '%s' is not a fill kind (split or whole)", v);
    sh->split_fill = k;
    return FHR_OK;
}

fhr_status staging_depth_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    long long d;
    if (!whole_in(v, 1, STAGING_DEPTH_LIMIT, &d))
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_DEPTH: '%s' is not a DMA depth (1 to %d)", v,
                        STAGING_DEPTH_LIMIT);
    sh->depth = (int)d;
    return FHR_OK;
}

fhr_status staging_memcpy_parse(const char *v, staging_shape *sh, fhr_error *err)
{
    if (!v || !*v)
        return FHR_OK;
    static const char *const kinds[] = {"libc", "stream", "auto"}; /* STAGING_MEMCPY_* */
    int k = name_index(v, strlen(v), kinds, 3);
    if (k < 0)
        return fhr_fail(err, FHR_E_INVALID,
                        "FHEPLAN_STAGING_MEMCPY: '%s' is not a copy kind (auto, libc or stream)",
                        v);
    sh->stream_copy = k;
    return FHR_OK;
}

fhr_status staging_shape_parse(const char *threads, const char *chunk, int cores,
                               staging_shape *out, fhr_error *err)
{
    staging_shape sh = {cores < 1 ? 1 : cores,
                        STAGING_MIN_CHUNK,
                        STAGING_MAX_CHUNK,
                        1,
                        STAGING_DIRECT_BELOW,
                        STAGING_DEFAULT_STREAM,
                        STAGING_DEFAULT_DEPTH,
                        {STAGING_DEFAULT_SMALL_FROM, STAGING_DEFAULT_SMALL_TO},
                        STAGING_DEFAULT_SPIN_US,
                        STAGING_DEFAULT_SPLIT};
    if (sh.threads > STAGING_DEFAULT_MAX_THREADS)
        sh.threads = STAGING_DEFAULT_MAX_THREADS;
    if (threads && *threads) {
        const char *e = threads;
        long long t = whole(threads, &e, STAGING_THREADS_LIMIT);
        if (t < 1 || *e)
            return fhr_fail(err, FHR_E_INVALID,
                            "FHEPLAN_COPY_THREADS: '%s' is not a thread count (1 to %d)",
                            threads, STAGING_THREADS_LIMIT);
        sh.threads = (int)t;
        sh.fixed_threads = 1;
    }
    if (chunk && *chunk) {
        size_t c = 0;
        fhr_status st = parse_chunk(chunk, &c, err);
        if (st)
            return st;
        sh.min_chunk = sh.max_chunk = c;
    }
    *out = sh;
    return FHR_OK;
}

/* The chunks of n bytes: with `ramp_ok` and start < chunk, a ramp of start, 2 start, ...
 * while below chunk, then chunks of `chunk`. */
static void tiles(size_t n, size_t chunk, int ramp_ok, size_t start, size_t *first_out,
                  size_t *ramp_out, size_t *chunks_out)
{
    size_t first = chunk, ramp = 0, ramp_bytes = 0;
    if (ramp_ok && start < chunk) {
        first = start;
        while ((first << ramp) < chunk)
            ramp++;
        ramp_bytes = first * (((size_t)1 << ramp) - 1);
    }
    size_t chunks;
    if (n <= ramp_bytes) { /* ends inside the ramp: the chunk holding byte n - 1 */
        chunks = 0;
        while (first * (((size_t)1 << chunks) - 1) < n)
            chunks++;
        ramp = chunks;
    } else {
        size_t rest = n - ramp_bytes;
        chunks = ramp + rest / chunk + (rest % chunk != 0);
    }
    *first_out = first;
    *ramp_out = ramp;
    *chunks_out = chunks;
}

void staging_plan_make(size_t n, const staging_shape *sh, int to_device, staging_plan *p)
{
    size_t pool = (size_t)(sh->threads < 1 ? 1 : sh->threads), t = pool;
    if (!sh->fixed_threads) { /* floor(log2(n / unit)), in 1..pool */
        size_t lg = 0;
        for (size_t u = n / STAGING_THREAD_UNIT; u > 1; u >>= 1)
            lg++;
        t = lg < 1 ? 1 : lg < pool ? lg : pool;
    }
    size_t want = n / (2 * t) + (n % (2 * t) != 0);
    want = (want + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
    size_t chunk = want < sh->min_chunk ? sh->min_chunk : want;
    if (chunk > sh->max_chunk)
        chunk = sh->max_chunk;
    /* the ramp: first, 2 first, ... while below the steady chunk, for a copy of more
     * than one chunk whose chunk follows its size */
    size_t first, ramp, chunks;
    tiles(n, chunk, sh->min_chunk < sh->max_chunk && n > chunk, STAGING_FIRST_CHUNK, &first,
          &ramp, &chunks);
    size_t depth = sh->depth < 1 ? 1 : (size_t)sh->depth;
    size_t slots = t + 1 + depth < chunks ? t + 1 + depth : chunks;
    size_t lag = to_device ? depth : t;
    if (lag > slots - 1)
        lag = slots - 1;
    int split = sh->split_fill != 0;
    *p = (staging_plan){.n = n, .chunk = chunk, .first = first, .ramp = ramp, .chunks = chunks,
                        .threads = (int)t, .slots = (int)slots, .depth = (int)depth,
                        .lag = (int)lag, .inline_host = chunks == 1,
                        .own = split ? SIZE_MAX : to_device ? 0 : chunks - 1, .split = split};
}

void staging_small_plan_make(size_t n, const staging_shape *sh, staging_plan *p)
{
    size_t chunk = STAGING_SMALL_CHUNK < sh->max_chunk ? STAGING_SMALL_CHUNK : sh->max_chunk;
    size_t first, ramp, chunks;
    /* a fixed chunk (FHEPLAN_STAGING_CHUNK) is every chunk's size, as in the pipeline */
    tiles(n, chunk, sh->min_chunk < sh->max_chunk && n > STAGING_SMALL_FIRST_CHUNK,
          STAGING_SMALL_FIRST_CHUNK, &first, &ramp, &chunks);
    size_t slots = chunks < STAGING_SMALL_SLOTS ? chunks : STAGING_SMALL_SLOTS;
    *p = (staging_plan){.n = n, .chunk = chunk, .first = first, .ramp = ramp, .chunks = chunks,
                        .threads = 0, .slots = (int)slots, .depth = (int)slots - 1,
                        .lag = (int)slots - 1, .inline_host = 1, .own = SIZE_MAX,
                        .caller_all = 1};
}

void staging_parallel_plan_make(size_t n, const staging_shape *sh, int to_device,
                                staging_plan *p)
{
    size_t half = n / 2 + (n % 2 != 0);
    size_t chunk = (half + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
    if (chunk < STAGING_PARALLEL_MIN_CHUNK)
        chunk = STAGING_PARALLEL_MIN_CHUNK;
    if (chunk > STAGING_PARALLEL_CHUNK)
        chunk = STAGING_PARALLEL_CHUNK;
    if (chunk > sh->max_chunk)
        chunk = sh->max_chunk;
    staging_shape fixed = *sh;
    fixed.min_chunk = fixed.max_chunk = chunk; /* no ramp */
    fixed.fixed_threads = 1;
    fixed.split_fill = 1;
    staging_plan_make(n, &fixed, to_device, p);
}

void staging_plan_for(int path, size_t n, const staging_shape *sh, int to_device,
                      staging_plan *p)
{
    if (path == STAGING_SMALL_CALLER)
        staging_small_plan_make(n, sh, p);
    else if (path == STAGING_SMALL_PARALLEL)
        staging_parallel_plan_make(n, sh, to_device, p);
    else
        staging_plan_make(n, sh, to_device, p);
}

size_t staging_pieces(size_t len, int parts, int *pieces)
{
    size_t k = (size_t)(parts < 1 ? 1 : parts);
    size_t per = len / k + (len % k != 0);
    per = (per + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
    if (per < STAGING_SPLIT_MIN_PIECE)
        per = STAGING_SPLIT_MIN_PIECE;
    *pieces = (int)(len / per + (len % per != 0));
    return per;
}

void staging_host_start(const staging_plan *p, copy_pool *cp, copy_job *job, copy_split *split,
                        size_t i, copy_fn fn, void *dst, const void *src, size_t len)
{
    if (p->caller_all || i == p->own) {
        fn(dst, src, len);
        job->pending = 0;
    } else if (p->split) {
        int pieces;
        size_t piece = staging_pieces(len, p->threads + 1, &pieces);
        copy_pool_submit_split(cp, split, fn, dst, src, len, piece);
    } else {
        copy_pool_submit_fn(cp, job, fn, dst, src, len);
    }
}

void staging_host_join(const staging_plan *p, copy_pool *cp, copy_job *job, copy_split *split)
{
    if (p->caller_all)
        return;
    if (!p->split)
        copy_pool_wait(cp, job);
    else if (split)
        copy_pool_wait_split(cp, split);
}

void staging_chunk(const staging_plan *p, size_t i, size_t *off, size_t *len)
{
    size_t l;
    if (i < p->ramp) {
        *off = p->first * (((size_t)1 << i) - 1);
        l = p->first << i;
    } else {
        *off = p->first * (((size_t)1 << p->ramp) - 1) + (i - p->ramp) * p->chunk;
        l = p->chunk;
    }
    *len = p->n - *off < l ? p->n - *off : l;
}

/* One run's stages started and not yet waited for: per slot, the chunk of its open first
 * (a) and second (b) stage, or SIZE_MAX. A slot has at most one open stage. */
typedef struct stage_track {
    const staging_ops *ops;
    void *ctx;
    size_t open[2][STAGING_MAX_SLOTS];
} stage_track;

static fhr_status start(stage_track *pp, int b, size_t i, int s, fhr_error *err)
{
    fhr_status st = b ? pp->ops->start_b(pp->ctx, i, s, err)
                      : pp->ops->start_a(pp->ctx, i, s, err);
    if (!st)
        pp->open[b][s] = i;
    return st;
}

static fhr_status finish(stage_track *pp, int b, size_t i, int s, fhr_error *err)
{
    pp->open[b][s] = SIZE_MAX; /* a wait that fails is not tried again */
    return b ? pp->ops->wait_b(pp->ctx, i, s, err) : pp->ops->wait_a(pp->ctx, i, s, err);
}

/* After a failure: finishes every stage started and not yet finished (their own errors
 * ignored), then the host tasks. A failed copy returns only then: no queued chunk may read
 * or write the caller's buffers once the caller has its error. */
static void drain_started(stage_track *pp, size_t slots)
{
    for (size_t s = 0; s < slots; s++)
        for (int b = 0; b < 2; b++)
            if (pp->open[b][s] != SIZE_MAX)
                (void)finish(pp, b, pp->open[b][s], (int)s, NULL);
    pp->ops->quiesce(pp->ctx);
}

fhr_status staging_run(const staging_plan *p, int wait_tail, const staging_ops *ops, void *ctx,
                       fhr_error *err)
{
    size_t nch = p->chunks, slots = (size_t)p->slots, lag = (size_t)p->lag;
    stage_track pp = {.ops = ops, .ctx = ctx};
    for (size_t s = 0; s < slots; s++)
        pp.open[0][s] = pp.open[1][s] = SIZE_MAX;
    fhr_status st = FHR_OK;
    for (size_t i = 0; i < slots && i < nch && !st; i++)
        if (i != p->own)
            st = start(&pp, 0, i, (int)i, err);
    if (!st && p->own < slots && p->own < nch) /* the caller's own, once the threads have theirs */
        st = start(&pp, 0, p->own, (int)p->own, err);
    for (size_t i = 0; i < nch && !st; i++) {
        int s = (int)(i % slots);
        st = finish(&pp, 0, i, s, err);
        if (!st)
            st = start(&pp, 1, i, s, err);
        /* recycle the slot of chunk j = i - lag for chunk j + slots, if there is one */
        if (!st && i >= lag && i - lag + slots < nch) {
            size_t j = i - lag;
            st = finish(&pp, 1, j, (int)(j % slots), err);
            if (!st)
                st = start(&pp, 0, j + slots, (int)(j % slots), err);
        }
    }
    /* the chunks whose slots were never recycled */
    for (size_t j = nch > slots ? nch - slots : 0; wait_tail && j < nch && !st; j++)
        st = finish(&pp, 1, j, (int)(j % slots), err);
    if (st)
        drain_started(&pp, slots);
    return st;
}

fhr_status staging_small_run(const staging_plan *p, int to_device, const staging_ops *ops,
                             void *ctx, fhr_error *err)
{
    size_t nch = p->chunks, slots = (size_t)p->slots;
    stage_track pp = {.ops = ops, .ctx = ctx};
    for (size_t s = 0; s < slots; s++)
        pp.open[0][s] = pp.open[1][s] = SIZE_MAX;
    fhr_status st = FHR_OK;
    if (to_device) {
        for (size_t i = 0; i < nch && !st; i++) {
            int s = (int)(i % slots);
            if (i >= slots) /* the slot's last DMA, before its fill */
                st = finish(&pp, 1, i - slots, s, err);
            if (!st)
                st = start(&pp, 0, i, s, err);
            if (!st)
                st = finish(&pp, 0, i, s, err);
            if (!st)
                st = start(&pp, 1, i, s, err);
        }
    } else {
        size_t ahead = slots > 1 ? slots - 1 : 1;
        for (size_t i = 0; i < ahead && i < nch && !st; i++)
            st = start(&pp, 0, i, (int)i, err);
        for (size_t i = 0; i < nch && !st; i++) {
            int s = (int)(i % slots);
            st = finish(&pp, 0, i, s, err);
            /* the next DMA into the slot drained last, before this chunk's drain */
            if (!st && i + ahead < nch)
                st = start(&pp, 0, i + ahead, (int)((i + ahead) % slots), err);
            if (!st)
                st = start(&pp, 1, i, s, err);
            if (!st)
                st = finish(&pp, 1, i, s, err);
        }
    }
    if (st)
        drain_started(&pp, slots);
    return st;
}
