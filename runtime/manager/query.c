/* runtime/manager/query.c — placement questions answered under the lock without a
 * snapshot: whether a request is already met, for the controller's fast path, and the
 * accounting of every location, for the VM's peaks. */
#include "runtime/manager/query.h"
#include "runtime/manager/manager.h"

static int requirements_present(fhr_manager *m, const fhr_requirement *rq, size_t nrq)
{
    for (size_t i = 0; i < nrq; i++) {
        fhr_handle h = rq[i].handle;
        int slot = fhr_loc_slot(rq[i].at);
        if (slot < 0 || h.manager_id != m->id || h.serial == 0 || h.serial >= m->next_serial)
            return 0;
        const val *v = m->vals[h.serial];
        if (!v || !(v->present >> slot & 1))
            return 0;
        if (rq[i].limbs && (!v->cut || rq[i].limbs > v->cut->q || slot < 2))
            return 0; /* the full path names what is wrong */
        const mat *x = v->cut ? val_mat(v, slot) : NULL; /* a partial copy: enough limbs? */
        uint32_t want = v->cut && rq[i].limbs < v->cut->q ? rq[i].limbs : 0;
        if (x && x->limbs && !cut_serves(v->cut, x->limbs, x->parts, want))
            return 0;
    }
    return 1;
}

static int reservations_fit(const fhr_manager *m, const fhr_reservation *res, size_t nres)
{
    for (size_t i = 0; i < nres; i++) {
        int slot = fhr_loc_slot(res[i].at);
        if (slot < 0)
            return 0;
        const locacct *a = &m->loc[slot];
        if (!a->present)
            return 0; /* the full path creates and checks the location */
        if (!a->has_budget)
            continue;
        uint64_t need = 0; /* every reservation at this location, counted once per location */
        for (size_t k = 0; k < nres; k++)
            if (fhr_loc_equal(res[k].at, res[i].at))
                need = sat_add(need, res[k].nbytes);
        /* copies still being made hold their admitted charge (inflight) as the full path
         * and preflight count it */
        if (!acct_fits(a, need))
            return 0;
    }
    return 1;
}

/* No location is over its budget already (a lowered budget): the policy would evict there. */
static int none_over(const fhr_manager *m)
{
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        const locacct *a = &m->loc[i];
        if (a->present && a->has_budget && !acct_fits(a, 0))
            return 0;
    }
    return 1;
}

fhr_status mgr_request_met(fhr_manager *m, const fhr_requirement *rq, size_t nrq,
                           const fhr_reservation *res, size_t nres, int *met,
                           uint64_t *version, fhr_error *err)
{
    *met = 0;
    fhr_status st = mgr_enter(m, "decide", err);
    if (st != FHR_OK)
        return st;
    *met = requirements_present(m, rq, nrq) && reservations_fit(m, res, nres) && none_over(m);
    *version = m->version;
    mgr_leave(m);
    return FHR_OK;
}

fhr_status mgr_loc_stats(fhr_manager *m, fhr_loc_stats *locs, size_t *n, fhr_error *err)
{
    *n = 0;
    fhr_status st = mgr_enter(m, "snapshot", err);
    if (st != FHR_OK)
        return st;
    *n = snap_fill_locs(m, locs);
    mgr_leave(m);
    return FHR_OK;
}

uint64_t mgr_records_read(const fhr_manager *m)
{
    return m ? atomic_load_explicit(&((fhr_manager *)m)->reads, memory_order_relaxed) : 0;
}

void mgr_count_reads(fhr_manager *m, uint64_t n) { mgr_add_reads(m, n); }

uint64_t mgr_inflight_bytes(fhr_manager *m, fhr_location at)
{
    int slot = fhr_loc_slot(at);
    if (!m || slot < 0 || slot >= FHR_LOC_SLOTS)
        return 0;
    pthread_mutex_lock(&m->lock);
    uint64_t n = m->loc[slot].inflight;
    pthread_mutex_unlock(&m->lock);
    return n;
}
