/* runtime/vm/vm.c — the interpreter: rplan_vm_run walks the verified instructions (stages,
 * top-level primitives, holds, PLAN scopes; REQUEST goes to request.c) and fills the report. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The statement class of every opcode, from compiler/opcodes.def. */
static const enum vm_opclass op_class[RPLAN_OP_COUNT_] = {
#define OP(id, text, x, y, a, b, ctx, rule) [RPLAN_OP_##id] = VM_CLASS_##ctx,
#include "runtime/program/opcodes.def"
#undef OP
};

/* ---- scopes ------------------------------------------------------------------------ */

/* Explicit control removes copies that bodies may still read (an ensure of a limb-cut
 * value may grow a partial copy, which replaces it): wait for the compute streams and
 * reap their consumer events first (the application's choice; the manager itself never
 * waits). */
static void wait_consumers(rplan_vm *vm, const fhr_action *acts, size_t n)
{
    int removes = 0;
    for (size_t i = 0; i < n; i++) {
        long v = acts[i].kind == FHR_ACT_ENSURE ? vm_value_index(vm, acts[i].handle) : -1;
        removes |= acts[i].kind != FHR_ACT_ENSURE || (v >= 0 && vm->vinfo[v].limb_q);
    }
    if (!removes || vm->explain)
        return;
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        if (vm->compute[s])
            vm->b->ops->stream_sync(vm->b, vm->compute[s], NULL);
    fhr_reap(vm->m, NULL, NULL);
}

static fhr_action to_action(const rplan_vm *vm, const rplan_instr *in)
{
    fhr_action a;
    memset(&a, 0, sizeof a);
    a.handle = vm->h[in->value];
    a.at = in->loc;
    switch (in->op) {
    case RPLAN_OP_ENSURE:
        a.kind = FHR_ACT_ENSURE;
        a.limbs = in->limbs;
        break;
    case RPLAN_OP_MOVE:
        a.kind = FHR_ACT_MOVE;
        a.has_from = in->has_from;
        a.from = in->from;
        break;
    case RPLAN_OP_DROP:
        a.kind = FHR_ACT_DROP;
        a.limbs = in->limbs; /* a drop of parts: the parts a use of that many reads stay */
        break;
    default: a.kind = FHR_ACT_DISCARD; break;
    }
    return a;
}

/* Transfer streams of the VM for every CUDA destination of the actions. */
static size_t xfer_map(rplan_vm *vm, const fhr_action *acts, size_t n, fhr_stream_map *map)
{
    size_t k = 0;
    if (vm->explain)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (acts[i].at.kind != FHR_LOC_CUDA ||
            (acts[i].kind != FHR_ACT_ENSURE && acts[i].kind != FHR_ACT_MOVE))
            continue;
        size_t j = 0;
        while (j < k && !fhr_loc_equal(map[j].loc, acts[i].at))
            j++;
        if (j < k)
            continue;
        fhr_stream *s = vm_xfer_stream(vm, acts[i].at, NULL);
        if (s) {
            map[k].loc = acts[i].at;
            map[k].stream = s;
            k++;
        }
    }
    return k;
}

static size_t scope_end(const rplan_vm *vm, size_t pc)
{
    size_t e = pc + 1;
    while (e < vm->ninstr && vm->ins[e].op != RPLAN_OP_END)
        e++;
    return e;
}

/* PLAN pc..END: a scope with reclaim/enter/exit actions, reservations and a body. */
static fhr_status exec_plan(rplan_vm *vm, size_t pc, size_t end, long *fail_pc, fhr_error *err)
{
    size_t n = end - pc;
    fhr_action *acts = calloc(n + 1, sizeof *acts);
    size_t *apc = calloc(n + 1, sizeof *apc);
    fhr_reservation *res = calloc(n + 1, sizeof *res);
    size_t *rpc = calloc(n + 1, sizeof *rpc);
    fhr_location *at = NULL;
    vm_run *runs = NULL;
    size_t nruns = 0, nact[3] = {0, 0, 0}, nres = 0;
    fhr_status st = FHR_OK;
    if (!acts || !apc || !res || !rpc) {
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    /* gather in phase order: reclaim [0], enter [1], exit [2] — kept apart in acts */
    fhr_action *lists[3] = {acts, NULL, NULL};
    size_t *lpc[3] = {apc, NULL, NULL};
    int phase = 0;
    size_t count[3] = {0, 0, 0};
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_PHASE)
            phase = in->phase == FHR_PHASE_RECLAIM ? 0 : in->phase == FHR_PHASE_ENTER ? 1
                    : in->phase == FHR_PHASE_EXIT  ? 2 : 3;
        else if (in->op >= RPLAN_OP_ENSURE && in->op <= RPLAN_OP_DISCARD && phase < 3)
            count[phase]++;
    }
    lists[1] = acts + count[0];
    lists[2] = lists[1] + count[1];
    lpc[1] = apc + count[0];
    lpc[2] = lpc[1] + count[1];
    phase = 0;
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_PHASE)
            phase = in->phase == FHR_PHASE_RECLAIM ? 0 : in->phase == FHR_PHASE_ENTER ? 1
                    : in->phase == FHR_PHASE_EXIT  ? 2 : 3;
        else if (in->op >= RPLAN_OP_ENSURE && in->op <= RPLAN_OP_DISCARD && phase < 3) {
            lpc[phase][nact[phase]] = i;
            lists[phase][nact[phase]++] = to_action(vm, in);
        } else if (in->op == RPLAN_OP_RESERVE) {
            rpc[nres] = i;
            res[nres].at = in->loc;
            res[nres].nbytes = in->imm;
            res[nres].label = in->str;
            nres++;
        }
    }
    if ((st = vm_decode_runs(vm, pc, end, &runs, &nruns, err)) != FHR_OK)
        goto done;
    fhr_plan_desc d = {vm->ins[pc].str, lists[0], nact[0], lists[1], nact[1], lists[2], nact[2],
                       res, nres};
    fhr_plan *plan = NULL;
    if ((st = fhr_plan_create(&d, &plan, err)) != FHR_OK) {
        *fail_pc = (long)pc;
        goto done;
    }
    fhr_stream_map xs[FHR_LOC_SLOTS];
    size_t nxs = xfer_map(vm, acts, nact[0] + nact[1] + nact[2], xs);
    /* bodies read values where the enter phase leaves them: decided after entry */
    at = calloc(nruns + 1, sizeof *at);
    if (!at) {
        fhr_plan_destroy(plan);
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    /* a value the enter phase brings to a device (ensure or move) is read there; the
     * rest is decided from the state the enter phase leaves (vm_body_location) — the
     * rule the verifier proves (rplan(5), "Bodies") */
    for (size_t k = 0; k < nruns; k++) {
        fhr_location best = {FHR_LOC_INVALID, 0};
        for (size_t a = 0; a < nact[1] && best.kind == FHR_LOC_INVALID; a++) {
            if (lists[1][a].kind != FHR_ACT_ENSURE && lists[1][a].kind != FHR_ACT_MOVE)
                continue;
            for (size_t v = 0; v < runs[k].nvals; v++)
                if (fhr_handle_equal(lists[1][a].handle, vm->h[runs[k].vals[v]]) &&
                    lists[1][a].at.kind == FHR_LOC_CUDA)
                    best = lists[1][a].at;
        }
        at[k] = best;
    }
    st = FHR_OK;
    FOR_OPEN_RECORDS(vm, r)
    r->plans++;
    wait_consumers(vm, acts, nact[0] + nact[1] + nact[2]);
    fhr_error e2;
    fhr_error_init(&e2);
    st = vm_exec_scope_plan(vm, plan, xs, nxs, 0, 0, runs, nruns, at, 0, NULL, &e2);
    for (size_t k = 0; st == FHR_OK && !vm->explain && k < nruns; k++) {
        /* the plan's bodies in flight: later decisions treat them as ended (request.c) */
        fhr_requirement rq[16];
        for (size_t v = 0; v < runs[k].nvals; v++)
            rq[v] = (fhr_requirement){vm->h[runs[k].vals[v]], at[k], 0};
        char who[96];
        snprintf(who, sizeof who, "run %.80s", runs[k].in->str);
        if (runs[k].nvals &&
            (st = vm_inflight_push(vm, who, at[k], rq, runs[k].nvals, 0, 0, &e2)) != FHR_OK)
            e2.phase = FHR_PHASE_BODY, e2.action_index = (long)runs[k].pc;
    }
    if (st) {
        if (e2.phase == FHR_PHASE_BODY)
            *fail_pc = e2.action_index;
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_RECLAIM &&
                 (size_t)e2.action_index < nact[0])
            *fail_pc = (long)lpc[0][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_ENTER &&
                 (size_t)e2.action_index < nact[1])
            *fail_pc = (long)lpc[1][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_EXIT &&
                 (size_t)e2.action_index < nact[2])
            *fail_pc = (long)lpc[2][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_RESERVE &&
                 (size_t)e2.action_index < nres)
            *fail_pc = (long)rpc[e2.action_index];
        else
            *fail_pc = (long)pc;
        if (err) {
            fhr_error_clear(err);
            *err = e2;
        } else {
            fhr_error_clear(&e2);
        }
    }
    fhr_plan_destroy(plan);
done:
    free(at);
    free(runs);
    free(acts);
    free(apc);
    free(res);
    free(rpc);
    return st;
}

static fhr_status exec_action(rplan_vm *vm, size_t pc, fhr_error *err)
{
    fhr_action a = to_action(vm, &vm->ins[pc]);
    fhr_stream_map xs[1];
    size_t nxs = xfer_map(vm, &a, 1, xs);
    fhr_report *rep = NULL;
    wait_consumers(vm, &a, 1);
    uint64_t t0 = vm_now_ns(vm);
    fhr_status st = fhr_execute_actions(vm->m, &a, 1, xs, nxs, &rep, err);
    if (rep) {
        vm_account_report(vm, rep, 0);
        fhr_report_free(rep);
    } else if (st && err && err->partial_report) {
        vm_account_report(vm, err->partial_report, 0);
    }
    char nm[96];
    snprintf(nm, sizeof nm, "%s %.60s", vm->ins[pc].opname, vm->vinfo[vm->ins[pc].value].name);
    vm_add_slice(vm, t0, vm_now_ns(vm), 0, "action", nm);
    vm_sample_peaks(vm);
    return st;
}

static fhr_status exec_hold(rplan_vm *vm, size_t pc, fhr_error *err)
{
    const rplan_instr *in = &vm->ins[pc];
    if (in->op == RPLAN_OP_HOLD) {
        if (vm->nholds == vm->capholds) {
            size_t cap = vm->capholds ? vm->capholds * 2 : 8;
            struct vm_hold *n = realloc(vm->holds, cap * sizeof *n);
            if (!n)
                return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            vm->holds = n;
            vm->capholds = cap;
        }
        fhr_hold *hd = NULL;
        fhr_status st = fhr_hold_acquire(vm->m, &vm->h[in->value], 1, in->loc, &hd, err);
        if (st)
            return st;
        vm->holds[vm->nholds].v = in->value;
        vm->holds[vm->nholds].loc = in->loc;
        vm->holds[vm->nholds].hd = hd;
        vm->nholds++;
        return FHR_OK;
    }
    for (size_t i = vm->nholds; i-- > 0;)
        if (vm->holds[i].v == in->value && fhr_loc_equal(vm->holds[i].loc, in->loc)) {
            fhr_status st = fhr_hold_release(vm->holds[i].hd, err);
            fhr_hold_destroy(vm->holds[i].hd);
            vm->holds[i] = vm->holds[--vm->nholds];
            return st;
        }
    return fhr_fail(err, FHR_E_LEASE, "release of %s: no hold at that location",
                    vm->vinfo[in->value].name);
}

static void progress(rplan_vm *vm, const char *scope)
{
    vm->scopes_done++;
    if (!vm->o.progress)
        return;
    rplan_vm_progress pr = {vm->depth ? vm->stages[vm->stack[vm->depth - 1]].name : "", scope,
                            vm->scopes_done, vm->scopes_total, vm->bytes_moved,
                            (double)(vm_now_ns(vm) - vm->t_begin) / 1e9};
    vm->o.progress(vm->o.progress_ctx, &pr);
}

/* ---- run ------------------------------------------------------------------------- */

static void set_failure(rplan_vm *vm, rplan_vm_report *rep, fhr_status st, long pc,
                        const fhr_error *e, const char *scope)
{
    rep->ok = 0;
    rep->status = st;
    rep->instr = pc;
    rep->phase = e ? e->phase : FHR_PHASE_NONE;
    /* name the stage the failure happened in (none at top level) */
    const char *stage = vm->depth && !vm->top_open ? vm->stages[vm->stack[vm->depth - 1]].name
                                                   : "";
    snprintf(rep->message, sizeof rep->message, "%s%.100s%s%.500s", stage[0] ? "stage '" : "",
             stage, stage[0] ? "': " : "", e && e->message[0] ? e->message : fhr_status_name(st));
    snprintf(rep->scope, sizeof rep->scope, "%s", scope ? scope : "");
    if (pc >= 0 && (size_t)pc < vm->ninstr) {
        rep->line = vm->ins[pc].line;
        rep->col = vm->ins[pc].col;
    }
    if (e && e->partial_report)
        rep->partial_json = fhr_report_json(e->partial_report);
}

/* Objective auto: both objectives' modelled timelines by explain runs of the same program
 * and options on a model backend with the backend's devices; the objective becomes time
 * when it wins by more than RPLAN_AUTO_GAIN. Both are check's timelines, which a run
 * executes (one schedule). A program the explain runs cannot model (an engine's
 * generator, say) keeps bytes. Here, not in objective.c: it runs VMs. */
static void objective_auto(rplan_vm *vm)
{
    if (vm->o.objective != RPLAN_OBJECTIVE_AUTO)
        return;
    vm->o.objective = RPLAN_OBJECTIVE_BYTES;
    int ndev = vm->b->ops->device_count ? vm->b->ops->device_count(vm->b) : 1;
    double t[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        rplan_vm_opts o = vm->o;
        o.mode = RPLAN_VM_EXPLAIN;
        o.objective = k ? RPLAN_OBJECTIVE_TIME : RPLAN_OBJECTIVE_BYTES;
        o.unknown_as_touch = 1;
        o.trace = 0;
        o.progress = NULL;
        o.progress_ctx = NULL;
        o.interrupt = NULL;
        o.interrupt_ctx = NULL;
        fhr_backend *mb = NULL;
        rplan_vm *ev = NULL;
        rplan_vm_report *rep = NULL;
        if (fhr_backend_model_create(ndev > 0 ? ndev : 1, &mb, NULL) == FHR_OK &&
            rplan_vm_create(vm->p, mb, &o, &ev, NULL) == FHR_OK &&
            rplan_vm_run(ev, &rep, NULL) == FHR_OK && rep && rep->ok)
            t[k] = rep->timeline_s;
        rplan_vm_report_free(rep);
        rplan_vm_destroy(ev);
        if (mb)
            fhr_backend_destroy(mb);
    }
    vm->auto_s[0] = t[0];
    vm->auto_s[1] = t[1];
    if (t[0] > 0 && t[1] > 0 && t[1] < t[0] * (1 - RPLAN_AUTO_GAIN))
        vm->o.objective = RPLAN_OBJECTIVE_TIME;
}

/* A run's setup: the objective, the engine's check (once), the values and requests, the
 * link rates and the devices' timing references. A failure refuses the run (rep). */
static fhr_status run_setup(rplan_vm *vm, rplan_vm_report *rep, fhr_error *e)
{
    fhr_status st;
    vm->setup_value = -1;
    if (!vm->bad_budget[0])
        objective_auto(vm); /* before any decision: it sets the objective */
    /* the loaders' size probe and the adopted values' check: once, while they pass */
    st = vm->bad_budget[0] ? fhr_fail(e, FHR_E_LOCATION, "%s", vm->bad_budget)
         : vm->probed      ? FHR_OK
                           : vm_engine_check(vm, &vm->setup_value, e);
    vm->probed = st == FHR_OK;
    if (st == FHR_OK)
        st = vm_setup_values(vm, e);
    if (st == FHR_OK)
        st = vm_requests_setup(vm, e);
    if (st) {
        set_failure(vm, rep, st, -1, e, NULL);
        rep->refused = 1;
        if (vm->bad_budget[0]) {
            rep->line = vm->bad_budget_line; /* at the budget's declaration */
            rep->col = vm->bad_budget_col;
        } else if (vm->setup_value >= 0 && (size_t)vm->setup_value < vm->nvals) {
            /* a value that cannot be set up: at its declaration */
            rep->line = vm->vinfo[vm->setup_value].line;
            rep->col = vm->vinfo[vm->setup_value].col;
        }
    } else {
        if (vm->pinned_kept <= 0) /* measured (or configured) once: the report's */
            vm->pinned_kept = vm_pinned_bandwidth(vm);
        rep->pinned_gbps = vm->pinned_gbps = vm->pinned_kept;
        /* the manager chooses sources by the declared rates, in check and in a run alike:
         * a rate measured during the run would make the schedule depend on the machine */
        fhr_link_rates lr = {vm_profile_gbps(vm), 0, vm_peer_rate(vm), vm_gen_rate(vm)};
        st = fhr_manager_set_links(vm->m, &lr, e);
        if (st) {
            set_failure(vm, rep, st, -1, e, NULL);
            rep->refused = 1;
        }
        if (!vm->explain && st == FHR_OK) {
            /* the timing reference of each device (its event record can fail) */
            if ((st = vm_warm_up(vm, e)) != FHR_OK) {
                set_failure(vm, rep, st, -1, e, NULL);
                rep->refused = 1; /* nothing of the plan ran: no report to print */
            }
            vm_sync_all(vm, NULL);
        }
        vm->t_begin = vm_now_ns(vm);
    }
    return st;
}

/* The interpreter: every instruction in order until one fails (rep says where). */
static void run_dispatch(rplan_vm *vm, rplan_vm_report *rep, fhr_status st, fhr_error *e)
{
    long fail_pc = -1;
    const char *fail_scope = NULL;
    for (size_t pc = 0; pc < vm->ninstr && st == FHR_OK; pc++) {
        const rplan_instr *in = &vm->ins[pc];
        if (vm->o.interrupt && vm->o.interrupt(vm->o.interrupt_ctx)) {
            st = fhr_fail(e, FHR_E_PLAN, "interrupted");
            fail_pc = (long)pc;
        } else if (in->op < 0 || in->op >= RPLAN_OP_COUNT_) {
            st = fhr_fail(e, FHR_E_INVALID, "unknown opcode %d", in->op);
            fail_pc = (long)pc;
        } else if (op_class[in->op] == VM_CLASS_ACTION) {
            if ((st = vm_ensure_record(vm)) == FHR_OK)
                st = exec_action(vm, pc, e);
            fail_pc = (long)pc;
        } else switch (in->op) {
        case RPLAN_OP_STAGE:
            if (vm->top_open)
                vm_stage_close(vm);
            st = vm_stage_open(vm, in->str, 0);
            if (st)
                fhr_fail(e, st, "stages nested too deeply");
            break;
        case RPLAN_OP_ENDSTAGE:
            if (vm->top_open)
                vm_stage_close(vm);
            vm_stage_close(vm);
            break;
        case RPLAN_OP_PLAN:
        case RPLAN_OP_REQUEST: {
            size_t end = scope_end(vm, pc);
            if ((st = vm_ensure_record(vm)) != FHR_OK)
                break;
            if (in->op == RPLAN_OP_PLAN) {
                st = exec_plan(vm, pc, end, &fail_pc, e);
            } else {
                st = vm_exec_request(vm, pc, end, e);
                if (st)
                    fail_pc = e->action_index >= (long)pc && e->action_index < (long)end
                                  ? e->action_index
                                  : (long)pc;
            }
            if (st)
                fail_scope = in->str;
            else
                progress(vm, in->str);
            pc = end;
            break;
        }
        case RPLAN_OP_HOLD:
        case RPLAN_OP_RELEASE:
            st = exec_hold(vm, pc, e);
            fail_pc = (long)pc;
            break;
        default:
            break;
        }
        if (st && rep->ok)
            set_failure(vm, rep, st, fail_pc, e, fail_scope);
    }
}

/* After the last instruction: stages closed, devices synchronised, the times, peaks,
 * link and wait figures into rep, and an integrity failure made the run's. */
static void run_finish(rplan_vm *vm, rplan_vm_report *rep)
{
    while (vm->depth)
        vm_stage_close(vm);
    if (!vm->explain)
        vm_sync_all(vm, NULL);
    vm_marks_time(vm);
    vm_link_resolve(vm, rep);
    vm_stage_resolve(vm);
    /* body times from the markers (streams are synchronised) */
    for (size_t i = 0; i < vm->nmarks; i++) {
        vm_mark *mk = vm->marks[i];
        if (!mk->t1 || mk->t1 < mk->t0)
            continue;
        if (mk->kind == 0) {
            double dt = (double)(mk->t1 - mk->t0) / 1e9;
            for (size_t k = 0; k < mk->nstages; k++)
                if ((size_t)mk->stages[k] < vm->nstages)
                    vm->stages[mk->stages[k]].body_s += dt;
            vm->total.body_s += dt;
        }
    }
    if (!vm->explain)
        vm_profile_build(vm, rep);
    vm->total.time_s = vm->t_begin ? (double)(vm_now_ns(vm) - vm->t_begin) / 1e9 : 0;
    vm->total.end_s = vm->total.time_s; /* the run: from its start to its end */
    vm->total.checks = vm->checks_total;
    if (!vm->explain)
        vm->total.check_failures = vm_read_failures(vm);
    vm_sample_peaks(vm);
    rep->total = vm->total;
    rep->nstages = vm->nstages;
    if (vm->nstages) {
        rep->stages = malloc(vm->nstages * sizeof *rep->stages);
        if (rep->stages)
            memcpy(rep->stages, vm->stages, vm->nstages * sizeof *rep->stages);
        else
            rep->nstages = 0;
    }
    const rplan_stage_report *t = &rep->total;
    uint64_t pcie = t->bytes[FHR_DIR_H2D] + t->bytes[FHR_DIR_D2H] + t->load_h2d_bytes;
    rep->pcie_bytes = pcie;
    rep->peer_bytes = t->bytes[FHR_DIR_D2D];
    rep->peer_gbps = vm_peer_rate(vm);
    rep->pcie_s = rep->pinned_gbps > 0 ? (double)pcie / (rep->pinned_gbps * 1e9) : 0;
    rep->peer_s = (double)rep->peer_bytes / (rep->peer_gbps * 1e9);
    rep->transfer_s = rep->pcie_s > rep->peer_s ? rep->pcie_s : rep->peer_s;
    rep->gen_gbps = vm_gen_rate(vm);
    rep->regen_s = (double)t->regen_bytes / (rep->gen_gbps * 1e9);
    vm_figures_resolve(vm, rep); /* per device: the lower bound and the ratio */
    double busy = t->model_body_s + rep->regen_s;
    rep->predicted_s = busy > rep->transfer_s ? busy : rep->transfer_s;
    rep->timeline_s = vm->m_comp > vm->m_link ? vm->m_comp : vm->m_link;
    rep->objective = vm->o.objective;
    rep->auto_bytes_s = vm->auto_s[0];
    rep->auto_time_s = vm->auto_s[1];
    for (int w = 0; w < RPLAN_WAITS; w++) {
        rep->host_waits[w] = vm->waits[w];
        rep->host_wait_s[w] = (double)vm->wait_ns[w] * 1e-9;
    }
    rep->host_waits_drained = vm->drained;
    rep->host_wait_drained_s = (double)vm->drained_ns * 1e-9;
    rep->timeline_idle_s = vm->m_idle;
    if (rep->ok && t->check_failures) {
        rep->ok = 0;
        rep->status = FHR_E_BACKEND;
        snprintf(rep->message, sizeof rep->message,
                 "integrity: %llu of %llu verified values differ from their synthetic content",
                 (unsigned long long)t->check_failures, (unsigned long long)t->checks);
    }
}

fhr_status rplan_vm_run(rplan_vm *vm, rplan_vm_report **report, fhr_error *err)
{
    if (!vm || !report)
        return fhr_fail(err, FHR_E_INVALID, "vm: NULL vm or report pointer");
    *report = NULL;
    fhr_status st;
    if (vm->ran && (st = vm_rerun_reset(vm, err)) != FHR_OK)
        return st; /* nothing ran: the VM is as the last run left it */
    vm->ran = 1;
    vm->nruns++;
    rplan_vm_report *rep = calloc(1, sizeof *rep);
    if (!rep)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    rep->ok = 1;
    rep->instr = -1;
    rep->explain = vm->explain;
    rep->scale = vm->o.scale;
    snprintf(rep->device, sizeof rep->device, "%s", vm->device);
    snprintf(vm->total.name, sizeof vm->total.name, "total");
    fhr_error e;
    fhr_error_init(&e);
    st = run_setup(vm, rep, &e);
    run_dispatch(vm, rep, st, &e);
    fhr_error_clear(&e);
    run_finish(vm, rep);
    *report = rep;
    if (!rep->ok)
        fhr_fail(err, rep->status, "%s", rep->message);
    return rep->ok ? FHR_OK : rep->status;
}
