/* tests/unit/test_lang_bytecode.c — the bytecode file: round trip through memory and
 * disk, and the corruption sweeps: every truncation and every single-byte corruption of
 * a small file is refused with a clear error; then every single-byte corruption again
 * with the checksum recomputed, so the verifier must catch it or accept a valid program
 * (the small file has a seeded value, so the REGN section is swept too). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fheplan/rplan.h"
#include "runtime/program/program.h"

static const char small[] =
    "rplan 1\n"
    "budget cuda:0 64 MiB\n"
    "value a = 8 MiB exclusive at pinned init synth(3)\n"
    "value b[2] = 4 MiB source file(\"k.bin\") priority 2\n"
    "value c = 1 MiB at host\n"
    "value d = 2 KiB replicable source synth(4) seeded k.gen(77) keep pinned\n"
    "policy p = tiered_lru(cuda:0 -> pinned)\n"
    "stage \"s\" {\n"
    "  hold c @ host\n"
    "  plan \"x\" {\n"
    "    reclaim { ensure b[0] @ host }\n"
    "    reserve cuda:0 2 MiB \"w\"\n"
    "    enter { move a -> cuda:0 from pinned ensure b[1] @ cuda:0 }\n"
    "    body { run k.f(a, b[1], 3, 2 KiB, 5 ms) }\n"
    "    exit { move a -> pinned drop b[0] @ host }\n"
    "  }\n"
    "  release c @ host\n"
    "}\n"
    "request \"r\" using p { require b[1] @ cuda:0 reserve cuda:0 1 MiB body { run t() } }\n"
    "discard c\n";

static unsigned char *compile_small(size_t *len, int strip)
{
    rplan_compile_opts o = {.filename = "small.rplan", .strip_source = strip};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(small, strlen(small), &o, &p, d);
    if (st) {
        char *s = rplan_diags_render_string(d);
        cr_log_error("%s", s);
        free(s);
    }
    cr_assert_eq(st, FHR_OK);
    void *b;
    cr_assert_eq(rplan_write_mem(p, &b, len), FHR_OK);
    rplan_program_free(p);
    rplan_diags_free(d);
    return b;
}

/* Loads; on refusal checks there is exactly one clear error. Returns 1 if accepted. */
static int try_load(const unsigned char *b, size_t n)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = (rplan_program *)0x1;
    fhr_status st = rplan_load_mem(b, n, "t.rpc", &p, d);
    int ok = st == FHR_OK;
    if (!ok) {
        cr_assert_null(p);
        cr_assert_eq(rplan_diags_nerrors(d), 1, "status %d without one error", st);
        const rplan_diag *g = rplan_diags_get(d, 0);
        cr_assert(g->message && strlen(g->message) > 8);
        cr_assert(st == FHR_E_INVALID || st == FHR_E_INFEASIBLE);
    } else {
        /* a valid program: it disassembles, serialises and reloads */
        cr_assert_not_null(p);
        char *s = rplan_disasm_string(p, 0);
        cr_assert_not_null(s);
        free(s);
        for (size_t i = 0; i < rplan_ninstrs(p); i++) {
            rplan_instr in;
            cr_assert_eq(rplan_instr_get(p, i, &in), FHR_OK);
        }
        void *w;
        size_t wn;
        cr_assert_eq(rplan_write_mem(p, &w, &wn), FHR_OK);
        rplan_program *q = NULL;
        cr_assert_eq(rplan_load_mem(w, wn, NULL, &q, NULL), FHR_OK);
        rplan_program_free(q);
        free(w);
        rplan_program_free(p);
    }
    rplan_diags_free(d);
    return ok;
}

Test(lang_bytecode, round_trip_file)
{
    size_t n;
    unsigned char *b = compile_small(&n, 0);
    rplan_program *p = NULL, *q = NULL;
    cr_assert_eq(rplan_load_mem(b, n, NULL, &p, NULL), FHR_OK);
    char path[] = "/tmp/rplan-rt-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(rplan_write_file(p, path, NULL), FHR_OK);
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_load_file(path, &q, d), FHR_OK);
    unlink(path);
    char *a = rplan_disasm_string(p, 0), *c = rplan_disasm_string(q, 0);
    cr_assert_str_eq(a, c);
    cr_assert(strstr(a, "; 14: body { run k.f(a, b[1], 3, 2 KiB, 5 ms) }"));
    cr_assert(strstr(a, "; rplan bytecode 1.2"), "%s", a);
    cr_assert(strstr(a, "source synth(4) seeded k.gen(77) keep pinned"), "%s", a);
    cr_assert(rplan_is_bytecode(b, n));
    cr_assert_str_eq(rplan_source_name(q), "small.rplan");
    free(a);
    free(c);
    free(b);
    rplan_program_free(p);
    rplan_program_free(q);
    rplan_diags_free(d);
}

Test(lang_bytecode, framing_errors)
{
    size_t n;
    unsigned char *b = compile_small(&n, 1);
    rplan_diags *d = rplan_diags_new();
    rplan_program *p;
    b[40] ^= 1;
    cr_assert_eq(rplan_load_mem(b, n, "x.rpc", &p, d), FHR_E_INVALID);
    cr_assert(strstr(rplan_diags_get(d, 0)->message, "checksum mismatch"));
    b[40] ^= 1;
    cr_assert_eq(rplan_load_mem(b, n - 1, "x.rpc", &p, d), FHR_E_INVALID);
    cr_assert(strstr(rplan_diags_get(d, 1)->message, "truncated"));
    b[8] = 2;
    cr_assert_eq(rplan_load_mem(b, n, "x.rpc", &p, d), FHR_E_INVALID);
    cr_assert_str_eq(rplan_diags_get(d, 2)->message,
                     "unsupported bytecode version 2.2 (this reader knows 1.6)");
    cr_assert_eq(rplan_load_mem("#!rplan", 7, "x.rpc", &p, d), FHR_E_INVALID);
    char *s = rplan_diags_render_string(d);
    cr_assert(strstr(s, "x.rpc: error: not a bytecode file"), "%s", s);
    free(s);
    free(b);
    rplan_diags_free(d);
}

Test(lang_bytecode, every_truncation_refused)
{
    size_t n;
    unsigned char *b = compile_small(&n, 0);
    for (size_t k = 0; k < n; k++) {
        unsigned char *t = malloc(k ? k : 1);
        memcpy(t, b, k);
        cr_assert_eq(try_load(t, k), 0, "truncation to %zu accepted", k);
        free(t);
    }
    free(b);
}

Test(lang_bytecode, every_byte_corruption_refused_by_checksum, .timeout = 120)
{
    size_t n;
    unsigned char *b = compile_small(&n, 0);
    for (size_t i = 0; i < n; i++) {
        unsigned char orig = b[i];
        for (int v = 0; v < 256; v++) {
            if (v == orig)
                continue;
            b[i] = (unsigned char)v;
            cr_assert_eq(try_load(b, n), 0, "byte %zu = %d accepted", i, v);
        }
        b[i] = orig;
    }
    free(b);
}

/* With the CRC recomputed the verifier must stand on its own. */
Test(lang_bytecode, every_byte_corruption_verified, .timeout = 300)
{
    size_t n;
    unsigned char *b = compile_small(&n, 1);
    unsigned char *c = malloc(n);
    size_t accepted = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        for (int v = 0; v < 256; v++) {
            if (v == b[i])
                continue;
            memcpy(c, b, n);
            c[i] = (unsigned char)v;
            rp_bytecode_restamp(c, n);
            if (try_load(c, n))
                accepted++;
            else
                refused++;
        }
    }
    cr_log_info("restamped corruptions: %zu refused, %zu valid programs", refused, accepted);
    cr_assert_gt(refused, accepted);
    free(c);
    free(b);
}
