/* runtime/manager/manager.c — the manager object: creation and teardown, the lock, the
 * reentrancy rule, claims, chores and deferred destroys, handle lookup, lazy locations and
 * budgets, adoption and sources, shared events with reaping, and the rolling trace. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static uint64_t fresh_id(const void *salt)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = fhr_now_ns() ^ ((uint64_t)(uintptr_t)salt << 16);
    return id ? id : 1;
}

fhr_status fhr_manager_create(const fhr_manager_config *cfg, fhr_manager **out, fhr_error *err)
{
    if (!out || !cfg || !cfg->backend)
        return fhr_fail(err, FHR_E_INVALID, "manager_create: %s",
                        !out ? "out is NULL" : "a backend is required");
    *out = NULL;
    if (cfg->nbudgets && !cfg->budgets)
        return fhr_fail(err, FHR_E_INVALID, "manager_create: budgets is NULL with nbudgets %zu",
                        cfg->nbudgets);
    fhr_manager *m = calloc(1, sizeof *m);
    if (!m)
        return fhr_fail(err, FHR_E_NOMEM, "manager_create: out of host memory");
    m->b = cfg->backend;
    m->ndev = m->b->ops->device_count(m->b);
    if (m->ndev < 0)
        m->ndev = 0;
    m->id = fresh_id(m);
    m->next_serial = 1;
    m->watch_slot = -1;
    links_fill(NULL, &m->links);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->claims_cv, NULL);
    pthread_cond_init(&m->inflight_cv, NULL);
    fhr_status gst = gens_create(&m->gens, err);
    if (gst == FHR_OK)
        gst = snap_spare_create(&m->spare, err);
    if (gst != FHR_OK) {
        fhr_manager_destroy(m);
        return gst;
    }
    for (size_t i = 0; i < cfg->nbudgets; i++) {
        fhr_status st = fhr_set_budget(m, cfg->budgets[i].loc, cfg->budgets[i].nbytes, err);
        if (st != FHR_OK) {
            fhr_manager_destroy(m);
            return st;
        }
    }
    fhr_status st = fhr_trace_set_capacity(m, cfg->trace_capacity, err);
    if (st != FHR_OK) {
        fhr_manager_destroy(m);
        return st;
    }
    m->version = 0;
    *out = m;
    return FHR_OK;
}

fhr_status snap_spare_create(snap_spare **out, fhr_error *err)
{
    snap_spare *sp = calloc(1, sizeof *sp);
    if (!sp)
        return fhr_fail(err, FHR_E_NOMEM, "manager_create: out of host memory");
    atomic_init(&sp->block, NULL);
    atomic_init(&sp->refs, 1);
    *out = sp;
    return FHR_OK;
}

void snap_spare_unref(snap_spare *sp)
{
    if (!sp || atomic_fetch_sub_explicit(&sp->refs, 1, memory_order_acq_rel) != 1)
        return;
    void *block = atomic_exchange(&sp->block, NULL);
    if (block)
        sp->free_block(block);
    free(sp);
}

uint64_t fhr_manager_id(const fhr_manager *m) { return m ? m->id : 0; }
fhr_backend *fhr_manager_backend(const fhr_manager *m) { return m ? m->b : NULL; }

fhr_status mgr_meta_get(fhr_manager *m, const fhr_ckks_meta *mt, mgr_meta **out, fhr_error *err)
{
    *out = NULL;
    if (value_meta_same(mt, &value_zero_meta))
        return FHR_OK;
    if (m->last_meta && value_meta_same(mt, &m->last_meta->meta)) {
        m->last_meta->refs++;
        *out = m->last_meta;
        return FHR_OK;
    }
    mgr_meta *mm = malloc(sizeof *mm);
    if (!mm)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    mm->meta = *mt;
    mm->refs = 2; /* the value's and the manager's */
    mgr_meta_unref(m->last_meta);
    m->last_meta = mm;
    *out = mm;
    return FHR_OK;
}

void mgr_meta_unref(mgr_meta *mm)
{
    if (mm && --mm->refs == 0)
        free(mm);
}

void mgr_free_record(val *v)
{
    for (uint32_t f = 0; v->cut && f < v->cut->nfields; f++)
        free(v->cut_names[f]);
    free(v->cut_names);
    free(v->cut);
    free(v->label);
    mgr_meta_unref(v->meta);
    free(v->rs);
    free(v);
}

static void free_val(fhr_manager *m, val *v)
{
    for (mat *x = v->copies, *nx; x; x = nx) {
        nx = x->next;
        if (x->ready)
            ev_unref(m, x->ready);
        for (size_t i = 0; i < x->nreads; i++)
            ev_unref(m, x->reads[i]);
        free(x->reads);
        value_destroy_on(x->value, m->b, NULL);
        free(x);
    }
    mgr_free_record(v);
}

void fhr_manager_destroy(fhr_manager *m)
{
    if (!m)
        return;
    /* Nobody else may call now: finish what destroys and removals left behind. */
    pthread_mutex_lock(&m->lock);
    while (m->deferred) {
        mgr_deferred *d = m->deferred;
        m->deferred = d->next;
        d->fn(m, d);
    }
    mgr_leave(m);
    /* Wait for everything enqueued by us or on our behalf, then free. */
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        if (m->streams[s])
            m->b->ops->stream_sync(m->b, m->streams[s], NULL);
    for (size_t i = 0; i < m->npend; i++) {
        m->b->ops->event_sync(m->b, m->pend[i].e->ev, NULL);
        ev_unref(m, m->pend[i].e);
    }
    free(m->pend);
    for (uint64_t i = 1; i < m->next_serial; i++) {
        val *v = m->vals[i];
        if (!v)
            continue;
        for (mat *x = v->copies; x; x = x->next) {
            if (x->ready)
                m->b->ops->event_sync(m->b, x->ready->ev, NULL);
            for (size_t k = 0; k < x->nreads; k++)
                m->b->ops->event_sync(m->b, x->reads[k]->ev, NULL);
        }
        if (v->rs && v->rs->src.release)
            v->rs->src.release(v->rs->src.ctx);
        free_val(m, v);
    }
    free(m->vals);
    mgr_meta_unref(m->last_meta);
    while (m->retired) {
        evref *e = m->retired;
        m->retired = e->next_retired;
        m->b->ops->event_sync(m->b, e->ev, NULL);
        m->b->ops->event_destroy(m->b, e->ev);
        free(e);
    }
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        if (m->streams[s])
            m->b->ops->stream_destroy(m->b, m->streams[s]);
    free(m->trace);
    free(m->scopes);
    gens_destroy(m->gens);
    snap_spare_unref(m->spare);
    pthread_cond_destroy(&m->claims_cv);
    pthread_cond_destroy(&m->inflight_cv);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

fhr_status mgr_enter(fhr_manager *m, const char *op, fhr_error *err)
{
    if (!m)
        return fhr_fail(err, FHR_E_INVALID, "%s: manager is NULL", op);
    pthread_mutex_lock(&m->lock);
    if (m->loading) {
        pthread_mutex_unlock(&m->lock);
        return fhr_fail(err, FHR_E_REENTRANT,
                        "%s: refused while a source load runs on this manager", op);
    }
    mgr_reap(m);
    return FHR_OK;
}

void mgr_lock(fhr_manager *m) { pthread_mutex_lock(&m->lock); }

void mgr_chore_push(fhr_manager *m, mgr_chore *c)
{
    c->next = m->chores;
    m->chores = c;
}

void mgr_unlock(fhr_manager *m)
{
    for (;;) {
        mgr_chore *list = m->chores;
        m->chores = NULL;
        pthread_mutex_unlock(&m->lock);
        if (!list)
            return;
        for (mgr_chore *c = list; c; c = c->next)
            c->work(m, c);
        pthread_mutex_lock(&m->lock);
        while (list) { /* done may free the chore: read next first */
            mgr_chore *c = list;
            list = c->next;
            c->done(m, c);
        }
    }
}

void mgr_leave(fhr_manager *m) { mgr_unlock(m); }

void mgr_callback_begin(fhr_manager *m)
{
    m->loading++;
    mgr_unlock(m);
}

void mgr_callback_end(fhr_manager *m)
{
    pthread_mutex_lock(&m->lock);
    if (--m->loading)
        return;
    while (m->deferred) { /* oldest first is not needed: each stands alone */
        mgr_deferred *d = m->deferred;
        m->deferred = d->next;
        d->fn(m, d);
    }
}

void mgr_defer(fhr_manager *m, mgr_deferred *d)
{
    if (!m->loading) {
        d->fn(m, d);
        return;
    }
    d->next = m->deferred;
    m->deferred = d;
}

/* ---- claims ---------------------------------------------------------------------------- */

void mgr_claims_init(mgr_claims *c)
{
    c->hs = c->inline_;
    c->n = 0;
    c->cap = sizeof c->inline_ / sizeof c->inline_[0];
}

fhr_status mgr_claims_add(mgr_claims *c, const fhr_handle *hs, size_t n, fhr_error *err)
{
    if (c->n + n > c->cap) {
        size_t cap = (c->n + n) * 2;
        fhr_handle *nh = malloc(cap * sizeof *nh);
        if (!nh)
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        memcpy(nh, c->hs, c->n * sizeof *nh);
        if (c->hs != c->inline_)
            free(c->hs);
        c->hs = nh;
        c->cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        c->hs[c->n++] = hs[i];
    return FHR_OK;
}

static val *claim_val(fhr_manager *m, fhr_handle h)
{
    if (h.manager_id != m->id || h.serial == 0 || h.serial >= m->next_serial)
        return NULL;
    return m->vals[h.serial];
}

/* Whether a call other than `owner` claims one of hs. */
static int claimed_by_other(fhr_manager *m, const fhr_handle *hs, size_t n, const void *owner)
{
    for (size_t i = 0; i < n; i++) {
        val *v = claim_val(m, hs[i]);
        if (v && v->claim && v->claim != owner)
            return 1;
    }
    return 0;
}

void mgr_claim(fhr_manager *m, mgr_claims *c)
{
    while (claimed_by_other(m, c->hs, c->n, c)) {
        m->claim_waits++;
        pthread_cond_wait(&m->claims_cv, &m->lock);
    }
    for (size_t i = 0; i < c->n; i++) {
        val *v = claim_val(m, c->hs[i]);
        if (v)
            v->claim = c;
    }
}

void mgr_await_unclaimed(fhr_manager *m, const fhr_handle *hs, size_t n)
{
    if (!hs)
        return;
    while (claimed_by_other(m, hs, n, NULL)) {
        m->claim_waits++;
        pthread_cond_wait(&m->claims_cv, &m->lock);
    }
}

uint64_t mgr_claim_waits(fhr_manager *m)
{
    mgr_lock(m);
    uint64_t n = m->claim_waits;
    mgr_unlock(m);
    return n;
}

void mgr_unclaim(fhr_manager *m, mgr_claims *c)
{
    for (size_t i = 0; i < c->n; i++) {
        val *v = claim_val(m, c->hs[i]);
        if (v && v->claim == c)
            v->claim = NULL;
    }
    if (c->n) /* also when the call discarded its value: waiters must look again */
        pthread_cond_broadcast(&m->claims_cv);
    mgr_claims_free(c);
}

void mgr_claims_free(mgr_claims *c)
{
    if (c->hs != c->inline_)
        free(c->hs);
    mgr_claims_init(c);
}

void mgr_bump(fhr_manager *m) { m->version++; }

fhr_handle mgr_handle(const fhr_manager *m, const val *v)
{
    return (fhr_handle){m->id, v->serial};
}

const char *mgr_vname(const val *v, char *buf, size_t cap)
{
    return rules_name(v->serial, val_label(v), buf, cap);
}

fhr_status mgr_lookup(fhr_manager *m, fhr_handle h, const char *op, val **out, fhr_error *err)
{
    fhr_status st = FHR_OK;
    if (h.manager_id != m->id)
        st = fhr_fail(err, FHR_E_HANDLE,
                      "%s: handle #%llu belongs to manager %016llx, not to this manager (%016llx)",
                      op, (unsigned long long)h.serial, (unsigned long long)h.manager_id,
                      (unsigned long long)m->id);
    else if (h.serial == 0 || h.serial >= m->next_serial)
        st = fhr_fail(err, FHR_E_HANDLE, "%s: handle #%llu was never issued by this manager", op,
                      (unsigned long long)h.serial);
    else if (!m->vals[h.serial])
        st = fhr_fail(err, FHR_E_HANDLE, "%s: handle #%llu was discarded", op,
                      (unsigned long long)h.serial);
    if (st != FHR_OK) {
        if (err)
            err->handle = h;
        return st;
    }
    *out = m->vals[h.serial];
    return FHR_OK;
}

fhr_status mgr_check_loc(fhr_manager *m, fhr_location loc, const char *op, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (slot < 0)
        return fhr_fail(err, FHR_E_LOCATION, "%s: invalid location", op);
    if (loc.kind == FHR_LOC_CUDA && loc.index >= m->ndev) {
        fhr_fail(err, FHR_E_LOCATION, "%s: cuda:%d is not visible to this process (%d device%s)",
                 op, loc.index, m->ndev, m->ndev == 1 ? "" : "s");
        if (err)
            err->loc = loc;
        return FHR_E_LOCATION;
    }
    return FHR_OK; /* a location appears in snapshots once something succeeds there */
}

fhr_status mgr_stream(fhr_manager *m, fhr_location loc, fhr_stream **out, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (!m->streams[slot]) {
        fhr_status st = m->b->ops->stream_create(m->b, loc, &m->streams[slot], err);
        if (st != FHR_OK)
            return st;
    }
    *out = m->streams[slot];
    return FHR_OK;
}

fhr_status fhr_set_budget(fhr_manager *m, fhr_location loc, uint64_t nbytes, fhr_error *err)
{
    fhr_status st = mgr_enter(m, "set_budget", err);
    if (st != FHR_OK)
        return st;
    if ((st = mgr_check_loc(m, loc, "set_budget", err)) == FHR_OK) {
        locacct *a = &m->loc[fhr_loc_slot(loc)];
        uint64_t committed = a->used + a->reserved + a->temp + a->inflight;
        if (committed > nbytes) {
            char lb[16];
            st = fhr_fail(err, FHR_E_BUDGET,
                          "set_budget %s to %llu bytes: %llu bytes are already committed there",
                          fhr_loc_format(loc, lb, sizeof lb), (unsigned long long)nbytes,
                          (unsigned long long)committed);
        } else {
            a->has_budget = 1;
            a->budget = nbytes;
            a->present = 1;
            mgr_bump(m);
        }
    }
    mgr_leave(m);
    return st;
}

bwin *mgr_watch_budget(fhr_manager *m, int slot)
{
    pthread_mutex_lock(&m->lock);
    if (m->watch_slot >= 0)
        m->loc[m->watch_slot].win = NULL;
    m->watch_slot = slot >= 0 && slot < FHR_LOC_SLOTS ? slot : -1;
    m->watch = (bwin){0, UINT64_MAX};
    if (m->watch_slot >= 0)
        m->loc[slot].win = &m->watch;
    pthread_mutex_unlock(&m->lock);
    return m->watch_slot >= 0 ? &m->watch : NULL;
}

bwin *mgr_watched(const fhr_manager *m, int *slot)
{
    *slot = m->watch_slot;
    return m->watch_slot >= 0 ? (bwin *)&m->watch : NULL;
}

/* ---- events ------------------------------------------------------------------------ */

fhr_status ev_new(fhr_manager *m, fhr_stream *s, evref **out, fhr_error *err)
{
    *out = NULL;
    evref *e = calloc(1, sizeof *e);
    if (!e)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    fhr_status st = m->b->ops->event_create(m->b, &e->ev, err);
    if (st != FHR_OK) {
        free(e);
        return st;
    }
    if ((st = m->b->ops->event_record(m->b, e->ev, s, err)) != FHR_OK) {
        m->b->ops->event_destroy(m->b, e->ev);
        free(e);
        return st;
    }
    e->refs = 1;
    e->stream = s;
    /* atomic: copies record their ready event outside the lock. Should two threads record
     * on one stream at once and take their numbers the other way round, a reap can only
     * see a finished event later, never an unfinished one as finished. */
    e->seq = __atomic_add_fetch(&m->ev_seq, 1, __ATOMIC_RELAXED);
    *out = e;
    return FHR_OK;
}

int ev_done(fhr_manager *m, evref *e)
{
    if (!e->done && m->b->ops->event_query(m->b, e->ev) != 0)
        e->done = 1; /* an error also ends the wait: the work will never complete */
    return e->done;
}

void ev_unref(fhr_manager *m, evref *e)
{
    (void)m;
    if (--e->refs)
        return;
    e->next_retired = m->retired;
    m->retired = e;
}

/* One reap's knowledge of streams with unfinished work: the earliest event found not done
 * on each. Work on a stream completes in order, so an event recorded there later is not
 * done either and need not be asked: a reap with hundreds of bodies in flight asks about
 * one event per stream instead of every one (each query is a driver call). */
#define REAP_STREAMS 32
typedef struct reap_pass {
    struct { fhr_stream *s; uint64_t seq; } open[REAP_STREAMS];
    size_t n;
} reap_pass;

static int ev_done_in_pass(fhr_manager *m, evref *e, reap_pass *rp)
{
    if (e->done)
        return 1;
    size_t i = 0;
    while (e->stream && i < rp->n && rp->open[i].s != e->stream)
        i++;
    if (e->stream && i < rp->n && rp->open[i].seq < e->seq)
        return 0; /* behind unfinished work on its stream */
    if (ev_done(m, e))
        return 1;
    if (e->stream && i < rp->n)
        rp->open[i].seq = e->seq; /* an earlier unfinished one */
    else if (e->stream && rp->n < REAP_STREAMS)
        rp->open[rp->n].s = e->stream, rp->open[rp->n++].seq = e->seq;
    return 0;
}

size_t mgr_reap(fhr_manager *m)
{
    size_t n = 0, k = 0;
    reap_pass rp;
    rp.n = 0;
    for (size_t i = 0; i < m->npend; i++) { /* in place, keeping the order */
        pending_ref *p = &m->pend[i];
        if (ev_done_in_pass(m, p->e, &rp)) {
            p->m->pending--;
            mgr_changed(m, p->m->serial);
            ev_unref(m, p->e);
            n++; /* only relaxes protection: no decision goes stale, so no version bump */
        } else {
            m->pend[k++] = *p;
        }
    }
    m->npend = k;
    evref **pp = &m->retired;
    while (*pp) {
        evref *e = *pp;
        if (ev_done_in_pass(m, e, &rp)) {
            *pp = e->next_retired;
            m->b->ops->event_destroy(m->b, e->ev);
            free(e);
        } else {
            pp = &e->next_retired;
        }
    }
    return n;
}

fhr_status fhr_reap(fhr_manager *m, size_t *reaped, fhr_error *err)
{
    if (reaped)
        *reaped = 0;
    if (!m)
        return fhr_fail(err, FHR_E_INVALID, "reap: manager is NULL");
    pthread_mutex_lock(&m->lock);
    if (m->loading) {
        pthread_mutex_unlock(&m->lock);
        return fhr_fail(err, FHR_E_REENTRANT, "reap: refused while a source load runs on this "
                        "manager");
    }
    size_t n = mgr_reap(m);
    pthread_mutex_unlock(&m->lock);
    if (reaped)
        *reaped = n;
    return FHR_OK;
}

/* ---- adoption and sources ------------------------------------------------------------ */

static fhr_status new_val(fhr_manager *m, const fhr_adopt_opts *opts, val **out, fhr_error *err)
{
    uint64_t serial = m->next_serial;
    if ((serial & (serial - 1)) == 0 || !m->vals) { /* grow at powers of two */
        size_t cap = serial < 16 ? 32 : (size_t)serial * 2;
        val **n = realloc(m->vals, cap * sizeof *n);
        if (!n)
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        for (size_t i = m->vals ? (size_t)serial : 0; i < cap; i++)
            n[i] = NULL;
        m->vals = n;
    }
    val *v = calloc(1, sizeof *v);
    if (!v)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    v->serial = serial;
    if (opts) {
        v->mode = opts->mode;
        v->priority = opts->priority;
        if (opts->label && opts->label[0] &&
            !(v->label = strndup(opts->label, MGR_LABEL_CAP - 1))) {
            free(v);
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        }
    }
    *out = v;
    return FHR_OK;
}

static void publish_val(fhr_manager *m, val *v)
{
    m->vals[v->serial] = v;
    m->next_serial++;
    m->nlive++;
    mgr_changed(m, v->serial);
    mgr_bump(m);
}

static fhr_status check_opts(const fhr_adopt_opts *opts, const char *op, fhr_error *err)
{
    if (opts && opts->mode != FHR_REPLICABLE && opts->mode != FHR_EXCLUSIVE)
        return fhr_fail(err, FHR_E_INVALID, "%s: unknown replica mode %d", op, (int)opts->mode);
    return FHR_OK;
}

fhr_status fhr_adopt(fhr_manager *m, fhr_value **value, const fhr_adopt_opts *opts,
                     fhr_handle *out, fhr_error *err)
{
    if (!value || !*value || !out)
        return fhr_fail(err, FHR_E_INVALID, "adopt: value and out are required");
    fhr_status st = check_opts(opts, "adopt", err);
    if (st != FHR_OK)
        return st;
    fhr_value *cv = *value;
    if (cv->nfields == 0)
        return fhr_fail(err, FHR_E_INVALID, "adopt: the value has no fields");
    if ((st = mgr_enter(m, "adopt", err)) != FHR_OK)
        return st;
    val *v = NULL;
    mat *x = NULL;
    if ((st = mgr_check_loc(m, cv->loc, "adopt", err)) != FHR_OK)
        goto out;
    if ((st = new_val(m, opts, &v, err)) != FHR_OK)
        goto out;
    v->recov = FHR_MUST_PRESERVE;
    if ((st = regen_check_placement(cv, "adopt", err)) != FHR_OK)
        goto out;
    v->charge = fhr_value_storage_nbytes(cv) + regen_omitted(cv, cv->loc.kind);
    v->regen = fhr_value_regenerable_nbytes(cv);
    v->omit[0] = regen_omitted(cv, FHR_LOC_HOST);
    v->omit[1] = regen_omitted(cv, FHR_LOC_PINNED);
    v->logical = fhr_value_logical_nbytes(cv);
    if ((st = mgr_meta_get(m, fhr_value_meta(cv), &v->meta, err)) != FHR_OK)
        goto out;
    int slot = fhr_loc_slot(cv->loc);
    char nm[96], what[128];
    snprintf(what, sizeof what, "adopt %s", mgr_vname(v, nm, sizeof nm));
    if ((st = acct_admit(&m->loc[slot], cv->loc, VAL_CHARGE(v, slot), what, err)) != FHR_OK)
        goto out;
    if (!(x = calloc(1, sizeof *x))) {
        st = fhr_fail(err, FHR_E_NOMEM, "adopt: out of host memory");
        goto out;
    }
    x->loc = cv->loc;
    x->value = cv;
    x->storage = fhr_value_storage_nbytes(cv);
    x->last_use = ++m->clock;
    x->serial = v->serial;
    val_add_mat(v, x);
    v->present = 1ULL << slot;
    m->loc[slot].present = 1;
    acct_charge(&m->loc[slot], VAL_CHARGE(v, slot));
    publish_val(m, v);
    *out = mgr_handle(m, v);
    *value = NULL;
    mgr_trace(m, FHR_TR_ADOPT, *out, cv->loc, cv->loc, v->charge, NULL, NULL);
    v = NULL;
out:
    if (v)
        mgr_free_record(v);
    mgr_leave(m);
    return st;
}

fhr_status fhr_register_source(fhr_manager *m, const fhr_value_spec *spec, const fhr_source *src,
                               const fhr_adopt_opts *opts, fhr_handle *out, fhr_error *err)
{
    if (!spec || !src || !src->load || !out)
        return fhr_fail(err, FHR_E_INVALID, "register_source: spec, source with load, and out are required");
    fhr_status st = check_opts(opts, "register_source", err);
    if (st != FHR_OK)
        return st;
    if (spec->nfields == 0 || !spec->fields)
        return fhr_fail(err, FHR_E_INVALID, "register_source: the spec has no fields");
    if (spec->meta.n_primes > FHR_MAX_PRIMES)
        return fhr_fail(err, FHR_E_INVALID, "register_source: too many prime ids");
    uint64_t logical = 0;
    for (size_t i = 0; i < spec->nfields; i++) {
        if (!spec->fields[i].name || !spec->fields[i].nbytes)
            return fhr_fail(err, FHR_E_INVALID, "register_source: field %zu has no name or size", i);
        if (__builtin_add_overflow(logical, spec->fields[i].nbytes, &logical))
            return fhr_fail(err, FHR_E_INVALID, "register_source: the field sizes add up to 2^64 "
                            "bytes or more (at field %zu '%.60s')", i, spec->fields[i].name);
    }
    if (spec->storage_nbytes == 0)
        return fhr_fail(err, FHR_E_INVALID, "register_source: storage_nbytes must be positive");
    if (spec->storage_nbytes < logical)
        return fhr_fail(err, FHR_E_INVALID, "register_source: storage_nbytes %llu is below the "
                        "%llu bytes of its fields", (unsigned long long)spec->storage_nbytes,
                        (unsigned long long)logical);
    if (spec->regen_nbytes > logical || spec->regen_nbytes >= spec->storage_nbytes ||
        (spec->regen_keep & ~(FHR_KEEP_HOST | FHR_KEEP_PINNED)))
        return fhr_fail(err, FHR_E_INVALID,
                        "register_source: %llu regenerable bytes (keep 0x%x) do not fit fields "
                        "of %llu bytes and a charge of %llu",
                        (unsigned long long)spec->regen_nbytes, spec->regen_keep,
                        (unsigned long long)logical, (unsigned long long)spec->storage_nbytes);
    if ((st = mgr_enter(m, "register_source", err)) != FHR_OK)
        return st;
    val *v = NULL;
    if ((st = new_val(m, opts, &v, err)) != FHR_OK)
        goto out;
    /* one block: the source, field specs, then their names */
    size_t names = 0;
    for (size_t i = 0; i < spec->nfields; i++)
        names += strlen(spec->fields[i].name) + 1;
    v->rs = malloc(sizeof *v->rs + spec->nfields * sizeof(fhr_field_spec) + names);
    if (!v->rs || (st = mgr_meta_get(m, &spec->meta, &v->meta, err)) != FHR_OK) {
        mgr_free_record(v);
        if (st == FHR_OK)
            st = fhr_fail(err, FHR_E_NOMEM, "register_source: out of host memory");
        goto out;
    }
    fhr_field_spec *fs = (fhr_field_spec *)(v->rs + 1);
    char *p = (char *)(fs + spec->nfields);
    for (size_t i = 0; i < spec->nfields; i++) {
        size_t len = strlen(spec->fields[i].name) + 1;
        memcpy(p, spec->fields[i].name, len);
        fs[i] = (fhr_field_spec){p, spec->fields[i].nbytes};
        p += len;
    }
    v->rs->spec = *spec;
    v->rs->spec.fields = fs;
    v->recov = FHR_RECONSTRUCTIBLE;
    v->charge = spec->storage_nbytes;
    v->regen = spec->regen_nbytes;
    v->omit[0] = spec->regen_keep & FHR_KEEP_HOST ? 0 : spec->regen_nbytes;
    v->omit[1] = spec->regen_keep & FHR_KEEP_PINNED ? 0 : spec->regen_nbytes;
    v->logical = logical;
    v->rs->src = *src;
    publish_val(m, v);
    *out = mgr_handle(m, v);
    mgr_trace(m, FHR_TR_REGISTER, *out, (fhr_location){0, 0}, (fhr_location){0, 0}, v->charge,
              NULL, NULL);
out:
    mgr_leave(m);
    return st;
}

fhr_status fhr_set_priority(fhr_manager *m, fhr_handle h, int32_t priority, fhr_error *err)
{
    fhr_status st = mgr_enter(m, "set_priority", err);
    if (st != FHR_OK)
        return st;
    val *v;
    if ((st = mgr_lookup(m, h, "set_priority", &v, err)) == FHR_OK) {
        v->priority = priority;
        mgr_changed(m, v->serial);
        mgr_bump(m);
    }
    mgr_leave(m);
    return st;
}

fhr_status fhr_is_resident(fhr_manager *m, fhr_handle h, fhr_location loc, int *resident,
                           fhr_error *err)
{
    if (resident)
        *resident = 0;
    if (!resident)
        return fhr_fail(err, FHR_E_INVALID, "is_resident: resident is NULL");
    if (fhr_loc_slot(loc) < 0)
        return fhr_fail(err, FHR_E_LOCATION, "is_resident: invalid location");
    fhr_status st = mgr_enter(m, "is_resident", err);
    if (st != FHR_OK)
        return st;
    val *v;
    if ((st = mgr_lookup(m, h, "is_resident", &v, err)) == FHR_OK)
        *resident = (int)((v->present >> fhr_loc_slot(loc)) & 1);
    mgr_leave(m);
    return st;
}

fhr_status fhr_state_version(fhr_manager *m, uint64_t *version, fhr_error *err)
{
    if (version)
        *version = 0;
    if (!version)
        return fhr_fail(err, FHR_E_INVALID, "state_version: version is NULL");
    fhr_status st = mgr_enter(m, "state_version", err);
    if (st != FHR_OK)
        return st;
    *version = m->version;
    mgr_leave(m);
    return FHR_OK;
}

/* ---- trace ----------------------------------------------------------------------------- */

const char *fhr_trace_kind_name(fhr_trace_kind k)
{
    static const char *const n[] = {"adopt", "register", "load", "ensure", "move", "drop",
                                    "discard", "acquire", "release", "hold", "unhold",
                                    "reserve", "unreserve", "reap", "scope_enter",
                                    "scope_exit", "body"};
    return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "unknown";
}

void mgr_trace(fhr_manager *m, fhr_trace_kind k, fhr_handle h, fhr_location from,
               fhr_location to, uint64_t nbytes, fhr_stream *s, const char *label)
{
    m->trace_seq++;
    if (!m->trace_cap)
        return;
    fhr_trace_entry *e = &m->trace[(m->trace_head + m->trace_len) % m->trace_cap];
    if (m->trace_len == m->trace_cap)
        m->trace_head = (m->trace_head + 1) % m->trace_cap;
    else
        m->trace_len++;
    memset(e, 0, sizeof *e);
    e->seq = m->trace_seq;
    e->kind = k;
    e->handle = h;
    e->from = from;
    e->to = to;
    e->nbytes = nbytes;
    e->stream_id = s ? m->b->ops->stream_id(m->b, s) : 0;
    e->t_ns = fhr_now_ns();
    e->state_version = m->version;
    if (label)
        snprintf(e->label, sizeof e->label, "%s", label);
}

fhr_status fhr_trace_set_capacity(fhr_manager *m, size_t capacity, fhr_error *err)
{
    if (!m)
        return fhr_fail(err, FHR_E_INVALID, "trace_set_capacity: manager is NULL");
    /* allocated before the lock: the ring can be large */
    fhr_trace_entry *n = NULL;
    if (capacity && (capacity > SIZE_MAX / sizeof *n || !(n = calloc(capacity, sizeof *n))))
        return fhr_fail(err, FHR_E_NOMEM,
                        "trace_set_capacity: no host memory for %zu entries; the trace is unchanged",
                        capacity);
    fhr_status st = mgr_enter(m, "trace_set_capacity", err);
    if (st != FHR_OK) {
        free(n);
        return st;
    }
    size_t keep = m->trace_len < capacity ? m->trace_len : capacity;
    for (size_t i = 0; i < keep; i++) /* keep the newest entries */
        n[i] = m->trace[(m->trace_head + m->trace_len - keep + i) % m->trace_cap];
    free(m->trace);
    m->trace = n;
    m->trace_cap = capacity;
    m->trace_len = keep;
    m->trace_head = 0;
    mgr_leave(m);
    return FHR_OK;
}

fhr_status fhr_trace_read(fhr_manager *m, fhr_trace_entry *out, size_t cap, size_t *nread,
                          fhr_error *err)
{
    if (nread)
        *nread = 0;
    if (!nread || (cap && !out))
        return fhr_fail(err, FHR_E_INVALID, "trace_read: %s is NULL", !nread ? "nread" : "out");
    fhr_status st = mgr_enter(m, "trace_read", err);
    if (st != FHR_OK)
        return st;
    size_t n = m->trace_len < cap ? m->trace_len : cap;
    for (size_t i = 0; i < n; i++)
        out[i] = m->trace[(m->trace_head + m->trace_len - n + i) % m->trace_cap];
    mgr_leave(m);
    *nread = n;
    return FHR_OK;
}
