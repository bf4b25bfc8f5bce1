/* runtime/vm/values.c — the program's values in the manager: MUST_PRESERVE values adopted
 * with their initial content, the others registered as sources loading from a backing store;
 * seeded values keep only their "b" half there and regenerate "a" where copies keep it. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fhr_status read_file(const char *path, size_t n, void *dst, fhr_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fhr_fail(err, FHR_E_SOURCE, "cannot open '%.200s'", path);
    size_t got = fread(dst, 1, n, f);
    fclose(f);
    if (got != n)
        return fhr_fail(err, FHR_E_SOURCE, "'%.200s' holds %zu bytes, the value needs %zu", path,
                        got, n);
    return FHR_OK;
}

/* ---- seeded values: "b" stored, "a" regenerated ---------------------------------------- */

/* The host location whose copies omit "a" (pinned unless `keep pinned`). */
static fhr_location omitting_host(const rplan_value_info *vi)
{
    return vi->keep & FHR_KEEP_PINNED ? fhr_loc_host() : fhr_loc_pinned();
}

/* The 8 little-endian bytes of seed s. */
static void seed_bytes(uint64_t s, unsigned char out[8])
{
    for (int k = 0; k < 8; k++)
        out[k] = (unsigned char)(s >> (8 * k));
}

/* Value i's declared fields on v: the stored ones over buffer bi back to back, the seeded
 * ones regenerable, the k-th from the value's seed + k (rplan(5), "Seeded fields"). */
static fhr_status seeded_fields(rplan_vm *vm, size_t i, fhr_value *v, size_t bi,
                                fhr_error *err)
{
    const rplan_value_info *vi = &vm->vinfo[i];
    fhr_status st = FHR_OK;
    size_t off = 0;
    uint64_t k = 0;
    for (size_t f = 0; f < vi->nfields && st == FHR_OK; f++) {
        const vm_field *x = &vm->flds[vm->fld0[i] + f];
        if (x->regen) {
            unsigned char seed[8];
            seed_bytes(vi->regen_seed + k++, seed);
            st = fhr_value_add_regenerable(v, x->name, (size_t)x->nbytes, vi->generator, seed,
                                           sizeof seed, vi->keep, err);
        } else {
            st = fhr_value_add_field(v, x->name, bi, off, (size_t)x->nbytes, err);
            off += (size_t)x->nbytes;
        }
    }
    return st;
}

/* A value at an omitting host location over the stored bytes at p (borrowed when own is
 * 0): "b", with "a" declared regenerable from the value's seed, or the declared fields. */
static fhr_status seeded_host_value(rplan_vm *vm, const rplan_value_info *vi, void *p, int own,
                                    fhr_value **out, fhr_error *err)
{
    fhr_ckks_meta meta = {0};
    meta.context_id = 1;
    fhr_value *v = NULL;
    unsigned char seed[8];
    seed_bytes(vi->regen_seed, seed);
    size_t nb = (size_t)vm_backing_nbytes(vi), bi;
    fhr_status st = fhr_value_create(omitting_host(vi), &meta, &v, err);
    if (st == FHR_OK)
        st = own ? fhr_value_alloc_buffer(v, vm->b, nb, NULL, &bi, err)
                 : fhr_value_add_buffer(v, p, nb, NULL, NULL, &bi, err);
    if (st == FHR_OK && vi->nfields)
        st = seeded_fields(vm, (size_t)(vi - vm->vinfo), v, bi, err);
    else if (st == FHR_OK)
        st = fhr_value_add_field(v, "b", bi, 0, nb, err);
    if (st == FHR_OK && !vi->nfields)
        st = fhr_value_add_regenerable(v, "a", (size_t)vi->regen_nbytes, vi->generator, seed,
                                       sizeof seed, vi->keep, err);
    if (st != FHR_OK) {
        fhr_value_destroy(v);
        return st;
    }
    *out = v;
    return FHR_OK;
}

/* The start of a seeded host value's stored bytes: its first stored field (offset 0). */
static void *stored_base(const rplan_vm *vm, size_t i, const fhr_value *hv)
{
    const rplan_value_info *vi = &vm->vinfo[i];
    const char *name = "b";
    for (size_t f = 0; vi->nfields && f < vi->nfields; f++)
        if (!vm->flds[vm->fld0[i] + f].regen) {
            name = vm->flds[vm->fld0[i] + f].name;
            break;
        }
    void *p = NULL;
    size_t n;
    fhr_value_field(hv, name, &p, &n);
    return p;
}

static fhr_status src_load(void *ctx, const fhr_value_spec *spec, fhr_location at, fhr_backend *b,
                           fhr_stream *s, fhr_value **out, fhr_error *err)
{
    vm_src *vs = ctx;
    rplan_vm *vm = vs->vm;
    const rplan_value_info *vi = &vm->vinfo[vs->index];
    if (vi->seeded) { /* copy "b" from the backing store, generate "a" where it is kept */
        fhr_value *hv = NULL;
        fhr_status st = seeded_host_value(vm, vi, vm->backing[vs->index], 0, &hv, err);
        if (st == FHR_OK && fhr_loc_equal(at, fhr_value_location(hv))) {
            *out = hv; /* asked for where the backing store is: a view of it */
            return FHR_OK;
        }
        if (st == FHR_OK)
            st = fhr_manager_value_to(vm->m, hv, at, s, out, err);
        fhr_value_destroy(hv); /* borrowed: the backing store stays */
        return st;
    }
    (void)b; /* the VM's backend */
    size_t n = (size_t)spec->storage_nbytes;
    fhr_value *v = NULL;
    if (vm->backing[vs->index] && fhr_loc_equal(at, vm->backing_loc) && !vm->explain)
        /* a view of the backing store (a partial copy's load) */
        return vm_value_view(vm, vs->index, vm->backing[vs->index], &spec->meta, out, err);
    fhr_status st = vm_value_new(vm, vs->index, at, &spec->meta, s, &v, err);
    if (st)
        return st;
    if (vi->data == RPLAN_DATA_ENGINE) { /* the engine's loader fills it */
        if ((st = vm_engine_load(vm, vs->index, v, s, err)) != FHR_OK) {
            fhr_value_destroy(v);
            return st;
        }
    } else if (!vm->explain) {
        void *dst;
        size_t dn;
        fhr_value_field_at(v, 0, &dst, &dn);
        st = b->ops->copy(b, dst, at, vm->backing[vs->index], vm->backing_loc, n, s, err);
        if (st) {
            fhr_value_destroy(v);
            return st;
        }
    }
    *out = v;
    return FHR_OK;
}

/* Prefixes a failure while value vi is set up with its name, and keeps which value it was:
 * the report points at its declaration. */
static fhr_status name_value(rplan_vm *vm, fhr_status st, const rplan_value_info *vi,
                             fhr_error *err)
{
    vm->setup_value = (long)(vi - vm->vinfo);
    if (err) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "value '%.60s': %.400s", vi->name, err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    return st;
}

/* Registers value i as a source whose copies have its declared fields (a seeded value's
 * seeded fields regenerated). */
static fhr_status register_fields(rplan_vm *vm, size_t i, const fhr_ckks_meta *meta,
                                  const fhr_adopt_opts *ao, fhr_error *err)
{
    size_t nf = vm_value_nfields(vm, i);
    fhr_field_spec fs[RP_VM_MAX_FIELDS];
    for (size_t f = 0; f < nf; f++)
        fs[f] = (fhr_field_spec){vm->flds[vm->fld0[i] + f].name, vm->flds[vm->fld0[i] + f].nbytes};
    const rplan_value_info *vi = &vm->vinfo[i];
    fhr_value_spec spec = {*meta, nf, fs, vi->nbytes, vi->seeded ? vi->regen_nbytes : 0,
                           vi->seeded ? vi->keep : 0};
    vm->srcs[i].vm = vm;
    vm->srcs[i].index = (uint32_t)i;
    fhr_source src = {src_load, &vm->srcs[i], NULL};
    return fhr_register_source(vm->m, &spec, &src, ao, &vm->h[i], err);
}

/* An init value's first content at p (n bytes at host or pinned memory, or on a device):
 * synth or file data is made once, by the first run, into host memory of the backend,
 * and copied from there by later runs through the backend, on the location's own stream
 * (the CUDA backend's host copies use its copy threads: a 45 MiB ciphertext took a
 * later run 4-8 ms as one memcpy); anything else is filled as vm_fill does. */
static fhr_status init_fill(rplan_vm *vm, size_t i, void *p, fhr_location at, size_t n,
                            const void *filebuf, fhr_stream *s, fhr_error *err)
{
    const rplan_value_info *vi = &vm->vinfo[i];
    int keep = at.kind != FHR_LOC_CUDA && n &&
               (vi->data == RPLAN_DATA_SYNTH || vi->data == RPLAN_DATA_FILE);
    if (keep && vm->pristine[i]) {
        fhr_stream *hs = NULL;
        fhr_status st = vm_compute_stream(vm, at, &hs, err);
        if (st == FHR_OK)
            st = vm->b->ops->copy(vm->b, p, at, vm->pristine[i], fhr_loc_host(), n, hs, err);
        return st == FHR_OK ? vm->b->ops->stream_sync(vm->b, hs, err) : st;
    }
    fhr_status st = vm_fill(vm, p, at, n, vi, filebuf, s, err);
    if (st == FHR_OK && keep &&
        vm->b->ops->alloc(vm->b, fhr_loc_host(), n, NULL, &vm->pristine[i], NULL) == FHR_OK)
        memcpy(vm->pristine[i], p, n); /* no memory for it: later runs generate again */
    return st;
}

/* Frees the first contents init_fill kept (rplan_vm_destroy). */
void vm_pristine_free(rplan_vm *vm)
{
    for (size_t i = 0; vm->pristine && i < vm->nvals; i++)
        if (vm->pristine[i])
            vm->b->ops->free(vm->b, fhr_loc_host(), vm->pristine[i], (size_t)vm->vinfo[i].nbytes,
                             NULL);
    free(vm->pristine);
    vm->pristine = NULL;
}

/* Declares value i's limbs(...) to the manager: its seeded fields are the ones devices
 * regenerate (an adopted value's own regenerable fields otherwise). */
static fhr_status cut_value(rplan_vm *vm, size_t i, fhr_error *err)
{
    const rplan_value_info *vi = &vm->vinfo[i];
    uint64_t regen = 0;
    if (vi->seeded && vi->recoverability != FHR_MUST_PRESERVE) /* without fields: b, a */
        for (size_t f = 0; f < (vi->nfields ? vi->nfields : 2); f++)
            if (vi->nfields ? rplan_value_field_seeded(vm->p, i, f) == 1 : f == 1)
                regen |= 1ULL << f;
    fhr_limb_cut c = {vi->limb_q, vi->limb_special, vi->limb_parts, vi->limb_alpha, regen};
    return fhr_value_cut_limbs(vm->m, vm->h[i], &c, err);
}

/* Adopts every MUST_PRESERVE value and registers every source. */
fhr_status vm_setup_values(rplan_vm *vm, fhr_error *err)
{
    fhr_status st = FHR_OK;
    for (size_t i = 0; i < vm->nvals && st == FHR_OK; i++) {
        const rplan_value_info *vi = &vm->vinfo[i];
        fhr_ckks_meta meta = {0};
        meta.context_id = 1;
        fhr_adopt_opts ao = {vi->mode, vi->name, vi->priority};
        size_t n = (size_t)vi->nbytes;
        void *filebuf = NULL;
        /* an earlier run's backing store or first content (vm_rerun_reset) */
        int kept = vm->backing[i] != NULL || vm->pristine[i] != NULL;
        if (vi->data == RPLAN_DATA_FILE && !vm->explain && !kept) {
            filebuf = malloc(n);
            if (!filebuf)
                return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            if ((st = read_file(vi->path, n, filebuf, err)) != FHR_OK) {
                free(filebuf);
                return name_value(vm, st, vi, err);
            }
        }
        if (vi->seeded && vi->recoverability == FHR_MUST_PRESERVE) {
            fhr_location at = vi->has_initial ? vi->initial : fhr_loc_host();
            fhr_value *hv = NULL, *v = NULL;
            if ((st = seeded_host_value(vm, vi, NULL, 1, &hv, err)) == FHR_OK && !vm->explain) {
                void *p = stored_base(vm, i, hv); /* the stored fields, back to back */
                size_t pn = (size_t)vm_backing_nbytes(vi);
                st = vi->data == RPLAN_DATA_ENGINE
                         ? vm_engine_load_stored(vm, i, p, fhr_value_location(hv), NULL, err)
                         : vm_fill(vm, p, fhr_value_location(hv), pn, vi, filebuf, NULL, err);
            }
            if (st == FHR_OK && !fhr_loc_equal(at, fhr_value_location(hv)))
                st = fhr_manager_value_to(vm->m, hv, at, NULL, &v, err);
            else if (st == FHR_OK) {
                v = hv;
                hv = NULL;
            }
            fhr_value_destroy(hv);
            if (st == FHR_OK)
                st = fhr_adopt(vm->m, &v, &ao, &vm->h[i], err);
            if (v)
                fhr_value_destroy(v);
        } else if (vi->recoverability == FHR_MUST_PRESERVE) {
            fhr_location at = vi->has_initial ? vi->initial : fhr_loc_host();
            fhr_value *v = NULL; /* the engine's own buffers (rplan_vm_adopt), borrowed */
            st = vm_adopted_view(vm, i, &v, err);
            if (st == FHR_OK && !v &&
                (st = vm_value_new(vm, i, at, &meta, NULL, &v, err)) == FHR_OK && !vm->explain) {
                void *p;
                size_t pn;
                fhr_value_field_at(v, 0, &p, &pn);
                fhr_stream *s = NULL;
                if (at.kind == FHR_LOC_CUDA)
                    st = vm_compute_stream(vm, at, &s, err);
                if (st == FHR_OK && vi->data == RPLAN_DATA_ENGINE) {
                    st = vm_engine_load(vm, i, v, s, err);
                    if (st == FHR_OK && s)
                        st = vm->b->ops->stream_sync(vm->b, s, err);
                } else if (st == FHR_OK) {
                    st = init_fill(vm, i, p, at, n, filebuf, s, err);
                }
            }
            if (st == FHR_OK)
                st = fhr_adopt(vm->m, &v, &ao, &vm->h[i], err);
            if (v)
                fhr_value_destroy(v);
        } else if (vi->data == RPLAN_DATA_ENGINE && !vi->seeded && !vi->limb_q) {
            /* no backing store (a cut one has one: a partial copy takes its limbs from it) */
            st = register_fields(vm, i, &meta, &ao, err);
        } else {
            if (!kept && (!vm->explain || vi->seeded)) { /* model memory: a seeded borrow */
                size_t nb = (size_t)vm_backing_nbytes(vi);
                if ((st = vm->b->ops->alloc(vm->b, vm->backing_loc, nb, NULL, &vm->backing[i],
                                            err)) != FHR_OK) {
                    free(filebuf);
                    return name_value(vm, st, vi, err);
                }
            }
            if (!vm->explain && !kept) {
                fhr_stream *s = NULL;
                if (vm->backing_loc.kind == FHR_LOC_CUDA)
                    st = vm_compute_stream(vm, vm->backing_loc, &s, err);
                /* a seeded or cut engine value: its loader fills the stored fields once, here */
                if (st == FHR_OK && vi->data == RPLAN_DATA_ENGINE)
                    st = vm_engine_load_stored(vm, i, vm->backing[i], vm->backing_loc, s, err);
                else if (st == FHR_OK)
                    st = vm_fill(vm, vm->backing[i], vm->backing_loc, (size_t)vm_backing_nbytes(vi),
                                 vi, filebuf, s, err);
                if (st == FHR_OK && s && vi->data == RPLAN_DATA_ENGINE) /* before any load */
                    st = vm->b->ops->stream_sync(vm->b, s, err);
            }
            if (st == FHR_OK && vi->seeded && vi->nfields) {
                st = register_fields(vm, i, &meta, &ao, err);
            } else if (st == FHR_OK && vi->seeded) {
                fhr_field_spec fs[2] = {{"b", vi->nbytes - vi->regen_nbytes}, {"a", vi->regen_nbytes}};
                fhr_value_spec spec = {meta, 2, fs, vi->nbytes, vi->regen_nbytes, vi->keep};
                vm->srcs[i].vm = vm;
                vm->srcs[i].index = (uint32_t)i;
                fhr_source src = {src_load, &vm->srcs[i], NULL};
                st = fhr_register_source(vm->m, &spec, &src, &ao, &vm->h[i], err);
            } else if (st == FHR_OK) {
                st = register_fields(vm, i, &meta, &ao, err);
            }
        }
        free(filebuf);
        if (st == FHR_OK && vi->limb_q)
            st = cut_value(vm, i, err);
        if (st)
            name_value(vm, st, vi, err);
    }
    return st;
}
