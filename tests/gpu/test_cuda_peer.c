/* tests/gpu/test_cuda_peer.c — two real GPUs under one manager: a missing copy on cuda:1
 * comes from cuda:0 over the peer link (cudaMemcpyPeerAsync on cuda:1's stream, after
 * cuda:0's ready event), bit for bit; the two-GPU bootstrap moves what check predicts. */
#include "tests/gpu/gpu_backend.h"
#include "fheplan/residency.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static fhr_backend *two_gpus_or_skip(void)
{
    fhr_backend *b = cuda_or_skip();
    if (b->ops->device_count(b) < 2) {
        fhr_backend_destroy(b);
        cr_skip("needs two CUDA devices");
    }
    return b;
}

static void free_host(void *ctx, void *p, size_t n)
{
    (void)ctx, (void)n;
    free(p);
}

Test(cuda_peer, a_key_on_cuda1_comes_from_cuda0_bit_for_bit)
{
    fhr_backend *b = two_gpus_or_skip();
    fhr_manager_config cfg = {b, NULL, 0, 64};
    fhr_manager *m = NULL;
    cr_assert_eq(fhr_manager_create(&cfg, &m, NULL), FHR_OK);
    size_t n = (48u << 20) + 9;
    unsigned char *p = malloc(n);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 2654435761u >> 13);
    fhr_value *v = NULL;
    size_t bi;
    cr_assert_eq(fhr_value_create(fhr_loc_host(), NULL, &v, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_buffer(v, p, n, free_host, NULL, &bi, NULL), FHR_OK);
    cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, n, NULL), FHR_OK);
    fhr_adopt_opts o = {FHR_REPLICABLE, "key", 0};
    fhr_handle h;
    cr_assert_eq(fhr_adopt(m, &v, &o, &h, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, NULL), FHR_OK);
    for (int settled = 0; !settled;) { /* until cuda:0's copy is complete: a source */
        fhr_snapshot *sn = NULL;
        cr_assert_eq(fhr_snapshot_take(m, &sn, NULL), FHR_OK);
        const fhr_value_info *vi = fhr_snapshot_value(sn, h);
        for (size_t c = 0; c < vi->ncopies; c++)
            if (fhr_loc_equal(vi->copies[c].loc, fhr_loc_cuda(0)))
                settled = vi->copies[c].ready;
        fhr_snapshot_free(sn);
    }
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_cuda(1), NULL, NULL), FHR_OK);
    fhr_trace_entry tr[64];
    size_t nt = 0;
    cr_assert_eq(fhr_trace_read(m, tr, 64, &nt, NULL), FHR_OK);
    cr_assert(nt > 0);
    cr_assert(fhr_loc_equal(tr[nt - 1].from, fhr_loc_cuda(0)), "the source is cuda:0");
    /* read cuda:1's copy back through a lease and compare */
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(1), &s, NULL), FHR_OK);
    fhr_lease *l = NULL;
    cr_assert_eq(fhr_acquire(m, &h, 1, fhr_loc_cuda(1), s, &l, NULL), FHR_OK);
    fhr_value *back = NULL;
    cr_assert_eq(fhr_value_to(fhr_lease_value(l, h), fhr_loc_host(), b, s, &back, NULL), FHR_OK);
    cr_assert_eq(fhr_stream_sync(b, s, NULL), FHR_OK);
    void *q;
    size_t len;
    cr_assert_eq(fhr_value_field(back, "key", &q, &len), FHR_OK);
    cr_assert_eq(len, n);
    unsigned char *want = malloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = (unsigned char)(i * 2654435761u >> 13);
    cr_assert_eq(memcmp(q, want, n), 0);
    free(want);
    fhr_value_destroy(back);
    cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
    fhr_lease_destroy(l);
    fhr_stream_sync(b, s, NULL);
    fhr_stream_destroy(b, s);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

static rplan_vm_report *run_plan(const rplan_program *p, fhr_backend *b, int explain)
{
    rplan_vm_opts o = {0};
    o.mode = explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o.scale = 16;
    o.unknown_as_touch = 1;
    o.pinned_gbps = 55.5;
    o.serial = 1;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s", e.message);
    rplan_vm_destroy(vm);
    return r;
}

Test(cuda_peer, the_two_gpu_bootstrap_moves_what_check_predicts, .timeout = 300)
{
    fhr_backend *b = two_gpus_or_skip();
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile_file("plans/ckks-bootstrap-2gpu.rplan", NULL, &p, NULL), FHR_OK);
    fhr_backend *mb = NULL;
    cr_assert_eq(fhr_backend_model_create(2, &mb, NULL), FHR_OK);
    rplan_vm_report *x = run_plan(p, mb, 1), *r = run_plan(p, b, 0);
    cr_assert_eq(r->total.check_failures, 0);
    cr_assert_eq(r->pcie_bytes, x->pcie_bytes);
    cr_assert_eq(r->peer_bytes, x->peer_bytes);
    cr_assert(r->peer_bytes > 0);
    rplan_vm_report_free(x);
    rplan_vm_report_free(r);
    fhr_backend_destroy(mb);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}
