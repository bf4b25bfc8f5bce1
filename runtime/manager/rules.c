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
    if (eff->had && (v->protected_ >> slot & 1)) /* a grow replaces the partial copy there */
        return refuse_protected(v, slot, "grow", err);
    uint64_t n = eff->limbs ? cut_bytes(v->cut, eff->limbs, 0, 0) : charge_at(v->charge, v->omit, slot);
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

/* The whole copies of v (a partial copy preserves nothing and gives only what it holds). */
static uint64_t whole_copies(const rule_view *v)
{
    uint64_t w = v->present;
    for (int s = 2; v->cut && s < FHR_LOC_SLOTS; s++)
        if (rv_limbs(v, s))
            w &= ~(1ULL << s);
    return w;
}

/* The q-limbs an action asks for: 0 for the whole value (also when it names them all). */
static fhr_status want_limbs(const rule_view *v, const fhr_action *a, uint32_t *want,
                             fhr_error *err)
{
    char lb[16];
    *want = 0;
    if (!a->limbs)
        return FHR_OK;
    if (a->kind != FHR_ACT_ENSURE)
        return fhr_fail(err, FHR_E_INVALID, "%s %s: only ensure takes limbs",
                        fhr_action_kind_name(a->kind), RV_NAME(v));
    if (!v->cut)
        return fhr_fail(err, FHR_E_INVALID, "ensure %s at %s with %u q-limbs: the value has no "
                        "limb cut (fhr_value_cut_limbs)", RV_NAME(v),
                        fhr_loc_format(a->at, lb, sizeof lb), a->limbs);
    if (a->at.kind != FHR_LOC_CUDA)
        return fhr_fail(err, FHR_E_LOCATION, "ensure %s at %s with %u q-limbs: host and pinned "
                        "copies are whole", RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb),
                        a->limbs);
    if (a->limbs > v->cut->q)
        return fhr_fail(err, FHR_E_INVALID, "ensure %s with %u q-limbs: the value has %u",
                        RV_NAME(v), a->limbs, v->cut->q);
    *want = a->limbs < v->cut->q ? a->limbs : 0;
    return FHR_OK;
}

/* ensure: a copy at `at` holding at least `want` q-limbs (0: whole), made from the
 * cheapest copy that holds them, or loaded; a smaller partial copy there grows. */
static fhr_status rules_ensure(const rule_view *v, const fhr_action *a, const locacct *locs,
                               rule_effect *eff, fhr_error *err)
{
    const char *op = "ensure";
    char lb[16];
    int at = fhr_loc_slot(a->at);
    uint64_t bit = 1ULL << at;
    uint32_t want;
    fhr_status st;
    if (v->mode == FHR_EXCLUSIVE)
        return fail_at(v, a->at, err,
                       fhr_fail(err, FHR_E_REPLICA,
                                "ensure %s at %s: the value is EXCLUSIVE; use move", RV_NAME(v),
                                fhr_loc_format(a->at, lb, sizeof lb)));
    if ((st = want_limbs(v, a, &want, err)) != FHR_OK)
        return fail_at(v, a->at, err, st);
    uint32_t have = v->present & bit ? rv_limbs(v, at) : 0;
    if ((v->present & bit) && (!have || cut_serves(v->cut, have, v->parts[at], want))) {
        eff->noop = 1;
        return FHR_OK;
    }
    eff->limbs = want;
    eff->had = have;
    eff->had_parts = have ? v->parts[at] : 0;
    if (!(v->present & ~bit)) {
        if (!v->has_src)
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_STATE, "ensure %s: no %scopy and no source",
                                    RV_NAME(v), have ? "other " : ""));
        eff->load = 1;
    } else {
        eff->src = rules_pick_source_limbs(v, at, want, have);
        if (rules_load_instead_limbs(v, eff->src, at, want, have)) {
            eff->src = -1;
            eff->load = 1;
        } else if (eff->src < 0) {
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_STATE, "ensure %s at %s: no copy holds the limbs "
                                    "asked for and the value has no source", RV_NAME(v),
                                    fhr_loc_format(a->at, lb, sizeof lb)));
        }
    }
    return check_create(v, at, locs, op, eff, err);
}

/* drop with limbs: the partial copy at `at` keeps only the parts a use of a->limbs q-limbs
 * reads (present and unprotected: checked); nothing to do when it holds no more. */
static fhr_status drop_parts(const rule_view *v, const fhr_action *a, int at, rule_effect *eff,
                             fhr_error *err)
{
    char lb[16];
    uint32_t have = rv_limbs(v, at);
    const char *why = !v->cut ? "the value has no limb cut"
                      : at < 2 ? "host and pinned copies keep every part"
                      : !(v->by_parts >> at & 1) ? "the copy there is one buffer (adopted "
                                                   "whole); it drops no parts"
                                                 : NULL;
    if (why)
        return fail_at(v, a->at, err,
                       fhr_fail(err, FHR_E_STATE, "drop %s at %s keeping the parts %u q-limbs "
                                "read: %s", RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb),
                                a->limbs, why));
    uint32_t held = v->parts[at] ? v->parts[at] : cut_parts_read(v->cut, have);
    uint32_t keep = cut_parts_read(v->cut, a->limbs < v->cut->q ? a->limbs : 0);
    if (keep >= held) {
        eff->noop = 1;
        return FHR_OK;
    }
    if (!have && whole_copies(v) == 1ULL << at && v->recov == FHR_MUST_PRESERVE)
        return fail_at(v, a->at, err,
                       fhr_fail(err, FHR_E_PRESERVE, "drop %s at %s keeping the parts %u "
                                "q-limbs read: it is the last whole copy of a MUST_PRESERVE "
                                "value", RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb),
                                a->limbs));
    eff->keep = a->limbs;
    eff->trim = at;
    return FHR_OK;
}

fhr_status rules_check(const rule_view *v, const fhr_action *a, const locacct *locs, int ndev,
                       rule_effect *eff, fhr_error *err)
{
    *eff = (rule_effect){.create = -1, .remove = -1, .src = -1, .trim = -1};
    const char *op = fhr_action_kind_name(a->kind);
    char lb[16], fb[16];
    fhr_status st;
    if (a->kind != FHR_ACT_DISCARD && (st = loc_ok(a->at, ndev, op, err)) != FHR_OK)
        return fail_at(v, a->at, err, st);
    int at = fhr_loc_slot(a->at);
    uint64_t bit = at >= 0 ? 1ULL << at : 0;
    if (a->limbs && a->kind != FHR_ACT_ENSURE && a->kind != FHR_ACT_DROP)
        return fail_at(v, a->at, err,
                       fhr_fail(err, FHR_E_INVALID, "%s %s: only ensure and drop take limbs",
                                op, RV_NAME(v)));

    switch (a->kind) {
    case FHR_ACT_ENSURE:
        return rules_ensure(v, a, locs, eff, err);

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
            if (rv_limbs(v, from))
                return fail_at(v, a->from, err,
                               fhr_fail(err, FHR_E_STATE, "move %s from %s: the copy there holds "
                                        "%u of %u q-limbs; a move takes a whole copy", RV_NAME(v),
                                        fhr_loc_format(a->from, fb, sizeof fb), rv_limbs(v, from),
                                        v->cut->q));
            if (from == at) {
                eff->noop = 1;
                return FHR_OK;
            }
        } else if (v->cut && !(whole_copies(v) & ~bit)) {
            /* only partial copies besides the destination: the whole value comes from the
             * source, over a partial copy at `at` if there is one */
            if (whole_copies(v) & bit) {
                eff->noop = 1;
                return FHR_OK;
            }
            if (!v->has_src)
                return fail_at(v, a->at, err,
                               fhr_fail(err, FHR_E_STATE, "move %s to %s: no whole copy and no "
                                        "source", RV_NAME(v), fhr_loc_format(a->at, lb, sizeof lb)));
            eff->load = 1;
            eff->had = v->present & bit ? rv_limbs(v, at) : 0;
            return check_create(v, at, locs, op, eff, err);
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
            from = rules_pick_source_limbs(v, at, 0, v->present & bit ? rv_limbs(v, at) : 0);
        }
        if (v->protected_ & (1ULL << from))
            return refuse_protected(v, from, "move away", err);
        eff->remove = from;
        if ((v->present & bit) && !rv_limbs(v, at))
            return FHR_OK; /* destination already there: only the source goes */
        eff->src = from;
        eff->had = v->present & bit ? rv_limbs(v, at) : 0; /* a partial one there grows */
        return check_create(v, at, locs, op, eff, err);
    }

    case FHR_ACT_DROP:
        if (!(v->present & bit))
            return fail_at(v, a->at, err,
                           fhr_fail(err, FHR_E_STATE, "drop %s at %s: no copy there", RV_NAME(v),
                                    fhr_loc_format(a->at, lb, sizeof lb)));
        if (v->protected_ & bit)
            return refuse_protected(v, at, "drop", err);
        if (a->limbs)
            return drop_parts(v, a, at, eff, err);
        if (whole_copies(v) == bit && v->recov == FHR_MUST_PRESERVE)
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

