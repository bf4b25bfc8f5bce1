/* bench/staging.c — pageable staging's host side without a GPU: the CUDA backend's plan and
 * pipeline, the emulated device as DMA engine; GB/s, time to the first DMA, best memcpy. */
#include "fheplan/backend.h"
#include "bench/host_bench.h"
#include "cuda/copy_threads.h"
#include "cuda/staging_emu.h"
#include "cuda/staging_pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPS 64

static double now(void) { return now_us() * 1e-6; }

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "staging: %s: %s\n", what, msg);
    exit(1);
}

/* Median GB/s of the best host memcpy of n bytes: one memcpy, or sliced over the pool. */
static double host_memcpy(copy_pool *cp, void *dst, const void *src, size_t n, int reps)
{
    double best = 0;
    for (int pool = 0; pool < 2; pool++) {
        double t[MAX_REPS];
        for (int r = -1; r < reps; r++) {
            double t0 = now();
            if (pool)
                copy_pool_memcpy(cp, dst, src, n);
            else
                memcpy(dst, src, n);
            if (r >= 0)
                t[r] = now() - t0;
        }
        double bw = (double)n / median(t, reps) / 1e9;
        if (bw > best)
            best = bw;
    }
    return best;
}

int main(int argc, char **argv)
{
    int reps = 9;
    size_t max = (size_t)64 << 20;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
            max = (size_t)strtoul(argv[++i], &end, 10) << 20;
        else
            end = argv[i];
        if (end && *end) {
            fprintf(stderr, "usage: staging [--reps N (3..64, default 9)] [--max-mib M (1..4096, "
                            "default 64)]\n");
            return 2;
        }
    }
    if (reps < 3 || reps > MAX_REPS || max < ((size_t)1 << 20) || max > ((size_t)4 << 30)) {
        fprintf(stderr, "staging: --reps 3..64, --max-mib 1..4096\n");
        return 2;
    }
    fhr_error err;
    fhr_error_init(&err);
    staging_shape sh;
    if (staging_shape_parse(getenv("FHEPLAN_COPY_THREADS"), getenv("FHEPLAN_STAGING_CHUNK"),
                            staging_cores(), &sh, &err) != FHR_OK ||
        staging_memcpy_parse(getenv("FHEPLAN_STAGING_MEMCPY"), &sh, &err) != FHR_OK ||
        staging_depth_parse(getenv("FHEPLAN_STAGING_DEPTH"), &sh, &err) != FHR_OK ||
        staging_fill_parse(getenv("FHEPLAN_STAGING_FILL"), &sh, &err) != FHR_OK)
        die("environment", err.message);
    fhr_backend *b = NULL;
    copy_pool *cp = NULL;
    staging_emu *x = NULL;
    if (fhr_backend_emu_create(1, 0, &b, &err) != FHR_OK ||
        copy_pool_create(sh.threads, &cp, &err) != FHR_OK ||
        staging_emu_create(b, cp, &sh, &x, &err) != FHR_OK)
        die("setup", err.message);
    fhr_stream *s = NULL;
    void *dev = NULL;
    unsigned char *host = malloc(max), *other = malloc(max);
    if (!host || !other)
        die("malloc", "no memory for the host buffers");
    memset(host, 3, max);
    memset(other, 4, max);
    if (fhr_stream_create(b, fhr_loc_cuda(0), &s, &err) != FHR_OK ||
        b->ops->alloc(b, fhr_loc_cuda(0), max, s, &dev, &err) != FHR_OK ||
        fhr_stream_sync(b, s, &err) != FHR_OK)
        die("setup", err.message);
    printf("emulated device, %d copy threads, chunks %zu..%zu KiB, medians of %d\n", sh.threads,
           sh.min_chunk >> 10, sh.max_chunk >> 10, reps);
    printf("%-16s %10s %8s %8s %8s %12s %10s %8s\n", "case", "size", "chunks", "threads",
           "GB/s", "first DMA us", "memcpy", "ratio");
    for (int d = 0; d < 2; d++) {
        for (size_t n = (size_t)1 << 20; n <= max; n *= 4) {
            double t[MAX_REPS], f[MAX_REPS];
            for (int r = -1; r < reps; r++) {
                uint64_t first = 0;
                double t0 = now();
                if (staging_emu_copy(x, dev, host, n, d == 0, &first, &err) != FHR_OK)
                    die("staged copy", err.message);
                if (r >= 0) {
                    t[r] = now() - t0;
                    f[r] = (double)first / 1e3;
                }
            }
            staging_plan p;
            staging_plan_make(n, &sh, d == 0, &p);
            double bw = (double)n / median(t, reps) / 1e9, mc = host_memcpy(cp, other, host, n, reps);
            printf("%-16s %6zu MiB %8zu %8d %8.2f %12.1f %10.2f %8.3f\n",
                   d ? "cuda->pageable" : "pageable->cuda", n >> 20, p.chunks, p.threads,
                   bw, median(f, reps), mc, mc > 0 ? bw / mc : 0);
            fflush(stdout);
        }
    }
    b->ops->free(b, fhr_loc_cuda(0), dev, max, s);
    fhr_stream_sync(b, s, NULL);
    fhr_stream_destroy(b, s);
    staging_emu_destroy(x);
    copy_pool_destroy(cp);
    fhr_backend_destroy(b);
    free(host);
    free(other);
    return 0;
}
