/* tests/unit/test_concurrency.c — the manager and controller under interleavings forced
 * deterministically (a source load held on a condition variable, a copy held on a gate,
 * waits counted as they start; never a sleep): destroys during another thread's load
 * finish with the caller's streams before they return, a refused use_end changes nothing,
 * an infeasible request is decided once, in-flight copies count everywhere admission is
 * decided and a waiting use waits for them, omitted fields are counted as charged, snapshots keep no state across managers,
 * and fhr_wait_pending and fhr_manager_value_to directly. */
#include "gated_backend.h"
#include "mgr_helpers.h"
#include "fheplan/controller.h"
#include "base/error.h"
#include "tests/unit/observe.h"

#include <pthread.h>
#include <time.h>

/* ---- a backend that watches the streams the test hands to the manager ---------------- *
 * fhr_stream_destroy of a watched stream only marks it dead (the stream itself lives on
 * until the backend goes, so a late use neither crashes nor hangs): any later work on it
 * is a violation. Event records on it are counted with the thread that made them. */

#define WATCH_MAX 8

typedef struct watched {
    fhr_backend base;
    fhr_backend *inner;
    fhr_backend_ops ops;
    pthread_mutex_t mu;
    fhr_stream *s[WATCH_MAX];
    int dead[WATCH_MAX];
    size_t n;
    int violations;      /* work enqueued on, or a wait for, a dead stream */
    int records;         /* event records on watched streams */
    int foreign_records; /* ... made by a thread other than `owner` */
    pthread_t owner;
    int fail_records;    /* the next N event records (any stream) fail */
} watched;

static watched *W(fhr_backend *b) { return (watched *)b->impl; }

/* -1: not watched; else its index. Lock held. */
static int watch_find(watched *w, fhr_stream *s)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->s[i] == s)
            return (int)i;
    return -1;
}

static void watch_touch(fhr_backend *b, fhr_stream *s)
{
    watched *w = W(b);
    pthread_mutex_lock(&w->mu);
    int i = watch_find(w, s);
    if (i >= 0 && w->dead[i])
        w->violations++;
    pthread_mutex_unlock(&w->mu);
}

static fhr_status w_event_record(fhr_backend *b, fhr_event *e, fhr_stream *s, fhr_error *err)
{
    watched *w = W(b);
    pthread_mutex_lock(&w->mu);
    int i = watch_find(w, s), fail = w->fail_records > 0;
    if (fail)
        w->fail_records--;
    if (i >= 0) {
        w->violations += w->dead[i];
        w->records++;
        w->foreign_records += !pthread_equal(pthread_self(), w->owner);
    }
    pthread_mutex_unlock(&w->mu);
    if (fail)
        return fhr_fail(err, FHR_E_BACKEND, "watched: event record refused by the test");
    return w->inner->ops->event_record(w->inner, e, s, err);
}

static fhr_status w_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    watch_touch(b, s);
    return W(b)->inner->ops->stream_sync(W(b)->inner, s, err);
}

static fhr_status w_stream_wait_event(fhr_backend *b, fhr_stream *s, fhr_event *e,
                                      fhr_error *err)
{
    watch_touch(b, s);
    return W(b)->inner->ops->stream_wait_event(W(b)->inner, s, e, err);
}

static fhr_status w_copy(fhr_backend *b, void *dst, fhr_location dloc, const void *src,
                         fhr_location sloc, size_t n, fhr_stream *s, fhr_error *err)
{
    watch_touch(b, s);
    return W(b)->inner->ops->copy(W(b)->inner, dst, dloc, src, sloc, n, s, err);
}

static fhr_status w_launch_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                fhr_error *err)
{
    watch_touch(b, s);
    return W(b)->inner->ops->launch_host(W(b)->inner, s, fn, arg, err);
}

static void w_stream_destroy(fhr_backend *b, fhr_stream *s)
{
    watched *w = W(b);
    pthread_mutex_lock(&w->mu);
    int i = watch_find(w, s);
    if (i >= 0)
        w->dead[i] = 1;
    pthread_mutex_unlock(&w->mu);
    if (i < 0)
        w->inner->ops->stream_destroy(w->inner, s);
}

static void w_destroy(fhr_backend *b)
{
    watched *w = W(b);
    for (size_t i = 0; i < w->n; i++)
        w->inner->ops->stream_destroy(w->inner, w->s[i]);
    w->inner->ops->destroy(w->inner);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

#define WI(b) (W(b)->inner)
static int w_device_count(fhr_backend *b) { return WI(b)->ops->device_count(WI(b)); }
static fhr_status w_alloc(fhr_backend *b, fhr_location loc, size_t n, fhr_stream *s, void **out,
                          fhr_error *err)
{
    return WI(b)->ops->alloc(WI(b), loc, n, s, out, err);
}
static void w_free(fhr_backend *b, fhr_location loc, void *p, size_t n, fhr_stream *s)
{
    WI(b)->ops->free(WI(b), loc, p, n, s);
}
static fhr_status w_stream_create(fhr_backend *b, fhr_location loc, fhr_stream **out,
                                  fhr_error *err)
{
    return WI(b)->ops->stream_create(WI(b), loc, out, err);
}
static fhr_status w_event_create(fhr_backend *b, fhr_event **out, fhr_error *err)
{
    return WI(b)->ops->event_create(WI(b), out, err);
}
static void w_event_destroy(fhr_backend *b, fhr_event *e) { WI(b)->ops->event_destroy(WI(b), e); }
static int w_event_query(fhr_backend *b, fhr_event *e) { return WI(b)->ops->event_query(WI(b), e); }
static fhr_status w_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    return WI(b)->ops->event_sync(WI(b), e, err);
}
static void w_observe(fhr_backend *b, fhr_location loc, fhr_observation *out)
{
    WI(b)->ops->observe(WI(b), loc, out);
}
static uint64_t w_stream_id(fhr_backend *b, fhr_stream *s)
{
    watch_touch(b, s);
    return WI(b)->ops->stream_id(WI(b), s);
}

static fhr_backend *watched_emu(void)
{
    watched *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    w->inner = emu_backend(1);
    w->ops = (fhr_backend_ops){
        .name = "watched",
        .device_count = w_device_count,
        .alloc = w_alloc,
        .free = w_free,
        .copy = w_copy,
        .stream_create = w_stream_create,
        .stream_destroy = w_stream_destroy,
        .stream_sync = w_stream_sync,
        .event_create = w_event_create,
        .event_destroy = w_event_destroy,
        .event_record = w_event_record,
        .event_query = w_event_query,
        .event_sync = w_event_sync,
        .stream_wait_event = w_stream_wait_event,
        .launch_host = w_launch_host,
        .observe = w_observe,
        .stream_id = w_stream_id,
        .destroy = w_destroy,
    };
    w->base.ops = &w->ops;
    w->base.impl = w;
    w->owner = pthread_self();
    pthread_mutex_init(&w->mu, NULL);
    return &w->base;
}

/* A consumer stream of cuda:0 the backend watches. */
static fhr_stream *watched_stream(fhr_backend *b)
{
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    watched *w = W(b);
    pthread_mutex_lock(&w->mu);
    cr_assert_lt(w->n, WATCH_MAX);
    w->s[w->n++] = s;
    pthread_mutex_unlock(&w->mu);
    return s;
}

typedef struct watch_counts {
    int violations, records, foreign_records;
} watch_counts;

static watch_counts watch_read(fhr_backend *b)
{
    watched *w = W(b);
    pthread_mutex_lock(&w->mu);
    watch_counts c = {w->violations, w->records, w->foreign_records};
    pthread_mutex_unlock(&w->mu);
    return c;
}

/* ---- a source load that runs until the test lets it go --------------------------------- */

typedef struct held {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inside, go;
    fhr_manager *m;
    fhr_handle h;
    fhr_status st;
    pthread_t t;
} held;

static fhr_status held_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                            fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec, (void)at, (void)b, (void)s, (void)err;
    held *hl = ctx;
    pthread_mutex_lock(&hl->mu);
    hl->inside = 1;
    pthread_cond_broadcast(&hl->cv);
    while (!hl->go)
        pthread_cond_wait(&hl->cv, &hl->mu);
    pthread_mutex_unlock(&hl->mu);
    *out = host_value(32, 5);
    return FHR_OK;
}

static void *held_main(void *arg)
{
    held *hl = arg;
    hl->st = fhr_ensure(hl->m, hl->h, fhr_loc_host(), NULL, NULL);
    return NULL;
}

/* Registers the held source on m and starts its load on a thread; returns once the load
 * runs (every other call on m is then refused). */
static void held_start(held *hl, fhr_manager *m)
{
    pthread_mutex_init(&hl->mu, NULL);
    pthread_cond_init(&hl->cv, NULL);
    hl->inside = hl->go = 0;
    hl->m = m;
    hl->st = FHR_E_INVALID;
    fhr_field_spec f;
    fhr_value_spec spec = pat_spec(&f, 32);
    fhr_source src = {held_load, hl, NULL};
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &hl->h, NULL), FHR_OK);
    cr_assert_eq(pthread_create(&hl->t, NULL, held_main, hl), 0);
    pthread_mutex_lock(&hl->mu);
    while (!hl->inside)
        pthread_cond_wait(&hl->cv, &hl->mu);
    pthread_mutex_unlock(&hl->mu);
}

/* Lets the load end and waits for its call. */
static void held_finish(held *hl)
{
    pthread_mutex_lock(&hl->mu);
    hl->go = 1;
    pthread_cond_broadcast(&hl->cv);
    pthread_mutex_unlock(&hl->mu);
    pthread_join(hl->t, NULL);
    cr_assert_eq(hl->st, FHR_OK);
    pthread_cond_destroy(&hl->cv);
    pthread_mutex_destroy(&hl->mu);
}

/* The copy of h at loc as the snapshot shows it (NULL: none). */
static fhr_copy_info copy_of(fhr_manager *m, fhr_handle h, fhr_location loc, int *found)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    fhr_copy_info c;
    memset(&c, 0, sizeof c);
    *found = 0;
    for (size_t i = 0; vi && i < vi->ncopies; i++)
        if (fhr_loc_equal(vi->copies[i].loc, loc)) {
            c = vi->copies[i];
            *found = 1;
        }
    fhr_snapshot_free(s);
    return c;
}

static uint64_t reserved_at(fhr_manager *m, fhr_location loc)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_loc_stats *l = fhr_snapshot_loc(s, loc);
    uint64_t r = l ? l->reserved_bytes : 0;
    fhr_snapshot_free(s);
    return r;
}

/* After a destroy during the load and the load's end: the release was applied, its
 * consumer event was recorded by the destroying thread before the destroy returned, and
 * nothing touched the stream after its owner destroyed it. */
static void check_settled(fhr_backend *b, fhr_manager *m, fhr_handle x, int want_records)
{
    watch_counts wc = watch_read(b);
    cr_assert_eq(wc.violations, 0, "a stream was used after the destroy returned and its "
                 "owner destroyed it");
    cr_assert_eq(wc.foreign_records, 0, "a consumer event was recorded by the loading thread");
    cr_assert_eq(wc.records, want_records);
    int found;
    fhr_copy_info c = copy_of(m, x, fhr_loc_cuda(0), &found);
    cr_assert(found);
    cr_assert_eq(c.leases, 0, "the release was not applied as the load ended");
    /* the consumer event (if one was recorded) completes: nothing protects the copy */
    cr_assert_eq(fhr_wait_pending(m, fhr_loc_cuda(0), UINT64_MAX, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_drop(m, x, fhr_loc_cuda(0), NULL), FHR_OK);
    check_accounting(m);
}

/* A value on cuda:0 leased for a watched consumer stream, destroyed inside a load of
 * another thread; fail_records: the consumer event cannot be recorded, so the destroy
 * waits for the stream itself (from the caller's thread) before it returns. */
static void lease_destroyed_during_a_load(uint64_t seed, int fail_records)
{
    fhr_backend *b = watched_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, seed, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *c = watched_stream(b);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &x, 1, fhr_loc_cuda(0), c, &l, NULL), FHR_OK);
    held hl;
    held_start(&hl, m);
    pthread_mutex_lock(&W(b)->mu);
    W(b)->fail_records = fail_records;
    pthread_mutex_unlock(&W(b)->mu);
    fhr_lease_destroy(l);
    fhr_stream_destroy(b, c); /* the caller is done with its stream: the destroy returned */
    held_finish(&hl);
    check_settled(b, m, x, 1); /* the one record (refused, with fail_records) */
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(threads_concurrency, lease_destroyed_during_a_load_is_done_with_the_stream_on_return)
{
    lease_destroyed_during_a_load(1, 0);
}

Test(threads_concurrency, lease_destroyed_during_a_load_without_events_waits_before_return)
{
    lease_destroyed_during_a_load(2, 1);
}

Test(threads_concurrency, scope_destroyed_during_a_load_is_done_with_the_stream_on_return)
{
    fhr_backend *b = watched_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 3, FHR_REPLICABLE);
    fhr_stream *c = watched_stream(b);
    fhr_action enter = {FHR_ACT_ENSURE, x, fhr_loc_cuda(0), 0, {0, 0}, 0};
    fhr_reservation r = {fhr_loc_cuda(0), 1000, "headroom"};
    fhr_plan_desc d = {"leased", NULL, 0, &enter, 1, NULL, 0, &r, 1};
    fhr_plan *p = NULL;
    cr_assert_eq(fhr_plan_create(&d, &p, NULL), FHR_OK);
    fhr_scope *sc = NULL;
    cr_assert_eq(fhr_scope_create(m, p, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_add_lease(sc, &x, 1, fhr_loc_cuda(0), c, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(sc, NULL), FHR_OK);
    held hl;
    held_start(&hl, m);
    fhr_scope_destroy(sc);
    fhr_stream_destroy(b, c);
    held_finish(&hl);
    check_settled(b, m, x, 1);
    cr_assert_eq(reserved_at(m, fhr_loc_cuda(0)), 0);
    fhr_plan_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

static fhr_controller *lru_controller(fhr_manager *m, fhr_location at, fhr_policy **pol)
{
    fhr_location fb[] = {fhr_loc_host()};
    fhr_tier_chain chain = {at, fb, 1};
    cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, pol, NULL), FHR_OK);
    fhr_controller *c = NULL;
    cr_assert_eq(fhr_controller_create(m, *pol, &c, NULL), FHR_OK);
    return c;
}

Test(threads_concurrency, use_destroyed_during_a_load_is_done_with_the_stream_on_return)
{
    fhr_backend *b = watched_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 4, FHR_REPLICABLE);
    fhr_stream *c = watched_stream(b);
    fhr_policy *pol;
    fhr_controller *ctl = lru_controller(m, fhr_loc_cuda(0), &pol);
    fhr_requirement rq = {x, fhr_loc_cuda(0), 0};
    fhr_request req = {"use", &rq, 1, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), c};
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_begin(ctl, &req, &cons, 1, NULL, 0, &u, &e), FHR_OK, "%s", e.message);
    held hl;
    held_start(&hl, m);
    fhr_use_destroy(u);
    fhr_stream_destroy(b, c);
    held_finish(&hl);
    check_settled(b, m, x, 1);
    fhr_controller_destroy(ctl);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* fhr_use_end refused during another thread's load changes nothing: the use stays active,
 * its lease and its reservation stay, and ending it again later succeeds. */
Test(threads_concurrency, a_refused_use_end_changes_nothing)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 5, FHR_REPLICABLE);
    fhr_stream *c = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    fhr_policy *pol;
    fhr_controller *ctl = lru_controller(m, fhr_loc_cuda(0), &pol);
    fhr_requirement rq = {x, fhr_loc_cuda(0), 0};
    fhr_reservation r = {fhr_loc_cuda(0), 1000, "ws"};
    fhr_request req = {"use", &rq, 1, &r, 1, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), c};
    fhr_use *u = NULL;
    cr_assert_eq(fhr_use_begin(ctl, &req, &cons, 1, NULL, 0, &u, NULL), FHR_OK);
    held hl;
    held_start(&hl, m);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_E_REENTRANT);
    cr_assert_not_null(fhr_use_value(u, x, fhr_loc_cuda(0)), "the refused end ended the use");
    held_finish(&hl);
    int found;
    cr_assert_eq(copy_of(m, x, fhr_loc_cuda(0), &found).leases, 1, "the lease went");
    cr_assert_eq(reserved_at(m, fhr_loc_cuda(0)), 1000, "the reservation went");
    cr_assert_null(fhr_use_report(u));
    fhr_error_clear(&e);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_OK, "%s", e.message);
    cr_assert_not_null(fhr_use_report(u));
    cr_assert_eq(copy_of(m, x, fhr_loc_cuda(0), &found).leases, 0);
    cr_assert_eq(reserved_at(m, fhr_loc_cuda(0)), 0);
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_E_SCOPE);
    fhr_use_destroy(u);
    fhr_stream_sync(b, c, NULL);
    fhr_stream_destroy(b, c);
    fhr_controller_destroy(ctl);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- an infeasible request is decided once ------------------------------------------- */

typedef struct counting {
    int calls;
} counting;

static fhr_status never_fits(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                             fhr_policy_out *out, fhr_error *err)
{
    (void)snap, (void)req, (void)err;
    ((counting *)ctx)->calls++;
    out->feasible = 0;
    out->short_loc = fhr_loc_cuda(0);
    out->bytes_short = 1;
    snprintf(out->reason, sizeof out->reason, "never fits");
    return FHR_OK;
}

static void counting_destroy(void *ctx) { (void)ctx; }

Test(concurrency, an_infeasible_request_is_decided_once)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 64, 6, FHR_REPLICABLE);
    counting cnt = {0};
    fhr_policy_ops ops = {"never", never_fits, counting_destroy};
    fhr_policy *pol = NULL;
    cr_assert_eq(fhr_policy_create(&ops, &cnt, &pol, NULL), FHR_OK);
    fhr_controller *ctl = NULL;
    cr_assert_eq(fhr_controller_create(m, pol, &ctl, NULL), FHR_OK);
    fhr_requirement rq = {x, fhr_loc_pinned(), 0};
    fhr_request req = {"r", &rq, 1, NULL, 0, 0};
    const fhr_use_opts plain = {0, 0}, wait = {FHR_USE_WAIT, 0};
    const fhr_use_opts *opts[] = {NULL, &plain, &wait};
    for (size_t k = 0; k < 3; k++) {
        fhr_use *u = NULL;
        fhr_error e;
        fhr_error_init(&e);
        cnt.calls = 0;
        cr_assert_eq(fhr_use_begin_opts(ctl, &req, NULL, 0, NULL, 0, opts[k], &u, &e),
                     FHR_E_INFEASIBLE);
        cr_assert_null(u);
        cr_assert(strstr(e.message, "never fits"), "%s", e.message);
        cr_assert_eq(cnt.calls, 1, "options %zu: decided %d times", k, cnt.calls);
        fhr_error_clear(&e);
    }
    fhr_controller_destroy(ctl);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a copy in flight counts wherever admission is decided ----------------------------- */

typedef struct ensurer {
    fhr_manager *m;
    fhr_handle h;
    fhr_location to;
    fhr_status st;
} ensurer;

static void *ensure_main(void *arg)
{
    ensurer *en = arg;
    en->st = fhr_ensure(en->m, en->h, en->to, NULL, NULL);
    return NULL;
}

/* Budget 4 KiB on cuda:0 holding y and z (1 KiB each) while x (1 KiB) is being copied in,
 * held in the backend: a request for y with 2 KiB of reservation is met only by evicting
 * z (2 + 1 + 1 = 4), which the full path does; "already met" must not be answered. */
Test(threads_concurrency, a_copy_in_flight_counts_against_a_request_already_met)
{
    fhr_backend *b = gated_create(emu_backend(1));
    cr_assert_not_null(b);
    fhr_budget bud = {fhr_loc_cuda(0), 4096};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle x = adopt_n(m, 1024, 7, FHR_REPLICABLE);
    fhr_handle y = adopt_n(m, 1024, 8, FHR_REPLICABLE);
    fhr_handle z = adopt_n(m, 1024, 9, FHR_REPLICABLE);
    fhr_handle w = adopt_n(m, 2048, 10, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, z, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, y, fhr_loc_cuda(0), NULL, NULL), FHR_OK); /* z is older */
    fhr_stream *c = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    gated_arm_copies(b, fhr_loc_cuda(0));
    ensurer en = {m, x, fhr_loc_cuda(0), FHR_E_INVALID};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ensure_main, &en), 0);
    gate_await_entered(&G(b)->copy_gate, 1); /* x's 1 KiB is admitted, its copy held */

    /* in-flight admission: the snapshot and explain count x's charge */
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->remaining_budget_bytes, 1024);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->inflight_bytes, 1024);
    char *js = fhr_snapshot_json(s);
    cr_assert(js && strstr(js, "\"inflight_bytes\":1024"), "%s", js ? js : "(null)");
    free(js);
    fhr_snapshot_free(s);
    fhr_action aw = {FHR_ACT_ENSURE, w, fhr_loc_cuda(0), 0, {0, 0}, 0};
    fhr_plan_desc dw = {"w", NULL, 0, &aw, 1, NULL, 0, NULL, 0};
    fhr_plan *pw = NULL;
    cr_assert_eq(fhr_plan_create(&dw, &pw, NULL), FHR_OK);
    fhr_explanation ex;
    cr_assert_eq(fhr_explain(m, pw, &ex, NULL), FHR_OK);
    cr_assert_not(ex.feasible, "2 KiB fit beside a copy in flight in 1 KiB of room");
    cr_assert_eq(ex.bytes_short, 1024);
    fhr_plan_destroy(pw);

    fhr_policy *pol;
    fhr_controller *ctl = lru_controller(m, fhr_loc_cuda(0), &pol);
    fhr_requirement rq = {y, fhr_loc_cuda(0), 0};
    fhr_reservation r = {fhr_loc_cuda(0), 2048, "ws"};
    fhr_request req = {"y", &rq, 1, &r, 1, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), c};
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_status st = fhr_use_begin(ctl, &req, &cons, 1, NULL, 0, &u, &e);
    size_t nev = u ? fhr_decision_nevictions(fhr_use_decision_of(u)) : 0;
    if (u)
        fhr_use_end(u, FHR_OK, NULL);
    fhr_use_destroy(u);
    gate_open(&G(b)->copy_gate);
    pthread_join(t, NULL);
    cr_assert_eq(st, FHR_OK, "%s", e.message);
    cr_assert_eq(nev, 1, "z was not evicted");
    cr_assert_eq(en.st, FHR_OK);
    cr_assert_eq(t_is_resident(m, z, fhr_loc_cuda(0)), 0);
    fhr_stream_sync(b, c, NULL);
    fhr_stream_destroy(b, c);
    check_accounting(m);
    fhr_error_clear(&e);
    fhr_controller_destroy(ctl);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A policy over tiered LRU that counts its decisions and signals each (decide may run on
 * several threads: the count is guarded). */
typedef struct told {
    fhr_policy *inner;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int decisions, infeasible;
    char first_reason[512];
} told;

static fhr_status told_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                              fhr_policy_out *out, fhr_error *err)
{
    told *t = ctx;
    fhr_status st = fhr_policy_decide(t->inner, snap, req, out, err);
    pthread_mutex_lock(&t->mu);
    t->decisions++;
    t->infeasible += st == FHR_OK && !out->feasible;
    if (t->decisions == 1)
        snprintf(t->first_reason, sizeof t->first_reason, "%s", out->reason);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return st;
}

static void told_destroy(void *ctx) { (void)ctx; }

typedef struct user {
    fhr_controller *c;
    fhr_stream *s; /* the consumer stream on cuda:0 */
    fhr_handle h;
    fhr_status st;
    uint64_t waits;
    char msg[sizeof ((fhr_error *)0)->message];
    told *t; /* u.done is signalled on its condition variable */
    int done;
} user;

static void *use_main(void *arg)
{
    user *u = arg;
    fhr_requirement rq = {u->h, fhr_loc_cuda(0), 0};
    fhr_request req = {"y", &rq, 1, NULL, 0, 0};
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), u->s};
    fhr_use *use = NULL;
    fhr_error e;
    fhr_error_init(&e);
    u->st = fhr_use_begin_opts(u->c, &req, &cons, 1, NULL, 0, &wait, &use, &e);
    snprintf(u->msg, sizeof u->msg, "%s", e.message);
    if (use) {
        u->waits = fhr_report_waits(fhr_use_report(use));
        fhr_use_end(use, FHR_OK, NULL);
        fhr_use_destroy(use);
    }
    fhr_error_clear(&e);
    pthread_mutex_lock(&u->t->mu);
    u->done = 1;
    pthread_cond_broadcast(&u->t->cv);
    pthread_mutex_unlock(&u->t->mu);
    return NULL;
}

/* Budget 1 KiB on cuda:0, all of it held by x's copy (1 KiB) while another thread makes
 * it, held in the backend; a second value of `second` bytes to ask for, a controller over
 * the counting policy and a consumer stream. */
typedef struct inflight_case {
    fhr_backend *b;
    fhr_manager *m;
    fhr_handle x, second;
    told t;
    fhr_policy *pol;
    fhr_controller *ctl;
    fhr_stream *c;
    ensurer en;
    pthread_t te;
} inflight_case;

static void inflight_begin(inflight_case *k, size_t second)
{
    k->b = gated_create(emu_backend(1));
    cr_assert_not_null(k->b);
    fhr_budget bud = {fhr_loc_cuda(0), 1024};
    k->m = new_manager(k->b, &bud, 1);
    k->x = adopt_n(k->m, 1024, 7, FHR_REPLICABLE);
    k->second = adopt_n(k->m, second, 8, FHR_REPLICABLE);
    k->t = (told){NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ""};
    fhr_location fb[] = {fhr_loc_host()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, &k->t.inner, NULL), FHR_OK);
    fhr_policy_ops ops = {"told", told_decide, told_destroy};
    cr_assert_eq(fhr_policy_create(&ops, &k->t, &k->pol, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(k->m, k->pol, &k->ctl, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(k->b, fhr_loc_cuda(0), &k->c, NULL), FHR_OK);
    gated_arm_copies(k->b, fhr_loc_cuda(0));
    k->en = (ensurer){k->m, k->x, fhr_loc_cuda(0), FHR_E_INVALID};
    cr_assert_eq(pthread_create(&k->te, NULL, ensure_main, &k->en), 0);
    gate_await_entered(&G(k->b)->copy_gate, 1); /* x's 1 KiB admitted, its copy held */
}

/* Lets x's copy end and joins its thread. */
static void inflight_release(inflight_case *k)
{
    gate_open(&G(k->b)->copy_gate);
    pthread_join(k->te, NULL);
    cr_assert_eq(k->en.st, FHR_OK);
}

static void inflight_end(inflight_case *k)
{
    fhr_stream_sync(k->b, k->c, NULL);
    fhr_stream_destroy(k->b, k->c);
    t_reap(k->m);
    check_accounting(k->m);
    fhr_controller_destroy(k->ctl);
    fhr_policy_destroy(k->pol);
    fhr_policy_destroy(k->t.inner);
    fhr_manager_destroy(k->m);
    fhr_backend_destroy(k->b);
}

/* A use of y (1 KiB) with FHR_USE_WAIT finds nothing to evict and no pending event to
 * wait for, only bytes in flight. It must wait for that copy to end and decide again
 * (then x's copy is evictable), not return the first, infeasible decision. */
Test(threads_concurrency, a_waiting_use_waits_for_a_copy_in_flight, .timeout = 60)
{
    inflight_case k;
    inflight_begin(&k, 1024);
    told *t = &k.t;
    user u = {k.ctl, k.c, k.second, FHR_E_INVALID, 0, "", t, 0};
    pthread_t tu;
    cr_assert_eq(pthread_create(&tu, NULL, use_main, &u), 0);
    /* The use's first decision sees the bytes in flight and nothing it could evict. Then
     * the copy stays held until the use returns (as it did, infeasible, before it waited
     * for copies in flight) or, since a waiting use cannot return while the copy is held,
     * for at most a second. The assertions below never depend on that second: a slow
     * machine can only make this test miss the fault, not fail without it. */
    pthread_mutex_lock(&t->mu);
    while (t->decisions < 1)
        pthread_cond_wait(&t->cv, &t->mu);
    int first_infeasible = t->infeasible;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    while (!u.done && pthread_cond_timedwait(&t->cv, &t->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&t->mu);
    inflight_release(&k);
    pthread_join(tu, NULL);
    cr_assert_eq(first_infeasible, 1, "the first decision was made beside the copy in flight");
    cr_assert(strstr(t->first_reason, "1024 bytes there are copies still being made"), "%s",
              t->first_reason);
    cr_assert_eq(u.st, FHR_OK, "the use gave up on a copy in flight: %s", u.msg);
    cr_assert_geq(t->decisions, 2);
    cr_assert_eq(t_is_resident(k.m, k.x, fhr_loc_cuda(0)), 0, "x was evicted for y");
    inflight_end(&k);
}

/* The same state, but a request of 2 KiB that no wait can fit in the 1 KiB budget: the
 * 1 KiB in flight is less than the shortfall, so the use is refused at once, decided
 * once, without waiting for the copy (which stays held until after the refusal). */
Test(threads_concurrency, a_request_that_never_fits_is_refused_beside_a_copy_in_flight,
     .timeout = 60)
{
    inflight_case k;
    inflight_begin(&k, 2048);
    user u = {k.ctl, k.c, k.second, FHR_E_INVALID, 0, "", &k.t, 0};
    use_main(&u); /* on this thread: it must return while the copy is held */
    inflight_release(&k);
    cr_assert_eq(u.st, FHR_E_INFEASIBLE, "%s", fhr_status_name(u.st));
    cr_assert_eq(k.t.decisions, 1, "decided %d times", k.t.decisions);
    cr_assert(strstr(u.msg, "1024 bytes there are copies still being made"), "%s", u.msg);
    inflight_end(&k);
}

/* ---- copies that omit regenerable fields are counted as charged ------------------------- */

static const unsigned char SEED[8] = {1, 2, 3, 4, 5, 6, 7, 8};

/* A pinned value of nb stored bytes and na regenerable ones that pinned copies omit. */
static fhr_handle adopt_seeded(fhr_manager *m, size_t nb, size_t na, uint64_t seed)
{
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_alloc_buffer(v, fhr_manager_backend(m), nb, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 0, nb, NULL), FHR_OK);
    void *p;
    size_t n;
    cr_assert_eq(fhr_value_field(v, "b", &p, &n), FHR_OK);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = pat(seed, i);
    cr_assert_eq(fhr_value_add_regenerable(v, "a", na, FHR_GENERATOR_COUNTER, SEED, sizeof SEED,
                                           0, NULL),
                 FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "seeded", 0};
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, NULL), FHR_OK);
    return h;
}

/* A pinned budget that holds the copy as the manager charges it (the b half): fhr_ensure
 * accepts it, and so must the controller. */
Test(concurrency, the_controller_counts_a_missing_pinned_copy_as_charged)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    const size_t nb = 4096, na = 8192;
    fhr_handle h = adopt_seeded(m, nb, na, 11);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), NULL), FHR_OK);
    cr_assert_eq(fhr_set_budget(m, fhr_loc_pinned(), nb, NULL), FHR_OK);
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    cr_assert_eq(vi->omitted_nbytes[1], na, "a pinned copy omits the regenerable field");
    cr_assert_eq(vi->omitted_nbytes[0], na);
    fhr_snapshot_free(s);
    fhr_location fb[] = {fhr_loc_host()};
    fhr_tier_chain chain = {fhr_loc_pinned(), fb, 1};
    fhr_policy *pol = NULL;
    cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, &pol, NULL), FHR_OK);
    fhr_controller *ctl = NULL;
    cr_assert_eq(fhr_controller_create(m, pol, &ctl, NULL), FHR_OK);
    fhr_requirement rq = {h, fhr_loc_pinned(), 0};
    fhr_request req = {"back", &rq, 1, NULL, 0, 0};
    fhr_decision *d = NULL;
    cr_assert_eq(fhr_decide(ctl, &req, &d, NULL), FHR_OK);
    cr_assert(fhr_decision_feasible(d), "refused: %s", fhr_decision_explanation(d)->reason);
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_decision(ctl, d, NULL, 0, NULL, 0, &u, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    fhr_use_destroy(u);
    fhr_decision_destroy(d);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_pinned()), 1);
    check_accounting(m);
    fhr_controller_destroy(ctl);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- fhr_wait_pending ----------------------------------------------------------------- */

/* Opens gates as host waits start: gate k when the k-th wait (counted from `base`) has
 * started, or every remaining one when the test says it is done. */
typedef struct opener {
    fhr_backend *b;
    gate *gates[3];
    int n, base, done;
} opener;

static void *opener_main(void *arg)
{
    opener *o = arg;
    gated *g = G(o->b);
    for (int k = 0; k < o->n; k++) {
        pthread_mutex_lock(&g->mu);
        while (g->waits_started < o->base + k + 1 && !o->done)
            pthread_cond_wait(&g->cv, &g->mu);
        pthread_mutex_unlock(&g->mu);
        gate_open(o->gates[k]);
    }
    return NULL;
}

static void opener_done(opener *o)
{
    gated *g = G(o->b);
    pthread_mutex_lock(&g->mu);
    o->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Leases h at pinned for consumer stream c (blocked behind a gate) and releases: the copy
 * is then protected by a pending consumer event alone. */
static void pend_on(fhr_manager *m, fhr_handle h, fhr_stream *c)
{
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_pinned(), c, &l, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
}

static uint32_t pending_at(fhr_manager *m, fhr_handle h, fhr_location loc)
{
    int found;
    return copy_of(m, h, loc, &found).pending_events;
}

Test(threads_concurrency, wait_pending_waits_for_the_oldest_uses_covering_their_charge, .timeout = 60)
{
    fhr_backend *b = gated_create(emu_backend(1));
    cr_assert_not_null(b);
    fhr_manager *m = new_manager(b, NULL, 0);
    const size_t nb = 4096, na = 8192; /* pinned copies are charged nb */
    fhr_handle x = adopt_seeded(m, nb, na, 12);
    fhr_handle y = adopt_seeded(m, nb, na, 13);
    fhr_stream *c[3];
    gate g[3];
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c[k], NULL), FHR_OK);
        gate_init(&g[k]);
        cr_assert_eq(fhr_launch_host(b, c[k], gate_wait, &g[k], NULL), FHR_OK);
    }
    pend_on(m, x, c[0]); /* x used first: the oldest */
    pend_on(m, y, c[1]);
    fhr_error e;
    fhr_error_init(&e);
    size_t waited = 9;
    cr_assert_eq(fhr_wait_pending(NULL, fhr_loc_pinned(), 1, &waited, &e), FHR_E_INVALID);
    cr_assert_eq(waited, 0);
    cr_assert_eq(fhr_wait_pending(m, fhr_loc_cuda(5), 1, &waited, &e), FHR_E_LOCATION);

    /* one byte: the oldest use's event only */
    opener o = {b, {&g[0]}, 1, gated_waits(b), 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, opener_main, &o), 0);
    cr_assert_eq(fhr_wait_pending(m, fhr_loc_pinned(), 1, &waited, &e), FHR_OK, "%s", e.message);
    opener_done(&o);
    pthread_join(t, NULL);
    cr_assert_eq(waited, 1);
    cr_assert_eq(pending_at(m, x, fhr_loc_pinned()), 0, "reaped after the wait");
    cr_assert_eq(pending_at(m, y, fhr_loc_pinned()), 1, "a younger use was waited for");

    /* x used again (now the youngest); nb + 1 bytes need both copies at their pinned
     * charge (nb each), not at the charge of a copy that keeps every field */
    pend_on(m, x, c[2]);
    o = (opener){b, {&g[1], &g[2]}, 2, gated_waits(b), 0};
    cr_assert_eq(pthread_create(&t, NULL, opener_main, &o), 0);
    cr_assert_eq(fhr_wait_pending(m, fhr_loc_pinned(), nb + 1, &waited, &e), FHR_OK, "%s",
                 e.message);
    opener_done(&o);
    pthread_join(t, NULL);
    cr_assert_eq(waited, 2, "waited for %zu uses to cover %zu bytes", waited, nb + 1);
    cr_assert_eq(pending_at(m, x, fhr_loc_pinned()), 0);
    cr_assert_eq(pending_at(m, y, fhr_loc_pinned()), 0);
    /* nothing pending: nothing to wait for */
    cr_assert_eq(fhr_wait_pending(m, fhr_loc_pinned(), nb, &waited, NULL), FHR_OK);
    cr_assert_eq(waited, 0);
    for (int k = 0; k < 3; k++) {
        gate_open(&g[k]);
        fhr_stream_sync(b, c[k], NULL);
        fhr_stream_destroy(b, c[k]);
        gate_fini(&g[k]);
    }
    fhr_error_clear(&e);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- fhr_manager_value_to -------------------------------------------------------------- */

static unsigned char FILL[256];

/* A generator "engine.fill": copies bytes of FILL to dst on s. */
static fhr_status fill_gen(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *s, void *dst,
                           size_t nbytes, const void *seed, size_t seed_len, fhr_error *err)
{
    (void)seed, (void)seed_len;
    (*(int *)ctx)++;
    if (nbytes > sizeof FILL)
        return fhr_fail(err, FHR_E_INVALID, "fill_gen: %zu bytes asked", nbytes);
    return b->ops->copy(b, dst, at, FILL, fhr_loc_host(), nbytes, s, err);
}

typedef struct to_ctx {
    fhr_manager *m;
    fhr_value *from;
    fhr_status st;
} to_ctx;

/* A source whose load makes its copy with fhr_manager_value_to (allowed during a load). */
static fhr_status value_to_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                                fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec, (void)b;
    to_ctx *tc = ctx;
    tc->st = fhr_manager_value_to(tc->m, tc->from, at, s, out, err);
    return tc->st;
}

Test(concurrency, manager_value_to_generates_with_the_managers_generators)
{
    for (size_t i = 0; i < sizeof FILL; i++)
        FILL[i] = (unsigned char)(0xa0 ^ i);
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_alloc_buffer(v, b, 64, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 0, 64, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_regenerable(v, "a", 128, "engine.fill", SEED, 2, 0, NULL),
                 FHR_OK);
    fhr_value *out = NULL;
    fhr_error e;
    fhr_error_init(&e);
    /* the plain functional copy knows only the built-in generator */
    cr_assert_eq(fhr_value_to(v, fhr_loc_cuda(0), b, NULL, &out, &e), FHR_E_UNSUPPORTED);
    cr_assert_eq(fhr_manager_value_to(m, v, fhr_loc_cuda(0), NULL, &out, &e), FHR_E_UNSUPPORTED,
                 "not registered yet");
    cr_assert_null(out);
    int calls = 0;
    cr_assert_eq(fhr_generator_register(m, "engine.fill", fill_gen, &calls, NULL), FHR_OK);
    cr_assert_eq(fhr_manager_value_to(NULL, v, fhr_loc_cuda(0), NULL, &out, &e), FHR_E_INVALID);
    cr_assert_eq(fhr_manager_value_to(m, v, fhr_loc_cuda(3), NULL, &out, &e), FHR_E_LOCATION);
    cr_assert_eq(calls, 0);
    /* without a stream: it makes and waits for its own, so the copy is complete */
    fhr_error_clear(&e);
    cr_assert_eq(fhr_manager_value_to(m, v, fhr_loc_cuda(0), NULL, &out, &e), FHR_OK, "%s",
                 e.message);
    cr_assert_eq(calls, 1);
    cr_assert_eq(fhr_value_storage_nbytes(out), 64 + 128, "the device copy holds both fields");
    fhr_value *back = NULL;
    cr_assert_eq(fhr_value_to(out, fhr_loc_host(), b, NULL, &back, NULL), FHR_OK);
    cr_assert_eq(fhr_value_field_materialized(back, "a"), 0, "the host copy omits it again");
    void *pb;
    size_t n;
    cr_assert_eq(fhr_value_field(back, "b", &pb, &n), FHR_OK);
    void *pv;
    cr_assert_eq(fhr_value_field(v, "b", &pv, &n), FHR_OK);
    cr_assert_eq(memcmp(pb, pv, 64), 0);
    fhr_value_destroy(back);
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    /* the generated bytes, read on the device's stream */
    fhr_value *dev2 = NULL;
    cr_assert_eq(fhr_manager_value_to(m, v, fhr_loc_cuda(0), s, &dev2, NULL), FHR_OK);
    cr_assert_eq(calls, 2);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    void *pa;
    cr_assert_eq(fhr_value_field(dev2, "a", &pa, &n), FHR_OK);
    cr_assert_eq(n, 128);
    cr_assert_eq(memcmp(pa, FILL, 128), 0, "the manager's generator wrote the field");
    fhr_value_destroy(dev2);
    fhr_value_destroy(out);

    /* a source load may call it: it touches no manager state */
    to_ctx tc = {m, v, FHR_E_INVALID};
    fhr_field_spec f[2] = {{"b", 64}, {"a", 128}};
    fhr_value_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.nfields = 2;
    spec.fields = f;
    spec.storage_nbytes = 64 + 128;
    spec.regen_nbytes = 128; /* omitted at host and pinned */
    fhr_source src = {value_to_load, &tc, NULL};
    fhr_handle h;
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &h, NULL), FHR_OK);
    fhr_error_clear(&e);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(tc.st, FHR_OK);
    cr_assert_eq(calls, 3);
    fhr_stream_destroy(b, s);
    fhr_error_clear(&e);
    fhr_manager_destroy(m); /* waits for the copy the load made from v on its stream */
    fhr_value_destroy(v);
    fhr_backend_destroy(b);
}

/* ---- no state shared between managers: the snapshot memory kept for reuse ------------ */

Test(concurrency, each_manager_keeps_its_own_snapshot_memory)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *ma = new_manager(b, NULL, 0), *mb = new_manager(b, NULL, 0);
    adopt_n(ma, 64, 14, FHR_REPLICABLE);
    adopt_n(mb, 64, 15, FHR_REPLICABLE);
    fhr_snapshot *sa = NULL, *sb = NULL, *sa2 = NULL;
    cr_assert_eq(fhr_snapshot_take(ma, &sa, NULL), FHR_OK);
    const void *kept = sa;
    fhr_snapshot_free(sa); /* ma keeps the memory for its next snapshot */
    cr_assert_eq(fhr_snapshot_take(mb, &sb, NULL), FHR_OK);
    cr_assert_neq((const void *)sb, kept, "a snapshot of one manager reused another's memory");
    cr_assert_eq(sb->manager_id, fhr_manager_id(mb));
    cr_assert_eq(fhr_snapshot_take(ma, &sa2, NULL), FHR_OK);
    cr_assert_eq((const void *)sa2, kept, "the manager did not keep its snapshot's memory");
    cr_assert_eq(sa2->manager_id, fhr_manager_id(ma));
    cr_assert_eq(sa2->nvalues, 1);
    /* a snapshot may outlive its manager */
    fhr_manager_destroy(ma);
    cr_assert_eq(sa2->nvalues, 1);
    fhr_snapshot_free(sa2);
    fhr_snapshot_free(sb);
    fhr_manager_destroy(mb);
    fhr_backend_destroy(b);
}
