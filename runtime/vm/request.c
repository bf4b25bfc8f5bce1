/* runtime/vm/request.c — requests: `request NAME using POLICY { require ...; reserve ...;
 * body {...} }`, run through the controller. Each program policy becomes a policy object
 * (tiered LRU, or lookahead over the program's known future of requests) with its own
 * controller; a request is decided over a placement snapshot, bound to that state
 * version, and its plan (reclaim = evictions, enter = placements, the reservations) runs
 * as a version-checked scope whose body reads the required copies under leases. Copies
 * stay cached afterwards.
 *
 * One schedule, two executions (fheplan(1)): every decision is the one check makes on
 * the model backend. A run decides on check's view, as if every body in flight (of
 * requests and plans alike) had ended (fhr_decide_settled), and when the decision evicts
 * a copy a real body still reads it waits for that body (in issue order) and applies the
 * same decision. Waiting changes when things happen, never what. Under objective bytes
 * the decision holds the copies the previous request at each device read (double
 * buffering, in check and run alike): MIN would often evict exactly those and the run
 * would then wait for the newest body, leaving the device idle while the load runs.
 *
 * Prefetch is the host running ahead: a request's transfers are issued on the transfer
 * streams while earlier bodies still run on the compute streams, which wait for the
 * transfers through events. The VM bounds how far ahead it runs (rplan_vm_opts
 * prefetch_depth, serial); the bound only adds waits.
 *
 * Objective time (rplan_vm_opts.objective, lookahead only): the decisions follow the
 * modelled timeline of objective.c, in check and in a run alike, and a decision that
 * evicts around a copy the model's bodies still read stands when waiting for them
 * would idle the link longer than loading the other victim again takes. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- policies, controllers, the future ---------------------------------------------- */

/* Every (value, location) each request requires, numbered by request in program order. */
static fhr_status build_future(rplan_vm *vm, fhr_future_use **out, size_t *n, fhr_error *err)
{
    size_t cnt = 0;
    for (size_t i = 0; i < vm->ninstr; i++)
        cnt += vm->ins[i].op == RPLAN_OP_REQUIRE;
    fhr_future_use *f = malloc((cnt ? cnt : 1) * sizeof *f);
    if (!f)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    uint64_t pos = 0;
    size_t k = 0;
    for (size_t i = 0; i < vm->ninstr; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_REQUEST)
            pos++;
        else if (in->op == RPLAN_OP_REQUIRE)
            f[k++] = (fhr_future_use){pos, vm->h[in->value], in->loc, in->limbs};
    }
    *out = f;
    *n = k;
    return FHR_OK;
}

static int future_cmp(const void *a, const void *b)
{
    const fhr_future_use *x = a, *y = b;
    int sx = fhr_loc_slot(x->at), sy = fhr_loc_slot(y->at);
    if (x->handle.serial != y->handle.serial)
        return x->handle.serial < y->handle.serial ? -1 : 1;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return x->position < y->position ? -1 : x->position > y->position;
}

/* The first position after `after` where h is required at loc; UINT64_MAX: never. */
static uint64_t next_use(const rplan_vm *vm, fhr_handle h, fhr_location loc, uint64_t after)
{
    fhr_future_use key = {after + 1, h, loc, 0};
    size_t lo = 0, hi = vm->nfuture;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (future_cmp(&vm->future[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < vm->nfuture && vm->future[lo].handle.serial == h.serial &&
        fhr_loc_equal(vm->future[lo].at, loc))
        return vm->future[lo].position;
    return UINT64_MAX;
}

fhr_status vm_requests_setup(rplan_vm *vm, fhr_error *err)
{
    size_t np = rplan_npolicies(vm->p);
    if (!np)
        return FHR_OK;
    vm->pols = calloc(np, sizeof *vm->pols);
    vm->ctls = calloc(np, sizeof *vm->ctls);
    if (!vm->pols || !vm->ctls)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    vm->npols = np;
    fhr_future_use *future = NULL;
    size_t nfuture = 0;
    fhr_status st = FHR_OK;
    for (size_t i = 0; i < np && st == FHR_OK; i++) {
        rplan_policy_info pi;
        if ((st = rplan_policy(vm->p, i, &pi)) != FHR_OK)
            break;
        fhr_tier_chain chains[8];
        for (size_t c = 0; c < pi.nchains && c < 8; c++)
            chains[c] = (fhr_tier_chain){pi.chain[c][0], &pi.chain[c][1],
                                         pi.chain_len[c] ? pi.chain_len[c] - 1 : 0};
        int kind = vm->o.policy_override ? vm->o.policy_override : (int)pi.kind;
        if (kind == RPLAN_POLICY_LOOKAHEAD) {
            if (!future && (st = build_future(vm, &future, &nfuture, err)) != FHR_OK)
                break;
            st = fhr_policy_lookahead_create(chains, pi.nchains, future, nfuture, &vm->pols[i],
                                             err);
        } else {
            st = fhr_policy_tiered_lru_create(chains, pi.nchains, &vm->pols[i], err);
        }
        if (st == FHR_OK)
            st = fhr_controller_create(vm->m, vm->pols[i], &vm->ctls[i], err);
    }
    if (st == FHR_OK && !future)
        st = build_future(vm, &future, &nfuture, err);
    vm_model_reset(vm);
    if (future)
        qsort(future, nfuture, sizeof *future, future_cmp);
    vm->future = future;
    vm->nfuture = nfuture;
    return st;
}

void vm_requests_teardown(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->npols; i++) {
        fhr_controller_destroy(vm->ctls[i]);
        fhr_policy_destroy(vm->pols[i]);
    }
    free(vm->ctls);
    free(vm->pols);
    for (size_t i = 0; i < vm->ninflight; i++) {
        vm->b->ops->event_destroy(vm->b, vm->inflight[i].ev);
        vm_reads_free(vm->inflight[i].hs, vm->inflight[i].at);
    }
    free(vm->inflight);
    free(vm->future);
    vm->future = NULL;
    for (int s = 0; s < FHR_LOC_SLOTS; s++) {
        free(vm->prev[s].rq);
        vm->prev[s] = (struct vm_prev){NULL, 0, 0};
    }
    vm->nprev = 0;
    vm_model_free(vm);
    vm->ctls = NULL;
    vm->pols = NULL;
    vm->npols = vm->ninflight = 0;
}

typedef struct req_parts {
    fhr_requirement *rq;
    size_t *rq_pc;
    size_t nrq;
    fhr_reservation *res;
    size_t nres;
    vm_run *runs;
    size_t nruns;
    fhr_location *at;
} req_parts;

/* ---- bodies in flight ---------------------------------------------------------------- */

/* Records the end of bodies on the compute stream at loc, with every copy they read. An
 * event that cannot be made or recorded is a runtime fault: the run fails and says so. */
fhr_status vm_inflight_push(rplan_vm *vm, const char *who, fhr_location loc,
                            const fhr_requirement *rq, size_t nrq, double model_s, double mend_s,
                            fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    fhr_stream *s = slot >= 0 ? vm->compute[slot] : NULL;
    fhr_event *ev = NULL;
    fhr_handle *hs = NULL;
    fhr_location *at = NULL;
    if (vm->explain || !s)
        return FHR_OK;
    fhr_error e2;
    fhr_error_init(&e2);
    fhr_status st = vm->b->ops->event_create(vm->b, &ev, &e2);
    if (st == FHR_OK)
        st = vm->b->ops->event_record(vm->b, ev, s, &e2);
    if (st != FHR_OK) {
        char lb[16];
        fhr_fail(err, st, "%.120s: the event that ends its bodies at %s cannot be recorded: %.300s",
                 who, fhr_loc_format(loc, lb, sizeof lb),
                 e2.message[0] ? e2.message : fhr_status_name(st));
        fhr_error_clear(&e2);
        if (ev)
            vm->b->ops->event_destroy(vm->b, ev);
        return st;
    }
    fhr_error_clear(&e2);
    if (!vm_reads_set(&hs, &at, rq, nrq) ||
        !fhr_grow((void **)&vm->inflight, &vm->capinflight, vm->ninflight,
                  sizeof *vm->inflight, 16)) {
        vm_reads_free(hs, at);
        vm->b->ops->event_destroy(vm->b, ev);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    struct vm_inflight *f = &vm->inflight[vm->ninflight++];
    f->ev = ev;
    f->hs = hs;
    f->at = at;
    f->nh = nrq; /* every copy: no limit (a limit would leave some protected) */
    f->model_s = model_s;
    f->mend_s = mend_s;
    f->mark = vm->nmarks; /* its bodies were the last marked */
    return FHR_OK;
}

/* Removes the oldest entry (its event has completed or been waited for). */
static void inflight_pop(rplan_vm *vm)
{
    vm->b->ops->event_destroy(vm->b, vm->inflight[0].ev);
    vm_reads_free(vm->inflight[0].hs, vm->inflight[0].at);
    memmove(vm->inflight, vm->inflight + 1, (vm->ninflight - 1) * sizeof *vm->inflight);
    vm->ninflight--;
}

/* Waits for the oldest body in flight; 0 when none was. */
static void inflight_drop_done(rplan_vm *vm);

/* Waits for the bodies of entry i (and drops those that have ended with them). */
static void inflight_wait_at(rplan_vm *vm, size_t i, int why)
{
    struct vm_inflight *f = &vm->inflight[i];
    int newest = i + 1 == vm->ninflight; /* no body issued after it: the device drains */
    uint64_t t0 = vm_now_ns(vm);
    vm->b->ops->event_sync(vm->b, f->ev, NULL);
    if (newest) {
        vm->drained++;
        vm->drained_ns += vm_now_ns(vm) - t0;
    }
    vm_host_waited(vm, why, t0);
    if (why != RPLAN_WAIT_BOUND && f->mark > vm->ready_after)
        vm->ready_after = f->mark; /* the room it waited for is free then */
    vm->b->ops->event_destroy(vm->b, f->ev);
    vm_reads_free(f->hs, f->at);
    memmove(f, f + 1, (vm->ninflight - i - 1) * sizeof *f);
    vm->ninflight--;
    inflight_drop_done(vm);
    fhr_reap(vm->m, NULL, NULL);
}

static int inflight_wait_oldest(rplan_vm *vm, int why)
{
    if (!vm->ninflight)
        return 0;
    inflight_wait_at(vm, 0, why);
    return 1;
}

/* Drops the bodies that have ended from the front of the in-flight list. */
static void inflight_drop_done(rplan_vm *vm)
{
    while (vm->ninflight && vm->b->ops->event_query(vm->b, vm->inflight[0].ev) != 0)
        inflight_pop(vm);
}

/* ... and reaps what they released, so the decision sees their copies free. */
static void inflight_reap(rplan_vm *vm)
{
    inflight_drop_done(vm);
    fhr_reap(vm->m, NULL, NULL);
}

/* Whether the model's bodies still running at the model's time read the copy of h at
 * `at` (the time objective holds those copies, in check and in a run alike). */
static int model_reads(const rplan_vm *vm, fhr_handle h, fhr_location at)
{
    for (size_t i = 0; i < vm->nmflight; i++)
        for (size_t k = 0; k < vm->mflight[i].nh; k++)
            if (fhr_handle_equal(vm->mflight[i].hs[k], h) && fhr_loc_equal(vm->mflight[i].at[k], at))
                return 1;
    return 0;
}

/* Whether the request itself or, under the time objective (tobj), the model's bodies
 * protect the copy of h at `at` in check too. */
static int model_covers(const rplan_vm *vm, const fhr_requirement *rq, size_t nrq, int tobj,
                        fhr_handle h, fhr_location at)
{
    for (size_t j = 0; j < nrq; j++)
        if (fhr_handle_equal(rq[j].handle, h) && fhr_loc_equal(rq[j].at, at))
            return 1;
    return tobj && model_reads(vm, h, at);
}

/* 1 + the newest entry in flight whose bodies read the copy of h at `at`, from entry
 * `from` on; `from` when none does. */
static size_t newest_reader(const rplan_vm *vm, fhr_handle h, fhr_location at, size_t from)
{
    size_t last = from;
    for (size_t i = from; i < vm->ninflight; i++)
        for (size_t k = 0; k < vm->inflight[i].nh; k++)
            if (fhr_handle_equal(vm->inflight[i].hs[k], h) && fhr_loc_equal(vm->inflight[i].at[k], at))
                last = i + 1;
    return last;
}

/* Where an eviction frees its bytes: the short location (a move's source). */
static fhr_location evicted_from(const fhr_eviction *ev)
{
    return ev->action.kind == FHR_ACT_MOVE ? ev->action.from : ev->action.at;
}

/* The copies real bodies in flight read that check's view does not protect (neither the
 * request nor, under the time objective, the model's bodies). The decision is made as if
 * their work had completed (fhr_decide_settled), which is check's view under every
 * objective; the run waits only when the decision evicts one of them whose body has not
 * ended (settled_evicted). */
static fhr_status settled_copies(const rplan_vm *vm, const fhr_requirement *rq, size_t nrq,
                                 int tobj, fhr_requirement **out, size_t *n, fhr_error *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (size_t i = 0; i < vm->ninflight; i++)
        cap += vm->inflight[i].nh;
    if (!cap)
        return FHR_OK;
    fhr_requirement *s = malloc(cap * sizeof *s);
    if (!s)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    size_t k = 0; /* the distinct copies (few: every body reads the ciphertext) */
    for (size_t i = 0; i < vm->ninflight; i++)
        for (size_t j = 0; j < vm->inflight[i].nh; j++) {
            fhr_handle h = vm->inflight[i].hs[j];
            fhr_location at = vm->inflight[i].at[j];
            int dup = 0;
            for (size_t x = 0; x < k && !dup; x++)
                dup = fhr_handle_equal(s[x].handle, h) && fhr_loc_equal(s[x].at, at);
            if (!dup)
                s[k++] = (fhr_requirement){h, at, 0};
        }
    size_t kept = 0; /* then, once each, those the model or the request protects go */
    for (size_t x = 0; x < k; x++)
        if (!model_covers(vm, rq, nrq, tobj, s[x].handle, s[x].at))
            s[kept++] = s[x];
    k = kept;
    *out = s;
    *n = k;
    return FHR_OK;
}

/* 1 + the newest entry in flight whose bodies still read a copy the decision evicts; 0:
 * none (waiting for that one entry suffices on its stream: bodies end in issue order). */
static size_t settled_evicted(const rplan_vm *vm, const fhr_decision *d)
{
    size_t ne = fhr_decision_nevictions(d), last = 0;
    for (size_t e = 0; e < ne; e++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, e);
        last = newest_reader(vm, ev->action.handle, evicted_from(ev), last);
    }
    return last;
}

/* Whether the decision evicts a copy the request itself requires (a partial copy it
 * grows, dropped by the policy as a last resort). */
static int drops_required(const fhr_decision *d, const req_parts *q)
{
    size_t ne = fhr_decision_nevictions(d);
    for (size_t e = 0; e < ne; e++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, e);
        for (size_t j = 0; j < q->nrq; j++)
            if (fhr_handle_equal(q->rq[j].handle, ev->action.handle) &&
                fhr_loc_equal(q->rq[j].at, evicted_from(ev)))
                return 1;
    }
    return 0;
}

/* 1 + the newest entry in flight whose bodies read a partial copy the request must grow
 * (it requires more limbs or parts than the copy holds); 0: none. The manager refuses to grow a
 * copy a body still reads (the grow frees it), and check's view has those bodies ended
 * (the time objective's model holds only copies the request does not require). So the
 * run waits for them before it decides, and decides what check decides. */
static size_t grown_inflight(const rplan_vm *vm, const req_parts *q)
{
    size_t last = 0;
    for (size_t j = 0; vm->ninflight && j < q->nrq; j++) {
        const fhr_requirement *r = &q->rq[j];
        int holds = 1;
        if (!vm->vinfo[vm->ins[q->rq_pc[j]].value].limb_q ||
            fhr_copy_holds(vm->m, r->handle, r->at, r->limbs, &holds, NULL) != FHR_OK || holds)
            continue; /* not cut, no copy, or one with enough limbs and parts */
        last = newest_reader(vm, r->handle, r->at, last);
    }
    return last;
}

/* Values read by bodies in flight that the next request does not itself require. */
static size_t inflight_foreign(const rplan_vm *vm, const fhr_requirement *rq, size_t nrq)
{
    fhr_handle seen[64];
    size_t n = 0;
    for (size_t i = 0; i < vm->ninflight; i++)
        for (size_t k = 0; k < vm->inflight[i].nh; k++) {
            fhr_handle h = vm->inflight[i].hs[k];
            int dup = 0;
            for (size_t j = 0; j < nrq && !dup; j++)
                dup = fhr_handle_equal(rq[j].handle, h);
            for (size_t j = 0; j < n && !dup; j++)
                dup = fhr_handle_equal(seen[j], h);
            if (!dup && n < 64)
                seen[n++] = h;
        }
    return n;
}

/* Drops completed entries from the front, then bounds how far the host runs ahead. By
 * default only the budget does: the host issues every request whose placement fits
 * beside the copies work in flight still reads, so the link never idles while a future
 * missing key fits (a decision that does not fit, or that would evict a copy needed
 * sooner than one only older work keeps, waits for the oldest body; see below).
 * prefetch_depth N bounds it further, by the distinct values that bodies in flight read
 * beyond what the next request requires. Serial: no body in flight at all. */
static void inflight_bound(rplan_vm *vm, const fhr_requirement *rq, size_t nrq)
{
    inflight_drop_done(vm);
    size_t limit = vm->o.prefetch_depth ? vm->o.prefetch_depth : SIZE_MAX;
    while (vm->ninflight && (vm->o.serial || vm->ninflight > 4096 ||
                             (limit != SIZE_MAX && inflight_foreign(vm, rq, nrq) > limit)))
        inflight_wait_oldest(vm, RPLAN_WAIT_BOUND);
}

/* The model's first body to end (bodies run in issue order); 0: none in flight. */
static double model_oldest_end(const rplan_vm *vm)
{
    double end = vm->nmflight ? vm->mflight[0].end_s : 0;
    for (size_t i = 1; i < vm->nmflight; i++)
        if (vm->mflight[i].end_s < end)
            end = vm->mflight[i].end_s;
    return end;
}

/* Objective time: when a decision evicts a copy needed again while the model's bodies
 * still read a copy needed later (MIN's victim, held), the modelled time to wait for the
 * earliest such copy, if that idles the link (from t_issue) no longer than reloading the
 * evicted copy at the profile's bandwidth would take; else 0 (the decision stands). */
static double time_regret(const rplan_vm *vm, const fhr_decision *d, const req_parts *q,
                          uint64_t position, double t_issue)
{
    double best = 0;
    size_t ne = fhr_decision_nevictions(d);
    for (size_t e = 0; e < ne; e++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, e);
        fhr_location at = evicted_from(ev);
        uint64_t nv = next_use(vm, ev->action.handle, at, position);
        if (nv == UINT64_MAX)
            continue;
        double reload = (double)(ev->nbytes * vm->o.scale) / (vm->m_gbps * 1e9);
        for (size_t i = 0; i < vm->nmflight; i++)
            for (size_t k = 0; k < vm->mflight[i].nh; k++) {
                fhr_handle h = vm->mflight[i].hs[k];
                if (!fhr_loc_equal(vm->mflight[i].at[k], at))
                    continue;
                int needed = 0;
                for (size_t j = 0; j < q->nrq && !needed; j++)
                    needed = fhr_handle_equal(q->rq[j].handle, h) && fhr_loc_equal(q->rq[j].at, at);
                if (needed || next_use(vm, h, at, position) <= nv)
                    continue;
                double end = 0; /* the copy is free once the last body reading it ends */
                for (size_t i2 = 0; i2 < vm->nmflight; i2++)
                    for (size_t k2 = 0; k2 < vm->mflight[i2].nh; k2++)
                        if (fhr_handle_equal(vm->mflight[i2].hs[k2], h) &&
                            fhr_loc_equal(vm->mflight[i2].at[k2], at) && vm->mflight[i2].end_s > end)
                            end = vm->mflight[i2].end_s;
                if (end - t_issue <= reload && (best == 0 || end < best))
                    best = end;
            }
    }
    return best;
}

/* When the copies a decision evicts are free on the modelled timeline: the latest end of
 * the model's bodies reading them, or t if later (objective bytes: the loads wait for
 * MIN's victims, as the run's regret waits do). */
static double victims_free(const rplan_vm *vm, const fhr_decision *d, double t)
{
    size_t ne = fhr_decision_nevictions(d);
    for (size_t e = 0; e < ne; e++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, e);
        fhr_location at = evicted_from(ev);
        for (size_t i = 0; i < vm->nmflight; i++)
            for (size_t k = 0; k < vm->mflight[i].nh; k++)
                if (fhr_handle_equal(vm->mflight[i].hs[k], ev->action.handle) &&
                    fhr_loc_equal(vm->mflight[i].at[k], at) && vm->mflight[i].end_s > t)
                    t = vm->mflight[i].end_s;
    }
    return t;
}

/* The link's figures (link.c): the decision's transfers have their room once the last
 * body reading a copy it evicts has ended. */
static void victims_read(rplan_vm *vm, const fhr_decision *d)
{
    size_t ne = fhr_decision_nevictions(d);
    for (size_t e = 0; e < ne && !vm->explain; e++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, e);
        size_t m = vm_link_last_read(vm, ev->action.handle, evicted_from(ev));
        if (m > vm->ready_after)
            vm->ready_after = m;
    }
}

/* The bytes a request brings onto devices over the link (copies and source loads). */
static uint64_t link_bytes(const rplan_stage_report *t)
{
    return t->bytes[FHR_DIR_H2D] + t->load_h2d_bytes;
}

/* An infeasible decision that waiting can fix: a short location with a copy protected
 * only by work in flight (leases end with the bodies, pending events with their
 * completion). A copy the request requires, or one a hold keeps, stays where it is
 * however long the run waits: its pending events do not count (the double buffer of
 * 'relin' in the 2-GPU bootstrap's SlotToCoeff once waited 64 bodies for the
 * ciphertext's events, then failed where check dropped the buffer). */
static int waiting_helps(const fhr_decision *d)
{
    size_t n = fhr_decision_nprotected(d);
    for (size_t i = 0; i < n; i++) {
        const fhr_protected_copy *p = fhr_decision_protected(d, i);
        if ((p->reasons & (FHR_PROT_PENDING | FHR_PROT_LEASED)) &&
            !(p->reasons & ~(unsigned)(FHR_PROT_PENDING | FHR_PROT_LEASED)))
            return 1;
    }
    /* the manager's preflight refused a move away from a copy still being read */
    const fhr_explanation *ex = fhr_decision_explanation(d);
    return ex && !ex->feasible && ex->status == FHR_E_PROTECTED;
}

/* ---- double buffering ------------------------------------------------------------------ */

/* Whether a request's decision keeps the copies the request before it read (objective
 * bytes; the time objective's model holds what its bodies read instead): the link then
 * loads beside the newest body instead of waiting for it. A property of the schedule, not
 * of prefetch: check and a serial run hold the same copies, so all make one decision. */
static int buffers(const rplan_vm *vm, int tobj)
{
    return !tobj && vm->nprev;
}

/* One hold per location over the copies the previous request at each device read, of
 * values this one does not require (an exclusive one may move away from there) and that
 * are still there (a plan between them may have moved them). */
static fhr_status buffer_hold(rplan_vm *vm, const fhr_requirement *rq, size_t nrq,
                              fhr_hold ***out, size_t *nout, fhr_error *err)
{
    *out = NULL;
    *nout = 0;
    fhr_hold **holds = calloc(vm->nprev, sizeof *holds);
    fhr_handle *grp = malloc(vm->nprev * sizeof *grp);
    fhr_requirement *all = malloc(vm->nprev * sizeof *all);
    if (!holds || !grp || !all) {
        free(holds), free(grp), free(all);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    size_t n = 0;
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        for (size_t i = 0; i < vm->prev[s].n; i++)
            all[n++] = vm->prev[s].rq[i];
    fhr_status st = FHR_OK;
    size_t nh = 0;
    for (size_t i = 0; i < n && st == FHR_OK; i++) {
        fhr_location at = all[i].at;
        size_t j = 0; /* the first entry at this location takes every one there */
        while (j < i && !fhr_loc_equal(all[j].at, at))
            j++;
        if (j < i)
            continue;
        size_t ng = 0;
        for (size_t k = i; k < n && st == FHR_OK; k++) {
            fhr_handle h = all[k].handle;
            int skip = !fhr_loc_equal(all[k].at, at), res = 0;
            for (size_t r = 0; r < nrq && !skip; r++) /* anywhere: it may move from here */
                skip = fhr_handle_equal(rq[r].handle, h);
            for (size_t g = 0; g < ng && !skip; g++)
                skip = fhr_handle_equal(grp[g], h);
            if (!skip && (st = fhr_is_resident(vm->m, h, at, &res, err)) == FHR_OK && res)
                grp[ng++] = h;
        }
        if (st == FHR_OK && ng && (st = fhr_hold_acquire(vm->m, grp, ng, at, &holds[nh], err)) ==
                                      FHR_OK)
            nh++;
    }
    free(grp);
    free(all);
    if (st != FHR_OK) {
        vm_model_unhold(holds, nh);
        return st;
    }
    *out = holds;
    *nout = nh;
    return FHR_OK;
}

/* After a request with bodies: its copies are the next decisions' to keep, in place of
 * those of the request before it at each device its bodies ran at. */
static fhr_status buffer_remember(rplan_vm *vm, const req_parts *q, fhr_error *err)
{
    for (size_t k = 0; k < q->nruns; k++) {
        int s = fhr_loc_slot(q->at[k]);
        if (s < 0)
            continue;
        struct vm_prev *p = &vm->prev[s];
        if (!fhr_grow((void **)&p->rq, &p->cap, q->nrq ? q->nrq - 1 : 0, sizeof *p->rq, 16))
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        vm->nprev -= p->n;
        memcpy(p->rq, q->rq, q->nrq * sizeof *q->rq);
        p->n = q->nrq;
        vm->nprev += p->n;
    }
    return FHR_OK;
}

/* ---- one request ----------------------------------------------------------------------- */


static void parts_free(req_parts *q)
{
    free(q->rq);
    free(q->rq_pc);
    free(q->res);
    free(q->runs);
    free(q->at);
}

static fhr_status parts_decode(rplan_vm *vm, size_t pc, size_t end, req_parts *q, fhr_error *err)
{
    memset(q, 0, sizeof *q);
    size_t n = end - pc + 1;
    q->rq = calloc(n, sizeof *q->rq);
    q->rq_pc = calloc(n, sizeof *q->rq_pc);
    q->res = calloc(n, sizeof *q->res);
    if (!q->rq || !q->rq_pc || !q->res)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_REQUIRE) {
            q->rq[q->nrq] = (fhr_requirement){vm->h[in->value], in->loc, in->limbs};
            q->rq_pc[q->nrq++] = i;
        } else if (in->op == RPLAN_OP_RESERVE) {
            q->res[q->nres++] = (fhr_reservation){in->loc, in->imm, in->str};
        }
    }
    fhr_status st = vm_decode_runs(vm, pc, end, &q->runs, &q->nruns, err);
    if (st)
        return st;
    if (!(q->at = calloc(q->nruns + 1, sizeof *q->at)))
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    /* each body runs where the request requires its first value argument */
    for (size_t k = 0; k < q->nruns; k++) {
        q->at[k] = q->nrq ? q->rq[0].at : fhr_loc_host();
        int found = 0;
        for (size_t v = 0; v < q->runs[k].nvals && !found; v++)
            for (size_t i = 0; i < q->nrq && !found; i++)
                if (fhr_handle_equal(q->rq[i].handle, vm->h[q->runs[k].vals[v]])) {
                    q->at[k] = q->rq[i].at;
                    found = 1;
                }
    }
    return FHR_OK;
}

/* Transfer streams for the destinations of the plan's enter actions. */
static size_t transfer_map(rplan_vm *vm, const fhr_plan *plan, fhr_stream_map *xs)
{
    size_t nxs = 0;
    for (size_t i = 0; i < fhr_plan_nactions(plan, FHR_PHASE_ENTER) && !vm->explain; i++) {
        fhr_location to = fhr_plan_action(plan, FHR_PHASE_ENTER, i)->at;
        if (to.kind != FHR_LOC_CUDA)
            continue;
        size_t j = 0;
        while (j < nxs && !fhr_loc_equal(xs[j].loc, to))
            j++;
        fhr_stream *s = j == nxs ? vm_xfer_stream(vm, to, NULL) : NULL;
        if (s)
            xs[nxs++] = (fhr_stream_map){to, s};
    }
    return nxs;
}

static fhr_status infeasible(const rplan_instr *rin, const fhr_decision *d, size_t pc,
                             fhr_error *err)
{
    const fhr_explanation *ex = fhr_decision_explanation(d);
    fhr_fail(err, FHR_E_INFEASIBLE, "request '%.60s' (policy %.20s): %.400s", rin->str,
             fhr_decision_policy(d), ex && ex->reason[0] ? ex->reason : "infeasible");
    if (err && ex) {
        err->cause = ex->status;
        err->loc = ex->loc;
        err->bytes_short = ex->bytes_short;
        err->phase = FHR_PHASE_PREFLIGHT;
        err->action_index = (long)pc;
    }
    return FHR_E_INFEASIBLE;
}

/* A decision that is not feasible: 2 when the model's oldest body is waited for (the
 * time objective; *t_issue moves to its end), 1 when a real body or every stream was
 * waited for (protection the model does not have), 0 when waiting cannot help. */
static int infeasible_wait(rplan_vm *vm, const fhr_decision *d, int tobj, int attempt,
                           double *t_issue)
{
    if (tobj && vm->nmflight) {
        /* the model's oldest body frees what it reads: wait for it and decide again (the
         * first to end, as bodies run in issue order) */
        double end = model_oldest_end(vm);
        *t_issue = end > *t_issue ? end : *t_issue;
        return 2;
    }
    if (vm->explain || !waiting_helps(d) || attempt >= 64)
        return 0;
    /* real protection the model does not have (work outside the VM's records): wait for
     * the oldest body in flight; with none, once for every stream, then decide again on
     * the same view */
    int waited = inflight_wait_oldest(vm, RPLAN_WAIT_ROOM);
    if (!waited && attempt == 0) {
        uint64_t t0 = vm_now_ns(vm);
        vm_sync_all(vm, NULL);
        vm_host_waited(vm, RPLAN_WAIT_ROOM, t0);
        waited = 1;
    }
    return waited;
}

/* After the decision's plan ran (st, its error in e2): a failure named at the statement
 * it came from (a body's run, else the requirement it names, else the request); a success
 * committed to the model's timeline, with a record of the bodies in flight per location. */
static fhr_status request_done(rplan_vm *vm, size_t pc, const req_parts *q, fhr_status st,
                               fhr_error *e2, uint64_t before, double t_issue, fhr_error *err)
{
    const rplan_instr *rin = &vm->ins[pc];
    if (st) {
        long ipc = (long)pc;
        if (e2->phase == FHR_PHASE_BODY)
            ipc = e2->action_index;
        for (size_t i = 0; e2->phase != FHR_PHASE_BODY && i < q->nrq; i++)
            if (fhr_handle_equal(q->rq[i].handle, e2->handle) &&
                (e2->loc.kind == FHR_LOC_INVALID || fhr_loc_equal(q->rq[i].at, e2->loc)))
                ipc = (long)q->rq_pc[i];
        if (err) {
            fhr_error_clear(err);
            *err = *e2;
            err->action_index = ipc;
        } else {
            fhr_error_clear(e2);
        }
        return st;
    }
    double model = 0, mend = 0;
    for (size_t k = 0; k < q->nruns; k++)
        model += vm_model_body(vm, &q->runs[k]);
    vm_model_advance(vm, t_issue);
    /* the model's timeline at full size: scaling is exact (create.c) */
    st = vm_model_commit(vm, t_issue, (link_bytes(&vm->total) - before) * vm->o.scale, model,
                         q->rq, q->nrq, q->nruns > 0, &mend, err);
    /* one record per location the bodies ran at, each with every copy */
    for (size_t k = 0; st == FHR_OK && k < q->nruns; k++) {
        size_t k2 = 0;
        while (k2 < k && !fhr_loc_equal(q->at[k2], q->at[k]))
            k2++;
        if (k2 == k) {
            char who[96];
            snprintf(who, sizeof who, "request '%.80s'", rin->str);
            st = vm_inflight_push(vm, who, q->at[k], q->rq, q->nrq, model, mend, err);
            if (st && err)
                err->action_index = (long)pc;
        }
    }
    if (st == FHR_OK)
        st = buffer_remember(vm, q, err);
    return st;
}

fhr_status vm_exec_request(rplan_vm *vm, size_t pc, size_t end, fhr_error *err)
{
    const rplan_instr *rin = &vm->ins[pc];
    uint64_t position = ++vm->req_pos;
    req_parts q;
    fhr_status st = parts_decode(vm, pc, end, &q, err);
    if (st) {
        parts_free(&q);
        return st;
    }
    if (rin->policy >= vm->npols) {
        parts_free(&q);
        return fhr_fail(err, FHR_E_INVALID, "request '%.60s': no policy %u", rin->str, rin->policy);
    }
    rplan_stage_report *r;
    for (size_t k = 0; k <= vm->depth; k++) {
        r = k < vm->depth ? &vm->stages[vm->stack[k]] : &vm->total;
        r->requests++;
    }
    fhr_request req = {rin->str, q.rq, q.nrq, q.res, q.nres, position};
    vm->ready_after = 0;
    if (!vm->explain)
        inflight_bound(vm, q.rq, q.nrq);
    int tobj = vm_objective_time(vm, rin->policy);
    double t_issue = vm_model_issue(vm);
    fhr_hold **holds = NULL;
    size_t nholds = 0;
    int buffered = buffers(vm, tobj);
    for (int attempt = 0;; attempt++) {
        vm_model_unhold(holds, nholds);
        holds = NULL;
        nholds = 0;
        fhr_requirement *settled = NULL;
        size_t nsettled = 0;
        if (tobj)
            vm_model_advance(vm, t_issue);
        if (!vm->explain) {
            /* One schedule (fheplan(1)): the run decides on check's view, as if every
             * body in flight had ended, whatever the objective; it waits below only when
             * the decision evicts a copy a body still reads */
            inflight_reap(vm);
            for (size_t i; (i = grown_inflight(vm, &q)) != 0;)
                inflight_wait_at(vm, i - 1, tobj ? RPLAN_WAIT_SETTLED : RPLAN_WAIT_REGRET);
            if ((st = settled_copies(vm, q.rq, q.nrq, tobj, &settled, &nsettled, err)) != FHR_OK)
                break;
        }
        if ((tobj && (st = vm_model_hold(vm, q.rq, q.nrq, &holds, &nholds, err)) != FHR_OK) ||
            (buffered && (st = buffer_hold(vm, q.rq, q.nrq, &holds, &nholds, err)) != FHR_OK)) {
            free(settled);
            break;
        }
        fhr_decision *d = NULL;
        st = fhr_decide_settled(vm->ctls[rin->policy], &req, settled, nsettled, &d, err);
        free(settled);
        if (st == FHR_E_STALE && attempt < 8)
            continue;
        if (st)
            break;
        /* room made by dropping a copy the request grows (the policy's last resort) */
        int last_resort = fhr_decision_feasible(d) && drops_required(d, &q);
        if (buffered && (last_resort || (!fhr_decision_feasible(d) &&
                                         (vm->explain || !waiting_helps(d))))) {
            /* no room beside the previous request's copies in check's view (real
             * protection is waited for below first): MIN's decision */
            buffered = 0;
            fhr_decision_destroy(d);
            attempt--;
            continue;
        }
        if (nsettled && attempt < 64 && settled_evicted(vm, d)) {
            /* the decision evicts a copy a real body still reads: wait for the newest
             * body that reads one, then decide again on the same view */
            for (size_t i; (i = settled_evicted(vm, d)) != 0;)
                inflight_wait_at(vm, i - 1, tobj ? RPLAN_WAIT_SETTLED : RPLAN_WAIT_REGRET);
            fhr_decision_destroy(d);
            continue;
        }
        if (!fhr_decision_feasible(d) || (last_resort && tobj && vm->nmflight)) {
            /* a last resort waits, under the time objective, for the model's bodies */
            int again = infeasible_wait(vm, d, tobj, attempt, &t_issue);
            if (again == 2)
                attempt--; /* not a retry: each model wait finishes a modelled body */
            if (!again)
                st = infeasible(rin, d, pc, err);
            fhr_decision_destroy(d);
            if (again)
                continue;
            break;
        }
        if (tobj) {
            double until = time_regret(vm, d, &q, position, t_issue);
            if (until > t_issue) {
                fhr_decision_destroy(d);
                t_issue = until;
                attempt--; /* as above: the held copy's bodies are finished at `until` */
                continue;
            }
        }
        if (!tobj)
            t_issue = victims_free(vm, d, t_issue);
        victims_read(vm, d);
        fhr_stream_map xs[FHR_LOC_SLOTS];
        const fhr_plan *plan = fhr_decision_plan(d);
        size_t nxs = transfer_map(vm, plan, xs);
        uint64_t version = fhr_decision_state_version(d);
        fhr_error e2;
        fhr_error_init(&e2);
        uint64_t before = link_bytes(&vm->total);
        st = vm_exec_scope_plan(vm, plan, xs, nxs, 1, version, q.runs, q.nruns, q.at, 1, NULL,
                                &e2);
        fhr_decision_destroy(d);
        if ((st == FHR_E_STALE && attempt < 8) ||
            (st == FHR_E_INFEASIBLE && e2.cause == FHR_E_PROTECTED && !vm->explain &&
             attempt < 64 && inflight_wait_oldest(vm, RPLAN_WAIT_ROOM))) {
            fhr_error_clear(&e2);
            continue;
        }
        st = request_done(vm, pc, &q, st, &e2, before, t_issue, err);
        break;
    }
    vm_model_unhold(holds, nholds);
    parts_free(&q);
    return st;
}
