/* tests/unit/test_lock.c — no call holds the manager lock across a device wait, a copy, a
 * user callback or a field generator: while one thread is blocked in each (on a gate), another
 * thread's snapshot, lease and transition complete; and destroys inside a source load. */
#include "gated_backend.h"
#include "mgr_helpers.h"
#include "cuda/counter_gen.h"
#include "tests/unit/observe.h"
#include "runtime/manager/manager.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

/* How long a probe may take before the test decides it is stuck behind the lock. */
#define PROBE_LIMIT_S 30

/* ---- the probe: what must go on while another thread is blocked -------------------- */

typedef struct probe {
    fhr_manager *m;
    fhr_handle other;      /* a value nobody else touches */
    fhr_location to;       /* where the probe's transition puts it (and then drops it) */
    fhr_handle blocked;    /* the value of the blocked call, to look at in the snapshot */
    fhr_location blocked_at;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    fhr_status snap, acquire, ensure, drop;
    uint64_t v_before, v_after;
    int blocked_visible;   /* the blocked call's copy at blocked_at is in the snapshot */
    int blocked_leases;    /* leases the snapshot shows on it (-1: no such copy) */
} probe;

static void *probe_main(void *arg)
{
    probe *p = arg;
    fhr_snapshot *s = NULL;
    p->snap = fhr_snapshot_take(p->m, &s, NULL);
    if (p->snap == FHR_OK) {
        p->v_before = s->state_version;
        const fhr_value_info *vi = fhr_snapshot_value(s, p->blocked);
        p->blocked_leases = -1;
        for (size_t i = 0; vi && i < vi->ncopies; i++)
            if (fhr_loc_equal(vi->copies[i].loc, p->blocked_at)) {
                p->blocked_visible = 1;
                p->blocked_leases = (int)vi->copies[i].leases;
            }
        fhr_snapshot_free(s);
    }
    fhr_lease *l = NULL;
    p->acquire = fhr_acquire(p->m, &p->other, 1, fhr_loc_host(), NULL, &l, NULL);
    if (l) {
        fhr_lease_release(l, NULL);
        fhr_lease_destroy(l);
    }
    p->ensure = fhr_ensure(p->m, p->other, p->to, NULL, NULL);
    p->drop = fhr_drop(p->m, p->other, p->to, NULL);
    p->v_after = t_state_version(p->m);
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Runs the probe on its own thread; 1 if it finished within the limit. On 0 the caller
 * must unblock the blocked thread, then call probe_join. */
static int probe_run(probe *p, pthread_t *t)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->done = 0;
    pthread_create(t, NULL, probe_main, p);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += PROBE_LIMIT_S;
    pthread_mutex_lock(&p->mu);
    int rc = 0;
    while (!p->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &until);
    int done = p->done;
    pthread_mutex_unlock(&p->mu);
    return done;
}

static void probe_join(probe *p, pthread_t t)
{
    pthread_join(t, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

static void probe_check(const probe *p)
{
    cr_assert_eq(p->snap, FHR_OK);
    cr_assert_eq(p->acquire, FHR_OK);
    cr_assert_eq(p->ensure, FHR_OK);
    cr_assert_eq(p->drop, FHR_OK);
    cr_assert_gt(p->v_after, p->v_before, "the probe's transitions moved the state version");
}

static fhr_backend *gated_emu(void)
{
    fhr_backend *inner = emu_backend(1);
    fhr_backend *b = gated_create(inner);
    cr_assert_not_null(b);
    return b;
}

/* ---- a copy that blocks its caller (the CUDA backend's pageable staging) ------------- */

typedef struct mover {
    fhr_manager *m;
    fhr_handle h;
    fhr_location to;
    fhr_status st;
} mover;

static void *move_main(void *arg)
{
    mover *mv = arg;
    mv->st = fhr_move(mv->m, mv->h, mv->to, NULL, NULL, NULL);
    return NULL;
}

/* An acquire of the value being moved: it waits for the move, then finds the copy. */
typedef struct reader {
    fhr_manager *m;
    fhr_handle h;
    fhr_stream *consumer;
    fhr_lease *l;
    fhr_status st;
    int done;
    pthread_mutex_t mu;
} reader;

static void *read_main(void *arg)
{
    reader *rd = arg;
    fhr_lease *l = NULL;
    fhr_status st = fhr_acquire(rd->m, &rd->h, 1, fhr_loc_cuda(0), rd->consumer, &l, NULL);
    pthread_mutex_lock(&rd->mu);
    rd->l = l;
    rd->st = st;
    rd->done = 1;
    pthread_mutex_unlock(&rd->mu);
    return NULL;
}

/* Waits until a second thread's call has returned (*done under mu), has begun to wait
 * for another call's claim, or has reached the copy gate itself (a second entry), so
 * that what the test then checks does not depend on how soon that thread ran (at most
 * BLOCKED_LIMIT_S). */
#define BLOCKED_LIMIT_S 60
static void await_blocked(fhr_manager *m, uint64_t waits0, pthread_mutex_t *mu, const int *done_p,
                          gate *g)
{
    for (long i = 0; i < BLOCKED_LIMIT_S * 1000L; i++) {
        pthread_mutex_lock(mu);
        int done = *done_p;
        pthread_mutex_unlock(mu);
        pthread_mutex_lock(&g->mu);
        int entered = g->entered;
        pthread_mutex_unlock(&g->mu);
        if (done || entered > 1 || mgr_claim_waits(m) > waits0)
            return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

Test(threads_lock, a_copy_blocked_in_the_backend_holds_no_lock)
{
    fhr_backend *b = gated_emu();
    size_t nx = 48 << 10, ny = 8 << 10;
    fhr_budget bud = {fhr_loc_cuda(0), nx + ny / 2}; /* room for x, not for x and y */
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle x = adopt_n(m, nx, 31, FHR_EXCLUSIVE);
    fhr_handle y = adopt_n(m, ny, 32, FHR_REPLICABLE);
    gated_arm_copies(b, fhr_loc_cuda(0));
    uint64_t v0 = t_state_version(m);

    mover mv = {m, x, fhr_loc_cuda(0), FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, move_main, &mv);
    gate_await_entered(&G(b)->copy_gate, 1); /* the move sits inside the backend's copy */
    fhr_stream *c;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    reader rd = {m, x, c, NULL, FHR_E_INVALID, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t rt;
    uint64_t waits0 = mgr_claim_waits(m);
    pthread_create(&rt, NULL, read_main, &rd);
    await_blocked(m, waits0, &rd.mu, &rd.done, &G(b)->copy_gate);
    int reader_waited = mgr_claim_waits(m) > waits0;
    pthread_mutex_lock(&G(b)->copy_gate.mu);
    int reader_copied = G(b)->copy_gate.entered > 1;
    pthread_mutex_unlock(&G(b)->copy_gate.mu);

    probe p = {.m = m, .other = y, .to = fhr_loc_pinned(), .blocked = x,
               .blocked_at = fhr_loc_cuda(0)};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    pthread_mutex_lock(&rd.mu);
    int read_early = rd.done;
    pthread_mutex_unlock(&rd.mu);
    /* while the copy runs its charge is admitted: y does not fit beside it */
    fhr_error e;
    fhr_error_init(&e);
    fhr_status squeezed = in_time ? fhr_ensure(m, y, fhr_loc_cuda(0), NULL, &e) : FHR_OK;
    gate_open(&G(b)->copy_gate);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    pthread_join(rt, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for another thread's copy");
    cr_assert_not(read_early, "an acquire of the value being moved did not wait for the move");
    cr_assert_not(reader_copied, "an acquire of the value being moved made its own copy");
    cr_assert(reader_waited, "an acquire of the value being moved did not wait for its claim");
    cr_assert_eq(rd.st, FHR_OK, "the acquire did not find the moved copy");
    cr_assert_eq(fhr_lease_release(rd.l, NULL), FHR_OK);
    fhr_lease_destroy(rd.l);
    fhr_stream_sync(b, c, NULL);
    fhr_stream_destroy(b, c);
    t_reap(m);
    probe_check(&p);
    cr_assert_eq(p.v_before, v0, "nothing of the unfinished move is visible");
    cr_assert_not(p.blocked_visible, "the copy being made showed in a snapshot");
    cr_assert_eq(squeezed, FHR_E_BUDGET, "the copy in flight did not hold its charge");
    cr_assert(strstr(e.message, "short"), "%s", e.message);
    cr_assert_eq(mv.st, FHR_OK);
    cr_assert_gt(t_state_version(m), p.v_after, "the move's commit moved the version");
    cr_assert_eq(t_is_resident(m, x, fhr_loc_cuda(0)), 1);
    cr_assert_eq(t_is_resident(m, x, fhr_loc_host()), 0);
    cr_assert(resident_has_pattern(m, x, fhr_loc_cuda(0), 31, nx));
    check_accounting(m);
    fhr_error_clear(&e);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A scope whose enter action copies: the lock is let go there too, and the scope still
 * takes its lease before anyone can touch the placed copy. */
typedef struct enterer {
    fhr_scope *sc;
    fhr_status st;
} enterer;

static void *enter_main(void *arg)
{
    enterer *en = arg;
    en->st = fhr_scope_enter(en->sc, NULL);
    return NULL;
}

typedef struct dropper {
    fhr_manager *m;
    fhr_handle h;
    fhr_status st;
    int done;
    pthread_mutex_t mu;
} dropper;

static void *drop_main(void *arg)
{
    dropper *d = arg;
    fhr_status st = fhr_drop(d->m, d->h, fhr_loc_pinned(), NULL);
    pthread_mutex_lock(&d->mu);
    d->st = st;
    d->done = 1;
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

Test(threads_lock, a_scope_entry_copy_holds_no_lock_and_keeps_its_values)
{
    fhr_backend *b = gated_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    size_t n = 16 << 10;
    fhr_handle x = adopt_n(m, n, 41, FHR_REPLICABLE);
    fhr_handle y = adopt_n(m, n, 42, FHR_REPLICABLE);
    fhr_action enter[] = {{FHR_ACT_ENSURE, x, fhr_loc_pinned(), 0, {0, 0}, 0}};
    fhr_plan_desc d = {"copying", NULL, 0, enter, 1, NULL, 0, NULL, 0};
    fhr_plan *pl;
    cr_assert_eq(fhr_plan_create(&d, &pl, NULL), FHR_OK);
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(m, pl, NULL, 0, &sc, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_add_lease(sc, &x, 1, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    gated_arm_copies(b, fhr_loc_pinned());

    enterer en = {sc, FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, enter_main, &en);
    gate_await_entered(&G(b)->copy_gate, 1);
    /* a drop of the value being placed waits for the entry (and then meets its lease) */
    dropper dr = {m, x, FHR_E_INVALID, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t dt;
    uint64_t waits0 = mgr_claim_waits(m);
    pthread_create(&dt, NULL, drop_main, &dr);
    await_blocked(m, waits0, &dr.mu, &dr.done, &G(b)->copy_gate);
    int drop_waited = mgr_claim_waits(m) > waits0;
    probe p = {.m = m, .other = y, .to = fhr_loc_cuda(0), .blocked = x,
               .blocked_at = fhr_loc_pinned()};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    pthread_mutex_lock(&dr.mu);
    int dropped_early = dr.done;
    pthread_mutex_unlock(&dr.mu);
    /* the copy gate only stops copies into pinned: the probe used cuda:0 */
    gate_open(&G(b)->copy_gate);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    pthread_join(dt, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for a scope entry's copy");
    probe_check(&p);
    cr_assert_not(p.blocked_visible);
    cr_assert_not(dropped_early, "a drop of a value the entry placed ran inside the entry");
    cr_assert(drop_waited, "a drop of a value the entry placed did not wait for its claim");
    cr_assert_eq(en.st, FHR_OK);
    cr_assert_eq(dr.st, FHR_E_PROTECTED, "the scope's lease was not taken with its enter actions");
    cr_assert_eq(fhr_scope_exit(sc, FHR_OK, NULL), FHR_OK);
    fhr_scope_destroy(sc);
    fhr_plan_destroy(pl);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a lease destroy that must wait for its consumers -------------------------------- */

static void *destroy_main(void *arg)
{
    fhr_lease_destroy(arg);
    return NULL;
}

Test(threads_lock, lease_destroy_waits_for_consumers_without_the_lock)
{
    fhr_backend *b = gated_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 51, FHR_REPLICABLE);
    fhr_handle y = adopt_n(m, 4096, 52, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *c;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &x, 1, fhr_loc_cuda(0), c, &l, NULL), FHR_OK);
    gate consumer;
    gate_init(&consumer);
    cr_assert_eq(fhr_launch_host(b, c, gate_wait, &consumer, NULL), FHR_OK); /* its kernel */
    gate_await_entered(&consumer, 1);
    /* no consumer event can be recorded: destroy falls back to waiting for the stream */
    gated_fail_records(b, 1);
    int w0 = gated_waits(b);
    pthread_t t;
    pthread_create(&t, NULL, destroy_main, l);
    gated_await_waits(b, w0 + 1);

    probe p = {.m = m, .other = y, .to = fhr_loc_pinned(), .blocked = x,
               .blocked_at = fhr_loc_cuda(0)};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    fhr_status drop = in_time ? fhr_drop(m, x, fhr_loc_cuda(0), NULL) : FHR_E_INVALID;
    gate_open(&consumer);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for a lease's consumers");
    probe_check(&p);
    cr_assert_eq(p.blocked_leases, 1, "the copy lost its lease before its consumer finished");
    cr_assert_eq(drop, FHR_E_PROTECTED);
    cr_assert_eq(fhr_drop(m, x, fhr_loc_cuda(0), NULL), FHR_OK, "the release never finished");
    check_accounting(m);
    fhr_stream_destroy(b, c);
    gate_fini(&consumer);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a host lease over more copies in flight than any fixed table ------------------- */

#define MANY 70

typedef struct acquirer {
    fhr_manager *m;
    fhr_handle *hs;
    fhr_lease *l;
    fhr_status st;
} acquirer;

static void *acquire_main(void *arg)
{
    acquirer *a = arg;
    a->st = fhr_acquire(a->m, a->hs, MANY, fhr_loc_host(), NULL, &a->l, NULL);
    return NULL;
}

Test(threads_lock, host_acquire_waits_for_many_copies_without_the_lock)
{
    fhr_backend *b = gated_emu();
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle hs[MANY];
    for (int i = 0; i < MANY; i++) {
        hs[i] = adopt_n(m, 256, 100 + (uint64_t)i, FHR_EXCLUSIVE);
        cr_assert_eq(fhr_move(m, hs[i], fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    }
    fhr_handle y = adopt_n(m, 256, 99, FHR_REPLICABLE);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_pinned(), &s, NULL), FHR_OK);
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, s, gate_wait, &g, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    for (int i = 0; i < MANY; i++) /* enqueued behind the gate: all in flight */
        cr_assert_eq(fhr_move(m, hs[i], fhr_loc_host(), NULL, s, NULL), FHR_OK);
    int w0 = gated_waits(b);
    acquirer a = {m, hs, NULL, FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, acquire_main, &a);
    gated_await_waits(b, w0 + 1); /* the acquire waits on the host for a copy */

    probe p = {.m = m, .other = y, .to = fhr_loc_pinned(), .blocked = hs[MANY - 1],
               .blocked_at = fhr_loc_host()};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    gate_open(&g);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for a host acquire's copies");
    probe_check(&p);
    cr_assert_eq(a.st, FHR_OK);
    for (int i = 0; i < MANY; i++)
        cr_assert(value_has_pattern(b, fhr_lease_value(a.l, hs[i]), 100 + (uint64_t)i, 256),
                  "value %d read before its copy finished", i);
    cr_assert_eq(fhr_lease_release(a.l, NULL), FHR_OK);
    fhr_lease_destroy(a.l);
    fhr_stream_destroy(b, s);
    gate_fini(&g);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a user free function that blocks (the model backend runs it in place) ----------- */

static gate free_gate;

static void blocking_free(void *ctx, void *p, size_t n)
{
    (void)ctx, (void)n;
    gate_wait(&free_gate);
    free(p);
}

typedef struct dropper2 {
    fhr_manager *m;
    fhr_handle h;
    fhr_status st;
} dropper2;

static void *drop_host_main(void *arg)
{
    dropper2 *d = arg;
    d->st = fhr_drop(d->m, d->h, fhr_loc_host(), NULL);
    return NULL;
}

Test(threads_lock, a_free_function_runs_without_the_lock)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_model_create(1, &b, NULL), FHR_OK);
    fhr_manager *m = new_manager(b, NULL, 0);
    gate_init(&free_gate);
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    size_t bi;
    cr_assert_eq(fhr_value_add_buffer(v, malloc(64), 64, blocking_free, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "data", bi, 0, 64, NULL), FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "blocking", 0};
    fhr_handle x;
    cr_assert_eq(fhr_adopt(m, &v, &o, &x, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    fhr_handle y = adopt_n(m, 64, 61, FHR_REPLICABLE);

    dropper2 d = {m, x, FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, drop_host_main, &d);
    gate_await_entered(&free_gate, 1);
    probe p = {.m = m, .other = y, .to = fhr_loc_cuda(0), .blocked = x,
               .blocked_at = fhr_loc_host()};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    gate_open(&free_gate);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for a user free function");
    probe_check(&p);
    cr_assert_not(p.blocked_visible, "the dropped copy was still in the state");
    cr_assert_eq(d.st, FHR_OK);
    check_accounting(m);
    fhr_manager_destroy(m);
    gate_fini(&free_gate);
    fhr_backend_destroy(b);
}

/* ---- destroys inside a source load ------------------------------------------------- */

typedef struct inside {
    fhr_manager *m;
    fhr_lease *lease;   /* consumer gated: waiting for it would never end inside the load */
    fhr_hold *hold;
    fhr_scope *scope;   /* entered, with a reservation */
    fhr_status release; /* fhr_lease_release inside the load */
    int destroyed;      /* the destroys returned */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} inside;

static fhr_status destroying_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                                  fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec, (void)at, (void)b, (void)s, (void)err;
    inside *in = ctx;
    in->release = fhr_lease_release(in->lease, NULL);
    fhr_lease_destroy(in->lease);
    fhr_hold_destroy(in->hold);
    fhr_scope_destroy(in->scope);
    pthread_mutex_lock(&in->mu);
    in->destroyed = 1;
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
    *out = host_value(32, 5);
    return FHR_OK;
}

typedef struct loader {
    fhr_manager *m;
    fhr_handle h;
    fhr_status st;
} loader;

static void *load_main(void *arg)
{
    loader *ld = arg;
    ld->st = fhr_ensure(ld->m, ld->h, fhr_loc_host(), NULL, NULL);
    return NULL;
}

Test(threads_lock, destroys_inside_a_load_change_nothing_until_it_ends)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle x = adopt_n(m, 4096, 71, FHR_REPLICABLE);
    fhr_handle w = adopt_n(m, 4096, 72, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, x, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *c;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &c, NULL), FHR_OK);
    inside in = {.m = m, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cr_assert_eq(fhr_acquire(m, &x, 1, fhr_loc_cuda(0), c, &in.lease, NULL), FHR_OK);
    gate consumer;
    gate_init(&consumer);
    cr_assert_eq(fhr_launch_host(b, c, gate_wait, &consumer, NULL), FHR_OK);
    cr_assert_eq(fhr_hold_acquire(m, &w, 1, fhr_loc_host(), &in.hold, NULL), FHR_OK);
    fhr_reservation r = {fhr_loc_cuda(0), 1000, "headroom"};
    fhr_plan_desc d = {"outer", NULL, 0, NULL, 0, NULL, 0, &r, 1};
    fhr_plan *pl;
    cr_assert_eq(fhr_plan_create(&d, &pl, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_create(m, pl, NULL, 0, &in.scope, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(in.scope, NULL), FHR_OK);

    fhr_field_spec f;
    fhr_value_spec spec = pat_spec(&f, 32);
    fhr_source src = {destroying_load, &in, NULL};
    fhr_handle h;
    cr_assert_eq(fhr_register_source(m, &spec, &src, NULL, &h, NULL), FHR_OK);
    loader ld = {m, h, FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, load_main, &ld);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += PROBE_LIMIT_S;
    pthread_mutex_lock(&in.mu);
    int rc = 0;
    while (!in.destroyed && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&in.cv, &in.mu, &until);
    int in_time = in.destroyed;
    pthread_mutex_unlock(&in.mu);
    if (!in_time)
        gate_open(&consumer); /* let the stuck destroy finish, then fail below */
    pthread_join(t, NULL); /* the load ends; what the destroys owe is applied then */
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *xi = fhr_snapshot_value(s, x);
    const fhr_copy_info *xc = NULL;
    for (size_t i = 0; i < xi->ncopies; i++)
        if (fhr_loc_equal(xi->copies[i].loc, fhr_loc_cuda(0)))
            xc = &xi->copies[i];
    int leases = xc ? (int)xc->leases : -1, pending = xc ? (int)xc->pending_events : -1;
    int holds = (int)fhr_snapshot_value(s, w)->copies[0].holds;
    uint64_t reserved = fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes;
    fhr_snapshot_free(s);
    fhr_status early_drop = fhr_drop(m, x, fhr_loc_cuda(0), NULL);
    gate_open(&consumer); /* only now may a destroy that waited for the consumer finish */
    cr_assert(in_time, "a destroy inside a source load waited for consumer work");
    cr_assert_eq(ld.st, FHR_OK);
    cr_assert_eq(in.release, FHR_E_REENTRANT, "release inside a load is refused");
    cr_assert_eq(leases, 0, "the lease destroyed in the load was not released as it ended");
    cr_assert_eq(pending, 1, "the release recorded no consumer event");
    cr_assert_eq(early_drop, FHR_E_PROTECTED, "the consumer's work was not protected");
    cr_assert_eq(holds, 0);
    cr_assert_eq(reserved, 0, "the scope destroyed in the load kept its headroom");
    fhr_stream_sync(b, c, NULL);
    t_reap(m);
    cr_assert_eq(fhr_drop(m, x, fhr_loc_cuda(0), NULL), FHR_OK);
    /* the destroyed scope left the stack: a new one has no parent */
    fhr_scope *sc2;
    cr_assert_eq(fhr_scope_create(m, pl, NULL, 0, &sc2, NULL), FHR_OK);
    cr_assert_eq(fhr_scope_enter(sc2, NULL), FHR_OK);
    cr_assert_str_eq(fhr_scope_path(sc2), "outer");
    cr_assert_eq(fhr_scope_exit(sc2, FHR_OK, NULL), FHR_OK);
    fhr_scope_destroy(sc2);
    fhr_plan_destroy(pl);
    check_accounting(m);
    fhr_stream_destroy(b, c);
    gate_fini(&consumer);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a generator of a regenerable field, blocked while it makes a device copy -------- */

typedef struct gated_gen {
    gate g;
    int calls;
} gated_gen;

static fhr_status blocking_gen(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *s,
                               void *dst, size_t nbytes, const void *seed, size_t seed_len,
                               fhr_error *err)
{
    gated_gen *gg = ctx;
    gg->calls++;
    gate_wait(&gg->g); /* the copying thread blocks inside the user's generator */
    return fhr_generator_counter(NULL, b, at, s, dst, nbytes, seed, seed_len, err);
}

Test(threads_lock, a_generator_blocked_in_a_device_copy_holds_no_lock)
{
    fhr_backend *b = emu_backend(1);
    const size_t nb = 16 << 10, na = 16 << 10, ny = 8 << 10;
    fhr_budget bud = {fhr_loc_cuda(0), nb + na + ny / 2}; /* room for the key, not for y too */
    fhr_manager *m = new_manager(b, &bud, 1);
    gated_gen gg = {.calls = 0};
    gate_init(&gg.g);
    cr_assert_eq(fhr_generator_register(m, "test.blocking", blocking_gen, &gg, NULL), FHR_OK);
    fhr_value *v = NULL;
    size_t bi;
    const unsigned char seed[4] = {7, 8, 9, 10};
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_value_alloc_buffer(v, b, nb, NULL, &bi, NULL), FHR_OK);
    void *pb;
    cr_assert_eq(fhr_value_add_field(v, "b", bi, 0, nb, NULL), FHR_OK);
    cr_assert_eq(fhr_value_field(v, "b", &pb, NULL), FHR_OK);
    fill_pattern(pb, nb, 41);
    cr_assert_eq(fhr_value_add_regenerable(v, "a", na, "test.blocking", seed, sizeof seed, 0, NULL),
                 FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "key", 0};
    fhr_handle x;
    cr_assert_eq(fhr_adopt(m, &v, &o, &x, NULL), FHR_OK);
    fhr_handle y = adopt_n(m, ny, 42, FHR_REPLICABLE);
    uint64_t v0 = t_state_version(m);

    mover mv = {m, x, fhr_loc_cuda(0), FHR_E_INVALID};
    pthread_t t;
    pthread_create(&t, NULL, move_main, &mv); /* moves the key from pinned to cuda:0 */
    gate_await_entered(&gg.g, 1);              /* it sits inside the generator */
    probe p = {.m = m, .other = y, .to = fhr_loc_pinned(), .blocked = x,
               .blocked_at = fhr_loc_cuda(0)};
    pthread_t pt;
    int in_time = probe_run(&p, &pt);
    /* while it generates, the whole copy's charge is admitted: y does not fit beside it */
    fhr_status squeezed = in_time ? fhr_ensure(m, y, fhr_loc_cuda(0), NULL, NULL) : FHR_OK;
    gate_open(&gg.g);
    probe_join(&p, pt);
    pthread_join(t, NULL);
    cr_assert(in_time, "snapshot, lease and transition waited for another thread's generator");
    probe_check(&p);
    cr_assert_eq(p.v_before, v0, "nothing of the unfinished copy is visible");
    cr_assert_not(p.blocked_visible, "the copy being generated showed in a snapshot");
    cr_assert_eq(squeezed, FHR_E_BUDGET, "the copy in flight did not hold its whole charge");
    cr_assert_eq(mv.st, FHR_OK);
    cr_assert_eq(gg.calls, 1);
    cr_assert_eq(t_is_resident(m, x, fhr_loc_cuda(0)), 1);

    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &x, 1, fhr_loc_cuda(0), cs, &l, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    void *pa;
    size_t n2;
    cr_assert_eq(fhr_value_field(fhr_lease_value(l, x), "a", &pa, &n2), FHR_OK);
    unsigned char *want = malloc(na);
    fhr_counter_fill_host(want, na, fhr_counter_key(seed, sizeof seed));
    cr_assert_eq(memcmp(pa, want, na), 0, "the generated half is the generator's");
    free(want);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_stream_sync(b, cs, NULL);
    fhr_stream_destroy(b, cs);
    t_reap(m);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
    gate_fini(&gg.g);
}
