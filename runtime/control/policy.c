/* runtime/control/policy.c — the policy object, the policy output helpers and the built-in
 * deterministic tiered LRU policy: a pure function of a tensor-free snapshot and a
 * validated request. It reads budgets, used and reserved bytes, priorities, the
 * logical use clock and protection counts; never free-memory observations, never
 * wall time, and never a tier nobody configured. */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "runtime/control/policy.h"
#include "runtime/control/victim_index.h"
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fhr_policy {
    fhr_policy_ops ops;
    void *ctx;
};

/* ---- output helpers ---------------------------------------------------------------- */

fhr_status fhr_policy_out_evict(fhr_policy_out *o, const fhr_eviction *e)
{
    if (!o || !e)
        return FHR_E_INVALID;
    if (!fhr_grow((void **)&o->evictions, &o->cap_evictions, o->nevictions, sizeof *e, 8))
        return FHR_E_NOMEM;
    o->evictions[o->nevictions++] = *e;
    return FHR_OK;
}

fhr_status fhr_policy_out_enter(fhr_policy_out *o, const fhr_action *a)
{
    if (!o || !a)
        return FHR_E_INVALID;
    if (!fhr_grow((void **)&o->enter, &o->cap_enter, o->nenter, sizeof *a, 8))
        return FHR_E_NOMEM;
    o->enter[o->nenter++] = *a;
    return FHR_OK;
}

fhr_status fhr_policy_out_protect(fhr_policy_out *o, const fhr_protected_copy *p)
{
    if (!o || !p)
        return FHR_E_INVALID;
    if (!fhr_grow((void **)&o->protected_, &o->cap_protected, o->nprotected, sizeof *p, 8))
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

typedef struct tiers {
    int nchain[FHR_LOC_SLOTS];
    signed char chain[FHR_LOC_SLOTS][FHR_LOC_SLOTS]; /* fallback slots in order */
} tiers;

/* A ranked candidate: smaller keys are evicted first; the handle serial breaks ties. */
#define RANK_KEYS 4
typedef struct cand {
    uint64_t k[RANK_KEYS];
    uint64_t serial;
    uint32_t vi;      /* index into snapshot values */
    uint32_t ci;      /* index into that value's copies */
    uint32_t keep;    /* 0: the copy; else its parts a use of `keep` q-limbs does not read */
    uint64_t nbytes;  /* with keep: their bytes */
} cand;

/* Fills the three ranking keys of a copy (ci) of a value (vi). */
typedef void (*rank_fn)(const void *ctx, const fhr_request *req, const fhr_value_info *vi,
                        const fhr_copy_info *ci, uint64_t k[RANK_KEYS]);
/* A partial copy's parts its next use does not read, as a candidate of their own: their
 * bytes (0: none), the q-limbs whose parts stay in *keep, their ranking keys. */
typedef uint64_t (*tail_fn)(const void *ctx, const fhr_request *req, const fhr_value_info *vi,
                            const fhr_copy_info *ci, uint32_t *keep, uint64_t k[RANK_KEYS]);

static int cand_less(const cand *a, const cand *b)
{
    for (int i = 0; i < RANK_KEYS; i++)
        if (a->k[i] != b->k[i])
            return a->k[i] < b->k[i];
    if (a->serial != b->serial)
        return a->serial < b->serial;
    return a->keep > b->keep; /* a copy's dropped parts before the copy */
}

static uint64_t prio_key(int32_t p) { return (uint64_t)((int64_t)p + INT32_MAX + 1); }

/* Tiered LRU: lower priority, then older last use. */
static void lru_rank(const void *ctx, const fhr_request *req, const fhr_value_info *vi,
                     const fhr_copy_info *ci, uint64_t k[RANK_KEYS])
{
    (void)ctx;
    (void)req;
    k[0] = prio_key(vi->priority);
    k[1] = ci->last_use;
    k[2] = k[3] = 0;
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

/* Per-value model state (vix_vstate): the full path sets every entry at epoch 1; over the
 * victim index, entries are set the first time a decision touches them. */
typedef vix_vstate vstate;

static inline vstate *vref(vstate *vs, uint32_t epoch, const fhr_snapshot *snap, size_t i)
{
    if (vs[i].epoch != epoch) {
        vs[i].epoch = epoch;
        vs[i].ncopies = (uint32_t)snap->values[i].ncopies;
        vs[i].required = 0;
        vs[i].trim_slot = vs[i].gone_slot = -1;
        vs[i].trimmed = 0;
    }
    return &vs[i];
}

typedef struct model {
    int has_budget[FHR_LOC_SLOTS];
    uint64_t budget[FHR_LOC_SLOTS];
    uint64_t committed[FHR_LOC_SLOTS]; /* every charge taken, after modelled evictions */
    uint64_t need[FHR_LOC_SLOTS];      /* the request: new copies + reservations */
    bwin *win;                         /* the watched budget's window (NULL: none) */
    int wslot;                         /* and its slot */
} model;

/* Whether x bytes fit the budget at slot: every comparison the policy makes against a
 * budget, noted in the watched window. */
static int md_fits(const model *md, int slot, uint64_t x)
{
    return !md->has_budget[slot] ||
           bwin_fits(slot == md->wslot ? md->win : NULL, x, md->budget[slot]);
}

/* What the request wants at slot: what is committed there and what it adds. */
static uint64_t md_want(const model *md, int slot)
{
    return sat_add(md->committed[slot], md->need[slot]);
}

/* Room for n more bytes at slot without eating into what the request needs there. */
static int has_room(const model *md, int slot, uint64_t n)
{
    return md_fits(md, slot, sat_add(md_want(md, slot), n));
}

/* fhr_loc_equal, inlined: the candidate scan asks it once per copy of every value. */
static inline int same_loc(fhr_location a, fhr_location b)
{
    return a.kind == b.kind && (a.kind != FHR_LOC_CUDA || a.index == b.index);
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

/* The parts a use of `limbs` q-limbs (0: whole) reads of a cut value. */
static uint32_t parts_read(const fhr_value_info *vi, uint32_t limbs)
{
    return limbs ? (limbs + vi->cut_alpha - 1) / vi->cut_alpha : vi->cut_parts;
}

/* Whether copy ci of a cut value holds what a use of `want` q-limbs (0: whole) reads. */
static int copy_serves(const fhr_value_info *vi, const fhr_copy_info *ci, uint32_t want)
{
    return !ci->limbs || (want && ci->limbs >= want && ci->parts >= parts_read(vi, want));
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
        return "pending consumer event: synchronize its stream, then fhr_reap";
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
    /* copies other threads are making there: taken, yet neither evictable nor protected */
    const fhr_loc_stats *ls = fhr_snapshot_loc(snap, out->short_loc);
    if (ls && ls->inflight_bytes)
        append(out->reason, sizeof out->reason, &len,
               "; %llu bytes there are copies still being made",
               (unsigned long long)ls->inflight_bytes);
    if (!out->nprotected) {
        append(out->reason, sizeof out->reason, &len, "; nothing there is protected");
        return FHR_OK;
    }
    append(out->reason, sizeof out->reason, &len, "; protected there:");
    for (size_t i = 0; i < out->nprotected && i < 8; i++) {
        const fhr_protected_copy *p = &out->protected_[i];
        const fhr_value_info *vi = fhr_snapshot_value(snap, p->handle);
        int named = vi && vi->label && vi->label[0];
        append(out->reason, sizeof out->reason, &len, "%s %s%s%shandle #%llu (%llu bytes, %s)",
               i ? "," : "", named ? "'" : "", named ? vi->label : "", named ? "' " : "",
               (unsigned long long)p->handle.serial, (unsigned long long)p->nbytes,
               reason_words(p->reasons));
    }
    if (out->nprotected > 8)
        append(out->reason, sizeof out->reason, &len, " and %zu more", out->nprotected - 8);
    return FHR_OK;
}

/* One victim tried at `here` (slot): dropped when its value keeps another copy or can be
 * reloaded, else moved to the first configured tier with room. 1 when it went (the model
 * and the output updated), 0 when it cannot go; *st is set when the output failed. */
static int try_evict(const tiers *cfg, model *md, int slot, fhr_location here,
                     const fhr_value_info *vi, const fhr_copy_info *ci, vstate *v,
                     uint64_t *shortb, fhr_policy_out *out, const char *name, fhr_status *st,
                     fhr_error *err)
{
    out->explored_states++;
    uint64_t n = ci->charged_nbytes - (v->trim_slot == slot ? v->trimmed : 0);
    fhr_eviction ev = {{FHR_ACT_DROP, vi->handle, here, 0, {0, 0}, 0}, vi->priority, ci->last_use,
                       n};
    int ok = 0;
    if (v->ncopies > 1 || vi->recoverability == FHR_RECONSTRUCTIBLE) {
        ok = 1;
        v->ncopies--;
    } else {
        for (int t = 0; t < cfg->nchain[slot]; t++) {
            int ts = cfg->chain[slot][t];
            if (t)
                out->explored_states++;
            if (!has_room(md, ts, n))
                continue;
            ev.action = (fhr_action){FHR_ACT_MOVE, vi->handle, fhr_loc_from_slot(ts), 1, here, 0};
            md->committed[ts] += n;
            ok = 1;
            break;
        }
    }
    if (!ok)
        return 0;
    v->gone_slot = (int8_t)slot;
    md->committed[slot] -= n;
    *shortb = n >= *shortb ? 0 : *shortb - n;
    (void)md_fits(md, slot, md_want(md, slot)); /* noted: fits exactly when !*shortb */
    if (fhr_policy_out_evict(out, &ev) != FHR_OK)
        *st = fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", name);
    return 1;
}

/* A partial copy's parts its next use does not read, dropped (fhr_drop_parts): the copy
 * stays. 1 when they went; 0 when the copy is gone already. */
static int try_trim(model *md, int slot, fhr_location here, const fhr_value_info *vi,
                    const fhr_copy_info *ci, const cand *k, vstate *v, uint64_t *shortb,
                    fhr_policy_out *out, const char *name, fhr_status *st, fhr_error *err)
{
    out->explored_states++;
    if (v->gone_slot == slot)
        return 0;
    fhr_eviction ev = {{FHR_ACT_DROP, vi->handle, here, 0, {0, 0}, k->keep}, vi->priority,
                       ci->last_use, k->nbytes};
    v->trim_slot = (int8_t)slot;
    v->trimmed = k->nbytes;
    md->committed[slot] -= k->nbytes;
    *shortb = k->nbytes >= *shortb ? 0 : *shortb - k->nbytes;
    (void)md_fits(md, slot, md_want(md, slot));
    if (fhr_policy_out_evict(out, &ev) != FHR_OK)
        *st = fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", name);
    return 1;
}

/* The victims at a short slot, walked in rank order from the victim index instead of
 * ranking every copy there: the index holds exactly the copies with no lease, hold or
 * pending event, in the order the full path sorts them (its ranking has no request-
 * dependent key), so skipping the required ones gives the full path's candidates in its
 * order, and the same victims. Returns the bytes still short: when some remain, the
 * location is infeasible and the caller decides again on the full path, whose answer
 * lists every protected copy there. */
static uint64_t evict_indexed(const tiers *cfg, vix *ix, model *md, int slot,
                              uint64_t shortb, vstate *vs, uint32_t epoch,
                              const fhr_snapshot *snap, fhr_policy_out *out, const char *name,
                              uint64_t *scanned, fhr_status *st, fhr_error *err)
{
    fhr_location here = fhr_loc_from_slot(slot);
    for (uint32_t nd = vix_first(ix, slot); shortb && nd != VIX_NONE && *st == FHR_OK;
         nd = vix_next(ix, slot, nd)) {
        ++*scanned;
        size_t i = vix_find(snap, vix_serial(ix, nd));
        if (i == SIZE_MAX)
            return shortb; /* not in the snapshot: a stale index; the full path decides */
        const fhr_value_info *vi = &snap->values[i];
        const fhr_copy_info *ci = NULL;
        for (size_t c = 0; c < vi->ncopies && !ci; c++)
            if (same_loc(vi->copies[c].loc, here))
                ci = &vi->copies[c];
        vstate *v = vref(vs, epoch, snap, i);
        if (!ci || protect_bits(ci, 0))
            return shortb; /* the same */
        if (v->required)
            continue;
        (void)try_evict(cfg, md, slot, here, vi, ci, v, &shortb, out, name, st, err);
    }
    return shortb;
}

static void lookahead_rank(const void *ctx, const fhr_request *req, const fhr_value_info *vi,
                           const fhr_copy_info *ci, uint64_t k[RANK_KEYS]);
static uint64_t lookahead_tail(const void *ctx, const fhr_request *req,
                               const fhr_value_info *vi, const fhr_copy_info *ci,
                               uint32_t *keep, uint64_t k[RANK_KEYS]);

/* One decision of tiered_decide: its inputs, the model, the per-value state and the
 * candidate buffer (the index's, or its own). */
typedef struct decide {
    const tiers *cfg;
    rank_fn rank;
    tail_fn tail;      /* NULL: copies go whole */
    const void *rctx;
    const char *name;
    const fhr_snapshot *snap;
    const fhr_request *req;
    vix *ix;
    uint64_t *scanned;
    fhr_policy_out *out;
    fhr_error *err;
    model md;
    vstate *vs;
    cand *cs;
    size_t ncs;        /* the full path's candidate room (protected copies from the back) */
    uint32_t epoch;
    size_t nv;
    fhr_status st;
} decide;

/* Budgets and what is committed at each location, from the snapshot. */
static void model_init(model *md, const fhr_snapshot *snap)
{
    memset(md, 0, sizeof *md);
    for (size_t i = 0; i < snap->nlocs; i++) {
        const fhr_loc_stats *l = &snap->locs[i];
        int s = fhr_loc_slot(l->loc);
        if (s < 0)
            continue;
        md->has_budget[s] = l->has_budget;
        md->budget[s] = l->budget_bytes;
        md->committed[s] = sat_add(sat_add(l->used_bytes, l->reserved_bytes),
                                   sat_add(l->temporary_bytes, l->inflight_bytes));
    }
}

/* What the request needs: a copy per unmet requirement (an enter action each), and its
 * reservations. */
static void model_request(decide *d)
{
    const fhr_snapshot *snap = d->snap;
    for (size_t r = 0; r < d->req->nrequirements && d->st == FHR_OK; r++) {
        const fhr_requirement *q = &d->req->requirements[r];
        const fhr_value_info *vi = fhr_snapshot_value(snap, q->handle);
        if (!vi) {
            d->st = fhr_fail(d->err, FHR_E_HANDLE, "%s: requirement %zu: unknown handle",
                             d->name, r);
            break;
        }
        vref(d->vs, d->epoch, snap, (size_t)(vi - snap->values))->required = 1;
        int slot = fhr_loc_slot(q->at);
        const fhr_copy_info *have = NULL;
        for (size_t c = 0; c < vi->ncopies; c++)
            if (fhr_loc_equal(vi->copies[c].loc, q->at))
                have = &vi->copies[c];
        /* a cut value's requirement names the q-limbs it needs (all of them: whole) */
        uint32_t want = q->limbs && q->limbs < vi->cut_q ? q->limbs : 0;
        if (have && copy_serves(vi, have, want))
            continue;
        /* as the manager will charge it: host and pinned copies omit regenerable fields, a
         * partial copy holds its limbs (one that grows is charged whole until it is done) */
        d->md.need[slot] += want            ? fhr_cut_nbytes(vi, want, 0)
                            : slot < 2      ? vi->spec_storage_nbytes - vi->omitted_nbytes[slot]
                                            : vi->spec_storage_nbytes;
        fhr_action a = {FHR_ACT_ENSURE, q->handle, q->at, 0, {0, 0}, want};
        if (vi->mode == FHR_EXCLUSIVE) {
            a.kind = FHR_ACT_MOVE;
            if (vi->ncopies) {
                a.has_from = 1;
                a.from = vi->copies[0].loc;
            }
        }
        if (fhr_policy_out_enter(d->out, &a) != FHR_OK)
            d->st = fhr_fail(d->err, FHR_E_NOMEM, "%s: out of host memory", d->name);
    }
    for (size_t r = 0; r < d->req->nreservations && d->st == FHR_OK; r++)
        d->md.need[fhr_loc_slot(d->req->reservations[r].at)] += d->req->reservations[r].nbytes;
}

/* Whether copy ci may drop parts: a partial copy, or a whole one when the value can be
 * reloaded or keeps another whole copy (the last whole copy of a MUST_PRESERVE value
 * stays whole, as the manager requires). */
static int parts_may_go(const fhr_value_info *vi, const fhr_copy_info *ci)
{
    if (ci->limbs || vi->recoverability == FHR_RECONSTRUCTIBLE)
        return 1;
    for (size_t c = 0; c < vi->ncopies; c++)
        if (&vi->copies[c] != ci && !vi->copies[c].limbs)
            return 1;
    return 0;
}

/* Copy c of value i as a candidate at cs[nc], and the parts its next use does not read as
 * another at cs[nc + 1] when the policy ranks those (room for both is there). The
 * candidates now. */
static size_t add_candidate(decide *d, size_t nc, size_t i, const fhr_value_info *vi,
                            uint32_t c)
{
    const fhr_copy_info *ci = &vi->copies[c];
    cand *k = &d->cs[nc++];
    k->k[0] = k->k[1] = k->k[2] = 0;
    k->serial = vi->handle.serial;
    k->vi = (uint32_t)i;
    k->ci = c;
    k->keep = 0;
    k->nbytes = 0;
    d->rank(d->rctx, d->req, vi, ci, k->k);
    if (d->tail && ci->parts && parts_may_go(vi, ci)) {
        cand *t = &d->cs[nc];
        if ((t->nbytes = d->tail(d->rctx, d->req, vi, ci, &t->keep, t->k))) {
            t->serial = k->serial;
            t->vi = k->vi;
            t->ci = c;
            nc++;
        }
    }
    return nc;
}

/* A ranking that depends on the request (lookahead), over the index: the index's copies
 * at this slot are exactly the copies there with no lease, hold or pending event, so
 * ranking those that are not required gives the full path's candidates; their order is
 * total, so the same victims. Protected copies are listed only when the location turns
 * out infeasible, which the full path decides again. The count of candidates; *stale
 * when the index is not what the snapshot holds. */
static size_t index_candidates(decide *d, int slot, fhr_location here, int *stale)
{
    size_t nc = 0;
    vix_iter it;
    for (uint32_t nd = vix_iter_first(&it, d->ix, slot); nd != VIX_NONE;
         nd = vix_iter_next(&it)) {
        ++*d->scanned;
        size_t i = vix_find(d->snap, vix_serial(d->ix, nd));
        const fhr_value_info *vi = i == SIZE_MAX ? NULL : &d->snap->values[i];
        const fhr_copy_info *ci = NULL;
        for (size_t c = 0; vi && c < vi->ncopies && !ci; c++)
            if (same_loc(vi->copies[c].loc, here))
                ci = &vi->copies[c];
        if (!ci || protect_bits(ci, 0)) {
            *stale = 1; /* not what the snapshot holds: the full path decides */
            break;
        }
        if (vref(d->vs, d->epoch, d->snap, i)->required)
            continue;
        cand *b = vix_buffer(d->ix, nc + 2, sizeof *b);
        if (!b) {
            d->st = fhr_fail(d->err, FHR_E_NOMEM, "%s: out of host memory", d->name);
            break;
        }
        d->cs = b;
        nc = add_candidate(d, nc, i, vi, (uint32_t)(ci - vi->copies));
    }
    return nc;
}

/* The full path: every copy at this slot ranked, candidates at the front of cs,
 * protected copies at the back (*np of them). The count of candidates. */
static size_t scan_candidates(decide *d, fhr_location here, size_t *np)
{
    size_t nc = 0;
    for (size_t i = 0; i < d->nv; i++) {
        const fhr_value_info *vi = &d->snap->values[i];
        for (size_t c = 0; c < vi->ncopies; c++) {
            const fhr_copy_info *ci = &vi->copies[c];
            if (!same_loc(ci->loc, here))
                continue;
            /* ranked in place: a candidate built on the stack and copied stalls on
             * reading back what rank() just stored, several times this whole loop */
            if (!protect_bits(ci, vref(d->vs, d->epoch, d->snap, i)->required)) {
                nc = add_candidate(d, nc, i, vi, (uint32_t)c);
                break;
            }
            cand *k = &d->cs[d->ncs - 1 - (*np)++];
            k->k[0] = k->k[1] = k->k[2] = 0;
            k->serial = vi->handle.serial;
            k->vi = (uint32_t)i;
            k->ci = (uint32_t)c;
            k->keep = 0;
            d->rank(d->rctx, d->req, vi, ci, k->k);
            break;
        }
    }
    return nc;
}

/* Evicts candidates in rank order until *shortb is covered. The least candidate first,
 * by one linear pass: most requests evict one copy, and a heap of every candidate costs
 * more than the pass. The rest become a heap only when a second victim is needed (the
 * order is total, so the victims are the same). Candidates that could not go are kept
 * right after the heap: *heap_end is where they start, the return their count. */
static size_t evict_in_order(decide *d, int slot, fhr_location here, size_t nc,
                             uint64_t *shortb, size_t *heap_end)
{
    cand *cs = d->cs;
    for (size_t i = 1; i < nc; i++)
        if (cand_less(&cs[i], &cs[0])) {
            cand t = cs[0];
            cs[0] = cs[i];
            cs[i] = t;
        }
    size_t nskip = 0, heap = nc;
    int heaped = 0, popped = 0;
    while (*shortb && heap) {
        if (popped && !heaped) {
            for (size_t i = heap / 2; i-- > 0;)
                sift_down(cs, heap, i);
            heaped = 1;
        }
        cand k = cs[0];
        cs[0] = cs[--heap];
        if (heaped)
            sift_down(cs, heap, 0);
        popped = 1;
        const fhr_value_info *vi = &d->snap->values[k.vi];
        if (k.keep)
            (void)try_trim(&d->md, slot, here, vi, &vi->copies[k.ci], &k, &d->vs[k.vi], shortb,
                           d->out, d->name, &d->st, d->err);
        else if (!try_evict(d->cfg, &d->md, slot, here, vi, &vi->copies[k.ci], &d->vs[k.vi],
                            shortb, d->out, d->name, &d->st, d->err))
            cs[heap + nskip++] = k; /* heap shrank by one: the slot is free */
    }
    *heap_end = heap;
    return nskip;
}

/* Infeasible: list what could not go, in serial order (protected first), then the copies
 * with no tier, then the reason. */
static void list_kept(decide *d, int slot, fhr_location here, size_t np, size_t heap,
                      size_t nskip, uint64_t shortb)
{
    fhr_policy_out *out = d->out;
    for (size_t i = 0; i < np && d->st == FHR_OK; i++) {
        const cand *k = &d->cs[d->ncs - np + i];
        const fhr_value_info *vi = &d->snap->values[k->vi];
        const fhr_copy_info *ci = &vi->copies[k->ci];
        int required = d->vs[k->vi].epoch == d->epoch && d->vs[k->vi].required;
        fhr_protected_copy p = {vi->handle, here, ci->charged_nbytes, protect_bits(ci, required)};
        if (fhr_policy_out_protect(out, &p) != FHR_OK)
            d->st = fhr_fail(d->err, FHR_E_NOMEM, "%s: out of host memory", d->name);
    }
    /* protected entries were stored back to front in scan order: reverse them */
    for (size_t i = 0, j = out->nprotected; d->st == FHR_OK && i + 1 < j; i++, j--) {
        fhr_protected_copy t = out->protected_[i];
        out->protected_[i] = out->protected_[j - 1];
        out->protected_[j - 1] = t;
    }
    for (size_t i = 0; i < nskip && d->st == FHR_OK; i++) {
        const cand *k = &d->cs[heap + i];
        const fhr_value_info *vi = &d->snap->values[k->vi];
        fhr_protected_copy p = {vi->handle, here, vi->copies[k->ci].charged_nbytes,
                                FHR_PROT_NO_TIER};
        if (fhr_policy_out_protect(out, &p) != FHR_OK)
            d->st = fhr_fail(d->err, FHR_E_NOMEM, "%s: out of host memory", d->name);
    }
    if (d->st == FHR_OK)
        d->st = infeasible(d->snap, &d->md, slot, shortb, out);
}

/* The last resort at a short location: a partial copy the request grows is replaced by a
 * new copy, and both are charged while the grow runs. When every other candidate is gone
 * and room is still short, such a copy (neither leased, held nor pending) is dropped
 * instead, and the requirement loads its limbs whole from the source. The bytes still
 * short. */
static uint64_t drop_grown(decide *d, int slot, fhr_location here, uint64_t shortb)
{
    for (size_t r = 0; shortb && r < d->req->nrequirements && d->st == FHR_OK; r++) {
        const fhr_requirement *q = &d->req->requirements[r];
        if (!same_loc(q->at, here))
            continue;
        const fhr_value_info *vi = fhr_snapshot_value(d->snap, q->handle);
        const fhr_copy_info *ci = NULL;
        for (size_t c = 0; vi && c < vi->ncopies && !ci; c++)
            if (same_loc(vi->copies[c].loc, here))
                ci = &vi->copies[c];
        if (!ci)
            continue;
        uint32_t want = q->limbs && q->limbs < vi->cut_q ? q->limbs : 0;
        if (copy_serves(vi, ci, want) || protect_bits(ci, 0))
            continue; /* whole, enough limbs and parts, or protected */
        vstate *v = vref(d->vs, d->epoch, d->snap, (size_t)(vi - d->snap->values));
        if (v->ncopies > 1 || vi->recoverability == FHR_RECONSTRUCTIBLE)
            (void)try_evict(d->cfg, &d->md, slot, here, vi, ci, v, &shortb, d->out, d->name,
                            &d->st, d->err);
    }
    return shortb;
}

/* One short location: evict down to its budget. 1 when the index could not decide it
 * (the caller decides again without the index), else 0. */
static int decide_slot(decide *d, int slot, uint64_t shortb)
{
    if (d->ix && d->rank == lru_rank)
        return evict_indexed(d->cfg, d->ix, &d->md, slot, shortb, d->vs, d->epoch, d->snap,
                             d->out, d->name, d->scanned, &d->st, d->err) &&
               d->st == FHR_OK;
    fhr_location here = fhr_loc_from_slot(slot);
    size_t nc = 0, np = 0;
    if (d->ix) {
        int stale = 0;
        nc = index_candidates(d, slot, here, &stale);
        if (d->st != FHR_OK)
            return 0;
        if (stale)
            return 1;
    } else {
        nc = scan_candidates(d, here, &np);
    }
    size_t heap = 0, nskip = evict_in_order(d, slot, here, nc, &shortb, &heap);
    if (!shortb || d->st != FHR_OK)
        return 0;
    if (d->ix) /* infeasible over the index: the full path lists what is protected */
        return 1;
    shortb = drop_grown(d, slot, here, shortb);
    if (!shortb || d->st != FHR_OK)
        return 0;
    list_kept(d, slot, here, np, heap, nskip, shortb);
    return 0;
}

/* The engine both built-in policies share: model the request's needs, and at each short
 * location evict unprotected, unrequired copies in rank order, dropping a copy that has
 * another or can be reloaded, else moving it to the first configured tier with room.
 * With a victim index, the victims come from it; *fallback is set when
 * a location turned out infeasible that way (the caller decides again without it). */
static fhr_status tiered_decide(const tiers *cfg, rank_fn rank, const void *rctx,
                                const char *name, const fhr_snapshot *snap,
                                const fhr_request *req, vix *ix, int *fallback,
                                uint64_t *scanned, fhr_policy_out *out, bwin *win, int wslot,
                                fhr_error *err)
{
    decide d;
    memset(&d, 0, sizeof d);
    d.cfg = cfg;
    d.rank = rank;
    d.tail = rank == lookahead_rank ? lookahead_tail : NULL;
    d.rctx = rctx;
    d.name = name;
    d.snap = snap;
    d.req = req;
    d.ix = ix;
    d.scanned = scanned;
    d.out = out;
    d.err = err;
    model_init(&d.md, snap);
    d.md.win = win;
    d.md.wslot = wslot;
    d.nv = snap->nvalues;
    d.ncs = (d.tail ? 2 : 1) * (d.nv ? d.nv : 1);
    d.epoch = 1;
    vstate *own = NULL;
    if (ix)
        d.vs = vix_scratch(ix, &d.epoch);
    if (!d.vs) {
        d.ix = NULL;
        d.vs = own = malloc((d.nv ? d.nv : 1) * sizeof *d.vs);
        d.cs = malloc(d.ncs * sizeof *d.cs);
        if (!d.vs || !d.cs) {
            free(d.vs);
            free(d.cs);
            return fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", name);
        }
        for (size_t i = 0; i < d.nv; i++)
            d.vs[i].epoch = 0;
    }
    d.st = FHR_OK;
    out->explored_states = 1; /* the current state */
    model_request(&d);
    /* Locations in slot order (host, pinned, cuda:0, ...); each short one evicts. */
    for (int slot = 0; slot < FHR_LOC_SLOTS && d.st == FHR_OK && out->feasible; slot++) {
        if (!d.md.has_budget[slot])
            continue;
        uint64_t want = md_want(&d.md, slot);
        if (md_fits(&d.md, slot, want))
            continue;
        if (decide_slot(&d, slot, want - d.md.budget[slot])) {
            *fallback = 1;
            break;
        }
    }
    free(own);
    if (!d.ix)
        free(d.cs); /* over the index, cs is the index's buffer */
    return d.st;
}

/* Validates and copies fallback chains (one per location, no repeats, not itself). */
static fhr_status tiers_init(tiers *cfg, const fhr_tier_chain *chains, size_t n,
                             const char *who, fhr_error *err)
{
    char lb[16];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < n; i++) {
        int s = fhr_loc_slot(chains[i].loc);
        if (s < 0)
            return fhr_fail(err, FHR_E_LOCATION, "%s: chain %zu: invalid location", who, i);
        if (cfg->nchain[s] || (chains[i].nfallback && !chains[i].fallback) ||
            chains[i].nfallback >= FHR_LOC_SLOTS)
            return fhr_fail(err, FHR_E_INVALID, "%s: chain %zu for %s is repeated or malformed",
                            who, i, fhr_loc_format(chains[i].loc, lb, sizeof lb));
        uint64_t seen = 1ULL << s;
        for (size_t k = 0; k < chains[i].nfallback; k++) {
            int t = fhr_loc_slot(chains[i].fallback[k]);
            if (t < 0 || (seen & (1ULL << t)))
                return fhr_fail(err, FHR_E_INVALID,
                                "%s: chain for %s: fallback %zu is invalid, the location itself, "
                                "or repeated",
                                who, fhr_loc_format(chains[i].loc, lb, sizeof lb), k);
            seen |= 1ULL << t;
            cfg->chain[s][k] = (signed char)t;
        }
        cfg->nchain[s] = (int)chains[i].nfallback;
    }
    return FHR_OK;
}

static fhr_status tlru_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                              fhr_policy_out *out, fhr_error *err)
{
    return tiered_decide(ctx, lru_rank, NULL, "tiered_lru", snap, req, NULL, NULL, NULL, out,
                         NULL, -1, err);
}

static void tlru_destroy(void *ctx) { free(ctx); }

fhr_status fhr_policy_tiered_lru_create(const fhr_tier_chain *chains, size_t n,
                                        fhr_policy **out, fhr_error *err)
{
    if (!out || (n && !chains))
        return fhr_fail(err, FHR_E_INVALID, "tiered_lru_create: chains and out are required");
    *out = NULL;
    tiers *cfg = malloc(sizeof *cfg);
    if (!cfg)
        return fhr_fail(err, FHR_E_NOMEM, "tiered_lru_create: out of host memory");
    fhr_status st = tiers_init(cfg, chains, n, "tiered_lru_create", err);
    if (st == FHR_OK) {
        fhr_policy_ops ops = {"tiered_lru", tlru_decide, tlru_destroy};
        st = fhr_policy_create(&ops, cfg, out, err);
    }
    if (st != FHR_OK)
        free(cfg);
    return st;
}

/* ---- lookahead ------------------------------------------------------------------------ */

/* The known future, sorted by (serial, slot, position) for binary search. */
typedef struct future_key {
    uint64_t serial;
    uint64_t position;
    int slot;
    uint32_t limbs;  /* the q-limbs the request reads (the most of its uses); 0: whole */
    size_t more;     /* the value's next use there that reads more limbs; SIZE_MAX: none */
} future_key;

typedef struct lookahead {
    tiers t;
    uint64_t manager_id;
    future_key *uses;
    size_t nuses;
    size_t *first;     /* by serial: its first use; first[s + 1] ends them (NULL: none) */
    uint64_t nfirst;   /* serials 0 .. nfirst - 2 are indexed */
} lookahead;

/* The limbs a use reads, as an order: whole above every count. */
static uint64_t limbs_rank(uint32_t limbs) { return limbs ? limbs : UINT64_MAX; }

/* Sorted uses: each request's uses of a value at a location read the most of their limbs,
 * and each use's `more` is the value's next use there that reads more (a stack from the
 * back of each run of the same value and location). 0 out of host memory. */
static int future_more(future_key *u, size_t n)
{
    size_t *stack = malloc((n ? n : 1) * sizeof *stack), top = 0;
    if (!stack)
        return 0;
    for (size_t a = 0, b; a < n; a = b) {
        b = a + 1;
        while (b < n && u[b].position == u[a].position && u[b].serial == u[a].serial &&
               u[b].slot == u[a].slot)
            b++;
        uint64_t most = 0;
        for (size_t i = a; i < b; i++)
            most = limbs_rank(u[i].limbs) > most ? limbs_rank(u[i].limbs) : most;
        for (size_t i = a; i < b; i++)
            u[i].limbs = most == UINT64_MAX ? 0 : (uint32_t)most;
    }
    for (size_t i = n; i-- > 0;) {
        if (i + 1 < n && (u[i + 1].serial != u[i].serial || u[i + 1].slot != u[i].slot))
            top = 0; /* another value or location */
        while (top && limbs_rank(u[stack[top - 1]].limbs) <= limbs_rank(u[i].limbs))
            top--;
        u[i].more = top ? stack[top - 1] : SIZE_MAX;
        stack[top++] = i;
    }
    free(stack);
    return 1;
}

static int future_cmp(const void *a, const void *b)
{
    const future_key *x = a, *y = b;
    if (x->serial != y->serial)
        return x->serial < y->serial ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    if (x->position != y->position)
        return x->position < y->position ? -1 : 1;
    return 0;
}

/* The index of the first use of (serial, slot) after position `after`; SIZE_MAX: none. */
static size_t next_index(const lookahead *la, uint64_t serial, int slot, uint64_t after)
{
    size_t lo = 0, hi = la->nuses;
    if (la->first) { /* only that value's uses: few, where a search of all of them is long */
        if (serial >= la->nfirst - 1)
            return UINT64_MAX;
        lo = la->first[serial];
        hi = la->first[serial + 1];
    }
    future_key key = {serial, after + 1, slot, 0, 0};
    while (lo < hi) { /* lower bound of (serial, slot, after + 1) */
        size_t mid = lo + (hi - lo) / 2;
        if (future_cmp(&la->uses[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < la->nuses && la->uses[lo].serial == serial && la->uses[lo].slot == slot)
        return lo;
    return SIZE_MAX;
}

/* The first position after `after` at which (serial, slot) is used; UINT64_MAX: never. */
static uint64_t next_use(const lookahead *la, uint64_t serial, int slot, uint64_t after)
{
    size_t i = next_index(la, serial, slot, after);
    return i == SIZE_MAX ? UINT64_MAX : la->uses[i].position;
}

/* The first key: a copy never used again ranks first (0); else the distance to the next
 * use `nu`, times the bytes freed per unit of restore cost, the larger first. */
static uint64_t distance_key(const fhr_request *req, const fhr_copy_info *ci, uint64_t nu)
{
    if (nu == UINT64_MAX)
        return 0;
    unsigned __int128 w;
    if (ci->restore_s > 0) { /* bytes freed per second of restore, times the distance */
        long double t = (long double)(nu - req->position) * ci->charged_nbytes / ci->restore_s;
        /* below 1.8e19 < 2^64 the value fits 64 bits: the hardware conversion (the
         * 128-bit one is a library call, most of a lookahead decision's time) */
        w = t >= 1.8e19L ? (unsigned __int128)UINT64_MAX : (unsigned __int128)(uint64_t)t;
    } else {
        uint64_t restore = ci->restore_nbytes ? ci->restore_nbytes : 1;
        w = (unsigned __int128)(nu - req->position) * ci->charged_nbytes / restore;
    }
    return w >= UINT64_MAX ? 1 : UINT64_MAX - (uint64_t)w;
}

/* The objective is the time the links take, not the number of copies: a copy's restore
 * cost is the cost model's time to bring it back from its cheapest source (restore_s:
 * over the peer link when another device holds it, else its charge less what the
 * device regenerates over PCIe), or, in a snapshot without one, the bytes that would
 * cross the link. A copy never used again ranks first; then the largest distance to the
 * next use weighted by the bytes it frees per unit of restore cost (Belady's order when
 * that ratio is the same for all, e.g. equal sizes or all keys seeded alike); then larger
 * size, then the older last use, then lower priority: of copies equal in next use and
 * size (those never used again, above all) the one read longest ago goes, whose readers
 * are the likeliest to have ended, so a run need not wait for the newest body to evict
 * (priority orders copies read at the same clock). Without a position everything ranks as
 * never used again. */
static void lookahead_rank(const void *ctx, const fhr_request *req, const fhr_value_info *vi,
                           const fhr_copy_info *ci, uint64_t k[RANK_KEYS])
{
    const lookahead *la = ctx;
    uint64_t nu = UINT64_MAX;
    if (req->position && vi->handle.manager_id == la->manager_id)
        nu = next_use(la, vi->handle.serial, fhr_loc_slot(ci->loc), req->position);
    k[0] = distance_key(req, ci, nu);
    k[1] = UINT64_MAX - ci->charged_nbytes;
    k[2] = ci->last_use;
    k[3] = prio_key(vi->priority);
}

/* A partial copy whose next use reads fewer parts than it holds: the others are ranked as
 * a copy of their own, by the first later use that reads one of them, at the copy's
 * bytes per unit of restore cost (a part costs what its bytes do). Their bytes, or 0. */
static uint64_t lookahead_tail(const void *ctx, const fhr_request *req,
                               const fhr_value_info *vi, const fhr_copy_info *ci,
                               uint32_t *keep, uint64_t k[RANK_KEYS])
{
    const lookahead *la = ctx;
    if (!req->position || vi->handle.manager_id != la->manager_id || !vi->cut_parts)
        return 0;
    size_t i = next_index(la, vi->handle.serial, fhr_loc_slot(ci->loc), req->position);
    if (i == SIZE_MAX || !la->uses[i].limbs || la->uses[i].limbs >= vi->cut_q)
        return 0; /* never used again (the copy goes first), or used whole */
    uint32_t pn = parts_read(vi, la->uses[i].limbs);
    if (pn >= ci->parts)
        return 0;
    size_t j = i; /* uses between j and its `more` read at most j's limbs */
    while (j != SIZE_MAX && la->uses[j].limbs && parts_read(vi, la->uses[j].limbs) <= pn)
        j = la->uses[j].more;
    *keep = la->uses[i].limbs;
    uint64_t per = ((uint64_t)(ci->limbs ? ci->limbs : vi->cut_q) + vi->cut_special) *
                   vi->cut_limb_nbytes;
    uint64_t n = (uint64_t)(ci->parts - pn) * (vi->cut_nfields / vi->cut_parts) * per;
    lookahead_rank(ctx, req, vi, ci, k); /* the copy's ties */
    k[0] = distance_key(req, ci, j == SIZE_MAX ? UINT64_MAX : la->uses[j].position);
    k[1] = UINT64_MAX - n;
    return n;
}

static fhr_status lookahead_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                                   fhr_policy_out *out, fhr_error *err)
{
    const lookahead *la = ctx;
    return tiered_decide(&la->t, lookahead_rank, la, "lookahead", snap, req, NULL, NULL, NULL,
                         out, NULL, -1, err);
}

int fhr_policy_is_tiered(const fhr_policy *p)
{
    return p && (p->ops.decide == tlru_decide || p->ops.decide == lookahead_decide);
}

int policy_uses_victim_index(const fhr_policy *p) { return fhr_policy_is_tiered(p); }

/* A built-in policy's decision into a cleared out, over ix when it is not NULL. */
static fhr_status builtin_decide(const fhr_policy *p, const fhr_snapshot *snap, vix *ix,
                                 const fhr_request *req, int *fallback, uint64_t *scanned,
                                 fhr_policy_out *out, bwin *win, int wslot, fhr_error *err)
{
    memset(out, 0, sizeof *out);
    out->feasible = 1;
    if (p->ops.decide == tlru_decide)
        return tiered_decide(p->ctx, lru_rank, NULL, "tiered_lru", snap, req, ix, fallback,
                             scanned, out, win, wslot, err);
    const lookahead *la = p->ctx;
    return tiered_decide(&la->t, lookahead_rank, la, "lookahead", snap, req, ix, fallback,
                         scanned, out, win, wslot, err);
}

/* A custom policy may compare anything with a budget: its decision holds at this budget
 * only. */
static void pin_window(const fhr_snapshot *snap, bwin *win, int wslot)
{
    for (size_t i = 0; win && i < snap->nlocs; i++)
        if (fhr_loc_slot(snap->locs[i].loc) == wslot && snap->locs[i].has_budget) {
            uint64_t b = snap->locs[i].budget_bytes;
            win->lo = win->lo > b ? win->lo : b;
            win->hi = win->hi < b ? win->hi : b;
        }
}

fhr_status policy_decide_indexed(const fhr_policy *p, const fhr_snapshot *snap, vix *ix,
                                 const fhr_request *req, uint64_t *scanned, fhr_policy_out *out,
                                 bwin *win, int wslot, fhr_error *err)
{
    if (!p || !snap || !req || !out)
        return fhr_fail(err, FHR_E_INVALID, "policy_decide: NULL argument");
    if (!policy_uses_victim_index(p)) {
        *scanned += snap->nvalues; /* the full path reads every value */
        pin_window(snap, win, wslot);
        return fhr_policy_decide(p, snap, req, out, err);
    }
    if (ix && !vix_valid(ix))
        ix = NULL;
    if (!ix)
        *scanned += snap->nvalues;
    int fallback = 0;
    fhr_status st = builtin_decide(p, snap, ix, req, &fallback, scanned, out, win, wslot, err);
    if (st == FHR_OK && fallback) { /* infeasible over the index: the full path explains it */
        fhr_policy_out_clear(out);
        *scanned += snap->nvalues;
        st = builtin_decide(p, snap, NULL, req, NULL, NULL, out, win, wslot, err);
    }
    if (st != FHR_OK)
        fhr_policy_out_clear(out);
    return st;
}

static void lookahead_destroy(void *ctx)
{
    lookahead *la = ctx;
    free(la->uses);
    free(la->first);
    free(la);
}

fhr_status fhr_policy_lookahead_create(const fhr_tier_chain *chains, size_t n,
                                       const fhr_future_use *future, size_t nfuture,
                                       fhr_policy **out, fhr_error *err)
{
    if (!out || (n && !chains) || (nfuture && !future))
        return fhr_fail(err, FHR_E_INVALID, "lookahead_create: chains, future and out are required");
    *out = NULL;
    lookahead *la = calloc(1, sizeof *la);
    if (!la || !(la->uses = malloc((nfuture ? nfuture : 1) * sizeof *la->uses))) {
        free(la);
        return fhr_fail(err, FHR_E_NOMEM, "lookahead_create: out of host memory");
    }
    fhr_status st = tiers_init(&la->t, chains, n, "lookahead_create", err);
    for (size_t i = 0; i < nfuture && st == FHR_OK; i++) {
        int slot = fhr_loc_slot(future[i].at);
        if (slot < 0 || future[i].position == 0)
            st = fhr_fail(err, FHR_E_INVALID,
                          "lookahead_create: future use %zu has an invalid location or position 0", i);
        else if (i && future[i].handle.manager_id != future[0].handle.manager_id)
            st = fhr_fail(err, FHR_E_HANDLE,
                          "lookahead_create: future use %zu names another manager's handle", i);
        la->uses[i] = (future_key){future[i].handle.serial, future[i].position, slot,
                                   future[i].limbs, SIZE_MAX};
    }
    if (st == FHR_OK) {
        la->manager_id = nfuture ? future[0].handle.manager_id : 0;
        la->nuses = nfuture;
        qsort(la->uses, nfuture, sizeof *la->uses, future_cmp);
        if (!future_more(la->uses, nfuture))
            st = fhr_fail(err, FHR_E_NOMEM, "lookahead_create: out of host memory");
    }
    if (st == FHR_OK) {
        /* Where each serial's uses start, when serials are dense enough for an array (a
         * manager's are issued 1, 2, ...); without it, next_use searches them all. */
        uint64_t maxs = nfuture ? la->uses[nfuture - 1].serial : 0;
        if (nfuture && maxs <= 4 * (uint64_t)nfuture + 1024 &&
            (la->first = malloc((size_t)(maxs + 2) * sizeof *la->first))) {
            la->nfirst = maxs + 2;
            size_t k = 0;
            for (uint64_t sr = 0; sr < la->nfirst; sr++) {
                while (k < nfuture && la->uses[k].serial < sr)
                    k++;
                la->first[sr] = k;
            }
        }
        fhr_policy_ops ops = {"lookahead", lookahead_decide, lookahead_destroy};
        st = fhr_policy_create(&ops, la, out, err);
    }
    if (st != FHR_OK)
        lookahead_destroy(la);
    return st;
}
