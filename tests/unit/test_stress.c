/* tests/unit/test_stress.c — many threads on one manager over the emulated device:
 * lease and hold threads acquire and release (consumer streams get random delays), one
 * thread moves, ensures and drops, one takes snapshots. Throughout: a protected copy is
 * never removed, accounting matches a recount and never goes negative or over budget,
 * MUST_PRESERVE values keep a copy, state versions only grow. Bounded in time and in
 * operations, seeded per thread. Uses only Test() and cr_assert* (it also runs under
 * TSan through tests/tsan/); worker threads record failures, the test thread asserts. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

enum {
    NADOPT = 10,          /* MUST_PRESERVE values */
    NSRC = 2,             /* RECONSTRUCTIBLE values */
    NVAL = NADOPT + NSRC,
    NLEASERS = 4,
    NHOLDERS = 2,
    MAX_OPS = 25000,      /* per thread */
    RUN_MS = 2000         /* wall-clock bound */
};

typedef struct stress {
    fhr_backend *b;
    fhr_manager *m;
    fhr_handle h[NVAL];
    size_t size[NVAL];
    uint64_t seed[NVAL];
    pat_source src[NSRC];
    uint64_t budget_cuda, budget_pinned;
    uint64_t t_end_ns;
    atomic_int stop;
    atomic_ullong ops, leases, holds, moves, snapshots, content_checks, residency_checks;
    atomic_ullong refused;   /* primitives refused for a reason the contract names */
    atomic_ullong reentrant; /* snapshots refused while a source load ran */
    atomic_int failures;
    pthread_mutex_t mu;    /* guards first_failure */
    char first_failure[512];
} stress;

typedef struct worker {
    stress *S;
    int id;
    uint64_t rng;
    uint64_t last_version;
    unsigned long long ops;
    fhr_stream *consumer; /* cuda:0 stream of a lease thread */
} worker;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(worker *w)
{
    /* xorshift64*: deterministic per thread */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 0x2545F4914F6CDD1DULL;
}

static void fail(stress *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(stress *S, const char *fmt, ...)
{
    pthread_mutex_lock(&S->mu);
    if (atomic_fetch_add(&S->failures, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(S->first_failure, sizeof S->first_failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&S->mu);
    atomic_store(&S->stop, 1);
}

/* Whether every kind of operation has happened at least once. */
static int every_kind_ran(stress *S)
{
    return atomic_load(&S->leases) && atomic_load(&S->holds) && atomic_load(&S->moves) &&
           atomic_load(&S->snapshots);
}

/* Counts one operation of w; 0 once the run must end. */
static int tick(worker *w)
{
    stress *S = w->S;
    if (atomic_load(&S->stop))
        return 0;
    /* the per-thread cap, like the time cap, waits until every kind of operation happened
     * (on a loaded machine a holder can spend its whole quota refused while values move) */
    if (++w->ops > MAX_OPS && every_kind_ran(S))
        return 0;
    atomic_fetch_add(&S->ops, 1);
    if ((w->ops & 15) == 0) {
        /* the time cap ends the run once every kind of operation happened at least once
         * (a loaded machine may need longer for that), and 30 s later regardless */
        uint64_t t = now_ns();
        int all = every_kind_ran(S);
        if ((t >= S->t_end_ns && all) || t >= S->t_end_ns + 30000000000ULL) {
            atomic_store(&S->stop, 1);
            return 0;
        }
    }
    return 1;
}

/* State versions only grow, as seen by any one thread. (0: the manager refused the
 * question while a source load runs.) */
static void check_version(worker *w)
{
    uint64_t v = t_state_version(w->S->m);
    if (v == 0)
        return;
    if (v < w->last_version)
        fail(w->S, "thread %d: state version went back from %llu to %llu", w->id,
             (unsigned long long)w->last_version, (unsigned long long)v);
    w->last_version = v;
}

static fhr_location pick_loc(worker *w)
{
    switch (rnd(w) % 3) {
    case 0: return fhr_loc_host();
    case 1: return fhr_loc_pinned();
    default: return fhr_loc_cuda(0);
    }
}

/* Picks distinct value indexes: mostly one, up to max. */
static size_t pick_values(worker *w, size_t *idx, size_t max)
{
    size_t n = rnd(w) % 4 ? 1 : 1 + rnd(w) % max, k = 0;
    while (k < n) {
        size_t v = rnd(w) % NVAL, j;
        for (j = 0; j < k && idx[j] != v; j++)
            ;
        if (j == k)
            idx[k++] = v;
    }
    return n;
}

/* The copy of value i at loc must still be there while protected. A source load in
 * another thread may refuse the question (FHR_E_REENTRANT): ask again until it is
 * answered (every load ends; a question never answered hangs the test, never passes). */
static void check_protected(worker *w, size_t i, fhr_location loc, const char *by)
{
    stress *S = w->S;
    for (;;) {
        int r = t_is_resident(S->m, S->h[i], loc);
        if (r == 1) {
            atomic_fetch_add(&S->residency_checks, 1);
            return;
        }
        if (r != -(int)FHR_E_REENTRANT) {
            char lb[16];
            fail(S, "thread %d: %s copy of value %zu at %s was removed (is_resident %d)", w->id,
                 by, i, fhr_loc_format(loc, lb, sizeof lb), r);
            return;
        }
        sched_yield();
    }
}

static void consumer_delay(void *arg)
{
    unsigned us = (unsigned)(uintptr_t)arg;
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

/* Reads a leased copy back and compares it with its pattern (adopted values and
 * sources both produce pat(seed)). For a device copy the consumer stream is drained
 * first, as a kernel's reader would be ordered after the acquire. */
static void check_content(worker *w, fhr_lease *l, size_t i, fhr_location loc)
{
    stress *S = w->S;
    if (loc.kind == FHR_LOC_CUDA && fhr_stream_sync(S->b, w->consumer, NULL) != FHR_OK) {
        fail(S, "thread %d: consumer stream sync failed", w->id);
        return;
    }
    const fhr_value *v = fhr_lease_value(l, S->h[i]);
    if (!v) {
        fail(S, "thread %d: leased value %zu missing from its lease", w->id, i);
        return;
    }
    fhr_value *hv = NULL;
    if (fhr_value_to(v, fhr_loc_host(), S->b, NULL, &hv, NULL) != FHR_OK) {
        fail(S, "thread %d: reading leased value %zu back failed", w->id, i);
        return;
    }
    void *p;
    size_t n;
    int ok = fhr_value_field(hv, "data", &p, &n) == FHR_OK && n == S->size[i];
    for (size_t k = 0; ok && k < n; k++)
        ok = ((uint8_t *)p)[k] == pat(S->seed[i], k);
    fhr_value_destroy(hv);
    atomic_fetch_add(&S->content_checks, 1);
    if (!ok)
        fail(S, "thread %d: leased copy of value %zu is not bit-exact", w->id, i);
}

static void *lease_thread(void *arg)
{
    worker *w = arg;
    stress *S = w->S;
    while (tick(w)) {
        size_t idx[3];
        size_t n = pick_values(w, idx, 3);
        fhr_handle hs[3];
        for (size_t k = 0; k < n; k++)
            hs[k] = S->h[idx[k]];
        fhr_location loc = pick_loc(w);
        fhr_stream *cs = loc.kind == FHR_LOC_CUDA ? w->consumer : NULL;
        fhr_lease *l = NULL;
        fhr_status st = fhr_acquire(S->m, hs, n, loc, cs, &l, NULL);
        check_version(w);
        if (st != FHR_OK) {
            if (st != FHR_E_STATE && st != FHR_E_REENTRANT)
                fail(S, "thread %d: acquire: %s", w->id, fhr_status_name(st));
            continue;
        }
        atomic_fetch_add(&S->leases, 1);
        if (cs && rnd(w) % 2)
            fhr_launch_host(S->b, cs, consumer_delay, (void *)(uintptr_t)(rnd(w) % 300), NULL);
        for (size_t k = 0; k < n; k++)
            check_protected(w, idx[k], loc, "leased");
        if (rnd(w) % 16 == 0)
            check_content(w, l, idx[0], loc);
        if (rnd(w) % 4 == 0)
            sched_yield();
        for (size_t k = 0; k < n; k++)
            check_protected(w, idx[k], loc, "leased");
        /* a source load in another thread refuses every call for its duration */
        while ((st = fhr_lease_release(l, NULL)) == FHR_E_REENTRANT)
            sched_yield();
        if (st != FHR_OK)
            fail(S, "thread %d: lease release: %s", w->id, fhr_status_name(st));
        while ((st = fhr_lease_release(l, NULL)) == FHR_E_REENTRANT)
            sched_yield();
        if (st != FHR_E_LEASE)
            fail(S, "thread %d: a second release was not refused", w->id);
        fhr_lease_destroy(l);
        if (rnd(w) % 8 == 0)
            t_reap(S->m);
        check_version(w);
    }
    return NULL;
}

static void *hold_thread(void *arg)
{
    worker *w = arg;
    stress *S = w->S;
    while (tick(w)) {
        size_t idx[4];
        size_t n = pick_values(w, idx, 4);
        fhr_handle hs[4];
        for (size_t k = 0; k < n; k++)
            hs[k] = S->h[idx[k]];
        fhr_location loc = pick_loc(w);
        fhr_hold *hd = NULL;
        fhr_status st = fhr_hold_acquire(S->m, hs, n, loc, &hd, NULL);
        check_version(w);
        if (st != FHR_OK) {
            if (st != FHR_E_STATE && st != FHR_E_REENTRANT)
                fail(S, "thread %d: hold: %s", w->id, fhr_status_name(st));
            continue;
        }
        atomic_fetch_add(&S->holds, 1);
        for (int round = 0; round < 2; round++) {
            for (size_t k = 0; k < n; k++)
                check_protected(w, idx[k], loc, "held");
            sched_yield();
        }
        while ((st = fhr_hold_release(hd, NULL)) == FHR_E_REENTRANT)
            sched_yield();
        if (st != FHR_OK)
            fail(S, "thread %d: hold release: %s", w->id, fhr_status_name(st));
        fhr_hold_destroy(hd);
        check_version(w);
    }
    return NULL;
}

/* One thread changes placements: ensure, move, drop (and reaps). Refusals for a reason
 * the contract names are fine; anything else is a failure. */
static void *mover_thread(void *arg)
{
    worker *w = arg;
    stress *S = w->S;
    while (tick(w)) {
        size_t i = rnd(w) % NVAL;
        fhr_location loc = pick_loc(w);
        fhr_error e;
        fhr_error_init(&e);
        fhr_status st;
        const char *op;
        switch (rnd(w) % 8) {
        case 0: case 1: case 2:
            op = "ensure";
            st = fhr_ensure(S->m, S->h[i], loc, NULL, &e);
            break;
        case 3: case 4:
            op = "move";
            st = fhr_move(S->m, S->h[i], loc, NULL, NULL, &e);
            break;
        case 5: case 6:
            op = "drop";
            st = fhr_drop(S->m, S->h[i], loc, &e);
            break;
        default:
            op = "priority";
            st = fhr_set_priority(S->m, S->h[i], (int32_t)(rnd(w) % 10), &e);
            t_reap(S->m);
            break;
        }
        check_version(w);
        switch (st) {
        case FHR_OK:
            atomic_fetch_add(&S->moves, 1);
            break;
        case FHR_E_STATE: case FHR_E_PRESERVE: case FHR_E_PROTECTED: case FHR_E_BUDGET:
        case FHR_E_REPLICA: case FHR_E_REENTRANT:
            atomic_fetch_add(&S->refused, 1);
            break;
        default:
            fail(S, "mover: %s value %zu: %s: %s", op, i, fhr_status_name(st), e.message);
        }
        fhr_error_clear(&e);
    }
    return NULL;
}

/* Accounting as a snapshot shows it: recount, no negative (wrapped) or over-budget
 * figures, every MUST_PRESERVE value keeps a copy, versions grow. */
static void check_snapshot(worker *w, const fhr_snapshot *s)
{
    stress *S = w->S;
    if (s->state_version < w->last_version)
        fail(S, "snapshot version %llu older than %llu seen before",
             (unsigned long long)s->state_version, (unsigned long long)w->last_version);
    w->last_version = s->state_version;
    uint64_t sum[FHR_LOC_SLOTS] = {0};
    for (size_t i = 0; i < s->nvalues; i++) {
        const fhr_value_info *v = &s->values[i];
        if (v->recoverability == FHR_MUST_PRESERVE && v->ncopies == 0)
            fail(S, "MUST_PRESERVE value #%llu has no copy",
                 (unsigned long long)v->handle.serial);
        if (v->mode == FHR_EXCLUSIVE && v->ncopies > 1)
            fail(S, "EXCLUSIVE value #%llu has %zu copies",
                 (unsigned long long)v->handle.serial, v->ncopies);
        for (size_t c = 0; c < v->ncopies; c++)
            sum[fhr_loc_slot(v->copies[c].loc)] += v->copies[c].charged_nbytes;
    }
    for (size_t i = 0; i < s->nlocs; i++) {
        const fhr_loc_stats *l = &s->locs[i];
        int slot = fhr_loc_slot(l->loc);
        if (l->used_bytes != sum[slot])
            fail(S, "slot %d: %llu bytes accounted, %llu recounted", slot,
                 (unsigned long long)l->used_bytes, (unsigned long long)sum[slot]);
        if (l->used_bytes > (UINT64_C(1) << 62) || l->reserved_bytes > (UINT64_C(1) << 62))
            fail(S, "slot %d: accounting went negative", slot);
        if (l->has_budget && l->used_bytes + l->reserved_bytes > l->budget_bytes)
            fail(S, "slot %d: %llu used over a budget of %llu", slot,
                 (unsigned long long)l->used_bytes, (unsigned long long)l->budget_bytes);
        if (l->peak_used_bytes < l->used_bytes)
            fail(S, "slot %d: peak below current use", slot);
    }
}

static void *snapshot_thread(void *arg)
{
    worker *w = arg;
    stress *S = w->S;
    while (tick(w)) {
        fhr_snapshot *s = NULL;
        fhr_status st = fhr_snapshot_take(S->m, &s, NULL);
        if (st == FHR_E_REENTRANT) {
            /* a source load runs: let it finish rather than spin through the budget */
            atomic_fetch_add(&S->reentrant, 1);
            consumer_delay((void *)(uintptr_t)20);
            continue;
        }
        if (st != FHR_OK) {
            fail(S, "snapshot: %s", fhr_status_name(st));
            continue;
        }
        atomic_fetch_add(&S->snapshots, 1);
        check_snapshot(w, s);
        if (rnd(w) % 32 == 0) {
            char *j = fhr_snapshot_json(s);
            if (!j)
                fail(S, "snapshot json failed");
            free(j);
        }
        fhr_snapshot_free(s);
        check_version(w);
    }
    return NULL;
}

static void stress_init(stress *S)
{
    memset(S, 0, sizeof *S);
    pthread_mutex_init(&S->mu, NULL);
    S->b = emu_backend(1);
    for (size_t i = 0; i < NVAL; i++) {
        S->size[i] = 4096 + 1024 * (i % 5);
        S->seed[i] = 1000 + i;
    }
    /* tight budgets: moves and ensures meet them often */
    S->budget_cuda = 40 * 1024;
    S->budget_pinned = 48 * 1024;
    fhr_budget bud[2] = {{fhr_loc_cuda(0), S->budget_cuda}, {fhr_loc_pinned(), S->budget_pinned}};
    S->m = new_manager(S->b, bud, 2);
    for (size_t i = 0; i < NADOPT; i++)
        S->h[i] = adopt_n(S->m, S->size[i], S->seed[i], i % 4 == 3 ? FHR_EXCLUSIVE : FHR_REPLICABLE);
    for (size_t k = 0; k < NSRC; k++) {
        size_t i = NADOPT + k;
        S->src[k] = (pat_source){.n = S->size[i], .seed = S->seed[i]};
        S->h[i] = register_pat(S->m, &S->src[k], FHR_REPLICABLE);
    }
    /* a starting spread over the three locations */
    for (size_t i = 0; i < NVAL; i++) {
        fhr_location to = i % 3 == 0 ? fhr_loc_cuda(0) : i % 3 == 1 ? fhr_loc_pinned() : fhr_loc_host();
        if (i % 4 == 3)
            fhr_move(S->m, S->h[i], to, NULL, NULL, NULL);
        else
            fhr_ensure(S->m, S->h[i], to, NULL, NULL);
    }
    check_accounting(S->m);
}

Test(threads_stress, leases_holds_moves_snapshots)
{
    stress S;
    stress_init(&S);
    enum { NW = NLEASERS + NHOLDERS + 2 };
    worker w[NW];
    pthread_t t[NW];
    S.t_end_ns = now_ns() + (uint64_t)RUN_MS * 1000000u;
    for (int i = 0; i < NW; i++) {
        w[i] = (worker){&S, i, 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1), 0, 0, NULL};
        if (i < NLEASERS)
            cr_assert_eq(fhr_stream_create(S.b, fhr_loc_cuda(0), &w[i].consumer, NULL), FHR_OK);
    }
    for (int i = 0; i < NW; i++) {
        void *(*fn)(void *) = i < NLEASERS ? lease_thread
                              : i < NLEASERS + NHOLDERS ? hold_thread
                              : i == NW - 2 ? mover_thread : snapshot_thread;
        cr_assert_eq(pthread_create(&t[i], NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < NW; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NLEASERS; i++) {
        fhr_stream_sync(S.b, w[i].consumer, NULL);
        fhr_stream_destroy(S.b, w[i].consumer);
    }
    t_reap(S.m);
    fprintf(stderr,
            "threads_stress: %llu operations: %llu leases, %llu holds, %llu placements "
            "(%llu refused), %llu snapshots (%llu refused during loads), %llu residency and "
            "%llu content checks\n",
            (unsigned long long)atomic_load(&S.ops), (unsigned long long)atomic_load(&S.leases),
            (unsigned long long)atomic_load(&S.holds), (unsigned long long)atomic_load(&S.moves),
            (unsigned long long)atomic_load(&S.refused),
            (unsigned long long)atomic_load(&S.snapshots),
            (unsigned long long)atomic_load(&S.reentrant),
            (unsigned long long)atomic_load(&S.residency_checks),
            (unsigned long long)atomic_load(&S.content_checks));
    cr_assert_eq(atomic_load(&S.failures), 0, "%s", S.first_failure);
    /* every kind of operation happened */
    cr_assert_gt(atomic_load(&S.leases), 0);
    cr_assert_gt(atomic_load(&S.holds), 0);
    cr_assert_gt(atomic_load(&S.moves), 0);
    cr_assert_gt(atomic_load(&S.snapshots), 0);
    /* quiescent: nothing protected any more, the books balance, contents are intact */
    check_accounting(S.m);
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(S.m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nvalues; i++)
        for (size_t c = 0; c < s->values[i].ncopies; c++) {
            const fhr_copy_info *ci = &s->values[i].copies[c];
            cr_assert_eq(ci->leases + ci->holds + ci->pending_events, 0,
                         "value #%llu still protected after every release",
                         (unsigned long long)s->values[i].handle.serial);
        }
    for (size_t i = 0; i < NVAL; i++) {
        const fhr_value_info *vi = fhr_snapshot_value(s, S.h[i]);
        cr_assert_not_null(vi);
        for (size_t c = 0; c < vi->ncopies; c++)
            cr_assert(resident_has_pattern(S.m, S.h[i], vi->copies[c].loc, S.seed[i], S.size[i]),
                      "value %zu differs after the run", i);
    }
    fhr_snapshot_free(s);
    fhr_manager_destroy(S.m);
    fhr_backend_destroy(S.b);
    pthread_mutex_destroy(&S.mu);
}
