/* bench/schedule.c — the yardsticks of bench/bootstrap: a lower bound that no schedule of
 * the key sequence beats, exact when every key fits, and a feasible schedule beside it.
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
 * load starts as soon as the link is free and its victim's last body before it is done. */
#include "bench/schedule.h"

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
    for (size_t i = 0; i < n; i++) {
        double ready = 0;
        if (load[i]) {
            double slot = victim[i] != SCHED_NO_KEY ? end[vlast[i]] : 0;
            double start = link > slot ? link : slot;
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
