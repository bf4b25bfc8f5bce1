/* tests/unit/test_budget.c — strict budgets: exact fit, one byte more fails and
 * changes nothing, no other placement is chosen, unbudgeted locations still account. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

static char *snap_json(fhr_manager *m)
{
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    char *j = fhr_snapshot_json(s);
    fhr_snapshot_free(s);
    return j;
}

Test(budget, exact_fit_then_one_byte_more_fails_with_nothing_changed)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 1000};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle a = adopt_n(m, 1000, 1, FHR_REPLICABLE);
    fhr_handle c = adopt_n(m, 1, 2, FHR_REPLICABLE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m, a, fhr_loc_cuda(0), NULL, &e), FHR_OK, "%s", e.message);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_loc_stats *ls = fhr_snapshot_loc(s, fhr_loc_cuda(0));
    cr_assert_eq(ls->used_bytes, 1000);
    cr_assert_eq(ls->remaining_budget_bytes, 0);
    fhr_snapshot_free(s);
    cr_assert(resident_has_pattern(m, a, fhr_loc_cuda(0), 1, 1000)); /* copy complete */
    char *before = snap_json(m);
    uint64_t v = t_state_version(m);
    cr_assert_eq(fhr_ensure(m, c, fhr_loc_cuda(0), NULL, &e), FHR_E_BUDGET);
    cr_assert_eq(e.bytes_short, 1);
    cr_assert(fhr_loc_equal(e.loc, fhr_loc_cuda(0)));
    cr_assert(strstr(e.message, "1 bytes short"), "%s", e.message);
    cr_assert_eq(fhr_move(m, c, fhr_loc_cuda(0), NULL, NULL, &e), FHR_E_BUDGET);
    char *after = snap_json(m);
    cr_assert_str_eq(before, after);
    cr_assert_eq(t_state_version(m), v);
    cr_assert_eq(t_is_resident(m, c, fhr_loc_host()), 1, "the value moved elsewhere");
    free(before);
    free(after);
    fhr_error_clear(&e);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(budget, unbudgeted_locations_account_and_report_none)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle a = adopt_n(m, 4096, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, a, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, a, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nlocs; i++) {
        cr_assert_eq(s->locs[i].used_bytes, 4096);
        cr_assert_eq(s->locs[i].has_budget, 0);
    }
    cr_assert_eq(s->nlocs, 3);
    fhr_snapshot_free(s);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(budget, set_budget_below_committed_is_refused)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    adopt_n(m, 500, 1, FHR_REPLICABLE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_set_budget(m, fhr_loc_host(), 499, &e), FHR_E_BUDGET);
    cr_assert_eq(fhr_set_budget(m, fhr_loc_host(), 500, &e), FHR_OK);
    fhr_value *v = host_value(1, 1);
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, NULL, &h, &e), FHR_E_BUDGET, "adopt ignored the budget");
    cr_assert_not_null(v, "a refused adopt must leave the value with the caller");
    fhr_value_destroy(v);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* Each location's peak shows the copy it held during a round trip of moves; in one
 * budgeted location a full budget refuses even one more byte, naming the shortfall. */
Test(budget, move_peaks_per_location_and_a_full_budget_refuses_one_byte)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle a = adopt_n(m, 300, 1, FHR_EXCLUSIVE);
    fhr_location host = fhr_loc_host();
    cr_assert_eq(fhr_move(m, a, fhr_loc_pinned(), &host, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, a, fhr_loc_host(), NULL, NULL, NULL), FHR_OK);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    /* the destination is charged before the source is released */
    const fhr_loc_stats *h = fhr_snapshot_loc(s, fhr_loc_host());
    cr_assert_eq(h->used_bytes, 300);
    cr_assert_eq(h->peak_used_bytes, 300);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_pinned())->used_bytes, 0);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_pinned())->peak_used_bytes, 300);
    fhr_snapshot_free(s);

    /* a budget filled by one value refuses a move of one more byte */
    fhr_budget bud[] = {{fhr_loc_cuda(0), 300}};
    fhr_manager *m2 = new_manager(b, bud, 1);
    fhr_handle x = adopt_n(m2, 300, 2, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(m2, x, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    fhr_handle y = adopt_n(m2, 1, 3, FHR_EXCLUSIVE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_move(m2, y, fhr_loc_cuda(0), NULL, NULL, &e), FHR_E_BUDGET);
    cr_assert_eq(e.bytes_short, 1);
    fhr_manager_destroy(m2);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

