/* tests/fuzz/fuzz_load.c — fuzz target 2: the bytecode loader and verifier. Each input
 * is loaded as given (framing and checksum) and again with its checksum recomputed, so
 * the verifier has to stand on its own. Every accepted program is inspected,
 * disassembled, written and reloaded (the same disassembly must come back), run in
 * explain mode (fuzz_explain.h) and, when check accepts it, on the emulated device
 * (fuzz_oracle.h). */
#include "fuzz.h"
#include "fuzz_explain.h"
#include "fuzz_oracle.h"

/* Internal to the program layer (runtime/program/bytecode.c): recomputes the header checksum. */
int rp_bytecode_restamp(void *buf, size_t len);

static void accepted(const rplan_program *p)
{
    fuzz_inspect(p);
    char *d0 = fuzz_disasm(p);
    void *b;
    size_t n;
    FUZZ_CHECK(rplan_write_mem(p, &b, &n) == FHR_OK, "write_mem");
    rplan_diags *d = rplan_diags_new();
    rplan_program *q = NULL;
    fhr_status st = rplan_load_mem(b, n, NULL, &q, d);
    if (st != FHR_OK) {
        char *r = rplan_diags_render_string(d);
        FUZZ_CHECK(0, "an accepted program does not reload (%s): %s", fhr_status_name(st),
                   r ? r : "");
    }
    char *d1 = fuzz_disasm(q);
    FUZZ_CHECK(strcmp(d0, d1) == 0, "disassembly changed on reload:\n%s\n----\n%s", d0, d1);
    fuzz_explain(q);
    fuzz_check_runs(q, "loaded input");
    free(d0);
    free(d1);
    free(b);
    rplan_program_free(q);
    rplan_diags_free(d);
}

static void load_one(const uint8_t *buf, size_t size)
{
    rplan_diags *d = rplan_diags_new();
    FUZZ_CHECK(d != NULL, "diags_new");
    rplan_program *p = NULL;
    fhr_status st = rplan_load_mem(buf, size, "fuzz.rpc", &p, d);
    if (st == FHR_OK) {
        FUZZ_CHECK(p != NULL, "OK without a program");
        FUZZ_CHECK(rplan_diags_nerrors(d) == 0, "OK with errors");
        accepted(p);
        rplan_program_free(p);
    } else {
        FUZZ_CHECK(p == NULL, "refusal left a program");
        FUZZ_CHECK(st == FHR_E_INVALID || st == FHR_E_INFEASIBLE || st == FHR_E_NOMEM,
                   "unexpected status %s", fhr_status_name(st));
        /* the documented contract: exactly one error */
        FUZZ_CHECK(rplan_diags_nerrors(d) == 1, "refusal with %zu errors",
                   rplan_diags_nerrors(d));
        fuzz_check_diags(d, st, 0);
    }
    rplan_diags_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1024 * 1024)
        return 0;
    uint8_t *buf = calloc(1, size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    (void)rplan_is_bytecode(buf, size);
    load_one(buf, size);
    if (rp_bytecode_restamp(buf, size) && memcmp(buf, data, size) != 0)
        load_one(buf, size);
    free(buf);
    return 0;
}
