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
#include <string.h>

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

/* The report's entry for loc, added in the first free place; NULL when full. */
static rplan_device_figures *dev_entry(rplan_vm_report *rep, fhr_location loc)
{
    for (size_t i = 0; i < rep->ndevices; i++)
        if (fhr_loc_equal(rep->devices[i].loc, loc))
            return &rep->devices[i];
    if (rep->ndevices == RPLAN_MAX_PEAKS)
        return NULL;
    rplan_device_figures *d = &rep->devices[rep->ndevices++];
    memset(d, 0, sizeof *d);
    d->loc = loc;
    return d;
}

void vm_link_resolve(rplan_vm *vm, rplan_vm_report *rep)
{
    vm_link_win *w = malloc((vm->nmarks ? vm->nmarks : 1) * sizeof *w);
    if (!w)
        return;
    vm_link_figures f = {0};
    uint64_t windows = 0;
    /* inside the run: before its start, or after now (a device clock read against the
     * host's can run a little ahead), the figures count nothing */
    double base = (double)vm->t_begin * 1e-9, now = (double)vm_now_ns(vm) * 1e-9;
    for (int sl = 0; sl < FHR_LOC_SLOTS; sl++) {
        size_t n = 0;
        for (size_t i = 0; i < vm->nmarks; i++) {
            vm_mark *mk = vm->marks[i];
            if (mk->kind != 1 || mk->slot != sl || !mk->t1 || mk->t1 < mk->t0)
                continue;
            uint64_t ready = 0;
            if (mk->after && mk->after <= vm->nmarks && vm->marks[mk->after - 1]->t1)
                ready = vm->marks[mk->after - 1]->t1;
            vm_link_win x = {(double)mk->t0 * 1e-9, (double)mk->t1 * 1e-9, (double)ready * 1e-9};
            x.open = x.open > base ? (x.open < now ? x.open : now) : base;
            x.end = x.end > base ? (x.end < now ? x.end : now) : base;
            x.ready = x.ready < now ? x.ready : now;
            w[n++] = x;
            /* the trace shows the window from when its copies could begin */
            if (ready > mk->t0)
                mk->t0 = ready < mk->t1 ? ready : mk->t1;
        }
        vm_link_figures g = {0};
        vm_link_measure(w, n, &g);
        rplan_device_figures *d = n ? dev_entry(rep, fhr_loc_from_slot(sl)) : NULL;
        if (d) {
            d->link_windows = n;
            d->link_busy_s = g.busy_s;
            d->link_idle_s = g.idle_s;
            d->link_ready_idle_s = g.ready_idle_s;
        }
        f.busy_s += g.busy_s;
        f.idle_s += g.idle_s;
        f.ready_idle_s += g.ready_idle_s;
        windows += n;
    }
    free(w);
    rep->link_windows = windows;
    rep->link_busy_s = f.busy_s;
    rep->link_idle_s = f.idle_s;
    rep->link_ready_idle_s = f.ready_idle_s;
}

static int cmp_span(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The time covered by spans [s[2i], s[2i+1]] (sorted here), each cut to [lo, hi]:
 * overlapping spans count once. */
static double covered(double *s, size_t n, double lo, double hi)
{
    qsort(s, n, 2 * sizeof *s, cmp_span);
    double total = 0, a = 0, z = 0;
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        double x = s[2 * i] > lo ? s[2 * i] : lo, y = s[2 * i + 1] < hi ? s[2 * i + 1] : hi;
        if (y <= x)
            continue;
        if (open && x <= z) {
            if (y > z)
                z = y;
            continue;
        }
        if (open)
            total += z - a;
        a = x;
        z = y;
        open = 1;
    }
    return open ? total + z - a : total;
}

/* Per device: its bodies' time (each device runs its bodies on one compute stream; bodies
 * that overlap count once) and its regeneration, its link's bytes at the rated bandwidths
 * (no faster than its transfer stream was measured busy: a bound the run itself beat
 * would be no bound), and the larger of the two. Devices run side by side, so the run
 * takes at least the largest device's bound. */
void vm_figures_resolve(rplan_vm *vm, rplan_vm_report *rep)
{
    double lo = (double)vm->t_begin * 1e-9, hi = lo + rep->total.time_s;
    double *span = malloc((vm->nmarks ? vm->nmarks : 1) * 2 * sizeof *span);
    for (int sl = 0; sl < FHR_LOC_SLOTS; sl++) {
        size_t n = 0;
        for (size_t i = 0; span && i < vm->nmarks; i++) {
            const vm_mark *mk = vm->marks[i];
            if (mk->kind != 0 || mk->slot != sl || !mk->t1 || mk->t1 < mk->t0)
                continue;
            span[2 * n] = (double)mk->t0 * 1e-9;
            span[2 * n + 1] = (double)mk->t1 * 1e-9;
            n++;
        }
        if (!n && !vm->dev_pcie[sl] && !vm->dev_peer[sl] && !vm->dev_regen[sl])
            continue;
        rplan_device_figures *d = dev_entry(rep, fhr_loc_from_slot(sl));
        if (!d)
            continue;
        d->bodies = n;
        d->compute_s = n ? covered(span, n, lo, hi) : 0;
        d->regen_bytes = vm->dev_regen[sl];
        d->regen_s = rep->gen_gbps > 0 ? (double)d->regen_bytes / (rep->gen_gbps * 1e9) : 0;
        d->pcie_bytes = vm->dev_pcie[sl];
        d->peer_bytes = vm->dev_peer[sl];
        d->pcie_s = rep->pinned_gbps > 0 ? (double)d->pcie_bytes / (rep->pinned_gbps * 1e9) : 0;
        d->peer_s = rep->peer_gbps > 0 ? (double)d->peer_bytes / (rep->peer_gbps * 1e9) : 0;
        d->link_s = d->pcie_s > d->peer_s ? d->pcie_s : d->peer_s;
        if (d->link_windows && d->link_busy_s < d->link_s)
            d->link_s = d->link_busy_s;
    }
    free(span);
    /* in location order, whatever order the link's figures came in */
    for (size_t a = 1; a < rep->ndevices; a++)
        for (size_t b = a; b > 0 && fhr_loc_slot(rep->devices[b].loc) <
                                        fhr_loc_slot(rep->devices[b - 1].loc); b--) {
            rplan_device_figures x = rep->devices[b];
            rep->devices[b] = rep->devices[b - 1];
            rep->devices[b - 1] = x;
        }
    rep->lower_bound_s = 0;
    for (size_t i = 0; i < rep->ndevices; i++) {
        rplan_device_figures *d = &rep->devices[i];
        double c = d->compute_s + d->regen_s;
        d->bound_s = c > d->link_s ? c : d->link_s;
        if (d->bound_s > rep->lower_bound_s)
            rep->lower_bound_s = d->bound_s;
    }
    rep->ratio = rep->lower_bound_s > 0 ? rep->total.time_s / rep->lower_bound_s : 0;
}

long vm_value_index(const rplan_vm *vm, fhr_handle h)
{
    /* values are made in program order: serials usually follow it */
    if (h.serial >= 1 && h.serial <= vm->nvals && fhr_handle_equal(vm->h[h.serial - 1], h))
        return (long)(h.serial - 1);
    for (size_t v = 0; v < vm->nvals; v++)
        if (fhr_handle_equal(vm->h[v], h))
            return (long)v;
    return -1;
}
