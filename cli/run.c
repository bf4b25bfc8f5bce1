/* cli/run.c — `fheplan run`: one plan on a CUDA or emulated device (automatic --scale,
 * progress, --trace, --timeline, the report), and one MPI rank's part of a run over
 * several ranks. */
#include "base/units.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/timeline.h"
#include "cli/world.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    if (env && fhr_size_parse(env, &v, NULL, 0) == 0 && v > 0) /* main checked it */
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

/* --json when the device cannot be opened: the refused document of rplan_vm_report_json
 * (ok false, refused true, the error), without a report's stages or totals. */
static void print_refused_json(const cli *c, const char *spec, const fhr_error *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", 0);
    cJSON_AddStringToObject(o, "mode", "run");
    cJSON_AddStringToObject(o, "device", spec);
    cJSON_AddNumberToObject(o, "scale", c->scale ? (double)c->scale : 1);
    cJSON_AddBoolToObject(o, "refused", 1);
    cJSON *eo = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(eo, "status", fhr_status_name(e->status));
    cJSON_AddStringToObject(eo, "message", e->message);
    cJSON_AddNumberToObject(eo, "line", 0);
    cJSON_AddNumberToObject(eo, "col", 0);
    cJSON_AddStringToObject(eo, "phase", fhr_phase_name(FHR_PHASE_NONE));
    cJSON_AddStringToObject(eo, "scope", "");
    cJSON_AddNullToObject(eo, "partial_report");
    cJSON_AddStringToObject(o, "file", c->files[0]);
    print_json(o);
    cJSON_Delete(o);
}

/* A stage whose sub-stages' wall times add up to more than its own: they overlapped (a
 * stage's time runs from its opening on the host to the end of its last work on any
 * device, and the host opens the next stage while the devices still run this one's). */
static void print_overlap(const rplan_vm_report *rep)
{
    for (size_t p = 0; p < rep->nstages; p++) {
        const char *pn = rep->stages[p].name;
        size_t pl = strlen(pn);
        double sum = 0;
        size_t n = 0;
        for (size_t s = 0; s < rep->nstages; s++) {
            const char *sn = rep->stages[s].name;
            /* a direct child: "parent/name" with no further '/' */
            if (strncmp(sn, pn, pl) || sn[pl] != '/' || strchr(sn + pl + 1, '/'))
                continue;
            sum += rep->stages[s].time_s;
            n++;
        }
        if (n > 1 && sum > rep->stages[p].time_s * 1.0005) {
            char a[32], b[32];
            printf("note: the %zu sub-stages of %s take %s together in its %s: they overlap "
                   "(a stage runs from its opening on the host to its last work on a device, and "
                   "the next one opens while the devices still run it)\n",
                   n, pn, fmt_time(sum, a, sizeof a), fmt_time(rep->stages[p].time_s, b, sizeof b));
        }
    }
}

/* One device's terms of the bound: its compute (and regeneration) and its link. */
static void bound_terms(const rplan_vm_report *r, const rplan_device_figures *v, char *comp,
                        size_t nc, char *link, size_t nl)
{
    char t[32], g[32], d[32], a[32], b[32];
    if (v->regen_s > 0)
        snprintf(comp, nc, "compute %s + regenerating %s at %.0f GB/s = %s",
                 fmt_time(v->compute_s, t, sizeof t), fmt_bytes(v->regen_bytes, g, sizeof g),
                 r->gen_gbps, fmt_time(v->regen_s, d, sizeof d));
    else
        snprintf(comp, nc, "compute %s", fmt_time(v->compute_s, t, sizeof t));
    int n = snprintf(link, nl, "transfer %s at %.1f GB/s pinned = %s",
                     fmt_bytes(v->pcie_bytes, a, sizeof a), r->pinned_gbps,
                     fmt_time(v->pcie_s, b, sizeof b));
    if (v->peer_bytes && n > 0 && (size_t)n < nl)
        n += snprintf(link + n, nl - (size_t)n, ", peer %s at %.0f GB/s = %s",
                      fmt_bytes(v->peer_bytes, a, sizeof a), r->peer_gbps,
                      fmt_time(v->peer_s, b, sizeof b));
    if (v->link_windows && v->link_s < (v->pcie_s > v->peer_s ? v->pcie_s : v->peer_s) && n > 0 &&
        (size_t)n < nl)
        snprintf(link + n, nl - (size_t)n, ", carried in %s", fmt_time(v->link_s, b, sizeof b));
}

/* The lower bound, the slowest device's (each device computes and each link carries its
 * bytes side by side with the others), then every device's terms when there are more,
 * then each link's busy and idle time. */
static void print_bound(const rplan_vm_report *rep, uint64_t pcie)
{
    const rplan_vm_report *r = rep;
    char a[32], b[32], c[32], comp[96], link[192], lb[16];
    size_t worst = 0, ndev = 0;
    for (size_t i = 0; i < r->ndevices; i++) {
        if (r->devices[i].bound_s > r->devices[worst].bound_s)
            worst = i;
        ndev += r->devices[i].loc.kind == FHR_LOC_CUDA;
    }
    if (ndev > 1) /* the links run side by side: each device's bytes on its own link */
        printf("links: PCIe %s at %.1f GB/s pinned, peer %s at %.0f GB/s, over %zu devices\n",
               fmt_bytes(r->pcie_bytes, a, sizeof a), r->pinned_gbps,
               fmt_bytes(r->peer_bytes, b, sizeof b), r->peer_gbps, ndev);
    if (!r->ndevices) {
        printf("lower bound: max(compute 0 s, transfer %s) = %s; measured %s\n",
               fmt_bytes(pcie, a, sizeof a), fmt_time(r->lower_bound_s, b, sizeof b),
               fmt_time(r->total.time_s, c, sizeof c));
        return;
    }
    const rplan_device_figures *w = &r->devices[worst];
    bound_terms(r, w, comp, sizeof comp, link, sizeof link);
    printf("lower bound: max(%s, %s) = %s", comp, link, fmt_time(r->lower_bound_s, a, sizeof a));
    if (r->ndevices > 1)
        printf(" (%s's, the slowest)", fhr_loc_format(w->loc, lb, sizeof lb));
    printf("; measured %s, ratio %.2f\n", fmt_time(r->total.time_s, b, sizeof b), r->ratio);
    for (size_t i = 0; r->ndevices > 1 && i < r->ndevices; i++) {
        const rplan_device_figures *v = &r->devices[i];
        fhr_loc_format(v->loc, lb, sizeof lb);
        bound_terms(r, v, comp, sizeof comp, link, sizeof link);
        if (v->loc.kind != FHR_LOC_CUDA) /* bodies on a host queue: no link of its own */
            printf("  %s: %s (%llu %s on its host queue)\n", lb, comp,
                   (unsigned long long)v->bodies, plural(v->bodies, "body", "bodies"));
        else
            printf("  %s: max(%s (%llu %s), %s) = %s\n", lb, comp, (unsigned long long)v->bodies,
                   plural(v->bodies, "body", "bodies"), link, fmt_time(v->bound_s, c, sizeof c));
    }
    double run_s = r->total.time_s > 0 ? r->total.time_s : 1;
    for (size_t i = 0; i < r->ndevices; i++) {
        const rplan_device_figures *v = &r->devices[i];
        if (!v->link_windows)
            continue;
        printf("link onto %s: busy %s, idle %s between transfers, of it %s (%.1f%% of the run) "
               "while a later transfer's room was free\n",
               fhr_loc_format(v->loc, lb, sizeof lb), fmt_time(v->link_busy_s, a, sizeof a),
               fmt_time(v->link_idle_s, b, sizeof b), fmt_time(v->link_ready_idle_s, c, sizeof c),
               100.0 * v->link_ready_idle_s / run_s);
    }
}

/* The device run uses: --device, else FHEPLAN_DEVICE, else auto (in a CUDA build, auto
 * without a usable GPU says why it runs on the emulated device). 0 with *out open, or
 * the exit status with the error said (and, with --json, the refused document). */
static int open_device(const cli *c, fhr_backend **out)
{
    const char *spec = c->device ? c->device : getenv("FHEPLAN_DEVICE");
    if (!spec || !*spec)
        spec = "auto";
    if (check_device(spec) != 0) {
        fprintf(stderr, "fheplan: bad FHEPLAN_DEVICE '%s' (want auto, cuda, emu or emu:N with N "
                "in 1..62)\n", spec);
        return EX_USAGE_;
    }
    if (strcmp(spec, "emu") == 0)
        spec = "emu:1";
    fhr_backend *b = NULL;
    fhr_error e;
    fhr_error_init(&e);
#if FHEPLAN_HAVE_CUDA
    if (!strcmp(spec, "auto") && !c->quiet) {
        if (fhr_backend_open("cuda", &b, &e) == FHR_OK && b->ops->device_count(b) < 1) {
            snprintf(e.message, sizeof e.message, "cuda: no visible device");
            fhr_backend_destroy(b);
            b = NULL;
        }
        if (!b)
            fprintf(stderr, "fheplan: note: --device auto: %s; running on the emulated device "
                    "instead (--device emu chooses it, --device cuda requires a GPU)\n",
                    e.message[0] ? e.message : "no usable CUDA device");
        fhr_error_clear(&e);
        fhr_error_init(&e);
        spec = b ? spec : "emu:1";
    }
#endif
    if (!b && fhr_backend_open(spec, &b, &e) != FHR_OK) {
        fprintf(stderr, "fheplan: cannot open device '%s': %s\n", spec, e.message);
        if (c->json) /* refused: one document that says so, as for a plan refused below */
            print_refused_json(c, spec, &e);
        fhr_error_clear(&e);
        return e.status == FHR_E_INVALID ? EX_USAGE_ : EX_FAIL;
    }
    *out = b;
    return 0;
}

/* The VM's options from the command line. */
static void run_opts(const cli *c, uint64_t scale, prog_state *ps, rplan_vm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = RPLAN_VM_RUN;
    o->scale = scale;
    o->budget_override = c->budgets;
    o->nbudget_override = c->nbudgets;
    o->unknown_as_touch = 1;
    o->policy_override = c->policy;
    o->prefetch_depth = c->prefetch;
    o->serial = c->prefetch_set && c->prefetch == 0;
    o->objective = c->objective;
    o->pinned_gbps = c->pinned_gbps;
    o->device_gbps = c->device_gbps;
    o->gen_gbps = c->gen_gbps;
    o->peer_gbps = c->peer_gbps;
    o->trace = c->trace != NULL || c->timeline != NULL;
    o->profile = c->profile;
    o->nprofile = c->nprofile;
    o->progress = on_progress;
    o->progress_ctx = ps;
}

/* One output file of a run (text, NULL when it could not be made): 0, or EX_FAIL with
 * the reason said. */
static int write_output(const char *path, const char *what, char *text)
{
    if (!text)
        errno = ENOMEM;
    if (!text || write_atomic(path, text, strlen(text)) != 0) {
        fprintf(stderr, "fheplan: cannot write the %s '%s': %s\n", what, path, strerror(errno));
        free(text);
        return EX_FAIL;
    }
    free(text);
    return 0;
}

/* --trace, --profile-out and --timeline of a run that ran: 0, or EX_FAIL (said). */
static int write_outputs(const cli *c, const rplan_vm *vm, const rplan_vm_report *rep)
{
    int rc = 0;
    if (c->trace && write_output(c->trace, "trace", rplan_vm_trace_json(vm)) != 0)
        rc = EX_FAIL;
    if (c->profile_out && write_output(c->profile_out, "profile", rplan_profile_json(rep)) != 0)
        rc = EX_FAIL;
    if (c->timeline) {
        char *t = rplan_vm_trace_json(vm);
        if (!t || timeline_write(c->timeline, c->files[0], rep, t) != 0) {
            fprintf(stderr, "fheplan: cannot write the timeline '%s': %s\n", c->timeline,
                    strerror(t ? errno : ENOMEM));
            rc = EX_FAIL;
        }
        free(t);
    }
    return rc;
}

/* "host waits for bodies in flight: ..." when the run waited. */
static void print_host_waits(const rplan_vm_report *rep)
{
    static const char *const why[RPLAN_WAITS] = {"the prefetch bound", "MIN's victim",
                                                 "room held by bodies", "settled copies evicted"};
    uint64_t nw = 0;
    for (int w = 0; w < RPLAN_WAITS; w++)
        nw += rep->host_waits[w];
    if (!nw)
        return;
    printf("host waits for bodies in flight:");
    const char *sep = " ";
    for (int w = 0; w < RPLAN_WAITS; w++)
        if (rep->host_waits[w]) {
            char tw[32];
            printf("%s%llu for %s (%s)", sep, (unsigned long long)rep->host_waits[w], why[w],
                   fmt_time(rep->host_wait_s[w], tw, sizeof tw));
            sep = ", ";
        }
    if (rep->host_waits_drained) {
        char td[32];
        printf("; %llu of them for the newest body, the device then drained (%s)",
               (unsigned long long)rep->host_waits_drained,
               fmt_time(rep->host_wait_drained_s, td, sizeof td));
    }
    printf("\n");
}

/* The text report of a run that ran (scale: the one asked for). */
static void print_run(const cli *c, const rplan_vm_report *rep, uint64_t scale)
{
    printf("fheplan run %s on %s%s", input_name(c->files[0]), rep->device,
           rep->scale > 1 ? " (sizes divided by " : "");
    if (rep->scale > 1)
        printf("%llu)", (unsigned long long)rep->scale);
    if (rep->scale != scale) /* exact scaling only (rplan_vm_opts.scale) */
        printf(" (--scale %llu: the largest exact divisor of every size is %llu)",
               (unsigned long long)scale, (unsigned long long)rep->scale);
    printf("\n");
    if (!strncmp(rep->device, "emu", 3))
        printf("emulated device: the times below are modelled on this host, not measured on a "
               "GPU, and vary with the host's load\n");
    for (size_t s = 0; s < rep->nstages; s++)
        print_stage(&rep->stages[s], 0, 0);
    print_stage(&rep->total, 0, 1);
    const rplan_stage_report *tt = &rep->total;
    uint64_t pcie = tt->bytes[FHR_DIR_H2D] + tt->bytes[FHR_DIR_D2H] + tt->load_h2d_bytes;
    print_overlap(rep);
    print_bound(rep, pcie);
    print_host_waits(rep);
    if (c->objective == RPLAN_OBJECTIVE_AUTO && rep->auto_bytes_s > 0) {
        char tb[32], tm[32];
        printf("objective auto: %s (modelled: bytes %s, time %s)\n",
               rep->objective == RPLAN_OBJECTIVE_TIME ? "time" : "bytes",
               fmt_time(rep->auto_bytes_s, tb, sizeof tb), fmt_time(rep->auto_time_s, tm, sizeof tm));
    }
    printf("%s\n", rep->ok ? "ok" : "FAILED");
}

/* --json: the report as one document, with the file named. */
static void print_run_json(const cli *c, const rplan_vm_report *rep, const double *t)
{
    char *s = rplan_vm_report_json(rep);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    if (o) {
        cJSON_AddStringToObject(o, "file", c->files[0]);
        cJSON *r = t ? cJSON_AddObjectToObject(o, "repeat") : NULL;
        if (r) { /* --repeat N: runs 2..N's wall times */
            cJSON_AddNumberToObject(r, "runs", c->repeat);
            cJSON_AddNumberToObject(r, "median_s", t[0]);
            cJSON_AddNumberToObject(r, "min_s", t[1]);
            cJSON_AddNumberToObject(r, "max_s", t[2]);
        }
        print_json(o);
        cJSON_Delete(o);
    }
}

/* --json when the plan could not be loaded: ok false and its diagnostics. */
static void print_unloaded_json(const cli *c, input *in)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", 0);
    cJSON_AddStringToObject(o, "file", c->files[0]);
    cJSON_AddItemToObject(o, "diagnostics", input_diags_json(in));
    print_json(o);
    cJSON_Delete(o);
}

/* ---- --repeat N ---------------------------------------------------------------------- */

/* What a run decided, stage by stage: the same in every run of one VM (rplan_vm(3)). */
static int same_record(const rplan_stage_report *a, const rplan_stage_report *b)
{
    int same = a->load_bytes == b->load_bytes && a->loads == b->loads &&
               a->load_h2d_bytes == b->load_h2d_bytes && a->regen_bytes == b->regen_bytes &&
               a->evictions == b->evictions && a->plans == b->plans &&
               a->requests == b->requests && a->bodies == b->bodies &&
               a->checks == b->checks && a->check_failures == b->check_failures &&
               a->npeaks == b->npeaks;
    for (int d = 0; same && d < FHR_DIR_COUNT_; d++)
        same = a->bytes[d] == b->bytes[d] && a->copies[d] == b->copies[d];
    for (size_t k = 0; same && k < a->npeaks; k++)
        same = a->peaks[k].peak_bytes == b->peaks[k].peak_bytes;
    return same;
}

static int same_schedule(const rplan_vm_report *a, const rplan_vm_report *b)
{
    int same = a->ok == b->ok && a->status == b->status && a->nstages == b->nstages &&
               a->objective == b->objective && same_record(&a->total, &b->total);
    for (size_t s = 0; same && s < a->nstages; s++)
        same = same_record(&a->stages[s], &b->stages[s]);
    return same;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs 2..N of --repeat on the VM of the first: each must make the first one's schedule
 * (else EX_FAIL, said); *rep becomes the last run's report; t[0..2] the median, least and
 * most wall time of runs 2..N. */
static int repeat_runs(const cli *c, rplan_vm *vm, rplan_vm_report **rep, double t[3])
{
    size_t n = c->repeat - 1;
    double *w = calloc(n + 1, sizeof *w);
    rplan_vm_report *first = *rep, *last = NULL;
    int rc = w ? EX_OK : EX_SOFTWARE_;
    for (size_t r = 0; r < n && rc == EX_OK; r++) {
        struct timespec t0, t1;
        fhr_error e;
        fhr_error_init(&e);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rplan_vm_run(vm, &last, &e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        w[r] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (!last) {
            fprintf(stderr, "fheplan: run %zu of %u: %s\n", r + 2, c->repeat, e.message);
            rc = EX_FAIL;
        } else if (!last->ok) {
            fprintf(stderr, "fheplan: run %zu of %u failed: %s\n", r + 2, c->repeat,
                    last->message);
            rc = EX_FAIL;
        } else if (!same_schedule(first, last)) {
            fprintf(stderr, "fheplan: run %zu of %u made another schedule than the first "
                            "(bytes, loads, evictions or peaks differ)\n", r + 2, c->repeat);
            rc = EX_FAIL;
        }
        fhr_error_clear(&e);
        if (last && r + 1 < n && rc == EX_OK) {
            rplan_vm_report_free(last);
            last = NULL;
        }
    }
    if (last) {
        rplan_vm_report_free(first);
        *rep = last;
    }
    if (w && rc == EX_OK) {
        qsort(w, n, sizeof *w, cmp_double);
        t[0] = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
        t[1] = w[0];
        t[2] = w[n - 1];
    }
    free(w);
    return rc;
}

static void print_repeat(const cli *c, const double t[3])
{
    char a[32], b[32], d[32];
    printf("repeat: %u runs on one VM, the same schedule each; runs 2..%u: median %s per run "
           "(%s .. %s)\n", c->repeat, c->repeat, fmt_time(t[0], a, sizeof a),
           fmt_time(t[1], b, sizeof b), fmt_time(t[2], d, sizeof d));
}

int cmd_run(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, c->json);
    if (rc) {
        if (c->json)
            print_unloaded_json(c, &in);
        input_free(&in);
        return rc;
    }
    fhr_backend *b = NULL;
    rc = open_device(c, &b);
    if (rc) {
        input_free(&in);
        return rc;
    }
    uint64_t scale = c->scale;
    if (!scale) {
        scale = strcmp(b->ops->name, "emu") == 0 ? auto_scale(in.p) : 1;
        if (scale > 1 && !c->quiet)
            fprintf(stderr,
                    "fheplan: note: emulated device: sizes, reservations and budgets divided by "
                    "%llu (--scale 1 runs at full size)\n",
                    (unsigned long long)scale);
    }
    prog_state ps = {!c->json && !c->quiet && want_colour() >= 0 && isatty(2), 0};
    rplan_vm_opts o;
    run_opts(c, scale, &ps, &o);
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    rc = run_vm(c, &in, b, &o, &vm, &rep);
    if (ps.shown)
        fputs("\r\033[K", stderr);
    /* a run refused before its first statement prints its error only (above, or as the
     * JSON document): no report, no trace, no timeline, and files already there stay */
    int ran = vm && rep && !rep->refused;
    double t[3] = {0, 0, 0};
    int repeated = ran && rc == EX_OK && c->repeat > 1;
    if (repeated && (rc = repeat_runs(c, vm, &rep, t)) != EX_OK)
        repeated = 0;
    if (ran && write_outputs(c, vm, rep) != 0 && rc == EX_OK)
        rc = EX_FAIL;
    if (rep && c->json)
        print_run_json(c, rep, repeated ? t : NULL);
    else if (ran)
        print_run(c, rep, scale);
    if (repeated && !c->json)
        print_repeat(c, t);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    input_free(&in);
    return rc;
}

/* ---- several ranks ------------------------------------------------------------------ */

/* One rank of an MPI run: runs with its rank constants, its report collected as JSON
 * (diagnostics included) instead of printed; every rank then reaches the gather, failed
 * or not, and rank 0 prints the combined report (cli/world.c). */
int world_run(cli *c, const fp_world *w)
{
    char *doc = NULL, trace[1024], timeline[1024];
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
    if (c->timeline) { /* boot.html -> boot.rank1.html */
        const char *dot = strrchr(c->timeline, '.');
        int stem = dot && !strchr(dot, '/') ? (int)(dot - c->timeline) : (int)strlen(c->timeline);
        snprintf(timeline, sizeof timeline, "%.*s.rank%d%s", stem, c->timeline, w->rank,
                 c->timeline + stem);
        c->timeline = timeline;
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
