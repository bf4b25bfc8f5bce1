/* tests/unit/test_fmt.c — rplan_format and `fheplan fmt`: over every plan in plans/,
 * tests/plans and the fuzz corpora, formatting is idempotent and the formatted plan
 * compiles to the same program (positions aside) or to the same errors; the layout rules
 * one by one; --check's diff and exit codes, -w, standard input. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fheplan/rplan.h"
#include "runtime/program/program.h"

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

static char *fmt_ok(const char *src)
{
    char *out = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_format(src, strlen(src), "t.rplan", &out, d);
    char *msg = rplan_diags_render_string(d);
    cr_assert_eq(st, FHR_OK, "format refused:\n%s\n%s", src, msg);
    free(msg);
    rplan_diags_free(d);
    return out;
}

/* The program's bytes with every source position cleared (the line table and value
 * positions): what must not change when only the layout does. */
static unsigned char *program_bytes(rplan_program *p, size_t *n)
{
    for (uint32_t i = 0; i < p->ncode; i++)
        p->lines[i] = (rp_linerec){0, 0, 0};
    for (uint32_t i = 0; i < p->nvals; i++) {
        p->vals[i].line = 0;
        p->vals[i].col = p->vals[i].len = 0;
    }
    void *b = NULL;
    cr_assert_eq(rplan_write_mem(p, &b, n), FHR_OK);
    return b;
}

/* Compiles src; status, program bytes (when it compiled) and the messages in order. */
static fhr_status compile_text(const char *src, size_t len, unsigned char **bytes, size_t *n,
                               char **msgs)
{
    rplan_compile_opts o = {.filename = "same.rplan", .strip_source = 1};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(src, len, &o, &p, d);
    *bytes = p ? program_bytes(p, n) : NULL;
    size_t cap = 1, used = 0;
    for (size_t i = 0; i < rplan_diags_count(d); i++)
        cap += strlen(rplan_diags_get(d, i)->message) + 1;
    *msgs = malloc(cap);
    (*msgs)[0] = '\0';
    for (size_t i = 0; i < rplan_diags_count(d); i++) {
        const char *m = rplan_diags_get(d, i)->message;
        used += (size_t)sprintf(*msgs + used, "%s\n", m);
    }
    rplan_program_free(p);
    rplan_diags_free(d);
    return st;
}

static size_t check_dir(const char *dir, size_t *formatted)
{
    DIR *dd = opendir(dir);
    cr_assert_not_null(dd, "%s", dir);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(dd))) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 6, ".rplan"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *src = slurp(path, &len);
        cr_assert_not_null(src, "%s", path);
        files++;
        char *out = NULL;
        rplan_diags *d = rplan_diags_new();
        fhr_status st = rplan_format(src, len, path, &out, d);
        unsigned char *b1, *b2;
        size_t n1 = 0, n2 = 0;
        char *m1, *m2;
        fhr_status c1 = compile_text(src, len, &b1, &n1, &m1);
        if (st != FHR_OK) {
            /* refused only for syntax errors, which compiling reports too */
            cr_assert_eq(st, FHR_E_INVALID, "%s", path);
            cr_assert_gt(rplan_diags_nerrors(d), 0, "%s: refused without an error", path);
            cr_assert_neq(c1, FHR_OK, "%s: compiles, but fmt refused it", path);
        } else {
            (*formatted)++;
            char *again = fmt_ok(out);
            cr_assert_str_eq(again, out, "%s: not idempotent", path);
            free(again);
            fhr_status c2 = compile_text(out, strlen(out), &b2, &n2, &m2);
            cr_assert_eq(c1, c2, "%s: compiles to %d, formatted to %d\n%s", path, c1, c2, out);
            cr_assert_str_eq(m1, m2, "%s: other diagnostics after formatting\n%s", path, out);
            if (c1 == FHR_OK) {
                cr_assert(n1 == n2 && memcmp(b1, b2, n1) == 0,
                          "%s: the formatted plan compiles to another program\n%s", path, out);
            }
            for (const char *l = out; *l;) {
                const char *end = strchr(l, '\n');
                cr_assert_not_null(end, "%s: no final newline", path);
                const char *hash = memchr(l, '#', (size_t)(end - l));
                const char *q = memchr(l, '"', (size_t)(end - l));
                /* code (comments and string labels aside) stays within 100 columns */
                size_t ind = strspn(l, " ");
                if (!hash && !q && ind < 60)
                    cr_assert_leq(end - l, 100, "%s: long line %.*s", path, (int)(end - l), l);
                cr_assert(end == l || (end[-1] != ' ' && end[-1] != '\t'),
                          "%s: trailing blank: %.*s", path, (int)(end - l), l);
                l = end + 1;
            }
            free(b2);
            free(m2);
        }
        free(b1);
        free(m1);
        free(out);
        rplan_diags_free(d);
        free(src);
    }
    closedir(dd);
    return files;
}

Test(fmt, corpus_same_program_and_idempotent)
{
    const char *dirs[] = {"plans", "tests/plans/ok", "tests/plans/fail", "tests/mpi",
                          "tests/fuzz/corpus/compile", "tests/fuzz/corpus/roundtrip"};
    size_t files = 0, formatted = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        files += check_dir(dirs[i], &formatted);
    cr_assert_gt(files, 100);
    cr_assert_gt(formatted, files / 2, "%zu of %zu formatted", formatted, files);
}

Test(fmt, plans_are_formatted)
{
    DIR *dd = opendir("plans");
    cr_assert_not_null(dd);
    struct dirent *e;
    while ((e = readdir(dd))) {
        if (!strstr(e->d_name, ".rplan"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "plans/%s", e->d_name);
        char *src = slurp(path, NULL);
        char *out = fmt_ok(src);
        cr_assert_str_eq(out, src, "%s is not formatted (fheplan fmt -w %s)", path, path);
        free(out);
        free(src);
    }
    closedir(dd);
}

static void expect(const char *src, const char *want)
{
    char *out = fmt_ok(src);
    cr_assert_str_eq(out, want, "formatting\n%s", src);
    free(out);
    out = fmt_ok(want);
    cr_assert_str_eq(out, want, "not idempotent on\n%s", want);
    free(out);
}

Test(fmt, spacing_and_one_statement_per_line)
{
    expect("rplan   1\nconst A=1<<4;const B = -A*(2+3)   MiB\nbudget cuda:0 2*B\n",
           "rplan 1\nconst A = 1 << 4\nconst B = -A * (2 + 3) MiB\nbudget cuda:0 2 * B\n");
    expect("rplan 1\nvalue v[ 4 ]=1 MiB at host\nfor i in 0 .. 3 { discard v[ i ] }\n",
           "rplan 1\nvalue v[4] = 1 MiB at host\nfor i in 0..3 { discard v[i] }\n");
    /* one statement per block level stays on its line; two are split */
    expect("rplan 1\nvalue v = 1 MiB at host\nstage \"s\" { plan \"p\" { enter { ensure v @ pinned } } }\n"
           "request \"r\" using q { require v @ pinned; body { run a(v); run b() } }\n",
           "rplan 1\nvalue v = 1 MiB at host\nstage \"s\" { plan \"p\" { enter { ensure v @ pinned } } }\n"
           "request \"r\" using q {\n  require v @ pinned\n  body {\n    run a(v)\n    run b()\n"
           "  }\n}\n");
    /* a block spread over lines stays spread, re-indented by two; blank lines: at most one */
    expect("rplan 1\n\n\n\nstage \"s\" {\n\n      discard x\n\n\n    discard y\n\n}\n",
           "rplan 1\n\nstage \"s\" {\n  discard x\n\n  discard y\n}\n");
    expect("rplan 1\nplan \"p\" {}\n", "rplan 1\nplan \"p\" {}\n");
    expect("rplan 1\nrun k.f(1, -2, x - 1)\n", "rplan 1\nrun k.f(1, -2, x - 1)\n");
}

Test(fmt, comments_stay_where_they_belong)
{
    expect("# head\n\nrplan 1 # version\n  # before\nstage \"s\" { # open\n"
           "discard x    # after x\n      # inside\n} # close\n# tail\n",
           "# head\n\nrplan 1  # version\n# before\nstage \"s\" {  # open\n  discard x  # after x\n"
           "  # inside\n}  # close\n# tail\n");
    /* a comment inside a one-line block spreads it */
    expect("rplan 1\nbody { run a() # c\n}\n", "rplan 1\nbody {\n  run a()  # c\n}\n");
    /* trailing comments of consecutive lines share a column */
    expect("rplan 1\nconst A = 1 # a\nconst LONGER = 2 # b\n\nconst C = 3 # c\n",
           "rplan 1\nconst A = 1       # a\nconst LONGER = 2  # b\n\nconst C = 3  # c\n");
    /* a comment in the middle of a statement ends its line; the rest continues */
    expect("rplan 1\nvalue v = 1 MiB # size\n  at host\n",
           "rplan 1\nvalue v = 1 MiB  # size\n    at host\n");
    /* own-line comments inside a statement keep their own lines, and none is lost */
    expect("rplan 1\nvalue v = 1 MiB\n  # one\n  # two\n  at host\nvalue w = 1 MiB # t\n"
           "  # own\n  at host\n",
           "rplan 1\nvalue v = 1 MiB\n    # one\n    # two\n    at host\nvalue w = 1 MiB  # t\n"
           "    # own\n    at host\n");
    /* CR LF line ends and trailing blanks go */
    expect("rplan 1\r\nconst A = 1   # x  \r\n", "rplan 1\nconst A = 1  # x\n");
}

Test(fmt, value_columns)
{
    expect("rplan 1\nvalue a = 1 MiB exclusive at host\nvalue long_name[2] = 2 * 3 MiB replicable "
           "source synth(i)\n\nvalue c = 1 MiB at host\n",
           "rplan 1\nvalue a            = 1 MiB     exclusive  at host\n"
           "value long_name[2] = 2 * 3 MiB replicable source synth(i)\n\n"
           "value c = 1 MiB at host\n");
}

Test(fmt, long_lines_wrap_at_break_points)
{
    const char *src =
        "rplan 1\nplan \"p\" {\n  reserve cuda:0 mult_workspace(N, L, DNUM) + rescale_workspace(N, L) "
        "+ rotation_workspace(N, L, DNUM) \"a label\"\n}\n";
    expect(src, "rplan 1\nplan \"p\" {\n  reserve cuda:0 mult_workspace(N, L, DNUM) + "
                "rescale_workspace(N, L)\n      + rotation_workspace(N, L, DNUM) \"a label\"\n}\n");
    /* inside parentheses only when nothing outside fits: after a comma */
    expect("rplan 1\nrun k.f(aaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccccc, "
           "dddddddddddddddddddddd, e)\n",
           "rplan 1\nrun k.f(aaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cccccccccccccccccccccc,\n"
           "    dddddddddddddddddddddd, e)\n");
}

Test(fmt, syntax_errors_are_refused)
{
    const char *src = "rplan 1\nvalue = 3 MiB\n";
    char *out = (char *)1;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_format(src, strlen(src), "bad.rplan", &out, d), FHR_E_INVALID);
    cr_assert_null(out);
    cr_assert_gt(rplan_diags_nerrors(d), 0);
    const rplan_diag *g = rplan_diags_get(d, 0);
    cr_assert_str_eq(g->file, "bad.rplan");
    cr_assert_eq(g->line, 2);
    rplan_diags_free(d);
    /* semantic errors are not the formatter's business */
    free(fmt_ok("rplan 1\ndiscard nothing_declared\n"));
}

/* ---- the command ----------------------------------------------------------------- */

static int sh(const char *cmd, char **out)
{
    char o[] = "/tmp/fheplan-fmt-XXXXXX";
    int fd = mkstemp(o);
    cr_assert(fd >= 0);
    close(fd);
    char full[2048];
    snprintf(full, sizeof full, "%s >%s 2>&1", cmd, o);
    int st = system(full);
    if (out)
        *out = slurp(o, NULL);
    unlink(o);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(fmt, cli_check_write_and_stdin)
{
    char dir[] = "/tmp/fheplan-fmtdir-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[512], cmd[1024];
    snprintf(path, sizeof path, "%s/p.rplan", dir);
    FILE *f = fopen(path, "w");
    fputs("rplan 1\nconst A=1\nconst B = 2\n", f);
    fclose(f);
    char *out;
    snprintf(cmd, sizeof cmd, "%s fmt --check %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "@@ -1,3 +1,3 @@\n rplan 1\n-const A=1\n+const A = 1\n const B = 2\n"),
              "%s", out);
    cr_assert(strstr(out, "is not formatted"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s fmt --check -w %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, NULL), 64);
    snprintf(cmd, sizeof cmd, "%s fmt - < %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 0);
    cr_assert_str_eq(out, "rplan 1\nconst A = 1\nconst B = 2\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s fmt -w %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, NULL), 0);
    char *now = slurp(path, NULL);
    cr_assert_str_eq(now, "rplan 1\nconst A = 1\nconst B = 2\n");
    free(now);
    snprintf(cmd, sizeof cmd, "%s fmt --check %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 0, "%s", out);
    cr_assert_str_eq(out, "");
    free(out);
    /* a syntax error: the diagnostic, exit 1, the file untouched */
    f = fopen(path, "w");
    fputs("rplan 1\nconst = 1\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s fmt -w %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 1);
    cr_assert(strstr(out, "p.rplan:2:7: error:"), "%s", out);
    free(out);
    now = slurp(path, NULL);
    cr_assert_str_eq(now, "rplan 1\nconst = 1\n");
    free(now);
    snprintf(cmd, sizeof cmd, "%s fmt %s/missing.rplan", FHEPLAN_CLI, dir);
    cr_assert_eq(sh(cmd, NULL), 2);
    /* bytecode is not source */
    snprintf(cmd, sizeof cmd, "%s compile plans/two-tenants.rplan -o %s/p.rpc && %s fmt %s/p.rpc",
             FHEPLAN_CLI, dir, FHEPLAN_CLI, dir);
    cr_assert_eq(sh(cmd, &out), 1);
    cr_assert(strstr(out, "p.rpc is bytecode"), "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/p.rpc", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/p.rplan", dir);
    unlink(path);
    rmdir(dir);
}

/* fmt --check refuses what fmt would change, the final newline included. */
Test(fmt, check_refuses_a_missing_final_newline)
{
    char dir[] = "/tmp/fheplan-fmtnl-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[512], cmd[1024];
    snprintf(path, sizeof path, "%s/p.rplan", dir);
    FILE *f = fopen(path, "w");
    fputs("rplan 1\nconst A = 1", f);
    fclose(f);
    char *out;
    snprintf(cmd, sizeof cmd, "%s fmt --check %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "is not formatted (no newline at the end of the file)"), "%s", out);
    free(out);
    /* the diff goes to stdout, the missing newline marked as diff(1) marks it */
    snprintf(cmd, sizeof cmd, "%s fmt --check %s 2>/dev/null", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 1, "%s", out);
    cr_assert(strstr(out, "@@ -1,2 +1,2 @@\n rplan 1\n-const A = 1\n\\ No newline at end of file\n"
                          "+const A = 1\n"),
              "stdout: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s fmt -w %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s fmt --check %s", FHEPLAN_CLI, path);
    cr_assert_eq(sh(cmd, &out), 0, "%s", out);
    free(out);
    unlink(path);
    rmdir(dir);
}
