/* tests/unit/test_lang_golden.c — data-driven language tests: every
 * tests/plans/ok/NAME.rplan compiles, survives write → load → verify, and disassembles
 * to exactly NAME.dis where that golden exists (kept short enough for a person to review:
 * at most GOLDEN_MAX_LINES); for the others every source position in the disassembly is
 * checked against the .rplan text itself. Every tests/plans/fail/NAME.rplan is refused
 * with exactly the diagnostics in NAME.err. `make update-golden` rewrites the existing
 * expectations (review the diff). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/file.h"
#include "fheplan/rplan.h"

/* The file's text, or NULL (the one reader of fheplan/file.h). */
static char *slurp(const char *path)
{
    char *text;
    size_t n;
    return fhr_read_file(path, &text, &n, NULL) == FHR_OK ? text : NULL;
}

#define GOLDEN_MAX_LINES 120

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Line n (1-based) of text, without its newline, in buf; 0 when there is none. */
static int line_of(const char *text, unsigned n, char *buf, size_t cap)
{
    for (unsigned i = 1; i < n && text; i++) {
        text = strchr(text, '\n');
        text = text ? text + 1 : NULL;
    }
    if (!text || !*text)
        return 0;
    size_t len = strcspn(text, "\n");
    snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), text);
    return 1;
}

static const char *skip_blank(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* The source keyword an opcode's position must point at ("" : any non-blank text). */
static const char *keyword_of(const char *op)
{
    static const char *const same[] = {"stage", "plan", "request", "require", "reserve", "run",
                                       "ensure", "move", "drop", "hold", "release", "discard"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!strcmp(op, same[i]))
            return same[i];
    if (!strcmp(op, "end") || !strcmp(op, "endstage"))
        return "}";
    return "";
}

/* Checks a disassembly against its source: every "; N: text" line quotes source line N,
 * every instruction's "; L:C" points at the statement keyword of its opcode (a phase at
 * enter, exit, body or reclaim; an argument at some text), every value at its name. */
static void check_positions(const char *path, const char *src, const char *dis)
{
    char line[1024], at[1024];
    int instrs = 0;
    for (unsigned k = 1; line_of(dis, k, line, sizeof line); k++) {
        unsigned n, l, c;
        int used = 0;
        const char *t = skip_blank(line);
        if (sscanf(t, "; %u: %n", &n, &used) == 1 && used > 0) {
            cr_assert(line_of(src, n, at, sizeof at), "%s: quotes line %u it does not have", path, n);
            cr_expect_str_eq(skip_blank(at), t + used, "%s: disassembly line %u misquotes line %u",
                             path, k, n);
            continue;
        }
        const char *semi = strrchr(line, ';');
        if (!semi || sscanf(semi, "; %u:%u", &l, &c) != 2)
            continue;
        char op[32] = "", name[256] = "";
        unsigned pc;
        if (sscanf(line, " value %u %255s", &pc, name) == 2) {
            char *br = strchr(name, '[');
            if (br)
                *br = 0;
        } else if (sscanf(line, " %u %31s", &pc, op) == 2) {
            instrs++;
        } else {
            continue;
        }
        cr_assert(line_of(src, l, at, sizeof at) && c >= 1 && c <= strlen(at),
                  "%s: %u:%u is outside the source", path, l, c);
        const char *here = at + c - 1;
        const char *want = name[0] ? name : keyword_of(op);
        if (!strcmp(op, "phase"))
            cr_expect(!strncmp(here, "enter", 5) || !strncmp(here, "exit", 4) ||
                          !strncmp(here, "body", 4) || !strncmp(here, "reclaim", 7),
                      "%s: phase at %u:%u points at '%s'", path, l, c, here);
        else if (want[0])
            cr_expect(!strncmp(here, want, strlen(want)), "%s: %s at %u:%u points at '%s'", path,
                      name[0] ? "value" : op, l, c, here);
        else
            cr_expect(*here && *here != ' ', "%s: %s at %u:%u points at a blank", path, op, l, c);
    }
    cr_assert_gt(instrs, 0, "%s: no instruction had a position", path);
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
        cr_expect_eq(compiled, want_ok, "%s: %s", in, compiled ? "compiled" : "refused");
        if (want) {
            cr_expect_leq(count_lines(want), GOLDEN_MAX_LINES,
                          "%s is too long for a person to review: check it another way", exp);
            cr_expect_str_eq(got, want, "%s differs from %s:\n%s", in, exp, got);
        } else {
            cr_assert(want_ok, "missing %s (make update-golden)", exp);
            char *src = slurp(in);
            cr_assert_not_null(src);
            check_positions(in, src, got);
            free(src);
        }
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
