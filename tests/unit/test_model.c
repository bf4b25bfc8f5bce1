/* tests/unit/test_model.c — the model backend used by dry runs: fake distinct addresses,
 * no copies, work that completes at once, invalid observations. */
#include "fheplan/backend.h"

#include <criterion/criterion.h>
#include <string.h>

static fhr_backend *model(int ndev)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_model_create(ndev, &b, NULL), FHR_OK);
    cr_assert_str_eq(b->ops->name, "model");
    return b;
}

Test(model, addresses_are_distinct_and_non_null)
{
    fhr_backend *b = model(2);
    void *p[64];
    size_t sizes[] = {1, 255, 256, 257, 4097, (size_t)3 << 30};
    for (int i = 0; i < 64; i++) {
        fhr_location loc = i % 3 == 0 ? fhr_loc_host() : i % 3 == 1 ? fhr_loc_pinned()
                                                                    : fhr_loc_cuda(i % 2);
        size_t n = sizes[i % 6];
        cr_assert_eq(b->ops->alloc(b, loc, n, NULL, &p[i], NULL), FHR_OK);
        cr_assert_not_null(p[i]);
        for (int j = 0; j < i; j++)
            cr_assert_neq(p[i], p[j]);
    }
    for (int i = 0; i < 64; i++)
        b->ops->free(b, fhr_loc_host(), p[i], 1, NULL);
    fhr_backend_destroy(b);
}

Test(model, ranges_do_not_overlap)
{
    fhr_backend *b = model(1);
    void *a = NULL, *c = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1000, NULL, &a, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 1000, NULL, &c, NULL), FHR_OK);
    cr_assert((uintptr_t)c >= (uintptr_t)a + 1000);
    fhr_backend_destroy(b);
}

static void bump(void *arg) { ++*(int *)arg; }

Test(model, work_completes_at_once_and_host_fn_runs_immediately)
{
    fhr_backend *b = model(1);
    fhr_stream *s = NULL;
    fhr_event *e = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create(b, &e, NULL), FHR_OK);
    int count = 0;
    cr_assert_eq(fhr_launch_host(b, s, bump, &count, NULL), FHR_OK);
    cr_assert_eq(count, 1);
    /* copies touch nothing: fake addresses are safe to pass */
    void *d = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), 64, s, &d, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, d, fhr_loc_cuda(0), d, fhr_loc_cuda(0), 64, s, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_record(b, e, s, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_eq(b->ops->event_sync(b, e, NULL), FHR_OK);
    cr_assert_eq(b->ops->stream_wait_event(b, s, e, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_geq(b->ops->stream_id(b, s), 1);
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

Test(model, observations_are_invalid_and_locations_checked)
{
    fhr_backend *b = model(3);
    cr_assert_eq(b->ops->device_count(b), 3);
    fhr_observation o;
    memset(&o, 0xff, sizeof o);
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.valid, 0);
    cr_assert_eq(o.pool_used_bytes, 0);
    void *p = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(3), 8, NULL, &p, &err), FHR_E_LOCATION);
    cr_assert(strstr(err.message, "cuda:3"), "%s", err.message);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 0, NULL, &p, NULL), FHR_E_INVALID);
    cr_assert_eq(b->ops->copy(b, &p, fhr_loc_cuda(5), &p, fhr_loc_host(), 1, NULL, NULL),
                 FHR_E_LOCATION);
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(4), &s, NULL), FHR_E_LOCATION);
    fhr_backend_destroy(b);
    cr_assert_eq(fhr_backend_model_create(0, &b, NULL), FHR_E_INVALID);
}
