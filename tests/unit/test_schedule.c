/* tests/unit/test_schedule.c — bench/schedule.c's yardsticks against an exhaustive solver
 * of the same model on small random instances: the search finds the optimum exactly, the
 * bound never exceeds it, MIN's schedule and the rules-and-local-search alone never beat it. */
#include <criterion/criterion.h>
#include <math.h>

#include "bench/schedule.h"

/* ---- the oracle: every victim at every eviction -------------------------------------- */

typedef struct ex_state {
    uint32_t key[8];
    double free_t[8]; /* when the key's last body so far ends */
    size_t n;
} ex_state;

/* Fastest makespan of uses i.. from this state: loads in use order, each after the link
 * and its victim's last body; each body after its key and the body before it. */
static double exhaustive(const sched_in *in, size_t i, ex_state st, double link, double prev)
{
    if (i == in->n)
        return (prev > link ? prev : link) + in->tail_s;
    uint32_t k = in->key[i];
    size_t r = 0;
    while (k != SCHED_NO_KEY && r < st.n && st.key[r] != k)
        r++;
    if (k == SCHED_NO_KEY || r < st.n) { /* no key, or resident */
        double end = prev + in->body_s[i];
        if (k != SCHED_NO_KEY)
            st.free_t[r] = end;
        return exhaustive(in, i + 1, st, link, end);
    }
    if (st.n < in->capacity) {
        double ready = link + in->load_s;
        double end = (prev > ready ? prev : ready) + in->body_s[i];
        st.key[st.n] = k;
        st.free_t[st.n++] = end;
        return exhaustive(in, i + 1, st, ready, end);
    }
    double best = INFINITY;
    for (size_t v = 0; v < st.n; v++) {
        ex_state c = st;
        double start = link > c.free_t[v] ? link : c.free_t[v];
        double ready = start + in->load_s;
        double end = (prev > ready ? prev : ready) + in->body_s[i];
        c.key[v] = k;
        c.free_t[v] = end;
        double t = exhaustive(in, i + 1, c, ready, end);
        if (t < best)
            best = t;
    }
    return best;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double unit(uint64_t *s) { return (double)(rng(s) % 1000000) / 1e6; }

typedef struct inst {
    uint32_t key[12];
    double body[12];
    sched_in in;
} inst;

static void random_instance(uint64_t *seed, inst *x)
{
    size_t n = 5 + rng(seed) % 8, nkeys = 2 + rng(seed) % 4;
    for (size_t i = 0; i < n; i++) {
        x->key[i] = rng(seed) % 8 == 0 ? SCHED_NO_KEY : (uint32_t)(rng(seed) % nkeys);
        x->body[i] = 0.05 + 2 * unit(seed);
    }
    x->in = (sched_in){x->key, x->body, n, 1 + rng(seed) % 3, 0.2 + 2 * unit(seed),
                       0.3 * unit(seed), 0.3 * unit(seed), 0};
}

Test(schedule, search_matches_exhaustive_enumeration)
{
    uint64_t seed = 0x5c4ed;
    int beats_min = 0;
    for (int it = 0; it < 400; it++) {
        inst x;
        random_instance(&seed, &x);
        sched_out y;
        cr_assert_eq(sched_yardsticks(&x.in, &y), 0);
        ex_state st = {{0}, {0}, 0};
        double opt = exhaustive(&x.in, 0, st, x.in.lead_s, x.in.lead_s);
        double eps = 1e-9 * opt;
        cr_assert(y.search_exact, "instance %d: a small search must finish", it);
        cr_assert_float_eq(y.search_s, opt, eps, "instance %d: search %.9f, optimum %.9f", it,
                           y.search_s, opt);
        cr_assert_leq(y.bound_s, opt + eps, "instance %d: bound %.9f above the optimum %.9f", it,
                      y.bound_s, opt);
        cr_assert_geq(y.best_s, opt - eps, "instance %d: MIN's schedule below the optimum", it);
        cr_assert_leq(y.search_s, y.best_s + eps);
        cr_assert_geq(y.search_loads, y.min_loads, "instance %d: fewer loads than MIN", it);
        cr_assert_geq(y.search_idle_s, 0);
        if (y.exact)
            cr_assert_float_eq(y.bound_s, opt, eps, "instance %d: all keys fit", it);
        beats_min += opt < y.best_s - eps;
    }
    /* the time objective matters: on some instances no MIN schedule is optimal */
    cr_assert_gt(beats_min, 0);
}

Test(schedule, rules_and_local_search_alone_stay_feasible)
{
    uint64_t seed = 0xb0075;
    int cut = 0;
    for (int it = 0; it < 200; it++) {
        inst x;
        random_instance(&seed, &x);
        x.in.node_limit = 1; /* the branch-and-bound stops at once */
        sched_out y;
        cr_assert_eq(sched_yardsticks(&x.in, &y), 0);
        ex_state st = {{0}, {0}, 0};
        double opt = exhaustive(&x.in, 0, st, x.in.lead_s, x.in.lead_s);
        cr_assert_geq(y.search_s, opt * (1 - 1e-9), "instance %d: below the optimum", it);
        cr_assert_leq(y.search_s, y.best_s * (1 + 1e-9), "instance %d: slower than MIN's", it);
        cut += !y.search_exact;
    }
    cr_assert_gt(cut, 0, "a node limit of 1 must stop some searches");
}

Test(schedule, bootstrap_sequence_at_a_quarter)
{
    /* the bootstrap's key sequence (CoeffToSlot 0..54, conj, 50 relin, SlotToCoeff 76..22)
     * with 19 slots: the search beats MIN's schedule or ties it, stays above the bound */
    uint32_t key[161];
    double body[161];
    size_t n = 0;
    for (uint32_t i = 0; i <= 54; i++)
        key[n++] = i;
    key[n++] = 77;
    for (int j = 0; j < 50; j++)
        key[n++] = 78;
    for (uint32_t k = 0; k <= 54; k++)
        key[n++] = 76 - k;
    for (size_t i = 0; i < n; i++)
        body[i] = 2.0e-3;
    sched_in in = {key, body, n, 19, 3.4e-3, 0.8e-3, 0.8e-3, 20000};
    sched_out y;
    cr_assert_eq(sched_yardsticks(&in, &y), 0);
    cr_assert_leq(y.bound_s, y.search_s * (1 + 1e-9));
    cr_assert_leq(y.search_s, y.best_s * (1 + 1e-9));
    cr_assert_geq(y.search_loads, y.min_loads);
}
