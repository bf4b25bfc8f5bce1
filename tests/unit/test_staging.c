/* tests/unit/test_staging.c — pageable staging without a GPU: the shape from the
 * environment, the chunk plan by size, the pipeline's order, and real copies through it
 * with the copy threads and the emulated device as the DMA engine. */
#include "fheplan/backend.h"
#include "base/error.h"
#include "cuda/copy_threads.h"
#include "cuda/host_copy.h"
#include "cuda/staging_emu.h"
#include "cuda/staging_pipeline.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* FHEPLAN_COPY_THREADS=threads (every copy keeps them busy), and FHEPLAN_STAGING_CHUNK
 * when fixed_chunk is not 0. */
static staging_shape shape(int threads, size_t fixed_chunk)
{
    staging_shape sh = {threads, STAGING_MIN_CHUNK, STAGING_MAX_CHUNK, 1, 0, 0, 1, {0, 0}, 0, 0};
    if (fixed_chunk)
        sh.min_chunk = sh.max_chunk = fixed_chunk;
    return sh;
}

/* The default: a pool of `threads`, each copy's thread count and chunks by its size. */
static staging_shape auto_shape(int threads)
{
    staging_shape sh = {threads, STAGING_MIN_CHUNK, STAGING_MAX_CHUNK, 0, 0, 0, 1, {0, 0}, 0, 0};
    return sh;
}

/* ---- shape ------------------------------------------------------------------------- */

Test(staging, shape_defaults_follow_the_cores)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 6, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.threads, 6);
    cr_assert_eq(STAGING_DEFAULT_MAX_THREADS, 8);
    cr_assert_eq(sh.fixed_threads, 1); /* every staged copy keeps them all busy */
    cr_assert_eq(sh.min_chunk, STAGING_MIN_CHUNK);
    cr_assert_eq(sh.max_chunk, STAGING_MAX_CHUNK);
    cr_assert_eq(staging_shape_parse("", "", 128, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.threads, STAGING_DEFAULT_MAX_THREADS);
    cr_assert_eq(staging_shape_parse(NULL, NULL, 0, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.threads, 1);
    cr_assert_geq(staging_cores(), 1);
}

Test(staging, shape_overrides)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse("64", "4K", 2, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.threads, 64);
    cr_assert_eq(sh.fixed_threads, 1);
    cr_assert_eq(sh.min_chunk, 4 * KiB);
    cr_assert_eq(sh.max_chunk, 4 * KiB);
    cr_assert_eq(staging_shape_parse("1", "64KiB", 2, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.threads, 1);
    cr_assert_eq(sh.max_chunk, 64 * KiB);
    cr_assert_eq(staging_shape_parse(NULL, "8192", 2, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.max_chunk, 8192);
    cr_assert_eq(staging_shape_parse(NULL, "16m", 2, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.max_chunk, 16 * MiB);
    cr_assert_eq(staging_shape_parse(NULL, "1G", 2, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.max_chunk, GiB);
}

Test(staging, shape_refuses_bad_values_by_name)
{
    const char *threads[] = {"0", "65", "-1", "4x", " 4", "1e1", "99999999999999999999"};
    const char *chunks[] = {"0", "4095", "3K", "2G", "1025M", "12X", "-4K", " 4K", "4K ",
                            "4KB", "4Ki", "K", "18446744073709551616"};
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++) {
        staging_shape sh = {-7, 0, 0, 0, 0, 0, 0, {0, 0}, 0, 0};
        fhr_error err;
        fhr_error_init(&err);
        cr_assert_eq(staging_shape_parse(threads[i], NULL, 4, &sh, &err), FHR_E_INVALID, "%s",
                     threads[i]);
        cr_assert(strstr(err.message, "FHEPLAN_COPY_THREADS") != NULL);
        cr_assert(strstr(err.message, threads[i]) != NULL);
        cr_assert_eq(sh.threads, -7); /* untouched */
    }
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        staging_shape sh = {-7, 0, 0, 0, 0, 0, 0, {0, 0}, 0, 0};
        fhr_error err;
        fhr_error_init(&err);
        cr_assert_eq(staging_shape_parse("4", chunks[i], 4, &sh, &err), FHR_E_INVALID, "%s",
                     chunks[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_CHUNK") != NULL);
        cr_assert_eq(sh.threads, -7);
    }
}

/* ---- plan -------------------------------------------------------------------------- */

/* Chunk i's expected length before clipping at n: the ramp's first << i, then chunk. */
static size_t nominal(const staging_plan *p, size_t i)
{
    return i < p->ramp ? p->first << i : p->chunk;
}

/* The chunks tile [0, n) exactly, in order, every byte once: each starts where the one
 * before ended, on a page, with its nominal length (the last one clipped at n); the ramp
 * doubles from `first` and stays below the steady chunk. Plans of more than 2^22 chunks
 * are checked at both ends. */
static void check_tiles(const staging_plan *p, size_t n)
{
    cr_assert_eq(p->n, n);
    cr_assert_eq(p->chunk % STAGING_ALIGN, 0);
    cr_assert_eq(p->first % STAGING_ALIGN, 0);
    cr_assert(p->chunks >= 1);
    cr_assert(p->ramp <= p->chunks);
    if (p->ramp) {
        cr_assert_eq(p->first, p->caller_all ? STAGING_SMALL_FIRST_CHUNK : STAGING_FIRST_CHUNK);
        cr_assert_lt(p->first << (p->ramp - 1), p->chunk);
    } else {
        cr_assert_eq(p->first, p->chunk);
    }
    size_t lo = p->chunks, hi = 0, end = 0, off, len;
    if (p->chunks > ((size_t)1 << 22)) { /* both ends only */
        lo = 64;
        hi = p->chunks - 64;
    }
    for (size_t i = 0; i < p->chunks; i++) {
        if (i == lo) {
            i = hi;
            staging_chunk(p, i, &off, &len);
            end = off;
        }
        staging_chunk(p, i, &off, &len);
        cr_assert_eq(off, end, "chunk %zu starts at %zu, the one before ended at %zu", i, off, end);
        cr_assert_eq(off % STAGING_ALIGN, 0, "chunk %zu", i);
        cr_assert(len >= 1);
        if (i + 1 < p->chunks)
            cr_assert_eq(len, nominal(p, i), "chunk %zu of %zu", i, p->chunks);
        else
            cr_assert(len <= nominal(p, i));
        end = off + len;
    }
    cr_assert_eq(end, n);
    cr_assert(p->caller_all ? p->threads == 0 : p->threads >= 1);
    size_t want_slots = (size_t)p->threads + 1 + (size_t)p->depth;
    cr_assert_eq((size_t)p->slots, p->chunks < want_slots ? p->chunks : want_slots);
    cr_assert(p->lag >= 0 && p->lag < p->slots);
    cr_assert_eq(p->inline_host, p->chunks == 1 || p->caller_all);
    if (p->split || p->caller_all)
        cr_assert_eq(p->own, SIZE_MAX); /* no chunk is the caller's alone */
    else
        cr_assert(p->own == 0 || p->own == p->chunks - 1);
}

Test(staging, plan_edges_with_a_fixed_chunk)
{
    staging_shape sh = shape(4, 64 * KiB);
    size_t c = 64 * KiB;
    size_t sizes[] = {1, 7, 4097, c - 1, c, c + 1, 2 * c - 1, 2 * c + 1, 6 * c, 6 * c + 1};
    size_t want[] = {1, 1, 1, 1, 1, 2, 2, 3, 6, 7};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        for (int dir = 0; dir < 2; dir++) {
            staging_plan p;
            staging_plan_make(sizes[k], &sh, dir, &p);
            check_tiles(&p, sizes[k]);
            cr_assert_eq(p.chunk, c);
            cr_assert_eq(p.ramp, 0); /* a fixed chunk: no ramp */
            cr_assert_eq(p.chunks, want[k], "n %zu", sizes[k]);
            cr_assert_eq(p.threads, 4);
            cr_assert_eq((size_t)p.slots, want[k] < 6 ? want[k] : 6);
            cr_assert_eq(p.own, dir ? 0 : want[k] - 1); /* the caller's: first in, last out */
        }
    }
}

Test(staging, plan_adapts_to_size_and_threads)
{
    staging_shape sh = shape(8, 0);
    staging_plan p;
    staging_plan_make(64 * KiB, &sh, 1, &p); /* small: one chunk, copied inline */
    check_tiles(&p, 64 * KiB);
    cr_assert_eq(p.chunks, 1);
    cr_assert_eq(p.inline_host, 1);
    cr_assert_eq(p.ramp, 0);
    staging_plan_make(STAGING_MIN_CHUNK, &sh, 1, &p); /* one chunk exactly: no ramp */
    check_tiles(&p, STAGING_MIN_CHUNK);
    cr_assert_eq(p.chunks, 1);
    staging_plan_make(1 * MiB, &sh, 1, &p); /* the smallest chunk after 64K, 128K */
    check_tiles(&p, MiB);
    cr_assert_eq(p.chunk, STAGING_MIN_CHUNK);
    cr_assert_eq(p.first, 64 * KiB);
    cr_assert_eq(p.ramp, 2);
    cr_assert_eq(p.chunks, 2 + 4); /* 192K of ramp, then 3 x 256K and 64K */
    staging_plan_make(16 * MiB, &sh, 1, &p); /* two chunks per thread after the ramp */
    check_tiles(&p, 16 * MiB);
    cr_assert_eq(p.chunk, MiB);
    cr_assert_eq(p.ramp, 4); /* 64K 128K 256K 512K */
    cr_assert_eq(p.chunks, 4 + 16);
    cr_assert_eq(p.threads, 8);
    cr_assert_eq(p.slots, 10);
    cr_assert_eq(p.lag, 1);
    cr_assert_eq(p.own, 0);
    staging_plan_make(16 * MiB, &sh, 0, &p);
    cr_assert_eq(p.lag, 8);
    cr_assert_eq(p.own, p.chunks - 1);
    staging_plan_make(GiB, &sh, 1, &p); /* large: the slot size caps the chunk */
    check_tiles(&p, GiB);
    cr_assert_eq(p.chunk, STAGING_MAX_CHUNK);
    cr_assert_eq(p.ramp, 7); /* 64K .. 4M */
    cr_assert_eq(p.chunks, 7 + GiB / STAGING_MAX_CHUNK);
    sh.threads = 1;
    staging_plan_make(1 * MiB + 1, &sh, 0, &p);
    check_tiles(&p, MiB + 1);
    cr_assert_eq(p.chunk, 516 * KiB); /* half of it, rounded up to a page */
    cr_assert_eq(p.ramp, 4);          /* 64K 128K 256K 512K (all below 516K), 64K + 1 */
    cr_assert_eq(p.chunks, 5);
    cr_assert_eq(p.slots, 3);
    cr_assert_eq(p.lag, 1);
    /* a copy that ends inside the ramp: 64K 128K 256K, the last one clipped */
    sh = shape(1, 0);
    sh.min_chunk = 260 * KiB;
    staging_plan_make(300 * KiB, &sh, 1, &p);
    check_tiles(&p, 300 * KiB);
    cr_assert_eq(p.chunk, 260 * KiB);
    cr_assert_eq(p.chunks, 3);
    cr_assert_eq(p.ramp, 3);
    size_t off, len;
    staging_chunk(&p, 2, &off, &len);
    cr_assert_eq(off, 192 * KiB);
    cr_assert_eq(len, 108 * KiB);
}

/* The default thread count: floor(log2(n / 1 MiB)), at least one, at most the pool's;
 * FHEPLAN_COPY_THREADS fixes it. */
Test(staging, plan_threads_follow_the_size)
{
    struct { size_t n; int pool, want; } c[] = {
        {1, 16, 1},           {64 * KiB, 16, 1},     {MiB, 16, 1},        {2 * MiB - 1, 16, 1},
        {2 * MiB, 16, 1},     {4 * MiB - 1, 16, 1},  {4 * MiB, 16, 2},    {8 * MiB, 16, 3},
        {16 * MiB, 16, 4},    {64 * MiB, 16, 6},     {256 * MiB, 16, 8},  {GiB, 16, 10},
        {64 * GiB, 16, 16},   {SIZE_MAX, 16, 16},    {GiB, 4, 4},         {64 * MiB, 1, 1},
        {GiB, 64, 10},        {(size_t)1 << 62, 64, 42},
    };
    for (size_t k = 0; k < sizeof c / sizeof *c; k++)
        for (int dir = 0; dir < 2; dir++) {
            staging_shape sh = auto_shape(c[k].pool);
            staging_plan p;
            staging_plan_make(c[k].n, &sh, dir, &p);
            check_tiles(&p, c[k].n);
            cr_assert_eq(p.threads, c[k].want, "n %zu pool %d: %d threads", c[k].n, c[k].pool,
                         p.threads);
            cr_assert_eq(p.lag, dir ? (p.slots > 1) : (p.threads < p.slots - 1 ? p.threads
                                                                              : p.slots - 1));
            sh.fixed_threads = 1; /* FHEPLAN_COPY_THREADS: the pool's, whatever the size */
            staging_plan_make(c[k].n, &sh, dir, &p);
            cr_assert_eq(p.threads, c[k].pool);
        }
    /* fewer threads, larger steady chunks: 4 MiB on 2 threads is 1 MiB chunks */
    staging_shape sh = auto_shape(16);
    staging_plan p;
    staging_plan_make(4 * MiB, &sh, 1, &p);
    cr_assert_eq(p.chunk, MiB);
    cr_assert_eq(p.slots, 4);
}

/* The geometric ramp at every size the bench runs: the first DMA waits for 64 KiB only,
 * each chunk doubles the one before up to the steady chunk, and a fixed chunk has none. */
Test(staging, plan_ramp_starts_small_and_doubles)
{
    for (size_t n = MiB; n <= 4 * GiB; n *= 2)
        for (int dir = 0; dir < 2; dir++) {
            staging_shape sh = auto_shape(16);
            staging_plan p;
            staging_plan_make(n + 4097, &sh, dir, &p);
            check_tiles(&p, n + 4097);
            size_t off, len, prev = 0;
            staging_chunk(&p, 0, &off, &len);
            cr_assert_eq(len, 64 * KiB, "n %zu", n);
            for (size_t i = 1; i + 1 < p.chunks; i++, prev = len) {
                staging_chunk(&p, i, &off, &len);
                if (i <= p.ramp)
                    cr_assert(len == 2 * (i == 1 ? 64 * KiB : prev) || len == p.chunk,
                              "n %zu chunk %zu: %zu", n, i, len);
                else
                    cr_assert_eq(len, p.chunk);
            }
            sh = shape(16, MiB); /* FHEPLAN_STAGING_CHUNK=1M: every chunk 1M */
            staging_plan_make(n + 4097, &sh, dir, &p);
            check_tiles(&p, n + 4097);
            cr_assert_eq(p.ramp, 0);
            cr_assert_eq(p.first, MiB);
        }
}

Test(staging, plan_multi_gib)
{
    staging_shape sh = shape(16, 0);
    staging_plan p;
    size_t n = 6 * GiB + 5;
    staging_plan_make(n, &sh, 1, &p);
    check_tiles(&p, n);
    cr_assert_eq(p.chunk, STAGING_MAX_CHUNK);
    cr_assert_eq(p.ramp, 7); /* 64K .. 4M: 8 MiB - 64 KiB */
    cr_assert_eq(p.chunks, 7 + 6 * GiB / STAGING_MAX_CHUNK);
    size_t off, len;
    staging_chunk(&p, p.chunks - 1, &off, &len);
    cr_assert_eq(off, 6 * GiB - 64 * KiB);
    cr_assert_eq(len, 64 * KiB + 5);
    sh = shape(16, 4 * KiB);
    staging_plan_make(n, &sh, 0, &p);
    check_tiles(&p, n);
    cr_assert_eq(p.chunks, 6 * GiB / (4 * KiB) + 1);
    staging_plan_make(SIZE_MAX, &sh, 1, &p); /* no overflow at the top */
    check_tiles(&p, SIZE_MAX);
}

/* ---- pipeline order (a recording mock) --------------------------------------------- */

enum { A_STARTED = 1, A_DONE = 2, B_STARTED = 4, B_DONE = 8 };

typedef struct mock {
    const staging_plan *p;
    unsigned char *state; /* per chunk */
    long ops, fail_at;
    int failed, quiesced, late_ops;
    int drained, bad_drain; /* waits after the failure; those for no open stage */
    size_t a_out, b_out, max_a_out, max_b_out;
    int bad;
    size_t bad_chunk;
    int to_device, threads;
    size_t starved; /* host waits that found fewer host stages in flight than threads */
    long own_at, others_at; /* the op of the first wave's own start, the last other one */
    char log[2048];         /* "A0 a0 B0 ..." (start a, wait a, start b, wait b) until full */
    size_t loglen;
} mock;

/* Appends one op to m's log, while there is room. */
static void log_op(mock *m, int set, size_t i)
{
    char c = set == A_STARTED ? 'A' : set == A_DONE ? 'a' : set == B_STARTED ? 'B' : 'b';
    size_t room = sizeof m->log - m->loglen;
    int w = snprintf(m->log + m->loglen, room, "%s%c%zu", m->loglen ? " " : "", c, i);
    if (w > 0 && (size_t)w < room)
        m->loglen += (size_t)w;
    else
        m->log[m->loglen] = 0;
}

/* At a wait for chunk i's host stage, every thread should have a chunk (or every
 * remaining chunk be in flight). */
static void check_busy(mock *m, size_t i, size_t out)
{
    size_t left = m->p->chunks - i, t = (size_t)m->p->threads;
    if (!m->failed && out < (left < t ? left : t))
        m->starved++;
}

/* need: the state chunk i must be in; set: what the op adds. After the failure only the
 * drain may call (waits for stages started and not yet waited for); a start is late. */
static fhr_status step(mock *m, size_t i, int slot, int need, int set, fhr_error *err)
{
    int wait = set == A_DONE || set == B_DONE;
    if (m->failed) {
        if (!wait) {
            m->late_ops++;
            return FHR_OK;
        }
        if (i >= m->p->chunks || (m->state[i] & (need | set)) != need)
            m->bad_drain++;
        else
            m->state[i] |= (unsigned char)set;
        m->drained++;
        return FHR_OK;
    }
    if (++m->ops == m->fail_at) {
        m->failed = 1;
        if (wait) /* a failed wait ends its stage: the drain does not wait again */
            m->state[i] |= (unsigned char)set;
        return fhr_fail(err, FHR_E_BACKEND, "injected failure %ld", m->ops);
    }
    if (i >= m->p->chunks || (size_t)slot != i % (size_t)m->p->slots ||
        (m->state[i] & (need | set)) != need) {
        if (!m->bad)
            m->bad_chunk = i;
        m->bad = 1;
    }
    m->state[i] |= (unsigned char)set;
    log_op(m, set, i);
    return FHR_OK;
}

static fhr_status m_start_a(void *ctx, size_t i, int slot, fhr_error *err)
{
    mock *m = ctx;
    size_t slots = (size_t)m->p->slots;
    /* the slot's previous chunk must be entirely finished */
    if (i >= slots && !(m->state[i - slots] & B_DONE) && !m->failed)
        m->bad = 1;
    fhr_status st = step(m, i, slot, 0, A_STARTED, err);
    if (!st && !m->failed && ++m->a_out > m->max_a_out)
        m->max_a_out = m->a_out;
    if (!st && i < slots) {
        if (i == m->p->own)
            m->own_at = m->ops;
        else
            m->others_at = m->ops;
    }
    return st;
}

static fhr_status m_wait_a(void *ctx, size_t i, int slot, fhr_error *err)
{
    mock *m = ctx;
    if (m->to_device)
        check_busy(m, i, m->a_out);
    fhr_status st = step(m, i, slot, A_STARTED, A_DONE, err);
    if (!st && !m->failed)
        m->a_out--;
    return st;
}

static fhr_status m_start_b(void *ctx, size_t i, int slot, fhr_error *err)
{
    mock *m = ctx;
    fhr_status st = step(m, i, slot, A_STARTED | A_DONE, B_STARTED, err);
    if (!st && !m->failed && ++m->b_out > m->max_b_out)
        m->max_b_out = m->b_out;
    return st;
}

static fhr_status m_wait_b(void *ctx, size_t i, int slot, fhr_error *err)
{
    mock *m = ctx;
    if (!m->to_device)
        check_busy(m, i, m->b_out);
    fhr_status st = step(m, i, slot, A_STARTED | A_DONE | B_STARTED, B_DONE, err);
    if (!st && !m->failed)
        m->b_out--;
    return st;
}

static void m_quiesce(void *ctx) { ((mock *)ctx)->quiesced++; }

static const staging_ops mock_ops = {m_start_a, m_wait_a, m_start_b, m_wait_b, m_quiesce};

/* The pipeline (staging_run) or, small, a caller-staged copy (staging_small_run) over the
 * recording mock, failing its fail_at-th op (0: none). */
static fhr_status run_mock_x(const staging_plan *p, int to_device, int threads, long fail_at,
                             int small, mock *m)
{
    int wait_tail = !to_device;
    *m = (mock){.p = p, .fail_at = fail_at, .to_device = to_device, .threads = threads};
    m->state = calloc(p->chunks, 1);
    cr_assert_not_null(m->state);
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = small ? staging_small_run(p, to_device, &mock_ops, m, &err)
                          : staging_run(p, wait_tail, &mock_ops, m, &err);
    cr_assert_eq(st != FHR_OK, m->failed);
    if (st)
        cr_assert(strstr(err.message, "injected") != NULL);
    return st;
}

static fhr_status run_mock(const staging_plan *p, int to_device, int threads, long fail_at,
                           mock *m)
{
    return run_mock_x(p, to_device, threads, fail_at, 0, m);
}

static void check_order_depth(size_t n, int threads, size_t chunk, int to_device, int depth)
{
    staging_shape sh = shape(threads, chunk);
    sh.depth = depth;
    staging_plan p;
    staging_plan_make(n, &sh, to_device, &p);
    mock m;
    int wait_tail = !to_device;
    cr_assert_eq(run_mock(&p, to_device, threads, 0, &m), FHR_OK);
    cr_assert_eq(m.bad, 0, "n %zu threads %d chunk %zu: out of order at chunk %zu", n, threads,
                 chunk, m.bad_chunk);
    cr_assert_eq(m.quiesced, 0);
    size_t last_unwaited = 0;
    for (size_t i = 0; i < p.chunks; i++) {
        int full = A_STARTED | A_DONE | B_STARTED | B_DONE;
        if (wait_tail || !(m.state[i] & B_DONE))
            cr_assert_eq(m.state[i] | (wait_tail ? 0 : B_DONE), full, "chunk %zu", i);
        if (!(m.state[i] & B_DONE))
            last_unwaited++;
    }
    /* only the last slots' worth of DMAs may be left in flight */
    cr_assert_leq(last_unwaited, (size_t)p.slots);
    /* parallelism: whenever the caller waits for a host stage, every copy thread has one */
    cr_assert_eq(m.starved, 0, "n %zu threads %d dir %d: %zu waits with idle threads", n,
                 threads, to_device, m.starved);
    cr_assert_leq(m.max_a_out + m.max_b_out, 2 * (size_t)p.slots);
    /* towards the device the caller fills its own first chunk after handing out the rest */
    if (to_device && p.slots > 1)
        cr_assert_gt(m.own_at, m.others_at, "n %zu: own chunk started before the others", n);
    free(m.state);
}

static void check_order(size_t n, int threads, size_t chunk, int to_device)
{
    check_order_depth(n, threads, chunk, to_device, 1);
}

/* The default shape: the thread count and ramp by size, the caller's own chunk. */
static void check_order_auto(size_t n, int pool, int to_device)
{
    staging_shape sh = auto_shape(pool);
    staging_plan p;
    staging_plan_make(n, &sh, to_device, &p);
    check_tiles(&p, n);
    check_order(n, p.threads, 0, to_device);
}

Test(staging, pipeline_order_every_size)
{
    size_t c = 4 * KiB;
    size_t sizes[] = {1, 3, c - 1, c, c + 1, 2 * c + 1, 7 * c - 1, 37 * c + 11, 200 * c};
    int threads[] = {1, 2, 3, 8, 16};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
            for (int dir = 0; dir < 2; dir++)
                check_order(sizes[k], threads[t], c, dir);
    check_order(GiB + 1, 8, 0, 1);
    check_order(GiB + 1, 8, 0, 0);
}

Test(staging, pipeline_order_with_the_ramp_and_fewer_threads)
{
    size_t sizes[] = {MiB - 1, MiB + 1, 4 * MiB + 5, 17 * MiB + 3, 64 * MiB, 300 * MiB + 1};
    int pools[] = {1, 4, 16};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t t = 0; t < sizeof pools / sizeof *pools; t++)
            for (int dir = 0; dir < 2; dir++)
                check_order_auto(sizes[k], pools[t], dir);
}

Test(staging, pipeline_order_multi_gib)
{
    /* 6 GiB in 64 KiB chunks: ~98k chunks through every slot many times over */
    check_order(6 * GiB + 3, 16, 64 * KiB, 1);
    check_order(6 * GiB + 3, 5, 64 * KiB, 0);
}

Test(staging, pipeline_stops_at_the_first_failure_and_drains_what_it_started)
{
    for (int dir = 0; dir < 2; dir++) {
        staging_shape sh = shape(3, 4 * KiB);
        staging_plan p;
        staging_plan_make(13 * 4 * KiB + 1, &sh, dir, &p);
        mock m;
        cr_assert_eq(run_mock(&p, dir, 3, 0, &m), FHR_OK);
        long total = m.ops;
        free(m.state);
        for (long k = 1; k <= total; k++) {
            cr_assert_eq(run_mock(&p, dir, 3, k, &m), FHR_E_BACKEND);
            cr_assert_eq(m.quiesced, 1, "failure at op %ld", k);
            cr_assert_eq(m.late_ops, 0, "stages started after the failure at op %ld", k);
            cr_assert_eq(m.bad_drain, 0, "the drain waited for a stage not open (op %ld)", k);
            cr_assert_eq(m.ops, k);
            /* every stage started before the failure was waited for before it returned */
            for (size_t i = 0; i < p.chunks; i++) {
                int st = m.state[i];
                cr_assert(!(st & A_STARTED) || (st & A_DONE), "dir %d fail at %ld: chunk %zu's "
                          "first stage left running", dir, k, i);
                cr_assert(!(st & B_STARTED) || (st & B_DONE), "dir %d fail at %ld: chunk %zu's "
                          "second stage left running", dir, k, i);
            }
            free(m.state);
        }
    }
}

/* ---- real copies: copy threads fill and drain, the emulated device does the DMA ---- */

#define GUARD 64

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131u + seed + (i >> 12));
}

/* The first byte of [0, total) that is not as expected (total when none): inside the
 * copied range a (the copied pattern, when the copy succeeded), outside it b. */
static size_t first_wrong(const unsigned char *got, size_t total, size_t n, int ok, unsigned a,
                          unsigned b)
{
    for (size_t i = 0; i < total; i++) {
        int inside = i >= GUARD && i < GUARD + n;
        if (inside && !ok)
            continue;
        if (got[i] != pattern(i, inside ? a : b))
            return i;
    }
    return total;
}

/* One staged copy of n bytes at host offset `mis` (alignment) through b, by the same
 * pipeline driver as bench/staging.c (cuda/staging_emu.c); returns its status. The device
 * side and the host side each have GUARD bytes either side. */
static fhr_status staged_emu(fhr_backend *b, copy_pool *cp, const staging_shape *sh, size_t n,
                             size_t mis, int to_device, fhr_error *err)
{
    staging_emu *x = NULL;
    fhr_stream *s = NULL;
    cr_assert_eq(staging_emu_create(b, cp, sh, &x, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    size_t total = n + 2 * GUARD;
    unsigned char *host = malloc(total + mis);
    void *dev = NULL;
    cr_assert_not_null(host);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), total, s, &dev, NULL), FHR_OK);
    unsigned char *shadow = malloc(total);
    cr_assert_not_null(shadow);
    for (size_t i = 0; i < total; i++) {
        host[mis + i] = pattern(i, 1);
        shadow[i] = pattern(i, 2);
    }
    cr_assert_eq(b->ops->copy(b, dev, fhr_loc_cuda(0), shadow, fhr_loc_host(), total, s, NULL),
                 FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    uint64_t first = 0;
    fhr_status st = staging_emu_copy(x, (char *)dev + GUARD, host + mis + GUARD, n, to_device,
                                     &first, err);
    /* every host job has finished on return, whatever happened */
    cr_assert(staging_emu_idle(x));
    if (!st)
        cr_assert_gt(first, 0, "no DMA was timed");
    cr_assert_eq(b->ops->copy(b, shadow, fhr_loc_host(), dev, fhr_loc_cuda(0), total, s, NULL),
                 FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    size_t w;
    if (to_device) {
        w = first_wrong(host + mis, total, n, 0, 1, 1); /* the source is never written */
        cr_assert_eq(w, total, "n %zu: source byte %zu written", n, w);
        w = first_wrong(shadow, total, n, !st, 1, 2);
    } else {
        w = first_wrong(shadow, total, n, 0, 2, 2);
        cr_assert_eq(w, total, "n %zu: device byte %zu written", n, w);
        w = first_wrong(host + mis, total, n, !st, 2, 1);
    }
    cr_assert_eq(w, total, "n %zu dir %d: byte %zu (guard %d) wrong", n, to_device, w,
                 w < GUARD || w >= GUARD + n);
    staging_emu_destroy(x);
    b->ops->free(b, fhr_loc_cuda(0), dev, total, s);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    fhr_stream_destroy(b, s);
    free(shadow);
    free(host);
    return st;
}

static fhr_backend *emu_backend(void)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_emu_create(1, 0, &b, NULL), FHR_OK);
    return b;
}

Test(threads_staging, bytes_arrive_for_every_size_and_alignment)
{
    fhr_backend *b = emu_backend();
    size_t c = 4 * KiB;
    size_t sizes[] = {1, 7, c - 1, c, c + 1, 3 * c + 1, 16 * c + 13, 64 * c - 1};
    int threads[] = {1, 3, 4};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        copy_pool *cp = NULL;
        cr_assert_eq(copy_pool_create(threads[t], &cp, NULL), FHR_OK);
        staging_shape sh = shape(threads[t], c);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (size_t mis = 0; mis < 4; mis += 3)
                for (int dir = 0; dir < 2; dir++)
                    cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], mis, dir, NULL), FHR_OK);
        copy_pool_destroy(cp);
    }
    fhr_backend_destroy(b);
}

Test(threads_staging, bytes_arrive_with_the_default_chunks)
{
    fhr_backend *b = emu_backend();
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(4, &cp, NULL), FHR_OK);
    staging_shape sh = shape(4, 0);
    size_t sizes[] = {64 * KiB, MiB + 1, 9 * MiB + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int dir = 0; dir < 2; dir++)
            cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], 1, dir, NULL), FHR_OK);
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

/* The default shape: the ramp, the thread count by size (1, 2 and 4 threads of a pool
 * of 16), the caller's own first and last chunks; sizes that end inside and after the
 * ramp, odd tails and an odd host offset. */
Test(threads_staging, bytes_arrive_through_the_ramp_with_fewer_threads)
{
    fhr_backend *b = emu_backend();
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(16, &cp, NULL), FHR_OK);
    staging_shape sh = auto_shape(16);
    size_t sizes[] = {STAGING_MIN_CHUNK + 1, MiB + 1, 4 * MiB + 5, 17 * MiB + 3};
    int threads[] = {1, 1, 2, 4};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int dir = 0; dir < 2; dir++) {
            staging_plan p;
            staging_plan_make(sizes[k], &sh, dir, &p);
            cr_assert_eq(p.threads, threads[k]);
            cr_assert_gt(p.ramp, 0);
            cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], 3, dir, NULL), FHR_OK);
        }
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

Test(threads_staging, a_failing_dma_waits_for_the_threads_and_writes_nothing_outside)
{
    fhr_backend *inner = emu_backend(), *b = NULL;
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    staging_shape sh = shape(3, 4 * KiB);
    size_t n = 11 * 4 * KiB + 5; /* 12 chunks */
    for (int dir = 0; dir < 2; dir++) {
        /* the harness makes one copy before the pipeline (the device's guard pattern);
         * the pipeline's 12 DMAs are the copies 2 to 13 */
        fhr_backend_fault_arm(b, FHR_FAULT_COPY, 1000);
        cr_assert_eq(staged_emu(b, cp, &sh, n, 0, dir, NULL), FHR_OK);
        cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_COPY), 1 + 12 + 1);
        for (uint64_t k = 2; k < 2 + 12; k++) {
            fhr_backend_fault_arm(b, FHR_FAULT_COPY, k);
            fhr_error err;
            fhr_error_init(&err);
            fhr_status st = staged_emu(b, cp, &sh, n, 0, dir, &err);
            fhr_backend_fault_arm(b, FHR_FAULT_COPY, 0);
            cr_assert_eq(st, FHR_E_BACKEND, "dir %d fault %llu", dir, (unsigned long long)k);
        }
    }
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

Test(threads_copy_pool, jobs_and_slices)
{
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(4, &cp, NULL), FHR_OK);
    cr_assert_eq(copy_pool_threads(cp), 4);
    enum { N = 16, LEN = 3 * 4096 + 7 };
    static unsigned char src[N][LEN], dst[N][LEN];
    copy_job jobs[N];
    for (int j = 0; j < N; j++)
        for (int i = 0; i < LEN; i++)
            src[j][i] = (unsigned char)(i ^ j);
    for (int j = 0; j < N; j++)
        copy_pool_submit(cp, &jobs[j], dst[j], src[j], LEN);
    for (int j = N - 1; j >= 0; j--) {
        copy_pool_wait(cp, &jobs[j]);
        cr_assert_eq(jobs[j].pending, 0);
        cr_assert_arr_eq(dst[j], src[j], LEN);
    }
    size_t big = 5 * MiB + 3;
    unsigned char *a = malloc(big), *c = calloc(big, 1);
    cr_assert(a && c);
    for (size_t i = 0; i < big; i++)
        a[i] = (unsigned char)(i * 7);
    copy_pool_memcpy(cp, c, a, big);
    cr_assert_arr_eq(c, a, big);
    free(a);
    free(c);
    copy_pool_destroy(cp);
}

/* ---- the pageable path: CUDA's own copy below a size, the pipeline from it ---------- */

Test(staging, direct_rule_follows_size_only)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, STAGING_DIRECT_BELOW);
    /* the H200 figures: CUDA's path wins at 1 and 4 MiB, the pipeline from 64 MiB */
    cr_assert_eq(staging_direct(1, &sh), 1);
    cr_assert_eq(staging_direct(MiB, &sh), 1);
    cr_assert_eq(staging_direct(4 * MiB + 1, &sh), 1);
    cr_assert_eq(staging_direct(STAGING_DIRECT_BELOW - 1, &sh), 1);
    cr_assert_eq(staging_direct(STAGING_DIRECT_BELOW, &sh), 0);
    cr_assert_eq(staging_direct(64 * MiB, &sh), 0);
    cr_assert_eq(staging_direct(GiB, &sh), 0);
    cr_assert_eq(staging_direct(STAGING_DIRECT_BELOW - 1, &sh),
                 staging_direct(STAGING_DIRECT_BELOW - 1, &sh)); /* deterministic */
}

Test(staging, direct_override)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(staging_direct_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, STAGING_DIRECT_BELOW);
    cr_assert_eq(staging_direct_parse("", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, STAGING_DIRECT_BELOW);
    cr_assert_eq(staging_direct_parse("0", &sh, NULL), FHR_OK); /* always staged */
    cr_assert_eq(staging_direct(1, &sh), 0);
    cr_assert_eq(staging_direct_parse("1G", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, GiB);
    cr_assert_eq(staging_direct(GiB - 1, &sh), 1);
    cr_assert_eq(staging_direct(GiB, &sh), 0);
    cr_assert_eq(staging_direct_parse("300KiB", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, 300 * KiB);
    cr_assert_eq(staging_direct_parse("1T", &sh, NULL), FHR_OK); /* always direct */
    cr_assert_eq(sh.direct_below, (size_t)1 << 40);
    cr_assert_eq(staging_direct_parse("12345", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.direct_below, 12345);
    const char *bad[] = {"-1", "2T", "2000G", "4KB", " 4K", "4K ", "x", "1e6", "K",
                         "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.direct_below = 77;
        cr_assert_eq(staging_direct_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_DIRECT") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert_eq(sh.direct_below, 77); /* untouched */
    }
}

/* ---- non-temporal copies ----------------------------------------------------------- */

Test(staging, memcpy_kind_from_the_environment)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, STAGING_DEFAULT_STREAM);
    cr_assert_eq(staging_memcpy_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, STAGING_DEFAULT_STREAM);
    cr_assert_eq(staging_memcpy_parse("stream", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, 1);
    cr_assert_eq(staging_memcpy_parse("", &sh, NULL), FHR_OK); /* "": keeps what it has */
    cr_assert_eq(sh.stream_copy, 1);
    cr_assert_eq(staging_memcpy_parse("libc", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, STAGING_MEMCPY_LIBC);
    cr_assert_eq(staging_memcpy_parse("auto", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, STAGING_MEMCPY_AUTO);
    const char *bad[] = {"nt",   "Stream", " stream", "stream ", "1",
                         "0",    "libc2",  "memcpy",  "AUTO",    "auto,libc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.stream_copy = 7;
        cr_assert_eq(staging_memcpy_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_MEMCPY") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert_eq(sh.stream_copy, 7); /* untouched */
    }
}

/* auto: non-temporal fills towards a device below STAGING_AUTO_STREAM_BELOW, the C
 * library's memcpy for drains and from that size; stream and libc whatever the copy. */
Test(staging, memcpy_kind_by_size_and_direction)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.stream_copy, STAGING_MEMCPY_AUTO);
    cr_assert_eq(staging_stream_copy(1, &sh, 1), 1);
    cr_assert_eq(staging_stream_copy(STAGING_AUTO_STREAM_BELOW - 1, &sh, 1), 1);
    cr_assert_eq(staging_stream_copy(STAGING_AUTO_STREAM_BELOW, &sh, 1), 0);
    cr_assert_eq(staging_stream_copy((size_t)1 << 30, &sh, 1), 0);
    cr_assert_eq(staging_stream_copy(1, &sh, 0), 0);
    cr_assert_eq(staging_stream_copy(STAGING_AUTO_STREAM_BELOW - 1, &sh, 0), 0);
    cr_assert(STAGING_AUTO_STREAM_BELOW > STAGING_DIRECT_BELOW); /* every small path */
    size_t sizes[] = {1, STAGING_AUTO_STREAM_BELOW - 1, STAGING_AUTO_STREAM_BELOW,
                      (size_t)1 << 30};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int to = 0; to < 2; to++) {
            sh.stream_copy = STAGING_MEMCPY_STREAM;
            cr_assert_eq(staging_stream_copy(sizes[i], &sh, to), 1);
            sh.stream_copy = STAGING_MEMCPY_LIBC;
            cr_assert_eq(staging_stream_copy(sizes[i], &sh, to), 0);
        }
}

/* copy_stream at odd sizes around its thresholds (4 KiB, a 64-byte line, the 128-byte
 * body step) and every alignment of either side modulo 64: the bytes arrive, the guard
 * bytes around the destination stay. */
Test(staging, stream_copy_any_size_and_alignment)
{
    size_t sizes[] = {0, 1, 63, 64, 127, 128, 4095, 4096, 4097, 4096 + 127, 4096 + 129,
                      65536 + 13, MiB + 3};
    size_t cap = MiB + 3 + 2 * GUARD + 64;
    unsigned char *src = malloc(cap), *dst = malloc(cap);
    cr_assert(src && dst);
    for (size_t i = 0; i < cap; i++)
        src[i] = pattern(i, 5);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t so = 0; so < 64; so += sizes[k] > 4096 ? 7 : 1)
            for (size_t d = 0; d < 64; d += sizes[k] > 4096 ? 5 : 1) {
                size_t n = sizes[k];
                memset(dst, 0xA5, n + 2 * GUARD + d);
                copy_stream(dst + GUARD + d, src + so, n);
                cr_assert(memcmp(dst + GUARD + d, src + so, n) == 0, "n %zu src +%zu dst +%zu",
                          n, so, d);
                for (size_t g = 0; g < GUARD; g++) {
                    cr_assert_eq(dst[GUARD + d - 1 - g], 0xA5, "n %zu: byte before written", n);
                    cr_assert_eq(dst[GUARD + d + n + g], 0xA5, "n %zu: byte after written", n);
                }
            }
    free(src);
    free(dst);
}

/* Every byte of the copy through the emulated device with FHEPLAN_STAGING_MEMCPY=stream
 * and auto (non-temporal fills, memcpy drains): chunks long enough for the streamed
 * body, odd tails, an odd host offset. */
Test(threads_staging, bytes_arrive_with_streaming_copies)
{
    fhr_backend *b = emu_backend();
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    staging_shape sh = shape(3, 64 * KiB);
    size_t sizes[] = {1, 4095, 64 * KiB + 13, 5 * 64 * KiB + 4097};
    int kinds[] = {STAGING_MEMCPY_STREAM, STAGING_MEMCPY_AUTO};
    for (int kd = 0; kd < 2; kd++) {
        sh.stream_copy = kinds[kd];
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (size_t mis = 0; mis < 4; mis += 3)
                for (int dir = 0; dir < 2; dir++)
                    cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], mis, dir, NULL), FHR_OK);
    }
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

/* ---- copy_pool_run: slices of whole granules, every byte once ----------------------- */

static unsigned char *run_base;
static size_t run_granule;
static _Atomic int run_misaligned;

static void bump(void *dst, const void *src, size_t n)
{
    (void)src;
    unsigned char *d = dst;
    if ((size_t)(d - run_base) % run_granule)
        run_misaligned = 1;
    for (size_t i = 0; i < n; i++)
        d[i]++;
}

Test(threads_copy_pool, run_covers_every_byte_once_in_whole_granules)
{
    size_t sizes[] = {0, 1, 4095, 4096, 3 * MiB + 7, 9 * MiB};
    size_t granules[] = {4096, 2 * MiB};
    int threads[] = {1, 3, 4};
    unsigned char *buf = calloc(9 * MiB, 1);
    cr_assert_not_null(buf);
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        copy_pool *cp = NULL;
        cr_assert_eq(copy_pool_create(threads[t], &cp, NULL), FHR_OK);
        for (size_t g = 0; g < 2; g++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                memset(buf, 0, 9 * MiB);
                run_base = buf;
                run_granule = granules[g];
                run_misaligned = 0;
                copy_pool_run(cp, bump, buf, NULL, sizes[k], granules[g]);
                cr_assert_eq(run_misaligned, 0, "a slice starts inside a granule");
                for (size_t i = 0; i < 9 * MiB; i++)
                    if (buf[i] != (i < sizes[k]))
                        cr_assert_eq(buf[i], i < sizes[k], "threads %d n %zu: byte %zu bumped %d "
                                     "times", threads[t], sizes[k], i, buf[i]);
            }
        copy_pool_destroy(cp);
    }
    free(buf);
}

/* ---- the pinned pool's shape and arenas (the host side of pinning) ------------------- */

Test(pinned, shape_defaults_and_overrides)
{
    pin_shape sh;
    cr_assert_eq(pin_shape_parse(NULL, NULL, NULL, NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.hostalloc, 0);
    cr_assert_eq(sh.prefault, PIN_DEFAULT_PREFAULT);
    cr_assert_eq(sh.hugepage, PIN_DEFAULT_HUGEPAGE);
    cr_assert_eq(sh.arena, PIN_ARENA_DEFAULT);
    cr_assert_eq(pin_shape_parse("", "", "", "", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.arena, PIN_ARENA_DEFAULT);
    cr_assert_eq(pin_shape_parse("1", "none", "0", "2M", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.hostalloc, 1);
    cr_assert_eq(sh.prefault, PIN_PREFAULT_NONE);
    cr_assert_eq(sh.hugepage, 0);
    cr_assert_eq(sh.arena, 2 * MiB);
    cr_assert_eq(pin_shape_parse("0", "populate", "1", "64G", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.hostalloc, 0);
    cr_assert_eq(sh.prefault, PIN_PREFAULT_POPULATE);
    cr_assert_eq(sh.hugepage, 1);
    cr_assert_eq(sh.arena, 64 * GiB);
    cr_assert_eq(pin_shape_parse(NULL, "threads", NULL, "512MiB", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.prefault, PIN_PREFAULT_THREADS);
    cr_assert_eq(sh.arena, 512 * MiB);
}

Test(pinned, shape_refuses_bad_values_by_name)
{
    struct {
        const char *v[4];
        const char *name, *value;
    } bad[] = {
        {{"2", NULL, NULL, NULL}, "FHEPLAN_PINNED_HOSTALLOC", "2"},
        {{"yes", NULL, NULL, NULL}, "FHEPLAN_PINNED_HOSTALLOC", "yes"},
        {{" 1", NULL, NULL, NULL}, "FHEPLAN_PINNED_HOSTALLOC", " 1"},
        {{NULL, "all", NULL, NULL}, "FHEPLAN_PINNED_PREFAULT", "all"},
        {{NULL, "Threads", NULL, NULL}, "FHEPLAN_PINNED_PREFAULT", "Threads"},
        {{NULL, "1", NULL, NULL}, "FHEPLAN_PINNED_PREFAULT", "1"},
        {{NULL, NULL, "on", NULL}, "FHEPLAN_PINNED_HUGEPAGE", "on"},
        {{NULL, NULL, "-1", NULL}, "FHEPLAN_PINNED_HUGEPAGE", "-1"},
        {{NULL, NULL, NULL, "0"}, "FHEPLAN_PINNED_ARENA", "0"},
        {{NULL, NULL, NULL, "1M"}, "FHEPLAN_PINNED_ARENA", "1M"},
        {{NULL, NULL, NULL, "3M"}, "FHEPLAN_PINNED_ARENA", "3M"},
        {{NULL, NULL, NULL, "65G"}, "FHEPLAN_PINNED_ARENA", "65G"},
        {{NULL, NULL, NULL, "256MB"}, "FHEPLAN_PINNED_ARENA", "256MB"},
        {{NULL, NULL, NULL, "abc"}, "FHEPLAN_PINNED_ARENA", "abc"},
        {{NULL, NULL, NULL, "1e9"}, "FHEPLAN_PINNED_ARENA", "1e9"},
        {{NULL, NULL, NULL, "-256M"}, "FHEPLAN_PINNED_ARENA", "-256M"},
        {{NULL, NULL, NULL, "18446744073709551616"}, "FHEPLAN_PINNED_ARENA",
         "18446744073709551616"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pin_shape sh = {7, PIN_PREFAULT_NONE, 7, 7, 7};
        fhr_error err;
        fhr_error_init(&err);
        cr_assert_eq(pin_shape_parse(bad[i].v[0], bad[i].v[1], bad[i].v[2], bad[i].v[3], &sh,
                                     &err),
                     FHR_E_INVALID, "%s=%s", bad[i].name, bad[i].value);
        cr_assert(strstr(err.message, bad[i].name) != NULL, "%s", err.message);
        cr_assert(strstr(err.message, bad[i].value) != NULL, "%s", err.message);
        cr_assert_eq(sh.hostalloc, 7); /* untouched */
        cr_assert_eq(sh.arena, 7);
    }
}

/* 48 requests of 180 MiB: an arena of 180 MiB each (not 256 MiB, 42% more to pin); small
 * requests share arenas; the rounding follows the page size. */
Test(pinned, arena_bytes_by_request)
{
    pin_shape sh;
    cr_assert_eq(pin_shape_parse(NULL, NULL, NULL, NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(pin_arena_bytes(1, &sh), 256 * MiB);
    cr_assert_eq(pin_arena_bytes(128 * MiB, &sh), 256 * MiB);
    cr_assert_eq(pin_arena_bytes(128 * MiB + 1, &sh), 130 * MiB);
    cr_assert_eq(pin_arena_bytes(180 * MiB, &sh), 180 * MiB);
    cr_assert_eq(pin_arena_bytes(180 * MiB + 1, &sh), 182 * MiB);
    cr_assert_eq(pin_arena_bytes(3 * GiB + 5, &sh), 3 * GiB + 2 * MiB);
    cr_assert_eq(pin_arena_bytes(SIZE_MAX - 5, &sh), 0); /* cannot be rounded: refused */
    sh.hugepage = 0;
    cr_assert_eq(pin_arena_bytes(180 * MiB + 1, &sh), 180 * MiB + 4096);
    sh.arena = 512 * MiB; /* 180 MiB now shares */
    cr_assert_eq(pin_arena_bytes(180 * MiB, &sh), 512 * MiB);
}

/* Pages of [p, p + n) resident now. */
static size_t resident(void *p, size_t n)
{
    size_t pages = n / 4096, r = 0;
    unsigned char *v = malloc(pages);
    cr_assert_not_null(v);
    cr_assert_eq(mincore(p, n, v), 0);
    for (size_t i = 0; i < pages; i++)
        r += v[i] & 1;
    free(v);
    return r;
}

/* Every prefault way, with and without huge pages, through the copy threads or not: the
 * arena starts on a huge page, reads as zeros, takes writes at both ends, and its pages
 * are in before page-locking when a prefault was asked for (none: not one). */
Test(threads_pinned, map_aligns_zeroes_and_faults_in_as_asked)
{
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    size_t lens[] = {4096, 2 * MiB, 6 * MiB + 4096};
    for (int pf = PIN_PREFAULT_NONE; pf <= PIN_PREFAULT_THREADS; pf++)
        for (int huge = 0; huge < 2; huge++)
            for (int with_cp = 0; with_cp < 2; with_cp++)
                for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
                    pin_shape sh = {0, (pin_prefault)pf, huge, PIN_ARENA_DEFAULT, 0};
                    size_t n = lens[k];
                    unsigned char *p = pin_map(n, &sh, with_cp ? cp : NULL);
                    cr_assert_not_null(p);
                    cr_assert_eq((uintptr_t)p % PIN_HUGE, 0);
                    size_t in = resident(p, n);
                    if (pf == PIN_PREFAULT_NONE)
                        cr_assert_eq(in, 0, "%zu pages faulted in without a prefault", in);
                    else
                        cr_assert_eq(in, n / 4096, "prefault %d huge %d cp %d n %zu: %zu of "
                                     "%zu pages in", pf, huge, with_cp, n, in, n / 4096);
                    for (size_t i = 0; i < n; i += 4093)
                        cr_assert_eq(p[i], 0);
                    p[0] = 1;
                    p[n - 1] = 2;
                    cr_assert_eq(p[0] + p[n - 1], 3);
                    pin_unmap(p, n);
                }
    copy_pool_destroy(cp);
    cr_assert_null(pin_map(0, &(pin_shape){0, PIN_PREFAULT_NONE, 0, PIN_ARENA_DEFAULT, 0}, NULL));
}

/* ---- deeper DMA queues (FHEPLAN_STAGING_DEPTH) --------------------------------------- */

Test(staging, depth_from_the_environment)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.depth, STAGING_DEFAULT_DEPTH);
    cr_assert_eq(staging_depth_parse("", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.depth, STAGING_DEFAULT_DEPTH);
    cr_assert_eq(staging_depth_parse("3", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.depth, 3);
    cr_assert_eq(staging_depth_parse("8", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.depth, STAGING_DEPTH_LIMIT);
    const char *bad[] = {"0", "9", "-1", "2x", " 2", "2 ", "1.5", "1e0", "0x2", "abc",
                         "18446744073709551617"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.depth = 77;
        cr_assert_eq(staging_depth_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_DEPTH") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert_eq(sh.depth, 77); /* untouched */
    }
}

/* Towards the device a depth of d recycles a slot d chunks behind, with d more slots than
 * depth 1 had less one, so the threads keep as many fills; from the device nothing changes. */
Test(staging, plan_depth_adds_slots_towards_the_device)
{
    for (int d = 1; d <= STAGING_DEPTH_LIMIT; d++) {
        staging_shape sh = shape(8, 4 * MiB);
        sh.depth = d;
        staging_plan p;
        staging_plan_make(GiB, &sh, 1, &p);
        cr_assert_eq(p.depth, d);
        cr_assert_eq(p.slots, 8 + 1 + d);
        cr_assert_eq(p.lag, d);
        check_tiles(&p, GiB);
        staging_plan_make(GiB, &sh, 0, &p);
        cr_assert_eq(p.lag, 8);
        staging_plan_make(8 * MiB, &sh, 1, &p); /* two chunks: two slots, one behind */
        cr_assert_eq(p.slots, 2);
        cr_assert_eq(p.lag, 1);
    }
    staging_shape sh = shape(4, 4 * MiB);
    sh.depth = 0; /* a shape made by hand without a depth: 1 */
    staging_plan p;
    staging_plan_make(GiB, &sh, 1, &p);
    cr_assert_eq(p.depth, 1);
    cr_assert_eq(p.slots, 6);
    cr_assert_eq(p.lag, 1);
}

Test(staging, pipeline_order_with_deeper_dma)
{
    size_t c = 4 * KiB;
    size_t sizes[] = {1, c + 1, 7 * c - 1, 37 * c + 11, 200 * c};
    int threads[] = {1, 3, 16};
    for (int d = 2; d <= STAGING_DEPTH_LIMIT; d *= 2)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
                for (int dir = 0; dir < 2; dir++)
                    check_order_depth(sizes[k], threads[t], c, dir, d);
}

Test(threads_staging, bytes_arrive_with_deeper_dma)
{
    fhr_backend *b = emu_backend();
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    size_t sizes[] = {1, 4 * KiB + 1, 37 * 4 * KiB + 11};
    for (int d = 2; d <= STAGING_DEPTH_LIMIT; d *= 2) {
        staging_shape sh = shape(3, 4 * KiB);
        sh.depth = d;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (int dir = 0; dir < 2; dir++)
                cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], 1, dir, NULL), FHR_OK);
    }
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

Test(pinned, ahead_from_the_environment)
{
    pin_shape sh;
    cr_assert_eq(pin_shape_parse(NULL, NULL, NULL, NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.ahead, PIN_DEFAULT_AHEAD);
    cr_assert_eq(pin_ahead_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.ahead, PIN_DEFAULT_AHEAD);
    cr_assert_eq(pin_ahead_parse("1", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.ahead, 1);
    cr_assert_eq(pin_ahead_parse("", &sh, NULL), FHR_OK); /* "": keeps what it has */
    cr_assert_eq(sh.ahead, 1);
    cr_assert_eq(pin_ahead_parse("0", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.ahead, 0);
    const char *bad[] = {"2", "yes", "true", " 1", "1 ", "01", "-0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.ahead = 7;
        cr_assert_eq(pin_ahead_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_PINNED_AHEAD") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert_eq(sh.ahead, 7); /* untouched */
    }
}

/* ---- caller-staged small copies (FHEPLAN_STAGING_SMALL) and split fills
 * (FHEPLAN_STAGING_FILL) ----------------------------------------------------------------- */

Test(staging, small_and_fill_from_the_environment)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.small[1], STAGING_DEFAULT_SMALL_TO);
    cr_assert_eq(sh.small[0], STAGING_DEFAULT_SMALL_FROM);
    cr_assert_eq(sh.split_fill, STAGING_DEFAULT_SPLIT);
    cr_assert_eq(sh.spin_us, STAGING_DEFAULT_SPIN_US);
    cr_assert_eq(staging_small_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.small[1], STAGING_DEFAULT_SMALL_TO);
    cr_assert_eq(staging_small_parse("caller", &sh, NULL), FHR_OK);
    cr_assert(sh.small[0] == STAGING_SMALL_CALLER && sh.small[1] == STAGING_SMALL_CALLER);
    cr_assert_eq(staging_small_parse("", &sh, NULL), FHR_OK); /* "": keeps what it has */
    cr_assert(sh.small[0] == STAGING_SMALL_CALLER && sh.small[1] == STAGING_SMALL_CALLER);
    cr_assert_eq(staging_small_parse("direct", &sh, NULL), FHR_OK);
    cr_assert(sh.small[0] == STAGING_SMALL_DIRECT && sh.small[1] == STAGING_SMALL_DIRECT);
    cr_assert_eq(staging_small_parse("parallel", &sh, NULL), FHR_OK);
    cr_assert(sh.small[0] == STAGING_SMALL_PARALLEL && sh.small[1] == STAGING_SMALL_PARALLEL);
    /* two paths: towards the device first */
    cr_assert_eq(staging_small_parse("parallel,caller", &sh, NULL), FHR_OK);
    cr_assert(sh.small[1] == STAGING_SMALL_PARALLEL && sh.small[0] == STAGING_SMALL_CALLER);
    cr_assert_eq(staging_small_parse("direct,parallel", &sh, NULL), FHR_OK);
    cr_assert(sh.small[1] == STAGING_SMALL_DIRECT && sh.small[0] == STAGING_SMALL_PARALLEL);
    cr_assert_eq(staging_small_parse("auto", &sh, NULL), FHR_OK);
    cr_assert(sh.small[1] == STAGING_SMALL_AUTO && sh.small[0] == STAGING_SMALL_AUTO);
    cr_assert_eq(staging_small_parse("caller,auto", &sh, NULL), FHR_OK);
    cr_assert(sh.small[1] == STAGING_SMALL_CALLER && sh.small[0] == STAGING_SMALL_AUTO);
    cr_assert_eq(staging_fill_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.split_fill, STAGING_DEFAULT_SPLIT);
    cr_assert_eq(staging_fill_parse("split", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.split_fill, 1);
    cr_assert_eq(staging_fill_parse("", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.split_fill, 1);
    cr_assert_eq(staging_fill_parse("whole", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.split_fill, 0);
    const char *bad[] = {"Caller", "caller ", " direct", "1", "0", "yes", "split", "callerx",
                         "parallel,", ",caller", "caller,,direct", "caller,direct,parallel",
                         "caller;direct", "parallel, caller", "Auto", "auto,"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.small[0] = sh.small[1] = 7;
        cr_assert_eq(staging_small_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_SMALL") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert(sh.small[0] == 7 && sh.small[1] == 7); /* untouched */
    }
    const char *bad_fill[] = {"Split", "split ", " whole", "1", "halves", "caller", "wholes"};
    for (size_t i = 0; i < sizeof bad_fill / sizeof *bad_fill; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.split_fill = 7;
        cr_assert_eq(staging_fill_parse(bad_fill[i], &sh, &err), FHR_E_INVALID, "%s", bad_fill[i]);
        cr_assert(strstr(err.message, "FHEPLAN_STAGING_FILL") != NULL);
        cr_assert(strstr(err.message, bad_fill[i]) != NULL);
        cr_assert_eq(sh.split_fill, 7);
    }
}

Test(staging, spin_from_the_environment)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    cr_assert_eq(staging_spin_parse(NULL, &sh, NULL), FHR_OK);
    cr_assert_eq(sh.spin_us, STAGING_DEFAULT_SPIN_US);
    cr_assert_eq(staging_spin_parse("50", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.spin_us, 50);
    cr_assert_eq(staging_spin_parse("", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.spin_us, 50);
    cr_assert_eq(staging_spin_parse("0", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.spin_us, 0);
    cr_assert_eq(staging_spin_parse("100000", &sh, NULL), FHR_OK);
    cr_assert_eq(sh.spin_us, STAGING_SPIN_LIMIT_US);
    const char *bad[] = {"-1", "100001", "1.5", "50us", " 5", "5 ", "0x10", "1e3", "abc",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fhr_error err;
        fhr_error_init(&err);
        sh.spin_us = 7;
        cr_assert_eq(staging_spin_parse(bad[i], &sh, &err), FHR_E_INVALID, "%s", bad[i]);
        cr_assert(strstr(err.message, "FHEPLAN_COPY_SPIN") != NULL);
        cr_assert(strstr(err.message, bad[i]) != NULL);
        cr_assert_eq(sh.spin_us, 7);
    }
}

/* Each direction takes its own small path, below the direct threshold only. */
Test(staging, small_rule_follows_the_threshold)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse(NULL, NULL, 4, &sh, NULL), FHR_OK);
    /* auto, the default: by size and direction */
    cr_assert_eq(STAGING_DEFAULT_SMALL_TO, STAGING_SMALL_AUTO);
    cr_assert_eq(STAGING_DEFAULT_SMALL_FROM, STAGING_SMALL_AUTO);
    /* towards the device: the caller up to 64 KiB, CUDA's own call above, parallel from
     * 384 KiB; from it: the caller below 512 KiB, then parallel */
    cr_assert_eq(STAGING_AUTO_CALLER_MAX_TO, 64 * KiB);
    cr_assert_eq(STAGING_AUTO_DIRECT_BELOW, 384 * KiB);
    cr_assert_eq(STAGING_AUTO_CALLER_BELOW_FROM, 512 * KiB);
    struct {
        size_t n;
        int to, from;
    } rule[] = {
        {1, STAGING_SMALL_CALLER, STAGING_SMALL_CALLER},
        {64 * KiB, STAGING_SMALL_CALLER, STAGING_SMALL_CALLER},
        {64 * KiB + 1, STAGING_SMALL_DIRECT, STAGING_SMALL_CALLER},
        {128 * KiB, STAGING_SMALL_DIRECT, STAGING_SMALL_CALLER},
        {256 * KiB, STAGING_SMALL_DIRECT, STAGING_SMALL_CALLER},
        {384 * KiB - 1, STAGING_SMALL_DIRECT, STAGING_SMALL_CALLER},
        {384 * KiB, STAGING_SMALL_PARALLEL, STAGING_SMALL_CALLER},
        {512 * KiB - 1, STAGING_SMALL_PARALLEL, STAGING_SMALL_CALLER},
        {512 * KiB, STAGING_SMALL_PARALLEL, STAGING_SMALL_PARALLEL},
        {STAGING_DIRECT_BELOW - 1, STAGING_SMALL_PARALLEL, STAGING_SMALL_PARALLEL},
        {STAGING_DIRECT_BELOW, -1, -1},
    };
    for (size_t i = 0; i < sizeof rule / sizeof *rule; i++) {
        cr_assert_eq(staging_small(rule[i].n, &sh, 1), rule[i].to, "%zu towards", rule[i].n);
        cr_assert_eq(staging_small(rule[i].n, &sh, 0), rule[i].from, "%zu from", rule[i].n);
    }
    cr_assert(STAGING_AUTO_CALLER_MAX_TO < STAGING_AUTO_DIRECT_BELOW);
    cr_assert(STAGING_AUTO_DIRECT_BELOW <= STAGING_DIRECT_BELOW);
    cr_assert(STAGING_AUTO_CALLER_BELOW_FROM <= STAGING_DIRECT_BELOW);
    /* the caller's copies up to 256 KiB are one chunk, one DMA */
    staging_plan one;
    staging_small_plan_make(256 * KiB, &sh, &one);
    cr_assert_eq(one.chunks, 1);
    staging_small_plan_make(256 * KiB + 1, &sh, &one);
    cr_assert_eq(one.chunks, 2);
    sh.small[1] = STAGING_SMALL_PARALLEL;
    sh.small[0] = STAGING_SMALL_CALLER;
    cr_assert_eq(staging_small(1, &sh, 1), STAGING_SMALL_PARALLEL);
    cr_assert_eq(staging_small(1, &sh, 0), STAGING_SMALL_CALLER);
    cr_assert_eq(staging_small(STAGING_DIRECT_BELOW - 1, &sh, 1), STAGING_SMALL_PARALLEL);
    cr_assert_eq(staging_small(STAGING_DIRECT_BELOW - 1, &sh, 0), STAGING_SMALL_CALLER);
    cr_assert_eq(staging_small(STAGING_DIRECT_BELOW, &sh, 1), -1); /* the pipeline from it */
    cr_assert_eq(staging_small(STAGING_DIRECT_BELOW, &sh, 0), -1);
    sh.direct_below = 0; /* FHEPLAN_STAGING_DIRECT=0: every copy through the pipeline */
    cr_assert_eq(staging_small(1, &sh, 1), -1);
    cr_assert_eq(staging_small(1, &sh, 0), -1);
    sh.direct_below = STAGING_DIRECT_BELOW;
    sh.small[0] = sh.small[1] = STAGING_SMALL_DIRECT;
    cr_assert_eq(staging_small(1, &sh, 1), STAGING_SMALL_DIRECT);
    cr_assert_eq(staging_direct(1, &sh), 1); /* CUDA's own */
}

/* A parallel small copy: no ramp, chunks of about half the copy within [256 KiB, 1 MiB]
 * (and the slot), every host stage split over the threads and the caller. */
Test(staging, parallel_plan_halves_the_copy_within_its_bounds)
{
    staging_shape sh;
    cr_assert_eq(staging_shape_parse("8", NULL, 16, &sh, NULL), FHR_OK);
    struct {
        size_t n, chunk, chunks;
    } c[] = {
        {1, 256 * KiB, 1},
        {64 * KiB, 256 * KiB, 1},
        {256 * KiB, 256 * KiB, 1},
        {512 * KiB, 256 * KiB, 2},
        {512 * KiB + 1, 260 * KiB, 2}, /* half rounded up to a page */
        {MiB, 512 * KiB, 2},
        {2 * MiB, MiB, 2},
        {4 * MiB, MiB, 4},
        {8 * MiB - 1, MiB, 8},
    };
    for (size_t k = 0; k < sizeof c / sizeof *c; k++) {
        for (int dir = 0; dir < 2; dir++) {
            staging_plan p;
            staging_parallel_plan_make(c[k].n, &sh, dir, &p);
            cr_assert_eq(p.chunk, c[k].chunk, "n %zu: chunk %zu", c[k].n, p.chunk);
            cr_assert_eq(p.chunks, c[k].chunks, "n %zu: chunks %zu", c[k].n, p.chunks);
            cr_assert_eq(p.ramp, 0);
            cr_assert_eq(p.first, p.chunk);
            cr_assert_eq(p.split, 1);
            cr_assert_eq(p.own, SIZE_MAX);
            cr_assert_eq(p.caller_all, 0);
            cr_assert_eq(p.threads, 8);
            size_t total = 0, off, len;
            for (size_t i = 0; i < p.chunks; i++) {
                staging_chunk(&p, i, &off, &len);
                cr_assert_eq(off, total);
                cr_assert(len >= 1 && len <= p.chunk);
                total += len;
            }
            cr_assert_eq(total, c[k].n);
        }
    }
    /* a slot smaller than 1 MiB bounds the chunk */
    cr_assert_eq(staging_shape_parse("2", "128K", 16, &sh, NULL), FHR_OK);
    staging_plan p;
    staging_parallel_plan_make(MiB, &sh, 1, &p);
    cr_assert_eq(p.chunk, 128 * KiB);
    cr_assert_eq(p.chunks, 8);
    cr_assert_eq(p.threads, 2);
}

/* Lengths of the chunks of a plan, in order. */
static void chunk_lengths(const staging_plan *p, size_t *out)
{
    for (size_t i = 0; i < p->chunks; i++) {
        size_t off;
        staging_chunk(p, i, &off, &out[i]);
    }
}

/* The caller's chunks: 64 KiB, 128 KiB, 256 KiB, 512 KiB, then 1 MiB, so the first DMA
 * starts after a 64 KiB copy; at most 3 slots; no threads. */
Test(staging, small_plan_ramps_to_a_megabyte)
{
    staging_shape sh = shape(8, 0);
    struct {
        size_t n, chunks, last;
    } c[] = {
        {1, 1, 1},
        {4095, 1, 4095},
        {64 * KiB, 1, 64 * KiB},
        {64 * KiB + 1, 1, 64 * KiB + 1},
        {192 * KiB, 1, 192 * KiB},
        {256 * KiB, 1, 256 * KiB},               /* one chunk up to the ramp's start */
        {256 * KiB + 1, 2, 1},
        {MiB, 3, 256 * KiB},                     /* 256 512 + 256 */
        {768 * KiB, 2, 512 * KiB},               /* the ramp exactly */
        {4 * MiB, 6, 256 * KiB},                 /* 768K + 3 x 1M + 256K */
        {STAGING_DIRECT_BELOW - 1, 10, 256 * KiB - 1}, /* 768K + 7 x 1M + 256K - 1 */
    };
    for (size_t k = 0; k < sizeof c / sizeof *c; k++) {
        staging_plan p;
        staging_small_plan_make(c[k].n, &sh, &p);
        check_tiles(&p, c[k].n);
        cr_assert_eq(p.chunks, c[k].chunks, "n %zu: %zu chunks", c[k].n, p.chunks);
        cr_assert_eq(p.caller_all, 1);
        cr_assert_eq(p.split, 0);
        cr_assert_eq(p.threads, 0);
        cr_assert_eq((size_t)p.slots, c[k].chunks < 3 ? c[k].chunks : 3);
        cr_assert_eq(STAGING_SMALL_SLOTS, 3);
        size_t len[16];
        chunk_lengths(&p, len);
        for (size_t i = 0; i + 1 < p.chunks; i++)
            cr_assert_eq(len[i], i < 2 ? (256 * KiB) << i : MiB, "n %zu chunk %zu", c[k].n, i);
        cr_assert_eq(len[p.chunks - 1], c[k].last, "n %zu", c[k].n);
    }
    /* a fixed chunk (FHEPLAN_STAGING_CHUNK=256K) caps the chunk and is every chunk's size,
     * no ramp, as in the pipeline; 128K: a copy of 128K is one chunk */
    sh = shape(8, 256 * KiB);
    staging_plan p;
    staging_small_plan_make(MiB, &sh, &p);
    check_tiles(&p, MiB);
    cr_assert_eq(p.chunk, 256 * KiB);
    cr_assert_eq(p.ramp, 0);
    cr_assert_eq(p.first, 256 * KiB);
    cr_assert_eq(p.chunks, 4);
    staging_small_plan_make(MiB + 1, &sh, &p);
    check_tiles(&p, MiB + 1);
    cr_assert_eq(p.chunks, 5);
    sh = shape(8, 128 * KiB);
    staging_small_plan_make(128 * KiB, &sh, &p);
    check_tiles(&p, 128 * KiB);
    cr_assert_eq(p.chunks, 1);
    cr_assert_eq(p.slots, 1);
    sh = shape(8, 4 * KiB);
    staging_small_plan_make(37 * 4 * KiB + 11, &sh, &p);
    check_tiles(&p, 37 * 4 * KiB + 11);
    cr_assert_eq(p.ramp, 0);
    cr_assert_eq(p.chunks, 38);
    cr_assert_eq(p.slots, 3);
    /* a larger fixed chunk does not grow the caller's: 1 MiB */
    sh = shape(8, 16 * MiB);
    staging_small_plan_make(3 * MiB, &sh, &p);
    check_tiles(&p, 3 * MiB);
    cr_assert_eq(p.chunk, MiB);
}

/* The caller's order, op by op: towards the device each chunk's DMA starts right after its
 * fill (so the next fill overlaps it) and a slot is filled again only after its DMA was
 * waited for; from the device two DMAs run ahead of the drain. */
Test(staging, small_run_overlaps_each_fill_with_the_dma_before)
{
    staging_shape sh = shape(8, 0);
    staging_plan p;
    staging_small_plan_make(3840 * KiB, &sh, &p); /* 256K 512K 3 x 1M: 5 chunks, 3 slots */
    cr_assert_eq(p.chunks, 5);
    mock m;
    cr_assert_eq(run_mock_x(&p, 1, 0, 0, 1, &m), FHR_OK);
    cr_assert_str_eq(m.log, "A0 a0 B0 A1 a1 B1 A2 a2 B2 b0 A3 a3 B3 b1 A4 a4 B4");
    cr_assert_eq(m.bad, 0);
    free(m.state);
    cr_assert_eq(run_mock_x(&p, 0, 0, 0, 1, &m), FHR_OK);
    cr_assert_str_eq(m.log, "A0 A1 a0 A2 B0 b0 a1 A3 B1 b1 a2 A4 B2 b2 a3 B3 b3 a4 B4 b4");
    cr_assert_eq(m.bad, 0);
    free(m.state);
    staging_small_plan_make(256 * KiB + 1, &sh, &p); /* 2 chunks, 2 slots */
    cr_assert_eq(p.chunks, 2);
    cr_assert_eq(run_mock_x(&p, 1, 0, 0, 1, &m), FHR_OK);
    cr_assert_str_eq(m.log, "A0 a0 B0 A1 a1 B1");
    free(m.state);
    cr_assert_eq(run_mock_x(&p, 0, 0, 0, 1, &m), FHR_OK);
    cr_assert_str_eq(m.log, "A0 a0 A1 B0 b0 a1 B1 b1");
    free(m.state);
    staging_small_plan_make(1, &sh, &p);
    cr_assert_eq(run_mock_x(&p, 0, 0, 0, 1, &m), FHR_OK);
    cr_assert_str_eq(m.log, "A0 a0 B0 b0");
    free(m.state);
}

/* Every size and slot count: stages in order, no slot reused before its chunk is done,
 * every chunk complete (towards the device: the last DMAs may stay in flight, at most one
 * per slot). */
Test(staging, small_run_order_every_size)
{
    size_t sizes[] = {1, 4095, 4096, 4097, 64 * KiB + 1, 300 * KiB, MiB + 3, 37 * 4 * KiB + 11,
                      STAGING_DIRECT_BELOW - 1};
    size_t chunks[] = {0, 4 * KiB, 256 * KiB};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
            for (int dir = 0; dir < 2; dir++) {
                staging_shape sh = shape(4, chunks[c]);
                staging_plan p;
                staging_small_plan_make(sizes[k], &sh, &p);
                check_tiles(&p, sizes[k]);
                mock m;
                cr_assert_eq(run_mock_x(&p, dir, 0, 0, 1, &m), FHR_OK);
                cr_assert_eq(m.bad, 0, "n %zu dir %d: out of order at chunk %zu", sizes[k], dir,
                             m.bad_chunk);
                size_t in_flight = 0;
                for (size_t i = 0; i < p.chunks; i++) {
                    int full = A_STARTED | A_DONE | B_STARTED | B_DONE;
                    cr_assert_eq(m.state[i] | (dir ? B_DONE : 0), full, "chunk %zu", i);
                    in_flight += !(m.state[i] & B_DONE);
                }
                cr_assert_leq(in_flight, (size_t)p.slots);
                cr_assert_leq(m.max_b_out, (size_t)p.slots);
                free(m.state);
            }
}

/* A failure at any op of a caller-staged copy: nothing started after it, every DMA
 * started waited for before the error returns. */
Test(staging, small_run_stops_at_the_first_failure_and_drains_what_it_started)
{
    for (int dir = 0; dir < 2; dir++)
        for (size_t chunk = 4 * KiB; chunk <= 256 * KiB; chunk *= 64) {
            staging_shape sh = shape(3, chunk);
            staging_plan p;
            staging_small_plan_make(13 * 4 * KiB + 1, &sh, &p);
            mock m;
            cr_assert_eq(run_mock_x(&p, dir, 0, 0, 1, &m), FHR_OK);
            long total = m.ops;
            free(m.state);
            for (long k = 1; k <= total; k++) {
                cr_assert_eq(run_mock_x(&p, dir, 0, k, 1, &m), FHR_E_BACKEND);
                cr_assert_eq(m.quiesced, 1, "failure at op %ld", k);
                cr_assert_eq(m.late_ops, 0, "stages started after the failure at op %ld", k);
                cr_assert_eq(m.bad_drain, 0, "the drain waited for a stage not open (op %ld)", k);
                cr_assert_eq(m.ops, k);
                for (size_t i = 0; i < p.chunks; i++) {
                    int st = m.state[i];
                    cr_assert(!(st & A_STARTED) || (st & A_DONE), "dir %d fail at %ld: chunk "
                              "%zu's first stage left running", dir, k, i);
                    cr_assert(!(st & B_STARTED) || (st & B_DONE), "dir %d fail at %ld: chunk "
                              "%zu's second stage left running", dir, k, i);
                }
                free(m.state);
            }
        }
}

/* A split chunk's pieces: whole pages of about len / parts, at least 64 KiB, at most
 * `parts` of them, tiling the chunk exactly once. */
Test(staging, split_pieces_tile_each_chunk_once)
{
    size_t lens[] = {1, 4095, 4096, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 256 * KiB,
                     MiB + 4097, 4 * MiB, 4 * MiB - 3, 16 * MiB + 1, GiB};
    int parts[] = {1, 2, 3, 9, 13, 17, 65};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (size_t t = 0; t < sizeof parts / sizeof *parts; t++) {
            size_t len = lens[k];
            int pieces = -1;
            size_t per = staging_pieces(len, parts[t], &pieces);
            cr_assert_eq(per % STAGING_ALIGN, 0);
            cr_assert_geq(per, STAGING_SPLIT_MIN_PIECE);
            cr_assert(pieces >= 1 && pieces <= parts[t], "len %zu parts %d: %d pieces", len,
                      parts[t], pieces);
            cr_assert_lt((size_t)(pieces - 1) * per, len); /* every piece has bytes */
            cr_assert_geq((size_t)pieces * per, len);      /* and they reach the end */
            if (len >= (size_t)parts[t] * STAGING_SPLIT_MIN_PIECE * 2) /* large: all work */
                cr_assert_eq(pieces, parts[t], "len %zu parts %d", len, parts[t]);
        }
    int pieces;
    cr_assert_eq(staging_pieces(4 * MiB, 9, &pieces), 456 * KiB); /* 8 of 456K, one of 448K */
    cr_assert_eq(pieces, 9);
    cr_assert_eq(staging_pieces(256 * KiB, 9, &pieces), 64 * KiB);
    cr_assert_eq(pieces, 4);
}

/* With FHEPLAN_STAGING_FILL=split the chunks, slots and lag are those of whole fills, but
 * no chunk is the caller's alone, and the pipeline starts the first wave in chunk order. */
Test(staging, split_plan_keeps_the_chunks_and_starts_in_order)
{
    size_t sizes[] = {1, 9 * MiB + 5, 256 * MiB, GiB + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int dir = 0; dir < 2; dir++) {
            staging_shape sh = shape(8, 0);
            staging_plan whole, split;
            staging_plan_make(sizes[k], &sh, dir, &whole);
            sh.split_fill = 1;
            staging_plan_make(sizes[k], &sh, dir, &split);
            check_tiles(&split, sizes[k]);
            cr_assert_eq(split.split, 1);
            cr_assert_eq(whole.split, 0);
            cr_assert_eq(split.own, SIZE_MAX);
            cr_assert_eq(split.chunks, whole.chunks);
            cr_assert_eq(split.chunk, whole.chunk);
            cr_assert_eq(split.slots, whole.slots);
            cr_assert_eq(split.lag, whole.lag);
            cr_assert_eq(split.threads, whole.threads);
            mock m;
            cr_assert_eq(run_mock(&split, dir, split.threads, 0, &m), FHR_OK);
            cr_assert_eq(m.bad, 0);
            char want[256] = "";
            size_t w = 0;
            for (int i = 0; i < split.slots && i < 8; i++)
                w += (size_t)snprintf(want + w, sizeof want - w, "%sA%d", i ? " " : "", i);
            cr_assert_eq(strncmp(m.log, want, w), 0, "dir %d: %s", dir, m.log);
            free(m.state);
        }
}

/* Pieces of a split job: every byte once, in whole pieces, whoever runs them. */
Test(threads_copy_pool, split_covers_every_byte_once)
{
    size_t sizes[] = {0, 1, 4095, 64 * KiB + 1, 3 * MiB + 7, 9 * MiB};
    int threads[] = {1, 3, 4};
    unsigned char *buf = calloc(9 * MiB, 1);
    cr_assert_not_null(buf);
    copy_split *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        copy_pool *cp = NULL;
        cr_assert_eq(copy_pool_create(threads[t], &cp, NULL), FHR_OK);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            memset(buf, 0, 9 * MiB);
            run_base = buf;
            int pieces = 0;
            size_t piece = sizes[k] ? staging_pieces(sizes[k], threads[t] + 1, &pieces) : 4096;
            run_granule = piece;
            run_misaligned = 0;
            copy_pool_submit_split(cp, j, bump, buf, NULL, sizes[k], piece);
            cr_assert_eq(j->pieces, pieces);
            copy_pool_wait_split(cp, j);
            cr_assert_eq(j->pending, 0);
            cr_assert_eq(run_misaligned, 0, "a piece starts inside another");
            for (size_t i = 0; i < 9 * MiB; i++)
                if (buf[i] != (i < sizes[k]))
                    cr_assert_eq(buf[i], i < sizes[k], "threads %d n %zu: byte %zu bumped %d "
                                 "times", threads[t], sizes[k], i, buf[i]);
        }
        copy_pool_destroy(cp);
    }
    free(j);
    free(buf);
}

static _Atomic int hold_threads; /* 1: the jobs of `hold` wait */

static void hold(void *dst, const void *src, size_t n)
{
    (void)dst, (void)src, (void)n;
    while (hold_threads)
        sched_yield();
}

/* The waiter runs the pieces no thread has taken: with every thread busy elsewhere a split
 * job still finishes, by the caller alone. */
Test(threads_copy_pool, the_split_waiter_runs_pieces_itself)
{
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(2, &cp, NULL), FHR_OK);
    hold_threads = 1;
    copy_job busy[2];
    for (int i = 0; i < 2; i++)
        copy_pool_submit_fn(cp, &busy[i], hold, NULL, NULL, 0);
    size_t n = 5 * 64 * KiB + 3;
    unsigned char *src = malloc(n), *dst = calloc(n, 1);
    cr_assert(src && dst);
    for (size_t i = 0; i < n; i++)
        src[i] = pattern(i, 9);
    copy_split *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    copy_pool_submit_split(cp, j, copy_plain, dst, src, n, 64 * KiB);
    cr_assert_eq(j->pieces, 6);
    copy_pool_wait_split(cp, j); /* the threads are held: the caller copies all six */
    cr_assert_arr_eq(dst, src, n);
    hold_threads = 0;
    for (int i = 0; i < 2; i++)
        copy_pool_wait(cp, &busy[i]);
    copy_pool_destroy(cp);
    free(j);
    free(src);
    free(dst);
}

/* Spinning threads and waiters lose nothing: whole jobs and split jobs, back to back and
 * spaced out, every byte copied once, the pool's threads all busy elsewhere at times (the
 * waiter then copies alone); spin set and unset while the pool runs. */
Test(threads_copy_pool, spinning_threads_copy_every_byte)
{
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    size_t n = 7 * 64 * KiB + 5;
    unsigned char *src = malloc(n), *dst = malloc(n);
    cr_assert(src && dst);
    copy_split *j = calloc(1, sizeof *j);
    copy_job whole;
    cr_assert_not_null(j);
    long spins[] = {200000, 0, 1000, 5000000};
    for (size_t v = 0; v < sizeof spins / sizeof *spins; v++) {
        copy_pool_set_spin(cp, spins[v]);
        for (int r = 0; r < 40; r++) {
            for (size_t i = 0; i < n; i++)
                src[i] = pattern(i + (size_t)r, (int)v);
            memset(dst, 0, n);
            if (r % 2) {
                copy_pool_submit_split(cp, j, copy_plain, dst, src, n, 64 * KiB);
                copy_pool_wait_split(cp, j);
                cr_assert_eq(j->pending, 0);
            } else {
                copy_pool_submit(cp, &whole, dst, src, n);
                copy_pool_wait(cp, &whole);
                cr_assert_eq(whole.pending, 0);
            }
            cr_assert_arr_eq(dst, src, n, "spin %ld round %d", spins[v], r);
            if (r % 10 == 9) { /* every thread held: the waiter copies alone */
                hold_threads = 1;
                copy_job busy[3];
                for (int i = 0; i < 3; i++)
                    copy_pool_submit_fn(cp, &busy[i], hold, NULL, NULL, 0);
                memset(dst, 0, n);
                copy_pool_submit_split(cp, j, copy_plain, dst, src, n, 64 * KiB);
                copy_pool_wait_split(cp, j);
                cr_assert_arr_eq(dst, src, n);
                hold_threads = 0;
                for (int i = 0; i < 3; i++)
                    copy_pool_wait(cp, &busy[i]);
            }
        }
    }
    copy_pool_set_spin(cp, -5); /* negative: no spin */
    copy_pool_submit(cp, &whole, dst, src, n);
    copy_pool_wait(cp, &whole);
    copy_pool_destroy(cp); /* threads spinning or asleep both stop */
    free(j);
    free(src);
    free(dst);
}

/* Caller-staged copies through the emulated device, byte for byte: 1 byte, odd sizes,
 * both sides of every ramp step, just below the threshold (the caller's) and exactly at it
 * (the pipeline's), odd host offsets; and with 4 KiB slots, many chunks through 3 slots. */
Test(threads_staging, bytes_arrive_when_the_caller_stages_small_copies)
{
    fhr_backend *b = emu_backend();
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    staging_shape sh = shape(3, 0);
    sh.small[0] = sh.small[1] = STAGING_SMALL_CALLER;
    sh.direct_below = STAGING_DIRECT_BELOW;
    size_t sizes[] = {1, 7, 4095, 4097, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, 192 * KiB + 5,
                      MiB + 3, 3 * MiB + 4093, STAGING_DIRECT_BELOW - 1, STAGING_DIRECT_BELOW};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (size_t mis = 0; mis < 4; mis += 3)
            for (int dir = 0; dir < 2; dir++)
                cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], mis, dir, NULL), FHR_OK,
                             "n %zu", sizes[k]);
    sh = shape(3, 4 * KiB);
    sh.small[0] = sh.small[1] = STAGING_SMALL_CALLER;
    sh.direct_below = STAGING_DIRECT_LIMIT;
    size_t few[] = {1, 4096, 37 * 4 * KiB + 11};
    for (size_t k = 0; k < sizeof few / sizeof *few; k++)
        for (int dir = 0; dir < 2; dir++)
            cr_assert_eq(staged_emu(b, cp, &sh, few[k], 1, dir, NULL), FHR_OK);
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}

/* Split fills through the emulated device, byte for byte: the default chunks (the ramp,
 * pieces of every count), fixed chunks, 1 to 4 threads, deeper DMA, odd offsets. */
Test(threads_staging, bytes_arrive_with_split_fills)
{
    fhr_backend *b = emu_backend();
    int threads[] = {1, 3, 4};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        copy_pool *cp = NULL;
        cr_assert_eq(copy_pool_create(threads[t], &cp, NULL), FHR_OK);
        staging_shape sh = shape(threads[t], 0);
        sh.split_fill = 1;
        size_t sizes[] = {1, 64 * KiB + 1, MiB + 1, 9 * MiB + 5, 17 * MiB + 3};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (int dir = 0; dir < 2; dir++)
                cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], 3, dir, NULL), FHR_OK);
        sh = shape(threads[t], 256 * KiB);
        sh.split_fill = 1;
        sh.depth = 2;
        sh.stream_copy = 1;
        for (int dir = 0; dir < 2; dir++)
            cr_assert_eq(staged_emu(b, cp, &sh, 23 * 256 * KiB + 4097, 1, dir, NULL), FHR_OK);
        copy_pool_destroy(cp);
    }
    fhr_backend_destroy(b);
}

/* Parallel small copies through the emulated device, byte for byte: 1 byte, odd sizes,
 * one chunk and several, just below the threshold and exactly at it (the pipeline's),
 * odd host offsets, 1 to 4 threads, with and without spinning threads (and non-temporal
 * fills); a small slot bounds the chunks. */
Test(threads_staging, bytes_arrive_with_parallel_small_copies)
{
    fhr_backend *b = emu_backend();
    int threads[] = {1, 3, 4};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        for (int spin = 0; spin < 2; spin++) {
            copy_pool *cp = NULL;
            cr_assert_eq(copy_pool_create(threads[t], &cp, NULL), FHR_OK);
            copy_pool_set_spin(cp, spin ? 200000 : 0);
            staging_shape sh = shape(threads[t], 0);
            sh.small[0] = sh.small[1] = STAGING_SMALL_PARALLEL;
            sh.direct_below = STAGING_DIRECT_BELOW;
            /* the default non-temporal fills with spin, memcpy without */
            sh.stream_copy = spin ? STAGING_MEMCPY_AUTO : STAGING_MEMCPY_LIBC;
            size_t sizes[] = {1, 4097, 64 * KiB + 1, 256 * KiB, 512 * KiB + 1, MiB + 3,
                              3 * MiB + 4093, STAGING_DIRECT_BELOW - 1, STAGING_DIRECT_BELOW};
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
                for (size_t mis = 0; mis < 4; mis += 3)
                    for (int dir = 0; dir < 2; dir++)
                        cr_assert_eq(staged_emu(b, cp, &sh, sizes[k], mis, dir, NULL), FHR_OK,
                                     "threads %d spin %d n %zu", threads[t], spin, sizes[k]);
            sh = shape(threads[t], 64 * KiB);
            sh.small[0] = sh.small[1] = STAGING_SMALL_PARALLEL;
            sh.direct_below = STAGING_DIRECT_LIMIT;
            for (int dir = 0; dir < 2; dir++)
                cr_assert_eq(staged_emu(b, cp, &sh, 13 * 64 * KiB + 11, 1, dir, NULL), FHR_OK);
            copy_pool_destroy(cp);
        }
    fhr_backend_destroy(b);
}

/* One failing fault of `kind` at every call the copy makes: the copy fails, every host
 * stage has finished and no byte outside the copy was written (staged_emu checks). calls:
 * the copy's calls of that kind, counted on a run without a fault. */
static void fail_everywhere(fhr_backend *b, copy_pool *cp, const staging_shape *sh, size_t n,
                            int dir, fhr_fault_kind kind, uint64_t before, uint64_t calls)
{
    fhr_backend_fault_arm(b, kind, 100000); /* arming counts from 0 again */
    cr_assert_eq(staged_emu(b, cp, sh, n, 1, dir, NULL), FHR_OK);
    uint64_t used = fhr_backend_fault_count(b, kind);
    cr_assert_geq(used, before + calls, "kind %d: %llu calls", (int)kind,
                  (unsigned long long)used);
    for (uint64_t k = 1; k <= calls; k++) {
        fhr_backend_fault_arm(b, kind, before + k);
        fhr_error err;
        fhr_error_init(&err);
        fhr_status st = staged_emu(b, cp, sh, n, 1, dir, &err);
        fhr_backend_fault_arm(b, kind, 0);
        cr_assert_eq(st, FHR_E_BACKEND, "dir %d kind %d fault %llu", dir, (int)kind,
                     (unsigned long long)k);
        cr_assert(strstr(err.message, "injected") != NULL, "%s", err.message);
    }
}

/* A failing DMA, event or slot allocation at any point of a caller-staged copy or of a
 * split pipeline drains what it started (no host stage pending, nothing written outside).
 * The harness makes one device allocation and one copy before the copy under test. */
Test(threads_staging, failures_drain_caller_staged_and_split_copies)
{
    fhr_backend *inner = emu_backend(), *b = NULL;
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    copy_pool *cp = NULL;
    cr_assert_eq(copy_pool_create(3, &cp, NULL), FHR_OK);
    for (int dir = 0; dir < 2; dir++) {
        staging_shape sh = shape(3, 0);
        sh.small[0] = sh.small[1] = STAGING_SMALL_CALLER;
        sh.direct_below = STAGING_DIRECT_BELOW;
        size_t n = 2 * MiB + 768 * KiB + 5; /* 256K 512K 1M 1M, 5: 5 chunks, 3 slots */
        staging_plan p;
        staging_small_plan_make(n, &sh, &p);
        cr_assert_eq(p.chunks, 5);
        /* one DMA (copy) and one event per chunk: the caller staged it */
        fhr_backend_fault_arm(b, FHR_FAULT_COPY, 100000);
        cr_assert_eq(staged_emu(b, cp, &sh, n, 0, dir, NULL), FHR_OK);
        cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_COPY), 1 + 5 + 1);
        fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 100000); /* the device buffer, 3 slots */
        cr_assert_eq(staged_emu(b, cp, &sh, n, 0, dir, NULL), FHR_OK);
        cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 1 + 3);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_COPY, 1, 5);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_EVENT, 0, 5);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_ALLOC, 1, 3);
        sh = shape(3, 256 * KiB);
        sh.split_fill = 1;
        n = 11 * 256 * KiB + 5; /* 12 chunks through 3 + 1 + 1 slots */
        staging_plan_make(n, &sh, dir, &p);
        cr_assert_eq(p.chunks, 12);
        cr_assert_eq(p.slots, 5);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_COPY, 1, 12);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_EVENT, 0, 12);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_ALLOC, 1, 5);
        /* a parallel small copy: 4 chunks of at most 1 MiB, a slot each */
        sh = shape(3, 0);
        sh.small[0] = sh.small[1] = STAGING_SMALL_PARALLEL;
        sh.direct_below = STAGING_DIRECT_BELOW;
        n = 3 * MiB + 5;
        staging_parallel_plan_make(n, &sh, dir, &p);
        cr_assert_eq(p.chunks, 4);
        cr_assert_eq(p.slots, 4);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_COPY, 1, 4);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_EVENT, 0, 4);
        fail_everywhere(b, cp, &sh, n, dir, FHR_FAULT_ALLOC, 1, 4);
    }
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
}
