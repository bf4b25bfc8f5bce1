/* runtime/vm/report.c — the run report's public side: rplan_vm_report_free and
 * rplan_vm_report_json (stage records, totals, the failure; a refused run: the failure). */
#include "runtime/vm/internal.h"
#include "runtime/manager/peak_json.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

void rplan_vm_report_free(rplan_vm_report *r)
{
    if (!r)
        return;
    free(r->stages);
    free(r->partial_json);
    rplan_profile_free(r->kernels, r->nkernels);
    free(r);
}

static void stage_json(cJSON *o, const rplan_stage_report *r, int explain)
{
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON *b = cJSON_AddObjectToObject(o, "bytes");
    for (int d = 0; d < FHR_DIR_NONE; d++)
        cJSON_AddNumberToObject(b, fhr_direction_name((fhr_direction)d), (double)r->bytes[d]);
    cJSON_AddNumberToObject(b, "load", (double)r->load_bytes);
    uint64_t moved = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += r->bytes[d];
    cJSON_AddNumberToObject(o, "bytes_moved", (double)moved);
    cJSON_AddNumberToObject(o, "bytes_regenerated", (double)r->regen_bytes);
    cJSON_AddNumberToObject(o, "pcie_bytes",
                            (double)(r->bytes[FHR_DIR_H2D] + r->bytes[FHR_DIR_D2H] + r->load_h2d_bytes));
    cJSON_AddNumberToObject(o, "peer_bytes", (double)r->bytes[FHR_DIR_D2D]);
    cJSON *c = cJSON_AddObjectToObject(o, "copies");
    for (int d = 0; d < FHR_DIR_NONE; d++)
        cJSON_AddNumberToObject(c, fhr_direction_name((fhr_direction)d), (double)r->copies[d]);
    cJSON_AddNumberToObject(c, "load", (double)r->loads);
    cJSON_AddNumberToObject(o, "plans", (double)r->plans);
    cJSON_AddNumberToObject(o, "requests", (double)r->requests);
    cJSON_AddNumberToObject(o, "bodies", (double)r->bodies);
    cJSON_AddNumberToObject(o, "evictions", (double)r->evictions);
    cJSON *pk = cJSON_AddArrayToObject(o, "peaks");
    for (size_t i = 0; i < r->npeaks; i++) /* used + reserved: the charged peak */
        fhr_peak_json_add(pk, r->peaks[i].loc, 0, 0, r->peaks[i].peak_bytes,
                          r->peaks[i].has_budget, r->peaks[i].budget_bytes);
    if (!explain) {
        cJSON_AddNumberToObject(o, "time_s", r->time_s);
        cJSON_AddNumberToObject(o, "body_s", r->body_s);
        cJSON_AddNumberToObject(o, "begin_s", r->begin_s);
        cJSON_AddNumberToObject(o, "end_s", r->end_s);
        cJSON_AddNumberToObject(o, "bandwidth_gbps",
                                r->time_s > 0 ? (double)moved / r->time_s / 1e9 : 0);
        cJSON *ig = cJSON_AddObjectToObject(o, "integrity");
        cJSON_AddNumberToObject(ig, "checks", (double)r->checks);
        cJSON_AddNumberToObject(ig, "failures", (double)r->check_failures);
        cJSON_AddNumberToObject(ig, "seeded_checks", (double)r->regen_checks);
        cJSON_AddBoolToObject(ig, "ok", r->check_failures == 0);
    }
}

/* One device's figures: its compute, its link's bytes and times, its bound. */
static void device_json(cJSON *arr, const rplan_device_figures *d)
{
    char lb[16];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "location", fhr_loc_format(d->loc, lb, sizeof lb));
    cJSON_AddNumberToObject(o, "bodies", (double)d->bodies);
    cJSON_AddNumberToObject(o, "compute_s", d->compute_s);
    cJSON_AddNumberToObject(o, "regen_bytes", (double)d->regen_bytes);
    cJSON_AddNumberToObject(o, "regen_s", d->regen_s);
    cJSON_AddNumberToObject(o, "pcie_bytes", (double)d->pcie_bytes);
    cJSON_AddNumberToObject(o, "peer_bytes", (double)d->peer_bytes);
    cJSON_AddNumberToObject(o, "pcie_s", d->pcie_s);
    cJSON_AddNumberToObject(o, "peer_s", d->peer_s);
    cJSON_AddNumberToObject(o, "link_s", d->link_s);
    cJSON_AddNumberToObject(o, "bound_s", d->bound_s);
    if (d->link_windows) {
        cJSON *lk = cJSON_AddObjectToObject(o, "link");
        cJSON_AddNumberToObject(lk, "windows", (double)d->link_windows);
        cJSON_AddNumberToObject(lk, "busy_s", d->link_busy_s);
        cJSON_AddNumberToObject(lk, "idle_s", d->link_idle_s);
        cJSON_AddNumberToObject(lk, "ready_idle_s", d->link_ready_idle_s);
    }
    cJSON_AddItemToArray(arr, o);
}

char *rplan_vm_report_json(const rplan_vm_report *r)
{
    if (!r)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", r->ok);
    cJSON_AddStringToObject(o, "mode", r->explain ? "explain" : "run");
    cJSON_AddStringToObject(o, "device", r->device);
    cJSON_AddNumberToObject(o, "scale", (double)r->scale);
    cJSON_AddBoolToObject(o, "refused", r->refused);
    if (!r->refused) { /* a refused run ran nothing: no stages or totals, only the error */
        cJSON *st = cJSON_AddArrayToObject(o, "stages");
        for (size_t i = 0; i < r->nstages; i++) {
            cJSON *s = cJSON_CreateObject();
            stage_json(s, &r->stages[i], r->explain);
            cJSON_AddItemToArray(st, s);
        }
        cJSON *t = cJSON_AddObjectToObject(o, "totals");
        stage_json(t, &r->total, r->explain);
        cJSON_AddNumberToObject(t, "model_body_s", r->total.model_body_s);
        cJSON_AddNumberToObject(t, "predicted_s", r->predicted_s);
        cJSON_AddNumberToObject(t, "timeline_s", r->timeline_s);
        cJSON_AddStringToObject(t, "objective",
                                r->objective == RPLAN_OBJECTIVE_TIME ? "time" : "bytes");
        if (r->auto_bytes_s > 0 || r->auto_time_s > 0) {
            cJSON_AddNumberToObject(t, "auto_bytes_s", r->auto_bytes_s);
            cJSON_AddNumberToObject(t, "auto_time_s", r->auto_time_s);
        }
        cJSON_AddNumberToObject(t, "timeline_idle_s", r->timeline_idle_s);
        if (!r->explain && r->link_windows) {
            cJSON *lk = cJSON_AddObjectToObject(t, "link");
            cJSON_AddNumberToObject(lk, "windows", (double)r->link_windows);
            cJSON_AddNumberToObject(lk, "busy_s", r->link_busy_s);
            cJSON_AddNumberToObject(lk, "idle_s", r->link_idle_s);
            cJSON_AddNumberToObject(lk, "ready_idle_s", r->link_ready_idle_s);
        }
        if (!r->explain) {
            static const char *const why[RPLAN_WAITS] = {"prefetch_bound", "min_victim",
                                                         "room", "settled"};
            cJSON *hw = cJSON_AddObjectToObject(t, "host_waits");
            for (int w = 0; w < RPLAN_WAITS; w++) {
                cJSON *x = cJSON_AddObjectToObject(hw, why[w]);
                cJSON_AddNumberToObject(x, "count", (double)r->host_waits[w]);
                cJSON_AddNumberToObject(x, "s", r->host_wait_s[w]);
            }
            cJSON *dr = cJSON_AddObjectToObject(t, "host_waits_drained");
            cJSON_AddNumberToObject(dr, "count", (double)r->host_waits_drained);
            cJSON_AddNumberToObject(dr, "s", r->host_wait_drained_s);
        }
        cJSON_AddNumberToObject(t, "gen_gbps", r->gen_gbps);
        cJSON_AddNumberToObject(t, "regen_s", r->regen_s);
        cJSON_AddNumberToObject(t, "peer_gbps", r->peer_gbps);
        cJSON_AddNumberToObject(t, "pcie_s", r->pcie_s);
        cJSON_AddNumberToObject(t, "peer_s", r->peer_s);
        if (r->explain) {
            cJSON_AddNumberToObject(t, "pinned_gbps", r->pinned_gbps);
            cJSON_AddNumberToObject(t, "transfer_s", r->transfer_s);
        } else {
            cJSON_AddNumberToObject(t, "pinned_gbps", r->pinned_gbps);
            cJSON_AddNumberToObject(t, "compute_s", r->total.body_s);
            cJSON_AddNumberToObject(t, "transfer_s", r->transfer_s);
            cJSON_AddNumberToObject(t, "lower_bound_s", r->lower_bound_s);
            cJSON_AddNumberToObject(t, "ratio", r->ratio);
            cJSON *dv = cJSON_AddArrayToObject(t, "devices");
            for (size_t i = 0; i < r->ndevices; i++)
                device_json(dv, &r->devices[i]);
        }
    }
    if (r->ok) {
        cJSON_AddNullToObject(o, "error");
    } else {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "status", fhr_status_name(r->status));
        cJSON_AddStringToObject(e, "message", r->message);
        cJSON_AddNumberToObject(e, "line", r->line);
        cJSON_AddNumberToObject(e, "col", r->col);
        cJSON_AddStringToObject(e, "phase", fhr_phase_name(r->phase));
        cJSON_AddStringToObject(e, "scope", r->scope);
        cJSON *pr = r->partial_json ? cJSON_Parse(r->partial_json) : NULL;
        if (pr)
            cJSON_AddItemToObject(e, "partial_report", pr);
        else
            cJSON_AddNullToObject(e, "partial_report");
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
