/* tests/fuzz/fuzz_oracle.h — the promise of `fheplan check` as an oracle: a program that
 * check accepts (the verifier, then the dry run on the model backend) runs on the emulated
 * device. Used by the fuzz targets and by the unit suite's check_runs over every corpus. */
#ifndef FHEPLAN_FUZZ_ORACLE_H
#define FHEPLAN_FUZZ_ORACLE_H

#include "fuzz.h"
#include "fheplan/vm.h"

/* Programs the oracle leaves out, and why: one that reads a file (whether the file is
 * there is the run's environment, not the plan), one whose engine values hold more than
 * 64 MiB (a rehearsal does not scale them), one whose spin bodies sleep longer than
 * a fuzz input may take, and one whose ckks.keyswitch batches add up to more passes over
 * their keys than a fuzz input may take (the emulated kernel does each pass on the host:
 * the bootstrap plans use 880). */
static inline int fuzz_oracle_skips(const rplan_program *p)
{
    uint64_t engine_bytes = 0;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) != FHR_OK || vi.data == RPLAN_DATA_FILE)
            return 1;
        /* an engine's data is never scaled (rplan(5)): a rehearsal holds it at full size,
         * so a program whose engine values pass 64 MiB (plans/cheddar-bootstrap.rplan
         * holds 6.6 GiB) is more memory than a fuzz input may take */
        if (vi.data == RPLAN_DATA_ENGINE &&
            (engine_bytes += vi.nbytes) > ((uint64_t)64 << 20))
            return 1;
        /* an engine's generator is registered by the engine, as its kernels are */
        if (vi.seeded && vi.generator && strcmp(vi.generator, "counter"))
            return 1;
    }
    uint64_t spin_ns = 0, batches = 0;
    const char *kernel = "";
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr in;
        if (rplan_instr_get(p, i, &in) != FHR_OK)
            return 1;
        if (!strcmp(in.opname, "run"))
            kernel = in.str ? in.str : "";
        else if (!strcmp(kernel, "spin") && strncmp(in.opname, "arg.", 4) == 0)
            spin_ns += in.imm;
        else if (!strcmp(kernel, "ckks.keyswitch") && !strcmp(in.opname, "arg.int"))
            batches += in.imm;
    }
    return spin_ns > 50000000ull || batches > 20000 || rplan_ninstrs(p) > 100000;
}

/* One VM run of p on a backend; 1 when the report says ok. On failure *msg (a buffer of
 * 600) says why. *used (may be NULL) gets the scale the VM used (0 when it did not run). */
static inline int fuzz_oracle_vm(const rplan_program *p, const char *spec, int explain,
                                 uint64_t scale, char *msg, uint64_t *used)
{
    if (used)
        *used = 0;
    fhr_backend *b = NULL;
    FUZZ_CHECK(fhr_backend_open(spec, &b, NULL) == FHR_OK, "backend %s", spec);
    rplan_vm_opts o = {0};
    o.mode = explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o.unknown_as_touch = 1;
    o.scale = scale;
    o.pinned_gbps = 25; /* no bandwidth measurement: the oracle is about feasibility */
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    int ok = 0;
    msg[0] = 0;
    if (rplan_vm_create(p, b, &o, &vm, &e) == FHR_OK) {
        rplan_vm_report *r = NULL;
        rplan_vm_run(vm, &r, NULL);
        ok = r && r->ok;
        if (r && used)
            *used = r->scale;
        if (r && !r->ok)
            snprintf(msg, 600, "line %u:%u: %.500s", r->line, r->col, r->message);
        rplan_vm_report_free(r);
    } else {
        snprintf(msg, 600, "vm_create: %.500s", e.message);
    }
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    return ok;
}

/* The devices a program names: 1 + its highest cuda:N (values, budgets, instructions,
 * policy chains), at least 1. A dry run or a run with only these behaves as one with all
 * 62, since nothing else is ever touched, and costs far less to start. */
static inline int fuzz_oracle_devices(const rplan_program *p)
{
    int n = 1;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) == FHR_OK && vi.has_initial && vi.initial.kind == FHR_LOC_CUDA &&
            vi.initial.index + 1 > n)
            n = vi.initial.index + 1;
    }
    for (size_t i = 0; i < rplan_nbudgets(p); i++) {
        fhr_budget b;
        if (rplan_budget(p, i, &b) == FHR_OK && b.loc.kind == FHR_LOC_CUDA && b.loc.index + 1 > n)
            n = b.loc.index + 1;
    }
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr in;
        if (rplan_instr_get(p, i, &in) != FHR_OK)
            continue;
        if (in.has_loc && in.loc.kind == FHR_LOC_CUDA && in.loc.index + 1 > n)
            n = in.loc.index + 1;
        if (in.has_from && in.from.kind == FHR_LOC_CUDA && in.from.index + 1 > n)
            n = in.from.index + 1;
    }
    for (size_t i = 0; i < rplan_npolicies(p); i++) {
        rplan_policy_info pi;
        if (rplan_policy(p, i, &pi) != FHR_OK)
            continue;
        for (size_t c = 0; c < pi.nchains && c < 8; c++)
            for (size_t k = 0; k < pi.chain_len[c] && k < 8; k++)
                if (pi.chain[c][k].kind == FHR_LOC_CUDA && pi.chain[c][k].index + 1 > n)
                    n = pi.chain[c][k].index + 1;
    }
    return n;
}

/* -1 left out, 0 check rejects it, 1 check accepts it and it ran. Aborts (a fuzz crash)
 * when check accepts a program that then fails on the emulated device. Both sides have
 * the devices the program names (fuzz_oracle_devices), as check assumes they exist. */
static inline int fuzz_check_runs(const rplan_program *p, const char *what)
{
    if (fuzz_oracle_skips(p))
        return -1;
    char msg[600], model[16], emu[16];
    int ndev = fuzz_oracle_devices(p);
    snprintf(model, sizeof model, "model:%d", ndev);
    snprintf(emu, sizeof emu, "emu:%d", ndev);
    if (!fuzz_oracle_vm(p, model, 1, 0, msg, NULL))
        return 0;
    /* the run's automatic scale, kept small: the total of all sizes under 4 MiB */
    uint64_t total = 0, scale = 1, used = 0;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) == FHR_OK)
            total = total > UINT64_MAX - vi.nbytes ? UINT64_MAX : total + vi.nbytes;
    }
    while (total / scale > (4u << 20) && scale < (1ull << 62))
        scale *= 2;
    /* The VM scales exactly or less (rplan_vm_opts.scale): a size or budget with few
     * factors of two (a budget of 8589936846 B) keeps a run near full size, which is more
     * memory and time than an input may take (gigabytes copied on the host). A dry run
     * at the asked scale says which scale a run would use; past 16 MiB in all (four
     * times what the asked scale leaves) the input is left out. */
    if (scale > 1) {
        FUZZ_CHECK(fuzz_oracle_vm(p, model, 1, scale, msg, &used),
                   "%s: check accepts it at full size, not at scale %llu: %s", what,
                   (unsigned long long)scale, msg);
        if (total / (used ? used : 1) > ((uint64_t)16 << 20))
            return -1;
    }
    FUZZ_CHECK(fuzz_oracle_vm(p, emu, 0, scale, msg, NULL),
               "%s: check accepts it, the emulated run on %s (scale %llu) fails: %s", what, emu,
               (unsigned long long)scale, msg);
    return 1;
}

#endif
