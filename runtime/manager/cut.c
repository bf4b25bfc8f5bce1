/* runtime/manager/cut.c — values cut into limbs (fhr_manager(3), "Partial copies"): the
 * declaration and its checks, ensure with limbs, and what a copy holds. The rules
 * (rules.c), the copy (value_to.c) and the charges (cost.c) do the rest. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* The field names and bytes of v: its spec's, or its whole copy's. */
static fhr_status fields_of(const val *v, size_t *n, const char **names, uint64_t *bytes,
                            uint64_t *regen, fhr_error *err)
{
    *regen = 0;
    if (v->rs) {
        *n = v->rs->spec.nfields;
        for (size_t f = 0; f < *n && f < MGR_CUT_FIELDS; f++) {
            names[f] = v->rs->spec.fields[f].name;
            bytes[f] = v->rs->spec.fields[f].nbytes;
        }
        return FHR_OK;
    }
    const mat *x = v->copies;
    if (!x)
        return fhr_fail(err, FHR_E_STATE, "value_cut_limbs: the value has no copy");
    const fhr_value *cv = x->value;
    *n = cv->nfields;
    for (size_t f = 0; f < *n && f < MGR_CUT_FIELDS; f++) {
        names[f] = cv->fields[f].name;
        bytes[f] = cv->fields[f].nbytes;
        for (size_t r = 0; r < cv->nregens; r++)
            if (cv->regens[r].field == f)
                *regen |= 1ULL << f;
    }
    return FHR_OK;
}

/* The cut of v by `in`, checked against its fields; the message names what is wrong. */
static fhr_status cut_check(const val *v, const fhr_limb_cut *in, mgr_cut *c, const char **names,
                            fhr_error *err)
{
    size_t n = 0;
    uint64_t bytes[MGR_CUT_FIELDS], own_regen = 0;
    fhr_status st = fields_of(v, &n, names, bytes, &own_regen, err);
    if (st != FHR_OK)
        return st;
    if (!in->q || !in->parts || n == 0 || n > MGR_CUT_FIELDS || n % in->parts)
        return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: %u q-limbs in %u parts over %zu "
                        "fields (q >= 1, parts >= 1 dividing the fields, at most %d fields)",
                        in->q, in->parts, n, MGR_CUT_FIELDS);
    uint32_t alpha = in->alpha ? in->alpha : (in->q + in->parts - 1) / in->parts;
    if ((uint64_t)alpha * (in->parts - 1) >= in->q || (uint64_t)alpha * in->parts < in->q)
        return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: %u parts of %u q-limbs do not "
                        "cover %u q-limbs (ceil(q / alpha) must be the parts)", in->parts, alpha,
                        in->q);
    uint64_t per = (uint64_t)in->q + in->special, sum = 0;
    for (size_t f = 0; f < n; f++) {
        if (bytes[f] != bytes[0] || bytes[f] % per || (bytes[f] / per) % 8)
            return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: field '%s' (%llu bytes) is not "
                            "%llu limbs of a multiple of 8 bytes, as large as every field",
                            names[f], (unsigned long long)bytes[f], (unsigned long long)per);
        sum += bytes[f];
    }
    if (sum != v->charge)
        return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: the fields hold %llu bytes, the "
                        "value is charged %llu", (unsigned long long)sum,
                        (unsigned long long)v->charge);
    uint64_t regen = in->regen_fields ? in->regen_fields : own_regen;
    if ((n < 64 && regen >> n) || (uint64_t)__builtin_popcountll(regen) * bytes[0] != v->regen)
        return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: regenerated fields 0x%llx do not "
                        "make the value's %llu regenerable bytes", (unsigned long long)regen,
                        (unsigned long long)v->regen);
    *c = (mgr_cut){in->q, in->special, in->parts, alpha, (uint32_t)n, bytes[0] / per, regen};
    return FHR_OK;
}

fhr_status fhr_value_cut_limbs(fhr_manager *m, fhr_handle h, const fhr_limb_cut *cut,
                               fhr_error *err)
{
    if (!cut)
        return fhr_fail(err, FHR_E_INVALID, "value_cut_limbs: cut is NULL");
    fhr_status st = mgr_enter(m, "value_cut_limbs", err);
    if (st != FHR_OK)
        return st;
    val *v;
    const char *names[MGR_CUT_FIELDS];
    mgr_cut c;
    mgr_cut *nc = NULL;
    char **nn = NULL;
    if ((st = mgr_lookup(m, h, "value_cut_limbs", &v, err)) != FHR_OK)
        goto out;
    if (v->cut) {
        st = fhr_fail(err, FHR_E_STATE, "value_cut_limbs: the value is cut already");
        goto out;
    }
    if (v->mode != FHR_REPLICABLE) {
        st = fhr_fail(err, FHR_E_REPLICA, "value_cut_limbs: only a REPLICABLE value has partial "
                      "copies");
        goto out;
    }
    if ((st = cut_check(v, cut, &c, names, err)) != FHR_OK)
        goto out;
    if (!(nc = malloc(sizeof *nc)) || !(nn = calloc(c.nfields, sizeof *nn))) {
        st = fhr_fail(err, FHR_E_NOMEM, "value_cut_limbs: out of host memory");
        goto out;
    }
    for (uint32_t f = 0; f < c.nfields; f++)
        if (!(nn[f] = strdup(names[f]))) {
            st = fhr_fail(err, FHR_E_NOMEM, "value_cut_limbs: out of host memory");
            goto out;
        }
    *nc = c;
    v->cut = nc;
    v->cut_names = nn;
    nc = NULL;
    nn = NULL;
    mgr_changed(m, v->serial);
    mgr_bump(m);
out:
    for (uint32_t f = 0; nn && f < c.nfields; f++)
        free(nn[f]);
    free(nn);
    free(nc);
    mgr_leave(m);
    return st;
}

fhr_status fhr_ensure_limbs(fhr_manager *m, fhr_handle h, fhr_location at, uint32_t limbs,
                            fhr_stream *s, fhr_error *err)
{
    fhr_action a = {FHR_ACT_ENSURE, h, at, 0, {0, 0}, limbs};
    return mgr_run_action(m, &a, s, err);
}

/* What one copy of a cut value holds, for the queries below: the lookup under the lock,
 * the copy (FHR_E_STATE: none there) handed to `get`. */
static fhr_status copy_query(fhr_manager *m, fhr_handle h, fhr_location loc, const char *name,
                             void *out, void (*get)(const val *, const mat *, void *),
                             fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "%s: the answer's pointer is NULL", name);
    int slot = fhr_loc_slot(loc);
    if (slot < 0)
        return fhr_fail(err, FHR_E_LOCATION, "%s: invalid location", name);
    fhr_status st = mgr_enter(m, name, err);
    if (st != FHR_OK)
        return st;
    val *v;
    if ((st = mgr_lookup(m, h, name, &v, err)) == FHR_OK) {
        const mat *x = val_mat(v, slot);
        if (x)
            get(v, x, out);
        else
            st = fhr_fail(err, FHR_E_STATE, "%s: no copy there", name);
    }
    mgr_leave(m);
    return st;
}

static void get_limbs(const val *v, const mat *x, void *out)
{
    (void)v;
    *(uint32_t *)out = x->limbs;
}

static void get_parts(const val *v, const mat *x, void *out)
{
    *(uint32_t *)out = v->cut && x->by_parts
                           ? (x->parts ? x->parts : cut_parts_read(v->cut, x->limbs))
                           : 0;
}

fhr_status fhr_copy_limbs(fhr_manager *m, fhr_handle h, fhr_location loc, uint32_t *limbs,
                          fhr_error *err)
{
    if (limbs)
        *limbs = 0;
    return copy_query(m, h, loc, "copy_limbs", limbs, get_limbs, err);
}

fhr_status fhr_copy_parts(fhr_manager *m, fhr_handle h, fhr_location loc, uint32_t *parts,
                          fhr_error *err)
{
    if (parts)
        *parts = 0;
    return copy_query(m, h, loc, "copy_parts", parts, get_parts, err);
}

typedef struct holds_q {
    uint32_t want; /* the q-limbs a use reads (0 or q: whole) */
    int holds;
} holds_q;

static void get_holds(const val *v, const mat *x, void *out)
{
    holds_q *q = out;
    uint32_t want = v->cut && q->want < v->cut->q ? q->want : 0;
    q->holds = !v->cut || !x->limbs || cut_serves(v->cut, x->limbs, x->parts, want);
}

fhr_status fhr_copy_holds(fhr_manager *m, fhr_handle h, fhr_location loc, uint32_t limbs,
                          int *holds, fhr_error *err)
{
    if (!holds)
        return fhr_fail(err, FHR_E_INVALID, "copy_holds: holds is NULL");
    holds_q q = {limbs, 0};
    fhr_status st = copy_query(m, h, loc, "copy_holds", &q, get_holds, err);
    *holds = st == FHR_OK && q.holds;
    return st;
}

fhr_status fhr_drop_parts(fhr_manager *m, fhr_handle h, fhr_location at, uint32_t limbs,
                          fhr_error *err)
{
    if (!limbs)
        return fhr_fail(err, FHR_E_INVALID, "drop_parts: limbs is 0 (fhr_drop drops the copy)");
    fhr_action a = {FHR_ACT_DROP, h, at, 0, {0, 0}, limbs};
    return mgr_run_action(m, &a, NULL, err);
}

uint64_t fhr_cut_nbytes(const fhr_value_info *vi, uint32_t limbs, int regen)
{
    if (!vi || !vi->cut_q || !vi->cut_parts || !vi->cut_nfields)
        return 0;
    mgr_cut c = {vi->cut_q, vi->cut_special, vi->cut_parts, vi->cut_alpha, vi->cut_nfields,
                 vi->cut_limb_nbytes, vi->cut_regen_mask};
    return cut_bytes(&c, limbs < c.q ? limbs : 0, 0, regen);
}
