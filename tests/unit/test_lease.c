/* tests/unit/test_lease.c — leases and holds on the emulated device: ready-only
 * acquire, consumer streams, release that never waits, protection until the consumer
 * event completes and is reaped, cross-thread release, misuse, and deciding as if the
 * consumer work had ended (fhr_decide_settled). */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "backend_gate.h"
#include "fheplan/controller.h"

/* The emulated backend with its stream_wait_event calls recorded: which stream was made
 * to wait (the ops table is copied, so the backend itself is untouched). */
static fhr_backend_ops waits_ops;
static fhr_status (*waits_inner)(fhr_backend *, fhr_stream *, fhr_event *, fhr_error *);
static fhr_stream *waits_on;
static int waits_seen;

static fhr_status counting_wait(fhr_backend *b, fhr_stream *s, fhr_event *e, fhr_error *err)
{
    if (s == waits_on)
        __atomic_add_fetch(&waits_seen, 1, __ATOMIC_SEQ_CST);
    return waits_inner(b, s, e, err);
}

static fhr_backend *emu_recording_waits(void)
{
    fhr_backend *b = emu_backend(1);
    waits_ops = *b->ops;
    waits_inner = waits_ops.stream_wait_event;
    waits_ops.stream_wait_event = counting_wait;
    b->ops = &waits_ops;
    waits_on = NULL;
    waits_seen = 0;
    return b;
}

Test(threads_lease, copy_stays_protected_until_consumer_work_completes)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 4096, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_lease *l;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), NULL, &l, &e), FHR_E_LEASE);
    cr_assert(strstr(e.message, "consumer stream"), "%s", e.message);
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), cs, &l, &e), FHR_OK, "%s", e.message);
    cr_assert_not_null(fhr_lease_value(l, h));
    /* long consumer work queued behind the lease */
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, cs, gate_wait, &g, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), &e), FHR_E_PROTECTED);
    cr_assert(strstr(e.message, "active lease"), "%s", e.message);
    cr_assert_eq(fhr_lease_release(l, &e), FHR_OK, "release returns at once");
    cr_assert_null(fhr_lease_value(l, h));
    cr_assert_eq(fhr_lease_release(l, &e), FHR_E_LEASE, "second release");
    for (int i = 0; i < 3; i++) {
        t_reap(m);
        cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), &e), FHR_E_PROTECTED);
        cr_assert(strstr(e.message, "pending consumer event"), "%s", e.message);
        /* the refusal says how to end it, and names the unlabelled value by its handle */
        cr_assert(strstr(e.message, "synchronize") && strstr(e.message, "fhr_reap"), "%s",
                  e.message);
        char hn[48];
        snprintf(hn, sizeof hn, "handle #%llu", (unsigned long long)h.serial);
        cr_assert(strstr(e.message, hn), "%s", e.message);
        fhr_location host = fhr_loc_host();
        cr_assert_eq(fhr_move(m, h, fhr_loc_pinned(), &(fhr_location){FHR_LOC_CUDA, 0}, NULL, &e),
                     FHR_E_PROTECTED);
        (void)host;
        cr_assert_eq(fhr_discard(m, h, &e), FHR_E_PROTECTED);
    }
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    int seen = 0;
    for (size_t i = 0; i < vi->ncopies; i++)
        if (vi->copies[i].loc.kind == FHR_LOC_CUDA) {
            cr_assert_eq(vi->copies[i].pending_events, 1);
            cr_assert_eq(vi->copies[i].leases, 0);
            seen = 1;
        }
    cr_assert(seen);
    fhr_snapshot_free(s);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    cr_assert_eq(t_reap(m), 1);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), &e), FHR_OK, "%s", e.message);
    fhr_lease_destroy(l);
    fhr_stream_destroy(b, cs);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(threads_lease, every_consumer_stream_protects)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *s1, *s2;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s1, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s2, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), s1, &l, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_add_consumer_stream(l, s2, NULL), FHR_OK);
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, s2, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_add_consumer_stream(l, s1, NULL), FHR_E_LEASE, "after release");
    cr_assert_eq(fhr_stream_sync(b, s1, NULL), FHR_OK); /* s1 done, s2 still gated */
    t_reap(m);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), NULL), FHR_E_PROTECTED);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, s2, NULL), FHR_OK);
    t_reap(m);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_stream_destroy(b, s1);
    fhr_stream_destroy(b, s2);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

static void *release_thread(void *p)
{
    return (void *)(intptr_t)fhr_lease_release(p, NULL);
}

Test(threads_lease, release_from_another_thread)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle hs[2] = {adopt_n(m, 64, 1, FHR_REPLICABLE), adopt_n(m, 64, 2, FHR_EXCLUSIVE)};
    cr_assert_eq(fhr_ensure(m, hs[0], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, hs[1], fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, hs, 2, fhr_loc_cuda(0), cs, &l, NULL), FHR_OK);
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, release_thread, l);
    pthread_join(t, &ret);
    cr_assert_eq((fhr_status)(intptr_t)ret, FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    t_reap(m);
    cr_assert_eq(fhr_move(m, hs[1], fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_stream_destroy(b, cs);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(threads_lease, acquire_never_materializes_and_waits_for_inflight_copies)
{
    fhr_backend *b = emu_recording_waits();
    fhr_manager *m = new_manager(b, NULL, 0);
    size_t n = 1 << 20;
    fhr_handle h = adopt_n(m, n, 8, FHR_REPLICABLE);
    fhr_lease *l = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_stream *ts, *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &ts, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), cs, &l, &e), FHR_E_STATE);
    cr_assert(strstr(e.message, "never materializes"), "%s", e.message);
    cr_assert_eq(t_is_resident(m, h, fhr_loc_cuda(0)), 0);
    /* hold the transfer stream so the copy is still in flight at acquire */
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, ts, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), ts, NULL), FHR_OK);
    waits_on = cs;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), cs, &l, &e), FHR_OK, "%s", e.message);
    /* the acquire itself made the consumer stream wait for the copy still in flight */
    cr_assert_eq(__atomic_load_n(&waits_seen, __ATOMIC_SEQ_CST), 1,
                 "the consumer stream was not made to wait for the copy");
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    for (size_t i = 0; i < vi->ncopies; i++)
        if (vi->copies[i].loc.kind == FHR_LOC_CUDA)
            cr_assert_eq(vi->copies[i].ready, 0);
    fhr_snapshot_free(s);
    /* consumer work queued now reads the finished copy (it runs after the wait) */
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    cr_assert(value_has_pattern(b, fhr_lease_value(l, h), 8, n));
    fhr_lease_destroy(l);
    fhr_stream_sync(b, cs, NULL);
    fhr_stream_destroy(b, ts);
    fhr_stream_destroy(b, cs);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(threads_lease, holds_protect_without_values)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    fhr_hold *hd;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_hold_acquire(m, &h, 1, fhr_loc_cuda(0), &hd, &e), FHR_E_STATE);
    cr_assert_eq(fhr_hold_acquire(m, (fhr_handle[]){h, h}, 2, fhr_loc_pinned(), &hd, &e), FHR_E_INVALID);
    cr_assert_eq(fhr_hold_acquire(m, &h, 1, fhr_loc_pinned(), &hd, &e), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), &e), FHR_E_PROTECTED);
    cr_assert(strstr(e.message, "a hold"), "%s", e.message);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_host(), &e), FHR_OK, "the other copy is free");
    cr_assert_eq(fhr_hold_release(hd, &e), FHR_OK);
    cr_assert_eq(fhr_hold_release(hd, &e), FHR_E_LEASE);
    fhr_hold_destroy(hd);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_host(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), &e), FHR_OK);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(threads_lease, host_lease_reads_finished_copy)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    size_t n = 3 << 20;
    fhr_handle h = adopt_n(m, n, 12, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, h, fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_pinned(), NULL, &l, NULL), FHR_OK);
    void *p;
    size_t len;
    cr_assert_eq(fhr_value_field(fhr_lease_value(l, h), "data", &p, &len), FHR_OK);
    cr_assert_eq(len, n);
    for (size_t i = 0; i < n; i += 4099)
        cr_assert_eq(((uint8_t *)p)[i], pat(12, i));
    fhr_lease_destroy(l);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* fhr_decide_settled: a copy whose consumer work is still running is, for the policy, free
 * when the caller names it as settled — the decision evicts it (tiered LRU: the oldest
 * use) where fhr_decide evicts around it, the explanation refuses it until the work ends,
 * and after the work and a reap the same decision is feasible. */

Test(threads_lease, decide_settled_decides_as_after_the_work)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 2 * 4096};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle old = adopt_n(m, 4096, 1, FHR_REPLICABLE), newer = adopt_n(m, 4096, 2, FHR_REPLICABLE),
               want = adopt_n(m, 4096, 3, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, old, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, newer, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    /* `old` is read by work that has not ended; `newer` is used after it (younger) */
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(m, &old, 1, fhr_loc_cuda(0), cs, &l, NULL), FHR_OK);
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, cs, gate_wait, &g, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease *l2;
    cr_assert_eq(fhr_acquire(m, &newer, 1, fhr_loc_cuda(0), NULL, &l2, NULL), FHR_E_LEASE);
    fhr_stream *s2;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s2, NULL), FHR_OK);
    cr_assert_eq(fhr_acquire(m, &newer, 1, fhr_loc_cuda(0), s2, &l2, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l2, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s2, NULL), FHR_OK);
    t_reap(m);

    fhr_location tiers[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, 1};
    fhr_policy *p;
    fhr_controller *c;
    cr_assert_eq(fhr_policy_tiered_lru_create(&ch, 1, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    fhr_requirement rq = {want, fhr_loc_cuda(0), 0};
    fhr_request req = {"load", &rq, 1, NULL, 0, 0};
    fhr_decision *d;
    cr_assert_eq(fhr_decide(c, &req, &d, NULL), FHR_OK);
    cr_assert(fhr_decision_feasible(d));
    cr_assert_eq(fhr_decision_nevictions(d), 1);
    cr_assert(fhr_handle_equal(fhr_decision_eviction(d, 0)->action.handle, newer),
              "the pending copy is protected: the younger one goes");
    fhr_decision_destroy(d);

    fhr_requirement settled = {old, fhr_loc_cuda(0), 0};
    cr_assert_eq(fhr_decide_settled(c, &req, &settled, 1, &d, NULL), FHR_OK);
    cr_assert_eq(fhr_decision_nevictions(d), 1);
    cr_assert(fhr_handle_equal(fhr_decision_eviction(d, 0)->action.handle, old),
              "settled: the least recently used copy goes, as after the work");
    cr_assert(!fhr_decision_feasible(d), "not until the work has ended");
    cr_assert_eq(fhr_decision_explanation(d)->status, FHR_E_PROTECTED);
    fhr_decision_destroy(d);
    /* the kept snapshot is as it was: a plain decision still protects the copy */
    cr_assert_eq(fhr_decide(c, &req, &d, NULL), FHR_OK);
    cr_assert(fhr_handle_equal(fhr_decision_eviction(d, 0)->action.handle, newer));
    fhr_decision_destroy(d);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_decide_settled(c, &req, NULL, 1, &d, &e), FHR_E_INVALID);
    cr_assert(strstr(e.message, "settled"), "%s", e.message);

    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, cs, NULL), FHR_OK);
    cr_assert_eq(t_reap(m), 1);
    cr_assert_eq(fhr_decide_settled(c, &req, &settled, 1, &d, NULL), FHR_OK);
    cr_assert(fhr_decision_feasible(d), "after the work and a reap: the same decision, feasible");
    cr_assert(fhr_handle_equal(fhr_decision_eviction(d, 0)->action.handle, old));
    fhr_decision_destroy(d);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_lease_destroy(l);
    fhr_lease_destroy(l2);
    fhr_stream_destroy(b, cs);
    fhr_stream_destroy(b, s2);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A reap asks the device about one unfinished event per stream: work on a stream ends in
 * order, so with 64 releases queued behind a gated body it asks once, not 64 times; a
 * second stream's finished work is reaped meanwhile; once the gate opens all of it is. */
static fhr_backend_ops query_ops;
static int (*query_inner)(fhr_backend *, fhr_event *);
static int queries;

static int counting_query(fhr_backend *b, fhr_event *e)
{
    __atomic_add_fetch(&queries, 1, __ATOMIC_SEQ_CST);
    return query_inner(b, e);
}

Test(threads_lease, reap_asks_one_unfinished_event_per_stream)
{
    fhr_backend *b = emu_backend(1);
    query_ops = *b->ops;
    query_inner = query_ops.event_query;
    query_ops.event_query = counting_query;
    b->ops = &query_ops;
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_stream *gated, *free_s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &gated, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &free_s, NULL), FHR_OK);
    enum { N = 64 };
    fhr_handle h[N + 1];
    fhr_lease *l[N + 1];
    for (int i = 0; i <= N; i++) {
        h[i] = adopt_n(m, 256, (uint64_t)i + 1, FHR_REPLICABLE);
        cr_assert_eq(fhr_ensure(m, h[i], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    }
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, gated, gate_wait, &g, NULL), FHR_OK);
    gate_await_entered(&g, 1);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(fhr_acquire(m, &h[i], 1, fhr_loc_cuda(0), gated, &l[i], NULL), FHR_OK);
        cr_assert_eq(fhr_lease_release(l[i], NULL), FHR_OK);
    }
    cr_assert_eq(fhr_acquire(m, &h[N], 1, fhr_loc_cuda(0), free_s, &l[N], NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l[N], NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, free_s, NULL), FHR_OK);
    __atomic_store_n(&queries, 0, __ATOMIC_SEQ_CST);
    size_t reaped = 0;
    cr_assert_eq(fhr_reap(m, &reaped, NULL), FHR_OK);
    cr_assert_eq(reaped, 1, "the other stream's finished release");
    int q = __atomic_load_n(&queries, __ATOMIC_SEQ_CST);
    cr_assert_leq(q, 3, "%d event queries for 64 releases behind one unfinished body", q);
    cr_assert_eq(fhr_drop(m, h[0], fhr_loc_cuda(0), NULL), FHR_E_PROTECTED);
    cr_assert_eq(fhr_drop(m, h[N - 1], fhr_loc_cuda(0), NULL), FHR_E_PROTECTED);
    cr_assert_eq(fhr_drop(m, h[N], fhr_loc_cuda(0), NULL), FHR_OK);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, gated, NULL), FHR_OK);
    cr_assert_eq(fhr_reap(m, &reaped, NULL), FHR_OK);
    cr_assert_eq(reaped, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(fhr_drop(m, h[i], fhr_loc_cuda(0), NULL), FHR_OK);
    for (int i = 0; i <= N; i++)
        fhr_lease_destroy(l[i]);
    fhr_stream_destroy(b, gated);
    fhr_stream_destroy(b, free_s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
