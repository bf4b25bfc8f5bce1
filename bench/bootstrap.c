/* bench/bootstrap.c — the CKKS bootstrap key-streaming plan (plans/ckks-bootstrap.rplan)
 * under GPU budgets of 25, 50, 75 and 100% of its key set (100%: every key fits, from a
 * cold start), with 1 and 16 ciphertexts per key use, and at batch 1 also with the key
 * sequence run twice, under tiered LRU and lookahead with both objectives (bytes: MIN;
 * time: the modelled timeline, rplan_vm_opts.objective) and lookahead without prefetch,
 * in one run. Each cell against the yardsticks of the same run: max(compute, MIN's bytes
 * / pinned bandwidth); a proven lower bound on any schedule of that key sequence, exact
 * when every key fits (bench/schedule.c); MIN's feasible schedule; and the best known
 * schedule (the search over eviction decisions with the time objective). The time
 * objective's bytes are checked against its explain run (check's prediction). --trace
 * also reports the link's idle stretches from each run's trace. Needs a CUDA device (exit
 * 77 without one); `--device emu` runs it scaled down on the emulated device.
 * --spin US makes every key use one spin of US x batch microseconds (a modelled compute
 * the same for every key, as bench/torch_streamer.py's peer spins), --objective keeps
 * the lookahead rows of bytes and that objective, each row gives its time over its own
 * compute and the host's waits for bodies (those for the newest body: the device
 * drained), and --key-trace prints the key sequence the streamer replays. */
#include <cjson/cJSON.h>
#include "bench/plan_runner.h"
#include "bench/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 79
#define KEY_BYTES ((uint64_t)180 << 20)   /* switching_key(2^16, 44, 3) */
#define CT_BYTES ((uint64_t)45 << 20)     /* ciphertext(2^16, 44) */
#define WS_BYTES ((uint64_t)150 << 20)    /* keyswitch_workspace(2^16, 44, 3) */

/* The plan with BATCH set to `batch` (the constant's line is replaced). */
static char *with_batch(const char *src, int batch)
{
    const char *k = strstr(src, "const BATCH = ");
    if (!k)
        return NULL;
    const char *eol = strchr(k, '\n');
    size_t n = strlen(src) + 32;
    char *out = malloc(n);
    if (!out || !eol)
        return free(out), NULL;
    snprintf(out, n, "%.*sconst BATCH = %d%s", (int)(k - src), src, batch, eol);
    return out;
}

/* --spin US: the plan with every key use's body one spin of `ns` nanoseconds (the
 * modelled compute of a use, the same for every key; verify and ckks.keyswitch go). */
static char *with_spin(const char *src, uint64_t ns)
{
    size_t n = strlen(src);
    char *out = malloc(2 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *l = src; *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l + 1) : strlen(l);
        const char *ks = strstr(l, "run ckks.keyswitch(");
        const char *vf = strstr(l, "run verify(");
        const char *cc = strstr(l, "check-ciphertext");
        if (ks && ks < l + len) {
            const char *close = strchr(ks, ')');
            o += sprintf(o, "%.*srun spin(%llu ns)%.*s", (int)(ks - l), l, (unsigned long long)ns,
                         (int)(l + len - close - 1), close + 1);
        } else if (!(vf && vf < l + len && !(cc && cc < l + len))) {
            memcpy(o, l, len);
            o += len;
        }
        l += len;
    }
    *o = '\0';
    return out;
}

/* The plan with its key sequence run twice: the stages from CoeffToSlot to SlotToCoeff in
 * a loop of two passes (the ciphertext stays on the device between them). */
static char *twice(const char *src)
{
    const char *a = strstr(src, "  stage \"CoeffToSlot\""), *b = strstr(src, "  plan \"teardown\"");
    if (!a || !b || b < a)
        return NULL;
    size_t n = strlen(src) + 64;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%.*s  for pass in 0..1 {\n%.*s  }\n\n%s", (int)(a - src), src,
                 (int)(b - a), a, b);
    return out;
}

typedef struct result {
    int ok;
    uint64_t waits[RPLAN_WAITS]; /* the host's waits for bodies in flight, by reason */
    double wait_s[RPLAN_WAITS];
    uint64_t drained;            /* of them, for the newest body (the device drained) */
    double drained_s;
    double time_s, body_s, pinned_gbps, model_body_s;
    double timeline_s, timeline_idle_s; /* objective time: the modelled timeline */
    double link_busy_s, link_idle_s, link_ready_s; /* the report's link figures (inspect) */
    double link_gbps;                   /* bytes onto the device / link_busy_s */
    double idle_max_s, idle_sum_s;      /* --trace: the link's longest idle stretch and all of
                                           them, from its first transfer to its last */
    int has_idle;
    uint64_t moved; /* bytes over PCIe (h2d + d2h + loads onto the device) */
    sched_out y;    /* yardsticks from this run's key sequence, bodies and bandwidth */
    int has_y;
    sched_out yl;   /* the yardsticks at the run's own busy-link rate */
    int has_yl;
    int objective;  /* the objective the run took (auto: its choice) */
} result;

/* The yardsticks of one run (bench/schedule.c): its requests in program order, each the
 * key it needs on the device and the mean body time of its stage in this run. */
static int yardsticks(const rplan_program *p, const rplan_vm_report *rep, uint64_t budget,
                      uint64_t scale, double gbps, sched_out *y)
{
    size_t n = rplan_ninstrs(p), nuse = 0;
    uint32_t *key = malloc((n ? n : 1) * sizeof *key);
    double *body = malloc((n ? n : 1) * sizeof *body);
    char path[160] = "";
    int rc = -1;
    if (!key || !body || gbps <= 0)
        goto done;
    double bw = gbps * 1e9;
    for (size_t i = 0; i < n; i++) {
        rplan_instr in;
        if (rplan_instr_get(p, i, &in) != FHR_OK)
            goto done;
        const char *op = rplan_opcode_name(in.op);
        if (!strcmp(op, "stage")) {
            size_t len = strlen(path);
            snprintf(path + len, sizeof path - len, "%s%s", len ? "/" : "", in.str);
        } else if (!strcmp(op, "endstage")) {
            char *slash = strrchr(path, '/');
            *(slash ? slash : path) = '\0';
        } else if (!strcmp(op, "request")) {
            key[nuse] = SCHED_NO_KEY;
            body[nuse] = 0;
            for (size_t s = 0; s < rep->nstages; s++)
                if (!strcmp(rep->stages[s].name, path) && rep->stages[s].requests)
                    body[nuse] = (rep->explain ? rep->stages[s].model_body_s : rep->stages[s].body_s) /
                                 (double)rep->stages[s].requests;
            nuse++;
        } else if (!strcmp(op, "require") && nuse && in.loc.kind == FHR_LOC_CUDA) {
            rplan_value_info vi;
            if (rplan_value(p, in.value, &vi) == FHR_OK && vi.nbytes == KEY_BYTES)
                key[nuse - 1] = in.value;
        }
    }
    uint64_t room = budget > CT_BYTES + WS_BYTES ? budget - CT_BYTES - WS_BYTES : 0;
    sched_in si = {key, body, nuse, (size_t)(room / KEY_BYTES), (double)KEY_BYTES / scale / bw,
                   (double)CT_BYTES / scale / bw, (double)CT_BYTES / scale / bw, 0};
    rc = sched_yardsticks(&si, y);
    if (rc == 0 && (y->bound_s > y->best_s * (1 + 1e-9) ||
                    y->bound_s > y->search_s * (1 + 1e-9) ||
                    (y->exact && y->best_s > y->bound_s * (1 + 1e-9)))) {
        fprintf(stderr, "bootstrap bench: yardsticks disagree (bound %.6f, schedule %.6f, "
                "search %.6f)\n", y->bound_s, y->best_s, y->search_s);
        rc = -1;
    }
done:
    free(key);
    free(body);
    return rc;
}

/* The idle stretches of cuda:0's transfer stream in the run's trace: the gaps between its
 * transfer slices, from the first to the last. 0, or -1 without a trace. */
static int link_idle(const rplan_vm *vm, double *max_s, double *sum_s)
{
    char *js = rplan_vm_trace_json(vm);
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    free(js);
    cJSON *ev = j ? cJSON_GetObjectItem(j, "traceEvents") : NULL;
    if (!ev && cJSON_IsArray(j))
        ev = j;
    if (!ev) {
        cJSON_Delete(j);
        return -1;
    }
    double tid = -1;
    cJSON *e;
    cJSON_ArrayForEach(e, ev) {
        cJSON *ph = cJSON_GetObjectItem(e, "ph"), *args = cJSON_GetObjectItem(e, "args");
        cJSON *nm = args ? cJSON_GetObjectItem(args, "name") : NULL;
        if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "M") && cJSON_IsString(nm) &&
            !strncmp(nm->valuestring, "cuda:0 transfer stream", 22))
            tid = cJSON_GetObjectItem(e, "tid")->valuedouble;
    }
    size_t n = 0, cap = (size_t)cJSON_GetArraySize(ev);
    double (*w)[2] = malloc((cap ? cap : 1) * sizeof *w);
    if (!w) {
        cJSON_Delete(j);
        return -1;
    }
    cJSON_ArrayForEach(e, ev) {
        cJSON *ph = cJSON_GetObjectItem(e, "ph"), *t = cJSON_GetObjectItem(e, "tid");
        if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "X") && cJSON_IsNumber(t) &&
            t->valuedouble == tid) {
            double ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
            w[n][0] = ts * 1e-6;
            w[n++][1] = (ts + cJSON_GetObjectItem(e, "dur")->valuedouble) * 1e-6;
        }
    }
    for (size_t a = 1; a < n; a++) /* by start (insertion: the trace is nearly sorted) */
        for (size_t b = a; b > 0 && w[b][0] < w[b - 1][0]; b--) {
            double t0 = w[b][0], t1 = w[b][1];
            w[b][0] = w[b - 1][0], w[b][1] = w[b - 1][1];
            w[b - 1][0] = t0, w[b - 1][1] = t1;
        }
    *max_s = *sum_s = 0;
    double busy = n ? w[0][1] : 0;
    for (size_t a = 1; a < n; a++) {
        if (w[a][0] > busy) {
            double gap = w[a][0] - busy;
            *sum_s += gap;
            if (gap > *max_s)
                *max_s = gap;
        }
        if (w[a][1] > busy)
            busy = w[a][1];
    }
    free(w);
    cJSON_Delete(j);
    return 0;
}

/* What a run's report and trace give beyond the figures: the yardsticks (runs, and explain
 * runs with a profile) and the link's idle stretches (runs with a trace). */
typedef struct inspect_ctx {
    uint64_t budget, scale;
    int yard, trace;
    result *r;
} inspect_ctx;

static int inspect(void *ctx, const rplan_program *p, const rplan_vm_report *rep,
                   const rplan_vm *vm)
{
    inspect_ctx *c = ctx;
    if (c->trace)
        c->r->has_idle = link_idle(vm, &c->r->idle_max_s, &c->r->idle_sum_s) == 0;
    if (c->yard)
        c->r->has_y = yardsticks(p, rep, c->budget, c->scale, rep->pinned_gbps, &c->r->y) == 0;
    /* the same yardsticks at the rate the run's own transfers ran at while the link was
     * busy: the start-of-run measurement can catch the link in a slower or faster moment */
    uint64_t onto = rep->total.bytes[FHR_DIR_H2D] + rep->total.load_h2d_bytes;
    for (int w = 0; w < RPLAN_WAITS; w++) {
        c->r->waits[w] = rep->host_waits[w];
        c->r->wait_s[w] = rep->host_wait_s[w];
    }
    c->r->drained = rep->host_waits_drained;
    c->r->drained_s = rep->host_wait_drained_s;
    c->r->link_busy_s = rep->link_busy_s;
    c->r->link_idle_s = rep->link_idle_s;
    c->r->link_ready_s = rep->link_ready_idle_s;
    c->r->link_gbps = rep->link_busy_s > 0 ? (double)onto / rep->link_busy_s / 1e9 : 0;
    if (c->yard && !rep->explain && rep->link_busy_s > 0 && onto)
        c->r->has_yl = yardsticks(p, rep, c->budget, c->scale, c->r->link_gbps, &c->r->yl) == 0;
    return 0;
}

/* The host's waits for bodies in flight, as "m12:3.4" (reason letter: b the prefetch bound,
 * m MIN's victim, r room, s settled, then d: those of them for the newest body, which
 * drain the device; count, then ms), or "-" for none. */
static const char *waits_text(const result *r, char *buf, size_t n)
{
    static const char letter[RPLAN_WAITS] = {'b', 'm', 'r', 's'};
    size_t k = 0;
    buf[0] = '\0';
    for (int w = 0; w < RPLAN_WAITS && k < n; w++)
        if (r->waits[w])
            k += (size_t)snprintf(buf + k, n - k, "%s%c%llu:%.1f", k ? "," : "", letter[w],
                                  (unsigned long long)r->waits[w], r->wait_s[w] * 1e3);
    if (r->drained && k < n)
        snprintf(buf + k, n - k, ",d%llu:%.1f", (unsigned long long)r->drained,
                 r->drained_s * 1e3);
    return k ? buf : "-";
}

/* --key-trace: the key each request of the table's part needs on the device, one program
 * value index a line ("-" for a request without a key), from the compiled program. */
static int print_keys(void *ctx, const rplan_program *p, const rplan_vm_report *rep,
                      const rplan_vm *vm)
{
    (void)ctx, (void)rep, (void)vm;
    size_t n = rplan_ninstrs(p);
    long key = -2;
    for (size_t i = 0; i < n; i++) {
        rplan_instr in;
        if (rplan_instr_get(p, i, &in) != FHR_OK)
            return -1;
        const char *op = rplan_opcode_name(in.op);
        rplan_value_info vi;
        if (!strcmp(op, "request")) {
            if (key == -1)
                printf("-\n");
            else if (key >= 0)
                printf("%ld\n", key);
            key = -1;
        } else if (!strcmp(op, "require") && key == -1 && in.loc.kind == FHR_LOC_CUDA &&
                   rplan_value(p, in.value, &vi) == FHR_OK && vi.nbytes == KEY_BYTES) {
            key = (long)in.value;
        }
    }
    if (key == -1)
        printf("-\n");
    else if (key >= 0)
        printf("%ld\n", key);
    return 0;
}

#define MAX_REPS 9

/* The index of the run of median time (the upper one of the two for an even count). */
static int median_run(const result *rr, int n)
{
    int ord[MAX_REPS] = {0};
    for (int i = 0; i < n; i++)
        ord[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && rr[ord[j]].time_s < rr[ord[j - 1]].time_s; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    return ord[n / 2];
}

static int run_one(const char *src, fhr_backend *b, const char *devname, uint64_t budget,
                   int policy, int serial, int objective, int explain, int trace, uint64_t scale,
                   const double profile[2], result *r)
{
    memset(r, 0, sizeof *r);
    fhr_budget bud = {fhr_loc_cuda(0), budget};
    bench_run_opts o = {.filename = "ckks-bootstrap.rplan", .budget = &bud, .explain = explain,
                        .scale = scale, .policy = policy, .serial = serial,
                        .objective = objective, .profile = profile, .trace = trace};
    inspect_ctx ic = {budget, scale, !explain || profile, trace && !explain, r};
    bench_figures f;
    int rc = bench_run_plan("bootstrap bench", devname, src, b, &o, &f, inspect, &ic);
    r->ok = f.ok;
    r->time_s = f.time_s;
    r->body_s = f.body_s;
    r->model_body_s = f.model_body_s;
    r->pinned_gbps = f.pinned_gbps;
    r->moved = f.pcie;
    r->timeline_s = f.timeline_s;
    r->timeline_idle_s = f.timeline_idle_s;
    r->objective = f.objective;
    return rc;
}

/* --model: no device; each cell's explain runs under both objectives with the profile
 * given (default 55.5 GB/s pinned, the kernel model at 3000 GB/s): their modelled
 * timelines (time, the link's longest idle stretch; plus the ciphertext's two trips, which
 * the timeline leaves out) against the yardsticks computed from the modelled bodies.
 * Deterministic: what `fheplan check --objective` reports per cell. */
/* --keys, --batch, --sequence: the cells to run (every one by default), so that the table
 * can be run in parts: the key sets 25, 50, 75, 100%; batch 1, 16; the sequence once,
 * twice */
static int keys_on[4] = {1, 1, 1, 1}, batch_on[2] = {1, 1}, seq_on[2] = {1, 1};

/* Whether part bi of the table is asked for: 0 and 1 are batch 1 and 16 through the
 * sequence once, 2 is batch 1 through it twice. */
static int part_on(size_t bi)
{
    return batch_on[bi % 2] && seq_on[bi == 2];
}

/* --spin US: each key use's body spins US microseconds per ciphertext of the batch */
static double spin_us;

/* The plan of part bi (see part_on) at `batch`: with --spin its bodies spin (divided by
 * the run's scale, as its copies are), and part 2 runs the key sequence twice. */
static char *part_plan(const char *src, size_t bi, int batch, uint64_t scale)
{
    char *s1 = with_batch(src, batch);
    if (s1 && spin_us > 0) {
        uint64_t ns = (uint64_t)(spin_us * 1e3 * batch / (double)(scale ? scale : 1) + 0.5);
        char *s2 = with_spin(s1, ns ? ns : 1);
        free(s1);
        s1 = s2;
    }
    char *s = bi < 2 || !s1 ? s1 : twice(s1);
    if (s != s1)
        free(s1);
    return s;
}

static int model_table(const char *src, const double profile[2])
{
    const int pct[] = {25, 50, 75, 100}, batch[] = {1, 16};
    printf("%-4s %-5s %-5s %10s %8s %9s %9s %9s %9s %9s %9s %9s %8s %8s\n", "keys", "batch",
           "seq", "MIN GiB", "time/MIN", "bytes ms", "idle ms", "time ms", "idle ms", "lower ms",
           "sched ms", "best ms", "bytes/b", "time/b");
    int fails = 0;
    for (size_t bi = 0; bi < 3; bi++) {
        if (!part_on(bi))
            continue;
        char *s = part_plan(src, bi, batch[bi % 2], 1);
        for (size_t pi = 0; s && pi < 4; pi++) {
            if (!keys_on[pi])
                continue;
            uint64_t budget = (uint64_t)KEYS * KEY_BYTES * (uint64_t)pct[pi] / 100 + CT_BYTES + WS_BYTES;
            result rb, rt;
            if (run_one(s, NULL, "model", budget, RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_BYTES,
                        1, 0, 1, profile, &rb) ||
                run_one(s, NULL, "model", budget, RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_TIME,
                        1, 0, 1, profile, &rt) || !rb.has_y) {
                fails++;
                continue;
            }
            double best = rb.y.search_s < rb.y.best_s ? rb.y.search_s : rb.y.best_s;
            /* the timeline leaves out the ciphertext's trips, the yardsticks' lead and tail */
            double ct = 2.0 * (double)CT_BYTES / (profile[0] * 1e9);
            rb.timeline_s += ct;
            rt.timeline_s += ct;
            printf("%3d%% %5d %-5s %10.2f %8.3f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f%s %8.3f "
                   "%8.3f\n", pct[pi], batch[bi % 2], bi < 2 ? "once" : "twice",
                   (double)rb.moved / (1 << 30), rb.moved ? (double)rt.moved / (double)rb.moved : 0,
                   rb.timeline_s * 1e3, rb.timeline_idle_s * 1e3, rt.timeline_s * 1e3,
                   rt.timeline_idle_s * 1e3, rb.y.bound_s * 1e3, rb.y.best_s * 1e3, best * 1e3,
                   rb.y.search_exact ? "=" : " ", rb.timeline_s / best, rt.timeline_s / best);
            fflush(stdout);
        }
        free(s);
    }
    return fails ? 1 : 0;
}

/* "25,75" -> on[] = {1, 0, 1, 0} for the key sets 25, 50, 75, 100%; 0 (on[] untouched)
 * for anything else, an empty item included */
static int cell_list(const char *v, int on[4])
{
    static const char *const names[4] = {"25", "50", "75", "100"};
    int got[4] = {0, 0, 0, 0};
    for (const char *w = v;;) {
        size_t len = strcspn(w, ",");
        int k = 0;
        while (k < 4 && !(strlen(names[k]) == len && strncmp(w, names[k], len) == 0))
            k++;
        if (k == 4)
            return 0;
        got[k] = 1;
        if (!w[len])
            break;
        w += len + 1;
    }
    memcpy(on, got, sizeof got);
    return 1;
}

/* One row of the table: its cell, mode and figures. */
typedef struct row_ctx {
    int pct, batch;
    const char *mode;
    int objective, timeobj, predicts, same;
    const result *r, *min, *pred;
    double bound, ratio, over;
    const double *profile;
    const char *seq;
} row_ctx;

static void print_row_json(const row_ctx *c, int first)
{
    const result *r = c->r;
    double best = r->y.search_s < r->y.best_s ? r->y.search_s : r->y.best_s;
    char wt[96];
    double best_l = r->yl.search_s < r->yl.best_s ? r->yl.search_s : r->yl.best_s;
    double over_l = r->has_yl && best_l > 0 ? r->time_s / best_l : 0;
    printf("%s\n {\"key_set_pct\": %d, \"batch\": %d, \"policy\": \"%s\", "
           "\"objective\": \"%s\", "
           "\"time_s\": %.6f, \"compute_s\": %.6f, \"bound_s\": %.6f, "
           "\"ratio\": %.4f, \"bytes_moved\": %llu, \"min_bytes\": %llu, "
           "\"bytes_over_min\": %.4f, \"predicted_bytes\": %llu, "
           "\"pinned_gbps\": %.2f, "
           "\"lower_bound_s\": %.6f, \"lower_bound_exact\": %s, "
           "\"schedule_s\": %.6f, \"best_known_s\": %.6f, \"search_exact\": %s, "
           "\"search_loads\": %llu, \"min_loads\": %llu, "
           "\"schedule_idle_s\": %.6f, \"best_known_idle_s\": %.6f, "
           "\"time_over_lower\": %.4f, \"time_over_schedule\": %.4f, "
           "\"time_over_best_known\": %.4f, \"link_idle_max_s\": %.6f, "
           "\"link_idle_sum_s\": %.6f, \"timeline_s\": %.6f, "
           "\"timeline_idle_s\": %.6f, \"model_pinned_gbps\": %.2f, "
           "\"model_device_gbps\": %.1f, \"link_busy_s\": %.6f, "
           "\"link_idle_s\": %.6f, \"link_ready_idle_s\": %.6f, "
           "\"link_busy_gbps\": %.2f, \"best_known_at_link_s\": %.6f, "
           "\"time_over_best_known_at_link\": %.4f, \"time_over_compute\": %.4f, "
           "\"spin_us\": %.3f, \"host_waits\": \"%s\", \"sequence\": \"%s\"}",
           first ? "" : ",", c->pct, c->batch, c->mode,
           c->objective == RPLAN_OBJECTIVE_AUTO
               ? (r->objective == RPLAN_OBJECTIVE_TIME ? "auto: time" : "auto: bytes")
           : c->timeobj ? "time" : "bytes", r->time_s,
           r->body_s, c->bound, c->ratio, (unsigned long long)r->moved,
           (unsigned long long)c->min->moved, c->over,
           (unsigned long long)(c->timeobj ? c->pred->moved : c->min->moved), r->pinned_gbps,
           r->y.bound_s, r->y.exact ? "true" : "false", r->y.best_s, best,
           r->y.search_exact ? "true" : "false",
           (unsigned long long)r->y.search_loads, (unsigned long long)r->y.min_loads,
           r->y.min_idle_s, r->y.search_idle_s,
           r->has_y ? r->time_s / r->y.bound_s : 0,
           r->has_y ? r->time_s / r->y.best_s : 0, r->has_y ? r->time_s / best : 0,
           r->has_idle ? r->idle_max_s : -1, r->has_idle ? r->idle_sum_s : -1,
           r->timeline_s, r->timeline_idle_s, c->timeobj ? c->profile[0] : 0,
           c->timeobj ? c->profile[1] : 0, r->link_busy_s, r->link_idle_s, r->link_ready_s,
           r->link_gbps,
           r->has_yl ? best_l : 0, over_l,
           r->body_s > 0 ? r->time_s / r->body_s : 0, spin_us,
           waits_text(r, wt, sizeof wt), c->seq);
}

static void print_row_text(const row_ctx *c)
{
    const result *r = c->r;
    double best = r->y.search_s < r->y.best_s ? r->y.search_s : r->y.best_s;
    char wt[96];
    double best_l = r->yl.search_s < r->yl.best_s ? r->yl.search_s : r->yl.best_s;
    double over_l = r->has_yl && best_l > 0 ? r->time_s / best_l : 0;
    char nm[40];
    snprintf(nm, sizeof nm, "%s%s", c->mode,
             c->objective != RPLAN_OBJECTIVE_AUTO ? ""
             : r->objective == RPLAN_OBJECTIVE_TIME       ? ": time"
                                                         : ": bytes");
    printf("%3d%% %5d %-22s %9.2f %9.2f %9.2f %7.3f %9.2f %7.3f %8.2f%s %9.2f "
           "%8.2f%s %7.3f %7.3f %7.3f %7s %8.2f %8.2f %6.2f %6.1f %7.3f %6.3f %s %s\n", c->pct,
           c->batch, nm, r->time_s * 1e3, r->body_s * 1e3,
           c->bound * 1e3, c->ratio, (double)r->moved / (1 << 30), c->over,
           r->y.bound_s * 1e3, r->y.exact ? "=" : " ", r->y.best_s * 1e3,
           best * 1e3, r->y.search_exact ? "=" : " ",
           r->has_y ? r->time_s / r->y.bound_s : 0,
           r->has_y ? r->time_s / r->y.best_s : 0, r->has_y ? r->time_s / best : 0,
           c->predicts ? (c->same ? "yes" : "NO") : "-",
           r->has_idle ? r->idle_max_s * 1e3 : -1,
           c->timeobj ? r->timeline_s * 1e3 : -1,
           r->time_s > 0 ? 100 * r->link_ready_s / r->time_s : 0,
           r->link_gbps, over_l, r->body_s > 0 ? r->time_s / r->body_s : 0,
           c->seq, waits_text(r, wt, sizeof wt));
}

/* What main's options ask of each cell. */
typedef struct bench_opts {
    const char *dev;
    int json, trace, reps, lookahead_only, only_objective;
} bench_opts;

/* The rows of one cell (a key budget and batch): every policy and objective asked for,
 * each the median of bo->reps runs, beside min (the explain run's MIN). The failures. */
static int run_modes(const bench_opts *bo, fhr_backend *b, const char *s, uint64_t budget,
                     uint64_t scale, const result *min, int pct, int batch, const char *seq,
                     int *first)
{
    struct { int policy, serial, objective; const char *name; } modes[] = {
        {RPLAN_POLICY_TIERED_LRU, 0, RPLAN_OBJECTIVE_BYTES, "tiered_lru"},
        {RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_BYTES, "lookahead"},
        {RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_TIME, "lookahead, time"},
        {RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_AUTO, "lookahead, auto"},
        {RPLAN_POLICY_LOOKAHEAD, 1, RPLAN_OBJECTIVE_BYTES, "lookahead, no prefetch"},
    };
    const size_t nmodes = sizeof modes / sizeof modes[0];
    int fails = 0;
    result pred;
    /* the time objective's profile, from this cell's lookahead run (bytes): its
     * measured pinned bandwidth, and the kernel model's device rate scaled so that
     * the modelled bodies take the measured body time */
    double profile[2] = {0, 0};
    for (size_t mi = 0; mi < nmodes; mi++) {
        result r;
        /* time and auto: both follow the model, and check predicts their bytes */
        int timeobj = modes[mi].objective != RPLAN_OBJECTIVE_BYTES;
        if (bo->lookahead_only && (modes[mi].policy != RPLAN_POLICY_LOOKAHEAD || modes[mi].serial))
            continue;
        /* --objective: its lookahead row, after the bytes one (the profile's) */
        if (bo->only_objective >= 0 && (modes[mi].policy != RPLAN_POLICY_LOOKAHEAD ||
                                    modes[mi].serial ||
                                    (modes[mi].objective != bo->only_objective &&
                                     modes[mi].objective != RPLAN_OBJECTIVE_BYTES)))
            continue;
        if (timeobj && (profile[0] <= 0 || profile[1] <= 0 ||
                        run_one(s, b, bo->dev, budget, RPLAN_POLICY_LOOKAHEAD, 0,
                                modes[mi].objective, 1, 0, scale, profile, &pred) != 0)) {
            fails++;
            continue;
        }
        /* --bo->reps N: the row is the run of median time among N in a row (its own
         * bodies, bandwidth and yardsticks) */
        static result rr[MAX_REPS];
        int bad = 0;
        for (int k = 0; k < bo->reps && !bad; k++)
            bad = run_one(s, b, bo->dev, budget, modes[mi].policy, modes[mi].serial,
                          modes[mi].objective, 0, bo->trace, scale, timeobj ? profile : NULL,
                          &rr[k]) != 0;
        if (bad) {
            fails++;
            continue;
        }
        r = rr[median_run(rr, bo->reps)];
        if (modes[mi].policy == RPLAN_POLICY_LOOKAHEAD && !timeobj && !modes[mi].serial &&
            r.body_s > 0 && r.model_body_s > 0) {
            profile[0] = r.pinned_gbps;
            profile[1] = bench_device_gbps(r.body_s, r.model_body_s);
        }
        double tb = r.pinned_gbps > 0 ? (double)min->moved / (r.pinned_gbps * 1e9) : 0;
        double bound = r.body_s > tb ? r.body_s : tb;
        double ratio = bound > 0 ? r.time_s / bound : 0;
        double over = min->moved ? (double)r.moved / (double)min->moved : 0;
        /* the time objective's bytes equal its explain run's (check's prediction) */
        /* (auto that kept bytes: MIN's prediction, which prefetch's double
         * buffering may exceed by a few loads, as for the bytes objective) */
        int predicts = timeobj && r.objective == RPLAN_OBJECTIVE_TIME;
        int same = !predicts || r.moved == pred.moved;
        if (!same) {
            fprintf(stderr, "bootstrap bench: %d%% batch %d %s: the run moved %llu bytes, "
                    "check predicted %llu\n", pct, batch, seq,
                    (unsigned long long)r.moved, (unsigned long long)pred.moved);
            fails++;
        }
        row_ctx rc = {pct, batch, modes[mi].name, modes[mi].objective,
                      timeobj, predicts, same, &r, min, &pred, bound, ratio, over,
                      profile, seq};
        if (bo->json)
            print_row_json(&rc, *first);
        else
            print_row_text(&rc);
        fflush(stdout);
        *first = 0;
    }
    return fails;
}

int main(int argc, char **argv)
{
    const char *plan = "plans/ckks-bootstrap.rplan", *dev = "cuda";
    int only_objective = -1; /* --objective: the lookahead rows of bytes and that one */
    int json = 0, trace = 0, model = 0, key_trace = 0, print_plan = 0, lookahead_only = 0, reps = 1;
    double mprofile[2] = {55.5, 3000};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--model"))
            model = 1;
        else if (!strcmp(argv[i], "--key-trace"))
            key_trace = 1;
        else if (!strcmp(argv[i], "--print-plan"))
            print_plan = 1;
        else if ((!strcmp(argv[i], "--pinned-gbps") || !strcmp(argv[i], "--device-gbps")) &&
                 i + 1 < argc && atof(argv[i + 1]) > 0)
            mprofile[argv[i][2] == 'd'] = atof(argv[i + 1]), i++;
        else if (!strcmp(argv[i], "--objective") && i + 1 < argc &&
                 (only_objective = !strcmp(argv[i + 1], "bytes") ? RPLAN_OBJECTIVE_BYTES
                                   : !strcmp(argv[i + 1], "time") ? RPLAN_OBJECTIVE_TIME
                                   : !strcmp(argv[i + 1], "auto") ? RPLAN_OBJECTIVE_AUTO
                                                                  : -1) >= 0)
            i++;
        else if (!strcmp(argv[i], "--lookahead-only"))
            lookahead_only = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= MAX_REPS)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spin") && i + 1 < argc && atof(argv[i + 1]) > 0)
            spin_us = atof(argv[++i]);
        else if (!strcmp(argv[i], "--trace"))
            trace = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev = argv[++i];
        else if (!strcmp(argv[i], "--plan") && i + 1 < argc)
            plan = argv[++i];
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc && cell_list(argv[++i], keys_on))
            ;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "1") || !strcmp(argv[i + 1], "16")))
            batch_on[0] = argv[i + 1][1] == 0, batch_on[1] = !batch_on[0], i++;
        else if (!strcmp(argv[i], "--sequence") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "once") || !strcmp(argv[i + 1], "twice")))
            seq_on[0] = argv[i + 1][0] == 'o', seq_on[1] = !seq_on[0], i++;
        else {
            fprintf(stderr, "usage: bootstrap [--device cuda|emu] [--plan FILE] [--trace] [--json]\n"
                            "                 [--lookahead-only] [--reps N (1..9)]\n"
                            "                 [--keys P[,P...] (of 25,50,75,100)] [--batch 1|16]\n"
                            "                 [--sequence once|twice] [--spin US] [--objective bytes|time|auto]\n"
                            "       bootstrap --model [--pinned-gbps X] [--device-gbps X] [--plan FILE]\n"
                            "       bootstrap --key-trace [--batch 1|16] [--plan FILE]\n"
                            "       bootstrap --print-plan [--batch 1|16] [--spin US] [--plan FILE]\n");
            return 2;
        }
    }
    char *src = bench_slurp(plan);
    if (!src) {
        fprintf(stderr, "bootstrap: cannot read %s\n", plan);
        return 2;
    }
    if (print_plan) { /* the plan a cell runs, for a peer that runs it itself */
        char *s = part_plan(src, batch_on[0] ? 0 : 1, batch_on[0] ? 1 : 16, 1);
        if (s)
            fputs(s, stdout);
        free(s);
        free(src);
        return s ? 0 : 1;
    }
    if (key_trace) {
        char *s = part_plan(src, batch_on[0] ? 0 : 1, batch_on[0] ? 1 : 16, 1);
        bench_run_opts o = {.filename = "ckks-bootstrap.rplan", .explain = 1, .scale = 1};
        bench_figures f;
        int rc = s ? bench_run_plan("bootstrap bench", "model", s, NULL, &o, &f, print_keys, NULL)
                   : -1;
        free(s);
        free(src);
        return rc ? 1 : 0;
    }
    if (model) {
        int rc = model_table(src, mprofile);
        free(src);
        return rc;
    }
    fhr_backend *b = NULL;
    fhr_error e;
    fhr_error_init(&e);
    if (fhr_backend_open(dev, &b, &e) != FHR_OK) {
        fprintf(stderr, "bootstrap: no %s device: %s\n", dev, e.message);
        free(src);
        return 77;
    }
    uint64_t scale = strcmp(b->ops->name, "cuda") == 0 ? 1 : 64;
    const int pct[] = {25, 50, 75, 100}, batch[] = {1, 16};
    bench_opts bo = {dev, json, trace, reps, lookahead_only, only_objective};
    if (!json)
        printf("%-4s %-5s %-22s %9s %9s %9s %7s %9s %7s %9s %9s %9s %7s %7s %7s %7s %8s %8s "
               "%6s %6s %7s %6s %s %s\n",
               "keys", "batch", "policy", "time ms", "compute", "bound ms", "ratio", "moved GiB",
               "/MIN", "lower ms", "sched ms", "best ms", "/lower", "/sched", "/best", "=check",
               "idle ms", "model ms", "rdy %", "link", "/bst@lk", "/comp", "sequence", "waits");
    else
        printf("[");
    int first = 1, fails = 0;
    /* batch 1 and 16 once through the sequence; batch 1 also twice through it */
    for (size_t bi = 0; bi < 3; bi++) {
        if (!part_on(bi))
            continue;
        char *s = part_plan(src, bi, batch[bi % 2], scale);
        const char *seq = bi < 2 ? "once" : "twice";
        for (size_t pi = 0; s && pi < 4; pi++) {
            if (!keys_on[pi])
                continue;
            uint64_t budget = (uint64_t)KEYS * KEY_BYTES * (uint64_t)pct[pi] / 100 + CT_BYTES + WS_BYTES;
            result min; /* the explain run: MIN's bytes */
            if (run_one(s, b, dev, budget, RPLAN_POLICY_LOOKAHEAD, 0, RPLAN_OBJECTIVE_BYTES, 1, 0,
                        scale, NULL, &min) != 0) {
                fails++;
                continue;
            }
            fails += run_modes(&bo, b, s, budget, scale, &min, pct[pi], batch[bi % 2], seq,
                               &first);
        }
        free(s);
    }
    if (json)
        printf("\n]\n");
    fhr_backend_destroy(b);
    free(src);
    return fails ? 1 : 0;
}
