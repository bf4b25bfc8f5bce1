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

/* One quiet check of src with extra budget overrides and a policy: compile (with the
 * verifier's dry run) and the VM's explain run. 1 feasible, 0 rejected, -1 error. */
static int probe(const cli *c, const input *in, const fhr_budget *extra, size_t nextra,
                 int policy, double *predicted, uint64_t *moved, uint64_t *regen,
                 uint64_t link[2])
{
    fhr_budget bud[32];
    size_t nb = 0;
    for (size_t i = 0; i < c->nbudgets && nb < 32; i++)
        bud[nb++] = c->budgets[i];
    for (size_t i = 0; i < nextra && nb < 32; i++)
        bud[nb++] = extra[i];
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    rplan_compile_opts co = {.filename = in->path, .budget_override = bud,
                             .nbudget_override = nb, .strip_source = 1,
                             .rank = c->rank, .world_size = c->world_size};
    fhr_status st = d && in->text ? rplan_compile(in->text, in->len, &co, &p, d) : FHR_E_NOMEM;
    rplan_diags_free(d);
    if (st == FHR_E_INFEASIBLE || st == FHR_E_INVALID)
        return 0;
    if (st)
        return -1;
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
        rplan_vm_create(p, b, &o, &vm, NULL) == FHR_OK) {
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
        }
    }
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return ok;
}

typedef struct min_budget_result {
    int found;               /* 0: infeasible at any budget we tried */
    uint64_t feasible;       /* smallest feasible budget */
    uint64_t near;           /* smallest with predicted time within 5% of unbounded */
    double unbounded_s, near_s, feasible_s;
} min_budget_result;

#define MIN_BUDGET_CEIL ((uint64_t)1 << 44) /* 16 TiB stands for "unbounded" */

/* Smallest budget at loc for which the plan passes check (so one byte less fails), and
 * the smallest whose predicted time stays within 5% of the unbounded one. Binary search
 * on whole bytes; each probe is a full check. */
static int min_budget(const cli *c, const input *in, fhr_location loc, min_budget_result *r)
{
    memset(r, 0, sizeof *r);
    fhr_budget b = {loc, MIN_BUDGET_CEIL};
    int f = probe(c, in, &b, 1, c->policy, &r->unbounded_s, NULL, NULL, NULL);
    if (f < 0)
        return -1;
    if (!f)
        return 0;
    uint64_t lo = 0, hi = MIN_BUDGET_CEIL; /* lo fails (or is 0), hi passes */
    b.nbytes = 0;
    if (probe(c, in, &b, 1, c->policy, NULL, NULL, NULL, NULL) == 1)
        hi = 0;
    while (hi && lo + 1 < hi) {
        b.nbytes = lo + (hi - lo) / 2;
        int ok = probe(c, in, &b, 1, c->policy, NULL, NULL, NULL, NULL);
        if (ok < 0)
            return -1;
        if (ok)
            hi = b.nbytes;
        else
            lo = b.nbytes;
    }
    r->found = 1;
    r->feasible = hi;
    b.nbytes = hi;
    probe(c, in, &b, 1, c->policy, &r->feasible_s, NULL, NULL, NULL);
    /* the predicted time falls as the budget grows: search [feasible, ceiling] */
    double limit = r->unbounded_s * 1.05;
    lo = hi;
    uint64_t top = MIN_BUDGET_CEIL;
    if (r->feasible_s <= limit) {
        top = lo;
    } else {
        while (lo + 1 < top) {
            double t = 0;
            b.nbytes = lo + (top - lo) / 2;
            int ok = probe(c, in, &b, 1, c->policy, &t, NULL, NULL, NULL);
            if (ok < 0)
                return -1;
            if (ok && t <= limit)
                top = b.nbytes;
            else
                lo = b.nbytes;
        }
    }
    r->near = top;
    b.nbytes = top;
    probe(c, in, &b, 1, c->policy, &r->near_s, NULL, NULL, NULL);
    return 1;
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
        for (int k = 0; k < 2 && has_requests; k++)
            pok[k] = probe(c, &in, NULL, 0, kinds[k], &ppred[k], &pmoved[k], &pregen[k],
                           plink[k]) == 1;
        min_budget_result mb;
        int mbr = rc == 0 && c->has_min_budget ? min_budget(c, &in, c->min_budget, &mb) : 0;
        if (mbr < 0)
            rc = EX_SOFTWARE_;
        if (fo) {
            cJSON_AddBoolToObject(fo, "feasible", rc == 0);
            cJSON_AddItemToObject(fo, "diagnostics", input_diags_json(&in));
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
                if (mbr == 1 && mb.found) {
                    cJSON_AddNumberToObject(mo, "feasible_bytes", (double)mb.feasible);
                    cJSON_AddNumberToObject(mo, "predicted_s_at_feasible", mb.feasible_s);
                    cJSON_AddNumberToObject(mo, "within_5pct_bytes", (double)mb.near);
                    cJSON_AddNumberToObject(mo, "predicted_s_at_within_5pct", mb.near_s);
                    cJSON_AddNumberToObject(mo, "unbounded_predicted_s", mb.unbounded_s);
                }
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
            char t[32], a[32];
            printf("%s: feasible\n", c->files[i]);
            for (size_t s = 0; s < rep->nstages; s++)
                print_stage(&rep->stages[s], 1, 0);
            if (rep->total.regen_bytes) {
                char g[32], gt[32];
                printf("  predicted %s (policies: %s): max(bodies %s modelled + regenerating %s "
                       "at %.0f GB/s %s, transfers at %.1f GB/s pinned)\n",
                       fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
                       fmt_time(rep->total.model_body_s, a, sizeof a),
                       fmt_bytes(rep->total.regen_bytes, g, sizeof g), rep->gen_gbps,
                       fmt_time(rep->regen_s, gt, sizeof gt), rep->pinned_gbps);
            } else {
                printf("  predicted %s (policies: %s): max(bodies %s modelled, transfers at %.1f "
                       "GB/s pinned)\n",
                       fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
                       fmt_time(rep->total.model_body_s, a, sizeof a), rep->pinned_gbps);
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
            if (c->has_min_budget) {
                char lb[16], b1[32], b2[32];
                fhr_loc_format(c->min_budget, lb, sizeof lb);
                if (mbr == 1 && mb.found) {
                    printf("  smallest feasible budget at %s: %s (%llu bytes; one byte less is "
                           "rejected), predicted %s\n",
                           lb, fmt_bytes(mb.feasible, b1, sizeof b1),
                           (unsigned long long)mb.feasible, fmt_time(mb.feasible_s, t, sizeof t));
                    printf("  within 5%% of the unbounded predicted time (%s) from %s (%llu "
                           "bytes), predicted %s\n",
                           fmt_time(mb.unbounded_s, a, sizeof a), fmt_bytes(mb.near, b2, sizeof b2),
                           (unsigned long long)mb.near, fmt_time(mb.near_s, t, sizeof t));
                } else {
                    printf("  no budget at %s makes the plan feasible\n", lb);
                }
            }
        } else if (rc == EX_FAIL) {
            fprintf(stderr, "%s: rejected\n", c->files[i]);
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
