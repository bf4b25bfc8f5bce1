/* tests/unit/mgr_helpers.h — fixtures for manager tests: an emulated backend, values
 * with a byte pattern, a pattern source, and content checks through the backend. */
#ifndef FHEPLAN_TEST_MGR_HELPERS_H
#define FHEPLAN_TEST_MGR_HELPERS_H

#include "fheplan/residency.h"
#include "tests/unit/observe.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline fhr_backend *emu_backend(int ndev)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_emu_create(ndev, 0, &b, NULL), FHR_OK);
    return b;
}

static inline fhr_manager *new_manager(fhr_backend *b, const fhr_budget *bud, size_t nb)
{
    fhr_manager_config cfg = {b, bud, nb, 256};
    fhr_manager *m = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_manager_create(&cfg, &m, &e), FHR_OK, "%s", e.message);
    return m;
}

static inline uint8_t pat(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17));
}

static void free_host(void *ctx, void *p, size_t n)
{
    (void)ctx;
    (void)n;
    free(p);
}

/* A host value with one buffer of n bytes holding pattern `seed`, field "data". */
static inline fhr_value *host_value(size_t n, uint64_t seed)
{
    fhr_ckks_meta meta = {0};
    meta.context_id = 7;
    meta.level = 3;
    meta.scale = 1099511627776.0;
    meta.n_primes = 2;
    meta.prime_ids[0] = 11;
    meta.prime_ids[1] = 13;
    meta.domain = FHR_DOMAIN_EVAL;
    fhr_value *v = NULL;
    cr_assert_eq(fhr_value_create(fhr_loc_host(), &meta, &v, NULL), FHR_OK);
    uint8_t *p = malloc(n);
    cr_assert(p);
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, i);
    size_t bi;
    cr_assert_eq(fhr_value_add_buffer(v, p, n, free_host, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "data", bi, 0, n, NULL), FHR_OK);
    return v;
}

static inline fhr_handle adopt_n(fhr_manager *m, size_t n, uint64_t seed, fhr_replica_mode mode)
{
    fhr_value *v = host_value(n, seed);
    fhr_adopt_opts o = {mode, NULL, 0};
    fhr_handle h;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, &e), FHR_OK, "%s", e.message);
    cr_assert_null(v);
    return h;
}

/* Source: produces pattern `seed` of `n` bytes at the requested location. */
typedef struct pat_source {
    size_t n;
    uint64_t seed;
    int loads;
    int fail;           /* load fails when set */
    int wrong_size;     /* returns a field of the wrong size */
    int released;
} pat_source;

static fhr_status pat_load(void *ctx, const fhr_value_spec *spec, fhr_location at, fhr_backend *b,
                           fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec;
    (void)s;
    pat_source *ps = ctx;
    ps->loads++;
    if (ps->fail) {
        if (err) {
            err->status = FHR_E_SOURCE;
            snprintf(err->message, sizeof err->message, "synthetic failure");
        }
        return FHR_E_SOURCE;
    }
    fhr_value *hv = host_value(ps->wrong_size ? ps->n + 1 : ps->n, ps->seed);
    if (at.kind == FHR_LOC_HOST) {
        *out = hv;
        return FHR_OK;
    }
    fhr_status st = fhr_value_to(hv, at, b, NULL, out, err);
    fhr_value_destroy(hv);
    return st;
}

static void pat_release(void *ctx) { ((pat_source *)ctx)->released++; }

static inline fhr_value_spec pat_spec(fhr_field_spec *field, size_t n)
{
    fhr_value_spec spec;
    memset(&spec, 0, sizeof spec);
    fhr_value *tmp = host_value(1, 0);
    spec.meta = *fhr_value_meta(tmp);
    fhr_value_destroy(tmp);
    field->name = "data";
    field->nbytes = n;
    spec.nfields = 1;
    spec.fields = field;
    spec.storage_nbytes = n;
    return spec;
}

static inline fhr_handle register_pat(fhr_manager *m, pat_source *ps, fhr_replica_mode mode)
{
    fhr_field_spec f;
    fhr_value_spec spec = pat_spec(&f, ps->n);
    fhr_source src = {pat_load, ps, pat_release};
    fhr_adopt_opts o = {mode, "src", 0};
    fhr_handle h;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_register_source(m, &spec, &src, &o, &h, &e), FHR_OK, "%s", e.message);
    return h;
}

/* Reads a value's "data" field back to the host and checks pattern `seed`. */
static inline int value_has_pattern(fhr_backend *b, const fhr_value *v, uint64_t seed, size_t n)
{
    fhr_value *hv = NULL;
    if (fhr_value_to(v, fhr_loc_host(), b, NULL, &hv, NULL) != FHR_OK)
        return 0;
    void *p;
    size_t len;
    int ok = fhr_value_field(hv, "data", &p, &len) == FHR_OK && len == n;
    for (size_t i = 0; ok && i < n; i++)
        ok = ((uint8_t *)p)[i] == pat(seed, i);
    fhr_value_destroy(hv);
    return ok;
}

/* Checks the copy of h at loc holds pattern seed, through a host lease or a stream lease. */
static inline int resident_has_pattern(fhr_manager *m, fhr_handle h, fhr_location loc,
                                       uint64_t seed, size_t n)
{
    fhr_backend *b = fhr_manager_backend(m);
    fhr_stream *s = NULL;
    if (loc.kind == FHR_LOC_CUDA)
        cr_assert_eq(fhr_stream_create(b, loc, &s, NULL), FHR_OK);
    fhr_lease *l = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_acquire(m, &h, 1, loc, s, &l, &e), FHR_OK, "%s", e.message);
    if (s)
        fhr_stream_sync(b, s, NULL);
    int ok = value_has_pattern(b, fhr_lease_value(l, h), seed, n);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    if (s) {
        fhr_stream_sync(b, s, NULL);
        fhr_stream_destroy(b, s);
    }
    t_reap(m);
    return ok;
}

static inline const fhr_loc_stats *loc_stats(fhr_snapshot *s, fhr_location l)
{
    return fhr_snapshot_loc(s, l);
}

/* The bytes used at loc (0: a location the manager has not seen). */
static inline uint64_t used_at(fhr_manager *m, fhr_location loc)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_loc_stats *st = loc_stats(s, loc);
    uint64_t u = st ? st->used_bytes : 0;
    fhr_snapshot_free(s);
    return u;
}

/* Recounts every copy's charge per location and compares with the accounting. */
static inline void check_accounting(fhr_manager *m)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    uint64_t sum[FHR_LOC_SLOTS] = {0};
    for (size_t i = 0; i < s->nvalues; i++)
        for (size_t c = 0; c < s->values[i].ncopies; c++)
            sum[fhr_loc_slot(s->values[i].copies[c].loc)] += s->values[i].copies[c].charged_nbytes;
    for (size_t i = 0; i < s->nlocs; i++)
        cr_assert_eq(s->locs[i].used_bytes, sum[fhr_loc_slot(s->locs[i].loc)],
                     "used bytes at slot %d: %llu accounted, %llu recounted",
                     fhr_loc_slot(s->locs[i].loc), (unsigned long long)s->locs[i].used_bytes,
                     (unsigned long long)sum[fhr_loc_slot(s->locs[i].loc)]);
    fhr_snapshot_free(s);
}

#endif
