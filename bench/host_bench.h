/* bench/host_bench.h — what the host-side benches (policy.c, request.c, staging.c,
 * transfer.c) share: a microsecond clock, the median, a check that exits naming the step,
 * and small values. */
#ifndef FHEPLAN_BENCH_HOST_BENCH_H
#define FHEPLAN_BENCH_HOST_BENCH_H

#include "fheplan/residency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_us(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_us);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Exits with status 1 when st is not FHR_OK, naming the bench and the step. */
static inline void bench_check(const char *bench, fhr_status st, const fhr_error *e,
                               const char *what)
{
    if (st != FHR_OK) {
        fprintf(stderr, "%s: %s: %s\n", bench, what,
                e && e->message[0] ? e->message : fhr_status_name(st));
        exit(1);
    }
}

static void free_buffer(void *c, void *p, size_t n) { (void)c; (void)n; free(p); }

/* A REPLICABLE value of n zero bytes (field "data") adopted at `at`; exits on failure. */
static inline fhr_handle bench_adopt(const char *bench, fhr_manager *m, fhr_location at,
                                     size_t n, int32_t prio, fhr_error *e)
{
    fhr_ckks_meta meta;
    memset(&meta, 0, sizeof meta);
    fhr_value *v;
    bench_check(bench, fhr_value_create(at, &meta, &v, e), e, "value_create");
    void *p = calloc(1, n);
    size_t bi;
    bench_check(bench, fhr_value_add_buffer(v, p, n, free_buffer, NULL, &bi, e), e, "add_buffer");
    bench_check(bench, fhr_value_add_field(v, "data", bi, 0, n, e), e, "add_field");
    fhr_adopt_opts o = {FHR_REPLICABLE, NULL, prio};
    fhr_handle h;
    bench_check(bench, fhr_adopt(m, &v, &o, &h, e), e, "adopt");
    return h;
}

#endif
