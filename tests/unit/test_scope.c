/* tests/unit/test_scope.c — scopes: the runtime order seen in the trace, reclaim
 * before reservations, single use, failed entry, body and exit both failing, nesting,
 * and runtime failures that keep the committed prefix with a partial report. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

static fhr_action A(fhr_action_kind k, fhr_handle h, fhr_location at)
{
    return (fhr_action){k, h, at, 0, {0, 0}, 0};
}

Test(scope, runtime_order_in_trace_and_report)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 1000};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle old = adopt_n(m, 600, 1, FHR_REPLICABLE);
    fhr_handle w = adopt_n(m, 400, 2, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, old, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_action reclaim[] = {A(FHR_ACT_DROP, old, fhr_loc_cuda(0))};
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0))};
    fhr_action exit_[] = {A(FHR_ACT_DROP, w, fhr_loc_cuda(0))};
    fhr_reservation res[] = {{fhr_loc_cuda(0), 600, "workspace"}};
    fhr_plan_desc d = {"tile", reclaim, 1, enter, 1, exit_, 1, res, 1};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc;
    uint64_t v = t_state_version(m);
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(t_state_version(m), v, "creating a scope touched the manager");
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_OK, "%s", e.message);
    cr_assert_null(fhr_scope_report(sc), "no report before exit");
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 600);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->remaining_budget_bytes, 0);
    fhr_snapshot_free(s);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_E_SCOPE, "single use");
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, &e), FHR_E_SCOPE);
    const fhr_report *r = fhr_scope_report(sc);
    cr_assert_not_null(r);
    cr_assert_str_eq(fhr_report_name(r), "tile");
    cr_assert_eq(fhr_report_ntransitions(r), 3);
    cr_assert_eq(fhr_report_transition(r, 0)->phase, FHR_PHASE_RECLAIM);
    cr_assert_eq(fhr_report_transition(r, 1)->phase, FHR_PHASE_ENTER);
    cr_assert_eq(fhr_report_transition(r, 2)->phase, FHR_PHASE_EXIT);
    cr_assert_eq(fhr_report_nreservation_events(r), 2);
    cr_assert_eq(fhr_report_reservation_event(r, 0)->admitted, 1);
    cr_assert_eq(fhr_report_reservation_event(r, 1)->admitted, 0);
    char *rj = fhr_report_json(r);
    cr_assert(strstr(rj, "\"label\":\"workspace\""), "%s", rj);
    free(rj);
    /* trace order: enter, drop (reclaim), reserve, ensure (enter), drop (exit), unreserve, exit */
    fhr_trace_entry t[32];
    size_t n = t_trace_read(m, t, 32);
    fhr_trace_kind want[] = {FHR_TR_SCOPE_ENTER, FHR_TR_DROP, FHR_TR_RESERVE, FHR_TR_ENSURE,
                             FHR_TR_DROP, FHR_TR_UNRESERVE, FHR_TR_SCOPE_EXIT};
    cr_assert_geq(n, 7);
    for (size_t i = 0; i < 7; i++)
        cr_assert_eq(t[n - 7 + i].kind, want[i], "trace entry %zu is %s", i,
                     fhr_trace_kind_name(t[n - 7 + i].kind));
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 0);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->peak_charged_bytes, 1000);
    fhr_snapshot_free(s);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(scope, failed_entry_consumes_and_close_is_a_noop)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {.n = 64, .seed = 1, .fail = 1};
    fhr_handle w = adopt_n(m, 64, 2, FHR_REPLICABLE);
    fhr_handle src = register_pat(m, &ps, FHR_REPLICABLE);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0)), A(FHR_ACT_ENSURE, src, fhr_loc_cuda(0))};
    fhr_action exit_[] = {A(FHR_ACT_DROP, w, fhr_loc_cuda(0))};
    fhr_reservation res[] = {{fhr_loc_cuda(0), 100, "ws"}};
    fhr_plan_desc d = {"fails", NULL, 0, enter, 2, exit_, 1, res, 1};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_E_PLAN);
    cr_assert_eq(e.cause, FHR_E_SOURCE);
    cr_assert_eq(e.phase, FHR_PHASE_ENTER);
    cr_assert_eq(e.action_index, 1);
    cr_assert(strstr(e.message, "enter action 1"), "%s", e.message);
    cr_assert_not_null(e.partial_report);
    cr_assert_eq(fhr_report_ntransitions(e.partial_report), 1, "the committed prefix");
    cr_assert(fhr_handle_equal(fhr_report_transition(e.partial_report, 0)->handle, w));
    cr_assert_eq(t_is_resident(m, w, fhr_loc_cuda(0)), 1, "no rollback");
    fhr_scope_close(sc); /* no-op: must not run the exit drop */
    cr_assert_eq(t_is_resident(m, w, fhr_loc_cuda(0)), 1);
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, NULL), FHR_E_SCOPE);
    cr_assert_eq(fhr_scope_enter(sc, NULL), FHR_E_SCOPE);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 0,
                 "a consumed scope keeps no headroom");
    fhr_snapshot_free(s);
    check_accounting(m);
    fhr_error_clear(&e);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(scope, body_and_exit_fail_body_stays_primary)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle w = adopt_n(m, 64, 2, FHR_REPLICABLE);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0))};
    fhr_action exit_[] = {A(FHR_ACT_DROP, w, fhr_loc_cuda(0)), A(FHR_ACT_DROP, w, fhr_loc_host())};
    fhr_plan_desc d = {"exitfail", NULL, 0, enter, 1, exit_, 2, NULL, 0};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    /* preflight sees the exit too: the last-copy drop is predictable */
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_E_INFEASIBLE);
    cr_assert_eq(e.phase, FHR_PHASE_EXIT);
    cr_assert_eq(e.action_index, 1);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(p);

    /* unpredictable: the body takes a hold on the copy the exit drops */
    fhr_action exit2[] = {A(FHR_ACT_DROP, w, fhr_loc_cuda(0))};
    fhr_plan_desc d2 = {"exitfail2", NULL, 0, enter, 1, exit2, 1, NULL, 0};
    cr_assert_eq(fhr_plan_create(&d2, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_OK, "%s", e.message);
    fhr_hold *hd;
    cr_assert_eq(fhr_hold_acquire(m, &w, 1, fhr_loc_cuda(0), &hd, NULL), FHR_OK);
    /* the body failed and says so in the caller's error */
    fhr_error xe;
    fhr_error_init(&xe);
    fhr_status body = xe.status = FHR_E_BACKEND;
    snprintf(xe.message, sizeof xe.message, "body: kernel launch failed");
    cr_assert_eq(fhr_scope_exit(sc, body, &xe), FHR_E_BACKEND, "the body's status stays primary");
    cr_assert_eq(xe.status, FHR_E_BACKEND, "the body's error was overwritten");
    cr_assert_str_eq(xe.message, "body: kernel launch failed");
    cr_assert_null(xe.partial_report);
    const fhr_error *kept = fhr_scope_exit_error(sc);
    cr_assert_not_null(kept);
    cr_assert_eq(kept->status, FHR_E_PLAN);
    cr_assert_eq(kept->cause, FHR_E_PROTECTED);
    cr_assert_eq(kept->phase, FHR_PHASE_EXIT);
    cr_assert_eq(kept->action_index, 0);
    cr_assert_not_null(kept->partial_report);
    cr_assert_null(fhr_scope_report(sc), "no report after a failed exit");
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, NULL), FHR_E_SCOPE, "the failed exit closed the scope");
    fhr_error_clear(&xe);
    fhr_scope_destroy(sc);

    /* the body succeeded: the exit's failure is the caller's error, and stays on the scope */
    fhr_hold_destroy(hd);
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_hold_acquire(m, &w, 1, fhr_loc_cuda(0), &hd, NULL), FHR_OK);
    fhr_error_init(&xe);
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, &xe), FHR_E_PLAN);
    cr_assert_eq(xe.cause, FHR_E_PROTECTED);
    cr_assert(strstr(xe.message, "exit action 0"), "%s", xe.message);
    cr_assert_not_null(xe.partial_report);
    cr_assert_not_null(fhr_scope_exit_error(sc));
    cr_assert_eq(fhr_scope_exit_error(sc)->cause, FHR_E_PROTECTED);
    fhr_hold_destroy(hd);
    fhr_error_clear(&xe);
    fhr_error_clear(&e);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(scope, nested_stages_and_stale_version)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle w = adopt_n(m, 64, 2, FHR_REPLICABLE);
    fhr_action e1[] = {A(FHR_ACT_ENSURE, w, fhr_loc_pinned())};
    fhr_action e2[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0))};
    fhr_plan_desc d1 = {"bootstrap", NULL, 0, e1, 1, NULL, 0, NULL, 0};
    fhr_plan_desc d2 = {"coeff-to-slot", NULL, 0, e2, 1, NULL, 0, NULL, 0};
    fhr_plan *p1, *p2;
    cr_assert_eq(fhr_plan_create(&d1, &p1, NULL), FHR_OK);
    cr_assert_eq(fhr_plan_create(&d2, &p2, NULL), FHR_OK);
    fhr_scope *outer, *inner;
    cr_assert_eq(fhr_scope_create(m, p1, NULL, 0, &outer, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_create(m, p2, NULL, 0, &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(outer, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(inner, NULL), FHR_OK);
    cr_assert_str_eq(fhr_scope_path(inner), "bootstrap/coeff-to-slot");
    cr_assert_eq(fhr_scope_exit(inner, FHR_OK, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_exit(outer, FHR_OK, NULL), FHR_OK);
    cr_assert_str_eq(fhr_report_name(fhr_scope_report(inner)), "bootstrap/coeff-to-slot");
    fhr_scope_destroy(inner);
    fhr_scope_destroy(outer);

    fhr_scope *st;
    cr_assert_eq(fhr_scope_create(m, p2, NULL, 0, &st, NULL), FHR_OK);
    fhr_scope_expect_version(st, t_state_version(m));
    cr_assert_eq(fhr_drop(m, w, fhr_loc_cuda(0), NULL), FHR_OK); /* intervening mutation */
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_enter(st, &e), FHR_E_STALE);
    cr_assert(strstr(e.message, "decide again"), "%s", e.message);
    cr_assert_eq(t_is_resident(m, w, fhr_loc_cuda(0)), 0, "a stale scope was replanned");
    fhr_scope_destroy(st);
    fhr_plan_destroy(p1);
    fhr_plan_destroy(p2);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(scope, leases_taken_with_the_enter_actions)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle w = adopt_n(m, 4096, 6, FHR_REPLICABLE);
    fhr_handle x = adopt_n(m, 64, 7, FHR_REPLICABLE);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0))};
    fhr_plan_desc d = {"leased", NULL, 0, enter, 1, NULL, 0, NULL, 0};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_add_lease(sc, &w, 1, fhr_loc_cuda(0), NULL, &e), FHR_E_LEASE);
    cr_assert_eq(fhr_scope_add_lease(sc, &w, 1, fhr_loc_cuda(0), cs, &e), FHR_OK);
    cr_assert_null(fhr_scope_lease(sc, 0));
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_scope_add_lease(sc, &w, 1, fhr_loc_cuda(0), cs, &e), FHR_E_SCOPE);
    fhr_lease *l = fhr_scope_lease(sc, 0);
    cr_assert_not_null(l);
    cr_assert_not_null(fhr_lease_value(l, w));
    cr_assert_eq(fhr_drop(m, w, fhr_loc_cuda(0), &e), FHR_E_PROTECTED, "leased at entry");
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    t_reap(m);
    cr_assert_eq(fhr_drop(m, w, fhr_loc_cuda(0), &e), FHR_OK, "exit released the lease");
    fhr_scope_destroy(sc);

    /* a lease on a copy the plan does not place fails entry and consumes the scope */
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_add_lease(sc, &x, 1, fhr_loc_cuda(0), cs, &e), FHR_OK);
    fhr_error_clear(&e);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_E_PLAN, "a lease's failure is an entry failure");
    /* like any entry failure: the cause, the phase, the step (after the enter actions) and
     * the partial report of what committed */
    cr_assert_eq(e.cause, FHR_E_STATE);
    cr_assert_eq(e.phase, FHR_PHASE_ENTER);
    cr_assert_eq(e.action_index, 1, "the first lease follows the one enter action");
    cr_assert(strstr(e.message, "lease 0") && strstr(e.message, "no copy there"), "%s",
              e.message);
    cr_assert_not_null(e.partial_report);
    cr_assert_eq(fhr_report_ntransitions(e.partial_report), 1, "the committed ensure");
    cr_assert_eq(fhr_report_transition(e.partial_report, 0)->kind, FHR_ACT_ENSURE);
    cr_assert_eq(t_is_resident(m, w, fhr_loc_cuda(0)), 1, "committed enter actions stay");
    cr_assert_eq(fhr_drop(m, w, fhr_loc_cuda(0), &e), FHR_OK, "no lease was left behind");
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_E_SCOPE);
    fhr_scope_destroy(sc);
    fhr_error_clear(&e);
    fhr_plan_destroy(p);
    fhr_stream_destroy(b, cs);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A lease that cannot end at exit (its completion event cannot be recorded) fails the
 * exit with a plan error of the exit phase, kept on the scope; destroying the scope
 * still ends the lease, so nothing stays protected. */
Test(scope, a_lease_that_cannot_end_fails_the_exit)
{
    fhr_backend *fb;
    cr_assert_eq(fhr_backend_fault_create(emu_backend(1), &fb, NULL), FHR_OK);
    fhr_manager *m = new_manager(fb, NULL, 0);
    fhr_handle w = adopt_n(m, 4096, 6, FHR_REPLICABLE);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(fb, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0))};
    fhr_plan_desc d = {"leased", NULL, 0, enter, 1, NULL, 0, NULL, 0};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_scope_add_lease(sc, &w, 1, fhr_loc_cuda(0), cs, &e), FHR_OK);
    cr_assert_eq(fhr_scope_enter(sc, &e), FHR_OK, "%s", e.message);
    /* the next event record is the lease's completion event (arming restarts the count) */
    fhr_backend_fault_arm(fb, FHR_FAULT_EVENT, 1);
    fhr_status xs = fhr_scope_exit(sc, FHR_OK, &e);
    cr_assert_eq(xs, FHR_E_PLAN, "the failed release was lost: %s (%s)", fhr_status_name(xs), e.message);
    cr_expect_eq(e.cause, FHR_E_BACKEND);
    cr_expect_eq(e.phase, FHR_PHASE_EXIT);
    cr_expect(strstr(e.message, "lease could not end"), "%s", e.message);
    const fhr_error *xe = fhr_scope_exit_error(sc);
    cr_assert_not_null(xe);
    cr_expect_eq(xe->cause, FHR_E_BACKEND);
    fhr_backend_fault_arm(fb, FHR_FAULT_EVENT, 0);
    fhr_scope_destroy(sc);
    cr_assert_eq(fhr_stream_sync(fb, cs, NULL), FHR_OK);
    t_reap(m);
    cr_assert_eq(fhr_drop(m, w, fhr_loc_cuda(0), &e), FHR_OK, "destroy ended the lease: %s",
                 e.message);
    check_accounting(m);
    fhr_error_clear(&e);
    fhr_plan_destroy(p);
    fhr_stream_destroy(fb, cs);
    fhr_manager_destroy(m);
    fhr_backend_destroy(fb);
}
