/* runtime/vm/values.c — the program's values in the manager: MUST_PRESERVE values adopted
 * with their initial content, the others registered as sources loading from a backing store. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fhr_status alloc_field(fhr_value *v, fhr_backend *b, size_t n, fhr_error *err)
{
    size_t bi;
    fhr_status st = fhr_value_alloc_buffer(v, b, n, NULL, &bi, err);
    if (st == FHR_OK)
        st = fhr_value_add_field(v, "data", bi, 0, n, err);
    return st;
}

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

static fhr_status src_load(void *ctx, const fhr_value_spec *spec, fhr_location at, fhr_backend *b,
                           fhr_stream *s, fhr_value **out, fhr_error *err)
{
    vm_src *vs = ctx;
    rplan_vm *vm = vs->vm;
    size_t n = (size_t)spec->storage_nbytes;
    fhr_value *v = NULL;
    fhr_status st = fhr_value_create(at, &spec->meta, &v, err);
    if (st)
        return st;
    size_t bi;
    if ((st = fhr_value_alloc_buffer(v, b, n, s, &bi, err)) != FHR_OK ||
        (st = fhr_value_add_field(v, "data", bi, 0, n, err)) != FHR_OK) {
        fhr_value_destroy(v);
        return st;
    }
    if (!vm->explain) {
        void *dst;
        size_t dn;
        fhr_value_field(v, "data", &dst, &dn);
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
        if (vi->data == RPLAN_DATA_FILE && !vm->explain) {
            filebuf = malloc(n);
            if (!filebuf)
                return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            if ((st = read_file(vi->path, n, filebuf, err)) != FHR_OK) {
                free(filebuf);
                return name_value(vm, st, vi, err);
            }
        }
        if (vi->recoverability == FHR_MUST_PRESERVE) {
            fhr_location at = vi->has_initial ? vi->initial : fhr_loc_host();
            fhr_value *v = NULL;
            if ((st = fhr_value_create(at, &meta, &v, err)) == FHR_OK &&
                (st = alloc_field(v, vm->b, n, err)) == FHR_OK && !vm->explain) {
                void *p;
                size_t pn;
                fhr_value_field(v, "data", &p, &pn);
                fhr_stream *s = NULL;
                if (at.kind == FHR_LOC_CUDA)
                    st = vm_compute_stream(vm, at, &s, err);
                if (st == FHR_OK)
                    st = vm_fill(vm, p, at, n, vi, filebuf, s, err);
            }
            if (st == FHR_OK)
                st = fhr_adopt(vm->m, &v, &ao, &vm->h[i], err);
            if (v)
                fhr_value_destroy(v);
        } else {
            if (!vm->explain) {
                if ((st = vm->b->ops->alloc(vm->b, vm->backing_loc, n, NULL, &vm->backing[i],
                                            err)) != FHR_OK) {
                    free(filebuf);
                    return name_value(vm, st, vi, err);
                }
                fhr_stream *s = NULL;
                if (vm->backing_loc.kind == FHR_LOC_CUDA)
                    st = vm_compute_stream(vm, vm->backing_loc, &s, err);
                if (st == FHR_OK)
                    st = vm_fill(vm, vm->backing[i], vm->backing_loc, n, vi, filebuf, s, err);
            }
            if (st == FHR_OK) {
                fhr_field_spec fs = {"data", vi->nbytes};
                fhr_value_spec spec = {meta, 1, &fs, vi->nbytes};
                vm->srcs[i].vm = vm;
                vm->srcs[i].index = (uint32_t)i;
                fhr_source src = {src_load, &vm->srcs[i], NULL};
                st = fhr_register_source(vm->m, &spec, &src, &ao, &vm->h[i], err);
            }
        }
        free(filebuf);
        if (st)
            name_value(vm, st, vi, err);
    }
    return st;
}
