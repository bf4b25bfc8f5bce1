/* runtime/vm/create.c — the VM's lifetime: rplan_vm_create (program read and scaled exactly, budgets,
 * manager, built-in kernels), rplan_vm_destroy, and the accessors rplan_vm_manager/handle. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The scale a run uses for the requested one: the largest power of two that divides it
 * and leaves every value size, regenerated part, reservation and budget a whole number of
 * 8-byte words. Scaling is then exact (every size divided, nothing rounded, no slack), so
 * every comparison a decision makes comes out as check's at full size (fheplan(1): one
 * schedule at every --scale). */
static uint64_t exact_scale(const rplan_vm *vm, const fhr_budget *bud, size_t nbud)
{
    uint64_t g = 0;
    for (size_t i = 0; i < vm->nvals; i++) {
        for (size_t f = 0; f < vm->vinfo[i].nfields; f++) { /* declared fields divide too */
            uint64_t fb = 0;
            rplan_value_field(vm->p, i, f, NULL, &fb);
            g = gcd64(g, fb);
        }
        g = gcd64(g, vm->vinfo[i].nbytes);
        const rplan_value_info *ci = &vm->vinfo[i];
        if (ci->limb_q) { /* a limb cut: its limbs stay whole words */
            uint64_t f0 = 0; /* a field: the first declared one, a seeded value's "a", else all */
            if (rplan_value_field(vm->p, i, 0, NULL, &f0) != FHR_OK)
                f0 = ci->seeded ? ci->regen_nbytes : ci->nbytes;
            g = gcd64(g, f0 / (ci->limb_q + ci->limb_special));
        }
        if (vm->vinfo[i].seeded)
            g = gcd64(g, vm->vinfo[i].regen_nbytes);
    }
    for (size_t i = 0; i < vm->ninstr; i++)
        if (vm->ins[i].op == RPLAN_OP_RESERVE)
            g = gcd64(g, vm->ins[i].imm);
    for (size_t i = 0; i < nbud; i++)
        g = gcd64(g, bud[i].nbytes);
    uint64_t s = 1;
    while (s <= vm->o.scale / 2 && vm->o.scale % (2 * s) == 0 && g % (16 * s) == 0)
        s *= 2;
    return s;
}

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
    vm->pristine = calloc(vm->nvals + 1, sizeof *vm->pristine);
    vm->ins = calloc(vm->ninstr + 1, sizeof *vm->ins);
    if (!vm->vinfo || !vm->h || !vm->srcs || !vm->backing || !vm->pristine || !vm->ins) {
        rplan_vm_destroy(vm);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    for (size_t i = 0; i < vm->nvals && st == FHR_OK; i++)
        st = rplan_value(p, i, &vm->vinfo[i]);
    for (size_t i = 0; i < vm->ninstr && st == FHR_OK; i++) {
        st = rplan_instr_get(p, i, &vm->ins[i]);
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
    uint32_t bline[FHR_LOC_SLOTS], bcol[FHR_LOC_SLOTS]; /* declarations, 0 for overrides */
    size_t nbud = 0;
    for (size_t i = 0; i < nb && nbud < FHR_LOC_SLOTS; i++)
        if (rplan_budget(p, i, &bud[nbud]) == FHR_OK &&
            rplan_budget_position(p, i, &bline[nbud], &bcol[nbud]) == FHR_OK)
            nbud++;
    for (size_t i = 0; i < vm->o.nbudget_override; i++) {
        size_t k = 0;
        while (k < nbud && !fhr_loc_equal(bud[k].loc, vm->o.budget_override[i].loc))
            k++;
        if (k == nbud && nbud < FHR_LOC_SLOTS)
            nbud++;
        if (k < nbud) {
            bud[k] = vm->o.budget_override[i];
            bline[k] = bcol[k] = 0;
        }
    }
    /* sizes, reservations and budgets: all divided exactly by the scale (exact_scale) */
    if (vm->o.scale > 1)
        vm->o.scale = exact_scale(vm, bud, nbud);
    uint64_t sc = vm->o.scale;
    for (size_t i = 0; i < vm->nvals; i++) {
        vm->vinfo[i].nbytes /= sc;
        vm->vinfo[i].regen_nbytes /= sc;
        if (vm->vinfo[i].nbytes > vm->scratch_nbytes)
            vm->scratch_nbytes = (size_t)vm->vinfo[i].nbytes;
    }
    if ((st = vm_fields_setup(vm, err)) != FHR_OK || (st = vm_kernel_costs_setup(vm, err))) {
        rplan_vm_destroy(vm);
        return st;
    }
    for (size_t i = 0; i < vm->ninstr; i++)
        if (vm->ins[i].op == RPLAN_OP_RESERVE)
            vm->ins[i].imm /= sc;
        else if (vm->ins[i].op == RPLAN_OP_ARGSIZE)
            vm->ins[i].imm = vm_scale_up8(vm->ins[i].imm, sc);
    for (size_t i = 0; i < nbud; i++)
        bud[i].nbytes /= sc;
    /* a budget at a device the backend does not have: the run fails at its declaration
     * (rplan_vm_run); the manager is made without it */
    int ndev = backend->ops->device_count(backend);
    for (size_t i = 0; i < nbud; i++)
        if (bud[i].loc.kind == FHR_LOC_CUDA && bud[i].loc.index >= ndev) {
            if (!vm->bad_budget[0]) {
                snprintf(vm->bad_budget, sizeof vm->bad_budget,
                         "budget for cuda:%d%s: the %s backend has %d CUDA device%s",
                         bud[i].loc.index, bline[i] ? "" : " (from an override)",
                         backend->ops->name, ndev, ndev == 1 ? "" : "s");
                vm->bad_budget_line = bline[i];
                vm->bad_budget_col = bcol[i];
            }
            bud[i] = bud[--nbud];
            bline[i] = bline[nbud];
            bcol[i] = bcol[nbud];
            i--;
        }
    memcpy(vm->mbud, bud, nbud * sizeof *bud); /* a later run's manager: the same */
    vm->nmbud = nbud;
    vm->trace_cap = vm->o.trace ? 4096 : 0;
    fhr_manager_config cfg = {backend, vm->mbud, nbud, vm->trace_cap};
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
    fhr_value_destroy(vm->meta_like);
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
            vm->b->ops->free(vm->b, vm->backing_loc, vm->backing[i],
                             (size_t)vm_backing_nbytes(&vm->vinfo[i]), NULL);
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (vm->compute[i] && !vm->engine_stream[i])
            vm->b->ops->stream_destroy(vm->b, vm->compute[i]);
        if (vm->xfer[i] && !vm->xfer_given[i])
            vm->b->ops->stream_destroy(vm->b, vm->xfer[i]);
    }
    for (size_t i = 0; i < vm->nkerns; i++)
        free(vm->kerns[i].name);
    for (size_t i = 0; i < vm->nmarks; i++) {
        if (vm->marks[i]->ev0)
            vm->b->ops->event_destroy(vm->b, vm->marks[i]->ev0);
        if (vm->marks[i]->ev1)
            vm->b->ops->event_destroy(vm->b, vm->marks[i]->ev1);
        free(vm->marks[i]);
    }
    for (int i = 0; i < FHR_LOC_SLOTS; i++)
        if (vm->tref[i])
            vm->b->ops->event_destroy(vm->b, vm->tref[i]);
    free(vm->marks);
    free(vm->last_read);
    free(vm->slices);
    free(vm->resid);
    free(vm->resid_at);
    free(vm->resid_cut);
    free(vm->samples);
    free(vm->kerns);
    free(vm->holds);
    free(vm->stages);
    vm_pristine_free(vm); /* before vinfo: it has their sizes */
    free(vm->vinfo);
    free(vm->h);
    free(vm->srcs);
    free(vm->backing);
    free(vm->ins);
    for (size_t i = 0; i < vm->ngens; i++)
        free(vm->gens[i].name);
    free(vm->gens);
    vm_engine_free(vm);
    free(vm);
}

/* ---- running again ------------------------------------------------------------------ */

/* Whether value i's backing store outlives a run: a source's data (synth, counter, file)
 * is the same every run and nothing writes it, so it is made once; an engine's is its
 * loader's to fill, each run. */
static int backing_kept(const rplan_vm *vm, size_t i)
{
    return vm->vinfo[i].data != RPLAN_DATA_ENGINE;
}

/* Frees what one run made besides its manager, holds and requests: the engine's backing
 * stores, the report's records, the trace, the verify counters (warm-up makes them
 * again, zero). */
static void free_run_state(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->nvals; i++)
        if (vm->backing[i] && !backing_kept(vm, i)) {
            vm->b->ops->free(vm->b, vm->backing_loc, vm->backing[i],
                             (size_t)vm_backing_nbytes(&vm->vinfo[i]), NULL);
            vm->backing[i] = NULL;
        }
    for (int i = 0; i < FHR_LOC_SLOTS; i++)
        if (vm->counter[i])
            vm->b->ops->free(vm->b, fhr_loc_from_slot(i), vm->counter[i], 16, vm->compute[i]);
    for (size_t i = 1; i < vm->ntally_blocks; i++) /* the first block serves the next run */
        vm->b->ops->free(vm->b, fhr_loc_pinned(), vm->tally_blocks[i], VM_TALLY_BLOCK * 32, NULL);
    for (size_t i = 0; i < vm->nmarks; i++) {
        if (vm->marks[i]->ev0)
            vm->b->ops->event_destroy(vm->b, vm->marks[i]->ev0);
        if (vm->marks[i]->ev1)
            vm->b->ops->event_destroy(vm->b, vm->marks[i]->ev1);
        free(vm->marks[i]);
    }
    free(vm->marks);
    free(vm->holds);
    free(vm->tallies);
    free(vm->stage_t0);
    free(vm->stage_t1);
    free(vm->stages);
    free(vm->last_read);
    free(vm->slices);
    free(vm->resid);
    free(vm->resid_at);
    free(vm->resid_cut);
    free(vm->samples);
}

/* Copies field f of the old state into the new one (scalars and arrays alike). */
#define KEEP(to, from, f) memcpy(&(to)->f, &(from)->f, sizeof (from)->f)

fhr_status vm_rerun_reset(rplan_vm *vm, fhr_error *err)
{
    fhr_manager_config cfg = {vm->b, vm->mbud, vm->nmbud, vm->trace_cap};
    fhr_manager *m = NULL;
    fhr_status st = fhr_manager_create(&cfg, &m, err);
    for (size_t i = 0; st == FHR_OK && i < vm->ngens; i++) {
        if (vm->gens[i].fn)
            st = fhr_generator_register(m, vm->gens[i].name, vm->gens[i].fn, vm->gens[i].ctx, err);
        if (st == FHR_OK && vm->gens[i].range)
            st = fhr_generator_register_range(m, vm->gens[i].name, vm->gens[i].range,
                                              vm->gens[i].range_ctx, err);
    }
    if (st != FHR_OK) { /* the previous run's state stays: the next run tries again */
        if (m)
            fhr_manager_destroy(m);
        return st;
    }
    rplan_vm *n = calloc(1, sizeof *n);
    if (!n) {
        fhr_manager_destroy(m);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    vm_sync_all(vm, NULL);
    vm_requests_teardown(vm);
    fhr_value_destroy(vm->meta_like);
    for (size_t i = 0; i < vm->nholds; i++) /* before their manager goes */
        fhr_hold_destroy(vm->holds[i].hd);
    fhr_manager_destroy(vm->m); /* every copy; adopted buffers are borrowed: they stay */
    free_run_state(vm);
    /* What the VM keeps across runs; every other field starts as rplan_vm_create left it
     * (zero), so a run after the first starts where the first did. */
    KEEP(n, vm, bad_budget);
    KEEP(n, vm, bad_budget_line);
    KEEP(n, vm, bad_budget_col);
    KEEP(n, vm, p);
    KEEP(n, vm, b);
    KEEP(n, vm, o); /* objective auto: the first run's choice, with auto_s */
    KEEP(n, vm, auto_s);
    KEEP(n, vm, explain);
    KEEP(n, vm, is_cuda);
    KEEP(n, vm, ran);
    KEEP(n, vm, device);
    KEEP(n, vm, nvals);
    KEEP(n, vm, vinfo);
    KEEP(n, vm, h);
    KEEP(n, vm, srcs);
    KEEP(n, vm, backing);
    KEEP(n, vm, backing_loc);
    KEEP(n, vm, pristine);
    KEEP(n, vm, ninstr);
    KEEP(n, vm, ins);
    KEEP(n, vm, kerns);
    KEEP(n, vm, nkerns);
    KEEP(n, vm, capkerns);
    KEEP(n, vm, compute);
    KEEP(n, vm, xfer);
    KEEP(n, vm, scratch);
    KEEP(n, vm, tref);
    KEEP(n, vm, tref_ns);
    KEEP(n, vm, scratch_nbytes);
    KEEP(n, vm, scopes_total);
    KEEP(n, vm, tally_blocks);
    n->ntally_blocks = vm->ntally_blocks ? 1 : 0;
    KEEP(n, vm, loaders);
    KEEP(n, vm, nloaders);
    KEEP(n, vm, caploaders);
    KEEP(n, vm, adopted);
    KEEP(n, vm, engine_stream);
    KEEP(n, vm, xfer_given);
    KEEP(n, vm, flds);
    KEEP(n, vm, fld0);
    KEEP(n, vm, kcost);
    KEEP(n, vm, kcost_cap);
    KEEP(n, vm, mbud);
    KEEP(n, vm, nmbud);
    KEEP(n, vm, trace_cap);
    KEEP(n, vm, gens);
    KEEP(n, vm, ngens);
    KEEP(n, vm, probed);
    KEEP(n, vm, pinned_kept);
    KEEP(n, vm, nruns);
    memset(n->h, 0, n->nvals * sizeof *n->h);
    n->m = m;
    *vm = *n;
    free(n);
    return FHR_OK;
}

fhr_manager *rplan_vm_manager(rplan_vm *vm) { return vm ? vm->m : NULL; }

fhr_handle rplan_vm_handle(const rplan_vm *vm, size_t i)
{
    fhr_handle none = {0, 0};
    return vm && i < vm->nvals ? vm->h[i] : none;
}

/* Registers in the VM's manager and keeps for the managers of later runs
 * (vm_rerun_reset): a generator's whole-field function (range 0) or its range function. */
static fhr_status gen_register(rplan_vm *vm, const char *name, int range, void *fn, void *ctx,
                               fhr_error *err)
{
    if (!vm)
        return fhr_fail(err, FHR_E_INVALID, "generator_register: vm is NULL");
    size_t k = 0;
    while (name && k < vm->ngens && strcmp(vm->gens[k].name, name) != 0)
        k++;
    char *copy = name && k == vm->ngens ? strdup(name) : NULL;
    struct vm_gen *g = copy ? realloc(vm->gens, (vm->ngens + 1) * sizeof *g) : NULL;
    if (name && k == vm->ngens && !g) {
        free(copy);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    fhr_status st = range ? fhr_generator_register_range(vm->m, name, (fhr_generator_range_fn)fn,
                                                         ctx, err)
                          : fhr_generator_register(vm->m, name, (fhr_generator_fn)fn, ctx, err);
    if (g)
        vm->gens = g;
    if (st != FHR_OK) {
        free(copy);
        return st;
    }
    if (copy)
        vm->gens[vm->ngens++] = (struct vm_gen){copy, NULL, NULL, NULL, NULL};
    struct vm_gen *e = &vm->gens[copy ? vm->ngens - 1 : k];
    if (range)
        e->range = (fhr_generator_range_fn)fn, e->range_ctx = ctx;
    else
        e->fn = (fhr_generator_fn)fn, e->ctx = ctx;
    return FHR_OK;
}

fhr_status rplan_generator_register(rplan_vm *vm, const char *name, fhr_generator_fn fn,
                                    void *ctx, fhr_error *err)
{
    return gen_register(vm, name, 0, (void *)fn, ctx, err);
}

fhr_status rplan_generator_register_range(rplan_vm *vm, const char *name,
                                          fhr_generator_range_fn fn, void *ctx, fhr_error *err)
{
    return gen_register(vm, name, 1, (void *)fn, ctx, err);
}
