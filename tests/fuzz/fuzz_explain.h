/* tests/fuzz/fuzz_explain.h — the explain-mode pass of fuzz target 2 over a program
 * the loader accepted: walks the instruction stream as a VM would and checks what
 * the verifier promises a VM (balanced stages and scopes, phases in order only inside
 * plans, operands in range, run arguments complete). */
#ifndef FHEPLAN_FUZZ_EXPLAIN_H
#define FHEPLAN_FUZZ_EXPLAIN_H

#include "fuzz.h"

static inline void fuzz_explain(const rplan_program *p)
{
    size_t ni = rplan_ninstrs(p), nv = rplan_nvalues(p), np = rplan_npolicies(p);
    int stages = 0, in_scope = 0, is_request = 0, last_phase = 0;
    uint32_t args_left = 0;
    for (size_t i = 0; i < ni; i++) {
        rplan_instr in;
        FUZZ_CHECK(rplan_instr_get(p, i, &in) == FHR_OK, "instr %zu", i);
        const char *op = in.opname;
        int is_arg = strncmp(op, "arg.", 4) == 0;
        FUZZ_CHECK(is_arg == (args_left > 0), "instr %zu (%s): %u arguments missing", i, op,
                   args_left);
        if (is_arg) {
            args_left--;
            if (strcmp(op, "arg.val") == 0)
                FUZZ_CHECK(in.value < nv, "instr %zu value %u", i, in.value);
            continue;
        }
        if (!strcmp(op, "stage")) {
            FUZZ_CHECK(!in_scope && in.str, "instr %zu: stage inside a scope", i);
            stages++;
        } else if (!strcmp(op, "endstage")) {
            FUZZ_CHECK(!in_scope && stages > 0, "instr %zu: unbalanced endstage", i);
            stages--;
        } else if (!strcmp(op, "plan") || !strcmp(op, "request")) {
            FUZZ_CHECK(!in_scope && in.str, "instr %zu: nested scope", i);
            in_scope = 1;
            is_request = op[0] == 'r';
            last_phase = 0;
            if (is_request)
                FUZZ_CHECK(in.policy < np, "instr %zu policy %u of %zu", i, in.policy, np);
        } else if (!strcmp(op, "end")) {
            FUZZ_CHECK(in_scope, "instr %zu: end outside a scope", i);
            in_scope = 0;
        } else if (!strcmp(op, "phase")) {
            FUZZ_CHECK(in_scope, "instr %zu: phase outside a scope", i);
            FUZZ_CHECK((int)in.phase > last_phase, "instr %zu: phase %s out of order", i,
                       fhr_phase_name(in.phase));
            last_phase = (int)in.phase;
        } else if (!strcmp(op, "run")) {
            FUZZ_CHECK(in_scope && last_phase == FHR_PHASE_BODY, "instr %zu: run outside a body",
                       i);
            args_left = in.count;
        } else if (!strcmp(op, "require")) {
            FUZZ_CHECK(in_scope && is_request && in.value < nv && in.has_loc,
                       "instr %zu: bad require", i);
        } else if (!strcmp(op, "reserve")) {
            FUZZ_CHECK(in_scope && in.has_loc, "instr %zu: bad reserve", i);
        } else {
            /* ensure, move, drop, discard, hold, release */
            FUZZ_CHECK(in.value < nv, "instr %zu (%s): value %u of %zu", i, op, in.value, nv);
            FUZZ_CHECK(!strcmp(op, "discard") || in.has_loc, "instr %zu (%s) without location",
                       i, op);
        }
    }
    FUZZ_CHECK(args_left == 0 && !in_scope && stages == 0, "program ends inside a construct");
}

#endif
