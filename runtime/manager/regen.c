/* runtime/manager/regen.c — regenerable fields of values: declaring them (seed, generator,
 * where host copies keep them), what each location omits, and the placement check. */
#include "runtime/manager/value.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

static unsigned keep_bit(fhr_loc_kind k)
{
    return k == FHR_LOC_HOST ? FHR_KEEP_HOST : k == FHR_LOC_PINNED ? FHR_KEEP_PINNED : 0;
}

int regen_kept_at(const vregen *r, fhr_location loc)
{
    return loc.kind == FHR_LOC_CUDA || (r->keep & keep_bit(loc.kind)) != 0;
}

uint64_t regen_omitted(const fhr_value *v, fhr_loc_kind kind)
{
    uint64_t n = 0;
    fhr_location loc = {kind, 0};
    for (size_t i = 0; v && i < v->nregens; i++)
        if (!regen_kept_at(&v->regens[i], loc))
            n += v->fields[v->regens[i].field].nbytes;
    return n;
}

uint64_t fhr_value_regenerable_nbytes(const fhr_value *v)
{
    uint64_t n = 0;
    for (size_t i = 0; v && i < v->nregens; i++)
        n += v->fields[v->regens[i].field].nbytes;
    return n;
}

uint64_t fhr_value_generated_nbytes(const fhr_value *v) { return v ? v->generated : 0; }

int fhr_value_field_materialized(const fhr_value *v, const char *name)
{
    for (size_t i = 0; v && name && i < v->nfields; i++)
        if (strcmp(v->fields[i].name, name) == 0)
            return v->fields[i].buf != VFIELD_OMITTED;
    return -1;
}

void regen_free(fhr_value *v)
{
    for (size_t i = 0; i < v->nregens; i++) {
        free(v->regens[i].gen);
        free(v->regens[i].seed);
    }
    free(v->regens);
    v->regens = NULL;
    v->nregens = 0;
}

fhr_status regen_check_placement(const fhr_value *v, const char *op, fhr_error *err)
{
    char lb[16];
    for (size_t i = 0; i < v->nregens; i++) {
        const vregen *r = &v->regens[i];
        const vfield *f = &v->fields[r->field];
        int has = f->buf != VFIELD_OMITTED, kept = regen_kept_at(r, v->loc);
        if (has != kept)
            return fhr_fail(err, FHR_E_INVALID,
                            "%s: regenerable field '%s' %s storage at %s, where copies %s it", op,
                            f->name, has ? "has" : "has no", fhr_loc_format(v->loc, lb, sizeof lb),
                            kept ? "keep" : "omit");
    }
    return FHR_OK;
}

/* 1 when bytes [off, off+n) of buffer `buf` overlap another field's storage. */
static int overlaps(const fhr_value *v, size_t self, size_t buf, size_t off, size_t n)
{
    for (size_t i = 0; i < v->nfields; i++) {
        const vfield *f = &v->fields[i];
        if (i == self || f->buf == VFIELD_OMITTED || f->buf != buf)
            continue;
        if (off < f->off + f->nbytes && f->off < off + n)
            return 1;
    }
    return 0;
}

fhr_status regen_declare(fhr_value *v, size_t fi, const char *generator, const void *seed,
                          size_t seed_len, unsigned keep, const char *op, fhr_error *err)
{
    const char *name = v->fields[fi].name;
    for (size_t i = 0; i < v->nregens; i++)
        if (v->regens[i].field == fi)
            return fhr_fail(err, FHR_E_INVALID, "%s: field '%s' is already regenerable", op, name);
    for (size_t i = 0; i < v->nfields; i++) {
        const vfield *f = &v->fields[i];
        if (f->buf != VFIELD_OMITTED && overlaps(v, i, f->buf, f->off, f->nbytes))
            return fhr_fail(err, FHR_E_INVALID,
                            "%s: field '%s' shares storage with another field; a value with "
                            "regenerable fields is copied field by field", op, f->name);
    }
    vregen *n = realloc(v->regens, (v->nregens + 1) * sizeof *n);
    if (!n)
        return fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", op);
    v->regens = n;
    vregen r = {fi, strdup(generator), malloc(seed_len), seed_len, keep};
    if (!r.gen || !r.seed) {
        free(r.gen);
        free(r.seed);
        return fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", op);
    }
    memcpy(r.seed, seed, seed_len);
    v->regens[v->nregens++] = r;
    return FHR_OK;
}

static fhr_status check_args(const fhr_value *v, const char *name, const char *generator,
                             const void *seed, size_t seed_len, unsigned keep, const char *op,
                             fhr_error *err)
{
    if (!v || !name || !*name || !generator || !*generator || !seed)
        return fhr_fail(err, FHR_E_INVALID, "%s: value, field name, generator and seed are required", op);
    if (seed_len == 0 || seed_len > FHR_MAX_SEED)
        return fhr_fail(err, FHR_E_INVALID, "%s: field '%s': a seed of %zu bytes (1..%d allowed)",
                        op, name, seed_len, FHR_MAX_SEED);
    if (keep & ~(FHR_KEEP_HOST | FHR_KEEP_PINNED))
        return fhr_fail(err, FHR_E_INVALID, "%s: field '%s': unknown keep bits 0x%x", op, name, keep);
    return FHR_OK;
}

fhr_status fhr_value_set_regenerable(fhr_value *v, const char *name, const char *generator,
                                     const void *seed, size_t seed_len, unsigned keep,
                                     fhr_error *err)
{
    const char *op = "value_set_regenerable";
    fhr_status st = check_args(v, name, generator, seed, seed_len, keep, op, err);
    if (st != FHR_OK)
        return st;
    for (size_t i = 0; i < v->nfields; i++) {
        if (strcmp(v->fields[i].name, name) != 0)
            continue;
        vregen probe = {i, NULL, NULL, 0, keep};
        if (!regen_kept_at(&probe, v->loc)) {
            char lb[16];
            return fhr_fail(err, FHR_E_INVALID,
                            "%s: field '%s' has storage at %s, where copies would omit it: keep it "
                            "there, or build the value with fhr_value_add_regenerable",
                            op, name, fhr_loc_format(v->loc, lb, sizeof lb));
        }
        return regen_declare(v, i, generator, seed, seed_len, keep, op, err);
    }
    return fhr_fail(err, FHR_E_INVALID, "%s: no field '%s'", op, name);
}

fhr_status fhr_value_add_regenerable(fhr_value *v, const char *name, size_t nbytes,
                                     const char *generator, const void *seed, size_t seed_len,
                                     unsigned keep, fhr_error *err)
{
    const char *op = "value_add_regenerable";
    fhr_status st = check_args(v, name, generator, seed, seed_len, keep, op, err);
    if (st != FHR_OK)
        return st;
    if (nbytes == 0)
        return fhr_fail(err, FHR_E_INVALID, "%s: field '%s' has size zero", op, name);
    vregen probe = {0, NULL, NULL, 0, keep};
    if (regen_kept_at(&probe, v->loc)) {
        char lb[16];
        return fhr_fail(err, FHR_E_INVALID,
                        "%s: copies at %s keep field '%s': give it storage (fhr_value_add_field) "
                        "and declare it with fhr_value_set_regenerable",
                        op, fhr_loc_format(v->loc, lb, sizeof lb), name);
    }
    for (size_t i = 0; i < v->nfields; i++)
        if (strcmp(v->fields[i].name, name) == 0)
            return fhr_fail(err, FHR_E_INVALID, "%s: duplicate field '%s'", op, name);
    if (!fhr_grow((void **)&v->fields, &v->capfields, v->nfields, sizeof *v->fields, 4))
        return fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", op);
    char *nm = strdup(name);
    if (!nm)
        return fhr_fail(err, FHR_E_NOMEM, "%s: out of host memory", op);
    v->fields[v->nfields] = (vfield){nm, VFIELD_OMITTED, 0, nbytes};
    v->nfields++;
    if ((st = regen_declare(v, v->nfields - 1, generator, seed, seed_len, keep, op, err)) != FHR_OK) {
        free(nm);
        v->nfields--;
    }
    return st;
}
