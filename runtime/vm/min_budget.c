/* runtime/vm/min_budget.c — rplan_min_budget: the smallest budget at one location that
 * makes a program feasible, every feasible interval where feasibility is not monotonic,
 * the threshold from which every budget is, and the budget within 5% of the unbounded
 * predicted time. Each probe is the verifier's dry run and the VM's explain run at one
 * budget (what `fheplan check --budget LOC=B` decides), with no compile.
 *
 * Feasibility is not monotonic in a budget (keys that fill a device as far as it goes
 * leave less room for a later explicit move at some budgets than at smaller ones), so the
 * search decides every budget, exactly. The budget B at LOC enters a check only through
 * comparisons of a charge against it: "committed + size <= B" in the verifier's dry run,
 * the manager's admission and the room a policy sees (B - committed, set against sizes).
 * Every charge at LOC is a sum of items: a copy of a value there (its size; at host or
 * pinned a seeded value's size less its regenerated half unless kept), a source's
 * temporary copy at a host location, and the reservations at LOC. Between two consecutive
 * such sums no comparison changes its outcome, so feasibility is constant there. From the
 * top — the highest charge either the unbounded explain run or the unbounded dry run sets
 * against LOC — every comparison comes out as in the unbounded runs, so the plan is
 * feasible there exactly when it is feasible at all. Probing every distinct sum of the
 * items up to the top (a subset-sum set over the items' common divisor) therefore
 * decides every budget; past RPLAN_MIN_BUDGET_PROBES sums the scan probes the highest
 * ones and finds the rest by bisection, and says that the result is not exact.
 *
 * The dry run decides nothing by its budget: the charges it sets against LOC are the same
 * at every budget, so it refuses exactly the budgets below the highest of them (its peak,
 * the floor). Every sum below the floor is infeasible without a probe: the probes grow
 * with the sums between the floor and the top, where the explain run's decisions differ
 * from budget to budget. */
#include "fheplan/vm.h"
#include "runtime/program/program.h"
#include "base/error.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#define MB_CEIL ((uint64_t)1 << 44)     /* 16 TiB stands for "unbounded" */
#define MB_BITS ((uint64_t)1 << 27)     /* subset-sum set size (16 MiB of bits) */
#define MB_DEVICES "model:62"           /* the model backend check runs on */
#define MB_BUDGETS (FHR_LOC_SLOTS + 1)  /* the caller's overrides and the probe's */

typedef struct mb_ctx {
    const rplan_program *p;
    fhr_location loc;
    rplan_vm_opts o;                    /* the caller's, in explain mode */
    fhr_budget bud[MB_BUDGETS];         /* the caller's overrides, then the probe's */
    size_t nbud;
    rplan_min_budget_result *r;
    fhr_error *err;
} mb_ctx;

/* What one probe saw. */
typedef struct mb_seen {
    double predicted;
    uint64_t vm_peak;  /* the explain run's peak at loc (UINT64_MAX: not reported) */
    uint64_t ver_peak; /* the dry run's highest charge at loc */
    char why[512];     /* a refusal: the verifier's or the explain run's message */
} mb_seen;

/* One probe at budget b: 1 feasible, 0 rejected, -1 error (in m->err). */
static int probe(mb_ctx *m, uint64_t b, mb_seen *seen)
{
    m->bud[m->nbud] = (fhr_budget){m->loc, b};
    rp_vfail f;
    uint64_t peak[FHR_LOC_SLOTS];
    int slot = fhr_loc_slot(m->loc);
    fhr_status st = rp_verify_budgets(m->p, m->bud, m->nbud + 1, peak, &f);
    if (seen) {
        memset(seen, 0, sizeof *seen);
        seen->ver_peak = peak[slot];
        seen->vm_peak = UINT64_MAX;
        snprintf(seen->why, sizeof seen->why, "%.500s", st ? f.msg : "");
    }
    if (st == FHR_E_INFEASIBLE)
        return 0;
    if (st) {
        fhr_fail(m->err, st, "min budget: the verifier failed at %llu bytes: %s",
                 (unsigned long long)b, f.msg);
        return -1;
    }
    fhr_backend *be = NULL;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    rplan_vm_opts o = m->o;
    o.budget_override = m->bud;
    o.nbudget_override = m->nbud + 1;
    fhr_error e;
    fhr_error_init(&e);
    int ok = -1;
    if ((st = fhr_backend_open(MB_DEVICES, &be, &e)) == FHR_OK &&
        (st = rplan_vm_create(m->p, be, &o, &vm, &e)) == FHR_OK) {
        rplan_vm_run(vm, &rep, &e);
        if (rep) {
            ok = rep->ok != 0;
            if (seen) {
                seen->predicted = rep->predicted_s;
                seen->vm_peak = rep->total.npeaks < RPLAN_MAX_PEAKS ? 0 : UINT64_MAX;
                for (size_t i = 0; i < rep->total.npeaks; i++)
                    if (fhr_loc_equal(rep->total.peaks[i].loc, m->loc))
                        seen->vm_peak = rep->total.peaks[i].peak_bytes;
                if (!rep->ok)
                    snprintf(seen->why, sizeof seen->why, "%.500s", rep->message);
            }
        }
    }
    if (ok < 0)
        fhr_fail(m->err, st ? st : FHR_E_BACKEND, "min budget: the explain run at %llu bytes "
                 "failed: %s", (unsigned long long)b, e.message[0] ? e.message : "no report");
    fhr_error_clear(&e);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    return ok;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct mb_items {
    uint64_t *v;
    size_t n, cap;
} mb_items;

static int items_add(mb_items *it, uint64_t x)
{
    if (!x)
        return 0;
    if (it->n == it->cap) {
        size_t cap = it->cap ? 2 * it->cap : 64;
        uint64_t *nv = realloc(it->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        it->v = nv;
        it->cap = cap;
    }
    it->v[it->n++] = x;
    return 0;
}

/* What can be charged at loc: see the comment at the top. -1 on allocation failure. */
static int charge_items(const rplan_program *p, fhr_location loc, mb_items *it)
{
    int host = loc.kind != FHR_LOC_CUDA;
    unsigned keep = loc.kind == FHR_LOC_PINNED ? FHR_KEEP_PINNED : FHR_KEEP_HOST;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) != FHR_OK)
            continue;
        uint64_t stored = vi.seeded ? vi.nbytes - vi.regen_nbytes : vi.nbytes;
        if (!host) {
            if (items_add(it, vi.nbytes))
                return -1;
            continue;
        }
        /* a copy (whole when kept) and a source's temporary, which holds what a copy holds */
        uint64_t copy = vi.seeded && !(vi.keep & keep) ? stored : vi.nbytes;
        if (items_add(it, copy) || items_add(it, stored) || items_add(it, vi.nbytes))
            return -1;
    }
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr ins;
        if (rplan_instr_get(p, i, &ins) == FHR_OK && ins.opname && !strcmp(ins.opname, "reserve") &&
            ins.has_loc && fhr_loc_equal(ins.loc, loc) && items_add(it, ins.imm))
            return -1;
    }
    return 0;
}

/* The distinct sums of the items up to top, and top and floor themselves, ascending,
 * into *out (0 first). The count, or (size_t)-1 when the set would be too large or on allocation
 * failure (*nomem says which). */
static size_t candidate_sums(const mb_items *it, uint64_t top, uint64_t fl, uint64_t *grain,
                             uint64_t **out, int *nomem)
{
    uint64_t g = gcd64(top, fl);
    for (size_t i = 0; i < it->n; i++)
        g = gcd64(g, it->v[i]);
    if (!g)
        g = 1;
    *grain = g;
    uint64_t k = top / g + 1; /* lattice points 0..top */
    if (k > MB_BITS)
        return (size_t)-1;
    size_t words = (size_t)((k + 63) / 64);
    uint64_t *set = calloc(words, sizeof *set);
    if (!set) {
        *nomem = 1;
        return (size_t)-1;
    }
    set[0] = 1;
    for (size_t i = 0; i < it->n; i++) {
        uint64_t sh = it->v[i] / g;
        if (sh >= k)
            continue;
        size_t ws = (size_t)(sh / 64);
        unsigned bs = (unsigned)(sh % 64);
        for (size_t w = words; w-- > ws;) { /* set |= set << sh, high words first */
            uint64_t x = set[w - ws] << bs;
            if (bs && w - ws > 0)
                x |= set[w - ws - 1] >> (64 - bs);
            set[w] |= x;
        }
    }
    if (k % 64)
        set[words - 1] &= ((uint64_t)1 << (k % 64)) - 1;
    set[(k - 1) / 64] |= (uint64_t)1 << ((k - 1) % 64); /* top: feasible when any is */
    if (fl <= top) /* the floor: where the dry run starts to pass */
        set[fl / g / 64] |= (uint64_t)1 << (fl / g % 64);
    size_t n = 0;
    for (size_t w = 0; w < words; w++)
        n += (size_t)__builtin_popcountll(set[w]);
    uint64_t *v = malloc(n * sizeof *v);
    if (!v) {
        free(set);
        *nomem = 1;
        return (size_t)-1;
    }
    size_t j = 0;
    for (size_t w = 0; w < words; w++)
        for (uint64_t b = set[w]; b; b &= b - 1)
            v[j++] = ((uint64_t)w * 64 + (uint64_t)__builtin_ctzll(b)) * g;
    free(set);
    *out = v;
    return n;
}

/* Appends an interval; past RPLAN_MIN_BUDGET_INTERVALS the last kept one is replaced, so
 * the last (the threshold's) is always there. */
static void add_interval(rplan_min_budget_result *r, uint64_t from, uint64_t to)
{
    if (r->nint == RPLAN_MIN_BUDGET_INTERVALS)
        r->nint--;
    r->iv[r->nint++] = (rplan_budget_interval){from, to};
    r->nint_all++;
}

/* The smallest feasible budget in [fl, hi] by bisection, hi feasible, every budget
 * below fl infeasible: exact only where feasibility is monotonic below hi. 0, or -1 on
 * a probe's error. */
static int bisect_below(mb_ctx *m, uint64_t fl, uint64_t hi, uint64_t *out)
{
    uint64_t lo = fl ? fl - 1 : 0; /* infeasible, or 0 to be probed */
    int o = 0;
    if (!fl) {
        o = probe(m, 0, NULL);
        m->r->probes++;
    }
    if (o < 0)
        return -1;
    if (o)
        hi = 0;
    while (hi && lo + 1 < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        m->r->probes++;
        if ((o = probe(m, mid, NULL)) < 0)
            return -1;
        if (o)
            hi = mid;
        else
            lo = mid;
    }
    *out = hi;
    return 0;
}

/* Feasibility at each candidate, from the top down (the top one is feasible), then the
 * intervals. 0, or -1 on error. */
static int scan(mb_ctx *m, const uint64_t *cand, size_t n)
{
    rplan_min_budget_result *r = m->r;
    int *ok = malloc(n * sizeof *ok);
    if (!ok) {
        fhr_fail(m->err, FHR_E_NOMEM, "min budget: out of host memory (%zu candidates)", n);
        return -1;
    }
    size_t first = 0; /* the candidates below the floor: infeasible, by the dry run */
    while (first < n && cand[first] < r->floor)
        ok[first++] = 0;
    size_t lowest = n, probes0 = r->probes; /* candidates lowest..n-1 are probed */
    while (lowest > first && r->probes - probes0 < RPLAN_MIN_BUDGET_PROBES) {
        lowest--;
        r->probes++;
        if ((ok[lowest] = probe(m, cand[lowest], NULL)) < 0) {
            free(ok);
            return -1;
        }
    }
    r->exact = lowest == first;
    /* feasibility holds from a candidate up to one byte below the next candidate */
    for (size_t i = lowest; i < n; i++) {
        if (ok[i] != 1)
            continue;
        size_t j = i;
        while (j + 1 < n && ok[j + 1] == 1)
            j++;
        add_interval(r, cand[i], j + 1 == n ? UINT64_MAX : cand[j + 1] - 1);
        i = j;
    }
    /* not exact: below what was probed, one bisection, as if feasibility were monotonic */
    int err = 0;
    uint64_t h;
    if (!r->exact && ok[lowest] == 1 && r->nint &&
        !(err = bisect_below(m, r->floor, cand[lowest], &h)))
        r->iv[0].from = h;
    free(ok);
    return err;
}

/* The predicted times at the feasible budget and the threshold, and the smallest budget
 * from the threshold on whose predicted time is within 5% of the unbounded one (the
 * predicted time falls as the budget grows: bisection over [threshold, ceiling]). */
static int times(mb_ctx *m)
{
    rplan_min_budget_result *r = m->r;
    mb_seen s;
    if (probe(m, r->feasible, &s) < 0)
        return -1;
    r->feasible_s = s.predicted;
    if (probe(m, r->threshold, &s) < 0)
        return -1;
    r->threshold_s = s.predicted;
    double limit = r->unbounded_s * 1.05;
    uint64_t lo = r->threshold, hi = MB_CEIL;
    if (r->threshold_s <= limit)
        hi = lo;
    while (lo + 1 < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int o = probe(m, mid, &s);
        if (o < 0)
            return -1;
        if (o && s.predicted <= limit)
            hi = mid;
        else
            lo = mid;
    }
    r->near = hi;
    if (probe(m, hi, &s) < 0)
        return -1;
    r->near_s = s.predicted;
    return 0;
}

/* The search once the top is known feasible. 0, or -1 on error (in m->err). */
static int search(mb_ctx *m, uint64_t top)
{
    rplan_min_budget_result *r = m->r;
    mb_items it = {0};
    if (charge_items(m->p, m->loc, &it)) {
        free(it.v);
        fhr_fail(m->err, FHR_E_NOMEM, "min budget: out of host memory");
        return -1;
    }
    uint64_t *cand = NULL;
    int nomem = 0;
    size_t n = top < MB_CEIL ? candidate_sums(&it, top, r->floor, &r->grain, &cand, &nomem)
                             : (size_t)-1;
    free(it.v);
    if (nomem) {
        fhr_fail(m->err, FHR_E_NOMEM, "min budget: out of host memory");
        return -1;
    }
    r->candidates = n == (size_t)-1 ? 0 : n;
    int st = 0;
    uint64_t h;
    if (n == (size_t)-1) { /* too many sums to hold: bisection below the top */
        if (!(st = bisect_below(m, r->floor, top < MB_CEIL ? top : MB_CEIL, &h)))
            add_interval(r, h, UINT64_MAX);
    } else {
        st = scan(m, cand, n);
    }
    free(cand);
    if (st)
        return -1;
    if (!r->nint) { /* cannot happen: the top is feasible */
        fhr_fail(m->err, FHR_E_BACKEND, "min budget: no feasible budget found below the "
                 "feasible top %llu at the probes", (unsigned long long)top);
        return -1;
    }
    r->feasible = r->iv[0].from;
    r->threshold = r->iv[r->nint - 1].from;
    r->unused = r->threshold == 0 && r->peak == 0;
    return times(m);
}

fhr_status rplan_min_budget(const rplan_program *p, fhr_location loc, const rplan_vm_opts *opts,
                            rplan_min_budget_result *out, fhr_error *err)
{
    if (!p || !out)
        return fhr_fail(err, FHR_E_INVALID, "min budget: NULL program or result");
    memset(out, 0, sizeof *out);
    int slot = fhr_loc_slot(loc);
    if (slot < 0 || slot >= FHR_LOC_SLOTS)
        return fhr_fail(err, FHR_E_INVALID, "min budget: not a location");
    mb_ctx m = {.p = p, .loc = loc, .r = out, .err = err};
    if (opts)
        m.o = *opts;
    m.o.mode = RPLAN_VM_EXPLAIN;
    m.o.scale = 1;
    m.o.trace = 0;
    for (size_t i = 0; opts && i < opts->nbudget_override; i++) {
        const fhr_budget *b = &opts->budget_override[i];
        if (fhr_loc_equal(b->loc, loc))
            continue; /* the probe's budget replaces it */
        size_t k = 0;
        while (k < m.nbud && !fhr_loc_equal(m.bud[k].loc, b->loc))
            k++;
        if (k == m.nbud && m.nbud == MB_BUDGETS - 1)
            return fhr_fail(err, FHR_E_INVALID, "min budget: more budget overrides than "
                            "locations");
        m.bud[k] = *b;
        m.nbud += k == m.nbud;
    }
    mb_seen s;
    int f = probe(&m, MB_CEIL, &s);
    if (f < 0)
        return err ? err->status : FHR_E_BACKEND;
    out->unbounded_s = s.predicted;
    if (!f) {
        snprintf(out->reason, sizeof out->reason, "%s", s.why);
        return FHR_OK;
    }
    out->found = 1;
    /* the top: where both runs compare as the unbounded ones did */
    uint64_t top = s.vm_peak > s.ver_peak ? s.vm_peak : s.ver_peak;
    out->peak = top == UINT64_MAX ? s.ver_peak : top;
    out->floor = s.ver_peak;
    if (search(&m, top) < 0) {
        out->found = 0;
        return err ? err->status : FHR_E_BACKEND;
    }
    return FHR_OK;
}
