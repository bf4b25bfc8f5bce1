/* tests/unit/test_scale.c — what `fheplan check` costs at scale, held as sizes and counts
 * (never a clock): the manager's record of a value and a concrete value stay small, a
 * plan's values cost a bounded number of heap bytes each, and the records a run reads to
 * decide and report grow with its requests times what they evict, not with its values
 * (bench/scale.sh times the same plans). */
#include "compile_ok.h"
#include "fheplan/vm.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/query.h"
#include "runtime/manager/value.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rplan_program *compile_src(const char *src) { return compile_ok_named(src, "scale.rplan"); }

/* check's run of src (explain mode on the model device), left alive for the caller to read
 * its manager; *rep ok. */
static rplan_vm *explain(const rplan_program *p, fhr_backend **b, int policy)
{
    cr_assert_eq(fhr_backend_open("model:1", b, NULL), FHR_OK);
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_EXPLAIN;
    o.policy_override = policy;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, *b, &o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s", e.message);
    cr_assert(r && r->ok, "%s", r ? r->message : "no report");
    rplan_vm_report_free(r);
    fhr_error_clear(&e);
    return vm;
}

/* A million values must fit in well under a gigabyte: what most values lack (a label,
 * metadata, a source, copies at most of 64 locations) lies out of line. The record was
 * 1.8 KB and a value 640 B, most of it per-location arrays and metadata kept inline. */
Test(scale, value_records_stay_small)
{
    cr_assert_leq(sizeof(val), 160, "the manager's record of a value is %zu bytes", sizeof(val));
    cr_assert_leq(sizeof(mat), 160, "the record of a copy is %zu bytes", sizeof(mat));
    cr_assert_leq(sizeof(struct fhr_value), 128, "a concrete value is %zu bytes",
                  sizeof(struct fhr_value));
}

/* The heap a plan's values take while its run is alive, per value: the compiled program,
 * the VM's tables, the manager's records and copies, the concrete values. Measured from
 * the allocator (0 under a sanitizer's allocator, which keeps its own books). */
Test(scale, a_values_heap_bytes_are_bounded)
{
    enum { N = 50000 };
    char src[128];
    snprintf(src, sizeof src, "rplan 1\nvalue x[%d] = 8 B at host\n", N);
    struct mallinfo2 before = mallinfo2();
    rplan_program *p = compile_src(src);
    fhr_backend *b = NULL;
    rplan_vm *vm = explain(p, &b, 0);
    struct mallinfo2 after = mallinfo2();
    size_t used = after.uordblks > before.uordblks ? after.uordblks - before.uordblks : 0;
    cr_assert_leq(used / N, 800, "%zu heap bytes per value (%zu in all)", used / N, used);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

/* Requests that each evict one copy from a device holding 64 read O(64) records each,
 * under both built-in policies, whatever the number of values: sampling the peaks after
 * a request reads the accounting alone, the snapshot cache reads the values that changed,
 * and each policy walks its victim index at the short location. Reading every value per
 * request (a snapshot per sample, lookahead scanning every value) is V = 20,000 reads a
 * request, some 40 million here. */
Test(scale, records_read_grow_with_requests_not_values)
{
    enum { V = 20000, R = 2000, RESIDENT = 64 };
    char src[512];
    snprintf(src, sizeof src,
             "rplan 1\nbudget cuda:0 %d KiB\nvalue v[%d] = 4 KiB at host init zero\n"
             "policy p = tiered_lru(cuda:0 -> pinned -> host)\n"
             "for i in 0..<%d {\n  request \"r{i}\" using p { require v[(i * 7919) %% %d] @ cuda:0 }\n}\n",
             4 * RESIDENT, V, R, V);
    rplan_program *p = compile_src(src);
    int kinds[2] = {RPLAN_POLICY_TIERED_LRU, RPLAN_POLICY_LOOKAHEAD};
    for (int k = 0; k < 2; k++) {
        fhr_backend *b = NULL;
        rplan_vm *vm = explain(p, &b, kinds[k]);
        uint64_t reads = mgr_records_read(rplan_vm_manager(vm));
        /* a full read of every value per controller (its cache's first refresh), then per
         * request the changed values and the device's copies, twice over for slack */
        uint64_t bound = 2 * (uint64_t)V + 2 * (uint64_t)R * (RESIDENT + 8);
        cr_assert_gt(reads, (uint64_t)R, "policy %d: %llu reads: the count counts nothing", k,
                     (unsigned long long)reads);
        cr_assert_leq(reads, bound, "policy %d: %llu records read for %d requests over %d values "
                      "(at most %llu)", k, (unsigned long long)reads, R, V,
                      (unsigned long long)bound);
        rplan_vm_destroy(vm);
        fhr_backend_destroy(b);
    }
    rplan_program_free(p);
}
