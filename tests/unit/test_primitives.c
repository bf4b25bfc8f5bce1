/* tests/unit/test_primitives.c — ensure, move, drop and discard: every rule of the
 * primitive table, replica modes, recoverability, sources, and bit-exact contents. */
#include "gated_backend.h"
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

Test(primitives, ensure_keeps_replicas_and_copies_bit_exact)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    size_t n = (1 << 20) + 3;
    fhr_handle h = adopt_n(m, n, 9, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(1), NULL, NULL), FHR_OK);
    uint64_t v = t_state_version(m);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(1), NULL, NULL), FHR_OK, "ensure is idempotent");
    cr_assert_eq(t_state_version(m), v);
    fhr_location locs[] = {fhr_loc_host(), fhr_loc_pinned(), fhr_loc_cuda(0), fhr_loc_cuda(1)};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(t_is_resident(m, h, locs[i]), 1);
        cr_assert(resident_has_pattern(m, h, locs[i], 9, n), "slot %d differs", i);
    }
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, ensure_on_exclusive_is_refused)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_EXCLUSIVE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, &e), FHR_E_REPLICA);
    cr_assert(strstr(e.message, "EXCLUSIVE; use move"), "%s", e.message);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_cuda(0)), 0);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, &e), FHR_OK);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_host()), 0);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 1, 64));
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, move_with_explicit_source)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 128, 5, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    fhr_location pinned = fhr_loc_pinned(), cuda = fhr_loc_cuda(0);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), &cuda, NULL, &e), FHR_E_STATE);
    cr_assert(strstr(e.message, "no copy at cuda:0"), "%s", e.message);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), &pinned, NULL, &e), FHR_OK);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_pinned()), 0);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_host()), 1);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_cuda(0)), 1);
    /* destination already there: the move just removes the source */
    fhr_location host = fhr_loc_host();
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), &host, NULL, &e), FHR_OK);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_host()), 0);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 5, 128));
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, drop_rules)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), &e), FHR_E_STATE);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_host(), &e), FHR_E_PRESERVE);
    cr_assert(strstr(e.message, "last copy of a MUST_PRESERVE"), "%s", e.message);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_host()), 1);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_host(), &e), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), &e), FHR_E_PRESERVE);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 1, 64));
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, reconstructible_reloads_through_its_source)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {.n = 5000, .seed = 77};
    fhr_handle h = register_pat(m, &ps, FHR_REPLICABLE);
    cr_assert_eq(ps.loads, 0, "registering must not load");
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(ps.loads, 1);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 77, 5000));
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), NULL), FHR_OK, "the last copy of a "
                 "RECONSTRUCTIBLE value may be dropped");
    cr_assert_eq(t_is_resident(m, h, fhr_loc_cuda(0)), 0);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(ps.loads, 2);
    cr_assert(resident_has_pattern(m, h, fhr_loc_pinned(), 77, 5000));
    /* a second copy comes from the first, not from the source */
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(ps.loads, 2);
    check_accounting(m);
    cr_assert_eq(fhr_discard(m, h, NULL), FHR_OK);
    cr_assert_eq(ps.released, 1);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, exclusive_reconstructible_loads_on_move)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {.n = 100, .seed = 3};
    fhr_handle h = register_pat(m, &ps, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(ps.loads, 1);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 3, 100));
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, failing_or_lying_source_changes_nothing)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 1 << 20};
    fhr_manager *m = new_manager(b, &bud, 1);
    pat_source bad = {.n = 64, .seed = 1, .fail = 1};
    pat_source liar = {.n = 64, .seed = 1, .wrong_size = 1};
    fhr_handle h1 = register_pat(m, &bad, FHR_REPLICABLE);
    fhr_handle h2 = register_pat(m, &liar, FHR_REPLICABLE);
    uint64_t v = t_state_version(m);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m, h1, fhr_loc_cuda(0), NULL, &e), FHR_E_SOURCE);
    cr_assert(strstr(e.message, "synthetic failure"), "%s", e.message);
    cr_assert_eq(fhr_ensure(m, h2, fhr_loc_cuda(0), NULL, &e), FHR_E_SOURCE);
    cr_assert(strstr(e.message, "65 bytes, the spec says 64"), "%s", e.message);
    cr_assert_eq(t_state_version(m), v);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->used_bytes, 0);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, discard_removes_every_copy)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_discard(m, h, NULL), FHR_OK);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nlocs; i++)
        cr_assert_eq(s->locs[i].used_bytes, 0);
    cr_assert_eq(s->nvalues, 0);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(primitives, metadata_never_changes_with_movement)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_value *v = host_value(256, 4);
    fhr_ckks_meta meta = *fhr_value_meta(v);
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, NULL, &h, NULL), FHR_OK);
    fhr_location pinned = fhr_loc_pinned();
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, h, fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, h, fhr_loc_host(), &pinned, NULL, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_host(), NULL, &l, NULL), FHR_OK);
    cr_assert(fhr_ckks_meta_equal(fhr_value_meta(fhr_lease_value(l, h)), &meta));
    cr_assert(value_has_pattern(b, fhr_lease_value(l, h), 4, 256));
    fhr_lease_destroy(l);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* The status a call returns is the failure's own, whether or not the caller passed an
 * error struct, and never a stale one left in a reused struct. */
Test(primitives, status_comes_from_the_failure_not_from_the_error_struct)
{
    fhr_backend *b = gated_create(emu_backend(1));
    cr_assert_not_null(b);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 3, FHR_REPLICABLE);
    uint64_t v = t_state_version(m);
    gated_fail_records_silently(b, 1); /* the copy's ready event cannot be recorded */
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, NULL), FHR_E_BACKEND);
    fhr_error e;
    fhr_error_init(&e);
    e.status = FHR_E_BUDGET; /* left over from an earlier call */
    gated_fail_records_silently(b, 1);
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, &e), FHR_E_BACKEND);
    cr_assert_eq(t_state_version(m), v, "a failed ensure changed the state");
    cr_assert_eq(t_is_resident(m, x, fhr_loc_cuda(0)), 0);
    check_accounting(m);

    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *c;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &x, 1, fhr_loc_cuda(0), c, &l, NULL), FHR_OK);
    e.status = FHR_E_BUDGET;
    gated_fail_records_silently(b, 1); /* the consumer event cannot be recorded */
    cr_assert_eq(fhr_lease_release(l, &e), FHR_E_BACKEND);
    gated_fail_records_silently(b, 1);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_E_BACKEND);
    cr_assert_eq(fhr_drop(m, x, fhr_loc_cuda(0), NULL), FHR_E_PROTECTED, "a failed release let go");
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_stream_sync(b, c, NULL);
    t_reap(m);
    cr_assert_eq(fhr_drop(m, x, fhr_loc_cuda(0), NULL), FHR_OK);
    fhr_stream_destroy(b, c);
    fhr_error_clear(&e);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
