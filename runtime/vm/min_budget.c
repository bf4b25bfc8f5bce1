/* runtime/vm/min_budget.c — rplan_min_budget: the smallest budget at one location that
 * makes a program feasible, every feasible interval where feasibility is not monotonic,
 * the threshold from which every budget is, and the budget within 5% of the unbounded
 * predicted time. Each probe is the verifier's dry run and the VM's explain run at one
 * budget (what `fheplan check --budget LOC=B` decides), with no compile.
 *
 * Feasibility is not monotonic in a budget (keys that fill a device as far as it goes
 * leave less room for a later explicit move at some budgets than at smaller ones), so the
 * search decides every budget, exactly. A budget B enters a run only through comparisons
 * "x <= B" of a charge x against it: the manager's admission, the fast path's test that a
 * request is met, and every test a built-in policy makes of the room at a location. Each
 * of them notes its outcome in the manager's window for the watched location (bwin,
 * runtime/manager/manager.h): the largest x that fitted and the smallest that did not. A
 * probe at B therefore proves more than its own budget: at every budget of its window
 * every comparison comes out the same, so the run takes the same course — the same
 * decisions, feasibility and predicted time. The dry run decides nothing by its budget:
 * its peak (the floor) is the same at every budget, and it refuses exactly those below.
 *
 * So the search walks up from the floor, one probe per window: probe B, take its window
 * [lo, hi] (it holds B), decide every budget of [B, hi], go on at hi + 1, until a window
 * has no upper end (no comparison failed: the unbounded run's course). The probes are the
 * distinct courses the run takes between the floor and the unbounded peak — what differs
 * between budgets — not the sums a plan's sizes can make. Past RPLAN_MIN_BUDGET_PROBES
 * the walk stops; the window of the unbounded run then decides everything from its lower
 * end up, the budgets between are left undecided, and the result says it is not exact. */
#include "fheplan/vm.h"
#include "runtime/program/program.h"
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB_CEIL ((uint64_t)1 << 44)     /* 16 TiB stands for "unbounded" */
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
    bwin win;          /* the budgets at which both runs take this probe's course */
    char why[512];     /* a refusal: the verifier's or the explain run's message */
} mb_seen;

/* The explain run of one probe: 1 feasible, 0 rejected, -1 error (in e). */
static int probe_vm(mb_ctx *m, mb_seen *seen, fhr_error *e)
{
    fhr_backend *be = NULL;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    rplan_vm_opts o = m->o;
    o.budget_override = m->bud;
    o.nbudget_override = m->nbud + 1;
    fhr_status st;
    int ok = -1;
    if ((st = fhr_backend_open(MB_DEVICES, &be, e)) == FHR_OK &&
        (st = rplan_vm_create(m->p, be, &o, &vm, e)) == FHR_OK) {
        bwin *w = mgr_watch_budget(rplan_vm_manager(vm), fhr_loc_slot(m->loc));
        rplan_vm_run(vm, &rep, e);
        if (rep) {
            ok = rep->ok != 0;
            seen->win.lo = w->lo > seen->win.lo ? w->lo : seen->win.lo;
            seen->win.hi = w->hi < seen->win.hi ? w->hi : seen->win.hi;
            seen->predicted = rep->predicted_s;
            seen->vm_peak = rep->total.npeaks < RPLAN_MAX_PEAKS ? 0 : UINT64_MAX;
            for (size_t i = 0; i < rep->total.npeaks; i++)
                if (fhr_loc_equal(rep->total.peaks[i].loc, m->loc))
                    seen->vm_peak = rep->total.peaks[i].peak_bytes;
            if (!rep->ok)
                snprintf(seen->why, sizeof seen->why, "%.500s", rep->message);
        }
    }
    if (ok < 0 && !st)
        fhr_fail(e, FHR_E_BACKEND, "%s", e->message[0] ? e->message : "no report");
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    return ok;
}

/* One probe at budget b: 1 feasible, 0 rejected, -1 error (in m->err). seen->win holds b. */
static int probe(mb_ctx *m, uint64_t b, mb_seen *seen)
{
    m->bud[m->nbud] = (fhr_budget){m->loc, b};
    rp_vfail f;
    uint64_t peak[FHR_LOC_SLOTS];
    memset(seen, 0, sizeof *seen);
    seen->win = (bwin){0, UINT64_MAX};
    seen->vm_peak = UINT64_MAX;
    fhr_status st = rp_verify_budgets(m->p, m->bud, m->nbud + 1, peak, &f);
    seen->ver_peak = peak[fhr_loc_slot(m->loc)];
    (void)bwin_fits(&seen->win, seen->ver_peak, b); /* the dry run's one comparison */
    if (st == FHR_E_INFEASIBLE) {
        snprintf(seen->why, sizeof seen->why, "%.500s", f.msg);
        return 0;
    }
    if (st) {
        fhr_fail(m->err, st, "min budget: the verifier failed at %llu bytes: %s",
                 (unsigned long long)b, f.msg);
        return -1;
    }
    fhr_error e;
    fhr_error_init(&e);
    int ok = probe_vm(m, seen, &e);
    if (ok < 0)
        fhr_fail(m->err, e.status ? e.status : FHR_E_BACKEND, "min budget: the explain run at "
                 "%llu bytes failed: %s", (unsigned long long)b, e.message);
    else if (seen->win.lo > b || seen->win.hi < b)
        ok = -1, fhr_fail(m->err, FHR_E_BACKEND, "min budget: the probe at %llu bytes holds "
                          "for %llu-%llu only, not for itself", (unsigned long long)b,
                          (unsigned long long)seen->win.lo, (unsigned long long)seen->win.hi);
    fhr_error_clear(&e);
    return ok;
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

/* The walk's state: the feasible run of windows it is in, and the first window of that
 * run within 5% of the unbounded time. */
typedef struct mb_walk {
    int in_run;
    uint64_t run_from;
    double run_s;         /* predicted at run_from */
    int has_near;
    uint64_t near;
    double near_s;
} mb_walk;

/* Takes the window [from, to] of one probe (feasible or not) into the result. */
static void take_window(mb_ctx *m, mb_walk *w, uint64_t from, uint64_t to, int ok, double s)
{
    rplan_min_budget_result *r = m->r;
    if (!ok) {
        w->in_run = 0;
        return;
    }
    if (!w->in_run) {
        if (!r->nint_all) {
            r->feasible = from;
            r->feasible_s = s;
        }
        *w = (mb_walk){1, from, s, 0, 0, 0};
        add_interval(r, from, to);
    } else {
        r->iv[r->nint - 1].to = to;
    }
    if (!w->has_near && s <= r->unbounded_s * 1.05) {
        w->has_near = 1;
        w->near = from;
        w->near_s = s;
    }
}

/* The walk from the floor up, one probe per window. 0, or -1 on error (in m->err). */
static int walk(mb_ctx *m, const mb_seen *top)
{
    rplan_min_budget_result *r = m->r;
    mb_walk w = {0};
    uint64_t b = r->floor;
    mb_seen s;
    for (;;) {
        if (r->probes == RPLAN_MIN_BUDGET_PROBES) { /* the unbounded run's window decides */
            uint64_t from = top->win.lo > b ? top->win.lo : b;
            if (from > b) {
                r->undecided_from = b;
                r->undecided_to = from - 1;
            }
            w.in_run = 0;
            take_window(m, &w, from, UINT64_MAX, 1, top->predicted);
            break;
        }
        r->probes++;
        int ok = probe(m, b, &s);
        if (ok < 0)
            return -1;
        take_window(m, &w, b, s.win.hi, ok, s.predicted);
        if (s.win.hi == UINT64_MAX)
            break;
        b = s.win.hi + 1;
    }
    if (!w.in_run) { /* cannot happen: the last window is the unbounded run's course */
        fhr_fail(m->err, FHR_E_BACKEND, "min budget: the walk ended at %llu bytes on a "
                 "rejected window", (unsigned long long)b);
        return -1;
    }
    r->exact = r->undecided_to < r->undecided_from;
    r->threshold = w.run_from;
    r->threshold_s = w.run_s;
    r->near = w.has_near ? w.near : w.run_from;
    r->near_s = w.has_near ? w.near_s : w.run_s;
    r->unused = r->threshold == 0 && r->peak == 0;
    return 0;
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
    out->undecided_from = 1; /* none: from > to */
    out->peak = s.vm_peak > s.ver_peak && s.vm_peak != UINT64_MAX ? s.vm_peak : s.ver_peak;
    out->floor = s.ver_peak;
    if (walk(&m, &s) < 0) {
        out->found = 0;
        return err ? err->status : FHR_E_BACKEND;
    }
    return FHR_OK;
}
