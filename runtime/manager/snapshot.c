/* runtime/manager/snapshot.c — tensor-free snapshots of the manager (accounting per
 * location, every value and its copies, backend observations) and their JSON, plus
 * the trace's JSON. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One allocation per part; the snapshot owns them all (see fhr_snapshot_free). */
typedef struct snap_block {
    fhr_snapshot s;
    fhr_ckks_meta *metas;
    char *labels;
    size_t cap_locs, cap_values, cap_copies, cap_labels, cap_metas;
    snap_spare *home; /* the spare of the manager that took it (a reference) */
} snap_block;

/* The memory of the snapshot its manager freed last, kept for the next take (one, of at
 * most SPARE_MAX_VALUES values). Freeing a snapshot of many values hands its pages back to
 * the kernel (the allocator trims the top of the heap) and the next take faults them in
 * again, under the manager's lock: at 1,000 values that costs more than the walk itself.
 * Each manager has its own (no state is shared between managers); a snapshot may outlive
 * its manager, so the manager and every live snapshot each hold a reference. */
#define SPARE_MAX_VALUES 65536

static void block_free(snap_block *sb)
{
    free(sb->metas);
    free(sb->labels);
    free(sb->s.copies_);
    free(sb->s.values);
    free(sb->s.locs);
    free(sb);
}

static void block_free_any(void *sb) { block_free(sb); }

/* At least n elements in *p (its contents are not kept). */
static int reserve(void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap && *p)
        return 1;
    free(*p);
    *p = malloc(n * elem);
    *cap = *p ? n : 0;
    return *p != NULL;
}

size_t snap_fill_locs(const fhr_manager *m, fhr_loc_stats *locs)
{
    size_t n = 0;
    for (int i = 0; i < FHR_LOC_SLOTS; i++) {
        const locacct *a = &m->loc[i];
        if (!a->present)
            continue;
        fhr_loc_stats *ls = &locs[n++];
        memset(ls, 0, sizeof *ls);
        ls->loc = fhr_loc_from_slot(i);
        ls->used_bytes = a->used;
        ls->reserved_bytes = a->reserved;
        ls->inflight_bytes = a->inflight;
        ls->temporary_bytes = a->temp;
        ls->peak_used_bytes = a->peak_used;
        ls->peak_charged_bytes = a->peak_charged;
        ls->has_budget = a->has_budget;
        ls->budget_bytes = a->has_budget ? a->budget : 0;
        uint64_t committed = a->used + a->reserved + a->temp + a->inflight;
        ls->remaining_budget_bytes =
            a->has_budget ? (committed < a->budget ? a->budget - committed : 0) : 0;
    }
    return n;
}

void snap_fill_value(const fhr_manager *m, const val *v, fhr_value_info *vi)
{
    vi->handle = mgr_handle(m, v);
    vi->mode = v->mode;
    vi->recoverability = v->recov;
    vi->priority = v->priority;
    vi->spec_storage_nbytes = v->charge;
    vi->logical_nbytes = v->logical;
    vi->regen_nbytes = v->regen;
    const mgr_cut *c = v->cut;
    vi->cut_q = c ? c->q : 0;
    vi->cut_special = c ? c->special : 0;
    vi->cut_parts = c ? c->parts : 0;
    vi->cut_alpha = c ? c->alpha : 0;
    vi->cut_nfields = c ? c->nfields : 0;
    vi->cut_limb_nbytes = c ? c->limb : 0;
    vi->cut_regen_mask = c ? c->regen_mask : 0;
    vi->omitted_nbytes[0] = v->omit[0];
    vi->omitted_nbytes[1] = v->omit[1];
    vi->meta = NULL;
}

size_t snap_fill_copies(fhr_manager *m, const val *v, fhr_copy_info *out)
{
    size_t unready = 0;
    for (mat *x = v->copies; x; x = x->next) { /* in slot order, one per present bit */
        fhr_copy_info *ci = out++;
        ci->loc = x->loc;
        ci->storage_nbytes = x->storage;
        int sl = x->slot;
        ci->charged_nbytes = mat_charge(v, x);
        ci->limbs = x->limbs;
        ci->parts = !v->cut || !x->by_parts ? 0 : x->parts ? x->parts
                                                           : cut_parts_read(v->cut, x->limbs);
        ci->restore_nbytes = ci->charged_nbytes -
                             (x->loc.kind != FHR_LOC_CUDA ? 0
                              : x->limbs          ? cut_bytes(v->cut, x->limbs, x->parts, 1)
                                                  : v->regen);
        ci->restore_s = mgr_restore_cost(m, v, sl);
        ci->copied = x->copied;
        ci->source = x->source;
        if (x->ready && ev_done(m, x->ready)) { /* complete: forget the marker */
            ev_unref(m, x->ready);
            x->ready = NULL;
        }
        ci->ready = !x->ready;
        unready += !ci->ready;
        ci->leases = x->leases;
        ci->holds = x->holds;
        ci->pending_events = x->pending;
        ci->last_use = x->last_use;
    }
    return unready;
}

static fhr_status take(fhr_manager *m, int full, fhr_snapshot **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "snapshot: out is NULL");
    *out = NULL;
    fhr_status st = mgr_enter(m, "snapshot", err);
    if (st != FHR_OK)
        return st;
    /* One pass over the values (each a separate allocation: the walk is what a snapshot
     * costs), into arrays that grow as needed; a second pass over the dense result sets
     * the copy and label pointers. */
    size_t nlocs = 0, ncopies = 0, nlabel = 1, nv = m->nlive ? m->nlive : 1;
    for (int i = 0; i < FHR_LOC_SLOTS; i++)
        nlocs += m->loc[i].present;
    snap_block *sb = atomic_exchange(&m->spare->block, (void *)NULL);
    if (!sb)
        sb = calloc(1, sizeof *sb);
    fhr_snapshot *s = sb ? &sb->s : NULL;
    if (s) {
        sb->home = m->spare;
        m->spare->free_block = block_free_any; /* for the last reference's release */
        atomic_fetch_add_explicit(&m->spare->refs, 1, memory_order_relaxed);
        s->nlocs = s->nvalues = 0;
        int ok = reserve((void **)&s->locs, &sb->cap_locs, nlocs ? nlocs : 1, sizeof *s->locs);
        ok = ok && reserve((void **)&s->values, &sb->cap_values, nv, sizeof *s->values);
        ok = ok && reserve((void **)&s->copies_, &sb->cap_copies, 2 * m->nlive + 4,
                           sizeof(fhr_copy_info));
        ok = ok && reserve((void **)&sb->labels, &sb->cap_labels, 64, 1);
        if (full)
            ok = ok && reserve((void **)&sb->metas, &sb->cap_metas, nv, sizeof *sb->metas);
        if (!ok)
            goto nomem;
    }
    if (!s)
        goto nomem;
    s->manager_id = m->id;
    s->state_version = m->version;
    s->clock = m->clock;
    s->nlocs = snap_fill_locs(m, s->locs);
    sb->labels[0] = '\0';
    for (uint64_t i = 1; i < m->next_serial; i++) {
        const val *v = m->vals[i];
        if (!v)
            continue;
        fhr_value_info *vi = &s->values[s->nvalues];
        snap_fill_value(m, v, vi);
        vi->label = NULL; /* set below: NULL marks a label stored in order */
        if (v->label) {
            size_t len = strlen(v->label) + 1;
            if (!fhr_grow((void **)&sb->labels, &sb->cap_labels, nlabel + len - 1, 1, 64))
                goto nomem;
            memcpy(sb->labels + nlabel, v->label, len);
            nlabel += len;
        } else {
            vi->label = "";
        }
        if (full) {
            sb->metas[s->nvalues] = *val_meta(v);
            vi->meta = &sb->metas[s->nvalues];
        }
        vi->ncopies = (size_t)__builtin_popcountll(v->present);
        vi->copies = NULL;
        if (vi->ncopies && !fhr_grow((void **)&s->copies_, &sb->cap_copies,
                                     ncopies + vi->ncopies - 1, sizeof(fhr_copy_info),
                                     sb->cap_copies))
            goto nomem;
        snap_fill_copies(m, v, s->copies_ + ncopies);
        ncopies += vi->ncopies;
        s->nvalues++;
    }
    fhr_copy_info *cp = s->copies_;
    char *lp = sb->labels + 1;
    for (size_t i = 0; i < s->nvalues; i++) {
        fhr_value_info *vi = &s->values[i];
        vi->copies = cp;
        cp += vi->ncopies;
        if (!vi->label) {
            vi->label = lp;
            lp += strlen(lp) + 1;
        }
    }
    mgr_add_reads(m, s->nvalues);
    mgr_leave(m);
    /* Observations ask the driver (memory info, NVML): sampled after the lock is let go. */
    for (size_t i = 0; full && i < s->nlocs; i++)
        m->b->ops->observe(m->b, s->locs[i].loc, &s->locs[i].obs);
    *out = s;
    return FHR_OK;
nomem:
    fhr_snapshot_free(s);
    mgr_leave(m);
    return fhr_fail(err, FHR_E_NOMEM, "snapshot: out of host memory");
}

fhr_status fhr_snapshot_take(fhr_manager *m, fhr_snapshot **out, fhr_error *err)
{
    return take(m, 1, out, err);
}

fhr_status fhr_snapshot_take_placement(fhr_manager *m, fhr_snapshot **out, fhr_error *err)
{
    return take(m, 0, out, err);
}

void fhr_snapshot_free(fhr_snapshot *s)
{
    if (!s)
        return;
    snap_block *sb = (snap_block *)s;
    void *none = NULL;
    snap_spare *home = sb->home;
    sb->home = NULL;
    if (sb->cap_values > SPARE_MAX_VALUES ||
        !atomic_compare_exchange_strong(&home->block, &none, (void *)sb))
        block_free(sb);
    snap_spare_unref(home);
}

const fhr_loc_stats *fhr_snapshot_loc(const fhr_snapshot *s, fhr_location loc)
{
    for (size_t i = 0; s && i < s->nlocs; i++)
        if (fhr_loc_equal(s->locs[i].loc, loc))
            return &s->locs[i];
    return NULL;
}

const fhr_value_info *fhr_snapshot_value(const fhr_snapshot *s, fhr_handle h)
{
    if (!s || h.manager_id != s->manager_id)
        return NULL;
    size_t lo = 0, hi = s->nvalues; /* values are sorted by serial, serials issued 1, 2, ... */
    if (h.serial && h.serial - 1 < hi) { /* value i has serial i + 1 or more: the first */
        uint64_t k = s->values[h.serial - 1].handle.serial; /* step pivots there */
        if (k == h.serial)
            return &s->values[h.serial - 1];
        if (k > h.serial)
            hi = h.serial - 1;
        else
            lo = h.serial;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k = s->values[mid].handle.serial;
        if (k == h.serial)
            return &s->values[mid];
        if (k < h.serial)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void add_u64(cJSON *o, const char *k, uint64_t v) { cJSON_AddNumberToObject(o, k, (double)v); }

static const char *domain_name(fhr_domain d)
{
    return d == FHR_DOMAIN_COEFF ? "coeff" : d == FHR_DOMAIN_EVAL ? "eval" : "none";
}

static const char *key_name(fhr_key_relation k)
{
    switch (k) {
    case FHR_KEY_ROTATION: return "rotation";
    case FHR_KEY_CONJUGATION: return "conjugation";
    case FHR_KEY_RELINEARIZATION: return "relinearization";
    default: return "none";
    }
}

char *fhr_snapshot_json(const fhr_snapshot *s)
{
    if (!s)
        return NULL;
    char buf[32];
    cJSON *root = cJSON_CreateObject();
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)s->manager_id);
    cJSON_AddStringToObject(root, "manager_id", buf);
    add_u64(root, "state_version", s->state_version);
    add_u64(root, "clock", s->clock);
    cJSON *locs = cJSON_AddArrayToObject(root, "locations");
    for (size_t i = 0; i < s->nlocs; i++) {
        const fhr_loc_stats *l = &s->locs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "location", fhr_loc_format(l->loc, buf, sizeof buf));
        add_u64(o, "used_bytes", l->used_bytes);
        add_u64(o, "reserved_bytes", l->reserved_bytes);
        add_u64(o, "inflight_bytes", l->inflight_bytes);
        add_u64(o, "temporary_bytes", l->temporary_bytes);
        add_u64(o, "peak_used_bytes", l->peak_used_bytes);
        add_u64(o, "peak_charged_bytes", l->peak_charged_bytes);
        if (l->has_budget) {
            add_u64(o, "budget_bytes", l->budget_bytes);
            add_u64(o, "remaining_budget_bytes", l->remaining_budget_bytes);
        } else {
            cJSON_AddNullToObject(o, "budget_bytes");
            cJSON_AddNullToObject(o, "remaining_budget_bytes");
        }
        if (l->obs.valid) {
            cJSON *ob = cJSON_AddObjectToObject(o, "observation");
            add_u64(ob, "device_free_bytes", l->obs.device_free_bytes);
            add_u64(ob, "device_total_bytes", l->obs.device_total_bytes);
            add_u64(ob, "pool_used_bytes", l->obs.pool_used_bytes);
            add_u64(ob, "pool_reserved_bytes", l->obs.pool_reserved_bytes);
            add_u64(ob, "pool_used_high_bytes", l->obs.pool_used_high_bytes);
            add_u64(ob, "pool_reserved_high_bytes", l->obs.pool_reserved_high_bytes);
            add_u64(ob, "pool_granule_bytes", l->obs.pool_granule_bytes);
            if (l->obs.nvml_valid) {
                add_u64(ob, "nvml_used_bytes", l->obs.nvml_used_bytes);
                add_u64(ob, "nvml_total_bytes", l->obs.nvml_total_bytes);
            }
        } else {
            cJSON_AddNullToObject(o, "observation");
        }
        cJSON_AddItemToArray(locs, o);
    }
    cJSON *vals = cJSON_AddArrayToObject(root, "values");
    for (size_t i = 0; i < s->nvalues; i++) {
        const fhr_value_info *v = &s->values[i];
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "handle", v->handle.serial);
        cJSON_AddStringToObject(o, "label", v->label);
        cJSON_AddStringToObject(o, "replica_mode", v->mode == FHR_EXCLUSIVE ? "exclusive" : "replicable");
        cJSON_AddStringToObject(o, "recoverability",
                                v->recoverability == FHR_RECONSTRUCTIBLE ? "reconstructible"
                                                                         : "must_preserve");
        cJSON_AddNumberToObject(o, "priority", v->priority);
        add_u64(o, "storage_nbytes", v->spec_storage_nbytes);
        add_u64(o, "logical_nbytes", v->logical_nbytes);
        add_u64(o, "regen_nbytes", v->regen_nbytes);
        if (v->meta) {
            const fhr_ckks_meta *mt = v->meta;
            cJSON *meta = cJSON_AddObjectToObject(o, "meta");
            add_u64(meta, "context_id", mt->context_id);
            cJSON_AddNumberToObject(meta, "level", mt->level);
            cJSON_AddNumberToObject(meta, "scale", mt->scale);
            cJSON *pr = cJSON_AddArrayToObject(meta, "prime_ids");
            for (uint32_t p = 0; p < mt->n_primes && p < FHR_MAX_PRIMES; p++)
                cJSON_AddItemToArray(pr, cJSON_CreateNumber(mt->prime_ids[p]));
            cJSON_AddStringToObject(meta, "domain", domain_name(mt->domain));
            cJSON_AddStringToObject(meta, "key_relation", key_name(mt->key_relation));
            cJSON_AddNumberToObject(meta, "key_param", (double)mt->key_param);
        } else {
            cJSON_AddNullToObject(o, "meta");
        }
        if (v->cut_q) { /* fhr_value_cut_limbs */
            cJSON *cut = cJSON_AddObjectToObject(o, "cut");
            add_u64(cut, "q", v->cut_q);
            add_u64(cut, "special", v->cut_special);
            add_u64(cut, "parts", v->cut_parts);
            add_u64(cut, "alpha", v->cut_alpha);
            add_u64(cut, "fields", v->cut_nfields);
            add_u64(cut, "limb_nbytes", v->cut_limb_nbytes);
            add_u64(cut, "regen_fields", v->cut_regen_mask);
        }
        cJSON *cps = cJSON_AddArrayToObject(o, "copies");
        for (size_t c = 0; c < v->ncopies; c++) {
            const fhr_copy_info *ci = &v->copies[c];
            cJSON *co = cJSON_CreateObject();
            cJSON_AddStringToObject(co, "location", fhr_loc_format(ci->loc, buf, sizeof buf));
            add_u64(co, "storage_nbytes", ci->storage_nbytes);
            add_u64(co, "charged_nbytes", ci->charged_nbytes);
            add_u64(co, "limbs", ci->limbs);
            add_u64(co, "restore_nbytes", ci->restore_nbytes);
            cJSON_AddBoolToObject(co, "ready", ci->ready);
            if (ci->copied)
                cJSON_AddStringToObject(co, "source", fhr_loc_format(ci->source, buf, sizeof buf));
            else
                cJSON_AddNullToObject(co, "source");
            cJSON_AddNumberToObject(co, "restore_s", ci->restore_s);
            add_u64(co, "leases", ci->leases);
            add_u64(co, "holds", ci->holds);
            add_u64(co, "pending_events", ci->pending_events);
            add_u64(co, "last_use", ci->last_use);
            cJSON_AddItemToArray(cps, co);
        }
        cJSON_AddItemToArray(vals, o);
    }
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

fhr_status fhr_trace_json(fhr_manager *m, char **json, fhr_error *err)
{
    if (json)
        *json = NULL;
    if (!json)
        return fhr_fail(err, FHR_E_INVALID, "trace_json: json is NULL");
    fhr_status st = mgr_enter(m, "trace_json", err);
    if (st != FHR_OK)
        return st;
    size_t n = m->trace_len;
    fhr_trace_entry *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (tmp)
        for (size_t i = 0; i < n; i++)
            tmp[i] = m->trace[(m->trace_head + i) % m->trace_cap];
    uint64_t total = m->trace_seq;
    mgr_leave(m);
    if (!tmp)
        return fhr_fail(err, FHR_E_NOMEM, "trace_json: out of host memory");
    char a[16], b[16];
    cJSON *root = cJSON_CreateObject();
    add_u64(root, "recorded", total);
    cJSON *arr = cJSON_AddArrayToObject(root, "entries");
    for (size_t i = 0; i < n; i++) {
        const fhr_trace_entry *e = &tmp[i];
        cJSON *o = cJSON_CreateObject();
        add_u64(o, "seq", e->seq);
        cJSON_AddStringToObject(o, "kind", fhr_trace_kind_name(e->kind));
        add_u64(o, "handle", e->handle.serial);
        cJSON_AddStringToObject(o, "from", fhr_loc_format(e->from, a, sizeof a));
        cJSON_AddStringToObject(o, "to", fhr_loc_format(e->to, b, sizeof b));
        add_u64(o, "bytes", e->nbytes);
        add_u64(o, "stream", e->stream_id);
        add_u64(o, "t_ns", e->t_ns);
        add_u64(o, "state_version", e->state_version);
        cJSON_AddStringToObject(o, "label", e->label);
        cJSON_AddItemToArray(arr, o);
    }
    free(tmp);
    *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *json ? FHR_OK : fhr_fail(err, FHR_E_NOMEM, "trace_json: out of host memory");
}
