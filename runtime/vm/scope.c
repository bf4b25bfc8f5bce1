/* runtime/vm/scope.c — one plan run as a scope (enter, body, exit) for PLAN and REQUEST alike:
 * transfer windows on the trace, the report accounted, body and exit failures merged. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>

/* A transfer window's event (or host function) that failed: the error names the plan and
 * the device. */
static fhr_status window_fail(const fhr_plan *plan, int request, fhr_location loc,
                              const char *what, fhr_status st, fhr_error *err)
{
    if (st == FHR_OK)
        return FHR_OK;
    char lb[16], msg[400];
    snprintf(msg, sizeof msg, "%.380s", err && err->message[0] ? err->message : fhr_status_name(st));
    return fhr_fail(err, st, "%s '%.80s': the transfer window onto %s cannot %s: %.280s",
                    request ? "request" : "plan", fhr_plan_name(plan),
                    fhr_loc_format(loc, lb, sizeof lb), what, msg);
}

/* A request's failure is named as one: the manager's scope words it "plan 'NAME'". */
static fhr_status as_request(int request, fhr_status st, fhr_error *err)
{
    static const char was[] = "plan '", now[] = "request '";
    if (st && request && err && strncmp(err->message, was, sizeof was - 1) == 0) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s%s", now, err->message + sizeof was - 1);
        memcpy(err->message, msg, sizeof msg);
    }
    return st;
}

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
    vm_range_push(vm, request ? "request" : "plan", fhr_plan_name(plan));
    uint64_t t0 = vm_now_ns(vm);
    vm_mark *mk[FHR_LOC_SLOTS] = {0};
    int timed[FHR_LOC_SLOTS] = {0};
    /* Transfer windows (link.c): two timed events on each device's transfer stream, or,
     * for --trace on a device without a timing reference, host functions (a host function
     * stalls the stream for tens of microseconds, which a run without --trace need not
     * pay). The window's room is free once the bodies the request waited behind end. */
    st = FHR_OK;
    for (size_t i = 0; i < nxs && !vm->explain && st == FHR_OK; i++) {
        int sl = fhr_loc_slot(xs[i].loc);
        if (!vm->o.trace && !(xs[i].loc.kind == FHR_LOC_CUDA && sl >= 0 && vm->tref[sl]))
            continue; /* no timing reference and no trace: no window */
        char nm[96];
        snprintf(nm, sizeof nm, "%.80s: transfers", fhr_plan_name(plan));
        if (!(mk[i] = vm_new_mark(vm, 1, vm->b->ops->stream_id(vm->b, xs[i].stream), nm))) {
            st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            break;
        }
        mk[i]->slot = sl;
        mk[i]->after = request ? vm->ready_after : 0;
        st = window_fail(plan, request, xs[i].loc, "begin",
                         vm_mark_timed(vm, mk[i], xs[i].loc, xs[i].stream, &timed[i], err), err);
        if (st == FHR_OK && !timed[i])
            st = window_fail(plan, request, xs[i].loc, "begin",
                             vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_begin, mk[i], err),
                             err);
    }
    if (st) {
        fhr_scope_destroy(sc);
        vm_range_pop(vm);
        return as_request(request, st, err);
    }
    vm_range_push(vm, "copies", fhr_plan_name(plan)); /* the enter phase issues them */
    st = fhr_scope_enter(sc, err);
    vm_range_pop(vm);
    /* a window that cannot end fails the request like its body would */
    fhr_status wst = FHR_OK;
    fhr_error werr;
    fhr_error_init(&werr);
    for (size_t i = 0; i < nxs && !vm->explain && st == FHR_OK && wst == FHR_OK; i++)
        if (mk[i])
            wst = window_fail(plan, request, xs[i].loc, "end",
                              timed[i] ? vm->b->ops->event_record(vm->b, mk[i]->ev1, xs[i].stream,
                                                                  &werr)
                                       : vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_end,
                                                                 mk[i], &werr),
                              &werr);
    vm->cur_win = mk; /* the windows that carried this scope's copies (stage.c) */
    vm->ncur_win = nxs < FHR_LOC_SLOTS ? nxs : FHR_LOC_SLOTS;
    if (st) {
        if (err && err->partial_report)
            vm_account_report(vm, err->partial_report, request);
        vm->cur_win = NULL;
        fhr_scope_destroy(sc);
        vm_range_pop(vm);
        return as_request(request, st, err);
    }
    vm_sample_peaks(vm);
    /* bodies not placed by an enter action run where the enter phase left their values */
    for (size_t k = 0; k < nruns; k++)
        if (at[k].kind == FHR_LOC_INVALID)
            at[k] = vm_body_location(vm, &runs[k]); /* check's choice too */
    fhr_error berr;
    fhr_error_init(&berr);
    fhr_status bst = wst;
    if (wst)
        berr = werr;
    else
        bst = vm_run_body(vm, runs, nruns, at, request, &berr);
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
    vm->cur_win = NULL;
    vm_add_slice(vm, t0, vm_now_ns(vm), 0, request ? "request" : "plan", fhr_plan_name(plan));
    if (bst) {
        if (err) {
            fhr_error_clear(err);
            *err = berr;
            /* a window that could not end: at the plan or request, in its enter phase */
            err->phase = wst ? FHR_PHASE_ENTER : FHR_PHASE_BODY;
            if (wst)
                err->action_index = -1;
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
    vm_range_pop(vm);
    return as_request(request, st, err);
}
