/* tests/unit/test_controller.c — the controller over live managers on the emulated
 * device: request validation, priority ordering, fallback chains of length 1-3 that
 * really move values, protected copies, stale decisions, infeasible explanations, and
 * use() with consumer and transfer streams (copies stay cached afterwards). */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "runtime/control/victim_index.h"

typedef struct rig {
    fhr_backend *b;
    fhr_manager *m;
    fhr_policy *p;
    fhr_controller *c;
} rig;

static rig rig_new(const fhr_budget *bud, size_t nb, const fhr_tier_chain *ch, size_t nch)
{
    rig r;
    r.b = emu_backend(2);
    r.m = new_manager(r.b, bud, nb);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_policy_tiered_lru_create(ch, nch, &r.p, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_controller_create(r.m, r.p, &r.c, &e), FHR_OK, "%s", e.message);
    return r;
}

static void rig_free(rig *r)
{
    fhr_controller_destroy(r->c);
    fhr_policy_destroy(r->p);
    fhr_manager_destroy(r->m);
    fhr_backend_destroy(r->b);
}

static fhr_decision *decide_ok(rig *r, const fhr_request *req)
{
    fhr_decision *d = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_decide(r->c, req, &d, &e), FHR_OK, "%s", e.message);
    return d;
}

/* Runs a decision to completion on host locations only (no consumer stream needed). */
static void use_ok(rig *r, const fhr_decision *d)
{
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(r->b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_stream_map cons[] = {{fhr_loc_cuda(0), s}, {fhr_loc_cuda(1), s}};
    cr_assert_eq(fhr_use_decision(r->c, d, cons, 2, NULL, 0, &u, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_OK, "%s", e.message);
    fhr_use_destroy(u);
    fhr_stream_sync(r->b, s, NULL);
    fhr_stream_destroy(r->b, s);
    t_reap(r->m);
}

Test(controller, request_validation)
{
    rig r = rig_new(NULL, 0, NULL, 0);
    fhr_handle x = adopt_n(r.m, 64, 1, FHR_EXCLUSIVE);
    fhr_handle y = adopt_n(r.m, 64, 2, FHR_REPLICABLE);
    fhr_decision *d = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_requirement two[] = {{x, fhr_loc_cuda(0), 0}, {x, fhr_loc_pinned(), 0}};
    fhr_request req = {"bad", two, 2, NULL, 0, 0};
    cr_assert_eq(fhr_decide(r.c, &req, &d, &e), FHR_E_REPLICA);
    cr_assert(strstr(e.message, "EXCLUSIVE"), "%s", e.message);
    cr_assert_null(d);
    fhr_requirement foreign[] = {{{x.manager_id + 1, x.serial}, fhr_loc_host(), 0}};
    req.requirements = foreign;
    req.nrequirements = 1;
    cr_assert_eq(fhr_decide(r.c, &req, &d, &e), FHR_E_HANDLE);
    fhr_requirement badloc[] = {{y, {FHR_LOC_INVALID, 0}, 0}};
    req.requirements = badloc;
    cr_assert_eq(fhr_decide(r.c, &req, &d, &e), FHR_E_LOCATION);
    /* REPLICABLE at several locations, with a repeat that counts once */
    fhr_requirement many[] = {{y, fhr_loc_cuda(0), 0}, {y, fhr_loc_pinned(), 0}, {y, fhr_loc_cuda(0), 0},
                              {x, fhr_loc_cuda(1), 0}};
    req.requirements = many;
    req.nrequirements = 4;
    d = decide_ok(&r, &req);
    cr_assert(fhr_decision_feasible(d));
    const fhr_plan *p = fhr_decision_plan(d);
    cr_assert_eq(fhr_plan_nactions(p, FHR_PHASE_ENTER), 3);
    cr_assert_eq(fhr_plan_action(p, FHR_PHASE_ENTER, 0)->kind, FHR_ACT_ENSURE);
    const fhr_action *mv = fhr_plan_action(p, FHR_PHASE_ENTER, 2);
    cr_assert_eq(mv->kind, FHR_ACT_MOVE, "EXCLUSIVE values move");
    cr_assert(mv->has_from && fhr_loc_equal(mv->from, fhr_loc_host()), "from its current copy");
    cr_assert_eq(fhr_plan_nactions(p, FHR_PHASE_EXIT), 0, "copies stay cached");
    use_ok(&r, d);
    cr_assert_eq(t_is_resident(r.m, y, fhr_loc_cuda(0)), 1);
    cr_assert_eq(t_is_resident(r.m, y, fhr_loc_pinned()), 1);
    cr_assert_eq(t_is_resident(r.m, x, fhr_loc_cuda(1)), 1);
    cr_assert_eq(t_is_resident(r.m, x, fhr_loc_host()), 0);
    fhr_decision_destroy(d);
    rig_free(&r);
}

Test(controller, priority_then_lru_ordering_on_a_live_manager)
{
    fhr_budget bud = {fhr_loc_cuda(0), 400};
    rig r = rig_new(&bud, 1, NULL, 0);
    fhr_handle v[4];
    int32_t prio[4] = {5, 1, 1, 3};
    for (int i = 0; i < 4; i++) {
        v[i] = adopt_n(r.m, 100, (uint64_t)i, FHR_REPLICABLE);
        cr_assert_eq(fhr_set_priority(r.m, v[i], prio[i], NULL), FHR_OK);
    }
    /* cuda copies in order 2, 1, 3, 0: among priority 1, #2 (v[2]) is older */
    int order[4] = {2, 1, 3, 0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(fhr_ensure(r.m, v[order[i]], fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_handle w = adopt_n(r.m, 250, 9, FHR_REPLICABLE);
    fhr_requirement rq = {w, fhr_loc_cuda(0), 0};
    fhr_request req = {"tile", &rq, 1, NULL, 0, 0};
    fhr_decision *d = decide_ok(&r, &req);
    cr_assert(fhr_decision_feasible(d), "%s", fhr_decision_explanation(d)->reason);
    cr_assert_eq(fhr_decision_nevictions(d), 3);
    fhr_handle want[3] = {v[2], v[1], v[3]};
    for (size_t i = 0; i < 3; i++) {
        const fhr_eviction *ev = fhr_decision_eviction(d, i);
        cr_assert(fhr_handle_equal(ev->action.handle, want[i]), "eviction %zu", i);
        cr_assert_eq(ev->action.kind, FHR_ACT_DROP, "a host copy exists: drop");
    }
    cr_assert_eq(fhr_decision_explored_states(d), 4);
    cr_assert_eq(fhr_decision_predicted_peak_bytes(d, fhr_loc_cuda(0)), 400, "the peak is now");
    cr_assert_eq(fhr_decision_state_version(d), t_state_version(r.m));
    char *js = fhr_decision_json(d);
    cr_assert(strstr(js, "\"policy\":\"tiered_lru\""), "%s", js);
    cr_assert(strstr(js, "\"explored_states\":4"), "%s", js);
    free(js);
    use_ok(&r, d);
    cr_assert_eq(t_is_resident(r.m, v[0], fhr_loc_cuda(0)), 1);
    cr_assert_eq(t_is_resident(r.m, v[2], fhr_loc_cuda(0)), 0);
    cr_assert_eq(t_is_resident(r.m, w, fhr_loc_cuda(0)), 1);
    check_accounting(r.m);
    fhr_decision_destroy(d);
    rig_free(&r);
}

Test(controller, fallback_chains_of_length_1_to_3_move_the_last_copy)
{
    for (size_t len = 1; len <= 3; len++) {
        /* chain cuda:0 -> cuda:1 -> pinned -> host; the first len-1 tiers lack room */
        fhr_budget bud[] = {{fhr_loc_cuda(0), 300}, {fhr_loc_cuda(1), 200}, {fhr_loc_pinned(), 200}};
        fhr_location tiers[3] = {fhr_loc_cuda(1), fhr_loc_pinned(), fhr_loc_host()};
        fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, len};
        rig r = rig_new(bud, 3, &ch, 1);
        if (len >= 2) { /* fill cuda:1 */
            fhr_handle f = adopt_n(r.m, 100, 50, FHR_EXCLUSIVE);
            cr_assert_eq(fhr_move(r.m, f, fhr_loc_cuda(1), NULL, NULL, NULL), FHR_OK);
        }
        if (len >= 3) { /* fill pinned */
            fhr_handle f = adopt_n(r.m, 100, 51, FHR_EXCLUSIVE);
            cr_assert_eq(fhr_move(r.m, f, fhr_loc_pinned(), NULL, NULL, NULL), FHR_OK);
        }
        fhr_handle victim = adopt_n(r.m, 200, 7, FHR_EXCLUSIVE);
        cr_assert_eq(fhr_move(r.m, victim, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
        cr_assert(resident_has_pattern(r.m, victim, fhr_loc_cuda(0), 7, 200));
        fhr_handle w = adopt_n(r.m, 200, 8, FHR_EXCLUSIVE);
        fhr_requirement rq = {w, fhr_loc_cuda(0), 0};
        fhr_request req = {"chain", &rq, 1, NULL, 0, 0};
        fhr_decision *d = decide_ok(&r, &req);
        cr_assert(fhr_decision_feasible(d), "len %zu: %s", len, fhr_decision_explanation(d)->reason);
        cr_assert_eq(fhr_decision_nevictions(d), 1);
        const fhr_action *a = &fhr_decision_eviction(d, 0)->action;
        cr_assert_eq(a->kind, FHR_ACT_MOVE, "the last copy of a MUST_PRESERVE value moves");
        cr_assert(fhr_loc_equal(a->at, tiers[len - 1]), "len %zu: first tier with room", len);
        cr_assert_eq(fhr_decision_explored_states(d), 1 + len);
        use_ok(&r, d);
        cr_assert_eq(t_is_resident(r.m, victim, tiers[len - 1]), 1);
        cr_assert(resident_has_pattern(r.m, victim, tiers[len - 1], 7, 200), "moved intact");
        cr_assert(resident_has_pattern(r.m, w, fhr_loc_cuda(0), 8, 200));
        check_accounting(r.m);
        fhr_decision_destroy(d);
        rig_free(&r);
    }
}

Test(controller, never_uses_an_unconfigured_tier)
{
    fhr_budget bud = {fhr_loc_cuda(0), 300};
    rig r = rig_new(&bud, 1, NULL, 0); /* no chains at all */
    fhr_handle victim = adopt_n(r.m, 200, 7, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(r.m, victim, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    fhr_handle w = adopt_n(r.m, 200, 8, FHR_REPLICABLE);
    fhr_requirement rq = {w, fhr_loc_cuda(0), 0};
    fhr_request req = {"nochain", &rq, 1, NULL, 0, 0};
    fhr_decision *d = decide_ok(&r, &req);
    cr_assert_not(fhr_decision_feasible(d));
    cr_assert_eq(fhr_decision_nprotected(d), 1);
    cr_assert_eq(fhr_decision_protected(d, 0)->reasons, FHR_PROT_NO_TIER);
    cr_assert(strstr(fhr_decision_explanation(d)->reason, "no configured fallback tier"), "%s",
              fhr_decision_explanation(d)->reason);
    fhr_decision_destroy(d);
    /* a RECONSTRUCTIBLE victim may simply be dropped, chain or not */
    pat_source ps = {.n = 200, .seed = 3};
    fhr_handle s = register_pat(r.m, &ps, FHR_REPLICABLE);
    cr_assert_eq(fhr_move(r.m, victim, fhr_loc_host(), NULL, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(r.m, s, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    d = decide_ok(&r, &req);
    cr_assert(fhr_decision_feasible(d), "%s", fhr_decision_explanation(d)->reason);
    cr_assert_eq(fhr_decision_eviction(d, 0)->action.kind, FHR_ACT_DROP);
    use_ok(&r, d);
    cr_assert_eq(t_is_resident(r.m, s, fhr_loc_cuda(0)), 0);
    fhr_decision_destroy(d);
    rig_free(&r);
}

Test(controller, protected_copies_are_skipped)
{
    fhr_budget bud = {fhr_loc_cuda(0), 300};
    rig r = rig_new(&bud, 1, NULL, 0);
    fhr_handle a = adopt_n(r.m, 100, 1, FHR_REPLICABLE);
    fhr_handle b = adopt_n(r.m, 100, 2, FHR_REPLICABLE);
    fhr_handle c = adopt_n(r.m, 100, 3, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(r.m, a, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(r.m, b, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(r.m, c, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_hold *hd;
    cr_assert_eq(fhr_hold_acquire(r.m, &a, 1, fhr_loc_cuda(0), &hd, NULL), FHR_OK);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_lease *l;
    cr_assert_eq(fhr_acquire(r.m, &b, 1, fhr_loc_cuda(0), s, &l, NULL), FHR_OK);
    fhr_reservation res = {fhr_loc_cuda(0), 100, "ws"};
    fhr_request req = {"prot", NULL, 0, &res, 1, 0};
    fhr_decision *d = decide_ok(&r, &req);
    cr_assert(fhr_decision_feasible(d));
    cr_assert_eq(fhr_decision_nevictions(d), 1);
    cr_assert(fhr_handle_equal(fhr_decision_eviction(d, 0)->action.handle, c), "a and b are protected");
    fhr_decision_destroy(d);
    res.nbytes = 200;
    d = decide_ok(&r, &req);
    cr_assert_not(fhr_decision_feasible(d));
    const fhr_explanation *ex = fhr_decision_explanation(d);
    cr_assert(fhr_loc_equal(ex->loc, fhr_loc_cuda(0)));
    cr_assert_eq(ex->bytes_short, 100);
    cr_assert_eq(fhr_decision_nprotected(d), 2);
    cr_assert_eq(fhr_decision_protected(d, 0)->reasons, FHR_PROT_HELD);
    cr_assert_eq(fhr_decision_protected(d, 1)->reasons, FHR_PROT_LEASED);
    char *js = fhr_decision_json(d);
    cr_assert(strstr(js, "\"reasons\":[\"held\"]"), "%s", js);
    cr_assert(strstr(js, "\"bytes_short\":100"), "%s", js);
    free(js);
    fhr_decision_destroy(d);
    fhr_lease_destroy(l);
    fhr_hold_destroy(hd);
    fhr_stream_sync(r.b, s, NULL);
    fhr_stream_destroy(r.b, s);
    rig_free(&r);
}

Test(controller, stale_decision_is_refused_not_replanned)
{
    fhr_budget bud = {fhr_loc_cuda(0), 200};
    rig r = rig_new(&bud, 1, NULL, 0);
    fhr_handle old = adopt_n(r.m, 100, 1, FHR_REPLICABLE);
    fhr_handle w = adopt_n(r.m, 150, 2, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(r.m, old, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_requirement rq = {w, fhr_loc_cuda(0), 0};
    fhr_request req = {"stale", &rq, 1, NULL, 0, 0};
    fhr_decision *d = decide_ok(&r, &req);
    cr_assert(fhr_decision_feasible(d));
    cr_assert_eq(fhr_decision_nevictions(d), 1);
    /* intervening mutation */
    cr_assert_eq(fhr_ensure(r.m, old, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    uint64_t v = t_state_version(r.m);
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_decision(r.c, d, NULL, 0, NULL, 0, &u, &e), FHR_E_LEASE,
                 "cuda needs a consumer stream, checked first");
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), s};
    cr_assert_eq(fhr_use_decision(r.c, d, &cons, 1, NULL, 0, &u, &e), FHR_E_STALE);
    cr_assert(strstr(e.message, "decide again"), "%s", e.message);
    cr_assert_null(u);
    cr_assert_eq(t_state_version(r.m), v, "nothing ran");
    cr_assert_eq(t_is_resident(r.m, old, fhr_loc_cuda(0)), 1, "the eviction did not run");
    cr_assert_eq(t_is_resident(r.m, w, fhr_loc_cuda(0)), 0);
    fhr_decision_destroy(d);
    d = decide_ok(&r, &req); /* deciding again works */
    cr_assert_eq(fhr_use_decision(r.c, d, &cons, 1, NULL, 0, &u, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_OK);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_E_SCOPE);
    fhr_use_destroy(u);
    fhr_decision_destroy(d);
    fhr_stream_sync(r.b, s, NULL);
    fhr_stream_destroy(r.b, s);
    rig_free(&r);
}

Test(controller, infeasible_explains_location_bytes_and_protection)
{
    fhr_budget bud[] = {{fhr_loc_cuda(0), 1000}, {fhr_loc_pinned(), 50}};
    fhr_location t[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), t, 1};
    rig r = rig_new(bud, 2, &ch, 1);
    fhr_handle a = adopt_n(r.m, 300, 1, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(r.m, a, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    fhr_hold *hd;
    fhr_handle k = adopt_n(r.m, 400, 2, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(r.m, k, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_hold_acquire(r.m, &k, 1, fhr_loc_cuda(0), &hd, NULL), FHR_OK);
    fhr_reservation res = {fhr_loc_cuda(0), 500, "workspace"};
    fhr_request req = {"too-big", NULL, 0, &res, 1, 0};
    uint64_t v = t_state_version(r.m);
    fhr_decision *d = decide_ok(&r, &req);
    cr_assert_eq(t_state_version(r.m), v, "decide changes no state");
    cr_assert_not(fhr_decision_feasible(d));
    const fhr_explanation *ex = fhr_decision_explanation(d);
    cr_assert(fhr_loc_equal(ex->loc, fhr_loc_cuda(0)));
    cr_assert_eq(ex->bytes_short, 200, "700 committed + 500 - 1000");
    cr_assert(strstr(ex->reason, "cuda:0 is short by 200 bytes"), "%s", ex->reason);
    cr_assert(strstr(ex->reason, "held"), "%s", ex->reason);
    cr_assert(strstr(ex->reason, "no configured fallback tier with room"), "%s", ex->reason);
    fhr_decision_destroy(d);
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), s};
    cr_assert_eq(fhr_use_begin(r.c, &req, &cons, 1, NULL, 0, &u, &e), FHR_E_INFEASIBLE);
    cr_assert(fhr_loc_equal(e.loc, fhr_loc_cuda(0)));
    cr_assert_eq(e.bytes_short, 200);
    cr_assert_eq(t_state_version(r.m), v);
    cr_assert_null(u);
    /* the manager's explain is the authority: a move the policy cannot see fails there */
    fhr_hold_destroy(hd);
    fhr_requirement rq = {a, fhr_loc_cuda(1), 0};
    fhr_request req2 = {"move-held", &rq, 1, NULL, 0, 0};
    cr_assert_eq(fhr_hold_acquire(r.m, &a, 1, fhr_loc_cuda(0), &hd, NULL), FHR_OK);
    d = decide_ok(&r, &req2);
    cr_assert_not(fhr_decision_feasible(d));
    cr_assert_eq(fhr_decision_explanation(d)->status, FHR_E_PROTECTED);
    fhr_decision_destroy(d);
    fhr_hold_destroy(hd);
    fhr_stream_sync(r.b, s, NULL);
    fhr_stream_destroy(r.b, s);
    rig_free(&r);
}

Test(controller, use_on_the_emulated_device_with_consumer_streams)
{
    fhr_budget bud = {fhr_loc_cuda(0), 1000};
    fhr_location t[] = {fhr_loc_pinned(), fhr_loc_host()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), t, 2};
    rig r = rig_new(&bud, 1, &ch, 1);
    fhr_handle old = adopt_n(r.m, 400, 9, FHR_EXCLUSIVE);
    cr_assert_eq(fhr_move(r.m, old, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    fhr_handle in = adopt_n(r.m, 300, 1, FHR_EXCLUSIVE);
    fhr_handle key = adopt_n(r.m, 256, 2, FHR_REPLICABLE);
    pat_source ps = {.n = 128, .seed = 3};
    fhr_handle src = register_pat(r.m, &ps, FHR_REPLICABLE);
    fhr_requirement rq[] = {{in, fhr_loc_cuda(0), 0}, {key, fhr_loc_cuda(0), 0}, {src, fhr_loc_host(), 0}};
    fhr_reservation res = {fhr_loc_cuda(0), 100, "workspace"};
    fhr_request req = {"attention/tile-4", rq, 3, &res, 1, 0};
    fhr_stream *comp, *xfer;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &comp, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &xfer, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), comp}, tr = {fhr_loc_cuda(0), xfer};
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_begin(r.c, &req, &cons, 1, &tr, 1, &u, &e), FHR_OK, "%s", e.message);
    const fhr_decision *d = fhr_use_decision_of(u);
    cr_assert_not_null(d);
    cr_assert_eq(fhr_decision_nevictions(d), 1);
    cr_assert_eq(fhr_decision_eviction(d, 0)->action.kind, FHR_ACT_MOVE);
    cr_assert(fhr_loc_equal(fhr_decision_eviction(d, 0)->action.at, fhr_loc_pinned()));
    const fhr_value *vi = fhr_use_value(u, in, fhr_loc_cuda(0));
    const fhr_value *vk = fhr_use_value(u, key, fhr_loc_cuda(0));
    const fhr_value *vs = fhr_use_value(u, src, fhr_loc_host());
    cr_assert(vi && vk && vs);
    cr_assert_null(fhr_use_value(u, in, fhr_loc_host()), "not leased there");
    cr_assert(fhr_loc_equal(fhr_value_location(vi), fhr_loc_cuda(0)));
    fhr_stream_sync(r.b, comp, NULL); /* the consumer stream waited for the copies */
    cr_assert(value_has_pattern(r.b, vi, 1, 300));
    cr_assert(value_has_pattern(r.b, vk, 2, 256));
    cr_assert(value_has_pattern(r.b, vs, 3, 128));
    fhr_stream *extra;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &extra, NULL), FHR_OK);
    cr_assert_eq(fhr_use_add_consumer_stream(u, fhr_loc_cuda(0), extra, &e), FHR_OK, "%s", e.message);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(r.m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 100);
    cr_assert_eq(fhr_snapshot_value(s, key)->copies[1].leases, 1);
    fhr_snapshot_free(s);
    cr_assert_eq(fhr_use_end(u, FHR_OK, &e), FHR_OK, "%s", e.message);
    fhr_use_destroy(u);
    /* copies stay cached; the reservation is gone */
    cr_assert_eq(t_is_resident(r.m, in, fhr_loc_cuda(0)), 1);
    cr_assert_eq(t_is_resident(r.m, key, fhr_loc_cuda(0)), 1);
    cr_assert_eq(t_is_resident(r.m, src, fhr_loc_host()), 1);
    cr_assert_eq(t_is_resident(r.m, old, fhr_loc_pinned()), 1);
    cr_assert_eq(ps.loads, 1);
    fhr_stream_sync(r.b, comp, NULL);
    fhr_stream_sync(r.b, extra, NULL);
    t_reap(r.m);
    cr_assert_eq(fhr_snapshot_take(r.m, &s, NULL), FHR_OK);
    cr_assert_eq(fhr_snapshot_loc(s, fhr_loc_cuda(0))->reserved_bytes, 0);
    fhr_snapshot_free(s);
    /* the same request again: nothing to do, nothing evicted */
    cr_assert_eq(fhr_use_begin(r.c, &req, &cons, 1, &tr, 1, &u, &e), FHR_OK, "%s", e.message);
    d = fhr_use_decision_of(u);
    cr_assert_eq(fhr_decision_nevictions(d), 0);
    cr_assert_eq(fhr_plan_nactions(fhr_decision_plan(d), FHR_PHASE_ENTER), 0);
    fhr_use_destroy(u); /* ends it as a failed body */
    cr_assert_eq(ps.loads, 1);
    check_accounting(r.m);
    fhr_stream_sync(r.b, comp, NULL);
    fhr_stream_destroy(r.b, comp);
    fhr_stream_destroy(r.b, xfer);
    fhr_stream_destroy(r.b, extra);
    rig_free(&r);
}

Test(controller, foreign_decision_is_refused)
{
    rig r1 = rig_new(NULL, 0, NULL, 0), r2 = rig_new(NULL, 0, NULL, 0);
    fhr_handle h = adopt_n(r1.m, 64, 1, FHR_REPLICABLE);
    fhr_requirement rq = {h, fhr_loc_pinned(), 0};
    fhr_request req = {"x", &rq, 1, NULL, 0, 0};
    fhr_decision *d = decide_ok(&r1, &req);
    fhr_use *u = NULL;
    cr_assert_eq(fhr_use_decision(r2.c, d, NULL, 0, NULL, 0, &u, NULL), FHR_E_HANDLE);
    fhr_decision_destroy(d);
    rig_free(&r1);
    rig_free(&r2);
}

/* A custom policy that asks the tiered LRU policy: the controller gives it a snapshot every
 * time, so it shows what the built-in policy decides on the full path. */
static fhr_status mirror_decide(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                                fhr_policy_out *out, fhr_error *err)
{
    return fhr_policy_decide(ctx, snap, req, out, err);
}

/* Decides req on the controller under test and on one that takes a fresh snapshot every
 * time (the full path): the same status, error and decision JSON, byte for byte. Returns
 * the first decision (NULL when deciding failed); the full path's is destroyed. */
static fhr_decision *decide_as_full(fhr_controller *c, fhr_controller *full_c,
                                    const fhr_request *req, const char *what)
{
    fhr_decision *fast = NULL, *full = NULL;
    fhr_error e1, e2;
    fhr_error_init(&e1);
    fhr_error_init(&e2);
    fhr_status s1 = fhr_decide(c, req, &fast, &e1);
    fhr_status s2 = fhr_decide(full_c, req, &full, &e2);
    cr_assert_eq(s1, s2, "%s: %s / %s", what, e1.message, e2.message);
    cr_assert_str_eq(e1.message, e2.message, "%s", what);
    if (s1 == FHR_OK) {
        char *j1 = fhr_decision_json(fast), *j2 = fhr_decision_json(full);
        cr_assert_str_eq(j1, j2, "%s", what);
        free(j1);
        free(j2);
    }
    fhr_decision_destroy(full);
    return fast;
}

/* step N, as decide_as_full's label */
static const char *step_name(int step)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "step %d", step);
    return buf;
}

/* The controller skips the snapshot for a request its built-in policy would meet with
 * nothing to do; what it decides must be byte for byte what the full path decides, for
 * requests already met and for those that are not (a copy missing, a reservation that
 * does not fit beside what is there, an unknown handle). */
Test(controller, met_requests_decide_as_the_full_path)
{
    fhr_budget bud = {fhr_loc_cuda(0), 256};
    fhr_location tiers[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, 1};
    rig r = rig_new(&bud, 1, &ch, 1);
    fhr_policy_ops ops = {"tiered_lru", mirror_decide, NULL};
    fhr_policy *mp;
    fhr_controller *mc;
    cr_assert_eq(fhr_policy_create(&ops, r.p, &mp, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(r.m, mp, &mc, NULL), FHR_OK);
    fhr_handle a = adopt_n(r.m, 64, 1, FHR_REPLICABLE);
    fhr_handle b = adopt_n(r.m, 64, 2, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(r.m, a, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(r.m, b, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    fhr_requirement need_a = {a, fhr_loc_cuda(0), 0}, need_ab[] = {{a, fhr_loc_cuda(0), 0},
                                                                {b, fhr_loc_pinned(), 0}};
    fhr_requirement unknown = {{a.manager_id, a.serial + 100}, fhr_loc_cuda(0), 0};
    fhr_reservation fits = {fhr_loc_cuda(0), 128, "ws"}, tight = {fhr_loc_cuda(0), 129, "ws"};
    fhr_reservation two[] = {{fhr_loc_cuda(0), 64, "x"}, {fhr_loc_cuda(0), 65, "y"}};
    struct { fhr_request req; int met; } cases[] = {
        {{"met", &need_a, 1, NULL, 0, 0}, 1},
        {{"met, reservation fits", &need_a, 1, &fits, 1, 0}, 1},
        {{"evicts for the reservation", &need_a, 1, &tight, 1, 0}, 0},
        {{"two reservations that do not fit together", &need_a, 1, two, 2, 0}, 0},
        {{"a copy missing", need_ab, 2, NULL, 0, 0}, 0},
        {{"unknown handle", &unknown, 1, NULL, 0, 0}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fhr_decision *fast = decide_as_full(r.c, mc, &cases[i].req, cases[i].req.name);
        if (fast) {
            int nothing = fhr_decision_feasible(fast) && !fhr_decision_nevictions(fast) &&
                          !fhr_plan_nactions(fhr_decision_plan(fast), FHR_PHASE_ENTER);
            cr_assert_eq(nothing, cases[i].met, "%s", cases[i].req.name);
        }
        fhr_decision_destroy(fast);
    }
    check_accounting(r.m);
    fhr_controller_destroy(mc);
    fhr_policy_destroy(mp); /* its ctx is r.p, destroyed by rig_free (no destroy op) */
    rig_free(&r);
}

/* A request that loads decides over the controller's placement snapshot, caught up from the
 * manager's change log rather than taken afresh; what it decides must be byte for byte what
 * a fresh snapshot decides, through a run of requests that load and evict, with values
 * adopted and discarded, priorities changed, copies held and leased between them. */
Test(controller, loading_requests_decide_as_the_full_path)
{
    fhr_budget bud = {fhr_loc_cuda(0), 64 * 4};
    fhr_location tiers[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, 1};
    rig r = rig_new(&bud, 1, &ch, 1);
    fhr_policy_ops ops = {"tiered_lru", mirror_decide, NULL};
    fhr_policy *mp;
    fhr_controller *mc;
    cr_assert_eq(fhr_policy_create(&ops, r.p, &mp, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(r.m, mp, &mc, NULL), FHR_OK);
    fhr_handle hs[24];
    size_t nh = 0, evicting = 0;
    for (; nh < 8; nh++)
        hs[nh] = adopt_n(r.m, 64, nh, nh % 3 ? FHR_REPLICABLE : FHR_EXCLUSIVE);
    fhr_hold *hold = NULL;
    fhr_lease *lease = NULL;
    for (int step = 0; step < 80; step++) {
        fhr_handle h = hs[(size_t)step * 5 % nh];
        if (step % 7 == 3)
            (void)fhr_set_priority(r.m, hs[(size_t)step % nh], step % 3, NULL);
        if (step % 11 == 5 && nh < 24) {
            hs[nh] = adopt_n(r.m, 64, nh, FHR_REPLICABLE);
            nh++;
        }
        if (step % 13 == 6) {
            if (hold) {
                cr_assert_eq(fhr_hold_release(hold, NULL), FHR_OK);
                fhr_hold_destroy(hold);
                hold = NULL;
            } else if (fhr_hold_acquire(r.m, &hs[(size_t)step % nh], 1, fhr_loc_cuda(0), &hold,
                                        NULL) != FHR_OK) {
                hold = NULL;
            }
        }
        if (step % 9 == 4) {
            if (lease) {
                cr_assert_eq(fhr_lease_release(lease, NULL), FHR_OK);
                fhr_lease_destroy(lease);
                lease = NULL;
            } else if (fhr_acquire(r.m, &hs[(size_t)step * 3 % nh], 1, fhr_loc_pinned(), NULL,
                                   &lease, NULL) != FHR_OK) {
                lease = NULL;
            }
        }
        if (step % 17 == 8 && !fhr_handle_equal(hs[(size_t)step % nh], h))
            (void)fhr_discard(r.m, hs[(size_t)step % nh], NULL); /* later requests for it fail */
        fhr_requirement need = {h, fhr_loc_cuda(0), 0};
        fhr_reservation ws = {fhr_loc_cuda(0), 64, "ws"};
        fhr_request req = {"load", &need, 1, &ws, step % 4 == 0, 0};
        fhr_decision *fast = decide_as_full(r.c, mc, &req, step_name(step));
        if (fast) {
            evicting += fhr_decision_nevictions(fast) > 0;
            if (fhr_decision_feasible(fast))
                use_ok(&r, fast);
        }
        fhr_decision_destroy(fast);
    }
    cr_assert_geq(evicting, 20, "only %zu of the requests evicted", evicting);
    fhr_lease_destroy(lease);
    fhr_hold_destroy(hold);
    check_accounting(r.m);
    fhr_controller_destroy(mc);
    fhr_policy_destroy(mp);
    rig_free(&r);
}

/* Asks the controller's victim index to match a ranking from scratch of the state now. */
static void index_matches(fhr_controller *c, int step)
{
    char why[256] = "";
    cr_assert(controller_check_index(c, why, sizeof why), "step %d: %s", step, why);
}

/* Tiered LRU takes its victims from an index the controller keeps from the snapshot
 * cache's changes (victim_index.c). A long random walk over every change that moves a
 * copy in or out of it or reorders it (values adopted, ensured, dropped, discarded;
 * evictions and loads by the controller's own decisions; holds; leases; priorities;
 * budgets; link rates, which mark every value changed): after it, every decision must be
 * the full path's byte for byte, and the index, checked every few steps (so that the
 * changes of several steps pile up between checks), must rank as from scratch. */
Test(controller, the_victim_index_ranks_as_from_scratch)
{
    fhr_budget bud[] = {{fhr_loc_cuda(0), 64 * 6}, {fhr_loc_pinned(), 64 * 10}};
    fhr_location t0[] = {fhr_loc_pinned(), fhr_loc_host()}, t1[] = {fhr_loc_host()};
    fhr_tier_chain ch[] = {{fhr_loc_cuda(0), t0, 2}, {fhr_loc_pinned(), t1, 1}};
    rig r = rig_new(bud, 2, ch, 2);
    fhr_policy_ops ops = {"tiered_lru", mirror_decide, NULL};
    fhr_policy *mp;
    fhr_controller *mc;
    cr_assert_eq(fhr_policy_create(&ops, r.p, &mp, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(r.m, mp, &mc, NULL), FHR_OK);
    char why[128];
    cr_assert_not(controller_check_index(mc, why, sizeof why), "a custom policy has no index");
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(r.b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    enum { NV = 40, STEPS = 1500 };
    fhr_handle hs[NV];
    size_t nh = 0, evicting = 0, multi = 0, infeasible = 0;
    fhr_lease *leases[2] = {NULL, NULL};
    fhr_hold *holds[2] = {NULL, NULL};
    static const fhr_location locs[] = {{FHR_LOC_HOST, 0}, {FHR_LOC_PINNED, 0}, {FHR_LOC_CUDA, 0}};
    uint64_t x = 0x2545F4914F6CDD1DULL;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned op = (unsigned)(x % 16);
        fhr_handle h = nh ? hs[(x >> 8) % nh] : (fhr_handle){0, 0};
        fhr_handle h2 = nh ? hs[(x >> 14) % nh] : h;
        fhr_location at = locs[(x >> 20) % 3];
        if (op == 0 || nh < 4) {
            if (nh < NV) {
                hs[nh] = adopt_n(r.m, 64 * (1 + (x >> 24) % 2), nh,
                                 (x >> 26) % 5 ? FHR_REPLICABLE : FHR_EXCLUSIVE);
                (void)fhr_set_priority(r.m, hs[nh], (int32_t)((x >> 28) % 3), NULL);
                nh++;
            }
        } else if (op == 1) {
            (void)fhr_ensure(r.m, h, at, NULL, NULL);
        } else if (op == 2) {
            (void)fhr_drop(r.m, h, at, NULL);
        } else if (op == 3) {
            if ((x >> 40) % 6 == 0 && nh > 8) {
                (void)fhr_discard(r.m, h, NULL);
                nh--;
                hs[(x >> 8) % (nh + 1)] = hs[nh]; /* later steps ask for live values */
            }
        } else if (op == 4) {
            (void)fhr_set_priority(r.m, h, (int32_t)((x >> 40) % 5) - 2, NULL);
        } else if (op == 5) {
            size_t k = (x >> 44) % 2;
            if (holds[k]) {
                cr_assert_eq(fhr_hold_release(holds[k], NULL), FHR_OK);
                fhr_hold_destroy(holds[k]);
                holds[k] = NULL;
            } else if (fhr_hold_acquire(r.m, &h, 1, at, &holds[k], NULL) != FHR_OK) {
                holds[k] = NULL;
            }
        } else if (op == 6) {
            size_t k = (x >> 44) % 2;
            if (leases[k]) {
                cr_assert_eq(fhr_lease_release(leases[k], NULL), FHR_OK);
                fhr_lease_destroy(leases[k]);
                leases[k] = NULL;
                fhr_stream_sync(r.b, s, NULL);
            } else if (fhr_acquire(r.m, &h, 1, at, at.kind == FHR_LOC_CUDA ? s : NULL,
                                   &leases[k], NULL) != FHR_OK) {
                leases[k] = NULL;
            }
        } else if (op == 7) {
            (void)fhr_set_budget(r.m, fhr_loc_cuda(0), 64 * (3 + (x >> 40) % 6), NULL);
        } else if (op == 8) {
            if ((x >> 40) % 8 == 0) {
                fhr_link_rates lr = {10.0 + (double)((x >> 44) % 40), 0, 0, 0};
                cr_assert_eq(fhr_manager_set_links(r.m, &lr, NULL), FHR_OK);
            }
        } else if (op == 9) {
            t_reap(r.m);
        } else { /* a request through the controller: one or two values, maybe room */
            fhr_location where = (x >> 36) % 4 ? fhr_loc_cuda(0) : fhr_loc_pinned();
            fhr_requirement need[] = {{h, where, 0}, {h2, where, 0}};
            fhr_reservation ws = {where, 64 * (1 + (x >> 38) % 2), "ws"};
            fhr_request req = {"walk", need, 1 + (x >> 42) % 2, &ws, (x >> 46) % 3 == 0, 0};
            fhr_decision *fast = decide_as_full(r.c, mc, &req, step_name(step));
            if (fast) {
                evicting += fhr_decision_nevictions(fast) > 0;
                multi += fhr_decision_nevictions(fast) > 1;
                infeasible += !fhr_decision_feasible(fast);
                if (fhr_decision_feasible(fast)) {
                    fhr_use *u = NULL;
                    fhr_stream_map cons = {fhr_loc_cuda(0), s};
                    if (fhr_use_decision(r.c, fast, &cons, 1, NULL, 0, &u, NULL) == FHR_OK)
                        cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
                    fhr_use_destroy(u);
                    fhr_stream_sync(r.b, s, NULL);
                }
            }
            fhr_decision_destroy(fast);
        }
        if ((x >> 50) % 4 == 0 || step == STEPS - 1)
            index_matches(r.c, step);
    }
    cr_assert_geq(evicting, 200, "only %zu of the requests evicted", evicting);
    cr_assert_geq(multi, 80, "only %zu requests evicted more than one copy", multi);
    cr_assert_geq(infeasible, 5, "only %zu requests were infeasible", infeasible);
    for (size_t k = 0; k < 2; k++) {
        fhr_lease_destroy(leases[k]);
        fhr_hold_destroy(holds[k]);
    }
    fhr_stream_sync(r.b, s, NULL);
    fhr_stream_destroy(r.b, s);
    check_accounting(r.m);
    fhr_controller_destroy(mc);
    fhr_policy_destroy(mp);
    rig_free(&r);
}
