/* examples/engine.c — an FHE engine embedding the fheplan VM, built against the installed
 * tree through pkg-config (make test-install): it checks header/library skew, registers
 * its own body kernel `engine.scale(ct, factor)`, compiles a plan from a string, runs it
 * on the emulated device (the VM does every placement; the kernel only enqueues work on
 * the stream it is given) and reads the report. Exits 1 if anything is off: the kernel's
 * result is checked against the synthetic data the plan declares. */
#include <fheplan/vm.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char plan[] =
    "rplan 1\n"
    "budget cuda:0 4 MiB          # room for the key and two ciphertexts\n"
    "value ct[4] = 1 MiB exclusive at pinned init synth(10 + i)\n"
    "value key   = 2 MiB replicable source synth(99)\n"
    "policy gpu  = tiered_lru(cuda:0 -> pinned -> host)\n"
    "stage \"engine\" {\n"
    "  for i in 0..<4 {\n"
    "    request \"scale-{i}\" using gpu {\n"
    "      require ct[i] @ cuda:0\n"
    "      require key @ cuda:0\n"
    "      body { run engine.scale(ct[i], 3); run verify(ct[i]) }\n"
    "    }\n"
    "  }\n"
    "}\n";

typedef struct engine {
    uint64_t sum;   /* sum of factor * word over every word the kernel saw */
    uint64_t calls;
} engine;

typedef struct scale_job {
    engine *e;
    const uint64_t *words;
    size_t nwords;
    uint64_t factor;
} scale_job;

static fhr_status fail(fhr_error *err, fhr_status st, const char *msg)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s", msg);
    }
    return st;
}

/* Runs on the stream, after the value's transfer to the device completed. */
static void scale_on_stream(void *arg)
{
    scale_job *j = arg;
    uint64_t s = 0;
    for (size_t i = 0; i < j->nwords; i++)
        s += j->words[i] * j->factor;
    __atomic_fetch_add(&j->e->sum, s, __ATOMIC_RELAXED);
    __atomic_fetch_add(&j->e->calls, 1, __ATOMIC_RELAXED);
    free(j);
}

/* engine.scale(ct, factor): enqueue only; the lease stays protected until the job ran. */
static fhr_status engine_scale(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    if (c->nargs != 2 || c->args[0].kind != RPLAN_ARG_VALUE || c->args[1].kind != RPLAN_ARG_INT)
        return fail(err, FHR_E_INVALID, "engine.scale wants (value, integer)");
    if (c->device_memory) /* a real engine launches its CUDA kernel on c->stream here */
        return fail(err, FHR_E_UNSUPPORTED, "this example runs on the emulated device");
    void *data;
    size_t n;
    fhr_status st = fhr_value_field(c->values[c->args[0].value], "data", &data, &n);
    if (st)
        return fail(err, st, "value without a data field");
    scale_job *j = malloc(sizeof *j);
    if (!j)
        return fail(err, FHR_E_NOMEM, "out of memory");
    *j = (scale_job){ctx, data, n / 8, c->args[1].imm};
    st = fhr_launch_host(c->backend, c->stream, scale_on_stream, j, err);
    if (st)
        free(j);
    return st;
}

int main(void)
{
    if (fhr_version_number() != FHEPLAN_VERSION_NUMBER) {
        fprintf(stderr, "engine: headers %s, library %s\n", FHEPLAN_VERSION, fhr_version());
        return 1;
    }
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    rplan_compile_opts co = {.filename = "engine.rplan"};
    if (rplan_compile(plan, strlen(plan), &co, &p, d) != FHR_OK) {
        rplan_diags_render(d, stderr, 0);
        rplan_diags_free(d);
        return 1;
    }
    rplan_diags_free(d);

    fhr_error e;
    fhr_error_init(&e);
    fhr_backend *b = NULL;
    rplan_vm *vm = NULL;
    rplan_vm_report *r = NULL;
    engine eng = {0, 0};
    int rc = 1;
    if (fhr_backend_open("emu:1", &b, &e) != FHR_OK ||
        rplan_vm_create(p, b, NULL, &vm, &e) != FHR_OK ||
        rplan_kernel_register(vm, "engine.scale", engine_scale, &eng, &e) != FHR_OK) {
        fprintf(stderr, "engine: %s\n", e.message);
        goto out;
    }
    if (rplan_vm_run(vm, &r, &e) != FHR_OK) {
        fprintf(stderr, "engine: line %u: %s\n", r ? r->line : 0, r ? r->message : e.message);
        goto out;
    }
    /* what the kernel must have seen: the synthetic content of ct[0..3] */
    uint64_t want = 0;
    for (uint64_t i = 0; i < 4; i++) {
        rplan_value_info vi;
        rplan_value(p, i, &vi);
        for (uint64_t w = 0; w < vi.nbytes / 8; w++)
            want += rplan_synth_word(vi.seed, w) * 3;
    }
    const rplan_stage_report *t = &r->total;
    const rplan_loc_peak *dev = NULL;
    for (size_t i = 0; i < t->npeaks; i++) {
        if (t->peaks[i].loc.kind == FHR_LOC_CUDA)
            dev = &t->peaks[i];
        if (t->peaks[i].has_budget && t->peaks[i].peak_bytes > t->peaks[i].budget_bytes)
            dev = NULL; /* over its budget: refuse below */
    }
    if (!dev) {
        fprintf(stderr, "engine: no device peak within its budget in the report\n");
        goto out;
    }
    printf("engine: fheplan %s on %s: %llu requests, %llu bodies, %llu bytes to the device, "
           "%llu evictions, peak cuda:0 %llu of %llu bytes, %.2f ms\n",
           fhr_version(), r->device, (unsigned long long)t->requests,
           (unsigned long long)t->bodies,
           (unsigned long long)(t->bytes[FHR_DIR_H2D] + t->load_h2d_bytes),
           (unsigned long long)t->evictions, (unsigned long long)dev->peak_bytes,
           (unsigned long long)dev->budget_bytes, t->time_s * 1e3);
    if (!r->ok || t->requests != 4 || t->bodies != 8 || t->checks != 4 || t->check_failures ||
        eng.calls != 4 || eng.sum != want) {
        fprintf(stderr, "engine: report or kernel result is off (calls %llu, sum %s)\n",
                (unsigned long long)eng.calls, eng.sum == want ? "right" : "wrong");
        goto out;
    }
    char *json = rplan_vm_report_json(r);
    rc = !json || !strstr(json, "\"ok\":");
    free(json);
    printf("engine: ok\n");
out:
    fhr_error_clear(&e);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    return rc;
}
