/* tests/unit/test_bad_input.c — the library refuses bad input without crashing or changing
 * state: manager configurations, source specs whose sizes wrap or undercount, and failed
 * transitions that must not make a location appear in snapshots. */
#include "tests/unit/mgr_helpers.h"

Test(bad_input, manager_create_with_null_budgets_is_refused)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager_config cfg = {b, NULL, 3, 0};
    fhr_manager *m = (fhr_manager *)0x1;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_manager_create(&cfg, &m, &e), FHR_E_INVALID);
    cr_assert_null(m);
    cr_assert(strstr(e.message, "budgets is NULL with nbudgets 3"), "%s", e.message);
    cfg.nbudgets = 0;
    cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(bad_input, register_source_sizes_are_checked)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {.n = 64, .seed = 1};
    fhr_source src = {pat_load, &ps, pat_release};
    fhr_field_spec f[2];
    fhr_value_spec spec = pat_spec(&f[0], 64);
    f[0].nbytes = UINT64_MAX - 10;
    f[1] = (fhr_field_spec){"more", 20};
    spec.nfields = 2;
    spec.storage_nbytes = UINT64_MAX;
    fhr_handle h = {0, 0};
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &h, &e), FHR_E_INVALID);
    cr_assert(strstr(e.message, "add up to 2^64 bytes or more"), "%s", e.message);
    spec = pat_spec(&f[0], 64);
    spec.storage_nbytes = 63;
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &h, &e), FHR_E_INVALID);
    cr_assert(strstr(e.message, "storage_nbytes 63 is below the 64 bytes of its fields"), "%s",
              e.message);
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(s->nvalues, 0, "a refused registration left a value");
    fhr_snapshot_free(s);
    cr_assert_eq(ps.released, 0);
    fhr_error_clear(&e);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

static size_t nlocs(fhr_manager *m)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    size_t n = s->nlocs;
    fhr_snapshot_free(s);
    return n;
}

Test(bad_input, failed_transitions_create_no_location)
{
    fhr_backend *inner = emu_backend(1), *b = NULL;
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 4096, 3, FHR_EXCLUSIVE);
    size_t before = nlocs(m); /* host only */
    /* a move to pinned whose allocation fails */
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 1);
    cr_assert_neq(fhr_move(m, h, fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 0);
    cr_assert_eq(nlocs(m), before, "a failed move made a location appear");
    /* an ensure whose source load fails */
    pat_source ps = {.n = 256, .seed = 5, .fail = 1};
    fhr_handle hs = register_pat(m, &ps, FHR_REPLICABLE);
    cr_assert_neq(fhr_ensure(m, hs, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(nlocs(m), before, "a failed ensure made a location appear");
    /* and the same succeeding does */
    cr_assert_eq(fhr_move(m, h, fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(nlocs(m), before + 1);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
