/* tests/unit/test_min_budget.c — the minimum budget: rplan_min_budget (the library call)
 * and `fheplan check --min-budget`, its text and JSON: the threshold from which every
 * budget is feasible, the feasible intervals where feasibility is not monotonic (issue
 * 27, cause 8: four 3 KiB keys requested in turn, then a 2 KiB move), each interval checked
 * at its ends, a location nothing uses, a plan no budget saves (and why), an exclusive
 * value a request moves away from the location. The command's tests run the binary of
 * the same build from the repo root. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/tmpdir.h"

#ifndef FHEPLAN_CLI
#define FHEPLAN_CLI "build/fheplan"
#endif

/* The keys fill cuda:0 as far as it goes (a request evicts nothing it need not); the move
 * after them is explicit and needs 2 KiB of what is left. */
static const char cause8[] =
    "rplan 1\n"
    "budget cuda:0 16 KiB\n"
    "value k[4] = 3 KiB source synth(1 + i)\n"
    "value x = 2 KiB exclusive at pinned init synth(9)\n"
    "policy p = lookahead(cuda:0 -> pinned -> host)\n"
    "for i in 0..<4 {\n"
    "  request \"key-{i}\" using p { require k[i] @ cuda:0 }\n"
    "}\n"
    "move x -> cuda:0\n";

static const char *plan_file(const char *name, const char *text)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* stdout of `FHEPLAN_CLI args` (printf-style); *rc its exit status. */
static char *cli_out(int *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *cli_out(int *rc, const char *fmt, ...)
{
    char args[1024], cmd[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null </dev/null", FHEPLAN_CLI, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
        if ((len += n) + 1 == cap)
            cr_assert_not_null(buf = realloc(buf, cap *= 2));
    buf[len] = 0;
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* files[0].min_budget of `check --json --min-budget loc file` */
static cJSON *min_budget_json(const char *loc, const char *file, cJSON **doc)
{
    int rc;
    char *out = cli_out(&rc, "check --json --min-budget %s %s", loc, file);
    *doc = cJSON_Parse(out);
    cr_assert_not_null(*doc, "not JSON: %s", out);
    free(out);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(*doc, "files"), 0);
    cJSON *mb = cJSON_GetObjectItem(f, "min_budget");
    cr_assert_not_null(mb);
    return mb;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(x), "'%s' is not a number", k);
    return x->valuedouble;
}

/* 1 when `check --budget cuda:0=b` accepts the plan, 0 when it rejects it */
static int feasible_at(const char *file, unsigned long long b)
{
    int rc;
    free(cli_out(&rc, "check --budget cuda:0=%lluB %s", b, file));
    cr_assert(rc == 0 || rc == 1, "check exit %d at %llu", rc, b);
    return rc == 0;
}

Test(min_budget, not_monotonic_intervals_exact_in_json)
{
    const char *file = plan_file("cause8.rplan", cause8);
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:0", file, &doc);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "found")));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(mb, "monotonic")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "exact")));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(mb, "unused")));
    cr_assert_eq(num(mb, "threshold_bytes"), 14336);
    cr_assert_eq(num(mb, "feasible_bytes"), 5120);
    cr_assert_eq(num(mb, "unbounded_peak_bytes"), 14336);
    /* one probe per window: four feasible intervals, three gaps, one more course change */
    cr_assert_eq(num(mb, "probes"), 8);
    static const double want[4][2] = {{5120, 6143}, {8192, 9215}, {11264, 12287}, {14336, -1}};
    cJSON *iv = cJSON_GetObjectItem(mb, "intervals");
    cr_assert_eq(cJSON_GetArraySize(iv), 4);
    cr_assert_eq(num(mb, "intervals_found"), 4);
    for (int i = 0; i < 4; i++) {
        cJSON *x = cJSON_GetArrayItem(iv, i);
        cr_assert_eq(num(x, "from"), want[i][0], "interval %d", i);
        if (want[i][1] < 0)
            cr_assert(cJSON_IsNull(cJSON_GetObjectItem(x, "to")), "the last one is open");
        else
            cr_assert_eq(num(x, "to"), want[i][1], "interval %d", i);
    }
    cJSON_Delete(doc);
}

Test(min_budget, not_monotonic_text)
{
    const char *file = plan_file("cause8.rplan", cause8);
    int rc;
    char *out = cli_out(&rc, "check --min-budget cuda:0 %s", file);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(out, "  threshold at cuda:0: 14 KiB (14336 bytes): every budget "
                                   "from it on is feasible, one byte less is rejected"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "  not monotonic: 4 feasible intervals at cuda:0, in bytes: "
                                   "5120-6143, 8192-9215, 11264-12287 and 14336 and above\n"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "  smallest feasible budget at cuda:0: 5 KiB (5120 bytes)"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "  exact: every budget decided by "), "%s", out);
    free(out);
}

/* Every interval end against a plain check: feasible at both ends, rejected one byte
 * outside (the figures: 5, 8, 11, 14 KiB feasible; 6, 7, 9, 10, 12, 13 KiB not). */
Test(min_budget, intervals_agree_with_check_at_their_ends)
{
    const char *file = plan_file("cause8.rplan", cause8);
    cJSON *doc;
    cJSON *iv = cJSON_GetObjectItem(min_budget_json("cuda:0", file, &doc), "intervals");
    const cJSON *x;
    cJSON_ArrayForEach(x, iv) {
        unsigned long long from = (unsigned long long)num(x, "from");
        cr_assert(feasible_at(file, from), "%llu", from);
        cr_assert(!feasible_at(file, from - 1), "%llu", from - 1);
        if (!cJSON_IsNull(cJSON_GetObjectItem(x, "to"))) {
            unsigned long long to = (unsigned long long)num(x, "to");
            cr_assert(feasible_at(file, to), "%llu", to);
            cr_assert(!feasible_at(file, to + 1), "%llu", to + 1);
        } else {
            cr_assert(feasible_at(file, from * 2), "above the threshold");
        }
    }
    for (unsigned k = 5; k <= 14; k++)
        cr_assert_eq(feasible_at(file, k * 1024ull), k == 5 || k == 8 || k == 11 || k == 14,
                     "%u KiB", k);
    cJSON_Delete(doc);
}

Test(min_budget, monotonic_plan_one_interval)
{
    const char *file = plan_file("mono.rplan",
                                 "rplan 1\n"
                                 "budget cuda:0 64 KiB\n"
                                 "value k[3] = 4 KiB source synth(1 + i)\n"
                                 "value ct = 2 KiB exclusive at pinned init synth(7)\n"
                                 "policy p = lookahead(cuda:0 -> pinned -> host)\n"
                                 "for i in 0..<3 {\n"
                                 "  request \"r{i}\" using p { require ct @ cuda:0  require k[i] @ cuda:0\n"
                                 "    reserve cuda:0 1 KiB \"ws\"  body { run touch(ct, k[i]) } }\n"
                                 "}\n");
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:0", file, &doc);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "monotonic")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "exact")));
    /* the ciphertext, one key and the workspace: 7 KiB */
    cr_assert_eq(num(mb, "threshold_bytes"), 7168);
    cr_assert_eq(num(mb, "feasible_bytes"), 7168);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(mb, "intervals")), 1);
    cJSON_Delete(doc);
    cr_assert(feasible_at(file, 7168));
    cr_assert(!feasible_at(file, 7167));
    int rc;
    char *out = cli_out(&rc, "check --min-budget cuda:0 %s", file);
    cr_assert_null(strstr(out, "not monotonic"), "%s", out);
    cr_assert_not_null(strstr(out, "threshold at cuda:0: 7 KiB (7168 bytes)"), "%s", out);
    free(out);
}

Test(min_budget, unused_location_needs_no_bytes)
{
    const char *file = plan_file("cause8.rplan", cause8);
    int rc;
    char *out = cli_out(&rc, "check --min-budget cuda:3 %s", file);
    cr_assert_eq(rc, 0);
    cr_assert_not_null(strstr(out, "  nothing at cuda:3 needs bytes: every budget there is "
                                   "feasible, 0 included\n"),
                       "%s", out);
    cr_assert_null(strstr(out, "one byte less"), "%s", out);
    cr_assert_null(strstr(out, "threshold at cuda:3"), "%s", out);
    free(out);
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:3", file, &doc);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "unused")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "found")));
    cr_assert_eq(num(mb, "threshold_bytes"), 0);
    cJSON_Delete(doc);
}

Test(min_budget, no_budget_saves_the_plan)
{
    /* pinned cannot hold the ciphertext, whatever cuda:0 gets */
    const char *file = plan_file("never.rplan", "rplan 1\n"
                                                "budget pinned 1 KiB\n"
                                                "value ct = 2 KiB exclusive at pinned\n"
                                                "move ct -> cuda:0\n");
    int rc;
    char *out = cli_out(&rc, "check --min-budget cuda:0 %s", file);
    cr_assert_eq(rc, 1);
    cr_assert_not_null(strstr(out, "  no budget at cuda:0 makes the plan feasible: initial "
                                   "placement of 'ct' at pinned exceeds the budget of pinned"),
                       "%s", out);
    free(out);
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:0", file, &doc);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(mb, "found")));
    cr_assert_null(cJSON_GetObjectItem(mb, "threshold_bytes"));
    cr_assert_not_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(mb, "reason")),
                              "exceeds the budget of pinned"));
    cJSON_Delete(doc);
}

/* A plan its own budget rejects still gets its answer: the question --min-budget answers. */
Test(min_budget, rejected_plan_gets_its_threshold)
{
    char text[sizeof cause8];
    snprintf(text, sizeof text, "%s", cause8);
    char *b = strstr(text, "16 KiB");
    cr_assert_not_null(b);
    memcpy(b, " 6 KiB", 6); /* one of the refused budgets */
    const char *file = plan_file("cause8-6k.rplan", text);
    int rc;
    char *out = cli_out(&rc, "check --min-budget cuda:0 %s", file);
    cr_assert_eq(rc, 1, "the plan as written is rejected");
    cr_assert_not_null(strstr(out, "threshold at cuda:0: 14 KiB (14336 bytes)"), "%s", out);
    free(out);
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:0", file, &doc);
    cr_assert_eq(num(mb, "threshold_bytes"), 14336);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(mb, "intervals")), 4);
    cJSON_Delete(doc);
}

/* ---- the library call (rplan_min_budget), below the command ----------------------------- */

#include "fheplan/vm.h"

static rplan_program *compile_with(const char *src, fhr_location loc)
{
    fhr_budget unbounded = {loc, (uint64_t)1 << 44};
    rplan_compile_opts co = {.filename = "mb.rplan", .budget_override = &unbounded,
                             .nbudget_override = 1};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(src, strlen(src), &co, &p, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_eq(st, FHR_OK, "%s", txt ? txt : "");
    free(txt);
    rplan_diags_free(d);
    return p;
}

static rplan_min_budget_result lib_search(const char *src, const char *where)
{
    fhr_location loc;
    cr_assert_eq(fhr_loc_parse(where, &loc), FHR_OK);
    rplan_program *p = compile_with(src, loc);
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.unknown_as_touch = 1;
    rplan_min_budget_result r;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_min_budget(p, loc, &o, &r, &e), FHR_OK, "%s", e.message);
    rplan_program_free(p);
    return r;
}

/* The feasible intervals of cause 8, exactly, from the library. */
Test(min_budget, library_finds_every_interval)
{
    rplan_min_budget_result r = lib_search(cause8, "cuda:0");
    cr_assert(r.found);
    cr_assert(r.exact);
    cr_assert_eq(r.nint_all, 4);
    cr_assert_eq(r.feasible, 5120);
    cr_assert_eq(r.threshold, 14336);
    uint64_t want[4][2] = {{5120, 6143}, {8192, 9215}, {11264, 12287}, {14336, UINT64_MAX}};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(r.iv[i].from, want[i][0], "interval %d", i);
        cr_assert_eq(r.iv[i].to, want[i][1], "interval %d", i);
    }
    cr_assert_gt(r.probes, 0);
    /* the dry run refuses every budget below its peak, a key's 3 KiB: no probe there */
    cr_assert_eq(r.floor, 3072);
    /* at least one probe per interval and per gap between them, and no more than the
     * courses the run takes (the sums search made 12) */
    cr_assert(r.probes >= 7 && r.probes <= 8, "probes %zu", r.probes);
    cr_assert_gt(r.undecided_from, r.undecided_to, "nothing left undecided");
}

/* Sizes that are odd byte counts make thousands of distinct sums (the sums search probed
 * 2301 of them here); the walk probes only where the run's course changes. */
Test(min_budget, probes_follow_the_courses_not_the_sums)
{
    char src[4096];
    size_t n = (size_t)snprintf(src, sizeof src, "rplan 1\n");
    for (int i = 0; i < 24; i++)
        n += (size_t)snprintf(src + n, sizeof src - n, "value v%d = %d B source synth(%d)\n",
                              i, 1001 + 38 * i, i);
    n += (size_t)snprintf(src + n, sizeof src - n, "policy p = tiered_lru(cuda:0 -> host)\n");
    for (int i = 0; i < 24; i++)
        n += (size_t)snprintf(src + n, sizeof src - n,
                              "request \"r%d\" using p { require v%d @ cuda:0 }\n", i, i);
    cr_assert_lt(n, sizeof src);
    rplan_min_budget_result r = lib_search(src, "cuda:0");
    cr_assert(r.found && r.exact);
    cr_assert_eq(r.threshold, 1875, "threshold %llu", (unsigned long long)r.threshold);
    cr_assert_lt(r.probes, 400, "probes %zu", r.probes);
    /* every window's verdict is check's at both of its ends */
    const char *file = plan_file("odd-sizes.rplan", src);
    cr_assert_not(feasible_at(file, 1874));
    cr_assert(feasible_at(file, 1875));
}

/* A request moves an exclusive value away from the location and a later action needs room
 * there: the dry run keeps the value's charge at the location, so the plan needs more than
 * the explain run's peak. The search starts from the higher of the two (it exited 70 with
 * no output). */
Test(min_budget, exclusive_moved_away_is_searched_from_a_feasible_top)
{
    static const char *locs[] = {"cuda:0", "pinned"};
    for (int i = 0; i < 2; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "rplan 1\n"
                 "value ct = 5 KiB exclusive at %s\n"
                 "value w = 5 KiB at host\n"
                 "policy p = tiered_lru(cuda:1 -> %s)\n"
                 "request \"r\" using p { require ct @ cuda:1 }\n"
                 "ensure w @ %s\n",
                 locs[i], i ? "host" : "pinned", locs[i]);
        rplan_min_budget_result r = lib_search(src, locs[i]);
        cr_assert(r.found, "%s: %s", locs[i], r.reason);
        cr_assert(r.exact, "%s", locs[i]);
        cr_assert_eq(r.threshold, 10240, "%s: threshold %llu", locs[i],
                     (unsigned long long)r.threshold);
        cr_assert_eq(r.nint_all, 1, "%s", locs[i]);
        cr_assert_eq(r.peak, 10240, "%s", locs[i]);
        /* the command: its answer, exit 0 */
        const char *file = plan_file(i ? "excl-pinned.rplan" : "excl-cuda.rplan", src);
        int rc;
        char *out = cli_out(&rc, "check --min-budget %s %s", locs[i], file);
        cr_assert_eq(rc, 0, "%s", out);
        char want[96];
        snprintf(want, sizeof want, "threshold at %s: 10 KiB (10240 bytes)", locs[i]);
        cr_assert_not_null(strstr(out, want), "%s", out);
        free(out);
    }
}

/* No budget saves the plan: found 0 and the refusal at the unbounded budget. */
Test(min_budget, library_says_why_no_budget_helps)
{
    fhr_location loc = fhr_loc_cuda(0);
    static const char src[] = "rplan 1\n"
                              "budget pinned 1 KiB\n"
                              "value ct = 2 KiB exclusive at pinned\n"
                              "move ct -> cuda:0\n";
    /* a program the pinned budget refuses cannot be compiled: ask with pinned unbounded
     * and the caller's 1 KiB as an override of the explain run and the dry run */
    rplan_program *p = compile_with(src, fhr_loc_pinned());
    fhr_budget one = {fhr_loc_pinned(), 1024};
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.budget_override = &one;
    o.nbudget_override = 1;
    rplan_min_budget_result r;
    cr_assert_eq(rplan_min_budget(p, loc, &o, &r, NULL), FHR_OK);
    cr_assert(!r.found);
    cr_assert_not_null(strstr(r.reason, "exceeds the budget of pinned"), "%s", r.reason);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_min_budget(NULL, loc, &o, &r, &e), FHR_E_INVALID);
    cr_assert_not_null(strstr(e.message, "min budget"));
    fhr_error_clear(&e);
    cr_assert_eq(rplan_min_budget(p, (fhr_location){FHR_LOC_CUDA, 99}, &o, &r, NULL),
                 FHR_E_INVALID);
    rplan_program_free(p);
}

/* A reservation's size is one of the sums the search probes: with 1000 B reserved in each
 * request the keys kept after the last one change at 6 KiB + 1000 B, 9 KiB + 1000 B and
 * 12 KiB + 1000 B, so the feasible intervals end one byte below those budgets, which no
 * sum of the values' sizes reaches. */
Test(min_budget, reservations_set_the_interval_ends)
{
    const char *file = plan_file("reserve8.rplan",
                                 "rplan 1\n"
                                 "budget cuda:0 16 KiB\n"
                                 "value k[4] = 3 KiB source synth(1 + i)\n"
                                 "value x = 2 KiB exclusive at pinned init synth(9)\n"
                                 "policy p = lookahead(cuda:0 -> pinned -> host)\n"
                                 "for i in 0..<4 {\n"
                                 "  request \"key-{i}\" using p { require k[i] @ cuda:0\n"
                                 "    reserve cuda:0 1000 B \"ws\" }\n"
                                 "}\n"
                                 "move x -> cuda:0\n");
    static const double want[4][2] = {{5120, 7143}, {8192, 10215}, {11264, 13287}, {14336, -1}};
    cJSON *doc;
    cJSON *mb = min_budget_json("cuda:0", file, &doc);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(mb, "exact")));
    cr_assert_eq(num(mb, "threshold_bytes"), 14336);
    cJSON *iv = cJSON_GetObjectItem(mb, "intervals");
    cr_assert_eq(cJSON_GetArraySize(iv), 4);
    for (int i = 0; i < 4; i++) {
        cJSON *o = cJSON_GetArrayItem(iv, i);
        cr_assert_eq(num(o, "from"), want[i][0], "interval %d", i);
        if (want[i][1] < 0)
            cr_assert(cJSON_IsNull(cJSON_GetObjectItem(o, "to")), "interval %d", i);
        else
            cr_assert_eq(num(o, "to"), want[i][1], "interval %d", i);
    }
    cJSON_Delete(doc);
    cr_assert(feasible_at(file, 7143));
    cr_assert(!feasible_at(file, 7144));
}
