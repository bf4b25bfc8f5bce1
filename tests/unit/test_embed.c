/* tests/unit/test_embed.c — the VM embedded in an engine, on the emulated device: a fake
 * engine supplies its values through loaders (field by field from its own host copies) and
 * one adopted value, runs a kernel that reads every byte of its arguments and records a
 * checksum, on a stream of its own wrapped as a view; check (the model backend) and the run
 * move the same bytes; a failing loader and a size mismatch are located errors that lose
 * nothing. */
#include "compile_ok.h"
#include "fheplan/vm.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 4
#define KEY_BYTES (64 * 1024)
#define CT_BYTES (16 * 1024)

static const char *plan_src =
    "rplan 1\n"
    "budget cuda:0 160 KiB\n"
    "value key[4] = 64 KiB replicable source engine.key(i) fields(b, a)\n"
    "value ct = 16 KiB exclusive at pinned init engine.ct(0) fields(c0 = 8 KiB, c1 = 8 KiB)\n"
    "value acc = 8 KiB exclusive at pinned\n"
    "kernel mix cost 200 us\n"
    "policy p = lookahead(cuda:0 -> pinned -> host)\n"
    "plan \"up\" { enter { move ct -> cuda:0 from pinned  move acc -> cuda:0 from pinned } }\n"
    "for r in 0..<2 { for i in 0..<4 {\n"
    "  request \"rot{r}-{i}\" using p {\n"
    "    require ct @ cuda:0  require key[i] @ cuda:0  reserve cuda:0 4 KiB \"scratch\"\n"
    "    body { run mix(ct, key[i]) }\n"
    "  }\n"
    "} }\n";

/* The engine: its own host copies, its stream, the checksums its kernel recorded. */
typedef struct engine {
    unsigned char keys[NKEYS][KEY_BYTES];
    unsigned char ct[CT_BYTES];
    fhr_backend *b;
    fhr_stream *own, *view;
    int fail_key;           /* the loader fails for this key (-1: never) */
    uint64_t short_key;     /* the probe reports one byte less for this key + 1 (0: none) */
    int loads, probes, calls, wrong_stream, wrong_fields;
    uint64_t sums[64];
} engine;

typedef struct fill_job {
    void *dst;
    const void *src;
    size_t n;
} fill_job;

static void do_fill(void *arg)
{
    fill_job *j = arg;
    memcpy(j->dst, j->src, j->n);
    free(j);
}

static fhr_status enqueue_copy(engine *E, fhr_stream *s, void *dst, const void *src, size_t n,
                               fhr_error *err)
{
    if (!s) {
        memcpy(dst, src, n);
        return FHR_OK;
    }
    fill_job *j = malloc(sizeof *j);
    cr_assert_not_null(j);
    *j = (fill_job){dst, src, n};
    fhr_status st = fhr_launch_host(E->b, s, do_fill, j, err);
    if (st)
        free(j);
    return st;
}

static fhr_status load_key(void *ctx, const rplan_load *ld, fhr_error *err)
{
    engine *E = ctx;
    cr_assert_str_eq(ld->loader, "key");
    cr_assert_lt(ld->arg, NKEYS);
    if (!ld->fields) { /* the size probe */
        E->probes++;
        *ld->supplied = KEY_BYTES - (E->short_key == ld->arg + 1);
        return FHR_OK;
    }
    if ((int)ld->arg == E->fail_key) {
        snprintf(err->message, sizeof err->message, "engine: key %d is not in host memory",
                 (int)ld->arg);
        return err->status = FHR_E_SOURCE;
    }
    if (ld->nfields != 2 || strcmp(ld->field_names[0], "b") || strcmp(ld->field_names[1], "a") ||
        ld->field_nbytes[0] != KEY_BYTES / 2 || (char *)ld->fields[1] != (char *)ld->fields[0] + KEY_BYTES / 2)
        E->wrong_fields++;
    E->loads++;
    for (size_t f = 0; f < ld->nfields; f++) {
        fhr_status st = enqueue_copy(E, ld->stream, ld->fields[f],
                                     E->keys[ld->arg] + f * (KEY_BYTES / 2),
                                     (size_t)ld->field_nbytes[f], err);
        if (st)
            return st;
    }
    return FHR_OK;
}

static fhr_status load_ct(void *ctx, const rplan_load *ld, fhr_error *err)
{
    engine *E = ctx;
    if (!ld->fields) {
        *ld->supplied = CT_BYTES;
        return FHR_OK;
    }
    return enqueue_copy(E, ld->stream, ld->fields[0], E->ct, CT_BYTES, err);
}

typedef struct sum_job {
    uint64_t *out;
    const unsigned char *p[8];
    size_t n[8], k;
} sum_job;

static void do_sum(void *arg)
{
    sum_job *j = arg;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t a = 0; a < j->k; a++)
        for (size_t i = 0; i < j->n[a]; i++)
            h = (h ^ j->p[a][i]) * 0x100000001b3ULL;
    *j->out = h;
    free(j);
}

/* Reads every byte of every field of its arguments on the engine's stream. */
static fhr_status mix_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    engine *E = ctx;
    if (c->stream != E->view || c->scratch != NULL) /* an engine kernel gets no VM scratch */
        E->wrong_stream++;
    sum_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    j->out = &E->sums[E->calls++];
    for (size_t v = 0; v < c->nvalues; v++)
        for (size_t f = 0; f < fhr_value_nfields(c->values[v]); f++) {
            void *p;
            cr_assert_eq(fhr_value_field_at(c->values[v], f, &p, &j->n[j->k]), FHR_OK);
            j->p[j->k++] = p;
        }
    fhr_status st = fhr_launch_host(c->backend, c->stream, do_sum, j, err);
    if (st)
        free(j);
    return st;
}

static uint64_t expected_sum(const engine *E, int key)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *p[2] = {E->ct, E->keys[key]};
    size_t n[2] = {CT_BYTES, KEY_BYTES};
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < n[a]; i++)
            h = (h ^ p[a][i]) * 0x100000001b3ULL;
    return h;
}

static rplan_program *compile_plan(void) { return compile_ok_named(plan_src, "embed.rplan"); }

static void engine_init(engine *E)
{
    memset(E, 0, sizeof *E);
    E->fail_key = -1;
    for (int k = 0; k < NKEYS; k++)
        for (size_t i = 0; i < KEY_BYTES; i++)
            E->keys[k][i] = (unsigned char)(i * 31 + (size_t)k * 7 + (i >> 9));
    for (size_t i = 0; i < CT_BYTES; i++)
        E->ct[i] = (unsigned char)(i * 13 + 5);
    cr_assert_eq(fhr_backend_open("emu:1", &E->b, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_create(E->b, fhr_loc_cuda(0), &E->own, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(E->b, fhr_loc_cuda(0), E->own, &E->view, NULL), FHR_OK);
}

static void engine_fini(engine *E)
{
    fhr_stream_destroy(E->b, E->view);
    fhr_stream_destroy(E->b, E->own);
    fhr_backend_destroy(E->b);
}

/* Runs the plan embedded in E; *vmo receives the VM (the caller destroys it). */
static rplan_vm_report *embed_run(engine *E, rplan_program *p, rplan_vm **vmo, fhr_status want)
{
    rplan_vm_opts o = {0};
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, E->b, &o, &vm, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(rplan_loader_register(vm, "key", load_key, E, &e), FHR_OK);
    cr_assert_eq(rplan_loader_register(vm, "ct", load_ct, E, &e), FHR_OK);
    cr_assert_eq(rplan_kernel_register(vm, "mix", mix_kernel, E, &e), FHR_OK);
    cr_assert_eq(rplan_vm_body_stream(vm, fhr_loc_cuda(0), E->view, &e), FHR_OK, "%s", e.message);
    /* acc is the engine's own value, adopted into its slot */
    long acc = rplan_vm_value_index(vm, "acc");
    cr_assert_geq(acc, 0);
    fhr_ckks_meta meta = {0};
    meta.context_id = 1;
    fhr_value *v = NULL;
    size_t bi;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), &meta, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_value_alloc_buffer(v, E->b, 8192, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "data", bi, 0, 8192, NULL), FHR_OK);
    cr_assert_eq(rplan_vm_adopt(vm, (size_t)acc, &v, &e), FHR_OK, "%s", e.message);
    cr_assert_null(v);
    rplan_vm_report *r = NULL;
    fhr_status st = rplan_vm_run(vm, &r, &e);
    cr_assert_eq(st, want, "status %s: %s", fhr_status_name(st), e.message);
    cr_assert_not_null(r);
    fhr_error_clear(&e);
    *vmo = vm;
    return r;
}

static rplan_vm_report *check_plan(rplan_program *p)
{
    fhr_backend *mb = NULL;
    cr_assert_eq(fhr_backend_open("model:1", &mb, NULL), FHR_OK);
    rplan_vm_opts o = {.mode = RPLAN_VM_EXPLAIN, .unknown_as_touch = 1}; /* as check */
    rplan_vm *vm = NULL;
    cr_assert_eq(rplan_vm_create(p, mb, &o, &vm, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    fhr_status st = rplan_vm_run(vm, &r, NULL);
    cr_assert_eq(st, FHR_OK, "%s", r ? r->message : "");
    rplan_vm_destroy(vm);
    fhr_backend_destroy(mb);
    return r;
}

Test(embed, engine_values_kernels_and_stream_run_as_check_said)
{
    static engine E;
    engine_init(&E);
    rplan_program *p = compile_plan();
    rplan_vm *vm;
    rplan_vm_report *r = embed_run(&E, p, &vm, FHR_OK);
    rplan_vm_report *c = check_plan(p);
    cr_assert(r->ok);
    cr_assert_eq(E.wrong_stream, 0, "bodies ran on a stream other than the engine's");
    cr_assert_eq(E.wrong_fields, 0, "a loader saw other fields than the plan declares");
    cr_assert_eq(E.probes, NKEYS, "one size probe per key");
    cr_assert_eq(E.calls, 8);
    for (int k = 0; k < 8; k++)
        cr_assert_eq(E.sums[k], expected_sum(&E, k % NKEYS), "call %d read other bytes", k);
    /* the budget holds two keys beside ct, acc and the scratch: keys stream */
    cr_assert_eq(r->total.loads, (uint64_t)E.loads);
    cr_assert_gt(E.loads, NKEYS, "the budget forces reloads");
    for (int d = 0; d < FHR_DIR_COUNT_; d++)
        cr_assert_eq(r->total.bytes[d], c->total.bytes[d], "direction %d: run and check differ", d);
    cr_assert_eq(r->total.loads, c->total.loads, "loads: run %llu, check %llu", (unsigned long long)r->total.loads, (unsigned long long)c->total.loads);
    cr_assert_eq(r->total.load_bytes, c->total.load_bytes);
    cr_assert_eq(r->total.evictions, c->total.evictions);
    /* the declared cost is the model's body time: 8 calls of 200 us */
    cr_assert_float_eq(c->total.model_body_s, 8 * 200e-6, 1e-12);
    /* the adopted value is the program's */
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(rplan_vm_manager(vm), &s, NULL), FHR_OK);
    const fhr_value_info *acc = fhr_snapshot_value(s, rplan_vm_handle(vm, 5));
    cr_assert_not_null(acc);
    cr_assert_eq(acc->spec_storage_nbytes, 8192);
    fhr_snapshot_free(s);
    rplan_vm_report_free(r);
    rplan_vm_report_free(c);
    rplan_vm_destroy(vm);
    rplan_program_free(p);
    engine_fini(&E);
}

Test(embed, a_failing_loader_is_located_and_loses_nothing)
{
    static engine E;
    engine_init(&E);
    E.fail_key = 2;
    rplan_program *p = compile_plan();
    rplan_vm *vm;
    rplan_vm_report *r = embed_run(&E, p, &vm, FHR_E_PLAN);
    cr_assert_not(r->ok);
    cr_assert(strstr(r->message, "loader 'key' (argument 2) failed") != NULL, "%s", r->message);
    cr_assert(strstr(r->message, "not in host memory") != NULL, "%s", r->message);
    cr_assert_eq(r->line, 10, "at the request that needed key[2]: %u:%u", r->line, r->col);
    /* nothing lost: ct (MUST_PRESERVE) keeps its copy; the charges are the copies' */
    fhr_manager *m = rplan_vm_manager(vm);
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    uint64_t sum[FHR_LOC_SLOTS] = {0};
    for (size_t i = 0; i < s->nvalues; i++)
        for (size_t k = 0; k < s->values[i].ncopies; k++)
            sum[fhr_loc_slot(s->values[i].copies[k].loc)] += s->values[i].copies[k].charged_nbytes;
    const fhr_value_info *ct = fhr_snapshot_value(s, rplan_vm_handle(vm, 4));
    cr_assert_not_null(ct);
    cr_assert_geq(ct->ncopies, 1, "ct lost its last copy");
    for (size_t l = 0; l < s->nlocs; l++)
        cr_assert_eq(s->locs[l].used_bytes, sum[fhr_loc_slot(s->locs[l].loc)],
                     "location %zu: used bytes are not the sum of its copies", l);
    const fhr_value_info *k2 = fhr_snapshot_value(s, rplan_vm_handle(vm, 2));
    for (size_t k = 0; k2 && k < k2->ncopies; k++)
        cr_assert_neq(k2->copies[k].loc.kind, FHR_LOC_CUDA, "the failed copy stayed charged");
    fhr_snapshot_free(s);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    rplan_program_free(p);
    engine_fini(&E);
}

Test(embed, a_size_mismatch_is_refused_at_the_declaration)
{
    static engine E;
    engine_init(&E);
    E.short_key = 3; /* key[2] */
    rplan_program *p = compile_plan();
    rplan_vm *vm;
    rplan_vm_report *r = embed_run(&E, p, &vm, FHR_E_INVALID);
    cr_assert(r->refused, "nothing may run");
    cr_assert_eq(E.loads, 0);
    cr_assert(strstr(r->message, "value 'key[2]': declared 65536 bytes, the engine's loader "
                                 "'key' supplies 65535") != NULL, "%s", r->message);
    cr_assert_eq(r->line, 3);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    rplan_program_free(p);
    engine_fini(&E);
}

Test(embed, missing_loader_refused_unless_rehearsal)
{
    rplan_program *p = compile_plan();
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &b, NULL), FHR_OK);
    for (int rehearse = 0; rehearse < 2; rehearse++) {
        rplan_vm_opts o = {.unknown_as_touch = rehearse};
        rplan_vm *vm = NULL;
        cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
        rplan_vm_report *r = NULL;
        fhr_status st = rplan_vm_run(vm, &r, NULL);
        if (rehearse)
            cr_assert_eq(st, FHR_OK, "%s", r ? r->message : "");
        else {
            cr_assert_eq(st, FHR_E_SOURCE);
            cr_assert(r->refused);
            cr_assert(strstr(r->message, "no loader 'key' is registered") != NULL, "%s",
                      r->message);
        }
        rplan_vm_report_free(r);
        rplan_vm_destroy(vm);
    }
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

Test(embed, adopted_value_must_match_its_declaration)
{
    rplan_program *p = compile_plan();
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &b, NULL), FHR_OK);
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {.unknown_as_touch = 1};
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    fhr_ckks_meta meta = {0};
    fhr_value *v = NULL;
    size_t bi;
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), &meta, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_value_alloc_buffer(v, b, 4096, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "data", bi, 0, 4096, NULL), FHR_OK);
    fhr_error e;
    fhr_error_init(&e);
    /* a source cannot be adopted: the caller keeps the value */
    cr_assert_eq(rplan_vm_adopt(vm, 0, &v, &e), FHR_E_INVALID);
    cr_assert_not_null(v);
    cr_assert_eq(rplan_vm_adopt(vm, 5, &v, &e), FHR_OK);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_E_INVALID);
    cr_assert(r->refused);
    cr_assert(strstr(r->message, "value 'acc': declared 8192 bytes, the engine's value has "
                                 "4096") != NULL, "%s", r->message);
    cr_assert_eq(r->line, 5);
    rplan_vm_report_free(r);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

/* ---- one VM, many runs ------------------------------------------------------------------ */

static int acc_frees;

static void count_free(void *ctx, void *ptr, size_t nbytes)
{
    (void)nbytes;
    acc_frees++;
    fhr_backend *b = ctx;
    b->ops->free(b, fhr_loc_pinned(), ptr, 8192, NULL);
}

/* The engine's runs on one VM: the loaders probed once, every run's kernel reads the same
 * bytes, the same schedule each run, the adopted buffer neither copied nor freed before the
 * VM is (though each run moves acc off pinned), a failed run followed by good ones. */
Test(embed, one_vm_runs_the_plan_many_times)
{
    static engine E;
    engine_init(&E);
    rplan_program *p = compile_plan();
    rplan_vm_opts o = {0};
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, E.b, &o, &vm, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(rplan_loader_register(vm, "key", load_key, &E, &e), FHR_OK);
    cr_assert_eq(rplan_loader_register(vm, "ct", load_ct, &E, &e), FHR_OK);
    cr_assert_eq(rplan_kernel_register(vm, "mix", mix_kernel, &E, &e), FHR_OK);
    cr_assert_eq(rplan_vm_body_stream(vm, fhr_loc_cuda(0), E.view, &e), FHR_OK);
    fhr_ckks_meta meta = {0};
    meta.context_id = 1;
    fhr_value *v = NULL;
    void *buf = NULL;
    size_t bi;
    acc_frees = 0;
    cr_assert_eq(E.b->ops->alloc(E.b, fhr_loc_pinned(), 8192, NULL, &buf, NULL), FHR_OK);
    cr_assert_eq(fhr_value_create(fhr_loc_pinned(), &meta, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_buffer(v, buf, 8192, count_free, E.b, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "data", bi, 0, 8192, NULL), FHR_OK);
    cr_assert_eq(rplan_vm_adopt(vm, (size_t)rplan_vm_value_index(vm, "acc"), &v, &e), FHR_OK);
    rplan_vm_report *first = NULL, *r = NULL;
    E.fail_key = 2; /* the first run fails at key[2]'s load */
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_E_PLAN);
    cr_assert_not(r->ok);
    rplan_vm_report_free(r);
    fhr_error_clear(&e);
    E.fail_key = -1;
    for (int run = 0; run < 3; run++) {
        E.calls = 0;
        E.loads = 0;
        rplan_vm_report *x = NULL;
        cr_assert_eq(rplan_vm_run(vm, &x, &e), FHR_OK, "run %d: %s", run + 2, e.message);
        cr_assert_eq(E.calls, 8, "run %d", run + 2);
        for (int k = 0; k < 8; k++)
            cr_assert_eq(E.sums[k], expected_sum(&E, k % NKEYS), "run %d, call %d", run + 2, k);
        cr_assert_eq(x->total.loads, (uint64_t)E.loads);
        if (!first) {
            first = x;
            continue;
        }
        for (int d = 0; d < FHR_DIR_COUNT_; d++)
            cr_assert_eq(x->total.bytes[d], first->total.bytes[d], "run %d, direction %d",
                         run + 2, d);
        cr_assert_eq(x->total.loads, first->total.loads);
        cr_assert_eq(x->total.evictions, first->total.evictions);
        cr_assert_eq(x->total.peaks[0].peak_bytes, first->total.peaks[0].peak_bytes);
        rplan_vm_report_free(x);
    }
    cr_assert_eq(E.probes, NKEYS, "the loaders' size probe runs once, not per run");
    cr_assert_eq(E.wrong_stream, 0);
    cr_assert_eq(acc_frees, 0, "a run freed the engine's adopted buffer");
    rplan_vm_report_free(first);
    rplan_vm_destroy(vm);
    cr_assert_eq(acc_frees, 1, "the VM frees the adopted buffer once, when destroyed");
    rplan_program_free(p);
    engine_fini(&E);
}

/* ---- the language side: located errors, the bytecode round trip ----------------------- */

int rp_bytecode_restamp(void *buf, size_t len); /* runtime/program: the checksum rewritten */

static void expect_error(const char *src, const char *want, uint32_t line)
{
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts o = {.filename = "bad.rplan"};
    cr_assert_eq(rplan_compile(src, strlen(src), &o, &p, d), FHR_E_INVALID, "%s", src);
    cr_assert_null(p);
    const rplan_diag *g = rplan_diags_get(d, 0);
    cr_assert_not_null(g);
    cr_assert(strstr(g->message, want) != NULL, "got '%s', want '%s'", g->message, want);
    cr_assert_eq(g->line, line, "%s at line %u", g->message, g->line);
    rplan_diags_free(d);
}

Test(embed, engine_declarations_refused_with_their_place)
{
    expect_error("rplan 1\nvalue k = 64 KiB replicable source engin.key(1)\n",
                 "unknown data 'engin.key'", 2);
    expect_error("rplan 1\nvalue k = 64 KiB replicable source engine.key(1) fields(b, a, b)\n",
                 "duplicate field 'b'", 2);
    expect_error("rplan 1\nvalue k = 10 B replicable source engine.key(1) fields(b, a, c)\n",
                 "3 fields cannot share the 10 bytes of 'k' equally", 2);
    expect_error("rplan 1\nvalue k = 8 KiB replicable source engine.key(1)\n"
                 "  fields(b = 4 KiB, a = 2 KiB)\n", "the fields of 'k' hold 6144 bytes", 3);
    expect_error("rplan 1\nvalue k = 8 KiB replicable source engine.key(1) fields(b = 4 KiB, a)\n",
                 "give every field a size", 2);
    expect_error("rplan 1\nvalue k = 8 KiB replicable source synth(1) seeded(3) fields(b, a)\n",
                 "the fields of seeded value 'k' mark none 'seeded'", 2);
    expect_error("rplan 1\nkernel rot costs 1 ms\n", "'cost DURATION' or 'reads SIZE'", 2);
    expect_error("rplan 1\nkernel rot cost 1 MiB\n", "duration", 2);
    expect_error("rplan 1\nkernel rot cost 1 ms\nkernel rot reads 1 MiB\n",
                 "kernel 'rot' is declared twice", 3);
    expect_error("rplan 1\nstage \"s\" { kernel rot cost 1 ms }\n",
                 "only allowed at the top level", 2);
}

Test(embed, bytecode_keeps_engine_data_fields_and_costs)
{
    rplan_program *p = compile_plan();
    void *buf = NULL;
    size_t len = 0;
    cr_assert_eq(rplan_write_mem(p, &buf, &len), FHR_OK);
    rplan_program *q = NULL;
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_load_mem(buf, len, "embed.rpc", &q, d), FHR_OK);
    rplan_value_info vi;
    cr_assert_eq(rplan_value(q, 2, &vi), FHR_OK);
    cr_assert_eq(vi.data, RPLAN_DATA_ENGINE);
    cr_assert_str_eq(vi.loader, "key");
    cr_assert_eq(vi.loader_arg, 2);
    cr_assert_eq(vi.nfields, 2);
    const char *fn;
    uint64_t fb;
    cr_assert_eq(rplan_value_field(q, 4, 1, &fn, &fb), FHR_OK);
    cr_assert_str_eq(fn, "c1");
    cr_assert_eq(fb, 8192);
    cr_assert_eq(rplan_value_field(q, 4, 2, &fn, &fb), FHR_E_INVALID);
    cr_assert_eq(rplan_nkernels(q), 1);
    rplan_kernel_info k;
    cr_assert_eq(rplan_kernel_cost(q, 0, &k), FHR_OK);
    cr_assert_str_eq(k.name, "mix");
    cr_assert_eq(k.kind, RPLAN_COST_DURATION);
    cr_assert_eq(k.imm, 200000);
    /* a field that no longer adds up is refused by the loader's verifier */
    unsigned char *b = buf;
    size_t at = 0;
    for (size_t i = 0; i + 8 <= len; i++) /* the first field record's size: 32 KiB */
        if (b[i] == 0 && b[i + 1] == 0x80 && b[i + 2] == 0 && b[i + 3] == 0 && b[i + 4] == 0 &&
            b[i + 5] == 0 && b[i + 6] == 0 && b[i + 7] == 0 && i >= 8) {
            at = i;
            break;
        }
    cr_assert_gt(at, 0);
    b[at + 1] = 0x7f;
    cr_assert(rp_bytecode_restamp(buf, len)); /* a valid checksum: the verifier must see it */
    rplan_program *r = NULL;
    rplan_diags *d2 = rplan_diags_new();
    cr_assert_eq(rplan_load_mem(buf, len, "embed.rpc", &r, d2), FHR_E_INVALID);
    cr_assert_null(r);
    cr_assert(strstr(rplan_diags_get(d2, 0)->message, "fields hold") != NULL, "%s",
              rplan_diags_get(d2, 0)->message);
    rplan_diags_free(d2);
    free(buf);
    rplan_diags_free(d);
    rplan_program_free(q);
    rplan_program_free(p);
}

Test(embed, profile_round_trip_and_refusals)
{
    rplan_kernel_profile k[2] = {{"mix", 8, 2.5e-4}, {"rot", 3, 1e-3}};
    rplan_vm_report r;
    memset(&r, 0, sizeof r);
    r.nkernels = 2;
    r.kernels = k;
    char *txt = rplan_profile_json(&r);
    cr_assert_not_null(txt);
    rplan_kernel_profile *p = NULL;
    size_t n = 0;
    cr_assert_eq(rplan_profile_parse(txt, strlen(txt), &p, &n, NULL), FHR_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(p[1].name, "rot");
    cr_assert_eq(p[1].calls, 3);
    cr_assert_float_eq(p[0].mean_s, 2.5e-4, 1e-15);
    rplan_profile_free(p, n);
    free(txt);
    static const char *bad[] = {
        "{", "{\"kernels\": []}", "{\"fheplan_profile\": 1, \"kernels\": [{\"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a\", \"mean_s\": -1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a\", \"mean_s\": 1}, "
        "{\"name\": \"a\", \"mean_s\": 2}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(rplan_profile_parse(bad[i], strlen(bad[i]), &p, &n, &e), FHR_E_INVALID,
                     "%s", bad[i]);
        cr_assert_null(p);
        cr_assert(strstr(e.message, "profile") != NULL);
    }
    /* a profile decides the model's body time ahead of the declaration */
    rplan_program *prog = compile_plan();
    fhr_backend *mb = NULL;
    cr_assert_eq(fhr_backend_open("model:1", &mb, NULL), FHR_OK);
    rplan_kernel_profile one = {"mix", 1, 1e-3};
    rplan_vm_opts o = {.mode = RPLAN_VM_EXPLAIN, .unknown_as_touch = 1, .profile = &one,
                       .nprofile = 1};
    rplan_vm *vm = NULL;
    cr_assert_eq(rplan_vm_create(prog, mb, &o, &vm, NULL), FHR_OK);
    rplan_vm_report *rep = NULL;
    cr_assert_eq(rplan_vm_run(vm, &rep, NULL), FHR_OK);
    cr_assert_float_eq(rep->total.model_body_s, 8e-3, 1e-12);
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(mb);
    rplan_program_free(prog);
}

/* A request whose copy fails is named as a request (the manager's scope says "plan"). */
Test(embed, a_failed_request_is_called_a_request)
{
    static const char src[] = "rplan 1\nbudget cuda:0 64 KiB\nvalue k = 8 KiB replicable at pinned\n"
                              "policy p = tiered_lru(cuda:0 -> pinned -> host)\n"
                              "request \"rot\" using p { require k @ cuda:0 }\n";
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile(src, strlen(src), NULL, &p, NULL), FHR_OK);
    fhr_backend *inner = NULL, *b = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    rplan_vm *vm = NULL;
    rplan_vm_opts o = {.pinned_gbps = 55.5}; /* no bandwidth probe: the first copy is the key's */
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    fhr_backend_fault_arm(b, FHR_FAULT_COPY, fhr_backend_fault_count(b, FHR_FAULT_COPY) + 1);
    rplan_vm_report *r = NULL;
    cr_assert_neq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    cr_assert_not_null(r);
    cr_assert(strncmp(r->message, "request 'rot'", 13) == 0, "%s", r->message);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b); /* and inner, which the fault decorator owns */
    rplan_program_free(p);
}
