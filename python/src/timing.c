/* python/src/timing.c — the C side of bench/python_overhead.py: the same manager calls the
 * binding makes, timed in C in the same process, so the binding's cost per call is the
 * difference of two medians taken in one run. */
#include "fhpy.h"

#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* _c_timing(manager, op, handle, at, batches, per_batch) -> median ns per call, where op is
 * "ensure" (of a resident copy), "acquire" (acquire + release + destroy) or "is_resident". */
PyObject *fhpy_c_timing(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *mo;
    const char *op;
    fhpy_handle_arg ha;
    fhr_location at;
    int batches, per;
    if (!PyArg_ParseTuple(args, "O!sO&O&ii", &fhpy_manager_type, &mo, &op, fhpy_handle_conv,
                          &ha, fhpy_to_loc_conv, &at, &batches, &per))
        return NULL;
    fhr_handle h = ha.h;
    if (batches < 1 || per < 1)
        return fhpy_raise_msg(FHR_E_INVALID, "batches and per_batch must be positive");
    int kind = strcmp(op, "ensure") == 0 ? 0 : strcmp(op, "acquire") == 0 ? 1
               : strcmp(op, "is_resident") == 0 ? 2 : -1;
    if (kind < 0)
        return fhpy_raise_msg(FHR_E_INVALID, "op: ensure, acquire or is_resident");
    fhr_manager *m = ((fhpy_manager *)mo)->m;
    double *t = malloc((size_t)batches * sizeof *t);
    if (!t)
        return PyErr_NoMemory();
    fhr_status st = FHR_OK;
    Py_BEGIN_ALLOW_THREADS
    for (int b = 0; b < batches && st == FHR_OK; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < per && st == FHR_OK; i++) {
            if (kind == 0) {
                st = fhr_ensure(m, h, at, NULL, NULL);
            } else if (kind == 1) {
                fhr_lease *l = NULL;
                st = fhr_acquire(m, &h, 1, at, NULL, &l, NULL);
                if (st == FHR_OK) {
                    st = fhr_lease_release(l, NULL);
                    fhr_lease_destroy(l);
                }
            } else {
                int r;
                st = fhr_is_resident(m, h, at, &r, NULL);
            }
        }
        t[b] = (double)(now_ns() - t0) / per;
    }
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        free(t);
        return fhpy_raise_msg(st, "%s failed in the timing loop", op);
    }
    qsort(t, (size_t)batches, sizeof *t, cmp_d);
    double med = t[batches / 2];
    free(t);
    return PyFloat_FromDouble(med);
}
