/* tests/fuzz/seed.c — `make fuzz-seed`: rebuilds the seed corpora from the plans in
 * tree. Usage: seed OUTDIR FILE.rplan... Every source becomes a seed of the compile,
 * round-trip and format targets; every one that compiles also becomes two bytecode
 * seeds of the load target (with and without its source text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

static int put(const char *dir, const char *target, const char *name, const char *suffix,
               const void *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/seed-%s%s", dir, target, name, suffix);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n) {
        perror(path);
        if (f)
            fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

/* "tests/plans/ok/replicas.rplan" -> "ok-replicas" */
static void seed_name(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dir = "plans";
    if (strstr(path, "/ok/"))
        dir = "ok";
    else if (strstr(path, "/fail/"))
        dir = "fail";
    size_t bl = strlen(base);
    if (bl > 6 && strcmp(base + bl - 6, ".rplan") == 0)
        bl -= 6;
    snprintf(out, cap, "%s-%.*s", dir, (int)bl, base);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTDIR FILE.rplan...\n", argv[0]);
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            rc = 1;
            continue;
        }
        char *src = NULL;
        size_t n = 0, cap = 0;
        for (;;) {
            if (n == cap) {
                cap = cap ? cap * 2 : 4096;
                char *ns = realloc(src, cap);
                if (!ns)
                    break;
                src = ns;
            }
            size_t got = fread(src + n, 1, cap - n, f);
            n += got;
            if (!got)
                break;
        }
        fclose(f);
        char name[512];
        seed_name(argv[i], name, sizeof name);
        rc |= put(argv[1], "compile", name, ".rplan", src, n);
        rc |= put(argv[1], "roundtrip", name, ".rplan", src, n);
        rc |= put(argv[1], "format", name, ".rplan", src, n);
        for (int strip = 0; strip < 2; strip++) {
            rplan_compile_opts o = {.filename = argv[i], .strip_source = strip};
            rplan_program *p = NULL;
            if (rplan_compile(src, n, &o, &p, NULL) != FHR_OK)
                break;
            void *b;
            size_t bn;
            if (rplan_write_mem(p, &b, &bn) == FHR_OK) {
                rc |= put(argv[1], "load", name, strip ? "-nosrc.rpc" : ".rpc", b, bn);
                free(b);
            }
            rplan_program_free(p);
        }
        free(src);
    }
    return rc;
}
