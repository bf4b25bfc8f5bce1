/* tests/fuzz/fuzz_roundtrip.c — fuzz target 3: compile → write → load → verify →
 * disassemble. A program the compiler accepts must load back; its disassembly must be
 * the compiler's own, the serialisation must be a fixed point (write(load(write(p))) ==
 * write(p), byte for byte), and the same holds with the source stripped; when check
 * accepts the program it runs on the emulated device (fuzz_oracle.h). */
#include "fuzz.h"
#include "fuzz_oracle.h"

/* Writes p, loads it back (must succeed), checks the disassembly and the bytes of a
 * second write; returns nothing, aborts on any difference. */
static void round_trip(const rplan_program *p, unsigned flags)
{
    char *d0 = rplan_disasm_string(p, flags);
    FUZZ_CHECK(d0 != NULL, "disasm");
    void *b1;
    size_t n1;
    FUZZ_CHECK(rplan_write_mem(p, &b1, &n1) == FHR_OK, "write_mem");
    FUZZ_CHECK(rplan_is_bytecode(b1, n1), "written bytes lack the magic");
    rplan_diags *d = rplan_diags_new();
    rplan_program *q = NULL;
    fhr_status st = rplan_load_mem(b1, n1, NULL, &q, d);
    if (st != FHR_OK) {
        char *r = rplan_diags_render_string(d);
        FUZZ_CHECK(0, "compiled program refused on load (%s): %s", fhr_status_name(st),
                   r ? r : "");
    }
    char *d1 = rplan_disasm_string(q, flags);
    FUZZ_CHECK(d1 != NULL && strcmp(d0, d1) == 0,
               "disassembly not stable across write/load:\n%s\n----\n%s", d0, d1 ? d1 : "");
    FUZZ_CHECK(rplan_ninstrs(p) == rplan_ninstrs(q) && rplan_nvalues(p) == rplan_nvalues(q),
               "program shape changed");
    void *b2;
    size_t n2;
    FUZZ_CHECK(rplan_write_mem(q, &b2, &n2) == FHR_OK, "second write_mem");
    FUZZ_CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0, "serialisation not a fixed point");
    free(b2);
    free(d1);
    free(d0);
    free(b1);
    rplan_program_free(q);
    rplan_diags_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    char *src = calloc(1, size ? size : 1);
    if (!src)
        return 0;
    if (size)
        memcpy(src, data, size);
    rplan_compile_opts o = {.filename = "fuzz.rplan"};
    rplan_program *p = NULL;
    if (rplan_compile(src, size, &o, &p, NULL) == FHR_OK) {
        round_trip(p, 0);
        round_trip(p, RPLAN_DISASM_NOSOURCE);
        fuzz_check_runs(p, "round-tripped input");
        /* the same program without its source text */
        rplan_program *s = NULL;
        o.strip_source = 1;
        FUZZ_CHECK(rplan_compile(src, size, &o, &s, NULL) == FHR_OK,
                   "compiles with source but not stripped");
        round_trip(s, 0);
        char *a = rplan_disasm_string(p, RPLAN_DISASM_NOSOURCE);
        char *b = rplan_disasm_string(s, RPLAN_DISASM_NOSOURCE);
        FUZZ_CHECK(a && b && strcmp(a, b) == 0, "stripping the source changed the code");
        free(a);
        free(b);
        rplan_program_free(s);
        rplan_program_free(p);
    }
    free(src);
    return 0;
}
