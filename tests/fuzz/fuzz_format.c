/* tests/fuzz/fuzz_format.c — fuzz target 4: the formatter. Whatever it formats must
 * format to itself, compile exactly as the input did (the same status, the same
 * messages, and the same program once source positions are cleared), and a refusal
 * must come with an error that compiling the input reports too. */
#include "fuzz.h"
#include "runtime/program/program.h"

/* status, the messages joined, and (when it compiled) the position-free program bytes */
static fhr_status compile_text(const char *src, size_t len, char **msgs, void **bytes,
                               size_t *n)
{
    rplan_compile_opts o = {.filename = "fuzz.rplan", .strip_source = 1};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    FUZZ_CHECK(d != NULL, "diags");
    fhr_status st = rplan_compile(src, len, &o, &p, d);
    size_t cap = 1;
    for (size_t i = 0; i < rplan_diags_count(d); i++)
        cap += strlen(rplan_diags_get(d, i)->message) + 1;
    *msgs = malloc(cap);
    FUZZ_CHECK(*msgs != NULL, "malloc");
    size_t used = 0;
    (*msgs)[0] = '\0';
    for (size_t i = 0; i < rplan_diags_count(d); i++)
        used += (size_t)sprintf(*msgs + used, "%s\n", rplan_diags_get(d, i)->message);
    *bytes = NULL;
    *n = 0;
    if (p) {
        for (uint32_t i = 0; i < p->ncode; i++)
            p->lines[i] = (rp_linerec){0, 0, 0};
        for (uint32_t i = 0; i < p->nvals; i++)
            p->vals[i].line = p->vals[i].col = p->vals[i].len = 0;
        FUZZ_CHECK(rplan_write_mem(p, bytes, n) == FHR_OK, "write_mem");
        rplan_program_free(p);
    }
    rplan_diags_free(d);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    const char *src = (const char *)data;
    char *out = NULL;
    rplan_diags *d = rplan_diags_new();
    FUZZ_CHECK(d != NULL, "diags");
    fhr_status st = rplan_format(src, size, "fuzz.rplan", &out, d);
    if (st == FHR_E_NOMEM) {
        rplan_diags_free(d);
        return 0;
    }
    char *m1, *m2;
    void *b1, *b2;
    size_t n1, n2;
    fhr_status c1 = compile_text(src, size, &m1, &b1, &n1);
    if (st != FHR_OK) {
        FUZZ_CHECK(st == FHR_E_INVALID && rplan_diags_nerrors(d) > 0,
                   "refused (%s) without an error", fhr_status_name(st));
        FUZZ_CHECK(c1 != FHR_OK, "fmt refused a plan that compiles");
    } else {
        FUZZ_CHECK(out != NULL, "no output");
        size_t len = strlen(out);
        FUZZ_CHECK(len > 0 && out[len - 1] == '\n', "no final newline");
        char *again = NULL;
        FUZZ_CHECK(rplan_format(out, len, "fuzz.rplan", &again, NULL) == FHR_OK,
                   "its own output is refused:\n%s", out);
        FUZZ_CHECK(strcmp(out, again) == 0, "not idempotent:\n%s\n----\n%s", out, again);
        free(again);
        fhr_status c2 = compile_text(out, len, &m2, &b2, &n2);
        FUZZ_CHECK(c1 == c2, "compiles to %s, formatted to %s:\n%s", fhr_status_name(c1),
                   fhr_status_name(c2), out);
        /* a NUL byte in the input is an error of its own, which the output lacks */
        if (memchr(src, '\0', size) == NULL)
            FUZZ_CHECK(strcmp(m1, m2) == 0, "other diagnostics:\n%s----\n%s", m1, m2);
        FUZZ_CHECK(n1 == n2 && (!n1 || memcmp(b1, b2, n1) == 0),
                   "the formatted plan compiles to another program:\n%s", out);
        free(m2);
        free(b2);
    }
    free(m1);
    free(b1);
    free(out);
    rplan_diags_free(d);
    return 0;
}
