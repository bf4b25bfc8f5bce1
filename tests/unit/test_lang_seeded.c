/* tests/unit/test_lang_seeded.c — seeded values in the language: diagnostics, the
 * verifier's per-location charge, and the VM regenerating and verifying both halves on
 * the emulated device (a wrong generator is caught), with explain predicting the bytes. */
#include "fheplan/vm.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fhr_status compile(const char *src, rplan_program **p, char **text)
{
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts o = {.filename = "s.rplan"};
    *p = NULL;
    fhr_status st = rplan_compile(src, strlen(src), &o, p, d);
    *text = rplan_diags_render_string(d);
    rplan_diags_free(d);
    return st;
}

static void refused(const char *src, fhr_status want, const char *msg)
{
    rplan_program *p;
    char *t;
    cr_assert_eq(compile(src, &p, &t), want, "%s", t);
    cr_assert(strstr(t, msg), "wanted '%s' in:\n%s", msg, t);
    free(t);
}

Test(lang_seeded, diagnostics)
{
    refused("rplan 1\nvalue k = 1 KiB source synth(1) keep pinned\n", FHR_E_INVALID,
            "s.rplan:2:33: error: 'keep' says where host copies hold the regenerated half");
    refused("rplan 1\nvalue k = 1 KiB source synth(1) seeded(3) keep cuda:0\n", FHR_E_INVALID,
            "'keep' takes host or pinned");
    refused("rplan 1\nvalue k = 8 B source synth(1) seeded(3)\n", FHR_E_INVALID,
            "needs at least 16 bytes");
    refused("rplan 1\nvalue k = 1 KiB source synth(1) seeded(3) seeded(4)\n", FHR_E_INVALID,
            "duplicate 'seeded'");
    refused("rplan 1\nvalue k = 1 KiB source synth(1) seeded(3 KiB)\n", FHR_E_INVALID,
            "a seed must be an integer");
}

Test(lang_seeded, the_verifier_charges_host_copies_only_the_kept_half)
{
    rplan_program *p;
    char *t;
    /* 1 KiB at pinned: 512 B when the a half is omitted there */
    cr_assert_eq(compile("rplan 1\nbudget pinned 600 B\n"
                         "value k = 1 KiB exclusive at pinned init synth(1) seeded(3)\n", &p, &t),
                 FHR_OK, "%s", t);
    free(t);
    rplan_program_free(p);
    refused("rplan 1\nbudget pinned 600 B\n"
            "value k = 1 KiB exclusive at pinned init synth(1) seeded(3) keep pinned\n",
            FHR_E_INFEASIBLE, "exceeds the budget of pinned");
    /* a device copy is charged the whole value */
    refused("rplan 1\nbudget cuda:0 1000 B\n"
            "value k = 1 KiB exclusive at pinned init synth(1) seeded(3)\n"
            "move k -> cuda:0\n",
            FHR_E_INFEASIBLE, "exceeds the budget of cuda:0");
}

static const char plan[] =
    "rplan 1\n"
    "budget cuda:0 40 KiB\n"
    "value ct = 4 KiB exclusive at pinned init synth(1) seeded(9)\n"
    "value k[6] = 16 KiB replicable source synth(100 + i) seeded(1000 + i)\n"
    "policy keys = lookahead(cuda:0 -> pinned -> host)\n"
    "move ct -> cuda:0\n"
    "for j in 0..11 {\n"
    "  request \"r{j}\" using keys {\n"
    "    require ct @ cuda:0\n"
    "    require k[j % 6] @ cuda:0\n"
    "    body { run verify(ct, k[j % 6]) run ckks.keyswitch(ct, k[j % 6]) }\n"
    "  }\n"
    "}\n"
    "move ct -> pinned\n"
    "plan \"last\" { body { run verify(ct) } }\n";

static fhr_generator_fn counter_fn = fhr_generator_counter;

/* The built-in generator, except one bit of the first byte flipped. */
static fhr_status wrong_gen(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *s,
                            void *dst, size_t n, const void *seed, size_t len, fhr_error *err)
{
    (void)ctx;
    unsigned char other[8];
    memcpy(other, seed, len < 8 ? len : 8);
    other[0] ^= 1;
    return counter_fn(NULL, b, at, s, dst, n, other, len < 8 ? len : 8, err);
}

static rplan_vm_report *run(const char *dev, rplan_vm_mode mode, int wrong)
{
    rplan_program *p;
    char *t;
    cr_assert_eq(compile(plan, &p, &t), FHR_OK, "%s", t);
    free(t);
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open(dev, &b, NULL), FHR_OK);
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.serial = 1;
    o.gen_gbps = 100;
    rplan_vm *vm = NULL;
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    if (wrong)
        cr_assert_eq(rplan_generator_register(vm, "counter", wrong_gen, NULL, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    rplan_vm_run(vm, &r, NULL);
    cr_assert_not_null(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return r;
}

Test(lang_seeded, vm_regenerates_and_verifies_both_halves)
{
    rplan_vm_report *r = run("emu", RPLAN_VM_RUN, 0);
    cr_assert(r->ok, "%s", r->message);
    const rplan_stage_report *t = &r->total;
    cr_assert_eq(t->check_failures, 0);
    cr_assert_eq(t->checks, 12 * 2 + 1);
    cr_assert_eq(t->regen_checks, 12 * 2 + 1);
    /* every key load moves 8 KiB and regenerates 8 KiB; the ciphertext 2 KiB each way */
    cr_assert_gt(t->loads, 0);
    cr_assert_eq(t->load_bytes, t->loads * 8192);
    cr_assert_eq(t->bytes[FHR_DIR_H2D], 2048);
    cr_assert_eq(t->bytes[FHR_DIR_D2H], 2048);
    cr_assert_eq(t->regen_bytes, t->loads * 8192 + 2048, "%llu", (unsigned long long)t->regen_bytes);
    cr_assert_eq(r->gen_gbps, 100);
    cr_assert_gt(r->regen_s, 0);
    char *js = rplan_vm_report_json(r);
    cr_assert(strstr(js, "\"bytes_regenerated\""));
    cr_assert(strstr(js, "\"seeded_checks\":25"), "%s", js);
    free(js);
    /* explain predicts the same bytes (no prefetch in either) */
    rplan_vm_report *x = run("model", RPLAN_VM_EXPLAIN, 0);
    cr_assert(x->ok, "%s", x->message);
    cr_assert_eq(x->total.load_bytes, t->load_bytes);
    cr_assert_eq(x->total.regen_bytes, t->regen_bytes);
    rplan_vm_report_free(x);
    rplan_vm_report_free(r);
}

Test(lang_seeded, a_wrong_generator_fails_the_integrity_check)
{
    rplan_vm_report *r = run("emu", RPLAN_VM_RUN, 1);
    cr_assert_not(r->ok);
    /* every device check differs; the last one reads the pinned copy, which holds no a half */
    cr_assert_eq(r->total.check_failures, 12 * 2, "%llu", (unsigned long long)r->total.check_failures);
    cr_assert(strstr(r->message, "integrity"), "%s", r->message);
    rplan_vm_report_free(r);
}

Test(lang_seeded, a_named_generator_is_needed_to_run_not_to_check)
{
    static const char src[] = "rplan 1\n"
                              "value k = 64 KiB source synth(1) seeded engine.sampler(5)\n"
                              "ensure k @ cuda:0\n";
    rplan_program *p;
    char *t;
    cr_assert_eq(compile(src, &p, &t), FHR_OK, "%s", t);
    free(t);
    const char *devs[2] = {"model", "emu"};
    for (int k = 0; k < 2; k++) {
        fhr_backend *b = NULL;
        cr_assert_eq(fhr_backend_open(devs[k], &b, NULL), FHR_OK);
        rplan_vm_opts o;
        memset(&o, 0, sizeof o);
        o.mode = k ? RPLAN_VM_RUN : RPLAN_VM_EXPLAIN;
        rplan_vm *vm = NULL;
        cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
        rplan_vm_report *r = NULL;
        fhr_status st = rplan_vm_run(vm, &r, NULL);
        if (k == 0) {
            cr_assert_eq(st, FHR_OK, "%s", r->message);
            cr_assert_eq(r->total.regen_bytes, 32768);
        } else {
            cr_assert_neq(st, FHR_OK);
            cr_assert(strstr(r->message, "generator 'engine.sampler' is not registered"), "%s",
                      r->message);
        }
        rplan_vm_report_free(r);
        rplan_vm_destroy(vm);
        fhr_backend_destroy(b);
    }
    rplan_program_free(p);
}
