/* tests/unit/test_locations.c — text forms, lazy creation, and CUDA indexes the
 * process cannot see. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

Test(locations, parse_and_format)
{
    fhr_location l;
    char buf[16];
    cr_assert_eq(fhr_loc_parse("host", &l), FHR_OK);
    cr_assert_eq(l.kind, FHR_LOC_HOST);
    cr_assert_eq(fhr_loc_parse("pinned", &l), FHR_OK);
    cr_assert_str_eq(fhr_loc_format(l, buf, sizeof buf), "pinned");
    cr_assert_eq(fhr_loc_parse("cuda:12", &l), FHR_OK);
    cr_assert_eq(l.index, 12);
    cr_assert_str_eq(fhr_loc_format(l, buf, sizeof buf), "cuda:12");
    const char *bad[] = {"", "cuda", "cuda:", "cuda:-1", "cuda:x", "cuda:01", "cuda:62",
                         "cuda:1x", "Host", "device:0", "cuda:99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(fhr_loc_parse(bad[i], &l), FHR_E_INVALID, "accepted '%s'", bad[i]);
    cr_assert_eq(fhr_loc_slot(fhr_loc_cuda(3)), 5);
    cr_assert(fhr_loc_equal(fhr_loc_from_slot(5), fhr_loc_cuda(3)));
}

Test(locations, lazy_creation_on_first_use_or_budget)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(s->nlocs, 0);
    fhr_snapshot_free(s);
    cr_assert_eq(fhr_set_budget(m, fhr_loc_cuda(1), 1 << 20, NULL), FHR_OK);
    fhr_handle h = adopt_n(m, 100, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(s->nlocs, 2);
    cr_assert_not_null(fhr_snapshot_loc(s, fhr_loc_host()));
    cr_assert_not_null(fhr_snapshot_loc(s, fhr_loc_cuda(1)));
    cr_assert_null(fhr_snapshot_loc(s, fhr_loc_pinned()));
    cr_assert_null(fhr_snapshot_loc(s, fhr_loc_cuda(0)));
    fhr_snapshot_free(s);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->used_bytes, 100);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->has_budget, 0);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(locations, invisible_cuda_index_is_refused)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(1), 100};
    fhr_manager_config cfg = {b, &bud, 1, 0};
    fhr_manager *m = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_manager_create(&cfg, &m, &e), FHR_E_LOCATION);
    cr_assert(strstr(e.message, "cuda:1 is not visible"), "%s", e.message);
    cr_assert_null(m);
    m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    uint64_t v = t_state_version(m);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(1), NULL, &e), FHR_E_LOCATION);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(61), NULL, NULL), FHR_E_LOCATION);
    cr_assert_eq(fhr_ensure(m, h, (fhr_location){FHR_LOC_CUDA, 62}, NULL, NULL), FHR_E_LOCATION);
    cr_assert_eq(fhr_ensure(m, h, (fhr_location){FHR_LOC_INVALID, 0}, NULL, NULL), FHR_E_LOCATION);
    cr_assert_eq(t_state_version(m), v);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_null(fhr_snapshot_loc(s, fhr_loc_cuda(1)), "a refused location was created");
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
