/* cli/fmt.c — `fheplan fmt`: plan files (or standard input) in the canonical layout of
 * rplan_format, printed, rewritten in place (-w), or checked with a unified diff (--check). */
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/diff.h"
#include "fheplan/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fmt_one(const cli *c, const char *path)
{
    int is_stdin = !strcmp(path, "-");
    const char *name = is_stdin ? "<stdin>" : path;
    size_t len = 0;
    char *src = NULL;
    fhr_error e;
    fhr_error_init(&e);
    if ((is_stdin ? fhr_read_stream(stdin, "standard input", &src, &len, &e)
                  : fhr_read_file(path, &src, &len, &e)) != FHR_OK) {
        fprintf(stderr, "fheplan: %s\n", e.message);
        return EX_NOINPUT_;
    }
    if (rplan_is_bytecode(src, len)) {
        fprintf(stderr, "fheplan: %s is bytecode; fmt lays out plan source\n", name);
        free(src);
        return EX_FAIL;
    }
    rplan_diags *d = rplan_diags_new();
    char *out = NULL;
    fhr_status st = d ? rplan_format(src, len, name, &out, d) : FHR_E_NOMEM;
    int rc = EX_OK;
    if (st) {
        rplan_diags_render(d, stderr, c->colour);
        if (st == FHR_E_NOMEM)
            fprintf(stderr, "fheplan: out of memory formatting '%s'\n", name);
        rc = st == FHR_E_NOMEM ? EX_SOFTWARE_ : EX_FAIL;
    } else if (c->fmt_check) {
        int dr = diff_unified(stdout, name, src, out);
        if (dr < 0) {
            fprintf(stderr, "fheplan: out of memory comparing '%s'\n", name);
            rc = EX_SOFTWARE_;
        } else if (dr > 0 || strlen(src) != len || strcmp(src, out) != 0) {
            /* the diff on stdout shows every difference, a missing final newline too; a
             * NUL byte cannot survive the parse */
            fprintf(stderr, "fheplan: %s is not formatted%s\n", name,
                    len && src[len - 1] != '\n' ? " (no newline at the end of the file)" : "");
            rc = EX_FAIL;
        }
    } else if (c->fmt_write && !is_stdin) {
        if (strcmp(src, out) != 0 && write_atomic(path, out, strlen(out)) != 0) {
            fprintf(stderr, "fheplan: cannot write '%s': %s\n", path, strerror(errno));
            rc = EX_FAIL;
        }
    } else {
        fputs(out, stdout);
    }
    free(out);
    free(src);
    rplan_diags_free(d);
    return rc;
}

int cmd_fmt(cli *c)
{
    if (c->fmt_check && c->fmt_write)
        return usage("fmt takes --check or -w, not both%s", "");
    int worst = EX_OK;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->fmt_write && !strcmp(c->files[i], "-"))
            return usage("fmt -w cannot rewrite standard input%s", "");
        int rc = fmt_one(c, c->files[i]);
        if (rc > worst)
            worst = rc;
    }
    fflush(stdout);
    return worst;
}
