/* tests/unit/test_lang_golden.c — data-driven language tests: every
 * tests/plans/ok/NAME.rplan compiles, survives write → load → verify, and disassembles
 * to exactly NAME.dis; every tests/plans/fail/NAME.rplan is refused with exactly the
 * diagnostics in NAME.err. Regenerate the expectations with `make update-golden`. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

static char *slurp(const char *path)
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
    return b;
}

/* What golden.c writes for one file. */
static char *produce(const char *path, int *compiled)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    *compiled = 0;
    if (rplan_compile_file(path, NULL, &p, d) == FHR_OK) {
        void *b;
        size_t n;
        rplan_program *q = NULL;
        cr_assert_eq(rplan_write_mem(p, &b, &n), FHR_OK);
        cr_assert_eq(rplan_load_mem(b, n, NULL, &q, d), FHR_OK, "%s: reload failed", path);
        rplan_disasm(q, out, 0);
        /* the compiled and the loaded program disassemble alike */
        char *a = rplan_disasm_string(p, 0), *c = rplan_disasm_string(q, 0);
        cr_assert_str_eq(a, c);
        free(a);
        free(c);
        free(b);
        rplan_program_free(q);
        *compiled = 1;
    }
    rplan_diags_render(d, out, 0);
    rplan_program_free(p);
    rplan_diags_free(d);
    fclose(out);
    return buf;
}

static int run_dir(const char *sub, const char *ext, int want_ok)
{
    char dpath[256];
    snprintf(dpath, sizeof dpath, "tests/plans/%s", sub);
    DIR *dd = opendir(dpath);
    cr_assert_not_null(dd, "run the tests from the repository root");
    struct dirent *e;
    int count = 0;
    while ((e = readdir(dd))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".rplan") != 0)
            continue;
        char in[1024], exp[1024];
        snprintf(in, sizeof in, "%s/%s", dpath, e->d_name);
        snprintf(exp, sizeof exp, "%s/%.*s%s", dpath, (int)(l - 6), e->d_name, ext);
        int compiled;
        char *got = produce(in, &compiled);
        char *want = slurp(exp);
        cr_assert_not_null(want, "missing %s (make update-golden)", exp);
        cr_expect_eq(compiled, want_ok, "%s: %s", in, compiled ? "compiled" : "refused");
        cr_expect_str_eq(got, want, "%s differs from %s:\n%s", in, exp, got);
        free(got);
        free(want);
        count++;
    }
    closedir(dd);
    return count;
}

Test(lang_golden, ok_plans)
{
    int n = run_dir("ok", ".dis", 1);
    cr_assert_geq(n, 5);
}

Test(lang_golden, fail_plans)
{
    int n = run_dir("fail", ".err", 0);
    cr_assert_geq(n, 40);
}
