/* tests/unit/test_lookahead.c — the lookahead policy against independent oracles:
 * Belady's MIN miss count for equal sizes (matched exactly), and an exhaustive solver
 * for unequal sizes and unequal restore costs (keys whose device copies regenerate part
 * of their bytes): the heuristic's gap in bytes over the link, never below the optimum. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "fheplan/controller.h"

#include <stdio.h>

/* ---- oracles ---------------------------------------------------------------------- */

/* Belady's MIN for unit sizes: misses with a cache of c items. */
static int min_misses(const int *trace, int t, int c)
{
    int cache[64], n = 0, misses = 0;
    for (int i = 0; i < t; i++) {
        int hit = 0;
        for (int k = 0; k < n; k++)
            hit |= cache[k] == trace[i];
        if (hit)
            continue;
        misses++;
        if (n < c) {
            cache[n++] = trace[i];
            continue;
        }
        int victim = 0, far = -1;
        for (int k = 0; k < n; k++) {
            int nx = t; /* never again */
            for (int j = i + 1; j < t; j++)
                if (trace[j] == cache[k]) {
                    nx = j;
                    break;
                }
            if (nx > far) {
                far = nx;
                victim = k;
            }
        }
        cache[victim] = trace[i];
    }
    return misses;
}

/* Exact minimum of the bytes loaded over the link (restore[k] per load of key k, which
 * occupies size[k]): search over every legal eviction set. */
static uint64_t exact_cost(const int *trace, int t, int i, unsigned mask, const uint64_t *size,
                           const uint64_t *restore, int nkeys, uint64_t budget)
{
    if (i == t)
        return 0;
    int want = trace[i];
    if (mask & (1u << want))
        return exact_cost(trace, t, i + 1, mask, size, restore, nkeys, budget);
    uint64_t best = UINT64_MAX;
    unsigned others = mask;
    for (unsigned ev = others;; ev = (ev - 1) & others) { /* every subset to evict */
        unsigned keep = mask & ~ev;
        uint64_t used = 0;
        for (int k = 0; k < nkeys; k++)
            if (keep & (1u << k))
                used += size[k];
        if (used + size[want] <= budget) {
            uint64_t c = exact_cost(trace, t, i + 1, keep | (1u << want), size, restore, nkeys,
                                    budget);
            if (c != UINT64_MAX && c + restore[want] < best)
                best = c + restore[want];
        }
        if (!ev)
            break;
    }
    return best;
}

/* ---- the policy through the controller, on the model backend ---------------------- */

typedef struct run_result {
    uint64_t loads;   /* copies created at cuda:0 */
    uint64_t bytes;   /* bytes copied to cuda:0 (over the link, from the reports) */
    uint64_t regen;   /* bytes regenerated at cuda:0 */
    int failed;
} run_result;

/* regen NULL: plain keys; else key k's last regen[k] bytes are a regenerable field that
 * pinned copies omit (0: none). */
static run_result run_trace_regen(const int *trace, int t, const uint64_t *size,
                                  const uint64_t *regen, int nkeys, uint64_t budget,
                                  int lookahead)
{
    fhr_backend *b;
    cr_assert_eq(fhr_backend_model_create(1, &b, NULL), FHR_OK);
    fhr_budget bud = {fhr_loc_cuda(0), budget};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle keys[16];
    for (int k = 0; k < nkeys; k++) {
        fhr_value *v = NULL;
        cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
        size_t bi;
        uint64_t rg = regen ? regen[k] : 0;
        cr_assert_eq(fhr_value_alloc_buffer(v, b, size[k] - rg, NULL, &bi, NULL), FHR_OK);
        cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, size[k] - rg, NULL), FHR_OK);
        if (rg)
            cr_assert_eq(fhr_value_add_regenerable(v, "a", rg, FHR_GENERATOR_COUNTER, &k,
                                                   sizeof k, 0, NULL),
                         FHR_OK);
        fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
        cr_assert_eq(fhr_adopt(m, &v, &o, &keys[k], NULL), FHR_OK);
    }
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    fhr_future_use fut[64];
    for (int i = 0; i < t; i++)
        fut[i] = (fhr_future_use){(uint64_t)i + 1, keys[trace[i]], fhr_loc_cuda(0), 0};
    fhr_policy *p;
    if (lookahead)
        cr_assert_eq(fhr_policy_lookahead_create(&chain, 1, fut, (size_t)t, &p, NULL), FHR_OK);
    else
        cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, &p, NULL), FHR_OK);
    fhr_controller *c;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), cs};
    run_result r = {0, 0, 0, 0};
    uint64_t last_seq = 0;
    for (int i = 0; i < t; i++) {
        fhr_requirement rq = {keys[trace[i]], fhr_loc_cuda(0), 0};
        fhr_request req = {"use", &rq, 1, NULL, 0, (uint64_t)i + 1};
        int had = t_is_resident(m, rq.handle, rq.at);
        fhr_use *u = NULL;
        fhr_error e;
        fhr_error_init(&e);
        if (fhr_use_begin(c, &req, &cons, 1, NULL, 0, &u, &e) != FHR_OK) {
            r.failed = 1;
            fhr_error_clear(&e);
            break;
        }
        if (!had)
            r.loads++;
        /* the bytes each copy moved, as the manager recorded them */
        fhr_trace_entry tr[64];
        size_t nt = t_trace_read(m, tr, 64);
        for (size_t j = 0; j < nt; j++)
            if (tr[j].seq > last_seq && (tr[j].kind == FHR_TR_ENSURE || tr[j].kind == FHR_TR_MOVE) &&
                tr[j].to.kind == FHR_LOC_CUDA) {
                r.bytes += tr[j].nbytes;
                r.regen += size[trace[i]] - tr[j].nbytes;
            }
        if (nt)
            last_seq = tr[nt - 1].seq;
        cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
        fhr_use_destroy(u);
        t_reap(m);
    }
    fhr_stream_destroy(b, cs);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
    return r;
}

static run_result run_trace(const int *trace, int t, const uint64_t *size, int nkeys,
                            uint64_t budget, int lookahead)
{
    return run_trace_regen(trace, t, size, NULL, nkeys, budget, lookahead);
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

Test(lookahead, equal_sizes_match_belady_min_exactly)
{
    uint64_t seed = 0x5eed;
    uint64_t sizes[16];
    for (int k = 0; k < 16; k++)
        sizes[k] = 1000;
    long lru_total = 0, min_total = 0;
    for (int round = 0; round < 60; round++) {
        int nkeys = 3 + (int)(rng(&seed) % 10), t = 20 + (int)(rng(&seed) % 40);
        int cap = 1 + (int)(rng(&seed) % (unsigned)(nkeys - 1));
        int trace[64];
        for (int i = 0; i < t; i++)
            trace[i] = (int)(rng(&seed) % (unsigned)nkeys);
        int want = min_misses(trace, t, cap);
        run_result la = run_trace(trace, t, sizes, nkeys, (uint64_t)cap * 1000, 1);
        run_result lru = run_trace(trace, t, sizes, nkeys, (uint64_t)cap * 1000, 0);
        cr_assert_not(la.failed);
        cr_assert_not(lru.failed);
        cr_assert_eq(la.loads, (uint64_t)want, "round %d: lookahead %llu loads, MIN %d", round,
                     (unsigned long long)la.loads, want);
        cr_assert_geq(lru.loads, la.loads);
        lru_total += (long)lru.loads;
        min_total += want;
    }
    fprintf(stderr, "lookahead: 60 equal-size traces, MIN loads %ld, tiered LRU loads %ld\n",
            min_total, lru_total);
}

Test(lookahead, unequal_sizes_gap_to_the_exact_optimum)
{
    uint64_t seed = 0xabcdef;
    double worst = 1.0, sum = 0;
    int cases = 0, optimal = 0;
    for (int round = 0; round < 120; round++) {
        int nkeys = 3 + (int)(rng(&seed) % 3), t = 6 + (int)(rng(&seed) % 5);
        uint64_t size[8], maxs = 0, total = 0;
        for (int k = 0; k < nkeys; k++) {
            size[k] = 100 * (1 + rng(&seed) % 4);
            maxs = size[k] > maxs ? size[k] : maxs;
            total += size[k];
        }
        uint64_t budget = maxs + rng(&seed) % (total - maxs + 1);
        int trace[16];
        for (int i = 0; i < t; i++)
            trace[i] = (int)(rng(&seed) % (unsigned)nkeys);
        uint64_t best = exact_cost(trace, t, 0, 0, size, size, nkeys, budget);
        run_result la = run_trace(trace, t, size, nkeys, budget, 1);
        cr_assert_not(la.failed);
        cr_assert_geq(la.bytes, best, "round %d: below the optimum", round);
        double ratio = best ? (double)la.bytes / (double)best : 1.0;
        worst = ratio > worst ? ratio : worst;
        sum += ratio;
        cases++;
        optimal += la.bytes == best;
        cr_assert_leq(ratio, 2.0, "round %d: %llu bytes against an optimum of %llu", round,
                      (unsigned long long)la.bytes, (unsigned long long)best);
    }
    fprintf(stderr,
            "lookahead: %d unequal-size cases: optimal in %d, mean bytes/optimum %.3f, worst %.3f\n",
            cases, optimal, sum / cases, worst);
}

/* Restore costs differ from sizes: some keys regenerate part of their bytes on the
 * device. The objective is the bytes over the link. */
Test(lookahead, unequal_restore_costs_gap_to_the_exact_optimum)
{
    uint64_t seed = 0x2e57023;
    double worst = 1.0, sum = 0;
    int cases = 0, optimal = 0;
    for (int round = 0; round < 120; round++) {
        int nkeys = 3 + (int)(rng(&seed) % 3), t = 6 + (int)(rng(&seed) % 5);
        uint64_t size[8], regen[8], restore[8], maxs = 0, total = 0;
        for (int k = 0; k < nkeys; k++) {
            size[k] = 100 * (1 + rng(&seed) % 4);
            regen[k] = size[k] / 10 * (rng(&seed) % 8); /* 0 .. 70% regenerated */
            restore[k] = size[k] - regen[k];
            maxs = size[k] > maxs ? size[k] : maxs;
            total += size[k];
        }
        uint64_t budget = maxs + rng(&seed) % (total - maxs + 1);
        int trace[16];
        for (int i = 0; i < t; i++)
            trace[i] = (int)(rng(&seed) % (unsigned)nkeys);
        uint64_t best = exact_cost(trace, t, 0, 0, size, restore, nkeys, budget);
        run_result la = run_trace_regen(trace, t, size, regen, nkeys, budget, 1);
        cr_assert_not(la.failed);
        cr_assert_geq(la.bytes, best, "round %d: below the optimum", round);
        double ratio = best ? (double)la.bytes / (double)best : 1.0;
        worst = ratio > worst ? ratio : worst;
        sum += ratio;
        cases++;
        optimal += la.bytes == best;
        cr_assert_leq(ratio, 2.0, "round %d: %llu bytes against an optimum of %llu", round,
                      (unsigned long long)la.bytes, (unsigned long long)best);
    }
    fprintf(stderr,
            "lookahead: %d unequal-restore-cost cases: optimal in %d, mean link bytes/optimum "
            "%.3f, worst %.3f\n",
            cases, optimal, sum / cases, worst);
}

/* Belady's order would evict the key used farthest ahead; when the nearer one is far
 * cheaper to restore, evicting it moves fewer bytes (the objective is link bytes). */
Test(lookahead, cheap_restore_is_evicted_before_a_farther_expensive_one)
{
    int trace[] = {0, 1, 2, 1, 0};           /* at key 2: next use of 1 is 3, of 0 is 4 */
    uint64_t size[] = {100, 100, 100}, regen[] = {0, 70, 0}, restore[] = {100, 30, 100};
    uint64_t best = exact_cost(trace, 5, 0, 0, size, restore, 3, 200);
    run_result la = run_trace_regen(trace, 5, size, regen, 3, 200, 1);
    cr_assert_not(la.failed);
    cr_assert_eq(best, 100 + 30 + 100 + 30);  /* evict 1 (reload 30), not 0 (reload 100) */
    cr_assert_eq(la.bytes, best, "lookahead moved %llu bytes, the optimum is %llu",
                 (unsigned long long)la.bytes, (unsigned long long)best);
    cr_assert_eq(la.regen, 70 * 2, "key 1 was regenerated on both of its loads");
}

Test(lookahead, bad_futures_are_refused)
{
    fhr_policy *p = NULL;
    fhr_future_use f[2] = {{0, {1, 1}, {FHR_LOC_CUDA, 0}, 0}, {1, {2, 1}, {FHR_LOC_CUDA, 0}, 0}};
    cr_assert_eq(fhr_policy_lookahead_create(NULL, 0, f, 1, &p, NULL), FHR_E_INVALID);
    f[0].position = 1;
    cr_assert_eq(fhr_policy_lookahead_create(NULL, 0, f, 2, &p, NULL), FHR_E_HANDLE);
    cr_assert_null(p);
    cr_assert_eq(fhr_policy_lookahead_create(NULL, 0, f, 1, &p, NULL), FHR_OK);
    cr_assert_str_eq(fhr_policy_name(p), "lookahead");
    fhr_policy_destroy(p);
}

/* Of copies never used again, the one read longest ago goes (not the lowest handle): a run
 * that decides as if its bodies had ended then waits for the oldest body, not the newest
 * (examples/phantom's second pass: keys used in reverse, then none of them again). */
Test(lookahead, ties_among_copies_never_used_again_evict_the_least_recent)
{
    static const int trace[] = {3, 2, 1, 0, 4};
    const uint64_t size[5] = {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20};
    fhr_backend *b;
    cr_assert_eq(fhr_backend_model_create(1, &b, NULL), FHR_OK);
    fhr_budget bud = {fhr_loc_cuda(0), 4u << 20};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle keys[5];
    for (int k = 0; k < 5; k++) {
        fhr_value *v = NULL;
        size_t bi;
        cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
        cr_assert_eq(fhr_value_alloc_buffer(v, b, size[k], NULL, &bi, NULL), FHR_OK);
        cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, size[k], NULL), FHR_OK);
        fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
        cr_assert_eq(fhr_adopt(m, &v, &o, &keys[k], NULL), FHR_OK);
    }
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    fhr_future_use fut[5];
    for (int i = 0; i < 5; i++)
        fut[i] = (fhr_future_use){(uint64_t)i + 1, keys[trace[i]], fhr_loc_cuda(0), 0};
    fhr_policy *p;
    cr_assert_eq(fhr_policy_lookahead_create(&chain, 1, fut, 5, &p, NULL), FHR_OK);
    fhr_controller *c;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), cs};
    for (int i = 0; i < 5; i++) {
        fhr_requirement rq = {keys[trace[i]], fhr_loc_cuda(0), 0};
        fhr_request req = {"use", &rq, 1, NULL, 0, (uint64_t)i + 1};
        fhr_use *u = NULL;
        cr_assert_eq(fhr_use_begin(c, &req, &cons, 1, NULL, 0, &u, NULL), FHR_OK);
        cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
        fhr_use_destroy(u);
        t_reap(m);
    }
    cr_assert_not(t_is_resident(m, keys[3], fhr_loc_cuda(0)), "key 3, read first, goes");
    for (int k = 0; k < 3; k++)
        cr_assert(t_is_resident(m, keys[k], fhr_loc_cuda(0)), "key %d, read later, stays", k);
    fhr_stream_destroy(b, cs);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
