/* tests/unit/test_peer.c — two devices, one manager (emu:2): a copy's source chosen by cost
 * (peer, pinned, host), the fallbacks, explicit `from`, accounting, faults, the policy. */
#include "fheplan/controller.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"
#include "tests/unit/mgr_helpers.h"

#include <stdatomic.h>
#include <unistd.h>

#define N 4096

static fhr_location C0(void) { return fhr_loc_cuda(0); }
static fhr_location C1(void) { return fhr_loc_cuda(1); }

/* The newest trace entry (a copy's entry names its source in `from`). */
static fhr_trace_entry last_entry(fhr_manager *m)
{
    fhr_trace_entry tr[256];
    size_t n = t_trace_read(m, tr, 256);
    cr_assert(n > 0);
    return tr[n - 1];
}

/* The snapshot's record of h's copy at loc (copied, source), or fails. */
static fhr_copy_info copy_at(fhr_manager *m, fhr_handle h, fhr_location loc)
{
    fhr_snapshot *s = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    const fhr_value_info *vi = fhr_snapshot_value(s, h);
    cr_assert_not_null(vi);
    fhr_copy_info out;
    int found = 0;
    for (size_t c = 0; c < vi->ncopies; c++)
        if (fhr_loc_equal(vi->copies[c].loc, loc)) {
            out = vi->copies[c];
            found = 1;
        }
    fhr_snapshot_free(s);
    cr_assert(found, "no copy at cuda:%d", loc.index);
    return out;
}

/* Waits until the copy of h at loc is complete (the copy that fills it has run). */
static void settle(fhr_manager *m, fhr_handle h, fhr_location loc)
{
    for (int i = 0; i < 20000 && !copy_at(m, h, loc).ready; i++)
        usleep(100);
    cr_assert(copy_at(m, h, loc).ready);
}

/* A replicable value with complete copies at host, pinned and cuda:0. */
static fhr_handle key_on_c0(fhr_manager *m, uint64_t seed)
{
    fhr_handle h = adopt_n(m, N, seed, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    settle(m, h, fhr_loc_pinned());
    cr_assert_eq(fhr_ensure(m, h, C0(), NULL, NULL), FHR_OK);
    settle(m, h, C0());
    return h;
}

Test(peer, missing_copy_comes_from_the_other_device)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = key_on_c0(m, 5);
    double tp, tc;
    uint64_t np, nc;
    cr_assert_eq(fhr_copy_cost(m, h, fhr_loc_pinned(), C1(), &tp, &np, NULL), FHR_OK);
    cr_assert_eq(fhr_copy_cost(m, h, C0(), C1(), &tc, &nc, NULL), FHR_OK);
    cr_assert_eq(np, N);
    cr_assert_eq(nc, N);
    cr_assert_lt(tc, tp, "the peer link is the cheaper one by default");
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    fhr_trace_entry e = last_entry(m);
    cr_assert_eq(e.kind, FHR_TR_ENSURE);
    cr_assert(fhr_loc_equal(e.from, C0()), "source %d:%d", e.from.kind, e.from.index);
    cr_assert(fhr_loc_equal(e.to, C1()));
    cr_assert_eq(e.nbytes, N);
    fhr_copy_info ci = copy_at(m, h, C1());
    cr_assert(ci.copied);
    cr_assert(fhr_loc_equal(ci.source, C0()));
    fhr_snapshot *sn = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &sn, NULL), FHR_OK);
    char *js = fhr_snapshot_json(sn);
    cr_assert(strstr(js, "\"source\":\"cuda:0\""), "%s", js);
    cr_assert(strstr(js, "\"source\":null"), "the adopted host copy: %s", js);
    free(js);
    fhr_snapshot_free(sn);
    cr_assert(resident_has_pattern(m, h, C1(), 5, N));
    /* accounting on both devices */
    cr_assert_eq(used_at(m, C0()), N);
    cr_assert_eq(used_at(m, C1()), N);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(peer, absent_peer_copy_falls_back_to_pinned_then_host)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, N, 6, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, fhr_loc_host()), "only the host copy exists");
    fhr_handle k = adopt_n(m, N, 7, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, k, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    settle(m, k, fhr_loc_pinned());
    cr_assert_eq(fhr_ensure(m, k, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, fhr_loc_pinned()), "pinned beats pageable");
    cr_assert(resident_has_pattern(m, k, C1(), 7, N));
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* The cost model decides, not a fixed order: a slow peer link loses to pinned. */
Test(peer, a_slow_peer_link_loses_to_pinned)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_link_rates r = {55.5, 0, 10, 0};
    cr_assert_eq(fhr_manager_set_links(m, &r, NULL), FHR_OK);
    fhr_link_rates got;
    fhr_manager_links(m, &got);
    cr_assert_eq(got.peer_gbps, 10);
    cr_assert_eq(got.pageable_gbps, FHR_DEFAULT_PAGEABLE_GBPS);
    fhr_handle h = key_on_c0(m, 8);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, fhr_loc_pinned()));
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(peer, bad_rates_are_refused_and_change_nothing)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_link_rates before, after;
    fhr_manager_links(m, &before);
    cr_assert_eq(before.peer_gbps, FHR_DEFAULT_PEER_GBPS);
    fhr_link_rates bad[] = {{-1, 0, 0, 0}, {0, 0, 1.0 / 0.0, 0}, {0, 0.0 / 0.0, 0, 0}, {0, 0, 0, -3}};
    const char *names[] = {"pinned_gbps", "peer_gbps", "pageable_gbps", "gen_gbps"};
    for (int i = 0; i < 4; i++) {
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(fhr_manager_set_links(m, &bad[i], &e), FHR_E_INVALID);
        cr_assert(strstr(e.message, names[i]), "%s", e.message);
        fhr_manager_links(m, &after);
        cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    }
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* explain predicts the peer copy (bytes and count apart), the report names its source */
Test(peer, explain_and_the_report_show_the_peer_source)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = key_on_c0(m, 14), k = adopt_n(m, N, 15, FHR_REPLICABLE);
    fhr_action acts[] = {{FHR_ACT_ENSURE, h, fhr_loc_cuda(1), 0, {0, 0}, 0},
                         {FHR_ACT_ENSURE, k, fhr_loc_cuda(1), 0, {0, 0}, 0}};
    fhr_plan_desc d = {"two", NULL, 0, acts, 2, NULL, 0, NULL, 0};
    fhr_plan *pl = NULL;
    cr_assert_eq(fhr_plan_create(&d, &pl, NULL), FHR_OK);
    fhr_explanation ex;
    cr_assert_eq(fhr_explain(m, pl, &ex, NULL), FHR_OK);
    cr_assert(ex.feasible, "%s", ex.reason);
    cr_assert_eq(ex.bytes_moved, 2 * N);
    cr_assert_eq(ex.bytes_peer, N, "h from cuda:0, k from the host");
    cr_assert_eq(ex.peer_copies, 1);
    char *js = fhr_explanation_json(&ex);
    cr_assert(strstr(js, "\"bytes_peer\":4096"), "%s", js);
    free(js);
    fhr_report *rep = NULL;
    cr_assert_eq(fhr_execute_actions(m, acts, 2, NULL, 0, &rep, NULL), FHR_OK);
    cr_assert_eq(fhr_report_ntransitions(rep), 2);
    const fhr_transition *t0 = fhr_report_transition(rep, 0), *t1 = fhr_report_transition(rep, 1);
    cr_assert(t0->has_from && fhr_loc_equal(t0->from, C0()));
    cr_assert(t1->has_from && fhr_loc_equal(t1->from, fhr_loc_host()));
    fhr_report_free(rep);
    fhr_plan_destroy(pl);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- a copy still being filled is a source like a complete one --------------------- */

static atomic_int gate_open;
static void wait_gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        usleep(100);
}

/* The source is chosen by the cost model alone, never by whether a copy has finished:
 * the peer copy still in flight is cheaper than pinned, and the copy from it waits for
 * its fill on the stream (one schedule for check and run). */
Test(peer, a_copy_in_flight_is_a_source_by_cost_alone)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, N, 9, FHR_REPLICABLE);
    cr_assert_eq(fhr_ensure(m, h, fhr_loc_pinned(), NULL, NULL), FHR_OK);
    settle(m, h, fhr_loc_pinned());
    fhr_stream *s0;
    cr_assert_eq(fhr_stream_create(b, C0(), &s0, NULL), FHR_OK);
    atomic_store(&gate_open, 0);
    cr_assert_eq(fhr_launch_host(b, s0, wait_gate, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, C0(), s0, NULL), FHR_OK); /* queued behind the gate */
    cr_assert_not(copy_at(m, h, C0()).ready, "the copy into cuda:0 is still in flight");
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    fhr_trace_entry e = last_entry(m);
    cr_assert(fhr_loc_equal(e.from, C0()), "in flight: the source is still cuda:0, not %d:%d",
              e.from.kind, e.from.index);
    atomic_store(&gate_open, 1);
    fhr_stream_sync(b, s0, NULL);
    cr_assert(resident_has_pattern(m, h, C1(), 9, N));
    cr_assert(resident_has_pattern(m, h, C0(), 9, N));
    /* settled: the same choice */
    cr_assert_eq(fhr_drop(m, h, C1(), NULL), FHR_OK);
    settle(m, h, C0());
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, C0()));
    check_accounting(m);
    fhr_stream_destroy(b, s0);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A value with a source whose only device copy is in flight is still copied from it when
 * the cost model says so (the copy waits for the fill on the device: the choice never
 * depends on timing); one whose peer link is slower than a load is loaded. */
Test(peer, a_sourced_value_is_copied_or_loaded_by_cost_alone)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    pat_source ps = {N, 13, 0, 0, 0, 0};
    fhr_handle h = register_pat(m, &ps, FHR_REPLICABLE);
    fhr_stream *s0;
    cr_assert_eq(fhr_stream_create(b, C0(), &s0, NULL), FHR_OK);
    atomic_store(&gate_open, 0);
    cr_assert_eq(fhr_launch_host(b, s0, wait_gate, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, C0(), s0, NULL), FHR_OK);
    cr_assert_eq(ps.loads, 1);
    cr_assert_not(copy_at(m, h, C0()).ready);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, C0()), "in flight: copied from cuda:0 all the same");
    cr_assert_eq(ps.loads, 1);
    cr_assert(copy_at(m, h, C1()).copied);
    atomic_store(&gate_open, 1);
    fhr_stream_sync(b, s0, NULL);
    cr_assert(resident_has_pattern(m, h, C1(), 13, N));
    /* settled, and a fast peer link: copied the same way */
    cr_assert_eq(fhr_drop(m, h, C1(), NULL), FHR_OK);
    settle(m, h, C0());
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, C0()));
    cr_assert_eq(ps.loads, 1);
    /* a peer link slower than a load: loaded */
    fhr_link_rates slow = {0, 0, 5, 0};
    cr_assert_eq(fhr_manager_set_links(m, &slow, NULL), FHR_OK);
    cr_assert_eq(fhr_drop(m, h, C1(), NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert_eq(last_entry(m).kind, FHR_TR_LOAD);
    cr_assert_eq(ps.loads, 2);
    check_accounting(m);
    fhr_stream_destroy(b, s0);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* The only other copy in flight is still used (waited for on the device). */
Test(peer, a_copy_in_flight_is_used_when_it_is_the_only_one)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = adopt_n(m, N, 10, FHR_EXCLUSIVE);
    fhr_stream *s0;
    cr_assert_eq(fhr_stream_create(b, C0(), &s0, NULL), FHR_OK);
    atomic_store(&gate_open, 0);
    cr_assert_eq(fhr_launch_host(b, s0, wait_gate, NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_move(m, h, C0(), NULL, s0, NULL), FHR_OK);
    fhr_location c0 = C0();
    cr_assert_eq(fhr_move(m, h, C1(), &c0, NULL, NULL), FHR_OK);
    atomic_store(&gate_open, 1);
    fhr_stream_sync(b, s0, NULL);
    cr_assert(resident_has_pattern(m, h, C1(), 10, N));
    cr_assert_eq(used_at(m, C0()), 0);
    cr_assert_eq(used_at(m, C1()), N);
    check_accounting(m);
    fhr_stream_destroy(b, s0);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

Test(peer, explicit_from_wins_over_the_cost_model)
{
    fhr_backend *b = emu_backend(2);
    fhr_manager *m = new_manager(b, NULL, 0);
    fhr_handle h = key_on_c0(m, 11);
    fhr_location pin = fhr_loc_pinned();
    cr_assert_eq(fhr_move(m, h, C1(), &pin, NULL, NULL), FHR_OK);
    fhr_trace_entry e = last_entry(m);
    cr_assert_eq(e.kind, FHR_TR_MOVE);
    cr_assert(fhr_loc_equal(e.from, pin));
    cr_assert_not(t_is_resident(m, h, pin), "move took the pinned copy away");
    cr_assert(t_is_resident(m, h, C0()));
    cr_assert(fhr_loc_equal(copy_at(m, h, C1()).source, pin));
    cr_assert(resident_has_pattern(m, h, C1(), 11, N));
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* A peer copy that fails changes nothing; the retry succeeds from the same source. */
Test(peer, a_failing_peer_copy_changes_nothing)
{
    fhr_backend *f = NULL;
    cr_assert_eq(fhr_backend_fault_create(emu_backend(2), &f, NULL), FHR_OK);
    fhr_budget bud[] = {{fhr_loc_cuda(0), 4 * N}, {fhr_loc_cuda(1), 4 * N}};
    fhr_manager *m = new_manager(f, bud, 2);
    fhr_handle h = key_on_c0(m, 12);
    fhr_snapshot *before = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &before, NULL), FHR_OK);
    fhr_backend_fault_arm(f, FHR_FAULT_COPY, 1);
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, &e), FHR_E_BACKEND);
    cr_assert(strstr(e.message, "injected fault"), "%s", e.message);
    fhr_backend_fault_arm(f, FHR_FAULT_COPY, 0);
    cr_assert_not(t_is_resident(m, h, C1()));
    cr_assert_eq(used_at(m, C1()), 0);
    cr_assert_eq(used_at(m, C0()), N);
    fhr_snapshot *after = NULL;
    cr_assert_eq(fhr_snapshot_take(m, &after, NULL), FHR_OK);
    cr_assert_eq(after->state_version, before->state_version);
    for (size_t i = 0; i < before->nlocs; i++) {
        const fhr_loc_stats *a = loc_stats(after, before->locs[i].loc);
        cr_assert_not_null(a);
        cr_assert_eq(a->used_bytes, before->locs[i].used_bytes);
        cr_assert_eq(a->reserved_bytes, before->locs[i].reserved_bytes);
    }
    fhr_snapshot_free(before);
    fhr_snapshot_free(after);
    check_accounting(m);
    cr_assert_eq(fhr_ensure(m, h, C1(), NULL, NULL), FHR_OK);
    cr_assert(fhr_loc_equal(last_entry(m).from, C0()));
    cr_assert(resident_has_pattern(m, h, C1(), 12, N));
    cr_assert_eq(used_at(m, C1()), N);
    check_accounting(m);
    fhr_manager_destroy(m);
    fhr_backend_destroy(f);
}

/* ---- the lookahead policy weighs a restore by its cheapest source ------------------ */

/* cuda:0 holds A and B (room for two), C is wanted. A is needed again sooner than B, so
 * Belady's order would evict B; but A is also on cuda:1, so bringing it back costs a peer
 * copy, 8x cheaper than B's over PCIe: the restore-weighted order evicts A. */
Test(peer, lookahead_evicts_the_copy_the_other_device_can_restore)
{
    fhr_backend *b;
    cr_assert_eq(fhr_backend_model_create(2, &b, NULL), FHR_OK);
    fhr_budget bud = {fhr_loc_cuda(0), 2 * N};
    fhr_manager *m = new_manager(b, &bud, 1);
    fhr_handle k[3];
    for (int i = 0; i < 3; i++) {
        fhr_value *v = NULL;
        cr_assert_eq(fhr_value_create(fhr_loc_pinned(), NULL, &v, NULL), FHR_OK);
        size_t bi;
        cr_assert_eq(fhr_value_alloc_buffer(v, b, N, NULL, &bi, NULL), FHR_OK);
        cr_assert_eq(fhr_value_add_field(v, "key", bi, 0, N, NULL), FHR_OK);
        fhr_adopt_opts o = {FHR_REPLICABLE, NULL, 0};
        cr_assert_eq(fhr_adopt(m, &v, &o, &k[i], NULL), FHR_OK);
    }
    cr_assert_eq(fhr_ensure(m, k[0], C0(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, k[1], C0(), NULL, NULL), FHR_OK);
    cr_assert_eq(fhr_ensure(m, k[0], C1(), NULL, NULL), FHR_OK);
    cr_assert_lt(copy_at(m, k[0], C0()).restore_s, copy_at(m, k[1], C0()).restore_s);
    fhr_location fb[] = {fhr_loc_pinned()};
    fhr_tier_chain chain = {fhr_loc_cuda(0), fb, 1};
    fhr_future_use fut[] = {{1, k[2], fhr_loc_cuda(0), 0}, {3, k[0], fhr_loc_cuda(0), 0},
                            {4, k[1], fhr_loc_cuda(0), 0}};
    fhr_policy *p;
    cr_assert_eq(fhr_policy_lookahead_create(&chain, 1, fut, 3, &p, NULL), FHR_OK);
    fhr_controller *c;
    cr_assert_eq(fhr_controller_create(m, p, &c, NULL), FHR_OK);
    fhr_requirement rq = {k[2], fhr_loc_cuda(0), 0};
    fhr_request req = {"use", &rq, 1, NULL, 0, 1};
    fhr_stream *cs;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &cs, NULL), FHR_OK);
    fhr_stream_map cons = {fhr_loc_cuda(0), cs};
    fhr_use *u = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(fhr_use_begin(c, &req, &cons, 1, NULL, 0, &u, &e), FHR_OK, "%s", e.message);
    cr_assert_not(t_is_resident(m, k[0], C0()), "A (restorable from cuda:1) went");
    cr_assert(t_is_resident(m, k[1], C0()), "B stayed");
    cr_assert(t_is_resident(m, k[0], C1()));
    cr_assert_eq(fhr_use_end(u, FHR_OK, NULL), FHR_OK);
    fhr_use_destroy(u);
    fhr_stream_destroy(b, cs);
    fhr_controller_destroy(c);
    fhr_policy_destroy(p);
    fhr_manager_destroy(m);
    fhr_backend_destroy(b);
}

/* ---- check predicts what a run on emu:2 moves ------------------------------------- */

static rplan_vm_report *vm_run(const rplan_program *p, const char *dev, int explain, int serial)
{
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open(dev, &b, NULL), FHR_OK);
    rplan_vm_opts o = {0};
    o.mode = explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o.scale = 256;
    o.unknown_as_touch = 1;
    o.pinned_gbps = 55.5; /* the same rates on both sides: the same choices */
    o.serial = serial;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s: %s", dev, e.message);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    return r;
}

Test(peer, check_predicts_the_pcie_and_peer_bytes_of_a_run, .timeout = 120)
{
    rplan_program *p = NULL;
    cr_assert_eq(rplan_compile_file("plans/ckks-bootstrap-2gpu.rplan", NULL, &p, NULL), FHR_OK);
    rplan_vm_report *x = vm_run(p, "model:2", 1, 1);
    cr_assert(x->peer_bytes > 0, "the two-GPU plan copies keys between the devices");
    cr_assert(x->pcie_bytes > 0);
    cr_assert_eq(x->peer_bytes, x->total.bytes[FHR_DIR_D2D]);
    rplan_vm_report *r = vm_run(p, "emu:2", 0, 1);
    cr_assert_eq(r->pcie_bytes, x->pcie_bytes, "PCIe: run %llu, check %llu",
                 (unsigned long long)r->pcie_bytes, (unsigned long long)x->pcie_bytes);
    cr_assert_eq(r->peer_bytes, x->peer_bytes, "peer: run %llu, check %llu",
                 (unsigned long long)r->peer_bytes, (unsigned long long)x->peer_bytes);
    cr_assert_eq(r->total.check_failures, 0);
    fprintf(stderr, "peer: two-GPU bootstrap at scale 256: PCIe %llu bytes, peer %llu bytes, "
            "check and emu:2 agree\n", (unsigned long long)r->pcie_bytes,
            (unsigned long long)r->peer_bytes);
    rplan_vm_report_free(x);
    rplan_vm_report_free(r);
    rplan_program_free(p);
}
