/* tests/unit/test_cli_words.c — the words of the fheplan command a new user meets first:
 * per-command help, "did you mean" for a mistyped command, counted nouns in report lines
 * ("1 request", not "1 requests"), `check -` named <stdin>, a --timeline named .svg
 * refused, an emulated run saying its times are modelled on this host, and trace slices
 * naming values by their declared names. Runs the CLI of the same build. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/tmpdir.h"

#ifndef FHEPLAN_CLI
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

typedef struct result {
    int rc;
    char *out, *err;
} result;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *s = NULL;
    size_t n = 0, cap = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        if (n + 2 > cap) {
            cap = cap ? 2 * cap : 4096;
            s = realloc(s, cap);
            cr_assert_not_null(s);
        }
        s[n++] = (char)ch;
    }
    fclose(f);
    if (!s)
        s = calloc(1, 1);
    cr_assert_not_null(s);
    s[n] = 0;
    return s;
}

/* `FHEPLAN_CLI args`, stdout and stderr captured (stdin /dev/null unless args redirect). */
static result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static result run(const char *fmt, ...)
{
    char args[1024], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char o[600], e[600];
    snprintf(o, sizeof o, "%s", tmp_path("out"));
    snprintf(e, sizeof e, "%s", tmp_path("err"));
    snprintf(cmd, sizeof cmd, "NO_COLOR=1 %s %s >%s 2>%s%s", FHEPLAN_CLI, args, o, e,
             strchr(args, '<') ? "" : " </dev/null");
    int st = system(cmd);
    result r = {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
    return r;
}

static void done(result *r)
{
    free(r->out);
    free(r->err);
}

Test(cli_words, help_of_one_command_prints_its_usage_alone)
{
    result r = run("help run");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "usage: fheplan run "), "%s", r.out);
    cr_assert_null(strstr(r.out, "fheplan check"), "%s", r.out);
    cr_assert_null(strstr(r.out, "fheplan compile"), "%s", r.out);
    done(&r);
    r = run("help");
    cr_assert_eq(r.rc, 0);
    cr_assert(strstr(r.out, "fheplan check") && strstr(r.out, "fheplan fmt"), "%s", r.out);
    done(&r);
    r = run("help nosuchthing");
    cr_assert_eq(r.rc, 64);
    cr_assert(strstr(r.err, "unknown command 'nosuchthing'"), "%s", r.err);
    done(&r);
}

Test(cli_words, a_mistyped_command_gets_a_suggestion)
{
    static const char *const typo[][2] = {{"chek", "check"}, {"rnu", "run"},
                                          {"compil", "compile"}, {"dissasm", "disasm"},
                                          {"fnt", "fmt"}};
    for (size_t k = 0; k < sizeof typo / sizeof typo[0]; k++) {
        result r = run("%s plans/attention-tile.rplan", typo[k][0]);
        char want[64];
        snprintf(want, sizeof want, "did you mean '%s'?", typo[k][1]);
        cr_assert_eq(r.rc, 64, "%s", typo[k][0]);
        cr_assert(strstr(r.err, want), "%s: %s", typo[k][0], r.err);
        done(&r);
    }
    result r = run("xyzzy plans/attention-tile.rplan");
    cr_assert_eq(r.rc, 64);
    cr_assert(strstr(r.err, "unknown command 'xyzzy'"), "%s", r.err);
    cr_assert_null(strstr(r.err, "did you mean"), "%s", r.err);
    done(&r);
}

Test(cli_words, report_lines_count_one_in_the_singular)
{
    /* explicit-walkthrough: a stage with 1 plan, one with 1 request and 1 body */
    result r = run("check plans/explicit-walkthrough.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, " 1 plan,") && strstr(r.out, " 1 request,") &&
                  strstr(r.out, " 1 body;"), "%s", r.out);
    cr_assert_null(strstr(r.out, " 1 plans"), "%s", r.out);
    cr_assert_null(strstr(r.out, " 1 requests"), "%s", r.out);
    cr_assert_null(strstr(r.out, " 1 bodies"), "%s", r.out);
    done(&r);
    /* disasm's header: replicas declares one budget */
    r = run("disasm tests/plans/ok/replicas.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, " 1 budget,"), "%s", r.out);
    cr_assert_null(strstr(r.out, " 1 budgets"), "%s", r.out);
    cr_assert(strstr(r.out, " 0 policies,"), "%s", r.out);
    done(&r);
}

Test(cli_words, check_of_standard_input_names_it_stdin)
{
    result r = run("check - <plans/attention-tile.rplan");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(!strncmp(r.out, "<stdin>: feasible", 17), "%s", r.out);
    done(&r);
    const char *bad = tmp_path("bad.rplan");
    FILE *f = fopen(bad, "w");
    cr_assert_not_null(f);
    fputs("rplan 1\nvalue a = 1 KiB\nplan p { ensure b at cuda:0 }\n", f);
    fclose(f);
    r = run("check - <%s", bad);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "<stdin>:") && strstr(r.err, "<stdin>: rejected"), "%s", r.err);
    cr_assert_null(strstr(r.err, "\n-: rejected"), "%s", r.err);
    done(&r);
}

Test(cli_words, timeline_refuses_an_svg_name_and_writes_nothing)
{
    const char *svg = tmp_path("t.svg");
    result r = run("run --device emu --timeline %s plans/attention-tile.rplan", svg);
    cr_assert_eq(r.rc, 64, "%s", r.err);
    cr_assert(strstr(r.err, "not an SVG image") && strstr(r.err, ".html"), "%s", r.err);
    cr_assert_neq(access(svg, F_OK), 0, "%s was written", svg);
    done(&r);
    r = run("run --device emu --timeline=%s plans/attention-tile.rplan", tmp_path("T.SVG"));
    cr_assert_eq(r.rc, 64, "%s", r.err);
    done(&r);
}

Test(cli_words, emulated_run_says_its_times_are_modelled_and_names_values)
{
    const char *trace = tmp_path("t.json");
    result r = run("run --device emu --trace %s plans/attention-tile.rplan", trace);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "modelled on this host, not measured on a GPU"), "%s", r.out);
    done(&r);
    char *t = slurp(trace);
    /* transfers name the plan's values (input[0]), never a bare handle number */
    cr_assert(strstr(t, "input[0]"), "no declared name in the trace");
    cr_assert_null(strstr(t, " #"), "a bare handle number in the trace");
    free(t);
}
