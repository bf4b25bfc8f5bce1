/* tests/fuzz/fuzz.h — what the fuzz targets share: the libFuzzer entry point's
 * prototype, a check that aborts (so libFuzzer, AFL++ and the plain driver all see a
 * crash) and helpers that walk a program through every read-only API. */
#ifndef FHEPLAN_FUZZ_H
#define FHEPLAN_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the library broke: report it and abort so every driver records a crash. */
#define FUZZ_CHECK(cond, ...)                                                            \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s: ", __FILE__, __LINE__,    \
                    #cond);                                                              \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* Diagnostics after a refusal: at least one error, each with a message; positions are
 * either unknown (0) or inside the text (lines counted by the caller, 0 = unknown). */
static inline void fuzz_check_diags(const rplan_diags *d, fhr_status st, uint32_t nlines)
{
    size_t n = rplan_diags_count(d);
    if (st == FHR_E_INVALID || st == FHR_E_INFEASIBLE)
        FUZZ_CHECK(rplan_diags_nerrors(d) >= 1, "status %s without an error",
                   fhr_status_name(st));
    for (size_t i = 0; i < n; i++) {
        const rplan_diag *g = rplan_diags_get(d, i);
        FUZZ_CHECK(g != NULL, "diagnostic %zu missing", i);
        FUZZ_CHECK(g->message && g->message[0], "diagnostic %zu has no message", i);
        FUZZ_CHECK((int)g->severity >= 0 && (int)g->severity <= (int)RPLAN_NOTE,
                   "diagnostic %zu severity %d", i, (int)g->severity);
        if (nlines)
            FUZZ_CHECK(g->line <= nlines, "diagnostic %zu at line %u of %u", i, g->line,
                       nlines);
    }
    FUZZ_CHECK(rplan_diags_get(d, n) == NULL, "diagnostic past the end");
    char *s = rplan_diags_render_string(d);
    FUZZ_CHECK(s != NULL, "render failed");
    free(s);
}

/* Reads everything the inspection API offers; every index in range must answer. */
static inline void fuzz_inspect(const rplan_program *p)
{
    size_t nv = rplan_nvalues(p);
    for (size_t i = 0; i < nv; i++) {
        rplan_value_info v;
        FUZZ_CHECK(rplan_value(p, i, &v) == FHR_OK, "value %zu", i);
        FUZZ_CHECK(v.name != NULL && v.nbytes > 0, "value %zu name/size", i);
        FUZZ_CHECK(v.data != RPLAN_DATA_FILE || v.path != NULL, "value %zu path", i);
    }
    rplan_value_info vi;
    FUZZ_CHECK(rplan_value(p, nv, &vi) != FHR_OK, "value past the end");
    for (size_t i = 0; i < rplan_nbudgets(p); i++) {
        fhr_budget b;
        FUZZ_CHECK(rplan_budget(p, i, &b) == FHR_OK, "budget %zu", i);
        FUZZ_CHECK(fhr_loc_slot(b.loc) >= 0, "budget %zu location", i);
    }
    for (size_t i = 0; i < rplan_npolicies(p); i++) {
        rplan_policy_info pi;
        FUZZ_CHECK(rplan_policy(p, i, &pi) == FHR_OK, "policy %zu", i);
        FUZZ_CHECK(pi.nchains <= 8, "policy %zu chains", i);
    }
    size_t ni = rplan_ninstrs(p);
    for (size_t i = 0; i < ni; i++) {
        rplan_instr in;
        FUZZ_CHECK(rplan_instr_get(p, i, &in) == FHR_OK, "instr %zu", i);
        FUZZ_CHECK(in.op >= 0 && in.op < rplan_opcode_count(), "instr %zu opcode %d", i, in.op);
        FUZZ_CHECK(in.opname && strcmp(in.opname, rplan_opcode_name(in.op)) == 0,
                   "instr %zu name", i);
        if (in.has_loc)
            FUZZ_CHECK(fhr_loc_slot(in.loc) >= 0, "instr %zu location", i);
        if (in.has_from)
            FUZZ_CHECK(fhr_loc_slot(in.from) >= 0, "instr %zu source location", i);
    }
    rplan_instr in;
    FUZZ_CHECK(rplan_instr_get(p, ni, &in) != FHR_OK, "instr past the end");
    FUZZ_CHECK(rplan_source_name(p) != NULL, "source name");
}

/* Disassembles with and without source; returns the full text (caller frees). */
static inline char *fuzz_disasm(const rplan_program *p)
{
    char *a = rplan_disasm_string(p, RPLAN_DISASM_NOSOURCE);
    FUZZ_CHECK(a != NULL, "disasm (nosource) failed");
    free(a);
    char *s = rplan_disasm_string(p, 0);
    FUZZ_CHECK(s != NULL, "disasm failed");
    return s;
}

#endif
