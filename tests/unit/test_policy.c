/* tests/unit/test_policy.c — the tiered LRU policy as a pure function over handmade
 * snapshots: ranking (priority, logical last use, serial tie-break), protection,
 * drop versus move down the chain, explored_states, and determinism over 1000 random
 * manager states and requests decided by two fresh managers. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

/* ---- handmade snapshots -------------------------------------------------------------- */

typedef struct fake {
    fhr_snapshot s;
    fhr_loc_stats locs[4];
    fhr_value_info vals[16];
    fhr_copy_info copies[32];
    size_t ncopies;
} fake;

static void fake_init(fake *f)
{
    memset(f, 0, sizeof *f);
    f->s.manager_id = 42;
    f->s.state_version = 7;
    f->s.locs = f->locs;
    f->s.values = f->vals;
}

static void fake_loc(fake *f, fhr_location l, int has_budget, uint64_t budget)
{
    fhr_loc_stats *ls = &f->locs[f->s.nlocs++];
    ls->loc = l;
    ls->has_budget = has_budget;
    ls->budget_bytes = budget;
    ls->remaining_budget_bytes = budget;
}

static fhr_handle H(uint64_t serial) { return (fhr_handle){42, serial}; }

/* A value with serial s (add in increasing serial order), one copy per location given. */
static fhr_value_info *fake_val(fake *f, uint64_t serial, int32_t prio, uint64_t bytes,
                                fhr_recoverability rec)
{
    fhr_value_info *v = &f->vals[f->s.nvalues++];
    v->handle = H(serial);
    v->label = "";
    v->priority = prio;
    v->recoverability = rec;
    v->spec_storage_nbytes = bytes;
    v->copies = &f->copies[f->ncopies];
    return v;
}

static fhr_copy_info *fake_copy(fake *f, fhr_value_info *v, fhr_location l, uint64_t last_use)
{
    fhr_copy_info *c = &f->copies[f->ncopies++];
    v->ncopies++;
    c->loc = l;
    c->charged_nbytes = c->storage_nbytes = v->spec_storage_nbytes;
    c->ready = 1;
    c->last_use = last_use;
    for (size_t i = 0; i < f->s.nlocs; i++)
        if (fhr_loc_equal(f->locs[i].loc, l)) {
            f->locs[i].used_bytes += c->charged_nbytes;
            f->locs[i].remaining_budget_bytes -= c->charged_nbytes;
        }
    return c;
}

static fhr_policy *lru(const fhr_tier_chain *c, size_t n)
{
    fhr_policy *p = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_policy_tiered_lru_create(c, n, &p, &e), FHR_OK, "%s", e.message);
    cr_assert_str_eq(fhr_policy_name(p), "tiered_lru");
    return p;
}

Test(policy, ranks_priority_then_last_use_then_serial)
{
    fake f;
    fake_init(&f);
    fhr_location g = fhr_loc_cuda(0);
    fake_loc(&f, g, 1, 500);
    fake_loc(&f, fhr_loc_host(), 0, 0);
    /* all have a host copy too: every eviction is a drop */
    struct { uint64_t s; int32_t p; uint64_t lu; } spec[] = {
        {1, 5, 1}, {2, 1, 9}, {3, 1, 4}, {4, 0, 20}, {5, 1, 4}};
    for (size_t i = 0; i < 5; i++) {
        fhr_value_info *v = fake_val(&f, spec[i].s, spec[i].p, 100, FHR_MUST_PRESERVE);
        fake_copy(&f, v, fhr_loc_host(), 0);
        fake_copy(&f, v, g, spec[i].lu);
    }
    fhr_policy *p = lru(NULL, 0);
    fhr_reservation r = {g, 400, "ws"};
    fhr_request req = {"rank", NULL, 0, &r, 1, 0};
    fhr_policy_out o;
    cr_assert_eq(fhr_policy_decide(p, &f.s, &req, &o, NULL), FHR_OK);
    cr_assert(o.feasible, "%s", o.reason);
    /* prio 0 first; then prio 1 by last use 4,4 (serial 3 before 5), then 9 */
    uint64_t want[] = {4, 3, 5, 2};
    cr_assert_eq(o.nevictions, 4);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(o.evictions[i].action.handle.serial, want[i], "eviction %zu", i);
        cr_assert_eq(o.evictions[i].action.kind, FHR_ACT_DROP);
    }
    cr_assert_eq(o.explored_states, 5, "1 start + 4 candidates");
    fhr_policy_out_clear(&o);
    fhr_policy_destroy(p);
}

Test(policy, protected_copies_are_skipped_and_named)
{
    fake f;
    fake_init(&f);
    fhr_location g = fhr_loc_cuda(0);
    fake_loc(&f, g, 1, 400);
    fhr_value_info *v;
    v = fake_val(&f, 1, 0, 100, FHR_RECONSTRUCTIBLE);
    fake_copy(&f, v, g, 1)->leases = 1;
    v = fake_val(&f, 2, 0, 100, FHR_RECONSTRUCTIBLE);
    fake_copy(&f, v, g, 2)->holds = 1;
    v = fake_val(&f, 3, 0, 100, FHR_RECONSTRUCTIBLE);
    fake_copy(&f, v, g, 3)->pending_events = 1;
    v = fake_val(&f, 4, 0, 100, FHR_RECONSTRUCTIBLE);
    fake_copy(&f, v, g, 4);
    v = fake_val(&f, 5, 9, 100, FHR_RECONSTRUCTIBLE); /* required: never evicted */
    fhr_policy *p = lru(NULL, 0);
    fhr_requirement rq = {H(5), g, 0};
    fhr_request req = {"prot", &rq, 1, NULL, 0, 0};
    fhr_policy_out o;
    cr_assert_eq(fhr_policy_decide(p, &f.s, &req, &o, NULL), FHR_OK);
    cr_assert(o.feasible, "%s", o.reason);
    cr_assert_eq(o.nevictions, 1);
    cr_assert_eq(o.evictions[0].action.handle.serial, 4, "the only unprotected copy");
    cr_assert_eq(o.nenter, 1);
    cr_assert_eq(o.enter[0].kind, FHR_ACT_ENSURE);
    fhr_policy_out_clear(&o);
    /* needing two copies' worth: infeasible, naming the short location and the three */
    fhr_reservation r = {g, 100, "ws"};
    req.reservations = &r;
    req.nreservations = 1;
    cr_assert_eq(fhr_policy_decide(p, &f.s, &req, &o, NULL), FHR_OK);
    cr_assert_not(o.feasible);
    cr_assert(fhr_loc_equal(o.short_loc, g));
    cr_assert_eq(o.bytes_short, 100);
    cr_assert_eq(o.nprotected, 3);
    cr_assert_eq(o.protected_[0].reasons, FHR_PROT_LEASED);
    cr_assert_eq(o.protected_[1].reasons, FHR_PROT_HELD);
    cr_assert_eq(o.protected_[2].reasons, FHR_PROT_PENDING);
    cr_assert(strstr(o.reason, "cuda:0 is short by 100 bytes"), "%s", o.reason);
    cr_assert(strstr(o.reason, "handle #1 (100 bytes, leased)"), "%s", o.reason);
    cr_assert(strstr(o.reason, "pending consumer event"), "%s", o.reason);
    fhr_policy_out_clear(&o);
    fhr_policy_destroy(p);
}

Test(policy, last_copy_moves_to_first_tier_with_room)
{
    fhr_location g = fhr_loc_cuda(0), g1 = fhr_loc_cuda(1);
    for (int len = 0; len <= 3; len++) {
        fake f;
        fake_init(&f);
        fake_loc(&f, fhr_loc_host(), 0, 0);
        fake_loc(&f, fhr_loc_pinned(), 1, 150);
        fake_loc(&f, g, 1, 200);
        fake_loc(&f, g1, 1, 100);
        fhr_value_info *v = fake_val(&f, 1, 0, 100, FHR_MUST_PRESERVE);
        fake_copy(&f, v, fhr_loc_pinned(), 1); /* pinned: 50 left */
        v = fake_val(&f, 2, 0, 100, FHR_MUST_PRESERVE);
        fake_copy(&f, v, g1, 2);               /* cuda:1 full */
        v = fake_val(&f, 3, 0, 100, FHR_MUST_PRESERVE);
        fake_copy(&f, v, g, 3);                /* the victim */
        v = fake_val(&f, 4, 0, 100, FHR_RECONSTRUCTIBLE);
        fake_copy(&f, v, g, 4)->leases = 1;
        fhr_location tiers[3] = {g1, fhr_loc_pinned(), fhr_loc_host()};
        /* chain of length len ends in the host only when len == 3 */
        fhr_tier_chain c = {g, tiers, (size_t)len};
        fhr_policy *p = lru(len ? &c : NULL, len ? 1 : 0);
        fhr_reservation r = {g, 100, "ws"};
        fhr_request req = {"chain", NULL, 0, &r, 1, 0};
        fhr_policy_out o;
        cr_assert_eq(fhr_policy_decide(p, &f.s, &req, &o, NULL), FHR_OK);
        if (len < 3) {
            cr_assert_not(o.feasible, "len %d: no tier with room", len);
            cr_assert_eq(o.nprotected, 2);
            cr_assert_eq(o.protected_[0].handle.serial, 4);
            cr_assert_eq(o.protected_[1].handle.serial, 3);
            cr_assert_eq(o.protected_[1].reasons, FHR_PROT_NO_TIER);
            cr_assert_eq(o.explored_states, 2 + (uint64_t)(len > 1 ? len - 1 : 0), "len %d", len);
        } else {
            cr_assert(o.feasible, "%s", o.reason);
            cr_assert_eq(o.nevictions, 1);
            cr_assert_eq(o.evictions[0].action.kind, FHR_ACT_MOVE);
            cr_assert(fhr_loc_equal(o.evictions[0].action.at, fhr_loc_host()));
            cr_assert(fhr_loc_equal(o.evictions[0].action.from, g));
            cr_assert_eq(o.explored_states, 4, "start + candidate + 2 more tiers");
        }
        fhr_policy_out_clear(&o);
        fhr_policy_destroy(p);
    }
}

Test(policy, rejects_bad_chains)
{
    fhr_policy *p = NULL;
    fhr_location self[] = {fhr_loc_cuda(0)};
    fhr_tier_chain c = {fhr_loc_cuda(0), self, 1};
    cr_assert_eq(fhr_policy_tiered_lru_create(&c, 1, &p, NULL), FHR_E_INVALID);
    fhr_location rep[] = {fhr_loc_pinned(), fhr_loc_pinned()};
    c.fallback = rep;
    c.nfallback = 2;
    cr_assert_eq(fhr_policy_tiered_lru_create(&c, 1, &p, NULL), FHR_E_INVALID);
    fhr_location ok[] = {fhr_loc_pinned()};
    fhr_tier_chain two[] = {{fhr_loc_cuda(0), ok, 1}, {fhr_loc_cuda(0), ok, 1}};
    cr_assert_eq(fhr_policy_tiered_lru_create(two, 2, &p, NULL), FHR_E_INVALID);
    cr_assert_null(p);
}

/* ---- determinism over random states ------------------------------------------------- */

typedef struct rng { uint64_t s; } rng;
static uint64_t rnd(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}
static uint64_t rn(rng *r, uint64_t n) { return rnd(r) % n; }

static fhr_location rloc(rng *r)
{
    switch (rn(r, 4)) {
    case 0: return fhr_loc_host();
    case 1: return fhr_loc_pinned();
    case 2: return fhr_loc_cuda(0);
    default: return fhr_loc_cuda(1);
    }
}

typedef struct world {
    fhr_backend *b;
    fhr_manager *m;
    fhr_policy *p;
    fhr_controller *c;
    fhr_handle hs[12];
    size_t nh;
    fhr_hold *holds[4];
    size_t nholds;
    fhr_lease *leases[4];
    size_t nleases;
    pat_source src[4];
} world;

/* Builds the state for `seed` (the same seed always gives the same state). */
static void world_build(world *w, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    rng r = {seed * 0x9e3779b97f4a7c15ULL + 1};
    cr_assert_eq(fhr_backend_model_create(2, &w->b, NULL), FHR_OK);
    fhr_budget bud[3];
    size_t nb = 0;
    bud[nb++] = (fhr_budget){fhr_loc_cuda(0), 200 + rn(&r, 1200)};
    if (rn(&r, 2))
        bud[nb++] = (fhr_budget){fhr_loc_cuda(1), 100 + rn(&r, 800)};
    if (rn(&r, 2))
        bud[nb++] = (fhr_budget){fhr_loc_pinned(), 100 + rn(&r, 800)};
    w->m = new_manager(w->b, bud, nb);
    size_t n = 2 + rn(&r, 10);
    for (size_t i = 0; i < n; i++) {
        fhr_replica_mode mode = rn(&r, 3) ? FHR_REPLICABLE : FHR_EXCLUSIVE;
        size_t bytes = 20 + rn(&r, 300);
        if (rn(&r, 4) == 0 && i < 4) {
            w->src[i] = (pat_source){.n = bytes, .seed = i};
            w->hs[w->nh] = register_pat(w->m, &w->src[i], mode);
        } else {
            fhr_value *v = host_value(bytes, i);
            char label[32];
            snprintf(label, sizeof label, "v%zu", i);
            fhr_adopt_opts o = {mode, label, 0};
            cr_assert_eq(fhr_adopt(w->m, &v, &o, &w->hs[w->nh], NULL), FHR_OK);
        }
        fhr_set_priority(w->m, w->hs[w->nh], (int32_t)rn(&r, 4) - 1, NULL);
        w->nh++;
    }
    size_t ops = rn(&r, 3 * n);
    for (size_t i = 0; i < ops; i++) {
        fhr_handle h = w->hs[rn(&r, w->nh)];
        fhr_location l = rloc(&r);
        switch (rn(&r, 6)) {
        case 0: case 1: fhr_ensure(w->m, h, l, NULL, NULL); break;
        case 2: case 3: fhr_move(w->m, h, l, NULL, NULL, NULL); break;
        case 4:
            if (w->nholds < 4 && fhr_hold_acquire(w->m, &h, 1, l, &w->holds[w->nholds], NULL) == FHR_OK)
                w->nholds++;
            break;
        default:
            if (l.kind != FHR_LOC_CUDA && w->nleases < 4 &&
                fhr_acquire(w->m, &h, 1, l, NULL, &w->leases[w->nleases], NULL) == FHR_OK)
                w->nleases++;
            break;
        }
    }
    fhr_location t1[] = {fhr_loc_pinned(), fhr_loc_host()};
    fhr_location t2[] = {fhr_loc_cuda(0), fhr_loc_host()};
    fhr_tier_chain chains[2] = {{fhr_loc_cuda(0), t1, 1 + rn(&r, 2)},
                                {fhr_loc_cuda(1), t2, rn(&r, 3)}};
    cr_assert_eq(fhr_policy_tiered_lru_create(chains, rn(&r, 3), &w->p, NULL), FHR_OK);
    cr_assert_eq(fhr_controller_create(w->m, w->p, &w->c, NULL), FHR_OK);
}

static void world_free(world *w)
{
    for (size_t i = 0; i < w->nholds; i++)
        fhr_hold_destroy(w->holds[i]);
    for (size_t i = 0; i < w->nleases; i++)
        fhr_lease_destroy(w->leases[i]);
    fhr_controller_destroy(w->c);
    fhr_policy_destroy(w->p);
    fhr_manager_destroy(w->m);
    fhr_backend_destroy(w->b);
}

static void random_request(rng *r, const world *w, fhr_requirement *rq, size_t *nrq,
                           fhr_reservation *res, size_t *nres)
{
    *nrq = 1 + rn(r, 3);
    for (size_t i = 0; i < *nrq; i++)
        rq[i] = (fhr_requirement){w->hs[rn(r, w->nh)], rloc(r), 0};
    *nres = rn(r, 2);
    if (*nres)
        res[0] = (fhr_reservation){rloc(r), rn(r, 600), "workspace"};
}

Test(policy, determinism_1000_random_states)
{
    int feasible = 0, evicting = 0, infeasible = 0, refused = 0;
    for (uint64_t seed = 1; seed <= 1000; seed++) {
        world a, b;
        world_build(&a, seed);
        world_build(&b, seed);
        rng r = {seed ^ 0xabcdef12345ULL};
        fhr_requirement rq[3];
        fhr_reservation res[1];
        size_t nrq, nres;
        random_request(&r, &a, rq, &nrq, res, &nres);
        fhr_requirement rqb[3];
        for (size_t i = 0; i < nrq; i++) /* the same request, in b's handles */
            rqb[i] = (fhr_requirement){{fhr_manager_id(b.m), rq[i].handle.serial}, rq[i].at, 0};
        fhr_request ra = {"random", rq, nrq, res, nres, 0};
        fhr_request rb = {"random", rqb, nrq, res, nres, 0};
        fhr_decision *da = NULL, *db = NULL, *da2 = NULL;
        fhr_error ea, eb;
        fhr_error_init(&ea);
        fhr_error_init(&eb);
        fhr_status sa = fhr_decide(a.c, &ra, &da, &ea);
        fhr_status sb = fhr_decide(b.c, &rb, &db, &eb);
        cr_assert_eq(sa, sb, "seed %llu: %s / %s", (unsigned long long)seed, ea.message, eb.message);
        if (sa == FHR_OK) {
            uint64_t v = t_state_version(a.m);
            cr_assert_eq(fhr_decide(a.c, &ra, &da2, NULL), FHR_OK);
            cr_assert_eq(t_state_version(a.m), v, "decide changed the state");
            char *ja = fhr_decision_json(da), *jb = fhr_decision_json(db), *ja2 = fhr_decision_json(da2);
            cr_assert_str_eq(ja, jb, "seed %llu", (unsigned long long)seed);
            cr_assert_str_eq(ja, ja2, "seed %llu", (unsigned long long)seed);
            if (fhr_decision_feasible(da)) {
                feasible++;
                evicting += fhr_decision_nevictions(da) > 0;
            } else {
                infeasible++;
            }
            free(ja);
            free(jb);
            free(ja2);
        } else {
            refused++;
            cr_assert_str_eq(ea.message, eb.message);
        }
        fhr_decision_destroy(da);
        fhr_decision_destroy(da2);
        fhr_decision_destroy(db);
        world_free(&a);
        world_free(&b);
    }
    cr_assert_gt(feasible, 100, "feasible %d", feasible);
    cr_assert_gt(evicting, 20, "evicting %d", evicting);
    cr_assert_gt(infeasible, 20, "infeasible %d", infeasible);
    cr_log_info("determinism: %d feasible (%d evicting), %d infeasible, %d refused", feasible,
                evicting, infeasible, refused);
}
