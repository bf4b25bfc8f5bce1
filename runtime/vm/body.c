/* runtime/vm/body.c — bodies: RUN argument lists decoded, the kernel model's predicted time,
 * per-location scratch and counters, the warm-up, and running bodies under leases. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    double declared = vm_kernel_cost(vm, r->in->str, gbps); /* profile or declaration */
    if (declared >= 0)
        return declared;
    uint64_t bytes = 0, repeat = 1, ns = 0;
    for (size_t v = 0; v < r->nvals; v++) /* at full size: scaling is exact (create.c) */
        bytes += vm->vinfo[r->vals[v]].nbytes * vm->o.scale;
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
/* 1 when a body may run a built-in kernel (registered with the VM as its context, or a
 * rehearsal's touch): only those use the VM's scratch and counters, so a program of
 * engine kernels alone allocates neither (they would sit outside its budgets). */
static int uses_builtins(const rplan_vm *vm)
{
    for (size_t i = 0; i < vm->ninstr; i++) {
        if (vm->ins[i].op != RPLAN_OP_RUN)
            continue;
        const vm_kernel *k = vm_find_kernel(vm, vm->ins[i].str);
        if (!k || k->ctx == vm)
            return 1;
    }
    return 0;
}

fhr_status vm_warm_up(rplan_vm *vm, fhr_error *err)
{
    fhr_status st = FHR_OK;
    uint64_t slots = (1ULL << fhr_loc_slot(fhr_loc_pinned())) | (1ULL << fhr_loc_slot(fhr_loc_host()));
    for (size_t i = 0; i < vm->ninstr; i++)
        if (vm->ins[i].has_loc && fhr_loc_slot(vm->ins[i].loc) >= 0)
            slots |= 1ULL << fhr_loc_slot(vm->ins[i].loc);
    int has_body = 0;
    for (size_t i = 0; i < vm->ninstr && !has_body; i++)
        has_body = vm->ins[i].op == RPLAN_OP_RUN;
    int builtins = has_body && uses_builtins(vm);
    for (int sl = 0; has_body && sl < FHR_LOC_SLOTS; sl++) {
        if (!(slots & (1ULL << sl)))
            continue;
        fhr_location loc = fhr_loc_from_slot(sl);
        if (loc.kind == FHR_LOC_CUDA && loc.index >= vm->b->ops->device_count(vm->b))
            continue;
        fhr_stream *s;
        if (vm_compute_stream(vm, loc, &s, NULL) == FHR_OK) {
            if (builtins)
                ensure_scratch(vm, loc, s, NULL);
            /* the reference that times this device's bodies: recorded, waited for, and
             * its completion taken as now */
            fhr_event *ev = NULL;
            if (st == FHR_OK && loc.kind == FHR_LOC_CUDA && !vm->tref[sl] &&
                vm->b->ops->event_create_timed && vm->b->ops->event_elapsed &&
                vm->b->ops->event_create_timed(vm->b, &ev, NULL) == FHR_OK) {
                fhr_error e2;
                fhr_error_init(&e2);
                if ((st = vm->b->ops->event_record(vm->b, ev, s, &e2)) == FHR_OK &&
                    (st = vm->b->ops->event_sync(vm->b, ev, &e2)) == FHR_OK) {
                    vm->tref[sl] = ev;
                    vm->tref_ns[sl] = vm_now_ns(vm);
                } else {
                    char lb[16];
                    vm->b->ops->event_destroy(vm->b, ev);
                    fhr_fail(err, st, "warm-up of %s (the event that times its bodies): %.500s",
                             fhr_loc_format(loc, lb, sizeof lb), e2.message);
                }
                fhr_error_clear(&e2);
            }
        }
        if (loc.kind == FHR_LOC_CUDA)
            vm_xfer_stream(vm, loc, NULL);
    }
    if (has_body && !vm->ntally_blocks) {
        uint64_t *t = vm_tally_slot(vm);
        (void)t;
        vm->tally_used = 0; /* keep the block; the slot was not used */
    }
    return st;
}

/* 1 when value i has a copy at loc (a failure reads as no copy: the lease then says why). */
static int resident(rplan_vm *vm, uint32_t i, fhr_location loc)
{
    int r = 0;
    return fhr_is_resident(vm->m, vm->h[i], loc, &r, NULL) == FHR_OK && r;
}

fhr_location vm_body_location(rplan_vm *vm, const vm_run *r)
{
    int ndev = vm->b->ops->device_count(vm->b);
    for (int d = 0; d < ndev && d < FHR_MAX_CUDA_DEVICES; d++) {
        int all = r->nvals > 0;
        for (size_t v = 0; v < r->nvals && all; v++)
            all = resident(vm, r->vals[v], fhr_loc_cuda(d));
        if (all)
            return fhr_loc_cuda(d);
    }
    fhr_location pin = fhr_loc_pinned();
    int all = 1;
    for (size_t v = 0; v < r->nvals && all; v++)
        all = resident(vm, r->vals[v], pin);
    return all && r->nvals ? pin : fhr_loc_host();
}

/* A verify call's checks, counted once it has run (a call that failed checked nothing, so
 * a failed run's integrity line counts only the checks made before the failure). */
static void count_checks(rplan_vm *vm, const vm_run *r)
{
    if (strcmp(r->in->str, "verify") != 0)
        return;
    vm->checks_total += r->nvals;
    for (size_t v = 0; v < r->nvals; v++)
        if (vm->vinfo[r->vals[v]].seeded)
            FOR_OPEN_RECORDS(vm, rec)
            rec->regen_checks++;
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
        if (strcmp(r->in->str, "ckks.keyswitch") == 0)
            for (size_t a = 0; a < r->nargs; a++)
                if (r->args[a].kind == RPLAN_ARG_INT && r->args[a].imm > RPLAN_KEYSWITCH_MAX_BATCH) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "batch %llu is above the kernel's limit of %u",
                             (unsigned long long)r->args[a].imm, RPLAN_KEYSWITCH_MAX_BATCH);
                    return body_fail(r, FHR_E_INVALID, err, msg);
                }
        double model = vm_model_body(vm, r);
        FOR_OPEN_RECORDS(vm, rec)
        rec->model_body_s += model;
        /* check leases the values too, on the model backend: the same copies must be
         * there (a run fails where check does) and the same copies are touched */
        fhr_location loc = at[k];
        fhr_stream *s;
        fhr_status st;
        if ((st = vm_compute_stream(vm, loc, &s, err)) != FHR_OK)
            return body_fail_keep(r, st, err);
        int builtin = kctx == vm; /* the VM's own kernels (touch among them) */
        if (!vm->explain && builtin && (st = ensure_scratch(vm, loc, s, err)) != FHR_OK)
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
        if (vm->explain) { /* nothing runs: the lease ends at once (as the body did) */
            if (lease) {
                st = fhr_lease_release(lease, err);
                fhr_lease_destroy(lease);
                fhr_reap(vm->m, NULL, NULL);
                if (st)
                    return body_fail_keep(r, st, err);
            }
            count_checks(vm, r);
            continue;
        }
        char nm[96], lb[16];
        snprintf(nm, sizeof nm, "%.70s @ %s", r->in->str, fhr_loc_format(loc, lb, sizeof lb));
        vm_mark *mk = vm_new_mark(vm, 0, vm->b->ops->stream_id(vm->b, s), nm);
        if (!mk)
            st = fhr_fail(err, FHR_E_NOMEM, "out of host memory");
        else {
            mk->slot = fhr_loc_slot(loc); /* its device (link.c's compute per device) */
            for (size_t v = 0; v < r->nvals && mk->nv < 16; v++)
                mk->v[mk->nv++] = r->vals[v]; /* the values it reads (the trace's args) */
            int timed = 0; /* device events, no host round trip on the stream */
            vm_link_read(vm, r, loc); /* the copies it reads are free when it ends */
            st = vm_mark_timed(vm, mk, loc, s, &timed, err);
            if (st == FHR_OK && !timed)
                st = vm->b->ops->launch_host(vm->b, s, vm_mark_begin, mk, err);
        }
        if (st)
            body_fail_keep(r, st, err);
        if (st == FHR_OK) {
            rplan_kernel_call c = {
                vm, vm->m, vm->b, r->in->str, loc, s, vm->is_cuda && loc.kind == FHR_LOC_CUDA,
                r->nvals, vals, infos, r->nargs, r->args,
                builtin ? vm->scratch[fhr_loc_slot(loc)] : NULL, builtin ? vm->scratch_nbytes : 0,
                r->in->line, r->in->col};
            fhr_error ke;
            fhr_error_init(&ke);
            vm_range_push(vm, "body", nm);
            st = fn(kctx, &c, &ke);
            vm_range_pop(vm);
            if (st == FHR_OK && vm_virtual(vm)) /* simulated time: the kernel model's duration */
                st = vm->b->ops->advance(vm->b, s, (uint64_t)llround(model * 1e9), &ke);
            if (st) {
                body_fail(r, st, err, ke.message);
                fhr_error_clear(&ke);
            } else {
                count_checks(vm, r);
                st = mk->ev1 ? vm->b->ops->event_record(vm->b, mk->ev1, s, err)
                             : vm->b->ops->launch_host(vm->b, s, vm_mark_end, mk, err);
                if (st)
                    body_fail_keep(r, st, err);
            }
        }
        if (lease) { /* a lease that cannot end fails the body (destroy then waits) */
            fhr_error re;
            fhr_error_init(&re);
            fhr_status rs = fhr_lease_release(lease, &re);
            if (rs && st == FHR_OK) {
                char msg[560];
                snprintf(msg, sizeof msg, "cannot release its lease: %s", re.message);
                st = body_fail(r, rs, err, msg);
            }
            fhr_error_clear(&re);
            fhr_lease_destroy(lease);
        }
        if (st)
            return st;
    }
    return FHR_OK;
}
