/* tests/unit/test_check_runs.c — the property behind `fheplan check`: every program check
 * accepts runs on the emulated device. Over plans/, tests/plans/ok and the three fuzz
 * corpora (sources compiled, bytecode loaded), with the fuzz targets' oracle. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_oracle.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    b[len] = 0;
    *n = (size_t)len;
    return b;
}

/* Every file of dir (ending in suffix, or any with NULL): accepted programs counted in
 * *ran, left-out ones in *skipped. */
static void over(const char *dir, const char *suffix, int *ran, int *rejected, int *skipped)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (e->d_name[0] == '.' || (suffix && (l < sl || strcmp(e->d_name + l - sl, suffix))))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n;
        char *b = slurp(path, &n);
        rplan_diags *dg = rplan_diags_new();
        rplan_program *p = NULL;
        rplan_compile_opts o = {.filename = path};
        fhr_status st = rplan_is_bytecode(b, n) ? rplan_load_mem(b, n, path, &p, dg)
                                                : rplan_compile(b, n, &o, &p, dg);
        if (st == FHR_OK) {
            int r = fuzz_check_runs(p, path);
            *ran += r == 1;
            *rejected += r == 0;
            *skipped += r < 0;
        } else {
            (*rejected)++;
        }
        rplan_program_free(p);
        rplan_diags_free(dg);
        free(b);
    }
    closedir(d);
}

Test(check_runs, every_accepted_program_runs_on_emu, .timeout = 240)
{
    int ran = 0, rejected = 0, skipped = 0;
    over("plans", ".rplan", &ran, &rejected, &skipped);
    over("tests/plans/ok", ".rplan", &ran, &rejected, &skipped);
    int plans = ran;
    over("tests/fuzz/corpus/compile", NULL, &ran, &rejected, &skipped);
    over("tests/fuzz/corpus/roundtrip", NULL, &ran, &rejected, &skipped);
    over("tests/fuzz/corpus/load", NULL, &ran, &rejected, &skipped);
    cr_log_info("check_runs: %d programs check accepts ran on the emulated device, %d rejected, %d left out "
                "(files or long spins)", ran, rejected, skipped);
    fprintf(stderr, "check_runs: %d accepted programs ran on the emulated device (%d from plans/ and "
            "tests/plans/ok), %d rejected, %d left out\n", ran, plans, rejected, skipped);
    cr_assert_geq(plans, 10, "too few example plans ran: %d", plans);
}
