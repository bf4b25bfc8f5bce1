/* runtime/vm.c — the VM: sets up a manager for a verified program (budgets, adopted
 * values, reconstructible sources with a backing store), walks the instructions
 * (stages, top-level primitives, holds, plans as scopes with bodies; requests are in
 * vm_request.c), and keeps the per-stage report and the timeline. The same code runs
 * for `fheplan check` over the model backend (explain mode: bodies skipped, nothing
 * filled) and for `fheplan run`. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t vm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The statement class of every opcode, from compiler/opcodes.def. */
static const enum vm_opclass op_class[RPLAN_OP_COUNT_] = {
#define OP(id, text, x, y, a, b, ctx, rule) [RPLAN_OP_##id] = VM_CLASS_##ctx,
#include "runtime/program/opcodes.def"
#undef OP
};

static uint64_t scale_up8(uint64_t x, uint64_t scale)
{
    if (scale > 1)
        x = (x + scale - 1) / scale;
    if (x == 0)
        x = 8;
    return (x + 7) / 8 * 8;
}

/* ---- streams ------------------------------------------------------------------------ */

fhr_stream *vm_compute_stream(rplan_vm *vm, fhr_location loc, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (slot < 0) {
        fhr_fail(err, FHR_E_LOCATION, "invalid location");
        return NULL;
    }
    if (!vm->compute[slot] &&
        vm->b->ops->stream_create(vm->b, loc, &vm->compute[slot], err) != FHR_OK)
        return NULL;
    return vm->compute[slot];
}

fhr_stream *vm_xfer_stream(rplan_vm *vm, fhr_location loc, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    if (slot < 0) {
        fhr_fail(err, FHR_E_LOCATION, "invalid location");
        return NULL;
    }
    if (!vm->xfer[slot] && vm->b->ops->stream_create(vm->b, loc, &vm->xfer[slot], err) != FHR_OK)
        return NULL;
    return vm->xfer[slot];
}

fhr_status vm_sync_all(rplan_vm *vm, fhr_error *err)
{
    fhr_status st;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (vm->xfer[i] && (st = vm->b->ops->stream_sync(vm->b, vm->xfer[i], err)) != FHR_OK)
            return st;
        if (vm->compute[i] &&
            (st = vm->b->ops->stream_sync(vm->b, vm->compute[i], err)) != FHR_OK)
            return st;
    }
    if (vm->m)
        fhr_reap(vm->m);
    return FHR_OK;
}

/* ---- timeline ----------------------------------------------------------------------- */

fhr_status vm_add_slice(rplan_vm *vm, uint64_t t0, uint64_t t1, uint64_t tid, const char *cat,
                        const char *name)
{
    if (!vm->o.trace)
        return FHR_OK;
    if (vm->nslices == vm->capslices) {
        size_t cap = vm->capslices ? vm->capslices * 2 : 64;
        vm_slice *n = realloc(vm->slices, cap * sizeof *n);
        if (!n)
            return FHR_E_NOMEM;
        vm->slices = n;
        vm->capslices = cap;
    }
    vm_slice *s = &vm->slices[vm->nslices++];
    s->t0 = t0;
    s->t1 = t1 > t0 ? t1 : t0;
    s->tid = tid;
    s->cat = cat;
    snprintf(s->name, sizeof s->name, "%s", name);
    return FHR_OK;
}

vm_mark *vm_new_mark(rplan_vm *vm, int kind, uint64_t tid, const char *name)
{
    if (vm->nmarks == vm->capmarks) {
        size_t cap = vm->capmarks ? vm->capmarks * 2 : 64;
        vm_mark **n = realloc(vm->marks, cap * sizeof *n);
        if (!n)
            return NULL;
        vm->marks = n;
        vm->capmarks = cap;
    }
    vm_mark *mk = calloc(1, sizeof *mk);
    if (!mk)
        return NULL;
    mk->kind = kind;
    mk->tid = tid;
    snprintf(mk->name, sizeof mk->name, "%s", name);
    mk->nstages = vm->depth;
    for (size_t i = 0; i < vm->depth; i++)
        mk->stages[i] = vm->stack[i];
    vm->marks[vm->nmarks++] = mk;
    return mk;
}

void vm_mark_begin(void *arg) { ((vm_mark *)arg)->t0 = vm_now_ns(); }
void vm_mark_end(void *arg) { ((vm_mark *)arg)->t1 = vm_now_ns(); }

/* ---- accounting --------------------------------------------------------------------- */

#define FOR_OPEN_RECORDS(vm, r)                                                              \
    for (size_t k_ = 0; k_ <= (vm)->depth; k_++)                                             \
        for (rplan_stage_report *r = k_ < (vm)->depth ? &(vm)->stages[(vm)->stack[k_]]       \
                                                      : &(vm)->total;                        \
             r; r = NULL)

void vm_account_report(rplan_vm *vm, const fhr_report *rep, int is_request)
{
    (void)is_request;
    if (!rep)
        return;
    size_t n = fhr_report_ntransitions(rep);
    for (size_t i = 0; i < n; i++) {
        const fhr_transition *t = fhr_report_transition(rep, i);
        int ours = 0;
        for (int s = 0; s < FHR_LOC_SLOTS && !ours; s++)
            ours = vm->xfer[s] && vm->b->ops->stream_id(vm->b, vm->xfer[s]) == t->stream_id;
        FOR_OPEN_RECORDS(vm, r)
        {
            if (t->loaded) {
                r->load_bytes += t->nbytes;
                r->loads++;
                if (t->to.kind == FHR_LOC_CUDA)
                    r->load_h2d_bytes += t->nbytes;
            } else if (t->has_from && t->nbytes) {
                fhr_direction d = fhr_direction_of(t->from, t->to);
                r->bytes[d] += t->nbytes;
                r->copies[d]++;
            }
            if (t->phase == FHR_PHASE_RECLAIM)
                r->evictions++;
        }
        vm->bytes_moved += t->nbytes;
        if (t->nbytes && !ours) {
            char a[16], b[16], nm[112];
            if (t->loaded)
                snprintf(nm, sizeof nm, "load #%llu -> %s", (unsigned long long)t->handle.serial,
                         fhr_loc_format(t->to, b, sizeof b));
            else
                snprintf(nm, sizeof nm, "%s #%llu %s -> %s", fhr_action_kind_name(t->kind),
                         (unsigned long long)t->handle.serial,
                         fhr_loc_format(t->from, a, sizeof a), fhr_loc_format(t->to, b, sizeof b));
            vm_add_slice(vm, t->t_start_ns, t->t_end_ns, t->stream_id, "transfer", nm);
        }
    }
}

static void peak_update(rplan_stage_report *r, fhr_location loc, uint64_t v, int has_budget,
                        uint64_t budget)
{
    for (size_t i = 0; i < r->npeaks; i++)
        if (fhr_loc_equal(r->peaks[i].loc, loc)) {
            if (v > r->peaks[i].peak_bytes)
                r->peaks[i].peak_bytes = v;
            r->peaks[i].has_budget = has_budget;
            r->peaks[i].budget_bytes = budget;
            return;
        }
    if (r->npeaks == RPLAN_MAX_PEAKS)
        return;
    rplan_loc_peak *p = &r->peaks[r->npeaks++];
    p->loc = loc;
    p->peak_bytes = v;
    p->has_budget = has_budget;
    p->budget_bytes = budget;
}

void vm_sample_peaks(rplan_vm *vm)
{
    fhr_snapshot *s = NULL;
    if (fhr_snapshot_take_placement(vm->m, &s, NULL) != FHR_OK)
        return;
    for (size_t i = 0; i < s->nlocs; i++) {
        const fhr_loc_stats *l = &s->locs[i];
        uint64_t v = l->used_bytes + l->reserved_bytes;
        if (!v && !l->has_budget)
            continue;
        FOR_OPEN_RECORDS(vm, r)
        peak_update(r, l->loc, v, l->has_budget, l->budget_bytes);
    }
    fhr_snapshot_free(s);
}

/* Reads the verify mismatch counters (streams must be synchronised). */
static uint64_t read_failures(rplan_vm *vm)
{
    uint64_t total = 0;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (!vm->counter[i])
            continue;
        uint64_t w[2] = {0, 0};
        fhr_location loc = fhr_loc_from_slot(i);
        if (loc.kind != FHR_LOC_CUDA || !vm->is_cuda) {
            memcpy(w, vm->counter[i], sizeof w);
        } else if (vm->b->ops->copy(vm->b, w, fhr_loc_host(), vm->counter[i], loc, sizeof w,
                                    vm->compute[i], NULL) == FHR_OK) {
            vm->b->ops->stream_sync(vm->b, vm->compute[i], NULL);
        }
        total += w[0];
    }
    return total;
}

/* A pinned slot of 4 words: [0..1] the counter snapshot, [2] the counter's address. */
static uint64_t *tally_slot(rplan_vm *vm)
{
    if (!vm->ntally_blocks || vm->tally_used == VM_TALLY_BLOCK) {
        void *blk = NULL;
        if (vm->b->ops->alloc(vm->b, fhr_loc_pinned(), VM_TALLY_BLOCK * 32, NULL, &blk, NULL))
            return NULL;
        uint64_t **n = realloc(vm->tally_blocks, (vm->ntally_blocks + 1) * sizeof *n);
        if (!n) {
            vm->b->ops->free(vm->b, fhr_loc_pinned(), blk, VM_TALLY_BLOCK * 32, NULL);
            return NULL;
        }
        memset(blk, 0, VM_TALLY_BLOCK * 32);
        vm->tally_blocks = n;
        vm->tally_blocks[vm->ntally_blocks++] = blk;
        vm->tally_used = 0;
    }
    return vm->tally_blocks[vm->ntally_blocks - 1] + 4 * vm->tally_used++;
}

static void tally_copy(void *arg)
{
    uint64_t *t = arg;
    const uint64_t *src = (const uint64_t *)(uintptr_t)t[2];
    t[0] = src[0];
    t[1] = src[1];
}

/* Snapshots every verify counter into a tally of stage record `stage`, in the order of
 * its compute stream (no host wait); sign +1 at the stage's close, -1 at its opening. */
static void tally_counters(rplan_vm *vm, int stage, int sign)
{
    if (vm->explain)
        return;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (!vm->counter[i] || !vm->compute[i])
            continue;
        uint64_t *slot = tally_slot(vm);
        if (!slot || !fhr_grow((void **)&vm->tallies, &vm->captallies, vm->ntallies,
                               sizeof *vm->tallies, 16))
            continue; /* out of memory: this stage's failures stay uncounted */
        fhr_location loc = fhr_loc_from_slot(i);
        slot[2] = (uint64_t)(uintptr_t)vm->counter[i];
        fhr_status st;
        if (loc.kind == FHR_LOC_CUDA && vm->is_cuda)
            st = vm->b->ops->copy(vm->b, slot, fhr_loc_pinned(), vm->counter[i], loc, 16,
                                  vm->compute[i], NULL);
        else
            st = vm->b->ops->launch_host(vm->b, vm->compute[i], tally_copy, slot, NULL);
        if (st == FHR_OK)
            vm->tallies[vm->ntallies++] = (struct vm_tally){stage, sign, slot};
    }
}

static fhr_status stage_open(rplan_vm *vm, const char *name, int top)
{
    if (vm->depth >= VM_MAX_STAGE_DEPTH)
        return FHR_E_INVALID;
    if (vm->nstages == vm->capstages) {
        size_t cap = vm->capstages ? vm->capstages * 2 : 8;
        rplan_stage_report *n = realloc(vm->stages, cap * sizeof *n);
        if (!n)
            return FHR_E_NOMEM;
        vm->stages = n;
        uint64_t *a = realloc(vm->stage_t0, cap * sizeof *a);
        if (!a)
            return FHR_E_NOMEM;
        vm->stage_t0 = a;
        uint64_t *b = realloc(vm->stage_t1, cap * sizeof *b);
        if (!b)
            return FHR_E_NOMEM;
        vm->stage_t1 = b;
        vm->capstages = cap;
    }
    rplan_stage_report *r = &vm->stages[vm->nstages];
    memset(r, 0, sizeof *r);
    if (top || vm->depth == 0)
        snprintf(r->name, sizeof r->name, "%s", name);
    else
    {
        const char *parent = vm->stages[vm->stack[vm->depth - 1]].name;
        size_t pl = strlen(parent);
        if (pl > sizeof r->name - 2)
            pl = sizeof r->name - 2;
        memcpy(r->name, parent, pl);
        r->name[pl] = '/';
        size_t nl = strlen(name);
        if (nl > sizeof r->name - pl - 2)
            nl = sizeof r->name - pl - 2;
        memcpy(r->name + pl + 1, name, nl);
        r->name[pl + 1 + nl] = 0;
    }
    /* No synchronisation: work of the previous stage may still run while this one's
     * transfers start; a stage's time runs from here to its last marker. */
    int rec = (int)vm->nstages++;
    vm->stack[vm->depth] = rec;
    vm->stack_t0[vm->depth] = vm_now_ns();
    vm->stage_t0[rec] = vm->stage_t1[rec] = vm->stack_t0[vm->depth];
    vm->stack_checks0[vm->depth] = vm->checks_total;
    tally_counters(vm, rec, -1);
    vm->depth++;
    vm->top_open = top;
    vm_sample_peaks(vm);
    return FHR_OK;
}

static void stage_close(rplan_vm *vm)
{
    if (!vm->depth)
        return;
    vm_sample_peaks(vm);
    vm->depth--;
    int rec = vm->stack[vm->depth];
    rplan_stage_report *r = &vm->stages[rec];
    uint64_t t1 = vm_now_ns();
    if (t1 > vm->stage_t1[rec])
        vm->stage_t1[rec] = t1;
    r->checks = vm->checks_total - vm->stack_checks0[vm->depth];
    tally_counters(vm, rec, +1);
    vm->top_open = 0;
}

/* After the final synchronisation: stage times from the markers of their work, and
 * verify failures from the tallies. */
static void stage_resolve(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->nmarks; i++) {
        const vm_mark *mk = vm->marks[i];
        for (size_t k = 0; k < mk->nstages; k++) {
            int rec = mk->stages[k];
            if ((size_t)rec < vm->nstages && mk->t1 > vm->stage_t1[rec])
                vm->stage_t1[rec] = mk->t1;
        }
    }
    for (size_t i = 0; i < vm->ntallies; i++) {
        const struct vm_tally *t = &vm->tallies[i];
        if ((size_t)t->stage < vm->nstages)
            vm->stages[t->stage].check_failures += (uint64_t)((int64_t)t->sign * (int64_t)t->slot[0]);
    }
    for (size_t rec = 0; rec < vm->nstages; rec++) {
        rplan_stage_report *r = &vm->stages[rec];
        r->time_s = (double)(vm->stage_t1[rec] - vm->stage_t0[rec]) / 1e9;
        vm_add_slice(vm, vm->stage_t0[rec], vm->stage_t1[rec], 0, "stage", r->name);
    }
}

/* Work outside any stage is reported under "(top level)". */
static fhr_status ensure_record(rplan_vm *vm)
{
    return vm->depth ? FHR_OK : stage_open(vm, "(top level)", 1);
}

/* ---- values ------------------------------------------------------------------------ */

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

/* Adopts every MUST_PRESERVE value and registers every source. */
/* Prefixes a failure while value vi is set up with its name. */
static fhr_status name_value(fhr_status st, const rplan_value_info *vi, fhr_error *err)
{
    if (err) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "value '%.60s': %.400s", vi->name, err->message);
        memcpy(err->message, msg, sizeof msg);
    }
    return st;
}

static fhr_status setup_values(rplan_vm *vm, fhr_error *err)
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
                return name_value(st, vi, err);
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
                fhr_stream *s = at.kind == FHR_LOC_CUDA ? vm_compute_stream(vm, at, err) : NULL;
                if (at.kind == FHR_LOC_CUDA && !s)
                    st = err ? err->status : FHR_E_BACKEND;
                else
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
                    return name_value(st, vi, err);
                }
                fhr_stream *s = vm->backing_loc.kind == FHR_LOC_CUDA
                                    ? vm_compute_stream(vm, vm->backing_loc, err)
                                    : NULL;
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
            name_value(st, vi, err);
    }
    return st;
}

/* Pinned host -> device bandwidth in GB/s: configured, FHEPLAN_PINNED_GBPS, or one
 * measured copy (256 MiB on CUDA, 32 MiB on the emulated device). */
static double pinned_bandwidth(rplan_vm *vm)
{
    if (vm->o.pinned_gbps > 0)
        return vm->o.pinned_gbps;
    const char *env = getenv("FHEPLAN_PINNED_GBPS");
    if (env && atof(env) > 0)
        return atof(env);
    if (vm->explain)
        return 55.5; /* pinned -> cuda, medians measured on an H200 (bench/README.md) */
    if (vm->b->ops->device_count(vm->b) < 1)
        return 0;
    size_t n = vm->is_cuda ? (size_t)256 << 20 : (size_t)32 << 20;
    fhr_location dev = fhr_loc_cuda(0), pin = fhr_loc_pinned();
    fhr_stream *s = vm_xfer_stream(vm, dev, NULL);
    void *src = NULL, *dst = NULL;
    double gbps = 0;
    if (s && vm->b->ops->alloc(vm->b, pin, n, NULL, &src, NULL) == FHR_OK &&
        vm->b->ops->alloc(vm->b, dev, n, s, &dst, NULL) == FHR_OK) {
        memset(src, 1, n);
        vm->b->ops->copy(vm->b, dst, dev, src, pin, n, s, NULL); /* warm up */
        vm->b->ops->stream_sync(vm->b, s, NULL);
        uint64_t t0 = vm_now_ns();
        int ok = 1;
        for (int k = 0; k < 3; k++)
            ok &= vm->b->ops->copy(vm->b, dst, dev, src, pin, n, s, NULL) == FHR_OK;
        vm->b->ops->stream_sync(vm->b, s, NULL);
        uint64_t dt = vm_now_ns() - t0;
        if (ok && dt)
            gbps = 3.0 * (double)n / (double)dt;
    }
    if (dst)
        vm->b->ops->free(vm->b, dev, dst, n, s);
    if (src)
        vm->b->ops->free(vm->b, pin, src, n, s);
    if (s)
        vm->b->ops->stream_sync(vm->b, s, NULL);
    return gbps;
}

/* ---- create / destroy -------------------------------------------------------------- */

fhr_status rplan_vm_create(const rplan_program *p, fhr_backend *backend, const rplan_vm_opts *opts,
                           rplan_vm **out, fhr_error *err)
{
    if (!p || !backend || !out)
        return fhr_fail(err, FHR_E_INVALID, "vm: NULL program, backend or out pointer");
    rplan_vm *vm = calloc(1, sizeof *vm);
    if (!vm)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    if (opts)
        vm->o = *opts;
    if (vm->o.scale == 0)
        vm->o.scale = 1;
    vm->p = p;
    vm->b = backend;
    vm->explain = vm->o.mode == RPLAN_VM_EXPLAIN;
    vm->is_cuda = strcmp(backend->ops->name, "cuda") == 0;
    snprintf(vm->device, sizeof vm->device, "%s", backend->ops->name);
    vm->backing_loc = fhr_loc_pinned();
    fhr_status st = FHR_OK;
    vm->nvals = rplan_nvalues(p);
    vm->ninstr = rplan_ninstrs(p);
    vm->vinfo = calloc(vm->nvals + 1, sizeof *vm->vinfo);
    vm->h = calloc(vm->nvals + 1, sizeof *vm->h);
    vm->srcs = calloc(vm->nvals + 1, sizeof *vm->srcs);
    vm->backing = calloc(vm->nvals + 1, sizeof *vm->backing);
    vm->ins = calloc(vm->ninstr + 1, sizeof *vm->ins);
    if (!vm->vinfo || !vm->h || !vm->srcs || !vm->backing || !vm->ins) {
        rplan_vm_destroy(vm);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    for (size_t i = 0; i < vm->nvals && st == FHR_OK; i++) {
        st = rplan_value(p, i, &vm->vinfo[i]);
        uint64_t n = scale_up8(vm->vinfo[i].nbytes, vm->o.scale);
        vm->vinfo[i].nbytes = n;
        if (n > vm->scratch_nbytes)
            vm->scratch_nbytes = (size_t)n;
    }
    for (size_t i = 0; i < vm->ninstr && st == FHR_OK; i++) {
        st = rplan_instr_get(p, i, &vm->ins[i]);
        if (vm->ins[i].op == RPLAN_OP_RESERVE)
            vm->ins[i].imm = scale_up8(vm->ins[i].imm, vm->o.scale);
        else if (vm->ins[i].op == RPLAN_OP_ARGSIZE)
            vm->ins[i].imm = scale_up8(vm->ins[i].imm, vm->o.scale);
        if (vm->ins[i].op == RPLAN_OP_PLAN || vm->ins[i].op == RPLAN_OP_REQUEST)
            vm->scopes_total++;
    }
    if (st) {
        rplan_vm_destroy(vm);
        return fhr_fail(err, st, "vm: cannot read the program");
    }
    /* budgets: the program's, then overrides; all divided by the scale */
    size_t nb = rplan_nbudgets(p);
    fhr_budget bud[FHR_LOC_SLOTS];
    size_t nbud = 0;
    for (size_t i = 0; i < nb && nbud < FHR_LOC_SLOTS; i++)
        if (rplan_budget(p, i, &bud[nbud]) == FHR_OK)
            nbud++;
    for (size_t i = 0; i < vm->o.nbudget_override; i++) {
        size_t k = 0;
        while (k < nbud && !fhr_loc_equal(bud[k].loc, vm->o.budget_override[i].loc))
            k++;
        if (k == nbud && nbud < FHR_LOC_SLOTS)
            nbud++;
        if (k < nbud)
            bud[k] = vm->o.budget_override[i];
    }
    if (vm->o.scale > 1)
        for (size_t i = 0; i < nbud; i++)
            bud[i].nbytes = (bud[i].nbytes + vm->o.scale - 1) / vm->o.scale +
                            8 * (uint64_t)(vm->nvals + 64);
    fhr_manager_config cfg = {backend, bud, nbud, vm->o.trace ? 4096 : 0};
    if ((st = fhr_manager_create(&cfg, &vm->m, err)) != FHR_OK ||
        (st = vm_register_builtins(vm, err)) != FHR_OK) {
        rplan_vm_destroy(vm);
        return st;
    }
    *out = vm;
    return FHR_OK;
}

void rplan_vm_destroy(rplan_vm *vm)
{
    if (!vm)
        return;
    vm_sync_all(vm, NULL);
    vm_requests_teardown(vm);
    for (size_t i = 0; i < vm->nholds; i++)
        fhr_hold_destroy(vm->holds[i].hd);
    if (vm->m)
        fhr_manager_destroy(vm->m);
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        fhr_location loc = fhr_loc_from_slot(i);
        fhr_stream *s = vm->compute[i];
        if (vm->scratch[i])
            vm->b->ops->free(vm->b, loc, vm->scratch[i], vm->scratch_nbytes, s);
        if (vm->counter[i])
            vm->b->ops->free(vm->b, loc, vm->counter[i], 16, s);
    }
    for (size_t i = 0; i < vm->ntally_blocks; i++)
        vm->b->ops->free(vm->b, fhr_loc_pinned(), vm->tally_blocks[i], VM_TALLY_BLOCK * 32, NULL);
    free(vm->tally_blocks);
    free(vm->tallies);
    free(vm->stage_t0);
    free(vm->stage_t1);
    for (size_t i = 0; i < vm->nvals; i++)
        if (vm->backing && vm->backing[i])
            vm->b->ops->free(vm->b, vm->backing_loc, vm->backing[i], (size_t)vm->vinfo[i].nbytes,
                             NULL);
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (vm->compute[i])
            vm->b->ops->stream_destroy(vm->b, vm->compute[i]);
        if (vm->xfer[i])
            vm->b->ops->stream_destroy(vm->b, vm->xfer[i]);
    }
    for (size_t i = 0; i < vm->nkerns; i++)
        free(vm->kerns[i].name);
    for (size_t i = 0; i < vm->nmarks; i++)
        free(vm->marks[i]);
    free(vm->marks);
    free(vm->slices);
    free(vm->kerns);
    free(vm->holds);
    free(vm->stages);
    free(vm->vinfo);
    free(vm->h);
    free(vm->srcs);
    free(vm->backing);
    free(vm->ins);
    free(vm);
}

fhr_manager *rplan_vm_manager(rplan_vm *vm) { return vm ? vm->m : NULL; }

fhr_handle rplan_vm_handle(const rplan_vm *vm, size_t i)
{
    fhr_handle none = {0, 0};
    return vm && i < vm->nvals ? vm->h[i] : none;
}

/* ---- bodies ------------------------------------------------------------------------ */

fhr_status vm_decode_runs(rplan_vm *vm, size_t pc, size_t end, vm_run **out, size_t *n,
                          fhr_error *err)
{
    size_t cnt = 0;
    for (size_t i = pc; i < end; i++)
        cnt += vm->ins[i].op == RPLAN_OP_RUN;
    *out = NULL;
    *n = 0;
    if (!cnt)
        return FHR_OK;
    vm_run *r = calloc(cnt, sizeof *r);
    if (!r)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    size_t k = 0;
    for (size_t i = pc; i < end; i++) {
        if (vm->ins[i].op != RPLAN_OP_RUN)
            continue;
        vm_run *x = &r[k++];
        x->in = &vm->ins[i];
        x->pc = i;
        for (size_t a = 0; a < vm->ins[i].count && i + 1 + a < end; a++) {
            const rplan_instr *ai = &vm->ins[i + 1 + a];
            if (x->nargs == 16)
                break;
            rplan_arg *g = &x->args[x->nargs++];
            switch (ai->op) {
            case RPLAN_OP_ARGVAL: {
                size_t v = 0;
                while (v < x->nvals && x->vals[v] != ai->value)
                    v++;
                if (v == x->nvals)
                    x->vals[x->nvals++] = ai->value;
                g->kind = RPLAN_ARG_VALUE;
                g->value = (uint32_t)v;
                break;
            }
            case RPLAN_OP_ARGINT: g->kind = RPLAN_ARG_INT; g->imm = ai->imm; break;
            case RPLAN_OP_ARGSIZE: g->kind = RPLAN_ARG_SIZE; g->imm = ai->imm; break;
            default: g->kind = RPLAN_ARG_DURATION; g->imm = ai->imm; break;
            }
        }
    }
    *out = r;
    *n = cnt;
    return FHR_OK;
}

static fhr_status body_fail(const vm_run *r, fhr_status st, fhr_error *err, const char *msg)
{
    fhr_fail(err, st, "run %.60s: %.400s", r->in->str, msg);
    if (err)
        err->action_index = (long)r->pc; /* the VM maps it back to the source */
    return st;
}

/* body_fail keeping the cause already in err (a backend or host-memory failure). */
static fhr_status body_fail_keep(const vm_run *r, fhr_status st, fhr_error *err)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%.500s", err && err->message[0] ? err->message : fhr_status_name(st));
    return body_fail(r, st, err, msg);
}

/* Predicted time of one body from the kernel model (see rplan_vm_opts.device_gbps). */
double vm_model_body(const rplan_vm *vm, const vm_run *r)
{
    double gbps = vm->o.device_gbps;
    const char *env = getenv("FHEPLAN_DEVICE_GBPS");
    if (gbps <= 0)
        gbps = env && atof(env) > 0 ? atof(env) : 3000.0;
    uint64_t bytes = 0, repeat = 1, ns = 0;
    for (size_t v = 0; v < r->nvals; v++)
        bytes += vm->vinfo[r->vals[v]].nbytes;
    for (size_t a = 0; a < r->nargs; a++) {
        if (r->args[a].kind == RPLAN_ARG_DURATION)
            ns += r->args[a].imm;
        else if (r->args[a].kind == RPLAN_ARG_INT && r->args[a].imm > 0)
            repeat = r->args[a].imm;
    }
    if (strcmp(r->in->str, "spin") == 0)
        return (double)ns / 1e9;
    if (strcmp(r->in->str, "ckks.keyswitch") != 0)
        repeat = 1;
    return (double)bytes * (double)repeat / (gbps * 1e9);
}

static fhr_status ensure_scratch(rplan_vm *vm, fhr_location loc, fhr_stream *s, fhr_error *err)
{
    int slot = fhr_loc_slot(loc);
    fhr_status st;
    if (!vm->scratch[slot]) {
        if ((st = vm->b->ops->alloc(vm->b, loc, vm->scratch_nbytes, s, &vm->scratch[slot], err)))
            return st;
        if ((st = vm_fill(vm, vm->scratch[slot], loc, vm->scratch_nbytes, NULL, NULL, s, err)))
            return st;
    }
    if (!vm->counter[slot]) {
        void *c;
        if ((st = vm->b->ops->alloc(vm->b, loc, 16, s, &c, err)))
            return st;
        vm->counter[slot] = c;
        if ((st = vm_fill(vm, c, loc, 16, NULL, NULL, s, err)))
            return st;
    }
    return FHR_OK;
}

/* Before timing starts: the streams, scratch and counters of every location a body may
 * run at, and the first tally block, so that no run pays for creating them (a first
 * pinned allocation may map a whole pool arena). */
static void warm_up(rplan_vm *vm)
{
    uint64_t slots = (1ULL << fhr_loc_slot(fhr_loc_pinned())) | (1ULL << fhr_loc_slot(fhr_loc_host()));
    for (size_t i = 0; i < vm->ninstr; i++)
        if (vm->ins[i].has_loc && fhr_loc_slot(vm->ins[i].loc) >= 0)
            slots |= 1ULL << fhr_loc_slot(vm->ins[i].loc);
    int has_body = 0;
    for (size_t i = 0; i < vm->ninstr && !has_body; i++)
        has_body = vm->ins[i].op == RPLAN_OP_RUN;
    for (int sl = 0; has_body && sl < FHR_LOC_SLOTS; sl++) {
        if (!(slots & (1ULL << sl)))
            continue;
        fhr_location loc = fhr_loc_from_slot(sl);
        if (loc.kind == FHR_LOC_CUDA && loc.index >= vm->b->ops->device_count(vm->b))
            continue;
        fhr_stream *s = vm_compute_stream(vm, loc, NULL);
        if (s)
            ensure_scratch(vm, loc, s, NULL);
        if (loc.kind == FHR_LOC_CUDA)
            vm_xfer_stream(vm, loc, NULL);
    }
    if (has_body && !vm->ntally_blocks) {
        uint64_t *t = tally_slot(vm);
        (void)t;
        vm->tally_used = 0; /* keep the block; the slot was not used */
    }
}

fhr_status vm_run_body(rplan_vm *vm, const vm_run *runs, size_t nruns, const fhr_location *at,
                       int request, fhr_error *err)
{
    (void)request;
    for (size_t k = 0; k < nruns; k++) {
        const vm_run *r = &runs[k];
        FOR_OPEN_RECORDS(vm, rec)
        rec->bodies++;
        const vm_kernel *kern = vm_find_kernel(vm, r->in->str);
        rplan_kernel_fn fn = kern ? kern->fn : NULL;
        void *kctx = kern ? kern->ctx : NULL;
        if (!fn) {
            if (!vm->o.unknown_as_touch)
                return body_fail(r, FHR_E_INVALID, err, "no kernel of that name is registered");
            fn = vm_touch_kernel;
            kctx = vm;
        }
        if (strcmp(r->in->str, "verify") == 0)
            vm->checks_total += r->nvals;
        double model = vm_model_body(vm, r);
        FOR_OPEN_RECORDS(vm, rec)
        rec->model_body_s += model;
        if (vm->explain)
            continue;
        fhr_location loc = at[k];
        fhr_stream *s = vm_compute_stream(vm, loc, err);
        fhr_status st;
        if (!s)
            return body_fail_keep(r, err ? err->status : FHR_E_BACKEND, err);
        if ((st = ensure_scratch(vm, loc, s, err)) != FHR_OK)
            return body_fail_keep(r, st, err);
        fhr_handle hs[16];
        const rplan_value_info *infos[16];
        for (size_t v = 0; v < r->nvals; v++) {
            hs[v] = vm->h[r->vals[v]];
            infos[v] = &vm->vinfo[r->vals[v]];
        }
        fhr_lease *lease = NULL;
        const fhr_value *vals[16];
        if (r->nvals) {
            fhr_error le;
            fhr_error_init(&le);
            st = fhr_acquire(vm->m, hs, r->nvals, loc, s, &lease, &le);
            if (st) {
                char msg[560];
                snprintf(msg, sizeof msg, "cannot lease its values: %s", le.message);
                fhr_error_clear(&le);
                return body_fail(r, st, err, msg);
            }
            for (size_t v = 0; v < r->nvals; v++)
                vals[v] = fhr_lease_value(lease, hs[v]);
        }
        char nm[96], lb[16];
        snprintf(nm, sizeof nm, "%.70s @ %s", r->in->str, fhr_loc_format(loc, lb, sizeof lb));
        vm_mark *mk = vm_new_mark(vm, 0, vm->b->ops->stream_id(vm->b, s), nm);
        if (!mk)
            st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        else
            st = vm->b->ops->launch_host(vm->b, s, vm_mark_begin, mk, err);
        if (st)
            body_fail_keep(r, st, err);
        if (st == FHR_OK) {
            rplan_kernel_call c = {
                vm, vm->m, vm->b, r->in->str, loc, s, vm->is_cuda && loc.kind == FHR_LOC_CUDA,
                r->nvals, vals, infos, r->nargs, r->args, vm->scratch[fhr_loc_slot(loc)],
                vm->scratch_nbytes, r->in->line, r->in->col};
            fhr_error ke;
            fhr_error_init(&ke);
            st = fn(kctx, &c, &ke);
            if (st) {
                body_fail(r, st, err, ke.message);
                fhr_error_clear(&ke);
            } else if ((st = vm->b->ops->launch_host(vm->b, s, vm_mark_end, mk, err))) {
                body_fail_keep(r, st, err);
            }
        }
        if (lease) {
            fhr_lease_release(lease, NULL);
            fhr_lease_destroy(lease);
        }
        if (st)
            return st;
    }
    return FHR_OK;
}

/* Explicit control removes copies that bodies may still read: wait for the compute
 * streams and reap their consumer events first (the application's choice; the
 * manager itself never waits). */
static void wait_consumers(rplan_vm *vm, const fhr_action *acts, size_t n)
{
    int removes = 0;
    for (size_t i = 0; i < n; i++)
        removes |= acts[i].kind != FHR_ACT_ENSURE;
    if (!removes || vm->explain)
        return;
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        if (vm->compute[s])
            vm->b->ops->stream_sync(vm->b, vm->compute[s], NULL);
    fhr_reap(vm->m);
}

/* ---- scopes ------------------------------------------------------------------------ */

fhr_status vm_exec_scope_plan(rplan_vm *vm, const fhr_plan *plan, const fhr_stream_map *xs, size_t nxs,
                              int has_version, uint64_t version, const vm_run *runs,
                              size_t nruns, const fhr_location *at, int request,
                              fhr_report **rep_out, fhr_error *err)
{
    (void)rep_out;
    fhr_scope *sc = NULL;
    fhr_status st = fhr_scope_create(vm->m, plan, xs, nxs, &sc, err);
    if (st)
        return st;
    if (has_version)
        fhr_scope_expect_version(sc, version);
    uint64_t t0 = vm_now_ns();
    vm_mark *mk[FHR_LOC_SLOTS] = {0};
    /* Transfer windows are for the trace only: a host function on a transfer stream
     * stalls it for tens of microseconds, which a run without --trace need not pay. */
    if (!vm->explain && vm->o.trace)
        for (size_t i = 0; i < nxs; i++) {
            char nm[96];
            snprintf(nm, sizeof nm, "%.80s: transfers", fhr_plan_name(plan));
            mk[i] = vm_new_mark(vm, 1, vm->b->ops->stream_id(vm->b, xs[i].stream), nm);
            if (mk[i])
                vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_begin, mk[i], NULL);
        }
    st = fhr_scope_enter(sc, err);
    if (!vm->explain)
        for (size_t i = 0; i < nxs; i++)
            if (mk[i])
                vm->b->ops->launch_host(vm->b, xs[i].stream, vm_mark_end, mk[i], NULL);
    if (st) {
        if (err && err->partial_report)
            vm_account_report(vm, err->partial_report, request);
        fhr_scope_destroy(sc);
        return st;
    }
    vm_sample_peaks(vm);
    fhr_error berr;
    fhr_error_init(&berr);
    fhr_status bst = vm_run_body(vm, runs, nruns, at, request, &berr);
    if (!vm->explain && fhr_plan_nactions(plan, FHR_PHASE_EXIT) > 0) {
        /* exit actions may move what the body reads: wait for the body first */
        for (size_t k = 0; k < nruns; k++) {
            int slot = fhr_loc_slot(at[k]);
            if (slot >= 0 && vm->compute[slot])
                vm->b->ops->stream_sync(vm->b, vm->compute[slot], NULL);
        }
        fhr_reap(vm->m);
    }
    fhr_error xerr;
    fhr_error_init(&xerr);
    st = fhr_scope_exit(sc, bst, &xerr);
    const fhr_report *rep = fhr_scope_report(sc);
    if (rep)
        vm_account_report(vm, rep, request);
    else if (xerr.partial_report)
        vm_account_report(vm, xerr.partial_report, request);
    vm_add_slice(vm, t0, vm_now_ns(), 0, request ? "request" : "plan", fhr_plan_name(plan));
    if (bst) {
        if (err) {
            fhr_error_clear(err);
            *err = berr;
            err->phase = FHR_PHASE_BODY;
        } else {
            fhr_error_clear(&berr);
        }
        fhr_error_clear(&xerr);
        st = bst;
    } else if (st) {
        if (err) {
            fhr_error_clear(err);
            *err = xerr;
        } else {
            fhr_error_clear(&xerr);
        }
    } else {
        fhr_error_clear(&xerr);
    }
    vm_sample_peaks(vm);
    fhr_scope_destroy(sc);
    return st;
}

/* The location a plan body reads a value at: its device copy, else pinned, else host. */
static fhr_location body_location(rplan_vm *vm, const vm_run *r)
{
    int ndev = vm->b->ops->device_count(vm->b);
    for (int d = 0; d < ndev && d < FHR_MAX_CUDA_DEVICES; d++) {
        int all = r->nvals > 0;
        for (size_t v = 0; v < r->nvals && all; v++)
            all = fhr_is_resident(vm->m, vm->h[r->vals[v]], fhr_loc_cuda(d)) == 1;
        if (all)
            return fhr_loc_cuda(d);
    }
    fhr_location pin = fhr_loc_pinned();
    int all = 1;
    for (size_t v = 0; v < r->nvals && all; v++)
        all = fhr_is_resident(vm->m, vm->h[r->vals[v]], pin) == 1;
    return all && r->nvals ? pin : fhr_loc_host();
}

static fhr_action to_action(const rplan_vm *vm, const rplan_instr *in)
{
    fhr_action a;
    memset(&a, 0, sizeof a);
    a.handle = vm->h[in->value];
    a.at = in->loc;
    switch (in->op) {
    case RPLAN_OP_ENSURE: a.kind = FHR_ACT_ENSURE; break;
    case RPLAN_OP_MOVE:
        a.kind = FHR_ACT_MOVE;
        a.has_from = in->has_from;
        a.from = in->from;
        break;
    case RPLAN_OP_DROP: a.kind = FHR_ACT_DROP; break;
    default: a.kind = FHR_ACT_DISCARD; break;
    }
    return a;
}

/* Transfer streams of the VM for every CUDA destination of the actions. */
static size_t xfer_map(rplan_vm *vm, const fhr_action *acts, size_t n, fhr_stream_map *map)
{
    size_t k = 0;
    if (vm->explain)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (acts[i].at.kind != FHR_LOC_CUDA ||
            (acts[i].kind != FHR_ACT_ENSURE && acts[i].kind != FHR_ACT_MOVE))
            continue;
        size_t j = 0;
        while (j < k && !fhr_loc_equal(map[j].loc, acts[i].at))
            j++;
        if (j < k)
            continue;
        fhr_stream *s = vm_xfer_stream(vm, acts[i].at, NULL);
        if (s) {
            map[k].loc = acts[i].at;
            map[k].stream = s;
            k++;
        }
    }
    return k;
}

typedef struct vm_fail {
    long pc;
} vm_fail;

static size_t scope_end(const rplan_vm *vm, size_t pc)
{
    size_t e = pc + 1;
    while (e < vm->ninstr && vm->ins[e].op != RPLAN_OP_END)
        e++;
    return e;
}

/* PLAN pc..END: a scope with reclaim/enter/exit actions, reservations and a body. */
static fhr_status exec_plan(rplan_vm *vm, size_t pc, size_t end, long *fail_pc, fhr_error *err)
{
    size_t n = end - pc;
    fhr_action *acts = calloc(n + 1, sizeof *acts);
    size_t *apc = calloc(n + 1, sizeof *apc);
    fhr_reservation *res = calloc(n + 1, sizeof *res);
    size_t *rpc = calloc(n + 1, sizeof *rpc);
    fhr_location *at = NULL;
    vm_run *runs = NULL;
    size_t nruns = 0, nact[3] = {0, 0, 0}, nres = 0;
    fhr_status st = FHR_OK;
    if (!acts || !apc || !res || !rpc) {
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    /* gather in phase order: reclaim [0], enter [1], exit [2] — kept apart in acts */
    fhr_action *lists[3] = {acts, NULL, NULL};
    size_t *lpc[3] = {apc, NULL, NULL};
    int phase = 0;
    size_t count[3] = {0, 0, 0};
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_PHASE)
            phase = in->phase == FHR_PHASE_RECLAIM ? 0 : in->phase == FHR_PHASE_ENTER ? 1
                    : in->phase == FHR_PHASE_EXIT  ? 2 : 3;
        else if (in->op >= RPLAN_OP_ENSURE && in->op <= RPLAN_OP_DISCARD && phase < 3)
            count[phase]++;
    }
    lists[1] = acts + count[0];
    lists[2] = lists[1] + count[1];
    lpc[1] = apc + count[0];
    lpc[2] = lpc[1] + count[1];
    phase = 0;
    for (size_t i = pc + 1; i < end; i++) {
        const rplan_instr *in = &vm->ins[i];
        if (in->op == RPLAN_OP_PHASE)
            phase = in->phase == FHR_PHASE_RECLAIM ? 0 : in->phase == FHR_PHASE_ENTER ? 1
                    : in->phase == FHR_PHASE_EXIT  ? 2 : 3;
        else if (in->op >= RPLAN_OP_ENSURE && in->op <= RPLAN_OP_DISCARD && phase < 3) {
            lpc[phase][nact[phase]] = i;
            lists[phase][nact[phase]++] = to_action(vm, in);
        } else if (in->op == RPLAN_OP_RESERVE) {
            rpc[nres] = i;
            res[nres].at = in->loc;
            res[nres].nbytes = in->imm;
            res[nres].label = in->str;
            nres++;
        }
    }
    if ((st = vm_decode_runs(vm, pc, end, &runs, &nruns, err)) != FHR_OK)
        goto done;
    fhr_plan_desc d = {vm->ins[pc].str, lists[0], nact[0], lists[1], nact[1], lists[2], nact[2],
                       res, nres};
    fhr_plan *plan = NULL;
    if ((st = fhr_plan_create(&d, &plan, err)) != FHR_OK) {
        *fail_pc = (long)pc;
        goto done;
    }
    fhr_stream_map xs[FHR_LOC_SLOTS];
    size_t nxs = xfer_map(vm, acts, nact[0] + nact[1] + nact[2], xs);
    /* bodies read values where the enter phase leaves them: decided after entry */
    at = calloc(nruns + 1, sizeof *at);
    if (!at) {
        fhr_plan_destroy(plan);
        st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        goto done;
    }
    /* a value the enter phase brings to a device is read there */
    for (size_t k = 0; k < nruns; k++) {
        fhr_location best = {FHR_LOC_INVALID, 0};
        for (size_t a = 0; a < nact[1]; a++) {
            for (size_t v = 0; v < runs[k].nvals; v++)
                if (fhr_handle_equal(lists[1][a].handle, vm->h[runs[k].vals[v]]) &&
                    lists[1][a].at.kind == FHR_LOC_CUDA && best.kind == FHR_LOC_INVALID)
                    best = lists[1][a].at;
        }
        at[k] = best;
    }
    st = FHR_OK;
    {
        /* resolve the rest from the current state (values already in place) */
        for (size_t k = 0; k < nruns; k++)
            if (at[k].kind == FHR_LOC_INVALID) {
                at[k] = vm->explain ? fhr_loc_host() : body_location(vm, &runs[k]);
                /* a value entered elsewhere is checked by the lease */
            }
    }
    FOR_OPEN_RECORDS(vm, r)
    r->plans++;
    wait_consumers(vm, acts, nact[0] + nact[1] + nact[2]);
    fhr_error e2;
    fhr_error_init(&e2);
    st = vm_exec_scope_plan(vm, plan, xs, nxs, 0, 0, runs, nruns, at, 0, NULL, &e2);
    if (st) {
        if (e2.phase == FHR_PHASE_BODY)
            *fail_pc = e2.action_index;
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_RECLAIM &&
                 (size_t)e2.action_index < nact[0])
            *fail_pc = (long)lpc[0][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_ENTER &&
                 (size_t)e2.action_index < nact[1])
            *fail_pc = (long)lpc[1][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_EXIT &&
                 (size_t)e2.action_index < nact[2])
            *fail_pc = (long)lpc[2][e2.action_index];
        else if (e2.action_index >= 0 && e2.phase == FHR_PHASE_RESERVE &&
                 (size_t)e2.action_index < nres)
            *fail_pc = (long)rpc[e2.action_index];
        else
            *fail_pc = (long)pc;
        if (err) {
            fhr_error_clear(err);
            *err = e2;
        } else {
            fhr_error_clear(&e2);
        }
    }
    fhr_plan_destroy(plan);
done:
    free(at);
    free(runs);
    free(acts);
    free(apc);
    free(res);
    free(rpc);
    return st;
}

static fhr_status exec_action(rplan_vm *vm, size_t pc, fhr_error *err)
{
    fhr_action a = to_action(vm, &vm->ins[pc]);
    fhr_stream_map xs[1];
    size_t nxs = xfer_map(vm, &a, 1, xs);
    fhr_report *rep = NULL;
    wait_consumers(vm, &a, 1);
    uint64_t t0 = vm_now_ns();
    fhr_status st = fhr_execute_actions(vm->m, &a, 1, xs, nxs, &rep, err);
    if (rep) {
        vm_account_report(vm, rep, 0);
        fhr_report_free(rep);
    } else if (st && err && err->partial_report) {
        vm_account_report(vm, err->partial_report, 0);
    }
    char nm[96];
    snprintf(nm, sizeof nm, "%s %.60s", vm->ins[pc].opname, vm->vinfo[vm->ins[pc].value].name);
    vm_add_slice(vm, t0, vm_now_ns(), 0, "action", nm);
    vm_sample_peaks(vm);
    return st;
}

static fhr_status exec_hold(rplan_vm *vm, size_t pc, fhr_error *err)
{
    const rplan_instr *in = &vm->ins[pc];
    if (in->op == RPLAN_OP_HOLD) {
        if (vm->nholds == vm->capholds) {
            size_t cap = vm->capholds ? vm->capholds * 2 : 8;
            struct vm_hold *n = realloc(vm->holds, cap * sizeof *n);
            if (!n)
                return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
            vm->holds = n;
            vm->capholds = cap;
        }
        fhr_hold *hd = NULL;
        fhr_status st = fhr_hold_acquire(vm->m, &vm->h[in->value], 1, in->loc, &hd, err);
        if (st)
            return st;
        vm->holds[vm->nholds].v = in->value;
        vm->holds[vm->nholds].loc = in->loc;
        vm->holds[vm->nholds].hd = hd;
        vm->nholds++;
        return FHR_OK;
    }
    for (size_t i = vm->nholds; i-- > 0;)
        if (vm->holds[i].v == in->value && fhr_loc_equal(vm->holds[i].loc, in->loc)) {
            fhr_status st = fhr_hold_release(vm->holds[i].hd, err);
            fhr_hold_destroy(vm->holds[i].hd);
            vm->holds[i] = vm->holds[--vm->nholds];
            return st;
        }
    return fhr_fail(err, FHR_E_LEASE, "release of %s: no hold at that location",
                    vm->vinfo[in->value].name);
}

static void progress(rplan_vm *vm, const char *scope)
{
    vm->scopes_done++;
    if (!vm->o.progress)
        return;
    rplan_vm_progress pr = {vm->depth ? vm->stages[vm->stack[vm->depth - 1]].name : "", scope,
                            vm->scopes_done, vm->scopes_total, vm->bytes_moved,
                            (double)(vm_now_ns() - vm->t_begin) / 1e9};
    vm->o.progress(vm->o.progress_ctx, &pr);
}

/* ---- run ------------------------------------------------------------------------- */

static void set_failure(rplan_vm *vm, rplan_vm_report *rep, fhr_status st, long pc,
                        const fhr_error *e, const char *scope)
{
    rep->ok = 0;
    rep->status = st;
    rep->instr = pc;
    rep->phase = e ? e->phase : FHR_PHASE_NONE;
    /* name the stage the failure happened in (none at top level) */
    const char *stage = vm->depth && !vm->top_open ? vm->stages[vm->stack[vm->depth - 1]].name
                                                   : "";
    snprintf(rep->message, sizeof rep->message, "%s%.100s%s%.500s", stage[0] ? "stage '" : "",
             stage, stage[0] ? "': " : "", e && e->message[0] ? e->message : fhr_status_name(st));
    snprintf(rep->scope, sizeof rep->scope, "%s", scope ? scope : "");
    if (pc >= 0 && (size_t)pc < vm->ninstr) {
        rep->line = vm->ins[pc].line;
        rep->col = vm->ins[pc].col;
    }
    if (e && e->partial_report)
        rep->partial_json = fhr_report_json(e->partial_report);
}

fhr_status rplan_vm_run(rplan_vm *vm, rplan_vm_report **report, fhr_error *err)
{
    if (!vm || !report)
        return fhr_fail(err, FHR_E_INVALID, "vm: NULL vm or report pointer");
    *report = NULL;
    if (vm->ran)
        return fhr_fail(err, FHR_E_INVALID, "vm: a VM runs once");
    vm->ran = 1;
    rplan_vm_report *rep = calloc(1, sizeof *rep);
    if (!rep)
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    rep->ok = 1;
    rep->instr = -1;
    rep->explain = vm->explain;
    rep->scale = vm->o.scale;
    snprintf(rep->device, sizeof rep->device, "%s", vm->device);
    snprintf(vm->total.name, sizeof vm->total.name, "total");
    fhr_error e;
    fhr_error_init(&e);
    fhr_status st = setup_values(vm, &e);
    if (st == FHR_OK)
        st = vm_requests_setup(vm, &e);
    long fail_pc = -1;
    const char *fail_scope = NULL;
    if (st) {
        set_failure(vm, rep, st, -1, &e, NULL);
    } else {
        rep->pinned_gbps = vm->pinned_gbps = pinned_bandwidth(vm);
        if (!vm->explain) {
            warm_up(vm);
            vm_sync_all(vm, NULL);
        }
        vm->t_begin = vm_now_ns();
    }
    for (size_t pc = 0; pc < vm->ninstr && st == FHR_OK; pc++) {
        const rplan_instr *in = &vm->ins[pc];
        if (in->op < 0 || in->op >= RPLAN_OP_COUNT_) {
            st = fhr_fail(&e, FHR_E_INVALID, "unknown opcode %d", in->op);
            fail_pc = (long)pc;
        } else if (op_class[in->op] == VM_CLASS_ACTION) {
            if ((st = ensure_record(vm)) == FHR_OK)
                st = exec_action(vm, pc, &e);
            fail_pc = (long)pc;
        } else switch (in->op) {
        case RPLAN_OP_STAGE:
            if (vm->top_open)
                stage_close(vm);
            st = stage_open(vm, in->str, 0);
            if (st)
                fhr_fail(&e, st, "stages nested too deeply");
            break;
        case RPLAN_OP_ENDSTAGE:
            if (vm->top_open)
                stage_close(vm);
            stage_close(vm);
            break;
        case RPLAN_OP_PLAN:
        case RPLAN_OP_REQUEST: {
            size_t end = scope_end(vm, pc);
            if ((st = ensure_record(vm)) != FHR_OK)
                break;
            if (in->op == RPLAN_OP_PLAN) {
                st = exec_plan(vm, pc, end, &fail_pc, &e);
            } else {
                st = vm_exec_request(vm, pc, end, &e);
                if (st)
                    fail_pc = e.action_index >= (long)pc && e.action_index < (long)end
                                  ? e.action_index
                                  : (long)pc;
            }
            if (st)
                fail_scope = in->str;
            else
                progress(vm, in->str);
            pc = end;
            break;
        }
        case RPLAN_OP_HOLD:
        case RPLAN_OP_RELEASE:
            st = exec_hold(vm, pc, &e);
            fail_pc = (long)pc;
            break;
        default:
            break;
        }
        if (st && rep->ok)
            set_failure(vm, rep, st, fail_pc, &e, fail_scope);
    }
    fhr_error_clear(&e);
    while (vm->depth)
        stage_close(vm);
    if (!vm->explain)
        vm_sync_all(vm, NULL);
    stage_resolve(vm);
    /* body times from the markers (streams are synchronised) */
    for (size_t i = 0; i < vm->nmarks; i++) {
        vm_mark *mk = vm->marks[i];
        if (!mk->t1 || mk->t1 < mk->t0)
            continue;
        if (mk->kind == 0) {
            double dt = (double)(mk->t1 - mk->t0) / 1e9;
            for (size_t k = 0; k < mk->nstages; k++)
                if ((size_t)mk->stages[k] < vm->nstages)
                    vm->stages[mk->stages[k]].body_s += dt;
            vm->total.body_s += dt;
        }
        vm_add_slice(vm, mk->t0, mk->t1, mk->tid, mk->kind ? "transfer" : "body", mk->name);
    }
    vm->total.time_s = vm->t_begin ? (double)(vm_now_ns() - vm->t_begin) / 1e9 : 0;
    vm->total.checks = vm->checks_total;
    if (!vm->explain)
        vm->total.check_failures = read_failures(vm);
    vm_sample_peaks(vm);
    rep->total = vm->total;
    rep->nstages = vm->nstages;
    if (vm->nstages) {
        rep->stages = malloc(vm->nstages * sizeof *rep->stages);
        if (rep->stages)
            memcpy(rep->stages, vm->stages, vm->nstages * sizeof *rep->stages);
        else
            rep->nstages = 0;
    }
    const rplan_stage_report *t = &rep->total;
    uint64_t pcie = t->bytes[FHR_DIR_H2D] + t->bytes[FHR_DIR_D2H] + t->load_h2d_bytes;
    rep->transfer_s = rep->pinned_gbps > 0 ? (double)pcie / (rep->pinned_gbps * 1e9) : 0;
    rep->lower_bound_s = t->body_s > rep->transfer_s ? t->body_s : rep->transfer_s;
    rep->ratio = rep->lower_bound_s > 0 ? t->time_s / rep->lower_bound_s : 0;
    rep->predicted_s = t->model_body_s > rep->transfer_s ? t->model_body_s : rep->transfer_s;
    if (rep->ok && t->check_failures) {
        rep->ok = 0;
        rep->status = FHR_E_BACKEND;
        snprintf(rep->message, sizeof rep->message,
                 "integrity: %llu of %llu verified values differ from their synthetic content",
                 (unsigned long long)t->check_failures, (unsigned long long)t->checks);
    }
    *report = rep;
    if (!rep->ok)
        fhr_fail(err, rep->status, "%s", rep->message);
    return rep->ok ? FHR_OK : rep->status;
}

void rplan_vm_report_free(rplan_vm_report *r)
{
    if (!r)
        return;
    free(r->stages);
    free(r->partial_json);
    free(r);
}

/* ---- JSON ------------------------------------------------------------------------- */

static void stage_json(cJSON *o, const rplan_stage_report *r, int explain)
{
    char lb[16];
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON *b = cJSON_AddObjectToObject(o, "bytes");
    for (int d = 0; d < FHR_DIR_NONE; d++)
        cJSON_AddNumberToObject(b, fhr_direction_name((fhr_direction)d), (double)r->bytes[d]);
    cJSON_AddNumberToObject(b, "load", (double)r->load_bytes);
    uint64_t moved = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += r->bytes[d];
    cJSON_AddNumberToObject(o, "bytes_moved", (double)moved);
    cJSON *c = cJSON_AddObjectToObject(o, "copies");
    for (int d = 0; d < FHR_DIR_NONE; d++)
        cJSON_AddNumberToObject(c, fhr_direction_name((fhr_direction)d), (double)r->copies[d]);
    cJSON_AddNumberToObject(c, "load", (double)r->loads);
    cJSON_AddNumberToObject(o, "plans", (double)r->plans);
    cJSON_AddNumberToObject(o, "requests", (double)r->requests);
    cJSON_AddNumberToObject(o, "bodies", (double)r->bodies);
    cJSON_AddNumberToObject(o, "evictions", (double)r->evictions);
    cJSON *pk = cJSON_AddArrayToObject(o, "peaks");
    for (size_t i = 0; i < r->npeaks; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "loc", fhr_loc_format(r->peaks[i].loc, lb, sizeof lb));
        cJSON_AddNumberToObject(p, "peak_bytes", (double)r->peaks[i].peak_bytes);
        if (r->peaks[i].has_budget)
            cJSON_AddNumberToObject(p, "budget_bytes", (double)r->peaks[i].budget_bytes);
        else
            cJSON_AddNullToObject(p, "budget_bytes");
        cJSON_AddItemToArray(pk, p);
    }
    if (!explain) {
        cJSON_AddNumberToObject(o, "time_s", r->time_s);
        cJSON_AddNumberToObject(o, "body_s", r->body_s);
        cJSON_AddNumberToObject(o, "bandwidth_gbps",
                                r->time_s > 0 ? (double)moved / r->time_s / 1e9 : 0);
        cJSON *ig = cJSON_AddObjectToObject(o, "integrity");
        cJSON_AddNumberToObject(ig, "checks", (double)r->checks);
        cJSON_AddNumberToObject(ig, "failures", (double)r->check_failures);
        cJSON_AddBoolToObject(ig, "ok", r->check_failures == 0);
    }
}

char *rplan_vm_report_json(const rplan_vm_report *r)
{
    if (!r)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", r->ok);
    cJSON_AddStringToObject(o, "mode", r->explain ? "explain" : "run");
    cJSON_AddStringToObject(o, "device", r->device);
    cJSON_AddNumberToObject(o, "scale", (double)r->scale);
    cJSON *st = cJSON_AddArrayToObject(o, "stages");
    for (size_t i = 0; i < r->nstages; i++) {
        cJSON *s = cJSON_CreateObject();
        stage_json(s, &r->stages[i], r->explain);
        cJSON_AddItemToArray(st, s);
    }
    cJSON *t = cJSON_AddObjectToObject(o, "totals");
    stage_json(t, &r->total, r->explain);
    cJSON_AddNumberToObject(t, "model_body_s", r->total.model_body_s);
    cJSON_AddNumberToObject(t, "predicted_s", r->predicted_s);
    if (r->explain) {
        cJSON_AddNumberToObject(t, "pinned_gbps", r->pinned_gbps);
        cJSON_AddNumberToObject(t, "transfer_s", r->transfer_s);
    } else {
        cJSON_AddNumberToObject(t, "pinned_gbps", r->pinned_gbps);
        cJSON_AddNumberToObject(t, "compute_s", r->total.body_s);
        cJSON_AddNumberToObject(t, "transfer_s", r->transfer_s);
        cJSON_AddNumberToObject(t, "lower_bound_s", r->lower_bound_s);
        cJSON_AddNumberToObject(t, "ratio", r->ratio);
    }
    if (r->ok) {
        cJSON_AddNullToObject(o, "error");
    } else {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "status", fhr_status_name(r->status));
        cJSON_AddStringToObject(e, "message", r->message);
        cJSON_AddNumberToObject(e, "line", r->line);
        cJSON_AddNumberToObject(e, "col", r->col);
        cJSON_AddStringToObject(e, "phase", fhr_phase_name(r->phase));
        cJSON_AddStringToObject(e, "scope", r->scope);
        cJSON *pr = r->partial_json ? cJSON_Parse(r->partial_json) : NULL;
        if (pr)
            cJSON_AddItemToObject(e, "partial_report", pr);
        else
            cJSON_AddNullToObject(e, "partial_report");
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *rplan_vm_trace_json(const rplan_vm *vm)
{
    if (!vm)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *ev = cJSON_AddArrayToObject(o, "traceEvents");
    uint64_t base = vm->t_begin;
    for (size_t i = 0; i < vm->nslices; i++)
        if (vm->slices[i].t0 && vm->slices[i].t0 < base)
            base = vm->slices[i].t0;
    /* track names */
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", "thread_name");
    cJSON_AddStringToObject(m, "ph", "M");
    cJSON_AddNumberToObject(m, "pid", 1);
    cJSON_AddNumberToObject(m, "tid", 0);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", "host: stages and scopes");
    cJSON_AddItemToArray(ev, m);
    for (int i = 0; i < FHR_LOC_SLOTS; i++)
        for (int k = 0; k < 2; k++) {
            fhr_stream *s = k ? vm->xfer[i] : vm->compute[i];
            if (!s)
                continue;
            char nm[48], lb[16];
            snprintf(nm, sizeof nm, "%s stream %s", k ? "transfer" : "compute",
                     fhr_loc_format(fhr_loc_from_slot(i), lb, sizeof lb));
            m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "name", "thread_name");
            cJSON_AddStringToObject(m, "ph", "M");
            cJSON_AddNumberToObject(m, "pid", 1);
            cJSON_AddNumberToObject(m, "tid", (double)vm->b->ops->stream_id(vm->b, s));
            cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", nm);
            cJSON_AddItemToArray(ev, m);
        }
    for (size_t i = 0; i < vm->nslices; i++) {
        const vm_slice *s = &vm->slices[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", s->name);
        cJSON_AddStringToObject(e, "cat", s->cat);
        cJSON_AddStringToObject(e, "ph", "X");
        cJSON_AddNumberToObject(e, "ts", s->t0 >= base ? (double)(s->t0 - base) / 1e3 : 0);
        cJSON_AddNumberToObject(e, "dur", (double)(s->t1 - s->t0) / 1e3);
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", (double)s->tid);
        cJSON_AddItemToArray(ev, e);
    }
    cJSON_AddStringToObject(o, "displayTimeUnit", "ms");
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}
