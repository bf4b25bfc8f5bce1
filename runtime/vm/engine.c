/* runtime/vm/engine.c — what an engine hands a VM: loaders that fill `engine.NAME(ARG)`
 * values, values it adopts into the program's slots, the stream its bodies run on at a
 * device, and the declared fields every copy of a value is laid out in. */
#include "runtime/vm/internal.h"
#include "runtime/manager/value.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vm_loader {
    char *name;
    rplan_loader_fn fn;
    void *ctx;
};

/* A scaled kernel size argument (no decision depends on it): divided, rounded up to whole
 * 8-byte words, at least one word; a size within 7 bytes of 2^64 keeps its last whole
 * word rather than wrapping. */
uint64_t vm_scale_up8(uint64_t x, uint64_t scale)
{
    if (scale <= 1)
        return x;
    x = x / scale + (x % scale != 0);
    if (x == 0)
        x = 8;
    return x > UINT64_MAX - 7 ? UINT64_MAX / 8 * 8 : (x + 7) / 8 * 8;
}

/* ---- fields -------------------------------------------------------------------------- */

fhr_status vm_fields_setup(rplan_vm *vm, fhr_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < vm->nvals; i++)
        total += vm->vinfo[i].seeded ? 0 : vm->vinfo[i].nfields ? vm->vinfo[i].nfields : 1;
    vm->fld0 = calloc(vm->nvals + 1, sizeof *vm->fld0);
    vm->flds = calloc(total + 1, sizeof *vm->flds);
    if (!vm->fld0 || !vm->flds)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    size_t k = 0;
    for (size_t i = 0; i < vm->nvals; i++) {
        rplan_value_info *vi = &vm->vinfo[i];
        vm->fld0[i] = k;
        if (vi->seeded)
            continue;
        if (!vi->nfields) {
            vm->flds[k++] = (vm_field){"data", vi->nbytes};
            continue;
        }
        /* each field scaled on its own: the value is their sum */
        uint64_t sum = 0;
        for (size_t f = 0; f < vi->nfields; f++) {
            vm_field *x = &vm->flds[k++];
            uint64_t n = 0;
            rplan_value_field(vm->p, i, f, &x->name, &n);
            x->nbytes = n / vm->o.scale; /* exact: the scale divides every field */
            sum += x->nbytes;
        }
        vi->nbytes = sum;
    }
    return FHR_OK;
}

size_t vm_value_nfields(const rplan_vm *vm, size_t i)
{
    return vm->vinfo[i].nfields ? vm->vinfo[i].nfields : 1;
}

fhr_status vm_value_new(rplan_vm *vm, size_t i, fhr_location at, const fhr_ckks_meta *meta,
                        fhr_stream *s, fhr_value **out, fhr_error *err)
{
    fhr_value *v = NULL;
    size_t bi, off = 0, n = (size_t)vm->vinfo[i].nbytes;
    fhr_status st;
    if (vm->meta_like && value_meta_same(fhr_value_meta(vm->meta_like),
                                         meta ? meta : &value_zero_meta)) {
        st = value_create_like(at, vm->meta_like, &v, err);
    } else if ((st = fhr_value_create(at, meta, &v, err)) == FHR_OK) {
        fhr_value *like = NULL;
        if (value_create_like(at, v, &like, NULL) == FHR_OK) { /* else none is kept */
            fhr_value_destroy(vm->meta_like);
            vm->meta_like = like;
        }
    }
    if (st == FHR_OK)
        st = fhr_value_alloc_buffer(v, vm->b, n, s, &bi, err);
    for (size_t f = 0; f < vm_value_nfields(vm, i) && st == FHR_OK; f++) {
        const vm_field *x = &vm->flds[vm->fld0[i] + f];
        st = fhr_value_add_field(v, x->name, bi, off, (size_t)x->nbytes, err);
        off += (size_t)x->nbytes;
    }
    if (st != FHR_OK) {
        fhr_value_destroy(v);
        return st;
    }
    *out = v;
    return FHR_OK;
}

/* ---- loaders ------------------------------------------------------------------------- */

static const struct vm_loader *find_loader(const rplan_vm *vm, const char *name)
{
    for (size_t i = 0; i < vm->nloaders; i++)
        if (strcmp(vm->loaders[i].name, name) == 0)
            return &vm->loaders[i];
    return NULL;
}

fhr_status rplan_loader_register(rplan_vm *vm, const char *name, rplan_loader_fn fn, void *ctx,
                                 fhr_error *err)
{
    if (!vm || !name || !name[0] || !fn)
        return fhr_fail(err, FHR_E_INVALID, "loader_register: NULL vm, name or function");
    if (vm->ran)
        return fhr_fail(err, FHR_E_STATE, "loader_register: the VM has already run");
    for (size_t i = 0; i < vm->nloaders; i++)
        if (strcmp(vm->loaders[i].name, name) == 0) {
            vm->loaders[i].fn = fn;
            vm->loaders[i].ctx = ctx;
            return FHR_OK;
        }
    if (vm->nloaders == vm->caploaders) {
        size_t nc = vm->caploaders ? 2 * vm->caploaders : 8;
        struct vm_loader *nl = realloc(vm->loaders, nc * sizeof *nl);
        if (!nl)
            return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        vm->loaders = nl;
        vm->caploaders = nc;
    }
    char *copy = strdup(name);
    if (!copy)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    vm->loaders[vm->nloaders++] = (struct vm_loader){copy, fn, ctx};
    return FHR_OK;
}

/* The synthetic seed a rehearsal (no loader, rplan_vm_opts.unknown_as_touch) fills an
 * engine value with: FNV-1a of the loader's name, mixed with its argument. */
static uint64_t rehearsal_seed(const rplan_value_info *vi)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *c = vi->loader; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
    return h ^ (vi->loader_arg * 0x9E3779B97F4A7C15ULL);
}

static fhr_status no_loader(const rplan_value_info *vi, fhr_error *err)
{
    return fhr_fail(err, FHR_E_SOURCE, "no loader '%.60s' is registered (an engine registers "
                    "it with rplan_loader_register before the run)", vi->loader);
}

fhr_status vm_engine_load(rplan_vm *vm, size_t i, fhr_value *v, fhr_stream *s, fhr_error *err)
{
    const rplan_value_info *vi = &vm->vinfo[i];
    if (vm->explain)
        return FHR_OK;
    fhr_location at = fhr_value_location(v);
    const struct vm_loader *ld = find_loader(vm, vi->loader);
    if (!ld) {
        if (!vm->o.unknown_as_touch)
            return no_loader(vi, err);
        rplan_value_info fake = *vi; /* rehearsal: synthetic content, as `synth` makes */
        fake.data = RPLAN_DATA_SYNTH;
        fake.seed = rehearsal_seed(vi);
        void *p;
        size_t n;
        if (fhr_value_field_at(v, 0, &p, &n) != FHR_OK)
            return fhr_fail(err, FHR_E_STATE, "the copy has no fields");
        return vm_fill(vm, p, at, (size_t)vi->nbytes, &fake, NULL, s, err);
    }
    size_t nf = vm_value_nfields(vm, i);
    const char *names[RP_VM_MAX_FIELDS];
    void *ptrs[RP_VM_MAX_FIELDS];
    uint64_t sizes[RP_VM_MAX_FIELDS];
    for (size_t f = 0; f < nf; f++) {
        size_t n;
        if (fhr_value_field_at(v, f, &ptrs[f], &n) != FHR_OK)
            return fhr_fail(err, FHR_E_STATE, "the copy lacks field %zu", f);
        names[f] = vm->flds[vm->fld0[i] + f].name;
        sizes[f] = n;
    }
    rplan_load L = {vm, vi->loader, vi->loader_arg, i, vi, at, s,
                    vm->is_cuda && at.kind == FHR_LOC_CUDA, nf, names, ptrs, sizes,
                    vi->nbytes, NULL};
    fhr_error le;
    fhr_error_init(&le);
    fhr_status st = ld->fn(ld->ctx, &L, &le);
    if (st != FHR_OK)
        fhr_fail(err, st, "loader '%.60s' (argument %llu) failed: %.400s", vi->loader,
                 (unsigned long long)vi->loader_arg, le.message[0] ? le.message : fhr_status_name(st));
    fhr_error_clear(&le);
    return st;
}

/* Before anything is set up: every engine value's declared size against the bytes its
 * loader says the engine has (a probe: fields NULL), and every adopted value against its
 * declaration. *bad receives the value that failed. */
static fhr_status check_one(rplan_vm *vm, size_t i, fhr_error *err)
{
    {
        const rplan_value_info *vi = &vm->vinfo[i];
        if (vm->adopted && vm->adopted[i]) {
            fhr_value *v = vm->adopted[i];
            if (!vi->has_initial || !fhr_loc_equal(fhr_value_location(v), vi->initial)) {
                char a[16], b[16];
                return fhr_fail(err, FHR_E_INVALID, "the adopted copy is at %s, the plan "
                                "declares it at %s", fhr_loc_format(fhr_value_location(v), a, sizeof a),
                                vi->has_initial ? fhr_loc_format(vi->initial, b, sizeof b) : "none");
            }
            if (fhr_value_storage_nbytes(v) != vi->nbytes)
                return fhr_fail(err, FHR_E_INVALID, "declared %llu bytes, the engine's value "
                                "has %llu", (unsigned long long)vi->nbytes,
                                (unsigned long long)fhr_value_storage_nbytes(v));
            size_t nf = vm_value_nfields(vm, i);
            if (vi->nfields && fhr_value_nfields(v) != nf)
                return fhr_fail(err, FHR_E_INVALID, "declared %zu fields, the engine's value "
                                "has %zu", nf, fhr_value_nfields(v));
            for (size_t f = 0; vi->nfields && f < nf; f++) {
                const vm_field *x = &vm->flds[vm->fld0[i] + f];
                void *p;
                size_t n;
                if (fhr_value_field(v, x->name, &p, &n) != FHR_OK || n != x->nbytes)
                    return fhr_fail(err, FHR_E_INVALID, "field '%.40s': declared %llu bytes, "
                                    "the engine's value %s", x->name, (unsigned long long)x->nbytes,
                                    fhr_value_field(v, x->name, &p, &n) ? "has no such field"
                                                                        : "holds another size");
            }
            return FHR_OK;
        }
        if (vi->data != RPLAN_DATA_ENGINE || vm->explain)
            return FHR_OK;
        const struct vm_loader *ld = find_loader(vm, vi->loader);
        if (!ld) {
            if (vm->o.unknown_as_touch)
                return FHR_OK;
            return no_loader(vi, err);
        }
        if (vm->o.scale > 1)
            return fhr_fail(err, FHR_E_INVALID, "the engine supplies it at full size: run at "
                            "scale 1");
        uint64_t have = 0;
        size_t nf = vm_value_nfields(vm, i);
        const char *names[RP_VM_MAX_FIELDS];
        uint64_t sizes[RP_VM_MAX_FIELDS];
        for (size_t f = 0; f < nf; f++) {
            names[f] = vm->flds[vm->fld0[i] + f].name;
            sizes[f] = vm->flds[vm->fld0[i] + f].nbytes;
        }
        rplan_load L = {vm, vi->loader, vi->loader_arg, i, vi, fhr_loc_host(), NULL, 0, nf,
                        names, NULL, sizes, vi->nbytes, &have};
        fhr_error le;
        fhr_error_init(&le);
        fhr_status st = ld->fn(ld->ctx, &L, &le);
        if (st != FHR_OK) {
            fhr_fail(err, st, "loader '%.60s' (argument %llu) cannot say its size: %.400s",
                     vi->loader, (unsigned long long)vi->loader_arg, le.message);
            fhr_error_clear(&le);
            return st;
        }
        fhr_error_clear(&le);
        if (have != vi->nbytes)
            return fhr_fail(err, FHR_E_INVALID, "declared %llu bytes, the engine's loader '%.60s' "
                            "supplies %llu (argument %llu)", (unsigned long long)vi->nbytes,
                            vi->loader, (unsigned long long)have,
                            (unsigned long long)vi->loader_arg);
    }
    return FHR_OK;
}

fhr_status vm_engine_check(rplan_vm *vm, long *bad, fhr_error *err)
{
    *bad = -1;
    for (size_t i = 0; i < vm->nvals; i++) {
        fhr_status st = check_one(vm, i, err);
        if (st != FHR_OK) {
            *bad = (long)i;
            if (err) {
                char msg[sizeof err->message];
                snprintf(msg, sizeof msg, "value '%.60s': %.400s", vm->vinfo[i].name,
                         err->message);
                memcpy(err->message, msg, sizeof msg);
            }
            return st;
        }
    }
    return FHR_OK;
}

fhr_status rplan_vm_adopt(rplan_vm *vm, size_t i, fhr_value **value, fhr_error *err)
{
    if (!vm || !value || !*value)
        return fhr_fail(err, FHR_E_INVALID, "vm_adopt: NULL vm or value");
    if (vm->ran)
        return fhr_fail(err, FHR_E_STATE, "vm_adopt: the VM has already run");
    if (i >= vm->nvals)
        return fhr_fail(err, FHR_E_INVALID, "vm_adopt: the program has %zu values, not %zu",
                        vm->nvals, i + 1);
    const rplan_value_info *vi = &vm->vinfo[i];
    if (vi->recoverability != FHR_MUST_PRESERVE)
        return fhr_fail(err, FHR_E_INVALID, "vm_adopt: value '%.60s' is a source (line %u): "
                        "the VM loads it; register its loader instead", vi->name, vi->line);
    if (vi->seeded)
        return fhr_fail(err, FHR_E_INVALID, "vm_adopt: value '%.60s' is seeded (line %u): the "
                        "VM lays out its halves itself", vi->name, vi->line);
    if (!vm->adopted && !(vm->adopted = calloc(vm->nvals + 1, sizeof *vm->adopted)))
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    fhr_value_destroy(vm->adopted[i]); /* a second adopt replaces the first */
    vm->adopted[i] = *value;
    *value = NULL;
    return FHR_OK;
}

long rplan_vm_value_index(const rplan_vm *vm, const char *name)
{
    for (size_t i = 0; vm && name && i < vm->nvals; i++)
        if (strcmp(vm->vinfo[i].name, name) == 0)
            return (long)i;
    return -1;
}

fhr_value *vm_take_adopted(rplan_vm *vm, size_t i)
{
    if (!vm->adopted || !vm->adopted[i])
        return NULL;
    fhr_value *v = vm->adopted[i];
    vm->adopted[i] = NULL;
    return v;
}

/* ---- the engine's stream ------------------------------------------------------------- */

fhr_status rplan_vm_body_stream(rplan_vm *vm, fhr_location loc, fhr_stream *s, fhr_error *err)
{
    if (!vm || !s)
        return fhr_fail(err, FHR_E_INVALID, "vm_body_stream: NULL vm or stream");
    if (vm->ran)
        return fhr_fail(err, FHR_E_STATE, "vm_body_stream: the VM has already run");
    int slot = fhr_loc_slot(loc);
    if (slot < 0 || loc.kind != FHR_LOC_CUDA)
        return fhr_fail(err, FHR_E_LOCATION, "vm_body_stream: bodies take a stream at a CUDA "
                        "location");
    int dev = -1;
    void *native;
    fhr_status st = fhr_stream_native(vm->b, s, &native, &dev, err);
    if (st)
        return st;
    if (dev != loc.index)
        return fhr_fail(err, FHR_E_LOCATION, "vm_body_stream: the stream runs on cuda:%d, not "
                        "cuda:%d", dev, loc.index);
    if (vm->compute[slot] && !vm->engine_stream[slot])
        vm->b->ops->stream_destroy(vm->b, vm->compute[slot]);
    vm->compute[slot] = s;
    vm->engine_stream[slot] = 1;
    return FHR_OK;
}

/* ---- kernel costs -------------------------------------------------------------------- */

/* The model's time for one call of an engine kernel: the profile's mean, else the plan's
 * declaration; -1 when neither knows it. */
double vm_kernel_cost(const rplan_vm *vm, const char *name, double device_gbps)
{
    for (size_t i = 0; i < vm->o.nprofile; i++)
        if (vm->o.profile[i].name && strcmp(vm->o.profile[i].name, name) == 0)
            return vm->o.profile[i].mean_s;
    size_t n = rplan_nkernels(vm->p);
    for (size_t i = 0; i < n; i++) {
        rplan_kernel_info k;
        if (rplan_kernel_cost(vm->p, i, &k) != FHR_OK || strcmp(k.name, name) != 0)
            continue;
        if (k.kind == RPLAN_COST_DURATION)
            return (double)k.imm / 1e9;
        return (double)vm_scale_up8(k.imm, vm->o.scale) / (device_gbps * 1e9);
    }
    return -1;
}

void vm_engine_free(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->nloaders; i++)
        free(vm->loaders[i].name);
    free(vm->loaders);
    for (size_t i = 0; vm->adopted && i < vm->nvals; i++)
        fhr_value_destroy(vm->adopted[i]);
    free(vm->adopted);
    free(vm->fld0);
    free(vm->flds);
}

/* ---- kernel profiles ----------------------------------------------------------------- */

/* The report's kernels: body markers timed on the device, grouped by kernel name (a body
 * marker is named "KERNEL @ LOC"). Allocation failure leaves the list short. */
void vm_profile_build(rplan_vm *vm, rplan_vm_report *rep)
{
    double *sum = NULL;
    for (size_t i = 0; i < vm->nmarks; i++) {
        const vm_mark *mk = vm->marks[i];
        if (mk->kind != 0 || !mk->t1 || mk->t1 < mk->t0)
            continue;
        const char *at = strstr(mk->name, " @ ");
        size_t len = at ? (size_t)(at - mk->name) : strlen(mk->name), k = 0;
        while (k < rep->nkernels &&
               (strlen(rep->kernels[k].name) != len || strncmp(rep->kernels[k].name, mk->name, len)))
            k++;
        if (k == rep->nkernels) {
            rplan_kernel_profile *nk = realloc(rep->kernels, (k + 1) * sizeof *nk);
            double *ns = nk ? realloc(sum, (k + 1) * sizeof *ns) : NULL;
            if (nk)
                rep->kernels = nk;
            if (!ns)
                break;
            sum = ns;
            char *name = strndup(mk->name, len);
            if (!name)
                break;
            rep->kernels[k] = (rplan_kernel_profile){name, 0, 0};
            sum[k] = 0;
            rep->nkernels++;
        }
        rep->kernels[k].calls++;
        sum[k] += (double)(mk->t1 - mk->t0) / 1e9;
    }
    for (size_t k = 0; k < rep->nkernels; k++)
        rep->kernels[k].mean_s = sum[k] / (double)rep->kernels[k].calls;
    free(sum);
}

char *rplan_profile_json(const rplan_vm_report *r)
{
    cJSON *o = cJSON_CreateObject(), *a = NULL;
    if (!o || !cJSON_AddNumberToObject(o, "fheplan_profile", 1) ||
        !(a = cJSON_AddArrayToObject(o, "kernels"))) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t k = 0; r && k < r->nkernels; k++) {
        cJSON *x = cJSON_CreateObject();
        if (!x || !cJSON_AddItemToArray(a, x) ||
            !cJSON_AddStringToObject(x, "name", r->kernels[k].name) ||
            !cJSON_AddNumberToObject(x, "calls", (double)r->kernels[k].calls) ||
            !cJSON_AddNumberToObject(x, "mean_s", r->kernels[k].mean_s)) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    return txt;
}

void rplan_profile_free(rplan_kernel_profile *p, size_t n)
{
    for (size_t k = 0; p && k < n; k++)
        free((char *)p[k].name);
    free(p);
}

fhr_status rplan_profile_parse(const char *text, size_t len, rplan_kernel_profile **out,
                               size_t *n, fhr_error *err)
{
    if (!text || !out || !n)
        return fhr_fail(err, FHR_E_INVALID, "profile: NULL text or output");
    *out = NULL;
    *n = 0;
    cJSON *o = cJSON_ParseWithLength(text, len);
    cJSON *ver = o ? cJSON_GetObjectItemCaseSensitive(o, "fheplan_profile") : NULL;
    cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "kernels") : NULL;
    if (!o || !cJSON_IsNumber(ver) || ver->valuedouble != 1 || !cJSON_IsArray(a)) {
        cJSON_Delete(o);
        return fhr_fail(err, FHR_E_INVALID, "profile: not a kernel profile (want {\"fheplan_profile\""
                        ": 1, \"kernels\": [...]}, as run --profile-out writes)");
    }
    size_t cnt = (size_t)cJSON_GetArraySize(a), k = 0;
    rplan_kernel_profile *p = calloc(cnt + 1, sizeof *p);
    if (!p) {
        cJSON_Delete(o);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    fhr_status st = FHR_OK;
    for (cJSON *x = a->child; x && st == FHR_OK; x = x->next, k++) {
        cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name");
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(x, "calls");
        cJSON *mean = cJSON_GetObjectItemCaseSensitive(x, "mean_s");
        if (!cJSON_IsString(nm) || !nm->valuestring[0] || !cJSON_IsNumber(mean) ||
            !isfinite(mean->valuedouble) || mean->valuedouble < 0 || mean->valuedouble > 3600 ||
            (calls && (!cJSON_IsNumber(calls) || calls->valuedouble < 0))) {
            st = fhr_fail(err, FHR_E_INVALID, "profile: kernel %zu: want a name and a mean_s "
                          "from 0 to 3600 seconds", k);
            break;
        }
        for (size_t j = 0; j < k; j++)
            if (strcmp(p[j].name, nm->valuestring) == 0)
                st = fhr_fail(err, FHR_E_INVALID, "profile: kernel '%.60s' is given twice",
                              nm->valuestring);
        if (st == FHR_OK && !(p[k].name = strdup(nm->valuestring)))
            st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        p[k].calls = calls ? (uint64_t)calls->valuedouble : 0;
        p[k].mean_s = mean->valuedouble;
    }
    cJSON_Delete(o);
    if (st != FHR_OK) {
        rplan_profile_free(p, cnt);
        return st;
    }
    *out = p;
    *n = cnt;
    return FHR_OK;
}
