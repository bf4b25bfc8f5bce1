/* bench/schedule.c — the yardsticks of bench/bootstrap: a lower bound that no schedule of
 * the key sequence beats, exact when every key fits, MIN's feasible schedule, and the best
 * schedule a deterministic search over eviction decisions finds (the time objective).
 *
 * The bound. Use i cannot start before its key is on the device, nor before use i-1 ends
 * (one compute stream, program order). By then every use up to i has had its key, so the
 * link has finished at least F(i) loads, where F(i) is the fewest loads any schedule needs
 * for uses 1..i with `capacity` keys: Belady's MIN run on that prefix. One link, loads of
 * load_s each: start(i) >= lead + F(i) * load_s. Hence start(i) >= max(end(i-1),
 * lead + F(i) * load_s), end(i) = start(i) + body(i), and the run takes at least
 * end(n) + tail. It ignores everything else a real schedule obeys (a key's slot is free
 * only once the bodies reading its victim are done, the workspace), so it is a relaxation.
 * When every key fits, F(i) is the number of distinct keys among uses 1..i and loading the
 * keys back to back in first-use order meets every start(i) exactly: the optimum itself.
 *
 * The schedule. Belady's MIN decides the victims (never used again first, ties broken by
 * the earliest last use, so the slot frees soonest; then the farthest next use), and each
 * load starts as soon as the link is free and its victim's last body before it is done.
 *
 * The search. The same model (loads in use order, each after the link and its victim's
 * last body), but any resident key may be the victim: MIN minimises loads, not time, and
 * waiting for MIN's victim can idle the link longer than loading another key again costs.
 * List scheduling under eight victim rules (MIN; MIN unless waiting for its slot idles the
 * link more than theta loads, theta = 4, 2, 1, 1/2, 1/4, 0, then the best key already
 * free; the earliest free slot), then local search from the best (at each eviction, each
 * of up to eight other victims with the base rule after it, kept when the makespan drops,
 * until a pass finds nothing), then a depth-first branch-and-bound over every victim at
 * every eviction, pruned by max(bodies left, loads of keys not resident) and limited to
 * node_limit nodes: when it finishes, the result is the optimum of the model. */
#include "bench/schedule.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

#define NEVER SIZE_MAX

/* next[i]: the next position after i that uses key[i], NEVER if none. */
static size_t *next_uses(const sched_in *in)
{
    size_t *next = malloc((in->n ? in->n : 1) * sizeof *next);
    if (!next)
        return NULL;
    uint32_t maxk = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->key[i] != SCHED_NO_KEY && in->key[i] + 1 > maxk)
            maxk = in->key[i] + 1;
    size_t *seen = malloc((maxk ? maxk : 1) * sizeof *seen);
    if (!seen) {
        free(next);
        return NULL;
    }
    for (uint32_t k = 0; k < maxk; k++)
        seen[k] = NEVER;
    for (size_t i = in->n; i-- > 0;) {
        next[i] = NEVER;
        if (in->key[i] == SCHED_NO_KEY)
            continue;
        next[i] = seen[in->key[i]];
        seen[in->key[i]] = i;
    }
    free(seen);
    return next;
}

/* Belady's MIN over uses 0..upto-1 (next uses at or beyond upto count as never). Returns
 * the number of loads; when victim/last are non-NULL (upto = n), victim[i] is the key
 * evicted for the load of use i (SCHED_NO_KEY: a free slot or no load) and
 * victim_last[i] the victim's last use before i. load[i] = 1 when use i loads. */
typedef struct resident {
    uint32_t key;
    size_t next, last; /* next use (NEVER), last use so far */
} resident;

static uint64_t belady(const sched_in *in, const size_t *next, size_t upto, resident *res,
                       char *load, uint32_t *victim, size_t *victim_last)
{
    size_t nres = 0;
    uint64_t loads = 0;
    for (size_t i = 0; i < upto; i++) {
        if (load)
            load[i] = 0, victim[i] = SCHED_NO_KEY, victim_last[i] = 0;
        uint32_t k = in->key[i];
        if (k == SCHED_NO_KEY)
            continue;
        size_t nx = next[i] != NEVER && next[i] < upto ? next[i] : NEVER;
        size_t r = 0;
        while (r < nres && res[r].key != k)
            r++;
        if (r < nres) { /* hit */
            res[r].next = nx;
            res[r].last = i;
            continue;
        }
        loads++;
        if (load)
            load[i] = 1;
        if (nres == in->capacity) {
            size_t v = 0;
            for (size_t j = 1; j < nres; j++) {
                const resident *a = &res[j], *b = &res[v];
                if (a->next != b->next ? a->next > b->next
                                       : (a->next == NEVER && a->last < b->last))
                    v = j;
            }
            if (victim)
                victim[i] = res[v].key, victim_last[i] = res[v].last;
            res[v] = res[--nres];
        }
        res[nres++] = (resident){k, nx, i};
    }
    return loads;
}

/* ---- the search ---------------------------------------------------------------------- */

typedef struct slot {
    uint32_t key;
    size_t next;  /* next use, NEVER if none */
    double free_t; /* when its last body so far ends */
} slot;

/* MIN's order: a before b when a is used later (never first), then frees sooner. */
static int min_before(const slot *a, const slot *b)
{
    if (a->next != b->next)
        return a->next > b->next;
    if (a->free_t != b->free_t)
        return a->free_t < b->free_t;
    return a->key < b->key;
}

#define RULE_EARLIEST (-1.0)
static const double rules[] = {INFINITY, 4, 2, 1, 0.5, 0.25, 0, RULE_EARLIEST};
#define NRULES (sizeof rules / sizeof rules[0])

/* The victim under rule theta among res[0..n-1], with the link free at `link`. */
static size_t pick(const slot *res, size_t n, double theta, double link, double load_s)
{
    size_t v = 0, e = 0, f = n; /* MIN's, earliest free, MIN's among those free by link */
    for (size_t j = 0; j < n; j++) {
        if (min_before(&res[j], &res[v]))
            v = j;
        if (res[j].free_t < res[e].free_t ||
            (res[j].free_t == res[e].free_t && min_before(&res[j], &res[e])))
            e = j;
        if (res[j].free_t <= link && (f == n || min_before(&res[j], &res[f])))
            f = j;
    }
    if (theta == RULE_EARLIEST)
        return e;
    if (res[v].free_t - link <= theta * load_s)
        return v;
    return f < n ? f : e;
}

typedef struct sim_rec {
    char *full;       /* use i evicted (the device was full) */
    uint32_t *victim; /* its victim */
    size_t probe;     /* record the candidates at this use (NEVER: none) */
    uint32_t *cands;
    size_t ncands;
    uint64_t loads;
    double idle;
} sim_rec;

/* One schedule: rule theta, except that at a use i with ovr[i] resident that key is the
 * victim. Returns the makespan. */
static double simulate(const sched_in *in, const size_t *next, double theta, const uint32_t *ovr,
                       slot *res, sim_rec *rec)
{
    size_t nres = 0;
    double link = in->lead_s, prev = in->lead_s;
    if (rec)
        rec->loads = 0, rec->idle = 0, rec->ncands = 0;
    int loaded = 0;
    for (size_t i = 0; i < in->n; i++) {
        uint32_t k = in->key[i];
        if (rec && rec->full)
            rec->full[i] = 0, rec->victim[i] = SCHED_NO_KEY;
        double ready = 0;
        size_t r = 0;
        if (k != SCHED_NO_KEY) {
            while (r < nres && res[r].key != k)
                r++;
            if (r == nres) { /* a miss */
                double slot_t = 0;
                if (nres == in->capacity) {
                    size_t v = nres;
                    if (ovr && ovr[i] != SCHED_NO_KEY)
                        for (size_t j = 0; j < nres && v == nres; j++)
                            if (res[j].key == ovr[i])
                                v = j;
                    if (v == nres)
                        v = pick(res, nres, theta, link, in->load_s);
                    if (rec && rec->probe == i)
                        for (size_t j = 0; j < nres; j++)
                            rec->cands[rec->ncands++] = res[j].key;
                    if (rec && rec->full)
                        rec->full[i] = 1, rec->victim[i] = res[v].key;
                    slot_t = res[v].free_t;
                    res[v] = res[--nres];
                    r = nres;
                }
                double start = link > slot_t ? link : slot_t;
                if (rec && loaded && start - link > rec->idle)
                    rec->idle = start - link;
                loaded = 1;
                link = start + in->load_s;
                ready = link;
                res[nres++] = (slot){k, 0, 0};
                if (rec)
                    rec->loads++;
            }
        }
        double start = prev > ready ? prev : ready;
        prev = start + in->body_s[i];
        if (k != SCHED_NO_KEY) {
            res[r].next = next[i];
            res[r].free_t = prev;
        }
    }
    return (prev > link ? prev : link) + in->tail_s;
}

typedef struct bnb {
    const sched_in *in;
    const size_t *next;
    const double *rest_body; /* sum of body_s[i..n-1] */
    double best, best_idle;
    uint64_t best_loads;
    size_t nodes, limit;
    int cut;
    uint32_t *seen; /* scratch: generation marks per key */
    uint32_t gen, maxk;
} bnb;

/* Keys used at i.. that are not resident: each needs a load. */
static size_t missing_keys(bnb *b, const slot *res, size_t nres, size_t i)
{
    if (++b->gen == 0) {
        memset(b->seen, 0, b->maxk * sizeof *b->seen);
        b->gen = 1;
    }
    for (size_t j = 0; j < nres; j++)
        b->seen[res[j].key] = b->gen;
    size_t m = 0;
    for (size_t j = i; j < b->in->n; j++) {
        uint32_t k = b->in->key[j];
        if (k != SCHED_NO_KEY && b->seen[k] != b->gen) {
            b->seen[k] = b->gen;
            m++;
        }
    }
    return m;
}

static void dfs(bnb *b, size_t i, slot *res, size_t nres, double link, double prev, double idle,
                uint64_t loads)
{
    const sched_in *in = b->in;
    for (; i < in->n; i++) { /* hits and loads into free slots need no choice */
        uint32_t k = in->key[i];
        double lb = prev + b->rest_body[i] + in->tail_s;
        double lb2 = link + (double)missing_keys(b, res, nres, i) * in->load_s + in->tail_s;
        if ((lb > lb2 ? lb : lb2) >= b->best * (1 - 1e-12))
            return;
        if (++b->nodes > b->limit) {
            b->cut = 1;
            return;
        }
        size_t r = 0;
        while (k != SCHED_NO_KEY && r < nres && res[r].key != k)
            r++;
        double ready = 0;
        if (k != SCHED_NO_KEY && r == nres) {
            if (nres == in->capacity)
                break;
            link += in->load_s; /* a free slot: right after the link's last load */
            ready = link;
            loads++;
            res[nres++] = (slot){k, 0, 0};
        }
        double start = prev > ready ? prev : ready;
        prev = start + in->body_s[i];
        if (k != SCHED_NO_KEY) {
            res[r].next = b->next[i];
            res[r].free_t = prev;
        }
    }
    if (i == in->n) {
        double t = (prev > link ? prev : link) + in->tail_s;
        if (t < b->best * (1 - 1e-12))
            b->best = t, b->best_idle = idle, b->best_loads = loads;
        return;
    }
    /* an eviction: every victim, MIN's first, then by the time its slot frees */
    size_t cap = in->capacity;
    size_t order[cap];
    for (size_t j = 0; j < cap; j++)
        order[j] = j;
    for (size_t a = 0; a < cap; a++) /* selection: MIN's victim, then earliest free */
        for (size_t c = a + 1; c < cap; c++) {
            const slot *x = &res[order[c]], *y = &res[order[a]];
            int better = a == 0 ? min_before(x, y)
                                : (x->free_t < y->free_t || (x->free_t == y->free_t && min_before(x, y)));
            if (better) {
                size_t t = order[a];
                order[a] = order[c];
                order[c] = t;
            }
        }
    slot child[cap];
    for (size_t a = 0; a < cap && !b->cut; a++) {
        memcpy(child, res, cap * sizeof *res);
        size_t v = order[a];
        double slot_t = child[v].free_t;
        child[v] = (slot){in->key[i], 0, 0};
        double start = link > slot_t ? link : slot_t;
        double nidle = loads && start - link > idle ? start - link : idle;
        double nl = start + in->load_s;
        double bs = prev > nl ? prev : nl;
        double np = bs + in->body_s[i];
        child[v].next = b->next[i];
        child[v].free_t = np;
        dfs(b, i + 1, child, cap, nl, np, nidle, loads + 1);
    }
}

/* The search: the best of the rules, local search over victims, branch-and-bound. */
static int search(const sched_in *in, const size_t *next, sched_out *out)
{
    size_t n = in->n, cap = in->capacity;
    slot *res = malloc((cap + 1) * sizeof *res);
    uint32_t *ovr = malloc((n ? n : 1) * sizeof *ovr);
    char *full = malloc(n ? n : 1);
    uint32_t *victim = malloc((n ? n : 1) * sizeof *victim);
    uint32_t *cands = malloc((cap + 1) * sizeof *cands);
    double *rest = malloc((n + 1) * sizeof *rest);
    int rc = -1;
    uint32_t maxk = 1;
    for (size_t i = 0; i < n; i++)
        if (in->key[i] != SCHED_NO_KEY && in->key[i] + 1 > maxk)
            maxk = in->key[i] + 1;
    uint32_t *seen = calloc(maxk, sizeof *seen);
    if (!res || !ovr || !full || !victim || !cands || !rest || !seen)
        goto done;
    for (size_t i = 0; i < n; i++)
        ovr[i] = SCHED_NO_KEY;
    double best = INFINITY, theta = INFINITY;
    for (size_t r = 0; r < NRULES; r++) {
        double t = simulate(in, next, rules[r], NULL, res, NULL);
        if (t < best)
            best = t, theta = rules[r];
    }
    /* local search: one victim changed at a time, the base rule after it */
    sim_rec rec = {full, victim, NEVER, cands, 0, 0, 0};
    for (int pass = 0, improved = 1; improved && pass < 4; pass++) {
        improved = 0;
        simulate(in, next, theta, ovr, res, &rec);
        for (size_t i = 0; i < n; i++) {
            if (!full[i])
                continue;
            sim_rec pr = {NULL, NULL, i, cands, 0, 0, 0};
            simulate(in, next, theta, ovr, res, &pr);
            uint32_t cur = ovr[i];
            size_t tries = 0;
            for (size_t c = 0; c < pr.ncands && tries < 8; c++) {
                uint32_t key = cands[c];
                /* the MIN-nearest and the soonest-free candidates come first: try the
                 * candidates in the order the cache holds them, at most eight */
                ovr[i] = key;
                tries++;
                double t = simulate(in, next, theta, ovr, res, NULL);
                if (t < best * (1 - 1e-12)) {
                    best = t;
                    cur = key;
                    improved = 1;
                }
            }
            ovr[i] = cur;
            simulate(in, next, theta, ovr, res, &rec);
        }
    }
    rec.probe = NEVER;
    simulate(in, next, theta, ovr, res, &rec);
    /* branch-and-bound from the incumbent */
    rest[n] = 0;
    for (size_t i = n; i-- > 0;)
        rest[i] = rest[i + 1] + in->body_s[i];
    bnb b = {in, next, rest, best, rec.idle, rec.loads, 0,
             in->node_limit ? in->node_limit : 200000, 0, seen, 0, maxk};
    dfs(&b, 0, res, 0, in->lead_s, in->lead_s, 0, 0);
    out->search_exact = !b.cut;
    out->search_s = b.best;
    out->search_loads = b.best_loads;
    out->search_idle_s = b.best_idle;
    rc = 0;
done:
    free(res);
    free(ovr);
    free(full);
    free(victim);
    free(cands);
    free(rest);
    free(seen);
    return rc;
}

int sched_yardsticks(const sched_in *in, sched_out *out)
{
    memset(out, 0, sizeof *out);
    size_t n = in->n;
    size_t *next = next_uses(in);
    resident *res = malloc((in->capacity + 1) * sizeof *res);
    char *load = malloc(n ? n : 1);
    uint32_t *victim = malloc((n ? n : 1) * sizeof *victim);
    size_t *vlast = malloc((n ? n : 1) * sizeof *vlast);
    double *end = malloc((n ? n : 1) * sizeof *end);
    int rc = -1;
    if (!next || !res || !load || !victim || !vlast || !end)
        goto done;
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (in->key[i] == SCHED_NO_KEY)
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = in->key[j] == in->key[i];
        distinct += !seen;
    }
    if (distinct && !in->capacity)
        goto done;
    out->exact = distinct <= in->capacity;

    /* the bound: F(i) by MIN on each prefix (F is computed for prefix i+1) */
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t f = belady(in, next, i + 1, res, NULL, NULL, NULL);
        double ready = in->lead_s + (double)f * in->load_s;
        double start = t > ready ? t : ready;
        t = start + in->body_s[i];
    }
    out->bound_s = t + in->tail_s;

    /* the schedule: MIN's victims, each load as early as the link and its slot allow */
    out->min_loads = belady(in, next, n, res, load, victim, vlast);
    double link = in->lead_s, prev = in->lead_s; /* no body before the ciphertext is there */
    int loaded = 0;
    for (size_t i = 0; i < n; i++) {
        double ready = 0;
        if (load[i]) {
            double slot = victim[i] != SCHED_NO_KEY ? end[vlast[i]] : 0;
            double start = link > slot ? link : slot;
            if (loaded && start - link > out->min_idle_s)
                out->min_idle_s = start - link;
            loaded = 1;
            link = start + in->load_s;
            ready = link;
        } else if (in->key[i] != SCHED_NO_KEY) {
            ready = 0; /* resident since an earlier load, which ended before that use */
        }
        double start = prev > ready ? prev : ready;
        end[i] = start + in->body_s[i];
        prev = end[i];
    }
    double fin = prev > link ? prev : link;
    out->best_s = fin + in->tail_s;
    if (search(in, next, out) != 0)
        goto done;
    if (out->best_s < out->search_s) { /* MIN's ties broken otherwise: that schedule */
        out->search_s = out->best_s;
        out->search_loads = out->min_loads;
        out->search_idle_s = out->min_idle_s;
    }
    rc = 0;
done:
    free(next);
    free(res);
    free(load);
    free(victim);
    free(vlast);
    free(end);
    return rc;
}
