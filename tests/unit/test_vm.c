/* tests/unit/test_vm.c — the VM over the emulated and model backends: plans and
 * requests, explain mode, the kernel registry, integrity checks, scaling, failures
 * with their source positions, and the report/trace JSON. */
#include "compile_ok.h"
#include "fheplan/vm.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rplan_program *compile_src(const char *src) { return compile_ok_named(src, "test.rplan"); }

/* The kernel model's time of a body reading `bytes`, in ns (3000 GB/s, the default). */
#define MODEL_NS(bytes) ((uint64_t)llround((double)(bytes) / 3000.0))

static fhr_backend *open_backend(const char *spec)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open(spec, &b, NULL), FHR_OK);
    return b;
}

static rplan_vm_report *run_prog(const char *src, const char *dev, rplan_vm_opts *o,
                                 fhr_status want)
{
    rplan_program *p = compile_src(src);
    fhr_backend *b = open_backend(dev);
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    fhr_status st = rplan_vm_run(vm, &r, &e);
    cr_assert_eq(st, want, "status %s: %s", fhr_status_name(st), e.message);
    cr_assert_not_null(r);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return r;
}

static const char *tile_src =
    "rplan 1\n"
    "budget cuda:0 8 MiB\n"
    "value ct = 1 MiB exclusive at pinned init synth(3)\n"
    "value w = 2 MiB replicable at host init synth(4)\n"
    "stage \"s\" {\n"
    "  plan \"p\" {\n"
    "    reserve cuda:0 1 MiB \"ws\"\n"
    "    enter { move ct -> cuda:0 from pinned; ensure w @ cuda:0 }\n"
    "    body { run verify(ct); run verify(w); run touch(ct, w); run spin(1 ms) }\n"
    "    exit { move ct -> pinned from cuda:0; drop w @ cuda:0 }\n"
    "  }\n"
    "  plan \"q\" { body { run verify(ct) } }\n"
    "}\n";

Test(vm, plan_runs_on_emu_with_integrity)
{
    rplan_vm_opts o = {0};
    rplan_vm_report *r = run_prog(tile_src, "emu:1,virtual", &o, FHR_OK);
    cr_assert(r->ok);
    cr_assert_eq(r->nstages, 1);
    cr_assert_str_eq(r->stages[0].name, "s");
    cr_assert_eq(r->total.bytes[FHR_DIR_H2D], 3u << 20);
    cr_assert_eq(r->total.bytes[FHR_DIR_D2H], 1u << 20);
    cr_assert_eq(r->total.checks, 3);
    cr_assert_eq(r->total.check_failures, 0);
    cr_assert_eq(r->total.bodies, 5);
    /* virtual clock: each body lasts the kernel model's time (its bytes at 3000 GB/s; spin
     * its duration): verify 1 MiB, verify 2 MiB, touch 3 MiB, spin 1 ms, verify 1 MiB */
    cr_assert_float_eq(r->total.body_s,
                       (2 * MODEL_NS(1 << 20) + MODEL_NS(2 << 20) + MODEL_NS(3 << 20) + 1000000) * 1e-9,
                       1e-12, "%.9f s", r->total.body_s);
    int found = 0;
    for (size_t i = 0; i < r->total.npeaks; i++)
        if (r->total.peaks[i].loc.kind == FHR_LOC_CUDA) {
            found = 1;
            cr_assert_eq(r->total.peaks[i].peak_bytes, 4u << 20);
            cr_assert_eq(r->total.peaks[i].budget_bytes, 8u << 20);
        }
    cr_assert(found);
    rplan_vm_report_free(r);
}

Test(vm, explain_on_model_moves_nothing_but_predicts)
{
    rplan_vm_opts o = {0};
    o.mode = RPLAN_VM_EXPLAIN;
    rplan_vm_report *r = run_prog(tile_src, "model:1", &o, FHR_OK);
    cr_assert(r->ok);
    cr_assert(r->explain);
    cr_assert_eq(r->total.bytes[FHR_DIR_H2D], 3u << 20);
    cr_assert_eq(r->total.check_failures, 0);
    rplan_vm_report_free(r);
}

static const char *req_src =
    "rplan 1\n"
    "budget cuda:0 5 MiB\n"
    "value ct = 1 MiB exclusive at pinned init synth(1)\n"
    "value k[6] = 1 MiB replicable source synth(10 + i)\n"
    "policy lru = tiered_lru(cuda:0 -> pinned -> host)\n"
    "stage \"ks\" {\n"
    "  for r in 0..1 { for i in 0..5 {\n"
    "    request \"r{r}-{i}\" using lru {\n"
    "      require ct @ cuda:0\n"
    "      require k[i] @ cuda:0\n"
    "      reserve cuda:0 1 MiB \"ws\"\n"
    "      body { run verify(k[i]); run ckks.keyswitch(ct, k[i], 2) }\n"
    "    }\n"
    "  } }\n"
    "  request \"back\" using lru { require ct @ pinned; body { run verify(ct) } }\n"
    "}\n";

Test(vm, requests_evict_lru_and_stay_in_budget)
{
    rplan_vm_opts o = {0};
    o.trace = 1;
    rplan_vm_report *r = run_prog(req_src, "emu:1", &o, FHR_OK);
    cr_assert(r->ok, "%s", r->message);
    cr_assert_eq(r->total.requests, 13);
    cr_assert_eq(r->total.loads, 12); /* budget holds 3 keys: every second-round key reloads */
    cr_assert(r->total.evictions >= 9);
    cr_assert_eq(r->total.checks, 13);
    cr_assert_eq(r->total.check_failures, 0);
    for (size_t i = 0; i < r->total.npeaks; i++)
        if (r->total.peaks[i].has_budget)
            cr_assert_leq(r->total.peaks[i].peak_bytes, r->total.peaks[i].budget_bytes);
    rplan_vm_report_free(r);
}

typedef struct counter_ctx {
    int calls;
    size_t last_nvalues;
    uint64_t last_int;
} counter_ctx;

static fhr_status my_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)err;
    counter_ctx *k = ctx;
    k->calls++;
    k->last_nvalues = c->nvalues;
    for (size_t a = 0; a < c->nargs; a++)
        if (c->args[a].kind == RPLAN_ARG_INT)
            k->last_int = c->args[a].imm;
    cr_assert_not_null(c->stream);
    cr_assert_eq(c->loc.kind, FHR_LOC_CUDA);
    return FHR_OK;
}

Test(vm, registered_kernel_is_called_with_values_and_args)
{
    const char *src = "rplan 1\nvalue a = 64 KiB at pinned init synth(1)\n"
                      "plan \"p\" { enter { ensure a @ cuda:0 } body { run eng.op(a, 7) } }\n";
    rplan_program *p = compile_src(src);
    fhr_backend *b = open_backend("emu:1");
    rplan_vm *vm = NULL;
    cr_assert_eq(rplan_vm_create(p, b, NULL, &vm, NULL), FHR_OK);
    counter_ctx k = {0};
    cr_assert_eq(rplan_kernel_register(vm, "eng.op", my_kernel, &k, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    cr_assert_eq(k.calls, 1);
    cr_assert_eq(k.last_nvalues, 1);
    cr_assert_eq(k.last_int, 7);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

Test(vm, unknown_kernel_fails_with_its_position_unless_rehearsal)
{
    const char *src = "rplan 1\nvalue a = 64 KiB at pinned init synth(1)\n"
                      "plan \"p\" { body {\n  run nope(a) } }\n";
    rplan_vm_opts o = {0};
    rplan_vm_report *r = run_prog(src, "emu:1", &o, FHR_E_INVALID);
    cr_assert(!r->ok);
    cr_assert_eq(r->line, 4);
    cr_assert_eq(r->col, 3);
    cr_assert(strstr(r->message, "nope"));
    rplan_vm_report_free(r);
    o.unknown_as_touch = 1;
    r = run_prog(src, "emu:1", &o, FHR_OK);
    cr_assert(r->ok);
    rplan_vm_report_free(r);
}

Test(vm, budget_override_fails_at_the_action)
{
    /* a budget override below what the plan needs: the run fails at the move */
    const char *src = "rplan 1\nbudget cuda:0 4 MiB\nvalue a = 2 MiB exclusive at pinned init synth(1)\n"
                      "stage \"s\" {\n  move a -> cuda:0 from pinned\n}\n";
    fhr_budget bud = {fhr_loc_cuda(0), 1 << 20};
    rplan_vm_opts o = {0};
    o.budget_override = &bud;
    o.nbudget_override = 1;
    rplan_vm_report *r = run_prog(src, "emu:1", &o, FHR_E_INFEASIBLE);
    cr_assert(!r->ok);
    cr_assert_eq(r->line, 5);
    cr_assert_eq(r->col, 3);
    rplan_vm_report_free(r);
}

Test(vm, scale_divides_sizes_and_budgets)
{
    rplan_vm_opts o = {0};
    o.scale = 16;
    rplan_vm_report *r = run_prog(tile_src, "emu:1", &o, FHR_OK);
    cr_assert(r->ok);
    cr_assert_eq(r->scale, 16);
    cr_assert_eq(r->total.bytes[FHR_DIR_H2D], (3u << 20) / 16);
    rplan_vm_report_free(r);
}

Test(vm, report_and_trace_json_parse)
{
    rplan_program *p = compile_src(req_src);
    fhr_backend *b = open_backend("emu:1");
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {0};
    o.trace = 1;
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    char *js = rplan_vm_report_json(r);
    cJSON *j = cJSON_Parse(js);
    cr_assert_not_null(j);
    cJSON *t = cJSON_GetObjectItem(j, "totals");
    cr_assert_not_null(cJSON_GetObjectItem(t, "lower_bound_s"));
    cr_assert_not_null(cJSON_GetObjectItem(t, "ratio"));
    cr_assert_not_null(cJSON_GetObjectItem(t, "integrity"));
    cJSON_Delete(j);
    free(js);
    char *tr = rplan_vm_trace_json(vm);
    cJSON *tj = cJSON_Parse(tr);
    cr_assert_not_null(tj);
    cJSON *ev = cJSON_GetObjectItem(tj, "traceEvents");
    cr_assert(cJSON_IsArray(ev));
    int bodies = 0, xfers = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        cJSON *cat = cJSON_GetObjectItem(e, "cat");
        if (cat && !strcmp(cat->valuestring, "body"))
            bodies++;
        if (cat && !strcmp(cat->valuestring, "transfer"))
            xfers++;
    }
    cr_assert_eq(bodies, 25);
    cr_assert(xfers > 0);
    cJSON_Delete(tj);
    free(tr);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

/* Every plan in plans/, read from the folder (a new plan is picked up), on two emulated
 * devices (the two-GPU bootstrap uses cuda:1). */
Test(vm, every_plan_in_plans_runs_on_emu)
{
    char files[32][512];
    size_t nfiles = 0;
    DIR *d = opendir("plans");
    cr_assert_not_null(d);
    for (struct dirent *de; (de = readdir(d)) && nfiles < 32;) {
        size_t l = strlen(de->d_name);
        if (l > 6 && !strcmp(de->d_name + l - 6, ".rplan"))
            snprintf(files[nfiles++], sizeof files[0], "plans/%s", de->d_name);
    }
    closedir(d);
    cr_assert_geq(nfiles, 7, "plans/ holds %zu plans", nfiles);
    for (size_t i = 0; i < nfiles; i++) {
        rplan_program *p = NULL;
        cr_assert_eq(rplan_compile_file(files[i], NULL, &p, NULL), FHR_OK, "%s", files[i]);
        fhr_backend *b = open_backend("emu:2");
        rplan_vm_opts o = {0};
        o.scale = 1024;
        o.unknown_as_touch = 1;
        rplan_vm *vm = NULL;
        cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
        rplan_vm_report *r = NULL;
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s: %s", files[i], e.message);
        cr_assert_eq(r->total.check_failures, 0);
        fhr_error_clear(&e);
        rplan_vm_report_free(r);
        rplan_vm_destroy(vm);
        fhr_backend_destroy(b);
        rplan_program_free(p);
    }
}

/* The generator is part of the file format's meaning (init synth, source synth and
 * verify on the host and the GPU share its one definition in vm.h): known words, worked
 * out apart from the code with Python integers modulo 2^64 from the formula in vm.h.
 * Word (0, 0) is SplitMix64's published first output for state 0. */
Test(vm, synth_word_is_stable)
{
    static const struct { uint64_t seed, i, word; } known[] = {
        {0, 0, 0xe220a8397b1dcdafULL},
        {1, 0, 0x2d0f28c7e7e786b2ULL},
        {1, 1, 0x75856f745165f252ULL},
        {2, 0, 0x3c5b66874b9e8a84ULL},
        {7, 3, 0x667a5b45be93d36bULL},
        {3, 1000000, 0x8d043a7056737e14ULL},
        {UINT64_MAX, UINT64_MAX - 1, 0x3a391231209043fdULL},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        cr_expect_eq(rplan_synth_word(known[k].seed, known[k].i), known[k].word,
                     "word (%llu, %llu)", (unsigned long long)known[k].seed,
                     (unsigned long long)known[k].i);
}

/* Every event record a run makes is needed (lease releases included): failing any one
 * of them fails the run with a message, never a silent success. */
Test(vm, every_failed_event_record_fails_the_run)
{
    rplan_program *p = compile_src(tile_src);
    uint64_t points = 0;
    for (uint64_t k = 0; k == 0 || k <= points; k++) {
        fhr_backend *fb = NULL;
        cr_assert_eq(fhr_backend_fault_create(open_backend("emu:1"), &fb, NULL), FHR_OK);
        fhr_backend_fault_arm(fb, FHR_FAULT_EVENT, k);
        rplan_vm *vm = NULL;
        fhr_error e;
        fhr_error_init(&e);
        rplan_vm_opts o = {0};
        cr_assert_eq(rplan_vm_create(p, fb, &o, &vm, &e), FHR_OK, "%s", e.message);
        rplan_vm_report *r = NULL;
        fhr_status st = rplan_vm_run(vm, &r, &e);
        if (k == 0) {
            cr_assert_eq(st, FHR_OK, "clean run: %s", e.message);
            points = fhr_backend_fault_count(fb, FHR_FAULT_EVENT);
            cr_assert_gt(points, 2);
        } else {
            cr_expect_neq(st, FHR_OK, "event record %llu of %llu failed, yet the run succeeded",
                          (unsigned long long)k, (unsigned long long)points);
            cr_expect(e.message[0], "no message for event record %llu", (unsigned long long)k);
        }
        rplan_vm_report_free(r);
        fhr_error_clear(&e);
        rplan_vm_destroy(vm);
        fhr_backend_destroy(fb);
    }
    rplan_program_free(p);
}

/* A body kernel that fails after holding its value where the exit moves it from: the
 * body fails, then the exit fails too (the copy is held). The body's error is primary. */
static fhr_hold *sabotage_hold;
static fhr_status sabotage_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)ctx;
    fhr_handle h = rplan_vm_handle(c->vm, 0);
    fhr_status st = fhr_hold_acquire(c->manager, &h, 1, c->loc, &sabotage_hold, err);
    if (st)
        return st;
    if (err) {
        fhr_error_clear(err);
        err->status = FHR_E_INVALID;
        snprintf(err->message, sizeof err->message, "the body failed on purpose");
    }
    return FHR_E_INVALID;
}

Test(vm, body_and_exit_fail_the_body_error_is_primary)
{
    rplan_program *p = compile_src("rplan 1\n"
                                   "value ct = 64 KiB exclusive at pinned init synth(3)\n"
                                   "plan \"p\" {\n"
                                   "  enter { move ct -> cuda:0 from pinned }\n"
                                   "  body { run sabotage(ct) }\n"
                                   "  exit { move ct -> pinned from cuda:0 }\n"
                                   "}\n");
    fhr_backend *b = open_backend("emu:1");
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    rplan_vm_opts o = {0};
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(rplan_kernel_register(vm, "sabotage", sabotage_kernel, NULL, &e), FHR_OK);
    rplan_vm_report *r = NULL;
    fhr_status st = rplan_vm_run(vm, &r, &e);
    cr_assert_not_null(sabotage_hold, "the body never ran");
    cr_expect_eq(st, FHR_E_INVALID, "status %s: %s", fhr_status_name(st), e.message);
    cr_expect(strstr(e.message, "on purpose"), "the exit's error replaced the body's: %s",
              e.message);
    cr_expect_eq(fhr_hold_release(sabotage_hold, NULL), FHR_OK);
    fhr_hold_destroy(sabotage_hold);
    sabotage_hold = NULL;
    rplan_vm_report_free(r);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

/* Bodies on a device are timed by device events, not host functions: a host function
 * stalls the device stream for tens of microseconds per body (measured on the H200: a
 * 75%-budget bootstrap run twice took 378.9 ms with them, 355.8 without). On the emulated
 * device the run launches no host function for its device bodies, and still reports
 * their time: on the virtual clock, exactly the kernel model's. */
static fhr_backend_ops hostfn_ops;
static fhr_status (*hostfn_inner)(fhr_backend *, fhr_stream *, fhr_host_fn, void *, fhr_error *);
static int hostfns;

static fhr_status counting_host(fhr_backend *b, fhr_stream *s, fhr_host_fn fn, void *arg,
                                fhr_error *err)
{
    __atomic_add_fetch(&hostfns, 1, __ATOMIC_SEQ_CST);
    return hostfn_inner(b, s, fn, arg, err);
}

static const char *device_src =
    "rplan 1\n"
    "budget cuda:0 8 MiB\n"
    "value ct = 1 MiB exclusive at pinned init synth(3)\n"
    "value w = 2 MiB replicable at host init synth(4)\n"
    "stage \"s\" {\n"
    "  plan \"p\" {\n"
    "    enter { move ct -> cuda:0 from pinned; ensure w @ cuda:0 }\n"
    "    body { run verify(ct); run verify(w); run touch(ct, w); run spin(2 ms) }\n"
    "  }\n"
    "  plan \"q\" { body { run touch(ct, w); run spin(1 ms) } }\n"
    "}\n";

/* One run of device_src on emu:1 with host functions counted; timed: whether the
 * backend offers timed events. */
static rplan_vm_report *count_run(int timed, int *nhost)
{
    rplan_program *p = compile_src(device_src);
    fhr_backend *b = open_backend("emu:1,virtual");
    hostfn_ops = *b->ops;
    hostfn_inner = hostfn_ops.launch_host;
    hostfn_ops.launch_host = counting_host;
    if (!timed)
        hostfn_ops.event_create_timed = NULL;
    b->ops = &hostfn_ops;
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {0};
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    __atomic_store_n(&hostfns, 0, __ATOMIC_SEQ_CST);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    cr_assert(r->ok, "%s", r->message);
    *nhost = __atomic_load_n(&hostfns, __ATOMIC_SEQ_CST);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return r;
}

Test(vm, device_bodies_are_timed_by_events)
{
    int with = 0, without = 0;
    rplan_vm_report *r = count_run(1, &with), *u = count_run(0, &without);
    cr_assert_eq(r->total.bodies, 6);
    /* the emulated kernels are host jobs themselves: the difference is the markers of the
     * four bodies that read values on cuda:0 (spin reads none and runs on the host) */
    cr_assert_eq(without - with, 2 * 4, "%d host functions with timed events, %d without",
                 with, without);
    /* virtual clock: verify 1 MiB, verify 2 MiB, touch 3 MiB and spin 2 ms, then touch 3 MiB
     * and spin 1 ms, each the kernel model's time, from events or from host functions alike */
    double body = (MODEL_NS(1 << 20) + MODEL_NS(2 << 20) + 2 * MODEL_NS(3 << 20) + 3000000) * 1e-9;
    cr_assert_float_eq(r->total.body_s, body, 1e-12, "body time from the events: %.9f s",
                       r->total.body_s);
    cr_assert_float_eq(u->total.body_s, body, 1e-12, "from host functions: %.9f s",
                       u->total.body_s);
    /* the spins (no values: on the host's stream) run back to back from the start and
     * bound the run; the device's bodies overlap them */
    cr_assert_float_eq(r->total.time_s, 3e-3, 1e-12, "%.9f s", r->total.time_s);
    cr_assert_float_eq(u->total.time_s, 3e-3, 1e-12, "%.9f s", u->total.time_s);
    rplan_vm_report_free(r);
    rplan_vm_report_free(u);
}

/* A stage's time_s runs from the host's opening, which comes before the device has
 * finished the stage before it; begin_s and end_s place its device work on the run's
 * clock, so consecutive ends are the device's time per stage. On the virtual clock the
 * host opens stage "b" while stage "a"'s three touches still run. */
Test(vm, stage_ends_are_device_times)
{
    rplan_program *p = compile_src(
        "rplan 1\n"
        "budget cuda:0 8 MiB\n"
        "value ct = 1 MiB replicable at pinned init synth(3)\n"
        "stage \"a\" { plan \"p\" { enter { ensure ct @ cuda:0 }\n"
        "  body { run touch(ct); run touch(ct); run touch(ct) } } }\n"
        "stage \"b\" { plan \"q\" { enter { ensure ct @ cuda:0 } body { run touch(ct) } } }\n");
    fhr_backend *b = open_backend("emu:1,virtual");
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {0};
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    cr_assert(r->ok, "%s", r->message);
    const rplan_stage_report *a = NULL, *bb = NULL;
    for (size_t i = 0; i < r->nstages; i++) {
        if (!strcmp(r->stages[i].name, "a"))
            a = &r->stages[i];
        if (!strcmp(r->stages[i].name, "b"))
            bb = &r->stages[i];
    }
    cr_assert(a && bb);
    double touch = MODEL_NS(1 << 20) * 1e-9;
    for (const rplan_stage_report *s = a; s; s = s == a ? bb : NULL) {
        cr_assert_leq(s->begin_s, s->end_s, "%s: %.9f > %.9f", s->name, s->begin_s, s->end_s);
        cr_assert_leq(s->end_s, r->total.time_s + 1e-12);
        /* the host opened it no later than its first device work */
        cr_assert_leq(s->end_s - s->time_s, s->begin_s + 1e-12, "%s", s->name);
    }
    /* b's one touch follows a's three on the device's stream */
    cr_assert_float_eq(bb->end_s - a->end_s, touch, 1e-9, "%.9f s", bb->end_s - a->end_s);
    cr_assert_leq(bb->begin_s, bb->end_s - touch + 1e-12);
    /* while its host time counts from an opening before a's work ended */
    cr_assert_gt(bb->time_s, bb->end_s - a->end_s + touch / 2, "%.9f s", bb->time_s);
    cr_assert_float_eq(r->total.end_s, r->total.time_s, 1e-12);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

/* The event that times a device's bodies is recorded at warm-up, before the plan's first
 * statement: when that record fails the run is refused (nothing of the plan ran) with
 * an error naming the device, not a run with an empty report. */
Test(vm, a_failed_warm_up_refuses_the_run)
{
    rplan_program *p = compile_src(device_src);
    fhr_backend *fb = NULL;
    cr_assert_eq(fhr_backend_fault_create(open_backend("emu:1"), &fb, NULL), FHR_OK);
    fhr_backend_fault_arm(fb, FHR_FAULT_EVENT, 1);
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {0};
    cr_assert_eq(rplan_vm_create(p, fb, &o, &vm, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_neq(rplan_vm_run(vm, &r, &e), FHR_OK);
    cr_assert_not_null(r);
    cr_assert(!r->ok && r->refused, "refused: %d", r->refused);
    cr_assert(strstr(r->message, "warm-up of cuda:0"), "%s", r->message);
    cr_assert(strstr(r->message, "injected fault"), "%s", r->message);
    cr_assert_eq(r->total.bodies, 0);
    fhr_error_clear(&e);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(fb);
    rplan_program_free(p);
}
