/* python/src/module.c — the `_fheplan` module: its functions, the exception classes and
 * the init, which readies every type. The top of the binding: it may call every file, and
 * no file calls it. */
#include "fhpy.h"

#include <string.h>

static const char *const exc_names[FHR_STATUS_COUNT_] = {
    "ResidencyError", "ResidencyValueError", "ResidencyHandleError", "ResidencyLocationError",
    "ResidencyReplicaError", "ResidencyStateError", "ResidencyPreserveError",
    "ResidencyProtectedError", "ResidencyBudgetError", "ResidencyReentrancyError",
    "ResidencyMemoryError", "ResidencyBackendError", "ResidencySourceError",
    "ResidencyStaleStateError", "ResidencyPlanExecutionError", "ResidencyInfeasibleError",
    "ResidencyLeaseError", "ResidencyScopeError", "ResidencyUnsupportedError"};

/* ---- module ----------------------------------------------------------------------------- */

static PyObject *mod_cuda_location(PyObject *self, PyObject *arg)
{
    (void)self;
    fhr_location loc;
    if (PyLong_Check(arg)) {
        long i = PyLong_AsLong(arg);
        if (i < 0 || i >= FHR_MAX_CUDA_DEVICES)
            return fhpy_raise_msg(FHR_E_LOCATION, "cuda_location(%ld): index out of 0..%d", i,
                                  FHR_MAX_CUDA_DEVICES - 1);
        return fhpy_loc_new(fhr_loc_cuda((int)i));
    }
    if (!fhpy_to_loc(arg, &loc))
        return NULL;
    if (loc.kind != FHR_LOC_CUDA)
        return fhpy_raise_msg(FHR_E_LOCATION, "cuda_location: '%U' is not cuda:N", arg);
    return fhpy_loc_new(loc);
}

static PyObject *mod_drain(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    fhpy_release_drain();
    Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"cuda_location", mod_cuda_location, METH_O,
     "cuda_location(index_or_text, /)\n--\n\nReturns the Location of CUDA device N, given N or"
     " 'cuda:N'. Raises ResidencyLocationError out of 0..61."},
    {"compile", (PyCFunction)(void (*)(void))fhpy_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(text_or_path, *, filename=None, budgets=None)\n--\n\nCompiles and verifies a "
     "plan (rplan_compile, rplan_compile_file, rplan_load_file for .rpb). text_or_path: plan "
     "text, a path-like, or a one-line str naming an existing file or ending in .rplan or "
     ".rpb. Returns a Program. Raises ResidencyValueError (with .diagnostics) on errors, "
     "ResidencyInfeasibleError when the dry run fails."},
    {"check", (PyCFunction)(void (*)(void))fhpy_check, METH_VARARGS | METH_KEYWORDS,
     "check(program, *, budgets=None, policy=None, objective=None)\n--\n\nThe dry run of `fheplan check` (the "
     "model backend, unknown kernels as touch). program: a Program, plan text or a path (as "
     "compile reads it). Returns the report as a dict. Raises ResidencyError subclasses as the"
     " C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"min_budget", (PyCFunction)(void (*)(void))fhpy_min_budget, METH_VARARGS | METH_KEYWORDS,
     "min_budget(program, location, *, budgets=None, policy=None, objective=None)\n--\n\n"
     "The budgets at location under which the plan is feasible, as `fheplan check "
     "--min-budget` searches them (rplan_min_budget): found, threshold, feasible, near, "
     "intervals, probes, exact, reason and the rest (fheplan-python(7) MINIMUM BUDGET). "
     "program: a Program, plan text or a path; budgets' entry at location is ignored. "
     "Returns a record. Raises TypeError or ResidencyValueError for a bad argument, naming "
     "it; ResidencyBackendError when a probe cannot run."},
    {"run", (PyCFunction)(void (*)(void))fhpy_run, METH_VARARGS | METH_KEYWORDS,
     "run(program, *, device=None, kernels=None, budgets=None, scale=None, "
     "unknown_as_touch=False, policy=None, loaders=None, objective=None, prefetch=None)\n--"
     "\n\nRuns a plan as `fheplan run` does (device None: FHEPLAN_DEVICE, else auto; scale "
     "None: automatic on the emulated device; policy, objective and prefetch as --policy, "
     "--objective and --prefetch, prefetch 0 serial). kernels/loaders: {name: callable}, each called with a record (fheplan-python(7)"
     " KERNELS AND LOADERS). Returns the report as a dict. A kernel's or loader's exception is"
     " the __cause__ of the ResidencyError raised; a KeyboardInterrupt or SystemExit (also "
     "Ctrl-C) stops the run and propagates unchanged. Raises ResidencyError subclasses as the "
     "C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"to", (PyCFunction)(void (*)(void))fhpy_to, METH_VARARGS | METH_KEYWORDS,
     "to(value, location, *, stream=None, manager=None)\n--\n\nThe functional copy "
     "(fhr_manager_value_to): returns a new application-owned Value at location. value: a "
     "LeasedValue, a Value, or arrays (with manager=). Raises ResidencyError subclasses as the"
     " C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"_set_types", (PyCFunction)(void (*)(void))fhpy_set_types, METH_VARARGS | METH_KEYWORDS,
     "_set_types(*, meta, ensure, move, drop, discard, reservation)\n--\n\nHands the package's"
     " Python classes to the core. Returns None."},
    {"_c_timing", fhpy_c_timing, METH_VARARGS,
     "_c_timing(manager, op, handle, at, batches, per_batch, /)\n--\n\nReturns the median ns "
     "per C call of op (ensure, acquire, is_resident) timed in C."},
    {"_c_run_timing", fhpy_c_run_timing, METH_VARARGS,
     "_c_run_timing(text, device, runs, kind, /)\n--\n\nThe median ns per run of the plan "
     "run from C: kind 'kept' (one VM run again, as a Runner's), 'json' (the same, each "
     "report made into JSON text) or 'each' (compiled, opened and run afresh, as "
     "fheplan.run). bench/python_overhead.py's reference."},
    {"_drain_releases", mod_drain, METH_NOARGS,
     "_drain_releases()\n--\n\nDrops the producers the library released. Returns None."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fheplan",
                                    "The C core of the fheplan Python binding.", -1,
                                    mod_methods, NULL, NULL, NULL, NULL};


PyMODINIT_FUNC PyInit__fheplan(void)
{
    PyObject *mod = PyModule_Create(&moddef);
    if (!mod)
        return NULL;
    if (fhpy_core_init() < 0)
        goto fail;
    static PyTypeObject *const ts[] = {
        &fhpy_location_type, &fhpy_handle_type, &fhpy_stream_type, &fhpy_manager_type,
        &fhpy_lease_type,    &fhpy_leased_type, &fhpy_view_type,   &fhpy_value_type,
        &fhpy_hold_type,     &fhpy_plan_type,   &fhpy_scope_type,  &fhpy_program_type,
        &fhpy_kcall_type,    &fhpy_runner_type};
    static const char *const names[] = {
        "Location",      "ResidencyHandle", "Stream",         "ResidencyManager", "ResidencyLease",
        "LeasedValue",   "FieldView",       "Value",          "ResidencyHold",    "ResidencyPlan",
        "ResidencyScope", "Program",        "_KernelCall",     "Runner"};
    if (fhpy_add_types(mod, ts, names, sizeof ts / sizeof ts[0]) < 0 ||
        fhpy_add_types_controller(mod) < 0)
        goto fail;
    for (int i = 0; i < FHR_STATUS_COUNT_; i++) {
        char full[96];
        snprintf(full, sizeof full, "fheplan.%s", exc_names[i]);
        PyObject *base = i == 0 ? Py_NewRef(PyExc_Exception)
                         : i == FHR_E_INVALID ? PyTuple_Pack(2, fhpy_exc[0], PyExc_ValueError)
                         : i == FHR_E_NOMEM   ? PyTuple_Pack(2, fhpy_exc[0], PyExc_MemoryError)
                                              : Py_NewRef(fhpy_exc[0]);
        if (!base)
            goto fail;
        fhpy_exc[i] = PyErr_NewException(full, base, NULL);
        Py_DECREF(base);
        if (!fhpy_exc[i])
            goto fail;
        Py_INCREF(fhpy_exc[i]);
        if (PyModule_AddObject(mod, exc_names[i], fhpy_exc[i]) < 0) {
            Py_DECREF(fhpy_exc[i]);
            goto fail;
        }
    }
    if (PyModule_AddObject(mod, "PAGEABLE_HOST", fhpy_loc_new(fhr_loc_host())) < 0 ||
        PyModule_AddObject(mod, "PINNED_HOST", fhpy_loc_new(fhr_loc_pinned())) < 0 ||
        PyModule_AddStringConstant(mod, "__version__", FHEPLAN_VERSION) < 0 ||
        PyModule_AddIntConstant(mod, "REPLICABLE", FHR_REPLICABLE) < 0 ||
        PyModule_AddIntConstant(mod, "EXCLUSIVE", FHR_EXCLUSIVE) < 0 ||
        PyModule_AddIntConstant(mod, "MUST_PRESERVE", FHR_MUST_PRESERVE) < 0 ||
        PyModule_AddIntConstant(mod, "RECONSTRUCTIBLE", FHR_RECONSTRUCTIBLE) < 0 ||
        PyModule_AddIntConstant(mod, "ACT_ENSURE", FHR_ACT_ENSURE) < 0 ||
        PyModule_AddIntConstant(mod, "ACT_MOVE", FHR_ACT_MOVE) < 0 ||
        PyModule_AddIntConstant(mod, "ACT_DROP", FHR_ACT_DROP) < 0 ||
        PyModule_AddIntConstant(mod, "ACT_DISCARD", FHR_ACT_DISCARD) < 0)
        goto fail;
    return mod;
fail:
    Py_DECREF(mod);
    return NULL;
}
