/* bench/plan_runner.c — one plan run for the plan benches (bench/plan_runner.h): compile,
 * a VM on the device or a model, the report's figures; the file reader, calibration, middle. */
#include "bench/plan_runner.h"
#include "fheplan/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *bench_slurp(const char *path)
{
    char *text = NULL;
    size_t n = 0;
    return fhr_read_file(path, &text, &n, NULL) == FHR_OK ? text : NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_middle(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

double bench_device_gbps(double body_s, double model_body_s)
{
    const char *env = getenv("FHEPLAN_DEVICE_GBPS");
    double base = env && atof(env) > 0 ? atof(env) : 3000;
    return body_s > 0 && model_body_s > 0 ? base * model_body_s / body_s : base;
}

static void figures(const rplan_vm_report *rep, bench_figures *f)
{
    const rplan_stage_report *t = &rep->total;
    f->ok = rep->ok;
    f->time_s = t->time_s;
    f->body_s = t->body_s;
    f->model_body_s = t->model_body_s;
    f->pinned_gbps = rep->pinned_gbps;
    f->timeline_s = rep->timeline_s;
    f->timeline_idle_s = rep->timeline_idle_s;
    f->objective = rep->objective;
    f->pcie = t->bytes[FHR_DIR_H2D] + t->bytes[FHR_DIR_D2H] + t->load_h2d_bytes;
    f->regen = t->regen_bytes;
    f->checks = t->checks;
    f->seeded_checks = t->regen_checks;
    f->failures = t->check_failures;
}

int bench_run_plan(const char *bench, const char *label, const char *src, fhr_backend *b,
                   const bench_run_opts *o, bench_figures *f, bench_inspect_fn inspect,
                   void *ctx)
{
    memset(f, 0, sizeof *f);
    fhr_budget cb = o->budget ? *o->budget : (fhr_budget){fhr_loc_cuda(0), 0};
    fhr_budget vb = cb; /* the VM's own copy: it scales overrides too */
    rplan_compile_opts co = {.filename = o->filename, .budget_override = o->budget ? &cb : NULL,
                             .nbudget_override = o->budget ? 1 : 0, .strip_source = 1};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    if (rplan_compile(src, strlen(src), &co, &p, d) != FHR_OK) {
        rplan_diags_render(d, stderr, 0);
        rplan_diags_free(d);
        return -1;
    }
    rplan_diags_free(d);
    rplan_vm_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.mode = o->explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    vo.scale = o->scale;
    if (o->budget) {
        vo.budget_override = &vb;
        vo.nbudget_override = 1;
    }
    vo.policy_override = o->policy;
    vo.serial = o->serial;
    vo.objective = o->objective;
    vo.pinned_gbps = o->profile ? o->profile[0] : 0; /* 0: measured or the default */
    vo.device_gbps = o->profile ? o->profile[1] : 0;
    vo.gen_gbps = o->gen_gbps;
    vo.trace = o->trace && !o->explain;
    fhr_backend *mb = NULL;
    if (o->explain && fhr_backend_open("model:1", &mb, NULL) != FHR_OK) {
        rplan_program_free(p);
        return -1;
    }
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    fhr_error e;
    fhr_error_init(&e);
    int rc = -1;
    if (rplan_vm_create(p, o->explain ? mb : b, &vo, &vm, &e) == FHR_OK) {
        rplan_vm_run(vm, &rep, &e);
        if (rep) {
            figures(rep, f);
            rc = rep->ok ? 0 : -1;
            if (rep->ok && inspect)
                rc = inspect(ctx, p, rep, vm);
            if (!rep->ok)
                fprintf(stderr, "%s (%s): %s\n", bench, label, rep->message);
        }
    } else {
        fprintf(stderr, "%s: %s\n", bench, e.message);
    }
    fhr_error_clear(&e);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(mb);
    rplan_program_free(p);
    return rc;
}
