/* tests/unit/test_lang_api.c — the rplan.h API beyond the data-driven tests: the CKKS
 * cost model's worked values, inspection for the VM, structured diagnostics, budget
 * overrides, colour rendering and file errors. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

static rplan_program *compile(const char *src, rplan_diags *d, const rplan_compile_opts *o)
{
    rplan_program *p = NULL;
    rplan_compile(src, strlen(src), o, &p, d);
    return p;
}

Test(lang_api, ckks_worked_values)
{
    uint64_t v;
    cr_assert_eq(rplan_ckks_ciphertext(65536, 44, &v), FHR_OK);
    cr_assert_eq(v, 47185920ull); /* 45 MiB */
    cr_assert_eq(rplan_ckks_switching_key(65536, 44, 3, &v), FHR_OK);
    cr_assert_eq(v, 188743680ull); /* 180 MiB */
    cr_assert_eq(rplan_ckks_plaintext(65536, 44, &v), FHR_OK);
    cr_assert_eq(v, 23592960ull);
    cr_assert_eq(rplan_ckks_keyswitch_workspace(65536, 44, 3, &v), FHR_OK);
    cr_assert_eq(v, 157286400ull); /* 150 MiB */
    cr_assert_eq(rplan_ckks_ciphertext(1000, 4, &v), FHR_E_INVALID);
    cr_assert_eq(rplan_ckks_switching_key(65536, 2, 4, &v), FHR_E_INVALID);
}

Test(lang_api, inspection)
{
    rplan_program *p = compile("rplan 1\nbudget cuda:1 1 GiB\n"
                               "value k[2] = 1 MiB source synth(7 + i) priority 3\n"
                               "value x = 2 MiB exclusive at pinned init file(\"x.bin\")\n"
                               "policy q = tiered_lru(cuda:1 -> pinned -> host, host -> pinned)\n"
                               "move x -> cuda:1 from pinned\n"
                               "plan \"p\" { body { run spin(3 ms) } }\n",
                               NULL, NULL);
    cr_assert_not_null(p);
    cr_assert_eq(rplan_nvalues(p), 3);
    rplan_value_info vi;
    cr_assert_eq(rplan_value(p, 1, &vi), FHR_OK);
    cr_assert_str_eq(vi.name, "k[1]");
    cr_assert_eq(vi.seed, 8);
    cr_assert_eq(vi.recoverability, FHR_RECONSTRUCTIBLE);
    cr_assert_eq(vi.priority, 3);
    cr_assert_eq(rplan_value(p, 2, &vi), FHR_OK);
    cr_assert_eq(vi.mode, FHR_EXCLUSIVE);
    cr_assert(vi.has_initial && vi.initial.kind == FHR_LOC_PINNED);
    cr_assert_str_eq(vi.path, "x.bin");
    cr_assert_eq(vi.line, 4);
    fhr_budget b;
    cr_assert_eq(rplan_budget(p, 0, &b), FHR_OK);
    cr_assert(b.loc.kind == FHR_LOC_CUDA && b.loc.index == 1 && b.nbytes == 1ull << 30);
    rplan_policy_info pi;
    cr_assert_eq(rplan_policy(p, 0, &pi), FHR_OK);
    cr_assert_eq(pi.nchains, 2);
    cr_assert_eq(pi.chain_len[0], 3);
    cr_assert_eq(pi.chain[0][2].kind, FHR_LOC_HOST);
    rplan_instr in;
    cr_assert_eq(rplan_instr_get(p, 0, &in), FHR_OK);
    cr_assert_str_eq(in.opname, "move");
    cr_assert(in.has_loc && in.has_from && in.from.kind == FHR_LOC_PINNED);
    cr_assert_eq(in.value, 2);
    cr_assert_eq(in.line, 6);
    cr_assert_eq(rplan_instr_get(p, 4, &in), FHR_OK);
    cr_assert_str_eq(in.opname, "arg.dur");
    cr_assert_eq(in.imm, 3000000);
    cr_assert_eq(rplan_instr_get(p, 99, &in), FHR_E_INVALID);
    cr_assert_str_eq(rplan_opcode_name(0), "stage");
    cr_assert_str_eq(rplan_opcode_name(999), "?");
    rplan_program_free(p);
}

Test(lang_api, structured_diagnostics_and_colour)
{
    rplan_diags *d = rplan_diags_new();
    cr_assert_null(compile("rplan 1\nvalue v = 1 MiB at host\nensure vv @ pinned\n"
                           "drop v @ gpu\n", d, NULL));
    cr_assert_eq(rplan_diags_nerrors(d), 2);
    const rplan_diag *g = rplan_diags_get(d, 0);
    cr_assert_eq(g->line, 3);
    cr_assert_eq(g->col, 8);
    cr_assert_eq(g->end_col, 10);
    cr_assert_str_eq(g->file, "<input>");
    cr_assert_str_eq(g->message, "unknown value 'vv'; did you mean 'v'?");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rplan_diags_render(d, f, 1);
    fclose(f);
    cr_assert(strstr(buf, "\033[1;31merror:"));
    free(buf);
    rplan_diags_free(d);
}

Test(lang_api, budget_override_makes_infeasible)
{
    const char *src = "rplan 1\nbudget cuda:0 1 GiB\nvalue v = 600 MiB at host\n"
                      "ensure v @ cuda:0\n";
    rplan_program *p = compile(src, NULL, NULL);
    cr_assert_not_null(p);
    rplan_program_free(p);
    fhr_budget ov = {fhr_loc_cuda(0), 512ull << 20};
    rplan_compile_opts o = {.filename = "o.rplan", .budget_override = &ov,
                            .nbudget_override = 1};
    rplan_diags *d = rplan_diags_new();
    p = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), &o, &p, d), FHR_E_INFEASIBLE);
    cr_assert_null(p);
    char *s = rplan_diags_render_string(d);
    cr_assert_str_eq(s, "o.rplan:4:1: error: ensure of 'v' at cuda:0 exceeds the budget of "
                        "cuda:0: needs 600 MiB, 512 MiB of 512 MiB available (88 MiB short)\n"
                        "ensure v @ cuda:0\n^~~~~~~~~~~~~~~~~\n"
                        "o.rplan:3:7: note: 'v' is 600 MiB at cuda:0, declared here\n"
                        "value v = 600 MiB at host\n      ^\n"
                        "o.rplan: note: the budget of cuda:0, 512 MiB, is set by the caller, "
                        "not the file (fheplan: --budget cuda:0=SIZE)\n");
    free(s);
    rplan_diags_free(d);
}

Test(lang_api, missing_files)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p;
    cr_assert_eq(rplan_compile_file("/nonexistent/x.rplan", NULL, &p, d), FHR_E_INVALID);
    cr_assert_eq(rplan_load_file("/nonexistent/x.rpc", &p, d), FHR_E_INVALID);
    cr_assert_eq(rplan_diags_nerrors(d), 2);
    cr_assert(strstr(rplan_diags_get(d, 0)->message, "cannot read '"));
    rplan_diags_free(d);
}

Test(lang_api, empty_and_binary_sources)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile("", 0, NULL, &p, d), FHR_E_INVALID);
    static const char bin[] = "rplan 1\n\x01\xff\0value";
    cr_assert_eq(rplan_compile(bin, sizeof bin - 1, NULL, &p, d), FHR_E_INVALID);
    cr_assert_geq(rplan_diags_nerrors(d), 3);
    rplan_diags_free(d);
}

Test(lang_api, pathological_nesting_is_refused_not_crashing)
{
    size_t n = 200000;
    char *s = malloc(n * 4 + 64);
    size_t k = (size_t)sprintf(s, "rplan 1\nconst _X = 1"); /* _: unused on purpose */
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(s + k, "+1");
    k += (size_t)sprintf(s + k, "\n");
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    /* a flat sum is a chain, not nesting: it compiles, without deep recursion */
    cr_assert_eq(rplan_compile(s, k, NULL, &p, d), FHR_OK);
    rplan_program_free(p);
    p = NULL;
    k = (size_t)sprintf(s, "rplan 1\nconst X = ");
    for (size_t i = 0; i < 20000; i++)
        k += (size_t)sprintf(s + k, "1+(");
    k += (size_t)sprintf(s + k, "1");
    for (size_t i = 0; i < 20000; i++)
        k += (size_t)sprintf(s + k, ")");
    k += (size_t)sprintf(s + k, "\n");
    cr_assert_eq(rplan_compile(s, k, NULL, &p, d), FHR_E_INVALID);
    cr_assert(strstr(rplan_diags_get(d, 0)->message, "nested too deeply"));
    k = (size_t)sprintf(s, "rplan 1\n");
    for (size_t i = 0; i < 3000; i++)
        k += (size_t)sprintf(s + k, "stage \"s\" {");
    for (size_t i = 0; i < 3000; i++)
        k += (size_t)sprintf(s + k, "}");
    cr_assert_eq(rplan_compile(s, k, NULL, &p, d), FHR_E_INVALID);
    k = (size_t)sprintf(s, "rplan 1\nconst X = ");
    for (size_t i = 0; i < 20000; i++)
        k += (size_t)sprintf(s + k, "(");
    cr_assert_eq(rplan_compile(s, k, NULL, &p, d), FHR_E_INVALID);
    free(s);
    rplan_diags_free(d);
}

/* Writing the disassembly or the diagnostics to a stream that fails (an unbuffered
 * /dev/full: every write fails at once) is reported, not lost; a long line (past the
 * formatter's 1 KiB buffer) is written whole. */
Test(lang_api, disasm_and_render_report_a_failed_write)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = compile("rplan 1\nvalue v = 1 MiB at host\nensure v @ pinned\n", d, NULL);
    cr_assert_not_null(p);
    FILE *full = fopen("/dev/full", "w");
    cr_assert_not_null(full);
    setvbuf(full, NULL, _IONBF, 0);
    cr_expect_eq(rplan_disasm(p, full, 0), -1);
    cr_assert_null(compile("rplan 1\nensure vv @ pinned\n", d, NULL));
    cr_expect_eq(rplan_diags_render(d, full, 0), -1);
    fclose(full);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_expect_eq(rplan_disasm(p, f, 0), 0);
    cr_expect_eq(rplan_diags_render(d, f, 0), 0);
    fclose(f);
    cr_expect(len > 0);
    free(buf);
    rplan_program_free(p);
    rplan_diags_free(d);

    /* a 2,000-character source line (longer than the formatter's buffer) comes back whole */
    char src[2200];
    int n = snprintf(src, sizeof src, "rplan 1\nvalue v = 1 MiB at host\nensure v @ pinned # ");
    memset(src + n, 'x', 2000);
    strcpy(src + n + 2000, "!\n");
    d = rplan_diags_new();
    p = compile(src, d, NULL);
    cr_assert_not_null(p);
    char *s = rplan_disasm_string(p, 0);
    cr_assert_not_null(s);
    cr_expect(strstr(s, "xxxxxxxxxx!\n"), "the source line was cut short");
    free(s);
    rplan_program_free(p);
    rplan_diags_free(d);
}
