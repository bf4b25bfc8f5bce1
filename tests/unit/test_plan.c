/* tests/unit/test_plan.c — plans and explain: immutability, a dry run that changes
 * nothing, infeasibility named by phase, action index, handle, location and bytes. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

static fhr_action A(fhr_action_kind k, fhr_handle h, fhr_location at)
{
    return (fhr_action){k, h, at, 0, {0, 0}, 0};
}

Test(plan, explain_is_a_dry_run)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 1000};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle w = adopt_n(m, 400, 1, FHR_REPLICABLE);
    fhr_handle x = adopt_n(m, 300, 2, FHR_EXCLUSIVE);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, w, fhr_loc_cuda(0)), A(FHR_ACT_MOVE, x, fhr_loc_cuda(0))};
    fhr_action exit_[] = {A(FHR_ACT_MOVE, x, fhr_loc_pinned()), A(FHR_ACT_DROP, w, fhr_loc_cuda(0))};
    fhr_reservation res[] = {{fhr_loc_cuda(0), 300, "workspace"}};
    fhr_plan_desc d = {"tile", NULL, 0, enter, 2, exit_, 2, res, 1};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    enter[0].kind = FHR_ACT_DISCARD; /* the plan copied its input */
    cr_assert_eq(fhr_plan_action(p, FHR_PHASE_ENTER, 0)->kind, FHR_ACT_ENSURE);
    cr_assert_eq(fhr_plan_nactions(p, FHR_PHASE_EXIT), 2);
    cr_assert_str_eq(fhr_plan_reservation(p, 0)->label, "workspace");

    fhr_snapshot *s0, *s1;
    cr_assert_eq(fhr_snapshot_take(m, &s0, NULL), FHR_OK);
    char *j0 = fhr_snapshot_json(s0);
    fhr_explanation ex;
    cr_assert_eq(fhr_explain(m, p, &ex, NULL), FHR_OK);
    cr_assert(ex.feasible, "%s", ex.reason);
    cr_assert_eq(ex.state_version, s0->state_version);
    cr_assert_eq(ex.bytes_moved, 400 + 300 + 300);
    int found = 0;
    for (size_t i = 0; i < ex.npeaks; i++)
        if (fhr_loc_equal(ex.peaks[i].loc, fhr_loc_cuda(0))) {
            cr_assert_eq(ex.peaks[i].peak_used_bytes, 700);
            cr_assert_eq(ex.peaks[i].peak_charged_bytes, 1000);
            cr_assert_eq(ex.peaks[i].budget_bytes, 1000);
            found = 1;
        }
    cr_assert(found);
    cr_assert_eq(fhr_snapshot_take(m, &s1, NULL), FHR_OK);
    char *j1 = fhr_snapshot_json(s1);
    cr_assert_str_eq(j0, j1, "explain changed the manager");
    char *ej = fhr_explanation_json(&ex);
    cr_assert(strstr(ej, "\"feasible\":true"), "%s", ej);
    free(ej);
    free(j0);
    free(j1);
    fhr_snapshot_free(s0);
    fhr_snapshot_free(s1);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(plan, infeasible_plan_names_the_failing_action)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 1000};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle a = adopt_n(m, 600, 1, FHR_REPLICABLE);
    fhr_handle c = adopt_n(m, 500, 2, FHR_REPLICABLE);
    fhr_handle x = adopt_n(m, 10, 3, FHR_EXCLUSIVE);
    fhr_action enter[] = {A(FHR_ACT_ENSURE, a, fhr_loc_cuda(0)), A(FHR_ACT_ENSURE, c, fhr_loc_cuda(0))};
    fhr_plan_desc d = {"too-big", NULL, 0, enter, 2, NULL, 0, NULL, 0};
    fhr_plan *p;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_explanation ex;
    cr_assert_eq(fhr_explain(m, p, &ex, NULL), FHR_OK);
    cr_assert_not(ex.feasible);
    cr_assert_eq(ex.status, FHR_E_BUDGET);
    cr_assert_eq(ex.phase, FHR_PHASE_ENTER);
    cr_assert_eq(ex.action_index, 1);
    cr_assert(fhr_handle_equal(ex.handle, c));
    cr_assert(fhr_loc_equal(ex.loc, fhr_loc_cuda(0)));
    cr_assert_eq(ex.bytes_short, 100);
    cr_assert(strstr(ex.reason, "enter action 1"), "%s", ex.reason);
    fhr_plan_destroy(p);

    /* with reclaim first it fits */
    fhr_action reclaim[] = {A(FHR_ACT_ENSURE, a, fhr_loc_cuda(0))};
    fhr_action ens_a = A(FHR_ACT_ENSURE, a, fhr_loc_cuda(0));
    fhr_execute_actions(m, &ens_a, 1, NULL, 0, NULL, NULL);
    reclaim[0] = A(FHR_ACT_DROP, a, fhr_loc_cuda(0));
    fhr_action enter2[] = {A(FHR_ACT_ENSURE, c, fhr_loc_cuda(0))};
    fhr_reservation res[] = {{fhr_loc_cuda(0), 500, "ws"}};
    fhr_plan_desc d2 = {"reclaimed", reclaim, 1, enter2, 1, NULL, 0, res, 1};
    cr_assert_eq(fhr_plan_create(&d2, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_explain(m, p, &ex, NULL), FHR_OK);
    cr_assert(ex.feasible, "%s", ex.reason);
    fhr_plan_destroy(p);

    /* a reservation that cannot be admitted */
    fhr_reservation big[] = {{fhr_loc_cuda(0), 401, "too much"}};
    fhr_plan_desc d3 = {"res", NULL, 0, NULL, 0, NULL, 0, big, 1};
    cr_assert_eq(fhr_plan_create(&d3, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_explain(m, p, &ex, NULL), FHR_OK);
    cr_assert_not(ex.feasible);
    cr_assert_eq(ex.phase, FHR_PHASE_RESERVE);
    cr_assert_eq(ex.action_index, 0);
    cr_assert_eq(ex.bytes_short, 1);
    fhr_plan_destroy(p);

    /* rule failures: ensure on EXCLUSIVE, use after discard, last-copy drop */
    fhr_action bad1[] = {A(FHR_ACT_ENSURE, x, fhr_loc_cuda(0))};
    fhr_action bad2[] = {A(FHR_ACT_DISCARD, x, fhr_loc_host()), A(FHR_ACT_MOVE, x, fhr_loc_cuda(0))};
    fhr_action bad3[] = {A(FHR_ACT_DROP, x, fhr_loc_host())};
    struct { fhr_action *a; size_t n; fhr_status st; long idx; } cases[] = {
        {bad1, 1, FHR_E_REPLICA, 0}, {bad2, 2, FHR_E_HANDLE, 1}, {bad3, 1, FHR_E_PRESERVE, 0}};
    for (size_t i = 0; i < 3; i++) {
        fhr_plan_desc dd = {"rules", NULL, 0, cases[i].a, cases[i].n, NULL, 0, NULL, 0};
        cr_assert_eq(fhr_plan_create(&dd, &p, NULL), FHR_OK);
        cr_assert_eq(fhr_explain(m, p, &ex, NULL), FHR_OK);
        cr_assert_not(ex.feasible);
        cr_assert_eq(ex.status, cases[i].st, "case %zu: %s", i, ex.reason);
        cr_assert_eq(ex.action_index, cases[i].idx);
        fhr_plan_destroy(p);
    }
    cr_assert_eq(t_is_resident(m, x, fhr_loc_host()), 1, "explain discarded for real");
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(plan, bad_plans_are_refused_at_creation)
{
    fhr_plan *p = NULL;
    fhr_action bad = {(fhr_action_kind)9, {1, 1}, {FHR_LOC_HOST, 0}, 0, {0, 0}, 0};
    fhr_plan_desc d = {"x", NULL, 0, &bad, 1, NULL, 0, NULL, 0};
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_E_INVALID);
    fhr_action badloc = {FHR_ACT_ENSURE, {1, 1}, {FHR_LOC_CUDA, 99}, 0, {0, 0}, 0};
    d.enter = &badloc;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_E_LOCATION);
    d.enter = NULL;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_E_INVALID);
    cr_assert_null(p);
}

Test(plan, execute_actions_reports_and_refuses_infeasible)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 100};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle a = adopt_n(m, 60, 1, FHR_REPLICABLE);
    fhr_handle c = adopt_n(m, 60, 2, FHR_REPLICABLE);
    fhr_stream *ts;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &ts, NULL), FHR_OK);
    fhr_stream_map map[] = {{fhr_loc_cuda(0), ts}};
    fhr_action acts[] = {A(FHR_ACT_ENSURE, a, fhr_loc_cuda(0)), A(FHR_ACT_ENSURE, c, fhr_loc_pinned())};
    fhr_report *r = NULL;
    cr_assert_eq(fhr_execute_actions(m, acts, 2, map, 1, &r, NULL), FHR_OK);
    cr_assert_eq(fhr_report_ntransitions(r), 2);
    const fhr_transition *t0 = fhr_report_transition(r, 0);
    cr_assert_eq(t0->stream_id, b->ops->stream_id(b, ts), "the transfer stream was not used");
    cr_assert_eq(t0->nbytes, 60);
    cr_assert_eq(fhr_report_bytes(r, FHR_DIR_H2D), 60);
    cr_assert_eq(fhr_report_bytes(r, FHR_DIR_H2H), 60);
    cr_assert_leq(t0->t_start_ns, t0->t_end_ns);
    fhr_report_free(r);
    fhr_action more[] = {A(FHR_ACT_ENSURE, c, fhr_loc_host()), A(FHR_ACT_ENSURE, c, fhr_loc_cuda(0))};
    fhr_error e;
    fhr_error_init(&e);
    uint64_t v = t_state_version(m);
    cr_assert_eq(fhr_execute_actions(m, more, 2, NULL, 0, &r, &e), FHR_E_INFEASIBLE);
    cr_assert_eq(e.cause, FHR_E_BUDGET);
    cr_assert_eq(e.action_index, 1);
    cr_assert_eq(e.bytes_short, 20);
    cr_assert_eq(t_state_version(m), v, "preflight must reject before the first action");
    fhr_error_clear(&e);
    fhr_stream_destroy(b, ts);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
