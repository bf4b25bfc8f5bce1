/* tests/gpu/test_cuda_regen.c — regenerable fields on a real GPU: the counter generator's
 * kernel against the host generator bit for bit, and a seeded value's device copy. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/residency.h"
#include "cuda/counter_gen.h"
#include "cuda/kernels.h"

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

/* The counter kernel from any word on, and its verify, against the host stream. */
Test(cuda_regen, generate_and_verify_from_an_offset)
{
    fhr_backend *b = cuda_or_skip();
    fhr_location dev = fhr_loc_cuda(0), host = fhr_loc_host();
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, dev, &s, NULL), FHR_OK);
    const size_t n = ((size_t)3 << 20) + 3, off = (size_t)5 << 20;
    const unsigned char seed[8] = {9, 9};
    uint64_t key = fhr_counter_key(seed, sizeof seed);
    void *d;
    cr_assert_eq(b->ops->alloc(b, dev, n, s, &d, NULL), FHR_OK);
    cr_assert_eq(fhr_generator_counter_range(NULL, b, dev, s, d, n, off, seed, sizeof seed, NULL),
                 FHR_OK);
    unsigned char *back = malloc(n);
    cr_assert_eq(b->ops->copy(b, back, host, d, dev, n, s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(fhr_counter_differs_host_at(back, n, key, off), 0);
    cr_assert_eq(fhr_counter_differs_host(back, n, key), 1, "not the stream from 0");
    /* the device verify, from the same word, finds it intact; from another it does not */
    unsigned long long *cnt;
    cr_assert_eq(b->ops->alloc(b, dev, 2 * sizeof *cnt, s, (void **)&cnt, NULL), FHR_OK);
    unsigned long long zero[2] = {0, 0}, got[2];
    cr_assert_eq(b->ops->copy(b, cnt, dev, zero, host, sizeof zero, s, NULL), FHR_OK);
    cr_assert_eq(fhk_counter_verify_at(s, d, n, key, off / 8, cnt, NULL), FHR_OK);
    cr_assert_eq(fhk_counter_verify_at(s, d, n, key, off / 8 + 1, cnt, NULL), FHR_OK);
    cr_assert_eq(b->ops->copy(b, got, host, cnt, dev, sizeof got, s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    cr_assert_eq(got[0], 1, "one of the two verifies differs");
    free(back);
    b->ops->free(b, dev, cnt, 2 * sizeof *cnt, s);
    b->ops->free(b, dev, d, n, s);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

/* A partial copy of a cut seeded key on the GPU: b's limbs over the link, a's generated
 * by range, both where the whole key has them. */
Test(cuda_regen, partial_copy_of_a_cut_key)
{
    fhr_backend *b = cuda_or_skip();
    fhr_manager_config cfg = {b, NULL, 0, 64};
    fhr_manager *m;
    cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
    enum { Q = 12, K = 4, LIMB = 1 << 16 };
    const size_t field = (size_t)(Q + K) * LIMB;
    fhr_value *v;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_alloc_buffer(v, b, field, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 0, field, NULL), FHR_OK);
    unsigned char *pb;
    fhr_value_field(v, "b", (void **)&pb, NULL);
    for (size_t i = 0; i < field; i++)
        pb[i] = (unsigned char)(i * 131 + i / 4099);
    unsigned char seed[8] = {4};
    cr_assert_eq(fhr_value_add_regenerable(v, "a", field, "counter", seed, 8, 0, NULL), FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "k", 0};
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, NULL), FHR_OK);
    fhr_limb_cut c = {Q, K, 1, 0, 0};
    cr_assert_eq(fhr_value_cut_limbs(m, h, &c, NULL), FHR_OK);
    const uint32_t limbs = 5;
    fhr_action a = {FHR_ACT_ENSURE, h, fhr_loc_cuda(0), 0, {0, 0}, limbs};
    fhr_report *r;
    cr_assert_eq(fhr_execute_actions(m, &a, 1, NULL, 0, &r, NULL), FHR_OK);
    const size_t held = (size_t)(limbs + K) * LIMB;
    cr_assert_eq(fhr_report_bytes(r, FHR_DIR_H2D), held);
    cr_assert_eq(fhr_report_regen_bytes(r), held);
    fhr_report_free(r);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), s, &l, NULL), FHR_OK);
    const fhr_value *dv = fhr_lease_value(l, h);
    unsigned char *back = malloc(2 * held);
    const char *names[2] = {"b", "a"};
    for (int f = 0; f < 2; f++) {
        void *p;
        size_t n;
        cr_assert_eq(fhr_value_field(dv, names[f], &p, &n), FHR_OK);
        cr_assert_eq(n, held);
        cr_assert_eq(b->ops->copy(b, back + f * held, fhr_loc_host(), p, fhr_loc_cuda(0), n, s,
                                  NULL), FHR_OK);
    }
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    uint64_t key = fhr_counter_key(seed, 8);
    size_t qn = (size_t)limbs * LIMB, sp = (size_t)K * LIMB;
    cr_assert_eq(memcmp(back, pb, qn), 0, "b's q-limbs");
    cr_assert_eq(memcmp(back + qn, pb + (size_t)Q * LIMB, sp), 0, "b's special limbs");
    cr_assert_eq(fhr_counter_differs_host_at(back + held, qn, key, 0), 0, "a's q-limbs");
    cr_assert_eq(fhr_counter_differs_host_at(back + held + qn, sp, key, (size_t)Q * LIMB), 0,
                 "a's special limbs");
    free(back);
    fhr_lease_destroy(l);
    fhr_stream_sync(b, s, NULL);
    fhr_stream_destroy(b, s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
