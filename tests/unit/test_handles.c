/* tests/unit/test_handles.c — handles: unique per adopt/register, never reused, valid
 * only with their manager; foreign, forged and discarded handles are clear errors. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

Test(handles, unique_and_never_reused)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h1 = adopt_n(m, 64, 1, FHR_REPLICABLE);
    fhr_handle h2 = adopt_n(m, 64, 2, FHR_REPLICABLE);
    cr_assert(!fhr_handle_equal(h1, h2));
    cr_assert_eq(h1.manager_id, fhr_manager_id(m));
    cr_assert_eq(fhr_discard(m, h1, NULL), FHR_OK);
    fhr_handle h3 = adopt_n(m, 64, 3, FHR_REPLICABLE);
    cr_assert(!fhr_handle_equal(h1, h3), "a discarded handle's serial was reused");
    cr_assert(!fhr_handle_equal(h2, h3));
    pat_source ps = {.n = 32, .seed = 4};
    fhr_handle h4 = register_pat(m, &ps, FHR_REPLICABLE);
    cr_assert(h4.serial > h3.serial);
    cr_assert_neq(fhr_handle_hash(h1), fhr_handle_hash(h2));
    fhr_manager_destroy(m);
    cr_assert_eq(ps.released, 1);
    fhr_backend_destroy(b);
}

Test(handles, foreign_manager_is_refused)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m1 = new_manager(b, NULL, 0);
    fhr_manager *m2 = new_manager(b, NULL, 0);
    cr_assert_neq(fhr_manager_id(m1), fhr_manager_id(m2));
    fhr_handle h = adopt_n(m1, 64, 1, FHR_REPLICABLE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m2, h, fhr_loc_pinned(), NULL, &e), FHR_E_HANDLE);
    cr_assert(strstr(e.message, "not to this manager"), "%s", e.message);
    cr_assert_eq(fhr_drop(m2, h, fhr_loc_host(), NULL), FHR_E_HANDLE);
    cr_assert_eq(fhr_discard(m2, h, NULL), FHR_E_HANDLE);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m2, &h, 1, fhr_loc_host(), NULL, &l, NULL), FHR_E_HANDLE);
    cr_assert_null(l);
    cr_assert_eq(t_is_resident(m1, h, fhr_loc_host()), 1);
    fhr_manager_destroy(m1);
    fhr_manager_destroy(m2);
    fhr_backend_destroy(b);
}

Test(handles, forged_and_discarded)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    fhr_error e;
    fhr_error_init(&e);
    fhr_handle forged = {fhr_manager_id(m), 999};
    cr_assert_eq(fhr_ensure(m, forged, fhr_loc_pinned(), NULL, &e), FHR_E_HANDLE);
    cr_assert(strstr(e.message, "never issued"), "%s", e.message);
    fhr_handle zero = {fhr_manager_id(m), 0};
    cr_assert_eq(fhr_move(m, zero, fhr_loc_pinned(), NULL, NULL, NULL), FHR_E_HANDLE);
    cr_assert_eq(fhr_discard(m, h, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, &e), FHR_E_HANDLE);
    cr_assert(strstr(e.message, "discarded"), "%s", e.message);
    cr_assert_eq(fhr_discard(m, h, &e), FHR_E_HANDLE);
    cr_assert_eq(fhr_set_priority(m, h, 3, NULL), FHR_E_HANDLE);
    int res = 7;
    cr_assert_eq(fhr_is_resident(m, h, fhr_loc_host(), &res, &e), FHR_E_HANDLE);
    cr_assert_eq(res, 0, "the answer is 0 on failure, and the status says why");
    cr_assert(strstr(e.message, "discarded"), "%s", e.message);
    cr_assert_eq(fhr_is_resident(m, h, fhr_loc_host(), NULL, NULL), FHR_E_INVALID);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(s->nvalues, 0);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_host())->used_bytes, 0);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
