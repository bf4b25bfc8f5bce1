/* runtime/vm/trace.c — the timeline: stream markers (timestamp pairs written on a stream),
 * host-side slices, evictions, charged-bytes samples, and their Chrome trace JSON
 * (rplan_vm_trace_json). */
#include "runtime/vm/internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A host wait for a body in flight, begun at t0: counted by reason, and a slice on the
 * host's track of the trace. */
void vm_host_waited(rplan_vm *vm, int why, uint64_t t0)
{
    static const char *const names[RPLAN_WAITS] = {
        "wait: prefetch bound", "wait: MIN's victim in flight", "wait: room held by bodies",
        "wait: a settled copy evicted"};
    uint64_t t1 = vm_now_ns(vm);
    if (why < 0 || why >= RPLAN_WAITS)
        return;
    vm->waits[why]++;
    vm->wait_ns[why] += t1 - t0;
    vm_add_slice(vm, t0, t1, 0, "wait", names[why]);
}

fhr_status vm_add_sample(rplan_vm *vm, uint64_t t, fhr_location loc, uint64_t charged,
                         int has_budget, uint64_t budget)
{
    if (vm->nsamples == vm->capsamples) {
        size_t cap = vm->capsamples ? vm->capsamples * 2 : 64;
        vm_sample *n = realloc(vm->samples, cap * sizeof *n);
        if (!n)
            return FHR_E_NOMEM;
        vm->samples = n;
        vm->capsamples = cap;
    }
    vm->samples[vm->nsamples++] = (vm_sample){t, loc, charged, budget, has_budget};
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
    mk->b = vm->b;
    mk->tid = tid;
    snprintf(mk->name, sizeof mk->name, "%s", name);
    mk->nstages = vm->depth;
    for (size_t i = 0; i < vm->depth; i++)
        mk->stages[i] = vm->stack[i];
    vm->marks[vm->nmarks++] = mk;
    return mk;
}

/* Work on a device with a timing reference (a body, a transfer window) is timed by two
 * device events recorded around it on its stream: no host function stalls the stream.
 * Records the first; *timed 0: the device has no reference (use host functions). */
fhr_status vm_mark_timed(rplan_vm *vm, vm_mark *mk, fhr_location loc, fhr_stream *s, int *timed,
                         fhr_error *err)
{
    *timed = 0;
    int sl = fhr_loc_slot(loc);
    if (loc.kind != FHR_LOC_CUDA || sl < 0 || !vm->tref[sl])
        return FHR_OK;
    const fhr_backend_ops *o = vm->b->ops;
    fhr_status st = o->event_create_timed(vm->b, &mk->ev0, err);
    if (st == FHR_OK)
        st = o->event_create_timed(vm->b, &mk->ev1, err);
    if (st == FHR_OK)
        st = o->event_record(vm->b, mk->ev0, s, err);
    if (st != FHR_OK) {
        if (mk->ev0)
            o->event_destroy(vm->b, mk->ev0);
        if (mk->ev1)
            o->event_destroy(vm->b, mk->ev1);
        mk->ev0 = mk->ev1 = NULL;
        return st;
    }
    mk->slot = sl;
    *timed = 1;
    return FHR_OK;
}

/* After the final synchronisation: the host times of the bodies timed by device events,
 * from their device's reference (a mark whose events cannot be read keeps no time). */
void vm_marks_time(rplan_vm *vm)
{
    for (size_t i = 0; i < vm->nmarks; i++) {
        vm_mark *mk = vm->marks[i];
        if (!mk->ev0 || !mk->ev1 || !vm->tref[mk->slot])
            continue;
        double a = 0, z = 0;
        if (vm->b->ops->event_elapsed(vm->b, vm->tref[mk->slot], mk->ev0, &a, NULL) == FHR_OK &&
            vm->b->ops->event_elapsed(vm->b, vm->tref[mk->slot], mk->ev1, &z, NULL) == FHR_OK &&
            a >= 0 && z >= a) {
            mk->t0 = vm->tref_ns[mk->slot] + (uint64_t)(a * 1e9);
            mk->t1 = vm->tref_ns[mk->slot] + (uint64_t)(z * 1e9);
        }
        vm->b->ops->event_destroy(vm->b, mk->ev0);
        vm->b->ops->event_destroy(vm->b, mk->ev1);
        mk->ev0 = mk->ev1 = NULL;
    }
}

/* Host functions on the mark's stream: the backend's clock there (simulated time at the
 * point of the stream they run at, on a virtual clock). */
void vm_mark_begin(void *arg) { ((vm_mark *)arg)->t0 = fhr_backend_clock_ns(((vm_mark *)arg)->b, NULL); }
void vm_mark_end(void *arg) { ((vm_mark *)arg)->t1 = fhr_backend_clock_ns(((vm_mark *)arg)->b, NULL); }

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
        int instant = !strcmp(s->cat, "eviction");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", s->name);
        cJSON_AddStringToObject(e, "cat", s->cat);
        cJSON_AddStringToObject(e, "ph", instant ? "i" : "X");
        cJSON_AddNumberToObject(e, "ts", s->t0 >= base ? (double)(s->t0 - base) / 1e3 : 0);
        if (instant)
            cJSON_AddStringToObject(e, "s", "t");
        else
            cJSON_AddNumberToObject(e, "dur", (double)(s->t1 - s->t0) / 1e3);
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", (double)s->tid);
        cJSON_AddItemToArray(ev, e);
    }
    /* charged bytes per location: one counter track each, with its budget */
    for (size_t i = 0; i < vm->nsamples; i++) {
        const vm_sample *s = &vm->samples[i];
        char nm[48], lb[16];
        snprintf(nm, sizeof nm, "charged %s", fhr_loc_format(s->loc, lb, sizeof lb));
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", nm);
        cJSON_AddStringToObject(e, "cat", "charged");
        cJSON_AddStringToObject(e, "ph", "C");
        cJSON_AddNumberToObject(e, "ts", s->t >= base ? (double)(s->t - base) / 1e3 : 0);
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON *a = cJSON_AddObjectToObject(e, "args");
        cJSON_AddNumberToObject(a, "bytes", (double)s->charged);
        if (s->has_budget)
            cJSON_AddNumberToObject(a, "budget", (double)s->budget);
        cJSON_AddItemToArray(ev, e);
    }
    cJSON_AddStringToObject(o, "displayTimeUnit", "ms");
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}
