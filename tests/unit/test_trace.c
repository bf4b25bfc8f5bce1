/* tests/unit/test_trace.c — `--trace` as Perfetto reads it: a process name, a name for
 * every track, slices that nest on each track, counters with their track, args with bytes,
 * values, direction and rate on copies and values on bodies, flows from each copy to the
 * body that reads it, and the bytes present per location ending at what the manager holds. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/plan_run.h"

typedef struct xs {
    double ts, end, tid;
    const cJSON *e;
} xs;

static int xs_cmp(const void *a, const void *b)
{
    const xs *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(v), "field %s: %s", k, cJSON_PrintUnformatted(o));
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

/* A slice of track tid containing ts (its start when at_start). */
static const xs *slice_at(const xs *v, size_t n, double tid, double ts, int at_start,
                          const char *cat)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].tid == tid && !strcmp(str(v[i].e, "cat"), cat) &&
            (at_start ? fabs(v[i].ts - ts) < 1e-3 : v[i].ts <= ts + 1e-3 && ts <= v[i].end + 1e-3))
            return &v[i];
    return NULL;
}

static void check_trace(plan_run *r, const char *what)
{
    cr_assert(r->rep->ok, "%s: %s", what, r->rep->message);
    char *js = rplan_vm_trace_json(r->vm);
    cr_assert_not_null(js);
    cJSON *doc = cJSON_Parse(js);
    cr_assert_not_null(doc, "%s: the trace parses", what);
    const cJSON *ev = cJSON_GetObjectItem(doc, "traceEvents"), *e;
    size_t n = (size_t)cJSON_GetArraySize(ev), nx = 0, nnamed = 0;
    xs *x = calloc(n + 1, sizeof *x);
    double *named = calloc(n + 1, sizeof *named);
    int process = 0, copies = 0, bodies = 0, flows_s = 0, flows_f = 0;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = str(e, "ph");
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "pid")), "%s: a pid", what);
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "tid")), "%s: a tid on %s", what,
                  cJSON_PrintUnformatted(e));
        if (!strcmp(ph, "M")) {
            if (!strcmp(str(e, "name"), "process_name"))
                process = 1;
            if (!strcmp(str(e, "name"), "thread_name")) {
                const char *nm = str(cJSON_GetObjectItem(e, "args"), "name");
                cr_assert(nm[0] && !strstr(nm, "other stream"), "%s: a named track", what);
                named[nnamed++] = num(e, "tid");
            }
        } else if (!strcmp(ph, "X")) {
            x[nx++] = (xs){num(e, "ts"), num(e, "ts") + num(e, "dur"), num(e, "tid"), e};
            const cJSON *a = cJSON_GetObjectItem(e, "args");
            if (!strcmp(str(e, "cat"), "transfer") && cJSON_GetObjectItem(a, "bytes_peer_in")) {
                if (num(a, "bytes") > 0) {
                    copies++;
                    cr_assert(cJSON_GetArraySize(cJSON_GetObjectItem(a, "values")) > 0,
                              "%s: a copy names its values", what);
                    cr_assert(strstr(str(a, "direction"), "PCIe") || strstr(str(a, "direction"), "peer"));
                    cr_assert(num(a, "gbps") > 0);
                }
            }
            if (!strcmp(str(e, "cat"), "body")) {
                bodies++;
                cr_assert(cJSON_IsArray(cJSON_GetObjectItem(a, "values")), "%s: body values", what);
                cr_assert(str(a, "location")[0]);
            }
        } else if (!strcmp(ph, "s")) {
            flows_s++;
        } else if (!strcmp(ph, "f")) {
            flows_f++;
        }
    }
    cr_assert(process, "%s: a process_name", what);
    cr_assert(copies > 0 && bodies > 0, "%s: copies %d, bodies %d", what, copies, bodies);
    cr_assert(flows_s > 0 && flows_s == flows_f, "%s: flows %d/%d", what, flows_s, flows_f);
    /* every track of an event is named */
    cJSON_ArrayForEach(e, ev)
    {
        if (!strcmp(str(e, "ph"), "M") || !strcmp(str(e, "ph"), "C"))
            continue;
        int found = 0;
        for (size_t i = 0; i < nnamed && !found; i++)
            found = named[i] == num(e, "tid");
        cr_assert(found, "%s: track %.0f has no thread_name", what, num(e, "tid"));
    }
    /* slices nest on every track (1 ns of rounding allowed) */
    qsort(x, nx, sizeof *x, xs_cmp);
    double stack[256];
    int depth = 0;
    for (size_t i = 0; i < nx; i++) {
        if (i == 0 || x[i].tid != x[i - 1].tid)
            depth = 0;
        while (depth && stack[depth - 1] <= x[i].ts + 1e-3)
            depth--;
        cr_assert(!depth || x[i].end <= stack[depth - 1] + 1e-3,
                  "%s: on track %.0f '%s' (%.3f..%.3f us) overlaps its enclosing slice ending "
                  "at %.3f us", what, x[i].tid, str(x[i].e, "name"), x[i].ts, x[i].end,
                  stack[depth - 1]);
        cr_assert(depth < 256);
        stack[depth++] = x[i].end;
    }
    /* each flow starts inside a copy and ends where a body starts, on their tracks */
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = str(e, "ph");
        if (!strcmp(ph, "s"))
            cr_assert_not_null(slice_at(x, nx, num(e, "tid"), num(e, "ts"), 0, "transfer"),
                               "%s: a flow from outside a copy", what);
        if (!strcmp(ph, "f")) {
            cr_assert_str_eq(str(e, "bp"), "e");
            cr_assert_not_null(slice_at(x, nx, num(e, "tid"), num(e, "ts"), 1, "body"),
                               "%s: a flow to no body's start", what);
        }
    }
    /* the bytes present: a series per location the manager used, ending at what it holds */
    fhr_snapshot *snap = NULL;
    cr_assert_eq(fhr_snapshot_take_placement(rplan_vm_manager(r->vm), &snap, NULL), FHR_OK);
    for (size_t l = 0; l < snap->nlocs; l++) {
        char nm[48], lb[16];
        snprintf(nm, sizeof nm, "resident %s", fhr_loc_format(snap->locs[l].loc, lb, sizeof lb));
        double last = -1, peak = 0;
        int samples = 0;
        cJSON_ArrayForEach(e, ev)
        {
            if (strcmp(str(e, "ph"), "C") || strcmp(str(e, "name"), nm))
                continue;
            samples++;
            last = num(cJSON_GetObjectItem(e, "args"), "bytes");
            peak = last > peak ? last : peak;
        }
        if (!snap->locs[l].peak_used_bytes)
            continue;
        cr_assert(samples > 1 && peak > 0, "%s: %s has no residency series", what, nm);
        cr_assert_eq((uint64_t)last, snap->locs[l].used_bytes,
                     "%s: %s ends at %.0f bytes, the manager holds %llu", what, nm, last,
                     (unsigned long long)snap->locs[l].used_bytes);
    }
    fhr_snapshot_free(snap);
    free(x);
    free(named);
    cJSON_Delete(doc);
    free(js);
}

Test(trace, one_device_nests_names_and_flows, .timeout = 300)
{
    plan_run r;
    cr_assert(plan_run_open(&r, "plans/ckks-bootstrap.rplan", 1, 1));
    check_trace(&r, "ckks-bootstrap on emu:1");
    plan_run_close(&r);
}

Test(trace, two_devices_nest_names_and_flows, .timeout = 300)
{
    plan_run r;
    cr_assert(plan_run_open(&r, "plans/ckks-bootstrap-2gpu.rplan", 2, 1));
    check_trace(&r, "ckks-bootstrap-2gpu on emu:2");
    plan_run_close(&r);
}

Test(trace, every_plan_ends_at_what_the_manager_holds, .timeout = 600)
{
    size_t n = 0;
    char **files = plan_files(&n);
    for (size_t i = 0; i < n; i++) {
        plan_run r;
        if (plan_run_open(&r, files[i], 2, 1) && !r.rep->refused && r.rep->total.bodies) {
            char *js = rplan_vm_trace_json(r.vm);
            cJSON *doc = cJSON_Parse(js);
            cr_assert_not_null(doc, "%s", files[i]);
            fhr_snapshot *snap = NULL;
            cr_assert_eq(fhr_snapshot_take_placement(rplan_vm_manager(r.vm), &snap, NULL), FHR_OK);
            for (size_t l = 0; l < snap->nlocs; l++) {
                char nm[48], lb[16];
                snprintf(nm, sizeof nm, "resident %s", fhr_loc_format(snap->locs[l].loc, lb, sizeof lb));
                double last = 0;
                const cJSON *e;
                cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
                if (!strcmp(str(e, "ph"), "C") && !strcmp(str(e, "name"), nm))
                    last = num(cJSON_GetObjectItem(e, "args"), "bytes");
                cr_assert_eq((uint64_t)last, snap->locs[l].used_bytes, "%s: %s ends at %.0f, the manager holds %llu",
                             files[i], nm, last, (unsigned long long)snap->locs[l].used_bytes);
            }
            fhr_snapshot_free(snap);
            cJSON_Delete(doc);
            free(js);
        }
        plan_run_close(&r);
        free(files[i]);
    }
    free(files);
}
