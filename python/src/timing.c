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

/* A VM over p on b as an engine in C makes it: unknown kernels and loaders as touch, scale
 * 1. 0: none (the caller fails). */
static rplan_vm *c_vm(const rplan_program *p, fhr_backend *b)
{
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_RUN;
    o.unknown_as_touch = 1;
    o.scale = 1;
    rplan_vm *vm = NULL;
    return rplan_vm_create(p, b, &o, &vm, NULL) == FHR_OK ? vm : NULL;
}

/* One run of vm, its report freed. */
static fhr_status c_run(rplan_vm *vm)
{
    rplan_vm_report *rep = NULL;
    fhr_status st = rplan_vm_run(vm, &rep, NULL);
    rplan_vm_report_free(rep);
    return st;
}

/* One VM over p on b run `runs` times after a first run (which probes the bandwidth, as a
 * Runner's); json: each run's report also made into JSON text, as the binding does. */
static fhr_status c_kept(const rplan_program *p, fhr_backend *b, int runs, int json, double *t)
{
    rplan_vm *vm = c_vm(p, b);
    fhr_status st = vm ? c_run(vm) : FHR_E_NOMEM;
    for (int r = 0; r < runs && st == FHR_OK; r++) {
        uint64_t t0 = now_ns();
        rplan_vm_report *rep = NULL;
        st = rplan_vm_run(vm, &rep, NULL);
        if (json)
            free(rplan_vm_report_json(rep));
        rplan_vm_report_free(rep);
        t[r] = (double)(now_ns() - t0);
    }
    rplan_vm_destroy(vm);
    return st;
}

/* Compiles, opens the backend, makes a VM and runs it once, `runs` times (fheplan.run). */
static fhr_status c_each(const char *text, size_t len, const char *device, int runs, double *t)
{
    rplan_compile_opts co = {0};
    co.filename = "<timing>";
    fhr_status st = FHR_OK;
    for (int r = 0; r < runs && st == FHR_OK; r++) {
        uint64_t t0 = now_ns();
        rplan_program *q = NULL;
        fhr_backend *c = NULL;
        rplan_vm *w = NULL;
        st = rplan_compile(text, len, &co, &q, NULL);
        if (st == FHR_OK)
            st = fhr_backend_open(device, &c, NULL);
        if (st == FHR_OK && !(w = c_vm(q, c)))
            st = FHR_E_NOMEM;
        if (st == FHR_OK)
            st = c_run(w); /* measures the bandwidth, as fheplan.run's */
        rplan_vm_destroy(w);
        rplan_program_free(q);
        fhr_backend_destroy(c);
        t[r] = (double)(now_ns() - t0);
    }
    return st;
}

/* _c_run_timing(text, device, runs, kind) -> the median ns per run of the same plan run
 * from C (scale 1, unknown kernels and loaders as touch): kind "kept", one VM run again as
 * a Runner's (the program compiled, the backend opened, the VM made and its bandwidth
 * probed once); "json", the same with each report made into JSON text as the binding
 * does; "each", all of it each run, as fheplan.run. */
PyObject *fhpy_c_run_timing(PyObject *self, PyObject *args)
{
    (void)self;
    const char *text, *device, *kind;
    Py_ssize_t len;
    int runs;
    if (!PyArg_ParseTuple(args, "s#sis", &text, &len, &device, &runs, &kind))
        return NULL;
    if (runs < 1)
        return fhpy_raise_msg(FHR_E_INVALID, "runs must be positive");
    int k = !strcmp(kind, "kept") ? 0 : !strcmp(kind, "json") ? 1 : !strcmp(kind, "each") ? 2 : -1;
    if (k < 0)
        return fhpy_raise_msg(FHR_E_INVALID, "kind must be kept, json or each, not '%.40s'", kind);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t)
        return PyErr_NoMemory();
    rplan_program *p = NULL;
    fhr_backend *b = NULL;
    rplan_compile_opts co = {0};
    co.filename = "<timing>";
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    if (k == 2) {
        st = c_each(text, (size_t)len, device, runs, t);
    } else {
        st = rplan_compile(text, (size_t)len, &co, &p, NULL);
        if (st == FHR_OK)
            st = fhr_backend_open(device, &b, NULL);
        if (st == FHR_OK)
            st = c_kept(p, b, runs, k == 1, t);
        fhr_backend_destroy(b);
        rplan_program_free(p);
    }
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        free(t);
        return fhpy_raise_msg(st, "the C run failed in the timing loop");
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    PyObject *r = PyFloat_FromDouble(t[runs / 2]);
    free(t);
    return r;
}
