/* tests/unit/test_controller_threads.c — several threads sharing one controller and
 * manager: each uses its own value at a budgeted cuda:0 that fits only some of them,
 * so decisions evict each other's cached copies; with the interleaving forced by gates,
 * a decision goes stale (another thread committed meanwhile) and one is infeasible
 * (the others hold leases on every copy there). The controller never waits or retries:
 * the threads do. Runs under TSan (`make tsan`). */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "backend_gate.h"
#include "runtime/control/victim_index.h"

#include <pthread.h>

typedef struct worker {
    fhr_controller *c;
    fhr_backend *b;
    fhr_manager *m;
    fhr_handle h;
    int ok, stale, infeasible, other;
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    fhr_stream *s = NULL;
    if (fhr_stream_create(w->b, fhr_loc_cuda(0), &s, NULL) != FHR_OK) {
        w->other++;
        return NULL;
    }
    fhr_stream_map cons = {fhr_loc_cuda(0), s};
    fhr_requirement rq = {w->h, fhr_loc_cuda(0), 0};
    fhr_request req = {"worker", &rq, 1, NULL, 0, 0};
    for (int i = 0; i < 400 && w->ok < 40; i++) {
        fhr_use *u = NULL;
        fhr_error e;
        fhr_error_init(&e);
        fhr_status st = fhr_use_begin(w->c, &req, &cons, 1, NULL, 0, &u, &e);
        if (st == FHR_OK) {
            if (!fhr_use_value(u, w->h, fhr_loc_cuda(0)))
                w->other++;
            if (fhr_use_end(u, FHR_OK, NULL) != FHR_OK)
                w->other++;
            fhr_use_destroy(u);
            w->ok++;
        } else if (st == FHR_E_STALE || (st == FHR_E_PLAN && e.cause == FHR_E_PROTECTED)) {
            w->stale++;
        } else if (st == FHR_E_INFEASIBLE) {
            w->infeasible++;
        } else {
            w->other++;
            fprintf(stderr, "worker: %s: %s\n", fhr_status_name(st), e.message);
        }
        fhr_error_clear(&e);
        fhr_stream_sync(w->b, s, NULL);
        t_reap(w->m);
    }
    fhr_stream_destroy(w->b, s);
    return NULL;
}

Test(threads_controller, concurrent_uses_stay_in_budget_and_lose_nothing)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 300};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_policy *p = NULL;
    fhr_location t[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), t, 1};
    cr_assert_eq(fhr_policy_tiered_lru_create(&ch, 1, &p, NULL), FHR_OK);
    fhr_controller *c = NULL;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    enum { N = 4 };
    worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].c = c;
        w[i].b = b;
        w[i].m = m;
        w[i].h = adopt_n(m, 100, (uint64_t)i, i % 2 ? FHR_EXCLUSIVE : FHR_REPLICABLE);
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, run_worker, &w[i]), 0);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].other, 0, "worker %d: unexpected failures", i);
        ok += w[i].ok;
    }
    cr_assert_gt(ok, 0);
    char why[256] = ""; /* the victim index, kept by whichever thread held the cache */
    cr_assert(controller_check_index(c, why, sizeof why), "%s", why);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_leq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->used_bytes, 300);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 0);
    for (size_t i = 0; i < s->nvalues; i++)
        cr_assert_geq(s->values[i].ncopies, 1, "nothing was discarded");
    fhr_snapshot_free(s);
    check_accounting(m);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A policy that decides like tiered LRU but, when asked to, stops after deciding until
 * the test opens its gate: the decision is then made against an older state. */
typedef struct stalling {
    fhr_policy *inner;
    gate g;
    int stall; /* the next decide stalls once */
} stalling;

static fhr_status stalling_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                                  fhr_policy_out *out, fhr_error *err)
{
    stalling *sp = ctx;
    fhr_status st = fhr_policy_decide(sp->inner, snap, req, out, err);
    if (__atomic_exchange_n(&sp->stall, 0, __ATOMIC_SEQ_CST))
        gate_wait(&sp->g);
    return st;
}

static void stalling_destroy(void *ctx) { (void)ctx; }

typedef struct user {
    fhr_controller *c;
    fhr_backend *b;
    fhr_handle h;
    fhr_stream *s;
    gate *hold;   /* NULL: end the use at once; else wait here holding it */
    gate *inside; /* counts users inside their use */
    fhr_status st;
    fhr_error e;
} user;

static void *use_once(void *arg)
{
    user *u = arg;
    fhr_stream_map cons = {fhr_loc_cuda(0), u->s};
    fhr_requirement rq = {u->h, fhr_loc_cuda(0), 0};
    fhr_request req = {"user", &rq, 1, NULL, 0, 0};
    fhr_use *use = NULL;
    fhr_error_init(&u->e);
    u->st = fhr_use_begin(u->c, &req, &cons, 1, NULL, 0, &use, &u->e);
    if (u->inside) { /* count in, failed or not, so that the test never waits forever */
        pthread_mutex_lock(&u->inside->mu);
        u->inside->entered++;
        pthread_cond_broadcast(&u->inside->cv);
        pthread_mutex_unlock(&u->inside->mu);
    }
    if (u->st == FHR_OK) {
        if (u->hold)
            gate_wait(u->hold);
        fhr_use_end(use, FHR_OK, NULL);
        fhr_use_destroy(use);
    }
    return NULL;
}

Test(threads_controller, a_decision_goes_stale_and_one_is_infeasible_while_others_hold)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 300};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_location t[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), t, 1};
    stalling sp = {0};
    gate_init(&sp.g);
    cr_assert_eq(fhr_policy_tiered_lru_create(&ch, 1, &sp.inner, NULL), FHR_OK);
    fhr_policy_ops ops = {"stalling", stalling_decide, stalling_destroy};
    fhr_policy *p = NULL;
    cr_assert_eq(fhr_policy_create(&ops, &sp, &p, NULL), FHR_OK);
    fhr_controller *c = NULL;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    enum { N = 4 };
    user u[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        memset(&u[i], 0, sizeof u[i]);
        u[i].c = c;
        u[i].b = b;
        u[i].h = adopt_n(m, 100, (uint64_t)i, FHR_REPLICABLE);
        cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &u[i].s, NULL), FHR_OK);
    }

    /* stale: user 0 decides, stalls; user 1 commits a use meanwhile; user 0 is refused */
    __atomic_store_n(&sp.stall, 1, __ATOMIC_SEQ_CST);
    cr_assert_eq(pthread_create(&th[0], NULL, use_once, &u[0]), 0);
    gate_await_entered(&sp.g, 1);
    use_once(&u[1]);
    cr_assert_eq(u[1].st, FHR_OK, "%s", u[1].e.message);
    gate_open(&sp.g);
    pthread_join(th[0], NULL);
    cr_assert_eq(u[0].st, FHR_E_STALE, "status %s: %s", fhr_status_name(u[0].st),
                 u[0].e.message);

    /* infeasible: users 0..2 hold uses that fill cuda:0; user 3 cannot be placed */
    gate hold, inside;
    gate_init(&hold);
    gate_init(&inside);
    for (int i = 0; i < 3; i++) {
        u[i].hold = &hold;
        u[i].inside = &inside;
        cr_assert_eq(pthread_create(&th[i], NULL, use_once, &u[i]), 0);
        gate_await_entered(&inside, i + 1); /* one at a time: none goes stale */
        cr_assert_eq(u[i].st, FHR_OK, "user %d: %s", i, u[i].e.message);
    }
    use_once(&u[3]);
    cr_assert_eq(u[3].st, FHR_E_INFEASIBLE, "status %s: %s", fhr_status_name(u[3].st),
                 u[3].e.message);
    gate_open(&hold);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);

    for (int i = 0; i < N; i++) {
        fhr_stream_sync(b, u[i].s, NULL);
        fhr_stream_destroy(b, u[i].s);
        fhr_error_clear(&u[i].e);
    }
    t_reap(m);
    check_accounting(m);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_policy_destroy(sp.inner);
    gate_fini(&hold);
    gate_fini(&inside);
    gate_fini(&sp.g);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
