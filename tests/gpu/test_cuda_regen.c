/* tests/gpu/test_cuda_regen.c — regenerable fields on a real GPU: the counter generator's
 * kernel against the host generator bit for bit, and a seeded value's device copy. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/residency.h"
#include "cuda/counter_gen.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void device_matches_host(size_t n)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location dev = fhr_loc_cuda(0), pin = fhr_loc_pinned();
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, dev, &s, NULL), FHR_OK);
    void *d, *h;
    cr_assert_eq(b->ops->alloc(b, dev, n, s, &d, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, pin, n, NULL, &h, NULL), FHR_OK);
    const unsigned char seed[64] = {7, 7, 7};
    cr_assert_eq(fhr_generator_counter(NULL, b, dev, s, d, n, seed, sizeof seed, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, h, pin, d, dev, n, s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(fhr_counter_differs_host(h, n, fhr_counter_key(seed, sizeof seed)), 0);
    b->ops->free(b, pin, h, n, NULL);
    b->ops->free(b, dev, d, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

Test(cuda_regen, one_byte) { device_matches_host(1); }
Test(cuda_regen, ragged_tail) { device_matches_host(4099); }
Test(cuda_regen, ninety_mib_and_5) { device_matches_host(((size_t)90 << 20) + 5); }

Test(cuda_regen, seeded_value_copy_moves_b_and_generates_a)
{
    fhr_backend *b = cuda_or_skip();
    fhr_manager_config cfg = {b, NULL, 0, 64};
    fhr_manager *m;
    cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
    const size_t nb = (size_t)8 << 20, na = (size_t)8 << 20;
    fhr_value *v;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_alloc_buffer(v, b, nb, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 0, nb, NULL), FHR_OK);
    void *pb;
    fhr_value_field(v, "b", &pb, NULL);
    memset(pb, 0x3c, nb);
    unsigned char seed[8] = {1};
    cr_assert_eq(fhr_value_add_regenerable(v, "a", na, "counter", seed, 8, 0, NULL), FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "k", 0};
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, NULL), FHR_OK);
    fhr_action a = {FHR_ACT_ENSURE, h, fhr_loc_cuda(0), 0, {0, 0}, 0};
    fhr_report *r;
    cr_assert_eq(fhr_execute_actions(m, &a, 1, NULL, 0, &r, NULL), FHR_OK);
    cr_assert_eq(fhr_report_bytes(r, FHR_DIR_H2D), nb);
    cr_assert_eq(fhr_report_regen_bytes(r), na);
    fhr_report_free(r);
    /* the device copy's a half, read back */
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), s, &l, NULL), FHR_OK);
    const fhr_value *dv = fhr_lease_value(l, h);
    void *pa;
    size_t n;
    cr_assert_eq(fhr_value_field(dv, "a", &pa, &n), FHR_OK);
    unsigned char *back = malloc(na);
    fhr_location host = fhr_loc_host(), dev = fhr_loc_cuda(0);
    cr_assert_eq(b->ops->copy(b, back, host, pa, dev, na, s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(fhr_counter_differs_host(back, na, fhr_counter_key(seed, 8)), 0);
    free(back);
    fhr_lease_destroy(l);
    fhr_stream_sync(b, s, NULL);
    fhr_stream_destroy(b, s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
