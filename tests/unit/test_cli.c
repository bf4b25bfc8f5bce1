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
#include <unistd.h>

#ifndef FHEPLAN_CLI
#define FHEPLAN_CLI "build/fheplan"
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

/* Runs `FHEPLAN_CLI args` with env prefix, capturing stdout and stderr. */
static result run_cli(const char *env, const char *args)
{
    char o[] = "/tmp/fheplan-out-XXXXXX", e[] = "/tmp/fheplan-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e);
    cr_assert(fo >= 0 && fe >= 0);
    close(fo);
    close(fe);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s </dev/null", env ? env : "", FHEPLAN_CLI, args,
             o, e);
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
    result r = run_cli(NULL, "");
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
    write_file("/tmp/fheplan-bad.rplan", "rplan 1\nbudget cuda:0 1 MiB\n"
                                         "value a = 2 MiB exclusive at pinned init zero\n"
                                         "move a -> cuda:0 from pinned\n");
    result r = run_cli("NO_COLOR=1", "check /tmp/fheplan-bad.rplan");
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "/tmp/fheplan-bad.rplan:4:1: error: "), "%s", r.err);
    cr_assert(strstr(r.err, "move a -> cuda:0 from pinned"));
    cr_assert(strstr(r.err, "^"));
    cr_assert_null(strchr(r.err, '\033'), "colour despite NO_COLOR");
    result_free(&r);
    /* a budget override that makes it fit */
    r = run_cli(NULL, "check --budget cuda:0=4MiB /tmp/fheplan-bad.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    /* and one that makes a feasible plan infeasible */
    r = run_cli("NO_COLOR=1", "check --budget cuda:0=100MiB plans/design-example.rplan");
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "error:"));
    result_free(&r);
    unlink("/tmp/fheplan-bad.rplan");
}

Test(cli, syntax_error_has_position_and_caret)
{
    write_file("/tmp/fheplan-syntax.rplan", "rplan 1\nvalue x = 1 MiB at nowhere\n");
    result r = run_cli("NO_COLOR=1", "check /tmp/fheplan-syntax.rplan");
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "/tmp/fheplan-syntax.rplan:2:"), "%s", r.err);
    cr_assert(strstr(r.err, ": error: "));
    result_free(&r);
    unlink("/tmp/fheplan-syntax.rplan");
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
    result r = run_cli("NO_COLOR=1", "run --device emu --scale 1024 --trace /tmp/fheplan-trace.json "
                                     "plans/ckks-bootstrap.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "integrity: ok"));
    cr_assert(strstr(r.out, "lower bound: max(compute"));
    cr_assert(strstr(r.out, "ratio"));
    char *t = slurp_file("/tmp/fheplan-trace.json");
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
    unlink("/tmp/fheplan-trace.json");
    result_free(&r);
}

Test(cli, run_json_report_has_every_field)
{
    result r = run_cli(NULL, "run --json --device emu --scale 256 plans/two-tenants.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cJSON *j = parse_only_json(r.out);
    const char *top[] = {"ok", "mode", "device", "scale", "stages", "totals", "error", "file"};
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
    write_file("/tmp/fheplan-fail.rplan", "rplan 1\nvalue a = 64 KiB at pinned init synth(1)\n"
                                          "plan \"p\" {\n  enter { ensure a @ cuda:0 }\n"
                                          "  body { run verify(a) }\n}\n");
    /* the override is too small at run time only: check passes the declared budgets */
    result r = run_cli("NO_COLOR=1", "run --device emu --budget cuda:0=1KiB /tmp/fheplan-fail.rplan");
    cr_assert_eq(r.rc, 1);
    cr_assert(strstr(r.err, "/tmp/fheplan-fail.rplan:"), "%s", r.err);
    cr_assert(strstr(r.err, ": error: "));
    result_free(&r);
    r = run_cli(NULL, "run --json --device emu --budget cuda:0=1KiB /tmp/fheplan-fail.rplan");
    cr_assert_eq(r.rc, 1);
    /* compile rejects it: the diagnostics are in the JSON, stdout has only the document */
    cJSON *j = parse_only_json(r.out);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "ok")));
    cJSON_Delete(j);
    result_free(&r);
    unlink("/tmp/fheplan-fail.rplan");
}

Test(cli, compile_then_disasm_and_run_bytecode)
{
    result r = run_cli(NULL, "compile plans/design-example.rplan -o /tmp/fheplan-design.rbc");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    r = run_cli(NULL, "disasm /tmp/fheplan-design.rbc");
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "request"));
    result_free(&r);
    r = run_cli(NULL, "disasm plans/design-example.rplan");
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "ckks.keyswitch"));
    result_free(&r);
    r = run_cli(NULL, "run --quiet --device emu --scale 1024 /tmp/fheplan-design.rbc");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    result_free(&r);
    unlink("/tmp/fheplan-design.rbc");
}
