/* examples/cheddar/boot.c — Cheddar's CKKS bootstrapping run by fheplan's VM, its keys (and
 * the linear transforms' plaintext diagonals) streamed from pinned host memory under a
 * device budget.
 *
 *   cheddar-boot PARAM.json OUTDIR [--fheplan PATH] [--batches 1,8] [--budgets 100,50,25]
 *                [--batches-per-run N] [--reps N] [--modes keys,all] [--keys whole,seeded]
 *                [--objectives bytes,time,auto] [--trace DIR]
 *
 * Cheddar generates every key of one bootstrap once (its own key generation, on the host).
 * For each batch size B the driver first runs Cheddar's own Boot on B inputs with every key
 * resident (the reference, and its decryption error), then the same bootstrap phase by phase
 * (each phase for all B ciphertexts before the next; adapter.h lists the phases), still
 * resident: the time a streamed batch is measured against. Then it exports the keys to
 * pinned memory and frees Cheddar's device copies, and for each mode (keys managed with the
 * plaintexts resident; then keys and plaintexts both managed) and each budget (a share of
 * the managed bytes at cuda:0) it writes the plan of N batches (Cheddar's phase lists, each
 * phase a request that requires its keys and plaintexts), has `fheplan check` predict it,
 * and runs it with the VM embedded here: the keys and plaintexts are engine values loaded
 * from the pinned exports, the phases are kernels bound to the leased copies, and the body
 * stream is Cheddar's (the legacy default stream). Every run is compared with the reference
 * word for word, its bytes with check's, its device peak with the budget. The table goes to
 * standard output and OUTDIR/results.json. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "adapter.h"
#include "fheplan/cuda.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

#define MAX_LIST 8
#define MAX_BATCH 64

static char msg[1024];

static void die(const char *what)
{
    fprintf(stderr, "cheddar-boot: %s: %s\n", what, msg);
    exit(2);
}

static void fhr_ok(fhr_status st, const fhr_error *e, const char *what)
{
    if (st != FHR_OK) {
        fprintf(stderr, "cheddar-boot: %s: %s\n", what, e ? e->message : fhr_status_name(st));
        exit(2);
    }
}

static int parse_list(const char *s, int *out, int max, const char *opt)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v <= 0 || v > 100000 || n == max || (*end && *end != ',')) {
            fprintf(stderr, "cheddar-boot: %s: '%s' is not a list of up to %d positive "
                            "integers\n", opt, s, max);
            exit(2);
        }
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* ---- the engine's side of the VM ------------------------------------------------------- */

typedef struct drv {
    ch_engine *e;
    fhr_backend *b;
    int B;
} drv;

static fhr_status set_err(fhr_error *err, const char *what)
{
    if (err) {
        err->status = FHR_E_BACKEND;
        snprintf(err->message, sizeof err->message, "%.60s: %.400s", what, msg);
    }
    return FHR_E_BACKEND;
}

/* The loaders of `engine.key(k)` and `engine.pt(p)`: the size probe, then each new copy
 * from the pinned export, on the stream fheplan gives (or at once without one). */
static fhr_status load(void *ctx, const rplan_load *ld, fhr_error *err, int pt)
{
    drv *d = ctx;
    int i = (int)ld->arg;
    int n = pt ? ch_npts(d->e) : ch_nkeys(d->e);
    if (ld->arg >= (uint64_t)n) {
        snprintf(msg, sizeof msg, "%s %llu: the engine has %d", pt ? "plaintext" : "key",
                 (unsigned long long)ld->arg, n);
        return set_err(err, ld->info ? ld->info->name : "load");
    }
    uint64_t have = pt ? ch_pt(d->e, i)->bytes : ch_key(d->e, i)->bytes;
    if (!ld->fields) { /* the probe: a seeded key supplies its stored halves only */
        int parts[CH_MAX_PARTS];
        int ns = !pt && ld->info && ld->info->seeded
                     ? ch_seeded_parts(d->e, i, parts, CH_MAX_PARTS) : 0;
        *ld->supplied = have - (uint64_t)(ns > 0 ? ns : 0) * (pt ? 0 : ch_key(d->e, i)->part_bytes);
        return FHR_OK;
    }
    cudaStream_t s = 0;
    int dev = 0;
    if (ld->stream) {
        fhr_error e2;
        fhr_error_init(&e2);
        if (fhr_stream_cuda(d->b, ld->stream, &s, &dev, &e2) != FHR_OK) {
            snprintf(msg, sizeof msg, "%s", e2.message);
            return set_err(err, ld->info->name);
        }
    }
    int rc = 0;
    if (pt || ld->nbytes == have) { /* the whole value: one copy of the export */
        rc = pt ? ch_load_pt(d->e, i, ld->fields[0], ld->nbytes, (void *)s, msg, sizeof msg)
                : ch_load_key(d->e, i, ld->fields[0], ld->nbytes, (void *)s, msg, sizeof msg);
    } else { /* a seeded key: only its stored halves, each from its place in the export */
        const ch_key_info *ki = ch_key(d->e, i);
        const char *host = ch_key_host(d->e, i);
        for (size_t f = 0; f < ld->nfields && !rc; f++) {
            const char *nm = ld->field_names[f];
            char *end;
            long part = strtol(nm + 1, &end, 10);
            if ((nm[0] != 'a' && nm[0] != 'b') || *end || part < 0 || part >= ki->beta ||
                ld->field_nbytes[f] != ki->part_bytes || !host) {
                snprintf(msg, sizeof msg, "field %s of %llu bytes is no half of key %s (%d parts "
                         "of %llu bytes)", nm, (unsigned long long)ld->field_nbytes[f], ki->name,
                         ki->beta, (unsigned long long)ki->part_bytes);
                return set_err(err, ld->info->name);
            }
            const char *src = host + (2 * part + (nm[0] == 'a')) * ki->part_bytes;
            if (ld->stream)
                rc = cudaMemcpyAsync(ld->fields[f], src, ki->part_bytes, cudaMemcpyDefault, s) !=
                     cudaSuccess;
            else
                memcpy(ld->fields[f], src, ki->part_bytes);
            if (rc)
                snprintf(msg, sizeof msg, "%s", cudaGetErrorString(cudaGetLastError()));
        }
    }
    if (rc == 0 && !ld->stream && ld->device_memory && cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(msg, sizeof msg, "synchronising the copy");
        rc = -1;
    }
    return rc ? set_err(err, ld->info->name) : FHR_OK;
}

/* The generator `ch.uniform` of the seeded plans: the seed is 64 * key + k for the key's
 * k-th regenerable a half (the plan declares the value's seed 64 * key, and fheplan adds
 * k for its k-th seeded field). */
static fhr_status gen_uniform(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *st,
                              void *dst, size_t nbytes, const void *seed, size_t seed_len,
                              fhr_error *err)
{
    drv *d = ctx;
    (void)at;
    uint64_t v = 0;
    for (size_t i = seed_len < 8 ? seed_len : 8; i-- > 0;)
        v = v << 8 | ((const unsigned char *)seed)[i];
    int k = (int)(v / 64), nth = (int)(v % 64), parts[CH_MAX_PARTS];
    int np = seed_len == 8 && k < ch_nkeys(d->e) ? ch_seeded_parts(d->e, k, parts, CH_MAX_PARTS)
                                                 : 0;
    if (nth >= np) {
        snprintf(msg, sizeof msg, "seed %llu is not 64 * key + a regenerable half",
                 (unsigned long long)v);
        return set_err(err, "ch.uniform");
    }
    cudaStream_t s = 0;
    int dev = 0;
    if (st) {
        fhr_status x = fhr_stream_cuda(b, st, &s, &dev, err);
        if (x != FHR_OK)
            return x;
    }
    if (ch_sample_a(d->e, k, parts[nth], dst, nbytes, (void *)s, msg, sizeof msg))
        return set_err(err, "ch.uniform");
    if (!st && cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(msg, sizeof msg, "the sampler: %s", cudaGetErrorString(cudaGetLastError()));
        return set_err(err, "ch.uniform");
    }
    return FHR_OK;
}

static fhr_status load_key(void *ctx, const rplan_load *ld, fhr_error *err)
{
    return load(ctx, ld, err, 0);
}

static fhr_status load_pt(void *ctx, const rplan_load *ld, fhr_error *err)
{
    return load(ctx, ld, err, 1);
}

/* The kernel of every phase: its name is "ch." and the phase's; its value arguments are
 * the phase's keys and plaintexts (each found by its loader and argument), its last
 * argument the batch. */
static fhr_status k_phase(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    drv *d = ctx;
    const char *name = c->name + 3;
    int ph = -1;
    for (int i = 0; i < ch_nphases(d->e); i++)
        if (!strcmp(ch_phase(d->e, i)->name, name))
            ph = i;
    if (ph < 0) {
        snprintf(msg, sizeof msg, "no phase named %s", name);
        return set_err(err, c->name);
    }
    const ch_phase_info *p = ch_phase(d->e, ph);
    void *kp[64] = {0}, *pp[1024] = {0};
    if (p->nkeys > 64) {
        snprintf(msg, sizeof msg, "phase %s reads %d keys", name, p->nkeys);
        return set_err(err, c->name);
    }
    int B = -1;
    for (size_t a = 0; a < c->nargs; a++)
        if (c->args[a].kind == RPLAN_ARG_INT)
            B = (int)c->args[a].imm;
    for (size_t v = 0; v < c->nvalues; v++) {
        const rplan_value_info *in = c->infos[v];
        int is_pt = in->loader && !strcmp(in->loader, "pt");
        int is_key = in->loader && !strcmp(in->loader, "key");
        const int *list = is_pt ? p->pts : p->keys;
        int nl = is_pt ? p->npts : p->nkeys, at = -1;
        for (int j = 0; (is_pt || is_key) && j < nl; j++)
            if ((uint64_t)list[j] == in->loader_arg)
                at = j;
        void *ptr = NULL;
        size_t nb = 0;
        if (at < 0 || fhr_value_field_at(c->values[v], 0, &ptr, &nb) != FHR_OK) {
            snprintf(msg, sizeof msg, "value %s is not one phase %s reads", in->name, name);
            return set_err(err, c->name);
        }
        if (is_key) {
            kp[at] = ptr;
            continue;
        }
        /* the transform's diagonals, back to back in the value's one field */
        const ch_pt_info *g = ch_pt(d->e, list[at]);
        if (nb != g->bytes || g->ndiag > 1024) {
            snprintf(msg, sizeof msg, "value %s holds %zu bytes, not %d diagonals of %llu",
                     in->name, nb, g->ndiag, (unsigned long long)g->diag_bytes);
            return set_err(err, c->name);
        }
        for (int f = 0; f < g->ndiag; f++)
            pp[f] = (char *)ptr + (size_t)f * g->diag_bytes;
    }
    if (ch_run_phase(d->e, ph, B, kp, pp, msg, sizeof msg))
        return set_err(err, c->name);
    return FHR_OK;
}

/* ---- the plan ---------------------------------------------------------------------------- */

static uint64_t managed_bytes(ch_engine *e, int with_pts)
{
    uint64_t m = 0;
    for (int k = 0; k < ch_nkeys(e); k++)
        m += ch_key(e, k)->bytes;
    for (int p = 0; with_pts && p < ch_npts(e); p++)
        m += ch_pt(e, p)->bytes;
    return m;
}

/* The largest set one phase reads at once: no budget below it is feasible. */
static uint64_t widest_phase(ch_engine *e, int with_pts)
{
    uint64_t w = 0;
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        const ch_phase_info *p = ch_phase(e, ph);
        uint64_t s = 0;
        for (int i = 0; i < p->nkeys; i++)
            s += ch_key(e, p->keys[i])->bytes;
        for (int i = 0; with_pts && i < p->npts; i++)
            s += ch_pt(e, p->pts[i])->bytes;
        if (s > w)
            w = s;
    }
    return w;
}

static int write_plan(const char *path, ch_engine *e, int B, int with_pts, int seeded,
                      uint64_t budget, int batches, const double *phase_ms, const char *param)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const char *base = strrchr(param, '/') ? strrchr(param, '/') + 1 : param;
    fprintf(f, "# Cheddar's CKKS bootstrapping (%s, full slots), %d batch%s of %d ciphertexts\n"
               "# bootstrapped phase by phase: each request is one phase of Cheddar's Boot for\n"
               "# the whole batch (a linear transform's baby steps, or one of its giant steps),\n"
               "# requiring the keys%s it reads. Generated by\n"
               "# examples/cheddar/boot.c from Cheddar's own phase lists; kernel costs are the\n"
               "# phases' times with every key resident, measured on an H200.%s\n"
               "rplan 1\n\nbudget cuda:0 %llu B\n\n",
            base, batches, batches > 1 ? "es" : "", B,
            with_pts ? " and plaintext diagonals" : "",
            seeded ? "\n# Seeded keys: only the b halves cross PCIe; the device regenerates each\n"
                     "# part's a half with the adapter's sampler (ch.uniform, seed 64 * key + k\n"
                     "# for the key's k-th seeded half)." : "",
            (unsigned long long)budget);
    for (int k = 0; k < ch_nkeys(e); k++) {
        const ch_key_info *ki = ch_key(e, k);
        fprintf(f, "value k_%s = %llu B replicable source engine.key(%d) fields(", ki->name,
                (unsigned long long)ki->bytes, k);
        int parts[CH_MAX_PARTS], np = seeded ? ch_seeded_parts(e, k, parts, CH_MAX_PARTS) : 0;
        for (int i = 0; i < ki->beta; i++) {
            int sd = 0;
            for (int j = 0; j < np; j++)
                sd |= parts[j] == i;
            fprintf(f, "%sb%d, %sa%d", i ? ", " : "", i, sd ? "seeded " : "", i);
        }
        if (np > 0)
            fprintf(f, ") seeded ch.uniform(%d)\n", 64 * k);
        else
            fprintf(f, ")\n");
    }
    if (with_pts)
        for (int p = 0; p < ch_npts(e); p++) {
            const ch_pt_info *pi = ch_pt(e, p);
            fprintf(f, "value pt_%s = %llu B replicable source engine.pt(%d)  # %d diagonals\n",
                    ch_phase(e, pi->phase)->name, (unsigned long long)pi->bytes, p, pi->ndiag);
        }
    fprintf(f, "\n");
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        long us = (long)(phase_ms[ph] * 1e3 + 0.5);
        fprintf(f, "kernel ch.%s cost %ld us\n", ch_phase(e, ph)->name, us > 0 ? us : 1);
    }
    fprintf(f, "\npolicy keys = lookahead(cuda:0 -> host)\n\n");
    for (int r = 0; r < batches; r++) {
        fprintf(f, "stage \"batch%d\" {\n", r);
        for (int ph = 0; ph < ch_nphases(e); ph++) {
            const ch_phase_info *p = ch_phase(e, ph);
            fprintf(f, "  request \"%s\" using keys {\n", p->name);
            for (int i = 0; i < p->nkeys; i++)
                fprintf(f, "    require k_%s @ cuda:0\n", ch_key(e, p->keys[i])->name);
            for (int i = 0; with_pts && i < p->npts; i++)
                fprintf(f, "    require pt_%s @ cuda:0\n", p->name);
            fprintf(f, "    body { run ch.%s(", p->name);
            for (int i = 0; i < p->nkeys; i++)
                fprintf(f, "k_%s, ", ch_key(e, p->keys[i])->name);
            for (int i = 0; with_pts && i < p->npts; i++)
                fprintf(f, "pt_%s, ", p->name);
            fprintf(f, "%d) }\n  }\n", B);
        }
        fprintf(f, "}\n");
    }
    return fclose(f);
}

/* `fheplan check --json` of the plan file: bytes moved, feasibility, predicted time. The
 * bandwidth goes over exactly as the VM gets it (%.17g): the schedule follows the model's
 * timeline where it double-buffers, so a rounded figure can decide differently (at 50%
 * with whole keys and diagonals, 55.381 against 55.38 GB/s moved 0.1 GB more). */
typedef struct check_pred {
    int ok, feasible;
    double moved, regen, predicted_s;
} check_pred;

static const char *const objective_names[] = {"bytes", "time", "auto"};

static check_pred check_plan(const char *fheplan, const char *path, double gbps, int objective)
{
    check_pred r = {0, 0, -1, -1, -1};
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' check --json --pinned-gbps %.17g --objective %s '%s'",
             fheplan, gbps, objective_names[objective], path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return r;
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    pclose(p);
    if (!buf)
        return r;
    buf[len] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    const cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    const cJSON *b = cJSON_GetObjectItem(f0, "bytes_moved");
    const cJSON *t = cJSON_GetObjectItem(f0, "predicted_s");
    const cJSON *g = cJSON_GetObjectItem(f0, "bytes_regenerated");
    const cJSON *ok = cJSON_GetObjectItem(f0, "feasible");
    if (f0) {
        r.ok = 1;
        r.feasible = cJSON_IsTrue(ok);
        r.moved = cJSON_IsNumber(b) ? b->valuedouble : -1;
        r.predicted_s = cJSON_IsNumber(t) ? t->valuedouble : -1;
        r.regen = cJSON_IsNumber(g) ? g->valuedouble : -1;
    }
    cJSON_Delete(j);
    return r;
}

/* ---- one streamed run ---------------------------------------------------------------------- */

typedef struct run_res {
    int ok, identical;
    double batch_ms;          /* median over the batches after the first, device time */
    double batch_host_ms;     /* the same from the host's opening of each batch */
    double first_ms;
    double total_s, ratio, lower_bound_s;
    uint64_t moved, regen, loads, evictions, waits;
    uint64_t peak;            /* fheplan's at cuda:0 */
    uint64_t pool_peak;       /* Cheddar's own pool, outstanding bytes */
    double link_busy_ms, link_idle_ms;
    double snr, max_err;
    char error[700];
} run_res;

/* --trace DIR: each streamed run's timeline (Chrome trace JSON) is written there. */
static const char *trace_dir;

static void write_trace(const rplan_vm *vm, const char *plan, int objective)
{
    const char *base = strrchr(plan, '/');
    base = base ? base + 1 : plan;
    char path[4096];
    snprintf(path, sizeof path, "%s/%.*s-%s.json", trace_dir,
             (int)(strlen(base) > 6 ? strlen(base) - 6 : strlen(base)), base,
             objective_names[objective]);
    char *j = rplan_vm_trace_json(vm);
    FILE *f = j ? fopen(path, "w") : NULL;
    if (f) {
        fputs(j, f);
        fclose(f);
    } else {
        fprintf(stderr, "cheddar-boot: no trace written to %s\n", path);
    }
    free(j);
}

static void run_streamed(ch_engine *e, const char *path, int B, double gbps, int objective,
                         run_res *out)
{
    memset(out, 0, sizeof *out);
    fhr_error err;
    fhr_error_init(&err);
    rplan_program *prog = NULL;
    rplan_diags *dg = rplan_diags_new();
    if (rplan_compile_file(path, NULL, &prog, dg) != FHR_OK) {
        rplan_diags_render(dg, stderr, 0);
        rplan_diags_free(dg);
        snprintf(out->error, sizeof out->error, "%.600s does not compile", path);
        return;
    }
    rplan_diags_free(dg);
    /* a backend per run: its pool's marks are this run's alone */
    fhr_backend *b = NULL;
    fhr_ok(fhr_backend_cuda_create(&b, &err), &err, "cuda backend");
    fhr_stream *view = NULL; /* Cheddar's stream: the legacy default stream */
    fhr_ok(fhr_stream_wrap_cuda(b, 0, cudaStreamLegacy, &view, &err), &err, "wrap");
    drv d = {e, b, B};
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.pinned_gbps = gbps;
    o.objective = objective;
    o.trace = trace_dir != NULL;
    rplan_vm *vm = NULL;
    fhr_ok(rplan_vm_create(prog, b, &o, &vm, &err), &err, "vm");
    fhr_ok(rplan_loader_register(vm, "key", load_key, &d, &err), &err, "loader");
    fhr_ok(rplan_loader_register(vm, "pt", load_pt, &d, &err), &err, "loader");
    fhr_ok(rplan_generator_register(vm, "ch.uniform", gen_uniform, &d, &err), &err, "generator");
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        char kn[32];
        snprintf(kn, sizeof kn, "ch.%s", ch_phase(e, ph)->name);
        fhr_ok(rplan_kernel_register(vm, kn, k_phase, &d, &err), &err, "kernel");
    }
    fhr_ok(rplan_vm_body_stream(vm, fhr_loc_cuda(0), view, &err), &err, "body stream");
    if (ch_batch_begin(e, B, msg, sizeof msg))
        die("batch");
    ch_pool_reset_peak(e);
    rplan_vm_report *rep = NULL;
    fhr_status st = rplan_vm_run(vm, &rep, &err);
    if (st != FHR_OK || !rep || !rep->ok) {
        snprintf(out->error, sizeof out->error, "the plan failed at %u:%u: %s",
                 rep ? rep->line : 0, rep ? rep->col : 0, rep ? rep->message : err.message);
    } else {
        out->ok = 1;
        /* A batch's time is the device's: from the end of the previous batch's last work
         * to the end of its own (the first from the run's start), as the resident batch
         * is timed by events on the device. The stage's own time_s counts from the host's
         * opening, however far the host ran ahead of the device; kept beside it. */
        double bt[256], ht[256], prev_end = 0;
        int nb = 0;
        for (size_t i = 0; i < rep->nstages && nb < 256; i++)
            if (!strncmp(rep->stages[i].name, "batch", 5)) {
                const rplan_stage_report *sr = &rep->stages[i];
                if (nb == 0)
                    out->first_ms = sr->end_s * 1e3;
                bt[nb] = (sr->end_s - prev_end) * 1e3;
                ht[nb++] = sr->time_s * 1e3;
                prev_end = sr->end_s;
            }
        out->batch_ms = nb > 1 ? median(bt + 1, nb - 1) : (nb ? bt[0] : 0);
        out->batch_host_ms = nb > 1 ? median(ht + 1, nb - 1) : (nb ? ht[0] : 0);
        out->total_s = rep->total.time_s;
        out->ratio = rep->ratio;
        out->lower_bound_s = rep->lower_bound_s;
        out->moved = rep->total.load_bytes;
        for (int dd = 0; dd < FHR_DIR_NONE; dd++)
            out->moved += rep->total.bytes[dd];
        out->regen = rep->total.regen_bytes;
        out->loads = rep->total.loads;
        out->evictions = rep->total.evictions;
        for (int w = 0; w < RPLAN_WAITS; w++)
            out->waits += rep->host_waits[w];
        for (size_t i = 0; i < rep->total.npeaks; i++)
            if (fhr_loc_equal(rep->total.peaks[i].loc, fhr_loc_cuda(0)))
                out->peak = rep->total.peaks[i].peak_bytes;
        out->link_busy_ms = rep->link_busy_s * 1e3;
        out->link_idle_ms = rep->link_idle_s * 1e3;
    }
    if (trace_dir && out->ok)
        write_trace(vm, path, objective);
    uint64_t now;
    ch_pool_marks(e, &now, &out->pool_peak);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_stream_destroy(b, view);
    fhr_backend_destroy(b);
    rplan_program_free(prog);
    if (out->ok) {
        if (ch_batch_identical(e, B, &out->identical, msg, sizeof msg) ||
            ch_result_error(e, &out->snr, &out->max_err, msg, sizeof msg))
            die("checking the results");
    }
}

/* Pinned host to device bandwidth: the median of 5 copies of 256 MiB (bytes/s). */
static double pinned_bandwidth(void)
{
    size_t n = (size_t)256 << 20;
    void *h = NULL, *dv = NULL;
    if (cudaHostAlloc(&h, n, cudaHostAllocDefault) != cudaSuccess || cudaMalloc(&dv, n) != cudaSuccess)
        return 0;
    memset(h, 1, n);
    cudaStream_t s;
    cudaEvent_t a, z;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEventCreate(&a);
    cudaEventCreate(&z);
    double v[5];
    for (int i = 0; i < 5; i++) {
        float ms = 0;
        cudaEventRecord(a, s);
        cudaMemcpyAsync(dv, h, n, cudaMemcpyHostToDevice, s);
        cudaEventRecord(z, s);
        cudaEventSynchronize(z);
        cudaEventElapsedTime(&ms, a, z);
        v[i] = (double)n / (ms * 1e-3);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    cudaStreamDestroy(s);
    cudaFree(dv);
    cudaFreeHost(h);
    return median(v, 5);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The command line. */
typedef struct boot_opts {
    const char *param, *outdir, *fheplan;
    int batches[MAX_LIST], nbatches;
    int budgets[MAX_LIST], nbudgets;
    int per_run, reps, modes; /* modes: bit 0 keys, bit 1 keys and plaintexts */
    int keysets;              /* bit 0: whole keys, bit 1: seeded keys */
    int objectives;           /* bit k: rplan_vm_objective k */
} boot_opts;

/* A list option's value into a bit set: bit k when names[k] appears; 0 when none does. */
static int name_bits(const char *v, const char *const *names, int n)
{
    int bits = 0;
    for (int k = 0; k < n; k++)
        bits |= strstr(v, names[k]) ? 1 << k : 0;
    return bits;
}

/* One option with its value: 0, or 2 with the reason printed. */
static int parse_option(boot_opts *o, const char *a, const char *v)
{
    static const char *const keys[] = {"whole", "seeded"}, *const modes[] = {"keys", "all"};
    if (!strcmp(a, "--fheplan")) {
        o->fheplan = v;
    } else if (!strcmp(a, "--trace")) {
        trace_dir = v;
        if (mkdir(v, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cheddar-boot: --trace: cannot make %s: %s\n", v, strerror(errno));
            return 2;
        }
    } else if (!strcmp(a, "--batches")) {
        o->nbatches = parse_list(v, o->batches, MAX_LIST, a);
    } else if (!strcmp(a, "--budgets")) {
        o->nbudgets = parse_list(v, o->budgets, MAX_LIST, a);
    } else if (!strcmp(a, "--batches-per-run") || !strcmp(a, "--reps")) {
        int x[1];
        parse_list(v, x, 1, a);
        if (!strcmp(a, "--reps"))
            o->reps = x[0];
        else
            o->per_run = x[0] < 2 ? 2 : x[0];
    } else if (!strcmp(a, "--objectives")) {
        if (!(o->objectives = name_bits(v, objective_names, 3))) {
            fprintf(stderr, "cheddar-boot: --objectives: a list of bytes, time, auto\n");
            return 2;
        }
    } else if (!strcmp(a, "--keys")) {
        if (!(o->keysets = name_bits(v, keys, 2))) {
            fprintf(stderr, "cheddar-boot: --keys: whole, seeded or whole,seeded\n");
            return 2;
        }
    } else if (!strcmp(a, "--modes")) {
        if (!(o->modes = name_bits(v, modes, 2))) {
            fprintf(stderr, "cheddar-boot: --modes: keys, all or keys,all\n");
            return 2;
        }
    } else {
        fprintf(stderr, "cheddar-boot: unknown option %s\n", a);
        return 2;
    }
    return 0;
}

/* 0, or 2 with the usage or the reason printed; *bmax: the largest batch. */
static int parse_args(int argc, char **argv, boot_opts *o, int *bmax)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cheddar-boot PARAM.json OUTDIR [--fheplan PATH] [--batches 1,8] "
                        "[--budgets 100,50,25] [--batches-per-run N] [--reps N] "
                        "[--modes keys,all] [--keys whole,seeded] [--objectives bytes,time,auto] "
                        "[--trace DIR]\n");
        return 2;
    }
    *o = (boot_opts){argv[1], argv[2], "fheplan", {1, 8}, 2, {100, 50, 25}, 3, 4, 5, 3, 3, 1};
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "cheddar-boot: %s needs a value\n", argv[i]);
            return 2;
        }
        if (parse_option(o, argv[i], argv[i + 1]) != 0)
            return 2;
    }
    *bmax = 1;
    for (int i = 0; i < o->nbatches; i++) {
        if (o->batches[i] > MAX_BATCH) {
            fprintf(stderr, "cheddar-boot: --batches: at most %d\n", MAX_BATCH);
            return 2;
        }
        *bmax = o->batches[i] > *bmax ? o->batches[i] : *bmax;
    }
    for (int i = 0; i < o->nbudgets; i++)
        if (o->budgets[i] > 100) {
            fprintf(stderr, "cheddar-boot: --budgets: percentages of 1 to 100\n");
            return 2;
        }
    return 0;
}

/* What the bootstrap holds: keys, diagonals and every phase's share. */
static void describe(ch_engine *e, const char *param, double t0)
{
    int ndiag = 0;
    for (int g = 0; g < ch_npts(e); g++)
        ndiag += ch_pt(e, g)->ndiag;
    printf("Cheddar ready in %.1f s (%s): %d keys, %d plaintext diagonals in %d transforms, "
           "%d phases\n", now_s() - t0, param, ch_nkeys(e), ndiag, ch_npts(e), ch_nphases(e));
    uint64_t kb = managed_bytes(e, 0), ab = managed_bytes(e, 1);
    printf("  keys %.3f GiB, plaintexts %.3f GiB; the widest phase reads %.1f MiB of keys, "
           "%.1f MiB with its plaintexts\n", kb / 1073741824.0, (ab - kb) / 1073741824.0,
           widest_phase(e, 0) / 1048576.0, widest_phase(e, 1) / 1048576.0);
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        const ch_phase_info *p = ch_phase(e, ph);
        uint64_t k = 0, pt = 0;
        for (int i = 0; i < p->nkeys; i++)
            k += ch_key(e, p->keys[i])->bytes;
        for (int i = 0; i < p->npts; i++)
            pt += ch_pt(e, p->pts[i])->bytes;
        printf("  phase %-8s %2d keys %7.1f MiB, %3d plaintext diagonals %7.1f MiB\n", p->name,
               p->nkeys, k / 1048576.0, p->npts ? ch_pt(e, p->pts[0])->ndiag : 0,
               pt / 1048576.0);
    }
}

/* Batch B's references: Cheddar's Boot and the resident phase-by-phase batch (medians of
 * the repetitions); *res_ms and res_phase (per ciphertext) for the streamed runs. 1 when
 * the phase-by-phase batch is bit-identical to Boot. */
static int resident_batch(ch_engine *e, int B, int reps, double *res_ms, double *res_phase,
                          cJSON *jres)
{
    double boot_v[16], bat_v[16], ph_v[CH_MAX_PHASES][16];
    int nr = reps > 16 ? 16 : reps, same_all = 1;
    for (int r = 0; r < nr; r++)
        if (ch_reference(e, B, &boot_v[r], msg, sizeof msg))
            die("Cheddar's Boot");
    double snr, mx;
    if (ch_result_error(e, &snr, &mx, msg, sizeof msg))
        die("decrypting");
    for (int r = 0; r < nr; r++) {
        double phm[CH_MAX_PHASES];
        int same = 0;
        if (ch_resident_batch(e, B, &bat_v[r], phm, &same, msg, sizeof msg))
            die("the resident batch");
        same_all &= same;
        for (int ph = 0; ph < ch_nphases(e); ph++)
            ph_v[ph][r] = phm[ph];
    }
    double boot_ms = median(boot_v, nr);
    *res_ms = median(bat_v, nr);
    for (int ph = 0; ph < ch_nphases(e); ph++)
        res_phase[ph] = median(ph_v[ph], nr) / B;
    printf("B=%d resident: Cheddar's Boot %.2f ms for the batch (%.2f ms each), SNR %.3g, "
           "max error %.3g; phase by phase %.2f ms (%.3fx), bit-identical to Boot: %s\n", B,
           boot_ms, boot_ms / B, snr, mx, *res_ms, *res_ms / boot_ms, same_all ? "PASS" : "FAIL");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "batch", B);
    cJSON_AddNumberToObject(o, "boot_ms", boot_ms);
    cJSON_AddNumberToObject(o, "phase_by_phase_ms", *res_ms);
    cJSON_AddNumberToObject(o, "snr", snr);
    cJSON_AddNumberToObject(o, "max_err", mx);
    cJSON_AddBoolToObject(o, "bit_identical", same_all);
    cJSON *pa = cJSON_AddArrayToObject(o, "phase_ms_per_ct");
    for (int ph = 0; ph < ch_nphases(e); ph++)
        cJSON_AddItemToArray(pa, cJSON_CreateNumber(res_phase[ph]));
    cJSON_AddItemToArray(jres, o);
    return same_all;
}

/* One streamed configuration: its plan, check's prediction and the run. */
typedef struct cell {
    int with_pts, seeded, obj, B, budget_pct;
    uint64_t budget;
    double res_ms;
    check_pred cp;
    run_res rr;
} cell;

/* A cell's line (and its details line) in the table. ok: its verdict. */
static void print_cell(const cell *c, double bound, int ok)
{
    const run_res *rr = &c->rr;
    const char *mn = c->with_pts ? "all" : "keys", *kn = c->seeded ? "seeded" : "whole";
    const char *on = objective_names[c->obj];
    if (!rr->ok) {
        printf("%-5s %-6s %-5s %-4d %5d%%  %s\n", mn, kn, on, c->B, c->budget_pct, rr->error);
        fflush(stdout);
        return;
    }
    printf("%-5s %-6s %-5s %-4d %5d%% %10.2f %8.3f %8.3f %12llu %12.0f %12llu "
           "%12.0f %5s %9.1f %9.1f %5s\n", mn, kn, on, c->B, c->budget_pct, rr->batch_ms,
           rr->batch_ms / c->res_ms, rr->batch_ms / bound, (unsigned long long)rr->moved,
           c->cp.moved, (unsigned long long)rr->regen, c->cp.regen, rr->identical ? "yes" : "NO",
           rr->peak / 1048576.0, rr->pool_peak / 1048576.0, ok ? "PASS" : "FAIL");
    printf("      first batch %.2f ms, batch from the host's opening %.2f ms; %llu loads, %llu evictions, %llu host "
           "waits; link busy %.1f ms, idle %.1f ms; run %.3f s, ratio %.3f to "
           "the VM's bound; SNR %.3g\n", rr->first_ms, rr->batch_host_ms,
           (unsigned long long)rr->loads, (unsigned long long)rr->evictions,
           (unsigned long long)rr->waits, rr->link_busy_ms, rr->link_idle_ms,
           rr->total_s, rr->ratio, rr->snr);
    fflush(stdout);
}

/* A cell's object in results.json. */
static void cell_json(const cell *c, double bound, cJSON *jruns)
{
    const run_res *rr = &c->rr;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "managed", c->with_pts ? "keys+plaintexts" : "keys");
    cJSON_AddStringToObject(o, "keys", c->seeded ? "seeded" : "whole");
    cJSON_AddStringToObject(o, "objective", objective_names[c->obj]);
    cJSON_AddNumberToObject(o, "batch", c->B);
    cJSON_AddNumberToObject(o, "budget_pct", c->budget_pct);
    cJSON_AddNumberToObject(o, "budget_bytes", (double)c->budget);
    cJSON_AddBoolToObject(o, "feasible", c->cp.feasible);
    cJSON_AddBoolToObject(o, "ran", rr->ok);
    if (!rr->ok)
        cJSON_AddStringToObject(o, "error", rr->error);
    cJSON_AddNumberToObject(o, "batch_ms", rr->batch_ms);
    cJSON_AddNumberToObject(o, "first_batch_ms", rr->first_ms);
    cJSON_AddNumberToObject(o, "batch_from_host_open_ms", rr->batch_host_ms);
    cJSON_AddNumberToObject(o, "resident_ms", c->res_ms);
    cJSON_AddNumberToObject(o, "vs_resident", rr->batch_ms / c->res_ms);
    cJSON_AddNumberToObject(o, "vs_bound", rr->ok ? rr->batch_ms / bound : 0);
    cJSON_AddNumberToObject(o, "bytes_moved", (double)rr->moved);
    cJSON_AddNumberToObject(o, "check_bytes", c->cp.moved);
    cJSON_AddNumberToObject(o, "bytes_regenerated", (double)rr->regen);
    cJSON_AddNumberToObject(o, "check_regenerated", c->cp.regen);
    cJSON_AddNumberToObject(o, "check_predicted_s", c->cp.predicted_s);
    cJSON_AddBoolToObject(o, "bit_identical", rr->identical);
    cJSON_AddNumberToObject(o, "snr", rr->snr);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)rr->peak);
    cJSON_AddNumberToObject(o, "cheddar_pool_peak_bytes", (double)rr->pool_peak);
    cJSON_AddNumberToObject(o, "loads", (double)rr->loads);
    cJSON_AddNumberToObject(o, "evictions", (double)rr->evictions);
    cJSON_AddNumberToObject(o, "host_waits", (double)rr->waits);
    cJSON_AddNumberToObject(o, "link_busy_ms", rr->link_busy_ms);
    cJSON_AddNumberToObject(o, "link_idle_ms", rr->link_idle_ms);
    cJSON_AddNumberToObject(o, "ratio_vm_bound", rr->ratio);
    cJSON_AddItemToArray(jruns, o);
}

/* Writes the cell's plan, has check predict it, runs it when feasible, reports it. 1 when
 * it passed or check found it infeasible; -1 when the plan cannot be written. */
static int run_cell(ch_engine *e, const boot_opts *o, cell *c, const double *phase_ms_b,
                    uint64_t widest, double gbps, cJSON *jruns)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plans/%s-%s-b%d-%d.rplan", o->outdir,
             c->with_pts ? "all" : "keys", c->seeded ? "seeded" : "whole", c->B, c->budget_pct);
    if (write_plan(path, e, c->B, c->with_pts, c->seeded, c->budget, o->per_run, phase_ms_b,
                   o->param)) {
        fprintf(stderr, "cheddar-boot: cannot write %s\n", path);
        return -1;
    }
    c->cp = check_plan(o->fheplan, path, gbps, c->obj);
    run_res *rr = &c->rr;
    memset(rr, 0, sizeof *rr);
    if (c->cp.feasible)
        run_streamed(e, path, c->B, gbps, c->obj, rr);
    else
        snprintf(rr->error, sizeof rr->error, "check: infeasible (the widest phase "
                 "reads %llu B, the budget is %llu B)",
                 (unsigned long long)widest, (unsigned long long)c->budget);
    /* the bound: max(compute, bytes / pinned bandwidth), per batch */
    double xfer_ms = rr->ok ? (double)rr->moved / o->per_run / (gbps * 1e9) * 1e3 : 0;
    double bound = c->res_ms > xfer_ms ? c->res_ms : xfer_ms;
    int bytes_ok = rr->ok && c->cp.moved >= 0 && (double)rr->moved == c->cp.moved &&
                   (double)rr->regen == c->cp.regen;
    int peak_ok = rr->ok && rr->peak <= c->budget;
    int ok = rr->ok && rr->identical && bytes_ok && peak_ok;
    print_cell(c, bound, ok);
    cell_json(c, bound, jruns);
    return ok || !c->cp.feasible;
}

/* Every streamed cell of one mode (keys, or keys and plaintexts): 0 on a failure, 1 when
 * all passed, -1 when a plan cannot be written. */
static int run_mode(ch_engine *e, const boot_opts *o, int with_pts, const double *res_ms,
                    double (*res_phase)[CH_MAX_PHASES], double gbps, cJSON *jruns)
{
    if (with_pts && ch_export_pts(e, msg, sizeof msg))
        die("exporting the plaintexts");
    uint64_t managed = managed_bytes(e, with_pts), widest = widest_phase(e, with_pts);
    int all_ok = 1;
    for (int bi = 0; bi < o->nbatches; bi++) {
        int B = o->batches[bi];
        double phase_ms_b[CH_MAX_PHASES];
        for (int ph = 0; ph < ch_nphases(e); ph++)
            phase_ms_b[ph] = res_phase[bi][ph] * B;
        for (int gi = 0; gi < o->nbudgets; gi++)
            for (int run = 0; run < 6; run++) {
                cell c;
                memset(&c, 0, sizeof c);
                c.with_pts = with_pts, c.seeded = run % 2, c.obj = run / 2, c.B = B;
                if (!(o->keysets & (1 << c.seeded)) || !(o->objectives & (1 << c.obj)))
                    continue;
                c.budget_pct = o->budgets[gi];
                c.budget = (managed * (uint64_t)o->budgets[gi] + 99) / 100;
                c.budget = (c.budget + 4095) / 4096 * 4096;
                c.res_ms = res_ms[bi];
                int ok = run_cell(e, o, &c, phase_ms_b, widest, gbps, jruns);
                if (ok < 0)
                    return -1;
                all_ok &= ok;
            }
    }
    return all_ok;
}

int main(int argc, char **argv)
{
    boot_opts o;
    int bmax = 1;
    if (parse_args(argc, argv, &o, &bmax) != 0)
        return 2;
    double t0 = now_s();
    ch_engine *e = NULL;
    if (ch_create(o.param, bmax, &e, msg, sizeof msg))
        die("Cheddar");
    describe(e, o.param, t0);
    double gbps = pinned_bandwidth() / 1e9;
    printf("pinned host to device: %.2f GB/s (median of 5 copies of 256 MiB)\n", gbps);

    char path[4096];
    snprintf(path, sizeof path, "%s/plans", o.outdir);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cheddar-boot: cannot make %s: %s\n", path, strerror(errno));
        return 2;
    }
    snprintf(path, sizeof path, "%s/results.json", o.outdir);
    FILE *js = fopen(path, "w");
    if (!js) {
        fprintf(stderr, "cheddar-boot: cannot write %s\n", path);
        return 2;
    }
    uint64_t kb = managed_bytes(e, 0), ab = managed_bytes(e, 1);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "param", o.param);
    cJSON_AddNumberToObject(root, "pinned_gbps", gbps);
    cJSON_AddNumberToObject(root, "key_bytes", (double)kb);
    cJSON_AddNumberToObject(root, "plaintext_bytes", (double)(ab - kb));
    cJSON *jres = cJSON_AddArrayToObject(root, "resident");
    cJSON *jruns = cJSON_AddArrayToObject(root, "runs");

    /* the references and the resident phase-by-phase batches */
    double res_ms[MAX_LIST], res_phase[MAX_LIST][CH_MAX_PHASES];
    int all_ok = 1;
    for (int bi = 0; bi < o.nbatches; bi++)
        all_ok &= resident_batch(e, o.batches[bi], o.reps, &res_ms[bi], res_phase[bi], jres);
    if (ch_export_keys(e, msg, sizeof msg))
        die("exporting the keys");
    uint64_t mism = 0, checked = 0;
    if (ch_verify_sampler(e, &mism, &checked, msg, sizeof msg))
        die("the sampler");
    printf("seeded halves: the sampler regenerates every regenerable a half: %llu of %llu words "
           "differ from the generated keys: %s\n", (unsigned long long)mism,
           (unsigned long long)checked, mism ? "FAIL" : "PASS");
    all_ok &= mism == 0;
    cJSON_AddNumberToObject(root, "sampler_mismatched_words", (double)mism);

    printf("\n%-5s %-6s %-5s %-4s %-6s %10s %8s %8s %12s %12s %12s %12s %5s %9s %9s %5s\n",
           "mode", "keys", "obj", "B", "budget", "batch ms", "vs res", "vs bound", "bytes",
           "check", "regen", "check", "same", "peak MiB", "pool MiB", "ok");
    for (int mode = 1; mode <= 2; mode++) {
        if (!(o.modes & mode))
            continue;
        int ok = run_mode(e, &o, mode == 2, res_ms, res_phase, gbps, jruns);
        if (ok < 0)
            return 2;
        all_ok &= ok;
    }
    cJSON_AddBoolToObject(root, "pass", all_ok);
    char *text = cJSON_Print(root);
    if (text) {
        fputs(text, js);
        fputc('\n', js);
        free(text);
    }
    cJSON_Delete(root);
    fclose(js);
    ch_destroy(e);
    printf("\ncheddar-boot: %s (results in %s/results.json)\n", all_ok ? "PASS" : "FAIL", o.outdir);
    return all_ok ? 0 : 1;
}
