/* runtime/manager/snapshot_cache.c — a placement snapshot that catches up from the manager's
 * change log (the values changed since it last looked) instead of walking every value. */
#include "runtime/manager/snapshot_cache.h"
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_COPIES 2

/* What stands behind values[i]: its copies, in hot[i] when they are few (a policy scans
 * them all, so they lie densely), else in cold[i].more; its label in cold[i]. */
typedef struct chot {
    fhr_copy_info inl[INLINE_COPIES];
} chot;

typedef struct ccold {
    fhr_copy_info *more;
    size_t capmore;
    char label[MGR_LABEL_CAP];
} ccold;

struct mgr_snapcache {
    fhr_snapshot s;                   /* values[], hot[] and cold[] run in parallel */
    fhr_loc_stats locs[FHR_LOC_SLOTS];
    chot *hot;
    ccold *cold;
    size_t cap;
    int valid;                        /* 0: the next refresh walks every value */
    uint64_t manager_id;
    uint64_t seq;                     /* the change log's length at the last refresh */
    uint64_t *unready;                /* serials with a copy in flight: read again each time */
    size_t nunready, capunready;
    uint64_t *work;                   /* the serials the last refresh read (sorted, repeats) */
    size_t nwork, capwork;
    size_t last_reads;
    int last_full;
};

fhr_status mgr_snapcache_create(mgr_snapcache **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "snapshot cache: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fhr_fail(err, FHR_E_NOMEM, "snapshot cache: out of host memory");
    (*out)->s.locs = (*out)->locs;
    return FHR_OK;
}

void mgr_snapcache_destroy(mgr_snapcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->s.nvalues; i++)
        free(c->cold[i].more);
    free(c->hot);
    free(c->cold);
    free(c->s.values);
    free(c->unready);
    free(c->work);
    free(c);
}

size_t mgr_snapcache_last_reads(const mgr_snapcache *c, int *full)
{
    if (full)
        *full = c ? c->last_full : 0;
    return c ? c->last_reads : 0;
}

const uint64_t *mgr_snapcache_changes(const mgr_snapcache *c, size_t *n, int *full)
{
    *n = c->last_full ? 0 : c->nwork;
    *full = c->last_full || !c->valid;
    return c->work;
}

static int room(mgr_snapcache *c, size_t n)
{
    if (n <= c->cap)
        return 1;
    size_t ncap = c->cap ? c->cap : 64;
    while (ncap < n)
        ncap *= 2;
    fhr_value_info *v = realloc(c->s.values, ncap * sizeof *v);
    if (!v)
        return 0;
    c->s.values = v;
    chot *h = realloc(c->hot, ncap * sizeof *h);
    if (!h)
        return 0;
    c->hot = h;
    ccold *e = realloc(c->cold, ncap * sizeof *e);
    if (!e)
        return 0;
    c->cold = e;
    c->cap = ncap;
    return 1;
}

/* The first index whose serial is not below `serial`. */
static size_t lower_bound(const mgr_snapcache *c, uint64_t serial)
{
    size_t lo = 0, hi = c->s.nvalues;
    /* serials are issued 1, 2, ...: value i has serial i + 1 or more, so the first step
     * pivots at serial - 1, where a manager that discarded nothing has it */
    if (serial && serial - 1 < hi) {
        if (c->s.values[serial - 1].handle.serial < serial)
            lo = serial;
        else if (serial - 1 == 0 || c->s.values[serial - 2].handle.serial < serial)
            return serial - 1;
        else
            hi = serial - 1;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->s.values[mid].handle.serial < serial)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Reads v into slot i (its entry already in place). */
static int fill(fhr_manager *m, mgr_snapcache *c, size_t i, const val *v)
{
    fhr_value_info *vi = &c->s.values[i];
    ccold *e = &c->cold[i];
    size_t n = (size_t)__builtin_popcountll(v->present);
    if (n > INLINE_COPIES && n > e->capmore) {
        fhr_copy_info *p = realloc(e->more, n * sizeof *p);
        if (!p)
            return 0;
        e->more = p;
        e->capmore = n;
    }
    snap_fill_value(m, v, vi);
    snprintf(e->label, sizeof e->label, "%s", val_label(v));
    vi->label = e->label;
    vi->ncopies = n;
    vi->copies = n > INLINE_COPIES ? e->more : c->hot[i].inl;
    if (snap_fill_copies(m, v, vi->copies)) {
        if (!fhr_grow((void **)&c->unready, &c->capunready, c->nunready, sizeof *c->unready, 16))
            return 0;
        c->unready[c->nunready++] = v->serial;
    }
    c->last_reads++;
    return 1;
}

/* After entries moved: points values[from..] at their entries again. */
static void repoint(mgr_snapcache *c, size_t from)
{
    for (size_t i = from; i < c->s.nvalues; i++) {
        c->s.values[i].label = c->cold[i].label;
        c->s.values[i].copies = c->s.values[i].ncopies > INLINE_COPIES ? c->cold[i].more
                                                                       : c->hot[i].inl;
    }
}

static int rebuild(fhr_manager *m, mgr_snapcache *c)
{
    for (size_t i = 0; i < c->s.nvalues; i++)
        free(c->cold[i].more);
    c->s.nvalues = 0;
    c->nunready = 0;
    c->nwork = 0;
    c->last_full = 1;
    if (!room(c, m->nlive))
        return 0;
    for (uint64_t k = 1; k < m->next_serial; k++) {
        const val *v = m->vals[k];
        if (!v)
            continue;
        size_t i = c->s.nvalues++;
        c->cold[i].more = NULL;
        c->cold[i].capmore = 0;
        if (!fill(m, c, i, v))
            return 0;
    }
    return 1;
}

static int cmp_serial(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Reads again the values the log names since c->seq and those in flight. */
static int catch_up(fhr_manager *m, mgr_snapcache *c)
{
    size_t nlog = (size_t)(m->chseq - c->seq), n = nlog + c->nunready;
    c->nwork = 0;
    if (!n)
        return 1;
    if (n > c->capwork) {
        uint64_t *w = realloc(c->work, n * sizeof *w);
        if (!w)
            return 0;
        c->work = w;
        c->capwork = n;
    }
    for (size_t k = 0; k < nlog; k++)
        c->work[k] = m->chlog[(c->seq + k) & (MGR_CHLOG_CAP - 1)];
    if (c->nunready)
        memcpy(c->work + nlog, c->unready, c->nunready * sizeof *c->work);
    c->nunready = 0;
    qsort(c->work, n, sizeof *c->work, cmp_serial);
    c->nwork = n;
    size_t moved = SIZE_MAX; /* the first entry that moved */
    for (size_t k = 0; k < n; k++) {
        uint64_t serial = c->work[k];
        if (k && serial == c->work[k - 1])
            continue;
        const val *v = serial < m->next_serial ? m->vals[serial] : NULL;
        size_t i = lower_bound(c, serial);
        int have = i < c->s.nvalues && c->s.values[i].handle.serial == serial;
        if (v && !have) { /* published since: in serial order among the rest */
            size_t cap = c->cap;
            if (!room(c, c->s.nvalues + 1))
                return 0;
            moved = c->cap != cap ? 0 : i < moved ? i : moved; /* reallocated: all moved */
            memmove(&c->s.values[i + 1], &c->s.values[i],
                    (c->s.nvalues - i) * sizeof *c->s.values);
            memmove(&c->hot[i + 1], &c->hot[i], (c->s.nvalues - i) * sizeof *c->hot);
            memmove(&c->cold[i + 1], &c->cold[i], (c->s.nvalues - i) * sizeof *c->cold);
            c->s.nvalues++;
            c->cold[i].more = NULL;
            c->cold[i].capmore = 0;
        } else if (!v && have) { /* discarded */
            free(c->cold[i].more);
            memmove(&c->s.values[i], &c->s.values[i + 1],
                    (c->s.nvalues - i - 1) * sizeof *c->s.values);
            memmove(&c->hot[i], &c->hot[i + 1], (c->s.nvalues - i - 1) * sizeof *c->hot);
            memmove(&c->cold[i], &c->cold[i + 1], (c->s.nvalues - i - 1) * sizeof *c->cold);
            c->s.nvalues--;
            moved = i < moved ? i : moved;
            continue;
        } else if (!v) {
            continue; /* published and discarded in between */
        }
        if (!fill(m, c, i, v))
            return 0;
    }
    if (moved != SIZE_MAX)
        repoint(c, moved);
    return 1;
}

fhr_status mgr_snapcache_refresh(fhr_manager *m, mgr_snapcache *c, const fhr_snapshot **out,
                                 fhr_error *err)
{
    if (!c || !out)
        return fhr_fail(err, FHR_E_INVALID, "snapshot cache: cache and out are required");
    *out = NULL;
    fhr_status st = mgr_enter(m, "snapshot", err);
    if (st != FHR_OK)
        return st;
    c->last_reads = 0;
    c->last_full = 0;
    int ok;
    if (!c->valid || c->manager_id != m->id || m->chseq - c->seq > MGR_CHLOG_CAP)
        ok = rebuild(m, c);
    else
        ok = catch_up(m, c);
    mgr_add_reads(m, c->last_reads);
    if (ok) {
        c->valid = 1;
        c->manager_id = m->id;
        c->seq = m->chseq;
        c->s.manager_id = m->id;
        c->s.state_version = m->version;
        c->s.clock = m->clock;
        c->s.nlocs = snap_fill_locs(m, c->locs);
        c->s.copies_ = NULL;
    } else {
        c->valid = 0;
    }
    mgr_leave(m);
    if (!ok)
        return fhr_fail(err, FHR_E_NOMEM, "snapshot: out of host memory");
    *out = &c->s;
    return FHR_OK;
}
