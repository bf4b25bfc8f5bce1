/* bench/transfer.c — transfer bandwidth through the backend against raw CUDA in the same
 * run, host memcpy bandwidth by thread count, CPU cost per copy enqueue, and with two
 * devices the peer link (cuda:0 <-> cuda:1) and both devices loading at once. */
#include "fheplan/backend.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SKIPPED 77
#define MAX_REPS 64

typedef struct bench {
    fhr_backend *b;
    fhr_stream *s;      /* backend stream on cuda:0 */
    cudaStream_t raw;   /* raw stream on device 0 */
    void *dev, *pin;    /* from the backend: device pool and pinned pool */
    unsigned char *pageable;
    size_t max;
    int reps;
    int json;
    int first_row;
    int two_only;       /* --two-gpu: only the two-device rows */
    int ndev;
    fhr_stream *s1;     /* backend stream on cuda:1 (two devices) */
    cudaStream_t raw1;  /* raw stream on device 1 */
    void *dev1, *pin1;  /* a buffer on cuda:1 and a second pinned one */
} bench;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

typedef enum path { BACKEND, RAW_ASYNC, RAW_SYNC } path;
typedef enum dir { PIN_TO_DEV, DEV_TO_PIN, PAGE_TO_DEV, DEV_TO_PAGE } dir;

static const char *const dir_names[] = {"pinned->cuda", "cuda->pinned", "pageable->cuda",
                                        "cuda->pageable"};

static void endpoints(bench *k, dir d, void **dst, const void **src, fhr_location *dl,
                      fhr_location *sl)
{
    void *host = d == PIN_TO_DEV || d == DEV_TO_PIN ? k->pin : (void *)k->pageable;
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
    } else if (p == RAW_ASYNC) {
        cu_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, k->raw), "cudaMemcpyAsync");
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
        cu_check(cudaStreamSynchronize(k->raw), "cudaStreamSynchronize");
    }
}

/* Median bandwidth in GB/s over reps (one warm-up first). */
static double bandwidth(bench *k, dir d, path p, size_t n)
{
    double t[MAX_REPS];
    enqueue(k, d, p, n);
    wait_path(k, p);
    for (int r = 0; r < k->reps; r++) {
        double t0 = now();
        enqueue(k, d, p, n);
        wait_path(k, p);
        t[r] = now() - t0;
    }
    return (double)n / median(t, k->reps) / 1e9;
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

/* ---- host memcpy with T threads ---------------------------------------------------- */

typedef struct slice {
    void *dst;
    const void *src;
    size_t n;
} slice;

static void *copy_slice(void *arg)
{
    slice *s = arg;
    memcpy(s->dst, s->src, s->n);
    return NULL;
}

static double host_memcpy(bench *k, unsigned char *dst, int threads, size_t n)
{
    double t[MAX_REPS];
    for (int r = 0; r < k->reps + 1; r++) {
        pthread_t th[8];
        slice sl[8];
        size_t part = n / (size_t)threads;
        double t0 = now();
        for (int i = 0; i < threads; i++) {
            size_t off = (size_t)i * part;
            sl[i] = (slice){dst + off, k->pageable + off, i == threads - 1 ? n - off : part};
            pthread_create(&th[i], NULL, copy_slice, &sl[i]);
        }
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
        if (r > 0) /* the first round is warm-up */
            t[r - 1] = now() - t0;
    }
    return (double)n / median(t, k->reps) / 1e9;
}

/* ---- output ------------------------------------------------------------------------ */

static void row(bench *k, const char *what, size_t n, double ours, double raw, const char *unit)
{
    double ratio = raw > 0 ? ours / raw : 0;
    if (k->json) {
        printf("%s\n  {\"case\": \"%s\", \"bytes\": %zu, \"backend\": %.4f, \"raw\": %.4f, "
               "\"ratio\": %.4f, \"unit\": \"%s\"}",
               k->first_row ? "" : ",", what, n, ours, raw, ratio, unit);
        k->first_row = 0;
    } else {
        printf("%-34s %10zu KiB %10.2f %10.2f %7.3f  %s\n", what, n >> 10, ours, raw, ratio, unit);
    }
}

static void run_bandwidth(bench *k)
{
    if (!k->json)
        printf("%-34s %14s %10s %10s %7s\n", "case (backend vs raw)", "size", "backend", "raw",
               "ratio");
    for (int d = PIN_TO_DEV; d <= DEV_TO_PAGE; d++) {
        path raw = d == PIN_TO_DEV || d == DEV_TO_PIN ? RAW_ASYNC : RAW_SYNC;
        for (size_t n = 64u << 10; n <= k->max; n *= 4) {
            char what[64];
            snprintf(what, sizeof what, "%s%s", dir_names[d],
                     raw == RAW_SYNC ? " (raw: cudaMemcpy)" : "");
            row(k, what, n, bandwidth(k, (dir)d, BACKEND, n), bandwidth(k, (dir)d, raw, n),
                "GB/s");
        }
    }
}

static void run_host(bench *k)
{
    unsigned char *dst = malloc(k->max);
    if (!dst)
        die("malloc", "no memory for the host memcpy target");
    memset(dst, 1, k->max);
    double best = 0, four = 0;
    for (int t = 1; t <= 8; t *= 2) {
        double bw = host_memcpy(k, dst, t, k->max);
        char what[64];
        snprintf(what, sizeof what, "host memcpy %d thread%s", t, t > 1 ? "s" : "");
        row(k, what, k->max, bw, 0, "GB/s");
        best = bw > best ? bw : best;
        four = t == 4 ? bw : four;
    }
    free(dst);
    double staged = bandwidth(k, PAGE_TO_DEV, BACKEND, k->max);
    row(k, "pageable->cuda vs host memcpy x4", k->max, staged, four, "GB/s");
    row(k, "pageable->cuda vs best host memcpy", k->max, staged, best, "GB/s");
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
    fprintf(stderr, "usage: transfer [--json] [--two-gpu] [--reps N (5..64, default 7)] "
                    "[--max-mib M (default 1024)]\n");
    exit(2);
}

static void parse_args(bench *k, int argc, char **argv)
{
    k->reps = 7;
    k->max = (size_t)1 << 30;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            k->json = 1;
        else if (strcmp(argv[i], "--two-gpu") == 0)
            k->two_only = 1;
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            k->reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--max-mib") == 0 && i + 1 < argc)
            k->max = (size_t)atol(argv[++i]) << 20;
        else
            usage();
    }
    if (k->reps < 5 || k->reps > MAX_REPS || k->max < (64u << 10))
        usage();
}

static void setup(bench *k)
{
    fhr_error err;
    fhr_error_init(&err);
    if (fhr_backend_cuda_create(&k->b, &err) != FHR_OK) {
        fprintf(stderr, "transfer: skipped: %s\n", err.message);
        exit(SKIPPED);
    }
    if (fhr_stream_create(k->b, fhr_loc_cuda(0), &k->s, &err) != FHR_OK ||
        k->b->ops->alloc(k->b, fhr_loc_cuda(0), k->max, k->s, &k->dev, &err) != FHR_OK ||
        k->b->ops->alloc(k->b, fhr_loc_pinned(), k->max, k->s, &k->pin, &err) != FHR_OK)
        die("setup", err.message);
    cu_check(cudaSetDevice(0), "cudaSetDevice");
    cu_check(cudaStreamCreateWithFlags(&k->raw, cudaStreamNonBlocking), "cudaStreamCreate");
    k->pageable = malloc(k->max);
    if (!k->pageable)
        die("malloc", "no memory for the pageable buffer");
    memset(k->pageable, 3, k->max); /* fault every page in before timing */
    memset(k->pin, 3, k->max);
    if (fhr_stream_sync(k->b, k->s, &err) != FHR_OK)
        die("setup", err.message);
    k->ndev = k->b->ops->device_count(k->b);
    if (k->two_only && k->ndev < 2) {
        fprintf(stderr, "transfer: skipped: --two-gpu needs two CUDA devices, %d visible\n",
                k->ndev);
        exit(SKIPPED);
    }
    if (k->ndev >= 2) {
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

static void teardown(bench *k)
{
    k->b->ops->free(k->b, fhr_loc_cuda(0), k->dev, k->max, k->s);
    k->b->ops->free(k->b, fhr_loc_pinned(), k->pin, k->max, k->s);
    fhr_stream_destroy(k->b, k->s);
    cudaStreamDestroy(k->raw);
    if (k->ndev >= 2) {
        k->b->ops->free(k->b, fhr_loc_cuda(1), k->dev1, k->max, k->s1);
        k->b->ops->free(k->b, fhr_loc_pinned(), k->pin1, k->max, k->s1);
        fhr_stream_sync(k->b, k->s1, NULL);
        fhr_stream_destroy(k->b, k->s1);
        cudaStreamDestroy(k->raw1);
    }
    fhr_backend_destroy(k->b);
    free(k->pageable);
}

int main(int argc, char **argv)
{
    bench k = {.first_row = 1};
    parse_args(&k, argc, argv);
    setup(&k);
    if (k.json)
        printf("{\"reps\": %d, \"copy_threads_env\": \"%s\", \"rows\": [", k.reps,
               getenv("FHEPLAN_COPY_THREADS") ? getenv("FHEPLAN_COPY_THREADS") : "");
    if (!k.two_only) {
        run_bandwidth(&k);
        run_host(&k);
        run_enqueue(&k);
    }
    run_two(&k);
    if (k.json)
        printf("\n]}\n");
    teardown(&k);
    return 0;
}
