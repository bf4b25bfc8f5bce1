/* tests/unit/test_lang_ranks.c — the predefined constants `rank` and `world_size`
 * (rplan_compile_opts.rank / .world_size): defaults, a batch split over every world
 * size 1..8, the range check, reserved names, and a plan feasible on some ranks only. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

static const char split_src[] =
    "rplan 1\n"
    "const BATCH = 16\n"
    "const FIRST = BATCH * rank / world_size\n"
    "const SHARE = BATCH * (rank + 1) / world_size - FIRST\n"
    "budget cuda:0 64 MiB\n"
    "value key = 8 MiB replicable source synth(7)\n"
    "value ct[SHARE] = 1 MiB exclusive at pinned init synth(100 + FIRST + i)\n"
    "stage \"rank-{rank}-of-{world_size}\" {\n"
    "  plan \"key\" { enter { ensure key @ cuda:0 } }\n"
    "}\n";

static fhr_status compile_rank(const char *src, uint32_t rank, uint32_t world,
                               rplan_program **p, rplan_diags *d)
{
    rplan_compile_opts o = {.filename = "r.rplan", .rank = rank, .world_size = world};
    *p = NULL;
    return rplan_compile(src, strlen(src), &o, p, d);
}

Test(lang_ranks, defaults_are_rank0_of_1)
{
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(split_src, strlen(split_src), NULL, &p, NULL), FHR_OK);
    cr_assert_eq(rplan_nvalues(p), 17); /* key + all 16 */
    rplan_instr in;
    cr_assert_eq(rplan_instr_get(p, 0, &in), FHR_OK);
    cr_assert_str_eq(in.str, "rank-0-of-1");
    rplan_program_free(p);
    /* world_size 0 means 1 */
    cr_assert_eq(compile_rank(split_src, 0, 0, &p, NULL), FHR_OK);
    cr_assert_eq(rplan_nvalues(p), 17);
    rplan_program_free(p);
}

/* Every ciphertext 0..15 lands on exactly one rank, for every world size. */
Test(lang_ranks, split_covers_the_batch_once)
{
    for (uint32_t world = 1; world <= 8; world++) {
        int seen[16] = {0};
        for (uint32_t r = 0; r < world; r++) {
            rplan_program *p;
            cr_assert_eq(compile_rank(split_src, r, world, &p, NULL), FHR_OK, "%u/%u", r, world);
            rplan_instr in;
            char want[64];
            snprintf(want, sizeof want, "rank-%u-of-%u", r, world);
            cr_assert_eq(rplan_instr_get(p, 0, &in), FHR_OK);
            cr_assert_str_eq(in.str, want);
            for (size_t i = 1; i < rplan_nvalues(p); i++) {
                rplan_value_info vi;
                cr_assert_eq(rplan_value(p, i, &vi), FHR_OK);
                cr_assert(vi.seed >= 100 && vi.seed < 116, "seed %llu",
                          (unsigned long long)vi.seed);
                seen[vi.seed - 100]++;
            }
            rplan_program_free(p);
        }
        for (int i = 0; i < 16; i++)
            cr_assert_eq(seen[i], 1, "world %u: ciphertext %d on %d ranks", world, i, seen[i]);
    }
}

Test(lang_ranks, rank_out_of_range)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p;
    cr_assert_eq(compile_rank(split_src, 4, 4, &p, d), FHR_E_INVALID);
    cr_assert_null(p);
    cr_assert_eq(rplan_diags_nerrors(d), 1);
    cr_assert_str_eq(rplan_diags_get(d, 0)->message, "rank 4 is out of range for world size 4");
    rplan_diags_free(d);
}

Test(lang_ranks, names_are_reserved)
{
    static const char *const srcs[] = {
        "rplan 1\nconst rank = 2\n",
        "rplan 1\nvalue world_size = 1 MiB at host\n",
        "rplan 1\nfor rank in 0..1 { }\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        rplan_diags *d = rplan_diags_new();
        rplan_program *p;
        cr_assert_eq(compile_rank(srcs[i], 0, 2, &p, d), FHR_E_INVALID, "%s", srcs[i]);
        cr_assert(strstr(rplan_diags_get(d, 0)->message, "is predefined"), "%s",
                  rplan_diags_get(d, 0)->message);
        rplan_diags_free(d);
    }
}

/* The dry run is per rank: only the rank whose share does not fit is refused. */
Test(lang_ranks, feasibility_per_rank)
{
    const char *src = "rplan 1\nbudget cuda:0 100 MiB\n"
                      "value ct = (rank + 1) * 40 MiB exclusive at pinned init synth(rank)\n"
                      "move ct -> cuda:0 from pinned\n";
    rplan_program *p;
    cr_assert_eq(compile_rank(src, 0, 3, &p, NULL), FHR_OK);
    rplan_program_free(p);
    cr_assert_eq(compile_rank(src, 1, 3, &p, NULL), FHR_OK);
    rplan_program_free(p);
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(compile_rank(src, 2, 3, &p, d), FHR_E_INFEASIBLE);
    cr_assert(strstr(rplan_diags_get(d, 0)->message, "exceeds the budget"));
    cr_assert_eq(rplan_diags_get(d, 0)->line, 4);
    rplan_diags_free(d);
}
