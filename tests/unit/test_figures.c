/* tests/unit/test_figures.c — the run report's figures cannot be untrue: the lower bound
 * is per device (each device's compute against its own link's bytes, the largest of
 * them), so no run of any plan in plans/ beats it on one or two emulated devices; the link
 * figures are per link and each fits in the run; sub-stages that overlap are said to. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>

#include "tests/unit/plan_run.h"
#include "tests/unit/tmpdir.h"

#ifndef FHEPLAN_CLI
#define FHEPLAN_CLI "build/fheplan"
#endif

/* The figures every run report must satisfy, whatever the machine's load. */
static void check_figures(const rplan_vm_report *r, const char *what)
{
    double t = r->total.time_s, top = 0;
    cr_assert(t > 0, "%s: a run time", what);
    cr_assert(r->ndevices > 0, "%s: figures per device", what);
    for (size_t i = 0; i < r->ndevices; i++) {
        const rplan_device_figures *d = &r->devices[i];
        char lb[16];
        fhr_loc_format(d->loc, lb, sizeof lb);
        cr_assert(d->compute_s <= t, "%s: %s computes %.9f s in a %.9f s run", what, lb,
                  d->compute_s, t);
        cr_assert(d->link_busy_s + d->link_idle_s <= t,
                  "%s: link onto %s busy %.9f s and idle %.9f s in a %.9f s run", what, lb,
                  d->link_busy_s, d->link_idle_s, t);
        cr_assert(d->link_ready_idle_s <= d->link_idle_s, "%s: %s", what, lb);
        double c = d->compute_s + d->regen_s;
        cr_assert_float_eq(d->bound_s, c > d->link_s ? c : d->link_s, 1e-12, "%s: %s", what, lb);
        if (d->bound_s > top)
            top = d->bound_s;
    }
    cr_assert_float_eq(r->lower_bound_s, top, 1e-12, "%s: the bound is the largest device's",
                       what);
    cr_assert(r->lower_bound_s > 0, "%s: a bound", what);
    cr_assert(r->ratio >= 1.0, "%s: ratio %.4f below 1: measured %.9f s, bound %.9f s", what,
              r->ratio, t, r->lower_bound_s);
}

static void every_plan(int ndev)
{
    size_t n = 0, ran = 0;
    char **files = plan_files(&n);
    for (size_t i = 0; i < n; i++) {
        plan_run r;
        char what[128];
        snprintf(what, sizeof what, "%s on emu:%d", files[i], ndev);
        if (plan_run_open(&r, files[i], ndev, 0) && !r.rep->refused) {
            cr_assert(r.rep->ok, "%s: %s", what, r.rep->message);
            check_figures(r.rep, what);
            ran++;
        }
        plan_run_close(&r);
        free(files[i]);
    }
    free(files);
    cr_assert(ran >= 5, "only %zu plans ran on emu:%d", ran, ndev);
}

Test(figures, no_ratio_below_one_on_one_device, .timeout = 600) { every_plan(1); }

Test(figures, no_ratio_below_one_on_two_devices, .timeout = 600) { every_plan(2); }

/* Two devices: the bound is one device's, not the sum of both devices' compute, and the
 * links' figures are each device's own (their sum is the total the JSON keeps). */
Test(figures, two_devices_bound_per_device, .timeout = 300)
{
    plan_run r;
    cr_assert(plan_run_open(&r, "plans/ckks-bootstrap-2gpu.rplan", 2, 0));
    cr_assert(r.rep->ok, "%s", r.rep->message);
    check_figures(r.rep, "2gpu");
    const rplan_device_figures *d0 = NULL, *d1 = NULL;
    double busy = 0, idle = 0;
    for (size_t i = 0; i < r.rep->ndevices; i++) {
        const rplan_device_figures *d = &r.rep->devices[i];
        if (d->loc.kind == FHR_LOC_CUDA && d->loc.index == 0)
            d0 = d;
        if (d->loc.kind == FHR_LOC_CUDA && d->loc.index == 1)
            d1 = d;
        busy += d->link_busy_s;
        idle += d->link_idle_s;
    }
    cr_assert(d0 && d1, "both devices have figures");
    cr_assert(d0->bodies > 0 && d1->bodies > 0 && d0->compute_s > 0 && d1->compute_s > 0);
    cr_assert(d0->pcie_bytes + d1->pcie_bytes == r.rep->pcie_bytes, "PCIe bytes per device add up");
    cr_assert(d0->peer_bytes + d1->peer_bytes == r.rep->peer_bytes, "peer bytes per device add up");
    cr_assert(d0->link_windows > 0 && d1->link_windows > 0, "each link timed");
    cr_assert(r.rep->lower_bound_s < d0->compute_s + d1->compute_s,
              "the bound is not the two devices' compute summed");
    cr_assert_float_eq(busy, r.rep->link_busy_s, 1e-9);
    cr_assert_float_eq(idle, r.rep->link_idle_s, 1e-9);
    /* the JSON carries the same figures per device */
    char *js = rplan_vm_report_json(r.rep);
    cJSON *o = cJSON_Parse(js);
    cJSON *dv = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "totals"), "devices");
    cr_assert(cJSON_IsArray(dv) && (size_t)cJSON_GetArraySize(dv) == r.rep->ndevices);
    int seen = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, dv)
    {
        const char *loc = cJSON_GetStringValue(cJSON_GetObjectItem(e, "location"));
        cr_assert_not_null(loc);
        if (!strcmp(loc, "cuda:1")) {
            seen = 1;
            cr_assert_float_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "bound_s")),
                               d1->bound_s, 1e-12);
            cr_assert(cJSON_IsObject(cJSON_GetObjectItem(e, "link")));
        }
    }
    cr_assert(seen);
    cJSON_Delete(o);
    free(js);
    plan_run_close(&r);
}

/* Two sub-stages whose work overlaps (the second opens while the first's body still runs
 * on the device): their times add up to more than their parent's, and the report says so. */
Test(figures, overlapping_sub_stages_are_named, .timeout = 120)
{
    const char *src = "rplan 1\n"
                      "budget cuda:0 64 MiB\n"
                      "value x = 1 MiB exclusive at pinned init zero\n"
                      "stage \"outer\" {\n"
                      "  stage \"a\" { plan \"pa\" { enter { move x -> cuda:0 from pinned } "
                      "body { run spin(60 ms) } } }\n"
                      "  stage \"b\" { plan \"pb\" { body { run spin(60 ms) } } }\n"
                      "}\n";
    const char *path = tmp_path("overlap.rplan"), *out = tmp_path("out.txt");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(src, f);
    fclose(f);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "NO_COLOR=1 %s run --device emu:1 --scale 1 %s >%s 2>&1",
             FHEPLAN_CLI, path, out);
    int st = system(cmd);
    f = fopen(out, "r");
    cr_assert_not_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
    cr_assert(strstr(buf, "note: the 2 sub-stages of outer take "), "%s", buf);
    cr_assert(strstr(buf, "they overlap"), "%s", buf);
}
