/* python/src/program.c — plans from Python: compile (text or path), check (the dry run's
 * report), run (the VM on a backend, with Python kernels for `run NAME(...)` bodies). */
#include "fhpy.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
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
/* A call's memory is the VM's: it cannot be kept past the call (no export_begin). */
static const fhpy_owner_ops kcall_ops = {
    .alive = kcall_alive,
    .backend = kcall_backend,
    .ended = "the kernel call returned: its values and stream are valid during the call only",
};
static const fhpy_owner_ops load_ops = {
    .alive = kcall_alive,
    .backend = kcall_backend,
    .ended = "the load returned: a loader's record (data, stream) is valid during the call "
             "only",
};

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
        PyObject *d = Py_BuildValue("{s:s,s:K,s:i,s:i,s:i,s:I,s:I,s:I,s:I}", "name", v.name,
                                    "nbytes", (unsigned long long)v.nbytes, "replica_mode",
                                    (int)v.mode, "recoverability", (int)v.recoverability,
                                    "priority", v.priority, "limb_q", (unsigned)v.limb_q,
                                    "limb_special", (unsigned)v.limb_special, "limb_parts",
                                    (unsigned)v.limb_parts, "limb_alpha",
                                    (unsigned)v.limb_alpha);
        if (!d) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

static PyObject *opt_loc(int has, fhr_location loc)
{
    return has ? fhpy_loc_new(loc) : Py_NewRef(Py_None);
}

/* The decoded instructions (rplan_instr_get): fields the opcode does not use are 0/None. */
static PyObject *program_instructions(PyObject *self, PyObject *unused)
{
    (void)unused;
    const rplan_program *p = ((fhpy_program *)self)->p;
    size_t n = rplan_ninstrs(p);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        rplan_instr x;
        if (rplan_instr_get(p, i, &x) != FHR_OK) {
            Py_DECREF(l);
            return fhpy_raise_msg(FHR_E_INVALID, "instruction %zu cannot be decoded", i);
        }
        PyObject *d = Py_BuildValue(
            "{s:s,s:I,s:N,s:N,s:z,s:K,s:I,s:I,s:I,s:I}", "op", x.opname, "value",
            (unsigned)x.value, "location", opt_loc(x.has_loc, x.loc), "from_location",
            opt_loc(x.has_from, x.from), "name", x.str, "imm", (unsigned long long)x.imm,
            "count", (unsigned)x.count, "limbs", (unsigned)x.limbs, "line", (unsigned)x.line,
            "col", (unsigned)x.col);
        if (!d) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, d);
    }
    return l;
}

/* value_cut(value, limbs): value i's device copy holding q-limbs 0..limbs-1
 * (rplan_value_cut, rplan_value_cut_field): its bytes and, per declared field, (name,
 * offset, bytes), bytes 0 for a field the copy does not hold. */
static PyObject *program_value_cut(PyObject *self, PyObject *args, PyObject *kw)
{
    const rplan_program *p = ((fhpy_program *)self)->p;
    PyObject *vo, *lo;
    static char *kwl[] = {"value", "limbs", NULL};
    size_t i = 0, nv = rplan_nvalues(p);
    uint32_t limbs;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", kwl, &vo, &lo) ||
        !fhpy_u32(lo, "limbs", &limbs))
        return NULL;
    if (PyUnicode_Check(vo)) {
        const char *name = PyUnicode_AsUTF8(vo);
        rplan_value_info vi;
        for (i = 0; name && i < nv; i++)
            if (rplan_value(p, i, &vi) == FHR_OK && strcmp(vi.name, name) == 0)
                break;
        if (!name)
            return NULL;
        if (i == nv)
            return fhpy_raise_msg(FHR_E_INVALID, "value_cut: no value named '%s'", name);
    } else if (!fhpy_count(vo, "value", nv ? nv - 1 : 0, &i))
        return NULL;
    uint64_t total = 0;
    if (rplan_value_cut(p, i, limbs, &total) != FHR_OK)
        return fhpy_raise_msg(FHR_E_INVALID, "value_cut: value %zu has no cut of %u q-limbs "
                              "(no limbs(...), or fewer q-limbs)", i, limbs);
    PyObject *fields = PyList_New(0);
    const char *fname;
    uint64_t fb, off, nb;
    for (size_t k = 0; fields && rplan_value_field(p, i, k, &fname, &fb) == FHR_OK; k++) {
        PyObject *t = rplan_value_cut_field(p, i, limbs, k, &off, &nb) == FHR_OK
                          ? Py_BuildValue("(sKK)", fname, (unsigned long long)off,
                                          (unsigned long long)nb)
                          : NULL;
        if (!t || PyList_Append(fields, t) < 0)
            Py_CLEAR(fields);
        Py_XDECREF(t);
    }
    return fields ? Py_BuildValue("{s:K,s:N}", "nbytes", (unsigned long long)total, "fields",
                                  fields)
                  : NULL;
}

static PyMethodDef program_methods[] = {
    {"disasm", program_disasm, METH_NOARGS,
     "disasm($self, /)\n--\n\nReturns the program's disassembly (rplan_disasm_string) as a "
     "str."},
    {"values", program_values, METH_NOARGS,
     "values($self, /)\n--\n\nReturns the declared values: a list of dicts (name, nbytes, "
     "replica_mode, recoverability, priority, and limb_q, limb_special, limb_parts, "
     "limb_alpha of limbs(Q, K, P, ALPHA), all 0 without it)."},
    {"instructions", program_instructions, METH_NOARGS,
     "instructions($self, /)\n--\n\nReturns the decoded instructions (rplan_instr_get): a "
     "list of dicts (op, value, location, from_location, name, imm, count, limbs, line, col; "
     "what the opcode does not use is 0 or None). limbs: a require's or ensure's q-limbs, "
     "`level L` + 1 (0: the whole value)."},
    {"value_cut", (PyCFunction)(void (*)(void))program_value_cut, METH_VARARGS | METH_KEYWORDS,
     "value_cut($self, value, limbs)\n--\n\nThe device copy of a limbs(...) value (its index "
     "or name) that holds q-limbs 0..limbs-1 (rplan_value_cut, rplan_value_cut_field; limbs "
     "0: the whole value). Returns a dict: nbytes, and fields, a list of (name, offset, "
     "nbytes) in field order, nbytes 0 where the copy does not hold the field. Raises "
     "ResidencyValueError for an unknown value or a cut it has not."},
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
    return fhpy_budgets(o, "budgets", out, n);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* text_or_path -> a program compiled with the budget overrides b (a Program passes
 * through, new reference). */
static PyObject *compile_with(PyObject *src, const char *filename, const fhr_budget *b,
                              size_t nb)
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
    /* a path, as `fheplan` reads its argument: a PathLike, or one line that names an
     * existing file or ends in .rplan or .rpb (a missing one: "cannot read") */
    int one_line = !memchr(t, '\n', (size_t)len) && len < 4096;
    int is_path = !PyUnicode_Check(src) ||
                  (one_line && (access(t, F_OK) == 0 || ends_with(t, ".rplan") ||
                                ends_with(t, ".rpb")));
    int bytecode = is_path && ends_with(t, ".rpb");
    if (bytecode && nb) {
        Py_DECREF(fs);
        return fhpy_raise_msg(FHR_E_INVALID, "budgets: a .rpb file is compiled already (its "
                                             "budgets are in it); give budgets= to check or "
                                             "run instead");
    }
    /* the library reads the text and the names without the interpreter lock: C copies */
    char *tc = malloc((size_t)len + 1), *fc = filename ? strdup(filename) : NULL;
    if (!tc || (filename && !fc)) {
        free(tc);
        free(fc);
        Py_DECREF(fs);
        return PyErr_NoMemory();
    }
    memcpy(tc, t, (size_t)len + 1);
    Py_DECREF(fs);
    rplan_compile_opts o = {0};
    o.filename = fc ? fc : is_path ? tc : "<python>";
    o.budget_override = b;
    o.nbudget_override = nb;
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = NULL;
    fhr_status st = FHR_E_NOMEM;
    if (d) {
        Py_BEGIN_ALLOW_THREADS
        st = bytecode  ? rplan_load_file(tc, &p, d)
             : is_path ? rplan_compile_file(tc, &o, &p, d)
                       : rplan_compile(tc, (size_t)len, &o, &p, d);
        Py_END_ALLOW_THREADS
    }
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
        free(tc);
        free(fc);
        fhpy_raise_msg(st, "%s", text ? text : "compile failed");
        free(text);
        if (diags) {
            fhpy_exc_set_attr("diagnostics", diags);
            Py_DECREF(diags);
        }
        return NULL;
    }
    rplan_diags_free(d);
    free(tc);
    free(fc);
    fhpy_program *o2 = PyObject_New(fhpy_program, &fhpy_program_type);
    if (!o2) {
        rplan_program_free(p);
        return NULL;
    }
    o2->p = p;
    return (PyObject *)o2;
}

/* text_or_path -> a program, budgets a {location: bytes} dict or None. */
static PyObject *compile_obj(PyObject *src, const char *filename, PyObject *budgets)
{
    if (PyObject_TypeCheck(src, &fhpy_program_type))
        return Py_NewRef(src);
    fhr_budget *b;
    size_t nb;
    if (!budget_overrides(budgets, &b, &nb))
        return NULL;
    PyObject *r = compile_with(src, filename, b, nb);
    free(b);
    return r;
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

/* What the callbacks of one run share (touched under the interpreter lock only). */
typedef struct run_ctx {
    PyObject *exc;          /* the first exception a kernel, loader or signal handler raised */
} run_ctx;

/* A Python kernel or loader, registered by name (register_all). */
typedef struct py_callable {
    PyObject *fn; /* strong: owned for the whole run (core.c, rule 3) */
    run_ctx *rc;
} py_callable;

/* Takes the exception being raised as the run's (the first one is kept: it becomes the
 * __cause__ of the run's error, or is raised unchanged when it is not an Exception). */
static fhr_status callback_failed(run_ctx *rc, fhr_error *err, fhr_status st, const char *prefix)
{
    PyObject *exc = fhpy_take_exception(err, st, prefix);
    if (exc && !rc->exc)
        rc->exc = exc;
    else
        Py_XDECREF(exc);
    return st;
}

/* A callback not called because the run is stopping. */
static fhr_status stopped(fhr_error *err, fhr_status st, const char *what, const char *name)
{
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s '%.60s': the run was interrupted",
                 what, name);
    }
    return st;
}

/* A stream object for a callback: valid while the call is (its `life`). */
static PyObject *call_stream(fhr_stream *s, fhr_backend *b, fhr_location loc, fhpy_kcall *kc,
                             const fhpy_owner_ops *ops)
{
    fhpy_stream *x = PyObject_New(fhpy_stream, &fhpy_stream_type);
    if (x) {
        x->s = s;
        x->b = b;
        x->owner = NULL;
        x->own = 0;
        x->loc = loc;
        x->life = Py_NewRef((PyObject *)kc);
        x->life_ops = ops;
    }
    return (PyObject *)x;
}

static fhr_status kernel_tramp(void *ctx, const rplan_kernel_call *call, fhr_error *err)
{
    py_callable *k = ctx;
    fhr_status st = FHR_OK;
    PyGILState_STATE g = PyGILState_Ensure();
    fhpy_kcall *kc = PyObject_New(fhpy_kcall, &fhpy_kcall_type);
    PyObject *values = kc ? PyList_New((Py_ssize_t)call->nvalues) : NULL, *rargs = NULL;
    PyObject *so = NULL;
    if (kc) {
        kc->b = call->backend;
        kc->alive = 1;
    }
    for (size_t i = 0; values && i < call->nvalues; i++) {
        PyObject *v = fhpy_leased_new((PyObject *)kc, &kcall_ops, call->values[i], NULL, NULL);
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
    if (rargs)
        so = call_stream(call->stream, call->backend, call->loc, kc, &kcall_ops);
    PyObject *rec = NULL, *res = NULL;
    if (so) {
        PyObject *d = Py_BuildValue("{s:s,s:N,s:O,s:O,s:O,s:O,s:I,s:I}", "name", call->name,
                                    "location", fhpy_loc_new(call->loc), "stream", so,
                                    "values", values, "args", rargs, "device_memory",
                                    call->device_memory ? Py_True : Py_False, "line", call->line,
                                    "col", call->col);
        rec = fhpy_record("kernel_call", d);
        Py_XDECREF(d);
    }
    if (rec && k->rc->exc) /* the run is stopping (an interrupt): call nothing more */
        st = stopped(err, FHR_E_BACKEND, "kernel", call->name);
    else if (rec)
        res = PyObject_CallOneArg(k->fn, rec);
    if (!res && st == FHR_OK) {
        char prefix[160];
        snprintf(prefix, sizeof prefix, "kernel '%s' raised", call->name);
        st = callback_failed(k->rc, err, FHR_E_BACKEND, prefix);
    }
    if (kc)
        kc->alive = 0; /* the lease ends when the kernel returns */
    Py_XDECREF(res);
    Py_XDECREF(rec);
    Py_XDECREF(so);
    Py_XDECREF(rargs);
    Py_XDECREF(values);
    Py_XDECREF((PyObject *)kc);
    PyGILState_Release(g);
    return st;
}

/* ---- loaders: engine.NAME(ARG) values filled from Python ---------------------------------- */

static fhr_status loader_fail(run_ctx *rc, const rplan_load *ld, fhr_error *err,
                              const char *what)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "loader '%.60s' %s", ld->loader, what);
    return callback_failed(rc, err, FHR_E_SOURCE, prefix);
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
        val = ok ? fhpy_leased_new((PyObject *)kc, &load_ops, tmp, NULL, NULL) : NULL;
        if (val)
            ((fhpy_leased *)val)->writable = 1; /* the loader fills it */
        if (!ok)
            PyErr_NoMemory();
    } else if (kc) {
        val = Py_NewRef(Py_None);
    }
    if (val && ld->stream) {
        so = call_stream(ld->stream, kc->b, ld->loc, kc, &load_ops);
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
    if (rec && l->rc->exc) /* the run is stopping (an interrupt): call nothing more */
        st = stopped(err, FHR_E_SOURCE, "loader", ld->loader);
    else if (rec)
        res = PyObject_CallOneArg(l->fn, rec);
    if (!res && st == FHR_OK)
        st = loader_fail(l->rc, ld, err, ld->fields ? "raised" : "(size probe) raised");
    else if (res && !ld->fields) {
        uint64_t n = 0;
        if (!fhpy_bytes(res, "a size probe's answer (the bytes the engine has)", &n))
            st = loader_fail(l->rc, ld, err, "(size probe)");
        else
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

/* The callables of one run, each referenced (core.c, rule 3). */
typedef struct callables {
    py_callable *cs;
    size_t n;
} callables;

static void callables_free(callables *c)
{
    for (size_t i = 0; i < c->n; i++)
        Py_XDECREF(c->cs[i].fn);
    PyMem_Free(c->cs);
    c->cs = NULL;
    c->n = 0;
}

/* Registers each callable of dict ({name: callable}, or None), named `what` in errors,
 * taking a reference to each (the dict may change during the run). 0 and an exception
 * when dict is malformed; a registration the VM refuses leaves its status in *st and its
 * error in e. The items are taken once: a callable cannot change them under us. */
static int register_all(rplan_vm *vm, PyObject *dict, const char *what, register_fn reg,
                        run_ctx *rc, callables *out, fhr_status *st, fhr_error *e)
{
    if (!dict || dict == Py_None)
        return 1;
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict {name (str): callable}, not %.80s",
                     what, Py_TYPE(dict)->tp_name);
        return 0;
    }
    PyObject *items = PyDict_Items(dict);
    if (!items)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(items);
    out->cs = PyMem_Calloc((size_t)n + 1, sizeof *out->cs);
    if (!out->cs) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return 0;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; ok && i < n && *st == FHR_OK; i++) {
        PyObject *k = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        const char *name = NULL;
        if (!fhpy_text(k, "a name in kernels/loaders", 0, &name))
            ok = 0;
        else if (!PyCallable_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s['%s'] must be callable, not %.80s", what, name,
                         Py_TYPE(v)->tp_name);
            ok = 0;
        } else {
            py_callable *c = &out->cs[out->n++];
            c->fn = Py_NewRef(v);
            c->rc = rc;
            *st = reg(vm, name, c, e); /* the VM copies the name */
        }
    }
    Py_DECREF(items);
    return ok;
}

/* When this thread's run last looked at pending signals: kept outside the Runner, read
 * without the interpreter lock. */
static _Thread_local uint64_t last_signal_ns;

/* Between instructions: pending signals (Ctrl-C) are looked at every 20 ms; a handler's
 * exception stops the run (it is raised unchanged once the run has stopped). */
static int run_interrupt(void *ctx)
{
    run_ctx *rc = ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now - last_signal_ns < 20000000u)
        return 0;
    last_signal_ns = now;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!rc->exc && PyErr_CheckSignals() < 0)
        rc->exc = fhpy_take_exception(NULL, FHR_E_PLAN, "");
    int stop = rc->exc != NULL;
    PyGILState_Release(g);
    return stop;
}

/* base/units.h (the library's; not a public header): what `fheplan run` reads
 * FHEPLAN_EMU_MEMORY with. */
int fhr_size_parse(const char *s, uint64_t *out, char *why, size_t cap);

/* Automatic scale on the emulated device, as `fheplan run` chooses it: the smallest power
 * of two that brings the sum of all value sizes under FHEPLAN_EMU_MEMORY (256 MiB). */
static uint64_t auto_scale(const rplan_program *p)
{
    uint64_t limit = (uint64_t)256 << 20, total = 0, v;
    const char *env = getenv("FHEPLAN_EMU_MEMORY");
    if (env && fhr_size_parse(env, &v, NULL, 0) == 0 && v > 0) /* run() checked it */
        limit = v;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        rplan_value_info vi;
        if (rplan_value(p, i, &vi) == FHR_OK)
            total += vi.nbytes;
    }
    uint64_t s = 1;
    while (total / s > limit && s < ((uint64_t)1 << 30))
        s *= 2;
    return s;
}

/* After a run that failed: the exception of a kernel, a loader or a signal handler that
 * is not an Exception (KeyboardInterrupt, SystemExit) is raised unchanged; else the run's
 * error is raised with that exception as its __cause__. */
static void raise_run_error(fhr_error *e, run_ctx *rc, PyObject *report)
{
    PyObject *cause = rc->exc;
    rc->exc = NULL;
    if (cause && !PyObject_TypeCheck(cause, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetObject((PyObject *)Py_TYPE(cause), cause);
        Py_DECREF(cause);
        return;
    }
    fhpy_raise(e);
    if (report)
        fhpy_exc_set_attr("report", report);
    if (cause) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        if (v)
            PyException_SetCause(v, cause); /* steals cause */
        else
            Py_DECREF(cause);
        PyErr_Restore(t, v, tb);
    }
}

/* ---- the streams of fheplan.run on CUDA --------------------------------------------------
 * Per device, one body and one transfer stream made at the first run that needs them and
 * kept for the process: the streams a kernel or loader saw stay valid after the run,
 * because PyTorch's caching allocators record events on the streams a tensor was used on
 * when the tensor is freed, at any later time (a stream destroyed under them crashed the
 * process at exit). Each run gives the VM views of them (rplan_vm_body_stream,
 * rplan_vm_transfer_stream); neither the run nor its backend destroys them. Made and read
 * under the interpreter lock. */
static fhr_stream *proc_streams[2][FHR_MAX_CUDA_DEVICES];

/* The CUDA devices the program places values on or budgets (or the overrides do). */
static void devices_used(const rplan_program *p, const fhr_budget *ov, size_t nov,
                         int used[FHR_MAX_CUDA_DEVICES])
{
    memset(used, 0, FHR_MAX_CUDA_DEVICES * sizeof *used);
    fhr_budget bu;
    rplan_value_info vi;
    for (size_t i = 0; i < rplan_nbudgets(p); i++)
        if (rplan_budget(p, i, &bu) == FHR_OK && bu.loc.kind == FHR_LOC_CUDA)
            used[bu.loc.index] = 1;
    for (size_t i = 0; i < nov; i++)
        if (ov[i].loc.kind == FHR_LOC_CUDA)
            used[ov[i].loc.index] = 1;
    for (size_t i = 0; i < rplan_nvalues(p); i++)
        if (rplan_value(p, i, &vi) == FHR_OK && vi.has_initial &&
            vi.initial.kind == FHR_LOC_CUDA)
            used[vi.initial.index] = 1;
}

/* Gives the VM views of the process's streams of each device used; views[] receives them
 * (destroyed after the VM). */
static fhr_status give_streams(rplan_vm *vm, fhr_backend *b, const rplan_program *p,
                               const fhr_budget *ov, size_t nov, fhr_stream **views,
                               size_t *nviews, fhr_error *e)
{
    int used[FHR_MAX_CUDA_DEVICES];
    devices_used(p, ov, nov, used);
    int ndev = b->ops->device_count(b);
    fhr_status st = FHR_OK;
    for (int d = 0; d < ndev && d < FHR_MAX_CUDA_DEVICES && st == FHR_OK; d++) {
        if (!used[d])
            continue;
        fhr_location loc = fhr_loc_cuda(d);
        for (int k = 0; k < 2 && st == FHR_OK; k++) {
            void *native = NULL;
            fhr_stream *view = NULL;
            if (!proc_streams[k][d])
                st = fhr_stream_create(b, loc, &proc_streams[k][d], e);
            if (st == FHR_OK)
                st = fhr_stream_native(b, proc_streams[k][d], &native, NULL, e);
            if (st == FHR_OK)
                st = fhr_stream_wrap(b, loc, native, &view, e);
            if (st == FHR_OK) {
                views[(*nviews)++] = view;
                st = k ? rplan_vm_transfer_stream(vm, loc, view, e)
                       : rplan_vm_body_stream(vm, loc, view, e);
            }
        }
    }
    return st;
}

typedef struct run_args {
    PyObject *budgets, *kernels, *loaders;
    const char *device;
    int explain, touch, policy, objective;
    int has_prefetch;
    size_t prefetch;
    int has_scale;
    uint64_t scale;
} run_args;

/* FHEPLAN_EMU_MEMORY as `fheplan run` refuses it. 0 and ResidencyValueError. */
static int emu_memory_ok(void)
{
    const char *env = getenv("FHEPLAN_EMU_MEMORY");
    char why[160] = "";
    uint64_t v;
    if (!env || (fhr_size_parse(env, &v, why, sizeof why) == 0 && v > 0))
        return 1;
    fhpy_raise_msg(FHR_E_INVALID, "bad FHEPLAN_EMU_MEMORY '%.60s' in the environment: %s", env,
                   why[0] ? why : "it must be above 0");
    return 0;
}

/* What a run needs besides its callables: made once per fheplan.run, once per Runner. */
typedef struct run_setup {
    PyObject *prog;  /* the Program (strong) */
    fhr_budget *b;   /* the budget overrides (calloc: read without the lock) */
    size_t nb;
    rplan_vm_opts o; /* interrupt and interrupt_ctx are set per run */
    fhr_backend *be;
} run_setup;

static void setup_close(run_setup *s)
{
    if (s->be) {
        Py_BEGIN_ALLOW_THREADS
        fhr_backend_destroy(s->be);
        Py_END_ALLOW_THREADS
    }
    free(s->b);
    Py_XDECREF(s->prog);
    memset(s, 0, sizeof *s);
}

/* Compiles src, converts the budgets and opens the backend. 0 and an exception. */
static int setup_open(PyObject *src, const run_args *a, run_setup *s)
{
    memset(s, 0, sizeof *s);
    if (!a->explain && !a->has_scale && !emu_memory_ok())
        return 0;
    if (!(s->prog = compile_obj(src, NULL, Py_None)) ||
        !budget_overrides(a->budgets, &s->b, &s->nb)) {
        setup_close(s);
        return 0;
    }
    rplan_vm_opts *o = &s->o;
    o->mode = a->explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o->budget_override = s->b;
    o->nbudget_override = s->nb;
    o->unknown_as_touch = a->explain || a->touch;
    o->policy_override = a->policy;
    o->objective = a->objective;
    o->prefetch_depth = (unsigned)a->prefetch;
    o->serial = a->has_prefetch && a->prefetch == 0;
    const rplan_program *p = ((fhpy_program *)s->prog)->p;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_backend_open(a->explain ? "model:62" : a->device, &s->be, &e);
    if (st == FHR_OK)
        o->scale = a->has_scale ? a->scale
                   : !a->explain && strcmp(s->be->ops->name, "emu") == 0 ? auto_scale(p) : 1;
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        s->be = NULL;
        fhpy_fail(&e);
        setup_close(s);
        return 0;
    }
    return 1;
}

/* Prefixes the message of the exception being raised with "values['NAME']: " (its type
 * and other attributes stay). */
static void name_the_value(PyObject *name)
{
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyErr_NormalizeException(&et, &ev, &etb);
    PyObject *m = ev ? PyObject_Str(ev) : NULL;
    PyObject *msg = m ? PyUnicode_FromFormat("values['%U']: %U", name, m) : NULL;
    PyObject *args = msg ? PyTuple_Pack(1, msg) : NULL;
    if (args && PyObject_SetAttrString(ev, "args", args) == 0 &&
        PyObject_HasAttrString(ev, "message"))
        PyObject_SetAttrString(ev, "message", msg);
    PyErr_Clear();
    Py_XDECREF(args);
    Py_XDECREF(msg);
    Py_XDECREF(m);
    PyErr_Restore(et, ev, etb);
}

/* Hands each (index, name, location, producer) of adopt (a list, or NULL) to the VM
 * without a copy (fhpy_build_value: each buffer keeps its producer's DLPack tensor until
 * the VM's manager frees it). 0 and an exception naming the value. */
static int adopt_all(rplan_vm *vm, fhr_backend *be, PyObject *adopt)
{
    for (Py_ssize_t i = 0; adopt && i < PyList_GET_SIZE(adopt); i++) {
        PyObject *t = PyList_GET_ITEM(adopt, i);
        Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        PyObject *name = PyTuple_GET_ITEM(t, 1);
        fhr_location at = ((fhpy_location *)PyTuple_GET_ITEM(t, 2))->loc;
        fhr_value *v = NULL;
        PyObject *layout = NULL;
        FHPY_ERR_INIT(e);
        int ok = fhpy_build_value(be, PyTuple_GET_ITEM(t, 3), NULL, at, NULL, &v, &layout);
        Py_XDECREF(layout);
        if (ok && rplan_vm_adopt(vm, (size_t)idx, &v, &e) != FHR_OK) {
            fhpy_fail(&e);
            ok = 0;
        }
        fhr_value_destroy(v); /* NULL once adopted */
        if (!ok) {
            name_the_value(name);
            return 0;
        }
    }
    return 1;
}

/* A VM bound to its callbacks: created over a run_setup, given the streams, callables and
 * adopted values once, then run any number of times (rplan_vm(3): each run starts from the
 * created state). rc is the callbacks' and the interrupt's context, so it lives as long as
 * the VM: fheplan.run's on the C stack, a Runner's in the Runner. */
typedef struct vm_bound {
    rplan_vm *vm;
    run_ctx rc;
    callables ks, ls;
    fhr_stream *views[2 * FHR_MAX_CUDA_DEVICES];
    size_t nviews;
} vm_bound;

/* Destroys the VM, then the stream views and callables it used (it calls them no more). */
static void vm_unbind(vm_bound *vb, fhr_backend *be)
{
    rplan_vm *vm = vb->vm;
    vb->vm = NULL;
    fhr_stream *views[2 * FHR_MAX_CUDA_DEVICES]; /* out of the object, for the unlocked part */
    size_t nviews = vb->nviews;
    memcpy(views, vb->views, nviews * sizeof *views);
    vb->nviews = 0;
    Py_BEGIN_ALLOW_THREADS
    rplan_vm_destroy(vm);
    for (size_t i = 0; i < nviews; i++)
        fhr_stream_destroy(be, views[i]); /* views: the process's streams stay */
    Py_END_ALLOW_THREADS
    callables_free(&vb->ks);
    callables_free(&vb->ls);
    Py_CLEAR(vb->rc.exc);
    fhpy_release_drain();
}

/* Creates vb's VM over s with the callables and adopted values. 0 and the exception (vb
 * then holds no VM). */
static int vm_bind(vm_bound *vb, run_setup *s, PyObject *kernels, PyObject *loaders,
                   PyObject *adopt)
{
    memset(vb, 0, sizeof *vb);
    rplan_vm_opts o = s->o;
    o.interrupt = run_interrupt;
    o.interrupt_ctx = &vb->rc;
    FHPY_ERR_INIT(e);
    const rplan_program *p = ((fhpy_program *)s->prog)->p;
    fhr_backend *be = s->be;
    fhr_status st;
    rplan_vm *vm = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = rplan_vm_create(p, be, &o, &vm, &e);
    Py_END_ALLOW_THREADS
    vb->vm = vm;
    if (st == FHR_OK && fhpy_backend_is_cuda(be))
        st = give_streams(vm, be, p, s->b, s->nb, vb->views, &vb->nviews, &e);
    int ok = st == FHR_OK &&
             register_all(vm, kernels, "kernels", register_kernel, &vb->rc, &vb->ks, &st, &e) &&
             register_all(vm, loaders, "loaders", register_loader, &vb->rc, &vb->ls, &st, &e) &&
             st == FHR_OK && adopt_all(vm, be, adopt);
    if (!ok && st != FHR_OK)
        raise_run_error(&e, &vb->rc, NULL);
    fhr_error_clear(&e);
    if (!ok)
        vm_unbind(vb, be);
    return ok;
}

/* One run of vb's VM: the report, or NULL and the run's exception (the VM stays able to
 * run again either way). */
static PyObject *vm_bound_run(vm_bound *vb)
{
    last_signal_ns = 0;
    Py_CLEAR(vb->rc.exc);
    FHPY_ERR_INIT(e);
    rplan_vm_report *rep = NULL;
    rplan_vm *vm = vb->vm;
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = rplan_vm_run(vm, &rep, &e);
    Py_END_ALLOW_THREADS
    PyObject *r = rep ? fhpy_json(rplan_vm_report_json(rep)) : NULL;
    if (st != FHR_OK && (r || !rep)) {
        raise_run_error(&e, &vb->rc, r);
        Py_CLEAR(r);
    }
    rplan_vm_report_free(rep);
    fhr_error_clear(&e);
    Py_CLEAR(vb->rc.exc);
    fhpy_release_drain();
    return r;
}

static PyObject *vm_go(PyObject *src, const run_args *a)
{
    run_setup s;
    if (!setup_open(src, a, &s))
        return NULL;
    vm_bound vb;
    PyObject *r = NULL;
    if (vm_bind(&vb, &s, a->kernels, a->loaders, NULL)) {
        r = vm_bound_run(&vb);
        vm_unbind(&vb, s.be);
    }
    setup_close(&s);
    fhpy_release_drain();
    return r;
}

/* --policy and --objective of the CLI, by the same names. */
static int parse_policy(const char *p, int *out)
{
    *out = 0;
    if (!p || strcmp(p, "as-written") == 0)
        return 1;
    if (strcmp(p, "tiered_lru") == 0 || strcmp(p, "lru") == 0)
        *out = RPLAN_POLICY_TIERED_LRU;
    else if (strcmp(p, "lookahead") == 0)
        *out = RPLAN_POLICY_LOOKAHEAD;
    else {
        fhpy_raise_msg(FHR_E_INVALID, "policy must be tiered_lru, lookahead or as-written, "
                                      "not '%.60s'", p);
        return 0;
    }
    return 1;
}

static int parse_objective(PyObject *o, int *out)
{
    const char *t = NULL;
    *out = RPLAN_OBJECTIVE_BYTES;
    if (!fhpy_text(o, "objective", 1, &t))
        return 0;
    if (!t || strcmp(t, "bytes") == 0)
        return 1;
    if (strcmp(t, "time") == 0)
        *out = RPLAN_OBJECTIVE_TIME;
    else if (strcmp(t, "auto") == 0)
        *out = RPLAN_OBJECTIVE_AUTO;
    else {
        fhpy_raise_msg(FHR_E_INVALID, "objective must be bytes, time or auto, not '%.60s'", t);
        return 0;
    }
    return 1;
}

PyObject *fhpy_check(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None, *policy = Py_None, *objective = Py_None;
    static char *kwl[] = {"program", "budgets", "policy", "objective", NULL};
    run_args a = {0};
    const char *pol = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOO", kwl, &src, &budgets, &policy,
                                     &objective) ||
        !fhpy_text(policy, "policy", 1, &pol) || !parse_policy(pol, &a.policy) ||
        !parse_objective(objective, &a.objective))
        return NULL;
    a.budgets = budgets;
    a.explain = 1;
    a.touch = 1;
    return vm_go(src, &a);
}

/* The options run() and Runner() share with `fheplan run`, checked into a. */
static int run_options(PyObject *device, PyObject *policy, PyObject *objective,
                       PyObject *prefetch, PyObject *scale, run_args *a)
{
    const char *pol = NULL;
    if (!fhpy_text(device, "device", 1, &a->device) || !fhpy_text(policy, "policy", 1, &pol) ||
        !parse_policy(pol, &a->policy) || !parse_objective(objective, &a->objective))
        return 0;
    if (prefetch != Py_None) {
        if (!fhpy_count(prefetch, "prefetch", 1u << 20, &a->prefetch))
            return 0;
        a->has_prefetch = 1;
    }
    if (scale != Py_None) {
        if (!fhpy_bytes(scale, "scale", &a->scale))
            return 0;
        if (a->scale == 0) {
            fhpy_raise_msg(FHR_E_INVALID, "scale must be in 1..2**64-1 (None: as fheplan run "
                                          "chooses it), not 0");
            return 0;
        }
        a->has_scale = 1;
    }
    return 1;
}

PyObject *fhpy_run(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None, *kernels = Py_None, *loaders = Py_None;
    PyObject *device = Py_None, *policy = Py_None, *scale = Py_None, *objective = Py_None;
    PyObject *prefetch = Py_None;
    int touch = 0;
    static char *kwl[] = {"program", "device", "kernels", "budgets", "scale",
                          "unknown_as_touch", "policy", "loaders", "objective", "prefetch",
                          NULL};
    run_args a = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOpOOOO", kwl, &src, &device, &kernels,
                                     &budgets, &scale, &touch, &policy, &loaders, &objective,
                                     &prefetch) ||
        !run_options(device, policy, objective, prefetch, scale, &a))
        return NULL;
    a.budgets = budgets;
    a.kernels = kernels;
    a.loaders = loaders;
    a.touch = touch;
    return vm_go(src, &a);
}

/* ---- min_budget: rplan_min_budget, as `fheplan check --min-budget` searches ------------- */

#define MIN_BUDGET_CEIL ((uint64_t)1 << 44) /* 16 TiB stands for "unbounded", as the CLI's */

/* A compile that the verifier refused (ResidencyInfeasibleError): its first error as the
 * reason of a search that found nothing, as the CLI reports it. 1 and the exception
 * cleared; 0 and the exception left for any other failure. */
static int refused_reason(char *reason, size_t cap)
{
    if (!PyErr_ExceptionMatches(fhpy_exc[FHR_E_INFEASIBLE]))
        return 0;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *diags = v ? PyObject_GetAttrString(v, "diagnostics") : NULL;
    PyErr_Clear();
    snprintf(reason, cap, "the plan is refused");
    for (Py_ssize_t i = 0; diags && PyList_Check(diags) && i < PyList_GET_SIZE(diags); i++) {
        PyObject *d = PyList_GET_ITEM(diags, i);
        PyObject *sev = PyDict_GetItemString(d, "severity");
        PyObject *msg = PyDict_GetItemString(d, "message");
        const char *s = sev ? PyUnicode_AsUTF8(sev) : NULL, *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
        if (s && m && strcmp(s, "error") == 0) {
            snprintf(reason, cap, "%s", m);
            break;
        }
    }
    PyErr_Clear();
    Py_XDECREF(diags);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    return 1;
}

/* The result as a record (fheplan-python(7) MINIMUM BUDGET). */
static PyObject *min_budget_record(fhr_location loc, const rplan_min_budget_result *r)
{
    PyObject *iv = PyList_New((Py_ssize_t)r->nint);
    for (size_t i = 0; iv && i < r->nint; i++) {
        PyObject *x = r->iv[i].to == UINT64_MAX
                          ? Py_BuildValue("(KO)", (unsigned long long)r->iv[i].from, Py_None)
                          : Py_BuildValue("(KK)", (unsigned long long)r->iv[i].from,
                                          (unsigned long long)r->iv[i].to);
        if (!x)
            Py_CLEAR(iv);
        else
            PyList_SET_ITEM(iv, (Py_ssize_t)i, x);
    }
    if (!iv)
        return NULL;
    PyObject *d = Py_BuildValue(
        "{s:N,s:O,s:O,s:O,s:O,s:K,s:K,s:K,s:K,s:n,s:N,s:n,s:d,s:d,s:d,s:d,s:s}",
        "location", fhpy_loc_new(loc), "found", r->found ? Py_True : Py_False, "unused",
        r->unused ? Py_True : Py_False, "exact", r->exact ? Py_True : Py_False, "monotonic",
        r->nint_all == 1 ? Py_True : Py_False, "threshold", (unsigned long long)r->threshold,
        "feasible", (unsigned long long)r->feasible, "near", (unsigned long long)r->near,
        "peak", (unsigned long long)r->peak, "probes", (Py_ssize_t)r->probes, "intervals",
        iv, "intervals_found", (Py_ssize_t)r->nint_all, "unbounded_s", r->unbounded_s,
        "threshold_s", r->threshold_s, "feasible_s", r->feasible_s, "near_s", r->near_s,
        "reason", r->reason);
    PyObject *rec = fhpy_record("min_budget", d);
    Py_XDECREF(d);
    return rec;
}

/* Compiles src as the CLI does for the search: the overrides b but the one at loc, and loc
 * unbounded, so that a plan its own budget at loc rejects gets its answer too (a Program
 * is searched as it was compiled). NULL with r->reason set and no exception when the
 * verifier refuses it at every budget at loc. */
static PyObject *min_budget_program(PyObject *src, fhr_location loc, const fhr_budget *b,
                                    size_t nb, rplan_min_budget_result *r)
{
    if (PyObject_TypeCheck(src, &fhpy_program_type))
        return Py_NewRef(src);
    fhr_budget *all = calloc(nb + 1, sizeof *all);
    if (!all)
        return PyErr_NoMemory();
    size_t n = 0;
    for (size_t i = 0; i < nb; i++)
        if (!fhr_loc_equal(b[i].loc, loc))
            all[n++] = b[i];
    all[n++] = (fhr_budget){loc, MIN_BUDGET_CEIL};
    PyObject *prog = compile_with(src, NULL, all, n);
    free(all);
    if (!prog)
        refused_reason(r->reason, sizeof r->reason);
    return prog;
}

PyObject *fhpy_min_budget(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *src, *budgets = Py_None, *policy = Py_None, *objective = Py_None;
    fhr_location loc;
    static char *kwl[] = {"program", "location", "budgets", "policy", "objective", NULL};
    int pol = 0, obj = 0;
    const char *pt = NULL;
    fhr_budget *b = NULL;
    size_t nb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&|$OOO", kwl, &src, fhpy_loc_conv_location,
                                     &loc, &budgets, &policy, &objective) ||
        !fhpy_text(policy, "policy", 1, &pt) || !parse_policy(pt, &pol) ||
        !parse_objective(objective, &obj) || !budget_overrides(budgets, &b, &nb))
        return NULL;
    rplan_min_budget_result *r = calloc(1, sizeof *r); /* filled without the lock */
    PyObject *prog = r ? min_budget_program(src, loc, b, nb, r) : PyErr_NoMemory();
    PyObject *out = NULL;
    if (!prog) {
        if (r && !PyErr_Occurred())
            out = min_budget_record(loc, r); /* refused at every budget: found False */
        free(r);
        free(b);
        return out;
    }
    /* the explain run's overrides: all but loc's (the search sets it) */
    size_t n = 0;
    for (size_t i = 0; i < nb; i++)
        if (!fhr_loc_equal(b[i].loc, loc))
            b[n++] = b[i];
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_EXPLAIN;
    o.budget_override = b;
    o.nbudget_override = n;
    o.unknown_as_touch = 1;
    o.policy_override = pol;
    o.objective = obj;
    FHPY_ERR_INIT(e);
    fhr_status st;
    const rplan_program *p = ((fhpy_program *)prog)->p;
    Py_BEGIN_ALLOW_THREADS
    st = rplan_min_budget(p, loc, &o, r, &e);
    Py_END_ALLOW_THREADS
    out = st == FHR_OK ? min_budget_record(loc, r) : fhpy_fail(&e);
    fhr_error_clear(&e);
    free(r);
    free(b);
    Py_DECREF(prog);
    return out;
}

/* ---- Runner: compile, verify, open the backend and make the VM once; run it many times --
 * The first run() creates the VM over the kept program and backend, registers the kept
 * kernels and loaders and adopts the kept producers' memory without a copy; every run()
 * runs that VM again (each run starts from the program's initial state, rplan_vm(3)): the
 * loaders' size probe and the pinned bandwidth probe happen once. A run that fails leaves
 * the VM able to run again; one whose VM could not be made leaves none (the next run tries
 * again). Ownership (core.c): the Runner holds the program, the backend, each callable and
 * each producer for its whole life; its VM holds a DLPack tensor of each producer (its own
 * reference) until close() or the Runner's end destroys the VM (the VM keeps adopted
 * buffers across runs, even where a run moves the value off them). */
typedef struct {
    PyObject_HEAD
    run_setup s;
    PyObject *kernels, *loaders; /* dicts (copies), or None */
    PyObject *adopt;             /* list of (index, name, Location, producer) */
    int running;
    int closed;
    vm_bound vb;                 /* vb.vm NULL until the first run made it */
} fhpy_runner;

/* Releases the VM, the backend and every reference (close(), the collector, the end). */
static void runner_release(fhpy_runner *r)
{
    if (r->vb.vm)
        vm_unbind(&r->vb, r->s.be);
    setup_close(&r->s);
    Py_CLEAR(r->kernels);
    Py_CLEAR(r->loaders);
    Py_CLEAR(r->adopt);
}

static int runner_traverse(PyObject *self, visitproc visit, void *arg)
{
    fhpy_runner *r = (fhpy_runner *)self;
    Py_VISIT(r->s.prog);
    Py_VISIT(r->kernels);
    Py_VISIT(r->loaders);
    Py_VISIT(r->adopt);
    Py_VISIT(r->vb.rc.exc);
    for (size_t i = 0; i < r->vb.ks.n; i++) /* the VM's own references to the callables */
        Py_VISIT(r->vb.ks.cs[i].fn);
    for (size_t i = 0; i < r->vb.ls.n; i++)
        Py_VISIT(r->vb.ls.cs[i].fn);
    return 0;
}

/* A cycle through the Runner (a kernel that refers to it) is broken here; a running
 * Runner is reachable from its caller, so the collector never clears one. */
static int runner_clear(PyObject *self)
{
    fhpy_runner *r = (fhpy_runner *)self;
    if (!r->running) {
        runner_release(r);
        r->closed = 1;
    }
    return 0;
}

static void runner_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    runner_release((fhpy_runner *)self);
    Py_TYPE(self)->tp_free(self);
    fhpy_release_drain();
}

/* A {name: callable} dict (copied: later changes to the caller's do not reach the runs). */
static int callables_arg(PyObject *o, const char *what, PyObject **out)
{
    if (o == Py_None) {
        *out = Py_NewRef(Py_None);
        return 1;
    }
    if (!PyDict_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict {name (str): callable}, not %.80s",
                     what, Py_TYPE(o)->tp_name);
        return 0;
    }
    return (*out = PyDict_Copy(o)) != NULL;
}

/* The program's value `name`: an `at LOC` value the VM can adopt. -1 and an exception. */
static Py_ssize_t adoptable(const rplan_program *p, const char *name, fhr_location *at,
                            uint64_t *nbytes)
{
    rplan_value_info vi;
    for (size_t i = 0; i < rplan_nvalues(p); i++) {
        if (rplan_value(p, i, &vi) != FHR_OK || strcmp(vi.name, name) != 0)
            continue;
        if (vi.recoverability != FHR_MUST_PRESERVE || vi.seeded) {
            fhpy_raise_msg(FHR_E_INVALID, "values['%s']: the value declared at line %u is %s",
                           name, vi.line, vi.seeded ? "seeded: the run lays out its halves itself"
                                                    : "a source: give its loader instead");
            return -1;
        }
        *at = vi.has_initial ? vi.initial : fhr_loc_host();
        *nbytes = vi.nbytes;
        return (Py_ssize_t)i;
    }
    fhpy_raise_msg(FHR_E_INVALID, "values['%s']: the plan declares no value of that name", name);
    return -1;
}

/* values {name: DLPack producer (or a mapping of fields, or an object with .fields)}:
 * each checked now (its location, device, layout and size, by importing it once) and kept. */
static int adopt_arg(fhpy_runner *r, PyObject *values)
{
    if (!(r->adopt = PyList_New(0)))
        return 0;
    if (values == Py_None)
        return 1;
    if (!PyDict_Check(values)) {
        PyErr_Format(PyExc_TypeError, "values must be a dict {value name (str): array}, not "
                                      "%.80s", Py_TYPE(values)->tp_name);
        return 0;
    }
    const rplan_program *p = ((fhpy_program *)r->s.prog)->p;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(values, &pos, &k, &v)) {
        const char *name;
        fhr_location at;
        uint64_t nbytes;
        Py_ssize_t i;
        if (!fhpy_text(k, "a name in values", 0, &name) ||
            (i = adoptable(p, name, &at, &nbytes)) < 0)
            return 0;
        fhr_value *trial = NULL;
        PyObject *layout = NULL;
        int ok = fhpy_build_value(r->s.be, v, NULL, at, NULL, &trial, &layout);
        uint64_t has = ok ? fhr_value_storage_nbytes(trial) : 0;
        fhr_value_destroy(trial);
        Py_XDECREF(layout);
        fhpy_release_drain();
        if (!ok) {
            name_the_value(k);
            return 0;
        }
        if (r->s.o.scale <= 1 && has != nbytes) {
            fhpy_raise_msg(FHR_E_INVALID, "values['%s']: the plan declares %llu bytes, the "
                           "array holds %llu", name, (unsigned long long)nbytes,
                           (unsigned long long)has);
            return 0;
        }
        PyObject *t = Py_BuildValue("(nONO)", i, k, fhpy_loc_new(at), v);
        if (!t || PyList_Append(r->adopt, t) < 0) {
            Py_XDECREF(t);
            return 0;
        }
        Py_DECREF(t);
    }
    return 1;
}

static PyObject *runner_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *src, *budgets = Py_None, *kernels = Py_None, *loaders = Py_None;
    PyObject *device = Py_None, *policy = Py_None, *scale = Py_None, *objective = Py_None;
    PyObject *prefetch = Py_None, *values = Py_None;
    int touch = 0;
    static char *kwl[] = {"program", "values", "device", "kernels", "budgets", "scale",
                          "unknown_as_touch", "policy", "loaders", "objective", "prefetch",
                          NULL};
    run_args a = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOOpOOOO", kwl, &src, &values, &device,
                                     &kernels, &budgets, &scale, &touch, &policy, &loaders,
                                     &objective, &prefetch) ||
        !run_options(device, policy, objective, prefetch, scale, &a))
        return NULL;
    a.budgets = budgets;
    a.touch = touch;
    fhpy_runner *r = (fhpy_runner *)type->tp_alloc(type, 0);
    if (!r)
        return NULL;
    if (!callables_arg(kernels, "kernels", &r->kernels) ||
        !callables_arg(loaders, "loaders", &r->loaders) || !setup_open(src, &a, &r->s) ||
        !adopt_arg(r, values)) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static PyObject *runner_run(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_runner *r = (fhpy_runner *)self;
    if (r->running) /* a kernel or loader calling run() again, or another thread */
        return fhpy_raise_msg(FHR_E_REENTRANT, "Runner.run: this runner is running already "
                                               "(called from one of its kernels or loaders, "
                                               "or from another thread?)");
    if (r->closed)
        return fhpy_raise_msg(FHR_E_STATE, "Runner.run: the runner is closed");
    r->running = 1;
    PyObject *rep = NULL;
    if (r->vb.vm || vm_bind(&r->vb, &r->s, r->kernels, r->loaders, r->adopt))
        rep = vm_bound_run(&r->vb);
    r->running = 0;
    return rep;
}

static PyObject *runner_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_runner *r = (fhpy_runner *)self;
    if (r->running)
        return fhpy_raise_msg(FHR_E_REENTRANT, "Runner.close: this runner is running (called "
                                               "from one of its kernels or loaders, or from "
                                               "another thread?)");
    runner_release(r);
    r->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *runner_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (((fhpy_runner *)self)->closed)
        return fhpy_raise_msg(FHR_E_STATE, "Runner: the runner is closed");
    return Py_NewRef(self);
}

static PyObject *runner_exit(PyObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = runner_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *runner_get_program(PyObject *self, void *c)
{
    (void)c;
    PyObject *prog = ((fhpy_runner *)self)->s.prog;
    return prog ? Py_NewRef(prog) : fhpy_raise_msg(FHR_E_STATE, "Runner: the runner is closed");
}

static PyObject *runner_get_values(PyObject *self, void *c)
{
    (void)c;
    PyObject *d = PyDict_New();
    PyObject *l = ((fhpy_runner *)self)->adopt; /* NULL once closed: none */
    for (Py_ssize_t i = 0; d && l && i < PyList_GET_SIZE(l); i++) {
        PyObject *t = PyList_GET_ITEM(l, i);
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 3)) < 0)
            Py_CLEAR(d);
    }
    return d;
}

static PyMethodDef runner_methods[] = {
    {"run", runner_run, METH_NOARGS,
     "run($self, /)\n--\n\nRuns the plan once more on the Runner's VM (made by the first "
     "run, with the kept kernels, loaders and adopted values; each run starts from the "
     "program's initial state). Returns the report as a dict; raises as fheplan.run does, "
     "and a failed run leaves the Runner able to run again."},
    {"close", runner_close, METH_NOARGS,
     "close($self, /)\n--\n\nReleases the VM, its adopted values and the backend; run() "
     "raises afterwards. Idempotent; the Runner's end does the same. Returns None."},
    {"__enter__", runner_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", runner_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nCloses the Runner. "
     "Returns False: exceptions propagate."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef runner_getset[] = {
    {"program", runner_get_program, NULL, "the compiled Program", NULL},
    {"values", runner_get_values, NULL, "the adopted producers, {value name: producer}", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_runner_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.Runner",
    .tp_basicsize = sizeof(fhpy_runner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Runner(program, *, values=None, device=None, kernels=None, budgets=None, "
              "scale=None, unknown_as_touch=False, policy=None, loaders=None, objective=None, "
              "prefetch=None)\n--\n\nA plan compiled, verified and bound to its backend, "
              "kernels, loaders and adopted values once, run by run() many times "
              "(fheplan-python(7) RUNNER). values: {name: DLPack producer} for `at LOC` "
              "values, read in place (no copy).",
    .tp_dealloc = runner_dealloc,
    .tp_traverse = runner_traverse,
    .tp_clear = runner_clear,
    .tp_methods = runner_methods,
    .tp_getset = runner_getset,
    .tp_new = runner_new,
};
