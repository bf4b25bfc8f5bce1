/* runtime/vm/scope.c — one plan run as a scope (enter, body, exit) for PLAN and REQUEST alike:
 * transfer windows on the trace, the report accounted, body and exit failures merged. */
#include "runtime/vm/internal.h"

#include <stdio.h>

fhr_status vm_exec_scope_plan(rplan_vm *vm, const fhr_plan *plan, const fhr_stream_map *xs, size_t nxs,
                              int has_version, uint64_t version, const vm_run *runs,
                              size_t nruns, fhr_location *at, int request,
                              fhr_report **rep_out, fhr_error *err)
{
    (void)rep_out;
    fhr_scope *sc = NULL;
    fhr_status st = fhr_scope_create(vm->m, plan, xs, nxs, &sc, err);
    if (st)
        return st;
    if (has_version)
        fhr_scope_expect_version(sc, version);
    uint64_t t0 = vm_now_ns();
    vm_mark *mk[FHR_LOC_SLOTS] = {0};
    /* Transfer windows are for the trace only: a host function on a transfer stream
     * stalls it for tens of microseconds, which a run without --trace need not pay. */
    if (!vm->explain && vm->o.trace)
        for (size_t i = 0; i < nxs; i++) {
            char nm[96];
            snprintf(nm, sizeof nm, "%.80s: transfers", fhr_plan_name(plan));
            mk[i] = vm_new_mark(vm, 1, vm->b->ops->stream_id(vm->b, xs[i].stream), nm);
            if (mk[i])
                vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_begin, mk[i], NULL);
        }
    st = fhr_scope_enter(sc, err);
    if (!vm->explain)
        for (size_t i = 0; i < nxs; i++)
            if (mk[i])
                vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_end, mk[i], NULL);
    if (st) {
        if (err && err->partial_report)
            vm_account_report(vm, err->partial_report, request);
        fhr_scope_destroy(sc);
        return st;
    }
    vm_sample_peaks(vm);
    /* bodies not placed by an enter action run where the enter phase left their values */
    for (size_t k = 0; k < nruns; k++)
        if (at[k].kind == FHR_LOC_INVALID)
            at[k] = vm->explain ? fhr_loc_host() : vm_body_location(vm, &runs[k]);
    fhr_error berr;
    fhr_error_init(&berr);
    fhr_status bst = vm_run_body(vm, runs, nruns, at, request, &berr);
    if (!vm->explain && fhr_plan_nactions(plan, FHR_PHASE_EXIT) > 0) {
        /* exit actions may move what the body reads: wait for the body first */
        for (size_t k = 0; k < nruns; k++) {
            int slot = fhr_loc_slot(at[k]);
            if (slot >= 0 && vm->compute[slot])
                vm->b->ops->stream_sync(vm->b, vm->compute[slot], NULL);
        }
        fhr_reap(vm->m, NULL, NULL);
    }
    fhr_error xerr;
    fhr_error_init(&xerr);
    st = fhr_scope_exit(sc, bst, &xerr);
    const fhr_report *rep = fhr_scope_report(sc);
    const fhr_error *kept = fhr_scope_exit_error(sc); /* also when the body's error is primary */
    if (rep)
        vm_account_report(vm, rep, request);
    else if (kept && kept->partial_report)
        vm_account_report(vm, kept->partial_report, request);
    vm_add_slice(vm, t0, vm_now_ns(), 0, request ? "request" : "plan", fhr_plan_name(plan));
    if (bst) {
        if (err) {
            fhr_error_clear(err);
            *err = berr;
            err->phase = FHR_PHASE_BODY;
        } else {
            fhr_error_clear(&berr);
        }
        fhr_error_clear(&xerr);
        st = bst;
    } else if (st) {
        if (err) {
            fhr_error_clear(err);
            *err = xerr;
        } else {
            fhr_error_clear(&xerr);
        }
    } else {
        fhr_error_clear(&xerr);
    }
    vm_sample_peaks(vm);
    fhr_scope_destroy(sc);
    return st;
}
