/* tests/fuzz/fuzz_compile.c — fuzz target 1: the lexer, parser, semantic pass and
 * verifier on arbitrary source text. Whatever the text, the compiler either returns a
 * program that disassembles and inspects cleanly and, when check accepts it, runs on the
 * emulated device (fuzz_oracle.h), or refuses with at least one error diagnostic placed
 * inside the text. */
#include "fuzz.h"
#include "fuzz_oracle.h"

/* Lines as the lexer counts them: ended by \n, \r\n or a lone \r. */
static uint32_t count_lines(const uint8_t *data, size_t size)
{
    uint32_t n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n' || (data[i] == '\r' && (i + 1 == size || data[i + 1] != '\n'));
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    /* An exact-size copy with no terminator: the compiler must not read past len. */
    char *src = calloc(1, size ? size : 1);
    if (!src)
        return 0;
    if (size)
        memcpy(src, data, size);
    rplan_diags *d = rplan_diags_new();
    FUZZ_CHECK(d != NULL, "diags_new");
    rplan_compile_opts o = {.filename = "fuzz.rplan"};
    rplan_program *p = (rplan_program *)&o; /* must be overwritten */
    fhr_status st = rplan_compile(src, size, &o, &p, d);
    if (st == FHR_OK) {
        FUZZ_CHECK(p != NULL, "OK without a program");
        FUZZ_CHECK(rplan_diags_nerrors(d) == 0, "OK with %zu errors", rplan_diags_nerrors(d));
        fuzz_inspect(p);
        free(fuzz_disasm(p));
        fuzz_check_runs(p, "compiled input");
    } else {
        FUZZ_CHECK(p == NULL, "refusal (%s) left a program", fhr_status_name(st));
        FUZZ_CHECK(st == FHR_E_INVALID || st == FHR_E_INFEASIBLE || st == FHR_E_NOMEM,
                   "unexpected status %s", fhr_status_name(st));
    }
    fuzz_check_diags(d, st, count_lines(data, size));
    rplan_program_free(p == (rplan_program *)&o ? NULL : p);
    rplan_diags_free(d);
    free(src);
    return 0;
}
