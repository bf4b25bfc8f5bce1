/* bench/transfer.c — transfer bandwidth through the backend against raw CUDA and the best
 * host memcpy of the same run, a sweep of the staging shape, CPU cost per enqueue, and with
 * two devices the peer link (cuda:0 <-> cuda:1) and both devices loading at once. */
#include "fheplan/backend.h"
#include "bench/host_bench.h"
#include "cuda/copy_threads.h"
#include "cuda/cuda_internal.h"
#include "cuda/host_copy.h"
#include "cuda/kernels.h"
#include "cuda/staging_pipeline.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SKIPPED 77
#define MAX_REPS 64
#define MAX_SIZES 16
#define MAX_TEAM 256
/* Copies below SMALL_BELOW take tens of microseconds, so their medians are of at least
 * SMALL_REPS repetitions whatever --reps says. */
#define SMALL_BELOW ((size_t)16 << 20)
#define SMALL_REPS 21

typedef struct bench {
    fhr_backend *b;
    fhr_stream *s;      /* backend stream on cuda:0 */
    cudaStream_t raw;   /* a raw stream of our own on device 0 (two devices, the probe) */
    cudaStream_t rs;    /* where CUDA's own copies run: the backend stream's native one,
                           the stream fheplan's copies run on, so that the two differ in
                           the copy alone (alone, CUDA's copies ran alike on all eight
                           streams --direct-probe tried) */
    void *dev, *pin;    /* from the backend: device pool and pinned pool */
    unsigned char *pageable;
    unsigned char *pageable_ours; /* the two sides of a pair (bandwidth_turns): buffers of */
    unsigned char *pageable_raw;  /* SMALL_BELOW bytes each, made alike */
    int pairing;                 /* inside bandwidth_pair: 1 fheplan's copy, 2 CUDA's */
    size_t max;
    int reps;
    int json;
    FILE *jf;           /* --json-file: the JSON rows beside the text */
    int no_growth;      /* --no-growth: the variant matrix without pinned growth */
    int small_only;     /* --small-variants: the variant matrix's small copies alone */
    int probe;          /* 1 --direct-probe: what fheplan's direct path adds to CUDA's call;
                           2 --caller-probe: one staged chunk by hand */
    int variants;       /* --variants: the variant matrix (what limits the pageable path
                           and pinning), instead of the default sections */
    int growth_reps;    /* passes of each pinned-growth variant */
    int sweep;
    int host_only;
    int first_row;
    int cores;
    /* the yardstick: the best host memcpy over 1..cores threads, per size */
    size_t sizes[MAX_SIZES];
    int nsizes;
    double best_host[MAX_SIZES];
    int best_threads[MAX_SIZES];
    double pinned[MAX_SIZES]; /* pinned->cuda through the backend, per size, this run */
    int two_only;       /* --two-gpu: only the two-device rows */
    int ndev;
    fhr_stream *s1;     /* backend stream on cuda:1 (two devices) */
    cudaStream_t raw1;  /* raw stream on device 1 */
    void *dev1, *pin1;  /* a buffer on cuda:1 and a second pinned one */
} bench;

static double now(void) { return now_us() * 1e-6; }

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "transfer: %s: %s\n", what, msg);
    exit(1);
}

static void cu_check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        die(what, cudaGetErrorName(e));
}

/* ---- one measured operation -------------------------------------------------------- */

typedef enum path { BACKEND, RAW_ASYNC, RAW_SYNC, RAW_WAITED } path;
typedef enum dir { PIN_TO_DEV, DEV_TO_PIN, PAGE_TO_DEV, DEV_TO_PAGE } dir;

static const char *const dir_names[] = {"pinned->cuda", "cuda->pinned", "pageable->cuda",
                                        "cuda->pageable"};

static void endpoints(bench *k, dir d, void **dst, const void **src, fhr_location *dl,
                      fhr_location *sl)
{
    void *host = d == PIN_TO_DEV || d == DEV_TO_PIN ? k->pin : (void *)k->pageable;
    if (k->pairing && host == k->pageable)
        host = k->pairing == 1 ? k->pageable_ours : k->pageable_raw;
    fhr_location hl = d == PIN_TO_DEV || d == DEV_TO_PIN ? fhr_loc_pinned() : fhr_loc_host();
    int to_dev = d == PIN_TO_DEV || d == PAGE_TO_DEV;
    *dst = to_dev ? k->dev : host;
    *src = to_dev ? host : k->dev;
    *dl = to_dev ? fhr_loc_cuda(0) : hl;
    *sl = to_dev ? hl : fhr_loc_cuda(0);
}

/* Enqueues one copy of n bytes on the path (no wait). */
static void enqueue(bench *k, dir d, path p, size_t n)
{
    void *dst;
    const void *src;
    fhr_location dl, sl;
    endpoints(k, d, &dst, &src, &dl, &sl);
    if (p == BACKEND) {
        fhr_error err;
        fhr_error_init(&err);
        if (k->b->ops->copy(k->b, dst, dl, src, sl, n, k->s, &err) != FHR_OK)
            die("backend copy", err.message);
    } else if (p == RAW_ASYNC || p == RAW_WAITED) {
        if (p == RAW_WAITED) /* what fheplan's direct path does first towards the device */
            cu_check(cudaStreamSynchronize(k->rs), "cudaStreamSynchronize");
        cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, k->rs), "cudaMemcpyAsync");
    } else {
        cu_check(cudaMemcpy(dst, src, n, cudaMemcpyDefault), "cudaMemcpy");
    }
}

static void wait_path(bench *k, path p)
{
    if (p == BACKEND) {
        if (fhr_stream_sync(k->b, k->s, NULL) != FHR_OK)
            die("backend", "stream_sync failed");
    } else {
        cu_check(cudaStreamSynchronize(k->rs), "cudaStreamSynchronize");
    }
}

/* The sizes of the small-copy rows: every power of two from 64 KiB below SMALL_BELOW, and
 * the sizes between the small-copy rule's limits (96, 192 and 384 KiB). */
static const size_t small_sizes[] = {64u << 10,  96u << 10, 128u << 10, 192u << 10,
                                     256u << 10, 384u << 10, 512u << 10, 1u << 20,
                                     2u << 20,   4u << 20,   8u << 20};
#define N_SMALL (sizeof small_sizes / sizeof *small_sizes)

/* Repetitions of a copy of n bytes: --reps, at least SMALL_REPS below SMALL_BELOW. */
static int reps_at(const bench *k, size_t n)
{
    return n < SMALL_BELOW && k->reps < SMALL_REPS ? SMALL_REPS : k->reps;
}

/* Median bandwidth in GB/s over reps_at(n) copies (one warm-up first). */
static double bandwidth(bench *k, dir d, path p, size_t n)
{
    double t[MAX_REPS];
    int reps = reps_at(k, n);
    enqueue(k, d, p, n);
    wait_path(k, p);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        enqueue(k, d, p, n);
        wait_path(k, p);
        t[r] = now() - t0;
    }
    return (double)n / median(t, reps) / 1e9;
}

/* fheplan's copy, CUDA's own (`raw`: cudaMemcpyAsync on the bench's stream, or the
 * synchronous cudaMemcpy), and (waited not NULL) CUDA's own after a wait for its idle
 * stream, in blocks: a block is TURN_SKIP copies of one path, not timed, then TURN_BLOCK
 * timed ones; the paths' blocks take turns until each path has reps_at(n) timings (the
 * last block may be shorter): GB/s of each, medians. On the H200 host CUDA's pageable
 * copy from the device ran at half its speed for the first copies after one of
 * fheplan's (--direct-probe), so copies are not timed right after the other path's.
 * Each path reads its own buffer, made alike, and the paths trade buffers and order
 * every round, so that neither always reads the same buffer or always comes first. */
#define TURN_BLOCK 7
#define TURN_SKIP 2
static void bandwidth_turns(bench *k, dir d, size_t n, path raw, double *ours, double *cuda,
                            double *waited)
{
    double t[3][MAX_REPS];
    int reps = reps_at(k, n), np = waited ? 3 : 2;
    for (int done = 0, round = 0; done < reps; done += TURN_BLOCK, round++)
        for (int q = 0; q < np; q++) {
            int odd = round & 1, p = odd ? np - 1 - q : q;
            path pp = p == 0 ? BACKEND : p == 1 ? raw : RAW_WAITED;
            int block = reps - done < TURN_BLOCK ? reps - done : TURN_BLOCK;
            k->pairing = (p == 0) != odd ? 1 : 2;
            for (int c = -TURN_SKIP; c < block; c++) {
                double t0 = now();
                enqueue(k, d, pp, n);
                wait_path(k, pp);
                if (c >= 0)
                    t[p][done + c] = now() - t0;
            }
            k->pairing = 0;
        }
    *ours = (double)n / median(t[0], reps) / 1e9;
    *cuda = (double)n / median(t[1], reps) / 1e9;
    if (waited)
        *waited = (double)n / median(t[2], reps) / 1e9;
}

/* The same copy on fheplan's path and on CUDA's (`raw`: its cudaMemcpyAsync on the same
 * stream, or the synchronous cudaMemcpy): GB/s of each. Below SMALL_BELOW in blocks that take turns
 * (bandwidth_turns), so that both medians see the same moments of the machine, each
 * path from a pageable buffer of its own, so that neither finds the other's cache lines
 * in its buffer (fheplan's threads leave them in other cores' caches; the driver's, in
 * the caller's). */
static void bandwidth_pair(bench *k, dir d, size_t n, path raw, double *ours, double *cuda)
{
    if (n >= SMALL_BELOW) {
        /* large: all of fheplan's copies, then CUDA's. Alternating them at 256 MiB on
         * the H200 host slowed both (fheplan's 28.9 against 48.5 GB/s, CUDA's 5.8
         * against 7.8 measured apart in the same run) */
        *ours = bandwidth(k, d, BACKEND, n);
        *cuda = bandwidth(k, d, raw, n);
        return;
    }
    bandwidth_turns(k, d, n, raw, ours, cuda, NULL);
}

static const char *small_path_name(size_t n, const staging_shape *sh, int to_device)
{
    static const char *const names[] = {"direct", "caller", "parallel"};
    int p = staging_small(n, sh, to_device);
    return p < 0 ? "staged" : names[p];
}

/* ---- --direct-probe: what separates fheplan's small copies from CUDA's own ------------
 * At 64 KiB to 1 MiB, each direction, six copies a round: CUDA's pageable call on its own
 * stream and on the backend's stream, each from buffer R and from buffer O, and fheplan's
 * copy from O and from R, each round in its own order (a fixed-seed shuffle), so no row
 * always follows the same one; medians of 41 rounds. Then CUDA's copy on eight streams,
 * and what the CUDA calls around a direct copy cost alone. The NUMA node and huge pages of both
 * buffers are printed first (/proc/self/numa_maps). */
static void row_x(bench *k, const char *what, size_t n, double ours, double raw, const char *unit,
                  const char *json_extra, const char *text_extra);

static void print_numa(const char *name, const void *p)
{
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[1024];
    unsigned long want = (unsigned long)p;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long start = strtoul(line, NULL, 16);
        if (start <= want && want - start < SMALL_BELOW + (2u << 20)) {
            printf("direct probe buffer %s at %p: %s", name, p, line);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* order[0..n) := a permutation of 0..n-1 drawn from *rng (a fixed-seed LCG). */
static void shuffle(int *order, int n, unsigned *rng)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        *rng = *rng * 1103515245u + 12345u;
        int j = (int)((*rng >> 16) % (unsigned)(i + 1));
        int x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
}

static void run_direct_probe(bench *k)
{
    enum { NP = 8, REPS = 41 };
    static const char *const names[NP] = {
        "CUDA's call, its stream, buffer R",    "CUDA's call, its stream, buffer O",
        "CUDA's call, backend stream, buffer R", "CUDA's call, backend stream, buffer O",
        "fheplan's copy, buffer O",             "fheplan's copy, buffer R",
        "CUDA's call, named, after a sync, R",  "CUDA's call, named, after a query, R"};
    cudaStream_t bs = k->rs;
    print_numa("R", k->pageable_raw);
    print_numa("O", k->pageable_ours);
    for (int d = PAGE_TO_DEV; d <= DEV_TO_PAGE; d++)
        for (size_t n = 64u << 10; n <= (1u << 20); n *= 2) {
            double t[NP][REPS];
            unsigned rng = 12345;
            for (int r = -1; r < REPS; r++) {
                int order[NP];
                shuffle(order, NP, &rng);
                for (int q = 0; q < NP; q++) {
                    int p = order[q];
                    /* buffer O for rows 1, 3, 4; R for 0, 2, 5 */
                    k->pairing = p == 1 || p == 3 || p == 4 ? 1 : 2;
                    void *dst;
                    const void *src;
                    fhr_location dl, sl;
                    endpoints(k, (dir)d, &dst, &src, &dl, &sl);
                    double t0 = now();
                    if (p == 4 || p == 5) {
                        enqueue(k, (dir)d, BACKEND, n);
                        wait_path(k, BACKEND);
                    } else if (p >= 6) { /* the direct path's calls, its wait two ways */
                        if (p == 6)
                            cu_check(cudaStreamSynchronize(bs), "cudaStreamSynchronize");
                        else if (cudaStreamQuery(bs) != cudaSuccess)
                            cu_check(cudaStreamSynchronize(bs), "cudaStreamSynchronize");
                        cu_check(cudaMemcpyAsync(dst, src, n,
                                                 d == PAGE_TO_DEV ? cudaMemcpyHostToDevice
                                                                  : cudaMemcpyDeviceToHost,
                                                 bs),
                                 "cudaMemcpyAsync");
                        cu_check(cudaStreamSynchronize(bs), "cudaStreamSynchronize");
                    } else {
                        cudaStream_t st = p < 2 ? k->raw : bs;
                        cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, st),
                                 "cudaMemcpyAsync");
                        cu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
                    }
                    k->pairing = 0;
                    if (r >= 0)
                        t[p][r] = now() - t0;
                }
            }
            double base = median(t[0], REPS);
            for (int p = 0; p < NP; p++) {
                double m = median(t[p], REPS);
                char what[96], tx[96];
                snprintf(what, sizeof what, "probe %s %s", dir_names[d], names[p]);
                snprintf(tx, sizeof tx,
                         "(us per copy and its wait; ratio: time / the first row's)");
                row_x(k, what, n, m * 1e6, base * 1e6, "us", "", tx);
            }
        }
    /* CUDA's pageable copy on eight streams, the same copy on each in turn: the backend's,
     * the bench's own (made after it) and six made now, all non-blocking on device 0 */
    enum { NS = 8, SREPS = 21 };
    cudaStream_t ss[NS] = {k->rs, k->raw};
    for (int i = 2; i < NS; i++)
        cu_check(cudaStreamCreateWithFlags(&ss[i], cudaStreamNonBlocking), "cudaStreamCreate");
    static const size_t ssz[] = {128u << 10, 256u << 10, 1u << 20};
    for (int d = PAGE_TO_DEV; d <= DEV_TO_PAGE; d++)
        for (size_t z = 0; z < sizeof ssz / sizeof *ssz; z++) {
            size_t n = ssz[z];
            double t[NS][SREPS];
            k->pairing = 2;
            void *dst;
            const void *src;
            fhr_location dl, sl;
            endpoints(k, (dir)d, &dst, &src, &dl, &sl);
            k->pairing = 0;
            unsigned rng = 777;
            for (int r = -1; r < SREPS; r++) {
                int order[NS];
                shuffle(order, NS, &rng);
                for (int q = 0; q < NS; q++) {
                    int p = order[q];
                    double t0 = now();
                    cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, ss[p]),
                             "cudaMemcpyAsync");
                    cu_check(cudaStreamSynchronize(ss[p]), "cudaStreamSynchronize");
                    if (r >= 0)
                        t[p][r] = now() - t0;
                }
            }
            double base = median(t[0], SREPS);
            for (int p = 0; p < NS; p++) {
                char what[96];
                snprintf(what, sizeof what, "probe streams %s %s", dir_names[d],
                         p == 0 ? "backend's" : p == 1 ? "bench's" : "new");
                row_x(k, what, n, median(t[p], SREPS) * 1e6, base * 1e6, "us", "",
                      "(us per copy and its wait; ratio: time / the backend stream's)");
            }
        }
    for (int i = 2; i < NS; i++)
        cudaStreamDestroy(ss[i]);
    /* what the calls around a direct copy cost on their own: 1000 of each on an idle
     * stream, medians of 9 batches */
    enum { NC = 5, CB = 9, CN = 1000 };
    static const char *const calls[NC] = {"cudaStreamSynchronize (idle)", "cudaStreamQuery (idle)",
                                          "cudaSetDevice (current)", "cudaGetDevice",
                                          "fhr_stream_sync (idle)"};
    for (int c = 0; c < NC; c++) {
        double t[CB];
        for (int b = 0; b < CB; b++) {
            int dev = 0;
            double t0 = now();
            for (int i = 0; i < CN; i++) {
                if (c == 0)
                    cu_check(cudaStreamSynchronize(k->rs), "cudaStreamSynchronize");
                else if (c == 1)
                    cu_check(cudaStreamQuery(k->rs), "cudaStreamQuery");
                else if (c == 2)
                    cu_check(cudaSetDevice(0), "cudaSetDevice");
                else if (c == 3)
                    cu_check(cudaGetDevice(&dev), "cudaGetDevice");
                else
                    wait_path(k, BACKEND);
            }
            t[b] = (now() - t0) / CN;
        }
        char what[96];
        snprintf(what, sizeof what, "probe call %s", calls[c]);
        row_x(k, what, 0, median(t, CB) * 1e6, 0, "us", "", "(us per call)");
    }
}

/* ---- --caller-probe: one staged chunk by hand, towards the device --------------------
 * At 64 to 384 KiB, ten rows a round in a fixed-seed shuffled order, medians of 41
 * rounds: CUDA's pageable call; fheplan's copy; one chunk by hand (a stream query, a libc
 * memcpy into a pinned slot of 1 MiB, the DMA, an event, a stream sync), also without the
 * event, as two chunks, and with a non-temporal fill by the caller alone or split over 2
 * or 4 threads; the slot's DMA alone, and the fill alone. The hand-made chunks' own steps
 * are timed too. First, at 40 KiB, 200 KiB and 4 MiB, whether CUDA's call reads its
 * source after the stream's earlier work (order_probe). What a staged copy could reach
 * here, against what it does. */
typedef struct later_fill {
    unsigned char *p;
    size_t n;
} later_fill;

static void CUDART_CB fill_5a(void *arg)
{
    later_fill *l = arg;
    memset(l->p, 0x5a, l->n);
}

/* What CUDA's own pageable copy towards the device does behind earlier work on its
 * stream: a 20 ms kernel, then a host function that writes the source (0x5a), then the
 * copy; the source is scribbled (0xab) the moment the call returns. Prints how many bytes
 * arrived from each moment. */
static void order_probe(bench *k, size_t n)
{
    cudaStream_t rs = k->rs;
    later_fill l = {k->pageable, n};
    fhr_error err;
    fhr_error_init(&err);
    memset(k->pageable, 0, n);
    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
    if (fhk_spin(k->s, 20000000, &err) != FHR_OK)
        die("fhk_spin", err.message);
    cu_check(cudaLaunchHostFunc(rs, fill_5a, &l), "cudaLaunchHostFunc");
    cu_check(cudaMemcpyAsync(k->dev, k->pageable, n, cudaMemcpyHostToDevice, rs),
             "cudaMemcpyAsync");
    memset(k->pageable, 0xab, n);
    cu_check(cudaMemcpyAsync(k->pin, k->dev, n, cudaMemcpyDeviceToHost, rs), "cudaMemcpyAsync");
    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
    size_t c[4] = {0, 0, 0, 0}; /* 0x5a, 0, 0xab, other */
    const unsigned char *got = k->pin;
    for (size_t i = 0; i < n; i++)
        c[got[i] == 0x5a ? 0 : got[i] == 0 ? 1 : got[i] == 0xab ? 2 : 3]++;
    char tx[224];
    snprintf(tx, sizeof tx, "(bytes: %zu in order, %zu from before the earlier work, %zu from "
             "after the call returned, %zu other)", c[0], c[1], c[2], c[3]);
    row_x(k, "caller probe order: CUDA's call", n, (double)c[0], (double)n, "B", "", tx);
}

static void run_caller_probe(bench *k)
{
    enum { NP = 10, REPS = 41, NB = 4 };
    static const char *const names[NP] = {
        "CUDA's call",        "fheplan's copy",     "one chunk by hand", "one chunk, no event",
        "two chunks by hand", "the DMA alone",      "the fill alone",    "one chunk, NT fill",
        "one chunk, NT fill over 2 threads",        "one chunk, NT fill over 4 threads"};
    static const char *const steps[NB] = {"query", "fill", "DMA and event calls", "sync"};
    static const size_t sz[] = {64u << 10, 96u << 10, 128u << 10, 192u << 10, 256u << 10,
                                384u << 10};
    void *slot = NULL;
    cudaEvent_t ev;
    cu_check(cudaHostAlloc(&slot, 1u << 20, cudaHostAllocPortable), "cudaHostAlloc");
    cu_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    memset(slot, 0, 1u << 20);
    /* helpers for the split fills: one thread (2 with the caller) and three (4) */
    copy_pool *pool[2];
    fhr_error err;
    fhr_error_init(&err);
    for (int i = 0; i < 2; i++) {
        if (copy_pool_create(i ? 3 : 1, &pool[i], &err) != FHR_OK)
            die("copy_pool_create", err.message);
        copy_pool_set_spin(pool[i], 50000);
    }
    copy_split split;
    memset(&split, 0, sizeof split);
    cudaStream_t rs = k->rs;
    order_probe(k, 40u << 10);
    order_probe(k, 200u << 10);
    order_probe(k, 4u << 20);
    for (size_t z = 0; z < sizeof sz / sizeof *sz; z++) {
        size_t n = sz[z], h = n / 2;
        double t[NP][REPS], b[NP][NB][REPS];
        unsigned rng = 4242;
        for (int r = -1; r < REPS; r++) {
            int order[NP];
            shuffle(order, NP, &rng);
            for (int q = 0; q < NP; q++) {
                int p = order[q];
                double t0 = now(), t1 = t0, t2 = t0, t3 = t0;
                if (p == 0) {
                    cu_check(cudaMemcpyAsync(k->dev, k->pageable, n, cudaMemcpyHostToDevice, rs),
                             "cudaMemcpyAsync");
                    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                } else if (p == 1) {
                    enqueue(k, PAGE_TO_DEV, BACKEND, n);
                    wait_path(k, BACKEND);
                } else if (p == 2 || p == 3 || p >= 7) {
                    if (cudaStreamQuery(rs) != cudaSuccess)
                        cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                    t1 = now();
                    if (p == 2 || p == 3)
                        memcpy(slot, k->pageable, n);
                    else if (p == 7)
                        copy_stream(slot, k->pageable, n);
                    else {
                        int parts = p == 8 ? 2 : 4;
                        copy_pool_submit_split(pool[p - 8], &split, copy_stream, slot,
                                               k->pageable, n, n / (size_t)parts);
                        copy_pool_wait_split(pool[p - 8], &split);
                    }
                    t2 = now();
                    cu_check(cudaMemcpyAsync(k->dev, slot, n, cudaMemcpyHostToDevice, rs),
                             "cudaMemcpyAsync");
                    if (p != 3)
                        cu_check(cudaEventRecord(ev, rs), "cudaEventRecord");
                    t3 = now();
                    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                } else if (p == 4) {
                    if (cudaStreamQuery(rs) != cudaSuccess)
                        cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                    for (size_t off = 0; off < n; off += h) {
                        memcpy((char *)slot + off, k->pageable + off, h);
                        cu_check(cudaMemcpyAsync((char *)k->dev + off, (char *)slot + off, h,
                                                 cudaMemcpyHostToDevice, rs),
                                 "cudaMemcpyAsync");
                    }
                    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                } else if (p == 5) {
                    cu_check(cudaMemcpyAsync(k->dev, slot, n, cudaMemcpyHostToDevice, rs),
                             "cudaMemcpyAsync");
                    cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
                } else {
                    memcpy(slot, k->pageable, n);
                }
                double t4 = now();
                if (r < 0)
                    continue;
                t[p][r] = t4 - t0;
                b[p][0][r] = t1 - t0;
                b[p][1][r] = t2 - t1;
                b[p][2][r] = t3 - t2;
                b[p][3][r] = t4 - t3;
            }
        }
        double base = median(t[0], REPS);
        for (int p = 0; p < NP; p++) {
            char what[96];
            snprintf(what, sizeof what, "caller probe %s", names[p]);
            row_x(k, what, n, median(t[p], REPS) * 1e6, base * 1e6, "us", "",
                  "(us per copy and its wait; ratio: time / CUDA's call)");
            if (p != 2 && p < 7)
                continue;
            char tx[160];
            int at = snprintf(tx, sizeof tx, "(steps, us:");
            for (int i = 0; i < NB; i++)
                at += snprintf(tx + at, sizeof tx - (size_t)at, " %s %.2f%s", steps[i],
                               median(b[p][i], REPS) * 1e6, i + 1 < NB ? "," : ")");
            snprintf(what, sizeof what, "caller probe   its steps");
            row_x(k, what, n, 0, 0, "us", "", tx);
        }
    }
    for (int i = 0; i < 2; i++)
        copy_pool_destroy(pool[i]);
    cudaEventDestroy(ev);
    cudaFreeHost(slot);
}

/* Median CPU time per enqueue in microseconds (batches of 200, no wait in between). */
static double enqueue_cost(bench *k, dir d, path p, size_t n)
{
    double t[MAX_REPS];
    for (int r = 0; r < k->reps; r++) {
        double t0 = now();
        for (int i = 0; i < 200; i++)
            enqueue(k, d, p, n);
        t[r] = (now() - t0) / 200 * 1e6;
        wait_path(k, p);
    }
    return median(t, k->reps);
}

/* ---- host memcpy with T threads ------------------------------------------------------
 * A team of persistent threads (the caller is one of them) released together by a
 * barrier for each copy, so that a measurement counts the copy, not thread creation. */

typedef struct team team;
typedef struct member {
    team *t;
    int idx;
} member;

struct team {
    int n;
    copy_fn fn;  /* copy_plain unless set */
    size_t ring; /* 0: dst as long as src; else each member cycles pieces through its share */
    pthread_barrier_t start, done;
    unsigned char *dst;
    const unsigned char *src;
    size_t len;
    int stop;
    pthread_t th[MAX_TEAM];
    member m[MAX_TEAM];
};

#define FILL_PIECE ((size_t)4 << 20) /* the default staging slot */

static void team_slice(team *t, int i)
{
    size_t part = t->len / (size_t)t->n, off = (size_t)i * part;
    size_t len = i == t->n - 1 ? t->len - off : part;
    if (!t->ring) {
        t->fn(t->dst + off, t->src + off, len);
        return;
    }
    /* as the staging pipeline: pieces of a slot's size cycling through a few slots */
    size_t share = t->ring / (size_t)t->n / FILL_PIECE * FILL_PIECE;
    if (share < FILL_PIECE)
        share = FILL_PIECE;
    unsigned char *base = t->dst + (size_t)i * share;
    for (size_t done = 0, pos = 0; done < len; pos = (pos + FILL_PIECE) % share) {
        size_t l = len - done < FILL_PIECE ? len - done : FILL_PIECE;
        t->fn(base + pos, t->src + off + done, l);
        done += l;
    }
}

static void *team_main(void *arg)
{
    member *m = arg;
    team *t = m->t;
    for (;;) {
        pthread_barrier_wait(&t->start);
        if (t->stop)
            return NULL;
        team_slice(t, m->idx);
        pthread_barrier_wait(&t->done);
    }
}

static void team_start(team *t, int n)
{
    t->n = n;
    t->stop = 0;
    t->fn = copy_plain;
    t->ring = 0;
    pthread_barrier_init(&t->start, NULL, (unsigned)n);
    pthread_barrier_init(&t->done, NULL, (unsigned)n);
    for (int i = 1; i < n; i++) {
        t->m[i] = (member){t, i};
        if (pthread_create(&t->th[i], NULL, team_main, &t->m[i]) != 0)
            die("pthread_create", "cannot start a host memcpy thread");
    }
}

static void team_copy(team *t, unsigned char *dst, const unsigned char *src, size_t len)
{
    t->dst = dst;
    t->src = src;
    t->len = len;
    pthread_barrier_wait(&t->start);
    team_slice(t, 0);
    pthread_barrier_wait(&t->done);
}

static void team_stop(team *t)
{
    t->stop = 1;
    pthread_barrier_wait(&t->start);
    for (int i = 1; i < t->n; i++)
        pthread_join(t->th[i], NULL);
    pthread_barrier_destroy(&t->start);
    pthread_barrier_destroy(&t->done);
}

/* Median bandwidth of a pageable -> pageable memcpy of n bytes by the team. */
static double host_memcpy(bench *k, team *t, unsigned char *dst, size_t n)
{
    double v[MAX_REPS];
    int reps = reps_at(k, n);
    team_copy(t, dst, k->pageable, n); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        team_copy(t, dst, k->pageable, n);
        v[r] = now() - t0;
    }
    return (double)n / median(v, reps) / 1e9;
}

/* ---- output ------------------------------------------------------------------------ */

/* One result row; json_extra (", \"key\": value" pairs) and text_extra may be "". */
static void row_x(bench *k, const char *what, size_t n, double ours, double raw, const char *unit,
                  const char *json_extra, const char *text_extra)
{
    double ratio = raw > 0 ? ours / raw : 0;
    FILE *jf = k->json ? stdout : k->jf;
    if (jf) {
        fprintf(jf, "%s\n  {\"case\": \"%s\", \"bytes\": %zu, \"backend\": %.4f, "
                "\"raw\": %.4f, \"ratio\": %.4f, \"unit\": \"%s\"%s}",
                k->first_row ? "" : ",", what, n, ours, raw, ratio, unit, json_extra);
        k->first_row = 0;
        fflush(jf);
    }
    if (!k->json) {
        printf("%-40s %10zu KiB %10.2f %10.2f %7.3f  %s%s%s\n", what, n >> 10, ours, raw, ratio,
               unit, *text_extra ? "  " : "", text_extra);
        fflush(stdout);
    }
}

static void row(bench *k, const char *what, size_t n, double ours, double raw, const char *unit)
{
    row_x(k, what, n, ours, raw, unit, "", "");
}

/* The yardstick row of a staged copy of n bytes: the best host memcpy at that size. */
static void row_vs_host(bench *k, const char *what, size_t n, double ours, const char *json_more,
                        const char *text_more)
{
    int i = 0;
    while (i < k->nsizes - 1 && k->sizes[i] != n)
        i++;
    char js[256], tx[256];
    snprintf(js, sizeof js, ", \"host_threads\": %d%s", k->best_threads[i], json_more);
    snprintf(tx, sizeof tx, "(best host memcpy: %d thread%s)%s%s", k->best_threads[i],
             k->best_threads[i] > 1 ? "s" : "", *text_more ? " " : "", text_more);
    row_x(k, what, n, ours, k->best_host[i], "GB/s", js, tx);
}

static void run_bandwidth(bench *k)
{
    if (!k->json)
        printf("%-40s %14s %10s %10s %7s\n", "case (backend vs raw)", "size", "backend", "raw",
               "ratio");
    for (int d = PIN_TO_DEV; d <= DEV_TO_PAGE; d++) {
        path raw = d == PIN_TO_DEV || d == DEV_TO_PIN ? RAW_ASYNC : RAW_SYNC;
        for (int i = 0; i < k->nsizes; i++) {
            size_t n = k->sizes[i];
            char what[64];
            snprintf(what, sizeof what, "%s%s", dir_names[d],
                     raw == RAW_SYNC ? " (raw: cudaMemcpy)" : "");
            /* paired as the side-by-side rows: all of one path, then all of the other,
             * read a 256 KiB pageable copy at 0.78x on the H200 host where the two in
             * turns read 0.99x */
            double bw, rbw;
            bandwidth_pair(k, (dir)d, n, raw, &bw, &rbw);
            if (d == PIN_TO_DEV)
                k->pinned[i] = bw;
            row(k, what, n, bw, rbw, "GB/s");
        }
    }
}

/* The yardstick first: at every size, host memcpy with 1..cores threads; the best. */
static void run_host(bench *k)
{
    unsigned char *dst = malloc(k->max);
    if (!dst)
        die("malloc", "no memory for the host memcpy target");
    memset(dst, 1, k->max);
    for (int t = 1; t <= k->cores; t++) {
        team tm;
        team_start(&tm, t);
        for (int i = 0; i < k->nsizes; i++) {
            double bw = host_memcpy(k, &tm, dst, k->sizes[i]);
            if (bw > k->best_host[i]) {
                k->best_host[i] = bw;
                k->best_threads[i] = t;
            }
            /* the whole curve at the largest size, the best at every size below */
            if (i == k->nsizes - 1) {
                char what[64];
                snprintf(what, sizeof what, "host memcpy %d thread%s", t, t > 1 ? "s" : "");
                row(k, what, k->sizes[i], bw, 0, "GB/s");
            }
        }
        team_stop(&tm);
    }
    free(dst);
    for (int i = 0; i < k->nsizes; i++) {
        char js[64], tx[64];
        snprintf(js, sizeof js, ", \"host_threads\": %d", k->best_threads[i]);
        snprintf(tx, sizeof tx, "(%d thread%s)", k->best_threads[i],
                 k->best_threads[i] > 1 ? "s" : "");
        row_x(k, "best host memcpy", k->sizes[i], k->best_host[i], 0, "GB/s", js, tx);
    }
}

/* The staged paths against the yardstick, at every size; pageable->cuda also against
 * pinned->cuda of this run (the link: the fair yardstick where memcpy runs from caches). */
static void run_staged_vs_host(bench *k)
{
    for (int i = 0; i < k->nsizes; i++) {
        double bw = bandwidth(k, PAGE_TO_DEV, BACKEND, k->sizes[i]);
        double over = k->pinned[i] > 0 ? bw / k->pinned[i] : 0;
        char js[128], tx[96];
        snprintf(js, sizeof js, ", \"pinned_gbps\": %.4f, \"over_pinned\": %.4f", k->pinned[i],
                 over);
        snprintf(tx, sizeof tx, "/ pinned->cuda %.2f = %.3f", k->pinned[i], over);
        row_vs_host(k, "pageable->cuda vs best host memcpy", k->sizes[i], bw, js, tx);
    }
    for (int i = 0; i < k->nsizes; i++)
        row_vs_host(k, "cuda->pageable vs best host memcpy", k->sizes[i],
                    bandwidth(k, DEV_TO_PAGE, BACKEND, k->sizes[i]), "", "");
}

/* Median microseconds of a libc memcpy of n bytes from the pageable buffer into the
 * pinned one: the host stage that any staged copy (the caller's one chunk) runs before
 * its DMA, and cannot overlap with it when the copy is one chunk. */
static double fill_us(bench *k, size_t n)
{
    double t[MAX_REPS];
    int reps = reps_at(k, n);
    memcpy(k->pin, k->pageable, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        memcpy(k->pin, k->pageable, n);
        t[r] = now() - t0;
    }
    return median(t, reps) * 1e6;
}

/* (a) pageable->cuda and cuda->pageable side by side: fheplan's path (CUDA's own below
 * FHEPLAN_STAGING_DIRECT, the staging pipeline from it) against CUDA's own pageable
 * cudaMemcpyAsync, and against the pinned link of this run. */
static void pageable_row(bench *k, const staging_shape *sh, int d, size_t n, double pinned)
{
    double ours, cuda, waited = 0;
    const char *via = small_path_name(n, sh, d == PAGE_TO_DEV);
    /* CUDA's own call towards the device: also CUDA's own after a stream wait, the same
     * work as ours, to tell the wait's cost from spread */
    if (n < SMALL_BELOW && d == PAGE_TO_DEV && !strcmp(via, "direct"))
        bandwidth_turns(k, (dir)d, n, RAW_ASYNC, &ours, &cuda, &waited);
    else
        bandwidth_pair(k, (dir)d, n, RAW_ASYNC, &ours, &cuda);
    double over = pinned > 0 ? ours / pinned : 0;
    char what[64], js[288], tx[224];
    snprintf(what, sizeof what, "%s vs CUDA pageable", dir_names[d]);
    snprintf(js, sizeof js, ", \"path\": \"%s\", \"pinned_gbps\": %.4f, "
             "\"over_pinned\": %.4f, \"cuda_waited_gbps\": %.4f", via, pinned, over, waited);
    if (waited > 0) {
        /* why one staged chunk cannot beat CUDA's call here: its fill, then its DMA */
        double fill = fill_us(k, n), dma = pinned > 0 ? (double)n / pinned / 1e3 : 0;
        size_t jl = strlen(js);
        snprintf(js + jl, sizeof js - jl, ", \"fill_us\": %.2f, \"pinned_us\": %.2f", fill,
                 dma);
        snprintf(tx, sizeof tx, "%s; / pinned->cuda %.2f = %.3f; CUDA's after a stream wait "
                 "%.2f: x%.3f; one chunk's floor %.1f+%.1f us against CUDA's %.1f", via, pinned,
                 over, waited, ours / waited, fill, dma, (double)n / cuda / 1e3);
    } else
        snprintf(tx, sizeof tx, "%s; / pinned->cuda %.2f = %.3f", via, pinned, over);
    row_x(k, what, n, ours, cuda, "GB/s", js, tx);
}

/* (every power of two below SMALL_BELOW, then the run's sizes from it) */
static void run_pageable_paths(bench *k, const staging_shape *sh)
{
    double pin_small[N_SMALL];
    for (size_t j = 0; j < N_SMALL && small_sizes[j] <= k->max; j++)
        pin_small[j] = bandwidth(k, PIN_TO_DEV, BACKEND, small_sizes[j]);
    for (int d = PAGE_TO_DEV; d <= DEV_TO_PAGE; d++) {
        for (size_t j = 0; j < N_SMALL && small_sizes[j] <= k->max; j++)
            pageable_row(k, sh, d, small_sizes[j], pin_small[j]);
        for (int i = 0; i < k->nsizes; i++)
            if (k->sizes[i] >= SMALL_BELOW)
                pageable_row(k, sh, d, k->sizes[i], k->pinned[i]);
    }
}

/* ---- (b) pinned growth: cudaHostAlloc against mmap + cudaHostRegister --------------- */

/* Seconds to pin `count` buffers of n bytes and release them again, by either way. */
static double pin_cycle(int registered, size_t n, int count)
{
    void *p[64];
    double t0 = now();
    for (int i = 0; i < count; i++) {
        if (registered) {
            p[i] = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p[i] == MAP_FAILED)
                die("mmap", "no memory to pin");
            cu_check(cudaHostRegister(p[i], n, cudaHostRegisterPortable), "cudaHostRegister");
        } else {
            cu_check(cudaHostAlloc(&p[i], n, cudaHostAllocPortable), "cudaHostAlloc");
        }
    }
    for (int i = 0; i < count; i++) {
        if (registered) {
            cu_check(cudaHostUnregister(p[i]), "cudaHostUnregister");
            munmap(p[i], n);
        } else {
            cu_check(cudaFreeHost(p[i]), "cudaFreeHost");
        }
    }
    return now() - t0;
}

/* Seconds for a fresh backend's pinned pool to hand out `count` x n bytes (the pool
 * grows an arena per request that exceeds 256 MiB of room), FHEPLAN_PINNED_HOSTALLOC
 * choosing the way it pins. The backend is destroyed afterwards (not timed). */
/* A fresh CUDA backend's pinned pool handing out count blocks of n bytes: the seconds the
 * allocations take (then freed, with the backend). */
static double pool_fill_timed(size_t n, int count, const char *what)
{
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    if (fhr_backend_cuda_create(&b, &err) != FHR_OK)
        die(what, err.message);
    void *p[64];
    double t0 = now();
    for (int i = 0; i < count; i++)
        if (b->ops->alloc(b, fhr_loc_pinned(), n, NULL, &p[i], &err) != FHR_OK)
            die("pinned pool", err.message);
    double t = now() - t0;
    for (int i = 0; i < count; i++)
        b->ops->free(b, fhr_loc_pinned(), p[i], n, NULL);
    fhr_backend_destroy(b);
    return t;
}

static double pool_fill(int hostalloc, size_t n, int count)
{
    char *old = getenv("FHEPLAN_PINNED_HOSTALLOC");
    char keep[8] = "";
    snprintf(keep, sizeof keep, "%s", old ? old : "");
    if (hostalloc)
        setenv("FHEPLAN_PINNED_HOSTALLOC", "1", 1);
    else
        unsetenv("FHEPLAN_PINNED_HOSTALLOC");
    double t = pool_fill_timed(n, count, "backend (pinned pool)");
    if (*keep)
        setenv("FHEPLAN_PINNED_HOSTALLOC", keep, 1);
    else
        unsetenv("FHEPLAN_PINNED_HOSTALLOC");
    return t;
}

static void run_pin_growth(bench *k)
{
    size_t n64 = (size_t)64 << 20, n180 = (size_t)180 << 20;
    double ha[MAX_REPS], rg[MAX_REPS];
    for (int r = 0; r < k->reps; r++) {
        ha[r] = pin_cycle(0, n64, 1) * 1e3;
        rg[r] = pin_cycle(1, n64, 1) * 1e3;
    }
    /* "backend" is the registration way, "raw" cudaHostAlloc: ratio > 1 is slower */
    row_x(k, "pin+unpin 64 MiB: register vs HostAlloc", n64, median(rg, k->reps),
          median(ha, k->reps), "ms", ", \"backend_way\": \"mmap+cudaHostRegister\"",
          "(mmap+cudaHostRegister / cudaHostAlloc; lower is faster)");
    /* 48 keys of 180 MiB, one pass each (about 8.4 GiB pinned at once) */
    int reps = k->reps < 3 ? k->reps : 3;
    for (int r = 0; r < reps; r++) {
        ha[r] = pin_cycle(0, n180, 48) * 1e3;
        rg[r] = pin_cycle(1, n180, 48) * 1e3;
    }
    row_x(k, "pin+unpin 48 x 180 MiB: register vs HostAlloc", 48 * n180, median(rg, reps),
          median(ha, reps), "ms", ", \"backend_way\": \"mmap+cudaHostRegister\"",
          "(medians of 3; lower is faster)");
    for (int r = 0; r < reps; r++) {
        ha[r] = pool_fill(1, n180, 48) * 1e3;
        rg[r] = pool_fill(0, n180, 48) * 1e3;
    }
    row_x(k, "pinned pool 48 x 180 MiB: register vs HostAlloc", 48 * n180, median(rg, reps),
          median(ha, reps), "ms", ", \"backend_way\": \"pool, default arenas\"",
          "(fheplan's pool, default vs FHEPLAN_PINNED_HOSTALLOC=1; medians of 3)");
}

static void run_enqueue(bench *k)
{
    size_t n = 64u << 10;
    row(k, "enqueue pinned->cuda (CPU)", n, enqueue_cost(k, PIN_TO_DEV, BACKEND, n),
        enqueue_cost(k, PIN_TO_DEV, RAW_ASYNC, n), "us");
    row(k, "enqueue cuda->pinned (CPU)", n, enqueue_cost(k, DEV_TO_PIN, BACKEND, n),
        enqueue_cost(k, DEV_TO_PIN, RAW_ASYNC, n), "us");
}

/* ---- two devices ------------------------------------------------------------------- */

/* Median GB/s of one peer copy of n bytes, from device `from` to the other. */
static double peer_bandwidth(bench *k, int from, int raw, size_t n)
{
    double t[MAX_REPS];
    void *dst = from == 0 ? k->dev1 : k->dev, *src = from == 0 ? k->dev : k->dev1;
    fhr_location dl = fhr_loc_cuda(1 - from), sl = fhr_loc_cuda(from);
    fhr_stream *s = from == 0 ? k->s1 : k->s; /* the destination's stream, as the manager */
    cudaStream_t rs = from == 0 ? k->raw1 : k->raw;
    for (int r = -1; r < k->reps; r++) {
        double t0 = now();
        if (raw) {
            cu_check(cudaMemcpyPeerAsync(dst, 1 - from, src, from, n, rs), "cudaMemcpyPeerAsync");
            cu_check(cudaStreamSynchronize(rs), "cudaStreamSynchronize");
        } else {
            fhr_error err;
            fhr_error_init(&err);
            if (k->b->ops->copy(k->b, dst, dl, src, sl, n, s, &err) != FHR_OK)
                die("backend peer copy", err.message);
            if (fhr_stream_sync(k->b, s, &err) != FHR_OK)
                die("backend peer copy", err.message);
        }
        if (r >= 0) /* the first is a warm-up */
            t[r] = now() - t0;
    }
    return (double)n / median(t, k->reps) / 1e9;
}

/* Median aggregate GB/s of pinned -> device copies of n bytes each onto both devices at
 * once (two pinned buffers, two streams), or onto cuda:0 alone (both = 0). */
static double pinned_both(bench *k, int both, size_t n)
{
    double t[MAX_REPS];
    for (int r = -1; r < k->reps; r++) {
        fhr_error err;
        fhr_error_init(&err);
        double t0 = now();
        if (k->b->ops->copy(k->b, k->dev, fhr_loc_cuda(0), k->pin, fhr_loc_pinned(), n, k->s,
                            &err) != FHR_OK ||
            (both && k->b->ops->copy(k->b, k->dev1, fhr_loc_cuda(1), k->pin1, fhr_loc_pinned(),
                                     n, k->s1, &err) != FHR_OK))
            die("backend copy", err.message);
        if (fhr_stream_sync(k->b, k->s, &err) != FHR_OK ||
            (both && fhr_stream_sync(k->b, k->s1, &err) != FHR_OK))
            die("backend copy", err.message);
        if (r >= 0)
            t[r] = now() - t0;
    }
    return (double)(both ? 2 * n : n) / median(t, k->reps) / 1e9;
}

/* The peer link beside the host link, and what two devices loading at once get: the
 * rows that explain a two-rank scaling below 2x (host memory bandwidth, a shared PCIe
 * switch, or neither: then the ranks' own overheads). */
static void run_two(bench *k)
{
    if (k->ndev < 2) {
        fprintf(stderr, "transfer: peer and two-device rows skipped: %d CUDA device%s visible "
                "(they need two)\n", k->ndev, k->ndev == 1 ? "" : "s");
        return;
    }
    int ab = 0, ba = 0;
    cudaDeviceCanAccessPeer(&ab, 0, 1);
    cudaDeviceCanAccessPeer(&ba, 1, 0);
    if (!k->json)
        printf("peer access cuda:0<->cuda:1: %s\n", ab && ba ? "yes (direct: NVLink or the PCIe "
               "switch)" : "no (the driver stages peer copies through host memory)");
    for (size_t n = 64u << 10; n <= k->max; n *= 4) {
        row(k, "cuda:0->cuda:1 (raw: MemcpyPeer)", n, peer_bandwidth(k, 0, 0, n),
            peer_bandwidth(k, 0, 1, n), "GB/s");
        row(k, "cuda:1->cuda:0 (raw: MemcpyPeer)", n, peer_bandwidth(k, 1, 0, n),
            peer_bandwidth(k, 1, 1, n), "GB/s");
    }
    double one = pinned_both(k, 0, k->max), two = pinned_both(k, 1, k->max);
    row(k, "pinned->cuda, one device", k->max, one, 0, "GB/s");
    row(k, "pinned->cuda, two at once (sum)", k->max, two, 0, "GB/s");
    row(k, "two devices at once vs one", k->max, two, one, "GB/s");
    double peer = peer_bandwidth(k, 0, 0, k->max);
    row(k, "peer vs pinned->cuda", k->max, peer, one, "GB/s");
}

/* ---- setup ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: transfer [--json] [--json-file PATH] [--two-gpu] [--reps N (5..64, "
                    "default 7)] [--max-mib M (default 1024)] [--staging-sweep] [--host-only] "
                    "[--variants [--growth-reps N (1..64, default 5)] [--no-growth]] "
                    "[--small-variants] "
                    "[--direct-probe] [--caller-probe]\n");
    exit(2);
}

static void parse_args(bench *k, int argc, char **argv)
{
    k->reps = 7;
    k->growth_reps = 5;
    k->max = (size_t)1 << 30;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--json") == 0)
            k->json = 1;
        else if (strcmp(argv[i], "--staging-sweep") == 0)
            k->sweep = 1;
        else if (strcmp(argv[i], "--host-only") == 0)
            k->host_only = 1;
        else if (strcmp(argv[i], "--two-gpu") == 0)
            k->two_only = 1;
        else if (strcmp(argv[i], "--variants") == 0)
            k->variants = 1;
        else if (strcmp(argv[i], "--no-growth") == 0)
            k->no_growth = 1;
        else if (strcmp(argv[i], "--small-variants") == 0)
            k->variants = k->small_only = 1;
        else if (strcmp(argv[i], "--direct-probe") == 0)
            k->probe = 1;
        else if (strcmp(argv[i], "--caller-probe") == 0)
            k->probe = 2;
        else if (strcmp(argv[i], "--growth-reps") == 0 && i + 1 < argc)
            k->growth_reps = (int)strtol(argv[++i], &end, 10);
        else if (strcmp(argv[i], "--json-file") == 0 && i + 1 < argc) {
            k->jf = fopen(argv[++i], "w");
            if (!k->jf)
                die("--json-file", argv[i]);
        }
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            k->reps = (int)strtol(argv[++i], &end, 10);
        else if (strcmp(argv[i], "--max-mib") == 0 && i + 1 < argc)
            k->max = (size_t)strtoul(argv[++i], &end, 10) << 20;
        else
            usage();
        if (end && *end)
            usage();
    }
    if (k->reps < 5 || k->reps > MAX_REPS || k->max < (64u << 10) || k->max > ((size_t)64 << 30) ||
        k->growth_reps < 1 || k->growth_reps > MAX_REPS)
        usage();
    for (size_t n = 64u << 10; n <= k->max && k->nsizes < MAX_SIZES; n *= 4)
        k->sizes[k->nsizes++] = n;
    k->cores = staging_cores();
    if (k->cores > MAX_TEAM)
        k->cores = MAX_TEAM;
}

/* A backend of the current environment (FHEPLAN_COPY_THREADS, FHEPLAN_STAGING_CHUNK)
 * with k->max bytes on cuda:0 and, unless no_pinned, in the pinned pool. */
static void open_backend(bench *k, int no_pinned)
{
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = fhr_backend_cuda_create(&k->b, &err);
    if (st == FHR_E_UNSUPPORTED) {
        fprintf(stderr, "transfer: skipped: %s\n", err.message);
        exit(SKIPPED);
    }
    if (st != FHR_OK)
        die("backend", err.message);
    if (fhr_stream_create(k->b, fhr_loc_cuda(0), &k->s, &err) != FHR_OK ||
        k->b->ops->alloc(k->b, fhr_loc_cuda(0), k->max, k->s, &k->dev, &err) != FHR_OK ||
        (!no_pinned &&
         k->b->ops->alloc(k->b, fhr_loc_pinned(), k->max, k->s, &k->pin, &err) != FHR_OK))
        die("setup", err.message);
    if (k->pin)
        memset(k->pin, 3, k->max);
    if (fhr_stream_sync(k->b, k->s, &err) != FHR_OK)
        die("setup", err.message);
    void *nat = NULL;
    int ndev = 0;
    if (k->b->ops->stream_native(k->b, k->s, &nat, &ndev, &err) != FHR_OK)
        die("stream_native", err.message);
    k->rs = (cudaStream_t)nat;
}

static void close_backend(bench *k)
{
    k->b->ops->free(k->b, fhr_loc_cuda(0), k->dev, k->max, k->s);
    if (k->pin)
        k->b->ops->free(k->b, fhr_loc_pinned(), k->pin, k->max, k->s);
    fhr_stream_destroy(k->b, k->s);
    fhr_backend_destroy(k->b);
    k->b = NULL;
    k->s = NULL;
    k->dev = k->pin = NULL;
}

static void setup(bench *k)
{
    open_backend(k, 0);
    cu_check(cudaSetDevice(0), "cudaSetDevice");
    cu_check(cudaStreamCreateWithFlags(&k->raw, cudaStreamNonBlocking), "cudaStreamCreate");
    k->pageable = malloc(k->max);
    if (!k->pageable)
        die("malloc", "no memory for the pageable buffer");
    memset(k->pageable, 3, k->max); /* fault every page in before timing */
    k->pageable_ours = malloc(SMALL_BELOW);
    k->pageable_raw = malloc(SMALL_BELOW);
    if (!k->pageable_ours || !k->pageable_raw)
        die("malloc", "no memory for the paired pageable buffers");
    memset(k->pageable_ours, 3, SMALL_BELOW);
    memset(k->pageable_raw, 3, SMALL_BELOW);
    k->ndev = k->b->ops->device_count(k->b);
    if (k->two_only && k->ndev < 2) {
        fprintf(stderr, "transfer: skipped: --two-gpu needs two CUDA devices, %d visible\n",
                k->ndev);
        exit(SKIPPED);
    }
    if (k->ndev >= 2) {
        fhr_error err;
        fhr_error_init(&err);
        if (fhr_stream_create(k->b, fhr_loc_cuda(1), &k->s1, &err) != FHR_OK ||
            k->b->ops->alloc(k->b, fhr_loc_cuda(1), k->max, k->s1, &k->dev1, &err) != FHR_OK ||
            k->b->ops->alloc(k->b, fhr_loc_pinned(), k->max, k->s1, &k->pin1, &err) != FHR_OK)
            die("setup (cuda:1)", err.message);
        cu_check(cudaSetDevice(1), "cudaSetDevice");
        cu_check(cudaStreamCreateWithFlags(&k->raw1, cudaStreamNonBlocking), "cudaStreamCreate");
        cu_check(cudaSetDevice(0), "cudaSetDevice");
        memset(k->pin1, 3, k->max);
        if (fhr_stream_sync(k->b, k->s1, &err) != FHR_OK)
            die("setup (cuda:1)", err.message);
    }
}

/* Frees what the two-device rows used (nothing with one device). */
static void close_two(bench *k)
{
    if (k->ndev < 2 || !k->s1)
        return;
    k->b->ops->free(k->b, fhr_loc_cuda(1), k->dev1, k->max, k->s1);
    k->b->ops->free(k->b, fhr_loc_pinned(), k->pin1, k->max, k->s1);
    fhr_stream_sync(k->b, k->s1, NULL);
    fhr_stream_destroy(k->b, k->s1);
    cudaStreamDestroy(k->raw1);
    k->s1 = NULL;
    k->dev1 = k->pin1 = NULL;
}

static void teardown(bench *k)
{
    if (k->b)
        close_backend(k);
    cudaStreamDestroy(k->raw);
    free(k->pageable);
    free(k->pageable_ours);
    free(k->pageable_raw);
}

/* ---- staging sweep ------------------------------------------------------------------
 * Copy threads x chunk sizes, each a fresh backend (both are read when it is created),
 * pageable <-> cuda at three sizes against the best host memcpy of this run. */

static void run_sweep(bench *k)
{
    int threads[16], nt = 0;
    const int cand[] = {1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    for (size_t i = 0; i < sizeof cand / sizeof *cand && nt < 15; i++)
        if (cand[i] < k->cores && cand[i] <= STAGING_THREADS_LIMIT)
            threads[nt++] = cand[i];
    threads[nt++] = k->cores < STAGING_THREADS_LIMIT ? k->cores : STAGING_THREADS_LIMIT;
    const char *chunks[] = {"", "256K", "1M", "4M", "16M", "64M"};
    /* 4 MiB, 64 MiB, 1 GiB and the largest size, those that --max-mib leaves */
    size_t sizes[4];
    int nz = 0;
    for (int i = 0; i < k->nsizes; i++)
        if (k->sizes[i] == (size_t)4 << 20 || k->sizes[i] == (size_t)64 << 20 ||
            k->sizes[i] == (size_t)1 << 30 || i == k->nsizes - 1)
            sizes[nz++] = k->sizes[i];
    double best[4][2] = {{0}};
    char best_js[4][2][128] = {{""}}, best_tx[4][2][64] = {{""}};
    char *old_t = getenv("FHEPLAN_COPY_THREADS"), *old_c = getenv("FHEPLAN_STAGING_CHUNK");
    char keep_t[32] = "", keep_c[32] = "";
    snprintf(keep_t, sizeof keep_t, "%s", old_t ? old_t : "");
    snprintf(keep_c, sizeof keep_c, "%s", old_c ? old_c : "");
    char *old_d = getenv("FHEPLAN_STAGING_DIRECT");
    char keep_d[32] = "";
    snprintf(keep_d, sizeof keep_d, "%s", old_d ? old_d : "");
    setenv("FHEPLAN_STAGING_DIRECT", "0", 1); /* the sweep measures the pipeline at every size */
    close_backend(k);
    for (int t = 0; t < nt; t++) {
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
            char tv[16];
            snprintf(tv, sizeof tv, "%d", threads[t]);
            setenv("FHEPLAN_COPY_THREADS", tv, 1);
            setenv("FHEPLAN_STAGING_CHUNK", chunks[c], 1);
            open_backend(k, 1);
            for (int z = 0; z < nz; z++) {
                size_t n = sizes[z];
                for (int d = 0; d < 2; d++) {
                    double bw = bandwidth(k, d ? DEV_TO_PAGE : PAGE_TO_DEV, BACKEND, n);
                    char what[64], js[128], tx[64];
                    snprintf(what, sizeof what, "sweep %s",
                             dir_names[d ? DEV_TO_PAGE : PAGE_TO_DEV]);
                    snprintf(js, sizeof js, ", \"copy_threads\": %d, \"chunk\": \"%s\"",
                             threads[t], *chunks[c] ? chunks[c] : "auto");
                    snprintf(tx, sizeof tx, "threads %d chunk %s", threads[t],
                             *chunks[c] ? chunks[c] : "auto");
                    row_vs_host(k, what, n, bw, js, tx);
                    if (bw > best[z][d]) {
                        best[z][d] = bw;
                        snprintf(best_js[z][d], sizeof best_js[z][d], "%s", js);
                        snprintf(best_tx[z][d], sizeof best_tx[z][d], "%s", tx);
                    }
                }
            }
            close_backend(k);
        }
    }
    for (int z = 0; z < nz; z++) {
        size_t n = sizes[z];
        for (int d = 0; d < 2 && best[z][d] > 0; d++) {
            char what[64];
            snprintf(what, sizeof what, "sweep best %s", dir_names[d ? DEV_TO_PAGE : PAGE_TO_DEV]);
            row_vs_host(k, what, n, best[z][d], best_js[z][d], best_tx[z][d]);
        }
    }
    /* back to the caller's environment */
    if (*keep_t)
        setenv("FHEPLAN_COPY_THREADS", keep_t, 1);
    else
        unsetenv("FHEPLAN_COPY_THREADS");
    if (*keep_c)
        setenv("FHEPLAN_STAGING_CHUNK", keep_c, 1);
    else
        unsetenv("FHEPLAN_STAGING_CHUNK");
    if (*keep_d)
        setenv("FHEPLAN_STAGING_DIRECT", keep_d, 1);
    else
        unsetenv("FHEPLAN_STAGING_DIRECT");
}

/* ---- the variant matrix (--variants) -------------------------------------------------
 * What bounds pageable copies from 256 MiB up and how fast the pinned pool grows, each
 * setting side by side in one run: every variant is a fresh backend made under its
 * FHEPLAN_* values (the others unset, so at their defaults). */

static const char *const managed_env[] = {
    "FHEPLAN_COPY_THREADS",    "FHEPLAN_STAGING_CHUNK",   "FHEPLAN_STAGING_DIRECT",
    "FHEPLAN_STAGING_MEMCPY",  "FHEPLAN_STAGING_DEPTH",    "FHEPLAN_PINNED_HOSTALLOC",
    "FHEPLAN_PINNED_PREFAULT", "FHEPLAN_PINNED_HUGEPAGE",  "FHEPLAN_PINNED_ARENA",
    "FHEPLAN_PINNED_AHEAD",    "FHEPLAN_STAGING_SMALL",    "FHEPLAN_STAGING_FILL",
    "FHEPLAN_COPY_SPIN"};
#define N_MANAGED (sizeof managed_env / sizeof *managed_env)

/* Unsets every managed variable, then sets those of `assign` ("NAME=VALUE NAME=VALUE"). */
static void env_apply(const char *assign)
{
    for (size_t i = 0; i < N_MANAGED; i++)
        unsetenv(managed_env[i]);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", assign);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        if (!eq)
            die("variant", w);
        *eq = 0;
        setenv(w, eq + 1, 1);
    }
}

typedef struct variant {
    const char *name, *env;
} variant;

/* Pageable copies: spin, thread count, slot (chunk) size, memcpy kind, fills; `small`:
 * also at every size of small_sizes, against CUDA's own pageable copy (the small-copy
 * paths of FHEPLAN_STAGING_SMALL: `auto` by default). */
typedef struct page_variant {
    const char *name, *env;
    int small;
} page_variant;

static const page_variant page_variants[] = {
    {"default", "", 1},
    {"no spin", "FHEPLAN_COPY_SPIN=0", 1},
    {"small direct", "FHEPLAN_STAGING_SMALL=direct", 1},
    {"small caller", "FHEPLAN_STAGING_SMALL=caller", 1},
    {"caller 128K", "FHEPLAN_STAGING_SMALL=caller FHEPLAN_STAGING_CHUNK=128K", 1},
    {"caller 256K", "FHEPLAN_STAGING_SMALL=caller FHEPLAN_STAGING_CHUNK=256K", 1},
    {"caller 256K libc",
     "FHEPLAN_STAGING_SMALL=caller FHEPLAN_STAGING_CHUNK=256K FHEPLAN_STAGING_MEMCPY=libc", 1},
    {"small parallel", "FHEPLAN_STAGING_SMALL=parallel", 1},
    {"staged", "FHEPLAN_STAGING_DIRECT=0", 1},
    {"spin 20", "FHEPLAN_COPY_SPIN=20", 0},
    {"spin 200", "FHEPLAN_COPY_SPIN=200", 0},
    {"chunk 4M", "FHEPLAN_STAGING_CHUNK=4M", 0},
    {"chunk 8M", "FHEPLAN_STAGING_CHUNK=8M", 0},
    {"chunk 16M", "FHEPLAN_STAGING_CHUNK=16M", 0},
    {"no spin chunk 4M", "FHEPLAN_COPY_SPIN=0 FHEPLAN_STAGING_CHUNK=4M", 0},
    {"threads 4", "FHEPLAN_COPY_THREADS=4", 0},
    {"threads 12", "FHEPLAN_COPY_THREADS=12", 0},
    {"threads 16", "FHEPLAN_COPY_THREADS=16", 0},
    {"depth 2", "FHEPLAN_STAGING_DEPTH=2", 0},
    {"whole fills", "FHEPLAN_STAGING_FILL=whole", 0},
    {"stream", "FHEPLAN_STAGING_MEMCPY=stream", 1},
    {"libc", "FHEPLAN_STAGING_MEMCPY=libc", 1},
};

/* Pinned growth: cudaHostAlloc first (the yardstick), then the ways of registering. */
static const variant pin_variants[] = {
    {"cudaHostAlloc", "FHEPLAN_PINNED_HOSTALLOC=1"},
    {"default", ""},
    {"register, previous shape", /* 256 MiB of pinning per 180 MiB, faulted by the driver */
     "FHEPLAN_PINNED_PREFAULT=none FHEPLAN_PINNED_HUGEPAGE=0 FHEPLAN_PINNED_ARENA=512M"},
    {"threads, 4K pages", "FHEPLAN_PINNED_PREFAULT=threads FHEPLAN_PINNED_HUGEPAGE=0"},
    {"populate, huge pages", "FHEPLAN_PINNED_PREFAULT=populate FHEPLAN_PINNED_HUGEPAGE=1"},
    {"none, huge pages", "FHEPLAN_PINNED_PREFAULT=none FHEPLAN_PINNED_HUGEPAGE=1"},
    {"none, 4K pages", "FHEPLAN_PINNED_PREFAULT=none FHEPLAN_PINNED_HUGEPAGE=0"},
    {"ahead", "FHEPLAN_PINNED_AHEAD=1"},
};

/* Adopting keys: each pinned block filled (one memcpy) before the next is asked for. */
static const variant adopt_variants[] = {
    {"copies alone", NULL},
    {"default", ""},
    {"ahead", "FHEPLAN_PINNED_AHEAD=1"},
    {"cudaHostAlloc", "FHEPLAN_PINNED_HOSTALLOC=1"},
};

/* Seconds for a fresh backend made under `env` to hand out count x n pinned bytes; with
 * src, each block is also filled from src (one memcpy, as an engine's export) before the
 * next is asked for, and with env NULL nothing is allocated: the copies alone. */
static double pool_adopt_env(const char *env, const unsigned char *src, size_t n, int count)
{
    env_apply(env ? env : "");
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    if (fhr_backend_cuda_create(&b, &err) != FHR_OK)
        die("backend (pinned variant)", err.message);
    void *p[64];
    unsigned char *one = NULL;
    if (!env && !(one = malloc(n)))
        die("malloc", "no memory for the copies alone");
    if (one)
        memset(one, 0, n);
    double t0 = now();
    for (int i = 0; i < count; i++) {
        if (env && b->ops->alloc(b, fhr_loc_pinned(), n, NULL, &p[i], &err) != FHR_OK)
            die("pinned pool", err.message);
        memcpy(env ? p[i] : one, src, n);
    }
    double t = now() - t0;
    for (int i = 0; env && i < count; i++)
        b->ops->free(b, fhr_loc_pinned(), p[i], n, NULL);
    free(one);
    fhr_backend_destroy(b);
    return t;
}

/* Seconds for a fresh backend made under `env` to hand out count x n pinned bytes. */
static double pool_fill_env(const char *env, size_t n, int count)
{
    env_apply(env);
    return pool_fill_timed(n, count, "backend (pinned variant)");
}

/* The steps of pinning one 180 MiB arena by hand: mapping (and faulting in) as a shape
 * says, cudaHostRegister, unregistering and unmapping; cudaHostAlloc and cudaFreeHost. */
static void run_pin_steps(bench *k)
{
    size_t n = (size_t)180 << 20;
    copy_pool *cp = NULL;
    fhr_error err;
    fhr_error_init(&err);
    int threads = k->cores < STAGING_DEFAULT_MAX_THREADS ? k->cores : STAGING_DEFAULT_MAX_THREADS;
    if (copy_pool_create(threads, &cp, &err) != FHR_OK)
        die("copy threads", err.message);
    static const struct {
        const char *name;
        pin_prefault pf;
        int huge;
        unsigned flags;
    } steps[] = {
        {"none, 4K", PIN_PREFAULT_NONE, 0, cudaHostRegisterPortable},
        {"none, huge", PIN_PREFAULT_NONE, 1, cudaHostRegisterPortable},
        {"populate, 4K", PIN_PREFAULT_POPULATE, 0, cudaHostRegisterPortable},
        {"populate, huge", PIN_PREFAULT_POPULATE, 1, cudaHostRegisterPortable},
        {"threads, 4K", PIN_PREFAULT_THREADS, 0, cudaHostRegisterPortable},
        {"threads, huge", PIN_PREFAULT_THREADS, 1, cudaHostRegisterPortable},
        {"threads, huge, flags 0", PIN_PREFAULT_THREADS, 1, cudaHostRegisterDefault},
    };
    double ha[MAX_REPS], fh[MAX_REPS];
    for (int r = 0; r < k->reps; r++) {
        void *p = NULL;
        double t0 = now();
        cu_check(cudaHostAlloc(&p, n, cudaHostAllocPortable), "cudaHostAlloc");
        double t1 = now();
        cu_check(cudaFreeHost(p), "cudaFreeHost");
        ha[r] = (t1 - t0) * 1e3;
        fh[r] = (now() - t1) * 1e3;
    }
    double hostalloc = median(ha, k->reps);
    row_x(k, "pin step 180 MiB: cudaHostAlloc", n, hostalloc, hostalloc, "ms", "",
          "(the yardstick of the rows below)");
    row_x(k, "pin step 180 MiB: cudaFreeHost", n, median(fh, k->reps), 0, "ms", "", "");
    for (size_t v = 0; v < sizeof steps / sizeof *steps; v++) {
        pin_shape sh = {0, steps[v].pf, steps[v].huge, PIN_ARENA_DEFAULT, 0};
        double mp[MAX_REPS], rg[MAX_REPS], un[MAX_REPS];
        for (int r = 0; r < k->reps; r++) {
            double t0 = now();
            void *p = pin_map(n, &sh, cp);
            if (!p)
                die("mmap", "no memory to pin");
            double t1 = now();
            cu_check(cudaHostRegister(p, n, steps[v].flags), "cudaHostRegister");
            double t2 = now();
            cu_check(cudaHostUnregister(p), "cudaHostUnregister");
            pin_unmap(p, n);
            mp[r] = (t1 - t0) * 1e3;
            rg[r] = (t2 - t1) * 1e3;
            un[r] = (now() - t2) * 1e3;
        }
        double m = median(mp, k->reps), g = median(rg, k->reps), u = median(un, k->reps);
        char what[96], js[160], tx[160];
        snprintf(what, sizeof what, "pin step 180 MiB: %s", steps[v].name);
        snprintf(js, sizeof js, ", \"map_ms\": %.3f, \"register_ms\": %.3f, \"unpin_ms\": %.3f",
                 m, g, u);
        snprintf(tx, sizeof tx, "(map+fault %.2f + register %.2f ms vs cudaHostAlloc; unpin %.2f "
                 "ms)", m, g, u);
        row_x(k, what, n, m + g, hostalloc, "ms", js, tx);
    }
    copy_pool_destroy(cp);
}

/* Host copies into pinned memory alone, no DMA: what the staging threads can deliver.
 * "slots" cycles 4 MiB pieces through 48 MiB (as the pipeline's slots), "whole" writes
 * as much pinned memory as it reads. */
static void run_fill_ceiling(bench *k, size_t n)
{
    int cand[] = {4, 8, 12, 16};
    for (size_t c = 0; c < sizeof cand / sizeof *cand; c++) {
        int t = cand[c] < k->cores ? cand[c] : k->cores;
        if (c > 0 && t == (cand[c - 1] < k->cores ? cand[c - 1] : k->cores))
            continue;
        team tm;
        team_start(&tm, t);
        for (int kind = 0; kind < 2; kind++)
            for (int ring = 0; ring < 2; ring++) {
                tm.fn = kind ? copy_stream : copy_plain;
                tm.ring = ring ? (size_t)48 << 20 : 0;
                double v[MAX_REPS];
                team_copy(&tm, k->pin, k->pageable, n);
                for (int r = 0; r < k->reps; r++) {
                    double t0 = now();
                    team_copy(&tm, k->pin, k->pageable, n);
                    v[r] = now() - t0;
                }
                double bw = (double)n / median(v, k->reps) / 1e9;
                char what[80], js[128];
                snprintf(what, sizeof what, "host fill %d thr %s %s", t, kind ? "stream" : "libc",
                         ring ? "slots" : "whole");
                snprintf(js, sizeof js, ", \"threads\": %d, \"memcpy\": \"%s\", \"target\": \"%s\"",
                         t, kind ? "stream" : "libc", ring ? "48 MiB of slots" : "whole");
                row_x(k, what, n, bw, 0, "GB/s", js, "(pageable -> pinned, no DMA)");
            }
        team_stop(&tm);
    }
}

/* A small-copy variant at every size below SMALL_BELOW, each direction against CUDA's own
 * pageable cudaMemcpyAsync measured right after it (medians of reps_at: at least 21). */
static void run_small_variant(bench *k, const page_variant *v, const double link[2][N_SMALL])
{
    for (size_t i = 0; i < N_SMALL && small_sizes[i] <= k->max; i++)
        for (int d = 0; d < 2; d++) {
            size_t n = small_sizes[i];
            dir dd = d ? DEV_TO_PAGE : PAGE_TO_DEV;
            double ours, cuda;
            bandwidth_pair(k, dd, n, RAW_ASYNC, &ours, &cuda);
            double l = link[d][i];
            char what[80], js[320], tx[240];
            snprintf(what, sizeof what, "variant small %s %s",
                     d ? "cuda->pageable" : "pageable->cuda", v->name);
            snprintf(js, sizeof js, ", \"variant\": \"%s\", \"env\": \"%s\", \"link_gbps\": "
                     "%.4f, \"over_link\": %.4f, \"reps\": %d", v->name, v->env, l,
                     l > 0 ? ours / l : 0, reps_at(k, n));
            snprintf(tx, sizeof tx, "(/ CUDA pageable; pinned link %.2f: x%.2f; medians of %d) %s",
                     l, l > 0 ? ours / l : 0, reps_at(k, n), v->env);
            row_x(k, what, n, ours, cuda, "GB/s", js, tx);
        }
}

static void run_variants(bench *k, const staging_shape *sh)
{
    char keep[N_MANAGED][64];
    int had[N_MANAGED];
    for (size_t i = 0; i < N_MANAGED; i++) {
        const char *v = getenv(managed_env[i]);
        had[i] = v != NULL;
        snprintf(keep[i], sizeof keep[i], "%s", v ? v : "");
    }
    /* the links of this run, per size, and the default path against CUDA's at every size */
    double link_d2h[MAX_SIZES];
    for (int i = 0; i < k->nsizes; i++) {
        k->pinned[i] = bandwidth(k, PIN_TO_DEV, BACKEND, k->sizes[i]);
        link_d2h[i] = bandwidth(k, DEV_TO_PIN, BACKEND, k->sizes[i]);
        row(k, "link pinned->cuda", k->sizes[i], k->pinned[i], 0, "GB/s");
        row(k, "link cuda->pinned", k->sizes[i], link_d2h[i], 0, "GB/s");
    }
    double link_small[2][N_SMALL];
    for (size_t j = 0; j < N_SMALL && small_sizes[j] <= k->max; j++)
        for (int d = 0; d < 2; d++)
            link_small[d][j] = bandwidth(k, d ? DEV_TO_PIN : PIN_TO_DEV, BACKEND, small_sizes[j]);
    run_pageable_paths(k, sh);
    int big[2], nb = 0;
    if (k->small_only) { /* the small rows of each variant, nothing else */
        close_backend(k);
        for (size_t v = 0; v < sizeof page_variants / sizeof *page_variants; v++) {
            if (!page_variants[v].small)
                continue;
            env_apply(page_variants[v].env);
            open_backend(k, 1);
            run_small_variant(k, &page_variants[v], (const double(*)[N_SMALL])link_small);
            close_backend(k);
        }
        goto restore;
    }
    for (int i = 0; i < k->nsizes; i++)
        if (k->sizes[i] == (size_t)256 << 20 || k->sizes[i] == (size_t)1 << 30)
            big[nb++] = i;
    if (nb == 0)
        big[nb++] = k->nsizes - 1;
    double cuda_page[2][2];
    for (int z = 0; z < nb; z++)
        for (int d = 0; d < 2; d++)
            cuda_page[z][d] = bandwidth(k, d ? DEV_TO_PAGE : PAGE_TO_DEV, RAW_ASYNC,
                                        k->sizes[big[z]]);
    for (int z = 0; z < nb; z++)
        if (k->sizes[big[z]] >= (size_t)256 << 20) /* the slots' ring fits in k->pin */
            run_fill_ceiling(k, k->sizes[big[z]]);
    /* the pageable matrix: fresh backends, no pinned buffer of their own */
    close_backend(k);
    for (size_t v = 0; v < sizeof page_variants / sizeof *page_variants; v++) {
        env_apply(page_variants[v].env);
        open_backend(k, 1);
        if (page_variants[v].small)
            run_small_variant(k, &page_variants[v], (const double(*)[N_SMALL])link_small);
        for (int z = 0; z < nb; z++)
            for (int d = 0; d < 2; d++) {
                int i = big[z];
                size_t n = k->sizes[i];
                uint64_t h0, d0, h1, d1;
                fhr_cuda_staging_waits(k->b, &h0, &d0);
                double bw = bandwidth(k, d ? DEV_TO_PAGE : PAGE_TO_DEV, BACKEND, n);
                fhr_cuda_staging_waits(k->b, &h1, &d1);
                /* per copy (the warm-up included): where the caller blocked */
                double hw = (double)(h1 - h0) / (reps_at(k, n) + 1) * 1e-6,
                       dw = (double)(d1 - d0) / (reps_at(k, n) + 1) * 1e-6;
                double link = d ? link_d2h[i] : k->pinned[i], cuda = cuda_page[z][d];
                char what[80], js[320], tx[240];
                snprintf(what, sizeof what, "variant %s %s",
                         d ? "cuda->pageable" : "pageable->cuda", page_variants[v].name);
                snprintf(js, sizeof js, ", \"variant\": \"%s\", \"env\": \"%s\", \"link_gbps\": "
                         "%.4f, \"cuda_pageable_gbps\": %.4f, \"over_cuda_pageable\": %.4f, "
                         "\"host_wait_ms\": %.3f, \"dma_wait_ms\": %.3f",
                         page_variants[v].name, page_variants[v].env, link, cuda,
                         cuda > 0 ? bw / cuda : 0, hw, dw);
                snprintf(tx, sizeof tx, "(/ pinned link; CUDA pageable %.2f: x%.2f; caller "
                         "waits %.2f ms on threads, %.2f on DMA) %s", cuda,
                         cuda > 0 ? bw / cuda : 0, hw, dw, page_variants[v].env);
                row_x(k, what, n, bw, link, "GB/s", js, tx);
            }
        close_backend(k);
    }
    if (k->no_growth)
        goto restore;
    run_pin_steps(k); /* cheap and telling: before the long growth rows */
    /* pinned growth, 48 x 180 MiB from a fresh pool: each variant against cudaHostAlloc */
    size_t n180 = (size_t)180 << 20;
    double hostalloc = 0;
    for (size_t v = 0; v < sizeof pin_variants / sizeof *pin_variants; v++) {
        double t[MAX_REPS];
        for (int r = 0; r < k->growth_reps; r++)
            t[r] = pool_fill_env(pin_variants[v].env, n180, 48) * 1e3;
        double ms = median(t, k->growth_reps);
        if (v == 0)
            hostalloc = ms;
        char what[96], js[256], tx[200];
        snprintf(what, sizeof what, "pinned growth 48x180M %s", pin_variants[v].name);
        snprintf(js, sizeof js, ", \"variant\": \"%s\", \"env\": \"%s\", \"speedup\": %.3f, "
                 "\"passes\": %d", pin_variants[v].name, pin_variants[v].env,
                 ms > 0 ? hostalloc / ms : 0, k->growth_reps);
        snprintf(tx, sizeof tx, "(/ cudaHostAlloc; %.2fx faster) %s", ms > 0 ? hostalloc / ms : 0,
                 pin_variants[v].env);
        row_x(k, what, 48 * n180, ms, hostalloc, "ms", js, tx);
    }
    /* adopting 48 keys: pinning hidden behind each key's copy (FHEPLAN_PINNED_AHEAD) or
     * not; the copies alone are the floor. Last: the longest rows. */
    double alone = 0;
    int passes = k->growth_reps < 3 ? k->growth_reps : 3;
    for (size_t v = 0; v < sizeof adopt_variants / sizeof *adopt_variants; v++) {
        double t[MAX_REPS];
        for (int r = 0; r < passes; r++)
            t[r] = pool_adopt_env(adopt_variants[v].env, k->pageable, n180, 48) * 1e3;
        double ms = median(t, passes);
        if (v == 0)
            alone = ms;
        const char *env = adopt_variants[v].env ? adopt_variants[v].env : "";
        char what[96], js[256], tx[200];
        snprintf(what, sizeof what, "adopt 48x180M %s", adopt_variants[v].name);
        snprintf(js, sizeof js, ", \"variant\": \"%s\", \"env\": \"%s\", \"passes\": %d",
                 adopt_variants[v].name, env, passes);
        snprintf(tx, sizeof tx, "(/ the copies alone; medians of %d) %s", passes, env);
        row_x(k, what, 48 * n180, ms, alone, "ms", js, tx);
    }
restore: /* back to the caller's environment and a default backend for the teardown */
    for (size_t i = 0; i < N_MANAGED; i++) {
        if (had[i])
            setenv(managed_env[i], keep[i], 1);
        else
            unsetenv(managed_env[i]);
    }
    open_backend(k, 0);
}

int main(int argc, char **argv)
{
    bench k = {.first_row = 1};
    parse_args(&k, argc, argv);
    staging_shape sh;
    fhr_error err;
    fhr_error_init(&err);
    if (staging_shape_parse(getenv("FHEPLAN_COPY_THREADS"), getenv("FHEPLAN_STAGING_CHUNK"),
                            k.cores, &sh, &err) != FHR_OK ||
        staging_direct_parse(getenv("FHEPLAN_STAGING_DIRECT"), &sh, &err) != FHR_OK ||
        staging_memcpy_parse(getenv("FHEPLAN_STAGING_MEMCPY"), &sh, &err) != FHR_OK ||
        staging_depth_parse(getenv("FHEPLAN_STAGING_DEPTH"), &sh, &err) != FHR_OK ||
        staging_small_parse(getenv("FHEPLAN_STAGING_SMALL"), &sh, &err) != FHR_OK ||
        staging_fill_parse(getenv("FHEPLAN_STAGING_FILL"), &sh, &err) != FHR_OK ||
        staging_spin_parse(getenv("FHEPLAN_COPY_SPIN"), &sh, &err) != FHR_OK)
        die("environment", err.message);
    if (k.host_only) { /* the yardstick alone: no GPU needed */
        k.pageable = malloc(k.max);
        if (!k.pageable)
            die("malloc", "no memory for the pageable buffer");
        memset(k.pageable, 3, k.max);
    } else {
        setup(&k);
    }
    FILE *jf = k.json ? stdout : k.jf;
    if (jf)
        fprintf(jf, "{\"reps\": %d, \"small_reps\": %d, \"small_below\": %zu, \"cores\": %d, "
                "\"copy_threads\": %d, \"chunk_min\": %zu, "
                "\"chunk_max\": %zu, \"direct_below\": %zu, \"stream_copy\": %d, "
                "\"small_to\": \"%s\", \"small_from\": \"%s\", \"spin_us\": %ld, "
                "\"split_fill\": %d, "
                "\"copy_threads_env\": \"%s\", \"variants\": %d, \"growth_reps\": %d, "
                "\"rows\": [",
                k.reps, reps_at(&k, 0), SMALL_BELOW, k.cores, sh.threads, sh.min_chunk,
                sh.max_chunk, sh.direct_below, sh.stream_copy, small_path_name(0, &sh, 1),
                small_path_name(0, &sh, 0), sh.spin_us, sh.split_fill,
                getenv("FHEPLAN_COPY_THREADS") ? getenv("FHEPLAN_COPY_THREADS") : "", k.variants,
                k.growth_reps);
    if (!k.json)
        printf("cores %d, copy threads %d, staging chunks %zu..%zu KiB, pageable copies below "
               "%zu KiB %s towards the device and %s from it, copy threads spin %ld us, %s "
               "memcpy, %s fills, medians of %d (of %d below %zu MiB)\n",
               k.cores, sh.threads, sh.min_chunk >> 10, sh.max_chunk >> 10,
               sh.direct_below >> 10, small_path_name(0, &sh, 1), small_path_name(0, &sh, 0),
               sh.spin_us,
               sh.stream_copy == STAGING_MEMCPY_AUTO ? "auto"
               : sh.stream_copy                      ? "streaming"
                                                     : "libc",
               sh.split_fill ? "split" : "whole", k.reps,
               reps_at(&k, 0), SMALL_BELOW >> 20);
    if (!k.two_only && !k.variants && !k.probe)
        run_host(&k); /* the yardstick first, before any staging thread exists */
    if (k.host_only) {
        if (jf)
            fprintf(jf, "\n]}\n");
        free(k.pageable);
        return 0;
    }
    if (k.probe == 2) {
        run_caller_probe(&k);
    } else if (k.probe) {
        run_direct_probe(&k);
    } else if (k.variants) {
        run_variants(&k, &sh);
    } else if (!k.two_only) {
        run_bandwidth(&k);
        run_staged_vs_host(&k);
        run_pageable_paths(&k, &sh);
        run_enqueue(&k);
        run_pin_growth(&k);
    }
    if (!k.variants && !k.probe) {
        run_two(&k);
        close_two(&k); /* before the sweep, which opens backends of its own */
    }
    if (k.sweep && !k.two_only && !k.variants)
        run_sweep(&k);
    if (jf)
        fprintf(jf, "\n]}\n");
    if (k.jf)
        fclose(k.jf);
    teardown(&k);
    return 0;
}
