/* runtime/vm/objective.c — the time objective's modelled timeline (rplan_vm_opts.objective):
 * one link, one compute stream, the requests' loads and bodies, and the holds that make
 * a decision see the copies the model's bodies still read, in explain mode and in a run.
 *
 * The model is a pure function of the program and the profile: loads take their bytes at
 * the bandwidth profile (pinned_gbps, else FHEPLAN_PINNED_GBPS, else 55.5 GB/s: never a
 * measured figure), bodies the kernel model's time. A request's loads start when the
 * link is free and the host has got there (the host moves only by waiting); its bodies
 * start when its loads are in and the bodies before it are done. Copies read by bodies
 * the model has not finished when the loads start are held while the request is decided,
 * so the decision is the same on every device; a run first waits for every real body the
 * model has finished (request.c), so real protection never adds to the holds. */
#include "runtime/vm/internal.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

#define VM_MODEL_AHEAD 256

int vm_objective_time(const rplan_vm *vm, unsigned policy)
{
    return vm->o.objective == RPLAN_OBJECTIVE_TIME && policy < vm->npols &&
           strcmp(fhr_policy_name(vm->pols[policy]), "lookahead") == 0;
}

void vm_model_reset(rplan_vm *vm)
{
    vm->nmflight = 0;
    vm->m_link = vm->m_comp = vm->m_host = vm->m_idle = 0;
    vm->m_loaded = 0;
    vm->m_gbps = vm_profile_gbps(vm); /* the declared profile, as check's */
}

int vm_reads_set(fhr_handle **hs, fhr_location **at, const fhr_requirement *rq, size_t n)
{
    *hs = malloc((n ? n : 1) * sizeof **hs);
    *at = malloc((n ? n : 1) * sizeof **at);
    if (!*hs || !*at) {
        vm_reads_free(*hs, *at);
        *hs = NULL;
        *at = NULL;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        (*hs)[i] = rq[i].handle;
        (*at)[i] = rq[i].at;
    }
    return 1;
}

void vm_reads_free(fhr_handle *hs, fhr_location *at)
{
    free(hs);
    free(at);
}

void vm_model_free(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->nmflight; i++)
        vm_reads_free(vm->mflight[i].hs, vm->mflight[i].at);
    free(vm->mflight);
    vm->mflight = NULL;
    vm->nmflight = vm->capmflight = 0;
}

/* When the next request's loads would start: the link is free and the host is there. */
double vm_model_issue(const rplan_vm *vm) { return vm->m_link > vm->m_host ? vm->m_link : vm->m_host; }

/* The host waits until t: bodies the model ends by then are done. */
void vm_model_advance(rplan_vm *vm, double t)
{
    if (t > vm->m_host)
        vm->m_host = t;
    size_t k = 0;
    for (size_t i = 0; i < vm->nmflight; i++)
        if (vm->mflight[i].end_s > t)
            vm->mflight[k++] = vm->mflight[i];
        else
            vm_reads_free(vm->mflight[i].hs, vm->mflight[i].at);
    vm->nmflight = k;
}

static int required(const fhr_requirement *rq, size_t nrq, fhr_handle h, fhr_location at)
{
    for (size_t j = 0; j < nrq; j++)
        if (fhr_handle_equal(rq[j].handle, h) && fhr_loc_equal(rq[j].at, at))
            return 1;
    return 0;
}

/* One hold per location over the copies the model's bodies still read (those the request
 * requires are protected by it already). */
fhr_status vm_model_hold(rplan_vm *vm, const fhr_requirement *rq, size_t nrq, fhr_hold ***out,
                         size_t *nout, fhr_error *err)
{
    *out = NULL;
    *nout = 0;
    size_t cap = 0;
    for (size_t i = 0; i < vm->nmflight; i++)
        cap += vm->mflight[i].nh;
    if (!cap)
        return FHR_OK;
    fhr_handle *hs = malloc(cap * sizeof *hs);
    fhr_location *at = malloc(cap * sizeof *at);
    char *done = calloc(cap, 1);
    fhr_hold **holds = calloc(cap, sizeof *holds);
    fhr_handle *grp = malloc(cap * sizeof *grp);
    if (!hs || !at || !done || !holds || !grp) {
        free(hs), free(at), free(done), free(holds), free(grp);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < vm->nmflight; i++)
        for (size_t k = 0; k < vm->mflight[i].nh; k++) {
            fhr_handle h = vm->mflight[i].hs[k];
            fhr_location l = vm->mflight[i].at[k];
            int dup = required(rq, nrq, h, l);
            for (size_t j = 0; j < n && !dup; j++)
                dup = fhr_handle_equal(hs[j], h) && fhr_loc_equal(at[j], l);
            if (!dup)
                hs[n] = h, at[n++] = l;
        }
    fhr_status st = FHR_OK;
    size_t nh = 0;
    for (size_t i = 0; i < n && st == FHR_OK; i++) {
        if (done[i])
            continue;
        size_t ng = 0;
        for (size_t j = i; j < n; j++)
            if (!done[j] && fhr_loc_equal(at[j], at[i]))
                grp[ng++] = hs[j], done[j] = 1;
        st = fhr_hold_acquire(vm->m, grp, ng, at[i], &holds[nh], err);
        if (st == FHR_OK)
            nh++;
    }
    free(hs), free(at), free(done), free(grp);
    if (st != FHR_OK) {
        vm_model_unhold(holds, nh);
        return st;
    }
    *out = holds;
    *nout = nh;
    return FHR_OK;
}

void vm_model_unhold(fhr_hold **hs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fhr_hold_destroy(hs[i]);
    free(hs);
}

/* A decided request on the timeline: `bytes` loaded from t_issue on, then its bodies
 * (has_body: there are some, and the model keeps their copies until *end). */
fhr_status vm_model_commit(rplan_vm *vm, double t_issue, uint64_t bytes, double model_s,
                           const fhr_requirement *rq, size_t nrq, int has_body, double *end,
                           fhr_error *err)
{
    double start = t_issue, ready = 0;
    if (bytes) {
        if (vm->m_loaded && start - vm->m_link > vm->m_idle)
            vm->m_idle = start - vm->m_link;
        vm->m_loaded = 1;
        vm->m_link = start + (double)bytes / (vm->m_gbps * 1e9);
        ready = vm->m_link;
    }
    /* the modelled host runs at most VM_MODEL_AHEAD requests ahead of the bodies, as a
     * run's host is bounded too: beyond, it waits for the oldest */
    while (vm->nmflight >= VM_MODEL_AHEAD)
        vm_model_advance(vm, vm->mflight[0].end_s);
    double s = vm->m_comp > ready ? vm->m_comp : ready;
    if (vm->m_host > s)
        s = vm->m_host;
    vm->m_comp = s + model_s;
    *end = vm->m_comp;
    if (!has_body)
        return FHR_OK;
    if (!fhr_grow((void **)&vm->mflight, &vm->capmflight, vm->nmflight, sizeof *vm->mflight, 16))
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    vm_mflight *f = &vm->mflight[vm->nmflight];
    if (!vm_reads_set(&f->hs, &f->at, rq, nrq))
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    f->nh = nrq; /* every copy: the decisions see all that the model's bodies read */
    f->end_s = vm->m_comp;
    vm->nmflight++;
    return FHR_OK;
}
