/* runtime/control/victim_index.c — the tiered LRU victim index: a treap of evictable copies
 * per location in rank order, updated per changed value, walked victim by victim. */
#include "runtime/control/victim_index.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vnode {
    uint64_t k0, k1, serial; /* the rank: priority key, last use, serial */
    uint32_t l, r, pri;      /* children; heap priority (a hash of serial and slot) */
    uint32_t next;           /* the value's next node; the free list's link when free */
    int slot;
} vnode;

struct vix {
    int valid;
    uint32_t root[FHR_LOC_SLOTS];
    vnode *nodes;
    uint32_t nnodes, capnodes, freel;
    uint32_t *head; /* by serial: the value's first node */
    size_t caphead;
    vix_vstate *vs; /* scratch by snapshot index */
    size_t capvs;
    void *buf;      /* vix_buffer */
    size_t capbuf;  /* bytes */
    uint32_t epoch;
};

fhr_status vix_create(vix **out, fhr_error *err)
{
    if (!out)
        return fhr_fail(err, FHR_E_INVALID, "victim index: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fhr_fail(err, FHR_E_NOMEM, "victim index: out of host memory");
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        (*out)->root[s] = VIX_NONE;
    (*out)->freel = VIX_NONE;
    return FHR_OK;
}

void vix_destroy(vix *x)
{
    if (!x)
        return;
    free(x->nodes);
    free(x->head);
    free(x->vs);
    free(x->buf);
    free(x);
}

void *vix_buffer(vix *x, size_t n, size_t elem)
{
    if (n > SIZE_MAX / elem)
        return NULL;
    size_t need = n * elem;
    if (need > x->capbuf) {
        size_t ncap = x->capbuf ? x->capbuf : 4096;
        while (ncap < need)
            ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
        void *b = realloc(x->buf, ncap);
        if (!b)
            return NULL;
        x->buf = b;
        x->capbuf = ncap;
    }
    return x->buf;
}

int vix_valid(const vix *x) { return x && x->valid; }

uint64_t vix_serial(const vix *x, uint32_t node) { return x->nodes[node].serial; }

/* The tiered LRU order on priorities: lower first (policy.c ranks by the same key). */
static uint64_t prio_key(int32_t p) { return (uint64_t)((int64_t)p + INT32_MAX + 1); }

static int less(const vnode *a, const vnode *b)
{
    if (a->k0 != b->k0)
        return a->k0 < b->k0;
    if (a->k1 != b->k1)
        return a->k1 < b->k1;
    return a->serial < b->serial;
}

static uint32_t hash_pri(uint64_t serial, int slot)
{
    uint64_t z = serial * 0x9E3779B97F4A7C15ULL + (uint64_t)slot * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (uint32_t)(z ^ (z >> 31));
}

/* Inserts node n under t; returns the subtree's new root. */
static uint32_t ins(vnode *nd, uint32_t t, uint32_t n)
{
    if (t == VIX_NONE)
        return n;
    if (less(&nd[n], &nd[t])) {
        nd[t].l = ins(nd, nd[t].l, n);
        if (nd[nd[t].l].pri > nd[t].pri) { /* rotate right */
            uint32_t c = nd[t].l;
            nd[t].l = nd[c].r;
            nd[c].r = t;
            t = c;
        }
    } else {
        nd[t].r = ins(nd, nd[t].r, n);
        if (nd[nd[t].r].pri > nd[t].pri) { /* rotate left */
            uint32_t c = nd[t].r;
            nd[t].r = nd[c].l;
            nd[c].l = t;
            t = c;
        }
    }
    return t;
}

/* Joins two treaps whose keys in a all precede those in b. */
static uint32_t merge(vnode *nd, uint32_t a, uint32_t b)
{
    if (a == VIX_NONE)
        return b;
    if (b == VIX_NONE)
        return a;
    if (nd[a].pri > nd[b].pri) {
        nd[a].r = merge(nd, nd[a].r, b);
        return a;
    }
    nd[b].l = merge(nd, a, nd[b].l);
    return b;
}

/* Removes node n from under t; returns the subtree's new root. */
static uint32_t del(vnode *nd, uint32_t t, uint32_t n)
{
    if (t == VIX_NONE)
        return t;
    if (t == n)
        return merge(nd, nd[t].l, nd[t].r);
    if (less(&nd[n], &nd[t]))
        nd[t].l = del(nd, nd[t].l, n);
    else
        nd[t].r = del(nd, nd[t].r, n);
    return t;
}

static int grow_head(vix *x, uint64_t serial)
{
    if (serial < x->caphead)
        return 1;
    size_t ncap = x->caphead ? x->caphead : 256;
    while (ncap <= serial)
        ncap *= 2;
    uint32_t *h = realloc(x->head, ncap * sizeof *h);
    if (!h)
        return 0;
    for (size_t i = x->caphead; i < ncap; i++)
        h[i] = VIX_NONE;
    x->head = h;
    x->caphead = ncap;
    return 1;
}

static uint32_t node_alloc(vix *x)
{
    if (x->freel != VIX_NONE) {
        uint32_t n = x->freel;
        x->freel = x->nodes[n].next;
        return n;
    }
    if (x->nnodes == x->capnodes) {
        uint32_t ncap = x->capnodes ? x->capnodes * 2 : 256;
        if (ncap <= x->capnodes || ncap == VIX_NONE)
            return VIX_NONE;
        vnode *p = realloc(x->nodes, (size_t)ncap * sizeof *p);
        if (!p)
            return VIX_NONE;
        x->nodes = p;
        x->capnodes = ncap;
    }
    return x->nnodes++;
}

size_t vix_find(const fhr_snapshot *snap, uint64_t serial)
{
    /* serials are issued 1, 2, ... and values sorted by serial, so value i has serial
     * i + 1 or more: the search starts there, and in a manager that discarded nothing
     * ends there at once */
    size_t lo = 0, hi = snap->nvalues;
    if (serial && serial - 1 < hi) { /* the first step of the search, pivoted there */
        uint64_t k = snap->values[serial - 1].handle.serial;
        if (k == serial)
            return serial - 1;
        if (k > serial)
            hi = serial - 1;
        else
            lo = serial;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k = snap->values[mid].handle.serial;
        if (k == serial)
            return mid;
        if (k < serial)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

static int evictable(const fhr_copy_info *c)
{
    return !c->leases && !c->holds && !c->pending_events;
}

/* vi's copy at slot, or NULL. */
static const fhr_copy_info *copy_at(const fhr_value_info *vi, int slot)
{
    for (size_t c = 0; vi && c < vi->ncopies; c++)
        if (fhr_loc_slot(vi->copies[c].loc) == slot)
            return &vi->copies[c];
    return NULL;
}

/* Brings serial's nodes to the copies of vi (NULL: gone): a node whose copy is still there,
 * evictable, with the same rank stays where it is (a changed value has most of its copies
 * unchanged: a copy made or evicted elsewhere); the others leave their trees, and the
 * copies without a node get one. The trees are those a rebuild makes (a treap's shape
 * follows from its keys and priorities alone). */
static int reindex(vix *x, uint64_t serial, const fhr_value_info *vi)
{
    if (!grow_head(x, serial))
        return 0;
    uint64_t kept = 0; /* slots whose node stayed */
    for (uint32_t *pp = &x->head[serial], n; (n = *pp) != VIX_NONE;) {
        vnode *nd = &x->nodes[n];
        const fhr_copy_info *ci = copy_at(vi, nd->slot);
        if (ci && evictable(ci) && nd->k0 == prio_key(vi->priority) && nd->k1 == ci->last_use) {
            kept |= 1ULL << nd->slot;
            pp = &nd->next;
            continue;
        }
        *pp = nd->next;
        x->root[nd->slot] = del(x->nodes, x->root[nd->slot], n);
        nd->next = x->freel;
        x->freel = n;
    }
    for (size_t c = 0; vi && c < vi->ncopies; c++) {
        const fhr_copy_info *ci = &vi->copies[c];
        int slot = fhr_loc_slot(ci->loc);
        if (slot < 0 || !evictable(ci) || (kept >> slot & 1))
            continue;
        uint32_t n = node_alloc(x);
        if (n == VIX_NONE)
            return 0;
        vnode *nd = &x->nodes[n];
        nd->k0 = prio_key(vi->priority);
        nd->k1 = ci->last_use;
        nd->serial = serial;
        nd->l = nd->r = VIX_NONE;
        nd->pri = hash_pri(serial, slot);
        nd->slot = slot;
        nd->next = x->head[serial];
        x->head[serial] = n;
        x->root[slot] = ins(x->nodes, x->root[slot], n);
    }
    return 1;
}

static int rebuild(vix *x, const fhr_snapshot *snap)
{
    for (int s = 0; s < FHR_LOC_SLOTS; s++)
        x->root[s] = VIX_NONE;
    x->nnodes = 0;
    x->freel = VIX_NONE;
    for (size_t i = 0; i < x->caphead; i++)
        x->head[i] = VIX_NONE;
    for (size_t i = 0; i < snap->nvalues; i++)
        if (!reindex(x, snap->values[i].handle.serial, &snap->values[i]))
            return 0;
    return 1;
}

int vix_update(vix *x, const fhr_snapshot *snap, const uint64_t *changed, size_t n, int full)
{
    if (snap->nvalues > x->capvs) {
        size_t ncap = x->capvs ? x->capvs : 64;
        while (ncap < snap->nvalues)
            ncap *= 2;
        vix_vstate *v = realloc(x->vs, ncap * sizeof *v);
        if (!v) {
            x->valid = 0;
            return 0;
        }
        memset(v + x->capvs, 0, (ncap - x->capvs) * sizeof *v);
        x->vs = v;
        x->capvs = ncap;
    }
    int ok = 1;
    if (full || !x->valid) {
        ok = rebuild(x, snap);
    } else {
        for (size_t k = 0; k < n && ok; k++) {
            if (k && changed[k] == changed[k - 1])
                continue;
            size_t i = vix_find(snap, changed[k]);
            ok = reindex(x, changed[k], i == SIZE_MAX ? NULL : &snap->values[i]);
        }
    }
    x->valid = ok;
    return ok;
}

uint32_t vix_first(const vix *x, int slot)
{
    uint32_t t = x->root[slot];
    if (t == VIX_NONE)
        return t;
    while (x->nodes[t].l != VIX_NONE)
        t = x->nodes[t].l;
    return t;
}

uint32_t vix_next(const vix *x, int slot, uint32_t node)
{
    const vnode *nd = x->nodes, *k = &nd[node];
    uint32_t t = x->root[slot], best = VIX_NONE;
    while (t != VIX_NONE) {
        if (less(k, &nd[t])) {
            best = t;
            t = nd[t].l;
        } else {
            t = nd[t].r;
        }
    }
    return best;
}

static void push_left(vix_iter *it, uint32_t t)
{
    for (; t != VIX_NONE; t = it->x->nodes[t].l) {
        if (it->n == VIX_ITER_DEPTH) {
            it->deep = 1;
            return;
        }
        it->st[it->n++] = t;
    }
}

uint32_t vix_iter_next(vix_iter *it)
{
    if (it->deep)
        return it->cur = it->cur == VIX_NONE ? vix_first(it->x, it->slot)
                                             : vix_next(it->x, it->slot, it->cur);
    if (!it->n)
        return it->cur = VIX_NONE;
    it->cur = it->st[--it->n];
    push_left(it, it->x->nodes[it->cur].r);
    return it->cur;
}

uint32_t vix_iter_first(vix_iter *it, const vix *x, int slot)
{
    it->x = x;
    it->slot = slot;
    it->deep = 0;
    it->cur = VIX_NONE;
    it->n = 0;
    push_left(it, x->root[slot]);
    return vix_iter_next(it);
}

vix_vstate *vix_scratch(vix *x, uint32_t *epoch)
{
    if (!x->valid || !x->vs)
        return NULL;
    if (++x->epoch == 0) { /* wrapped: no stale entry may match */
        memset(x->vs, 0, x->capvs * sizeof *x->vs);
        x->epoch = 1;
    }
    *epoch = x->epoch;
    return x->vs;
}

/* ---- the check against a ranking from scratch ------------------------------------------ */

static int cmp_node(const void *a, const void *b)
{
    const vnode *x = a, *y = b;
    return less(x, y) ? -1 : less(y, x) ? 1 : 0;
}

/* In-order walk of t into out[*n..]; checks the heap order and counts; 0 on a bad tree. */
static int walk(const vix *x, uint32_t t, uint32_t parent_pri, vnode *out, size_t *n, size_t cap,
                size_t depth)
{
    if (t == VIX_NONE)
        return 1;
    if (t >= x->nnodes || depth > x->nnodes || x->nodes[t].pri > parent_pri || *n >= cap)
        return 0;
    if (!walk(x, x->nodes[t].l, x->nodes[t].pri, out, n, cap, depth + 1) || *n >= cap)
        return 0;
    out[(*n)++] = x->nodes[t];
    return walk(x, x->nodes[t].r, x->nodes[t].pri, out, n, cap, depth + 1);
}

int vix_check(const vix *x, const fhr_snapshot *snap, char *why, size_t nwhy)
{
    char lb[16];
    if (!x->valid) {
        snprintf(why, nwhy, "the index is invalid");
        return 0;
    }
    size_t cap = 1;
    for (size_t i = 0; i < snap->nvalues; i++)
        cap += snap->values[i].ncopies;
    vnode *want = malloc(cap * sizeof *want), *have = malloc((cap + 1) * sizeof *have);
    int ok = want && have;
    if (!ok)
        snprintf(why, nwhy, "check: out of host memory");
    size_t total = 0;
    for (int s = 0; s < FHR_LOC_SLOTS && ok; s++) {
        size_t nw = 0, nh = 0;
        for (size_t i = 0; i < snap->nvalues; i++) {
            const fhr_value_info *vi = &snap->values[i];
            for (size_t c = 0; c < vi->ncopies; c++)
                if (fhr_loc_slot(vi->copies[c].loc) == s && evictable(&vi->copies[c]))
                    want[nw++] = (vnode){prio_key(vi->priority), vi->copies[c].last_use,
                                         vi->handle.serial, 0, 0, 0, 0, s};
        }
        qsort(want, nw, sizeof *want, cmp_node);
        if (!walk(x, x->root[s], UINT32_MAX, have, &nh, cap + 1, 0)) {
            snprintf(why, nwhy, "%s: the tree is malformed (heap order, a cycle, or more nodes "
                     "than copies)", fhr_loc_format(fhr_loc_from_slot(s), lb, sizeof lb));
            ok = 0;
            break;
        }
        for (size_t k = 0; k < nw && k < nh && ok; k++)
            if (cmp_node(&want[k], &have[k]) || have[k].slot != s) {
                snprintf(why, nwhy, "%s: rank %zu is #%llu (priority key %llu, last use %llu), "
                         "from scratch #%llu (%llu, %llu)",
                         fhr_loc_format(fhr_loc_from_slot(s), lb, sizeof lb), k,
                         (unsigned long long)have[k].serial, (unsigned long long)have[k].k0,
                         (unsigned long long)have[k].k1, (unsigned long long)want[k].serial,
                         (unsigned long long)want[k].k0, (unsigned long long)want[k].k1);
                ok = 0;
            }
        if (ok && nw != nh) {
            snprintf(why, nwhy, "%s: %zu copies indexed, %zu from scratch",
                     fhr_loc_format(fhr_loc_from_slot(s), lb, sizeof lb), nh, nw);
            ok = 0;
        }
        total += nh;
    }
    /* every node in a tree is on its value's list, and the lists hold nothing else */
    size_t listed = 0;
    for (size_t i = 0; i < x->caphead && ok; i++)
        for (uint32_t n = x->head[i]; n != VIX_NONE && ok; n = x->nodes[n].next, listed++)
            if (n >= x->nnodes || x->nodes[n].serial != i || listed > x->nnodes) {
                snprintf(why, nwhy, "the list of #%zu is broken", i);
                ok = 0;
            }
    if (ok && listed != total) {
        snprintf(why, nwhy, "%zu nodes listed by value, %zu in the trees", listed, total);
        ok = 0;
    }
    free(want);
    free(have);
    return ok;
}
