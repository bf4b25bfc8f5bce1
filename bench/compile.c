/* bench/compile.c — compile+verify throughput of the .rplan compiler on a generated
 * plan with 100,000 explicit actions (ensure/drop/move over 1,000 values, grouped in
 * plans of 10 actions). Prints actions/s and source MB/s (best of --runs, default 7),
 * and the load+verify rate of the same program as bytecode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fheplan/rplan.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *generate(size_t actions, size_t *len)
{
    size_t cap = actions * 48 + 4096, n = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    n += (size_t)sprintf(s + n, "rplan 1\nbudget cuda:0 64 GiB\nbudget pinned 64 GiB\n"
                                "value k[1000] = 1 MiB replicable source synth(i)\n"
                                "value x[1000] = 1 MiB exclusive at pinned init synth(i)\n");
    size_t a = 0;
    for (size_t blk = 0; a < actions; blk++) {
        n += (size_t)sprintf(s + n, "plan \"p%zu\" {\n  enter {\n", blk);
        for (int j = 0; j < 5 && a < actions; j++, a++)
            n += (size_t)sprintf(s + n, "    ensure k[%zu] @ cuda:0\n", (blk * 5 + (size_t)j) % 1000);
        n += (size_t)sprintf(s + n, "  }\n  exit {\n");
        for (int j = 0; j < 5 && a < actions; j++, a++)
            n += (size_t)sprintf(s + n, "    drop k[%zu] @ cuda:0\n", (blk * 5 + (size_t)j) % 1000);
        n += (size_t)sprintf(s + n, "  }\n}\n");
        if (blk % 10 == 0 && a + 2 <= actions) {
            size_t v = blk % 1000;
            n += (size_t)sprintf(s + n, "move x[%zu] -> cuda:0\nmove x[%zu] -> pinned\n", v, v);
            a += 2;
        }
    }
    *len = n;
    return s;
}

int main(int argc, char **argv)
{
    size_t actions = 100000;
    int runs = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--actions") == 0 && i + 1 < argc)
            actions = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
    }
    size_t len;
    char *src = generate(actions, &len);
    if (!src)
        return 70;
    double best = 1e9, best_load = 1e9;
    size_t ninstr = 0;
    for (int r = 0; r < runs; r++) {
        rplan_program *p = NULL;
        rplan_diags *d = rplan_diags_new();
        rplan_compile_opts o = {.filename = "bench.rplan", .strip_source = 1};
        double t0 = now();
        fhr_status st = rplan_compile(src, len, &o, &p, d);
        double t1 = now();
        if (st) {
            rplan_diags_render(d, stderr, 0);
            return 1;
        }
        ninstr = rplan_ninstrs(p);
        void *b;
        size_t bn;
        rplan_write_mem(p, &b, &bn);
        rplan_program *q = NULL;
        double t2 = now();
        st = rplan_load_mem(b, bn, NULL, &q, NULL);
        double t3 = now();
        if (st)
            return 1;
        if (t1 - t0 < best)
            best = t1 - t0;
        if (t3 - t2 < best_load)
            best_load = t3 - t2;
        free(b);
        rplan_program_free(p);
        rplan_program_free(q);
        rplan_diags_free(d);
    }
    printf("compile: %zu actions, %zu instructions, %.2f MB source\n", actions, ninstr,
           (double)len / 1e6);
    printf("compile+verify: %.1f ms  %.0f actions/s  %.1f MB/s (best of %d)\n", best * 1e3,
           (double)actions / best, (double)len / 1e6 / best, runs);
    printf("load+verify:    %.1f ms  %.0f actions/s\n", best_load * 1e3,
           (double)actions / best_load);
    free(src);
    return 0;
}
