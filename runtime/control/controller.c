/* runtime/control/controller.c — the controller: request validation, decide (snapshot →
 * policy → the manager's explain against the same state version), decisions and
 * their deterministic JSON, and use (version-checked scope entry, then one strict
 * lease per required location), use reports. No background thread, no waiting for
 * protected copies (runtime/control/throttle.c waits, above this), no retries, no
 * rollback, no discard. */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "runtime/control/policy.h"
#include "runtime/control/victim_index.h"
#include "runtime/manager/query.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/snapshot_cache.h"
#include "runtime/control/use.h"
#include "runtime/manager/report.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fhr_controller {
    fhr_manager *m;
    fhr_policy *p;
    /* The built-in policies decide over a placement snapshot kept up to date from the
     * manager's change log (snapshot_cache.c): a request that loads re-reads only what
     * changed since the last one. One decide at a time uses it; another decide meanwhile
     * takes a fresh snapshot instead, which holds the same. For the built-in
     * policies, a victim index follows the cache's changes (victim_index.c), under the
     * same lock: a request that evicts walks (tiered LRU) or ranks (lookahead) the
     * evictable copies at the short location instead of scanning every value. */
    pthread_mutex_t cache_lock;
    mgr_snapcache *cache;
    vix *index;
};

struct fhr_decision {
    uint64_t manager_id;
    char *policy;
    char *name;
    uint64_t version;
    fhr_requirement *reqs; /* validated, deduplicated */
    size_t nreqs;
    fhr_plan *plan;
    fhr_policy_out out;
    fhr_explanation ex; /* last: fhr_decide clears what comes before it */
};

typedef struct use_lease {
    fhr_location at;
    fhr_lease *lease;
} use_lease;

struct fhr_use {
    fhr_manager *m;
    fhr_plan *plan;  /* owned: the scope needs it alive; NULL when the scope runs the plan
                      * of the decision the use owns (fhr_use_begin) */
    fhr_scope *scope;
    use_lease *leases;
    size_t nleases;
    fhr_decision *decision; /* owned when the use decided itself */
    int active;
    uint64_t waits;         /* host waits before the decision (throttle.c) */
    fhr_report *report;     /* after a successful end */
};

void use_adopt_decision(fhr_use *u, fhr_decision *d, uint64_t waits)
{
    u->decision = d;
    u->waits = waits;
}

fhr_status fhr_controller_create(fhr_manager *m, fhr_policy *p, fhr_controller **out,
                                 fhr_error *err)
{
    if (!m || !p || !out)
        return fhr_fail(err, FHR_E_INVALID, "controller_create: manager, policy and out are required");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fhr_fail(err, FHR_E_NOMEM, "controller_create: out of host memory");
    if ((fhr_policy_is_tiered(p) && mgr_snapcache_create(&(*out)->cache, err) != FHR_OK) ||
        (policy_uses_victim_index(p) && vix_create(&(*out)->index, err) != FHR_OK)) {
        mgr_snapcache_destroy((*out)->cache);
        free(*out);
        *out = NULL;
        return FHR_E_NOMEM;
    }
    pthread_mutex_init(&(*out)->cache_lock, NULL);
    (*out)->m = m;
    (*out)->p = p;
    return FHR_OK;
}

void fhr_controller_destroy(fhr_controller *c)
{
    if (!c)
        return;
    mgr_snapcache_destroy(c->cache);
    vix_destroy(c->index);
    pthread_mutex_destroy(&c->cache_lock);
    free(c);
}

fhr_manager *controller_manager(const fhr_controller *c) { return c->m; }

/* ---- requests ----------------------------------------------------------------------- */

/* Checks shapes and locations; copies the requirements without repeats. */
static fhr_status req_check(const fhr_request *req, fhr_requirement **out, size_t *nout,
                            fhr_error *err)
{
    *out = NULL;
    *nout = 0;
    if (!req)
        return fhr_fail(err, FHR_E_INVALID, "request is NULL");
    if ((req->nrequirements && !req->requirements) || (req->nreservations && !req->reservations))
        return fhr_fail(err, FHR_E_INVALID, "request '%.60s': a list is NULL",
                        req->name ? req->name : "");
    for (size_t i = 0; i < req->nreservations; i++)
        if (fhr_loc_slot(req->reservations[i].at) < 0)
            return fhr_fail(err, FHR_E_LOCATION, "request '%.60s': reservation %zu has an invalid location",
                            req->name ? req->name : "", i);
    fhr_requirement *r = malloc((req->nrequirements ? req->nrequirements : 1) * sizeof *r);
    if (!r)
        return fhr_fail(err, FHR_E_NOMEM, "request: out of host memory");
    size_t n = 0;
    for (size_t i = 0; i < req->nrequirements; i++) {
        const fhr_requirement *q = &req->requirements[i];
        if (fhr_loc_slot(q->at) < 0) {
            free(r);
            return fhr_fail(err, FHR_E_LOCATION, "request '%.60s': requirement %zu has an invalid location",
                            req->name ? req->name : "", i);
        }
        int dup = 0;
        for (size_t k = 0; k < n && !dup; k++)
            dup = fhr_handle_equal(r[k].handle, q->handle) && fhr_loc_equal(r[k].at, q->at);
        if (!dup)
            r[n++] = *q;
    }
    *out = r;
    *nout = n;
    return FHR_OK;
}

/* Handles must be live values of the snapshot's manager; EXCLUSIVE at one location. */
static fhr_status req_check_state(const fhr_snapshot *s, const char *name,
                                  const fhr_requirement *r, size_t n, fhr_error *err)
{
    char a[16], b[16];
    for (size_t i = 0; i < n; i++) {
        const fhr_value_info *vi = fhr_snapshot_value(s, r[i].handle);
        if (!vi) {
            fhr_fail(err, FHR_E_HANDLE, "request '%.60s': requirement %zu: handle #%llu is not a "
                     "live value of this manager", name, i, (unsigned long long)r[i].handle.serial);
            if (err)
                err->handle = r[i].handle;
            return FHR_E_HANDLE;
        }
        if (r[i].limbs && (!vi->cut_q || r[i].limbs > vi->cut_q || r[i].at.kind != FHR_LOC_CUDA)) {
            fhr_fail(err, FHR_E_INVALID, "request '%.60s': requirement %zu names %u q-limbs of "
                     "handle #%llu at %s: %s", name, i, r[i].limbs,
                     (unsigned long long)r[i].handle.serial, fhr_loc_format(r[i].at, a, sizeof a),
                     !vi->cut_q ? "the value has no limb cut"
                     : r[i].limbs > vi->cut_q ? "more than it has"
                                              : "host and pinned copies are whole");
            if (err) {
                err->handle = r[i].handle;
                err->loc = r[i].at;
            }
            return FHR_E_INVALID;
        }
        if (vi->mode != FHR_EXCLUSIVE)
            continue;
        for (size_t k = 0; k < i; k++)
            if (fhr_handle_equal(r[k].handle, r[i].handle)) {
                fhr_fail(err, FHR_E_REPLICA,
                         "request '%.60s': EXCLUSIVE value #%llu is required at both %s and %s",
                         name, (unsigned long long)r[i].handle.serial,
                         fhr_loc_format(r[k].at, a, sizeof a), fhr_loc_format(r[i].at, b, sizeof b));
                if (err) {
                    err->handle = r[i].handle;
                    err->loc = r[i].at;
                }
                return FHR_E_REPLICA;
            }
    }
    return FHR_OK;
}

/* ---- decide --------------------------------------------------------------------------- */

/* Under cache_lock, after a refresh: the victim index follows the cache's change set (out
 * of host memory, it is left invalid and the policy scans instead; it rebuilds next time). */
static void follow_cache(fhr_controller *c, const fhr_snapshot *view)
{
    size_t n;
    int full;
    const uint64_t *ch = mgr_snapcache_changes(c->cache, &n, &full);
    (void)vix_update(c->index, view, ch, n, full);
}

int controller_check_index(fhr_controller *c, char *why, size_t nwhy)
{
    pthread_mutex_lock(&c->cache_lock);
    const fhr_snapshot *view = NULL;
    int ok = 0;
    if (!c->index)
        snprintf(why, nwhy, "the controller keeps no victim index (policy %s)",
                 fhr_policy_name(c->p));
    else if (mgr_snapcache_refresh(c->m, c->cache, &view, NULL) != FHR_OK)
        snprintf(why, nwhy, "the snapshot cache could not refresh");
    else {
        follow_cache(c, view);
        ok = vix_check(c->index, view, why, nwhy);
    }
    pthread_mutex_unlock(&c->cache_lock);
    return ok;
}

void fhr_decision_destroy(fhr_decision *d)
{
    if (!d)
        return;
    fhr_policy_out_clear(&d->out);
    fhr_plan_destroy(d->plan);
    free(d->reqs);
    free(d->policy);
    free(d->name);
    free(d);
}

/* The copies of `settled` in a view, their pending-event counts set aside (saved) and
 * zeroed for the policy; unsettle puts them back. Entries not in the view are skipped. */
static void settle(const fhr_snapshot *v, const fhr_requirement *settled, size_t n,
                   uint32_t *saved)
{
    for (size_t i = 0; i < n; i++) {
        saved[i] = UINT32_MAX;
        fhr_value_info *vi = (fhr_value_info *)fhr_snapshot_value(v, settled[i].handle);
        for (size_t c = 0; vi && c < vi->ncopies; c++)
            if (fhr_loc_equal(vi->copies[c].loc, settled[i].at)) {
                saved[i] = vi->copies[c].pending_events;
                vi->copies[c].pending_events = 0;
            }
    }
}

static void unsettle(const fhr_snapshot *v, const fhr_requirement *settled, size_t n,
                     const uint32_t *saved)
{
    for (size_t i = n; i-- > 0;) { /* backwards: a repeated entry restores the first save */
        fhr_value_info *vi = (fhr_value_info *)fhr_snapshot_value(v, settled[i].handle);
        for (size_t c = 0; vi && saved[i] != UINT32_MAX && c < vi->ncopies; c++)
            if (fhr_loc_equal(vi->copies[c].loc, settled[i].at))
                vi->copies[c].pending_events = saved[i];
    }
}

fhr_status fhr_decide(fhr_controller *c, const fhr_request *req, fhr_decision **out,
                      fhr_error *err)
{
    return fhr_decide_settled(c, req, NULL, 0, out, err);
}

fhr_status fhr_decide_settled(fhr_controller *c, const fhr_request *req,
                              const fhr_requirement *settled, size_t nsettled,
                              fhr_decision **out, fhr_error *err)
{
    if (!c || !out)
        return fhr_fail(err, FHR_E_INVALID, "decide: controller and out are required");
    if (nsettled && !settled)
        return fhr_fail(err, FHR_E_INVALID, "decide: %zu settled copies but no array", nsettled);
    if (nsettled > 65536)
        return fhr_fail(err, FHR_E_INVALID, "decide: %zu settled copies (at most 65536)",
                        nsettled);
    *out = NULL;
    /* the explanation (most of the decision's bytes) is filled whole by fhr_explain, which
     * every decision returned has been through: only what comes before it is cleared */
    fhr_decision *d = malloc(sizeof *d);
    if (!d)
        return fhr_fail(err, FHR_E_NOMEM, "decide: out of host memory");
    memset(d, 0, offsetof(fhr_decision, ex));
    fhr_snapshot *snap = NULL; /* a fresh one, owned here */
    const fhr_snapshot *view = NULL;
    int cached = 0;            /* view is the controller's cache, whose lock is held */
    fhr_action *reclaim = NULL;
    fhr_status st = req_check(req, &d->reqs, &d->nreqs, err);
    if (st != FHR_OK)
        goto fail;
    d->name = strdup(req->name ? req->name : "");
    d->policy = strdup(fhr_policy_name(c->p));
    if (!d->name || !d->policy) {
        st = fhr_fail(err, FHR_E_NOMEM, "decide: out of host memory");
        goto fail;
    }
    int met = 0;
    if (fhr_policy_is_tiered(c->p) &&
        (st = mgr_request_met(c->m, d->reqs, d->nreqs, req->reservations, req->nreservations,
                              &met, &d->version, err)) != FHR_OK)
        goto fail;
    if (met) {
        /* Already met where it stands: the built-in policies decide nothing here, and the
         * snapshot (every value) is not needed to know it. */
        d->manager_id = fhr_manager_id(c->m);
        d->out.feasible = 1;
        d->out.explored_states = 1;
    } else {
        cached = c->cache && pthread_mutex_trylock(&c->cache_lock) == 0;
        if (cached) {
            if ((st = mgr_snapcache_refresh(c->m, c->cache, &view, err)) == FHR_OK && c->index)
                follow_cache(c, view);
        } else if ((st = fhr_snapshot_take_placement(c->m, &snap, err)) == FHR_OK)
            view = snap;
        if (st != FHR_OK)
            goto fail;
        d->manager_id = view->manager_id;
        d->version = view->state_version;
        if ((st = req_check_state(view, d->name, d->reqs, d->nreqs, err)) != FHR_OK)
            goto fail;
        fhr_request clean = {d->name, d->reqs, d->nreqs, req->reservations, req->nreservations,
                             req->position};
        uint32_t *saved = NULL;
        if (nsettled && !(saved = malloc(nsettled * sizeof *saved))) {
            st = fhr_fail(err, FHR_E_NOMEM, "decide: out of host memory");
            goto fail;
        }
        uint64_t scanned = 0;
        int wslot;
        bwin *win = mgr_watched(c->m, &wslot);
        if (saved) /* settled copies are not in the victim index: the full pass */
            settle(view, settled, nsettled, saved);
        st = policy_decide_indexed(c->p, view, cached && !saved ? c->index : NULL, &clean,
                                   &scanned, &d->out, win, wslot, err);
        if (saved) {
            unsettle(view, settled, nsettled, saved);
            free(saved);
        }
        mgr_count_reads(c->m, scanned);
        if (st != FHR_OK)
            goto fail;
        if (cached) { /* the policy's output holds no pointer into the view */
            pthread_mutex_unlock(&c->cache_lock);
            cached = 0;
        }
    }
    reclaim = malloc((d->out.nevictions ? d->out.nevictions : 1) * sizeof *reclaim);
    if (!reclaim) {
        st = fhr_fail(err, FHR_E_NOMEM, "decide: out of host memory");
        goto fail;
    }
    for (size_t i = 0; i < d->out.nevictions; i++)
        reclaim[i] = d->out.evictions[i].action;
    fhr_plan_desc pd = {d->name, reclaim, d->out.nevictions, d->out.enter, d->out.nenter,
                        NULL, 0, req->reservations, req->nreservations};
    if ((st = fhr_plan_create(&pd, &d->plan, err)) != FHR_OK)
        goto fail;
    if ((st = fhr_explain(c->m, d->plan, &d->ex, err)) != FHR_OK)
        goto fail;
    if (d->ex.state_version != d->version) {
        st = fhr_fail(err, FHR_E_STALE,
                      "decide '%.60s': the manager changed from state version %llu to %llu "
                      "while deciding; decide again",
                      d->name, (unsigned long long)d->version,
                      (unsigned long long)d->ex.state_version);
        goto fail;
    }
    if (!d->out.feasible) { /* the policy's verdict: it found no legal way to make room */
        d->ex.feasible = 0;
        d->ex.status = FHR_E_BUDGET;
        d->ex.phase = FHR_PHASE_PREFLIGHT;
        d->ex.action_index = -1;
        d->ex.handle = (fhr_handle){0, 0};
        d->ex.loc = d->out.short_loc;
        d->ex.bytes_short = d->out.bytes_short;
        snprintf(d->ex.reason, sizeof d->ex.reason, "%s", d->out.reason);
    }
    free(reclaim);
    fhr_snapshot_free(snap);
    *out = d;
    return FHR_OK;
fail:
    if (cached)
        pthread_mutex_unlock(&c->cache_lock);
    free(reclaim);
    fhr_snapshot_free(snap);
    fhr_decision_destroy(d);
    return st;
}

int fhr_decision_feasible(const fhr_decision *d) { return d ? d->ex.feasible : 0; }
uint64_t fhr_decision_state_version(const fhr_decision *d) { return d ? d->version : 0; }
uint64_t fhr_decision_explored_states(const fhr_decision *d) { return d ? d->out.explored_states : 0; }
const char *fhr_decision_policy(const fhr_decision *d) { return d ? d->policy : NULL; }
const fhr_plan *fhr_decision_plan(const fhr_decision *d) { return d ? d->plan : NULL; }
size_t fhr_decision_nevictions(const fhr_decision *d) { return d ? d->out.nevictions : 0; }
const fhr_eviction *fhr_decision_eviction(const fhr_decision *d, size_t i)
{
    return d && i < d->out.nevictions ? &d->out.evictions[i] : NULL;
}
size_t fhr_decision_nprotected(const fhr_decision *d) { return d ? d->out.nprotected : 0; }
const fhr_protected_copy *fhr_decision_protected(const fhr_decision *d, size_t i)
{
    return d && i < d->out.nprotected ? &d->out.protected_[i] : NULL;
}
const fhr_explanation *fhr_decision_explanation(const fhr_decision *d) { return d ? &d->ex : NULL; }

uint64_t fhr_decision_predicted_peak_bytes(const fhr_decision *d, fhr_location loc)
{
    for (size_t i = 0; d && i < d->ex.npeaks; i++)
        if (fhr_loc_equal(d->ex.peaks[i].loc, loc))
            return d->ex.peaks[i].peak_charged_bytes;
    return 0;
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void add_u64(cJSON *o, const char *k, uint64_t v) { cJSON_AddNumberToObject(o, k, (double)v); }

static void add_loc(cJSON *o, const char *k, fhr_location l)
{
    char b[16];
    cJSON_AddStringToObject(o, k, fhr_loc_format(l, b, sizeof b));
}

static cJSON *action_json(const fhr_action *a)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", fhr_action_kind_name(a->kind));
    add_u64(o, "handle", a->handle.serial);
    add_loc(o, "at", a->at);
    if (a->kind == FHR_ACT_MOVE && a->has_from)
        add_loc(o, "from", a->from);
    return o;
}

static void reasons_json(cJSON *o, unsigned r)
{
    cJSON *a = cJSON_AddArrayToObject(o, "reasons");
    static const struct { unsigned bit; const char *name; } names[] = {
        {FHR_PROT_LEASED, "leased"},     {FHR_PROT_HELD, "held"},
        {FHR_PROT_PENDING, "pending"},   {FHR_PROT_REQUIRED, "required"},
        {FHR_PROT_NO_TIER, "no_tier_with_room"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (r & names[i].bit)
            cJSON_AddItemToArray(a, cJSON_CreateString(names[i].name));
}

char *fhr_decision_json(const fhr_decision *d)
{
    if (!d)
        return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "request", d->name);
    cJSON_AddStringToObject(root, "policy", d->policy);
    add_u64(root, "state_version", d->version);
    cJSON_AddBoolToObject(root, "feasible", d->ex.feasible);
    add_u64(root, "explored_states", d->out.explored_states);
    cJSON *rq = cJSON_AddArrayToObject(root, "requirements");
    for (size_t i = 0; i < d->nreqs; i++) {
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "handle", d->reqs[i].handle.serial);
        add_loc(o, "at", d->reqs[i].at);
        cJSON_AddItemToArray(rq, o);
    }
    cJSON *ev = cJSON_AddArrayToObject(root, "evictions");
    for (size_t i = 0; i < d->out.nevictions; i++) {
        const fhr_eviction *e = &d->out.evictions[i];
        cJSON *o = action_json(&e->action);
        cJSON_AddNumberToObject(o, "priority", e->priority);
        add_u64(o, "last_use", e->last_use);
        add_u64(o, "bytes", e->nbytes);
        cJSON_AddItemToArray(ev, o);
    }
    cJSON *plan = cJSON_AddObjectToObject(root, "plan");
    static const fhr_phase phases[] = {FHR_PHASE_RECLAIM, FHR_PHASE_ENTER, FHR_PHASE_EXIT};
    for (size_t k = 0; k < 3; k++) {
        cJSON *arr = cJSON_AddArrayToObject(plan, fhr_phase_name(phases[k]));
        for (size_t i = 0; i < fhr_plan_nactions(d->plan, phases[k]); i++)
            cJSON_AddItemToArray(arr, action_json(fhr_plan_action(d->plan, phases[k], i)));
    }
    cJSON *res = cJSON_AddArrayToObject(plan, "reservations");
    for (size_t i = 0; i < fhr_plan_nreservations(d->plan); i++) {
        const fhr_reservation *r = fhr_plan_reservation(d->plan, i);
        cJSON *o = cJSON_CreateObject();
        add_loc(o, "at", r->at);
        add_u64(o, "bytes", r->nbytes);
        cJSON_AddStringToObject(o, "label", r->label ? r->label : "");
        cJSON_AddItemToArray(res, o);
    }
    cJSON *ex = cJSON_AddObjectToObject(root, "explanation");
    cJSON_AddBoolToObject(ex, "feasible", d->ex.feasible);
    if (d->ex.feasible) {
        cJSON_AddNullToObject(ex, "reason");
    } else {
        cJSON_AddStringToObject(ex, "reason", d->ex.reason);
        cJSON_AddStringToObject(ex, "status", fhr_status_name(d->ex.status));
        cJSON_AddStringToObject(ex, "phase", fhr_phase_name(d->ex.phase));
        cJSON_AddNumberToObject(ex, "action_index", (double)d->ex.action_index);
        add_u64(ex, "handle", d->ex.handle.serial);
        if (d->ex.loc.kind != FHR_LOC_INVALID)
            add_loc(ex, "location", d->ex.loc);
        add_u64(ex, "bytes_short", d->ex.bytes_short);
    }
    add_u64(ex, "bytes_moved", d->ex.bytes_moved);
    cJSON *pk = cJSON_AddArrayToObject(ex, "predicted_peaks");
    for (size_t i = 0; i < d->ex.npeaks; i++) {
        const fhr_loc_peak *p = &d->ex.peaks[i];
        cJSON *o = cJSON_CreateObject();
        add_loc(o, "location", p->loc);
        add_u64(o, "peak_used_bytes", p->peak_used_bytes);
        add_u64(o, "peak_charged_bytes", p->peak_charged_bytes);
        if (p->has_budget)
            add_u64(o, "budget_bytes", p->budget_bytes);
        else
            cJSON_AddNullToObject(o, "budget_bytes");
        cJSON_AddItemToArray(pk, o);
    }
    cJSON *pr = cJSON_AddArrayToObject(ex, "protected");
    for (size_t i = 0; i < d->out.nprotected; i++) {
        const fhr_protected_copy *p = &d->out.protected_[i];
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "handle", p->handle.serial);
        add_loc(o, "at", p->at);
        add_u64(o, "bytes", p->nbytes);
        reasons_json(o, p->reasons);
        cJSON_AddItemToArray(pr, o);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- use ---------------------------------------------------------------------------------- */

static fhr_stream *map_find(const fhr_stream_map *map, size_t n, fhr_location at)
{
    for (size_t i = 0; map && i < n; i++)
        if (fhr_loc_equal(map[i].loc, at))
            return map[i].stream;
    return NULL;
}

static fhr_status plan_clone(const fhr_plan *p, fhr_plan **out, fhr_error *err)
{
    const fhr_action *lists[3] = {NULL, NULL, NULL};
    size_t n[3];
    static const fhr_phase ph[3] = {FHR_PHASE_RECLAIM, FHR_PHASE_ENTER, FHR_PHASE_EXIT};
    for (int k = 0; k < 3; k++) {
        n[k] = fhr_plan_nactions(p, ph[k]);
        lists[k] = n[k] ? fhr_plan_action(p, ph[k], 0) : NULL; /* stored contiguously */
    }
    size_t nr = fhr_plan_nreservations(p);
    fhr_plan_desc d = {fhr_plan_name(p), lists[0], n[0], lists[1], n[1], lists[2], n[2],
                       nr ? fhr_plan_reservation(p, 0) : NULL, nr};
    return fhr_plan_create(&d, out, err);
}

static void use_free(fhr_use *u)
{
    free(u->leases); /* the leases themselves belong to the scope */
    fhr_report_free(u->report);
    fhr_scope_destroy(u->scope);
    fhr_plan_destroy(u->plan);
    fhr_decision_destroy(u->decision);
    free(u);
}

/* borrow: the use will own d (fhr_use_begin), so its scope may run d's plan, not a copy. */
static fhr_status use_decision(fhr_controller *c, const fhr_decision *d,
                               const fhr_stream_map *consumer, size_t nconsumer,
                               const fhr_stream_map *transfer, size_t ntransfer, int borrow,
                               fhr_use **out, fhr_error *err)
{
    if (!c || !d || !out)
        return fhr_fail(err, FHR_E_INVALID, "use: controller, decision and out are required");
    *out = NULL;
    char lb[16];
    if (d->manager_id != fhr_manager_id(c->m))
        return fhr_fail(err, FHR_E_HANDLE, "use '%.60s': the decision belongs to another manager",
                        d->name);
    if (!d->ex.feasible) {
        fhr_fail(err, FHR_E_INFEASIBLE, "use '%.60s': infeasible: %.400s", d->name, d->ex.reason);
        if (err) {
            err->cause = d->ex.status;
            err->phase = d->ex.phase;
            err->action_index = d->ex.action_index;
            err->handle = d->ex.handle;
            err->loc = d->ex.loc;
            err->bytes_short = d->ex.bytes_short;
        }
        return FHR_E_INFEASIBLE;
    }
    for (size_t i = 0; i < nconsumer; i++)
        if (!consumer || !consumer[i].stream || fhr_loc_slot(consumer[i].loc) < 0)
            return fhr_fail(err, FHR_E_INVALID, "use '%.60s': consumer stream %zu is invalid", d->name, i);
    for (size_t i = 0; i < d->nreqs; i++)
        if (d->reqs[i].at.kind == FHR_LOC_CUDA && !map_find(consumer, nconsumer, d->reqs[i].at)) {
            fhr_fail(err, FHR_E_LEASE, "use '%.60s': %s needs a consumer stream", d->name,
                     fhr_loc_format(d->reqs[i].at, lb, sizeof lb));
            if (err)
                err->loc = d->reqs[i].at;
            return FHR_E_LEASE;
        }
    fhr_use *u = calloc(1, sizeof *u);
    fhr_handle *hs = malloc((d->nreqs ? d->nreqs : 1) * sizeof *hs);
    if (u)
        u->leases = calloc(d->nreqs ? d->nreqs : 1, sizeof *u->leases);
    if (!u || !hs || !u->leases) {
        free(hs);
        if (u)
            free(u->leases);
        free(u);
        return fhr_fail(err, FHR_E_NOMEM, "use: out of host memory");
    }
    u->m = c->m;
    fhr_status st = borrow ? FHR_OK : plan_clone(d->plan, &u->plan, err);
    if (st == FHR_OK)
        st = fhr_scope_create(c->m, borrow ? d->plan : u->plan, transfer, ntransfer, &u->scope,
                              err);
    if (st != FHR_OK)
        goto fail;
    fhr_scope_expect_version(u->scope, d->version);
    /* One strict lease per required location, in order of first appearance, taken by the
     * scope before it lets go of the values of its enter actions: nobody can reclaim a
     * required copy between placement and lease. */
    for (size_t i = 0; i < d->nreqs && st == FHR_OK; i++) {
        fhr_location at = d->reqs[i].at;
        int seen = 0;
        for (size_t k = 0; k < u->nleases && !seen; k++)
            seen = fhr_loc_equal(u->leases[k].at, at);
        if (seen)
            continue;
        size_t n = 0;
        for (size_t k = i; k < d->nreqs; k++)
            if (fhr_loc_equal(d->reqs[k].at, at))
                hs[n++] = d->reqs[k].handle;
        st = fhr_scope_add_lease(u->scope, hs, n, at, map_find(consumer, nconsumer, at), err);
        if (st == FHR_OK)
            u->leases[u->nleases++].at = at;
    }
    if (st != FHR_OK || (st = fhr_scope_enter(u->scope, err)) != FHR_OK)
        goto fail;
    for (size_t k = 0; k < u->nleases; k++)
        u->leases[k].lease = fhr_scope_lease(u->scope, k);
    free(hs);
    u->active = 1;
    *out = u;
    return FHR_OK;
fail:
    free(hs);
    use_free(u);
    return st;
}

fhr_status fhr_use_decision(fhr_controller *c, const fhr_decision *d,
                            const fhr_stream_map *consumer, size_t nconsumer,
                            const fhr_stream_map *transfer, size_t ntransfer, fhr_use **out,
                            fhr_error *err)
{
    return use_decision(c, d, consumer, nconsumer, transfer, ntransfer, 0, out, err);
}

fhr_status fhr_use_begin(fhr_controller *c, const fhr_request *req,
                         const fhr_stream_map *consumer, size_t nconsumer,
                         const fhr_stream_map *transfer, size_t ntransfer, fhr_use **out,
                         fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "use: out is NULL");
    *out = NULL;
    fhr_decision *d = NULL;
    fhr_status st = fhr_decide(c, req, &d, err);
    if (st != FHR_OK)
        return st;
    st = use_decision(c, d, consumer, nconsumer, transfer, ntransfer, 1, out, err);
    if (st != FHR_OK) {
        fhr_decision_destroy(d);
        return st;
    }
    (*out)->decision = d;
    return FHR_OK;
}

const fhr_value *fhr_use_value(const fhr_use *u, fhr_handle h, fhr_location at)
{
    if (!u || !u->active)
        return NULL;
    for (size_t i = 0; i < u->nleases; i++)
        if (fhr_loc_equal(u->leases[i].at, at))
            return fhr_lease_value(u->leases[i].lease, h);
    return NULL;
}

fhr_status fhr_use_add_consumer_stream(fhr_use *u, fhr_location at, fhr_stream *s,
                                       fhr_error *err)
{
    if (!u || !u->active)
        return fhr_fail(err, FHR_E_SCOPE, "use_add_consumer_stream: the use is not active");
    for (size_t i = 0; i < u->nleases; i++)
        if (fhr_loc_equal(u->leases[i].at, at))
            return fhr_lease_add_consumer_stream(u->leases[i].lease, s, err);
    char lb[16];
    return fhr_fail(err, FHR_E_INVALID, "use_add_consumer_stream: nothing is leased at %s",
                    fhr_loc_format(at, lb, sizeof lb));
}

const fhr_decision *fhr_use_decision_of(const fhr_use *u) { return u ? u->decision : NULL; }

fhr_status fhr_use_end(fhr_use *u, fhr_status body_status, fhr_error *err)
{
    if (!u)
        return fhr_fail(err, FHR_E_INVALID, "use_end: use is NULL");
    if (!u->active)
        return fhr_fail(err, FHR_E_SCOPE, "use_end: the use already ended");
    /* The scope's exit releases the use's leases (they are the scope's) and its
     * reservations in one entry to the manager: refused (a source load runs, or no memory
     * for its claims), it changes nothing, the use stays active and may end later. */
    fhr_status st = fhr_scope_exit(u->scope, body_status, err);
    const fhr_report *r = fhr_scope_report(u->scope);
    if (!r && !fhr_scope_exit_error(u->scope))
        return st; /* refused before anything ran */
    u->active = 0;
    if (r && (u->report = fhr_report_clone(r)) != NULL)
        u->report->waits = u->waits;
    return st;
}

const fhr_report *fhr_use_report(const fhr_use *u) { return u ? u->report : NULL; }

void fhr_use_destroy(fhr_use *u)
{
    if (!u)
        return;
    if (u->active)
        fhr_use_end(u, FHR_E_SCOPE, NULL);
    use_free(u);
}
