/* tests/unit/test_fault_sweep.c — fails the k-th allocation, copy, event record or
 * source load for every k a multi-stage plan reaches, and checks after each failure:
 * the partial report is exactly the committed prefix, the accounting matches a
 * recount, no MUST_PRESERVE value lost its last copy, and contents are intact. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

typedef struct stage_run {
    fhr_report *reports[2];
    fhr_error err;
    int failed_stage; /* -1 none */
} stage_run;

typedef struct world {
    fhr_backend *fault;
    fhr_manager *m;
    fhr_handle ct, w, key;
    pat_source src;
    fhr_plan *p1;
    fhr_action acts2[3];
} world;

static fhr_action A(fhr_action_kind k, fhr_handle h, fhr_location at)
{
    return (fhr_action){k, h, at, 0, {0, 0}, 0};
}

static void world_init(world *W, int fail_load_at)
{
    fhr_backend *inner = emu_backend(1);
    cr_assert_eq(fhr_backend_fault_create(inner, &W->fault, NULL), FHR_OK);
    fhr_budget bud = {fhr_loc_cuda(0), 1 << 20};
    W->m = new_manager(W->fault, &bud, 1);
    W->ct = adopt_n(W->m, 10000, 1, FHR_EXCLUSIVE);
    W->w = adopt_n(W->m, 7000, 2, FHR_REPLICABLE);
    W->src = (pat_source){.n = 5000, .seed = 3};
    W->src.fail = 0;
    W->key = register_pat(W->m, &W->src, FHR_REPLICABLE);
    W->src.fail = fail_load_at; /* reused as "fail the k-th load" below */
    fhr_action enter[] = {A(FHR_ACT_MOVE, W->ct, fhr_loc_cuda(0)), A(FHR_ACT_ENSURE, W->key, fhr_loc_cuda(0)),
                          A(FHR_ACT_ENSURE, W->w, fhr_loc_pinned())};
    fhr_action exit_[] = {A(FHR_ACT_MOVE, W->ct, fhr_loc_pinned()), A(FHR_ACT_DROP, W->key, fhr_loc_cuda(0)),
                          A(FHR_ACT_ENSURE, W->key, fhr_loc_pinned())};
    fhr_reservation res[] = {{fhr_loc_cuda(0), 4096, "ws"}};
    fhr_plan_desc d = {"stage-1", NULL, 0, enter, 3, exit_, 3, res, 1};
    cr_assert_eq(fhr_plan_create(&d, &W->p1, NULL), FHR_OK);
    W->acts2[0] = A(FHR_ACT_ENSURE, W->w, fhr_loc_cuda(0));
    W->acts2[1] = A(FHR_ACT_MOVE, W->ct, fhr_loc_host());
    W->acts2[2] = A(FHR_ACT_DROP, W->w, fhr_loc_pinned());
}

/* Counts loads and fails the configured one. */
static fhr_status counting_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                                fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    pat_source *ps = ctx;
    int fail_at = ps->fail;
    ps->fail = 0;
    fhr_status st = (fail_at && ps->loads + 1 == fail_at) ? (ps->loads++, FHR_E_SOURCE)
                                                          : pat_load(ctx, spec, at, b, s, out, err);
    ps->fail = fail_at;
    return st;
}

static void run_stages(world *W, stage_run *R)
{
    fhr_error_init(&R->err);
    R->failed_stage = -1;
    R->reports[0] = R->reports[1] = NULL;
    fhr_scope *sc;
    cr_assert_eq(fhr_scope_create(W->m, W->p1, NULL, 0, &sc, NULL), FHR_OK);
    if (fhr_scope_enter(sc, &R->err) != FHR_OK) {
        R->failed_stage = 0;
    } else if (fhr_scope_exit(sc, FHR_OK, &R->err) != FHR_OK) {
        R->failed_stage = 0;
    } else {
        R->reports[0] = fhr_report_clone(fhr_scope_report(sc));
    }
    fhr_scope_destroy(sc);
    if (R->failed_stage >= 0)
        return;
    if (fhr_execute_actions(W->m, W->acts2, 3, NULL, 0, &R->reports[1], &R->err) != FHR_OK)
        R->failed_stage = 1;
}

static void world_free(world *W, stage_run *R)
{
    fhr_report_free(R->reports[0]);
    fhr_report_free(R->reports[1]);
    fhr_error_clear(&R->err);
    fhr_plan_destroy(W->p1);
    fhr_manager_destroy(W->m);
    fhr_backend_destroy(W->fault);
}

static int same_transition(const fhr_transition *a, const fhr_transition *b)
{
    return a->kind == b->kind && a->handle.serial == b->handle.serial &&
           fhr_loc_equal(a->to, b->to) && a->has_from == b->has_from &&
           (!a->has_from || fhr_loc_equal(a->from, b->from)) && a->phase == b->phase &&
           a->action_index == b->action_index;
}

static void check_invariants(world *W, const stage_run *R, const stage_run *clean)
{
    check_accounting(W->m);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(W->m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nvalues; i++)
        if (s->values[i].recoverability == FHR_MUST_PRESERVE)
            cr_assert_geq(s->values[i].ncopies, 1, "value #%llu lost its last copy",
                          (unsigned long long)s->values[i].handle.serial);
    for (size_t i = 0; i < s->nlocs; i++)
        cr_assert_eq(s->locs[i].reserved_bytes, 0, "headroom leaked");
    /* contents survive every path */
    fhr_handle hs[] = {W->ct, W->w};
    uint64_t seeds[] = {1, 2};
    size_t sizes[] = {10000, 7000};
    for (int v = 0; v < 2; v++) {
        const fhr_value_info *vi = fhr_snapshot_value(s, hs[v]);
        for (size_t c = 0; c < vi->ncopies; c++)
            cr_assert(resident_has_pattern(W->m, hs[v], vi->copies[c].loc, seeds[v], sizes[v]));
    }
    fhr_snapshot_free(s);
    if (R->failed_stage < 0)
        return;
    cr_assert(R->err.status == FHR_E_PLAN, "status %s: %s", fhr_status_name(R->err.status),
              R->err.message);
    const fhr_report *part = R->err.partial_report;
    cr_assert_not_null(part);
    const fhr_report *full = clean->reports[R->failed_stage];
    /* the partial report is exactly the prefix of the clean run before the failing action */
    size_t n = fhr_report_ntransitions(part);
    cr_assert_lt(n, fhr_report_ntransitions(full) + 1);
    for (size_t i = 0; i < n; i++)
        cr_assert(same_transition(fhr_report_transition(part, i), fhr_report_transition(full, i)),
                  "transition %zu differs", i);
    if (n < fhr_report_ntransitions(full)) {
        const fhr_transition *next = fhr_report_transition(full, n);
        cr_assert_eq(next->phase, R->err.phase);
        cr_assert_eq((long)next->action_index, R->err.action_index,
                     "failure at %s %ld but the prefix stops before action %zu",
                     fhr_phase_name(R->err.phase), R->err.action_index, next->action_index);
    }
}

static void sweep(fhr_fault_kind kind, const char *name)
{
    world W;
    stage_run clean;
    world_init(&W, 0);
    /* a clean run counts the injection points */
    fhr_backend_fault_arm(W.fault, kind, 0);
    run_stages(&W, &clean);
    cr_assert_eq(clean.failed_stage, -1, "clean run failed: %s", clean.err.message);
    uint64_t points = fhr_backend_fault_count(W.fault, kind);
    cr_assert_gt(points, 2, "%s: too few injection points", name);
    fhr_plan_destroy(W.p1);
    fhr_manager_destroy(W.m);
    fhr_backend_destroy(W.fault);
    W.p1 = NULL;
    int failures = 0;
    for (uint64_t k = 1; k <= points; k++) {
        world X;
        stage_run R;
        world_init(&X, 0);
        fhr_backend_fault_arm(X.fault, kind, k);
        run_stages(&X, &R);
        fhr_backend_fault_arm(X.fault, kind, 0);
        failures += R.failed_stage >= 0;
        check_invariants(&X, &R, &clean);
        world_free(&X, &R);
    }
    cr_assert_gt(failures, 0, "%s: no injected fault surfaced", name);
    fhr_report_free(clean.reports[0]);
    fhr_report_free(clean.reports[1]);
    fhr_error_clear(&clean.err);
}

Test(fault_sweep, every_allocation) { sweep(FHR_FAULT_ALLOC, "alloc"); }
Test(fault_sweep, every_copy) { sweep(FHR_FAULT_COPY, "copy"); }
Test(fault_sweep, every_event) { sweep(FHR_FAULT_EVENT, "event"); }

Test(fault_sweep, every_source_load)
{
    world W;
    stage_run clean;
    world_init(&W, 0);
    run_stages(&W, &clean);
    int loads = W.src.loads;
    cr_assert_geq(loads, 1);
    uint64_t clean_key = W.key.serial;
    fhr_report *keep0 = clean.reports[0], *keep1 = clean.reports[1];
    clean.reports[0] = clean.reports[1] = NULL;
    world_free(&W, &clean);
    clean.reports[0] = keep0;
    clean.reports[1] = keep1;
    for (int k = 1; k <= loads; k++) {
        world X;
        stage_run R;
        world_init(&X, 0);
        /* swap in the counting loader */
        fhr_field_spec f;
        fhr_value_spec spec = pat_spec(&f, 5000);
        fhr_source src = {counting_load, &X.src, NULL};
        fhr_handle key2;
        X.src.fail = k;
        cr_assert_eq(fhr_register_source(X.m, &spec, &src, NULL, &key2, NULL), FHR_OK);
        cr_assert_eq(fhr_discard(X.m, X.key, NULL), FHR_OK);
        X.key = key2;
        fhr_plan_destroy(X.p1);
        fhr_action enter[] = {A(FHR_ACT_MOVE, X.ct, fhr_loc_cuda(0)), A(FHR_ACT_ENSURE, X.key, fhr_loc_cuda(0)),
                              A(FHR_ACT_ENSURE, X.w, fhr_loc_pinned())};
        fhr_action exit_[] = {A(FHR_ACT_MOVE, X.ct, fhr_loc_pinned()), A(FHR_ACT_DROP, X.key, fhr_loc_cuda(0)),
                              A(FHR_ACT_ENSURE, X.key, fhr_loc_pinned())};
        fhr_reservation res[] = {{fhr_loc_cuda(0), 4096, "ws"}};
        fhr_plan_desc d = {"stage-1", NULL, 0, enter, 3, exit_, 3, res, 1};
        cr_assert_eq(fhr_plan_create(&d, &X.p1, NULL), FHR_OK);
        run_stages(&X, &R);
        cr_assert_eq(R.failed_stage, 0);
        cr_assert_eq(R.err.cause, FHR_E_SOURCE);
        /* the partial report is the clean run's prefix up to the k-th load (the key has a
         * new handle here), and the failure is at the action that made that load */
        const fhr_report *part = R.err.partial_report;
        cr_assert_not_null(part);
        size_t n = fhr_report_ntransitions(part);
        cr_assert_lt(n, fhr_report_ntransitions(keep0), "load %d: nothing failed", k);
        int loaded = 0;
        for (size_t i = 0; i < n; i++) {
            fhr_transition t = *fhr_report_transition(part, i);
            if (t.handle.serial == X.key.serial)
                t.handle.serial = clean_key;
            cr_assert(same_transition(&t, fhr_report_transition(keep0, i)),
                      "load %d: transition %zu differs from the clean run", k, i);
            loaded += t.loaded;
        }
        cr_assert_eq(loaded, k - 1, "load %d: the prefix holds %d loads", k, loaded);
        const fhr_transition *next = fhr_report_transition(keep0, n);
        cr_assert(next->loaded, "load %d: the clean run's next transition made no load", k);
        cr_assert_eq(next->phase, R.err.phase);
        cr_assert_eq((long)next->action_index, R.err.action_index);
        /* same residency as the clean run would have at that point */
        check_accounting(X.m);
        cr_assert_eq(t_is_resident(X.m, X.ct, fhr_loc_host()) +
                         t_is_resident(X.m, X.ct, fhr_loc_cuda(0)) +
                         t_is_resident(X.m, X.ct, fhr_loc_pinned()), 1);
        world_free(&X, &R);
    }
    fhr_report_free(keep0);
    fhr_report_free(keep1);
}
