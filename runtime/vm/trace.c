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
    s->host_t0 = 0;
    s->bytes = 0;
    s->value = -1;
    s->dir = FHR_DIR_NONE;
    s->at = (fhr_location){FHR_LOC_INVALID, 0};
    s->cat = cat;
    snprintf(s->name, sizeof s->name, "%s", name);
    return FHR_OK;
}

/* A profiler range ("KIND NAME") through the backend (NVTX on CUDA; nothing elsewhere). */
void vm_range_push(rplan_vm *vm, const char *kind, const char *name)
{
    if (!vm->b->ops->range_push || vm->explain)
        return;
    char nm[160];
    snprintf(nm, sizeof nm, "%s %s", kind, name ? name : "");
    vm->b->ops->range_push(vm->b, nm);
}

void vm_range_pop(rplan_vm *vm)
{
    if (vm->b->ops->range_pop && !vm->explain)
        vm->b->ops->range_pop(vm->b);
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

/* ---- the Chrome trace-event JSON ------------------------------------------------- */

#define TR_STAGES ((uint64_t)1 << 20) /* the stages' track: no stream has this id */
#define TR_ROWS ((uint64_t)1 << 28)   /* rows for slices that overlap without nesting */

/* One complete slice of the trace before it is written: a host slice, or a mark. */
typedef struct tr_slice {
    uint64_t t0, t1, tid;
    const vm_slice *hs;  /* host slice, or NULL */
    const vm_mark *mk;   /* mark, or NULL */
    size_t mi;           /* the mark's index */
} tr_slice;

typedef struct tr {
    const rplan_vm *vm;
    cJSON *ev;
    uint64_t base;
} tr;

static double tr_us(const tr *t, uint64_t ns) { return ns >= t->base ? (double)(ns - t->base) / 1e3 : 0; }

static int tr_cmp(const void *a, const void *b)
{
    const tr_slice *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) /* the longer first: it encloses */
        return x->t1 > y->t1 ? -1 : 1;
    return 0;
}

static const char *loc_name(int slot, char *b, size_t n)
{
    return fhr_loc_format(fhr_loc_from_slot(slot), b, n);
}

/* The name of a track: the VM's streams by their role, the host's tracks, rows. */
static void track_name(const rplan_vm *vm, uint64_t tid, char *out, size_t n)
{
    char lb[16];
    if (tid >= TR_ROWS) {
        char base[96];
        uint64_t row = tid % 64;
        track_name(vm, (tid - TR_ROWS) / 64, base, sizeof base);
        snprintf(out, n, "%s, row %llu (overlapping)", base, (unsigned long long)row + 1);
        return;
    }
    if (tid == TR_STAGES) {
        snprintf(out, n, "stages");
        return;
    }
    if (tid == 0) {
        snprintf(out, n, "host: plans, requests, host waits");
        return;
    }
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        fhr_location loc = fhr_loc_from_slot(i);
        int dev = loc.kind == FHR_LOC_CUDA;
        loc_name(i, lb, sizeof lb);
        if (vm->compute[i] && vm->b->ops->stream_id(vm->b, vm->compute[i]) == tid) {
            if (dev)
                snprintf(out, n, "%s compute stream: bodies", lb);
            else
                snprintf(out, n, "%s: bodies run on the host over %s memory", lb, lb);
            return;
        }
        if (vm->xfer[i] && vm->b->ops->stream_id(vm->b, vm->xfer[i]) == tid) {
            if (dev)
                snprintf(out, n, "%s transfer stream: copies onto and off %s", lb, lb);
            else
                snprintf(out, n, "%s: copies into %s memory, on the host", lb, lb);
            return;
        }
    }
    snprintf(out, n, "stream %llu: the manager's own copies and evictions",
             (unsigned long long)tid);
}

/* Where a track sits: stages, the host, then per location its transfers and bodies. */
static int track_order(const rplan_vm *vm, uint64_t tid)
{
    if (tid >= TR_ROWS)
        return track_order(vm, (tid - TR_ROWS) / 64) + 1 + (int)(tid % 64);
    if (tid == TR_STAGES)
        return 0;
    if (tid == 0)
        return 100;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        int dev = fhr_loc_from_slot(i).kind == FHR_LOC_CUDA;
        int at = (dev ? 200 : 10000) + i * 200;
        if (vm->xfer[i] && vm->b->ops->stream_id(vm->b, vm->xfer[i]) == tid)
            return at;
        if (vm->compute[i] && vm->b->ops->stream_id(vm->b, vm->compute[i]) == tid)
            return at + 100;
    }
    return 20000;
}

static void meta(cJSON *ev, const char *what, uint64_t tid, const char *key, cJSON *val)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", what);
    cJSON_AddStringToObject(m, "ph", "M");
    cJSON_AddNumberToObject(m, "pid", 1);
    cJSON_AddNumberToObject(m, "tid", (double)tid);
    cJSON_AddItemToObject(cJSON_AddObjectToObject(m, "args"), key, val);
    cJSON_AddItemToArray(ev, m);
}

static void add_values(const rplan_vm *vm, cJSON *args, const vm_mark *mk)
{
    cJSON *vs = cJSON_AddArrayToObject(args, "values");
    for (uint32_t k = 0; k < mk->nv; k++)
        if (mk->v[k] < vm->nvals && vm->vinfo[mk->v[k]].name)
            cJSON_AddItemToArray(vs, cJSON_CreateString(vm->vinfo[mk->v[k]].name));
}

/* A mark's args: a body's values and device; a transfer window's bytes by link, values,
 * direction and rate. */
static cJSON *mark_args(const tr *t, const vm_mark *mk, uint64_t t0, uint64_t t1)
{
    const rplan_vm *vm = t->vm;
    cJSON *a = cJSON_CreateObject();
    char lb[16];
    int sl = mk->slot >= 0 && mk->slot < FHR_LOC_SLOTS ? mk->slot : 0;
    cJSON_AddStringToObject(a, "location", loc_name(sl, lb, sizeof lb));
    add_values(vm, a, mk);
    if (mk->kind == 0)
        return a;
    uint64_t bytes = mk->bytes_h2d + mk->bytes_d2d + mk->bytes_d2h;
    cJSON_AddNumberToObject(a, "bytes", (double)bytes);
    cJSON_AddNumberToObject(a, "bytes_pcie_in", (double)mk->bytes_h2d);
    cJSON_AddNumberToObject(a, "bytes_peer_in", (double)mk->bytes_d2d);
    cJSON_AddNumberToObject(a, "bytes_pcie_out", (double)mk->bytes_d2h);
    const char *dir = "none";
    if (bytes) {
        if (mk->bytes_d2d >= mk->bytes_h2d && mk->bytes_d2d >= mk->bytes_d2h)
            dir = "peer: from another device";
        else if (mk->bytes_h2d >= mk->bytes_d2h)
            dir = "PCIe: host to device";
        else
            dir = "PCIe: device to host";
    }
    cJSON_AddStringToObject(a, "direction", dir);
    cJSON_AddNumberToObject(a, "gbps", t1 > t0 ? (double)bytes / (double)(t1 - t0) : 0);
    /* when its room was free: the end of the body it waited behind (0: when decided) */
    const vm_mark *rd = mk->after && mk->after <= vm->nmarks ? vm->marks[mk->after - 1] : NULL;
    cJSON_AddNumberToObject(a, "room_free_us", rd && rd->t1 ? tr_us(t, rd->t1) : 0);
    return a;
}

/* Slices of one track that overlap without nesting go to rows of their own (Perfetto
 * nests the slices of a thread); on a stream, where work runs in order, an overlap of a few
 * microseconds is the two clocks' disagreement and is cut instead. */
static void nest_rows(tr_slice *s, size_t n)
{
    enum { ROWS = 64, DEPTH = 64 };
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j].tid == s[i].tid)
            j++;
        uint64_t tid = s[i].tid;
        int stream = tid != 0 && tid != TR_STAGES;
        uint64_t stack[ROWS][DEPTH];
        int depth[ROWS] = {0};
        for (size_t k = i; k < j; k++) {
            tr_slice *e = &s[k];
            if (stream && k > i && e->t0 < s[k - 1].t1 && e->t1 > s[k - 1].t1 &&
                s[k - 1].tid == tid && s[k - 1].t1 - e->t0 < 20000)
                e->t0 = s[k - 1].t1; /* clocks, not overlap */
            int row = -1;
            for (int r = 0; r < ROWS && row < 0; r++) {
                while (depth[r] && stack[r][depth[r] - 1] <= e->t0)
                    depth[r]--;
                if ((!depth[r] || stack[r][depth[r] - 1] >= e->t1) && depth[r] < DEPTH)
                    row = r;
            }
            if (row < 0)
                row = ROWS - 1, depth[row] = 0; /* out of rows: the last one restarts */
            stack[row][depth[row]++] = e->t1;
            if (row)
                e->tid = TR_ROWS + tid * 64 + (uint64_t)row;
        }
        i = j;
    }
}

static int res_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The bytes present at each location over time: a counter per location that was used. */
static void residency(const tr *t)
{
    const rplan_vm *vm = t->vm;
    uint64_t *ch = malloc((vm->nresid ? vm->nresid : 1) * 3 * sizeof *ch); /* t, slot, idx */
    if (!ch)
        return;
    for (size_t i = 0; i < vm->nresid; i++) {
        const vm_resid *r = &vm->resid[i];
        uint64_t at = r->t;
        const vm_mark *w = r->win && r->win <= vm->nmarks ? vm->marks[r->win - 1] : NULL;
        const vm_mark *rd = r->after && r->after <= vm->nmarks ? vm->marks[r->after - 1] : NULL;
        if (w && w->t1 && (r->arrive || w->t1 > at))
            at = w->t1; /* a copy is there once its window ends, its source freed no sooner */
        if (!r->arrive && rd && rd->t1 > at)
            at = rd->t1; /* a copy is gone once its last reader has ended */
        ch[3 * i] = at;
        ch[3 * i + 1] = (uint64_t)r->slot;
        ch[3 * i + 2] = i;
    }
    qsort(ch, vm->nresid, 3 * sizeof *ch, res_cmp);
    for (int sl = 0; sl < FHR_LOC_SLOTS; sl++) {
        int used = vm->resid_base[sl] > 0;
        for (size_t i = 0; i < vm->nresid && !used; i++)
            used = vm->resid[i].slot == sl;
        if (!used)
            continue;
        char nm[48], lb[16];
        snprintf(nm, sizeof nm, "resident %s", loc_name(sl, lb, sizeof lb));
        int64_t v = (int64_t)vm->resid_base[sl];
        uint64_t last_t = vm->t_begin;
        for (size_t k = 0; k <= vm->nresid; k++) {
            /* one sample per instant: after every change at that time */
            if (k < vm->nresid && ch[3 * k + 1] != (uint64_t)sl)
                continue;
            uint64_t at = k < vm->nresid ? ch[3 * k] : UINT64_MAX;
            if (at != last_t || k == vm->nresid) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "name", nm);
                cJSON_AddStringToObject(e, "cat", "resident");
                cJSON_AddStringToObject(e, "ph", "C");
                cJSON_AddNumberToObject(e, "ts", tr_us(t, last_t));
                cJSON_AddNumberToObject(e, "pid", 1);
                cJSON_AddNumberToObject(e, "tid", 0);
                cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "bytes",
                                        (double)(v > 0 ? v : 0));
                cJSON_AddItemToArray(t->ev, e);
                last_t = at;
            }
            if (k == vm->nresid)
                break;
            const vm_resid *r = &vm->resid[ch[3 * k + 2]];
            v += r->arrive ? (int64_t)r->bytes : -(int64_t)r->bytes;
        }
    }
    free(ch);
}

/* Every complete slice: host slices (evictions are instants), then the marks; sorted,
 * rows given to overlapping ones, each track's slices together. NULL: no memory. */
static tr_slice *collect_slices(const rplan_vm *vm, size_t *count)
{
    size_t n = 0;
    tr_slice *s = malloc((vm->nslices + vm->nmarks + 1) * sizeof *s);
    if (!s)
        return NULL;
    for (size_t i = 0; i < vm->nslices; i++) {
        const vm_slice *h = &vm->slices[i];
        if (strcmp(h->cat, "eviction"))
            s[n++] = (tr_slice){h->t0, h->t1, !strcmp(h->cat, "stage") ? TR_STAGES : h->tid, h,
                                NULL, 0};
    }
    for (size_t i = 0; i < vm->nmarks; i++) {
        const vm_mark *mk = vm->marks[i];
        if (mk->t1 && mk->t1 >= mk->t0)
            s[n++] = (tr_slice){mk->t0, mk->t1, mk->tid, NULL, mk, i};
    }
    qsort(s, n, sizeof *s, tr_cmp);
    nest_rows(s, n);
    qsort(s, n, sizeof *s, tr_cmp); /* each track's slices together, in order */
    *count = n;
    return s;
}

/* The process, then every track's name and place (once per track). */
static void add_tracks(tr *t, const tr_slice *s, size_t n)
{
    const rplan_vm *vm = t->vm;
    char pn[80];
    snprintf(pn, sizeof pn, "fheplan run on %s", vm->device[0] ? vm->device : "a device");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", "process_name");
    cJSON_AddStringToObject(m, "ph", "M");
    cJSON_AddNumberToObject(m, "pid", 1);
    cJSON_AddNumberToObject(m, "tid", 0);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", pn);
    cJSON_AddItemToArray(t->ev, m);
    uint64_t *tids = malloc((n + 2 * FHR_LOC_SLOTS + vm->nslices + 2) * sizeof *tids);
    size_t nt = 0;
    if (!tids)
        return;
    tids[nt++] = 0;
    for (size_t i = 0; i < n; i++)
        tids[nt++] = s[i].tid;
    for (size_t i = 0; i < vm->nslices; i++)
        tids[nt++] = vm->slices[i].tid; /* evictions' streams */
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        if (vm->compute[i])
            tids[nt++] = vm->b->ops->stream_id(vm->b, vm->compute[i]);
        if (vm->xfer[i])
            tids[nt++] = vm->b->ops->stream_id(vm->b, vm->xfer[i]);
    }
    for (size_t i = 0; i < nt; i++) {
        int dup = 0;
        for (size_t k = 0; k < i && !dup; k++)
            dup = tids[k] == tids[i];
        if (dup)
            continue;
        char nm[160];
        track_name(vm, tids[i], nm, sizeof nm);
        meta(t->ev, "thread_name", tids[i], "name", cJSON_CreateString(nm));
        meta(t->ev, "thread_sort_index", tids[i], "sort_index",
             cJSON_CreateNumber(track_order(vm, tids[i])));
    }
    free(tids);
}

/* The args of a copy on a stream of the manager's own: bytes, values, direction, rate. */
static void copy_args(const tr *t, cJSON *e, const tr_slice *x)
{
    const rplan_vm *vm = t->vm;
    cJSON *ar = cJSON_AddObjectToObject(e, "args");
    char lb[16];
    cJSON_AddNumberToObject(ar, "bytes", (double)x->hs->bytes);
    cJSON *vs = cJSON_AddArrayToObject(ar, "values");
    if (x->hs->value >= 0 && (size_t)x->hs->value < vm->nvals && vm->vinfo[x->hs->value].name)
        cJSON_AddItemToArray(vs, cJSON_CreateString(vm->vinfo[x->hs->value].name));
    cJSON_AddStringToObject(ar, "direction",
                            x->hs->dir == FHR_DIR_D2D   ? "peer: from another device"
                            : x->hs->dir == FHR_DIR_D2H ? "PCIe: device to host"
                            : x->hs->dir == FHR_DIR_H2D ? "PCIe: host to device"
                                                        : "host to host");
    cJSON_AddNumberToObject(ar, "gbps",
                            x->t1 > x->t0 ? (double)x->hs->bytes / (double)(x->t1 - x->t0) : 0);
    cJSON_AddStringToObject(ar, "location", fhr_loc_format(x->hs->at, lb, sizeof lb));
}

/* The complete slices, with their args. */
static void add_slices(tr *t, const tr_slice *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const tr_slice *x = &s[i];
        cJSON *e = cJSON_CreateObject();
        const char *cat = x->hs ? x->hs->cat : x->mk->kind ? "transfer" : "body";
        cJSON_AddStringToObject(e, "name", x->hs ? x->hs->name : x->mk->name);
        cJSON_AddStringToObject(e, "cat", cat);
        cJSON_AddStringToObject(e, "ph", "X");
        cJSON_AddNumberToObject(e, "ts", tr_us(t, x->t0));
        cJSON_AddNumberToObject(e, "dur", x->t1 > x->t0 ? (double)(x->t1 - x->t0) / 1e3 : 0);
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", (double)x->tid);
        if (x->mk)
            cJSON_AddItemToObject(e, "args", mark_args(t, x->mk, x->t0, x->t1));
        else if (x->hs->bytes)
            copy_args(t, e, x);
        else if (x->hs->host_t0)
            cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "host_opened_us",
                                    tr_us(t, x->hs->host_t0));
        cJSON_AddItemToArray(t->ev, e);
    }
}

/* One flow of value v from the copy's slice to its reader's. */
static void add_flow(tr *t, uint32_t v, uint64_t id, const tr_slice *from, const tr_slice *to)
{
    const rplan_vm *vm = t->vm;
    for (int side = 0; side < 2; side++) {
        const tr_slice *x = side ? to : from;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", vm->vinfo[v].name ? vm->vinfo[v].name : "copy");
        cJSON_AddStringToObject(e, "cat", "copy to reader");
        cJSON_AddStringToObject(e, "ph", side ? "f" : "s");
        if (side)
            cJSON_AddStringToObject(e, "bp", "e");
        cJSON_AddNumberToObject(e, "id", (double)id);
        /* the start inside the copy's slice, the end at the body's start */
        cJSON_AddNumberToObject(e, "ts", tr_us(t, side ? x->t0 : x->t1 > x->t0 ? x->t1 - 1 : x->t0));
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", (double)x->tid);
        cJSON_AddItemToArray(t->ev, e);
    }
}

/* Flows, in the order the marks were made: a window's values, then their first readers. */
static void add_flows(tr *t, const tr_slice *s, size_t n)
{
    const rplan_vm *vm = t->vm;
    size_t *win_of = vm->o.trace && vm->nvals ? calloc(vm->nvals * FHR_LOC_SLOTS, sizeof *win_of)
                                              : NULL;
    size_t *at = calloc(vm->nmarks + 1, sizeof *at); /* 1 + each mark's slice */
    for (size_t i = 0; i < n && at; i++)
        if (s[i].mk)
            at[s[i].mi] = i + 1;
    uint64_t flow = 0;
    for (size_t i = 0; win_of && at && i < vm->nmarks; i++) {
        const vm_mark *mk = vm->marks[i];
        if (!at[i] || mk->slot < 0 || mk->slot >= FHR_LOC_SLOTS)
            continue;
        for (uint32_t k = 0; k < mk->nv; k++) {
            if (mk->v[k] >= vm->nvals)
                continue;
            size_t *w = &win_of[(size_t)mk->v[k] * FHR_LOC_SLOTS + (size_t)mk->slot];
            if (mk->kind == 1) {
                *w = i + 1;
                continue;
            }
            if (!*w || !at[*w - 1])
                continue;
            const tr_slice *from = &s[at[*w - 1] - 1], *to = &s[at[i] - 1];
            *w = 0; /* the first reader only */
            add_flow(t, mk->v[k], ++flow, from, to);
        }
    }
    free(win_of);
    free(at);
}

/* Evictions: instants on the stream that made them. */
static void add_evictions(tr *t)
{
    const rplan_vm *vm = t->vm;
    for (size_t i = 0; i < vm->nslices; i++) {
        const vm_slice *h = &vm->slices[i];
        if (strcmp(h->cat, "eviction"))
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", h->name);
        cJSON_AddStringToObject(e, "cat", h->cat);
        cJSON_AddStringToObject(e, "ph", "i");
        cJSON_AddStringToObject(e, "s", "t");
        cJSON_AddNumberToObject(e, "ts", tr_us(t, h->t0));
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", (double)h->tid);
        cJSON_AddItemToArray(t->ev, e);
    }
}

/* Charged bytes per location (what the manager admitted: copies and reservations, at the
 * host's decisions), one counter each with its budget. */
static void add_charged(tr *t)
{
    const rplan_vm *vm = t->vm;
    for (size_t i = 0; i < vm->nsamples; i++) {
        const vm_sample *x = &vm->samples[i];
        char nm[48], lb[16];
        snprintf(nm, sizeof nm, "charged %s", fhr_loc_format(x->loc, lb, sizeof lb));
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", nm);
        cJSON_AddStringToObject(e, "cat", "charged");
        cJSON_AddStringToObject(e, "ph", "C");
        cJSON_AddNumberToObject(e, "ts", tr_us(t, x->t));
        cJSON_AddNumberToObject(e, "pid", 1);
        cJSON_AddNumberToObject(e, "tid", 0);
        cJSON *a = cJSON_AddObjectToObject(e, "args");
        cJSON_AddNumberToObject(a, "bytes", (double)x->charged);
        if (x->has_budget)
            cJSON_AddNumberToObject(a, "budget", (double)x->budget);
        cJSON_AddItemToArray(t->ev, e);
    }
}

char *rplan_vm_trace_json(const rplan_vm *vm)
{
    if (!vm)
        return NULL;
    tr t = {vm, NULL, vm->t_begin};
    cJSON *o = cJSON_CreateObject();
    t.ev = cJSON_AddArrayToObject(o, "traceEvents");
    for (size_t i = 0; i < vm->nslices; i++)
        if (vm->slices[i].t0 && vm->slices[i].t0 < t.base)
            t.base = vm->slices[i].t0;
    size_t n = 0;
    tr_slice *s = collect_slices(vm, &n);
    if (!s) {
        cJSON_Delete(o);
        return NULL;
    }
    add_tracks(&t, s, n);
    add_slices(&t, s, n);
    add_flows(&t, s, n);
    free(s);
    add_evictions(&t);
    add_charged(&t);
    residency(&t);
    cJSON_AddStringToObject(o, "displayTimeUnit", "ms");
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}
