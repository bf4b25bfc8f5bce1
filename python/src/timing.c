/* python/src/timing.c — the C side of bench/python_overhead.py: the same manager calls the
 * binding makes, and the same plan runs, timed in C in the same process, so the binding's
 * cost per call or per run is the difference of two medians taken in one run. */
#include "fhpy.h"

#include <stdlib.h>
#include <string.h>
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

/* One run of p on b as an engine in C makes it: a VM, unknown kernels and loaders as
 * touch, run, report freed, VM destroyed. *gbps: the pinned bandwidth of the report, kept
 * from the first run as Runner.run keeps it (0: measured by the run). */
static fhr_status c_run(const rplan_program *p, fhr_backend *b, double *gbps)
{
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_RUN;
    o.unknown_as_touch = 1;
    o.scale = 1;
    o.pinned_gbps = *gbps;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    fhr_status st = rplan_vm_create(p, b, &o, &vm, NULL);
    if (st == FHR_OK)
        st = rplan_vm_run(vm, &rep, NULL);
    if (st == FHR_OK && *gbps <= 0)
        *gbps = rep->pinned_gbps;
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    return st;
}

/* _c_run_timing(text, device, runs) -> (median ns per run with the program compiled, the
 * backend opened and the bandwidth probed once, median ns per run doing all each time): the same plan
 * run from C, for Runner.run and fheplan.run (scale 1, unknown kernels and loaders as
 * touch). */
PyObject *fhpy_c_run_timing(PyObject *self, PyObject *args)
{
    (void)self;
    const char *text, *device;
    Py_ssize_t len;
    int runs;
    if (!PyArg_ParseTuple(args, "s#si", &text, &len, &device, &runs))
        return NULL;
    if (runs < 1)
        return fhpy_raise_msg(FHR_E_INVALID, "runs must be positive");
    double *t = malloc(2 * (size_t)runs * sizeof *t);
    if (!t)
        return PyErr_NoMemory();
    rplan_program *p = NULL;
    fhr_backend *b = NULL;
    rplan_compile_opts co = {0};
    co.filename = "<timing>";
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = rplan_compile(text, (size_t)len, &co, &p, NULL);
    if (st == FHR_OK)
        st = fhr_backend_open(device, &b, NULL);
    double kept = 0;
    if (st == FHR_OK)
        st = c_run(p, b, &kept); /* the first run measures the bandwidth, as Runner's */
    for (int r = 0; r < runs && st == FHR_OK; r++) { /* persistent */
        uint64_t t0 = now_ns();
        st = c_run(p, b, &kept);
        t[r] = (double)(now_ns() - t0);
    }
    for (int r = 0; r < runs && st == FHR_OK; r++) { /* all again each time */
        uint64_t t0 = now_ns();
        rplan_program *q = NULL;
        fhr_backend *c = NULL;
        st = rplan_compile(text, (size_t)len, &co, &q, NULL);
        if (st == FHR_OK)
            st = fhr_backend_open(device, &c, NULL);
        double each = 0; /* measured by each run, as fheplan.run's */
        if (st == FHR_OK)
            st = c_run(q, c, &each);
        rplan_program_free(q);
        fhr_backend_destroy(c);
        t[runs + r] = (double)(now_ns() - t0);
    }
    fhr_backend_destroy(b);
    rplan_program_free(p);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        free(t);
        return fhpy_raise_msg(st, "the C run failed in the timing loop");
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    qsort(t + runs, (size_t)runs, sizeof *t, cmp_d);
    PyObject *r = Py_BuildValue("(dd)", t[runs / 2], t[runs + runs / 2]);
    free(t);
    return r;
}
