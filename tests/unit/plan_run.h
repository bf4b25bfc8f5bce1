/* tests/unit/plan_run.h — one plan of plans/ compiled and run through the VM on the
 * emulated device, small (sizes scaled so the values add up to 4 MiB, spin bodies a 32nd of
 * their duration, busy on the body's stream as the built-in spin is), optionally traced:
 * the runs behind the report's figures (test_figures.c) and the trace (test_trace.c). */
#ifndef FHEPLAN_TESTS_PLAN_RUN_H
#define FHEPLAN_TESTS_PLAN_RUN_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fheplan/backend.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

typedef struct plan_run {
    fhr_backend *b;
    rplan_program *p;
    rplan_vm *vm;
    rplan_vm_report *rep;
} plan_run;

static void spin_job_(void *arg)
{
    uint64_t ns = *(uint64_t *)arg;
    free(arg);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec -
               (uint64_t)t0.tv_nsec < ns);
}

static fhr_status short_spin_(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    uint64_t *ns = malloc(sizeof *ns);
    if (!ns)
        return FHR_E_NOMEM;
    *ns = 0;
    for (size_t a = 0; a < c->nargs; a++)
        if (c->args[a].kind == RPLAN_ARG_DURATION || c->args[a].kind == RPLAN_ARG_INT)
            *ns += c->args[a].imm / 32;
    fhr_status st = c->backend->ops->launch_host(c->backend, c->stream, spin_job_, ns, err);
    if (st)
        free(ns);
    return st;
}

/* 1 when the plan file at path can run here (no data files, no engine generators). */
static int plan_run_open(plan_run *r, const char *path, int ndev, int trace)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *src = malloc((size_t)n + 1);
    cr_assert_not_null(src);
    cr_assert_eq(fread(src, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    rplan_diags *dg = rplan_diags_new();
    rplan_compile_opts co = {.filename = path};
    cr_assert_eq(rplan_compile(src, (size_t)n, &co, &r->p, dg), FHR_OK, "%s compiles", path);
    rplan_diags_free(dg);
    free(src);
    uint64_t total = 0, scale = 1;
    for (size_t i = 0; i < rplan_nvalues(r->p); i++) {
        rplan_value_info vi;
        cr_assert_eq(rplan_value(r->p, i, &vi), FHR_OK);
        if (vi.data == RPLAN_DATA_FILE || (vi.seeded && vi.generator && strcmp(vi.generator, "counter"))) {
            rplan_program_free(r->p); /* not one this helper runs */
            r->p = NULL;
            return 0;
        }
        total += vi.nbytes;
    }
    while (total / scale > (4u << 20))
        scale *= 2;
    char spec[16];
    snprintf(spec, sizeof spec, "emu:%d", ndev);
    cr_assert_eq(fhr_backend_open(spec, &r->b, NULL), FHR_OK);
    rplan_vm_opts o = {0};
    o.mode = RPLAN_VM_RUN;
    o.unknown_as_touch = 1;
    o.scale = scale;
    o.trace = trace;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(r->p, r->b, &o, &r->vm, &e), FHR_OK, "%s: %s", path, e.message);
    cr_assert_eq(rplan_kernel_register(r->vm, "spin", short_spin_, NULL, &e), FHR_OK);
    rplan_vm_run(r->vm, &r->rep, &e);
    fhr_error_clear(&e);
    cr_assert_not_null(r->rep, "%s: a report", path);
    return 1;
}

static void plan_run_close(plan_run *r)
{
    rplan_vm_report_free(r->rep);
    rplan_vm_destroy(r->vm);
    fhr_backend_destroy(r->b);
    rplan_program_free(r->p);
    memset(r, 0, sizeof *r);
}

/* The .rplan files of folder dir, sorted, as "dir/NAME"; *n of them (free each and the
 * array). */
static char **plan_files_in(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s/ (run from the repository root)", dir);
    char **v = NULL;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".rplan"))
            continue;
        v = realloc(v, (*n + 1) * sizeof *v);
        cr_assert_not_null(v);
        size_t m = strlen(dir) + l + 2;
        v[*n] = malloc(m);
        cr_assert_not_null(v[*n]);
        snprintf(v[*n], m, "%s/%s", dir, e->d_name);
        (*n)++;
    }
    closedir(d);
    for (size_t a = 1; a < *n; a++)
        for (size_t b = a; b > 0 && strcmp(v[b], v[b - 1]) < 0; b--) {
            char *x = v[b];
            v[b] = v[b - 1];
            v[b - 1] = x;
        }
    return v;
}

/* The .rplan files of plans/. */
static char **plan_files(size_t *n) { return plan_files_in("plans", n); }

#endif
