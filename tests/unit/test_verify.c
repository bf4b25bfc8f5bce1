/* tests/unit/test_verify.c — what the verifier proves for the VM: body arguments resident
 * where the body runs, the built-in kernels' signatures, and sizes scaled without
 * wrapping; bytecode mutated with its checksum recomputed, so the verifier must refuse. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"
#include "fheplan/vm.h"
#include "runtime/program/program.h"

static rplan_program *compile_ok(const char *src)
{
    rplan_compile_opts o = {.filename = "v.rplan"};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(src, strlen(src), &o, &p, d);
    char *r = rplan_diags_render_string(d);
    cr_assert_eq(st, FHR_OK, "%s", r);
    free(r);
    rplan_diags_free(d);
    return p;
}

/* The first diagnostic's message of a refused compile. */
static char *compile_err(const char *src)
{
    rplan_compile_opts o = {.filename = "v.rplan"};
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    fhr_status st = rplan_compile(src, strlen(src), &o, &p, d);
    cr_assert_neq(st, FHR_OK, "accepted:\n%s", src);
    cr_assert_null(p);
    char *r = rplan_diags_render_string(d);
    rplan_diags_free(d);
    return r;
}

/* The instruction record i of the code section of a serialised program. */
static unsigned char *code_at(unsigned char *b, size_t i)
{
    unsigned char *dir = b + RP_HDR_SIZE + RP_DIR_SIZE * (RP_SEC_CODE - 1);
    uint32_t off = (uint32_t)dir[4] | (uint32_t)dir[5] << 8 | (uint32_t)dir[6] << 16 |
                   (uint32_t)dir[7] << 24;
    return b + off + RP_CODE_SIZE * i;
}

static size_t find_op(const rplan_program *p, const char *op, int nth)
{
    for (size_t i = 0; i < rplan_ninstrs(p); i++) {
        rplan_instr in;
        rplan_instr_get(p, i, &in);
        if (!strcmp(in.opname, op) && nth-- == 0)
            return i;
    }
    cr_assert_fail("no %s", op);
    return 0;
}

/* Loads b (checksum recomputed); returns the refusal's text, or NULL when accepted. */
static char *load_mutated(unsigned char *b, size_t n)
{
    cr_assert(rp_bytecode_restamp(b, n));
    rplan_diags *d = rplan_diags_new();
    rplan_program *q = NULL;
    fhr_status st = rplan_load_mem(b, n, "m.rpc", &q, d);
    char *r = st ? rplan_diags_render_string(d) : NULL;
    rplan_program_free(q);
    rplan_diags_free(d);
    return r;
}

static const char req_src[] =
    "rplan 1\n"
    "budget cuda:0 64 MiB\n"
    "value ct = 1 MiB exclusive at pinned init synth(1)\n"
    "value key = 2 MiB replicable at pinned init synth(2)\n"
    "value other = 1 MiB replicable at pinned init synth(3)\n"
    "policy gpu = tiered_lru(cuda:0 -> pinned)\n"
    "request \"r\" using gpu {\n"
    "  require ct @ cuda:0\n"
    "  require key @ cuda:0\n"
    "  body { run ckks.keyswitch(ct, key, 4) }\n"
    "}\n"
    "plan \"p\" { enter { ensure key @ cuda:0 } body { run ckks.keyswitch(key, key) } }\n";

Test(verify, body_argument_without_a_copy_at_the_body_location)
{
    char *r = compile_err("rplan 1\n"
                          "value x = 1 MiB replicable at host init synth(1)\n"
                          "value y = 1 MiB replicable at pinned init synth(2)\n"
                          "plan \"p\" { enter { ensure x @ cuda:0 } body { run touch(x, y) } }\n");
    cr_assert(strstr(r, "v.rplan:4:47: error: run touch: argument 'y' has no copy at cuda:0, "
                        "where the body runs"), "%s", r);
    cr_assert(strstr(r, "v.rplan:3:7: note: 'y' is declared here"), "%s", r);
    free(r);
    /* without an enter action: the lowest device holding all, else pinned, else host */
    r = compile_err("rplan 1\n"
                    "value x = 1 MiB replicable at host init synth(1)\n"
                    "value y = 1 MiB replicable at pinned init synth(2)\n"
                    "plan \"p\" { body { run touch(x, y) } }\n");
    cr_assert(strstr(r, "argument 'y' has no copy at host"), "%s", r);
    free(r);
    rplan_program_free(compile_ok("rplan 1\n"
                                  "value x = 1 MiB replicable at host init synth(1)\n"
                                  "value y = 1 MiB replicable at pinned init synth(2)\n"
                                  "plan \"p\" { enter { ensure x @ cuda:1 ensure y @ cuda:1 }\n"
                                  "  body { run touch(x, y) } }\n"
                                  "plan \"q\" { body { run touch(y, x) } }\n"));
}

Test(verify, request_body_arguments_must_be_required_where_it_runs)
{
    char *r = compile_err("rplan 1\n"
                          "value ct = 1 MiB exclusive at pinned init synth(1)\n"
                          "value key = 1 MiB replicable at pinned init synth(2)\n"
                          "policy gpu = tiered_lru(cuda:0 -> pinned)\n"
                          "request \"r\" using gpu { require ct @ cuda:0\n"
                          "  body { run ckks.keyswitch(ct, key) } }\n");
    cr_assert(strstr(r, "argument 'key' is not required at cuda:0, where the body runs"), "%s",
              r);
    free(r);
}

Test(verify, mutated_body_operand_or_requirement_is_refused)
{
    rplan_program *p = compile_ok(req_src);
    void *w;
    size_t n;
    cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
    unsigned char *b = malloc(n);
    /* the request body's first value argument now names 'other' */
    memcpy(b, w, n);
    unsigned char *in = code_at(b, find_op(p, "arg.val", 0));
    in[4] = 2;
    char *r = load_mutated(b, n);
    cr_assert(r && strstr(r, "argument 'other' is not required at cuda:0"), "%s", r ? r : "");
    free(r);
    /* the requirement of 'key' moved to pinned */
    memcpy(b, w, n);
    in = code_at(b, find_op(p, "require", 1));
    in[1] = (unsigned char)fhr_loc_slot(fhr_loc_pinned());
    r = load_mutated(b, n);
    cr_assert(r && strstr(r, "argument 'key' is not required at cuda:0"), "%s", r ? r : "");
    free(r);
    /* the requirement of 'key' replaced by a second one of 'ct' (as if deleted) */
    memcpy(b, w, n);
    in = code_at(b, find_op(p, "require", 1));
    in[4] = 0;
    r = load_mutated(b, n);
    cr_assert(r && strstr(r, "argument 'key' is not required at cuda:0"), "%s", r ? r : "");
    free(r);
    /* the plan's enter action moved off the device: the body runs at pinned then, fine;
     * moved to cuda:1 with the body's value: fine; the plan body reading 'other' instead */
    memcpy(b, w, n);
    in = code_at(b, find_op(p, "arg.val", 2));
    in[4] = 2;
    r = load_mutated(b, n);
    cr_assert(r && strstr(r, "argument 'other' has no copy at cuda:0"), "%s", r ? r : "");
    free(r);
    /* unchanged: accepted */
    memcpy(b, w, n);
    cr_assert_null(load_mutated(b, n));
    free(b);
    free(w);
    rplan_program_free(p);
}

Test(verify, builtin_kernel_signatures)
{
    rplan_program *p = compile_ok(req_src);
    void *w;
    size_t n;
    cr_assert_eq(rplan_write_mem(p, &w, &n), FHR_OK);
    unsigned char *b = malloc(n);
    /* keyswitch's key argument turned into an integer (constant 0 exists: the batch 4) */
    memcpy(b, w, n);
    unsigned char *in = code_at(b, find_op(p, "arg.val", 1));
    in[0] = RPLAN_OP_ARGINT;
    in[4] = 0;
    char *r = load_mutated(b, n);
    cr_assert(r && strstr(r, "bad arguments to the built-in kernel 'ckks.keyswitch': it takes "
                             "ckks.keyswitch(ciphertext, key [, batch])"), "%s", r ? r : "");
    free(r);
    free(b);
    free(w);
    rplan_program_free(p);
    const char *bad[] = {
        "spin(3)", "spin(1 ms, 2 ms)", "spin(x)", "touch()", "touch(x, 3)", "verify(2 KiB)",
        "ckks.keyswitch(x)", "ckks.keyswitch(x, x, 2 ms)", "ckks.keyswitch(x, 3)",
        "ckks.keyswitch(x, x, 1, 2)",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char src[256];
        snprintf(src, sizeof src, "rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                                  "plan \"p\" { body { run %s } }\n", bad[i]);
        r = compile_err(src);
        cr_assert(strstr(r, "bad arguments to the built-in kernel"), "%s: %s", bad[i], r);
        free(r);
    }
    /* unknown names stay unchecked */
    rplan_program_free(compile_ok("rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                                  "plan \"p\" { body { run my.kernel(3, x, 2 ms) run spin(2 us)"
                                  " run ckks.keyswitch(x, x, 2) } }\n"));
    /* verify cannot recompute a file's content */
    r = compile_err("rplan 1\nvalue k = 1 MiB source file(\"k.bin\")\n"
                    "plan \"p\" { enter { ensure k @ host } body { run verify(k) } }\n");
    cr_assert(strstr(r, "verify of 'k': its content comes from a file"), "%s", r);
    free(r);
}

/* A budget near 2^64 divided by --scale stays a huge budget (it used to wrap to a few
 * bytes), and unscaled sizes stay exact. */
Test(verify, scaling_does_not_wrap)
{
    rplan_program *p = compile_ok("rplan 1\n"
                                  "budget pinned 18446744073709551615 B\n"
                                  "budget host 18446744073709551615 B\n"
                                  "value x = 64 MiB exclusive at pinned init synth(1)\n"
                                  "plan \"p\" { enter { move x -> host } body { run touch(x) } }\n");
    for (int scale = 0; scale < 2; scale++) {
        fhr_backend *be = NULL;
        cr_assert_eq(fhr_backend_open(scale ? "emu:1" : "model:1", &be, NULL), FHR_OK);
        rplan_vm_opts o = {0};
        o.mode = scale ? RPLAN_VM_RUN : RPLAN_VM_EXPLAIN;
        o.scale = scale ? 1024 : 1;
        rplan_vm *vm = NULL;
        rplan_vm_report *r = NULL;
        cr_assert_eq(rplan_vm_create(p, be, &o, &vm, NULL), FHR_OK);
        rplan_vm_run(vm, &r, NULL);
        cr_assert(r && r->ok, "scale %llu: %s", (unsigned long long)o.scale, r ? r->message : "");
        rplan_vm_report_free(r);
        rplan_vm_destroy(vm);
        fhr_backend_destroy(be);
    }
    rplan_program_free(p);
    /* one byte over a tiny budget is refused by check and by an unscaled run alike */
    p = compile_ok("rplan 1\nbudget pinned 13 B\nvalue x = 13 B exclusive at pinned init "
                   "synth(1)\n");
    fhr_backend *be = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &be, NULL), FHR_OK);
    rplan_vm_opts o = {0};
    o.mode = RPLAN_VM_RUN;
    o.scale = 1;
    rplan_vm *vm = NULL;
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_create(p, be, &o, &vm, NULL), FHR_OK);
    rplan_vm_run(vm, &r, NULL);
    cr_assert(r && r->ok, "%s", r ? r->message : "");
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    rplan_program_free(p);
}

/* ---- limits: one each, stated, located, and checked quickly ---------------------------- */

static char *nested_stages(int n)
{
    size_t cap = 200 + (size_t)n * 40, k = 0;
    char *b = malloc(cap);
    k += (size_t)snprintf(b + k, cap - k, "rplan 1\nvalue x = 1 MiB replicable at host init "
                                          "synth(1)\n");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(b + k, cap - k, "stage \"s%d\" {\n", i);
    k += (size_t)snprintf(b + k, cap - k, "ensure x @ pinned\n");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(b + k, cap - k, "}\n");
    return b;
}

Test(verify, stage_nesting_limit_is_one_and_located)
{
    char *src = nested_stages(32);
    rplan_program *p = compile_ok(src);
    fhr_backend *be = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &be, NULL), FHR_OK);
    rplan_vm *vm = NULL;
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_create(p, be, NULL, &vm, NULL), FHR_OK);
    rplan_vm_run(vm, &r, NULL);
    cr_assert(r && r->ok, "%s", r ? r->message : "");
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    rplan_program_free(p);
    free(src);
    src = nested_stages(33);
    char *e = compile_err(src);
    cr_assert(strstr(e, "v.rplan:35:1: error: stages are nested too deeply (at most 32 levels)"),
              "%s", e);
    free(e);
    free(src);
}

Test(verify, loops_are_capped_in_total_at_the_outermost_loop)
{
    char *e = compile_err("rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                          "stage \"s\" {\n  for i in 0..<10000 {\n"
                          "    for j in 0..<10000 { ensure x @ host }\n  }\n}\n");
    cr_assert(strstr(e, "v.rplan:4:7: error: the loops here unroll to more than 1000000 "
                        "iterations"), "%s", e);
    free(e);
    e = compile_err("rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                    "for i in 0..<300000 { ensure x @ pinned drop x @ pinned ensure x @ cuda:0 "
                    "drop x @ cuda:0 }\n");
    cr_assert(strstr(e, "v.rplan:3:5: error: the loops here unroll to more than 1000000 "
                        "instructions"), "%s", e);
    free(e);
    e = compile_err("rplan 1\nfor i in 0..18446744073709551615 { }\n");
    cr_assert(strstr(e, "loop of 2^64 iterations is too long (at most 1000000)"), "%s", e);
    free(e);
    e = compile_err("rplan 1\nfor i in 5..1000005 { }\n");
    cr_assert(strstr(e, "loop of 1000001 iterations is too long"), "%s", e);
    free(e);
    rplan_program_free(compile_ok("rplan 1\nvalue x = 1 MiB replicable at host init synth(1)\n"
                                  "for i in 0..<1000 { for j in 0..<999 { } ensure x @ host }\n"));
}

Test(verify, a_flat_sum_of_any_length_is_one_level)
{
    size_t n = 5000, cap = n * 4 + 100, k = 0;
    char *src = malloc(cap);
    k += (size_t)snprintf(src, cap, "rplan 1\nconst A = 1");
    for (size_t i = 1; i < n; i++)
        k += (size_t)snprintf(src + k, cap - k, " + 1");
    snprintf(src + k, cap - k, "\nvalue x[A - 4999] = 1 MiB at host\n");
    rplan_program_free(compile_ok(src));
    free(src);
    /* real nesting is still bounded */
    src = malloc(3000);
    k = (size_t)snprintf(src, 3000, "rplan 1\nconst A = ");
    for (int i = 0; i < 250; i++) {
        memcpy(src + k, "1 + (", 5);
        k += 5;
    }
    src[k++] = '1';
    for (int i = 0; i < 250; i++)
        src[k++] = ')';
    snprintf(src + k, 3000 - k, "\n");
    char *e = compile_err(src);
    cr_assert(strstr(e, "nested too deeply"), "%s", e);
    free(e);
    free(src);
}
