/* tests/unit/test_lookahead_cli.c — the plan's known future through the command line:
 * check reports the bytes each policy moves (against Belady's MIN and plain LRU computed
 * here, by small simulators, from the bootstrap plan's key sequence), --min-budget finds
 * a budget that passes check while one byte less fails, and runs stay within their
 * budgets: exactly MIN without prefetch, never below it with prefetch. How close to MIN
 * a prefetching run comes depends on timing: bench/prefetch.sh measures it. With seeded
 * keys the link carries about half of MIN's bytes, the rest regenerated and verified. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fheplan/vm.h"
#include "tests/unit/tmpdir.h"

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

static char *run_out(const char *args, int *rc)
{
    const char *o = tmp_path("stdout");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "NO_COLOR=1 %s %s >%s 2>/dev/null </dev/null", FHEPLAN_CLI, args, o);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *f = fopen(o, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    unlink(o);
    return s;
}

static cJSON *json_of(const char *args, int want_rc)
{
    int rc;
    char *s = run_out(args, &rc);
    cr_assert_eq(rc, want_rc, "%s: exit %d", args, rc);
    cJSON *j = cJSON_Parse(s);
    cr_assert_not_null(j, "not JSON: %s", s);
    free(s);
    return j;
}

/* ---- the oracle ------------------------------------------------------------------- */

/* The switching-key uses of plans/ckks-bootstrap.rplan, restated from the plan text:
 * CoeffToSlot rot[0..54], conjugate conj, EvalMod relin x 50, SlotToCoeff rot[76..22]
 * (keys numbered rot[i] = i, conj = 77, relin = 78). */
static int bootstrap_trace(int *t)
{
    int n = 0;
    for (int i = 0; i <= 54; i++)
        t[n++] = i;
    t[n++] = 77;
    for (int j = 0; j <= 49; j++)
        t[n++] = 78;
    for (int k = 0; k <= 54; k++)
        t[n++] = 76 - k;
    return n;
}

/* Keys that fit cuda:0 at once: the 4 GiB budget less the ciphertext (45 MiB) and one
 * request's key-switch workspace (150 MiB), in 180 MiB keys (sizes: lang_api's worked
 * CKKS values for N = 2^16, L = 44, dnum = 3). */
static const int bootstrap_slots = (4096 - 45 - 150) / 180;

/* Belady's MIN: misses with c slots (evict the key used farthest in the future). With
 * `buffered`, the lookahead policy's schedule under objective bytes (fheplan(1),
 * Requests): the key the use before reads is no victim while another key can go. */
static int belady_run(const int *t, int n, int c, int buffered)
{
    int in[128] = {0}, held = 0, misses = 0;
    for (int i = 0; i < n; i++) {
        if (in[t[i]])
            continue;
        misses++;
        if (held == c) {
            int victim = -1, far = -1;
            for (int k = 0; k < 128; k++) {
                if (!in[k] || (buffered && i > 0 && k == t[i - 1] && c > 1))
                    continue;
                int nx = n;
                for (int j = i + 1; j < n; j++)
                    if (t[j] == k) {
                        nx = j;
                        break;
                    }
                if (nx > far) {
                    far = nx;
                    victim = k;
                }
            }
            in[victim] = 0;
            held--;
        }
        in[t[i]] = 1;
        held++;
    }
    return misses;
}

static int belady_misses(const int *t, int n, int c) { return belady_run(t, n, c, 0); }
static int buffered_misses(const int *t, int n, int c) { return belady_run(t, n, c, 1); }

/* Least recently used: misses with c slots. */
static int lru_misses(const int *t, int n, int c)
{
    int last[128], misses = 0, held = 0;
    for (int k = 0; k < 128; k++)
        last[k] = -1; /* -1: not resident */
    for (int i = 0; i < n; i++) {
        if (last[t[i]] < 0) {
            misses++;
            if (held == c) {
                int victim = -1;
                for (int k = 0; k < 128; k++)
                    if (last[k] >= 0 && (victim < 0 || last[k] < last[victim]))
                        victim = k;
                last[victim] = -1;
                held--;
            }
            held++;
        }
        last[t[i]] = i;
    }
    return misses;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(x), "%s", k);
    return x->valuedouble;
}

Test(lookahead_cli, check_reports_bytes_and_time_per_policy)
{
    cJSON *j = json_of("check --json plans/ckks-bootstrap.rplan", 0);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cJSON *pols = cJSON_GetObjectItem(f, "policies");
    cr_assert_eq(cJSON_GetArraySize(pols), 2);
    cJSON *lru = cJSON_GetArrayItem(pols, 0), *la = cJSON_GetArrayItem(pols, 1);
    cr_assert_str_eq(cJSON_GetObjectItem(lru, "policy")->valuestring, "tiered_lru");
    cr_assert_str_eq(cJSON_GetObjectItem(la, "policy")->valuestring, "lookahead");
    /* LRU's loads of 180 MiB keys and lookahead's (MIN beside the key the use before
     * reads), plus the ciphertext's round trip */
    int t[256], n = bootstrap_trace(t);
    int min = belady_misses(t, n, bootstrap_slots), lrum = lru_misses(t, n, bootstrap_slots);
    int la_loads = buffered_misses(t, n, bootstrap_slots);
    cr_assert_lt(la_loads, lrum, "the plan must tell the policies apart");
    cr_assert(la_loads >= min && la_loads <= min + 2, "double buffering: %d loads, MIN %d",
              la_loads, min);
    double key = 180.0 * 1048576, ct = 45.0 * 1048576;
    cr_assert_eq(num(lru, "bytes_moved"), lrum * key + 2 * ct, "tiered LRU: %d loads of a key",
                 lrum);
    cr_assert_eq(num(la, "bytes_moved"), la_loads * key + 2 * ct, "lookahead: %d loads",
                 la_loads);
    cr_assert_lt(num(la, "predicted_s"), num(lru, "predicted_s"));
    cr_assert_eq(num(f, "bytes_moved"), num(la, "bytes_moved"), "the plan says lookahead");
    cr_assert_gt(num(f, "predicted_s"), 0);
    cJSON_Delete(j);
}

Test(lookahead_cli, min_budget_is_tight_to_the_byte)
{
    cJSON *j = json_of("check --json --min-budget cuda:0 plans/ckks-bootstrap.rplan", 0);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cJSON *mb = cJSON_GetObjectItem(f, "min_budget");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "found")));
    unsigned long long b = (unsigned long long)num(mb, "feasible_bytes");
    unsigned long long near = (unsigned long long)num(mb, "within_5pct_bytes");
    cr_assert_geq(near, b);
    cr_assert_leq(num(mb, "predicted_s_at_within_5pct"), 1.05 * num(mb, "unbounded_predicted_s"));
    cJSON_Delete(j);
    char args[256];
    int rc;
    snprintf(args, sizeof args, "check --budget cuda:0=%lluB plans/ckks-bootstrap.rplan", b);
    free(run_out(args, &rc));
    cr_assert_eq(rc, 0, "the budget found must pass check");
    snprintf(args, sizeof args, "check --budget cuda:0=%lluB plans/ckks-bootstrap.rplan", b - 1);
    free(run_out(args, &rc));
    cr_assert_eq(rc, 1, "one byte less must be rejected");
    snprintf(args, sizeof args, "check --budget cuda:0=%lluB plans/ckks-bootstrap.rplan", near - 1);
    free(run_out(args, &rc));
    cr_assert_eq(rc, 0);
}

Test(lookahead_cli, runs_stay_in_budget_exactly_min_without_prefetch)
{
    int tr[256], n = bootstrap_trace(tr);
    double min_bytes = (belady_misses(tr, n, bootstrap_slots) * 180.0 + 2 * 45.0) * 1048576;
    double la_bytes = (buffered_misses(tr, n, bootstrap_slots) * 180.0 + 2 * 45.0) * 1048576;
    const char *modes[] = {"", "--prefetch 0", "--prefetch 1", "--policy tiered_lru"};
    for (size_t m = 0; m < 4; m++) {
        char args[256];
        snprintf(args, sizeof args, "run --json --device emu --scale 256 %s plans/ckks-bootstrap.rplan",
                 modes[m]);
        cJSON *j = json_of(args, 0);
        cJSON *t = cJSON_GetObjectItem(j, "totals");
        cJSON *ig = cJSON_GetObjectItem(t, "integrity");
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(ig, "ok")), "%s", modes[m]);
        cJSON *pk = cJSON_GetObjectItem(t, "peaks");
        for (int i = 0; i < cJSON_GetArraySize(pk); i++) {
            cJSON *p = cJSON_GetArrayItem(pk, i);
            cJSON *bud = cJSON_GetObjectItem(p, "budget_bytes");
            if (cJSON_IsNumber(bud))
                cr_assert_leq(num(p, "peak_charged_bytes"), bud->valuedouble, "%s: over budget", modes[m]);
        }
        /* scaled sizes: compare in units of the scaled key (180 MiB / 256) */
        double moved = num(t, "bytes_moved") * 256;
        double slack = 4096.0 * 256; /* rounding of the scaled sizes */
        /* with prefetch or without, the run makes check's decisions (one schedule):
         * exactly MIN beside the previous key under lookahead; none moves less than MIN */
        if (m < 3)
            cr_assert(moved <= la_bytes + slack && moved + slack >= la_bytes,
                      "%s: %.0f, not lookahead's %.0f", modes[m], moved, la_bytes);
        cr_assert_geq(moved + slack, min_bytes, "%s: below MIN", modes[m]);
        cJSON_Delete(j);
    }
}

Test(lookahead_cli, seeded_keys_move_about_half_of_min)
{
    cJSON *c = json_of("check --json plans/ckks-bootstrap.rplan plans/ckks-bootstrap-seeded.rplan", 0);
    cJSON *fs = cJSON_GetObjectItem(c, "files");
    cJSON *plain = cJSON_GetArrayItem(fs, 0), *seeded = cJSON_GetArrayItem(fs, 1);
    double min_bytes = num(plain, "bytes_moved"), pcie = num(seeded, "bytes_moved");
    double key = 180.0 * 1048576, ct = 45.0 * 1048576;
    cr_assert_eq(num(plain, "bytes_regenerated"), 0);
    int tr[256], n = bootstrap_trace(tr), loads = buffered_misses(tr, n, bootstrap_slots);
    cr_assert_eq(num(plain, "bytes_moved"), loads * key + 2 * ct);
    cr_assert_eq(pcie, loads * key / 2 + 2 * ct, "the same %d loads, half of each key moved",
                 loads);
    cr_assert_eq(num(seeded, "bytes_regenerated"), loads * key / 2);
    cr_assert_leq(pcie, 0.52 * min_bytes, "%.0f > 0.52 x %.0f", pcie, min_bytes);
    cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItem(seeded, "policies"), 1);
    cr_assert_eq(num(la, "bytes_moved"), pcie);
    cr_assert_eq(num(la, "bytes_regenerated"), loads * key / 2);
    cr_assert_lt(num(seeded, "predicted_s"), num(plain, "predicted_s"));
    double fast = num(seeded, "predicted_s");
    cJSON_Delete(c);
    /* a slow generator makes regeneration, not the link, the predicted bottleneck */
    c = json_of("check --json --gen-gbps 10 plans/ckks-bootstrap-seeded.rplan", 0);
    seeded = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "files"), 0);
    cJSON *tot = cJSON_GetObjectItem(cJSON_GetObjectItem(seeded, "report"), "totals");
    cr_assert_eq(num(tot, "gen_gbps"), 10);
    cr_assert_gt(num(seeded, "predicted_s"), fast);
    cr_assert_geq(num(seeded, "predicted_s"), loads * key / 2 / 10e9);
    cJSON_Delete(c);
    /* on the emulated device, without prefetch: the same split, every half verified */
    cJSON *j = json_of("run --json --device emu --scale 256 --prefetch 0 "
                       "plans/ckks-bootstrap-seeded.rplan", 0);
    cJSON *t = cJSON_GetObjectItem(j, "totals");
    cJSON *ig = cJSON_GetObjectItem(t, "integrity");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(ig, "ok")));
    cr_assert_eq(num(ig, "seeded_checks"), 111, "every key verify covers both halves");
    cr_assert_eq(num(ig, "failures"), 0);
    double moved = num(t, "bytes_moved") * 256, slack = 4096.0 * 256;
    cr_assert_leq(moved, 0.52 * min_bytes + slack, "%.0f > 0.52 x MIN %.0f", moved, min_bytes);
    cr_assert_gt(num(t, "bytes_regenerated") * 256, 0.45 * min_bytes);
    cJSON_Delete(j);
}

/* The time objective: check and run share one path (the modelled timeline decides, the
 * run waits for whatever real work the model has finished), so check's prediction is the
 * run's bytes on the emulated device exactly, whatever the run's timing (with or without
 * a prefetch bound), for the plain and the seeded plan at 25% of the key set and at the
 * plan's own budget. There the objective trades bytes for time: more than MIN, a shorter
 * modelled timeline than MIN's bytes would allow, and the default stays at MIN. */
static double check_lookahead(const char *extra, const char *plan, double *timeline, double *idle)
{
    char args[512];
    snprintf(args, sizeof args, "check --json %s %s", extra, plan);
    cJSON *j = json_of(args, 0);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "policies"), 1);
    cr_assert_str_eq(cJSON_GetObjectItem(la, "policy")->valuestring, "lookahead");
    double b = num(la, "bytes_moved");
    cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "report"), "totals");
    cJSON *tl = cJSON_GetObjectItem(t, "timeline_s");
    if (timeline)
        *timeline = cJSON_IsNumber(tl) ? tl->valuedouble : 0;
    if (idle)
        *idle = cJSON_IsNumber(tl) ? num(t, "timeline_idle_s") : 0;
    cJSON_Delete(j);
    return b;
}

Test(lookahead_cli, objective_time_check_predicts_the_run_bytes)
{
    const char *plans[] = {"plans/ckks-bootstrap.rplan", "plans/ckks-bootstrap-seeded.rplan"};
    unsigned long long quarter = (79ull * 180 / 4 + 45 + 150) << 20;
    for (size_t p = 0; p < 2; p++)
        for (int bi = 0; bi < 2; bi++) {
            char bud[64] = "";
            if (bi)
                snprintf(bud, sizeof bud, "--budget cuda:0=%lluB", quarter);
            char extra[128];
            snprintf(extra, sizeof extra, "--objective time %s", bud);
            double tl = 0, idle = 0, tl_min = 0, idle_min = 0;
            double predicted = check_lookahead(extra, plans[p], &tl, &idle);
            double min = check_lookahead(bud, plans[p], &tl_min, &idle_min);
            cr_assert_gt(tl, 0, "%s: the time objective reports its modelled timeline", plans[p]);
            cr_assert_geq(predicted, min, "%s %s: below the bytes objective", plans[p], bud);
            /* on the modelled timeline the time objective is never slower than the bytes
             * objective by more than a rounding (double buffering: the bytes objective's
             * loads do not wait for the newest body either) */
            cr_assert_leq(tl, tl_min * 1.01, "%s %s: %.6f s against bytes' %.6f s", plans[p],
                          bud, tl, tl_min);
            if (!bi) { /* the plan's own budget: bytes traded for the link's idle time */
                cr_assert_gt(predicted, min, "%s: the time objective moves bytes' bytes", plans[p]);
                cr_assert_lt(idle, idle_min, "%s: the link's longest idle stretch", plans[p]);
            }
            const char *modes[] = {"", "--prefetch 1"};
            for (size_t m = 0; m < 2; m++) {
                char args[512];
                snprintf(args, sizeof args, "run --json --device emu --scale 256 %s %s %s", extra,
                         modes[m], plans[p]);
                cJSON *j = json_of(args, 0);
                cJSON *t = cJSON_GetObjectItem(j, "totals");
                cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "integrity"), "ok")));
                /* the plans' sizes divide by 256 exactly: compare to the byte */
                cr_assert_eq(num(t, "bytes_moved") * 256, predicted, "%s: run %.0f, check %.0f",
                             args, num(t, "bytes_moved") * 256, predicted);
                cJSON_Delete(j);
            }
        }
}

/* Objective auto: the time objective only where the model says it gains more than
 * RPLAN_AUTO_GAIN (5%) over check's bytes timeline (MIN beside the previous request's
 * copies, each load waiting for its victims' bodies: what a bytes run executes, one
 * schedule), else bytes. The bootstrap plan at batch 4 gains nothing at its own budget
 * and with half the keys' bytes, and keeps bytes; at batch 16, at 4 GiB, double
 * buffering leaves the time objective under 1%, and with half the keys' bytes the link
 * idles while the bytes objective's victims are read: time gains 8%, and auto takes its
 * decisions, which check predicts to the byte for a run on the emulated device. */
static const char *objective_of(const cJSON *f)
{
    cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "report"), "totals");
    cJSON *o = cJSON_GetObjectItem(t, "objective");
    cr_assert(cJSON_IsString(o), "the report names its objective");
    cr_assert_gt(num(t, "auto_bytes_s"), 0);
    cr_assert_gt(num(t, "auto_time_s"), 0);
    /* the choice follows the two timelines (bytes may model faster: double buffering) */
    int time = num(t, "auto_time_s") < (1 - RPLAN_AUTO_GAIN) * num(t, "auto_bytes_s");
    cr_assert_str_eq(o->valuestring, time ? "time" : "bytes");
    return o->valuestring;
}

Test(lookahead_cli, objective_auto_takes_time_only_where_the_model_gains)
{
    const char *half = "--budget cuda:0=7305MiB";
    char args[1024];
    snprintf(args, sizeof args, "check --json --objective auto %s plans/ckks-bootstrap.rplan", half);
    cJSON *j = json_of(args, 0);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cr_assert_str_eq(objective_of(f), "bytes");
    cJSON_Delete(j);
    snprintf(args, sizeof args, "--objective auto %s", half);
    double plain_auto = check_lookahead(args, "plans/ckks-bootstrap.rplan", NULL, NULL);
    cr_assert_eq(plain_auto, check_lookahead(half, "plans/ckks-bootstrap.rplan", NULL, NULL),
                 "auto kept bytes: MIN's bytes");
    j = json_of("check --json --objective auto plans/ckks-bootstrap.rplan", 0);
    f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cr_assert_str_eq(objective_of(f), "bytes", "batch 4 at 4 GiB: under 5% to gain");
    cJSON_Delete(j);

    /* the same plan at batch 16 */
    FILE *in = fopen("plans/ckks-bootstrap.rplan", "rb");
    cr_assert_not_null(in);
    const char *path = tmp_path("b16.rplan");
    FILE *out = fopen(path, "wb");
    cr_assert_not_null(out);
    char line[512];
    int replaced = 0;
    while (fgets(line, sizeof line, in)) {
        if (!strncmp(line, "const BATCH = 4", 15)) {
            fputs("const BATCH = 16\n", out);
            replaced = 1;
        } else {
            fputs(line, out);
        }
    }
    fclose(in);
    fclose(out);
    cr_assert(replaced, "the plan declares its batch");
    snprintf(args, sizeof args, "check --json --objective auto %s", path);
    j = json_of(args, 0);
    f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cr_assert_str_eq(objective_of(f), "bytes",
                     "batch 16 at 4 GiB: double buffering leaves under 5% to gain");
    cJSON_Delete(j);
    /* half the keys: 79 x 180 MiB / 2, the ciphertext and the workspace */
    snprintf(args, sizeof args, "check --json --objective auto %s %s", half, path);
    j = json_of(args, 0);
    f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cr_assert_str_eq(objective_of(f), "time");
    cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "report"), "totals");
    cr_assert_lt(num(t, "auto_time_s"), (1 - RPLAN_AUTO_GAIN) * num(t, "auto_bytes_s"));
    cJSON_Delete(j);
    snprintf(args, sizeof args, "--objective auto %s", half);
    double predicted = check_lookahead(args, path, NULL, NULL);
    snprintf(args, sizeof args, "--objective time %s", half);
    cr_assert_eq(predicted, check_lookahead(args, path, NULL, NULL));
    cr_assert_gt(predicted, check_lookahead(half, path, NULL, NULL), "more bytes than MIN");
    snprintf(args, sizeof args, "run --json --device emu --scale 256 --objective auto %s %s",
             half, path);
    j = json_of(args, 0);
    t = cJSON_GetObjectItem(j, "totals");
    cr_assert_str_eq(cJSON_GetObjectItem(t, "objective")->valuestring, "time");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "integrity"), "ok")));
    cr_assert_eq(num(t, "bytes_moved") * 256, predicted, "run %.0f, check %.0f",
                 num(t, "bytes_moved") * 256, predicted);
    cJSON_Delete(j);
}

Test(lookahead_cli, objective_is_checked)
{
    int rc;
    free(run_out("check --objective speed plans/ckks-bootstrap.rplan", &rc));
    cr_assert_eq(rc, 64, "a bad --objective is a usage error");
    free(run_out("check --objective Auto plans/ckks-bootstrap.rplan", &rc));
    cr_assert_eq(rc, 64, "objectives are lower case");
    free(run_out("run --objective --device emu plans/ckks-bootstrap.rplan", &rc));
    cr_assert_neq(rc, 0);
}

/* The two-GPU bootstrap: check splits PCIe from peer bytes, per policy, and the split adds
 * up; a peer link slower than a load sends every key over PCIe again (twice the one-GPU
 * plan's bytes, as two independent ranks); the text shows the split. */
Test(lookahead_cli, two_gpu_plan_splits_pcie_and_peer_bytes)
{
    cJSON *c = json_of("check --json plans/ckks-bootstrap-2gpu.rplan plans/ckks-bootstrap.rplan", 0);
    cJSON *two = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "files"), 0);
    cJSON *one = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "files"), 1);
    double pcie = num(two, "pcie_bytes"), peer = num(two, "peer_bytes");
    cr_assert_gt(peer, 0);
    cr_assert_eq(pcie + peer, num(two, "bytes_moved"), "every byte crosses one of the two links");
    cr_assert_eq(num(one, "peer_bytes"), 0);
    cr_assert_lt(pcie, 2 * num(one, "pcie_bytes"), "shared keys cross PCIe less than twice");
    for (int k = 0; k < 2; k++) {
        cJSON *po = cJSON_GetArrayItem(cJSON_GetObjectItem(two, "policies"), k);
        cr_assert_eq(num(po, "pcie_bytes") + num(po, "peer_bytes"), num(po, "bytes_moved"));
        cr_assert_gt(num(po, "peer_bytes"), 0);
    }
    cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItem(two, "policies"), 1);
    cr_assert_eq(num(la, "pcie_bytes"), pcie);
    cJSON *tot = cJSON_GetObjectItem(cJSON_GetObjectItem(two, "report"), "totals");
    cr_assert_eq(num(tot, "peer_gbps"), 450);
    cr_assert_eq(num(tot, "peer_bytes"), peer);
    double one_pcie = num(one, "pcie_bytes");
    cJSON_Delete(c);
    c = json_of("check --json --peer-gbps 20 plans/ckks-bootstrap-2gpu.rplan", 0);
    two = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "files"), 0);
    cr_assert_eq(num(two, "peer_bytes"), 0);
    cr_assert_eq(num(two, "pcie_bytes"), 2 * one_pcie, "a slow peer link: two ranks' bytes");
    cJSON_Delete(c);
    int rc;
    char *out = run_out("check plans/ckks-bootstrap-2gpu.rplan", &rc);
    cr_assert_eq(rc, 0);
    cr_assert(strstr(out, "  transfers: PCIe 14.06 GiB"), "%s", out);
    cr_assert(strstr(out, "peer 18.81 GiB (44.88 ms at 450 GB/s)"), "%s", out);
    cr_assert(strstr(out, "policy lookahead  would move 32.87 GiB (PCIe 14.06 GiB, peer 18.81 GiB)"),
              "%s", out);
    free(out);
}
