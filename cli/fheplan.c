/* cli/fheplan.c — the fheplan command: check, run, compile, disasm. Exit codes: 0 ok /
 * feasible, 1 rejected / failed, 2 unreadable input, 64 usage, 70 internal error.
 * Diagnostics go to stderr as "file:line:col: error: message", the source line and a
 * caret; --json puts one JSON document on stdout and nothing else there; colour only
 * on a TTY and never with NO_COLOR set. See fheplan(1). */
#include "fheplan/residency.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"
#include "cli/world.h"

#include "cli/format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EX_OK = 0, EX_FAIL = 1, EX_NOINPUT_ = 2, EX_USAGE_ = 64, EX_SOFTWARE_ = 70 };

static const char usage_text[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--min-budget LOC]\n"
    "                     [--pinned-gbps X] [--device-gbps X] [--world-size N] [--json] FILE...\n"
    "       fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--prefetch N] [--pinned-gbps X] [--trace FILE]\n"
    "                   [--json] [--quiet] FILE\n"
    "       fheplan compile FILE -o OUT\n"
    "       fheplan disasm [--no-source] FILE\n"
    "       fheplan --version | --help\n";

typedef struct cli {
    int colour;      /* stderr colour */
    int json;
    fhr_budget budgets[16];
    size_t nbudgets;
    const char *device;
    uint64_t scale;  /* 0: automatic */
    const char *trace;
    int quiet;
    int no_source;
    const char *out;
    const char **files;
    size_t nfiles;
    int policy;          /* 0 as written, else an rplan_policy_kind for every policy */
    int prefetch_set;
    unsigned prefetch;   /* --prefetch N (0: serial) */
    double pinned_gbps, device_gbps;
    int has_min_budget;
    fhr_location min_budget;
    uint32_t rank, world_size; /* the plan's rank constants (check --world-size, MPI) */
} cli;

static int usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fputs("fheplan: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fputs(usage_text, stderr);
    return EX_USAGE_;
}

static int want_colour(void)
{
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc)
        return 0;
    const char *t = getenv("TERM");
    if (t && strcmp(t, "dumb") == 0)
        return 0;
    return isatty(2);
}

/* ---- sizes and formatting -------------------------------------------------------- */

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mul = 1;
    if (!*end || !strcmp(end, "B")) mul = 1;
    else if (!strcasecmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "KB")) mul = 1024.0;
    else if (!strcasecmp(end, "M") || !strcmp(end, "MiB") || !strcmp(end, "MB")) mul = 1048576.0;
    else if (!strcasecmp(end, "G") || !strcmp(end, "GiB") || !strcmp(end, "GB")) mul = 1073741824.0;
    else if (!strcasecmp(end, "T") || !strcmp(end, "TiB") || !strcmp(end, "TB")) mul = 1099511627776.0;
    else
        return -1;
    *out = (uint64_t)(v * mul + 0.5);
    return 0;
}

/* ---- input ------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
            }
            break;
        }
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

typedef struct input {
    const char *path;
    char *text;      /* the source text (for carets), or NULL */
    size_t len;
    rplan_program *p;
    rplan_diags *d;
} input;

static void input_free(input *in)
{
    rplan_program_free(in->p);
    rplan_diags_free(in->d);
    free(in->text);
    memset(in, 0, sizeof *in);
}

/* Loads source or bytecode. Returns 0, or an exit code (diagnostics printed unless
 * quiet_diags, in which case they stay in in->d for JSON). */
static int load_input(const cli *c, const char *path, input *in, int quiet_diags)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->d = rplan_diags_new();
    if (!in->d)
        return EX_SOFTWARE_;
    size_t len = 0;
    char *buf = slurp(path, &len);
    if (!buf) {
        if (!quiet_diags || !c->json)
            fprintf(stderr, "fheplan: cannot read '%s': %s\n", path, strerror(errno));
        return EX_NOINPUT_;
    }
    fhr_status st;
    if (rplan_is_bytecode(buf, len)) {
        st = rplan_load_mem(buf, len, path, &in->p, in->d);
        free(buf);
        /* the source text, when the file it came from is still around */
        if (in->p && rplan_source_name(in->p)[0])
            in->text = slurp(rplan_source_name(in->p), &in->len);
    } else {
        rplan_compile_opts o = {.filename = path, .budget_override = c->budgets,
                                .nbudget_override = c->nbudgets, .rank = c->rank,
                                .world_size = c->world_size};
        in->text = buf;
        in->len = len;
        st = rplan_compile(buf, len, &o, &in->p, in->d);
    }
    if (!quiet_diags)
        rplan_diags_render(in->d, stderr, c->colour);
    if (st == FHR_OK)
        return 0;
    return st == FHR_E_NOMEM ? EX_SOFTWARE_ : EX_FAIL;
}

/* A runtime diagnostic at a source position, in the compiler's format. */
static void render_at(const cli *c, const input *in, uint32_t line, uint32_t col, const char *msg)
{
    const char *name = in->path;
    const char *bold = c->colour ? "\033[1m" : "", *red = c->colour ? "\033[1;31m" : "",
               *green = c->colour ? "\033[1;32m" : "", *off = c->colour ? "\033[0m" : "";
    if (line)
        fprintf(stderr, "%s%s:%u:%u:%s %serror:%s %s\n", bold, name, line, col, off, red, off, msg);
    else
        fprintf(stderr, "%s%s:%s %serror:%s %s\n", bold, name, off, red, off, msg);
    if (!line || !in->text)
        return;
    const char *p = in->text, *end = in->text + in->len;
    for (uint32_t l = 1; l < line && p < end; p++)
        if (*p == '\n')
            l++;
    const char *e = p;
    while (e < end && *e != '\n')
        e++;
    fprintf(stderr, "%5u | %.*s\n      | ", line, (int)(e - p), p);
    for (uint32_t k = 1; k < col && p + k - 1 < e; k++)
        fputc(p[k - 1] == '\t' ? '\t' : ' ', stderr);
    fprintf(stderr, "%s^%s\n", green, off);
}

static cJSON *diags_json(const rplan_diags *d)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; d && i < rplan_diags_count(d); i++) {
        const rplan_diag *g = rplan_diags_get(d, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", g->severity == RPLAN_ERROR     ? "error"
                                               : g->severity == RPLAN_WARNING ? "warning"
                                                                              : "note");
        cJSON_AddStringToObject(o, "file", g->file ? g->file : "");
        cJSON_AddNumberToObject(o, "line", g->line);
        cJSON_AddNumberToObject(o, "col", g->col);
        cJSON_AddStringToObject(o, "message", g->message ? g->message : "");
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* Where print_json writes: stdout, or a buffer while one MPI rank or world-size check
 * collects its document (world_run, world_check). */
static FILE *json_out;

static void print_json(cJSON *o)
{
    char *s = cJSON_Print(o);
    FILE *out = json_out ? json_out : stdout;
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}

/* ---- report text ------------------------------------------------------------------- */

static void print_stage(const rplan_stage_report *r, int explain, int is_total)
{
    char a[32], b[32], t[32];
    uint64_t moved = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += r->bytes[d];
    if (explain) {
        printf("  %s %s: %llu plans, %llu requests, %llu bodies; %s would move\n",
               is_total ? "" : "stage", r->name, (unsigned long long)r->plans,
               (unsigned long long)r->requests, (unsigned long long)r->bodies,
               fmt_bytes(moved, a, sizeof a));
    } else {
        printf("%s %s: %s, %s moved (%.2f GB/s), %llu plans, %llu requests\n",
               is_total ? "" : "stage", r->name, fmt_time(r->time_s, t, sizeof t),
               fmt_bytes(moved, a, sizeof a), r->time_s > 0 ? (double)moved / r->time_s / 1e9 : 0,
               (unsigned long long)r->plans, (unsigned long long)r->requests);
    }
    const char *ind = explain ? "    " : "  ";
    printf("%smoves:", ind);
    for (int d = 0; d < FHR_DIR_NONE; d++)
        printf(" %s %s (%llu)", fhr_direction_name((fhr_direction)d),
               fmt_bytes(r->bytes[d], a, sizeof a), (unsigned long long)r->copies[d]);
    printf(", loads %s (%llu), evictions %llu\n", fmt_bytes(r->load_bytes, b, sizeof b),
           (unsigned long long)r->loads, (unsigned long long)r->evictions);
    printf("%speak:", ind);
    for (size_t i = 0; i < r->npeaks; i++) {
        char lb[16];
        printf("%s %s %s", i ? "," : "", fhr_loc_format(r->peaks[i].loc, lb, sizeof lb),
               fmt_bytes(r->peaks[i].peak_bytes, a, sizeof a));
        if (r->peaks[i].has_budget)
            printf(" of %s", fmt_bytes(r->peaks[i].budget_bytes, b, sizeof b));
    }
    if (!r->npeaks)
        printf(" nothing placed");
    printf("\n");
    if (!explain)
        printf("  bodies: %llu, %s of body time; integrity: %s (%llu checks, %llu failed)\n",
               (unsigned long long)r->bodies, fmt_time(r->body_s, t, sizeof t),
               r->check_failures ? "FAILED" : "ok", (unsigned long long)r->checks,
               (unsigned long long)r->check_failures);
}

/* ---- check ------------------------------------------------------------------------ */

static int run_vm(const cli *c, input *in, fhr_backend *b, rplan_vm_opts *o, rplan_vm **vm_out,
                  rplan_vm_report **rep)
{
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    *rep = NULL;
    fhr_status st = rplan_vm_create(in->p, b, o, &vm, &e);
    if (st) {
        if (!c->json)
            render_at(c, in, 0, 0, e.message);
        fhr_error_clear(&e);
        return st == FHR_E_NOMEM ? EX_SOFTWARE_ : EX_FAIL;
    }
    st = rplan_vm_run(vm, rep, &e);
    fhr_error_clear(&e);
    *vm_out = vm;
    if (!*rep)
        return EX_SOFTWARE_;
    if (!(*rep)->ok && !c->json) {
        char msg[900];
        if ((*rep)->scope[0])
            snprintf(msg, sizeof msg, "%s (in '%s')", (*rep)->message, (*rep)->scope);
        else
            snprintf(msg, sizeof msg, "%s", (*rep)->message);
        render_at(c, in, (*rep)->line, (*rep)->col, msg);
    }
    return (*rep)->ok ? EX_OK : EX_FAIL;
}

static void explain_opts(const cli *c, rplan_vm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = RPLAN_VM_EXPLAIN;
    o->budget_override = c->budgets;
    o->nbudget_override = c->nbudgets;
    o->unknown_as_touch = 1;
    o->policy_override = c->policy;
    o->pinned_gbps = c->pinned_gbps;
    o->device_gbps = c->device_gbps;
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
                 int policy, double *predicted, uint64_t *moved)
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
    if (fhr_backend_open("model:8", &b, NULL) == FHR_OK &&
        rplan_vm_create(p, b, &o, &vm, NULL) == FHR_OK) {
        rplan_vm_run(vm, &rep, NULL);
        if (rep) {
            ok = rep->ok;
            if (predicted)
                *predicted = rep->predicted_s;
            if (moved)
                *moved = moved_bytes(&rep->total);
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
    int f = probe(c, in, &b, 1, c->policy, &r->unbounded_s, NULL);
    if (f < 0)
        return -1;
    if (!f)
        return 0;
    uint64_t lo = 0, hi = MIN_BUDGET_CEIL; /* lo fails (or is 0), hi passes */
    b.nbytes = 0;
    if (probe(c, in, &b, 1, c->policy, NULL, NULL) == 1)
        hi = 0;
    while (hi && lo + 1 < hi) {
        b.nbytes = lo + (hi - lo) / 2;
        int ok = probe(c, in, &b, 1, c->policy, NULL, NULL);
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
    probe(c, in, &b, 1, c->policy, &r->feasible_s, NULL);
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
            int ok = probe(c, in, &b, 1, c->policy, &t, NULL);
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
    probe(c, in, &b, 1, c->policy, &r->near_s, NULL);
    return 1;
}

static int cmd_check(cli *c)
{
    int worst = EX_OK;
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
            if (fhr_backend_open("model:8", &b, NULL) != FHR_OK) {
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
        uint64_t pmoved[2] = {0, 0};
        double ppred[2] = {0, 0};
        int pok[2] = {0, 0}, has_requests = rc == 0 && in.p && rplan_npolicies(in.p) > 0;
        for (int k = 0; k < 2 && has_requests; k++)
            pok[k] = probe(c, &in, NULL, 0, kinds[k], &ppred[k], &pmoved[k]) == 1;
        min_budget_result mb;
        int mbr = rc == 0 && c->has_min_budget ? min_budget(c, &in, c->min_budget, &mb) : 0;
        if (mbr < 0)
            rc = EX_SOFTWARE_;
        if (fo) {
            cJSON_AddBoolToObject(fo, "feasible", rc == 0);
            cJSON_AddItemToObject(fo, "diagnostics", diags_json(in.d));
            if (rep) {
                cJSON_AddNumberToObject(fo, "predicted_s", rep->predicted_s);
                cJSON_AddNumberToObject(fo, "bytes_moved", (double)moved_bytes(&rep->total));
            }
            cJSON *pa = cJSON_AddArrayToObject(fo, "policies");
            for (int k = 0; k < 2 && has_requests; k++) {
                cJSON *po = cJSON_CreateObject();
                cJSON_AddStringToObject(po, "policy", policy_name(kinds[k]));
                cJSON_AddBoolToObject(po, "feasible", pok[k]);
                cJSON_AddNumberToObject(po, "bytes_moved", (double)pmoved[k]);
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
            printf("  predicted %s (policies: %s): max(bodies %s modelled, transfers at %.1f "
                   "GB/s pinned)\n",
                   fmt_time(rep->predicted_s, t, sizeof t), policy_name(c->policy),
                   fmt_time(rep->total.model_body_s, a, sizeof a), rep->pinned_gbps);
            for (int k = 0; k < 2 && has_requests; k++) {
                if (pok[k])
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
        rplan_vm_report_free(rep);
        input_free(&in);
        if (rc > worst)
            worst = rc;
    }
    if (root) {
        cJSON_AddBoolToObject(root, "feasible", worst == EX_OK);
        print_json(root);
        cJSON_Delete(root);
    }
    return worst;
}

/* ---- run -------------------------------------------------------------------------- */

typedef struct prog_state {
    int on;
    int shown;
} prog_state;

static void on_progress(void *ctx, const rplan_vm_progress *p)
{
    prog_state *ps = ctx;
    if (!ps->on || p->elapsed_s < 0.5)
        return;
    char a[32];
    fprintf(stderr, "\r\033[K[%zu/%zu] %s%s%s  %s moved  %.1f s", p->done, p->total, p->stage,
            p->stage[0] ? ": " : "", p->scope, fmt_bytes(p->bytes_moved, a, sizeof a),
            p->elapsed_s);
    fflush(stderr);
    ps->shown = 1;
}

/* Automatic scale on the emulated device: the smallest power of two that brings the
 * sum of all value sizes under FHEPLAN_EMU_MEMORY (default 256 MiB). */
static uint64_t auto_scale(const rplan_program *p)
{
    uint64_t limit = (uint64_t)256 << 20, total = 0;
    const char *env = getenv("FHEPLAN_EMU_MEMORY");
    uint64_t v;
    if (env && parse_size(env, &v) == 0 && v > 0)
        limit = v;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) == FHR_OK)
            total += vi.nbytes;
    }
    uint64_t s = 1;
    while (total / s > limit && s < ((uint64_t)1 << 30))
        s *= 2;
    return s;
}

static int cmd_run(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, c->json);
    if (rc) {
        if (c->json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddBoolToObject(o, "ok", 0);
            cJSON_AddStringToObject(o, "file", c->files[0]);
            cJSON_AddItemToObject(o, "diagnostics", diags_json(in.d));
            print_json(o);
            cJSON_Delete(o);
        }
        input_free(&in);
        return rc;
    }
    const char *spec = c->device ? c->device : getenv("FHEPLAN_DEVICE");
    if (!spec || !*spec)
        spec = "auto";
    if (strcmp(spec, "emu") == 0)
        spec = "emu:1";
    fhr_backend *b = NULL;
    fhr_error e;
    fhr_error_init(&e);
    if (fhr_backend_open(spec, &b, &e) != FHR_OK) {
        fprintf(stderr, "fheplan: cannot open device '%s': %s\n", spec, e.message);
        fhr_error_clear(&e);
        input_free(&in);
        return e.status == FHR_E_INVALID ? EX_USAGE_ : EX_FAIL;
    }
    const char *bname = b->ops->name;
    uint64_t scale = c->scale;
    if (!scale) {
        scale = strcmp(bname, "emu") == 0 ? auto_scale(in.p) : 1;
        if (scale > 1 && !c->quiet)
            fprintf(stderr,
                    "fheplan: note: emulated device: sizes, reservations and budgets divided by "
                    "%llu (--scale 1 runs at full size)\n",
                    (unsigned long long)scale);
    }
    prog_state ps = {!c->json && !c->quiet && want_colour() >= 0 && isatty(2), 0};
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_RUN;
    o.scale = scale;
    o.budget_override = c->budgets;
    o.nbudget_override = c->nbudgets;
    o.unknown_as_touch = 1;
    o.policy_override = c->policy;
    o.prefetch_depth = c->prefetch;
    o.serial = c->prefetch_set && c->prefetch == 0;
    o.pinned_gbps = c->pinned_gbps;
    o.device_gbps = c->device_gbps;
    o.trace = c->trace != NULL;
    o.progress = on_progress;
    o.progress_ctx = &ps;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    rc = run_vm(c, &in, b, &o, &vm, &rep);
    if (ps.shown)
        fputs("\r\033[K", stderr);
    if (c->trace && vm) {
        char *t = rplan_vm_trace_json(vm);
        FILE *f = t ? fopen(c->trace, "w") : NULL;
        if (!f || fputs(t, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "fheplan: cannot write the trace '%s': %s\n", c->trace,
                    strerror(errno));
            if (rc == EX_OK)
                rc = EX_FAIL;
        }
        free(t);
    }
    if (rep && c->json) {
        char *s = rplan_vm_report_json(rep);
        cJSON *o2 = s ? cJSON_Parse(s) : NULL;
        free(s);
        if (o2) {
            cJSON_AddStringToObject(o2, "file", c->files[0]);
            print_json(o2);
            cJSON_Delete(o2);
        }
    } else if (rep) {
        char t[32], a[32], lb[32], t2[32], t3[32];
        printf("fheplan run %s on %s%s", c->files[0], rep->device,
               scale > 1 ? " (sizes divided by " : "");
        if (scale > 1)
            printf("%llu)", (unsigned long long)scale);
        printf("\n");
        for (size_t s = 0; s < rep->nstages; s++)
            print_stage(&rep->stages[s], 0, 0);
        print_stage(&rep->total, 0, 1);
        const rplan_stage_report *tt = &rep->total;
        uint64_t pcie = tt->bytes[FHR_DIR_H2D] + tt->bytes[FHR_DIR_D2H] + tt->load_h2d_bytes;
        printf("lower bound: max(compute %s, transfer %s at %.1f GB/s pinned = %s) = %s; "
               "measured %s, ratio %.2f\n",
               fmt_time(tt->body_s, t, sizeof t), fmt_bytes(pcie, a, sizeof a), rep->pinned_gbps,
               fmt_time(rep->transfer_s, lb, sizeof lb), fmt_time(rep->lower_bound_s, t2, sizeof t2),
               fmt_time(tt->time_s, t3, sizeof t3), rep->ratio);
        printf("%s\n", rep->ok ? "ok" : "FAILED");
    }
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    input_free(&in);
    return rc;
}

/* ---- compile / disasm -------------------------------------------------------------- */

static int cmd_compile(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, 0);
    if (rc == 0) {
        fhr_error e;
        fhr_error_init(&e);
        if (rplan_write_file(in.p, c->out, &e) != FHR_OK) {
            fprintf(stderr, "fheplan: cannot write '%s': %s\n", c->out, e.message);
            rc = EX_FAIL;
        }
        fhr_error_clear(&e);
    }
    input_free(&in);
    return rc;
}

static int cmd_disasm(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, 0);
    if (rc == 0)
        rplan_disasm(in.p, stdout, c->no_source ? RPLAN_DISASM_NOSOURCE : 0);
    input_free(&in);
    return rc;
}

/* ---- several ranks ------------------------------------------------------------------ */

/* One rank of an MPI run: runs with its rank constants, its report collected as JSON
 * (diagnostics included) instead of printed; every rank then reaches the gather, failed
 * or not, and rank 0 prints the combined report (cli/world.c). */
static int world_run(cli *c, const fp_world *w)
{
    char *doc = NULL, trace[1024];
    size_t len = 0;
    int json = c->json;
    c->json = 1;
    c->quiet |= w->rank != 0;
    c->rank = (uint32_t)w->rank;
    c->world_size = (uint32_t)w->size;
    if (c->trace) { /* one trace per rank: boot.json -> boot.rank1.json */
        const char *dot = strrchr(c->trace, '.');
        int stem = dot && !strchr(dot, '/') ? (int)(dot - c->trace) : (int)strlen(c->trace);
        snprintf(trace, sizeof trace, "%.*s.rank%d%s", stem, c->trace, w->rank,
                 c->trace + stem);
        c->trace = trace;
    }
    json_out = open_memstream(&doc, &len);
    int rc = json_out ? cmd_run(c) : EX_SOFTWARE_;
    if (json_out)
        fclose(json_out);
    json_out = NULL;
    char *mine = fp_world_rank_doc(w, rc, doc);
    free(doc);
    char **all = fp_world_gather(w, mine);
    free(mine);
    if (w->rank != 0)
        return rc;
    if (!all)
        return EX_SOFTWARE_;
    if (!json)
        printf("fheplan run %s on %d ranks\n", c->files[0], w->size);
    int wrc = fp_world_print_run(c->files[0], w->size, all, json, c->colour);
    for (int r = 0; r < w->size; r++)
        free(all[r]);
    free(all);
    return wrc;
}

/* check --world-size N: the plans once per rank 0..N-1, each compiled with its rank
 * constants and dry-run on its own. Text: each rank's usual check output under a
 * "rank R of N" line, then one line per rejected rank; JSON: one document with
 * {"world_size", "feasible", "ranks": [{"rank", "feasible", "files"}]}. */
static int world_check(cli *c)
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

static int parse_world_size(cli *c, const char *arg)
{
    char *end;
    unsigned long v = strtoul(arg, &end, 10);
    if (end == arg || *end || v == 0 || v > 65536)
        return usage("bad --world-size '%s' (want an integer 1..65536)", arg);
    c->world_size = (uint32_t)v;
    return 0;
}

/* ---- arguments ----------------------------------------------------------------------- */

static int parse_budget(cli *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    char loc[32];
    if (!eq || (size_t)(eq - arg) >= sizeof loc || c->nbudgets == 16)
        return usage("bad --budget '%s' (want LOC=SIZE, e.g. cuda:0=2GiB)", arg);
    memcpy(loc, arg, (size_t)(eq - arg));
    loc[eq - arg] = 0;
    fhr_budget *b = &c->budgets[c->nbudgets];
    if (fhr_loc_parse(loc, &b->loc) != FHR_OK || parse_size(eq + 1, &b->nbytes) != 0)
        return usage("bad --budget '%s' (want LOC=SIZE, e.g. cuda:0=2GiB)", arg);
    c->nbudgets++;
    return 0;
}

static int parse_scale(cli *c, const char *arg)
{
    const char *s = strncmp(arg, "1/", 2) == 0 ? arg + 2 : arg;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || v == 0)
        return usage("bad --scale '%s' (want a positive integer N or 1/N)", arg);
    c->scale = v;
    return 0;
}

static int parse_policy(cli *c, const char *arg)
{
    if (!strcmp(arg, "tiered_lru") || !strcmp(arg, "lru"))
        c->policy = RPLAN_POLICY_TIERED_LRU;
    else if (!strcmp(arg, "lookahead"))
        c->policy = RPLAN_POLICY_LOOKAHEAD;
    else if (!strcmp(arg, "as-written"))
        c->policy = 0;
    else
        return usage("bad --policy '%s' (want tiered_lru, lookahead or as-written)", arg);
    return 0;
}

static int parse_uint(const char *arg, const char *opt, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(arg, &end, 10);
    if (end == arg || *end || v > 1000000)
        return usage("bad value for %s (want a count)", opt);
    (void)opt;
    *out = (unsigned)v;
    return 0;
}

static int cli_main(int argc, char **argv, const fp_world *w);

int main(int argc, char **argv)
{
    fp_world w;
    if (fp_world_init(&argc, &argv, &w) != 0)
        return EX_SOFTWARE_;
    int rc = cli_main(argc, argv, &w);
    fp_world_finish(&w);
    return rc;
}

static int cli_main(int argc, char **argv, const fp_world *w)
{
    if (argc < 2)
        return usage(NULL, NULL);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_text, stdout);
        return EX_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("fheplan %s%s\n", fhr_version(), fp_world_have_mpi() ? " (MPI)" : "");
        return EX_OK;
    }
    int is_check = !strcmp(cmd, "check"), is_run = !strcmp(cmd, "run"),
        is_compile = !strcmp(cmd, "compile"), is_disasm = !strcmp(cmd, "disasm");
    if (!is_check && !is_run && !is_compile && !is_disasm)
        return usage("unknown command '%s'", cmd);
    cli c;
    memset(&c, 0, sizeof c);
    c.colour = want_colour();
    c.files = calloc((size_t)argc, sizeof *c.files);
    if (!c.files)
        return EX_SOFTWARE_;
    int rc = 0, dashdash = 0;
    for (int i = 2; i < argc && !rc; i++) {
        const char *a = argv[i];
#define NEED_ARG()                                                                           \
    do {                                                                                     \
        if (i + 1 >= argc) {                                                                 \
            rc = usage("option %s needs an argument", a);                                    \
            break;                                                                           \
        }                                                                                    \
    } while (0)
        if (dashdash || a[0] != '-' || !a[1]) {
            c.files[c.nfiles++] = a;
        } else if (!strcmp(a, "--")) {
            dashdash = 1;
        } else if (!strcmp(a, "--json") && (is_check || is_run)) {
            c.json = 1;
        } else if (!strcmp(a, "--world-size") && is_check) {
            NEED_ARG();
            if (!rc)
                rc = parse_world_size(&c, argv[++i]);
        } else if (!strncmp(a, "--world-size=", 13) && is_check) {
            rc = parse_world_size(&c, a + 13);
        } else if (!strcmp(a, "--quiet") && is_run) {
            c.quiet = 1;
        } else if (!strcmp(a, "--no-source") && is_disasm) {
            c.no_source = 1;
        } else if (!strcmp(a, "--budget") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = parse_budget(&c, argv[++i]);
        } else if (!strncmp(a, "--budget=", 9) && (is_check || is_run)) {
            rc = parse_budget(&c, a + 9);
        } else if (!strcmp(a, "--device") && is_run) {
            NEED_ARG();
            if (!rc)
                c.device = argv[++i];
        } else if (!strncmp(a, "--device=", 9) && is_run) {
            c.device = a + 9;
        } else if (!strcmp(a, "--scale") && is_run) {
            NEED_ARG();
            if (!rc)
                rc = parse_scale(&c, argv[++i]);
        } else if (!strncmp(a, "--scale=", 8) && is_run) {
            rc = parse_scale(&c, a + 8);
        } else if (!strcmp(a, "--trace") && is_run) {
            NEED_ARG();
            if (!rc)
                c.trace = argv[++i];
        } else if (!strncmp(a, "--trace=", 8) && is_run) {
            c.trace = a + 8;
        } else if (!strcmp(a, "--policy") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = parse_policy(&c, argv[++i]);
        } else if (!strcmp(a, "--prefetch") && is_run) {
            NEED_ARG();
            if (!rc)
                rc = parse_uint(argv[++i], "--prefetch", &c.prefetch);
            c.prefetch_set = 1;
        } else if ((!strcmp(a, "--pinned-gbps") || !strcmp(a, "--device-gbps")) &&
                   (is_check || is_run)) {
            NEED_ARG();
            if (!rc) {
                double v = atof(argv[++i]);
                if (v <= 0)
                    rc = usage("bad %s (want a positive number of GB/s)", a);
                else if (a[2] == 'p')
                    c.pinned_gbps = v;
                else
                    c.device_gbps = v;
            }
        } else if (!strcmp(a, "--min-budget") && is_check) {
            NEED_ARG();
            if (!rc && fhr_loc_parse(argv[++i], &c.min_budget) != FHR_OK)
                rc = usage("bad --min-budget '%s' (want a location: host, pinned, cuda:N)",
                           argv[i]);
            c.has_min_budget = 1;
        } else if (!strcmp(a, "-o") && is_compile) {
            NEED_ARG();
            if (!rc)
                c.out = argv[++i];
        } else {
            rc = usage("unknown option '%s'", a);
        }
    }
    if (!rc) {
        if (c.nfiles == 0)
            rc = usage("%s needs a FILE", cmd);
        else if (!is_check && c.nfiles > 1)
            rc = usage("%s takes one FILE", cmd);
        else if (is_compile && !c.out)
            rc = usage("%s needs -o OUT", cmd);
        else if (c.device && strcmp(c.device, "auto") && strcmp(c.device, "cuda") &&
                 strncmp(c.device, "emu", 3))
            rc = usage("bad --device '%s' (want auto, cuda, emu or emu:N)", c.device);
    }
    if (!rc && w->mpi && is_run) {
        rc = world_run(&c, w);
    } else if (!rc && w->mpi && w->rank != 0) {
        /* check, compile, disasm: rank 0 does them (check for every rank) */
    } else if (!rc) {
        if (is_check && w->mpi && !c.world_size)
            c.world_size = (uint32_t)w->size;
        rc = is_check && c.world_size > 1 ? world_check(&c)
             : is_check                   ? cmd_check(&c)
             : is_run                     ? cmd_run(&c)
             : is_compile                 ? cmd_compile(&c)
                                          : cmd_disasm(&c);
    }
    fflush(stdout);
    free(c.files);
    return rc;
}
