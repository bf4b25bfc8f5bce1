/* tests/unit/test_lang_limbs.c — limb-cut values (`limbs(Q, K, P)`) and levels on require
 * and ensure: the syntax and its located errors (rule RP409), the inspection API (the cut
 * fields of rplan_value_info, rplan_instr.limbs, rplan_value_cut and _field), the dry run
 * charging only the limbs a copy holds, bytecode 1.5 (written only when needed, corrupt
 * records and limb counts refused by name and instruction), disasm and fmt. */
#include "compile_ok.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/program/program.h"

#define KB 1024u
/* 1000 KiB in four fields of 250 KiB, each 8 q-limbs and 2 special limbs of 25 KiB; two
 * parts of two fields (alpha = 4: part 1 is present from level 4) */
#define KEY "value k = 1000 KiB at pinned init synth(7) fields(b0, a0, b1, a1) limbs(8, 2, 2)\n"
#define LIMB (25 * KB)

static rplan_program *compile_ok(const char *src) { return compile_ok_named(src, "l.rplan"); }

/* The first error of a refused compile: its message, line and column (col 0: any), and
 * that its rule is `rule`. */
static void expect_error(const char *src, const char *want, uint32_t line, uint32_t col,
                         const char *rule)
{
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts o = {.filename = "bad.rplan"};
    fhr_status st = rplan_compile(src, strlen(src), &o, &p, d);
    cr_assert_neq(st, FHR_OK, "accepted:\n%s", src);
    cr_assert_null(p);
    const rplan_diag *g = rplan_diags_get(d, 0);
    cr_assert_not_null(g);
    cr_assert(strstr(g->message, want) != NULL, "got '%s', want '%s'", g->message, want);
    cr_assert_eq(g->line, line, "%s at line %u", g->message, g->line);
    if (col)
        cr_assert_eq(g->col, col, "%s at column %u", g->message, g->col);
    cr_assert_str_eq(rplan_rule_of(g->message)->id, rule, "%s", g->message);
    rplan_diags_free(d);
}

/* ---- the language and the inspection API --------------------------------------------- */

Test(lang_limbs, cut_values_and_levels_are_inspected)
{
    rplan_program *p = compile_ok("rplan 1\n" KEY
                                  "value h = 32 KiB at pinned seeded(1) limbs(4, 0, 2)\n"
                                  "value c = 30 KiB at pinned\n"
                                  "policy g = tiered_lru(cuda:0 -> pinned)\n"
                                  "for i in 0..1 {\n"
                                  "  request \"r{i}\" using g { require k @ cuda:0 level 6 - i\n"
                                  "    require c @ cuda:0 body { run touch(k, c) } }\n"
                                  "}\n"
                                  "ensure k @ cuda:1 level 0\nensure k @ cuda:2\nensure c @ host\n");
    rplan_value_info vi;
    cr_assert_eq(rplan_value(p, 0, &vi), FHR_OK);
    cr_assert_eq(vi.limb_q, 8);
    cr_assert_eq(vi.limb_special, 2);
    cr_assert_eq(vi.limb_parts, 2);
    cr_assert_eq(rplan_value(p, 1, &vi), FHR_OK);
    cr_assert(vi.limb_q == 4 && vi.limb_special == 0 && vi.limb_parts == 2);
    cr_assert_eq(rplan_value(p, 2, &vi), FHR_OK);
    cr_assert(vi.limb_q == 0 && vi.limb_special == 0 && vi.limb_parts == 0, "no limbs(...)");
    /* the limb counts of require and ensure: level + 1, 0 for the whole value */
    static const struct { const char *op; uint32_t limbs; } want[] = {
        {"require", 7}, {"require", 0}, {"require", 6}, {"require", 0},
        {"ensure", 1}, {"ensure", 0}, {"ensure", 0},
    };
    size_t k = 0;
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr in;
        cr_assert_eq(rplan_instr_get(p, i, &in), FHR_OK);
        if (strcmp(in.opname, "require") && strcmp(in.opname, "ensure")) {
            cr_assert_eq(in.limbs, 0, "%s", in.opname);
            continue;
        }
        cr_assert_lt(k, 7);
        cr_assert_str_eq(in.opname, want[k].op);
        cr_assert_eq(in.limbs, want[k].limbs, "instruction %zu", i);
        k++;
    }
    cr_assert_eq(k, 7);
    /* the cut of k: level 3 holds part 0 only, 4 + 2 limbs of each of its two fields */
    uint64_t n, off;
    cr_assert_eq(rplan_value_cut(p, 0, 0, &n), FHR_OK);
    cr_assert_eq(n, 1000 * KB);
    cr_assert_eq(rplan_value_cut(p, 0, 4, &n), FHR_OK);
    cr_assert_eq(n, 2 * 6 * LIMB);
    cr_assert_eq(rplan_value_cut(p, 0, 5, &n), FHR_OK); /* level 4: both parts */
    cr_assert_eq(n, 4 * 7 * LIMB);
    cr_assert_eq(rplan_value_cut(p, 0, 8, &n), FHR_OK);
    cr_assert_eq(n, 1000 * KB);
    cr_assert_eq(rplan_value_cut(p, 0, 9, &n), FHR_E_INVALID);
    cr_assert_eq(rplan_value_cut(p, 2, 1, &n), FHR_E_INVALID, "no limbs(...)");
    cr_assert_eq(rplan_value_cut(p, 2, 0, &n), FHR_OK);
    cr_assert_eq(n, 30 * KB);
    cr_assert_eq(rplan_value_cut(p, 3, 0, &n), FHR_E_INVALID);
    /* fields packed in order: a1 follows b0 and a0; b1 and a1 absent at level 3 */
    cr_assert_eq(rplan_value_cut_field(p, 0, 4, 1, &off, &n), FHR_OK);
    cr_assert(off == 6 * LIMB && n == 6 * LIMB, "%llu %llu", (unsigned long long)off,
              (unsigned long long)n);
    cr_assert_eq(rplan_value_cut_field(p, 0, 4, 2, &off, &n), FHR_OK);
    cr_assert(off == 12 * LIMB && n == 0);
    cr_assert_eq(rplan_value_cut_field(p, 0, 5, 3, &off, &n), FHR_OK);
    cr_assert(off == 21 * LIMB && n == 7 * LIMB);
    cr_assert_eq(rplan_value_cut_field(p, 0, 0, 3, &off, &n), FHR_OK);
    cr_assert(off == 750 * KB && n == 250 * KB);
    cr_assert_eq(rplan_value_cut_field(p, 0, 4, 4, &off, &n), FHR_E_INVALID);
    /* a seeded value's "b" and "a" are its two fields: level 0 holds "b"'s first limb */
    cr_assert_eq(rplan_value_cut(p, 1, 1, &n), FHR_OK);
    cr_assert_eq(n, 4 * KB);
    cr_assert_eq(rplan_value_cut(p, 1, 3, &n), FHR_OK);
    cr_assert_eq(n, 2 * 3 * 4 * KB);
    cr_assert_eq(rplan_value_cut_field(p, 1, 3, 1, &off, &n), FHR_OK);
    cr_assert(off == 12 * KB && n == 12 * KB);
    rplan_program_free(p);
}

Test(lang_limbs, errors_are_located)
{
    expect_error("rplan 1\nvalue k = 40 KiB at pinned fields(b0, a0, b1, a1) limbs(8, 2, 3)\n",
                 "limbs of 'k': P = 3 does not divide its 4 fields into equal parts", 2, 63,
                 "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(0, 2)\n",
                 "limbs of 'k': Q must be from 1 to 65535, not 0", 2, 34, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(65536, 0)\n",
                 "limbs of 'k': Q must be from 1 to 65535, not 65536", 2, 34, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(3, 65536)\n",
                 "limbs of 'k': K must be from 0 to 65535, not 65536", 2, 37, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(3, 0, 2)\n",
                 "limbs of 'k': P must be from 1 to its 1 field, not 2", 2, 40, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(3, 0, 0)\n",
                 "limbs of 'k': P must be from 1 to its 1 field, not 0", 2, 40, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(7, 2)\n",
                 "limbs of 'k': field 'data' of 30720 bytes is not Q + K = 9 limbs of equal "
                 "size", 2, 28, "RP409");
    /* each field on its own: 'a' of 10 KiB is not 3 limbs */
    expect_error("rplan 1\nvalue k = 30 KiB at pinned fields(b = 18 KiB, a = 12 KiB) limbs(3, 0)"
                 "\nvalue j = 31 KiB at pinned fields(b = 18 KiB, a = 13 KiB) limbs(3, 0)\n",
                 "limbs of 'j': field 'a' of 13312 bytes is not Q + K = 3 limbs", 3, 0, "RP409");
    /* a seeded value's 'b' and 'a': 2 KiB each, not 3 limbs */
    expect_error("rplan 1\nvalue k = 4 KiB at pinned seeded(1) limbs(3, 0)\n",
                 "limbs of 'k': field 'b' of 2048 bytes", 2, 0, "RP409");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(3, 0) limbs(3, 0)\n",
                 "duplicate 'limbs' for value 'k'", 2, 40, "RP403");
    expect_error("rplan 1\nvalue k = 30 KiB at pinned limbs(3 MiB, 0)\n",
                 "a limb count must be an integer, not a size", 2, 36, "RP504");
    /* array elements: each checked, Q may depend on i */
    expect_error("rplan 1\nvalue k[3] = 32 KiB at pinned limbs(1 + i, 0)\n",
                 "limbs of 'k[2]': field 'data' of 32768 bytes is not Q + K = 3", 2, 0, "RP409");
    /* levels */
    expect_error("rplan 1\nvalue c = 30 KiB at pinned\nensure c @ cuda:0 level 1\n",
                 "a level needs a limb-cut value; 'c' has no limbs(...)", 3, 25, "RP409");
    expect_error("rplan 1\n" KEY "ensure k @ host level 1\n",
                 "a level names a partial device copy; host and pinned copies are whole", 3, 23,
                 "RP409");
    expect_error("rplan 1\n" KEY "policy g = tiered_lru(cuda:0 -> pinned)\n"
                 "request \"r\" using g { require k @ pinned level 0 }\n",
                 "a level names a partial device copy", 4, 48, "RP409");
    expect_error("rplan 1\n" KEY "ensure k @ cuda:0 level 8\n",
                 "level 8 of 'k' is out of range: it has 8 q-limbs (levels 0 to 7)", 3, 25,
                 "RP409");
    expect_error("rplan 1\n" KEY "for i in 0..8 { ensure k @ cuda:0 level 3 - i }\n",
                 "level -1 of 'k' is out of range", 3, 43, "RP409");
    expect_error("rplan 1\n" KEY "ensure k @ cuda:0 level 2 ms\n",
                 "a level must be an integer, not a duration", 3, 0, "RP504");
    /* `level` and `limbs` are keywords: no longer names, but still words of a kernel name */
    expect_error("rplan 1\nconst level = 3\n", "unexpected 'level'", 2, 7, "RP201");
    rplan_program_free(compile_ok("rplan 1\nkernel ckks.level cost 1 us\nkernel x.limbs cost 2 us"
                                  "\nvalue c = 1 KiB at host\n"
                                  "plan \"p\" { body { run ckks.level(c) run x.limbs(c) } }\n"));
}

/* ---- the dry run ------------------------------------------------------------------------- */

static char *refused(const char *src)
{
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts o = {.filename = "l.rplan"};
    cr_assert_neq(rplan_compile(src, strlen(src), &o, &p, d), FHR_OK, "accepted:\n%s", src);
    char *r = rplan_diags_render_string(d);
    rplan_diags_free(d);
    return r;
}

Test(lang_limbs, the_dry_run_charges_the_limbs_a_copy_holds)
{
    /* a request at level 3 needs 300 KiB of the key: with 600 KiB reserved it fits 1 MiB;
     * the whole key does not */
    static const char req[] = "rplan 1\nbudget cuda:0 1 MiB\n" KEY
                              "policy g = tiered_lru(cuda:0 -> pinned)\n"
                              "request \"r\" using g { require k @ cuda:0%s reserve cuda:0 600 KiB"
                              " body { run touch(k) } }\n";
    char src[1024];
    snprintf(src, sizeof src, req, " level 3");
    rplan_program_free(compile_ok(src));
    snprintf(src, sizeof src, req, "");
    char *r = refused(src);
    cr_assert(strstr(r, "request 'r' cannot fit cuda:0: needs 1600 KiB"), "%s", r);
    free(r);
    /* the same endpoint twice: the larger requirement (level 4: 700 KiB) */
    snprintf(src, sizeof src, req, " level 3 require k @ cuda:0 level 4");
    r = refused(src);
    cr_assert(strstr(r, "needs 1300 KiB"), "%s", r);
    free(r);
    /* a held whole copy that is also required at a level counts whole */
    r = refused("rplan 1\nbudget cuda:0 1200 KiB\n" KEY
                "policy g = tiered_lru(cuda:0 -> pinned)\nensure k @ cuda:0\nhold k @ cuda:0\n"
                "request \"r\" using g { require k @ cuda:0 level 3 reserve cuda:0 201 KiB }\n"
                "release k @ cuda:0\n");
    cr_assert(strstr(r, "request 'r' cannot fit cuda:0: needs 1201 KiB"), "%s", r);
    free(r);
    /* an ensure at a level charges its limbs; a later one grows the copy by the difference,
     * a whole one to the whole value; one of fewer limbs, or of a whole copy, is a no-op */
    rplan_program_free(compile_ok("rplan 1\nbudget cuda:0 1000 KiB\n" KEY
                                  "ensure k @ cuda:0 level 3\nensure k @ cuda:0 level 2\n"
                                  "ensure k @ cuda:0 level 4\nensure k @ cuda:0\n"
                                  "ensure k @ cuda:0 level 1\n"));
    r = refused("rplan 1\nbudget cuda:0 900 KiB\n" KEY
                "ensure k @ cuda:0 level 3\nensure k @ cuda:0 level 4\nensure k @ cuda:0\n");
    cr_assert(strstr(r, "l.rplan:6:1: error: ensure of 'k' at cuda:0 exceeds the budget of "
                        "cuda:0: needs 300 KiB, 200 KiB of 900 KiB available"), "%s", r);
    free(r);
    r = refused("rplan 1\nbudget cuda:0 500 KiB\n" KEY
                "ensure k @ cuda:0 level 3\nensure k @ cuda:0 level 4\n");
    cr_assert(strstr(r, "needs 400 KiB, 200 KiB of 500 KiB available"), "%s", r);
    free(r);
}

Test(lang_limbs, cut_copies_are_never_the_whole_value)
{
    /* a drop gives back exactly the limbs the copy held */
    rplan_program_free(compile_ok("rplan 1\nbudget cuda:0 300 KiB\n" KEY
                                  "ensure k @ cuda:0 level 3\ndrop k @ cuda:0\n"
                                  "ensure k @ cuda:0 level 3\nmove k -> cuda:1\n"
                                  "ensure k @ cuda:0 level 3\ndiscard k\n"));
    /* a move takes a whole copy, named or the manager's choice */
    char *r = refused("rplan 1\n" KEY "ensure k @ cuda:1 level 3\nmove k -> host from cuda:1\n");
    cr_assert(strstr(r, "l.rplan:4:1: error: move of 'k': its copy at cuda:1 holds only a "
                        "level's limbs; a move takes a whole copy"), "%s", r);
    cr_assert_str_eq(rplan_rule_of("move of 'k': its copy at cuda:1 holds only a level's "
                                   "limbs; a move takes a whole copy")->id, "RP603");
    free(r);
    r = refused("rplan 1\n" KEY "ensure k @ cuda:0 level 3\nmove k -> cuda:1 from pinned\n"
                "move k -> host\n");
    cr_assert(strstr(r, "move of 'k': its copy at cuda:0"), "%s", r);
    free(r);
    /* the last whole copy of a value that must be preserved stays */
    r = refused("rplan 1\n" KEY "ensure k @ cuda:0 level 7\ndrop k @ pinned\n");
    cr_assert(strstr(r, "l.rplan:4:1: error: drop of the last whole copy of 'k', which must be "
                        "preserved"), "%s", r);
    cr_assert(strstr(r, "note: 'k' is adopted (MUST_PRESERVE) here"), "%s", r);
    free(r);
    cr_assert_str_eq(rplan_rule_of("drop of the last whole copy of 'k', which must be "
                                   "preserved")->id, "RP604");
    /* once made whole, it is a whole copy */
    rplan_program_free(compile_ok("rplan 1\n" KEY "ensure k @ cuda:0 level 7\n"
                                  "ensure k @ cuda:0\ndrop k @ pinned\nmove k -> host\n"));
}

/* ---- the bytecode ------------------------------------------------------------------------ */

static const char bc_src[] = "rplan 1\n" KEY
                             "value j = 30 KiB at pinned limbs(3, 0)\n"
                             "value c = 30 KiB at pinned\n"
                             "policy g = tiered_lru(cuda:0 -> pinned)\n"
                             "request \"r\" using g { require k @ cuda:0 level 2\n"
                             "  require c @ cuda:0 body { run touch(k, c) } }\n"
                             "ensure j @ cuda:1 level 1\n";

static unsigned char *write_prog(const rplan_program *p, size_t *n)
{
    void *b = NULL;
    cr_assert_eq(rplan_write_mem(p, &b, n), FHR_OK);
    return b;
}

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

/* Instruction i of a serialised program. */
static unsigned char *code_at(unsigned char *b, size_t i)
{
    return b + get32(b + RP_HDR_SIZE + RP_DIR_SIZE * (RP_SEC_CODE - 1) + 4) + RP_CODE_SIZE * i;
}

static size_t find_op(const rplan_program *p, const char *op, int nth)
{
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr in;
        rplan_instr_get(p, i, &in);
        if (!strcmp(in.opname, op) && nth-- == 0)
            return i;
    }
    cr_assert_fail("no %s", op);
    return 0;
}

/* Loads b with its checksum recomputed: NULL when accepted, else the rendered refusal. */
static char *load_mutated(unsigned char *b, size_t n)
{
    cr_assert(rp_bytecode_restamp(b, n));
    rplan_diags *d = rplan_diags_new();
    rplan_program *q = NULL;
    fhr_status st = rplan_load_mem(b, n, "m.rpc", &q, d);
    char *r = NULL;
    if (st) {
        cr_assert_eq(rplan_diags_nerrors(d), 1);
        cr_assert_str_eq(rplan_rule_of(rplan_diags_get(d, 0)->message)->id, "RP702", "%s",
                         rplan_diags_get(d, 0)->message);
        r = rplan_diags_render_string(d);
    }
    rplan_program_free(q);
    rplan_diags_free(d);
    return r;
}

static void expect_refused(unsigned char *b, size_t n, const char *want)
{
    char *r = load_mutated(b, n);
    cr_assert(r && strstr(r, want), "want '%s', got:\n%s", want, r ? r : "(accepted)");
    free(r);
}

Test(lang_limbs, bytecode_1_5_round_trip_and_older_versions)
{
    rplan_program *p = compile_ok(bc_src);
    size_t n;
    unsigned char *b = write_prog(p, &n);
    cr_assert_eq(b[10] | b[11] << 8, 5, "limbs are written as 1.5");
    cr_assert_eq(get32(b + 12), 14, "fourteen sections");
    rplan_program *q = NULL;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_load_mem(b, n, "l.rpc", &q, d), FHR_OK);
    char *da = rplan_disasm_string(p, 0), *dq = rplan_disasm_string(q, 0);
    cr_assert_str_eq(da, dq);
    cr_assert(strstr(da, "; rplan bytecode 1.5"), "%s", da);
    cr_assert(strstr(da, "fields(b0 = 250 KiB, a0 = 250 KiB, b1 = 250 KiB, a1 = 250 KiB) "
                         "limbs(8, 2, 2)  ; 2:7"), "%s", da);
    cr_assert(strstr(da, "at pinned init zero limbs(3, 0)  ; 3:7"), "%s", da);
    cr_assert(strstr(da, "require        k @ cuda:0 level 2 "), "%s", da);
    cr_assert(strstr(da, "require        c @ cuda:0 "), "%s", da);
    cr_assert(strstr(da, "ensure           j @ cuda:1 level 1 "), "%s", da);
    rplan_value_info vi;
    cr_assert_eq(rplan_value(q, 1, &vi), FHR_OK);
    cr_assert(vi.limb_q == 3 && vi.limb_special == 0 && vi.limb_parts == 1);
    rplan_instr in;
    cr_assert_eq(rplan_instr_get(q, find_op(q, "require", 0), &in), FHR_OK);
    cr_assert_eq(in.limbs, 3);
    free(da);
    free(dq);
    rplan_program_free(q);
    free(b);
    /* without limbs the program is written as before: a level-free file stays 1.1 to 1.4 */
    static const struct { const char *src; int minor; } older[] = {
        {"rplan 1\nvalue k = 1 KiB source synth(1)\nensure k @ cuda:0\n", 1},
        {"rplan 1\nvalue k = 1 KiB source synth(1) seeded(2)\nensure k @ cuda:0\n", 2},
        {"rplan 1\nvalue k = 1 KiB source engine.k(1) fields(b, a)\nensure k @ cuda:0\n", 3},
        {"rplan 1\nvalue k = 1 KiB source synth(1) fields(b, seeded a) seeded(2)\n", 4},
    };
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++) {
        rplan_program *o = compile_ok(older[i].src);
        b = write_prog(o, &n);
        cr_assert_eq(b[10] | b[11] << 8, older[i].minor, "%s", older[i].src);
        cr_assert_eq(rplan_load_mem(b, n, "old.rpc", &q, d), FHR_OK);
        char *x = rplan_disasm_string(q, 0);
        char want[32];
        snprintf(want, sizeof want, "; rplan bytecode 1.%d", older[i].minor);
        cr_assert(strstr(x, want), "%s", x);
        free(x);
        rplan_program_free(q);
        free(b);
        rplan_program_free(o);
    }
    rplan_diags_free(d);
    rplan_program_free(p);
}

Test(lang_limbs, corrupt_limb_records_are_refused_by_name)
{
    rplan_program *p = compile_ok(bc_src);
    size_t n;
    unsigned char *w = write_prog(p, &n), *b = malloc(n);
    /* the LIMB section is the last: records for values 0 (k) and 1 (j) */
    unsigned char *r0 = b + n - 2 * RP_LIMB_SIZE, *r1 = b + n - RP_LIMB_SIZE;
#define FRESH() memcpy(b, w, n)
    FRESH();
    cr_assert(get32(r0) == 0 && get32(r0 + 4) == 8 && get32(r0 + 8) == 2 && get32(r0 + 12) == 2);
    cr_assert(get32(r1) == 1 && get32(r1 + 4) == 3);
    cr_assert_null(load_mutated(b, n), "the file as written loads");
    FRESH();
    put32(r1, 9);
    expect_refused(b, n, "limb record 1: value 9 out of order, repeated or unknown");
    FRESH();
    put32(r1, 0);
    expect_refused(b, n, "limb record 1: value 0 out of order, repeated or unknown");
    FRESH();
    put32(r0 + 16, 3); /* 2 parts of 3 q-limbs do not cover 8 */
    expect_refused(b, n, "value 0: limb cut of 2 parts of 3 q-limbs does not cover its 8 q-limbs");
    FRESH();
    put32(r0 + 16, 5); /* 5 + 3: a short last part */
    cr_assert_null(load_mutated(b, n), "an explicit alpha that covers q loads");
    FRESH();
    put32(r0 + 4, 0);
    expect_refused(b, n, "l.rplan:2:7: error: value 0: limb cut of 0 q-limbs and 2 special limbs");
    FRESH();
    put32(r0 + 8, 70000);
    expect_refused(b, n, "value 0: limb cut of 8 q-limbs and 70000 special limbs");
    FRESH();
    put32(r0 + 12, 0);
    expect_refused(b, n, "value 0: limb cut of 0 parts does not divide its 4 fields");
    FRESH();
    put32(r0 + 12, 3);
    expect_refused(b, n, "value 0: limb cut of 3 parts does not divide its 4 fields");
    FRESH();
    put32(r0 + 8, 1); /* 8 + 1 limbs do not divide 250 KiB */
    expect_refused(b, n, "value 0: field 0 of 256000 bytes is not 9 limbs of equal size");
    FRESH();
    put32(r1 + 4, 7); /* j: 30 KiB is not 7 limbs */
    expect_refused(b, n, "l.rplan:3:7: error: value 1: field 0 of 30720 bytes is not 7 limbs");
    /* limb counts: at most the value's q-limbs, on a cut value, at a device */
    size_t req = find_op(p, "require", 0), req_c = find_op(p, "require", 1);
    FRESH();
    put32(code_at(b, req) + 8, 9);
    expect_refused(b, n, "l.rplan:6:23: error: instruction 1 (require): 9 limbs of 'k', which has 8 "
                         "q-limbs");
    FRESH();
    put32(code_at(b, req_c) + 8, 1);
    expect_refused(b, n, "instruction 2 (require): a limb count on 'c', which has no limb cut");
    FRESH();
    code_at(b, req)[1] = (unsigned char)fhr_loc_slot(fhr_loc_pinned());
    expect_refused(b, n, "instruction 1 (require): a limb count at pinned; host and pinned "
                         "copies are whole");
    FRESH();
    put32(code_at(b, find_op(p, "ensure", 0)) + 8, 70000);
    expect_refused(b, n, "instruction 8 (ensure): operand Y out of range");
    FRESH();
    put32(code_at(b, req) + 8, 8); /* the top level: fine */
    cr_assert_null(load_mutated(b, n));
#undef FRESH
    free(b);
    free(w);
    rplan_program_free(p);
    /* a limb count in a file older than 1.5 */
    p = compile_ok("rplan 1\nvalue k = 30 KiB at pinned\nensure k @ cuda:0\n");
    w = write_prog(p, &n);
    cr_assert_eq(w[10], 1);
    put32(code_at(w, 0) + 8, 1);
    expect_refused(w, n, "l.rplan:3:1: error: instruction 0 (ensure): a limb count in a version "
                         "1.1 file (limb counts are 1.5 on)");
    free(w);
    rplan_program_free(p);
}

/* A disassembly without its source positions (" ; L:C" at the end of a line). */
static void strip_positions(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        char *e = strchr(r, '\n');
        size_t n = e ? (size_t)(e - r) : strlen(r);
        char *semi = memchr(r, ';', n);
        size_t keep = semi && semi > r ? (size_t)(semi - r) : n;
        memmove(w, r, keep);
        w += keep;
        if (e)
            *w++ = '\n';
        r += n + (e != NULL);
    }
    *w = '\0';
}

Test(lang_limbs, fmt_lays_out_limbs_and_levels_and_keeps_the_program)
{
    static const char src[] = "rplan 1\nvalue k = 40 KiB at pinned fields( b0,a0 ,b1,a1 )  limbs("
                              " 8 ,2, 2 )\nfor i in 0..1{ensure k@cuda:0   level   7-i}\n";
    char *out = NULL, *again = NULL;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_format(src, strlen(src), "f.rplan", &out, d), FHR_OK);
    cr_assert_str_eq(out, "rplan 1\nvalue k = 40 KiB at pinned fields(b0, a0, b1, a1) "
                          "limbs(8, 2, 2)\nfor i in 0..1 { ensure k @ cuda:0 level 7 - i }\n");
    cr_assert_eq(rplan_format(out, strlen(out), "f.rplan", &again, d), FHR_OK);
    cr_assert_str_eq(again, out, "fmt is idempotent");
    rplan_program *a = compile_ok(src), *b = compile_ok(out);
    char *da = rplan_disasm_string(a, RPLAN_DISASM_NOSOURCE);
    char *db = rplan_disasm_string(b, RPLAN_DISASM_NOSOURCE);
    strip_positions(da);
    strip_positions(db);
    cr_assert_str_eq(da, db);
    cr_assert(strstr(da, "ensure           k @ cuda:0 level 6 "), "%s", da);
    free(da);
    free(db);
    free(out);
    free(again);
    rplan_diags_free(d);
    rplan_program_free(a);
    rplan_program_free(b);
}

/* limbs(Q, K, P, ALPHA): parts of ALPHA q-limbs, the last one short; ALPHA must make P
 * parts; an exclusive value is never cut. */
Test(lang_limbs, alpha_names_the_q_limbs_per_part)
{
    /* 27 q-limbs in parts of 12: 3 parts, the last of 3 q-limbs; fields of 39 limbs */
    rplan_program *p = compile_ok("rplan 1\nvalue k = 6 * 39 * 8 KiB at pinned init synth(1) "
                                  "fields(b0, a0, b1, a1, b2, a2) limbs(27, 12, 3, 12)\n"
                                  "ensure k @ cuda:0 level 11\n");
    rplan_value_info vi;
    cr_assert_eq(rplan_value(p, 0, &vi), FHR_OK);
    cr_assert_eq(vi.limb_alpha, 12);
    uint64_t n = 0;
    /* level 11: 12 q-limbs, part 0 only: 2 fields of 12 + 12 limbs */
    cr_assert_eq(rplan_value_cut(p, 0, 12, &n), FHR_OK);
    cr_assert_eq(n, 2u * 24 * 8 * KB);
    /* level 12: part 1 too */
    cr_assert_eq(rplan_value_cut(p, 0, 13, &n), FHR_OK);
    cr_assert_eq(n, 4u * 25 * 8 * KB);
    size_t len;
    unsigned char *w = write_prog(p, &len);
    cr_assert_null(load_mutated(w, len), "written with its ALPHA, it loads");
    cr_assert_eq(get32(w + len - RP_LIMB_SIZE + 16), 12, "the LIMB record's fifth word");
    free(w);
    rplan_program_free(p);
    /* without ALPHA, ceil(27 / 3) = 9 a part */
    p = compile_ok("rplan 1\nvalue k = 6 * 39 * 8 KiB at pinned init synth(1) "
                   "fields(b0, a0, b1, a1, b2, a2) limbs(27, 12, 3)\n");
    cr_assert_eq(rplan_value(p, 0, &vi), FHR_OK);
    cr_assert_eq(vi.limb_alpha, 9);
    rplan_program_free(p);
    expect_error("rplan 1\nvalue k = 6 * 39 * 8 KiB at pinned init synth(1) "
                 "fields(b0, a0, b1, a1, b2, a2) limbs(27, 12, 3, 8)\n",
                 "limbs of 'k': 3 parts of 8 q-limbs do not cover Q = 27", 2, 0, "RP409");
    expect_error("rplan 1\nvalue c = 64 KiB exclusive at pinned limbs(8, 0)\n",
                 "limbs of 'c': an exclusive value moves whole", 2, 0, "RP409");
}

/* drop with a level (a drop of parts): the dry run charges the parts that stay, a later
 * ensure at a level that reads a dropped part grows the copy, the last whole copy of a
 * value that must be preserved keeps its parts, and the file is bytecode 1.6 (a 1.5 file
 * with one is refused); disasm and fmt write it back. */
Test(lang_limbs, a_drop_of_parts_charges_what_stays_and_is_1_6)
{
    /* level 5 holds both parts (800 KiB); a drop to level 2 keeps part 0 (400 KiB), so
     * a 700 KiB value fits 1200 KiB beside it, and not without the drop */
    static const char src[] = "rplan 1\nbudget cuda:0 1200 KiB\n" KEY
                              "value c = 700 KiB at pinned\n"
                              "ensure k @ cuda:0 level 5\n%s"
                              "ensure c @ cuda:0\ndrop c @ cuda:0\n"
                              "ensure k @ cuda:0 level 2\nensure k @ cuda:0 level 5\n";
    char s[1024];
    snprintf(s, sizeof s, src, "drop k @ cuda:0 level 2\n");
    rplan_program *p = compile_ok(s);
    snprintf(s, sizeof s, src, "");
    char *r = refused(s);
    cr_assert(strstr(r, "ensure of 'c' at cuda:0 exceeds the budget of cuda:0"), "%s", r);
    free(r);
    /* the drop and the grow back: within 900 KiB only if the grow adds just part 1 */
    rplan_program_free(compile_ok("rplan 1\nbudget cuda:0 800 KiB\n" KEY
                                  "ensure k @ cuda:0 level 5\ndrop k @ cuda:0 level 2\n"
                                  "ensure k @ cuda:0 level 2\nensure k @ cuda:0 level 5\n"
                                  "drop k @ cuda:0 level 7\n"));
    /* a value's initial device copy is one buffer; an adopted value's last whole copy */
    r = refused("rplan 1\nvalue a = 1000 KiB at cuda:0 fields(b0, a0, b1, a1) limbs(8, 2, 2)\n"
                "ensure a @ pinned\ndrop a @ cuda:0 level 2\n");
    cr_assert(strstr(r, "its initial one, adopted whole in one buffer"), "%s", r);
    free(r);
    r = refused("rplan 1\n" KEY "ensure k @ cuda:0\ndrop k @ pinned\ndrop k @ cuda:0 level 2\n");
    cr_assert(strstr(r, "drop of parts of the last whole copy of 'k'"), "%s", r);
    free(r);
    r = refused("rplan 1\n" KEY "drop k @ pinned level 2\n");
    cr_assert(strstr(r, "host and pinned copies are whole"), "%s", r);
    free(r);
    size_t n;
    unsigned char *b = write_prog(p, &n);
    cr_assert_eq(b[10] | b[11] << 8, 6, "a drop of parts is written as 1.6");
    rplan_program *q = NULL;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_load_mem(b, n, "l.rpc", &q, d), FHR_OK);
    char *da = rplan_disasm_string(q, 0);
    cr_assert(strstr(da, "; rplan bytecode 1.6"), "%s", da);
    cr_assert(strstr(da, "drop             k @ cuda:0 level 2 "), "%s", da);
    free(da);
    rplan_instr in;
    cr_assert_eq(rplan_instr_get(q, find_op(q, "drop", 0), &in), FHR_OK);
    cr_assert_eq(in.limbs, 3);
    b[10] = 5; /* the same file as 1.5 */
    expect_refused(b, n, "a limb count in a version 1.5 file (a drop of parts is 1.6 on)");
    free(b);
    rplan_program_free(q);
    rplan_diags_free(d);
    rplan_program_free(p);
}
