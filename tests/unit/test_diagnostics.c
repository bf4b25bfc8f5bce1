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
