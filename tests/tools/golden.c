/* tests/tools/golden.c — `make update-golden`: regenerates the expected outputs of the
 * data-driven language tests (ok/NAME.dis, only where one exists: disassembly after a
 * write/load round trip; fail/NAME.err: the rendered diagnostics). Review the diff before
 * committing. Also usable on one file: golden FILE.rplan. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fheplan/rplan.h"

static int one(const char *path, FILE *out)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    int rc = 0;
    if (rplan_compile_file(path, NULL, &p, d) == FHR_OK) {
        void *b;
        size_t n;
        rplan_program *q = NULL;
        if (rplan_write_mem(p, &b, &n) == FHR_OK) {
            if (rplan_load_mem(b, n, NULL, &q, d) == FHR_OK)
                rplan_disasm(q, out, 0);
            free(b);
        }
        rplan_program_free(q);
        rc = 1;
    }
    rplan_diags_render(d, out, 0);
    rplan_program_free(p);
    rplan_diags_free(d);
    return rc;
}

static void dir(const char *root, const char *sub, const char *ext)
{
    char dpath[512];
    snprintf(dpath, sizeof dpath, "%s/%s", root, sub);
    DIR *dd = opendir(dpath);
    if (!dd)
        return;
    struct dirent *e;
    while ((e = readdir(dd))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".rplan") != 0)
            continue;
        char in[1024], outp[1024];
        snprintf(in, sizeof in, "%s/%s", dpath, e->d_name);
        snprintf(outp, sizeof outp, "%s/%.*s%s", dpath, (int)(l - 6), e->d_name, ext);
        if (!strcmp(sub, "ok") && access(outp, F_OK) != 0)
            continue; /* a disassembly golden is kept only where a person reviews it */
        FILE *f = fopen(outp, "w");
        if (!f)
            continue;
        int ok = one(in, f);
        fclose(f);
        if (ok != (strcmp(sub, "ok") == 0))
            fprintf(stderr, "warning: %s %s\n", in, ok ? "compiles" : "fails");
    }
    closedir(dd);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strstr(argv[1], ".rplan")) {
        return one(argv[1], stdout) ? 0 : 1;
    }
    const char *root = argc > 1 ? argv[1] : "tests/plans";
    dir(root, "ok", ".dis");
    dir(root, "fail", ".err");
    return 0;
}
