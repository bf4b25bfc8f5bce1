/* tests/unit/test_fault.c — the fault-injecting decorator: the k-th alloc, copy or
 * event_record fails without reaching the inner backend; counters and re-arming. */
#include "fheplan/backend.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

static fhr_backend *faulty_emu(uint64_t cap)
{
    fhr_backend *inner = NULL, *b = NULL;
    cr_assert_eq(fhr_backend_emu_create(1, cap, &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    cr_assert_str_eq(b->ops->name, "fault");
    return b;
}

Test(fault, kth_alloc_fails_and_inner_is_untouched)
{
    fhr_backend *b = faulty_emu(1 << 20);
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 3);
    fhr_error err;
    fhr_error_init(&err);
    void *p[4] = {0};
    fhr_observation o;
    for (int i = 0; i < 4; i++) {
        fhr_status st = b->ops->alloc(b, fhr_loc_cuda(0), 1000, NULL, &p[i], &err);
        if (i == 2) {
            cr_assert_eq(st, FHR_E_BACKEND);
            cr_assert_str_eq(err.message, "injected fault: 3rd alloc");
            cr_assert_null(p[i]);
            b->ops->observe(b, fhr_loc_cuda(0), &o);
            cr_assert_eq(o.pool_used_bytes, 2000, "the injected call reached the inner backend");
        } else {
            cr_assert_eq(st, FHR_OK, "call %d: %s", i + 1, err.message);
        }
    }
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 4);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_COPY), 0);
    for (int i = 0; i < 4; i++)
        b->ops->free(b, fhr_loc_cuda(0), p[i], 1000, NULL);
    b->ops->observe(b, fhr_loc_cuda(0), &o);
    cr_assert_eq(o.pool_used_bytes, 0);
    fhr_backend_destroy(b);
}

Test(fault, rearm_resets_the_counter_and_zero_disarms)
{
    fhr_backend *inner = NULL, *b = NULL;
    cr_assert_eq(fhr_backend_model_create(1, &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    void *p;
    for (int i = 0; i < 5; i++)
        cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 8, NULL, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 5, "counting without arming");
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 1);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 0);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 8, NULL, &p, NULL), FHR_E_BACKEND);
    cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 8, NULL, &p, NULL), FHR_OK);
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(b->ops->alloc(b, fhr_loc_host(), 8, NULL, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 3);
    fhr_backend_destroy(b);
}

Test(fault, copy_and_event_kinds)
{
    fhr_backend *inner = NULL, *b = NULL;
    cr_assert_eq(fhr_backend_model_create(1, &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    fhr_stream *s = NULL;
    fhr_event *e = NULL;
    cr_assert_eq(fhr_stream_create(b, fhr_loc_cuda(0), &s, NULL), FHR_OK);
    cr_assert_eq(b->ops->event_create(b, &e, NULL), FHR_OK);
    fhr_error err;
    fhr_error_init(&err);
    char x[4], y[4];
    fhr_backend_fault_arm(b, FHR_FAULT_COPY, 2);
    fhr_backend_fault_arm(b, FHR_FAULT_EVENT, 1);
    cr_assert_eq(b->ops->copy(b, x, fhr_loc_host(), y, fhr_loc_host(), 4, s, &err), FHR_OK);
    cr_assert_eq(b->ops->copy(b, x, fhr_loc_host(), y, fhr_loc_host(), 4, s, &err),
                 FHR_E_BACKEND);
    cr_assert_str_eq(err.message, "injected fault: 2nd copy");
    cr_assert_eq(b->ops->event_record(b, e, s, &err), FHR_E_BACKEND);
    cr_assert_str_eq(err.message, "injected fault: 1st event_record");
    cr_assert_eq(b->ops->event_record(b, e, s, &err), FHR_OK);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_COPY), 2);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_EVENT), 2);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 0);
    /* everything else passes through */
    cr_assert_eq(b->ops->device_count(b), 1);
    cr_assert_eq(b->ops->event_query(b, e), 1);
    cr_assert_eq(b->ops->stream_id(b, s), inner->ops->stream_id(inner, s));
    b->ops->event_destroy(b, e);
    fhr_stream_destroy(b, s);
    fhr_backend_destroy(b);
}

Test(fault, non_fault_backends_are_ignored)
{
    fhr_backend *m = NULL;
    cr_assert_eq(fhr_backend_model_create(1, &m, NULL), FHR_OK);
    fhr_backend_fault_arm(m, FHR_FAULT_ALLOC, 1);
    void *p;
    cr_assert_eq(m->ops->alloc(m, fhr_loc_host(), 8, NULL, &p, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_count(m, FHR_FAULT_ALLOC), 0);
    cr_assert_eq(fhr_backend_fault_create(NULL, &m, NULL), FHR_E_INVALID);
    fhr_backend_destroy(m);
}

typedef struct sweep_arg {
    fhr_backend *b;
    int failures;
} sweep_arg;

static void *sweep(void *p)
{
    sweep_arg *a = p;
    void *q;
    for (int i = 0; i < 1000; i++)
        if (a->b->ops->alloc(a->b, fhr_loc_host(), 8, NULL, &q, NULL) != FHR_OK)
            a->failures++;
    return NULL;
}

Test(threads_fault, exactly_one_injection_across_threads)
{
    fhr_backend *inner = NULL, *b = NULL;
    cr_assert_eq(fhr_backend_model_create(1, &inner, NULL), FHR_OK);
    cr_assert_eq(fhr_backend_fault_create(inner, &b, NULL), FHR_OK);
    fhr_backend_fault_arm(b, FHR_FAULT_ALLOC, 2500);
    pthread_t t[4];
    sweep_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (sweep_arg){b, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, sweep, &a[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        failures += a[i].failures;
    }
    cr_assert_eq(failures, 1);
    cr_assert_eq(fhr_backend_fault_count(b, FHR_FAULT_ALLOC), 4000);
    fhr_backend_destroy(b);
}
