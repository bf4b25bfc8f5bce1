/* tests/unit/test_snapshot.c — snapshots: state versions bumped by every mutation,
 * the JSON document parsed back with cJSON field by field, and the bounded trace. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

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
