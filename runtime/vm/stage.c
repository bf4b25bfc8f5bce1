/* runtime/vm/stage.c — stage records: opening, closing and resolving them, transfers and
 * peaks accounted to every open record, and verify-failure tallies read without host waits. */
#include "runtime/vm/internal.h"
#include "runtime/manager/query.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value as a trace slice names it: its declared name, else its handle. */
static const char *slice_value(const rplan_vm *vm, fhr_handle h, char *buf, size_t cap)
{
    long i = vm_value_index(vm, h);
    rplan_value_info vi;
    if (i >= 0 && rplan_value(vm->p, (size_t)i, &vi) == FHR_OK && vi.name && vi.name[0])
        snprintf(buf, cap, "%s", vi.name);
    else
        snprintf(buf, cap, "handle #%llu", (unsigned long long)h.serial);
    return buf;
}

static int slot_of(fhr_location loc)
{
    int sl = fhr_loc_slot(loc);
    return sl >= 0 && sl < FHR_LOC_SLOTS ? sl : -1;
}

/* Value v's charges per slot (resid_cut), made on first use; NULL without memory (the
 * residency counter then takes the whole value's size). */
static uint64_t *resid_cut_of(rplan_vm *vm, size_t v)
{
    if (!vm->resid_cut)
        vm->resid_cut = calloc(vm->nvals * FHR_LOC_SLOTS, sizeof *vm->resid_cut);
    return vm->resid_cut ? vm->resid_cut + v * FHR_LOC_SLOTS : NULL;
}

/* Tracing: one change of the bytes present at a location. */
static void resid_add(rplan_vm *vm, const fhr_transition *t, fhr_location loc, int arrive,
                      size_t win, uint64_t bytes)
{
    int sl = slot_of(loc);
    if (sl < 0 || !bytes ||
        !fhr_grow((void **)&vm->resid, &vm->capresid, vm->nresid, sizeof *vm->resid, 64))
        return; /* out of memory: the residency counter misses this change */
    size_t after = arrive ? 0 : vm_link_last_read(vm, t->handle, loc);
    vm->resid[vm->nresid++] = (vm_resid){t->t_end_ns, win, after, sl, arrive, bytes};
}

/* One transition's bytes per device link (the per-device bound) and, when tracing, in the
 * transfer window that carried it (its bytes and values) and in the residency changes. */
static void vm_account_link(rplan_vm *vm, const fhr_transition *t)
{
    int to = slot_of(t->to), from = t->has_from ? slot_of(t->from) : -1;
    fhr_direction d = t->has_from ? fhr_direction_of(t->from, t->to) : FHR_DIR_NONE;
    if (to >= 0) {
        vm->dev_regen[to] += t->regen_nbytes;
        if (t->loaded && t->to.kind == FHR_LOC_CUDA)
            vm->dev_pcie[to] += t->nbytes;
        else if (!t->loaded && d == FHR_DIR_H2D)
            vm->dev_pcie[to] += t->nbytes;
        else if (!t->loaded && d == FHR_DIR_D2D)
            vm->dev_peer[to] += t->nbytes;
    }
    if (!t->loaded && d == FHR_DIR_D2H && from >= 0)
        vm->dev_pcie[from] += t->nbytes;
    if (!vm->o.trace)
        return;
    size_t win = 0;
    for (size_t i = 0; vm->cur_win && i < vm->ncur_win && !win; i++)
        if (vm->cur_win[i] && vm->cur_win[i]->tid == t->stream_id)
            win = i + 1;
    vm_mark *w = win ? vm->cur_win[win - 1] : NULL;
    size_t wi = 0; /* 1 + the window's index among the marks */
    for (size_t i = vm->nmarks; w && i-- > 0 && !wi;)
        if (vm->marks[i] == w)
            wi = i + 1;
    long v = vm_value_index(vm, t->handle);
    uint64_t charge = v >= 0 ? vm->vinfo[v].nbytes : t->nbytes + t->regen_nbytes;
    int copies = t->loaded || t->nbytes || t->regen_nbytes;
    if (w && copies) {
        if (t->loaded || d == FHR_DIR_H2D || d == FHR_DIR_H2H)
            w->bytes_h2d += t->nbytes;
        else if (d == FHR_DIR_D2D)
            w->bytes_d2d += t->nbytes;
        else if (d == FHR_DIR_D2H)
            w->bytes_d2h += t->nbytes;
        int seen = 0;
        for (uint32_t k = 0; k < w->nv; k++)
            seen |= v >= 0 && w->v[k] == (uint32_t)v;
        if (v >= 0 && !seen && w->nv < 16)
            w->v[w->nv++] = (uint32_t)v;
    }
    if (v < 0)
        return;
    /* where each value has a copy: adopted values start at their initial location */
    if (!vm->resid_at && (vm->resid_at = calloc(vm->nvals, sizeof *vm->resid_at)))
        for (size_t i = 0; i < vm->nvals; i++)
            if (vm->vinfo[i].has_initial && slot_of(vm->vinfo[i].initial) >= 0)
                vm->resid_at[i] = 1ull << slot_of(vm->vinfo[i].initial);
    if (!vm->resid_at)
        return;
    uint64_t *at = &vm->resid_at[v];
    /* a limb-cut value's copies are charged what they hold: kept per slot */
    uint64_t *cut = vm->vinfo[v].limb_q ? resid_cut_of(vm, (size_t)v) : NULL;
    if (t->kind == FHR_ACT_DISCARD) { /* every copy goes */
        for (int sl = 0; sl < FHR_LOC_SLOTS; sl++)
            if (*at & (1ull << sl))
                resid_add(vm, t, fhr_loc_from_slot(sl), 0, 0, cut && cut[sl] ? cut[sl] : charge);
        *at = 0;
        return;
    }
    if (t->kind == FHR_ACT_DROP && t->dropped_nbytes) { /* a drop of parts: the copy stays */
        if (cut && from >= 0 && (*at & (1ull << from)) && cut[from] >= t->dropped_nbytes) {
            resid_add(vm, t, t->from, 0, 0, t->dropped_nbytes);
            cut[from] -= t->dropped_nbytes;
        }
        return;
    }
    if (t->has_from && from >= 0 && t->kind != FHR_ACT_ENSURE && (*at & (1ull << from)) &&
        (t->kind == FHR_ACT_DROP || from != to)) {
        resid_add(vm, t, t->from, 0, t->kind == FHR_ACT_MOVE ? wi : 0,
                  cut && cut[from] ? cut[from] : charge);
        *at &= ~(1ull << from);
    }
    if (copies && to >= 0 && t->kind != FHR_ACT_DROP && t->replaced_nbytes && (*at & (1ull << to)))
        resid_add(vm, t, t->to, 0, 0, t->replaced_nbytes); /* a grow: the old copy goes */
    if (copies && to >= 0 && t->kind != FHR_ACT_DROP &&
        (!(*at & (1ull << to)) || t->replaced_nbytes)) {
        uint64_t c = cut && t->charged_nbytes ? t->charged_nbytes : charge;
        resid_add(vm, t, t->to, 1, wi, c);
        *at |= 1ull << to;
        if (cut)
            cut[to] = c;
    }
}

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
        vm_account_link(vm, t);
        FOR_OPEN_RECORDS(vm, r)
        {
            r->regen_bytes += t->regen_nbytes;
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
        if (t->phase == FHR_PHASE_RECLAIM && vm->o.trace) {
            char a[16], b[16], nm[112], vn[64];
            slice_value(vm, t->handle, vn, sizeof vn);
            if (t->has_from && t->nbytes)
                snprintf(nm, sizeof nm, "evict %s %s -> %s", vn,
                         fhr_loc_format(t->from, a, sizeof a), fhr_loc_format(t->to, b, sizeof b));
            else
                snprintf(nm, sizeof nm, "evict %s: %s at %s", vn, fhr_action_kind_name(t->kind),
                         fhr_loc_format(t->to, a, sizeof a));
            vm_add_slice(vm, t->t_start_ns, t->t_end_ns, t->stream_id, "eviction", nm);
        }
        vm->bytes_moved += t->nbytes;
        if (t->nbytes && !ours) {
            char a[16], b[16], nm[112], vn[64];
            slice_value(vm, t->handle, vn, sizeof vn);
            if (t->loaded)
                snprintf(nm, sizeof nm, "load %s -> %s", vn, fhr_loc_format(t->to, b, sizeof b));
            else
                snprintf(nm, sizeof nm, "%s %s %s -> %s", fhr_action_kind_name(t->kind), vn,
                         fhr_loc_format(t->from, a, sizeof a), fhr_loc_format(t->to, b, sizeof b));
            if (vm_add_slice(vm, t->t_start_ns, t->t_end_ns, t->stream_id, "transfer", nm) ==
                    FHR_OK && vm->o.trace && vm->nslices) { /* the trace's args */
                vm_slice *sl = &vm->slices[vm->nslices - 1];
                sl->bytes = t->nbytes;
                sl->value = vm_value_index(vm, t->handle);
                sl->dir = t->loaded ? FHR_DIR_H2D : fhr_direction_of(t->from, t->to);
                sl->at = t->to;
            }
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
    /* the accounting alone: a snapshot would read every value after every request */
    fhr_loc_stats locs[FHR_LOC_SLOTS];
    size_t nlocs = 0;
    if (mgr_loc_stats(vm->m, locs, &nlocs, NULL) != FHR_OK)
        return;
    for (size_t i = 0; i < nlocs; i++) {
        const fhr_loc_stats *l = &locs[i];
        uint64_t v = l->used_bytes + l->reserved_bytes;
        int sl = slot_of(l->loc);
        if (vm->o.trace && !vm->resid_base_set && sl >= 0)
            vm->resid_base[sl] = l->used_bytes; /* what was there before the first scope */
        if (!v && !l->has_budget)
            continue;
        FOR_OPEN_RECORDS(vm, r)
        peak_update(r, l->loc, v, l->has_budget, l->budget_bytes);
        if (vm->o.trace)
            vm_add_sample(vm, vm_now_ns(vm), l->loc, v, l->has_budget, l->budget_bytes);
    }
    vm->resid_base_set = 1;
}

/* Reads the verify mismatch counters (streams must be synchronised). */
uint64_t vm_read_failures(rplan_vm *vm)
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
uint64_t *vm_tally_slot(rplan_vm *vm)
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
        uint64_t *slot = vm_tally_slot(vm);
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

fhr_status vm_stage_open(rplan_vm *vm, const char *name, int top)
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
    vm->stack_t0[vm->depth] = vm_now_ns(vm);
    vm->stage_t0[rec] = vm->stage_t1[rec] = vm->stack_t0[vm->depth];
    vm->stack_checks0[vm->depth] = vm->checks_total;
    tally_counters(vm, rec, -1);
    vm->depth++;
    vm->top_open = top;
    vm_sample_peaks(vm);
    vm_range_push(vm, "stage", r->name);
    return FHR_OK;
}

void vm_stage_close(rplan_vm *vm)
{
    if (!vm->depth)
        return;
    vm_range_pop(vm);
    vm_sample_peaks(vm);
    vm->depth--;
    int rec = vm->stack[vm->depth];
    rplan_stage_report *r = &vm->stages[rec];
    uint64_t t1 = vm_now_ns(vm);
    if (t1 > vm->stage_t1[rec])
        vm->stage_t1[rec] = t1;
    r->checks = vm->checks_total - vm->stack_checks0[vm->depth];
    tally_counters(vm, rec, +1);
    vm->top_open = 0;
}

/* After the final synchronisation: stage times from the markers of their work, and
 * verify failures from the tallies. */
void vm_stage_resolve(rplan_vm *vm)
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
    /* the trace's stage slices begin with the stage's first work on a device (the host
     * opens a stage ahead of it) and keep the host's opening in their args */
    uint64_t *d0 = calloc(vm->nstages ? vm->nstages : 1, sizeof *d0);
    for (size_t i = 0; d0 && i < vm->nmarks; i++) {
        const vm_mark *mk = vm->marks[i];
        if (!mk->t1 || mk->t1 < mk->t0)
            continue;
        for (size_t k = 0; k < mk->nstages; k++) {
            int rec = mk->stages[k];
            if ((size_t)rec < vm->nstages && (!d0[rec] || mk->t0 < d0[rec]))
                d0[rec] = mk->t0;
        }
    }
    for (size_t rec = 0; rec < vm->nstages; rec++) {
        rplan_stage_report *r = &vm->stages[rec];
        r->time_s = (double)(vm->stage_t1[rec] - vm->stage_t0[rec]) / 1e9;
        uint64_t t0 = d0 && d0[rec] ? d0[rec] : vm->stage_t0[rec];
        if (vm->t_begin) {
            r->begin_s = t0 > vm->t_begin ? (double)(t0 - vm->t_begin) / 1e9 : 0;
            r->end_s = vm->stage_t1[rec] > vm->t_begin
                           ? (double)(vm->stage_t1[rec] - vm->t_begin) / 1e9 : 0;
        }
        if (vm_add_slice(vm, t0, vm->stage_t1[rec], 0, "stage", r->name) == FHR_OK &&
            vm->nslices && vm->o.trace)
            vm->slices[vm->nslices - 1].host_t0 = vm->stage_t0[rec];
    }
    free(d0);
}

/* Work outside any stage is reported under "(top level)". */
fhr_status vm_ensure_record(rplan_vm *vm)
{
    return vm->depth ? FHR_OK : vm_stage_open(vm, "(top level)", 1);
}
