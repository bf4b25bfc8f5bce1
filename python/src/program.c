/* python/src/program.c — plans from Python: compile (text or path), check (the dry run's
 * report), run (the VM on a backend, with Python kernels for `run NAME(...)` bodies). */
#include "fhpy.h"

#include <string.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    rplan_program *p;
} fhpy_program;

/* The borrowed values of one kernel call: alive while the kernel runs. */
typedef struct {
    PyObject_HEAD
    fhr_backend *b;
    int alive;
} fhpy_kcall;

PyTypeObject fhpy_kcall_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan._KernelCall",
    .tp_basicsize = sizeof(fhpy_kcall),
    .tp_flags = Py_TPFLAGS_DEFAULT,
};

static int kcall_alive(PyObject *o) { return ((fhpy_kcall *)o)->alive; }
static fhr_backend *kcall_backend(PyObject *o) { return ((fhpy_kcall *)o)->b; }
static const fhpy_owner_ops kcall_ops = {kcall_alive, NULL, kcall_backend};

static void program_dealloc(PyObject *self)
{
    rplan_program_free(((fhpy_program *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *program_disasm(PyObject *self, PyObject *unused)
{
    (void)unused;
    char *s = rplan_disasm_string(((fhpy_program *)self)->p, 0);
    if (!s)
        return PyErr_NoMemory();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

static PyObject *program_values(PyObject *self, PyObject *unused)
{
    (void)unused;
    const rplan_program *p = ((fhpy_program *)self)->p;
    size_t n = rplan_nvalues(p);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        rplan_value_info v;
        rplan_value(p, i, &v);
        PyObject *d = Py_BuildValue("{s:s,s:K,s:i,s:i,s:i}", "name", v.name, "nbytes",
                                    (unsigned long long)v.nbytes, "replica_mode", (int)v.mode,
                                    "recoverability", (int)v.recoverability, "priority",
                                    v.priority);
        if (!d) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

static PyMethodDef program_methods[] = {
    {"disasm", program_disasm, METH_NOARGS, "the disassembly (rplan_disasm_string)"},
    {"values", program_values, METH_NOARGS, "the declared values"},
    {NULL, NULL, 0, NULL}};

PyTypeObject fhpy_program_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.Program",
    .tp_basicsize = sizeof(fhpy_program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled and verified .rplan program (fheplan.compile).",
    .tp_dealloc = program_dealloc,
    .tp_methods = program_methods,
};

static int budget_overrides(PyObject *o, fhr_budget **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!o || o == Py_None)
        return 1;
    if (!PyDict_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "budgets is a dict {location: bytes}");
        return 0;
    }
    fhr_budget *b = PyMem_Calloc((size_t)PyDict_Size(o) + 1, sizeof *b);
    if (!b) {
        PyErr_NoMemory();
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(o, &pos, &k, &v)) {
        if (!fhpy_to_loc(k, &b[*n].loc)) {
            PyMem_Free(b);
            return 0;
        }
        b[*n].nbytes = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyMem_Free(b);
            return 0;
        }
        (*n)++;
    }
    *out = b;
    return 1;
}

/* text_or_path -> a program (a Program passes through, new reference). */
static PyObject *compile_obj(PyObject *src, const char *filename, PyObject *budgets)
{
    if (PyObject_TypeCheck(src, &fhpy_program_type))
        return Py_NewRef(src);
    PyObject *fs = PyOS_FSPath(src);
    if (!fs)
        return NULL;
    if (!PyUnicode_Check(fs)) {
        Py_DECREF(fs);
        PyErr_SetString(PyExc_TypeError, "compile takes plan text or a path (str)");
        return NULL;
    }
    Py_ssize_t len;
    const char *t = PyUnicode_AsUTF8AndSize(fs, &len);
    if (!t) {
        Py_DECREF(fs);
        return NULL;
    }
    /* a path: no newline and an existing file (or a PathLike) */
    int is_path = !PyUnicode_Check(src) || (!memchr(t, '\n', (size_t)len) && len < 4096 &&
                                            access(t, R_OK) == 0);
    fhr_budget *b;
    size_t nb;
    if (!budget_overrides(budgets, &b, &nb)) {
        Py_DECREF(fs);
        return NULL;
    }
    rplan_compile_opts o = {0};
    o.filename = filename ? filename : is_path ? t : "<python>";
    o.budget_override = b;
    o.nbudget_override = nb;
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    fhr_status st = FHR_E_NOMEM;
    if (d) {
        Py_BEGIN_ALLOW_THREADS
        st = is_path ? rplan_compile_file(t, &o, &p, d) : rplan_compile(t, (size_t)len, &o, &p, d);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(b);
    Py_DECREF(fs);
    if (st != FHR_OK) {
        char *text = d ? rplan_diags_render_string(d) : NULL;
        PyObject *diags = PyList_New(0);
        for (size_t i = 0; d && diags && i < rplan_diags_count(d); i++) {
            const rplan_diag *x = rplan_diags_get(d, i);
            PyObject *e = Py_BuildValue(
                "{s:s,s:s,s:I,s:I,s:s,s:s}", "severity",
                x->severity == RPLAN_ERROR ? "error" : x->severity == RPLAN_WARNING ? "warning"
                                                                                   : "note",
                "file", x->file ? x->file : "", "line", x->line, "col", x->col, "message",
                x->message, "rule", x->severity == RPLAN_NOTE ? "" : rplan_rule_of(x->message)->id);
            if (!e || PyList_Append(diags, e) < 0) {
                Py_XDECREF(e);
                Py_CLEAR(diags);
                break;
            }
            Py_DECREF(e);
        }
        rplan_diags_free(d);
        fhpy_raise_msg(st, "%s", text ? text : "compile failed");
        free(text);
        if (diags) {
            fhpy_exc_set_attr("diagnostics", diags);
            Py_DECREF(diags);
        }
        return NULL;
    }
    rplan_diags_free(d);
    fhpy_program *o2 = PyObject_New(fhpy_program, &fhpy_program_type);
    if (!o2) {
        rplan_program_free(p);
        return NULL;
    }
    o2->p = p;
    return (PyObject *)o2;
}

PyObject *fhpy_compile(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None;
    const char *filename = NULL;
    static char *kwl[] = {"text_or_path", "filename", "budgets", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$zO", kwl, &src, &filename, &budgets))
        return NULL;
    return compile_obj(src, filename, budgets);
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* A Python kernel or loader, registered by name (register_all). */
typedef struct py_callable {
    PyObject *fn; /* borrowed: the dict it came from outlives the run */
} py_callable;

static fhr_status kernel_tramp(void *ctx, const rplan_kernel_call *call, fhr_error *err)
{
    py_callable *k = ctx;
    fhr_status st = FHR_OK;
    PyGILState_STATE g = PyGILState_Ensure();
    fhpy_kcall *kc = PyObject_New(fhpy_kcall, &fhpy_kcall_type);
    PyObject *values = kc ? PyList_New((Py_ssize_t)call->nvalues) : NULL, *rargs = NULL;
    fhpy_stream *so = NULL;
    if (kc) {
        kc->b = call->backend;
        kc->alive = 1;
    }
    for (size_t i = 0; values && i < call->nvalues; i++) {
        PyObject *v = fhpy_leased_new((PyObject *)kc, &kcall_ops, call->values[i], NULL);
        if (!v) {
            Py_CLEAR(values);
            break;
        }
        PyList_SET_ITEM(values, (Py_ssize_t)i, v);
    }
    if (values)
        rargs = PyList_New((Py_ssize_t)call->nargs);
    for (size_t i = 0; rargs && i < call->nargs; i++) {
        const rplan_arg *a = &call->args[i];
        PyObject *x = a->kind == RPLAN_ARG_VALUE && a->value < call->nvalues
                          ? Py_NewRef(PyList_GET_ITEM(values, a->value))
                          : PyLong_FromUnsignedLongLong(a->imm);
        if (!x) {
            Py_CLEAR(rargs);
            break;
        }
        PyList_SET_ITEM(rargs, (Py_ssize_t)i, x);
    }
    if (rargs && (so = PyObject_New(fhpy_stream, &fhpy_stream_type))) {
        so->s = call->stream;
        so->b = call->backend;
        so->owner = NULL;
        so->own = 0;
        so->loc = call->loc;
    }
    PyObject *rec = NULL, *res = NULL;
    if (so) {
        PyObject *d = Py_BuildValue("{s:s,s:N,s:O,s:O,s:O,s:O,s:I,s:I}", "name", call->name,
                                    "location", fhpy_loc_new(call->loc), "stream", (PyObject *)so,
                                    "values", values, "args", rargs, "device_memory",
                                    call->device_memory ? Py_True : Py_False, "line", call->line,
                                    "col", call->col);
        rec = fhpy_record("kernel_call", d);
        Py_XDECREF(d);
    }
    if (rec)
        res = PyObject_CallOneArg(k->fn, rec);
    if (!res) {
        char prefix[160];
        snprintf(prefix, sizeof prefix, "kernel '%s' raised", call->name);
        Py_XDECREF(fhpy_take_exception(err, FHR_E_BACKEND, prefix));
        st = FHR_E_BACKEND;
    }
    if (kc)
        kc->alive = 0; /* the lease ends when the kernel returns */
    Py_XDECREF(res);
    Py_XDECREF(rec);
    Py_XDECREF((PyObject *)so);
    Py_XDECREF(rargs);
    Py_XDECREF(values);
    Py_XDECREF((PyObject *)kc);
    PyGILState_Release(g);
    return st;
}

/* ---- loaders: engine.NAME(ARG) values filled from Python ---------------------------------- */

static fhr_status loader_fail(const rplan_load *ld, fhr_error *err, const char *what)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "loader '%.60s' %s", ld->loader, what);
    Py_XDECREF(fhpy_take_exception(err, FHR_E_SOURCE, prefix));
    return FHR_E_SOURCE;
}

/* Calls the Python loader with a record: loader, arg, value (its name), nbytes, location,
 * device_memory, stream (or None) and value: None in a size probe (the loader returns the
 * bytes it has), else the new copy as a mapping of its fields to writable DLPack views,
 * valid during the call only. */
static fhr_status loader_tramp(void *ctx, const rplan_load *ld, fhr_error *err)
{
    py_callable *l = ctx;
    fhr_status st = FHR_OK;
    PyGILState_STATE g = PyGILState_Ensure();
    fhr_value *tmp = NULL; /* the copy's fields, borrowed, as a value the views can read */
    size_t bi;
    fhpy_kcall *kc = PyObject_New(fhpy_kcall, &fhpy_kcall_type);
    PyObject *val = NULL, *so = NULL, *rec = NULL, *res = NULL;
    if (kc) {
        kc->b = ld->vm ? fhr_manager_backend(rplan_vm_manager(ld->vm)) : NULL;
        kc->alive = 1;
    }
    if (kc && ld->fields) {
        int ok = fhr_value_create(ld->loc, NULL, &tmp, NULL) == FHR_OK &&
                 fhr_value_add_buffer(tmp, ld->fields[0], (size_t)ld->nbytes, NULL, NULL, &bi,
                                      NULL) == FHR_OK;
        for (size_t f = 0; ok && f < ld->nfields; f++)
            ok = fhr_value_add_field(tmp, ld->field_names[f], bi,
                                     (size_t)((char *)ld->fields[f] - (char *)ld->fields[0]),
                                     (size_t)ld->field_nbytes[f], NULL) == FHR_OK;
        val = ok ? fhpy_leased_new((PyObject *)kc, &kcall_ops, tmp, NULL) : NULL;
        if (val)
            ((fhpy_leased *)val)->writable = 1; /* the loader fills it */
        if (!ok)
            PyErr_NoMemory();
    } else if (kc) {
        val = Py_NewRef(Py_None);
    }
    if (val && ld->stream) {
        fhpy_stream *x = PyObject_New(fhpy_stream, &fhpy_stream_type);
        if (x) {
            x->s = ld->stream;
            x->b = kc->b;
            x->owner = NULL;
            x->own = 0;
            x->loc = ld->loc;
        }
        so = (PyObject *)x;
    } else if (val) {
        so = Py_NewRef(Py_None);
    }
    if (so) {
        PyObject *d = Py_BuildValue("{s:s,s:K,s:s,s:K,s:N,s:O,s:O,s:O}", "loader", ld->loader,
                                    "arg", (unsigned long long)ld->arg, "value", ld->info->name,
                                    "nbytes", (unsigned long long)ld->nbytes, "location",
                                    fhpy_loc_new(ld->loc), "device_memory",
                                    ld->device_memory ? Py_True : Py_False, "stream", so,
                                    "data", val);
        rec = d ? fhpy_record("load", d) : NULL;
        Py_XDECREF(d);
    }
    if (rec)
        res = PyObject_CallOneArg(l->fn, rec);
    if (!res)
        st = loader_fail(ld, err, ld->fields ? "raised" : "(size probe) raised");
    else if (!ld->fields) {
        unsigned long long n = PyLong_Check(res) ? PyLong_AsUnsignedLongLong(res) : 0;
        if (!PyLong_Check(res) || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "a size probe returns the bytes the engine has (int)");
            st = loader_fail(ld, err, "(size probe)");
        } else
            *ld->supplied = n;
    }
    if (kc)
        kc->alive = 0; /* the copy's views end with the call */
    Py_XDECREF(res);
    Py_XDECREF(rec);
    Py_XDECREF(so);
    Py_XDECREF(val);
    Py_XDECREF((PyObject *)kc);
    fhr_value_destroy(tmp);
    PyGILState_Release(g);
    return st;
}

/* ---- check and run ------------------------------------------------------------------------ */

typedef fhr_status (*register_fn)(rplan_vm *vm, const char *name, py_callable *c,
                                  fhr_error *e);

static fhr_status register_kernel(rplan_vm *vm, const char *name, py_callable *c, fhr_error *e)
{
    return rplan_kernel_register(vm, name, kernel_tramp, c, e);
}

static fhr_status register_loader(rplan_vm *vm, const char *name, py_callable *c, fhr_error *e)
{
    return rplan_loader_register(vm, name, loader_tramp, c, e);
}

/* Registers each callable of dict ({name: callable}, or None), named `what` in errors; the
 * contexts are in *out (PyMem memory, the caller frees it, also after a failure). 0 and an
 * exception when dict is malformed; a registration the VM refuses leaves its status in *st
 * and its error in e. */
static int register_all(rplan_vm *vm, PyObject *dict, const char *what, register_fn reg,
                        py_callable **out, fhr_status *st, fhr_error *e)
{
    *out = NULL;
    if (!dict || dict == Py_None)
        return 1;
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "%s is a dict {name: callable}", what);
        return 0;
    }
    py_callable *cs = PyMem_Calloc((size_t)PyDict_Size(dict) + 1, sizeof *cs);
    if (!cs) {
        PyErr_NoMemory();
        return 0;
    }
    *out = cs;
    Py_ssize_t pos = 0, n = 0;
    PyObject *k, *v;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!name || !PyCallable_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s: {name (str): callable}", what);
            return 0;
        }
        cs[n].fn = v;
        if ((*st = reg(vm, name, &cs[n], e)) != FHR_OK)
            return 1;
        n++;
    }
    return 1;
}

static PyObject *vm_go(PyObject *src, PyObject *budgets, const char *device, PyObject *kernels,
                       PyObject *loaders, int explain, unsigned long long scale, int touch,
                       int policy)
{
    PyObject *prog = compile_obj(src, NULL, Py_None);
    if (!prog)
        return NULL;
    fhr_budget *b;
    size_t nb;
    if (!budget_overrides(budgets, &b, &nb)) {
        Py_DECREF(prog);
        return NULL;
    }
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o.budget_override = b;
    o.nbudget_override = nb;
    o.unknown_as_touch = explain || touch;
    o.scale = scale;
    o.policy_override = policy;
    FHPY_ERR_INIT(e);
    fhr_backend *be = NULL;
    rplan_vm *vm = NULL;
    rplan_vm_report *rep = NULL;
    py_callable *ks = NULL, *ls = NULL;
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_backend_open(explain ? "model:62" : device, &be, &e);
    if (st == FHR_OK)
        st = rplan_vm_create(((fhpy_program *)prog)->p, be, &o, &vm, &e);
    Py_END_ALLOW_THREADS
    if (st == FHR_OK && !register_all(vm, kernels, "kernels", register_kernel, &ks, &st, &e))
        goto out;
    if (st == FHR_OK && !register_all(vm, loaders, "loaders", register_loader, &ls, &st, &e))
        goto out;
    if (st == FHR_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = rplan_vm_run(vm, &rep, &e);
        Py_END_ALLOW_THREADS
    }
    PyObject *r = NULL;
    if (rep) {
        r = fhpy_json(rplan_vm_report_json(rep));
        if (!r)
            goto out;
    }
    if (st != FHR_OK) {
        fhpy_raise(&e);
        if (r) {
            fhpy_exc_set_attr("report", r);
            Py_CLEAR(r);
        }
    }
    rplan_vm_report_free(rep);
    rep = NULL;
    Py_BEGIN_ALLOW_THREADS
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    Py_END_ALLOW_THREADS
    fhr_error_clear(&e);
    PyMem_Free(ks);
    PyMem_Free(ls);
    PyMem_Free(b);
    Py_DECREF(prog);
    return r;
out:
    rplan_vm_report_free(rep);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(be);
    fhr_error_clear(&e);
    PyMem_Free(ks);
    PyMem_Free(ls);
    PyMem_Free(b);
    Py_DECREF(prog);
    return NULL;
}

static int parse_policy(const char *p, int *out)
{
    *out = 0;
    if (!p)
        return 1;
    if (strcmp(p, "tiered_lru") == 0)
        *out = RPLAN_POLICY_TIERED_LRU;
    else if (strcmp(p, "lookahead") == 0)
        *out = RPLAN_POLICY_LOOKAHEAD;
    else {
        fhpy_raise_msg(FHR_E_INVALID, "policy '%s': tiered_lru or lookahead", p);
        return 0;
    }
    return 1;
}

PyObject *fhpy_check(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None;
    const char *policy = NULL;
    static char *kwl[] = {"program", "budgets", "policy", NULL};
    int pol;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$Oz", kwl, &src, &budgets, &policy) ||
        !parse_policy(policy, &pol))
        return NULL;
    return vm_go(src, budgets, NULL, NULL, NULL, 1, 0, 1, pol);
}

PyObject *fhpy_run(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None, *kernels = Py_None, *loaders = Py_None;
    const char *device = NULL, *policy = NULL;
    unsigned long long scale = 0;
    int touch = 0, pol;
    static char *kwl[] = {"program", "device", "kernels", "budgets", "scale",
                          "unknown_as_touch", "policy", "loaders", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$zOOKpzO", kwl, &src, &device, &kernels,
                                     &budgets, &scale, &touch, &policy, &loaders) ||
        !parse_policy(policy, &pol))
        return NULL;
    return vm_go(src, budgets, device, kernels, loaders, 0, scale, touch, pol);
}
