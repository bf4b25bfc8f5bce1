/* runtime/plan/plan.c — immutable plans (reclaim, enter and exit actions plus
 * reservations) and the manager's dry run: explain and preflight run the same
 * rule core as the live primitives over a copy of the accounting. */
#include "runtime/plan/plan.h"
#include "base/error.h"
#include "runtime/manager/peak_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int phase_ix(fhr_phase ph)
{
    return ph == FHR_PHASE_RECLAIM ? 0 : ph == FHR_PHASE_ENTER ? 1 : ph == FHR_PHASE_EXIT ? 2 : -1;
}

static fhr_status check_action(const fhr_action *a, const char *list, size_t i, fhr_error *err)
{
    if ((unsigned)a->kind > FHR_ACT_DISCARD)
        return fhr_fail(err, FHR_E_INVALID, "plan: %s action %zu has unknown kind %d", list, i,
                        (int)a->kind);
    if (a->kind != FHR_ACT_DISCARD && fhr_loc_slot(a->at) < 0)
        return fhr_fail(err, FHR_E_LOCATION, "plan: %s action %zu has an invalid location", list, i);
    if (a->kind == FHR_ACT_MOVE && a->has_from && fhr_loc_slot(a->from) < 0)
        return fhr_fail(err, FHR_E_LOCATION, "plan: %s action %zu has an invalid source", list, i);
    return FHR_OK;
}

fhr_status fhr_plan_create(const fhr_plan_desc *d, fhr_plan **out, fhr_error *err)
{
    if (!d || !out)
        return fhr_fail(err, FHR_E_INVALID, "plan_create: NULL argument");
    *out = NULL;
    const fhr_action *lists[3] = {d->reclaim, d->enter, d->exit};
    size_t counts[3] = {d->nreclaim, d->nenter, d->nexit};
    static const char *const names[3] = {"reclaim", "enter", "exit"};
    for (int k = 0; k < 3; k++) {
        if (counts[k] && !lists[k])
            return fhr_fail(err, FHR_E_INVALID, "plan_create: %s list is NULL", names[k]);
        for (size_t i = 0; i < counts[k]; i++) {
            fhr_status st = check_action(&lists[k][i], names[k], i, err);
            if (st != FHR_OK)
                return st;
        }
    }
    if (d->nreservations && !d->reservations)
        return fhr_fail(err, FHR_E_INVALID, "plan_create: reservations list is NULL");
    for (size_t i = 0; i < d->nreservations; i++)
        if (fhr_loc_slot(d->reservations[i].at) < 0)
            return fhr_fail(err, FHR_E_LOCATION, "plan_create: reservation %zu has an invalid location", i);
    fhr_plan *p = calloc(1, sizeof *p);
    if (!p)
        return fhr_fail(err, FHR_E_NOMEM, "plan_create: out of host memory");
    p->name = strdup(d->name ? d->name : "");
    int ok = p->name != NULL;
    for (int k = 0; k < 3 && ok; k++) {
        p->nacts[k] = counts[k];
        if (counts[k]) {
            p->acts[k] = malloc(counts[k] * sizeof(fhr_action));
            ok = p->acts[k] != NULL;
            if (ok)
                memcpy(p->acts[k], lists[k], counts[k] * sizeof(fhr_action));
        }
    }
    if (ok && d->nreservations) {
        p->res = calloc(d->nreservations, sizeof *p->res);
        ok = p->res != NULL;
        for (size_t i = 0; ok && i < d->nreservations; i++) {
            p->res[i] = d->reservations[i];
            p->res[i].label = strdup(d->reservations[i].label ? d->reservations[i].label : "");
            ok = p->res[i].label != NULL;
            p->nres = i + 1;
        }
    }
    if (!ok) {
        fhr_plan_destroy(p);
        return fhr_fail(err, FHR_E_NOMEM, "plan_create: out of host memory");
    }
    *out = p;
    return FHR_OK;
}

void fhr_plan_destroy(fhr_plan *p)
{
    if (!p)
        return;
    for (int k = 0; k < 3; k++)
        free(p->acts[k]);
    for (size_t i = 0; i < p->nres; i++)
        free((char *)p->res[i].label);
    free(p->res);
    free(p->name);
    free(p);
}

const char *fhr_plan_name(const fhr_plan *p) { return p ? p->name : NULL; }

size_t fhr_plan_nactions(const fhr_plan *p, fhr_phase phase)
{
    int k = phase_ix(phase);
    return p && k >= 0 ? p->nacts[k] : 0;
}

const fhr_action *fhr_plan_action(const fhr_plan *p, fhr_phase phase, size_t i)
{
    int k = phase_ix(phase);
    return p && k >= 0 && i < p->nacts[k] ? &p->acts[k][i] : NULL;
}

size_t fhr_plan_nreservations(const fhr_plan *p) { return p ? p->nres : 0; }
const fhr_reservation *fhr_plan_reservation(const fhr_plan *p, size_t i)
{
    return p && i < p->nres ? &p->res[i] : NULL;
}

/* ---- the model ----------------------------------------------------------------------- */

typedef struct simval {
    uint64_t serial;
    rule_view rv;
    int discarded;
} simval;

#define SIM_INLINE 4 /* values modelled without an allocation (a request names few) */

typedef struct sim {
    fhr_manager *m;
    locacct loc[FHR_LOC_SLOTS];
    simval *vals;             /* inl until more are needed */
    size_t nvals, capvals;
    simval inl[SIM_INLINE];
    fhr_explanation *ex;
} sim;

/* The simulated value of h, added on first use; the status says why not. */
static fhr_status sim_get(sim *s, fhr_handle h, simval **out, fhr_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < s->nvals; i++)
        if (s->vals[i].serial == h.serial && h.manager_id == s->m->id) {
            if (s->vals[i].discarded)
                return fhr_fail(err, FHR_E_HANDLE, "handle #%llu was discarded earlier in the plan",
                                (unsigned long long)h.serial);
            *out = &s->vals[i];
            return FHR_OK;
        }
    val *v;
    fhr_status st = mgr_lookup(s->m, h, "plan", &v, err);
    if (st != FHR_OK)
        return st;
    if (s->nvals == s->capvals) {
        size_t cap = s->capvals * 2;
        simval *n = s->vals == s->inl ? malloc(cap * sizeof *n) : realloc(s->vals, cap * sizeof *n);
        if (!n)
            return fhr_fail(err, FHR_E_NOMEM, "explain: out of host memory");
        if (s->vals == s->inl)
            memcpy(n, s->inl, sizeof s->inl);
        s->vals = n;
        s->capvals = cap;
    }
    simval *sv = &s->vals[s->nvals++];
    memset(sv, 0, sizeof *sv);
    sv->serial = h.serial;
    mgr_rule_view(s->m, v, &sv->rv);
    *out = sv;
    return FHR_OK;
}

static fhr_status sim_action(sim *s, const fhr_action *a, fhr_error *err)
{
    simval *sv;
    fhr_status st = sim_get(s, a->handle, &sv, err);
    if (st != FHR_OK) {
        if (err)
            err->handle = a->handle;
        return st;
    }
    rule_effect eff;
    st = rules_check(&sv->rv, a, s->loc, s->m->ndev, &eff, err);
    if (st != FHR_OK || eff.noop)
        return st;
    if (eff.discard) {
        for (int sl = 0; sl < FHR_LOC_SLOTS; sl++)
            if (sv->rv.present & (1ULL << sl))
                acct_release(&s->loc[sl], rv_charge(&sv->rv, sl));
        sv->rv.present = 0;
        sv->discarded = 1;
        return FHR_OK;
    }
    if (eff.create >= 0) {
        s->loc[eff.create].present = 1;
        uint64_t c = eff.limbs ? cut_bytes(sv->rv.cut, eff.limbs, 0, 0)
                               : charge_at(sv->rv.charge, sv->rv.omit, eff.create);
        acct_charge(&s->loc[eff.create], c);
        if (eff.src >= 0) { /* before the view changes: a grow reads the old copy's parts */
            uint64_t gen, link;
            rules_copy_bytes(&sv->rv, eff.src, eff.create, eff.limbs, eff.had, &link, &gen);
            s->ex->bytes_moved += link;
            s->ex->bytes_regenerated += gen;
            if (eff.src >= 2 && eff.create >= 2) { /* device to device: the peer link */
                s->ex->bytes_peer += link;
                s->ex->peer_copies++;
            }
        }
        if (eff.had) /* a grow: the partial copy it replaces goes once the new one is made */
            acct_release(&s->loc[eff.create], rv_charge(&sv->rv, eff.create));
        sv->rv.present |= 1ULL << eff.create;
        sv->rv.limbs[eff.create] = eff.limbs;
        sv->rv.parts[eff.create] = 0;
        if (rules_by_parts(sv->rv.cut, &eff, eff.create))
            sv->rv.by_parts |= 1ULL << eff.create;
        else
            sv->rv.by_parts &= ~(1ULL << eff.create);
        sv->rv.unsettled &= ~(1ULL << eff.create); /* the model completes every copy */
    }
    if (eff.trim >= 0) { /* a drop of parts: the copy stays with fewer */
        uint64_t before = rv_charge(&sv->rv, eff.trim);
        if (!sv->rv.limbs[eff.trim])
            sv->rv.limbs[eff.trim] = sv->rv.cut->q;
        sv->rv.parts[eff.trim] = cut_parts_read(sv->rv.cut, eff.keep < sv->rv.cut->q ? eff.keep : 0);
        acct_release(&s->loc[eff.trim], before - rv_charge(&sv->rv, eff.trim));
    }
    if (eff.remove >= 0) {
        acct_release(&s->loc[eff.remove], rv_charge(&sv->rv, eff.remove));
        sv->rv.limbs[eff.remove] = 0;
        sv->rv.parts[eff.remove] = 0;
        sv->rv.by_parts &= ~(1ULL << eff.remove);
        sv->rv.present &= ~(1ULL << eff.remove);
        sv->rv.unsettled &= ~(1ULL << eff.remove);
    }
    return FHR_OK;
}

static void sim_fail(sim *s, fhr_phase ph, long idx, fhr_status st, const fhr_error *e,
                     const char *what)
{
    fhr_explanation *ex = s->ex;
    ex->feasible = 0;
    ex->status = st;
    ex->phase = ph;
    ex->action_index = idx;
    ex->handle = e->handle;
    ex->loc = e->loc;
    ex->bytes_short = e->bytes_short;
    snprintf(ex->reason, sizeof ex->reason, "%s %s %ld: %.440s", fhr_phase_name(ph), what, idx,
             e->message);
}

static int sim_list(sim *s, fhr_phase ph, const fhr_action *acts, size_t n)
{
    fhr_error e;
    fhr_error_init(&e);
    for (size_t i = 0; i < n; i++) {
        fhr_status st = sim_action(s, &acts[i], &e);
        if (st != FHR_OK) {
            sim_fail(s, ph, (long)i, st, &e, "action");
            fhr_error_clear(&e);
            return 0;
        }
    }
    return 1;
}

static int sim_reserve(sim *s, const fhr_plan *p)
{
    for (size_t i = 0; i < p->nres; i++) {
        const fhr_reservation *r = &p->res[i];
        fhr_error e;
        fhr_error_init(&e);
        char what[96];
        snprintf(what, sizeof what, "reservation '%s'", r->label);
        int slot = fhr_loc_slot(r->at);
        fhr_status st;
        if (r->at.kind == FHR_LOC_CUDA && r->at.index >= s->m->ndev) {
            st = fhr_fail(&e, FHR_E_LOCATION, "%s: cuda:%d is not visible to this process", what,
                          r->at.index);
            e.loc = r->at;
        } else if ((st = acct_admit(&s->loc[slot], r->at, r->nbytes, what, &e)) == FHR_OK) {
            s->loc[slot].present = 1;
            acct_reserve(&s->loc[slot], r->nbytes);
            continue;
        }
        sim_fail(s, FHR_PHASE_RESERVE, (long)i, st, &e, "reservation");
        return 0;
    }
    return 1;
}

void plan_simulate(fhr_manager *m, const sim_input *in, fhr_explanation *ex)
{
    memset(ex, 0, sizeof *ex);
    ex->feasible = 1;
    ex->action_index = -1;
    ex->state_version = m->version;
    sim s = {.m = m, .ex = ex};
    s.vals = s.inl;
    s.capvals = SIM_INLINE;
    memcpy(s.loc, m->loc, sizeof s.loc);
    for (int i = 0; i < FHR_LOC_SLOTS; i++) { /* predicted peaks start from now */
        s.loc[i].peak_used = s.loc[i].used;
        s.loc[i].peak_charged = s.loc[i].used + s.loc[i].reserved + s.loc[i].temp;
    }
    const fhr_plan *p = in->plan;
    if (p) {
        if (sim_list(&s, FHR_PHASE_RECLAIM, p->acts[0], p->nacts[0]) && sim_reserve(&s, p) &&
            sim_list(&s, FHR_PHASE_ENTER, p->acts[1], p->nacts[1]) &&
            sim_list(&s, FHR_PHASE_EXIT, p->acts[2], p->nacts[2])) {
            for (size_t i = 0; i < p->nres; i++)
                acct_unreserve(&s.loc[fhr_loc_slot(p->res[i].at)], p->res[i].nbytes);
        }
    } else {
        sim_list(&s, FHR_PHASE_ACTIONS, in->acts, in->nacts);
    }
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (!s.loc[i].present)
            continue;
        fhr_loc_peak *pk = &ex->peaks[ex->npeaks++];
        pk->loc = fhr_loc_from_slot(i);
        pk->peak_used_bytes = s.loc[i].peak_used;
        pk->peak_charged_bytes = s.loc[i].peak_charged;
        pk->has_budget = s.loc[i].has_budget;
        pk->budget_bytes = s.loc[i].budget;
    }
    if (s.vals != s.inl)
        free(s.vals);
}

fhr_status plan_infeasible(const fhr_explanation *ex, const char *what, fhr_error *err)
{
    fhr_fail(err, FHR_E_INFEASIBLE, "%.60s rejected by preflight: %.440s", what, ex->reason);
    if (err) {
        err->cause = ex->status;
        err->phase = ex->phase;
        err->action_index = ex->action_index;
        err->handle = ex->handle;
        err->loc = ex->loc;
        err->bytes_short = ex->bytes_short;
    }
    return FHR_E_INFEASIBLE;
}

fhr_status fhr_explain(fhr_manager *m, const fhr_plan *p, fhr_explanation *out, fhr_error *err)
{
    if (!p || !out)
        return fhr_fail(err, FHR_E_INVALID, "explain: plan and out are required");
    fhr_status st = mgr_enter(m, "explain", err);
    if (st != FHR_OK)
        return st;
    sim_input in = {p, NULL, 0};
    plan_simulate(m, &in, out);
    mgr_leave(m);
    return FHR_OK;
}

char *fhr_explanation_json(const fhr_explanation *e)
{
    if (!e)
        return NULL;
    char b[16];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "feasible", e->feasible);
    if (e->feasible) {
        cJSON_AddNullToObject(o, "reason");
    } else {
        cJSON_AddStringToObject(o, "reason", e->reason);
        cJSON_AddStringToObject(o, "status", fhr_status_name(e->status));
        cJSON_AddStringToObject(o, "phase", fhr_phase_name(e->phase));
        cJSON_AddNumberToObject(o, "action_index", (double)e->action_index);
        cJSON_AddNumberToObject(o, "handle", (double)e->handle.serial);
        if (e->loc.kind != FHR_LOC_INVALID)
            cJSON_AddStringToObject(o, "location", fhr_loc_format(e->loc, b, sizeof b));
        cJSON_AddNumberToObject(o, "bytes_short", (double)e->bytes_short);
    }
    cJSON_AddNumberToObject(o, "bytes_moved", (double)e->bytes_moved);
    cJSON_AddNumberToObject(o, "bytes_regenerated", (double)e->bytes_regenerated);
    cJSON_AddNumberToObject(o, "bytes_peer", (double)e->bytes_peer);
    cJSON_AddNumberToObject(o, "peer_copies", (double)e->peer_copies);
    cJSON_AddNumberToObject(o, "state_version", (double)e->state_version);
    cJSON *pk = cJSON_AddArrayToObject(o, "peaks");
    for (size_t i = 0; i < e->npeaks; i++)
        fhr_peak_json_add(pk, e->peaks[i].loc, 1, e->peaks[i].peak_used_bytes,
                          e->peaks[i].peak_charged_bytes, e->peaks[i].has_budget,
                          e->peaks[i].budget_bytes);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
