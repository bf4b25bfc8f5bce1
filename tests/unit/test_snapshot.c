/* tests/unit/test_snapshot.c — snapshots: state versions bumped by every mutation,
 * the JSON document parsed back with cJSON field by field, the bounded trace, and the
 * snapshot cache held to a fresh snapshot. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "runtime/manager/snapshot_cache.h"

#include <cjson/cJSON.h>

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(x), "field %s missing or not a number", k);
    return x->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsString(x), "field %s missing or not a string", k);
    return x->valuestring;
}

Test(snapshot, json_round_trip_field_by_field)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud = {fhr_loc_cuda(0), 10000};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_value *v = host_value(1000, 1);
    fhr_adopt_opts o = {FHR_EXCLUSIVE, "ct", 5};
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, h, fhr_loc_cuda(0), NULL, NULL, NULL), FHR_OK);
    pat_source ps = {.n = 64, .seed = 2};
    register_pat(m, &ps, FHR_REPLICABLE);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    char *j = fhr_snapshot_json(s);
    cJSON *root = cJSON_Parse(j);
    cr_assert_not_null(root);
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%016llx", (unsigned long long)fhr_manager_id(m));
    cr_assert_str_eq(str(root, "manager_id"), idbuf);
    cr_assert_eq((uint64_t)num(root, "state_version"), s->state_version);
    cr_assert_eq((uint64_t)num(root, "clock"), s->clock);
    const cJSON *locs = cJSON_GetObjectItem(root, "locations");
    cr_assert_eq(cJSON_GetArraySize(locs), 2);
    const cJSON *host = cJSON_GetArrayItem(locs, 0), *cuda = cJSON_GetArrayItem(locs, 1);
    cr_assert_str_eq(str(host, "location"), "host");
    cr_assert_eq(num(host, "used_bytes"), 0);
    cr_assert_eq(num(host, "peak_used_bytes"), 1000);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(host, "budget_bytes")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(host, "remaining_budget_bytes")));
    cr_assert_str_eq(str(cuda, "location"), "cuda:0");
    cr_assert_eq(num(cuda, "used_bytes"), 1000);
    cr_assert_eq(num(cuda, "reserved_bytes"), 0);
    cr_assert_eq(num(cuda, "peak_charged_bytes"), 1000);
    cr_assert_eq(num(cuda, "budget_bytes"), 10000);
    cr_assert_eq(num(cuda, "remaining_budget_bytes"), 9000);
    const cJSON *obs = cJSON_GetObjectItem(cuda, "observation");
    cr_assert(cJSON_IsObject(obs), "the emulated device observes its pool");
    cr_assert_eq(num(obs, "pool_used_bytes"), 1000);
    const cJSON *vals = cJSON_GetObjectItem(root, "values");
    cr_assert_eq(cJSON_GetArraySize(vals), 2);
    const cJSON *v0 = cJSON_GetArrayItem(vals, 0);
    cr_assert_eq(num(v0, "handle"), (double)h.serial);
    cr_assert_str_eq(str(v0, "label"), "ct");
    cr_assert_str_eq(str(v0, "replica_mode"), "exclusive");
    cr_assert_str_eq(str(v0, "recoverability"), "must_preserve");
    cr_assert_eq(num(v0, "priority"), 5);
    cr_assert_eq(num(v0, "storage_nbytes"), 1000);
    cr_assert_eq(num(v0, "logical_nbytes"), 1000);
    const cJSON *meta = cJSON_GetObjectItem(v0, "meta");
    cr_assert_eq(num(meta, "context_id"), 7);
    cr_assert_eq(num(meta, "level"), 3);
    cr_assert_eq(num(meta, "scale"), 1099511627776.0);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(meta, "prime_ids")), 2);
    cr_assert_str_eq(str(meta, "domain"), "eval");
    cr_assert_str_eq(str(meta, "key_relation"), "none");
    const cJSON *cps = cJSON_GetObjectItem(v0, "copies");
    cr_assert_eq(cJSON_GetArraySize(cps), 1);
    const cJSON *c0 = cJSON_GetArrayItem(cps, 0);
    cr_assert_str_eq(str(c0, "location"), "cuda:0");
    cr_assert_eq(num(c0, "storage_nbytes"), 1000);
    cr_assert_eq(num(c0, "charged_nbytes"), 1000);
    cr_assert(cJSON_IsBool(cJSON_GetObjectItem(c0, "ready")));
    cr_assert_eq(num(c0, "leases"), 0);
    cr_assert_eq(num(c0, "holds"), 0);
    cr_assert_eq(num(c0, "pending_events"), 0);
    cr_assert_gt(num(c0, "last_use"), 0);
    const cJSON *v1 = cJSON_GetArrayItem(vals, 1);
    cr_assert_str_eq(str(v1, "recoverability"), "reconstructible");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(v1, "copies")), 0);
    cJSON_Delete(root);
    free(j);
    fhr_snapshot_free(s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(snapshot, every_mutation_bumps_the_version)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    uint64_t v0 = t_state_version(m);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    uint64_t v1 = t_state_version(m);
    cr_assert_gt(v1, v0);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    uint64_t v2 = t_state_version(m);
    cr_assert_gt(v2, v1);
    fhr_hold *hd;
    cr_assert_eq(fhr_hold_acquire(m, &h, 1, fhr_loc_pinned(), &hd, NULL), FHR_OK);
    uint64_t v3 = t_state_version(m);
    cr_assert_gt(v3, v2);
    cr_assert_eq(fhr_hold_release(hd, NULL), FHR_OK);
    uint64_t v4 = t_state_version(m);
    cr_assert_gt(v4, v3);
    fhr_hold_destroy(hd);
    cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), NULL), FHR_OK);
    cr_assert_gt(t_state_version(m), v4);
    fhr_snapshot *s;
    uint64_t before = t_state_version(m);
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    fhr_snapshot_free(s);
    cr_assert_eq(t_state_version(m), before, "observing is not a mutation");
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(snapshot, trace_is_bounded_and_can_be_off)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager_config cfg = {b, NULL, 0, 4};
    fhr_manager *m;
    cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
    fhr_handle h = adopt_n(m, 64, 1, FHR_REPLICABLE);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
        cr_assert_eq(fhr_drop(m, h, fhr_loc_pinned(), NULL), FHR_OK);
    }
    fhr_trace_entry t[8];
    size_t n = t_trace_read(m, t, 8);
    cr_assert_eq(n, 4);
    cr_assert_eq(t[3].kind, FHR_TR_DROP);
    cr_assert_eq(t[2].kind, FHR_TR_ENSURE);
    cr_assert_eq(t[2].nbytes, 64);
    cr_assert(fhr_loc_equal(t[2].from, fhr_loc_host()));
    cr_assert(fhr_loc_equal(t[2].to, fhr_loc_pinned()));
    cr_assert_lt(t[0].seq, t[3].seq);
    char *j = t_trace_json(m);
    cJSON *root = cJSON_Parse(j);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "entries")), 4);
    cr_assert_eq(num(root, "recorded"), 7);
    cJSON_Delete(root);
    free(j);
    fhr_error te;
    fhr_error_init(&te);
    cr_assert_eq(fhr_trace_set_capacity(m, SIZE_MAX / 2, &te), FHR_E_NOMEM, "%s", te.message);
    cr_assert(strstr(te.message, "unchanged"), "%s", te.message);
    cr_assert_eq(t_trace_read(m, t, 8), 4, "a failed resize lost the trace");
    cr_assert_eq(t[3].kind, FHR_TR_DROP);
    fhr_manager *m2 = NULL;
    fhr_manager_config big = {b, NULL, 0, SIZE_MAX / 4};
    cr_assert_eq(fhr_manager_create(&big, &m2, &te), FHR_E_NOMEM);
    cr_assert_null(m2);
    cr_assert_eq(fhr_trace_set_capacity(m, 0, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(t_trace_read(m, t, 8), 0);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- the snapshot cache (runtime/manager/snapshot_cache.c) ---- */

/* The cache's view must equal a fresh placement snapshot; copies finishing on the emulated
 * device between the two are why the fresh one is taken on both sides and compared too. */
static void cache_matches_fresh(fhr_manager *m, mgr_snapcache *c, int step)
{
    for (int tries = 0;; tries++) {
        fhr_snapshot *before, *after;
        const fhr_snapshot *view;
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(fhr_snapshot_take_placement(m, &before, NULL), FHR_OK);
        cr_assert_eq(mgr_snapcache_refresh(m, c, &view, &e), FHR_OK, "%s", e.message);
        char *jv = fhr_snapshot_json(view);
        cr_assert_eq(fhr_snapshot_take_placement(m, &after, NULL), FHR_OK);
        char *jb = fhr_snapshot_json(before), *ja = fhr_snapshot_json(after);
        int stable = !strcmp(jb, ja);
        if (stable)
            cr_assert_str_eq(jv, ja, "step %d", step);
        free(jv);
        free(jb);
        free(ja);
        fhr_snapshot_free(before);
        fhr_snapshot_free(after);
        if (stable)
            return;
        cr_assert_lt(tries, 1000, "step %d: the state never held still", step);
    }
}

/* A random walk over every kind of change the cache must hear of (values published and
 * discarded, sources, copies made, moved and dropped, priorities, leases with consumer
 * events left pending, holds, reaping), compared after every step with a fresh snapshot. */
Test(snapshot, the_cache_catches_up_as_a_fresh_snapshot_would_read)
{
    fhr_backend *b = emu_backend(1);
    fhr_budget bud[] = {{fhr_loc_cuda(0), 64 * 12}, {fhr_loc_pinned(), 64 * 20}};
    fhr_manager *m = new_manager(b, bud, 2);
    fhr_stream *s;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    mgr_snapcache *c;
    cr_assert_eq(mgr_snapcache_create(&c, NULL), FHR_OK);
    enum { NV = 48, STEPS = 900 };
    fhr_handle hs[NV];
    pat_source ps[NV];
    size_t nh = 0;
    fhr_lease *leases[3] = {NULL, NULL, NULL};
    fhr_hold *holds[2] = {NULL, NULL};
    static const fhr_location locs[] = {{FHR_LOC_HOST, 0}, {FHR_LOC_PINNED, 0}, {FHR_LOC_CUDA, 0}};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned op = (unsigned)(x % 11);
        fhr_handle h = nh ? hs[(x >> 8) % nh] : (fhr_handle){0, 0};
        fhr_location at = locs[(x >> 20) % 3];
        if (op == 0 || nh == 0) {
            if (nh < NV) {
                if ((x >> 30) % 3 == 0) {
                    ps[nh] = (pat_source){.n = 64, .seed = nh};
                    hs[nh] = register_pat(m, &ps[nh], FHR_REPLICABLE);
                } else {
                    fhr_value *v = host_value(64, nh);
                    char label[32];
                    snprintf(label, sizeof label, "v%zu", nh);
                    fhr_adopt_opts o = {(x >> 32) % 4 ? FHR_REPLICABLE : FHR_EXCLUSIVE,
                                        (x >> 34) % 2 ? label : NULL, (int32_t)((x >> 36) % 3)};
                    cr_assert_eq(fhr_adopt(m, &v, &o, &hs[nh], NULL), FHR_OK);
                }
                nh++;
            }
        } else if (op == 1 || op == 2) {
            (void)fhr_ensure(m, h, at, NULL, NULL);
        } else if (op == 3) {
            (void)fhr_move(m, h, at, NULL, NULL, NULL);
        } else if (op == 4) {
            (void)fhr_drop(m, h, at, NULL);
        } else if (op == 5) {
            if ((x >> 40) % 4 == 0)
                (void)fhr_discard(m, h, NULL);
        } else if (op == 6) {
            (void)fhr_set_priority(m, h, (int32_t)((x >> 40) % 5) - 2, NULL);
        } else if (op == 7) {
            size_t k = (x >> 44) % 3;
            if (leases[k]) {
                cr_assert_eq(fhr_lease_release(leases[k], NULL), FHR_OK);
                fhr_lease_destroy(leases[k]);
                leases[k] = NULL;
            } else if (fhr_acquire(m, &h, 1, at, at.kind == FHR_LOC_CUDA ? s : NULL, &leases[k],
                                   NULL) != FHR_OK) {
                leases[k] = NULL;
            }
        } else if (op == 8) {
            size_t k = (x >> 44) % 2;
            if (holds[k]) {
                cr_assert_eq(fhr_hold_release(holds[k], NULL), FHR_OK);
                fhr_hold_destroy(holds[k]);
                holds[k] = NULL;
            } else if (fhr_hold_acquire(m, &h, 1, at, &holds[k], NULL) != FHR_OK) {
                holds[k] = NULL;
            }
        } else if (op == 9) {
            fhr_reap(m, NULL, NULL);
        } /* op 10: nothing changes; the cache must read (almost) nothing */
        cache_matches_fresh(m, c, step);
    }
    /* More changes than the log holds: the next refresh walks everything, and is right. */
    size_t live = 0;
    while (live < nh && fhr_set_priority(m, hs[live], 0, NULL) != FHR_OK)
        live++;
    cr_assert_lt(live, nh, "the walk discarded every value");
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(fhr_set_priority(m, hs[live], i % 7, NULL), FHR_OK);
    int full = 0;
    cache_matches_fresh(m, c, STEPS);
    mgr_snapcache_last_reads(c, &full);
    cr_assert(full, "a cache behind by more than the log holds must walk every value");
    for (size_t k = 0; k < 3; k++)
        fhr_lease_destroy(leases[k]);
    for (size_t k = 0; k < 2; k++)
        fhr_hold_destroy(holds[k]);
    mgr_snapcache_destroy(c);
    fhr_stream_sync(b, s, NULL);
    fhr_stream_destroy(b, s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* Catching up reads only what changed: one priority changed among many values is one read. */
Test(snapshot, the_cache_reads_only_the_values_that_changed)
{
    fhr_backend *b = emu_backend(1);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle hs[100];
    for (int i = 0; i < 100; i++)
        hs[i] = adopt_n(m, 64, (uint64_t)i, FHR_REPLICABLE);
    mgr_snapcache *c;
    cr_assert_eq(mgr_snapcache_create(&c, NULL), FHR_OK);
    const fhr_snapshot *view;
    int full = 0;
    cr_assert_eq(mgr_snapcache_refresh(m, c, &view, NULL), FHR_OK);
    cr_assert_eq(mgr_snapcache_last_reads(c, &full), 100);
    cr_assert(full);
    cr_assert_eq(fhr_set_priority(m, hs[42], 7, NULL), FHR_OK);
    cr_assert_eq(mgr_snapcache_refresh(m, c, &view, NULL), FHR_OK);
    cr_assert_eq(mgr_snapcache_last_reads(c, &full), 1);
    cr_assert_not(full);
    cr_assert_eq(fhr_snapshot_value(view, hs[42])->priority, 7);
    cr_assert_eq(fhr_discard(m, hs[0], NULL), FHR_OK);
    cr_assert_eq(mgr_snapcache_refresh(m, c, &view, NULL), FHR_OK);
    cr_assert_eq(view->nvalues, 99);
    cr_assert_null(fhr_snapshot_value(view, hs[0]));
    cr_assert_eq(fhr_snapshot_value(view, hs[42])->priority, 7);
    cache_matches_fresh(m, c, 0);
    mgr_snapcache_destroy(c);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}
