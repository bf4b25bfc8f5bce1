/* runtime/manager/primitives.c — ensure, move, drop and discard against live state: the rule
 * core decides, this file allocates, copies, records events, frees stream-ordered and
 * keeps the accounting, the trace and the running report. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mgr_rule_view(fhr_manager *m, const val *v, rule_view *rv, char *namebuf, size_t cap)
{
    memset(rv, 0, sizeof *rv);
    rv->h = mgr_handle(m, v);
    rv->name = mgr_vname(v, namebuf, cap);
    rv->mode = v->mode;
    rv->recov = v->recov;
    rv->has_src = v->has_src;
    rv->charge = v->charge;
    rv->present = v->present;
    for (int s = 0; s < FHR_LOC_SLOTS; s++) {
        const mat *x = v->mats[s];
        if (!x)
            continue;
        const char *why = x->leases    ? "an active lease"
                          : x->holds   ? "a hold"
                          : x->pending ? "a pending consumer event (not yet completed and reaped)"
                                       : NULL;
        if (why) {
            rv->protected_ |= 1ULL << s;
            rv->why[s] = why;
        }
    }
}

/* Frees a copy once every in-flight copy into or out of it has completed, without a
 * host wait: the location's own stream waits for those events, then frees. */
static void remove_mat(fhr_manager *m, val *v, int slot)
{
    mat *x = v->mats[slot];
    fhr_stream *r = NULL;
    int ordered = mgr_stream(m, x->loc, &r, NULL) == FHR_OK;
    evref *evs[1 + 64];
    size_t nev = 0;
    if (x->ready)
        evs[nev++] = x->ready;
    for (size_t i = 0; i < x->nreads; i++) {
        if (nev < sizeof evs / sizeof evs[0]) {
            evs[nev++] = x->reads[i];
        } else {
            m->b->ops->event_sync(m->b, x->reads[i]->ev, NULL);
            ev_unref(m, x->reads[i]);
        }
    }
    for (size_t i = 0; i < nev; i++) {
        if (ordered && !ev_done(m, evs[i]) &&
            m->b->ops->stream_wait_event(m->b, r, evs[i]->ev, NULL) != FHR_OK) {
            ordered = 0;
        }
    }
    if (!ordered) /* could not order the free: wait on the host instead */
        for (size_t i = 0; i < nev; i++)
            m->b->ops->event_sync(m->b, evs[i]->ev, NULL);
    value_destroy_on(x->value, m->b, ordered ? r : NULL);
    for (size_t i = 0; i < nev; i++)
        ev_unref(m, evs[i]);
    free(x->reads);
    free(x);
    v->mats[slot] = NULL;
    v->present &= ~(1ULL << slot);
    acct_release(&m->loc[slot], v->charge);
}

static fhr_status add_read(fhr_manager *m, mat *src, evref *e)
{
    for (size_t i = 0; i < src->nreads;) { /* forget completed readers first */
        if (ev_done(m, src->reads[i])) {
            ev_unref(m, src->reads[i]);
            src->reads[i] = src->reads[--src->nreads];
            continue;
        }
        i++;
    }
    if (!fhr_grow((void **)&src->reads, &src->capreads, src->nreads, sizeof *src->reads, 4))
        return FHR_E_NOMEM;
    e->refs++;
    src->reads[src->nreads++] = e;
    return FHR_OK;
}

/* Runs a user callback with the lock dropped and every other call refused. */
static void unlocked_begin(fhr_manager *m)
{
    m->loading = 1;
    pthread_mutex_unlock(&m->lock);
}

static void unlocked_end(fhr_manager *m)
{
    pthread_mutex_lock(&m->lock);
    m->loading = 0;
}

static fhr_status load_copy(fhr_manager *m, val *v, fhr_location at, fhr_stream *s,
                            fhr_value **out, fhr_error *err)
{
    char nm[96];
    fhr_value *lv = NULL;
    fhr_error lerr;
    fhr_error_init(&lerr);
    unlocked_begin(m);
    fhr_status st = v->src.load(v->src.ctx, &v->spec, at, m->b, s, &lv, &lerr);
    unlocked_end(m);
    if (st != FHR_OK || !lv) {
        if (lv)
            value_destroy_on(lv, m->b, s);
        st = fhr_fail(err, FHR_E_SOURCE, "load %s: source failed (%s): %s",
                      mgr_vname(v, nm, sizeof nm), fhr_status_name(st ? st : FHR_E_SOURCE),
                      lerr.message[0] ? lerr.message : "no value returned");
        fhr_error_clear(&lerr);
        return st;
    }
    fhr_error_clear(&lerr);
    if ((st = value_check_spec(lv, &v->spec, err)) != FHR_OK) {
        char msg[700];
        snprintf(msg, sizeof msg, "load %s: %s", mgr_vname(v, nm, sizeof nm), err ? err->message : "");
        value_destroy_on(lv, m->b, s);
        return fhr_fail(err, st, "%s", msg);
    }
    if (!fhr_loc_equal(lv->loc, at)) { /* the source produced it elsewhere: bring it here */
        int ts = fhr_loc_slot(lv->loc);
        if (ts < 0 || (lv->loc.kind == FHR_LOC_CUDA && lv->loc.index >= m->ndev)) {
            value_destroy_on(lv, m->b, NULL);
            return fhr_fail(err, FHR_E_SOURCE, "load %s: source returned a value at an invalid location",
                            mgr_vname(v, nm, sizeof nm));
        }
        uint64_t tmp = fhr_value_storage_nbytes(lv);
        m->loc[ts].temp += tmp;
        acct_charge(&m->loc[ts], 0); /* record the temporary in peak_charged */
        fhr_value *moved = NULL;
        st = value_copy_to(lv, at, m->b, s, &moved, err);
        value_destroy_on(lv, m->b, s);
        m->loc[ts].temp -= tmp;
        if (st != FHR_OK)
            return st;
        lv = moved;
    }
    *out = lv;
    return FHR_OK;
}

static fhr_status create_copy(fhr_manager *m, val *v, const rule_effect *eff, fhr_location at,
                              fhr_stream *s, fhr_transition *tr, fhr_error *err)
{
    fhr_value *nv = NULL;
    fhr_status st;
    mat *src = eff->src >= 0 ? v->mats[eff->src] : NULL;
    if (src) {
        if (src->ready && !ev_done(m, src->ready) &&
            (st = m->b->ops->stream_wait_event(m->b, s, src->ready->ev, err)) != FHR_OK)
            return st;
        if ((st = value_copy_to(src->value, at, m->b, s, &nv, err)) != FHR_OK)
            return st;
        tr->has_from = 1;
        tr->from = src->loc;
        tr->nbytes = fhr_value_storage_nbytes(nv);
    } else {
        if ((st = load_copy(m, v, at, s, &nv, err)) != FHR_OK)
            return st;
        tr->loaded = 1;
        tr->nbytes = fhr_value_storage_nbytes(nv);
    }
    mat *x = calloc(1, sizeof *x);
    evref *e = x ? ev_new(m, s, err) : NULL;
    if (!e || (src && add_read(m, src, e) != FHR_OK)) {
        if (e)
            ev_unref(m, e);
        free(x);
        value_destroy_on(nv, m->b, s);
        return err && err->status ? err->status
                                  : fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    x->loc = at;
    x->value = nv;
    x->storage = fhr_value_storage_nbytes(nv);
    x->ready = e;
    x->last_use = ++m->clock;
    int slot = fhr_loc_slot(at);
    v->mats[slot] = x;
    v->present |= 1ULL << slot;
    acct_charge(&m->loc[slot], v->charge);
    return FHR_OK;
}

static void release_source(fhr_manager *m, val *v)
{
    if (!v->has_src || !v->src.release)
        return;
    unlocked_begin(m);
    v->src.release(v->src.ctx);
    unlocked_end(m);
}

fhr_status prim_apply(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_report *rep,
                      fhr_phase phase, size_t index, fhr_error *err)
{
    const char *op = fhr_action_kind_name(a->kind);
    val *v;
    fhr_status st = mgr_lookup(m, a->handle, op, &v, err);
    if (st != FHR_OK)
        return st;
    rule_view rv;
    char nm[96];
    mgr_rule_view(m, v, &rv, nm, sizeof nm);
    rule_effect eff;
    if ((st = rules_check(&rv, a, m->loc, m->ndev, &eff, err)) != FHR_OK)
        return st;
    if (eff.noop) {
        mat *x = v->mats[fhr_loc_slot(a->at)];
        if (x)
            x->last_use = ++m->clock;
        return FHR_OK;
    }
    fhr_transition tr;
    memset(&tr, 0, sizeof tr);
    tr.phase = phase;
    tr.action_index = index;
    tr.kind = a->kind;
    tr.handle = a->handle;
    tr.to = a->at;
    tr.t_start_ns = fhr_now_ns();
    if (eff.discard) {
        for (int sl = 0; sl < FHR_LOC_SLOTS; sl++)
            if (v->present & (1ULL << sl))
                remove_mat(m, v, sl);
        m->vals[v->serial] = NULL;
        m->nlive--;
        mgr_bump(m);
        release_source(m, v);
        tr.to = (fhr_location){FHR_LOC_INVALID, 0};
        mgr_trace(m, FHR_TR_DISCARD, a->handle, tr.to, tr.to, 0, NULL, NULL);
        free(v->spec_fields);
        free(v);
    } else {
        if (eff.create >= 0) {
            if (!s && (st = mgr_stream(m, a->at, &s, err)) != FHR_OK)
                return st;
            if ((st = create_copy(m, v, &eff, a->at, s, &tr, err)) != FHR_OK)
                return st;
            tr.stream_id = m->b->ops->stream_id(m->b, s);
        }
        if (eff.remove >= 0) {
            tr.has_from = 1;
            tr.from = fhr_loc_from_slot(eff.remove);
            if (a->kind == FHR_ACT_DROP)
                tr.to = tr.from;
            remove_mat(m, v, eff.remove);
        }
        /* only now, when the transition has succeeded: a failed one changes nothing */
        m->loc[fhr_loc_slot(a->at)].present = 1;
        mgr_bump(m);
        mgr_trace(m, tr.loaded ? FHR_TR_LOAD : a->kind == FHR_ACT_ENSURE ? FHR_TR_ENSURE
                     : a->kind == FHR_ACT_MOVE                       ? FHR_TR_MOVE
                                                                     : FHR_TR_DROP,
                  a->handle, tr.has_from ? tr.from : tr.to, tr.to, tr.nbytes, s, NULL);
    }
    tr.t_end_ns = fhr_now_ns();
    if (rep && fhr_report_add_transition(rep, &tr) != FHR_OK)
        return fhr_fail(err, FHR_E_NOMEM, "report: out of host memory");
    return FHR_OK;
}

static fhr_status run_one(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_error *err)
{
    fhr_status st = mgr_enter(m, fhr_action_kind_name(a->kind), err);
    if (st != FHR_OK)
        return st;
    st = prim_apply(m, a, s, NULL, FHR_PHASE_NONE, 0, err);
    mgr_leave(m);
    return st;
}

fhr_status fhr_ensure(fhr_manager *m, fhr_handle h, fhr_location at, fhr_stream *s,
                      fhr_error *err)
{
    fhr_action a = {FHR_ACT_ENSURE, h, at, 0, {0, 0}};
    return run_one(m, &a, s, err);
}

fhr_status fhr_move(fhr_manager *m, fhr_handle h, fhr_location to, const fhr_location *from,
                    fhr_stream *s, fhr_error *err)
{
    fhr_action a = {FHR_ACT_MOVE, h, to, from != NULL, from ? *from : (fhr_location){0, 0}};
    return run_one(m, &a, s, err);
}

fhr_status fhr_drop(fhr_manager *m, fhr_handle h, fhr_location at, fhr_error *err)
{
    fhr_action a = {FHR_ACT_DROP, h, at, 0, {0, 0}};
    return run_one(m, &a, NULL, err);
}

fhr_status fhr_discard(fhr_manager *m, fhr_handle h, fhr_error *err)
{
    fhr_action a = {FHR_ACT_DISCARD, h, {0, 0}, 0, {0, 0}};
    return run_one(m, &a, NULL, err);
}
