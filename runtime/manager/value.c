/* runtime/manager/value.c — concrete values: buffers at one location, named field views
 * over them, CKKS metadata; the compacting copy (value_to.c copies any value) and spec checks. */
#include "runtime/manager/value.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fhr_ckks_meta_equal(const fhr_ckks_meta *a, const fhr_ckks_meta *b)
{
    if (a->context_id != b->context_id || a->level != b->level || a->scale != b->scale ||
        a->n_primes != b->n_primes || a->domain != b->domain ||
        a->key_relation != b->key_relation || a->key_param != b->key_param)
        return 0;
    if (a->n_primes > FHR_MAX_PRIMES)
        return 0;
    return memcmp(a->prime_ids, b->prime_ids, a->n_primes * sizeof a->prime_ids[0]) == 0;
}

const fhr_ckks_meta value_zero_meta;

int value_meta_same(const fhr_ckks_meta *a, const fhr_ckks_meta *b)
{
    return a->context_id == b->context_id && a->level == b->level &&
           memcmp(&a->scale, &b->scale, sizeof a->scale) == 0 && a->n_primes == b->n_primes &&
           memcmp(a->prime_ids, b->prime_ids, sizeof a->prime_ids) == 0 &&
           a->domain == b->domain && a->key_relation == b->key_relation &&
           a->key_param == b->key_param;
}

static void meta_unref(vmeta *mt)
{
    if (mt && atomic_fetch_sub_explicit(&mt->refs, 1, memory_order_acq_rel) == 1)
        free(mt);
}

fhr_status value_create_like(fhr_location loc, const fhr_value *like, fhr_value **out,
                             fhr_error *err)
{
    fhr_status st = fhr_value_create(loc, NULL, out, err);
    if (st == FHR_OK && like->meta) {
        atomic_fetch_add_explicit(&like->meta->refs, 1, memory_order_relaxed);
        (*out)->meta = like->meta;
    }
    return st;
}

fhr_status fhr_value_create(fhr_location loc, const fhr_ckks_meta *meta, fhr_value **out,
                            fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "value_create: out is NULL");
    *out = NULL;
    if (fhr_loc_slot(loc) < 0)
        return fhr_fail(err, FHR_E_LOCATION, "value_create: invalid location");
    if (meta && meta->n_primes > FHR_MAX_PRIMES)
        return fhr_fail(err, FHR_E_INVALID, "value_create: %u prime ids exceed the limit of %d",
                        meta->n_primes, FHR_MAX_PRIMES);
    fhr_value *v = calloc(1, sizeof *v);
    if (!v)
        return fhr_fail(err, FHR_E_NOMEM, "value_create: out of host memory");
    v->loc = loc;
    if (meta && !value_meta_same(meta, &value_zero_meta)) {
        if (!(v->meta = malloc(sizeof *v->meta))) {
            free(v);
            return fhr_fail(err, FHR_E_NOMEM, "value_create: out of host memory");
        }
        atomic_init(&v->meta->refs, 1);
        v->meta->meta = *meta;
    }
    *out = v;
    return FHR_OK;
}

static fhr_status push_buf(fhr_value *v, const vbuf *b, size_t *idx, fhr_error *err)
{
    if (!fhr_grow((void **)&v->bufs, &v->capbufs, v->nbufs, sizeof *v->bufs, 1))
        return fhr_fail(err, FHR_E_NOMEM, "value: out of host memory");
    v->bufs[v->nbufs] = *b;
    if (idx)
        *idx = v->nbufs;
    v->nbufs++;
    return FHR_OK;
}

fhr_status fhr_value_add_buffer(fhr_value *v, void *ptr, size_t nbytes, fhr_free_fn free_fn,
                                void *free_ctx, size_t *out, fhr_error *err)
{
    if (!v || !ptr || nbytes == 0)
        return fhr_fail(err, FHR_E_INVALID, "value_add_buffer: %s",
                        !v ? "value is NULL" : !ptr ? "buffer is NULL" : "size is zero");
    vbuf b = {ptr, nbytes, free_fn ? VBUF_FN : VBUF_BORROWED, free_fn, free_ctx, NULL};
    return push_buf(v, &b, out, err);
}

fhr_status fhr_value_alloc_buffer(fhr_value *v, fhr_backend *b, size_t nbytes, fhr_stream *s,
                                  size_t *out, fhr_error *err)
{
    if (!v || !b || nbytes == 0)
        return fhr_fail(err, FHR_E_INVALID, "value_alloc_buffer: %s",
                        !v ? "value is NULL" : !b ? "backend is NULL" : "size is zero");
    void *p = NULL;
    fhr_status st = b->ops->alloc(b, v->loc, nbytes, s, &p, err);
    if (st != FHR_OK)
        return st;
    vbuf nb = {p, nbytes, VBUF_BACKEND, NULL, NULL, b};
    st = push_buf(v, &nb, out, err);
    if (st != FHR_OK)
        b->ops->free(b, v->loc, p, nbytes, s);
    return st;
}

fhr_status fhr_value_add_field(fhr_value *v, const char *name, size_t buffer, size_t offset,
                               size_t nbytes, fhr_error *err)
{
    if (!v || !name || !*name)
        return fhr_fail(err, FHR_E_INVALID, "value_add_field: missing value or name");
    if (buffer >= v->nbufs)
        return fhr_fail(err, FHR_E_INVALID, "value_add_field '%s': no buffer %zu", name, buffer);
    if (nbytes == 0 || offset > v->bufs[buffer].nbytes ||
        nbytes > v->bufs[buffer].nbytes - offset)
        return fhr_fail(err, FHR_E_INVALID,
                        "value_add_field '%s': bytes [%zu, +%zu) outside buffer %zu of %zu bytes",
                        name, offset, nbytes, buffer, v->bufs[buffer].nbytes);
    for (size_t i = 0; i < v->nfields; i++)
        if (strcmp(v->fields[i].name, name) == 0)
            return fhr_fail(err, FHR_E_INVALID, "value_add_field: duplicate field '%s'", name);
    if (!fhr_grow((void **)&v->fields, &v->capfields, v->nfields, sizeof *v->fields, 1))
        return fhr_fail(err, FHR_E_NOMEM, "value: out of host memory");
    char *nm = strdup(name);
    if (!nm)
        return fhr_fail(err, FHR_E_NOMEM, "value: out of host memory");
    v->fields[v->nfields++] = (vfield){nm, buffer, offset, nbytes};
    return FHR_OK;
}

struct free_job {
    fhr_free_fn fn;
    void *ctx;
    void *ptr;
    size_t n;
};

static void run_free_job(void *arg)
{
    struct free_job *j = arg;
    j->fn(j->ctx, j->ptr, j->n);
    free(j);
}

void value_destroy_on(fhr_value *v, fhr_backend *b, fhr_stream *s)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->nbufs; i++) {
        vbuf *vb = &v->bufs[i];
        if (vb->owner == VBUF_BACKEND) {
            vb->b->ops->free(vb->b, v->loc, vb->ptr, vb->nbytes, s);
        } else if (vb->owner == VBUF_FN) {
            struct free_job *j = NULL;
            if (s && b && (j = malloc(sizeof *j))) {
                *j = (struct free_job){vb->fn, vb->ctx, vb->ptr, vb->nbytes};
                if (b->ops->launch_host(b, s, run_free_job, j, NULL) == FHR_OK)
                    continue;
                free(j);
                b->ops->stream_sync(b, s, NULL);
            }
            vb->fn(vb->ctx, vb->ptr, vb->nbytes);
        }
    }
    for (size_t i = 0; i < v->nfields; i++)
        free(v->fields[i].name);
    regen_free(v);
    meta_unref(v->meta);
    free(v->fields);
    free(v->bufs);
    free(v);
}

void fhr_value_destroy(fhr_value *v) { value_destroy_on(v, NULL, NULL); }

fhr_status value_split_tail(fhr_value *v, size_t first, fhr_value **tail, fhr_error *err)
{
    *tail = NULL;
    size_t keep = 0;
    while (keep < v->nfields && v->fields[keep].buf < first)
        keep++;
    for (size_t i = keep; i < v->nfields; i++)
        if (v->fields[i].buf < first || v->fields[i].buf == VFIELD_OMITTED)
            return fhr_fail(err, FHR_E_STATE, "the copy's fields are not ordered by buffer");
    if (first > v->nbufs)
        return fhr_fail(err, FHR_E_STATE, "the copy has %zu buffers, not %zu", v->nbufs, first);
    fhr_value *t = calloc(1, sizeof *t);
    size_t n = v->nbufs - first;
    if (!t || (n && !(t->bufs = malloc(n * sizeof *t->bufs)))) {
        free(t);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    t->loc = v->loc;
    memcpy(t->bufs, v->bufs + first, n * sizeof *t->bufs);
    t->nbufs = t->capbufs = n;
    v->nbufs = first;
    for (size_t i = keep; i < v->nfields; i++)
        free(v->fields[i].name);
    v->nfields = keep;
    size_t nr = 0; /* the regenerable fields that stay (kept fields keep their indices) */
    for (size_t r = 0; r < v->nregens; r++) {
        if (v->regens[r].field < keep) {
            v->regens[nr++] = v->regens[r];
            continue;
        }
        free(v->regens[r].gen);
        free(v->regens[r].seed);
    }
    v->nregens = nr;
    *tail = t;
    return FHR_OK;
}

fhr_location fhr_value_location(const fhr_value *v)
{
    return v ? v->loc : (fhr_location){FHR_LOC_INVALID, 0};
}
const fhr_ckks_meta *fhr_value_meta(const fhr_value *v)
{
    return !v ? NULL : v->meta ? &v->meta->meta : &value_zero_meta;
}
size_t fhr_value_nfields(const fhr_value *v) { return v ? v->nfields : 0; }
const char *fhr_value_field_name(const fhr_value *v, size_t i)
{
    return v && i < v->nfields ? v->fields[i].name : NULL;
}

fhr_status fhr_value_field_at(const fhr_value *v, size_t i, void **ptr, size_t *nbytes)
{
    if (!v || i >= v->nfields)
        return FHR_E_INVALID;
    const vfield *f = &v->fields[i];
    if (nbytes)
        *nbytes = f->nbytes;
    if (f->buf == VFIELD_OMITTED) { /* regenerable, not kept in this copy */
        if (ptr)
            *ptr = NULL;
        return FHR_E_STATE;
    }
    if (ptr)
        *ptr = (char *)v->bufs[f->buf].ptr + f->off;
    return FHR_OK;
}

fhr_status fhr_value_field(const fhr_value *v, const char *name, void **ptr, size_t *nbytes)
{
    if (!v || !name)
        return FHR_E_INVALID;
    for (size_t i = 0; i < v->nfields; i++)
        if (strcmp(v->fields[i].name, name) == 0)
            return fhr_value_field_at(v, i, ptr, nbytes);
    return FHR_E_INVALID;
}

uint64_t fhr_value_logical_nbytes(const fhr_value *v)
{
    uint64_t n = 0;
    for (size_t i = 0; v && i < v->nfields; i++)
        n += v->fields[i].nbytes;
    return n;
}

uint64_t fhr_value_storage_nbytes(const fhr_value *v)
{
    uint64_t n = 0;
    for (size_t i = 0; v && i < v->nbufs; i++)
        n += v->bufs[i].nbytes;
    return n;
}

/* The byte span [lo, hi) of buffer `bi` that fields cover; hi == 0 when unused. */
static void field_span(const fhr_value *v, size_t bi, size_t *lo, size_t *hi)
{
    *lo = SIZE_MAX;
    *hi = 0;
    for (size_t i = 0; i < v->nfields; i++) {
        const vfield *f = &v->fields[i];
        if (f->buf != bi)
            continue;
        if (f->off < *lo)
            *lo = f->off;
        if (f->off + f->nbytes > *hi)
            *hi = f->off + f->nbytes;
    }
}

fhr_status value_copy_to(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                         fhr_value **out, fhr_error *err)
{
    fhr_value *c = NULL;
    fhr_status st = value_create_like(to, v, &c, err);
    if (st != FHR_OK)
        return st;
    size_t *map = calloc(v->nbufs ? v->nbufs : 1, sizeof *map);
    if (!map) {
        fhr_value_destroy(c);
        return fhr_fail(err, FHR_E_NOMEM, "value copy: out of host memory");
    }
    for (size_t bi = 0; bi < v->nbufs; bi++) {
        size_t lo, hi;
        field_span(v, bi, &lo, &hi);
        if (hi == 0)
            continue;
        size_t idx;
        st = fhr_value_alloc_buffer(c, b, hi - lo, s, &idx, err);
        if (st != FHR_OK)
            goto fail;
        st = b->ops->copy(b, c->bufs[idx].ptr, to, (const char *)v->bufs[bi].ptr + lo, v->loc,
                          hi - lo, s, err);
        if (st != FHR_OK)
            goto fail;
        map[bi] = idx;
    }
    for (size_t i = 0; i < v->nfields; i++) {
        const vfield *f = &v->fields[i];
        size_t lo, hi;
        field_span(v, f->buf, &lo, &hi);
        st = fhr_value_add_field(c, f->name, map[f->buf], f->off - lo, f->nbytes, err);
        if (st != FHR_OK)
            goto fail;
    }
    free(map);
    *out = c;
    return FHR_OK;
fail:
    free(map);
    value_destroy_on(c, b, s);
    return st;
}


fhr_status value_check_spec(const fhr_value *v, const fhr_value_spec *spec, fhr_error *err)
{
    if (fhr_value_regenerable_nbytes(v) != spec->regen_nbytes)
        return fhr_fail(err, FHR_E_SOURCE,
                        "source value has %llu bytes of regenerable fields, the spec says %llu",
                        (unsigned long long)fhr_value_regenerable_nbytes(v),
                        (unsigned long long)spec->regen_nbytes);
    for (size_t i = 0; i < v->nregens; i++)
        if (v->regens[i].keep != spec->regen_keep)
            return fhr_fail(err, FHR_E_SOURCE,
                            "source field '%s' is kept at other host locations than the spec says",
                            v->fields[v->regens[i].field].name);
    fhr_status st = regen_check_placement(v, "source", err);
    if (st != FHR_OK)
        return fhr_fail(err, FHR_E_SOURCE, "%s", err ? err->message : "bad regenerable field");
    if (v->nfields != spec->nfields)
        return fhr_fail(err, FHR_E_SOURCE, "source returned %zu fields, the spec has %zu",
                        v->nfields, spec->nfields);
    for (size_t i = 0; i < spec->nfields; i++) {
        if (strcmp(v->fields[i].name, spec->fields[i].name) != 0)
            return fhr_fail(err, FHR_E_SOURCE, "source field %zu is '%s', the spec says '%s'", i,
                            v->fields[i].name, spec->fields[i].name);
        if (v->fields[i].nbytes != spec->fields[i].nbytes)
            return fhr_fail(err, FHR_E_SOURCE,
                            "source field '%s' has %zu bytes, the spec says %llu",
                            spec->fields[i].name, v->fields[i].nbytes,
                            (unsigned long long)spec->fields[i].nbytes);
    }
    if (!fhr_ckks_meta_equal(fhr_value_meta(v), &spec->meta))
        return fhr_fail(err, FHR_E_SOURCE, "source returned different CKKS metadata than its spec");
    uint64_t charge = spec->storage_nbytes - regen_omitted(v, v->loc.kind);
    if (fhr_value_storage_nbytes(v) > charge)
        return fhr_fail(err, FHR_E_SOURCE,
                        "source value holds %llu bytes, more than the spec's charge of %llu",
                        (unsigned long long)fhr_value_storage_nbytes(v),
                        (unsigned long long)charge);
    return FHR_OK;
}
