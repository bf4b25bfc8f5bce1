/* tests/gpu/test_cuda_pool.c — what fheplan's private pool holds from the device: its growth
 * granule, and keys of 180 MiB streamed through a budget under a throttled engine. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/residency.h"
#include "fheplan/cuda.h"
#include "cuda/kernels.h"

#include <criterion/criterion.h>

#define MiB (1ull << 20)
#define KEY (180 * MiB) /* a Phantom rotation key at N = 2^16, dnum 5 */
#define NKEYS 14

static fhr_observation observe(fhr_backend *b)
{
    fhr_observation o;
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert(o.valid);
    return o;
}

static uint64_t round_up(uint64_t n, uint64_t g) { return g ? (n + g - 1) / g * g : n; }

Test(cuda_pool, the_granule_is_measured_and_the_fresh_pool_holds_nothing)
{
    fhr_backend *b = cuda_or_skip();
    fhr_observation o = observe(b);
    cr_assert_geq(o.pool_granule_bytes, 2 * MiB, "granule %llu",
                  (unsigned long long)o.pool_granule_bytes);
    cr_assert_eq(o.pool_reserved_bytes, 0, "the measuring allocation is trimmed away");
    cr_assert_eq(o.pool_reserved_high_bytes, 0, "and the high-water marks reset");
    cr_assert_eq(o.pool_used_high_bytes, 0);
    void *p = NULL, *q = NULL;
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), KEY, NULL, &p, NULL), FHR_OK);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_cuda(0), KEY, NULL, &q, NULL), FHR_OK);
    o = observe(b);
    cr_assert_eq(o.pool_used_high_bytes, 2 * KEY);
    cr_assert_eq(o.pool_reserved_high_bytes, round_up(2 * KEY, o.pool_granule_bytes),
                 "held %llu for %llu handed out, granule %llu",
                 (unsigned long long)o.pool_reserved_high_bytes, (unsigned long long)(2 * KEY),
                 (unsigned long long)o.pool_granule_bytes);
    b->ops->free(b, fhr_loc_cuda(0), p, KEY, NULL);
    b->ops->free(b, fhr_loc_cuda(0), q, KEY, NULL);
    fhr_backend_destroy(b);
}

/* Keys streamed through budgets of 4 and 8 keys, the engine (spin kernels on the per-thread
 * stream) run ahead and throttled by FHR_USE_WAIT: the pool hands out at most the budget,
 * and holds at most that rounded up to one growth granule (the victims' frees are ordered
 * on the stream that allocates the next key, so the pool reuses them). */
Test(cuda_pool, streamed_keys_hold_the_budget_rounded_up_to_one_granule, .timeout = 120)
{
    fhr_backend *b = cuda_or_skip();
    void *pinned[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        cr_assert_eq(b->ops->alloc(b, fhr_loc_pinned(), KEY, NULL, &pinned[k], NULL), FHR_OK);
    fhr_stream *view = NULL;
    cr_assert_eq(fhr_stream_wrap_cuda(b, 0, cudaStreamPerThread, &view, NULL), FHR_OK);
    const int budgets[] = {4, 8};
    for (int bi = 0; bi < 2; bi++) {
        uint64_t budget = (uint64_t)budgets[bi] * KEY;
        fhr_budget bud = {fhr_loc_cuda(0), budget};
        fhr_manager_config cfg = {b, &bud, 1, 0};
        fhr_manager *m = NULL;
        cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
        fhr_handle keys[NKEYS];
        for (int k = 0; k < NKEYS; k++) {
            fhr_value *v = NULL;
            size_t bix;
            cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
            cr_assert_eq(fhr_value_add_buffer(v, pinned[k], KEY, NULL, NULL, &bix, NULL), FHR_OK);
            cr_assert_eq(fhr_value_add_field(v, "key", bix, 0, KEY, NULL), FHR_OK);
            fhr_adopt_opts ao = {FHR_REPLICABLE, NULL, 0};
            cr_assert_eq(fhr_adopt(m, &v, &ao, &keys[k], NULL), FHR_OK);
        }
        fhr_future_use fut[2 * NKEYS];
        for (int i = 0; i < 2 * NKEYS; i++) { /* serpentine: pass 2 walks back */
            int k = i < NKEYS ? i : 2 * NKEYS - 1 - i;
            fut[i] = (fhr_future_use){(uint64_t)i + 1, keys[k], fhr_loc_cuda(0), 0};
        }
        fhr_location fb[] = {fhr_loc_pinned()};
        fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
        fhr_policy *pol = NULL;
        fhr_controller *c = NULL;
        cr_assert_eq(fhr_policy_lookahead_create(&chain, 1, fut, 2 * NKEYS, &pol, NULL), FHR_OK);
        cr_assert_eq(fhr_controller_create(m, pol, &c, NULL), FHR_OK);
        fhr_stream_map cons = {fhr_loc_cuda(0), view};
        fhr_use_opts wait = {FHR_USE_WAIT, 0};
        uint64_t waits = 0;
        for (int i = 0; i < 2 * NKEYS; i++) {
            fhr_requirement rq = {fut[i].handle, fhr_loc_cuda(0), 0};
            fhr_request req = {"rot", &rq, 1, NULL, 0, (uint64_t)i + 1};
            fhr_use *u = NULL;
            fhr_error e;
            fhr_error_init(&e);
            cr_assert_eq(fhr_use_begin_opts(c, &req, &cons, 1, NULL, 0, &wait, &u, &e), FHR_OK,
                         "use %d: %s", i, e.message);
            cr_assert_eq(fhk_spin(view, 3000000, NULL), FHR_OK); /* a key's rotations */
            cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
            waits += fhr_report_waits(fhr_use_report(u));
            fhr_use_destroy(u);
        }
        cr_assert_eq(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
        fhr_snapshot *s = NULL;
        cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
        const fhr_loc_stats *ls = fhr_snapshot_loc(s, fhr_loc_cuda(0));
        fhr_observation o = ls->obs;
        cr_assert(o.valid);
        cr_assert_gt(waits, 0, "%d keys: the engine ran ahead of the budget", budgets[bi]);
        cr_assert_leq(ls->peak_charged_bytes, budget);
        cr_assert_leq(o.pool_used_high_bytes, budget, "%d keys: handed out %llu", budgets[bi],
                      (unsigned long long)o.pool_used_high_bytes);
        cr_assert_leq(o.pool_reserved_high_bytes, round_up(budget, o.pool_granule_bytes),
                      "%d keys: held %llu, budget %llu, granule %llu", budgets[bi],
                      (unsigned long long)o.pool_reserved_high_bytes, (unsigned long long)budget,
                      (unsigned long long)o.pool_granule_bytes);
        fhr_snapshot_free(s);
        fhr_controller_destroy(c);
        fhr_policy_destroy(pol);
        fhr_manager_destroy(m);
    }
    fhr_stream_destroy(b, view);
    for (int k = 0; k < NKEYS; k++)
        b->ops->free(b, fhr_loc_pinned(), pinned[k], KEY, NULL);
    fhr_backend_destroy(b);
}
