/* tests/unit/test_vm_streams.c — streams a caller gives the VM (rplan_vm_body_stream,
 * rplan_vm_transfer_stream) on the emulated device: bodies and loads run on them, and the
 * VM never destroys them (a binding keeps them for the process, so that user code that
 * recorded work on them after the run finds them alive). */
#include "compile_ok.h"
#include "fheplan/vm.h"

#include <criterion/criterion.h>
#include <string.h>

static const char *plan_src =
    "rplan 1\n"
    "budget cuda:0 64 KiB\n"
    "value key = 16 KiB replicable source engine.key(0)\n"
    "kernel mix cost 10 us\n"
    "policy p = lookahead(cuda:0 -> pinned -> host)\n"
    "for r in 0..<2 {\n"
    "  request \"use\" using p { require key @ cuda:0  body { run mix(key) } }\n"
    "}\n";

typedef struct seen {
    fhr_stream *body, *xfer;
    int loads, cuda_loads, calls, wrong_body, wrong_xfer;
} seen;

static fhr_status load_key(void *ctx, const rplan_load *ld, fhr_error *err)
{
    (void)err;
    seen *s = ctx;
    if (!ld->fields) {
        *ld->supplied = 16 * 1024;
        return FHR_OK;
    }
    s->loads++;
    s->cuda_loads += ld->loc.kind == FHR_LOC_CUDA;
    if (ld->loc.kind == FHR_LOC_CUDA && ld->stream != s->xfer)
        s->wrong_xfer++;
    return FHR_OK;
}

static fhr_status mix(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)err;
    seen *s = ctx;
    s->calls++;
    if (c->stream != s->body)
        s->wrong_body++;
    return FHR_OK;
}

Test(vm_streams, given_streams_carry_the_work_and_outlive_the_vm)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open("emu:1", &b, NULL), FHR_OK);
    fhr_stream *own[2];
    seen s;
    memset(&s, 0, sizeof s);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &own[k], NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), own[0], &s.body, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_wrap(b, fhr_loc_cuda(0), own[1], &s.xfer, NULL), FHR_OK);
    rplan_program *p = compile_ok_named(plan_src, "streams.rplan");
    rplan_vm_opts o = {0};
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(rplan_loader_register(vm, "key", load_key, &s, &e), FHR_OK);
    cr_assert_eq(rplan_kernel_register(vm, "mix", mix, &s, &e), FHR_OK);
    cr_assert_eq(rplan_vm_body_stream(vm, fhr_loc_cuda(0), s.body, &e), FHR_OK);
    cr_assert_eq(rplan_vm_transfer_stream(vm, fhr_loc_cuda(0), s.xfer, &e), FHR_OK, "%s",
                 e.message);
    cr_assert_eq(rplan_vm_transfer_stream(vm, (fhr_location){FHR_LOC_INVALID, 0}, s.xfer, &e),
                 FHR_E_LOCATION);
    fhr_error_clear(&e);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s", e.message);
    cr_assert_eq(rplan_vm_transfer_stream(vm, fhr_loc_cuda(0), s.xfer, &e), FHR_E_STATE);
    fhr_error_clear(&e);
    cr_assert_eq(s.calls, 2);
    cr_assert_geq(s.cuda_loads, 1, "the key is loaded at cuda:0");
    cr_assert_eq(s.wrong_body, 0, "a body ran on another stream than the one given");
    cr_assert_eq(s.wrong_xfer, 0, "a load at cuda:0 ran on another stream than the one given");
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    /* the VM destroyed neither: both still take work */
    cr_assert_eq(fhr_stream_sync(b, s.body, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s.xfer, NULL), FHR_OK);
    fhr_stream_destroy(b, s.body);
    fhr_stream_destroy(b, s.xfer);
    for (int k = 0; k < 2; k++)
        fhr_stream_destroy(b, own[k]);
    rplan_program_free(p);
    fhr_backend_destroy(b);
}
