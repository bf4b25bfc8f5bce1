/* runtime/manager/wait.c — the throttling primitive: a host wait, outside the lock, for the
 * consumer events that alone protect copies at one location, oldest use first, then a reap. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdlib.h>

typedef struct cand {
    mat *x;
    uint64_t charge;
} cand;

static int by_last_use(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return x->x->last_use < y->x->last_use ? -1 : x->x->last_use > y->x->last_use;
}

/* Under the lock: the events protecting the least recently used copies at slot that are
 * protected by pending events alone, until they cover nbytes of charge. Each returned
 * event holds a reference. */
static fhr_status collect(fhr_manager *m, int slot, uint64_t nbytes, evref ***out, size_t *nout,
                          fhr_error *err)
{
    cand *c = NULL;
    size_t nc = 0, capc = 0;
    for (uint64_t s = 1; s < m->next_serial; s++) {
        val *v = m->vals[s];
        mat *x = v ? val_mat(v, slot) : NULL;
        if (!x || x->leases || x->holds || !x->pending)
            continue;
        if (!fhr_grow((void **)&c, &capc, nc, sizeof *c, 16)) {
            free(c);
            return fhr_fail(err, FHR_E_NOMEM, "wait_pending: out of host memory");
        }
        c[nc++] = (cand){x, mat_charge(v, x)}; /* as charged there */
    }
    if (nc > 1) /* none: c is NULL, which qsort must not be given */
        qsort(c, nc, sizeof *c, by_last_use);
    size_t take = 0;
    for (uint64_t got = 0; take < nc && (got < nbytes || take == 0); take++)
        got += c[take].charge;
    evref **ev = NULL;
    size_t nev = 0, capev = 0;
    for (size_t p = 0; p < m->npend; p++) {
        pending_ref *r = &m->pend[p];
        size_t k = 0;
        while (k < take && c[k].x != r->m)
            k++;
        if (k == take)
            continue;
        size_t j = 0;
        while (j < nev && ev[j] != r->e)
            j++;
        if (j < nev)
            continue;
        if (!fhr_grow((void **)&ev, &capev, nev, sizeof *ev, 8)) {
            for (j = 0; j < nev; j++)
                ev_unref(m, ev[j]);
            free(ev);
            free(c);
            return fhr_fail(err, FHR_E_NOMEM, "wait_pending: out of host memory");
        }
        r->e->refs++;
        ev[nev++] = r->e;
    }
    free(c);
    *out = ev;
    *nout = nev;
    return FHR_OK;
}

fhr_status fhr_wait_pending(fhr_manager *m, fhr_location at, uint64_t nbytes, size_t *waited,
                            fhr_error *err)
{
    if (waited)
        *waited = 0;
    if (!m)
        return fhr_fail(err, FHR_E_INVALID, "wait_pending: manager is NULL");
    fhr_status st = mgr_enter(m, "wait_pending", err);
    if (st != FHR_OK)
        return st;
    if ((st = mgr_check_loc(m, at, "wait_pending", err)) != FHR_OK) {
        mgr_leave(m);
        return st;
    }
    /* Copies that other threads are making at `at` (admitted, outside the lock) hold their
     * charge there and are no copies yet: nothing can be decided about them until one
     * ends. Wait for one to end (the lock is given up meanwhile), then look at the events. */
    int slot = fhr_loc_slot(at);
    size_t n = 0;
    if (m->loc[slot].inflight) {
        const uint64_t ended = m->loc[slot].inflight_ended;
        while (m->loc[slot].inflight && m->loc[slot].inflight_ended == ended)
            pthread_cond_wait(&m->inflight_cv, &m->lock);
        n++;
    }
    evref **ev = NULL;
    size_t nev = 0;
    st = collect(m, slot, nbytes, &ev, &nev, err);
    mgr_leave(m);
    if (st != FHR_OK)
        return st;
    /* The host waits here, without the lock: other threads keep using the manager. */
    for (size_t i = 0; i < nev; i++) {
        if (m->b->ops->event_query(m->b, ev[i]->ev) == 0) {
            n++;
            if (st == FHR_OK)
                st = m->b->ops->event_sync(m->b, ev[i]->ev, err);
        }
    }
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < nev; i++)
        ev_unref(m, ev[i]);
    if (!m->loading)
        mgr_reap(m);
    pthread_mutex_unlock(&m->lock);
    free(ev);
    if (waited)
        *waited = n;
    return st;
}
