/* runtime/manager/report.c — execution reports: every completed transition, reservation
 * admissions and releases, and totals per transfer direction; JSON rendering. */
#include "runtime/manager/report.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t fhr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

fhr_direction fhr_direction_of(fhr_location from, fhr_location to)
{
    if (from.kind == FHR_LOC_INVALID || to.kind == FHR_LOC_INVALID)
        return FHR_DIR_NONE;
    int fd = from.kind == FHR_LOC_CUDA, td = to.kind == FHR_LOC_CUDA;
    if (!fd && !td) return FHR_DIR_H2H;
    if (!fd && td) return FHR_DIR_H2D;
    if (fd && !td) return FHR_DIR_D2H;
    return FHR_DIR_D2D;
}

const char *fhr_direction_name(fhr_direction d)
{
    switch (d) {
    case FHR_DIR_H2H: return "h2h";
    case FHR_DIR_H2D: return "h2d";
    case FHR_DIR_D2H: return "d2h";
    case FHR_DIR_D2D: return "d2d";
    default: return "none";
    }
}

static void report_destroy(fhr_owned *self) { fhr_report_free((fhr_report *)(void *)self); }

fhr_report *fhr_report_new(const char *name)
{
    fhr_report *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->owned.destroy = report_destroy;
    r->name = strdup(name ? name : "");
    if (!r->name) {
        free(r);
        return NULL;
    }
    return r;
}

void fhr_report_free(fhr_report *r)
{
    if (!r)
        return;
    free(r->name);
    free(r->tr);
    free(r->rev);
    free(r);
}

fhr_status fhr_report_add_transition(fhr_report *r, const fhr_transition *t)
{
    if (!fhr_grow((void **)&r->tr, &r->captr, r->ntr, sizeof *r->tr, 16))
        return FHR_E_NOMEM;
    r->tr[r->ntr++] = *t;
    r->regen_bytes += t->regen_nbytes;
    if (t->nbytes && t->has_from) {
        fhr_direction d = fhr_direction_of(t->from, t->to);
        r->bytes[d] += t->nbytes;
        r->count[d]++;
    }
    return FHR_OK;
}

fhr_status fhr_report_add_reservation(fhr_report *r, int admitted, const fhr_reservation *res,
                                      uint64_t t_ns)
{
    if (!fhr_grow((void **)&r->rev, &r->caprev, r->nrev, sizeof *r->rev, 8))
        return FHR_E_NOMEM;
    fhr_reservation_event *e = &r->rev[r->nrev++];
    memset(e, 0, sizeof *e);
    e->admitted = admitted;
    e->at = res->at;
    e->nbytes = res->nbytes;
    if (res->label)
        snprintf(e->label, sizeof e->label, "%s", res->label);
    e->t_ns = t_ns;
    return FHR_OK;
}

fhr_report *fhr_report_clone(const fhr_report *r)
{
    fhr_report *c = fhr_report_new(r->name);
    if (!c)
        return NULL;
    for (size_t i = 0; i < r->ntr; i++)
        if (fhr_report_add_transition(c, &r->tr[i]) != FHR_OK)
            goto fail;
    if (r->nrev) {
        c->rev = malloc(r->nrev * sizeof *c->rev);
        if (!c->rev)
            goto fail;
        memcpy(c->rev, r->rev, r->nrev * sizeof *c->rev);
        c->nrev = c->caprev = r->nrev;
    }
    c->waits = r->waits;
    return c;
fail:
    fhr_report_free(c);
    return NULL;
}

const char *fhr_report_name(const fhr_report *r) { return r ? r->name : ""; }
size_t fhr_report_ntransitions(const fhr_report *r) { return r ? r->ntr : 0; }
const fhr_transition *fhr_report_transition(const fhr_report *r, size_t i)
{
    return r && i < r->ntr ? &r->tr[i] : NULL;
}
size_t fhr_report_nreservation_events(const fhr_report *r) { return r ? r->nrev : 0; }
const fhr_reservation_event *fhr_report_reservation_event(const fhr_report *r, size_t i)
{
    return r && i < r->nrev ? &r->rev[i] : NULL;
}
uint64_t fhr_report_bytes(const fhr_report *r, fhr_direction d)
{
    return r && (unsigned)d < FHR_DIR_COUNT_ ? r->bytes[d] : 0;
}
uint64_t fhr_report_regen_bytes(const fhr_report *r) { return r ? r->regen_bytes : 0; }
uint64_t fhr_report_count(const fhr_report *r, fhr_direction d)
{
    return r && (unsigned)d < FHR_DIR_COUNT_ ? r->count[d] : 0;
}

uint64_t fhr_report_loads(const fhr_report *r)
{
    uint64_t n = 0;
    for (size_t i = 0; r && i < r->ntr; i++)
        n += r->tr[i].loaded != 0;
    return n;
}

uint64_t fhr_report_evictions(const fhr_report *r)
{
    uint64_t n = 0;
    for (size_t i = 0; r && i < r->ntr; i++)
        n += r->tr[i].phase == FHR_PHASE_RECLAIM;
    return n;
}

uint64_t fhr_report_waits(const fhr_report *r) { return r ? r->waits : 0; }

char *fhr_report_json(const fhr_report *r)
{
    if (!r)
        return NULL;
    char a[16], b[16];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", r->name);
    cJSON *trs = cJSON_AddArrayToObject(root, "transitions");
    for (size_t i = 0; i < r->ntr; i++) {
        const fhr_transition *t = &r->tr[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "phase", fhr_phase_name(t->phase));
        cJSON_AddNumberToObject(o, "action_index", (double)t->action_index);
        cJSON_AddStringToObject(o, "action", fhr_action_kind_name(t->kind));
        cJSON_AddNumberToObject(o, "handle", (double)t->handle.serial);
        if (t->has_from)
            cJSON_AddStringToObject(o, "from", fhr_loc_format(t->from, a, sizeof a));
        else
            cJSON_AddNullToObject(o, "from");
        cJSON_AddStringToObject(o, "to", fhr_loc_format(t->to, b, sizeof b));
        cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
        if (t->regen_nbytes)
            cJSON_AddNumberToObject(o, "regen_bytes", (double)t->regen_nbytes);
        cJSON_AddNumberToObject(o, "stream", (double)t->stream_id);
        cJSON_AddNumberToObject(o, "start_ns", (double)t->t_start_ns);
        cJSON_AddNumberToObject(o, "end_ns", (double)t->t_end_ns);
        cJSON_AddBoolToObject(o, "loaded", t->loaded);
        cJSON_AddItemToArray(trs, o);
    }
    cJSON *rs = cJSON_AddArrayToObject(root, "reservations");
    for (size_t i = 0; i < r->nrev; i++) {
        const fhr_reservation_event *e = &r->rev[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "event", e->admitted ? "admit" : "release");
        cJSON_AddStringToObject(o, "at", fhr_loc_format(e->at, a, sizeof a));
        cJSON_AddNumberToObject(o, "bytes", (double)e->nbytes);
        cJSON_AddStringToObject(o, "label", e->label);
        cJSON_AddNumberToObject(o, "t_ns", (double)e->t_ns);
        cJSON_AddItemToArray(rs, o);
    }
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    for (int d = 0; d < FHR_DIR_NONE; d++) {
        cJSON *o = cJSON_AddObjectToObject(tot, fhr_direction_name((fhr_direction)d));
        cJSON_AddNumberToObject(o, "bytes", (double)r->bytes[d]);
        cJSON_AddNumberToObject(o, "copies", (double)r->count[d]);
    }
    cJSON_AddNumberToObject(root, "loads", (double)fhr_report_loads(r));
    cJSON_AddNumberToObject(root, "evictions", (double)fhr_report_evictions(r));
    cJSON_AddNumberToObject(root, "waits", (double)r->waits);
    cJSON_AddNumberToObject(tot, "regen_bytes", (double)r->regen_bytes);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
