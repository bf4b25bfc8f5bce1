/* cli/check.c — `fheplan check`: each plan's dry run on the model backend, what each
 * built-in policy would move, the --min-budget search, and --world-size's run per rank
 * (--sarif: the log of cli/sarif.c instead). */
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/sarif.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rate in GB/s: one decimal in the usual range, else with an exponent (absurd rates). */
static const char *rate_text(double g, char *buf, size_t cap)
{
    snprintf(buf, cap, g >= 0.1 && g < 1e6 ? "%.1f" : "%.3g", g);
    return buf;
}

static void explain_opts(const cli *c, rplan_vm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = RPLAN_VM_EXPLAIN;
    o->budget_override = c->budgets;
    o->nbudget_override = c->nbudgets;
    o->unknown_as_touch = 1;
    o->policy_override = c->policy;
    o->objective = c->objective;
    o->pinned_gbps = c->pinned_gbps;
    o->device_gbps = c->device_gbps;
    o->gen_gbps = c->gen_gbps;
    o->peer_gbps = c->peer_gbps;
    o->profile = c->profile;
    o->nprofile = c->nprofile;
}

/* How many devices the run touched (the peaks name every location it used). */
static int devices_used(const rplan_vm_report *rep)
{
    int n = 0;
    for (size_t i = 0; i < rep->total.npeaks; i++)
        n += rep->total.peaks[i].loc.kind == FHR_LOC_CUDA;
    return n;
}

static const char *policy_name(int kind)
{
    return kind == RPLAN_POLICY_LOOKAHEAD ? "lookahead"
           : kind == RPLAN_POLICY_TIERED_LRU ? "tiered_lru"
                                             : "as written";
}

static uint64_t moved_bytes(const rplan_stage_report *r)
{
    uint64_t m = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        m += r->bytes[d];
    return m;
}

#define PROBE_BUDGETS 32 /* budget overrides a probe passes on */

/* 1 when the run as written was already the run a probe of `kind` would make: the source
 * was compiled here with the probe's options (budgets, rank) and --policy names that kind,
 * or every policy of the plan is of it. */
static int as_written_is(const cli *c, const input *in, int kind)
{
    if (!in->compiled || !in->p || c->nbudgets > PROBE_BUDGETS)
        return 0;
    if (c->policy)
        return c->policy == kind;
    for (size_t i = 0; i < rplan_npolicies(in->p); i++) {
        rplan_policy_info pi;
        if (rplan_policy(in->p, i, &pi) != FHR_OK || (int)pi.kind != kind)
            return 0;
    }
    return 1;
}

/* One quiet check of src with extra budget overrides and a policy: compile (with the
 * verifier's dry run) and the VM's explain run. 1 feasible, 0 rejected, -1 error. */
static int probe_at(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                    int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                    uint64_t link[2], uint64_t *peak, rplan_program **keep);

static int probe(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                 int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                 uint64_t link[2])
{
    return probe_at(c, in, extra, nextra, policy, predicted, moved, regen, link, NULL, NULL);
}

/* probe_at, of `have` (not compiled again) when given. probe_policy: a probe with no
 * extra budget of a program compiled here, whose in->p is what the probe would compile
 * (the same text, budgets and rank), so it runs that instead of compiling again. */
static int probe_run(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                     int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                     uint64_t link[2], uint64_t *peak, rplan_program **keep,
                     const rplan_program *have);

static int probe_policy(const cli *c, const input *in, int policy, double *predicted,
                        uint64_t *moved, uint64_t *regen, uint64_t link[2])
{
    return probe_run(c, in, NULL, 0, policy, predicted, moved, regen, link, NULL, NULL,
                     in->compiled && c->nbudgets <= PROBE_BUDGETS ? in->p : NULL);
}

/* probe, and *peak: the highest charge at extra[0]'s location (UINT64_MAX when the report
 * has no room to name it); *keep (when given): the compiled program, to free */
static int probe_at(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                    int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                    uint64_t link[2], uint64_t *peak, rplan_program **keep)
{
    return probe_run(c, in, extra, nextra, policy, predicted, moved, regen, link, peak, keep,
                     NULL);
}

static int probe_run(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                     int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                     uint64_t link[2], uint64_t *peak, rplan_program **keep,
                     const rplan_program *have)
{
    fhr_budget bud[PROBE_BUDGETS];
    size_t nb = 0;
    for (size_t i = 0; i < c->nbudgets && nb < PROBE_BUDGETS; i++)
        bud[nb++] = c->budgets[i];
    for (size_t i = 0; i < nextra && nb < PROBE_BUDGETS; i++)
        bud[nb++] = extra[i];
    rplan_program *p = NULL;
    if (!have) {
        rplan_diags *d = rplan_diags_new();
        rplan_compile_opts co = {.filename = in->path, .budget_override = bud,
                                 .nbudget_override = nb, .strip_source = 1,
                                 .rank = c->rank, .world_size = c->world_size};
        fhr_status st = d && in->text ? rplan_compile(in->text, in->len, &co, &p, d)
                                      : FHR_E_NOMEM;
        rplan_diags_free(d);
        if (st == FHR_E_INFEASIBLE || st == FHR_E_INVALID)
            return 0;
        if (st)
            return -1;
        have = p;
    }
    fhr_backend *b = NULL;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    int ok = -1;
    rplan_vm_opts o;
    explain_opts(c, &o);
    o.budget_override = bud;
    o.nbudget_override = nb;
    o.policy_override = policy;
    if (fhr_backend_open(CHECK_DEVICES, &b, NULL) == FHR_OK &&
        rplan_vm_create(have, b, &o, &vm, NULL) == FHR_OK) {
        rplan_vm_run(vm, &rep, NULL);
        if (rep) {
            ok = rep->ok;
            if (predicted)
                *predicted = rep->predicted_s;
            if (moved)
                *moved = moved_bytes(&rep->total);
            if (regen)
                *regen = rep->total.regen_bytes;
            if (link) {
                link[0] = rep->pcie_bytes;
                link[1] = rep->peer_bytes;
            }
            if (peak) {
                *peak = rep->total.npeaks < RPLAN_MAX_PEAKS ? 0 : UINT64_MAX;
                for (size_t i = 0; i < rep->total.npeaks; i++)
                    if (fhr_loc_equal(rep->total.peaks[i].loc, extra[0].loc))
                        *peak = rep->total.peaks[i].peak_bytes;
            }
        }
    }
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    if (keep)
        *keep = p;
    else
        rplan_program_free(p);
    return ok;
}

/* ---- --min-budget ------------------------------------------------------------------- */

/* Feasibility is not monotonic in a budget (issue 27, cause 8: keys that fill a device as
 * far as it goes leave less room for a later explicit move at some budgets than at smaller
 * ones), so --min-budget finds every feasible interval, exactly, and the threshold: the
 * start of the last one, from which every budget is feasible.
 *
 * Why a finite scan is exact. The budget B at LOC enters a check only through comparisons
 * of a charge against it: "committed + size <= B" in the verifier's dry run, the manager's
 * admission and the room a policy sees (B - committed, set against sizes). Every charge at
 * LOC is a sum of items: the charge of a copy of a value there (its size; at host or pinned
 * a seeded value's size less its regenerated half unless kept), a source's temporary copy
 * at a host location, and the reservations at LOC. Between two consecutive such sums no
 * comparison can change its outcome, so feasibility is constant there; and from the peak
 * charge the unbounded run reaches at LOC on, every comparison the unbounded run made comes
 * out the same, so the run is the unbounded one. Probing every distinct sum of the items
 * up to that peak (a subset-sum set over the items' common divisor) therefore decides every
 * budget. The cost is one probe (a compile with its dry run and the VM's explain run) per
 * distinct sum; past MIN_BUDGET_PROBES sums the scan probes the highest ones and finds the
 * rest by bisection, and says that the result is not exact. */

#define MIN_BUDGET_CEIL ((uint64_t)1 << 44) /* 16 TiB stands for "unbounded" */
#define MIN_BUDGET_PROBES 20000              /* sums probed before the scan gives up exactness */
#define MIN_BUDGET_BITS ((uint64_t)1 << 27)  /* subset-sum set size (16 MiB of bits) */
#define MIN_BUDGET_INTERVALS 64              /* intervals reported (the rest are counted) */

typedef struct mb_interval {
    uint64_t from, to; /* feasible from..to inclusive; to == UINT64_MAX: and above */
} mb_interval;

typedef struct min_budget_result {
    int found;               /* 0: infeasible at any budget */
    int unused;              /* nothing at loc needs bytes: every budget, 0 included */
    int exact;               /* every candidate budget probed */
    uint64_t feasible;       /* smallest feasible budget */
    uint64_t threshold;      /* every budget from it on is feasible (one byte less is not) */
    uint64_t near;           /* smallest with predicted time within 5% of unbounded */
    uint64_t peak;           /* the unbounded run's peak charge at loc */
    uint64_t grain;          /* the items' common divisor */
    size_t candidates, probes;
    size_t nint, nint_all;   /* intervals kept / found */
    mb_interval iv[MIN_BUDGET_INTERVALS];
    double unbounded_s, near_s, feasible_s, threshold_s;
} min_budget_result;

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

/* What can be charged at loc: see the comment above. -1 on allocation failure. */
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

/* The distinct sums of the items up to top, ascending, into *out (0 first). The count, or
 * (size_t)-1 when the set would be too large or on allocation failure. */
static size_t candidate_sums(const mb_items *it, uint64_t top, uint64_t *grain, uint64_t **out)
{
    uint64_t g = 0;
    for (size_t i = 0; i < it->n; i++)
        g = gcd64(g, it->v[i]);
    if (!g)
        g = 1;
    *grain = g;
    uint64_t k = top / g + 1; /* lattice points 0..top */
    if (k > MIN_BUDGET_BITS)
        return (size_t)-1;
    size_t words = (size_t)((k + 63) / 64);
    uint64_t *set = calloc(words, sizeof *set);
    if (!set)
        return (size_t)-1;
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
    size_t n = 0;
    for (size_t w = 0; w < words; w++)
        n += (size_t)__builtin_popcountll(set[w]);
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        free(set);
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

/* Appends an interval; past MIN_BUDGET_INTERVALS the last kept one is replaced, so the
 * last (the threshold's) is always there. */
static void add_interval(min_budget_result *r, uint64_t from, uint64_t to)
{
    if (r->nint == MIN_BUDGET_INTERVALS)
        r->nint--;
    r->iv[r->nint++] = (mb_interval){from, to};
    r->nint_all++;
}

/* The smallest feasible budget in [0, hi] by bisection, hi feasible: exact only where
 * feasibility is monotonic below hi. */
static int bisect_below(const cli *c, const input *in, fhr_budget *b, uint64_t hi,
                        min_budget_result *r, uint64_t *out)
{
    uint64_t lo = 0;
    b->nbytes = 0;
    int o = probe(c, in, b, 1, c->policy, NULL, NULL, NULL, NULL);
    r->probes++;
    if (o < 0)
        return -1;
    if (o)
        hi = 0;
    while (hi && lo + 1 < hi) {
        b->nbytes = lo + (hi - lo) / 2;
        o = probe(c, in, b, 1, c->policy, NULL, NULL, NULL, NULL);
        r->probes++;
        if (o < 0)
            return -1;
        if (o)
            hi = b->nbytes;
        else
            lo = b->nbytes;
    }
    *out = hi;
    return 0;
}

/* Feasibility at every candidate budget (see above); then the time search. 1 done, 0 the
 * plan is infeasible at every budget, -1 error. */
static int min_budget(const cli *c, const input *in, fhr_location loc, min_budget_result *r)
{
    memset(r, 0, sizeof *r);
    fhr_budget b = {loc, MIN_BUDGET_CEIL};
    rplan_program *prog = NULL;
    int f = probe_at(c, in, &b, 1, c->policy, &r->unbounded_s, NULL, NULL, NULL, &r->peak, &prog);
    if (f < 1 || !prog) {
        rplan_program_free(prog);
        return f < 0 ? -1 : 0;
    }
    r->found = 1;
    mb_items it = {0};
    uint64_t *cand = NULL;
    size_t n = (size_t)-1;
    uint64_t top = r->peak == UINT64_MAX ? 0 : r->peak;
    int ci = charge_items(prog, loc, &it);
    rplan_program_free(prog);
    if (ci != 0) {
        free(it.v);
        return -1;
    }
    if (r->peak == UINT64_MAX) /* the report has no room for loc: every item at once */
        for (size_t i = 0; i < it.n; i++)
            top = top + it.v[i] < top ? UINT64_MAX : top + it.v[i];
    n = top < MIN_BUDGET_CEIL ? candidate_sums(&it, top, &r->grain, &cand) : (size_t)-1;
    free(it.v);
    r->candidates = n == (size_t)-1 ? 0 : n;
    /* feasibility at each candidate, from the top down; the top one is the peak, where the
     * run is the unbounded one (feasible) */
    int *ok = n == (size_t)-1 ? NULL : malloc((n ? n : 1) * sizeof *ok);
    if (n != (size_t)-1 && !ok) {
        free(cand);
        return -1;
    }
    int scanned = n != (size_t)-1;
    size_t lowest = scanned ? n : 0; /* candidates lowest..n-1 are probed */
    while (scanned && lowest > 0 && r->probes < MIN_BUDGET_PROBES) {
        lowest--;
        b.nbytes = cand[lowest];
        ok[lowest] = probe(c, in, &b, 1, c->policy, NULL, NULL, NULL, NULL);
        r->probes++;
        if (ok[lowest] < 0) {
            free(ok);
            free(cand);
            return -1;
        }
    }
    r->exact = scanned && lowest == 0;
    /* feasibility holds from a candidate up to one byte below the next candidate */
    for (size_t i = lowest; scanned && i < n; i++) {
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
    if (!scanned) {
        err = bisect_below(c, in, &b, MIN_BUDGET_CEIL, r, &h);
        if (!err)
            add_interval(r, h, UINT64_MAX);
    } else if (!r->exact && ok[lowest] == 1) {
        err = bisect_below(c, in, &b, cand[lowest], r, &h);
        if (!err)
            r->iv[0].from = h;
    }
    free(ok);
    free(cand);
    if (err || !r->nint) /* no interval cannot happen: the peak is feasible */
        return -1;
    r->feasible = r->iv[0].from;
    r->threshold = r->iv[r->nint - 1].from;
    r->unused = r->threshold == 0 && r->peak == 0;
    b.nbytes = r->feasible;
    probe(c, in, &b, 1, c->policy, &r->feasible_s, NULL, NULL, NULL);
    b.nbytes = r->threshold;
    probe(c, in, &b, 1, c->policy, &r->threshold_s, NULL, NULL, NULL);
    /* the predicted time falls as the budget grows: search [threshold, ceiling] */
    double limit = r->unbounded_s * 1.05;
    uint64_t lo = r->threshold, top2 = MIN_BUDGET_CEIL;
    if (r->threshold_s <= limit) {
        top2 = lo;
    } else {
        while (lo + 1 < top2) {
            double t = 0;
            b.nbytes = lo + (top2 - lo) / 2;
            int o = probe(c, in, &b, 1, c->policy, &t, NULL, NULL, NULL);
            if (o < 0)
                return -1;
            if (o && t <= limit)
                top2 = b.nbytes;
            else
                lo = b.nbytes;
        }
    }
    r->near = top2;
    b.nbytes = top2;
    probe(c, in, &b, 1, c->policy, &r->near_s, NULL, NULL, NULL);
    return 1;
}

/* "min_budget" members past location and found: see fheplan(1), --min-budget */
static void min_budget_json(cJSON *mo, const min_budget_result *r)
{
    cJSON_AddNumberToObject(mo, "threshold_bytes", (double)r->threshold);
    cJSON_AddNumberToObject(mo, "predicted_s_at_threshold", r->threshold_s);
    cJSON_AddBoolToObject(mo, "monotonic", r->nint_all == 1);
    cJSON_AddBoolToObject(mo, "unused", r->unused);
    cJSON *iv = cJSON_AddArrayToObject(mo, "intervals");
    for (size_t i = 0; i < r->nint; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "from", (double)r->iv[i].from);
        if (r->iv[i].to == UINT64_MAX)
            cJSON_AddNullToObject(o, "to");
        else
            cJSON_AddNumberToObject(o, "to", (double)r->iv[i].to);
        cJSON_AddItemToArray(iv, o);
    }
    cJSON_AddNumberToObject(mo, "intervals_found", (double)r->nint_all);
    cJSON_AddNumberToObject(mo, "feasible_bytes", (double)r->feasible);
    cJSON_AddNumberToObject(mo, "predicted_s_at_feasible", r->feasible_s);
    cJSON_AddNumberToObject(mo, "within_5pct_bytes", (double)r->near);
    cJSON_AddNumberToObject(mo, "predicted_s_at_within_5pct", r->near_s);
    cJSON_AddNumberToObject(mo, "unbounded_predicted_s", r->unbounded_s);
    cJSON_AddNumberToObject(mo, "unbounded_peak_bytes", (double)r->peak);
    cJSON_AddBoolToObject(mo, "exact", r->exact);
    cJSON_AddNumberToObject(mo, "candidates", (double)r->candidates);
    cJSON_AddNumberToObject(mo, "probes", (double)r->probes);
    cJSON_AddNumberToObject(mo, "grain_bytes", (double)r->grain);
}

/* The text lines of --min-budget (r NULL: the search failed). */
static void min_budget_print(fhr_location loc, const min_budget_result *r)
{
    char lb[16], b1[32], b2[32], t[32], a[32];
    fhr_loc_format(loc, lb, sizeof lb);
    if (!r || !r->found) {
        printf("  no budget at %s makes the plan feasible\n", lb);
        return;
    }
    if (r->unused) {
        printf("  nothing at %s needs bytes: every budget there is feasible, 0 included\n", lb);
        return;
    }
    printf("  threshold at %s: %s (%llu bytes): every budget from it on is feasible, one byte "
           "less is rejected; predicted %s\n",
           lb, fmt_bytes(r->threshold, b1, sizeof b1), (unsigned long long)r->threshold,
           fmt_time(r->threshold_s, t, sizeof t));
    if (r->nint_all > 1) {
        printf("  not monotonic: %zu feasible intervals at %s, in bytes:", r->nint_all, lb);
        for (size_t i = 0; i < r->nint; i++) {
            if (i + 1 == r->nint && r->nint < r->nint_all)
                printf(" ... (%zu more)", r->nint_all - r->nint);
            if (r->iv[i].to == UINT64_MAX)
                printf("%s %llu and above\n", i ? " and" : "", (unsigned long long)r->iv[i].from);
            else
                printf("%s %llu-%llu", i ? "," : "", (unsigned long long)r->iv[i].from,
                       (unsigned long long)r->iv[i].to);
        }
        printf("  smallest feasible budget at %s: %s (%llu bytes), predicted %s\n", lb,
               fmt_bytes(r->feasible, b1, sizeof b1), (unsigned long long)r->feasible,
               fmt_time(r->feasible_s, t, sizeof t));
    }
    if (r->exact)
        printf("  exact: every budget decided by %zu probes, one per distinct sum of the sizes "
               "charged at %s up to the unbounded peak %s\n",
               r->probes, lb, fmt_bytes(r->peak, b1, sizeof b1));
    else
        printf("  not exact: %zu probes; below the lowest budget probed feasibility was taken as "
               "monotonic (more than %d candidate budgets)\n",
               r->probes, MIN_BUDGET_PROBES);
    printf("  within 5%% of the unbounded predicted time (%s) from %s (%llu bytes), predicted %s\n",
           fmt_time(r->unbounded_s, a, sizeof a), fmt_bytes(r->near, b2, sizeof b2),
           (unsigned long long)r->near, fmt_time(r->near_s, t, sizeof t));
}

int cmd_check(cli *c)
{
    int worst = EX_OK;
    cJSON *sarif = c->sarif ? sarif_new() : NULL;
    if (sarif) /* quiet, as for --json; the SARIF log is printed instead of the document */
        c->json = 1;
    cJSON *root = c->json ? cJSON_CreateObject() : NULL;
    cJSON *files = root ? cJSON_AddArrayToObject(root, "files") : NULL;
    for (size_t i = 0; i < c->nfiles; i++) {
        input in;
        int rc = load_input(c, c->files[i], &in, c->json);
        cJSON *fo = root ? cJSON_CreateObject() : NULL;
        if (fo) {
            cJSON_AddStringToObject(fo, "file", c->files[i]);
            cJSON_AddItemToArray(files, fo);
        }
        rplan_vm_report *rep = NULL;
        rplan_vm *vm = NULL;
        if (rc == 0) {
            fhr_backend *b = NULL;
            if (fhr_backend_open(CHECK_DEVICES, &b, NULL) != FHR_OK) {
                rc = EX_SOFTWARE_;
            } else {
                rplan_vm_opts o;
                memset(&o, 0, sizeof o);
                explain_opts(c, &o);
                rc = run_vm(c, &in, b, &o, &vm, &rep);
                rplan_vm_destroy(vm);
                fhr_backend_destroy(b);
            }
        }
        /* what each built-in policy would move, and the predicted time */
        int kinds[2] = {RPLAN_POLICY_TIERED_LRU, RPLAN_POLICY_LOOKAHEAD};
        uint64_t pmoved[2] = {0, 0}, pregen[2] = {0, 0}, plink[2][2] = {{0, 0}, {0, 0}};
        double ppred[2] = {0, 0};
        int pok[2] = {0, 0}, has_requests = rc == 0 && in.p && rplan_npolicies(in.p) > 0;
        for (int k = 0; k < 2 && has_requests; k++) {
            if (rep && !rep->refused && as_written_is(c, &in, kinds[k])) {
                /* the run as written was this policy's run: the probe would repeat it */
                pok[k] = rep->ok;
                ppred[k] = rep->predicted_s;
                pmoved[k] = moved_bytes(&rep->total);
                pregen[k] = rep->total.regen_bytes;
                plink[k][0] = rep->pcie_bytes;
                plink[k][1] = rep->peer_bytes;
                continue;
            }
            pok[k] = probe_policy(c, &in, kinds[k], &ppred[k], &pmoved[k], &pregen[k],
                                  plink[k]) == 1;
        }
        min_budget_result mb;
        /* also for a plan its own budgets reject: what budget it needs is the question */
        int mbr = c->has_min_budget && (rc == 0 || (rc == EX_FAIL && in.text))
                      ? min_budget(c, &in, c->min_budget, &mb)
                      : 0;
        if (mbr < 0)
            rc = EX_SOFTWARE_;
        if (fo) {
            cJSON_AddBoolToObject(fo, "feasible", rc == 0);
            cJSON *dj = input_diags_json(&in);
            if (rep && !rep->ok) {
                /* the dry run's refusal is a diagnostic too, as --sarif lists it */
                char msg[900];
                if (rep->scope[0])
                    snprintf(msg, sizeof msg, "%s (in '%s')", rep->message, rep->scope);
                else
                    snprintf(msg, sizeof msg, "%s", rep->message);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "severity", "error");
                cJSON_AddStringToObject(o, "file", c->files[i]);
                cJSON_AddNumberToObject(o, "line", rep->line);
                cJSON_AddNumberToObject(o, "col", rep->col);
                cJSON_AddNumberToObject(o, "end_line", rep->line);
                cJSON_AddNumberToObject(o, "end_col", rep->col ? rep->col + 1 : 0);
                cJSON_AddStringToObject(o, "rule", rplan_rule_of_dry_run(rep->message)->id);
                cJSON_AddStringToObject(o, "message", msg);
                cJSON_AddItemToArray(dj, o);
            }
            cJSON_AddItemToObject(fo, "diagnostics", dj);
            if (rep && !rep->refused) { /* a refused dry run has only its error */
                cJSON_AddNumberToObject(fo, "predicted_s", rep->predicted_s);
                cJSON_AddNumberToObject(fo, "bytes_moved", (double)moved_bytes(&rep->total));
                cJSON_AddNumberToObject(fo, "bytes_regenerated", (double)rep->total.regen_bytes);
                cJSON_AddNumberToObject(fo, "pcie_bytes", (double)rep->pcie_bytes);
                cJSON_AddNumberToObject(fo, "peer_bytes", (double)rep->peer_bytes);
            }
            cJSON *pa = cJSON_AddArrayToObject(fo, "policies");
            for (int k = 0; k < 2 && has_requests; k++) {
                cJSON *po = cJSON_CreateObject();
                cJSON_AddStringToObject(po, "policy", policy_name(kinds[k]));
                cJSON_AddBoolToObject(po, "feasible", pok[k]);
                cJSON_AddNumberToObject(po, "bytes_moved", (double)pmoved[k]);
                cJSON_AddNumberToObject(po, "bytes_regenerated", (double)pregen[k]);
                cJSON_AddNumberToObject(po, "pcie_bytes", (double)plink[k][0]);
                cJSON_AddNumberToObject(po, "peer_bytes", (double)plink[k][1]);
                cJSON_AddNumberToObject(po, "predicted_s", ppred[k]);
                cJSON_AddItemToArray(pa, po);
            }
            if (c->has_min_budget && mbr >= 0) {
                char lb[16];
                cJSON *mo = cJSON_AddObjectToObject(fo, "min_budget");
                cJSON_AddStringToObject(mo, "location", fhr_loc_format(c->min_budget, lb, sizeof lb));
                cJSON_AddBoolToObject(mo, "found", mbr == 1 && mb.found);
                if (mbr == 1 && mb.found)
                    min_budget_json(mo, &mb);
            }
            cJSON *rj = NULL;
            if (rep) {
                char *s = rplan_vm_report_json(rep);
                rj = s ? cJSON_Parse(s) : NULL;
                free(s);
            }
            if (rj)
                cJSON_AddItemToObject(fo, "report", rj);
            else
                cJSON_AddNullToObject(fo, "report");
        } else if (rc == 0 && rep) {
            char t[32], a[32], rt[32];
            printf("%s: feasible\n", input_name(c->files[i]));
            for (size_t s = 0; s < rep->nstages; s++)
                print_stage(&rep->stages[s], 1, 0);
            if (rep->total.regen_bytes) {
                char g[32], gt[32];
                printf("  predicted %s (policies: %s): max(bodies %s modelled + regenerating %s "
                       "at %.0f GB/s %s, transfers at %s GB/s pinned)\n",
                       fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
                       fmt_time(rep->total.model_body_s, a, sizeof a),
                       fmt_bytes(rep->total.regen_bytes, g, sizeof g), rep->gen_gbps,
                       fmt_time(rep->regen_s, gt, sizeof gt),
                       rate_text(rep->pinned_gbps, rt, sizeof rt));
            } else {
                printf("  predicted %s (policies: %s): max(bodies %s modelled, transfers at %s "
                       "GB/s pinned)\n",
                       fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
                       fmt_time(rep->total.model_body_s, a, sizeof a),
                       rate_text(rep->pinned_gbps, rt, sizeof rt));
            }
            if (c->objective_set && rep->timeline_s > 0) {
                char il[32];
                printf("  modelled timeline (objective %s): %s, the link idle at most %s at once\n",
                       rep->objective == RPLAN_OBJECTIVE_TIME ? "time" : "bytes",
                       fmt_time(rep->timeline_s, t, sizeof t),
                       fmt_time(rep->timeline_idle_s, il, sizeof il));
            }
            if (c->objective == RPLAN_OBJECTIVE_AUTO && rep->auto_bytes_s > 0) {
                char tb[32], tt[32];
                printf("  objective auto: %s (modelled: bytes %s, time %s; time is taken when "
                       "%.0f%% shorter)\n",
                       rep->objective == RPLAN_OBJECTIVE_TIME ? "time" : "bytes",
                       fmt_time(rep->auto_bytes_s, tb, sizeof tb),
                       fmt_time(rep->auto_time_s, tt, sizeof tt), RPLAN_AUTO_GAIN * 100);
            }
            int multi = devices_used(rep) > 1; /* a peer link can carry copies */
            if (multi) {
                char p1[32], p2[32], t1[32], t2[32];
                printf("  transfers: PCIe %s (%s at %.1f GB/s pinned), peer %s (%s at %.0f GB/s)\n",
                       fmt_bytes(rep->pcie_bytes, p1, sizeof p1), fmt_time(rep->pcie_s, t1, sizeof t1),
                       rep->pinned_gbps, fmt_bytes(rep->peer_bytes, p2, sizeof p2),
                       fmt_time(rep->peer_s, t2, sizeof t2), rep->peer_gbps);
            }
            for (int k = 0; k < 2 && has_requests; k++) {
                char g[32], p1[32], p2[32];
                if (pok[k] && multi)
                    printf("  policy %-10s would move %s (PCIe %s, peer %s)%s%s, predicted %s\n",
                           policy_name(kinds[k]), fmt_bytes(pmoved[k], a, sizeof a),
                           fmt_bytes(plink[k][0], p1, sizeof p1),
                           fmt_bytes(plink[k][1], p2, sizeof p2),
                           pregen[k] ? " and regenerate " : "",
                           pregen[k] ? fmt_bytes(pregen[k], g, sizeof g) : "",
                           fmt_time(ppred[k], t, sizeof t));
                else if (pok[k] && pregen[k])
                    printf("  policy %-10s would move %s and regenerate %s, predicted %s\n",
                           policy_name(kinds[k]), fmt_bytes(pmoved[k], a, sizeof a),
                           fmt_bytes(pregen[k], g, sizeof g), fmt_time(ppred[k], t, sizeof t));
                else if (pok[k])
                    printf("  policy %-10s would move %s, predicted %s\n", policy_name(kinds[k]),
                           fmt_bytes(pmoved[k], a, sizeof a), fmt_time(ppred[k], t, sizeof t));
                else
                    printf("  policy %-10s is infeasible\n", policy_name(kinds[k]));
            }
            if (c->has_min_budget)
                min_budget_print(c->min_budget, mbr == 1 ? &mb : NULL);
        } else if (rc == EX_FAIL) {
            fprintf(stderr, "%s: rejected\n", input_name(c->files[i]));
            if (c->has_min_budget && mbr >= 0 && in.text) {
                fflush(stderr);
                min_budget_print(c->min_budget, mbr == 1 ? &mb : NULL);
            }
        }
        if (sarif)
            sarif_add(sarif, c->files[i], rc, in.d, rep, in.text, in.len);
        rplan_vm_report_free(rep);
        input_free(&in);
        if (rc > worst)
            worst = rc;
    }
    if (sarif) {
        sarif_print(sarif, json_out ? json_out : stdout);
        cJSON_Delete(sarif);
    } else if (root) {
        cJSON_AddBoolToObject(root, "feasible", worst == EX_OK);
        print_json(root);
    }
    cJSON_Delete(root);
    return worst;
}

/* ---- several ranks ------------------------------------------------------------------ */

/* check --world-size N: the plans once per rank 0..N-1, each compiled with its rank
 * constants and dry-run on its own. Text: each rank's usual check output under a
 * "rank R of N" line, then one line per rejected rank; JSON: one document with
 * {"world_size", "feasible", "ranks": [{"rank", "feasible", "files"}]}. */
int world_check(cli *c)
{
    int worst = EX_OK, json = c->json;
    uint32_t n = c->world_size;
    cJSON *root = json ? cJSON_CreateObject() : NULL;
    cJSON *ranks = root ? cJSON_CreateArray() : NULL;
    char rejected[256] = "";
    size_t used = 0;
    for (uint32_t r = 0; r < n; r++) {
        c->rank = r;
        char *doc = NULL;
        size_t len = 0;
        int rc;
        if (json) {
            json_out = open_memstream(&doc, &len);
            rc = json_out ? cmd_check(c) : EX_SOFTWARE_;
            if (json_out)
                fclose(json_out);
            json_out = NULL;
            cJSON *d = doc ? cJSON_Parse(doc) : NULL;
            if (!d)
                d = cJSON_CreateObject();
            cJSON *ro = cJSON_CreateObject();
            cJSON_AddNumberToObject(ro, "rank", r);
            cJSON_AddBoolToObject(ro, "feasible", rc == EX_OK);
            cJSON *files = cJSON_DetachItemFromObject(d, "files");
            cJSON_AddItemToObject(ro, "files", files ? files : cJSON_CreateArray());
            cJSON_AddItemToArray(ranks, ro);
            cJSON_Delete(d);
            free(doc);
        } else {
            printf("rank %u of %u:\n", r, n);
            fflush(stdout);
            rc = cmd_check(c);
        }
        if (rc != EX_OK && used < sizeof rejected - 16)
            used += (size_t)snprintf(rejected + used, sizeof rejected - used, "%s%u",
                                     used ? ", " : "", r);
        if (rc > worst)
            worst = rc;
    }
    if (root) {
        cJSON_AddNumberToObject(root, "world_size", n);
        cJSON_AddBoolToObject(root, "feasible", worst == EX_OK);
        cJSON_AddItemToObject(root, "ranks", ranks);
        print_json(root);
        cJSON_Delete(root);
    } else if (worst == EX_OK) {
        printf("feasible on all %u ranks\n", n);
    } else {
        fprintf(stderr, "fheplan: rejected on rank%s %s of %u\n", strchr(rejected, ',') ? "s" : "",
                rejected, n);
    }
    return worst;
}
