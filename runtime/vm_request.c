/* runtime/vm_request.c — requests: `request NAME using POLICY { require ...; reserve ...;
 * body {...} }`. A decision is made over a tensor-free snapshot with the program's
 * tiered LRU policy, bound to the snapshot's state version, and executed as a scope
 * (reclaim = evictions, enter = ensure/move per unmet requirement, reservations), then
 * the body runs on leases at the required locations. Copies stay cached afterwards.
 *
 * The policy (deterministic, logical clocks only):
 *  - per budgeted location L the request needs: bytes of requirements not yet at L plus
 *    its reservations at L; if that exceeds the remaining budget, copies at L are
 *    evicted in order (lowest priority, least recently used, oldest handle first);
 *  - never a copy the request requires, nor a leased, held, in-flight or
 *    pending-consumer copy;
 *  - a copy with another copy elsewhere, or of a RECONSTRUCTIBLE value, is dropped; the
 *    last copy of a MUST_PRESERVE value moves to the first fallback tier of L's chain
 *    with room, else it stays;
 *  - when copies were skipped only because consumer work is still in flight, the VM
 *    waits for its compute streams, reaps, and decides once more (the application's
 *    choice; the policy itself never waits). Still short: the request fails as
 *    infeasible, naming the location and the bytes missing. */
#include "vm_internal.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    size_t vi;        /* snapshot value index */
    size_t ci;        /* copy index */
    int32_t prio;
    uint64_t last_use;
    uint64_t serial;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->prio != y->prio)
        return x->prio < y->prio ? -1 : 1;
    if (x->last_use != y->last_use)
        return x->last_use < y->last_use ? -1 : 1;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

typedef struct req_in {
    fhr_handle h;
    fhr_location at;
    size_t pc;
} req_in;

static int required(const req_in *rq, size_t n, fhr_handle h)
{
    for (size_t i = 0; i < n; i++)
        if (fhr_handle_equal(rq[i].h, h))
            return 1;
    return 0;
}

static int has_copy_at(const fhr_value_info *v, fhr_location loc)
{
    for (size_t c = 0; c < v->ncopies; c++)
        if (fhr_loc_equal(v->copies[c].loc, loc))
            return 1;
    return 0;
}

/* Decides the reclaim and enter actions. Returns FHR_OK with *short_bytes 0 when
 * feasible; *pending: a copy was skipped only for in-flight consumer work. */
static fhr_status decide(rplan_vm *vm, const fhr_snapshot *snap, const rplan_policy_info *pol,
                         const req_in *rq, size_t nrq, const fhr_reservation *res, size_t nres,
                         fhr_action *reclaim, size_t *nreclaim, fhr_action *enter, size_t *nenter,
                         uint64_t *short_bytes, fhr_location *short_loc, int *pending,
                         fhr_error *err)
{
    int64_t planned[FHR_LOC_SLOTS];
    memset(planned, 0, sizeof planned);
    *nreclaim = *nenter = 0;
    *short_bytes = 0;
    *pending = 0;
    /* enter actions and the bytes they add per location */
    for (size_t i = 0; i < nrq; i++) {
        const fhr_value_info *v = fhr_snapshot_value(snap, rq[i].h);
        if (!v)
            return fhr_fail(err, FHR_E_HANDLE, "request names an unknown value");
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= fhr_handle_equal(rq[j].h, rq[i].h) && fhr_loc_equal(rq[j].at, rq[i].at);
        if (dup || has_copy_at(v, rq[i].at))
            continue;
        fhr_action a;
        memset(&a, 0, sizeof a);
        a.kind = v->mode == FHR_EXCLUSIVE ? FHR_ACT_MOVE : FHR_ACT_ENSURE;
        a.handle = rq[i].h;
        a.at = rq[i].at;
        enter[(*nenter)++] = a;
        planned[fhr_loc_slot(rq[i].at)] += (int64_t)v->spec_storage_nbytes;
        if (a.kind == FHR_ACT_MOVE && v->ncopies == 1) {
            planned[fhr_loc_slot(v->copies[0].loc)] -= (int64_t)v->spec_storage_nbytes;
            if (v->copies[0].pending_events || v->copies[0].leases)
                *pending = 2; /* the move's source is still being read */
        }
    }
    for (size_t r = 0; r < nres; r++)
        planned[fhr_loc_slot(res[r].at)] += (int64_t)res[r].nbytes;
    /* evictions per short location */
    cand *cs = calloc(snap->nvalues + 1, sizeof *cs);
    if (!cs)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    for (size_t li = 0; li < snap->nlocs; li++) {
        const fhr_loc_stats *ls = &snap->locs[li];
        int slot = fhr_loc_slot(ls->loc);
        if (!ls->has_budget || planned[slot] <= 0)
            continue;
        int64_t room = (int64_t)ls->budget_bytes - (int64_t)ls->used_bytes -
                       (int64_t)ls->reserved_bytes;
        int64_t need = planned[slot] - room;
        if (need <= 0)
            continue;
        size_t nc = 0;
        for (size_t vi = 0; vi < snap->nvalues; vi++) {
            const fhr_value_info *v = &snap->values[vi];
            if (required(rq, nrq, v->handle))
                continue;
            for (size_t ci = 0; ci < v->ncopies; ci++) {
                const fhr_copy_info *c = &v->copies[ci];
                if (!fhr_loc_equal(c->loc, ls->loc))
                    continue;
                if (c->leases || c->holds) {
                    continue;
                }
                if (c->pending_events || !c->ready) {
                    if (!*pending)
                        *pending = 1;
                    continue;
                }
                cand k = {vi, ci, v->priority, c->last_use, v->handle.serial};
                cs[nc++] = k;
            }
        }
        qsort(cs, nc, sizeof *cs, cand_cmp);
        const fhr_location *chain = NULL;
        size_t nchain = 0;
        for (size_t ch = 0; pol && ch < pol->nchains; ch++)
            if (pol->chain_len[ch] > 0 && fhr_loc_equal(pol->chain[ch][0], ls->loc)) {
                chain = &pol->chain[ch][1];
                nchain = pol->chain_len[ch] - 1;
            }
        for (size_t k = 0; k < nc && need > 0; k++) {
            const fhr_value_info *v = &snap->values[cs[k].vi];
            fhr_action a;
            memset(&a, 0, sizeof a);
            a.handle = v->handle;
            a.at = ls->loc;
            if (v->ncopies > 1 || v->recoverability == FHR_RECONSTRUCTIBLE) {
                a.kind = FHR_ACT_DROP;
            } else {
                int found = 0;
                for (size_t f = 0; f < nchain && !found; f++) {
                    const fhr_loc_stats *fs = fhr_snapshot_loc(snap, chain[f]);
                    int fslot = fhr_loc_slot(chain[f]);
                    int64_t froom = fs && fs->has_budget
                                        ? (int64_t)fs->budget_bytes - (int64_t)fs->used_bytes -
                                              (int64_t)fs->reserved_bytes - planned[fslot]
                                        : INT64_MAX;
                    if (!fs || !fs->has_budget || froom >= (int64_t)v->spec_storage_nbytes) {
                        a.kind = FHR_ACT_MOVE;
                        a.at = chain[f];
                        a.has_from = 1;
                        a.from = ls->loc;
                        planned[fslot] += (int64_t)v->spec_storage_nbytes;
                        found = 1;
                    }
                }
                if (!found)
                    continue;
            }
            reclaim[(*nreclaim)++] = a;
            need -= (int64_t)v->spec_storage_nbytes;
            planned[slot] -= (int64_t)v->spec_storage_nbytes;
        }
        if (need > 0) {
            *short_bytes = (uint64_t)need;
            *short_loc = ls->loc;
            break;
        }
    }
    free(cs);
    (void)vm;
    return FHR_OK;
}

fhr_status vm_exec_request(rplan_vm *vm, size_t pc, size_t end, fhr_error *err)
{
    const rplan_instr *rin = &vm->ins[pc];
    size_t n = end - pc + 1;
    req_in *rq = calloc(n, sizeof *rq);
    fhr_reservation *res = calloc(n, sizeof *res);
    fhr_action *reclaim = NULL, *enter = calloc(n, sizeof *enter);
    fhr_location *at = NULL;
    vm_run *runs = NULL;
    size_t nrq = 0, nres = 0, nruns = 0;
    fhr_status st = FHR_OK;
    fhr_snapshot *snap = NULL;
    if (!rq || !res || !enter) {
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_REQUIRE) {
            rq[nrq].h = vm->h[in->value];
            rq[nrq].at = in->loc;
            rq[nrq].pc = i;
            nrq++;
        } else if (in->op == RPLAN_OP_RESERVE) {
            res[nres].at = in->loc;
            res[nres].nbytes = in->imm;
            res[nres].label = in->str;
            nres++;
        }
    }
    if ((st = vm_decode_runs(vm, pc, end, &runs, &nruns, err)) != FHR_OK)
        goto done;
    at = calloc(nruns + 1, sizeof *at);
    if (!at) {
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    for (size_t k = 0; k < nruns; k++) {
        at[k] = nrq ? rq[0].at : fhr_loc_host();
        int found = 0;
        for (size_t v = 0; v < runs[k].nvals && !found; v++)
            for (size_t i = 0; i < nrq && !found; i++)
                if (fhr_handle_equal(rq[i].h, vm->h[runs[k].vals[v]])) {
                    at[k] = rq[i].at;
                    found = 1;
                }
    }
    rplan_policy_info pol;
    int has_pol = rplan_policy(vm->p, rin->policy, &pol) == FHR_OK;
    {
        rplan_stage_report *r;
        for (size_t k = 0; k <= vm->depth; k++) {
            r = k < vm->depth ? &vm->stages[vm->stack[k]] : &vm->total;
            r->requests++;
        }
    }
    for (int attempt = 0;; attempt++) {
        if ((st = fhr_snapshot_take(vm->m, &snap, err)) != FHR_OK)
            goto done;
        size_t cap = nrq + 1;
        for (size_t i = 0; i < snap->nvalues; i++)
            cap += snap->values[i].ncopies;
        free(reclaim);
        reclaim = calloc(cap, sizeof *reclaim);
        if (!reclaim) {
            st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            goto done;
        }
        size_t nrec = 0, nent = 0;
        uint64_t shortb = 0;
        fhr_location shortl = {FHR_LOC_INVALID, 0};
        int pending = 0;
        st = decide(vm, snap, has_pol ? &pol : NULL, rq, nrq, res, nres, reclaim, &nrec, enter,
                    &nent, &shortb, &shortl, &pending, err);
        uint64_t version = snap->state_version;
        fhr_snapshot_free(snap);
        snap = NULL;
        if (st)
            goto done;
        if (((shortb && pending) || pending == 2) && attempt < 2 && !vm->explain) {
            /* wait for the consumers still reading, then decide again */
            for (int s = 0; s < FHR_LOC_SLOTS; s++)
                if (vm->compute[s])
                    vm->b->ops->stream_sync(vm->b, vm->compute[s], NULL);
            fhr_reap(vm->m);
            continue;
        }
        if (shortb) {
            char lb[16];
            st = fhr_fail(err, FHR_E_INFEASIBLE,
                          "request '%.60s' (policy %.40s): %s is %llu bytes short after every "
                          "legal eviction",
                          rin->str, has_pol ? pol.name : "?", fhr_loc_format(shortl, lb, sizeof lb),
                          (unsigned long long)shortb);
            if (err) {
                err->loc = shortl;
                err->bytes_short = shortb;
                err->phase = FHR_PHASE_PREFLIGHT;
                err->action_index = (long)pc;
            }
            goto done;
        }
        fhr_plan_desc d = {rin->str, reclaim, nrec, enter, nent, NULL, 0, res, nres};
        fhr_plan *plan = NULL;
        if ((st = fhr_plan_create(&d, &plan, err)) != FHR_OK)
            goto done;
        fhr_stream_map xs[FHR_LOC_SLOTS];
        size_t nxs = 0;
        for (size_t i = 0; i < nent && !vm->explain; i++) {
            if (enter[i].at.kind != FHR_LOC_CUDA)
                continue;
            size_t j = 0;
            while (j < nxs && !fhr_loc_equal(xs[j].loc, enter[i].at))
                j++;
            fhr_stream *s = j == nxs ? vm_xfer_stream(vm, enter[i].at, NULL) : NULL;
            if (s) {
                xs[nxs].loc = enter[i].at;
                xs[nxs].stream = s;
                nxs++;
            }
        }
        fhr_error e2;
        fhr_error_init(&e2);
        st = vm_exec_scope_plan(vm, plan, xs, nxs, 1, version, runs, nruns, at, 1, NULL, &e2);
        fhr_plan_destroy(plan);
        if (st == FHR_E_STALE && attempt < 2) {
            fhr_error_clear(&e2);
            continue;
        }
        if (st) {
            long ipc = (long)pc;
            if (e2.phase == FHR_PHASE_BODY)
                ipc = e2.action_index;
            else if (e2.phase == FHR_PHASE_ENTER && e2.action_index >= 0 &&
                     (size_t)e2.action_index < nent) {
                for (size_t i = 0; i < nrq; i++)
                    if (fhr_handle_equal(rq[i].h, enter[e2.action_index].handle))
                        ipc = (long)rq[i].pc;
            }
            if (err) {
                fhr_error_clear(err);
                *err = e2;
                err->action_index = ipc;
            } else {
                fhr_error_clear(&e2);
            }
        }
        break;
    }
done:
    fhr_snapshot_free(snap);
    free(rq);
    free(res);
    free(reclaim);
    free(enter);
    free(at);
    free(runs);
    return st;
}
