/* cli/check.c — `fheplan check`: each plan's dry run on the model backend, what each
 * built-in policy would move, the --min-budget search (rplan_min_budget), and
 * --world-size's run per rank (--sarif: the log of cli/sarif.c instead). */
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

/* What one built-in policy would do with the plan. */
typedef struct policy_probe {
    int ok;
    double predicted;
    uint64_t moved, regen, link[2];
} policy_probe;

static void policy_probe_of(policy_probe *pp, const rplan_vm_report *rep)
{
    pp->ok = rep->ok;
    pp->predicted = rep->predicted_s;
    pp->moved = moved_bytes(&rep->total);
    pp->regen = rep->total.regen_bytes;
    pp->link[0] = rep->pcie_bytes;
    pp->link[1] = rep->peer_bytes;
}

/* One quiet explain run of the plan under `policy`: of in->p when it was compiled here
 * with the probe's options, else of a program compiled again from the text (with the
 * verifier's dry run; a refusal is infeasible). 0, or -1 when it could not run. */
static int probe_policy(const cli *c, const input *in, int policy, policy_probe *pp)
{
    memset(pp, 0, sizeof *pp);
    const rplan_program *have = in->compiled && c->nbudgets <= PROBE_BUDGETS ? in->p : NULL;
    rplan_program *p = NULL;
    if (!have) {
        rplan_diags *d = rplan_diags_new();
        rplan_compile_opts co = {.filename = in->path, .budget_override = c->budgets,
                                 .nbudget_override = c->nbudgets, .strip_source = 1,
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
    rplan_vm_opts o;
    explain_opts(c, &o);
    o.policy_override = policy;
    if (fhr_backend_open(CHECK_DEVICES, &b, NULL) == FHR_OK &&
        rplan_vm_create(have, b, &o, &vm, NULL) == FHR_OK)
        rplan_vm_run(vm, &rep, NULL);
    int ok = rep ? 0 : -1;
    if (rep)
        policy_probe_of(pp, rep);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return ok;
}

/* ---- --min-budget ------------------------------------------------------------------- */

/* The search is rplan_min_budget (rplan_vm(3)); here the program it searches is compiled
 * from the text with --budget's overrides and the location unbounded, so a plan its own
 * budgets reject gets its answer too. 1 done (r filled), 0 no budget makes it feasible
 * (r->reason says why), -1 an error, printed. */
#define MIN_BUDGET_CEIL ((uint64_t)1 << 44) /* 16 TiB stands for "unbounded" */

static int min_budget(const cli *c, const input *in, fhr_location loc,
                      rplan_min_budget_result *r)
{
    memset(r, 0, sizeof *r);
    fhr_budget bud[PROBE_BUDGETS + 1];
    size_t nb = 0;
    for (size_t i = 0; i < c->nbudgets && nb < PROBE_BUDGETS; i++)
        if (!fhr_loc_equal(c->budgets[i].loc, loc))
            bud[nb++] = c->budgets[i];
    bud[nb++] = (fhr_budget){loc, MIN_BUDGET_CEIL};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts co = {.filename = in->path, .budget_override = bud,
                             .nbudget_override = nb, .strip_source = 1, .rank = c->rank,
                             .world_size = c->world_size};
    fhr_status st = d && in->text ? rplan_compile(in->text, in->len, &co, &p, d) : FHR_E_NOMEM;
    if (st == FHR_E_INFEASIBLE || st == FHR_E_INVALID) {
        const rplan_diag *g = NULL;
        for (size_t i = 0; i < rplan_diags_count(d) && !g; i++)
            if (rplan_diags_get(d, i)->severity == RPLAN_ERROR)
                g = rplan_diags_get(d, i);
        snprintf(r->reason, sizeof r->reason, "%s", g ? g->message : "the plan is refused");
        rplan_diags_free(d);
        return 0;
    }
    rplan_diags_free(d);
    if (st) {
        fprintf(stderr, "fheplan: --min-budget: cannot compile '%s': %s\n", in->path,
                fhr_status_name(st));
        return -1;
    }
    rplan_vm_opts o;
    explain_opts(c, &o);
    o.budget_override = bud;
    o.nbudget_override = nb - 1; /* the search sets the budget at loc */
    fhr_error e;
    fhr_error_init(&e);
    st = rplan_min_budget(p, loc, &o, r, &e);
    rplan_program_free(p);
    if (st) {
        fprintf(stderr, "fheplan: --min-budget: %s\n", e.message[0] ? e.message
                                                                   : fhr_status_name(st));
        fhr_error_clear(&e);
        return -1;
    }
    fhr_error_clear(&e);
    return r->found ? 1 : 0;
}

/* "min_budget" members past location and found: see fheplan(1), --min-budget */
static void min_budget_json(cJSON *mo, const rplan_min_budget_result *r)
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
    cJSON_AddNumberToObject(mo, "dry_run_peak_bytes", (double)r->floor);
    cJSON_AddBoolToObject(mo, "exact", r->exact);
    cJSON_AddNumberToObject(mo, "probes", (double)r->probes);
    if (!r->exact) {
        cJSON_AddNumberToObject(mo, "undecided_from_bytes", (double)r->undecided_from);
        cJSON_AddNumberToObject(mo, "undecided_to_bytes", (double)r->undecided_to);
    }
}

/* The feasible intervals of a search that found more than one. */
static void intervals_print(const char *lb, const rplan_min_budget_result *r)
{
    char b1[32], t[32];
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

/* The text lines of --min-budget (mbr 0: no budget helps, r->reason says why). */
static void min_budget_print(fhr_location loc, const rplan_min_budget_result *r)
{
    char lb[16], b1[32], b2[32], t[32], a[32];
    fhr_loc_format(loc, lb, sizeof lb);
    if (!r->found) {
        printf("  no budget at %s makes the plan feasible%s%s\n", lb, r->reason[0] ? ": " : "",
               r->reason);
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
    if (r->nint_all > 1)
        intervals_print(lb, r);
    if (r->exact)
        printf("  exact: every budget decided by %zu probe%s, one per window of budgets at %s "
               "over which the run takes one course, from the dry run's peak %s (below it the "
               "dry run refuses) up\n",
               r->probes, r->probes == 1 ? "" : "s", lb, fmt_bytes(r->floor, b2, sizeof b2));
    else
        printf("  not exact: after %zu probes the budgets %llu-%llu were left undecided; from "
               "%llu on the unbounded run's course holds\n",
               r->probes, (unsigned long long)r->undecided_from,
               (unsigned long long)r->undecided_to, (unsigned long long)r->undecided_to + 1);
    printf("  within 5%% of the unbounded predicted time (%s) from %s (%llu bytes), predicted %s\n",
           fmt_time(r->unbounded_s, a, sizeof a), fmt_bytes(r->near, b2, sizeof b2),
           (unsigned long long)r->near, fmt_time(r->near_s, t, sizeof t));
}

/* ---- one file ----------------------------------------------------------------------- */

static const int kinds[2] = {RPLAN_POLICY_TIERED_LRU, RPLAN_POLICY_LOOKAHEAD};

/* What check found for one file: the dry run, each built-in policy, the minimum budget. */
typedef struct file_check {
    const char *name;
    int rc;
    input in;
    rplan_vm_report *rep;
    int has_requests;
    policy_probe pol[2];
    int mbr; /* min_budget's return, when asked */
    rplan_min_budget_result mb;
} file_check;

/* The dry run of the plan as written, on the model backend. */
static void dry_run(const cli *c, file_check *fc)
{
    fc->rc = load_input(c, fc->name, &fc->in, c->json);
    if (fc->rc != 0)
        return;
    fhr_backend *b = NULL;
    if (fhr_backend_open(CHECK_DEVICES, &b, NULL) != FHR_OK) {
        fprintf(stderr, "fheplan: cannot open the model backend %s\n", CHECK_DEVICES);
        fc->rc = EX_SOFTWARE_;
        return;
    }
    rplan_vm_opts o;
    explain_opts(c, &o);
    rplan_vm *vm = NULL;
    fc->rc = run_vm(c, &fc->in, b, &o, &vm, &fc->rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
}

/* What each built-in policy would move, and the predicted time. */
static void policies(const cli *c, file_check *fc)
{
    fc->has_requests = fc->rc == 0 && fc->in.p && rplan_npolicies(fc->in.p) > 0;
    for (int k = 0; k < 2 && fc->has_requests; k++) {
        if (fc->rep && !fc->rep->refused && as_written_is(c, &fc->in, kinds[k]))
            policy_probe_of(&fc->pol[k], fc->rep); /* the probe would repeat the run */
        else if (probe_policy(c, &fc->in, kinds[k], &fc->pol[k]) < 0)
            fc->pol[k].ok = 0;
    }
}

/* The file's member of the JSON document. */
static void file_json(const cli *c, const file_check *fc, cJSON *fo)
{
    const rplan_vm_report *rep = fc->rep;
    cJSON_AddBoolToObject(fo, "feasible", fc->rc == 0);
    cJSON *dj = input_diags_json(&fc->in);
    if (rep && !rep->ok) { /* the dry run's refusal is a diagnostic too, as --sarif lists it */
        char msg[900];
        if (rep->scope[0])
            snprintf(msg, sizeof msg, "%s (in '%s')", rep->message, rep->scope);
        else
            snprintf(msg, sizeof msg, "%s", rep->message);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", "error");
        cJSON_AddStringToObject(o, "file", fc->name);
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
    for (int k = 0; k < 2 && fc->has_requests; k++) {
        const policy_probe *pp = &fc->pol[k];
        cJSON *po = cJSON_CreateObject();
        cJSON_AddStringToObject(po, "policy", policy_name(kinds[k]));
        cJSON_AddBoolToObject(po, "feasible", pp->ok);
        cJSON_AddNumberToObject(po, "bytes_moved", (double)pp->moved);
        cJSON_AddNumberToObject(po, "bytes_regenerated", (double)pp->regen);
        cJSON_AddNumberToObject(po, "pcie_bytes", (double)pp->link[0]);
        cJSON_AddNumberToObject(po, "peer_bytes", (double)pp->link[1]);
        cJSON_AddNumberToObject(po, "predicted_s", pp->predicted);
        cJSON_AddItemToArray(pa, po);
    }
    if (c->has_min_budget && fc->mbr >= 0) {
        char lb[16];
        cJSON *mo = cJSON_AddObjectToObject(fo, "min_budget");
        cJSON_AddStringToObject(mo, "location", fhr_loc_format(c->min_budget, lb, sizeof lb));
        cJSON_AddBoolToObject(mo, "found", fc->mbr == 1);
        if (fc->mbr == 1)
            min_budget_json(mo, &fc->mb);
        else if (fc->mb.reason[0])
            cJSON_AddStringToObject(mo, "reason", fc->mb.reason);
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
}

/* The predicted-time lines of a feasible plan's text. */
static void predicted_print(const cli *c, const rplan_vm_report *rep)
{
    char t[32], a[32], rt[32];
    if (rep->total.regen_bytes) {
        char g[32], gt[32];
        printf("  predicted %s (policies: %s): max(bodies %s modelled + regenerating %s "
               "at %.0f GB/s %s, transfers at %s GB/s pinned)\n",
               fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
               fmt_time(rep->total.model_body_s, a, sizeof a),
               fmt_bytes(rep->total.regen_bytes, g, sizeof g), rep->gen_gbps,
               fmt_time(rep->regen_s, gt, sizeof gt), rate_text(rep->pinned_gbps, rt, sizeof rt));
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
}

/* The policy lines: what each built-in policy would move (over which link). */
static void policies_print(const file_check *fc, int multi)
{
    for (int k = 0; k < 2 && fc->has_requests; k++) {
        const policy_probe *pp = &fc->pol[k];
        char a[32], t[32], g[32], p1[32], p2[32];
        if (pp->ok && multi)
            printf("  policy %-10s would move %s (PCIe %s, peer %s)%s%s, predicted %s\n",
                   policy_name(kinds[k]), fmt_bytes(pp->moved, a, sizeof a),
                   fmt_bytes(pp->link[0], p1, sizeof p1), fmt_bytes(pp->link[1], p2, sizeof p2),
                   pp->regen ? " and regenerate " : "",
                   pp->regen ? fmt_bytes(pp->regen, g, sizeof g) : "",
                   fmt_time(pp->predicted, t, sizeof t));
        else if (pp->ok && pp->regen)
            printf("  policy %-10s would move %s and regenerate %s, predicted %s\n",
                   policy_name(kinds[k]), fmt_bytes(pp->moved, a, sizeof a),
                   fmt_bytes(pp->regen, g, sizeof g), fmt_time(pp->predicted, t, sizeof t));
        else if (pp->ok)
            printf("  policy %-10s would move %s, predicted %s\n", policy_name(kinds[k]),
                   fmt_bytes(pp->moved, a, sizeof a), fmt_time(pp->predicted, t, sizeof t));
        else
            printf("  policy %-10s is infeasible\n", policy_name(kinds[k]));
    }
}

/* The file's text: the stages, the prediction, the links, the policies, the budget. */
static void file_text(const cli *c, const file_check *fc)
{
    const rplan_vm_report *rep = fc->rep;
    if (fc->rc == 0 && rep) {
        printf("%s: feasible\n", input_name(fc->name));
        for (size_t s = 0; s < rep->nstages; s++)
            print_stage(&rep->stages[s], 1, 0);
        predicted_print(c, rep);
        int multi = devices_used(rep) > 1; /* a peer link can carry copies */
        if (multi) {
            char p1[32], p2[32], t1[32], t2[32];
            printf("  transfers: PCIe %s (%s at %.1f GB/s pinned), peer %s (%s at %.0f GB/s)\n",
                   fmt_bytes(rep->pcie_bytes, p1, sizeof p1), fmt_time(rep->pcie_s, t1, sizeof t1),
                   rep->pinned_gbps, fmt_bytes(rep->peer_bytes, p2, sizeof p2),
                   fmt_time(rep->peer_s, t2, sizeof t2), rep->peer_gbps);
        }
        policies_print(fc, multi);
        if (c->has_min_budget && fc->mbr >= 0)
            min_budget_print(c->min_budget, &fc->mb);
    } else if (fc->rc == EX_FAIL) {
        fprintf(stderr, "%s: rejected\n", input_name(fc->name));
        if (c->has_min_budget && fc->mbr >= 0 && fc->in.text) {
            fflush(stderr);
            min_budget_print(c->min_budget, &fc->mb);
        }
    }
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
        file_check fc;
        memset(&fc, 0, sizeof fc);
        fc.name = c->files[i];
        dry_run(c, &fc);
        policies(c, &fc);
        /* also for a plan its own budgets reject: what budget it needs is the question */
        if (c->has_min_budget && (fc.rc == 0 || (fc.rc == EX_FAIL && fc.in.text)) &&
            (fc.mbr = min_budget(c, &fc.in, c->min_budget, &fc.mb)) < 0)
            fc.rc = EX_SOFTWARE_;
        if (root) {
            cJSON *fo = cJSON_CreateObject();
            cJSON_AddStringToObject(fo, "file", fc.name);
            cJSON_AddItemToArray(files, fo);
            file_json(c, &fc, fo);
        } else {
            file_text(c, &fc);
        }
        if (sarif)
            sarif_add(sarif, fc.name, fc.rc, fc.in.d, fc.rep, fc.in.text, fc.in.len);
        rplan_vm_report_free(fc.rep);
        input_free(&fc.in);
        if (fc.rc > worst)
            worst = fc.rc;
    }
    if (sarif) {
        json_clean_utf8(sarif);
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
