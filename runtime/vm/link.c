/* runtime/vm/link.c — how busy each device's transfer stream (its link) was, and whether it
 * idled while it had work it could have done. Every request or plan that moves copies onto
 * a device runs its transfers inside a window of two timed events on that device's
 * transfer stream. A window's copies may also wait on the device for the bodies reading
 * the copies its decision evicts (or, when the host waited for room, for the body it
 * waited behind): the window's room is free only when the last of those bodies ends. So
 * the link is busy from max(the stream reaching the window, its room free) to the
 * window's end, and an idle stretch counts as "ready" while some window not yet begun
 * already had its room: a transfer the run made later could have run then. */
#include "runtime/vm/internal.h"

#include <stdlib.h>

void vm_link_measure(const vm_link_win *w, size_t n, vm_link_figures *f)
{
    if (!n)
        return;
    /* the earliest room among the windows from i on (they run in stream order) */
    double *rmin = malloc(n * sizeof *rmin);
    if (!rmin)
        return;
    for (size_t i = n; i-- > 0;)
        rmin[i] = i + 1 < n && rmin[i + 1] < w[i].ready ? rmin[i + 1] : w[i].ready;
    double c = w[0].open; /* the stream's cursor: busy up to here */
    for (size_t i = 0; i < n; i++) {
        double s = w[i].open > w[i].ready ? w[i].open : w[i].ready;
        if (s > w[i].end)
            s = w[i].end;
        if (s > c) {
            double from = rmin[i] > c ? rmin[i] : c;
            f->idle_s += s - c;
            if (s > from)
                f->ready_idle_s += s - from;
            c = s;
        }
        if (w[i].end > c) {
            f->busy_s += w[i].end - c;
            c = w[i].end;
        }
    }
    free(rmin);
}

void vm_link_read(rplan_vm *vm, const vm_run *r, fhr_location loc)
{
    int sl = fhr_loc_slot(loc);
    if (sl < 0 || !vm->nmarks || !vm->nvals)
        return;
    if (!vm->last_read && !(vm->last_read = calloc(vm->nvals * FHR_LOC_SLOTS, sizeof *vm->last_read)))
        return; /* out of memory: the figures count the link's idle time as ready */
    for (size_t v = 0; v < r->nvals; v++)
        if (r->vals[v] < vm->nvals)
            vm->last_read[(size_t)r->vals[v] * FHR_LOC_SLOTS + (size_t)sl] = vm->nmarks;
}

size_t vm_link_last_read(const rplan_vm *vm, fhr_handle h, fhr_location loc)
{
    int sl = fhr_loc_slot(loc);
    if (!vm->last_read || sl < 0)
        return 0;
    for (size_t v = 0; v < vm->nvals; v++)
        if (fhr_handle_equal(vm->h[v], h))
            return vm->last_read[v * FHR_LOC_SLOTS + (size_t)sl];
    return 0;
}

void vm_link_resolve(rplan_vm *vm, rplan_vm_report *rep)
{
    vm_link_win *w = malloc((vm->nmarks ? vm->nmarks : 1) * sizeof *w);
    if (!w)
        return;
    vm_link_figures f = {0};
    uint64_t windows = 0;
    for (int sl = 0; sl < FHR_LOC_SLOTS; sl++) {
        size_t n = 0;
        for (size_t i = 0; i < vm->nmarks; i++) {
            vm_mark *mk = vm->marks[i];
            if (mk->kind != 1 || mk->slot != sl || !mk->t1 || mk->t1 < mk->t0)
                continue;
            uint64_t ready = 0;
            if (mk->after && mk->after <= vm->nmarks && vm->marks[mk->after - 1]->t1)
                ready = vm->marks[mk->after - 1]->t1;
            w[n++] = (vm_link_win){(double)mk->t0 * 1e-9, (double)mk->t1 * 1e-9,
                                   (double)ready * 1e-9};
            /* the trace shows the window from when its copies could begin */
            if (ready > mk->t0)
                mk->t0 = ready < mk->t1 ? ready : mk->t1;
        }
        vm_link_measure(w, n, &f);
        windows += n;
    }
    free(w);
    rep->link_windows = windows;
    rep->link_busy_s = f.busy_s;
    rep->link_idle_s = f.idle_s;
    rep->link_ready_idle_s = f.ready_idle_s;
}
