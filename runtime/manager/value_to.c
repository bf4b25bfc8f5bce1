/* runtime/manager/value_to.c — functional copies of values: the compacting copy of value.c, or
 * for values with regenerable fields one buffer whose kept fields are copied or generated. */
#include "runtime/manager/manager.h"
#include "base/error.h"
#include "cuda/counter_gen.h"

#include <stdlib.h>
#include <string.h>

static const vregen *regen_of(const fhr_value *v, size_t fi)
{
    for (size_t i = 0; i < v->nregens; i++)
        if (v->regens[i].field == fi)
            return &v->regens[i];
    return NULL;
}

static fhr_status regen_copy_to(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                                const gen_registry *gens, fhr_value **out, fhr_error *err)
{
    fhr_value *c = NULL;
    fhr_status st = value_create_like(to, v, &c, err);
    if (st != FHR_OK)
        return st;
    size_t total = 0;
    for (size_t i = 0; i < v->nfields; i++) {
        const vregen *r = regen_of(v, i);
        if (!r || regen_kept_at(r, to))
            total += v->fields[i].nbytes;
    }
    size_t bi = 0;
    if (total && (st = fhr_value_alloc_buffer(c, b, total, s, &bi, err)) != FHR_OK)
        goto fail;
    size_t off = 0;
    const int dry = strcmp(fhr_backend_kind(b), "model") == 0;
    for (size_t i = 0; i < v->nfields; i++) {
        const vfield *f = &v->fields[i];
        const vregen *r = regen_of(v, i);
        if (r && !regen_kept_at(r, to)) { /* omitted here: no storage */
            if (!fhr_grow((void **)&c->fields, &c->capfields, c->nfields, sizeof *c->fields, 4) ||
                !(c->fields[c->nfields].name = strdup(f->name))) {
                st = fhr_fail(err, FHR_E_NOMEM, "value copy: out of host memory");
                goto fail;
            }
            c->fields[c->nfields].buf = VFIELD_OMITTED;
            c->fields[c->nfields].off = 0;
            c->fields[c->nfields++].nbytes = f->nbytes;
            continue;
        }
        char *dst = (char *)c->bufs[bi].ptr + off;
        if (f->buf != VFIELD_OMITTED && !(r && to.kind == FHR_LOC_CUDA && v->loc.kind != FHR_LOC_CUDA)) {
            st = b->ops->copy(b, dst, to, (const char *)v->bufs[f->buf].ptr + f->off, v->loc,
                              f->nbytes, s, err);
        } else { /* a device copy of a host value, or a host value that keeps it: generate */
            fhr_generator_fn fn;
            void *gctx;
            if (dry) /* the model backend's memory is not real: nothing runs */
                st = FHR_OK;
            else if ((st = gens_lookup(gens, r->gen, &fn, &gctx, err)) == FHR_OK)
                st = fn(gctx, b, to, s, dst, f->nbytes, r->seed, r->seed_len, err);
            if (st == FHR_OK)
                c->generated += f->nbytes;
        }
        if (st != FHR_OK)
            goto fail;
        if ((st = fhr_value_add_field(c, f->name, bi, off, f->nbytes, err)) != FHR_OK)
            goto fail;
        off += f->nbytes;
    }
    for (size_t i = 0; i < v->nregens; i++) {
        const vregen *r = &v->regens[i];
        size_t fi = 0;
        while (strcmp(c->fields[fi].name, v->fields[r->field].name) != 0)
            fi++;
        if ((st = regen_declare(c, fi, r->gen, r->seed, r->seed_len, r->keep, "value copy", err)) != FHR_OK)
            goto fail;
    }
    *out = c;
    return FHR_OK;
fail:
    value_destroy_on(c, b, s);
    return st;
}

fhr_status value_copy_to_gen(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                             const gen_registry *gens, fhr_value **out, fhr_error *err)
{
    if (v->nregens)
        return regen_copy_to(v, to, b, s, gens, out, err);
    return value_copy_to(v, to, b, s, out, err);
}

fhr_status fhr_value_to(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                        fhr_value **out, fhr_error *err)
{
    if (!v || !b || !out)
        return fhr_fail(err, FHR_E_INVALID, "value_to: NULL argument");
    *out = NULL;
    if (fhr_loc_slot(to) < 0 || (to.kind == FHR_LOC_CUDA && to.index >= b->ops->device_count(b)))
        return fhr_fail(err, FHR_E_LOCATION, "value_to: location is not visible to this process");
    fhr_stream *own = NULL;
    if (!s) {
        fhr_status st = b->ops->stream_create(b, to.kind == FHR_LOC_CUDA ? to : v->loc, &own, err);
        if (st != FHR_OK)
            return st;
        s = own;
    }
    fhr_status st = value_copy_to_gen(v, to, b, s, NULL, out, err);
    if (own) {
        fhr_status ss = b->ops->stream_sync(b, own, st == FHR_OK ? err : NULL);
        b->ops->stream_destroy(b, own);
        if (st == FHR_OK && ss != FHR_OK) {
            fhr_value_destroy(*out);
            *out = NULL;
            st = ss;
        }
    }
    return st;
}

fhr_status fhr_manager_value_to(fhr_manager *m, const fhr_value *v, fhr_location to,
                                fhr_stream *s, fhr_value **out, fhr_error *err)
{
    if (!m || !v || !out)
        return fhr_fail(err, FHR_E_INVALID, "manager_value_to: NULL argument");
    *out = NULL;
    fhr_backend *b = m->b;
    if (fhr_loc_slot(to) < 0 || (to.kind == FHR_LOC_CUDA && to.index >= m->ndev))
        return fhr_fail(err, FHR_E_LOCATION, "manager_value_to: location is not visible to this process");
    fhr_stream *own = NULL;
    if (!s) {
        fhr_status st = b->ops->stream_create(b, to.kind == FHR_LOC_CUDA ? to : v->loc, &own, err);
        if (st != FHR_OK)
            return st;
        s = own;
    }
    fhr_status st = value_copy_to_gen(v, to, b, s, m->gens, out, err);
    if (own) {
        fhr_status ss = b->ops->stream_sync(b, own, st == FHR_OK ? err : NULL);
        b->ops->stream_destroy(b, own);
        if (st == FHR_OK && ss != FHR_OK) {
            fhr_value_destroy(*out);
            *out = NULL;
            st = ss;
        }
    }
    return st;
}

/* ---- partial copies of a cut value ------------------------------------------------------ */

/* Field `name` of v, or NULL. */
static const vfield *field_named(const fhr_value *v, const char *name, size_t *index)
{
    for (size_t i = 0; i < v->nfields; i++)
        if (strcmp(v->fields[i].name, name) == 0) {
            *index = i;
            return &v->fields[i];
        }
    return NULL;
}

/* Copies or generates limbs [first, first + n) of field `name` of `from` (a copy holding
 * from_q q-limbs per field) to dst: limb i < q is a q-limb, q + j special limb j. */
static fhr_status limbs_from(const mgr_cut *c, const char *name, const fhr_value *from,
                             uint32_t from_q, uint32_t first, uint32_t n, char *dst,
                             fhr_location to, fhr_backend *b, fhr_stream *s,
                             const gen_registry *gens, uint64_t *generated, fhr_error *err)
{
    size_t fi;
    const vfield *f = field_named(from, name, &fi);
    if (!f)
        return fhr_fail(err, FHR_E_INVALID, "partial copy: field '%s' is not in its source", name);
    uint64_t at = first < c->q ? first : from_q + (first - c->q); /* limb index in `from` */
    if (f->buf != VFIELD_OMITTED && !(to.kind == FHR_LOC_CUDA && from->loc.kind != FHR_LOC_CUDA &&
                                      regen_of(from, fi)))
        return b->ops->copy(b, dst, to, (const char *)from->bufs[f->buf].ptr + f->off + at * c->limb,
                            from->loc, (size_t)n * c->limb, s, err);
    const vregen *r = regen_of(from, fi); /* generated on the device: only these limbs */
    fhr_generator_range_fn fn;
    void *gctx;
    fhr_status st = FHR_OK;
    fhr_generator_fn whole;
    if (strcmp(fhr_backend_kind(b), "model") == 0)
        st = FHR_OK; /* the model backend's memory is not real: nothing runs */
    else if (first == 0 && n == c->q + c->special) /* the whole field */
        st = gens_lookup(gens, r->gen, &whole, &gctx, err) == FHR_OK
                 ? whole(gctx, b, to, s, dst, (size_t)n * c->limb, r->seed, r->seed_len, err)
                 : FHR_E_UNSUPPORTED;
    else if ((st = gens_lookup_range(gens, r->gen, &fn, &gctx, err)) == FHR_OK)
        st = fn(gctx, b, to, s, dst, (size_t)n * c->limb, (uint64_t)first < c->q
                ? first * c->limb : (uint64_t)(c->q + (first - c->q)) * c->limb,
                r->seed, r->seed_len, err);
    if (st == FHR_OK)
        *generated += (uint64_t)n * c->limb;
    return st;
}

/* One held field of the new copy at dst: its q-limbs and special limbs, the ones `over`
 * holds (had q-limbs in had_parts parts, when it has the field; up to q_new of them)
 * copied on the device, the rest from src. */
static fhr_status field_limbs(const mgr_cut *c, const char *name, uint32_t f, uint32_t q_new,
                              const fhr_value *src, uint32_t src_q, const fhr_value *over,
                              uint32_t had, uint32_t had_parts, char *dst, fhr_location to,
                              fhr_backend *b, fhr_stream *s, const gen_registry *gens,
                              fhr_value *nv, fhr_error *err)
{
    int from_over = over && cut_has_field(c, had, had_parts, f);
    uint32_t kept = from_over ? (had < q_new ? had : q_new) : 0;
    uint64_t *gen = &nv->generated;
    fhr_status st = FHR_OK;
    if (!from_over && q_new == src_q) /* the same layout: the whole field in one copy */
        return limbs_from(c, name, src, src_q, 0, q_new + c->special, dst, to, b, s, gens, gen,
                          err);
    if (kept) /* q-limbs 0..kept-1, then the special limbs, from the old copy */
        st = limbs_from(c, name, over, had, 0, kept, dst, to, b, s, gens, gen, err);
    if (st == FHR_OK && q_new > kept)
        st = limbs_from(c, name, src, src_q, kept, q_new - kept,
                        dst + (uint64_t)kept * c->limb, to, b, s, gens, gen, err);
    if (st == FHR_OK && c->special)
        st = limbs_from(c, name, from_over ? over : src, from_over ? had : src_q, c->q,
                        c->special, dst + (uint64_t)q_new * c->limb, to, b, s, gens, gen,
                        err);
    if (st == FHR_OK && from_over)
        nv->ondevice += ((uint64_t)kept + c->special) * c->limb;
    return st;
}

fhr_status value_copy_limbs(const mgr_cut *c, char *const *names, const fhr_value *src,
                            uint32_t src_limbs, const fhr_value *over, uint32_t had,
                            uint32_t had_parts, uint32_t limbs, fhr_location to,
                            fhr_backend *b, fhr_stream *s, const gen_registry *gens,
                            fhr_value **out, fhr_error *err)
{
    fhr_value *nv = NULL;
    fhr_status st = value_create_like(to, src, &nv, err);
    if (st != FHR_OK)
        return st;
    uint32_t q_new = limbs ? limbs : c->q, src_q = src_limbs ? src_limbs : c->q;
    uint32_t per_part = c->nfields / c->parts;
    uint64_t per = (uint64_t)(q_new + c->special) * c->limb, off = 0;
    size_t bi = 0;
    /* one buffer per part, so that a drop of parts frees its own */
    for (uint32_t f = 0; f < c->nfields && st == FHR_OK; f++) {
        if (!cut_has_field(c, limbs, 0, f))
            continue;
        if (f % per_part == 0) {
            st = fhr_value_alloc_buffer(nv, b, (size_t)(per * per_part), s, &bi, err);
            off = 0;
            if (st != FHR_OK)
                break;
        }
        char *dst = (char *)nv->bufs[bi].ptr + off;
        st = field_limbs(c, names[f], f, q_new, src, src_q, over, had, had_parts, dst, to, b,
                         s, gens, nv, err);
        if (st == FHR_OK)
            st = fhr_value_add_field(nv, names[f], bi, (size_t)off, (size_t)per, err);
        off += per;
    }
    for (size_t i = 0; st == FHR_OK && !limbs && i < src->nregens; i++) {
        /* a whole copy, as value_copy_to_gen makes it: its regenerable fields stay so */
        const vregen *r = &src->regens[i];
        size_t fi;
        if (field_named(nv, src->fields[r->field].name, &fi))
            st = regen_declare(nv, fi, r->gen, r->seed, r->seed_len, r->keep, "value copy", err);
    }
    if (st != FHR_OK)
        goto fail;
    *out = nv;
    return FHR_OK;
fail:
    value_destroy_on(nv, b, s);
    return st;
}
