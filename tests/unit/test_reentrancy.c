/* tests/unit/test_reentrancy.c — while a source load runs, every other call on the
 * manager fails at once, from the loading thread and from others; the id stays. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

#include <pthread.h>

typedef struct blocker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, release;
    fhr_manager *m;
    fhr_handle other;
    fhr_status self_status;
    uint64_t self_id;
} blocker;

static fhr_status blocking_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                                fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec; (void)at; (void)b; (void)s; (void)err;
    blocker *bl = ctx;
    /* the loading thread itself is refused too */
    bl->self_status = fhr_ensure(bl->m, bl->other, fhr_loc_pinned(), NULL, NULL);
    bl->self_id = fhr_manager_id(bl->m);
    pthread_mutex_lock(&bl->mu);
    bl->inside = 1;
    pthread_cond_broadcast(&bl->cv);
    while (!bl->release)
        pthread_cond_wait(&bl->cv, &bl->mu);
    pthread_mutex_unlock(&bl->mu);
    *out = host_value(32, 5);
    return FHR_OK;
}

typedef struct loader_arg {
    fhr_manager *m;
    fhr_handle h;
    fhr_status st;
} loader_arg;

static void *loader(void *p)
{
    loader_arg *a = p;
    a->st = fhr_ensure(a->m, a->h, fhr_loc_host(), NULL, NULL);
    return NULL;
}

Test(threads_reentrancy, every_call_fails_fast_while_load_runs)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    blocker bl = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, m, {0, 0}, 0, 0};
    bl.other = adopt_n(m, 16, 1, FHR_REPLICABLE);
    fhr_field_spec f;
    fhr_value_spec spec = pat_spec(&f, 32);
    fhr_source src = {blocking_load, &bl, NULL};
    fhr_handle h;
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &h, NULL), FHR_OK);

    loader_arg la = {m, h, FHR_OK};
    pthread_t t;
    pthread_create(&t, NULL, loader, &la);
    pthread_mutex_lock(&bl.mu);
    while (!bl.inside)
        pthread_cond_wait(&bl.cv, &bl.mu);
    pthread_mutex_unlock(&bl.mu);

    /* from this (other) thread, while load() is blocked */
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m, bl.other, fhr_loc_pinned(), NULL, &e), FHR_E_REENTRANT);
    cr_assert(strstr(e.message, "source load"), "%s", e.message);
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_E_REENTRANT, "observers are refused too");
    cr_assert_eq(fhr_drop(m, bl.other, fhr_loc_host(), NULL), FHR_E_REENTRANT);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &bl.other, 1, fhr_loc_host(), NULL, &l, NULL), FHR_E_REENTRANT);
    cr_assert_eq(fhr_set_budget(m, fhr_loc_pinned(), 1, NULL), FHR_E_REENTRANT);
    cr_assert_eq(fhr_trace_set_capacity(m, 4, NULL), FHR_E_REENTRANT);
    cr_assert_eq(fhr_manager_id(m), bl.self_id, "the id stays readable");
    /* the observers' one error channel: a status, never a zero that reads as real */
    int res = 7;
    uint64_t ver = 7;
    size_t nr = 7, nt = 7;
    char *tj = (char *)&res;
    fhr_trace_entry te[2];
    fhr_error_clear(&e);
    cr_assert_eq(fhr_is_resident(m, bl.other, fhr_loc_host(), &res, &e), FHR_E_REENTRANT);
    cr_assert(res == 0 && strstr(e.message, "is_resident: refused while a source load"), "%s",
              e.message);
    cr_assert_eq(fhr_state_version(m, &ver, NULL), FHR_E_REENTRANT);
    cr_assert_eq(ver, 0);
    cr_assert_eq(fhr_reap(m, &nr, NULL), FHR_E_REENTRANT);
    cr_assert_eq(nr, 0);
    cr_assert_eq(fhr_trace_read(m, te, 2, &nt, NULL), FHR_E_REENTRANT);
    cr_assert_eq(nt, 0);
    cr_assert_eq(fhr_trace_json(m, &tj, NULL), FHR_E_REENTRANT);
    cr_assert_null(tj);
    fhr_plan *p = NULL;
    fhr_action act = {FHR_ACT_ENSURE, bl.other, fhr_loc_pinned(), 0, {0, 0}, 0};
    fhr_plan_desc d = {"p", NULL, 0, &act, 1, NULL, 0, NULL, 0};
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc = NULL;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK,
                 "constructing a scope touches no manager state");

    pthread_mutex_lock(&bl.mu);
    bl.release = 1;
    pthread_cond_broadcast(&bl.cv);
    pthread_mutex_unlock(&bl.mu);
    pthread_join(t, NULL);
    cr_assert_eq(la.st, FHR_OK);
    cr_assert_eq(bl.self_status, FHR_E_REENTRANT);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_host()), 1);
    cr_assert_eq(t_is_resident(m, bl.other, fhr_loc_pinned()), 0, "a refused call changed state");
    cr_assert_eq(fhr_scope_enter(sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, NULL), FHR_OK);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
