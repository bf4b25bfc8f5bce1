/* runtime/manager/lease.c — leases (ready-only read windows with CUDA completion events) and
 * holds (retention without values). Release never waits: consumer events keep the
 * copies protected until they complete and are reaped; no wait runs under the lock. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fhr_lease {
    fhr_manager *m;
    fhr_location at;
    size_t n;
    fhr_handle *hs;
    mat **mats;
    fhr_stream **cons;
    size_t ncons, capcons;
    int released;
    mgr_chore chore;       /* waiting for the consumers when no event could be recorded */
    mgr_deferred deferred; /* destroyed while a source load ran */
    /* A destroy during a source load is applied later, by whichever thread ends the last
     * load, when the caller's streams may be gone: the destroying thread first records the
     * consumer events (early, one per consumer) or, failing that, waits for the consumers
     * (consumers_done). The deferred release then touches none of the caller's streams. */
    evref **early;
    int consumers_done;
};

struct fhr_hold {
    fhr_manager *m;
    fhr_location at;
    size_t n;
    mat **mats;
    fhr_handle *hs;
    int released;
    mgr_deferred deferred;
};

/* Resolves every handle to its copy at `at`; refuses duplicates and missing copies. */
static fhr_status resolve(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                          const char *op, mat **mats, fhr_error *err)
{
    if (!hs || n == 0)
        return fhr_fail(err, FHR_E_INVALID, "%s: no handles", op);
    fhr_status st = mgr_check_loc(m, at, op, err);
    if (st != FHR_OK)
        return st;
    int slot = fhr_loc_slot(at);
    for (size_t i = 0; i < n; i++) {
        val *v;
        if ((st = mgr_lookup(m, hs[i], op, &v, err)) != FHR_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (fhr_handle_equal(hs[i], hs[j]))
                return fhr_fail(err, FHR_E_INVALID, "%s: handle #%llu is listed twice", op,
                                (unsigned long long)hs[i].serial);
        if (!val_mat(v, slot)) {
            char nm[96], lb[16];
            fhr_fail(err, FHR_E_STATE, "%s %s at %s: no copy there (%s never materializes)", op,
                     mgr_vname(v, nm, sizeof nm), fhr_loc_format(at, lb, sizeof lb), op);
            if (err) {
                err->handle = hs[i];
                err->loc = at;
            }
            return FHR_E_STATE;
        }
        mats[i] = val_mat(v, slot);
    }
    return FHR_OK;
}

static void lease_free(fhr_lease *l)
{
    free(l->cons);
    free(l->hs);
    free(l->mats);
    free(l);
}

fhr_status lease_acquire_locked(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                                fhr_stream *consumer, fhr_lease **out, lease_waits *w,
                                fhr_error *err)
{
    *out = NULL;
    if (at.kind == FHR_LOC_CUDA && !consumer)
        return fhr_fail(err, FHR_E_LEASE,
                        "acquire at cuda:%d needs a consumer stream (the stream that will read)",
                        at.index);
    fhr_lease *l = calloc(1, sizeof *l);
    if (!l || !(l->hs = malloc((n ? n : 1) * sizeof *l->hs)) ||
        !(l->mats = malloc((n ? n : 1) * sizeof *l->mats)) ||
        (consumer && !(l->cons = malloc(4 * sizeof *l->cons)))) {
        if (l)
            lease_free(l);
        return fhr_fail(err, FHR_E_NOMEM, "acquire: out of host memory");
    }
    fhr_status st = resolve(m, hs, n, at, "acquire", l->mats, err);
    if (st != FHR_OK) {
        lease_free(l);
        return st;
    }
    size_t w0 = w->n;
    for (size_t i = 0; i < n && st == FHR_OK; i++) {
        mat *x = l->mats[i];
        if (!x->ready || ev_done(m, x->ready))
            continue;
        if (at.kind == FHR_LOC_CUDA) {
            /* the consumer waits for the copy on the device; the host does not */
            st = m->b->ops->stream_wait_event(m->b, consumer, x->ready->ev, err);
        } else if (!fhr_grow((void **)&w->ev, &w->cap, w->n, sizeof *w->ev, 8)) {
            st = fhr_fail(err, FHR_E_NOMEM, "acquire: out of host memory");
        } else { /* the host waits after the lock is let go (lease_waits_finish) */
            x->ready->refs++;
            w->ev[w->n++] = x->ready;
        }
    }
    if (st != FHR_OK) {
        for (size_t k = w0; k < w->n; k++)
            ev_unref(m, w->ev[k]);
        w->n = w0;
        lease_free(l);
        return st;
    }
    if (consumer) {
        l->capcons = 4;
        l->cons[l->ncons++] = consumer;
    }
    for (size_t i = 0; i < n; i++) {
        l->mats[i]->leases++;
        l->mats[i]->last_use = ++m->clock;
        mgr_changed(m, l->mats[i]->serial);
        l->hs[i] = hs[i];
        mgr_trace(m, FHR_TR_ACQUIRE, hs[i], at, at, 0, consumer, NULL);
    }
    l->m = m;
    l->at = at;
    l->n = n;
    mgr_bump(m);
    *out = l;
    return FHR_OK;
}

void lease_waits_finish(fhr_manager *m, lease_waits *w)
{
    /* Host readers must see finished copies: wait without the lock. */
    for (size_t i = 0; i < w->n; i++)
        m->b->ops->event_sync(m->b, w->ev[i]->ev, NULL);
    if (w->n) {
        mgr_lock(m);
        for (size_t i = 0; i < w->n; i++)
            ev_unref(m, w->ev[i]);
        mgr_leave(m);
    }
    free(w->ev);
    w->ev = NULL;
    w->n = w->cap = 0;
}

void lease_abandon_locked(fhr_lease *l)
{
    for (size_t i = 0; i < l->n; i++) {
        l->mats[i]->leases--;
        mgr_changed(l->m, l->mats[i]->serial);
    }
    l->m->version++;
    lease_free(l);
}

fhr_status fhr_acquire(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                       fhr_stream *consumer, fhr_lease **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "acquire: out is NULL");
    *out = NULL;
    fhr_status st = mgr_enter(m, "acquire", err);
    if (st != FHR_OK)
        return st;
    lease_waits w = {.n = 0};
    mgr_await_unclaimed(m, hs, n); /* a copy being made or removed: wait for its end */
    st = lease_acquire_locked(m, hs, n, at, consumer, out, &w, err);
    mgr_leave(m);
    lease_waits_finish(m, &w);
    return st;
}

fhr_status fhr_lease_add_consumer_stream(fhr_lease *l, fhr_stream *s, fhr_error *err)
{
    if (!l || !s)
        return fhr_fail(err, FHR_E_INVALID, "lease_add_consumer_stream: NULL argument");
    fhr_status st = mgr_enter(l->m, "lease_add_consumer_stream", err);
    if (st != FHR_OK)
        return st;
    if (l->released) {
        st = fhr_fail(err, FHR_E_LEASE, "lease_add_consumer_stream: the lease was already released");
    } else {
        int dup = 0;
        for (size_t i = 0; i < l->ncons; i++)
            dup |= l->cons[i] == s;
        if (!dup) {
            if (!fhr_grow((void **)&l->cons, &l->capcons, l->ncons, sizeof *l->cons, 4)) {
                mgr_leave(l->m);
                return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            }
            l->cons[l->ncons++] = s;
            /* The new consumer must also see copies still in flight. */
            for (size_t i = 0; i < l->n && st == FHR_OK; i++) {
                mat *x = l->mats[i];
                if (x->ready && !ev_done(l->m, x->ready))
                    st = l->m->b->ops->stream_wait_event(l->m->b, s, x->ready->ev, err);
            }
            if (st != FHR_OK)
                l->ncons--;
        }
    }
    mgr_leave(l->m);
    return st;
}

const fhr_value *fhr_lease_value(const fhr_lease *l, fhr_handle h)
{
    if (!l || l->released)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        if (fhr_handle_equal(l->hs[i], h))
            return l->mats[i]->value;
    return NULL;
}

static fhr_status push_pending(fhr_manager *m, mat *x, evref *e)
{
    if (!fhr_grow((void **)&m->pend, &m->cappend, m->npend, sizeof *m->pend, 16))
        return FHR_E_NOMEM;
    e->refs++;
    x->pending++;
    mgr_changed(m, x->serial);
    m->pend[m->npend++] = (pending_ref){x, e};
    return FHR_OK;
}

fhr_status lease_release_locked(fhr_lease *l, fhr_error *err)
{
    fhr_manager *m = l->m;
    fhr_status st = FHR_OK;
    if (l->released)
        return fhr_fail(err, FHR_E_LEASE, "lease_release: the lease was already released");
    /* Record every consumer event first; if one fails nothing changes. A destroy during a
     * load recorded them already, or waited for the consumers (then none is needed). */
    size_t ncons = l->consumers_done ? 0 : l->ncons;
    fhr_stream *trace_s = l->early || l->consumers_done || !l->ncons ? NULL : l->cons[0];
    evref *evs[16];
    evref **ev = l->early ? l->early : ncons <= 16 ? evs : malloc(ncons * sizeof *ev);
    if (!ev)
        return fhr_fail(err, FHR_E_NOMEM, "lease_release: out of host memory");
    size_t made = l->early ? ncons : 0;
    for (; made < ncons && st == FHR_OK; made++)
        if ((st = ev_new(m, l->cons[made], &ev[made], err)) != FHR_OK)
            break;
    if (st == FHR_OK) {
        /* reserve pending slots so that the commit below cannot fail half-way */
        size_t need = m->npend + ncons * l->n;
        if (need > m->cappend) {
            pending_ref *n = realloc(m->pend, need * sizeof *n);
            if (n) {
                m->pend = n;
                m->cappend = need;
            }
        }
        if (need > m->cappend)
            st = fhr_fail(err, FHR_E_NOMEM, "lease_release: out of host memory");
    }
    if (st == FHR_OK) {
        for (size_t c = 0; c < ncons; c++)
            for (size_t i = 0; i < l->n; i++)
                push_pending(m, l->mats[i], ev[c]);
        for (size_t i = 0; i < l->n; i++) {
            l->mats[i]->leases--;
            mgr_changed(m, l->mats[i]->serial);
            mgr_trace(m, FHR_TR_RELEASE, l->hs[i], l->at, l->at, 0, trace_s, NULL);
        }
        l->released = 1;
        mgr_bump(m);
    } else if (l->early) {
        return st; /* kept for the fallback, which waits for them (lease_sync_work) */
    }
    for (size_t c = 0; c < made; c++)
        ev_unref(m, ev[c]);
    if (ev != evs)
        free(ev);
    l->early = NULL;
    return st;
}

int lease_is_active(const fhr_lease *l) { return !l->released; }

fhr_status fhr_lease_release(fhr_lease *l, fhr_error *err)
{
    if (!l)
        return fhr_fail(err, FHR_E_INVALID, "lease_release: lease is NULL");
    fhr_status st = mgr_enter(l->m, "lease_release", err);
    if (st != FHR_OK)
        return st;
    st = lease_release_locked(l, err);
    mgr_leave(l->m);
    return st;
}

/* The fallback of a release that could not record consumer events (or, after a destroy
 * during a load, could not commit the ones recorded then): the copies stay leased while
 * the consumers are waited for without the lock, then are unprotected. A deferred
 * release waits for its early events, never for the caller's streams. */
static void lease_sync_work(fhr_manager *m, mgr_chore *c)
{
    fhr_lease *l = (fhr_lease *)((char *)c - offsetof(fhr_lease, chore));
    if (l->consumers_done)
        return;
    for (size_t i = 0; i < l->ncons; i++) {
        if (l->early)
            m->b->ops->event_sync(m->b, l->early[i]->ev, NULL);
        else
            m->b->ops->stream_sync(m->b, l->cons[i], NULL);
    }
}

static void lease_sync_done(fhr_manager *m, mgr_chore *c)
{
    fhr_lease *l = (fhr_lease *)((char *)c - offsetof(fhr_lease, chore));
    int deferred = l->early || l->consumers_done;
    for (size_t i = 0; i < l->n; i++) {
        l->mats[i]->leases--;
        mgr_changed(m, l->mats[i]->serial);
        mgr_trace(m, FHR_TR_RELEASE, l->hs[i], l->at, l->at, 0,
                  deferred || !l->ncons ? NULL : l->cons[0], NULL);
    }
    if (l->early) {
        for (size_t i = 0; i < l->ncons; i++)
            ev_unref(m, l->early[i]);
        free(l->early);
    }
    mgr_bump(m);
    lease_free(l);
}

void lease_destroy_locked(fhr_lease *l)
{
    if (l->released || lease_release_locked(l, NULL) == FHR_OK) {
        lease_free(l);
        return;
    }
    l->released = 1; /* for the caller it is gone; the chore finishes the release */
    l->chore.work = lease_sync_work;
    l->chore.done = lease_sync_done;
    mgr_chore_push(l->m, &l->chore);
}

void lease_settle_consumers(fhr_lease *l)
{
    fhr_manager *m = l->m;
    if (l->released || l->early || l->consumers_done || !l->ncons)
        return;
    evref **ev = malloc(l->ncons * sizeof *ev);
    size_t made = 0;
    while (ev && made < l->ncons && ev_new(m, l->cons[made], &ev[made], NULL) == FHR_OK)
        made++;
    if (ev && made == l->ncons) {
        l->early = ev;
        return;
    }
    for (size_t c = 0; c < made; c++)
        ev_unref(m, ev[c]);
    free(ev);
    /* No event: wait here for the consumers, without the lock (the lease stays active
     * meanwhile, so its copies stay protected). */
    mgr_unlock(m);
    for (size_t c = 0; c < l->ncons; c++)
        m->b->ops->stream_sync(m->b, l->cons[c], NULL);
    mgr_lock(m);
    l->consumers_done = 1;
}

static void lease_deferred_destroy(fhr_manager *m, mgr_deferred *d)
{
    (void)m;
    lease_destroy_locked((fhr_lease *)((char *)d - offsetof(fhr_lease, deferred)));
}

/* Inside a source load (from the load itself or from another thread) release is refused
 * and destroy changes no state either: the release it owes is applied as the last load
 * ends, before the call that ran the load goes on. What it owes the caller's streams is
 * done now (lease_settle_consumers): when destroy returns, the caller may destroy them. */
void fhr_lease_destroy(fhr_lease *l)
{
    if (!l)
        return;
    fhr_manager *m = l->m;
    mgr_lock(m);
    if (m->loading)
        lease_settle_consumers(l);
    l->deferred.fn = lease_deferred_destroy;
    mgr_defer(m, &l->deferred);
    mgr_leave(m);
}

fhr_status fhr_hold_acquire(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                            fhr_hold **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "hold: out is NULL");
    *out = NULL;
    fhr_hold *hd = calloc(1, sizeof *hd);
    if (!hd || !(hd->mats = malloc((n ? n : 1) * sizeof *hd->mats)) ||
        !(hd->hs = malloc((n ? n : 1) * sizeof *hd->hs))) {
        if (hd)
            free(hd->mats);
        free(hd);
        return fhr_fail(err, FHR_E_NOMEM, "hold: out of host memory");
    }
    fhr_status st = mgr_enter(m, "hold", err);
    if (st == FHR_OK) {
        mgr_await_unclaimed(m, hs, n);
        if ((st = resolve(m, hs, n, at, "hold", hd->mats, err)) == FHR_OK) {
            for (size_t i = 0; i < n; i++) {
                hd->mats[i]->holds++;
                mgr_changed(m, hd->mats[i]->serial);
                hd->hs[i] = hs[i];
                mgr_trace(m, FHR_TR_HOLD, hs[i], at, at, 0, NULL, NULL);
            }
            hd->m = m;
            hd->at = at;
            hd->n = n;
            mgr_bump(m);
        }
        mgr_leave(m);
    }
    if (st != FHR_OK) {
        free(hd->mats);
        free(hd->hs);
        free(hd);
        return st;
    }
    *out = hd;
    return FHR_OK;
}

fhr_status fhr_hold_release(fhr_hold *hd, fhr_error *err)
{
    if (!hd)
        return fhr_fail(err, FHR_E_INVALID, "hold_release: hold is NULL");
    fhr_status st = mgr_enter(hd->m, "hold_release", err);
    if (st != FHR_OK)
        return st;
    if (hd->released) {
        st = fhr_fail(err, FHR_E_LEASE, "hold_release: the hold was already released");
    } else {
        for (size_t i = 0; i < hd->n; i++) {
            hd->mats[i]->holds--;
            mgr_changed(hd->m, hd->mats[i]->serial);
            mgr_trace(hd->m, FHR_TR_UNHOLD, hd->hs[i], hd->at, hd->at, 0, NULL, NULL);
        }
        hd->released = 1;
        mgr_bump(hd->m);
    }
    mgr_leave(hd->m);
    return st;
}

static void hold_deferred_destroy(fhr_manager *m, mgr_deferred *d)
{
    fhr_hold *hd = (fhr_hold *)((char *)d - offsetof(fhr_hold, deferred));
    if (!hd->released) {
        for (size_t i = 0; i < hd->n; i++) {
            hd->mats[i]->holds--;
            mgr_changed(m, hd->mats[i]->serial);
            mgr_trace(m, FHR_TR_UNHOLD, hd->hs[i], hd->at, hd->at, 0, NULL, NULL);
        }
        mgr_bump(m);
    }
    free(hd->mats);
    free(hd->hs);
    free(hd);
}

/* As fhr_lease_destroy: inside a source load the release waits for the load's end. */
void fhr_hold_destroy(fhr_hold *hd)
{
    if (!hd)
        return;
    fhr_manager *m = hd->m;
    mgr_lock(m);
    hd->deferred.fn = hold_deferred_destroy;
    mgr_defer(m, &hd->deferred);
    mgr_leave(m);
}
