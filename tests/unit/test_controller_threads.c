/* tests/unit/test_controller_threads.c — several threads sharing one controller and
 * manager: each uses its own value at a budgeted cuda:0 that fits only some of them,
 * so decisions evict each other's cached copies, go stale or are infeasible while
 * others hold leases. The controller never waits or retries: the threads do. Runs
 * under TSan (`make tsan`). */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

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
    fhr_requirement rq = {w->h, fhr_loc_cuda(0)};
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

Test(threads_controller, concurrent_uses_share_one_controller)
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
