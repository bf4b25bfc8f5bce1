/* tests/fuzz/fuzz_explain.h — the explain-mode pass of fuzz target 2 over a program
 * the loader accepted: first a walk of the instruction stream that checks what the
 * verifier promises a VM (balanced stages and scopes, phases in order only inside
 * plans, operands in range, run arguments complete), then a run of the VM in explain
 * mode over the model backend, which must finish with a well-formed report. */
#ifndef FHEPLAN_FUZZ_EXPLAIN_H
#define FHEPLAN_FUZZ_EXPLAIN_H

#include "fuzz.h"
#include "fheplan/vm.h"

static inline void fuzz_walk(const rplan_program *p)
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

/* The VM in explain mode on the model backend: nothing is allocated or copied, so any
 * size is fine. A verified program may still fail at run time (a request whose policy
 * cannot make room, say); then the report must say where. */
static inline void fuzz_vm_explain(const rplan_program *p)
{
    fhr_backend *b = NULL;
    FUZZ_CHECK(fhr_backend_open("model:2", &b, NULL) == FHR_OK, "model backend");
    rplan_vm_opts o = {0};
    o.mode = RPLAN_VM_EXPLAIN;
    o.unknown_as_touch = 1;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    fhr_status st = rplan_vm_create(p, b, &o, &vm, &e);
    if (st == FHR_OK) {
        rplan_vm_report *r = NULL;
        st = rplan_vm_run(vm, &r, &e);
        FUZZ_CHECK(r != NULL, "explain run (%s) without a report", fhr_status_name(st));
        FUZZ_CHECK(r->explain, "report not marked explain");
        FUZZ_CHECK((st == FHR_OK) == (r->ok != 0), "status %s but report ok=%d",
                   fhr_status_name(st), r->ok);
        if (!r->ok) {
            FUZZ_CHECK(r->message[0], "failed explain run without a message");
            FUZZ_CHECK(r->instr < (long)rplan_ninstrs(p), "failure at instr %ld of %zu", r->instr,
                       rplan_ninstrs(p));
        }
        for (size_t i = 0; i < r->total.npeaks; i++)
            FUZZ_CHECK(!r->total.peaks[i].has_budget ||
                           r->total.peaks[i].peak_bytes <= r->total.peaks[i].budget_bytes,
                       "explain peak over budget at slot %d", fhr_loc_slot(r->total.peaks[i].loc));
        char *js = rplan_vm_report_json(r);
        FUZZ_CHECK(js != NULL, "report json");
        free(js);
        rplan_vm_report_free(r);
    }
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
}

static inline void fuzz_explain(const rplan_program *p)
{
    fuzz_walk(p);
    fuzz_vm_explain(p);
}

#endif
