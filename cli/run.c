/* cli/run.c — `fheplan run`: one plan on a CUDA or emulated device (automatic --scale,
 * progress, --trace, --timeline, the report), and one MPI rank's part of a run over
 * several ranks. */
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

int cmd_run(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, c->json);
    if (rc) {
        if (c->json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddBoolToObject(o, "ok", 0);
            cJSON_AddStringToObject(o, "file", c->files[0]);
            cJSON_AddItemToObject(o, "diagnostics", input_diags_json(&in));
            print_json(o);
            cJSON_Delete(o);
        }
        input_free(&in);
        return rc;
    }
    const char *spec = c->device ? c->device : getenv("FHEPLAN_DEVICE");
    if (!spec || !*spec)
        spec = "auto";
    if (check_device(spec) != 0) {
        fprintf(stderr, "fheplan: bad FHEPLAN_DEVICE '%s' (want auto, cuda, emu or emu:N with N "
                "in 1..62)\n", spec);
        input_free(&in);
        return EX_USAGE_;
    }
    if (strcmp(spec, "emu") == 0)
        spec = "emu:1";
    fhr_backend *b = NULL;
    fhr_error e;
    fhr_error_init(&e);
    if (fhr_backend_open(spec, &b, &e) != FHR_OK) {
        fprintf(stderr, "fheplan: cannot open device '%s': %s\n", spec, e.message);
        if (c->json) /* refused: one document that says so, as for a plan refused below */
            print_refused_json(c, spec, &e);
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
    o.objective = c->objective;
    o.pinned_gbps = c->pinned_gbps;
    o.device_gbps = c->device_gbps;
    o.gen_gbps = c->gen_gbps;
    o.peer_gbps = c->peer_gbps;
    o.trace = c->trace != NULL || c->timeline != NULL;
    o.profile = c->profile;
    o.nprofile = c->nprofile;
    o.progress = on_progress;
    o.progress_ctx = &ps;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    rc = run_vm(c, &in, b, &o, &vm, &rep);
    if (ps.shown)
        fputs("\r\033[K", stderr);
    /* a run refused before its first statement prints its error only (above, or as the
     * JSON document): no report, no trace, no timeline, and files already there stay */
    int ran = vm && rep && !rep->refused;
    if (c->trace && ran) {
        char *t = rplan_vm_trace_json(vm);
        if (!t)
            errno = ENOMEM;
        if (!t || write_atomic(c->trace, t, strlen(t)) != 0) {
            fprintf(stderr, "fheplan: cannot write the trace '%s': %s\n", c->trace,
                    strerror(errno));
            if (rc == EX_OK)
                rc = EX_FAIL;
        }
        free(t);
    }
    if (c->profile_out && ran) {
        char *t = rplan_profile_json(rep);
        if (!t)
            errno = ENOMEM;
        if (!t || write_atomic(c->profile_out, t, strlen(t)) != 0) {
            fprintf(stderr, "fheplan: cannot write the profile '%s': %s\n", c->profile_out,
                    strerror(errno));
            if (rc == EX_OK)
                rc = EX_FAIL;
        }
        free(t);
    }
    if (c->timeline && ran) {
        char *t = rplan_vm_trace_json(vm);
        if (!t || timeline_write(c->timeline, c->files[0], rep, t) != 0) {
            fprintf(stderr, "fheplan: cannot write the timeline '%s': %s\n", c->timeline,
                    strerror(t ? errno : ENOMEM));
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
    } else if (ran) {
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
        int ndev = 0;
        for (size_t i = 0; i < tt->npeaks; i++)
            ndev += tt->peaks[i].loc.kind == FHR_LOC_CUDA;
        if (ndev > 1) { /* the links run side by side: the transfer bound is the slower */
            char p1[32], p2[32], q1[32], q2[32];
            printf("links: PCIe %s at %.1f GB/s pinned = %s, peer %s at %.0f GB/s = %s\n",
                   fmt_bytes(rep->pcie_bytes, p1, sizeof p1), rep->pinned_gbps,
                   fmt_time(rep->pcie_s, q1, sizeof q1), fmt_bytes(rep->peer_bytes, p2, sizeof p2),
                   rep->peer_gbps, fmt_time(rep->peer_s, q2, sizeof q2));
        }
        if (rep->regen_s > 0) {
            char g[32], gt[32];
            printf("lower bound: max(compute %s + regenerating %s at %.0f GB/s = %s, transfer %s "
                   "at %.1f GB/s pinned = %s) = %s; measured %s, ratio %.2f\n",
                   fmt_time(tt->body_s, t, sizeof t), fmt_bytes(tt->regen_bytes, g, sizeof g),
                   rep->gen_gbps, fmt_time(rep->regen_s, gt, sizeof gt), fmt_bytes(pcie, a, sizeof a),
                   rep->pinned_gbps, fmt_time(rep->transfer_s, lb, sizeof lb),
                   fmt_time(rep->lower_bound_s, t2, sizeof t2), fmt_time(tt->time_s, t3, sizeof t3),
                   rep->ratio);
        } else
        printf("lower bound: max(compute %s, transfer %s at %.1f GB/s pinned = %s) = %s; "
               "measured %s, ratio %.2f\n",
               fmt_time(tt->body_s, t, sizeof t), fmt_bytes(pcie, a, sizeof a), rep->pinned_gbps,
               fmt_time(rep->transfer_s, lb, sizeof lb), fmt_time(rep->lower_bound_s, t2, sizeof t2),
               fmt_time(tt->time_s, t3, sizeof t3), rep->ratio);
        if (rep->link_windows) {
            char b1[32], b2[32], b3[32];
            double run_s = tt->time_s > 0 ? tt->time_s : 1;
            printf("link onto devices: busy %s, idle %s between transfers, of it %s (%.1f%% of "
                   "the run) while a later transfer's room was free\n",
                   fmt_time(rep->link_busy_s, b1, sizeof b1), fmt_time(rep->link_idle_s, b2, sizeof b2),
                   fmt_time(rep->link_ready_idle_s, b3, sizeof b3),
                   100.0 * rep->link_ready_idle_s / run_s);
        }
        uint64_t nw = 0;
        for (int w = 0; w < RPLAN_WAITS; w++)
            nw += rep->host_waits[w];
        if (nw) {
            static const char *const why[RPLAN_WAITS] = {"the prefetch bound", "MIN's victim",
                                                         "room held by bodies",
                                                         "settled copies evicted"};
            printf("host waits for bodies in flight:");
            const char *sep = " ";
            for (int w = 0; w < RPLAN_WAITS; w++)
                if (rep->host_waits[w]) {
                    char tw[32];
                    printf("%s%llu for %s (%s)", sep, (unsigned long long)rep->host_waits[w],
                           why[w], fmt_time(rep->host_wait_s[w], tw, sizeof tw));
                    sep = ", ";
                }
            printf("\n");
        }
        if (c->objective == RPLAN_OBJECTIVE_AUTO && rep->auto_bytes_s > 0) {
            char tb[32], tm[32];
            printf("objective auto: %s (modelled: bytes %s, time %s)\n",
                   rep->objective == RPLAN_OBJECTIVE_TIME ? "time" : "bytes",
                   fmt_time(rep->auto_bytes_s, tb, sizeof tb), fmt_time(rep->auto_time_s, tm, sizeof tm));
        }
        printf("%s\n", rep->ok ? "ok" : "FAILED");
    }
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
