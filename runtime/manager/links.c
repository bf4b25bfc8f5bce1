/* runtime/manager/links.c — the cost model's public side: setting and reading the link rates,
 * the cost of one copy, and the restore cost snapshots give the lookahead policy. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <string.h>

#include <math.h>

static int rate_ok(double r) { return isfinite(r) && r >= 0; }

fhr_status fhr_manager_set_links(fhr_manager *m, const fhr_link_rates *r, fhr_error *err)
{
    if (!m || !r)
        return fhr_fail(err, FHR_E_INVALID, "manager_set_links: NULL argument");
    const char *bad = !rate_ok(r->pinned_gbps)     ? "pinned_gbps"
                      : !rate_ok(r->pageable_gbps) ? "pageable_gbps"
                      : !rate_ok(r->peer_gbps)     ? "peer_gbps"
                      : !rate_ok(r->gen_gbps)      ? "gen_gbps"
                                                   : NULL;
    if (bad)
        return fhr_fail(err, FHR_E_INVALID,
                        "manager_set_links: %s must be a finite rate >= 0 GB/s (0: the default)",
                        bad);
    fhr_status st = mgr_enter(m, "set_links", err);
    if (st != FHR_OK)
        return st;
    links_fill(r, &m->links);
    mgr_changed_all(m); /* every copy's restore_s follows the rates */
    mgr_leave(m);
    return FHR_OK;
}

void fhr_manager_links(fhr_manager *m, fhr_link_rates *out)
{
    if (!out)
        return;
    if (!m) {
        links_fill(NULL, out);
        return;
    }
    pthread_mutex_lock(&m->lock);
    *out = m->links;
    pthread_mutex_unlock(&m->lock);
}

fhr_status fhr_copy_cost(fhr_manager *m, fhr_handle h, fhr_location from, fhr_location to,
                         double *seconds, uint64_t *link_nbytes, fhr_error *err)
{
    if (!m)
        return fhr_fail(err, FHR_E_INVALID, "copy_cost: manager is NULL");
    int fs = fhr_loc_slot(from), ts = fhr_loc_slot(to);
    if (fs < 0 || ts < 0)
        return fhr_fail(err, FHR_E_LOCATION, "copy_cost: invalid location");
    fhr_status st = mgr_enter(m, "copy_cost", err);
    if (st != FHR_OK)
        return st;
    val *v;
    if ((st = mgr_lookup(m, h, "copy_cost", &v, err)) == FHR_OK) {
        if (!(v->present & (1ULL << fs))) {
            char lb[16];
            st = fhr_fail(err, FHR_E_STATE, "copy_cost: no copy at %s",
                          fhr_loc_format(from, lb, sizeof lb));
        } else {
            rule_view rv;
            mgr_rule_view(m, v, &rv);
            double c = rules_copy_cost(&rv, &m->links, fs, ts, link_nbytes);
            if (seconds)
                *seconds = c;
        }
    }
    mgr_leave(m);
    return st;
}

double mgr_restore_cost(fhr_manager *m, const val *v, int slot)
{
    /* Only the fields the cost reads are set: a snapshot calls this for every copy, and
     * clearing the whole view (its per-slot reasons) cost more than the snapshot itself. */
    rule_view rv;
    rv.charge = v->charge;
    rv.omit[0] = v->omit[0];
    rv.omit[1] = v->omit[1];
    rv.regen = v->regen;
    rv.present = v->present;
    rv.has_src = v->rs != NULL;
    rv.cut = v->cut;
    if (v->cut) { /* rv_limbs reads them only then */
        memset(rv.limbs, 0, sizeof rv.limbs);
        memset(rv.parts, 0, sizeof rv.parts);
        for (const mat *x = v->copies; x; x = x->next) {
            rv.limbs[x->slot] = x->limbs;
            rv.parts[x->slot] = x->parts;
        }
    }
    uint64_t others = rv.present & ~(1ULL << slot);
    double best = -1;
    for (uint64_t bits = others; bits; bits &= bits - 1) {
        int s = __builtin_ctzll(bits);
        double c = rules_copy_cost(&rv, &m->links, s, slot, NULL);
        if (best < 0 || c < best)
            best = c;
    }
    if (best < 0 || (rv.has_src && slot >= 2)) { /* from pinned memory, or a load: as pinned */
        double c = rules_copy_cost(&rv, &m->links, slot == 1 ? 0 : 1, slot, NULL);
        if (best < 0 || c < best)
            best = c;
    }
    return best;
}
