/* tests/unit/test_engine_threads.c — throttled use from several engine threads at once:
 * each thread computes on a view of its own stream, and the host waits of one thread
 * (outside the manager lock) never block the others' decisions (also run under TSan). */
#include "fheplan/residency.h"
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

#include <pthread.h>
#include <time.h>

#define TKEY 8192
#define TKEYS 6
#define TUSES 40

/* Both engines' streams start behind one gate, so that their hosts run ahead. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void gate_wait(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct engine_thread {
    gate *g;
    fhr_backend *b;
    fhr_controller *c;
    const fhr_handle *keys;
    int seed;
    fhr_status st;
    uint64_t waits, bytes;
} engine_thread;

static void busy_kernel(void *arg)
{
    (void)arg;
    struct timespec t = {0, 200000};
    nanosleep(&t, NULL);
}

static void *engine_main(void *arg)
{
    engine_thread *t = arg;
    fhr_stream *native = NULL, *view = NULL;
    t->st = fhr_stream_create(t->b, fhr_loc_cuda(0), &native, NULL);
    if (t->st == FHR_OK)
        t->st = fhr_stream_wrap(t->b, fhr_loc_cuda(0), native, &view, NULL);
    if (t->st == FHR_OK)
        t->st = fhr_launch_host(t->b, native, gate_wait, t->g, NULL);
    fhr_stream_map cons = {fhr_loc_cuda(0), view};
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    for (int i = 0; i < TUSES && t->st == FHR_OK; i++) {
        fhr_requirement rq = {t->keys[(i * 5 + t->seed) % TKEYS], fhr_loc_cuda(0), 0};
        fhr_request req = {"rot", &rq, 1, NULL, 0, 0};
        fhr_use *u = NULL;
        fhr_error e;
        fhr_error_init(&e);
        t->st = fhr_use_begin_opts(t->c, &req, &cons, 1, NULL, 0, &wait, &u, &e);
        if (t->st != FHR_OK) {
            fprintf(stderr, "engine thread (seed %d), use %d: %s\n", t->seed, i, e.message);
            fhr_error_clear(&e);
            break;
        }
        fhr_launch_host(t->b, native, busy_kernel, NULL, NULL);
        t->st = fhr_use_end(u, FHR_OK, NULL);
        t->waits += fhr_report_waits(fhr_use_report(u));
        t->bytes += fhr_report_bytes(fhr_use_report(u), FHR_DIR_H2D);
        fhr_use_destroy(u);
    }
    if (native)
        fhr_stream_sync(t->b, native, NULL);
    fhr_stream_destroy(t->b, view);
    fhr_stream_destroy(t->b, native);
    return NULL;
}

Test(threads_engine, throttled_engines_share_one_manager)
{
    fhr_backend *b = emu_backend(1);
    /* room for three keys: two engines each keep up to two in flight */
    fhr_budget bud = {fhr_loc_cuda(0), 3 * TKEY};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle keys[TKEYS];
    for (int k = 0; k < TKEYS; k++) {
        fhr_value *v = NULL;
        cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
        size_t bi;
        cr_assert_eq(fhr_value_alloc_buffer(v, b, TKEY, NULL, &bi, NULL), FHR_OK);
        cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, TKEY, NULL), FHR_OK);
        fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
        cr_assert_eq(fhr_adopt(m, &v, &o, &keys[k], NULL), FHR_OK);
    }
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    fhr_policy *p;
    cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, &p, NULL), FHR_OK);
    fhr_controller *c;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    engine_thread t[2] = {{&g, b, c, keys, 0, FHR_OK, 0, 0}, {&g, b, c, keys, 3, FHR_OK, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, engine_main, &t[i]), 0);
    struct timespec later = {0, 50 * 1000 * 1000};
    nanosleep(&later, NULL);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(t[i].st, FHR_OK, "engine %d: %s", i, fhr_status_name(t[i].st));
    cr_assert_gt(t[0].waits + t[1].waits, 0, "the budget forced waits");
    cr_assert_gt(t[0].bytes + t[1].bytes, 0);
    t_reap(m);
    check_accounting(m);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_leq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->peak_charged_bytes, 3 * TKEY);
    fhr_snapshot_free(s);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
