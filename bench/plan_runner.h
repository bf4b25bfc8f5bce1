/* bench/plan_runner.h — what the plan benches (bootstrap.c, seeded.c) share: a plan file
 * read, compiled and run once through the VM (or dry-run on a model), its report's figures. */
#ifndef FHEPLAN_BENCH_PLAN_RUNNER_H
#define FHEPLAN_BENCH_PLAN_RUNNER_H

#include "fheplan/residency.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

/* How one run is made. Zero is the plan as written: run (not explain), no override, the
 * plan's policies, prefetch, objective bytes, the default rates, no trace. */
typedef struct bench_run_opts {
    const char *filename;      /* the program's file name in diagnostics */
    const fhr_budget *budget;  /* one budget override (compile and VM; the VM scales it), or NULL */
    int explain;               /* a dry run on a model:1 backend instead of the one given */
    uint64_t scale;            /* sizes divided by (0 or 1: full size) */
    int policy, serial, objective;
    const double *profile;     /* the model {pinned GB/s, device GB/s}, or NULL: the defaults */
    double gen_gbps;           /* device generation rate (0: the default) */
    int trace;                 /* keep the VM's trace (runs only) for the inspect callback */
} bench_run_opts;

/* The report's figures of one run. */
typedef struct bench_figures {
    int ok;
    double time_s, body_s, model_body_s, pinned_gbps;
    double timeline_s, timeline_idle_s; /* the modelled timeline (objective time) */
    int objective;                      /* the objective the run took (auto: its choice) */
    uint64_t pcie;                      /* h2d + d2h + loads onto a device */
    uint64_t regen, checks, seeded_checks, failures;
} bench_figures;

/* Called after a run whose report says ok, with its program, report and VM (freed after):
 * what a bench reads beyond the figures. Its return is bench_run_plan's. */
typedef int (*bench_inspect_fn)(void *ctx, const rplan_program *p, const rplan_vm_report *rep,
                                const rplan_vm *vm);

/* Compiles src (comments and source lines stripped) and runs it once on b (explain: on a
 * model:1 backend; b may then be NULL). Fills *f from the report. Returns 0 when the
 * report says ok (and inspect, when given, returned 0), else -1 with the reason on stderr
 * as "BENCH: ..." or "BENCH (LABEL): ...". */
int bench_run_plan(const char *bench, const char *label, const char *src, fhr_backend *b,
                   const bench_run_opts *o, bench_figures *f, bench_inspect_fn inspect,
                   void *ctx);

/* The file's text (malloc'd), or NULL (the benches' one reader of fheplan/file.h). */
char *bench_slurp(const char *path);

/* The time objective's device rate calibrated on a run: the kernel model's rate
 * (FHEPLAN_DEVICE_GBPS, default 3000 GB/s) scaled so that the modelled bodies take the
 * measured body time; the model's own rate when either time is 0. */
double bench_device_gbps(double body_s, double model_body_s);

/* Sorts v[0..n) and returns its middle element (the upper of the two for an even n). */
double bench_middle(double *v, int n);

#endif
