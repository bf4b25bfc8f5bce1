/* tests/unit/test_diagnostics.c — every diagnostic located and well worded, and text that
 * reaches terminals and JSON kept to printable UTF-8: characters outside strings, bytes
 * in strings, lone-CR line ends, bytecode strings, line tables, cycles and suggestions. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"
#include "runtime/program/program.h"

/* The rendered diagnostics of a refused compile, and their count in *n. */
static char *refuse(const char *src, size_t len, size_t *n)
{
    rplan_compile_opts o = {.filename = "d.rplan"};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(src, len, &o, &p, d);
    cr_assert_neq(st, FHR_OK, "accepted: %s", src);
    if (n)
        *n = rplan_diags_nerrors(d);
    char *r = rplan_diags_render_string(d);
    rplan_diags_free(d);
    return r;
}

static int printable_utf8(const char *s)
{
    /* newlines separate lines of the rendering; anything else must be text */
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (rp_text_bad(p, n) != n)
            return 0;
        p += n + (e != NULL);
    }
    return 1;
}

Test(diagnostics, a_utf8_character_outside_a_string_is_one_error)
{
    static const char src[] = "rplan 1\nvalue x\xc3\xa9 = 1 MiB at host\n";
    size_t n;
    char *r = refuse(src, sizeof src - 1, &n);
    cr_assert(strstr(r, "d.rplan:2:8: error: invalid character '\xc3\xa9' (names and keywords "
                        "are ASCII"), "%s", r);
    cr_assert_eq(n, 1, "%s", r);
    free(r);
}

Test(diagnostics, control_bytes_and_bad_utf8_in_strings_are_refused_and_never_echoed)
{
    static const char src[] = "rplan 1\nstage \"a\x1b[31mb\" { }\nstage \"c\xff\" { }\n";
    size_t n;
    char *r = refuse(src, sizeof src - 1, &n);
    cr_assert(strstr(r, "d.rplan:2:9: error: byte 0x1b in a string is not UTF-8 text"), "%s", r);
    cr_assert(strstr(r, "d.rplan:3:9: error: byte 0xff in a string"), "%s", r);
    cr_assert_eq(n, 2, "%s", r);
    cr_assert(printable_utf8(r), "raw bytes in the rendering: %s", r);
    free(r);
}

Test(diagnostics, lone_cr_line_ends_give_the_right_line_column_and_excerpt)
{
    static const char src[] = "rplan 1\rvalue x = 1 MiB at nowhere\r";
    char *r = refuse(src, sizeof src - 1, NULL);
    cr_assert(strstr(r, "d.rplan:2:20: error: unknown location 'nowhere'"), "%s", r);
    cr_assert(strstr(r, "\nvalue x = 1 MiB at nowhere\n                   ^~~~~~~\n"), "%s", r);
    free(r);
}

/* The serialised small program, its string table patched by fn, checksum recomputed. */
static char *load_patched(const char *src, const char *from, const char *to)
{
    rplan_compile_opts o = {.filename = "d.rplan", .strip_source = 1};
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), &o, &p, NULL), FHR_OK);
    void *w;
    size_t n;
    cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
    rplan_program_free(p);
    unsigned char *b = w;
    size_t fl = strlen(from);
    unsigned char *at = memmem(b, n, from, fl);
    cr_assert_not_null(at);
    memcpy(at, to, fl);
    cr_assert(rp_bytecode_restamp(b, n));
    rplan_diags *d = rplan_diags_new();
    rplan_program *q = NULL;
    fhr_status st = rplan_load_mem(b, n, "m.rpc", &q, d);
    char *r = st ? rplan_diags_render_string(d) : NULL;
    rplan_program_free(q);
    rplan_diags_free(d);
    free(w);
    return r;
}

Test(diagnostics, bytecode_strings_must_be_text)
{
    const char *src = "rplan 1\nstage \"abcd\" { }\n";
    char *r = load_patched(src, "abcd", "ab\x1b" "d");
    cr_assert(r && strstr(r, "byte 0x1b at 2 is not UTF-8 text"), "%s", r ? r : "(accepted)");
    free(r);
    r = load_patched(src, "abcd", "ab\xc3" "d");
    cr_assert(r && strstr(r, "byte 0xc3 at 2 is not UTF-8 text"), "%s", r ? r : "(accepted)");
    free(r);
    cr_assert_null(load_patched(src, "abcd", "ab\xc3\xa9"));
}

Test(diagnostics, a_missing_brace_points_at_the_brace_it_would_close)
{
    static const char src[] = "rplan 1\nvalue x = 1 MiB at host\nstage \"s\" {\n  plan \"p\" {"
                              " }\n  ensure x @ host\n";
    char *r = refuse(src, sizeof src - 1, NULL);
    cr_assert(strstr(r, "error: unexpected end of file, expected '}'"), "%s", r);
    cr_assert(strstr(r, "d.rplan:3:11: note: to match this '{'\nstage \"s\" {\n          ^"), "%s",
              r);
    free(r);
}

Test(diagnostics, a_misspelt_attribute_after_a_size_is_suggested)
{
    static const char src[] = "rplan 1\nvalue x = 1 MiB exlusive at host\n";
    char *r = refuse(src, sizeof src - 1, NULL);
    cr_assert(strstr(r, "d.rplan:2:17: error: unknown unit 'exlusive'; did you mean the keyword "
                        "'exclusive'?"), "%s", r);
    free(r);
}

Test(diagnostics, constants_in_a_cycle_or_used_early_say_so)
{
    static const char src[] = "rplan 1\nconst A = B\nconst B = A\nconst C = D + 1\nconst D = 2\n"
                              "const E = A + 1\n";
    size_t n;
    char *r = refuse(src, sizeof src - 1, &n);
    /* one error for the cycle, at its first use, and none at the second */
    cr_assert(strstr(r, "d.rplan:2:11: error: constants 'A' and 'B' are defined in terms of each "
                        "other (a cycle)"), "%s", r);
    cr_assert_null(strstr(r, "d.rplan:3:11"), "%s", r);
    cr_assert(strstr(r, "d.rplan:4:11: error: 'D' is used before its declaration"), "%s", r);
    cr_assert_null(strstr(r, "unknown name"), "%s", r);
    cr_assert_eq(n, 2, "one error per cycle; E's use of the broken A is not another: %s", r);
    free(r);
}

Test(diagnostics, line_table_entries_outside_the_source_are_refused)
{
    const char *src = "rplan 1\nvalue x = 1 MiB at host\nensure x @ pinned\n";
    rplan_compile_opts o = {.filename = "d.rplan"};
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), &o, &p, NULL), FHR_OK);
    void *w;
    size_t n;
    cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
    rplan_program_free(p);
    unsigned char *b = w;
    unsigned char *dir = b + RP_HDR_SIZE + RP_DIR_SIZE * (RP_SEC_LINE - 1);
    uint32_t off = (uint32_t)dir[4] | (uint32_t)dir[5] << 8 | (uint32_t)dir[6] << 16 |
                   (uint32_t)dir[7] << 24;
    const uint32_t lines[] = {4294967280u, 5, 3};
    const uint16_t cols[] = {1, 1, 65535};
    for (int t = 0; t < 3; t++) {
        unsigned char *c = malloc(n);
        memcpy(c, b, n);
        unsigned char *q = c + off;
        for (int k = 0; k < 4; k++)
            q[k] = (unsigned char)(lines[t] >> (8 * k));
        q[4] = (unsigned char)cols[t];
        q[5] = (unsigned char)(cols[t] >> 8);
        cr_assert(rp_bytecode_restamp(c, n));
        rplan_diags *d = rplan_diags_new();
        rplan_program *q2 = NULL;
        cr_assert_eq(rplan_load_mem(c, n, "m.rpc", &q2, d), FHR_E_INVALID, "case %d", t);
        char *r = rplan_diags_render_string(d);
        cr_assert(strstr(r, "is outside the embedded source (4 lines)"), "%s", r);
        cr_assert_null(strstr(r, "rplan:4294967280"), "printed the bad position as a place: %s", r);
        cr_assert(strstr(r, "rplan: error: instruction 0: source position"), "%s", r);
        free(r);
        rplan_diags_free(d);
        free(c);
    }
    free(w);
}

Test(diagnostics, budgets_carry_their_declaration_and_old_files_load)
{
    const char *src = "rplan 1\n\nbudget cuda:0 1 GiB\nbudget pinned 2 GiB\n";
    rplan_compile_opts o = {.filename = "d.rplan"};
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), &o, &p, NULL), FHR_OK);
    uint32_t line, col;
    /* budgets are in slot order: pinned (slot 1) first */
    cr_assert_eq(rplan_budget_position(p, 0, &line, &col), FHR_OK);
    cr_assert(line == 4 && col == 1, "%u:%u", line, col);
    cr_assert_eq(rplan_budget_position(p, 1, &line, &col), FHR_OK);
    cr_assert(line == 3 && col == 1, "%u:%u", line, col);
    /* an override has no position */
    fhr_budget ov = {fhr_loc_cuda(0), 1u << 20};
    rplan_compile_opts o2 = {.filename = "d.rplan", .budget_override = &ov, .nbudget_override = 1};
    rplan_program *q = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), &o2, &q, NULL), FHR_OK);
    cr_assert_eq(rplan_budget_position(q, 1, &line, &col), FHR_OK);
    cr_assert(line == 0 && col == 0, "%u:%u", line, col);
    rplan_program_free(q);
    /* a 1.0 file (positions zero) still loads; a position outside the source is refused */
    void *w;
    size_t n;
    cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
    unsigned char *b = w;
    unsigned char *dir = b + RP_HDR_SIZE + RP_DIR_SIZE * (RP_SEC_BUDG - 1);
    uint32_t off = (uint32_t)dir[4] | (uint32_t)dir[5] << 8 | (uint32_t)dir[6] << 16 |
                   (uint32_t)dir[7] << 24;
    b[10] = 0; /* minor 0 */
    memset(b + off + 1, 0, 7);
    memset(b + off + RP_BUDG_SIZE + 1, 0, 7);
    cr_assert(rp_bytecode_restamp(b, n));
    rplan_program *r = NULL;
    cr_assert_eq(rplan_load_mem(b, n, "old.rpc", &r, NULL), FHR_OK);
    cr_assert_eq(rplan_budget_position(r, 0, &line, &col), FHR_OK);
    cr_assert(line == 0 && col == 0);
    rplan_program_free(r);
    b[off + 4] = 99;
    b[off + 2] = 1;
    cr_assert(rp_bytecode_restamp(b, n));
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_load_mem(b, n, "old.rpc", &r, d), FHR_E_INVALID);
    char *t = rplan_diags_render_string(d);
    cr_assert(strstr(t, "budget 0: source position 99:1 is outside the embedded source"), "%s", t);
    free(t);
    rplan_diags_free(d);
    free(w);
    rplan_program_free(p);
}

/* A comment ends at every line end the language allows: LF, CR LF and a lone CR. */
Test(diagnostics, a_comment_ends_at_a_lone_cr_and_mixed_line_ends_compile)
{
    static const char *const srcs[] = {
        "rplan 1\r# c\rbudget cuda:0 2 KiB\rvalue x = 1 KiB at host # c\rvalue y = 1 KiB at "
        "host\rplan \"p\" { enter { move y -> cuda:0 from host } }\r",
        "rplan 1\r\n# c\r\nbudget cuda:0 2 KiB\rvalue x = 1 KiB at host # c\rvalue y = 1 KiB "
        "at host # d\r\nplan \"p\" { enter { move y -> cuda:0 from host } }\n",
    };
    for (size_t k = 0; k < 2; k++) {
        rplan_compile_opts o = {.filename = "d.rplan"};
        rplan_program *p = NULL;
        rplan_diags *d = rplan_diags_new();
        fhr_status st = rplan_compile(srcs[k], strlen(srcs[k]), &o, &p, d);
        char *r = rplan_diags_render_string(d);
        cr_assert_eq(st, FHR_OK, "source %zu: %s", k, r);
        cr_assert_eq(rplan_nvalues(p), 2, "source %zu: a statement after a comment vanished", k);
        cr_assert_eq(rplan_nbudgets(p), 1, "source %zu", k);
        /* the program round-trips: its line table fits the embedded source */
        void *w;
        size_t n;
        cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
        rplan_program *q = NULL;
        cr_assert_eq(rplan_load_mem(w, n, "m.rpc", &q, NULL), FHR_OK, "source %zu", k);
        rplan_program_free(q);
        free(w);
        free(r);
        rplan_program_free(p);
        rplan_diags_free(d);
    }
}

/* A failed declaration is one error: its uses do not add "unknown policy" or "unknown
 * value" (a bad policy kind, a size without a unit, an array of a bad size). */
Test(diagnostics, a_failed_declaration_does_not_cascade_into_its_uses)
{
    static const char *const srcs[] = {
        "rplan 1\nvalue k = 1 KiB at host\npolicy keys = lru(cuda:0 -> host)\n"
        "request \"r\" using keys { require k @ cuda:0 }\n",
        "rplan 1\nvalue ct = 4 at host\nplan \"p\" { enter { move ct -> cuda:0 from host } }\n",
        "rplan 1\nvalue ks[0] = 1 KiB at host\nplan \"p\" { enter { move ks[0] -> pinned from host } }\n",
        "rplan 1\npolicy p = tiered_lru(cuda:0 -> cuda:0)\nvalue x = 1 KiB at host\n"
        "request \"r\" using p { require x @ cuda:0 }\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        size_t n;
        char *r = refuse(srcs[i], strlen(srcs[i]), &n);
        cr_assert_eq(n, 1, "source %zu: %s", i, r);
        cr_assert_null(strstr(r, "unknown policy '"), "source %zu: %s", i, r);
        cr_assert_null(strstr(r, "unknown value '"), "source %zu: %s", i, r);
        free(r);
    }
}

/* Warnings: unused constants, values, policies and budgets, each with its rule; turned
 * off by name or group, or made errors. */
Test(diagnostics, unused_declarations_and_budgets_warn_with_rules)
{
    static const char src[] = "rplan 1\nconst UNUSED = 3\nconst _SPARE = 1\nconst N = 2\n"
                              "budget cuda:5 1 GiB\nbudget cuda:0 1 GiB\n"
                              "value x[N] = 1 KiB at host\nvalue lost = 1 KiB at host\n"
                              "policy idle = tiered_lru(cuda:0 -> host)\n"
                              "plan \"p\" { enter { move x[0] -> cuda:0 from host } }\n";
    static const struct { const char *at, *rule; } want[] = {
        {"d.rplan:2:7: warning: constant 'UNUSED' is never used", "RP801"},
        {"d.rplan:8:7: warning: value 'lost' is never used", "RP802"},
        {"d.rplan:9:8: warning: policy 'idle' is never used", "RP803"},
        {"d.rplan:5:1: warning: budget for cuda:5 is never used", "RP804"},
    };
    rplan_compile_opts o = {.filename = "d.rplan"};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_compile(src, sizeof src - 1, &o, &p, d), FHR_OK);
    char *r = rplan_diags_render_string(d);
    cr_assert_eq(rplan_diags_count(d), 4, "%s", r);
    cr_assert_eq(rplan_diags_nerrors(d), 0, "%s", r);
    for (size_t i = 0; i < 4; i++) {
        cr_assert(strstr(r, want[i].at), "%s", r);
        const rplan_diag *g = NULL;
        const char *msg = strstr(want[i].at, "warning: ") + 9;
        for (size_t k = 0; k < 4; k++)
            if (!strncmp(rplan_diags_get(d, k)->message, msg, strlen(msg)))
                g = rplan_diags_get(d, k);
        cr_assert_not_null(g, "%s", want[i].at);
        cr_assert_eq(g->severity, RPLAN_WARNING);
        cr_assert_str_eq(rplan_rule_of(g->message)->id, want[i].rule, "%s", g->message);
    }
    cr_assert_null(strstr(r, "_SPARE"), "%s", r);
    cr_assert_null(strstr(r, "'N'"), "%s", r);
    free(r);
    rplan_program_free(p);
    rplan_diags_free(d);
    /* -Wno-unused-value, then -Wno-unused: by name and by group */
    const char *off1[] = {"unused-value"}, *off2[] = {"unused"};
    o.warn_off = off1;
    o.nwarn_off = 1;
    d = rplan_diags_new();
    cr_assert_eq(rplan_compile(src, sizeof src - 1, &o, &p, d), FHR_OK);
    cr_assert_eq(rplan_diags_count(d), 3);
    rplan_program_free(p);
    rplan_diags_free(d);
    o.warn_off = off2;
    d = rplan_diags_new();
    cr_assert_eq(rplan_compile(src, sizeof src - 1, &o, &p, d), FHR_OK);
    cr_assert_eq(rplan_diags_count(d), 0);
    rplan_program_free(p);
    rplan_diags_free(d);
    /* -Werror: the warnings are errors and the compile fails */
    o.nwarn_off = 0;
    o.warn_error = 1;
    d = rplan_diags_new();
    cr_assert_neq(rplan_compile(src, sizeof src - 1, &o, &p, d), FHR_OK);
    cr_assert_eq(rplan_diags_nerrors(d), 4);
    r = rplan_diags_render_string(d);
    cr_assert(strstr(r, "d.rplan:2:7: error: constant 'UNUSED' is never used [-Werror]"), "%s", r);
    cr_assert_str_eq(rplan_rule_of(rplan_diags_get(d, 0)->message)->name, "unused-constant");
    free(r);
    rplan_diags_free(d);
}

/* C1 controls and bidirectional overrides are refused in strings (rplan(5)), named by
 * their code point, and never echoed raw; in bytecode the verifier refuses them. */
Test(diagnostics, c1_controls_and_bidi_overrides_in_strings_are_refused)
{
    static const char src[] = "rplan 1\nstage \"a\xc2\x9b" "b\" { }\nstage \"c\xe2\x80\xae" "d\" { }\n"
                              "stage \"e\xe2\x81\xa6" "f\" { }\nstage \"ok \xc3\xa9\xe2\x80\x94\" { }\n";
    size_t n;
    char *r = refuse(src, sizeof src - 1, &n);
    cr_assert(strstr(r, "d.rplan:2:9: error: character U+009B in a string is a control"), "%s", r);
    cr_assert(strstr(r, "d.rplan:3:9: error: character U+202E in a string"), "%s", r);
    cr_assert(strstr(r, "d.rplan:4:9: error: character U+2066 in a string"), "%s", r);
    cr_assert_eq(n, 3, "%s", r);
    cr_assert(printable_utf8(r), "raw bytes in the rendering: %s", r);
    cr_assert_null(strstr(r, "\xe2\x80\xae"), "%s", r);
    free(r);
    r = load_patched("rplan 1\nstage \"abcd\" { }\n", "abcd", "a\xe2\x80\xae");
    cr_assert(r && strstr(r, "byte 0xe2 at 1 is not UTF-8 text"), "%s", r ? r : "(accepted)");
    free(r);
}

/* Comments may hold any byte; the disassembly's source lines are shown as text. */
Test(diagnostics, disassembly_shows_embedded_source_as_text)
{
    static const char src[] = "rplan 1\nvalue x = 1 KiB at host # \x1b[31m\xff\n"
                              "plan \"p\" { enter { move x -> pinned from host } } # \x1b[0m\n";
    rplan_compile_opts o = {.filename = "d.rplan"};
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(src, sizeof src - 1, &o, &p, NULL), FHR_OK);
    char *t = rplan_disasm_string(p, 0);
    cr_assert(printable_utf8(t), "raw bytes in the disassembly: %s", t);
    cr_assert(strstr(t, "; 3: plan \"p\" { enter { move x -> pinned from host } } # ?[0m"), "%s", t);
    free(t);
    rplan_program_free(p);
}

/* A huge line is clipped around the caret, and a quoted string clipped in the message:
 * an error in a 1 MB line renders in well under 1 KB, the line once. */
Test(diagnostics, long_lines_and_strings_are_clipped)
{
    size_t big = 1 << 20;
    char *src = malloc(big + 64);
    size_t k = (size_t)sprintf(src, "rplan 1\nstage \"");
    memset(src + k, 'a', big);
    k += big;
    k += (size_t)sprintf(src + k, "\x1b\" { }\n");
    size_t n;
    char *r = refuse(src, k, &n);
    cr_assert_eq(n, 1, "%.300s", r);
    cr_assert_lt(strlen(r), 1024, "%.300s", r);
    cr_assert(strstr(r, "d.rplan:2:1048584: error: byte 0x1b in a string"), "%.300s", r);
    cr_assert(strstr(r, "\n...aaaa"), "%.600s", r);
    cr_assert(strstr(r, "a?\" { }\n"), "%.600s", r);
    cr_assert(strstr(r, "  ^\n"), "%.600s", r);
    free(r);
    k = (size_t)sprintf(src, "rplan 1\nstage \"");
    memset(src + k, 'b', 500);
    k += 500;
    k += (size_t)sprintf(src + k, "{nope}\" { }\n");
    r = refuse(src, k, &n);
    cr_assert(strstr(r, "error: unknown name 'nope' in \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
                        "bbbbbbbbbbbbbbbb...\""), "%.600s", r);
    cr_assert_lt(strlen(r), 1024, "%s", r);
    free(r);
    free(src);
}

/* A verifier refusal that names a value is located at the value's declaration. */
Test(diagnostics, verifier_refusals_naming_a_value_are_located)
{
    char *r = load_patched("rplan 1\nconst K = 1\nvalue k = 1 KiB at host seeded(K)\n"
                           "plan \"p\" { enter { move k -> pinned from host } }\n",
                           "counter", "9ounter");
    cr_assert(r && strstr(r, "d.rplan:3:7: error: value 0: bad generator name"),
              "%s", r ? r : "(accepted)");
    free(r);
}
