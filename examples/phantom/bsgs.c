/* examples/phantom/bsgs.c — the C driver: a BSGS linear transform (n1 = n2 = 8, 14 rotation
 * keys of 180 MiB) on 4 ciphertexts, twice, computed by Phantom with its own resident keys,
 * then with the keys streamed by fheplan through cuda:0 budgets, through the public API
 * only; prints every acceptance check and writes results.json.
 *
 * usage: phantom-bsgs [--out DIR] [--fheplan PATH] [--budgets K,K,...] [--reps N]
 * Budgets are counted in keys (0: all 14). DIR defaults to $OUT, else ".". */
#include "fheplan/residency.h"
#include "fheplan/cuda.h"

#include "examples/phantom/adapter.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCT 4
#define TOLERANCE 1e-4
#define RATIO_LIMIT 1.03

static char msg[512];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define PH(call)                                                                               \
    do {                                                                                       \
        if ((call) != 0) {                                                                     \
            fprintf(stderr, "phantom-bsgs: %s: %s\n", #call, msg);                             \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

static void fhr_check(fhr_status st, const fhr_error *e, const char *what)
{
    if (st != FHR_OK) {
        fprintf(stderr, "phantom-bsgs: %s: %s (%s)\n", what, e ? e->message : "",
                fhr_status_name(st));
        exit(2);
    }
}

/* ---- the sequence as a plan, and fheplan check's prediction --------------------------- */

static int write_rplan(const char *path, uint64_t key_bytes, int budget_keys)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "# The key uses of examples/phantom/bsgs.c: a BSGS linear transform, n1 = n2 = 8,\n"
               "# two passes; each request is one key's rotations of all %d ciphertexts.\n"
               "rplan 1\n\nbudget cuda:0 %llu B\n\n"
               "value rk[%d] = %llu B replicable at pinned init synth(100 + i)\n\n"
               "policy keys = lookahead(cuda:0 -> pinned)\n\nstage \"bsgs\" {\n",
            NCT, (unsigned long long)(key_bytes * (uint64_t)budget_keys), PH_KEYS,
            (unsigned long long)key_bytes);
    for (int p = 0; p < PH_PASSES; p++)
        for (int u = 0; u < PH_USES; u++)
            fprintf(f, "  request \"pass%d-step%d\" using keys { require rk[%d] @ cuda:0 }\n", p,
                    ph_key_step(ph_use_key(p, u)), ph_use_key(p, u));
    fprintf(f, "}\n");
    return fclose(f);
}

/* Runs `fheplan check --json PATH` and returns its predicted bytes (-1 on failure). */
static double predicted_bytes(const char *fheplan, const char *path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' check --json '%s'", fheplan, path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    int rc = pclose(p);
    if (!buf)
        return -1;
    buf[len] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    const cJSON *files = cJSON_GetObjectItem(j, "files");
    const cJSON *f0 = cJSON_GetArrayItem(files, 0);
    const cJSON *b = cJSON_GetObjectItem(f0, "bytes_moved");
    const cJSON *ok = cJSON_GetObjectItem(f0, "feasible");
    double v = rc == 0 && cJSON_IsTrue(ok) && cJSON_IsNumber(b) ? b->valuedouble : -1;
    cJSON_Delete(j);
    return v;
}

/* ---- runs ------------------------------------------------------------------------------ */

typedef struct run_out {
    double pass_s[PH_PASSES];
    uint64_t bytes[PH_PASSES]; /* host to device */
    uint64_t loads, evictions, waits, peak_charged, peak_pool, peak_reserved, granule;
    uint64_t *words;
    size_t nwords;
    double max_err;
    /* the breakdown of each pass, from timing events on cudaStreamPerThread (ms) */
    double stall_ms[PH_PASSES][PH_USES]; /* the GPU waiting for the use's key */
    double work_ms[PH_PASSES][PH_USES];  /* the use's work, bind to the next use */
    double edge_ms[PH_PASSES];           /* ph_pass_begin and ph_pass_end */
    double host_wait_ms[PH_PASSES];      /* the host inside fhr_use_begin */
    uint64_t pass_waits[PH_PASSES];
    int first_load[PH_PASSES];           /* the pass's first key was not resident */
} run_out;

/* Timing events on Phantom's stream: a[u] before use u's begin, b[u] after it (so b - a is
 * the GPU waiting for the key's copy), a[PH_USES] after the last use, z at the pass end. */
typedef struct pass_events {
    cudaEvent_t start, a[PH_USES + 1], b[PH_USES], z;
} pass_events;

static pass_events pev[PH_PASSES];

static void events_create(void)
{
    for (int p = 0; p < PH_PASSES; p++) {
        cudaEventCreate(&pev[p].start);
        cudaEventCreate(&pev[p].z);
        for (int u = 0; u <= PH_USES; u++)
            cudaEventCreate(&pev[p].a[u]);
        for (int u = 0; u < PH_USES; u++)
            cudaEventCreate(&pev[p].b[u]);
    }
}

static void ev_rec(cudaEvent_t e) { cudaEventRecord(e, cudaStreamPerThread); }

static double ev_ms(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? ms : 0;
}

/* After the pass's final synchronisation: its breakdown (streamed: b recorded after each
 * begin; resident: no begin, so b is a). */
static void pass_breakdown(int p, int streamed, run_out *r)
{
    pass_events *e = &pev[p];
    r->edge_ms[p] = ev_ms(e->start, e->a[0]) + ev_ms(e->a[PH_USES], e->z);
    for (int u = 0; u < PH_USES; u++) {
        cudaEvent_t b = streamed ? e->b[u] : e->a[u];
        r->stall_ms[p][u] = streamed ? ev_ms(e->a[u], b) : 0;
        r->work_ms[p][u] = ev_ms(b, e->a[u + 1]);
    }
}

/* Copies beside a pass (the control run): pinned keys to a device scratch buffer on a
 * stream of their own, with no fheplan, as many as a pass with every key loaded moves. */
typedef struct copies_beside {
    cudaStream_t st;
    void *scratch;
    void **pinned;
    size_t key_bytes;
} copies_beside;

/* The transform with whatever keys the tables point at (Phantom's own); with cb, the
 * copies run beside each pass. */
static void run_resident(ph_engine *e, const copies_beside *cb, run_out *r)
{
    memset(r, 0, sizeof *r);
    for (int p = 0; p < PH_PASSES; p++) {
        double t0 = now_s();
        for (int k = 0; cb && k < PH_KEYS; k++)
            cudaMemcpyAsync(cb->scratch, cb->pinned[k], cb->key_bytes, cudaMemcpyHostToDevice,
                            cb->st);
        ev_rec(pev[p].start);
        PH(ph_pass_begin(e, p, msg, sizeof msg));
        for (int u = 0; u < PH_USES; u++) {
            ev_rec(pev[p].a[u]);
            PH(ph_pass_use(e, p, u, msg, sizeof msg));
            PH(ph_pass_after_use(e, p, msg, sizeof msg));
        }
        ev_rec(pev[p].a[PH_USES]);
        PH(ph_pass_end(e, p, msg, sizeof msg));
        ev_rec(pev[p].z);
        PH(ph_sync(msg, sizeof msg));
        r->pass_s[p] = now_s() - t0;
        if (cb)
            cudaStreamSynchronize(cb->st);
        pass_breakdown(p, 0, r);
    }
    PH(ph_results(e, &r->words, &r->nwords, msg, sizeof msg));
    PH(ph_check_slots(e, &r->max_err, msg, sizeof msg));
}

/* fheplan's accounting peak at cuda:0, and the high-water marks of its private pool: what
 * it handed out and what it held from the device at most (since the backend was made, so
 * over every repetition of this budget), and the pool's growth granule. */
static void sample_peaks(fhr_manager *m, run_out *r)
{
    fhr_snapshot *s = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_check(fhr_snapshot_take(m, &s, &err), &err, "snapshot");
    const fhr_loc_stats *ls = fhr_snapshot_loc(s, fhr_loc_cuda(0));
    if (ls) {
        r->peak_charged = ls->peak_charged_bytes;
        if (ls->obs.valid) {
            r->peak_pool = ls->obs.pool_used_high_bytes;
            r->peak_reserved = ls->obs.pool_reserved_high_bytes;
            r->granule = ls->obs.pool_granule_bytes;
        }
    }
    fhr_snapshot_free(s);
}

/* The transform with every key leased from fheplan, through the public API alone: a view
 * of cudaStreamPerThread (Phantom's stream) is the consumer stream; fheplan's own stream
 * carries the copies; FHR_USE_WAIT throttles when the budget forces it. */
static void run_streamed(ph_engine *e, fhr_backend *b, fhr_stream *view, void **pinned,
                         uint64_t key_bytes, int budget_keys, run_out *r)
{
    memset(r, 0, sizeof *r);
    fhr_error err;
    fhr_error_init(&err);
    fhr_budget bud = {fhr_loc_cuda(0), key_bytes * (uint64_t)budget_keys};
    fhr_manager_config cfg = {b, &bud, 1, 0};
    fhr_manager *m = NULL;
    fhr_check(fhr_manager_create(&cfg, &m, &err), &err, "manager");
    fhr_handle keys[PH_KEYS];
    for (int k = 0; k < PH_KEYS; k++) {
        fhr_value *v = NULL;
        size_t bi;
        fhr_check(fhr_value_create(fhr_loc_pinned(), NULL, &v, &err), &err, "value");
        /* the pinned export stays ours (no free function): the manager only reads it */
        fhr_check(fhr_value_add_buffer(v, pinned[k], key_bytes, NULL, NULL, &bi, &err), &err, "buffer");
        fhr_check(fhr_value_add_field(v, "key", bi, 0, key_bytes, &err), &err, "field");
        char label[32];
        snprintf(label, sizeof label, "rot%d", ph_key_step(k));
        fhr_adopt_opts o = {FHR_REPLICABLE, label, 0};
        fhr_check(fhr_adopt(m, &v, &o, &keys[k], &err), &err, "adopt");
    }
    fhr_future_use fut[PH_PASSES * PH_USES];
    for (int p = 0; p < PH_PASSES; p++)
        for (int u = 0; u < PH_USES; u++)
            fut[p * PH_USES + u] = (fhr_future_use){(uint64_t)(p * PH_USES + u + 1),
                                                    keys[ph_use_key(p, u)], fhr_loc_cuda(0)};
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    fhr_policy *pol = NULL;
    fhr_check(fhr_policy_lookahead_create(&chain, 1, fut, PH_PASSES * PH_USES, &pol, &err), &err,
              "policy");
    fhr_controller *c = NULL;
    fhr_check(fhr_controller_create(m, pol, &c, &err), &err, "controller");
    fhr_stream_map cons = {fhr_loc_cuda(0), view};
    fhr_use_opts wait = {FHR_USE_WAIT, 0};
    for (int p = 0; p < PH_PASSES; p++) {
        double t0 = now_s();
        ev_rec(pev[p].start);
        PH(ph_pass_begin(e, p, msg, sizeof msg));
        for (int u = 0; u < PH_USES; u++) {
            int k = ph_use_key(p, u);
            fhr_requirement rq = {keys[k], fhr_loc_cuda(0)};
            fhr_request req = {"rotation", &rq, 1, NULL, 0, (uint64_t)(p * PH_USES + u + 1)};
            fhr_use *use = NULL;
            ev_rec(pev[p].a[u]);
            double h0 = now_s();
            fhr_check(fhr_use_begin_opts(c, &req, &cons, 1, NULL, 0, &wait, &use, &err), &err,
                      "use");
            r->host_wait_ms[p] += (now_s() - h0) * 1e3;
            ev_rec(pev[p].b[u]); /* after the lease's wait for the key's copy */
            void *dev;
            size_t n;
            fhr_check(fhr_value_field(fhr_use_value(use, keys[k], fhr_loc_cuda(0)), "key", &dev, &n),
                      NULL, "leased key");
            PH(ph_bind_key(e, k, dev, msg, sizeof msg));
            PH(ph_pass_use(e, p, u, msg, sizeof msg));
            fhr_check(fhr_use_end(use, FHR_OK, &err), &err, "use end");
            const fhr_report *rep = fhr_use_report(use);
            r->bytes[p] += fhr_report_bytes(rep, FHR_DIR_H2D);
            r->loads += fhr_report_count(rep, FHR_DIR_H2D);
            r->evictions += fhr_report_evictions(rep);
            r->waits += fhr_report_waits(rep);
            r->pass_waits[p] += fhr_report_waits(rep);
            if (u == 0)
                r->first_load[p] = fhr_report_count(rep, FHR_DIR_H2D) > 0;
            fhr_use_destroy(use);
            PH(ph_pass_after_use(e, p, msg, sizeof msg)); /* no key read: after the lease */
        }
        ev_rec(pev[p].a[PH_USES]);
        PH(ph_pass_end(e, p, msg, sizeof msg));
        ev_rec(pev[p].z);
        PH(ph_sync(msg, sizeof msg));
        r->pass_s[p] = now_s() - t0;
        pass_breakdown(p, 1, r);
    }
    sample_peaks(m, r);
    PH(ph_results(e, &r->words, &r->nwords, msg, sizeof msg));
    PH(ph_check_slots(e, &r->max_err, msg, sizeof msg));
    fhr_controller_destroy(c);
    fhr_policy_destroy(pol);
    fhr_manager_destroy(m);
}

static const char *verdict(int ok) { return ok ? "PASS" : "FAIL"; }

int main(int argc, char **argv)
{
    const char *outdir = getenv("OUT") ? getenv("OUT") : ".";
    char fheplan[2048];
    snprintf(fheplan, sizeof fheplan, "%s", argv[0]);
    char *slash = strrchr(fheplan, '/');
    if (slash)
        strcpy(slash + 1, "fheplan");
    else
        snprintf(fheplan, sizeof fheplan, "fheplan");
    int budgets[8] = {4, 8, 0}, nbudgets = 3, reps = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            outdir = argv[++i];
        } else if (!strcmp(argv[i], "--fheplan") && i + 1 < argc) {
            snprintf(fheplan, sizeof fheplan, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--budgets") && i + 1 < argc) {
            nbudgets = 0;
            for (char *t = strtok(argv[++i], ","); t && nbudgets < 8; t = strtok(NULL, ","))
                budgets[nbudgets++] = atoi(t);
        } else {
            fprintf(stderr, "usage: %s [--out DIR] [--fheplan PATH] [--budgets K,...] [--reps N]\n",
                    argv[0]);
            return 64;
        }
    }
    if (reps < 1)
        reps = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* line by line into a pipe too (gpu-run.sh tees) */
    events_create();
    ph_engine *e = NULL;
    double t0 = now_s();
    PH(ph_create(NCT, 20261201, &e, msg, sizeof msg));
    uint64_t key_bytes = ph_key_bytes(e);
    printf("phantom: context, %d keys of %.1f MiB, %d ciphertexts in %.2f s\n", PH_KEYS,
           (double)key_bytes / (1 << 20), NCT, now_s() - t0);
    double self_err;
    PH(ph_selftest(e, &self_err, msg, sizeof msg));
    printf("phantom: encrypt/decrypt/decode self-test: max error %.3g (%s)\n", self_err,
           verdict(self_err < TOLERANCE));
    double bw;
    PH(ph_pinned_bandwidth(key_bytes, 8, &bw, msg, sizeof msg));
    printf("pinned host -> cuda:0: %.2f GB/s (best of 8 copies of one key)\n", bw / 1e9);

    void *pinned[PH_KEYS];
    for (int k = 0; k < PH_KEYS; k++) {
        if (cudaHostAlloc(&pinned[k], key_bytes, cudaHostAllocDefault) != cudaSuccess) {
            fprintf(stderr, "phantom-bsgs: cudaHostAlloc of a key failed\n");
            return 2;
        }
        PH(ph_export_key(e, k, pinned[k], msg, sizeof msg));
    }

    /* Phantom's own resident keys: the reference results and the compute time. */
    run_out ref;
    memset(&ref, 0, sizeof ref);
    for (int rep = 0; rep < reps; rep++) {
        free(ref.words);
        run_resident(e, NULL, &ref);
    }
    printf("resident keys: pass times %.2f / %.2f ms, slots within %.3g of the host transform (%s)\n",
           ref.pass_s[0] * 1e3, ref.pass_s[1] * 1e3, ref.max_err, verdict(ref.max_err < TOLERANCE));
    /* The control: the same resident passes with a pass's worth of key copies running
     * beside them, fheplan out of the picture: what the copies alone cost the kernels. */
    copies_beside cb = {NULL, NULL, pinned, key_bytes};
    double slow_per_byte = 0, ctl_ms[PH_PASSES] = {0, 0};
    if (cudaStreamCreateWithFlags(&cb.st, cudaStreamNonBlocking) == cudaSuccess &&
        cudaMalloc(&cb.scratch, key_bytes) == cudaSuccess) {
        run_out ctl;
        memset(&ctl, 0, sizeof ctl);
        double extra = 0;
        for (int rep = 0; rep < reps; rep++) {
            free(ctl.words);
            run_resident(e, &cb, &ctl);
        }
        for (int p = 0; p < PH_PASSES; p++) {
            ctl_ms[p] = ctl.pass_s[p] * 1e3;
            extra += ctl.pass_s[p] - ref.pass_s[p];
        }
        slow_per_byte = extra / (PH_PASSES * (double)PH_KEYS * (double)key_bytes);
        printf("control, resident keys with %d key copies (%.2f GB) beside each pass on another "
               "stream, no fheplan: pass times %.2f / %.2f ms, %+.2f / %+.2f ms: the copies slow "
               "the kernels by %.2f ms per GB copied\n",
               PH_KEYS, PH_KEYS * (double)key_bytes / 1e9, ctl_ms[0], ctl_ms[1],
               ctl_ms[0] - ref.pass_s[0] * 1e3, ctl_ms[1] - ref.pass_s[1] * 1e3,
               slow_per_byte * 1e3 * 1e9);
        free(ctl.words);
        cudaFree(cb.scratch);
        cudaStreamDestroy(cb.st);
    } else {
        printf("control: no stream or scratch buffer for the copies (%s)\n",
               cudaGetErrorString(cudaGetLastError()));
    }
    PH(ph_release_keys(e, msg, sizeof msg));

    char path[4096];
    snprintf(path, sizeof path, "%s/results.json", outdir);
    FILE *js = fopen(path, "w");
    if (!js) {
        fprintf(stderr, "phantom-bsgs: cannot write %s\n", path);
        return 2;
    }
    fprintf(js, "{\"key_bytes\": %llu, \"pinned_gbps\": %.3f, \"resident_pass_ms\": [%.3f, %.3f],"
                " \"resident_max_err\": %.3g, \"control_pass_ms\": [%.3f, %.3f],"
                " \"copy_slowdown_ms_per_gb\": %.4f, \"budgets\": [",
            (unsigned long long)key_bytes, bw / 1e9, ref.pass_s[0] * 1e3, ref.pass_s[1] * 1e3,
            ref.max_err, ctl_ms[0], ctl_ms[1], slow_per_byte * 1e12);
    int all_ok = self_err < TOLERANCE && ref.max_err < TOLERANCE, all_exact = all_ok;
    for (int bi = 0; bi < nbudgets; bi++) {
        int nk = budgets[bi] > 0 && budgets[bi] < PH_KEYS ? budgets[bi] : PH_KEYS;
        char plan[2048];
        snprintf(plan, sizeof plan, "%s/bsgs-%dkeys.rplan", outdir, nk);
        double predicted = write_rplan(plan, key_bytes, nk) == 0 ? predicted_bytes(fheplan, plan) : -1;
        /* a backend per budget: its private pool's high-water mark is this budget's alone */
        fhr_backend *b = NULL;
        fhr_error err;
        fhr_error_init(&err);
        fhr_check(fhr_backend_cuda_create(&b, &err), &err, "cuda backend");
        fhr_stream *view = NULL; /* Phantom's stream: this thread's per-thread default stream */
        fhr_check(fhr_stream_wrap_cuda(b, 0, cudaStreamPerThread, &view, &err), &err, "wrap");
        run_out r;
        memset(&r, 0, sizeof r);
        for (int rep = 0; rep < reps; rep++) {
            free(r.words);
            /* the last repetition is the one reported; the pool's marks cover them all */
            run_streamed(e, b, view, pinned, key_bytes, nk, &r);
        }
        uint64_t budget = key_bytes * (uint64_t)nk, moved = r.bytes[0] + r.bytes[1];
        int same = r.nwords == ref.nwords && !memcmp(r.words, ref.words, r.nwords * sizeof *r.words);
        int slots_ok = r.max_err < TOLERANCE;
        int peak_ok = r.peak_charged <= budget && r.peak_pool <= budget;
        /* the pool maps whole granules: what it holds is what it hands out rounded up */
        uint64_t g = r.granule, held_limit = g ? (budget + g - 1) / g * g : budget;
        int held_ok = r.peak_reserved <= held_limit;
        int bytes_ok = predicted >= 0 && (double)moved == predicted;
        printf("\nbudget %d keys (%.2f GiB) on cuda:0:\n", nk, (double)budget / (1 << 30));
        printf("  results bit-identical to resident keys: %s\n", verdict(same));
        printf("  decrypted slots within %.3g of the host transform: %s\n", r.max_err, verdict(slots_ok));
        printf("  fheplan peak %.3f GiB charged, %.3f GiB handed out by its private pool at most; "
               "budget %.3f GiB: %s\n", (double)r.peak_charged / (1 << 30),
               (double)r.peak_pool / (1 << 30), (double)budget / (1 << 30), verdict(peak_ok));
        printf("  device memory the pool held at most: %.3f GiB, %.1f MiB %s the budget; it maps "
               "whole granules of %.0f MiB, so it holds at most the budget rounded up to one "
               "(%.3f GiB): %s\n", (double)r.peak_reserved / (1 << 30),
               fabs((double)r.peak_reserved - (double)budget) / (1 << 20),
               r.peak_reserved >= budget ? "above" : "below", (double)g / (1 << 20),
               (double)held_limit / (1 << 30), verdict(held_ok));
        printf("  bytes moved %llu (%llu loads, %llu evictions), fheplan check predicts %.0f: %s\n",
               (unsigned long long)moved, (unsigned long long)r.loads,
               (unsigned long long)r.evictions, predicted, verdict(bytes_ok));
        printf("  host waits the budget forced: %llu (no other host synchronisation between "
               "rotations)\n", (unsigned long long)r.waits);
        fprintf(js, "%s{\"keys\": %d, \"bit_identical\": %s, \"max_err\": %.3g, \"peak_charged\": %llu,"
                    " \"peak_pool\": %llu, \"peak_pool_held\": %llu, \"pool_granule\": %llu,"
                    " \"bytes\": %llu, \"predicted\": %.0f, \"loads\": %llu,"
                    " \"evictions\": %llu, \"waits\": %llu, \"passes\": [",
                bi ? ", " : "", nk, same ? "true" : "false", r.max_err,
                (unsigned long long)r.peak_charged, (unsigned long long)r.peak_pool,
                (unsigned long long)r.peak_reserved, (unsigned long long)g,
                (unsigned long long)moved, predicted, (unsigned long long)r.loads,
                (unsigned long long)r.evictions, (unsigned long long)r.waits);
        int ok = same && slots_ok && peak_ok && held_ok && bytes_ok;
        int exact = ok;
        for (int p = 0; p < PH_PASSES; p++) {
            double xfer = (double)r.bytes[p] / bw;
            double bound = ref.pass_s[p] > xfer ? ref.pass_s[p] : xfer;
            double ratio = r.pass_s[p] / bound;
            /* the pass's first key, when not resident, is copied before anything can run */
            double first = r.first_load[p] ? (double)key_bytes / bw : 0;
            double yard = ref.pass_s[p] + first > xfer ? ref.pass_s[p] + first : xfer;
            double ratio_exact = r.pass_s[p] / yard;
            printf("  pass %d: %.2f ms streamed, %.2f ms resident, %.2f ms of transfers: %.3fx the "
                   "bound: %s\n", p + 1, r.pass_s[p] * 1e3, ref.pass_s[p] * 1e3, xfer * 1e3, ratio,
                   verdict(ratio <= RATIO_LIMIT));
            printf("    %.3fx max(resident + %.2f ms for the first key, which nothing can hide, "
                   "transfers): %s\n", ratio_exact, first * 1e3, verdict(ratio_exact <= RATIO_LIMIT));
            /* and with what the control measured the same bytes cost the kernels */
            double slow = slow_per_byte * (double)r.bytes[p];
            double yard_ctl = ref.pass_s[p] + first + slow > xfer ? ref.pass_s[p] + first + slow : xfer;
            printf("    %.3fx max(resident + the first key + %.2f ms by which the control's copies "
                   "slow the kernels for these bytes, transfers)\n", r.pass_s[p] / yard_ctl,
                   slow * 1e3);
            double stall = 0, work = 0, work_ref = 0, most = 0;
            int most_u = 0, nstall = 0;
            for (int u = 0; u < PH_USES; u++) {
                stall += r.stall_ms[p][u];
                work += r.work_ms[p][u];
                work_ref += ref.work_ms[p][u];
                nstall += r.stall_ms[p][u] > 0.05;
                if (r.stall_ms[p][u] > most) {
                    most = r.stall_ms[p][u];
                    most_u = u;
                }
            }
            printf("    breakdown (GPU timing events): the GPU waited %.2f ms for keys (%d uses over "
                   "0.05 ms, at most %.2f ms before use %d); the uses' work took %.2f ms, %+.2f ms "
                   "against resident keys (%.2f ms per GB copied); pass begin and end %+.2f ms; "
                   "the host spent %.2f ms in fhr_use_begin (%llu forced waits)\n",
                   stall, nstall, most, most_u, work, work - work_ref,
                   r.bytes[p] ? (work - work_ref) / ((double)r.bytes[p] / 1e9) : 0.0,
                   r.edge_ms[p] - ref.edge_ms[p], r.host_wait_ms[p],
                   (unsigned long long)r.pass_waits[p]);
            printf("    per use, GPU wait + extra work (ms):");
            for (int u = 0; u < PH_USES; u++)
                printf(" %.2f+%.2f", r.stall_ms[p][u], r.work_ms[p][u] - ref.work_ms[p][u]);
            printf("\n");
            fprintf(js, "%s{\"ms\": %.3f, \"resident_ms\": %.3f, \"transfer_ms\": %.3f, \"bytes\": %llu,"
                        " \"ratio\": %.4f, \"first_load_ms\": %.3f, \"ratio_exact\": %.4f,"
                        " \"gpu_wait_ms\": %.3f, \"work_ms\": %.3f, \"resident_work_ms\": %.3f,"
                        " \"host_in_begin_ms\": %.3f, \"waits\": %llu, \"copy_slowdown_ms\": %.3f,"
                        " \"use_gpu_wait_ms\": [",
                    p ? ", " : "", r.pass_s[p] * 1e3, ref.pass_s[p] * 1e3, xfer * 1e3,
                    (unsigned long long)r.bytes[p], ratio, first * 1e3, ratio_exact, stall, work,
                    work_ref, r.host_wait_ms[p], (unsigned long long)r.pass_waits[p],
                    slow_per_byte * (double)r.bytes[p] * 1e3);
            for (int u = 0; u < PH_USES; u++)
                fprintf(js, "%s%.3f", u ? ", " : "", r.stall_ms[p][u]);
            fprintf(js, "], \"use_extra_work_ms\": [");
            for (int u = 0; u < PH_USES; u++)
                fprintf(js, "%s%.3f", u ? ", " : "", r.work_ms[p][u] - ref.work_ms[p][u]);
            fprintf(js, "]}");
            ok = ok && ratio <= RATIO_LIMIT;
            exact = exact && ratio_exact <= RATIO_LIMIT;
        }
        all_exact = all_exact && exact;
        fprintf(js, "]}");
        all_ok = all_ok && ok;
        free(r.words);
        fhr_stream_destroy(b, view);
        fhr_backend_destroy(b);
    }
    fprintf(js, "], \"all_pass\": %s, \"all_pass_exact_yardstick\": %s}\n",
            all_ok ? "true" : "false", all_exact ? "true" : "false");
    fclose(js);
    printf("\nall checks, times against the issue's bound: %s; against the exact yardstick "
           "(the first key's load added): %s (results in %s)\n", verdict(all_ok),
           verdict(all_exact), path);
    free(ref.words);
    for (int k = 0; k < PH_KEYS; k++)
        cudaFreeHost(pinned[k]);
    ph_destroy(e);
    return all_ok ? 0 : 1;
}
