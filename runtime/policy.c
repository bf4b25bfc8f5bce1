/* runtime/policy.c — the policy object, the policy output helpers and the built-in
 * deterministic tiered LRU policy: a pure function of a tensor-free snapshot and a
 * validated request. It reads budgets, used and reserved bytes, priorities, the
 * logical use clock and protection counts; never free-memory observations, never
 * wall time, and never a tier nobody configured. */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fhr_policy {
    fhr_policy_ops ops;
    void *ctx;
};

/* ---- output helpers ---------------------------------------------------------------- */

static fhr_status grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return FHR_OK;
    size_t nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return FHR_E_NOMEM;
    *arr = p;
    *cap = nc;
    return FHR_OK;
}

fhr_status fhr_policy_out_evict(fhr_policy_out *o, const fhr_eviction *e)
{
    if (!o || !e)
        return FHR_E_INVALID;
    if (grow((void **)&o->evictions, &o->cap_evictions, o->nevictions, sizeof *e) != FHR_OK)
        return FHR_E_NOMEM;
    o->evictions[o->nevictions++] = *e;
    return FHR_OK;
}

fhr_status fhr_policy_out_enter(fhr_policy_out *o, const fhr_action *a)
{
    if (!o || !a)
        return FHR_E_INVALID;
    if (grow((void **)&o->enter, &o->cap_enter, o->nenter, sizeof *a) != FHR_OK)
        return FHR_E_NOMEM;
    o->enter[o->nenter++] = *a;
    return FHR_OK;
}

fhr_status fhr_policy_out_protect(fhr_policy_out *o, const fhr_protected_copy *p)
{
    if (!o || !p)
        return FHR_E_INVALID;
    if (grow((void **)&o->protected_, &o->cap_protected, o->nprotected, sizeof *p) != FHR_OK)
        return FHR_E_NOMEM;
    o->protected_[o->nprotected++] = *p;
    return FHR_OK;
}

void fhr_policy_out_clear(fhr_policy_out *o)
{
    if (!o)
        return;
    free(o->evictions);
    free(o->enter);
    free(o->protected_);
    memset(o, 0, sizeof *o);
}

/* ---- the policy object -------------------------------------------------------------- */

fhr_status fhr_policy_create(const fhr_policy_ops *ops, void *ctx, fhr_policy **out,
                             fhr_error *err)
{
    if (!ops || !ops->decide || !out)
        return fhr_fail(err, FHR_E_INVALID, "policy_create: ops with a decide function and out are required");
    *out = NULL;
    fhr_policy *p = calloc(1, sizeof *p);
    if (!p)
        return fhr_fail(err, FHR_E_NOMEM, "policy_create: out of host memory");
    p->ops = *ops;
    if (!p->ops.name)
        p->ops.name = "custom";
    p->ctx = ctx;
    *out = p;
    return FHR_OK;
}

void fhr_policy_destroy(fhr_policy *p)
{
    if (!p)
        return;
    if (p->ops.destroy)
        p->ops.destroy(p->ctx);
    free(p);
}

const char *fhr_policy_name(const fhr_policy *p) { return p ? p->ops.name : NULL; }

fhr_status fhr_policy_decide(const fhr_policy *p, const fhr_snapshot *snap,
                             const fhr_request *req, fhr_policy_out *out, fhr_error *err)
{
    if (!p || !snap || !req || !out)
        return fhr_fail(err, FHR_E_INVALID, "policy_decide: NULL argument");
    memset(out, 0, sizeof *out);
    out->feasible = 1;
    fhr_status st = p->ops.decide(p->ctx, snap, req, out, err);
    if (st != FHR_OK)
        fhr_policy_out_clear(out);
    return st;
}

/* ---- tiered LRU ---------------------------------------------------------------------- */

typedef struct tlru {
    int nchain[FHR_LOC_SLOTS];
    signed char chain[FHR_LOC_SLOTS][FHR_LOC_SLOTS]; /* fallback slots in order */
} tlru;

/* A ranked candidate: lower priority, then older last use, then lower serial first. */
typedef struct cand {
    int32_t prio;
    uint32_t vi;      /* index into snapshot values */
    uint64_t last_use;
    uint64_t serial;
    uint32_t ci;      /* index into that value's copies */
} cand;

static int cand_less(const cand *a, const cand *b)
{
    if (a->prio != b->prio)
        return a->prio < b->prio;
    if (a->last_use != b->last_use)
        return a->last_use < b->last_use;
    return a->serial < b->serial;
}

static void sift_down(cand *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_less(&h[l], &h[m]))
            m = l;
        if (r < n && cand_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Per-value model state. */
typedef struct vstate {
    uint32_t ncopies; /* copies left in the model */
    uint8_t required;
} vstate;

typedef struct model {
    int has_budget[FHR_LOC_SLOTS];
    uint64_t budget[FHR_LOC_SLOTS];
    uint64_t committed[FHR_LOC_SLOTS]; /* used + reserved, after modelled evictions */
    uint64_t need[FHR_LOC_SLOTS];      /* the request: new copies + reservations */
} model;

/* Room for n more bytes at slot without eating into what the request needs there. */
static int has_room(const model *md, int slot, uint64_t n)
{
    if (!md->has_budget[slot])
        return 1;
    uint64_t want = md->committed[slot] + md->need[slot];
    return want <= md->budget[slot] && n <= md->budget[slot] - want;
}

static unsigned protect_bits(const fhr_copy_info *c, int required)
{
    unsigned r = 0;
    if (c->leases)
        r |= FHR_PROT_LEASED;
    if (c->holds)
        r |= FHR_PROT_HELD;
    if (c->pending_events)
        r |= FHR_PROT_PENDING;
    if (required)
        r |= FHR_PROT_REQUIRED;
    return r;
}

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) FHR_PRINTF(4, 5);
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < cap ? *len + (size_t)n : cap;
}

static const char *reason_words(unsigned r)
{
    if (r & FHR_PROT_REQUIRED)
        return "required by the request";
    if (r & FHR_PROT_LEASED)
        return "leased";
    if (r & FHR_PROT_HELD)
        return "held";
    if (r & FHR_PROT_PENDING)
        return "pending consumer event";
    return "last copy of a MUST_PRESERVE value, no configured fallback tier with room";
}

static fhr_status infeasible(const fhr_snapshot *snap, const model *md, int slot,
                             uint64_t shortb, fhr_policy_out *out)
{
    char lb[16];
    out->feasible = 0;
    out->short_loc = fhr_loc_from_slot(slot);
    out->bytes_short = shortb;
    size_t len = 0;
    append(out->reason, sizeof out->reason, &len,
           "%s is short by %llu bytes after every legal eviction (budget %llu, committed %llu "
           "after evictions, request needs %llu)",
           fhr_loc_format(out->short_loc, lb, sizeof lb), (unsigned long long)shortb,
           (unsigned long long)md->budget[slot], (unsigned long long)md->committed[slot],
           (unsigned long long)md->need[slot]);
    if (!out->nprotected) {
        append(out->reason, sizeof out->reason, &len, "; nothing there is protected");
        return FHR_OK;
    }
    append(out->reason, sizeof out->reason, &len, "; protected there:");
    for (size_t i = 0; i < out->nprotected && i < 8; i++) {
        const fhr_protected_copy *p = &out->protected_[i];
        const fhr_value_info *vi = fhr_snapshot_value(snap, p->handle);
        append(out->reason, sizeof out->reason, &len, "%s #%llu%s%s%s (%llu bytes, %s)",
               i ? "," : "", (unsigned long long)p->handle.serial,
               vi && vi->label && vi->label[0] ? " '" : "",
               vi && vi->label && vi->label[0] ? vi->label : "",
               vi && vi->label && vi->label[0] ? "'" : "", (unsigned long long)p->nbytes,
               reason_words(p->reasons));
    }
    if (out->nprotected > 8)
        append(out->reason, sizeof out->reason, &len, " and %zu more", out->nprotected - 8);
    return FHR_OK;
}

static fhr_status tlru_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                              fhr_policy_out *out, fhr_error *err)
{
    const tlru *cfg = ctx;
    model md;
    memset(&md, 0, sizeof md);
    for (size_t i = 0; i < snap->nlocs; i++) {
        const fhr_loc_stats *l = &snap->locs[i];
        int s = fhr_loc_slot(l->loc);
        if (s < 0)
            continue;
        md.has_budget[s] = l->has_budget;
        md.budget[s] = l->budget_bytes;
        uint64_t c = l->used_bytes + l->reserved_bytes;
        if (l->has_budget && l->budget_bytes - l->remaining_budget_bytes > c)
            c = l->budget_bytes - l->remaining_budget_bytes; /* temporaries */
        md.committed[s] = c;
    }
    size_t nv = snap->nvalues;
    vstate *vs = malloc((nv ? nv : 1) * sizeof *vs);
    cand *cs = malloc((nv ? nv : 1) * sizeof *cs);
    if (!vs || !cs) {
        free(vs);
        free(cs);
        return fhr_fail(err, FHR_E_NOMEM, "tiered_lru: out of host memory");
    }
    for (size_t i = 0; i < nv; i++) {
        vs[i].ncopies = (uint32_t)snap->values[i].ncopies;
        vs[i].required = 0;
    }
    fhr_status st = FHR_OK;
    out->explored_states = 1; /* the current state */

    /* What the request needs: a copy per unmet requirement, and its reservations. */
    for (size_t r = 0; r < req->nrequirements && st == FHR_OK; r++) {
        const fhr_requirement *q = &req->requirements[r];
        const fhr_value_info *vi = fhr_snapshot_value(snap, q->handle);
        if (!vi) {
            st = fhr_fail(err, FHR_E_HANDLE, "tiered_lru: requirement %zu: unknown handle", r);
            break;
        }
        vs[vi - snap->values].required = 1;
        int slot = fhr_loc_slot(q->at);
        const fhr_copy_info *have = NULL;
        for (size_t c = 0; c < vi->ncopies; c++)
            if (fhr_loc_equal(vi->copies[c].loc, q->at))
                have = &vi->copies[c];
        if (have)
            continue;
        md.need[slot] += vi->spec_storage_nbytes;
        fhr_action a = {FHR_ACT_ENSURE, q->handle, q->at, 0, {0, 0}};
        if (vi->mode == FHR_EXCLUSIVE) {
            a.kind = FHR_ACT_MOVE;
            if (vi->ncopies) {
                a.has_from = 1;
                a.from = vi->copies[0].loc;
            }
        }
        if (fhr_policy_out_enter(out, &a) != FHR_OK)
            st = fhr_fail(err, FHR_E_NOMEM, "tiered_lru: out of host memory");
    }
    for (size_t r = 0; r < req->nreservations && st == FHR_OK; r++)
        md.need[fhr_loc_slot(req->reservations[r].at)] += req->reservations[r].nbytes;

    /* Locations in slot order (host, pinned, cuda:0, ...); each short one evicts. */
    for (int slot = 0; slot < FHR_LOC_SLOTS && st == FHR_OK && out->feasible; slot++) {
        if (!md.has_budget[slot])
            continue;
        uint64_t want = md.committed[slot] + md.need[slot];
        if (want <= md.budget[slot])
            continue;
        uint64_t shortb = want - md.budget[slot];
        fhr_location here = fhr_loc_from_slot(slot);
        /* candidates at the front of cs, protected copies at the back */
        size_t nc = 0, np = 0;
        for (size_t i = 0; i < nv; i++) {
            const fhr_value_info *vi = &snap->values[i];
            for (size_t c = 0; c < vi->ncopies; c++) {
                const fhr_copy_info *ci = &vi->copies[c];
                if (!fhr_loc_equal(ci->loc, here))
                    continue;
                cand k = {vi->priority, (uint32_t)i, ci->last_use, vi->handle.serial, (uint32_t)c};
                if (protect_bits(ci, vs[i].required))
                    cs[nv - 1 - np++] = k;
                else
                    cs[nc++] = k;
                break;
            }
        }
        for (size_t i = nc / 2; i-- > 0;)
            sift_down(cs, nc, i);
        size_t nskip = 0; /* skipped candidates kept right after the heap */
        size_t heap = nc;
        while (shortb && heap) {
            cand k = cs[0];
            cs[0] = cs[--heap];
            sift_down(cs, heap, 0);
            out->explored_states++;
            const fhr_value_info *vi = &snap->values[k.vi];
            const fhr_copy_info *ci = &vi->copies[k.ci];
            uint64_t n = ci->charged_nbytes;
            fhr_eviction ev = {{FHR_ACT_DROP, vi->handle, here, 0, {0, 0}}, vi->priority,
                               ci->last_use, n};
            int ok = 0;
            if (vs[k.vi].ncopies > 1 || vi->recoverability == FHR_RECONSTRUCTIBLE) {
                ok = 1;
                vs[k.vi].ncopies--;
            } else {
                for (int t = 0; t < cfg->nchain[slot]; t++) {
                    int ts = cfg->chain[slot][t];
                    if (t)
                        out->explored_states++;
                    if (!has_room(&md, ts, n))
                        continue;
                    ev.action = (fhr_action){FHR_ACT_MOVE, vi->handle, fhr_loc_from_slot(ts), 1,
                                             here};
                    md.committed[ts] += n;
                    ok = 1;
                    break;
                }
            }
            if (!ok) {
                cs[heap + nskip++] = k; /* heap shrank by one: the slot is free */
                continue;
            }
            md.committed[slot] -= n;
            shortb = n >= shortb ? 0 : shortb - n;
            if (fhr_policy_out_evict(out, &ev) != FHR_OK)
                st = fhr_fail(err, FHR_E_NOMEM, "tiered_lru: out of host memory");
        }
        if (!shortb || st != FHR_OK)
            continue;
        /* Infeasible: list what could not go, in serial order (protected first). */
        for (size_t i = 0; i < np && st == FHR_OK; i++) {
            const cand *k = &cs[nv - np + i];
            const fhr_value_info *vi = &snap->values[k->vi];
            const fhr_copy_info *ci = &vi->copies[k->ci];
            fhr_protected_copy p = {vi->handle, here, ci->charged_nbytes,
                                    protect_bits(ci, vs[k->vi].required)};
            if (fhr_policy_out_protect(out, &p) != FHR_OK)
                st = fhr_fail(err, FHR_E_NOMEM, "tiered_lru: out of host memory");
        }
        /* protected entries were stored back to front in scan order: reverse them */
        for (size_t i = 0, j = out->nprotected; st == FHR_OK && i + 1 < j; i++, j--) {
            fhr_protected_copy t = out->protected_[i];
            out->protected_[i] = out->protected_[j - 1];
            out->protected_[j - 1] = t;
        }
        for (size_t i = 0; i < nskip && st == FHR_OK; i++) {
            const cand *k = &cs[heap + i];
            const fhr_value_info *vi = &snap->values[k->vi];
            fhr_protected_copy p = {vi->handle, here, vi->copies[k->ci].charged_nbytes,
                                    FHR_PROT_NO_TIER};
            if (fhr_policy_out_protect(out, &p) != FHR_OK)
                st = fhr_fail(err, FHR_E_NOMEM, "tiered_lru: out of host memory");
        }
        if (st == FHR_OK)
            st = infeasible(snap, &md, slot, shortb, out);
    }
    free(vs);
    free(cs);
    return st;
}

static void tlru_destroy(void *ctx) { free(ctx); }

fhr_status fhr_policy_tiered_lru_create(const fhr_tier_chain *chains, size_t n,
                                        fhr_policy **out, fhr_error *err)
{
    if (!out || (n && !chains))
        return fhr_fail(err, FHR_E_INVALID, "tiered_lru_create: chains and out are required");
    *out = NULL;
    tlru *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return fhr_fail(err, FHR_E_NOMEM, "tiered_lru_create: out of host memory");
    char lb[16];
    for (size_t i = 0; i < n; i++) {
        int s = fhr_loc_slot(chains[i].loc);
        if (s < 0) {
            free(cfg);
            return fhr_fail(err, FHR_E_LOCATION, "tiered_lru_create: chain %zu: invalid location", i);
        }
        if (cfg->nchain[s] || (chains[i].nfallback && !chains[i].fallback) ||
            chains[i].nfallback >= FHR_LOC_SLOTS) {
            free(cfg);
            return fhr_fail(err, FHR_E_INVALID,
                            "tiered_lru_create: chain %zu for %s is repeated or malformed", i,
                            fhr_loc_format(chains[i].loc, lb, sizeof lb));
        }
        uint64_t seen = 1ULL << s;
        for (size_t k = 0; k < chains[i].nfallback; k++) {
            int t = fhr_loc_slot(chains[i].fallback[k]);
            if (t < 0 || (seen & (1ULL << t))) {
                free(cfg);
                return fhr_fail(err, FHR_E_INVALID,
                                "tiered_lru_create: chain for %s: fallback %zu is invalid, the "
                                "location itself, or repeated",
                                fhr_loc_format(chains[i].loc, lb, sizeof lb), k);
            }
            seen |= 1ULL << t;
            cfg->chain[s][k] = (signed char)t;
        }
        cfg->nchain[s] = (int)chains[i].nfallback;
    }
    fhr_policy_ops ops = {"tiered_lru", tlru_decide, tlru_destroy};
    fhr_status st = fhr_policy_create(&ops, cfg, out, err);
    if (st != FHR_OK)
        free(cfg);
    return st;
}
