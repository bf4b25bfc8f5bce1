/* examples/cheddar/boot.c — Cheddar's CKKS bootstrapping run by fheplan's VM, its keys (and
 * the linear transforms' plaintext diagonals) streamed from pinned host memory under a
 * device budget.
 *
 *   cheddar-boot PARAM.json OUTDIR [--fheplan PATH] [--batches 1,8]
 *                [--budgets 100,50,25,minks] [--batches-per-run N] [--reps N]
 *                [--modes keys,all] [--keys whole,seeded] [--limbs whole,level]
 *                [--objectives bytes,time,auto] [--trace DIR]
 *
 * Cheddar generates every key of one bootstrap once (its own key generation, on the host).
 * For each batch size B the driver first runs Cheddar's own Boot on B inputs with every key
 * resident (the reference, and its decryption error), then the same bootstrap phase by phase
 * (each phase for all B ciphertexts before the next; adapter.h lists the phases), still
 * resident: the time a streamed batch is measured against, and Cheddar's Boot with minimum
 * key switching (Min-KS), whose key bytes it reports. Then it exports the keys to pinned
 * memory and frees Cheddar's device copies, and for each mode (keys managed with the
 * plaintexts resident; then keys and plaintexts both managed), each budget (a share of the
 * managed bytes at cuda:0, or Min-KS's key bytes) and whole keys or keys cut into limbs
 * (each phase requiring only the limbs its level reads) it writes the plan of N batches
 * (Cheddar's phase lists, each phase a request that requires its keys and plaintexts), has
 * `fheplan check` predict it,
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
    } else { /* a seeded key's stored halves, or a partial copy's fields: each from its
              * half of the export, the q-limbs the field holds and the special limbs */
        const ch_key_info *ki = ch_key(d->e, i);
        for (size_t f = 0; f < ld->nfields && !rc; f++) {
            const char *nm = ld->field_names[f];
            char *end;
            long part = strtol(nm + 1, &end, 10);
            uint64_t fb = ld->field_nbytes[f];
            long held = fb % ki->limb_bytes ? -1 : (long)(fb / ki->limb_bytes) - ki->special;
            if ((nm[0] != 'a' && nm[0] != 'b') || *end || part < 0 || part >= ki->beta ||
                held < 1 || held > ki->q) {
                snprintf(msg, sizeof msg, "field %s of %llu bytes is no half of key %s (%d parts "
                         "of %d q-limbs and %d special limbs of %llu bytes)", nm,
                         (unsigned long long)fb, ki->name, ki->beta, ki->q, ki->special,
                         (unsigned long long)ki->limb_bytes);
                return set_err(err, ld->info->name);
            }
            rc = ch_load_key_field(d->e, i, 2 * (int)part + (nm[0] == 'a'), (int)held,
                                   ld->fields[f], ld->stream ? (void *)s : NULL, msg, sizeof msg);
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
 * k for its k-th seeded field). Bytes [offset, offset + nbytes) of that half: the whole
 * half (offset 0, its size), or a range of it, the offset counted in the full key's half,
 * so that a partial copy's limbs are generated with the full key's limb slots (offset /
 * limb bytes: q-limbs 0..q-1, then the special limbs). */
static fhr_status gen_half(drv *d, fhr_backend *b, fhr_stream *st, void *dst, size_t nbytes,
                           int whole, uint64_t offset, const void *seed, size_t seed_len,
                           fhr_error *err)
{
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
    if (whole ? ch_sample_a(d->e, k, parts[nth], dst, nbytes, (void *)s, msg, sizeof msg)
              : ch_sample_a_range(d->e, k, parts[nth], dst, nbytes, offset, (void *)s, msg,
                                  sizeof msg))
        return set_err(err, "ch.uniform");
    if (!st && cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(msg, sizeof msg, "the sampler: %s", cudaGetErrorString(cudaGetLastError()));
        return set_err(err, "ch.uniform");
    }
    return FHR_OK;
}

static fhr_status gen_uniform(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *st,
                              void *dst, size_t nbytes, const void *seed, size_t seed_len,
                              fhr_error *err)
{
    (void)at;
    return gen_half(ctx, b, st, dst, nbytes, 1, 0, seed, seed_len, err);
}

static fhr_status gen_uniform_range(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *st,
                                    void *dst, size_t nbytes, uint64_t offset, const void *seed,
                                    size_t seed_len, fhr_error *err)
{
    (void)at;
    return gen_half(ctx, b, st, dst, nbytes, 0, offset, seed, seed_len, err);
}

static fhr_status load_key(void *ctx, const rplan_load *ld, fhr_error *err)
{
    return load(ctx, ld, err, 0);
}

static fhr_status load_pt(void *ctx, const rplan_load *ld, fhr_error *err)
{
    return load(ctx, ld, err, 1);
}

/* A key's copy as the adapter binds it: its fields (whole, or the q-limbs and parts of a
 * partial copy), all of one size, wherever each lies. */
static fhr_status key_copy(const fhr_value *v, const char *name, ch_key_copy *out)
{
    size_t nf = fhr_value_nfields(v), nb0 = 0;
    if (nf == 0 || nf > CH_KEY_FIELDS) {
        snprintf(msg, sizeof msg, "value %s has %zu fields (1 to %d)", name, nf, CH_KEY_FIELDS);
        return FHR_E_BACKEND;
    }
    memset(out, 0, sizeof *out);
    for (size_t f = 0; f < nf; f++) {
        size_t nb = 0;
        int got = fhr_value_field_at(v, f, &out->field[f], &nb) == FHR_OK;
        if (got && f == 0)
            nb0 = nb;
        if (!got || nb != nb0) {
            snprintf(msg, sizeof msg, "value %s: field %zu of %zu is not %zu bytes as field 0",
                     name, f, nf, nb0);
            return FHR_E_BACKEND;
        }
    }
    out->field_bytes = nb0;
    out->nfields = (int)nf;
    return FHR_OK;
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
    void *pp[1024] = {0};
    ch_key_copy kp[64];
    memset(kp, 0, sizeof kp);
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
            if (key_copy(c->values[v], in->name, &kp[at]) != FHR_OK)
                return set_err(err, c->name);
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

/* The q-limbs phase p reads of its i-th key in a plan: all of them with whole keys. */
static int key_need(ch_engine *e, const ch_phase_info *p, int i, int level)
{
    return level ? p->limbs[i] : ch_key(e, p->keys[i])->q;
}

/* The bytes of a copy of key ki holding n q-limbs: of each part its q-limbs reach, both
 * halves with n q-limbs and every special limb (fheplan's partial copy). */
static uint64_t key_bytes_at(const ch_key_info *ki, int n)
{
    if (n >= ki->q)
        return ki->bytes;
    uint64_t parts = (uint64_t)(n + ki->alpha - 1) / (uint64_t)ki->alpha;
    return 2 * parts * (uint64_t)(n + ki->special) * ki->limb_bytes;
}

static uint64_t managed_bytes(ch_engine *e, int with_pts)
{
    uint64_t m = 0;
    for (int k = 0; k < ch_nkeys(e); k++)
        m += ch_key(e, k)->bytes;
    for (int p = 0; with_pts && p < ch_npts(e); p++)
        m += ch_pt(e, p)->bytes;
    return m;
}

/* The bytes of the keys phase ph reads, whole or at its level. */
static uint64_t phase_key_bytes(ch_engine *e, int ph, int level)
{
    const ch_phase_info *p = ch_phase(e, ph);
    uint64_t s = 0;
    for (int i = 0; i < p->nkeys; i++)
        s += key_bytes_at(ch_key(e, p->keys[i]), key_need(e, p, i, level));
    return s;
}

/* The largest set one phase reads at once: no budget below it is feasible. */
static uint64_t widest_phase(ch_engine *e, int with_pts, int level)
{
    uint64_t w = 0;
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        const ch_phase_info *p = ch_phase(e, ph);
        uint64_t s = phase_key_bytes(e, ph, level);
        for (int i = 0; with_pts && i < p->npts; i++)
            s += ch_pt(e, p->pts[i])->bytes;
        if (s > w)
            w = s;
    }
    return w;
}

/* What one plan is: the batch, what fheplan manages, how keys travel, the budget. */
typedef struct plan_spec {
    int B, with_pts, seeded, level, batches;
    uint64_t budget;
} plan_spec;

static void write_header(FILE *f, const plan_spec *ps, const char *param)
{
    const char *base = strrchr(param, '/') ? strrchr(param, '/') + 1 : param;
    fprintf(f, "# Cheddar's CKKS bootstrapping (%s, full slots), %d batch%s of %d ciphertexts\n"
               "# bootstrapped phase by phase: each request is one phase of Cheddar's Boot for\n"
               "# the whole batch (a linear transform's baby steps, or one of its giant steps),\n"
               "# requiring the keys%s it reads. Generated by\n"
               "# examples/cheddar/boot.c from Cheddar's own phase lists; kernel costs are the\n"
               "# phases' times with every key resident, measured on this GPU.%s%s\n"
               "rplan 1\n\nbudget cuda:0 %llu B\n\n",
            base, ps->batches, ps->batches > 1 ? "es" : "", ps->B,
            ps->with_pts ? " and plaintext diagonals" : "",
            ps->seeded ? "\n# Seeded keys: only the b halves cross PCIe; the device regenerates each\n"
                         "# part's a half with the adapter's sampler (ch.uniform, seed 64 * key + k\n"
                         "# for the key's k-th seeded half)." : "",
            ps->level ? "\n# Keys cut into limbs: limbs(q-limbs, special limbs, parts, q-limbs per\n"
                        "# part). A phase at a lower level requires a key at `level L`: L + 1 is\n"
                        "# the q-limbs it reads (4 terminal + the main primes of its ciphertext).\n"
                        "# L is fheplan's limb count minus one, not Cheddar's level index (that\n"
                        "# is in each request's comment)." : "",
            (unsigned long long)ps->budget);
}

/* Every key's value: its halves as fields (seeded ones regenerated), cut into limbs. */
static void write_keys(FILE *f, ch_engine *e, const plan_spec *ps)
{
    for (int k = 0; k < ch_nkeys(e); k++) {
        const ch_key_info *ki = ch_key(e, k);
        fprintf(f, "value k_%s = %llu B replicable source engine.key(%d) fields(", ki->name,
                (unsigned long long)ki->bytes, k);
        int parts[CH_MAX_PARTS];
        int np = ps->seeded ? ch_seeded_parts(e, k, parts, CH_MAX_PARTS) : 0;
        for (int i = 0; i < ki->beta; i++) {
            int sd = 0;
            for (int j = 0; j < np; j++)
                sd |= parts[j] == i;
            fprintf(f, "%sb%d, %sa%d", i ? ", " : "", i, sd ? "seeded " : "", i);
        }
        fprintf(f, ")");
        if (ps->level)
            fprintf(f, " limbs(%d, %d, %d, %d)", ki->q, ki->special, ki->beta, ki->alpha);
        if (np > 0)
            fprintf(f, " seeded ch.uniform(%d)", 64 * k);
        fprintf(f, "\n");
    }
}

/* One batch: every phase a request for its keys (at its level where it reads fewer
 * q-limbs than a key has) and plaintexts. */
static void write_batch(FILE *f, ch_engine *e, const plan_spec *ps, int r)
{
    fprintf(f, "stage \"batch%d\" {\n", r);
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        const ch_phase_info *p = ch_phase(e, ph);
        fprintf(f, "  request \"%s\" using keys {", p->name);
        fprintf(f, ps->level ? "  # Cheddar's level %d\n" : "\n", p->level);
        for (int i = 0; i < p->nkeys; i++) {
            const ch_key_info *ki = ch_key(e, p->keys[i]);
            int n = key_need(e, p, i, ps->level);
            fprintf(f, "    require k_%s @ cuda:0", ki->name);
            if (n < ki->q) /* fheplan's level: q-limbs - 1 */
                fprintf(f, " level %d", n - 1);
            fprintf(f, "\n");
        }
        for (int i = 0; ps->with_pts && i < p->npts; i++)
            fprintf(f, "    require pt_%s @ cuda:0\n", p->name);
        fprintf(f, "    body { run ch.%s(", p->name);
        for (int i = 0; i < p->nkeys; i++)
            fprintf(f, "k_%s, ", ch_key(e, p->keys[i])->name);
        for (int i = 0; ps->with_pts && i < p->npts; i++)
            fprintf(f, "pt_%s, ", p->name);
        fprintf(f, "%d) }\n  }\n", ps->B);
    }
    fprintf(f, "}\n");
}

static int write_plan(const char *path, ch_engine *e, const plan_spec *ps,
                      const double *phase_ms, const char *param)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    write_header(f, ps, param);
    write_keys(f, e, ps);
    if (ps->with_pts)
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
    for (int r = 0; r < ps->batches; r++)
        write_batch(f, e, ps, r);
    return fclose(f);
}

/* `fheplan check --json` of the plan file: bytes moved, feasibility, predicted time. The
 * bandwidth goes over exactly as the VM gets it (%.17g): the schedule follows the model's
 * timeline where it double-buffers, so a rounded figure can decide differently (at 50%
 * with whole keys and diagonals, 55.381 against 55.38 GB/s moved 0.1 GB more). */
typedef struct check_pred {
    int ok, feasible;
    double moved, regen, predicted_s;
    double link_boot;  /* PCIe bytes per bootstrap over the batches after the first */
} check_pred;

/* Bytes over PCIe per bootstrap in the batches after the first (the first fills the
 * device): the mean of their stages' figures over B. -1 without two batches. */
static double link_per_boot(const double *stage_bytes, int nb, int B)
{
    double sum = 0;
    for (int i = 1; i < nb; i++)
        sum += stage_bytes[i];
    return nb > 1 ? sum / (nb - 1) / B : -1;
}

/* The same from check's report: its stages named batch*. */
static double check_link_per_boot(const cJSON *report, int B)
{
    double v[256];
    int nb = 0;
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(report, "stages")) {
        const cJSON *nm = cJSON_GetObjectItem(st, "name");
        const cJSON *pb = cJSON_GetObjectItem(st, "pcie_bytes");
        if (nb < 256 && cJSON_IsString(nm) && !strncmp(nm->valuestring, "batch", 5) &&
            cJSON_IsNumber(pb))
            v[nb++] = pb->valuedouble;
    }
    return link_per_boot(v, nb, B);
}

static const char *const objective_names[] = {"bytes", "time", "auto"};

static check_pred check_plan(const char *fheplan, const char *path, double gbps, int objective,
                             int B)
{
    check_pred r = {0, 0, -1, -1, -1, -1};
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
        r.link_boot = check_link_per_boot(cJSON_GetObjectItem(f0, "report"), B);
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
    double link_boot;         /* PCIe bytes per bootstrap after the first batch */
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
    fhr_ok(rplan_generator_register_range(vm, "ch.uniform", gen_uniform_range, &d, &err), &err,
           "generator range");
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
        double bt[256], ht[256], lk[256], prev_end = 0;
        int nb = 0;
        for (size_t i = 0; i < rep->nstages && nb < 256; i++)
            if (!strncmp(rep->stages[i].name, "batch", 5)) {
                const rplan_stage_report *sr = &rep->stages[i];
                if (nb == 0)
                    out->first_ms = sr->end_s * 1e3;
                bt[nb] = (sr->end_s - prev_end) * 1e3;
                lk[nb] = (double)(sr->bytes[FHR_DIR_H2D] + sr->bytes[FHR_DIR_D2H] +
                                  sr->load_h2d_bytes);
                ht[nb++] = sr->time_s * 1e3;
                prev_end = sr->end_s;
            }
        out->link_boot = link_per_boot(lk, nb, B);
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
#define BUDGET_MINKS 0 /* a --budgets entry: the bytes of the keys Min-KS reads */
typedef struct boot_opts {
    const char *param, *outdir, *fheplan;
    int batches[MAX_LIST], nbatches;
    int budgets[MAX_LIST], nbudgets; /* percentages, or BUDGET_MINKS */
    int per_run, reps, modes; /* modes: bit 0 keys, bit 1 keys and plaintexts */
    int keysets;              /* bit 0: whole keys, bit 1: seeded keys */
    int limbsets;             /* bit 0: keys read whole, bit 1: at each phase's level */
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

/* --budgets: percentages of 1 to 100, or minks (BUDGET_MINKS). The count, or -1. */
static int parse_budgets(const char *v, int *out)
{
    int n = 0;
    for (const char *s = v; *s;) {
        size_t len = strcspn(s, ",");
        char *end;
        long x = strtol(s, &end, 10);
        if (n == MAX_LIST)
            return -1;
        if (len == 5 && !strncmp(s, "minks", 5))
            out[n++] = BUDGET_MINKS;
        else if (end == s + len && x >= 1 && x <= 100)
            out[n++] = (int)x;
        else
            return -1;
        s += len + (s[len] == ',');
    }
    return n ? n : -1;
}

/* A bit-set option (--objectives, --keys, --limbs, --modes): 0, or 2 with the reason. */
static int parse_bits(int *out, const char *a, const char *v)
{
    static const char *const keys[] = {"whole", "seeded"}, *const modes[] = {"keys", "all"};
    static const char *const limbs[] = {"whole", "level"};
    const char *const *names = !strcmp(a, "--objectives") ? objective_names
                               : !strcmp(a, "--keys")     ? keys
                               : !strcmp(a, "--limbs")    ? limbs
                                                          : modes;
    int n = names == objective_names ? 3 : 2;
    if (!(*out = name_bits(v, names, n))) {
        fprintf(stderr, "cheddar-boot: %s: a list of %s, %s%s%s\n", a, names[0], names[1],
                n == 3 ? ", " : "", n == 3 ? names[2] : "");
        return 2;
    }
    return 0;
}

/* One option with its value: 0, or 2 with the reason printed. */
static int parse_option(boot_opts *o, const char *a, const char *v)
{
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
        if ((o->nbudgets = parse_budgets(v, o->budgets)) < 0) {
            fprintf(stderr, "cheddar-boot: --budgets: '%s' is not a list of up to %d "
                            "percentages of 1 to 100 or minks\n", v, MAX_LIST);
            return 2;
        }
    } else if (!strcmp(a, "--batches-per-run") || !strcmp(a, "--reps")) {
        int x[1];
        parse_list(v, x, 1, a);
        if (!strcmp(a, "--reps"))
            o->reps = x[0];
        else
            o->per_run = x[0] < 2 ? 2 : x[0];
    } else if (!strcmp(a, "--objectives")) {
        return parse_bits(&o->objectives, a, v);
    } else if (!strcmp(a, "--keys")) {
        return parse_bits(&o->keysets, a, v);
    } else if (!strcmp(a, "--limbs")) {
        return parse_bits(&o->limbsets, a, v);
    } else if (!strcmp(a, "--modes")) {
        return parse_bits(&o->modes, a, v);
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
                        "[--budgets 100,50,25,minks] [--batches-per-run N] [--reps N] "
                        "[--modes keys,all] [--keys whole,seeded] [--limbs whole,level] "
                        "[--objectives bytes,time,auto] [--trace DIR]\n");
        return 2;
    }
    *o = (boot_opts){argv[1], argv[2], "fheplan", {1, 8}, 2, {100, 50, 25}, 3, 4, 5, 3, 3, 2, 1};
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
    return 0;
}

/* The keys Min-KS reads: their bytes here (each key as this key set holds it) and
 * generated for Min-KS alone. */
typedef struct minks_keys {
    int keys[CH_MAX_PHASES], n;
    uint64_t bytes, own_bytes;
} minks_keys;

static minks_keys minks_of(ch_engine *e)
{
    minks_keys m;
    memset(&m, 0, sizeof m);
    m.n = ch_minks_keys(e, m.keys, CH_MAX_PHASES, &m.own_bytes);
    if (m.n < 0) {
        snprintf(msg, sizeof msg, "a key Min-KS reads is not in the key set");
        die("Min-KS");
    }
    for (int i = 0; i < m.n; i++)
        m.bytes += ch_key(e, m.keys[i])->bytes;
    return m;
}

/* What the bootstrap holds: keys, diagonals, every phase's share (whole, and at its
 * level: the q-limbs it reads) and the keys Min-KS reads. */
static void describe(ch_engine *e, const char *param, double t0, const minks_keys *mk)
{
    int ndiag = 0;
    for (int g = 0; g < ch_npts(e); g++)
        ndiag += ch_pt(e, g)->ndiag;
    printf("Cheddar ready in %.1f s (%s): %d keys, %d plaintext diagonals in %d transforms, "
           "%d phases\n", now_s() - t0, param, ch_nkeys(e), ndiag, ch_npts(e), ch_nphases(e));
    uint64_t kb = managed_bytes(e, 0), ab = managed_bytes(e, 1);
    printf("  keys %.3f GiB, plaintexts %.3f GiB; the widest phase reads %.1f MiB of keys "
           "(%.1f MiB at its level), %.1f MiB with its plaintexts\n", kb / 1073741824.0,
           (ab - kb) / 1073741824.0, widest_phase(e, 0, 0) / 1048576.0,
           widest_phase(e, 0, 1) / 1048576.0, widest_phase(e, 1, 0) / 1048576.0);
    for (int ph = 0; ph < ch_nphases(e); ph++) {
        const ch_phase_info *p = ch_phase(e, ph);
        uint64_t pt = 0;
        int n = 0;
        for (int i = 0; i < p->nkeys; i++)
            n = p->limbs[i] > n ? p->limbs[i] : n;
        for (int i = 0; i < p->npts; i++)
            pt += ch_pt(e, p->pts[i])->bytes;
        printf("  phase %-8s level %2d, %2d q-limbs: %2d keys %7.1f MiB (%7.1f MiB at its level), "
               "%3d plaintext diagonals %7.1f MiB\n", p->name, p->level, n, p->nkeys,
               phase_key_bytes(e, ph, 0) / 1048576.0, phase_key_bytes(e, ph, 1) / 1048576.0,
               p->npts ? ch_pt(e, p->pts[0])->ndiag : 0, pt / 1048576.0);
    }
    printf("  Min-KS reads %d keys:", mk->n);
    for (int i = 0; i < mk->n; i++)
        printf(" %s", ch_key(e, mk->keys[i])->name);
    printf("; %.1f MiB as this key set holds them, %.1f MiB generated for Min-KS alone\n",
           mk->bytes / 1048576.0, mk->own_bytes / 1048576.0);
}

/* One batch size's resident figures: Cheddar's Boot, the phase-by-phase batch, Min-KS. */
typedef struct res_row {
    int B;
    double boot_ms, pbp_ms, minks_ms;
    double snr, max_err, minks_snr, minks_max_err;
    int identical, minks_ok;
} res_row;

/* Min-KS on the batch, every key resident: the median of the repetitions, decrypted. It
 * passes when its SNR is within 10 dB of Boot's (the same approximation, other key
 * switches). */
static void minks_batch(ch_engine *e, int nr, res_row *r, const minks_keys *mk, cJSON *o)
{
    double v[16];
    for (int i = 0; i < nr; i++)
        if (ch_minks(e, r->B, &v[i], msg, sizeof msg))
            die("Min-KS");
    if (ch_result_error(e, &r->minks_snr, &r->minks_max_err, msg, sizeof msg))
        die("decrypting Min-KS");
    r->minks_ms = median(v, nr);
    r->minks_ok = r->minks_snr * 10 >= r->snr;
    printf("B=%d Min-KS resident: Cheddar's Boot(min_ks) %.2f ms for the batch (%.3fx Boot), "
           "reading %d keys of %.1f MiB (%.1f MiB generated alone), SNR %.3g, max error %.3g: "
           "%s\n", r->B, r->minks_ms, r->minks_ms / r->boot_ms, mk->n, mk->bytes / 1048576.0,
           mk->own_bytes / 1048576.0, r->minks_snr, r->minks_max_err,
           r->minks_ok ? "PASS" : "FAIL");
    cJSON_AddNumberToObject(o, "minks_ms", r->minks_ms);
    cJSON_AddNumberToObject(o, "minks_snr", r->minks_snr);
    cJSON_AddNumberToObject(o, "minks_max_err", r->minks_max_err);
    cJSON_AddBoolToObject(o, "minks_pass", r->minks_ok);
}

/* Batch B's references: Cheddar's Boot and the resident phase-by-phase batch (medians of
 * the repetitions), then Min-KS; *res_ms and res_phase (per ciphertext) for the streamed
 * runs. 1 when the phase-by-phase batch is bit-identical to Boot and Min-KS passed. */
static int resident_batch(ch_engine *e, int reps, res_row *r, double *res_phase,
                          const minks_keys *mk, cJSON *jres)
{
    double boot_v[16], bat_v[16], ph_v[CH_MAX_PHASES][16];
    int nr = reps > 16 ? 16 : reps, same_all = 1, B = r->B;
    for (int i = 0; i < nr; i++)
        if (ch_reference(e, B, &boot_v[i], msg, sizeof msg))
            die("Cheddar's Boot");
    if (ch_result_error(e, &r->snr, &r->max_err, msg, sizeof msg))
        die("decrypting");
    for (int i = 0; i < nr; i++) {
        double phm[CH_MAX_PHASES];
        int same = 0;
        if (ch_resident_batch(e, B, &bat_v[i], phm, &same, msg, sizeof msg))
            die("the resident batch");
        same_all &= same;
        for (int ph = 0; ph < ch_nphases(e); ph++)
            ph_v[ph][i] = phm[ph];
    }
    r->boot_ms = median(boot_v, nr);
    r->pbp_ms = median(bat_v, nr);
    r->identical = same_all;
    for (int ph = 0; ph < ch_nphases(e); ph++)
        res_phase[ph] = median(ph_v[ph], nr) / B;
    printf("B=%d resident: Cheddar's Boot %.2f ms for the batch (%.2f ms each), SNR %.3g, "
           "max error %.3g; phase by phase %.2f ms (%.3fx), bit-identical to Boot: %s\n", B,
           r->boot_ms, r->boot_ms / B, r->snr, r->max_err, r->pbp_ms, r->pbp_ms / r->boot_ms,
           same_all ? "PASS" : "FAIL");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "batch", B);
    cJSON_AddNumberToObject(o, "boot_ms", r->boot_ms);
    cJSON_AddNumberToObject(o, "phase_by_phase_ms", r->pbp_ms);
    cJSON_AddNumberToObject(o, "snr", r->snr);
    cJSON_AddNumberToObject(o, "max_err", r->max_err);
    cJSON_AddBoolToObject(o, "bit_identical", same_all);
    cJSON *pa = cJSON_AddArrayToObject(o, "phase_ms_per_ct");
    for (int ph = 0; ph < ch_nphases(e); ph++)
        cJSON_AddItemToArray(pa, cJSON_CreateNumber(res_phase[ph]));
    minks_batch(e, nr, r, mk, o);
    cJSON_AddItemToArray(jres, o);
    return same_all && r->minks_ok;
}

#define TABLE_HEAD "%-5s %-6s %-5s %-5s %-4s %-6s %10s %8s %8s %9s %9s %12s %12s %12s %12s " \
                   "%5s %9s %9s %5s\n"
#define TABLE_ROW  "%-5s %-6s %-5s %-5s %-4d %-6s %10.2f %8.3f %8s %9.1f %9s %12s %12s %12s " \
                   "%12s %5s %9.1f %9s %5s\n"

/* The resident rows of batch B: Cheddar's Boot with every key on the device, and Min-KS
 * with the keys it reads (peak: the keys' bytes; vs res: against the phase-by-phase
 * resident batch, as the streamed rows). */
static void print_resident_rows(const res_row *r, uint64_t key_bytes, const minks_keys *mk)
{
    printf(TABLE_ROW, "boot", "-", "-", "-", r->B, "-", r->boot_ms, r->boot_ms / r->pbp_ms, "-",
           0.0, "-", "-", "-", "-", "-", r->identical ? "yes" : "NO", key_bytes / 1048576.0,
           "-", r->identical ? "PASS" : "FAIL");
    printf(TABLE_ROW, "minks", "-", "-", "-", r->B, "-", r->minks_ms, r->minks_ms / r->pbp_ms,
           "-", 0.0, "-", "-", "-", "-", "-", "-", mk->bytes / 1048576.0, "-",
           r->minks_ok ? "PASS" : "FAIL");
}

/* One streamed configuration: its plan, check's prediction and the run. */
typedef struct cell {
    int with_pts, seeded, level, obj, B, budget_pct; /* budget_pct BUDGET_MINKS: Min-KS's */
    uint64_t budget;
    double res_ms;
    check_pred cp;
    run_res rr;
} cell;

static const char *budget_label(const cell *c, char *buf, size_t n)
{
    if (c->budget_pct == BUDGET_MINKS)
        snprintf(buf, n, "minks");
    else
        snprintf(buf, n, "%d%%", c->budget_pct);
    return buf;
}

/* A cell's line (and its details line) in the table. ok: its verdict. */
static void print_cell(const cell *c, double bound, int ok)
{
    const run_res *rr = &c->rr;
    const char *mn = c->with_pts ? "all" : "keys", *kn = c->seeded ? "seeded" : "whole";
    const char *ln = c->level ? "level" : "whole", *on = objective_names[c->obj];
    char bl[16], vb[16], ck[16], mv[24], cm[24], rg[24], cr[24];
    budget_label(c, bl, sizeof bl);
    if (!rr->ok) {
        printf("%-5s %-6s %-5s %-5s %-4d %-6s  %s\n", mn, kn, ln, on, c->B, bl, rr->error);
        fflush(stdout);
        return;
    }
    snprintf(vb, sizeof vb, "%.3f", rr->batch_ms / bound);
    snprintf(ck, sizeof ck, "%.1f", c->cp.link_boot / 1048576.0);
    snprintf(mv, sizeof mv, "%llu", (unsigned long long)rr->moved);
    snprintf(cm, sizeof cm, "%.0f", c->cp.moved);
    snprintf(rg, sizeof rg, "%llu", (unsigned long long)rr->regen);
    snprintf(cr, sizeof cr, "%.0f", c->cp.regen);
    char pool[16];
    snprintf(pool, sizeof pool, "%.1f", rr->pool_peak / 1048576.0);
    printf(TABLE_ROW, mn, kn, ln, on, c->B, bl, rr->batch_ms, rr->batch_ms / c->res_ms, vb,
           rr->link_boot / 1048576.0, ck, mv, cm, rg, cr, rr->identical ? "yes" : "NO",
           rr->peak / 1048576.0, pool, ok ? "PASS" : "FAIL");
    printf("      first batch %.2f ms, batch from the host's opening %.2f ms; %llu loads, %llu "
           "evictions, %llu host waits; link busy %.1f ms, idle %.1f ms; run %.3f s, ratio "
           "%.3f to the VM's bound; SNR %.3g\n", rr->first_ms, rr->batch_host_ms,
           (unsigned long long)rr->loads, (unsigned long long)rr->evictions,
           (unsigned long long)rr->waits, rr->link_busy_ms, rr->link_idle_ms,
           rr->total_s, rr->ratio, rr->snr);
    fflush(stdout);
}

/* A cell's object in results.json. */
static void cell_json(const cell *c, double bound, cJSON *jruns)
{
    const run_res *rr = &c->rr;
    char bl[16];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "managed", c->with_pts ? "keys+plaintexts" : "keys");
    cJSON_AddStringToObject(o, "keys", c->seeded ? "seeded" : "whole");
    cJSON_AddStringToObject(o, "limbs", c->level ? "level" : "whole");
    cJSON_AddStringToObject(o, "objective", objective_names[c->obj]);
    cJSON_AddNumberToObject(o, "batch", c->B);
    cJSON_AddStringToObject(o, "budget", budget_label(c, bl, sizeof bl));
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
    cJSON_AddNumberToObject(o, "link_bytes_per_boot", rr->link_boot);
    cJSON_AddNumberToObject(o, "check_link_bytes_per_boot", c->cp.link_boot);
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
    char path[4096], bl[16];
    budget_label(c, bl, sizeof bl);
    bl[strcspn(bl, "%")] = 0;
    snprintf(path, sizeof path, "%s/plans/%s-%s-%s-b%d-%s.rplan", o->outdir,
             c->with_pts ? "all" : "keys", c->seeded ? "seeded" : "whole",
             c->level ? "level" : "full", c->B, bl);
    plan_spec ps = {c->B, c->with_pts, c->seeded, c->level, o->per_run, c->budget};
    if (write_plan(path, e, &ps, phase_ms_b, o->param)) {
        fprintf(stderr, "cheddar-boot: cannot write %s\n", path);
        return -1;
    }
    c->cp = check_plan(o->fheplan, path, gbps, c->obj, c->B);
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
static int run_mode(ch_engine *e, const boot_opts *o, int with_pts, const res_row *rows,
                    double (*res_phase)[CH_MAX_PHASES], uint64_t minks_bytes, double gbps,
                    cJSON *jruns)
{
    if (with_pts && ch_export_pts(e, msg, sizeof msg))
        die("exporting the plaintexts");
    uint64_t managed = managed_bytes(e, with_pts);
    int all_ok = 1;
    for (int bi = 0; bi < o->nbatches; bi++) {
        int B = o->batches[bi];
        double phase_ms_b[CH_MAX_PHASES];
        for (int ph = 0; ph < ch_nphases(e); ph++)
            phase_ms_b[ph] = res_phase[bi][ph] * B;
        for (int gi = 0; gi < o->nbudgets; gi++)
            for (int run = 0; run < 12; run++) {
                cell c;
                memset(&c, 0, sizeof c);
                c.with_pts = with_pts, c.level = run / 6, c.seeded = run % 2;
                c.obj = run / 2 % 3, c.B = B;
                if (!(o->keysets & (1 << c.seeded)) || !(o->objectives & (1 << c.obj)) ||
                    !(o->limbsets & (1 << c.level)))
                    continue;
                c.budget_pct = o->budgets[gi];
                c.budget = c.budget_pct == BUDGET_MINKS
                               ? minks_bytes
                               : (managed * (uint64_t)c.budget_pct + 99) / 100;
                c.budget = (c.budget + 4095) / 4096 * 4096;
                c.res_ms = rows[bi].pbp_ms;
                int ok = run_cell(e, o, &c, phase_ms_b, widest_phase(e, with_pts, c.level),
                                  gbps, jruns);
                if (ok < 0)
                    return -1;
                all_ok &= ok;
            }
    }
    return all_ok;
}

/* Exports the keys and checks the sampler: every regenerable a half whole and by range. */
static int export_and_verify(ch_engine *e, cJSON *root)
{
    if (ch_export_keys(e, msg, sizeof msg))
        die("exporting the keys");
    uint64_t mism = 0, checked = 0, rmism = 0, rchecked = 0;
    if (ch_verify_sampler(e, &mism, &checked, &rmism, &rchecked, msg, sizeof msg))
        die("the sampler");
    printf("seeded halves: the sampler regenerates every regenerable a half: %llu of %llu words "
           "differ from the generated keys: %s; by range (each partial copy's limbs, and a "
           "range inside limbs): %llu of %llu differ: %s\n", (unsigned long long)mism,
           (unsigned long long)checked, mism ? "FAIL" : "PASS", (unsigned long long)rmism,
           (unsigned long long)rchecked, rmism ? "FAIL" : "PASS");
    cJSON_AddNumberToObject(root, "sampler_mismatched_words", (double)mism);
    cJSON_AddNumberToObject(root, "sampler_range_mismatched_words", (double)rmism);
    return mism == 0 && rmism == 0;
}

/* The results file's top: the engine's sizes and the keys Min-KS reads. */
static cJSON *results_root(ch_engine *e, const boot_opts *o, double gbps, const minks_keys *mk)
{
    uint64_t kb = managed_bytes(e, 0), ab = managed_bytes(e, 1);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "param", o->param);
    cJSON_AddNumberToObject(root, "pinned_gbps", gbps);
    cJSON_AddNumberToObject(root, "key_bytes", (double)kb);
    cJSON_AddNumberToObject(root, "plaintext_bytes", (double)(ab - kb));
    cJSON_AddNumberToObject(root, "minks_key_bytes", (double)mk->bytes);
    cJSON_AddNumberToObject(root, "minks_own_key_bytes", (double)mk->own_bytes);
    cJSON *mj = cJSON_AddArrayToObject(root, "minks_keys");
    for (int i = 0; i < mk->n; i++)
        cJSON_AddItemToArray(mj, cJSON_CreateString(ch_key(e, mk->keys[i])->name));
    return root;
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
    minks_keys mk = minks_of(e);
    describe(e, o.param, t0, &mk);
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
    cJSON *root = results_root(e, &o, gbps, &mk);
    cJSON *jres = cJSON_AddArrayToObject(root, "resident");

    /* the references, the resident phase-by-phase batches and Min-KS */
    res_row rows[MAX_LIST];
    double res_phase[MAX_LIST][CH_MAX_PHASES];
    int all_ok = 1;
    for (int bi = 0; bi < o.nbatches; bi++) {
        rows[bi] = (res_row){.B = o.batches[bi]};
        all_ok &= resident_batch(e, o.reps, &rows[bi], res_phase[bi], &mk, jres);
    }
    all_ok &= export_and_verify(e, root);
    cJSON *jruns = cJSON_AddArrayToObject(root, "runs");

    printf("\n" TABLE_HEAD, "mode", "keys", "limbs", "obj", "B", "budget", "batch ms", "vs res",
           "vs bound", "link/boot", "check", "bytes", "check", "regen", "check", "same",
           "peak MiB", "pool MiB", "ok");
    for (int bi = 0; bi < o.nbatches; bi++)
        print_resident_rows(&rows[bi], managed_bytes(e, 0), &mk);
    for (int mode = 1; mode <= 2; mode++) {
        if (!(o.modes & mode))
            continue;
        int ok = run_mode(e, &o, mode == 2, rows, res_phase, mk.bytes, gbps, jruns);
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
