/* tests/unit/test_engine.c — embedding in an engine, on the emulated device: views of the
 * engine's streams, leases and copies on them, throttled use, use reports, trace sources. */
#include "fheplan/residency.h"
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

#define KEY 4096

/* A gate: a host function on a stream that blocks it until opened, standing in for an
 * engine kernel still running. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
}

static void gate_wait(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* The host's first wait opens a gate: the backend's stream and event syncs, wrapped, open
 * it before they wait. So an engine "still running" behind the gate is certainly behind
 * when the host decides, and is let go exactly when the host has to wait for it, however
 * slow or loaded the machine (no sleep, no race with a timer). */
static fhr_backend_ops opener_ops;
static const fhr_backend_ops *opener_inner;
static gate *opener_gate;

static fhr_status opener_event_sync(fhr_backend *b, fhr_event *e, fhr_error *err)
{
    if (opener_gate)
        gate_open(opener_gate);
    return opener_inner->event_sync(b, e, err);
}

static fhr_status opener_stream_sync(fhr_backend *b, fhr_stream *s, fhr_error *err)
{
    if (opener_gate)
        gate_open(opener_gate);
    return opener_inner->stream_sync(b, s, err);
}

static void open_on_first_wait(fhr_backend *b, gate *g)
{
    if (b->ops != &opener_ops) {
        opener_inner = b->ops;
        opener_ops = *b->ops;
        opener_ops.event_sync = opener_event_sync;
        opener_ops.stream_sync = opener_stream_sync;
        b->ops = &opener_ops;
    }
    opener_gate = g;
}

Test(engine, a_view_is_the_native_stream_and_leaves_it_alone)
{
    fhr_backend *b = emu_backend(1);
    fhr_stream *native, *view, *other;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &native, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), native, &view, NULL), FHR_OK);
    void *n = NULL;
    int dev = -1;
    cr_assert_eq(fhr_stream_native(b, view, &n, &dev, NULL), FHR_OK);
    cr_assert_eq(n, (void *)native);
    cr_assert_eq(dev, 0);
    cr_assert_eq(fhr_stream_native(b, native, &n, NULL, NULL), FHR_OK);
    cr_assert_eq(n, (void *)native, "a stream fheplan made is its own native stream");
    cr_assert_eq(b->ops->stream_id(b, view), b->ops->stream_id(b, native));
    /* a view of a view is a view of the same stream */
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), view, &other, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_native(b, other, &n, NULL, NULL), FHR_OK);
    cr_assert_eq(n, (void *)native);
    fhr_stream_destroy(b, other);
    fhr_stream_destroy(b, view);
    /* the native stream still runs work after its views are gone */
    gate g;
    gate_init(&g);
    g.open = 1;
    cr_assert_eq(fhr_launch_host(b, native, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, native, NULL), FHR_OK);
    fhr_stream_destroy(b, native);
    fhr_backend_destroy(b);
}

Test(engine, wrap_refuses_what_it_cannot_view)
{
    fhr_backend *b = emu_backend(2), *b2 = emu_backend(1), *mb = NULL;
    fhr_stream *s0, *foreign, *v = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s0, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(b2, fhr_loc_cuda(0), &foreign, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(1), s0, &v, &e), FHR_E_LOCATION);
    cr_assert(strstr(e.message, "cuda:0"), "%s", e.message);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), foreign, &v, NULL), FHR_E_INVALID);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), NULL, &v, NULL), FHR_E_INVALID);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(5), s0, &v, NULL), FHR_E_LOCATION);
    cr_assert_null(v);
    cr_assert_eq(fhr_backend_model_create(1, &mb, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(mb, fhr_loc_cuda(0), s0, &v, NULL), FHR_E_UNSUPPORTED);
    void *n;
    cr_assert_eq(fhr_stream_native(mb, s0, &n, NULL, NULL), FHR_E_UNSUPPORTED);
    /* the fault decorator passes wrapping through to the backend it wraps */
    fhr_backend *fb = NULL;
    cr_assert_eq(fhr_backend_fault_create(b2, &fb, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(fb, fhr_loc_cuda(0), foreign, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_native(fb, v, &n, NULL, NULL), FHR_OK);
    cr_assert_eq(n, (void *)foreign);
    fhr_stream_destroy(fb, v);
    fhr_stream_destroy(b, s0);
    fhr_stream_destroy(fb, foreign);
    fhr_backend_destroy(fb);
    fhr_backend_destroy(mb);
    fhr_backend_destroy(b);
}

/* The engine's stream is busy (gated); fheplan's copy ordered on a view of it and the
 * lease's consumer event recorded on it both wait for the engine's work. */
Test(engine, copies_and_consumer_events_go_on_the_wrapped_stream)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, KEY, 3, FHR_REPLICABLE);
    fhr_stream *native, *view;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &native, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), native, &view, NULL), FHR_OK);
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(b, native, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), view, NULL), FHR_OK);
    fhr_trace_entry t[8];
    size_t nt = t_trace_read(m, t, 8);
    cr_assert(nt >= 1);
    cr_assert_eq(t[nt - 1].kind, FHR_TR_ENSURE);
    cr_assert_eq(t[nt - 1].stream_id, b->ops->stream_id(b, native));
    cr_assert(fhr_loc_equal(t[nt - 1].from, fhr_loc_host()), "an ensure's trace names its source");
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(0), view, &l, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    t_reap(m);
    /* the consumer event sits behind the gate on the native stream */
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), NULL), FHR_E_PROTECTED);
    gate_open(&g);
    cr_assert_eq(fhr_stream_sync(b, native, NULL), FHR_OK);
    t_reap(m);
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 3, KEY));
    cr_assert_eq(fhr_drop(m, h, fhr_loc_cuda(0), NULL), FHR_OK);
    fhr_stream_destroy(b, view);
    fhr_stream_destroy(b, native);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A source's load runs on the stream fheplan passes; through fhr_stream_native it
 * reaches the engine's own stream to launch its kernels there. */
typedef struct native_source {
    pat_source ps;
    void *seen;
} native_source;

static fhr_status native_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                              fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    native_source *ns = ctx;
    fhr_status st = fhr_stream_native(b, s, &ns->seen, NULL, err);
    return st ? st : pat_load(&ns->ps, spec, at, b, s, out, err);
}

Test(engine, a_load_reaches_the_native_stream)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    native_source ns = {{KEY, 9, 0, 0, 0, 0}, NULL};
    fhr_field_spec f;
    fhr_value_spec spec = pat_spec(&f, KEY);
    fhr_source src = {native_load, &ns, NULL};
    fhr_adopt_opts o = {FHR_REPLICABLE, "k", 0};
    fhr_handle h;
    cr_assert_eq(fhr_register_source(m, &spec, &src, &o, &h, NULL), FHR_OK);
    fhr_stream *native, *view;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &native, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), native, &view, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), view, NULL), FHR_OK);
    cr_assert_eq(ns.seen, (void *)native);
    fhr_trace_entry t[8];
    size_t nt = t_trace_read(m, t, 8);
    cr_assert_eq(t[nt - 1].kind, FHR_TR_LOAD);
    cr_assert_eq(t[nt - 1].from.kind, FHR_LOC_INVALID,
                 "a load has no source location; its destination is not its source");
    cr_assert(fhr_loc_equal(t[nt - 1].to, fhr_loc_cuda(0)));
    cr_assert(resident_has_pattern(m, h, fhr_loc_cuda(0), 9, KEY));
    fhr_stream_destroy(b, view);
    fhr_stream_destroy(b, native);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- throttled use --------------------------------------------------------------- */

typedef struct rig {
    fhr_backend *b;
    fhr_manager *m;
    fhr_policy *p;
    fhr_controller *c;
    fhr_stream *native, *view;
    fhr_handle keys[4];
} rig;

/* Four keys in pinned memory, a cuda:0 budget of two, a view of the engine's stream. */
static void rig_up(rig *r)
{
    memset(r, 0, sizeof *r);
    r->b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 2 * KEY};
    r->m = new_manager(r->b, &bud, 1);
    for (int k = 0; k < 4; k++) {
        fhr_value *v = NULL;
        cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
        size_t bi;
        cr_assert_eq(fhr_value_alloc_buffer(v, r->b, KEY, NULL, &bi, NULL), FHR_OK);
        cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, KEY, NULL), FHR_OK);
        fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
        cr_assert_eq(fhr_adopt(r->m, &v, &o, &r->keys[k], NULL), FHR_OK);
    }
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    cr_assert_eq(fhr_policy_tiered_lru_create(&chain, 1, &r->p, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(r->m, r->p, &r->c, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(r->b, fhr_loc_cuda(0), &r->native, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(r->b, fhr_loc_cuda(0), r->native, &r->view, NULL), FHR_OK);
}

static void rig_down(rig *r)
{
    fhr_stream_sync(r->b, r->native, NULL);
    fhr_stream_destroy(r->b, r->view);
    fhr_stream_destroy(r->b, r->native);
    fhr_controller_destroy(r->c);
    fhr_policy_destroy(r->p);
    fhr_manager_destroy(r->m);
    fhr_backend_destroy(r->b);
}

/* One use of key k on the engine's stream, throttled or not; returns the status. */
static fhr_status use_key(rig *r, int k, const fhr_use_opts *opts, uint64_t *waits,
                          fhr_error *e)
{
    fhr_requirement rq = {r->keys[k], fhr_loc_cuda(0), 0};
    fhr_request req = {"rot", &rq, 1, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), r->view};
    fhr_use *u = NULL;
    fhr_status st = fhr_use_begin_opts(r->c, &req, &cons, 1, &cons, 1, opts, &u, e);
    if (st != FHR_OK)
        return st;
    cr_assert_null(fhr_use_report(u), "no report before the use ends");
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    const fhr_report *rep = fhr_use_report(u);
    cr_assert_not_null(rep);
    if (waits)
        *waits = fhr_report_waits(rep);
    fhr_use_destroy(u);
    return FHR_OK;
}

Test(engine, protection_alone_blocks_a_plain_use_and_a_waiting_one_goes_through)
{
    rig r;
    rig_up(&r);
    gate g;
    gate_init(&g);
    /* the engine's kernels for keys 0 and 1 are still running behind the gate */
    cr_assert_eq(fhr_launch_host(r.b, r.native, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(use_key(&r, 0, NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(use_key(&r, 1, NULL, NULL, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(use_key(&r, 2, NULL, NULL, &e), FHR_E_INFEASIBLE);
    cr_assert_eq(e.loc.kind, FHR_LOC_CUDA);
    /* FHR_USE_WAIT with a wait limit of zero waits... */
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    open_on_first_wait(r.b, &g);
    uint64_t waits = 0;
    fhr_error_init(&e);
    cr_assert_eq(use_key(&r, 2, &wait, &waits, &e), FHR_OK, "%s", e.message);
    cr_assert_geq(waits, 1, "the host wait is counted");
    cr_assert_eq(t_is_resident(r.m, r.keys[2], fhr_loc_cuda(0)), 1);
    check_accounting(r.m);
    rig_down(&r);
}

/* Nothing pending at the location: nothing to wait for, and no work on an empty list (an
 * empty candidate list once reached qsort as a null pointer, which UBSan refuses). */
Test(engine, wait_pending_with_nothing_pending_waits_for_nothing)
{
    rig r;
    rig_up(&r);
    size_t waited = 7;
    cr_assert_eq(fhr_wait_pending(r.m, fhr_loc_cuda(0), KEY, &waited, NULL), FHR_OK);
    cr_assert_eq(waited, 0);
    rig_down(&r);
}

Test(engine, no_wait_when_the_budget_does_not_force_one)
{
    rig r;
    rig_up(&r);
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    uint64_t total = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t w = 0;
        cr_assert_eq(use_key(&r, i % 4, &wait, &w, NULL), FHR_OK);
        cr_assert_eq(fhr_stream_sync(r.b, r.native, NULL), FHR_OK); /* engine work done */
        total += w;
    }
    cr_assert_eq(total, 0, "completed consumers need no host wait");
    rig_down(&r);
}

Test(engine, waiting_that_cannot_help_is_infeasible_at_once)
{
    rig r;
    rig_up(&r);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_ensure(r.m, r.keys[0], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(r.m, r.keys[1], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_acquire(r.m, r.keys, 2, fhr_loc_cuda(0), r.view, &l, NULL), FHR_OK);
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    fhr_error e;
    fhr_error_init(&e);
    uint64_t v0 = t_state_version(r.m);
    cr_assert_eq(use_key(&r, 2, &wait, NULL, &e), FHR_E_INFEASIBLE, "active leases: no wait helps");
    cr_assert_eq(t_state_version(r.m), v0, "a refused use changes nothing");
    /* the readers of keys 0 and 1 are still running when the lease ends */
    gate g;
    gate_init(&g);
    cr_assert_eq(fhr_launch_host(r.b, r.native, gate_wait, &g, NULL), FHR_OK);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_use_opts one = {FHR_USE_WAIT, 1}; /* at most one wait */
    open_on_first_wait(r.b, &g);
    uint64_t w = 0;
    cr_assert_eq(use_key(&r, 2, &one, &w, NULL), FHR_OK);
    cr_assert_eq(w, 1);
    fhr_use_opts bad = {0x80, 0};
    cr_assert_eq(use_key(&r, 3, &bad, NULL, NULL), FHR_E_INVALID);
    rig_down(&r);
}

Test(engine, use_reports_bytes_loads_evictions_after_the_end)
{
    rig r;
    rig_up(&r);
    fhr_requirement rq[2] = {{r.keys[0], fhr_loc_cuda(0), 0}, {r.keys[1], fhr_loc_cuda(0), 0}};
    fhr_request req = {"two", rq, 2, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), r.view};
    fhr_use *u = NULL;
    cr_assert_eq(fhr_use_begin_opts(r.c, &req, &cons, 1, &cons, 1, NULL, &u, NULL), FHR_OK);
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    const fhr_report *rep = fhr_use_report(u);
    cr_assert_eq(fhr_report_bytes(rep, FHR_DIR_H2D), 2 * KEY);
    cr_assert_eq(fhr_report_count(rep, FHR_DIR_H2D), 2);
    cr_assert_eq(fhr_report_evictions(rep), 0);
    cr_assert_eq(fhr_report_loads(rep), 0);
    char *js = fhr_report_json(rep);
    cr_assert(strstr(js, "\"evictions\":0") && strstr(js, "\"waits\":0"), "%s", js);
    free(js);
    fhr_use_destroy(u);
    cr_assert_eq(fhr_stream_sync(r.b, r.native, NULL), FHR_OK);
    /* key 2 evicts one of them: one reclaim transition, one copy in */
    rq[0].handle = r.keys[2];
    req.nrequirements = 1;
    cr_assert_eq(fhr_use_begin_opts(r.c, &req, &cons, 1, &cons, 1, NULL, &u, NULL), FHR_OK);
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    rep = fhr_use_report(u);
    cr_assert_eq(fhr_report_evictions(rep), 1);
    cr_assert_eq(fhr_report_bytes(rep, FHR_DIR_H2D), KEY);
    fhr_use_destroy(u);
    rig_down(&r);
}

Test(engine, loads_are_counted_in_the_use_report)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {KEY, 5, 0, 0, 0, 0};
    fhr_handle h = register_pat(m, &ps, FHR_REPLICABLE);
    fhr_policy *p;
    cr_assert_eq(fhr_policy_tiered_lru_create(NULL, 0, &p, NULL), FHR_OK);
    fhr_controller *c;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_requirement rq = {h, fhr_loc_cuda(0), 0};
    fhr_request req = {"load", &rq, 1, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), s};
    fhr_use *u = NULL;
    fhr_use_opts o = {FHR_USE_WAIT, 0};
    cr_assert_eq(fhr_use_begin_opts(c, &req, &cons, 1, NULL, 0, &o, &u, NULL), FHR_OK);
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    cr_assert_eq(fhr_report_loads(fhr_use_report(u)), 1);
    cr_assert_eq(ps.loads, 1);
    fhr_use_destroy(u);
    fhr_stream_destroy(b, s);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- the Phantom example's sequence, on the emulated device ------------------------- */

/* examples/phantom's key order: pass 0 baby steps 1..7 then giant steps 8..56 (keys 0..13),
 * pass 1 the other way round, so that a pass starts with what the last one ended with. */
static int serpentine_key(int pass, int u) { return pass == 0 ? u : 13 - u; }

static void kernel_sleep(void *arg)
{
    (void)arg;
    usleep(300);
}

static double check_bytes(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "NO_COLOR=1 %s check --json %s 2>/dev/null", FHEPLAN_CLI, path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    cr_assert_eq(pclose(p), 0, "check failed: %s", buf);
    const char *k = strstr(buf, "\"bytes_moved\":");
    cr_assert_not_null(k, "%s", buf);
    return strtod(k + strlen("\"bytes_moved\":"), NULL);
}

/* Streams 14 keys through budgets of 4, 8 and 14 keys with the engine running ahead (its
 * kernels still queued when the next use begins): the throttled uses move exactly the
 * bytes `fheplan check` predicts for the same sequence, and wait only under pressure. */
Test(engine, throttled_streaming_moves_what_check_predicts, .timeout = 60)
{
    const int budgets[] = {4, 8, 14};
    for (size_t bi = 0; bi < 3; bi++) {
        int nk = budgets[bi];
        char path[] = "/tmp/fheplan-engine-XXXXXX.rplan";
        int fd = mkstemps(path, 6);
        cr_assert(fd >= 0);
        FILE *f = fdopen(fd, "w");
        fprintf(f, "rplan 1\nbudget cuda:0 %d B\nvalue rk[14] = %d B replicable at pinned init "
                   "synth(100 + i)\npolicy keys = lookahead(cuda:0 -> pinned)\nstage \"s\" {\n",
                nk * KEY, KEY);
        for (int p = 0; p < 2; p++)
            for (int u = 0; u < 14; u++)
                fprintf(f, "  request \"u\" using keys { require rk[%d] @ cuda:0 }\n",
                        serpentine_key(p, u));
        fprintf(f, "}\n");
        fclose(f);
        double predicted = check_bytes(path);
        unlink(path);

        /* a device no larger than the budget: each victim's free is ordered on the stream
         * that allocates the next key, so the pool reuses it (a free ordered anywhere else
         * would need more device than the budget, and the load would fail) */
        fhr_backend *b = NULL;
        cr_assert_eq(fhr_backend_emu_create(1, (uint64_t)nk * KEY, &b, NULL), FHR_OK);
        fhr_budget bud = {fhr_loc_cuda(0), (uint64_t)nk * KEY};
        fhr_manager *m = new_manager(b, &bud, 1);
        fhr_handle keys[14];
        for (int k = 0; k < 14; k++) {
            fhr_value *v = NULL;
            cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
            size_t bix;
            cr_assert_eq(fhr_value_alloc_buffer(v, b, KEY, NULL, &bix, NULL), FHR_OK);
            cr_assert_eq(fhr_value_add_field(v, "key", bix, 0, KEY, NULL), FHR_OK);
            fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
            cr_assert_eq(fhr_adopt(m, &v, &o, &keys[k], NULL), FHR_OK);
        }
        fhr_future_use fut[28];
        for (int i = 0; i < 28; i++)
            fut[i] = (fhr_future_use){(uint64_t)i + 1, keys[serpentine_key(i / 14, i % 14)],
                                      fhr_loc_cuda(0), 0};
        fhr_location fb[] = {fhr_loc_pinned()};
        fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
        fhr_policy *p;
        cr_assert_eq(fhr_policy_lookahead_create(&chain, 1, fut, 28, &p, NULL), FHR_OK);
        fhr_controller *c;
        cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
        fhr_stream *native, *view;
        cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &native, NULL), FHR_OK);
        cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), native, &view, NULL), FHR_OK);
        fhr_stream_map cons = {fhr_loc_cuda(0), view};
        fhr_use_opts wait = {FHR_USE_WAIT, 0};
        uint64_t bytes = 0, waits = 0;
        /* the engine starts behind a gate: however slow the host, it runs ahead */
        gate g;
        gate_init(&g);
        cr_assert_eq(fhr_launch_host(b, native, gate_wait, &g, NULL), FHR_OK);
        open_on_first_wait(b, &g);
        for (int i = 0; i < 28; i++) {
            fhr_requirement rq = {fut[i].handle, fhr_loc_cuda(0), 0};
            fhr_request req = {"rot", &rq, 1, NULL, 0, (uint64_t)i + 1};
            fhr_use *u = NULL;
            fhr_error e;
            fhr_error_init(&e);
            cr_assert_eq(fhr_use_begin_opts(c, &req, &cons, 1, NULL, 0, &wait, &u, &e), FHR_OK,
                         "use %d at %d keys: %s", i, nk, e.message);
            for (int r = 0; r < 4; r++) /* the engine's rotations, still queued on return */
                cr_assert_eq(fhr_launch_host(b, native, kernel_sleep, NULL, NULL), FHR_OK);
            cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
            bytes += fhr_report_bytes(fhr_use_report(u), FHR_DIR_H2D);
            waits += fhr_report_waits(fhr_use_report(u));
            fhr_use_destroy(u);
        }
        gate_open(&g); /* all keys fit: no wait opened it */
        opener_gate = NULL;
        cr_assert_eq(fhr_stream_sync(b, native, NULL), FHR_OK);
        cr_assert_eq((double)bytes, predicted, "%d keys: moved %llu, check predicts %.0f", nk,
                     (unsigned long long)bytes, predicted);
        fhr_snapshot *s;
        cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
        const fhr_loc_stats *ls = fhr_snapshot_loc(s, fhr_loc_cuda(0));
        cr_assert_leq(ls->peak_charged_bytes, (uint64_t)nk * KEY);
        cr_assert(ls->obs.valid);
        cr_assert_leq(ls->obs.pool_used_high_bytes, (uint64_t)nk * KEY,
                      "%d keys: the device held %llu bytes at most", nk,
                      (unsigned long long)ls->obs.pool_used_high_bytes);
        cr_assert_eq(ls->obs.pool_used_high_bytes, ls->peak_charged_bytes);
        fhr_snapshot_free(s);
        if (nk == 14)
            cr_assert_eq(waits, 0, "all keys fit: no wait");
        else
            cr_assert_gt(waits, 0, "%d keys: the engine ran ahead, so the budget forced waits", nk);
        fhr_stream_destroy(b, view);
        fhr_stream_destroy(b, native);
        fhr_controller_destroy(c);
        fhr_policy_destroy(p);
        fhr_manager_destroy(m);
        fhr_backend_destroy(b);
    }
}

/* Observations keep fheplan's own device bytes (its pool) apart from the device totals. */
Test(engine, observations_report_fheplans_pool_apart_from_the_device)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_emu_create(1, 64 * KEY, &b, NULL), FHR_OK);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h[2] = {adopt_n(m, KEY, 1, FHR_REPLICABLE), adopt_n(m, KEY, 2, FHR_REPLICABLE)};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(fhr_ensure(m, h[i], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_observation *o = &fhr_snapshot_loc(s, fhr_loc_cuda(0))->obs;
    cr_assert(o->valid);
    cr_assert_eq(o->pool_used_bytes, 2 * KEY);
    cr_assert_eq(o->device_total_bytes, 64 * KEY);
    cr_assert_eq(o->device_free_bytes, 62 * KEY);
    fhr_snapshot_free(s);
    cr_assert_eq(fhr_drop(m, h[0], fhr_loc_cuda(0), NULL), FHR_OK);
    fhr_manager_destroy(m); /* waits for the stream-ordered free */
    fhr_observation after;
    b->ops->observe(b, fhr_loc_cuda(0), &after);
    cr_assert_eq(after.pool_used_bytes, 0);
    cr_assert_eq(after.device_free_bytes, 64 * KEY);
    fhr_backend_destroy(b);
}
