/* bench/transfer.c — transfer bandwidth through the backend against raw CUDA in the same
 * run, host memcpy bandwidth by thread count, and CPU cost per copy enqueue. */
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

/* ---- setup ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: transfer [--json] [--reps N (5..64, default 7)] [--max-mib M "
                    "(default 1024)]\n");
    exit(2);
}

static void parse_args(bench *k, int argc, char **argv)
{
    k->reps = 7;
    k->max = (size_t)1 << 30;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            k->json = 1;
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
}

static void teardown(bench *k)
{
    k->b->ops->free(k->b, fhr_loc_cuda(0), k->dev, k->max, k->s);
    k->b->ops->free(k->b, fhr_loc_pinned(), k->pin, k->max, k->s);
    fhr_stream_destroy(k->b, k->s);
    cudaStreamDestroy(k->raw);
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
    run_bandwidth(&k);
    run_host(&k);
    run_enqueue(&k);
    if (k.json)
        printf("\n]}\n");
    teardown(&k);
    return 0;
}
