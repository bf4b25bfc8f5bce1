/* tests/unit/test_cli.c — end-to-end tests of the fheplan command: exit codes (0, 1, 2,
 * 64), --json (one document on stdout and nothing else, every documented field), the
 * diagnostic format, NO_COLOR, a run on the emulated device with integrity verified,
 * and a trace file that parses. Runs the binary of the same build from the repo root. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <unistd.h>

#include "tests/unit/tmpdir.h"

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

typedef struct result {
    int rc;
    char *out, *err;
} result;

static char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

/* Runs `FHEPLAN_CLI args` (printf-style) with env prefix, capturing stdout and stderr in
 * the test's own directory; stdin is /dev/null unless args redirect it. */
static result run_cli(const char *env, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static result run_cli(const char *env, const char *fmt, ...)
{
    char args[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *o = tmp_path("stdout"), *e = tmp_path("stderr");
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s%s", env ? env : "", FHEPLAN_CLI, args, o, e,
             strchr(args, '<') ? "" : " </dev/null");
    int st = system(cmd);
    result r;
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp_file(o);
    r.err = slurp_file(e);
    unlink(o);
    unlink(e);
    return r;
}

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(cli, usage_errors_exit_64)
{
    result r = run_cli(NULL, "%s", "");
    cr_assert_eq(r.rc, 64);
    cr_assert(strstr(r.err, "usage:"));
    result_free(&r);
    r = run_cli(NULL, "frobnicate x");
    cr_assert_eq(r.rc, 64);
    result_free(&r);
    r = run_cli(NULL, "check --no-such-option plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    result_free(&r);
    r = run_cli(NULL, "run --device tpu plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    result_free(&r);
    r = run_cli(NULL, "compile plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    result_free(&r);
    r = run_cli(NULL, "--help");
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "usage:"));
    result_free(&r);
}

Test(cli, unreadable_input_exits_2)
{
    result r = run_cli(NULL, "check /nonexistent/plan.rplan");
    cr_assert_eq(r.rc, 2);
    cr_assert(strstr(r.err, "cannot read"));
    cr_assert_str_eq(r.out, "");
    result_free(&r);
    r = run_cli(NULL, "run --device emu /nonexistent/plan.rplan");
    cr_assert_eq(r.rc, 2);
    result_free(&r);
}

Test(cli, check_every_plan_is_feasible)
{
    result r = run_cli(NULL, "check plans/attention-tile.rplan plans/ckks-bootstrap.rplan "
                             "plans/design-example.rplan plans/explicit-walkthrough.rplan "
                             "plans/two-tenants.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "plans/ckks-bootstrap.rplan: feasible"));
    cr_assert(strstr(r.out, "stage bootstrap/CoeffToSlot"));
    cr_assert(strstr(r.out, "peak:"));
    result_free(&r);
}

Test(cli, rejected_plan_exits_1_with_diagnostic_format)
{
    write_file(tmp_path("bad.rplan"), "rplan 1\nbudget cuda:0 1 MiB\n"
                                         "value a = 2 MiB exclusive at pinned init zero\n"
                                         "move a -> cuda:0 from pinned\n");
    result r = run_cli("NO_COLOR=1", "check %s", tmp_path("bad.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "bad.rplan:4:1: error: "), "%s", r.err);
    cr_assert(strstr(r.err, "move a -> cuda:0 from pinned"));
    cr_assert(strstr(r.err, "^"));
    cr_assert_null(strchr(r.err, '\033'), "colour despite NO_COLOR");
    result_free(&r);
    /* a budget override that makes it fit */
    r = run_cli(NULL, "check --budget cuda:0=4MiB %s", tmp_path("bad.rplan"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    /* and one that makes a feasible plan infeasible */
    r = run_cli("NO_COLOR=1", "check --budget cuda:0=100MiB plans/design-example.rplan");
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "error:"));
    result_free(&r);
    
}

Test(cli, syntax_error_has_position_and_caret)
{
    write_file(tmp_path("syntax.rplan"), "rplan 1\nvalue x = 1 MiB at nowhere\n");
    result r = run_cli("NO_COLOR=1", "check %s", tmp_path("syntax.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "syntax.rplan:2:"), "%s", r.err);
    cr_assert(strstr(r.err, ": error: "));
    result_free(&r);
    
}

static cJSON *parse_only_json(const char *out)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(out, &end, 0);
    cr_assert_not_null(j, "stdout is not JSON: %.200s", out);
    while (end && (*end == '\n' || *end == ' '))
        end++;
    cr_assert(end && *end == 0, "something after the JSON document on stdout");
    return j;
}

Test(cli, check_json_is_one_document_with_fields)
{
    result r = run_cli(NULL, "check --json plans/ckks-bootstrap.rplan /nonexistent.rplan");
    cr_assert_eq(r.rc, 2);
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsBool(cJSON_GetObjectItem(j, "feasible")));
    cJSON *files = cJSON_GetObjectItem(j, "files");
    cr_assert_eq(cJSON_GetArraySize(files), 2);
    cJSON *f0 = cJSON_GetArrayItem(files, 0);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(f0, "feasible")));
    cJSON *rep = cJSON_GetObjectItem(f0, "report");
    cJSON *st = cJSON_GetObjectItem(rep, "stages");
    cr_assert(cJSON_GetArraySize(st) >= 5);
    cJSON *s0 = cJSON_GetArrayItem(st, 0);
    const char *fields[] = {"name", "bytes", "bytes_moved", "copies", "plans", "requests",
                            "bodies", "evictions", "peaks"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        cr_assert_not_null(cJSON_GetObjectItem(s0, fields[i]), "%s", fields[i]);
    cJSON *pk = cJSON_GetArrayItem(cJSON_GetObjectItem(s0, "peaks"), 0);
    cr_assert_not_null(cJSON_GetObjectItem(pk, "location"));
    cr_assert_not_null(cJSON_GetObjectItem(pk, "peak_charged_bytes"));
    cr_assert_not_null(cJSON_GetObjectItem(pk, "budget_bytes"));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(files, 1), "feasible")));
    cJSON_Delete(j);
    result_free(&r);
}

Test(cli, run_on_emu_verifies_integrity_and_writes_a_trace)
{
    result r = run_cli("NO_COLOR=1", "run --device emu --scale 1024 --trace %s "
                                     "plans/ckks-bootstrap.rplan", tmp_path("trace.json"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "integrity: ok"));
    cr_assert(strstr(r.out, "lower bound: max(compute"));
    cr_assert(strstr(r.out, "ratio"));
    char *t = slurp_file(tmp_path("trace.json"));
    cJSON *tj = cJSON_Parse(t);
    cr_assert_not_null(tj, "trace does not parse");
    cJSON *ev = cJSON_GetObjectItem(tj, "traceEvents");
    cr_assert(cJSON_GetArraySize(ev) > 100);
    int have_body = 0, have_meta = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
        have_meta |= ph && !strcmp(ph, "M");
        have_body |= cat && !strcmp(cat, "body");
        if (ph && !strcmp(ph, "X")) {
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "ts")));
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "dur")));
        }
    }
    cr_assert(have_body && have_meta);
    cJSON_Delete(tj);
    free(t);
    
    result_free(&r);
}

Test(cli, run_json_report_has_every_field)
{
    result r = run_cli(NULL, "run --json --device emu --scale 256 plans/two-tenants.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cJSON *j = parse_only_json(r.out);
    const char *top[] = {"ok",     "mode",  "device", "scale", "refused",
                         "stages", "totals", "error", "file"};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        cr_assert_not_null(cJSON_GetObjectItem(j, top[i]), "%s", top[i]);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "device")), "emu");
    cJSON *t = cJSON_GetObjectItem(j, "totals");
    const char *tf[] = {"time_s", "body_s", "bandwidth_gbps", "integrity", "pinned_gbps",
                        "compute_s", "transfer_s", "lower_bound_s", "ratio", "bytes", "peaks",
                        "evictions"};
    for (size_t i = 0; i < sizeof tf / sizeof *tf; i++)
        cr_assert_not_null(cJSON_GetObjectItem(t, tf[i]), "%s", tf[i]);
    cJSON *ig = cJSON_GetObjectItem(t, "integrity");
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(ig, "ok")));
    cr_assert(cJSON_GetObjectItem(ig, "checks")->valuedouble >= 14);
    cJSON *b = cJSON_GetObjectItem(t, "bytes");
    const char *dirs[] = {"h2h", "h2d", "d2h", "d2d", "load"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_not_null(cJSON_GetObjectItem(b, dirs[i]), "%s", dirs[i]);
    cJSON_Delete(j);
    result_free(&r);
}

/* (A run that fails part-way, with a partial report, needs a runtime fault the command
 * line cannot inject: tests/unit/test_fault_sweep.c and test_plan_sweep.c cover that.) */
Test(cli, run_rejected_by_a_budget_override_exits_1_with_source_position_and_json)
{
    write_file(tmp_path("fail.rplan"), "rplan 1\nvalue a = 64 KiB at pinned init synth(1)\n"
                                          "plan \"p\" {\n  enter { ensure a @ cuda:0 }\n"
                                          "  body { run verify(a) }\n}\n");
    /* the override is too small at run time only: check passes the declared budgets */
    result r = run_cli("NO_COLOR=1", "run --device emu --budget cuda:0=1KiB %s", tmp_path("fail.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "fail.rplan:"), "%s", r.err);
    cr_assert(strstr(r.err, ": error: "));
    result_free(&r);
    r = run_cli(NULL, "run --json --device emu --budget cuda:0=1KiB %s", tmp_path("fail.rplan"));
    cr_assert_eq(r.rc, 1);
    /* compile rejects it: the diagnostics are in the JSON, stdout has only the document */
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")));
    cJSON_Delete(j);
    result_free(&r);
    
}

/* A plan refused before its first statement (a budget at a device the backend does not
 * have): the error only, no empty report; with --json one document that says refused and
 * carries the error, no stages or totals; no trace or timeline, and files already at
 * those paths are left as they were. */
Test(cli, run_refused_before_it_starts_prints_the_error_only)
{
    write_file(tmp_path("two.rplan"), "rplan 1\nbudget cuda:1 1 MiB\n"
                                         "value a = 64 KiB at pinned init synth(1)\n"
                                         "plan \"p\" {\n  enter { ensure a @ cuda:0 }\n"
                                         "  body { run verify(a) }\n}\n");
    const char *trace = tmp_path("refused.json"), *page = tmp_path("refused.html");
    unlink(trace);
    unlink(page);
    result r = run_cli("NO_COLOR=1", "run --device emu:1 --trace %s --timeline %s %s", trace,
                       page, tmp_path("two.rplan"));
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "two.rplan:2:1: error: budget for cuda:1"), "%s", r.err);
    cr_assert_str_eq(r.out, "", "a refused run printed a report: %s", r.out);
    cr_assert(access(trace, F_OK) != 0, "a refused run wrote a trace");
    cr_assert(access(page, F_OK) != 0, "a refused run wrote a timeline");
    result_free(&r);

    write_file(trace, "earlier trace\n");
    write_file(page, "earlier page\n");
    r = run_cli(NULL, "run --json --device emu:1 --trace %s --timeline %s %s", trace, page,
                tmp_path("two.rplan"));
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "refused")));
    cr_assert_null(cJSON_GetObjectItem(j, "stages"));
    cr_assert_null(cJSON_GetObjectItem(j, "totals"));
    cJSON *e = cJSON_GetObjectItem(j, "error");
    cr_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")), "cuda:1"));
    cr_assert_eq(cJSON_GetObjectItem(e, "line")->valuedouble, 2);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "file")), tmp_path("two.rplan"));
    cJSON_Delete(j);
    char *t = slurp_file(trace), *h = slurp_file(page);
    cr_assert_str_eq(t, "earlier trace\n");
    cr_assert_str_eq(h, "earlier page\n");
    free(t);
    free(h);
    result_free(&r);

    /* the same plan on a backend with the device runs, reports and is not refused */
    r = run_cli(NULL, "run --json --device emu:2 %s", tmp_path("two.rplan"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    j = parse_only_json(r.out);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "refused")));
    cr_assert_not_null(cJSON_GetObjectItem(j, "totals"));
    cJSON_Delete(j);
    result_free(&r);
}

/* A device that cannot be opened under --json: one document saying refused, on stdout. */
Test(cli, run_json_device_that_cannot_open_is_one_refused_document)
{
    result r = run_cli(NULL, "run --json --device cuda --scale 1024 plans/design-example.rplan");
    if (r.rc == 0) { /* a GPU is visible: nothing to refuse */
        result_free(&r);
        return;
    }
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "refused")));
    cr_assert(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")));
    cJSON_Delete(j);
    result_free(&r);
}

Test(cli, compile_then_disasm_and_run_bytecode)
{
    result r = run_cli(NULL, "compile plans/design-example.rplan -o %s", tmp_path("design.rbc"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "disasm %s", tmp_path("design.rbc"));
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "request"));
    result_free(&r);
    r = run_cli(NULL, "disasm plans/design-example.rplan");
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "ckks.keyswitch"));
    result_free(&r);
    r = run_cli(NULL, "run --quiet --device emu --scale 1024 %s", tmp_path("design.rbc"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    
}

Test(cli, subcommand_help_prints_its_usage_and_exits_0)
{
    const char *cmds[] = {"check", "run", "compile", "disasm"};
    for (size_t i = 0; i < 4; i++)
        for (int h = 0; h < 2; h++) {
            result r = run_cli(NULL, "%s %s", cmds[i], h ? "-h" : "--help");
            cr_assert_eq(r.rc, 0, "%s: %s", cmds[i], r.err);
            char want[64];
            snprintf(want, sizeof want, "usage: fheplan %s ", cmds[i]);
            cr_assert(strstr(r.out, want), "%s", r.out);
            cr_assert_str_eq(r.err, "");
            result_free(&r);
        }
}

Test(cli, dash_reads_standard_input)
{
    result r = run_cli(NULL, "check - < plans/design-example.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "<stdin>: feasible"), "%s", r.out);
    result_free(&r);
    write_file(tmp_path("bad.rplan"), "rplan 1\nvalue x = 1 MiB at nowhere\n");
    r = run_cli("NO_COLOR=1", "check - < %s", tmp_path("bad.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "<stdin>:2:"), "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "compile - -o %s < plans/design-example.rplan", tmp_path("d.rbc"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "run --quiet --device emu --scale 1024 - < %s", tmp_path("d.rbc"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check - - < plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    result_free(&r);
}

Test(cli, compile_never_overwrites_its_input_and_writes_atomically)
{
    char *plan = slurp_file("plans/design-example.rplan");
    write_file(tmp_path("a.rplan"), plan);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "ln -s a.rplan %s && mkdir %s", tmp_path("link.rplan"),
             tmp_path("sub"));
    cr_assert_eq(system(cmd), 0);
    const char *outs[] = {"a.rplan", "sub/../a.rplan", "link.rplan"};
    for (size_t i = 0; i < 3; i++) {
        result r = run_cli(NULL, "compile %s -o %s", tmp_path("a.rplan"), tmp_path(outs[i]));
        cr_assert_eq(r.rc, 64, "%s", outs[i]);
        cr_assert(strstr(r.err, "refusing to overwrite"), "%s", r.err);
        result_free(&r);
        r = run_cli(NULL, "compile %s -o %s", tmp_path("link.rplan"), tmp_path(outs[i]));
        cr_assert_eq(r.rc, 64, "link: %s", outs[i]);
        result_free(&r);
        r = run_cli(NULL, "run --device emu --trace %s %s", tmp_path(outs[i]), tmp_path("a.rplan"));
        cr_assert_eq(r.rc, 64, "trace: %s", outs[i]);
        result_free(&r);
    }
    char *after = slurp_file(tmp_path("a.rplan"));
    cr_assert_str_eq(after, plan);
    free(after);
    /* a failed compile leaves the old output as it was; a good one replaces it whole */
    write_file(tmp_path("out.rbc"), "old");
    write_file(tmp_path("bad.rplan"), "rplan 1\nvalue x = 1 MiB at nowhere\n");
    result r = run_cli(NULL, "compile %s -o %s", tmp_path("bad.rplan"), tmp_path("out.rbc"));
    cr_assert_eq(r.rc, 1);
    result_free(&r);
    after = slurp_file(tmp_path("out.rbc"));
    cr_assert_str_eq(after, "old");
    free(after);
    r = run_cli(NULL, "compile %s -o %s", tmp_path("a.rplan"), tmp_path("out.rbc"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    after = slurp_file(tmp_path("out.rbc"));
    cr_assert(!memcmp(after, "\x89RPLAN", 6));
    free(after);
    /* nothing left over beside it */
    snprintf(cmd, sizeof cmd, "test -z \"$(ls %s | grep tmp-)\"", tmpdir_get());
    cr_assert_eq(system(cmd), 0);
    free(plan);
}

Test(cli, numeric_options_parse_strictly)
{
    const char *bad[] = {
        "run --scale -3", "run --scale 99999999999999999999", "run --scale 0", "run --scale 2x",
        "run --scale ' 4'", "check --budget cuda:0=16777216TiB", "check --budget cuda:0=1e30GiB",
        "check --budget cuda:0=-1GiB", "check --budget cuda:0=18446744073709551616",
        "check --budget cuda:0=1.GiB", "check --pinned-gbps 1e400", "check --pinned-gbps 0",
        "check --pinned-gbps nan", "check --device-gbps -5", "check --pinned-gbps 3x",
        "check --peer-gbps 0", "run --peer-gbps -1", "check --peer-gbps 1e400",
        "run --prefetch -1", "run --prefetch 1000001", "check --world-size 0",
        "check --world-size 65537", "check --world-size +2", "run --device emu:0",
        "run --device emu:63", "run --device emu:1x", "run --device model:2",
        "check --budget cuda:0=4", "check --budget cuda:0=1.5", "check --budget cuda:0=2GB",
        "check --budget 'cuda:0=1 G'", "check --pinned-gbps 1e3", "check --gen-gbps 0x10",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        result r = run_cli(NULL, "%s plans/design-example.rplan", bad[i]);
        cr_assert_eq(r.rc, 64, "%s: exit %d: %s", bad[i], r.rc, r.err);
        cr_assert(strstr(r.err, "fheplan: bad "), "%s: %s", bad[i], r.err);
        cr_assert_null(strstr(r.err, "model:N"), "%s names an undocumented spec: %s", bad[i],
                       r.err);
        result_free(&r);
    }
    const char *good[] = {"check --budget cuda:0=4.5GiB",
                          "check --budget cuda:0=18446744073709551615B",
                          "check --budget 'cuda:0=4 GiB'", "check --pinned-gbps 25.5",
                          "check --pinned-gbps .5", "check --world-size 2",
                          "check --peer-gbps 300"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        result r = run_cli(NULL, "%s plans/design-example.rplan", good[i]);
        cr_assert_eq(r.rc, 0, "%s: %s", good[i], r.err);
        result_free(&r);
    }
}

Test(cli, check_json_says_why_an_input_is_unreadable)
{
    result r = run_cli(NULL, "check --json %s", tmp_path("missing.rplan"));
    cr_assert_eq(r.rc, 2);
    cr_assert(strstr(r.err, "cannot read"), "%s", r.err);
    cJSON *j = parse_only_json(r.out);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "diagnostics"), 0);
    cr_assert_not_null(d, "%s", r.out);
    cr_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(d, "message")),
                     "No such file or directory"));
    cJSON_Delete(j);
    result_free(&r);
    r = run_cli(NULL, "run --json --device emu %s", tmp_path("missing.rplan"));
    cr_assert_eq(r.rc, 2);
    j = parse_only_json(r.out);
    cr_assert(cJSON_GetArraySize(cJSON_GetObjectItem(j, "diagnostics")) == 1, "%s", r.out);
    cJSON_Delete(j);
    result_free(&r);
}

Test(cli, run_failures_of_values_point_at_their_declaration)
{
    write_file(tmp_path("f.rplan"), "rplan 1\n"
                                    "value ct = 1 MiB exclusive at pinned init file(\"nope.bin\")\n");
    result r = run_cli("NO_COLOR=1", "run --device emu %s", tmp_path("f.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "f.rplan:2:7: error: value 'ct': cannot open 'nope.bin'"), "%s", r.err);
    result_free(&r);
    write_file(tmp_path("g.rplan"), "rplan 1\nvalue x = 1 MiB exclusive at cuda:1 init zero\n");
    r = run_cli("NO_COLOR=1", "check %s", tmp_path("g.rplan"));
    cr_assert_eq(r.rc, 0, "check assumes every device cuda:0..cuda:61: %s", r.err);
    result_free(&r);
    r = run_cli("NO_COLOR=1", "run --device emu %s", tmp_path("g.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "g.rplan:2:7: error: value 'x': emu: invalid location cuda:1"), "%s",
              r.err);
    result_free(&r);
    write_file(tmp_path("h.rplan"), "rplan 1\nbudget cuda:9 1 GiB\n");
    r = run_cli("NO_COLOR=1", "check %s", tmp_path("h.rplan"));
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli("NO_COLOR=1", "run --device emu %s", tmp_path("h.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "h.rplan:2:1: error: budget for cuda:9: the emu backend has 1 CUDA "
                            "device"), "%s", r.err);
    result_free(&r);
    r = run_cli("NO_COLOR=1", "run --device emu --budget cuda:3=1GiB %s", tmp_path("g.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "error: budget for cuda:3 (from an override): the emu backend has 1 "
                            "CUDA device"), "%s", r.err);
    result_free(&r);
}

Test(cli, names_with_control_bytes_or_bad_utf8_never_reach_json_or_the_terminal_raw)
{
    write_file(tmp_path("n.rplan"), "rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                                    "stage \"a\x1b[31mb\xff\" { ensure x @ pinned }\n");
    result r = run_cli(NULL, "check --json %s", tmp_path("n.rplan"));
    cr_assert_eq(r.rc, 1);
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "feasible")));
    cJSON_Delete(j);
    cr_assert_null(strchr(r.out, '\033'));
    cr_assert_null(strchr(r.out, '\xff'));
    result_free(&r);
    r = run_cli("NO_COLOR=1", "check %s", tmp_path("n.rplan"));
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "byte 0x1b in a string is not UTF-8 text"), "%s", r.err);
    cr_assert_null(strchr(r.err, '\033'), "a raw ESC reached the terminal");
    cr_assert_null(strchr(r.err, '\xff'));
    result_free(&r);
}

/* check --world-size N - reads standard input once and compiles the same text on every
 * rank (rank 2 of 3 refuses here, so an empty text on ranks 1 and 2 would pass). */
Test(cli, world_size_check_of_standard_input_compiles_it_on_every_rank)
{
    const char *p = tmp_path("ranks.rplan");
    write_file(p, "rplan 1\nconst R = 2 / (2 - rank)\nvalue x = 1 KiB at host\n");
    result r = run_cli(NULL, "check --world-size 3 - <%s", p);
    cr_assert_eq(r.rc, 1, "rc %d\n%s%s", r.rc, r.out, r.err);
    cr_assert(strstr(r.err, "rejected on rank 2 of 3"), "%s", r.err);
    cr_assert(strstr(r.out, "rank 1 of 3"), "%s", r.out);
    result_free(&r);
    write_file(p, "rplan 1\nvalue x[world_size] = 1 KiB at host\n");
    r = run_cli(NULL, "check --world-size 3 --json - <%s", p);
    cr_assert_eq(r.rc, 0, "rc %d\n%s%s", r.rc, r.out, r.err);
    result_free(&r);
    unlink(p);
}

/* A size's unit is the language's, and the likely one is named; FHEPLAN_*_GBPS and
 * FHEPLAN_EMU_MEMORY are read by the options' grammar and a bad one is named. */
Test(cli, sizes_rates_and_variables_refused_by_name)
{
    result r = run_cli(NULL, "check --budget cuda:0=2GB plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    cr_assert(strstr(r.err, "fheplan: bad --budget 'cuda:0=2GB': 'GB' is not a unit; did you "
                            "mean GiB?"), "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check --budget cuda:0=4 plans/design-example.rplan");
    cr_assert_eq(r.rc, 64);
    cr_assert(strstr(r.err, "a SIZE needs a unit"), "%s", r.err);
    result_free(&r);
    static const char *const vars[] = {"FHEPLAN_PINNED_GBPS", "FHEPLAN_DEVICE_GBPS",
                                       "FHEPLAN_GEN_GBPS", "FHEPLAN_PEER_GBPS"};
    static const char *const vals[] = {"abc", "-1", "nan", "1e400", "0"};
    for (size_t v = 0; v < 4; v++)
        for (size_t k = 0; k < 5; k++) {
            char env[96], want[96];
            snprintf(env, sizeof env, "%s=%s", vars[v], vals[k]);
            snprintf(want, sizeof want, "fheplan: bad %s '%s' in the environment", vars[v],
                     vals[k]);
            r = run_cli(env, "%s plans/design-example.rplan", k % 2 ? "check" : "run --device emu");
            cr_assert_eq(r.rc, 64, "%s: exit %d: %s", env, r.rc, r.err);
            cr_assert(strstr(r.err, want), "%s: %s", env, r.err);
            result_free(&r);
        }
    r = run_cli("FHEPLAN_PINNED_GBPS=.5", "check plans/design-example.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli("FHEPLAN_EMU_MEMORY=64", "run --device emu plans/design-example.rplan");
    cr_assert_eq(r.rc, 64, "%s", r.err);
    cr_assert(strstr(r.err, "bad FHEPLAN_EMU_MEMORY '64' in the environment: a SIZE needs a "
                            "unit"), "%s", r.err);
    result_free(&r);
}

/* --device auto that falls back to the emulated device says why (where CUDA is built in
 * but cannot run; elsewhere there is nothing to say). */
Test(cli, device_auto_says_why_it_runs_on_the_emulated_device)
{
    result c = run_cli(NULL, "run --device cuda plans/design-example.rplan");
    int no_gpu = c.rc != 0 && strstr(c.err, "no usable CUDA device") != NULL;
    result_free(&c);
    result r = run_cli("FHEPLAN_DEVICE=", "run plans/design-example.rplan");
    if (!no_gpu) { /* CUDA works here or is not built in: auto has nothing to explain */
        cr_assert_eq(r.rc, 0, "%s", r.err);
        cr_assert_null(strstr(r.err, "--device auto:"), "%s", r.err);
        result_free(&r);
        return;
    }
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "fheplan: note: --device auto: cuda: no usable CUDA device ("),
              "%s", r.err);
    cr_assert(strstr(r.err, "running on the emulated device"), "%s", r.err);
    result_free(&r);
}

/* check --quiet: the exit status only; every subcommand's --help names every option it
 * takes (--gen-gbps among them). */
Test(cli, check_quiet_prints_nothing_and_help_names_every_rate)
{
    result r = run_cli(NULL, "check --quiet plans/design-example.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_str_empty(r.out);
    cr_assert_str_empty(r.err);
    result_free(&r);
    const char *p = tmp_path("quiet.rplan");
    write_file(p, "rplan 1\nvalue x = 1 KiB at nowhere\n");
    r = run_cli(NULL, "check --quiet %s", p);
    cr_assert_eq(r.rc, 1);
    cr_assert_str_empty(r.out);
    cr_assert_str_empty(r.err);
    result_free(&r);
    unlink(p);
    r = run_cli(NULL, "check --quiet --json plans/design-example.rplan");
    cr_assert_eq(r.rc, 64, "%s", r.err);
    result_free(&r);
    static const char *const cmds[] = {"check", "run"};
    static const char *const opts[] = {"--pinned-gbps", "--peer-gbps", "--device-gbps",
                                       "--gen-gbps", "--quiet", "--budget", "--objective"};
    for (size_t i = 0; i < 2; i++) {
        r = run_cli(NULL, "%s --help", cmds[i]);
        cr_assert_eq(r.rc, 0);
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
            cr_assert(strstr(r.out, opts[k]), "%s --help lacks %s:\n%s", cmds[i], opts[k], r.out);
        result_free(&r);
    }
}

/* A budget refusal says where the bytes come from and where the budget was set. */
Test(cli, budget_errors_name_the_value_and_the_budget_option)
{
    result r = run_cli(NULL, "check --budget cuda:0=1.5KiB plans/design-example.rplan");
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "note: 'ct' is 25 MiB at cuda:0, declared here"), "%s", r.err);
    cr_assert(strstr(r.err, "note: the budget of cuda:0, 1536 B, is set by the caller, not the "
                            "file (fheplan: --budget cuda:0=SIZE)"), "%s", r.err);
    result_free(&r);
}

/* run's refusals are rendered as check's: file:line:col, the source line, the caret. */
Test(cli, run_errors_use_the_layout_of_check)
{
    const char *p = tmp_path("far.rplan");
    write_file(p, "rplan 1\nvalue x = 1 KiB at host\nplan \"p\" {\n\tenter { move x -> cuda:1 from host }\n}\n");
    result r = run_cli(NULL, "run --device emu %s", p);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    char want[512];
    snprintf(want, sizeof want, "%s:4:10: error: ", p);
    cr_assert(strstr(r.err, want), "%s", r.err);
    cr_assert(strstr(r.err, "\n\tenter { move x -> cuda:1 from host }\n\t        ^\n"), "%s", r.err);
    cr_assert_null(strstr(r.err, " | "), "%s", r.err);
    result_free(&r);
    unlink(p);
}

/* s without blanks (JSON printed with cJSON's layout). */
static char *squeeze(const char *s)
{
    char *o = strdup(s), *w = o;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n')
            *w++ = *s;
    *w = 0;
    return o;
}

/* Warnings leave the exit status alone, -Werror makes them errors, -Wno-NAME silences
 * them; --json and --sarif carry them with their rule. */
Test(cli, warnings_exit_policy_and_machine_output)
{
    const char *p = tmp_path("warn.rplan");
    write_file(p, "rplan 1\nbudget cuda:5 1 GiB\nconst K = 2\nvalue x = 1 KiB at host\n");
    result r = run_cli(NULL, "check %s", p);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, ":3:7: warning: constant 'K' is never used"), "%s", r.err);
    cr_assert(strstr(r.err, ":2:1: warning: budget for cuda:5 is never used"), "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check -Werror %s", p);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "error: value 'x' is never used [-Werror]"), "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check -Wno-unused -Werror %s", p);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_null(strstr(r.err, "warning"), "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check -Wunused-lol %s", p);
    cr_assert_eq(r.rc, 64, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check --json %s", p);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    char *q = squeeze(r.out);
    cr_assert(strstr(q, "\"severity\":\"warning\""), "%s", r.out);
    cr_assert(strstr(q, "\"rule\":\"RP804\""), "%s", r.out);
    free(q);
    result_free(&r);
    r = run_cli(NULL, "check --sarif %s", p);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    q = squeeze(r.out);
    cr_assert(strstr(q, "\"ruleId\":\"RP801\""), "%s", r.out);
    cr_assert(strstr(q, "\"level\":\"warning\""), "%s", r.out);
    free(q);
    result_free(&r);
    unlink(p);
}

/* A dry run's refusal (here of bytecode under a smaller --budget) is in --json's
 * diagnostics, located and with its rule, as --sarif lists it. */
Test(cli, check_json_lists_the_dry_run_refusal)
{
    const char *bc = tmp_path("boot.rpc");
    result r = run_cli(NULL, "compile plans/ckks-bootstrap.rplan -o %s", bc);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "check --json --budget cuda:0=300MiB %s", bc);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "%s", r.out);
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "diagnostics"), 0);
    cr_assert_not_null(d, "%s", r.out);
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(d, "severity")), "error");
    cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(d, "rule")), "RP601");
    cr_assert_eq(cJSON_GetObjectItem(d, "line")->valueint, 40, "%s", r.out);
    cr_assert(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(d, "message")), "is short by"));
    cJSON_Delete(j);
    result_free(&r);
    unlink(bc);
}

/* Absurd rates: the predicted time and the rate keep their units, with an exponent. */
Test(cli, absurd_rates_keep_their_units)
{
    result r = run_cli(NULL, "check --pinned-gbps 0.000001 --device-gbps 0.000001 "
                             "plans/design-example.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "predicted 1.03e+07 s (policies"), "%s", r.out);
    cr_assert(strstr(r.out, "transfers at 1e-06 GB/s pinned"), "%s", r.out);
    result_free(&r);
}
