/* runtime/plan/scope.c — scopes (single-use: preflight, reclaim, admit reservations,
 * enter; later exit, release, publish) and execute_actions. A committed prefix is
 * never rolled back; a runtime failure carries the phase, the action index and a
 * partial report of every completed transition. */
#include "runtime/plan/plan.h"
#include "base/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SC_NEW, SC_ENTERED, SC_CLOSED };

typedef struct scope_lease {
    fhr_handle *hs;
    size_t n;
    fhr_location at;
    fhr_stream *consumer;
    fhr_lease *lease;
} scope_lease;

struct fhr_scope {
    fhr_manager *m;
    scope_lease *leases;
    size_t nleases, capleases;
    const fhr_plan *p;
    fhr_stream_map *streams;
    size_t nstreams;
    int state;
    int has_expect;
    uint64_t expect;
    fhr_report *rep;       /* running report */
    fhr_report *published; /* after a successful exit */
    size_t admitted;       /* reservations admitted so far */
    char *path;
    fhr_error exit_err;
    int has_exit_err;
    mgr_deferred deferred; /* destroyed while a source load ran */
};

static fhr_stream *stream_for(const fhr_stream_map *map, size_t n, fhr_location to)
{
    for (size_t i = 0; i < n; i++)
        if (fhr_loc_equal(map[i].loc, to))
            return map[i].stream;
    return NULL;
}

static fhr_status copy_streams(const fhr_stream_map *in, size_t n, fhr_stream_map **out,
                               fhr_error *err)
{
    *out = NULL;
    if (!n)
        return FHR_OK;
    if (!in)
        return fhr_fail(err, FHR_E_INVALID, "transfer stream map is NULL");
    for (size_t i = 0; i < n; i++)
        if (fhr_loc_slot(in[i].loc) < 0 || !in[i].stream)
            return fhr_fail(err, FHR_E_INVALID, "transfer stream %zu: invalid location or NULL stream", i);
    *out = malloc(n * sizeof **out);
    if (!*out)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    memcpy(*out, in, n * sizeof **out);
    return FHR_OK;
}

/* Turns an action failure into the plan-execution error with its partial report. */
static fhr_status plan_failed(const char *plan, fhr_phase ph, size_t idx, const fhr_action *a,
                              fhr_status st, fhr_error *cause, const fhr_report *rep,
                              fhr_error *err)
{
    char lb[16];
    fhr_handle h = cause->handle;
    fhr_location loc = cause->loc;
    uint64_t shortb = cause->bytes_short;
    char msg[sizeof cause->message];
    memcpy(msg, cause->message, sizeof msg);
    if (a)
        fhr_fail(err, FHR_E_PLAN, "plan '%.60s': %s %s %zu (%s handle #%llu at %s) failed: %.380s", plan,
                 fhr_phase_name(ph), "action", idx, fhr_action_kind_name(a->kind),
                 (unsigned long long)a->handle.serial, fhr_loc_format(a->at, lb, sizeof lb), msg);
    else
        fhr_fail(err, FHR_E_PLAN, "plan '%.60s': %s %zu failed: %.400s", plan, fhr_phase_name(ph),
                 idx, msg);
    if (err) {
        err->cause = st;
        err->phase = ph;
        err->action_index = (long)idx;
        err->handle = h;
        err->loc = loc;
        err->bytes_short = shortb;
        err->partial_report = fhr_report_clone(rep);
    }
    return FHR_E_PLAN;
}

/* Runs one list of actions; on failure fills err and returns FHR_E_PLAN. */
static fhr_status run_list(fhr_manager *m, const char *plan, fhr_phase ph, const fhr_action *acts,
                           size_t n, const fhr_stream_map *map, size_t nmap, fhr_report *rep,
                           fhr_error *err)
{
    for (size_t i = 0; i < n; i++) {
        fhr_error cause;
        fhr_error_init(&cause);
        fhr_stream *s = stream_for(map, nmap, acts[i].at);
        fhr_status st = prim_apply(m, &acts[i], s, rep, ph, i, &cause);
        if (st != FHR_OK) {
            st = plan_failed(plan, ph, i, &acts[i], st, &cause, rep, err);
            fhr_error_clear(&cause);
            return st;
        }
    }
    return FHR_OK;
}

/* The values a list of actions touches, for mgr_claim. */
static fhr_status claim_actions(mgr_claims *c, const fhr_action *acts, size_t n, fhr_error *err)
{
    for (size_t i = 0; i < n; i++) {
        fhr_status st = mgr_claims_add(c, &acts[i].handle, 1, err);
        if (st != FHR_OK)
            return st;
    }
    return FHR_OK;
}

fhr_status fhr_execute_actions(fhr_manager *m, const fhr_action *acts, size_t n,
                               const fhr_stream_map *streams, size_t nstreams,
                               fhr_report **report, fhr_error *err)
{
    if (report)
        *report = NULL;
    if (n && !acts)
        return fhr_fail(err, FHR_E_INVALID, "execute_actions: actions are NULL");
    for (size_t i = 0; i < nstreams; i++)
        if (!streams || !streams[i].stream || fhr_loc_slot(streams[i].loc) < 0)
            return fhr_fail(err, FHR_E_INVALID, "execute_actions: transfer stream %zu is invalid", i);
    mgr_claims c;
    mgr_claims_init(&c);
    fhr_status st = claim_actions(&c, acts, n, err);
    if (st != FHR_OK)
        return st;
    if ((st = mgr_enter(m, "execute_actions", err)) != FHR_OK) {
        mgr_claims_free(&c);
        return st;
    }
    mgr_claim(m, &c); /* the values stay ours while copies run without the lock */
    fhr_explanation ex;
    sim_input in = {NULL, acts, n};
    plan_simulate(m, &in, &ex);
    fhr_report *rep = NULL;
    if (!ex.feasible)
        st = plan_infeasible(&ex, "execute_actions", err);
    else if (!(rep = fhr_report_new("actions")))
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    else
        st = run_list(m, "actions", FHR_PHASE_ACTIONS, acts, n, streams, nstreams, rep, err);
    mgr_unclaim(m, &c);
    mgr_leave(m);
    if (st == FHR_OK && report)
        *report = rep;
    else
        fhr_report_free(rep);
    return st;
}

/* ---- scopes ---------------------------------------------------------------------- */

fhr_status fhr_scope_create(fhr_manager *m, const fhr_plan *p, const fhr_stream_map *streams,
                            size_t nstreams, fhr_scope **out, fhr_error *err)
{
    if (!m || !p || !out)
        return fhr_fail(err, FHR_E_INVALID, "scope_create: manager, plan and out are required");
    *out = NULL;
    fhr_scope *sc = calloc(1, sizeof *sc);
    if (!sc)
        return fhr_fail(err, FHR_E_NOMEM, "scope_create: out of host memory");
    fhr_status st = copy_streams(streams, nstreams, &sc->streams, err);
    if (st != FHR_OK) {
        free(sc);
        return st;
    }
    sc->m = m;
    sc->p = p;
    sc->nstreams = nstreams;
    fhr_error_init(&sc->exit_err);
    *out = sc;
    return FHR_OK;
}

fhr_status fhr_scope_add_lease(fhr_scope *sc, const fhr_handle *hs, size_t n, fhr_location at,
                               fhr_stream *consumer, fhr_error *err)
{
    if (!sc || !hs || n == 0)
        return fhr_fail(err, FHR_E_INVALID, "scope_add_lease: scope and handles are required");
    if (sc->state != SC_NEW)
        return fhr_fail(err, FHR_E_SCOPE, "scope_add_lease: the scope was already entered");
    if (at.kind == FHR_LOC_CUDA && !consumer)
        return fhr_fail(err, FHR_E_LEASE, "scope_add_lease: cuda:%d needs a consumer stream",
                        at.index);
    if (!fhr_grow((void **)&sc->leases, &sc->capleases, sc->nleases, sizeof *sc->leases, 2))
        return fhr_fail(err, FHR_E_NOMEM, "scope_add_lease: out of host memory");
    scope_lease *sl = &sc->leases[sc->nleases];
    if (!(sl->hs = malloc(n * sizeof *hs)))
        return fhr_fail(err, FHR_E_NOMEM, "scope_add_lease: out of host memory");
    memcpy(sl->hs, hs, n * sizeof *hs);
    sl->n = n;
    sl->at = at;
    sl->consumer = consumer;
    sl->lease = NULL;
    sc->nleases++;
    return FHR_OK;
}

fhr_lease *fhr_scope_lease(const fhr_scope *sc, size_t i)
{
    return sc && i < sc->nleases ? sc->leases[i].lease : NULL;
}

/* Takes the scope's leases with the lock held, after the enter actions; all or none. A
 * failure is an entry failure like an action's: phase enter, the index counting the enter
 * actions first and then the leases, and the partial report of what committed. */
static fhr_status take_leases(fhr_scope *sc, lease_waits *w, fhr_error *err)
{
    for (size_t i = 0; i < sc->nleases; i++) {
        scope_lease *sl = &sc->leases[i];
        fhr_error cause;
        fhr_error_init(&cause);
        fhr_status st = lease_acquire_locked(sc->m, sl->hs, sl->n, sl->at, sl->consumer,
                                             &sl->lease, w, &cause);
        if (st != FHR_OK) {
            for (size_t k = i; k-- > 0;) {
                lease_abandon_locked(sc->leases[k].lease);
                sc->leases[k].lease = NULL;
            }
            char msg[sizeof cause.message];
            snprintf(msg, sizeof msg, "lease %zu: %.480s", i, cause.message);
            memcpy(cause.message, msg, sizeof msg);
            st = plan_failed(sc->p->name, FHR_PHASE_ENTER, sc->p->nacts[1] + i, NULL, st,
                             &cause, sc->rep, err);
            fhr_error_clear(&cause);
            return st;
        }
    }
    return FHR_OK;
}

void fhr_scope_expect_version(fhr_scope *sc, uint64_t v)
{
    if (!sc)
        return;
    sc->has_expect = 1;
    sc->expect = v;
}

static void push_scope(fhr_manager *m, fhr_scope *sc)
{
    if (!fhr_grow((void **)&m->scopes, &m->capscopes, m->nscopes, sizeof *m->scopes, 8))
        return; /* paths of deeper scopes lose their parent; nothing else depends on it */
    m->scopes[m->nscopes++] = sc;
}

static void pop_scope(fhr_manager *m, fhr_scope *sc)
{
    for (size_t i = m->nscopes; i-- > 0;)
        if (m->scopes[i] == sc) {
            memmove(&m->scopes[i], &m->scopes[i + 1], (m->nscopes - i - 1) * sizeof *m->scopes);
            m->nscopes--;
            return;
        }
}

static void release_reservations(fhr_scope *sc)
{
    fhr_manager *m = sc->m;
    for (size_t i = sc->admitted; i-- > 0;) {
        const fhr_reservation *r = &sc->p->res[i];
        acct_unreserve(&m->loc[fhr_loc_slot(r->at)], r->nbytes);
        fhr_report_add_reservation(sc->rep, 0, r, fhr_now_ns());
        mgr_trace(m, FHR_TR_UNRESERVE, (fhr_handle){0, 0}, r->at, r->at, r->nbytes, NULL, r->label);
    }
    if (sc->admitted)
        mgr_bump(m);
    sc->admitted = 0;
}

static fhr_status admit_reservations(fhr_scope *sc, fhr_error *err)
{
    fhr_manager *m = sc->m;
    for (size_t i = 0; i < sc->p->nres; i++) {
        const fhr_reservation *r = &sc->p->res[i];
        fhr_error cause;
        fhr_error_init(&cause);
        char what[96];
        snprintf(what, sizeof what, "reservation '%.60s'", r->label);
        fhr_status st = mgr_check_loc(m, r->at, what, &cause);
        if (st == FHR_OK)
            st = acct_admit(&m->loc[fhr_loc_slot(r->at)], r->at, r->nbytes, what, &cause);
        if (st != FHR_OK) {
            st = plan_failed(sc->p->name, FHR_PHASE_RESERVE, i, NULL, st, &cause, sc->rep, err);
            fhr_error_clear(&cause);
            return st;
        }
        acct_reserve(&m->loc[fhr_loc_slot(r->at)], r->nbytes);
        m->loc[fhr_loc_slot(r->at)].present = 1;
        sc->admitted = i + 1;
        mgr_bump(m);
        fhr_report_add_reservation(sc->rep, 1, r, fhr_now_ns());
        mgr_trace(m, FHR_TR_RESERVE, (fhr_handle){0, 0}, r->at, r->at, r->nbytes, NULL, r->label);
    }
    return FHR_OK;
}

fhr_status fhr_scope_enter(fhr_scope *sc, fhr_error *err)
{
    if (!sc)
        return fhr_fail(err, FHR_E_INVALID, "scope_enter: scope is NULL");
    if (sc->state != SC_NEW)
        return fhr_fail(err, FHR_E_SCOPE, "scope_enter: plan '%.60s' scope was already %s",
                        sc->p->name, sc->state == SC_ENTERED ? "entered" : "used");
    fhr_manager *m = sc->m;
    sc->state = SC_CLOSED; /* any failure below consumes the scope */
    lease_waits waits = {.n = 0};
    mgr_claims c;
    mgr_claims_init(&c);
    fhr_status st = claim_actions(&c, sc->p->acts[0], sc->p->nacts[0], err);
    if (st == FHR_OK)
        st = claim_actions(&c, sc->p->acts[1], sc->p->nacts[1], err);
    for (size_t i = 0; i < sc->nleases && st == FHR_OK; i++)
        st = mgr_claims_add(&c, sc->leases[i].hs, sc->leases[i].n, err);
    if (st == FHR_OK && (st = mgr_enter(m, "scope_enter", err)) == FHR_OK)
        mgr_claim(m, &c); /* held through the leases: nobody takes a placed copy first */
    if (st != FHR_OK) {
        mgr_claims_free(&c);
        return st;
    }
    if (sc->has_expect && sc->expect != m->version) {
        st = fhr_fail(err, FHR_E_STALE,
                      "scope_enter: plan '%.60s' was decided against state version %llu, the "
                      "manager is at %llu; decide again",
                      sc->p->name, (unsigned long long)sc->expect,
                      (unsigned long long)m->version);
        goto out;
    }
    fhr_explanation ex;
    sim_input in = {sc->p, NULL, 0};
    plan_simulate(m, &in, &ex);
    if (!ex.feasible) {
        char what[96];
        snprintf(what, sizeof what, "plan '%.60s'", sc->p->name);
        st = plan_infeasible(&ex, what, err);
        goto out;
    }
    const char *parent = m->nscopes ? m->scopes[m->nscopes - 1]->path : NULL;
    size_t len = (parent ? strlen(parent) + 1 : 0) + strlen(sc->p->name) + 1;
    sc->path = malloc(len);
    if (!sc->path || !(sc->rep = fhr_report_new(""))) {
        st = fhr_fail(err, FHR_E_NOMEM, "scope_enter: out of host memory");
        goto out;
    }
    snprintf(sc->path, len, "%s%s%s", parent ? parent : "", parent ? "/" : "", sc->p->name);
    free(sc->rep->name);
    sc->rep->name = strdup(sc->path);
    mgr_trace(m, FHR_TR_SCOPE_ENTER, (fhr_handle){0, 0}, (fhr_location){0, 0},
              (fhr_location){0, 0}, 0, NULL, sc->path);
    if ((st = run_list(m, sc->p->name, FHR_PHASE_RECLAIM, sc->p->acts[0], sc->p->nacts[0],
                       sc->streams, sc->nstreams, sc->rep, err)) != FHR_OK ||
        (st = admit_reservations(sc, err)) != FHR_OK ||
        (st = run_list(m, sc->p->name, FHR_PHASE_ENTER, sc->p->acts[1], sc->p->nacts[1],
                       sc->streams, sc->nstreams, sc->rep, err)) != FHR_OK ||
        (st = take_leases(sc, &waits, err)) != FHR_OK) {
        release_reservations(sc); /* a consumed scope holds no headroom */
        goto out;
    }
    push_scope(m, sc);
    sc->state = SC_ENTERED;
out:
    mgr_unclaim(m, &c);
    mgr_leave(m);
    lease_waits_finish(m, &waits);
    return st;
}

fhr_status fhr_scope_exit(fhr_scope *sc, fhr_status body_status, fhr_error *err)
{
    if (!sc)
        return fhr_fail(err, FHR_E_INVALID, "scope_exit: scope is NULL");
    if (sc->state != SC_ENTERED)
        return fhr_fail(err, FHR_E_SCOPE, "scope_exit: plan '%.60s' scope is not entered",
                        sc->p->name);
    fhr_manager *m = sc->m;
    mgr_claims c;
    mgr_claims_init(&c);
    fhr_status st = claim_actions(&c, sc->p->acts[2], sc->p->nacts[2], err);
    if (st == FHR_OK && (st = mgr_enter(m, "scope_exit", err)) == FHR_OK)
        mgr_claim(m, &c);
    if (st != FHR_OK) {
        mgr_claims_free(&c);
        return st; /* nothing ran; the scope stays entered */
    }
    /* Leases end before the exit actions. One that cannot end (its completion event could
     * not be recorded) is the exit's failure; fhr_scope_destroy ends it by waiting. */
    fhr_error xerr, rerr;
    fhr_error_init(&xerr);
    fhr_error_init(&rerr);
    fhr_status rst = FHR_OK;
    for (size_t i = 0; i < sc->nleases; i++)
        if (sc->leases[i].lease && lease_is_active(sc->leases[i].lease)) {
            fhr_status s1 = lease_release_locked(sc->leases[i].lease, rst ? NULL : &rerr);
            if (s1 && !rst)
                rst = s1;
        }
    st = run_list(m, sc->p->name, FHR_PHASE_EXIT, sc->p->acts[2], sc->p->nacts[2], sc->streams,
                  sc->nstreams, sc->rep, &xerr);
    if (rst) { /* a plan failure of the exit phase, caused by the lease */
        fhr_error_clear(&xerr);
        fhr_fail(&xerr, FHR_E_PLAN, "plan '%.60s' exit: a lease could not end: %s", sc->p->name,
                 rerr.message);
        xerr.cause = rst;
        xerr.phase = FHR_PHASE_EXIT;
        xerr.partial_report = fhr_report_clone(sc->rep);
        st = FHR_E_PLAN;
    }
    fhr_error_clear(&rerr);
    release_reservations(sc);
    pop_scope(m, sc);
    sc->state = SC_CLOSED;
    mgr_trace(m, FHR_TR_SCOPE_EXIT, (fhr_handle){0, 0}, (fhr_location){0, 0},
              (fhr_location){0, 0}, 0, NULL, sc->path);
    mgr_unclaim(m, &c);
    mgr_leave(m);
    if (st == FHR_OK) {
        sc->published = sc->rep;
        sc->rep = NULL;
        return FHR_OK;
    }
    /* The exit failure is kept on the scope. When the body failed too, its error stays
     * primary: err (the body's, if the caller put it there) is left alone and the body's
     * status is returned. */
    sc->exit_err = xerr;
    sc->has_exit_err = 1;
    if (body_status != FHR_OK)
        return body_status;
    if (err) {
        fhr_error_clear(err);
        *err = xerr;
        err->partial_report = fhr_report_clone(xerr.partial_report);
    }
    return st;
}

void fhr_scope_close(fhr_scope *sc)
{
    if (sc && sc->state == SC_ENTERED)
        fhr_scope_exit(sc, FHR_E_SCOPE, NULL);
}

/* The rest of a destroy, with the lock held and no source load running. An exit refused
 * because a load ran leaves the scope entered: its reservations, stack entry and leases
 * end here (its exit actions do not run). */
static void scope_teardown(fhr_manager *m, mgr_deferred *d)
{
    fhr_scope *sc = (fhr_scope *)((char *)d - offsetof(fhr_scope, deferred));
    if (sc->state == SC_ENTERED) {
        release_reservations(sc);
        pop_scope(m, sc);
        sc->state = SC_CLOSED;
    }
    for (size_t i = 0; i < sc->nleases; i++) {
        if (sc->leases[i].lease)
            lease_destroy_locked(sc->leases[i].lease);
        free(sc->leases[i].hs);
    }
    free(sc->leases);
    fhr_error_clear(&sc->exit_err);
    fhr_report_free(sc->rep);
    fhr_report_free(sc->published);
    free(sc->streams);
    free(sc->path);
    free(sc);
}

void fhr_scope_destroy(fhr_scope *sc)
{
    if (!sc)
        return;
    fhr_scope_close(sc);
    fhr_manager *m = sc->m;
    mgr_lock(m);
    /* During a load the teardown waits for its end, when the caller's consumer streams
     * may be gone: what the leases owe them is done now, from this thread. */
    for (size_t i = 0; m->loading && i < sc->nleases; i++)
        if (sc->leases[i].lease)
            lease_settle_consumers(sc->leases[i].lease);
    sc->deferred.fn = scope_teardown;
    mgr_defer(m, &sc->deferred);
    mgr_leave(m);
}

const fhr_report *fhr_scope_report(const fhr_scope *sc) { return sc ? sc->published : NULL; }
const fhr_error *fhr_scope_exit_error(const fhr_scope *sc)
{
    return sc && sc->has_exit_err ? &sc->exit_err : NULL;
}
const char *fhr_scope_path(const fhr_scope *sc) { return sc && sc->path ? sc->path : ""; }
