/* runtime/manager/rules.c — the one statement of the primitive rules (replica mode,
 * recoverability, protection, strict budgets) and of byte accounting; used by the
 * live primitives and by explain's model alike, so the two cannot drift. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdio.h>

void acct_charge(locacct *a, uint64_t n)
{
    a->used += n;
    if (a->used > a->peak_used)
        a->peak_used = a->used;
    uint64_t charged = a->used + a->reserved + a->temp;
    if (charged > a->peak_charged)
        a->peak_charged = charged;
}

void acct_release(locacct *a, uint64_t n) { a->used -= n; }

void acct_reserve(locacct *a, uint64_t n)
{
    a->reserved += n;
    uint64_t charged = a->used + a->reserved + a->temp;
    if (charged > a->peak_charged)
        a->peak_charged = charged;
}

void acct_unreserve(locacct *a, uint64_t n) { a->reserved -= n; }

const char *rules_name(uint64_t serial, const char *label, char *buf, size_t cap)
{
    if (label && label[0])
        snprintf(buf, cap, "'%s' (handle #%llu)", label, (unsigned long long)serial);
    else
        snprintf(buf, cap, "handle #%llu", (unsigned long long)serial);
    return buf;
}

/* Whether n more bytes fit at a (acct_admit's test, without the message). */
int acct_fits(const locacct *a, uint64_t n)
{
    return !a->has_budget || bwin_fits(a->win, sat_add(acct_committed(a), n), a->budget);
}

fhr_status acct_admit(const locacct *a, fhr_location loc, uint64_t n, const char *what,
                      fhr_error *err)
{
    if (acct_fits(a, n))
        return FHR_OK;
    uint64_t committed = a->used + a->reserved + a->temp + a->inflight;
    uint64_t need = committed + n; /* cannot overflow: both below 2^63 in practice */
    char lb[16];
    fhr_fail(err, FHR_E_BUDGET,
             "%s needs %llu bytes at %s: budget %llu, used %llu, reserved %llu; %llu bytes short",
             what, (unsigned long long)n, fhr_loc_format(loc, lb, sizeof lb),
             (unsigned long long)a->budget, (unsigned long long)a->used,
             (unsigned long long)(a->reserved + a->temp + a->inflight),
             (unsigned long long)(need - a->budget));
    if (err) {
        err->loc = loc;
        err->bytes_short = need - a->budget;
    }
    return FHR_E_BUDGET;
}

static fhr_status loc_ok(fhr_location loc, int ndev, const char *op, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (slot < 0)
        return fhr_fail(err, FHR_E_LOCATION, "%s: invalid location", op);
    if (loc.kind == FHR_LOC_CUDA && loc.index >= ndev) {
        fhr_fail(err, FHR_E_LOCATION, "%s: cuda:%d is not visible to this process (%d device%s)",
                 op, loc.index, ndev, ndev == 1 ? "" : "s");
        if (err)
            err->loc = loc;
        return FHR_E_LOCATION;
    }
    return FHR_OK;
}

static fhr_status refuse_protected(const rule_view *v, int slot, const char *op, fhr_error *err)
{
    char lb[16];
    fhr_fail(err, FHR_E_PROTECTED, "%s %s at %s: the copy is protected by %s", op, RV_NAME(v),
             fhr_loc_format(fhr_loc_from_slot(slot), lb, sizeof lb),
             v->why[slot] ? v->why[slot] : "a lease, hold or pending consumer event");
    if (err) {
        err->handle = v->h;
        err->loc = fhr_loc_from_slot(slot);
    }
    return FHR_E_PROTECTED;
}

static fhr_status fail_at(const rule_view *v, fhr_location loc, fhr_error *err, fhr_status st)
{
    if (err) {
        err->handle = v->h;
        err->loc = loc;
    }
    return st;
}

static fhr_status check_create(const rule_view *v, int slot, const locacct *locs,
                               const char *op, rule_effect *eff, fhr_error *err)
{
    uint64_t n = charge_at(v->charge, v->omit, slot);
    if (!acct_fits(&locs[slot], n)) { /* the message names the value: formatted only now */
        char what[96];
        snprintf(what, sizeof what, "%s %s", op, RV_NAME(v));
        fhr_status st = acct_admit(&locs[slot], fhr_loc_from_slot(slot), n, what, err);
        if (st != FHR_OK)
            return fail_at(v, fhr_loc_from_slot(slot), err, st);
    }
    eff->create = slot;
    return FHR_OK;
}

fhr_status rules_check(const rule_view *v, const fhr_action *a, const locacct *locs, int ndev,
                       rule_effect *eff, fhr_error *err)
{
    *eff = (rule_effect){0, -1, -1, -1, 0, 0};
    const char *op = fhr_action_kind_name(a->kind);
    char lb[16], fb[16];
    fhr_status st;
    if (a->kind != FHR_ACT_DISCARD && (st = loc_ok(a->at, ndev, op, err)) != FHR_OK)
        return fail_at(v, a->at, err, st);
    int at = fhr_loc_slot(a->at);
    uint64_t bit = at >= 0 ? 1ULL << at : 0;

    switch (a->kind) {
    case FHR_ACT_ENSURE:
        if (v->mode == FHR_EXCLUSIVE)
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_REPLICA,
                                    "ensure %s at %s: the value is EXCLUSIVE; use move", RV_NAME(v),
                                    fhr_loc_format(a->at, lb, sizeof lb)));
        if (v->present & bit) {
            eff->noop = 1;
            return FHR_OK;
        }
        if (!v->present) {
            if (!v->has_src)
                return fail_at(v, a->at, err,
                               fhr_fail(err, FHR_E_STATE, "ensure %s: no copy and no source",
                                        RV_NAME(v)));
            eff->load = 1;
        } else {
            eff->src = rules_pick_source(v, at);
            if (rules_load_instead(v, eff->src, at)) {
                eff->src = -1;
                eff->load = 1;
            }
        }
        return check_create(v, at, locs, op, eff, err);

    case FHR_ACT_MOVE: {
        int from = -1;
        if (a->has_from) {
            if ((st = loc_ok(a->from, ndev, op, err)) != FHR_OK)
                return fail_at(v, a->from, err, st);
            from = fhr_loc_slot(a->from);
            if (!(v->present & (1ULL << from)))
                return fail_at(v, a->from, err,
                               fhr_fail(err, FHR_E_STATE, "move %s to %s from %s: no copy at %s",
                                        RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb),
                                        fhr_loc_format(a->from, fb, sizeof fb), fb));
            if (from == at) {
                eff->noop = 1;
                return FHR_OK;
            }
        } else if (!v->present) {
            if (!v->has_src)
                return fail_at(v, a->at, err,
                               fhr_fail(err, FHR_E_STATE, "move %s: no copy and no source",
                                        RV_NAME(v)));
            eff->load = 1;
            return check_create(v, at, locs, op, eff, err);
        } else if (v->present == bit) {
            eff->noop = 1;
            return FHR_OK;
        } else {
            from = rules_pick_source(v, at);
        }
        if (v->protected_ & (1ULL << from))
            return refuse_protected(v, from, "move away", err);
        eff->remove = from;
        if (v->present & bit)
            return FHR_OK; /* destination already there: only the source goes */
        eff->src = from;
        return check_create(v, at, locs, op, eff, err);
    }

    case FHR_ACT_DROP:
        if (!(v->present & bit))
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_STATE, "drop %s at %s: no copy there", RV_NAME(v),
                                    fhr_loc_format(a->at, lb, sizeof lb)));
        if (v->protected_ & bit)
            return refuse_protected(v, at, "drop", err);
        if (v->present == bit && v->recov == FHR_MUST_PRESERVE)
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_PRESERVE,
                                    "drop %s at %s: it is the last copy of a MUST_PRESERVE value "
                                    "(move it, or discard the value)",
                                    RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb)));
        eff->remove = at;
        return FHR_OK;

    case FHR_ACT_DISCARD:
        if (v->protected_) {
            for (int s = 0; s < FHR_LOC_SLOTS; s++)
                if (v->protected_ & (1ULL << s))
                    return refuse_protected(v, s, "discard", err);
        }
        eff->discard = 1;
        return FHR_OK;
    }
    return fhr_fail(err, FHR_E_INVALID, "unknown action kind %d", (int)a->kind);
}

const char *fhr_action_kind_name(fhr_action_kind k)
{
    switch (k) {
    case FHR_ACT_ENSURE: return "ensure";
    case FHR_ACT_MOVE: return "move";
    case FHR_ACT_DROP: return "drop";
    case FHR_ACT_DISCARD: return "discard";
    }
    return "unknown";
}

