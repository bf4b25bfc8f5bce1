/* python/src/core.c — what every other file of the extension stands on: the ownership rule,
 * the one liveness check, the exceptions of fhr_error, the argument converters, locations
 * and handles, JSON and records, and the holds of exported views. It calls no other file of
 * python/src/ (tests/tools/pylayers.sh proves it, and the order of the files above it:
 * core, stream, value, lease plan program, manager, controller timing, module).
 *
 * OWNERSHIP (the one rule; fheplan-python(7) says the same to users)
 *
 *  1. Every Python object that exposes memory holds a strong reference to the object whose
 *     lifetime keeps that memory valid, its *owner*:
 *       LeasedValue (lease[h], a scope's or use's values)  -> the ResidencyLease or use
 *       LeasedValue (fheplan.to's Value)                   -> the Value
 *       LeasedValue (a kernel call's values, a loader's record.data)
 *                                                          -> the call (_KernelCall)
 *       FieldView                                          -> its LeasedValue
 *       Stream handed to a kernel or loader                -> the call
 *       an exported DLPack tensor                          -> its FieldView, and a hold
 *     The owner answers one question, ops->alive(owner), and every accessor of such an
 *     object (len, keys, items, [], nbytes, ptr, repr, __dlpack__, __dlpack_device__, the
 *     array interfaces, a stream's ptr) goes through fhpy_alive() first: a view whose owner
 *     ended raises ResidencyLeaseError and never reads freed memory.
 *  2. An exported DLPack tensor of a managed copy keeps that copy: the export takes a hold
 *     (fhr_hold_acquire) on the (handle, location) it reads, released by the consumer's
 *     deleter (when NumPy, PyTorch or CuPy let the array go). Releasing the lease while
 *     exports live leaves the copy protected; a drop, move or discard that would remove it
 *     says how many exported views protect it. A Value keeps its memory while exports of
 *     it live (adopt refuses it until they end). A kernel call's and a loader's memory is
 *     the VM's: what is exported from it is valid during the call only (it cannot be held
 *     past the run), as the man page says.
 *  3. Callables (kernels, loaders, sources) and stream objects given by the caller are
 *     referenced (Py_INCREF) for as long as the library may call or use them: a run, a
 *     lease, a scope, a registered source.
 *  4. No Python object is touched without the interpreter lock. Code that lets the lock go
 *     (Py_BEGIN_ALLOW_THREADS) touches only C state that no other thread can change
 *     meanwhile; state another thread may change under the lock (a lease's list of
 *     consumer stream views) is taken out under the lock before it is let go.
 *  5. A lease that is read without the lock (fheplan.to; an export taking its hold; an
 *     export made inside a source load, where no hold can be taken, for its whole life)
 *     is pinned: its release lets no new read start at once, and the library's release
 *     happens when the last pin ends. fheplan.to makes no call on the manager (a source
 *     load may copy); an owner that cannot be pinned (a use, a call) is read with the
 *     lock held.
 */
#include "fhpy.h"

#include <stdarg.h>
#include <string.h>

PyObject *fhpy_exc[FHR_STATUS_COUNT_];
static PyObject *json_loads, *namespace_type;

/* ---- errors ------------------------------------------------------------------------- */



static int set_attr(PyObject *o, const char *name, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyObject_SetAttrString(o, name, v);
    Py_DECREF(v);
    return r;
}

PyObject *fhpy_error_object(const fhr_error *err)
{
    fhr_status st = err->status > 0 && err->status < FHR_STATUS_COUNT_ ? err->status : 0;
    PyObject *exc = PyObject_CallFunction(fhpy_exc[st], "s", err->message);
    if (!exc)
        return NULL;
    int bad = set_attr(exc, "status", PyUnicode_FromString(fhr_status_name(err->status))) ||
              set_attr(exc, "message", PyUnicode_FromString(err->message));
    if (!bad && err->phase != FHR_PHASE_NONE)
        bad = set_attr(exc, "phase", PyUnicode_FromString(fhr_phase_name(err->phase)));
    else if (!bad)
        bad = PyObject_SetAttrString(exc, "phase", Py_None);
    if (!bad)
        bad = set_attr(exc, "action_index", PyLong_FromLong(err->action_index)) ||
              set_attr(exc, "cause", PyUnicode_FromString(fhr_status_name(err->cause))) ||
              set_attr(exc, "bytes_short", PyLong_FromUnsignedLongLong(err->bytes_short)) ||
              set_attr(exc, "handle", err->handle.serial ? fhpy_handle_new(err->handle)
                                                         : Py_NewRef(Py_None)) ||
              set_attr(exc, "location", err->loc.kind != FHR_LOC_INVALID
                                            ? fhpy_loc_new(err->loc) : Py_NewRef(Py_None)) ||
              set_attr(exc, "partial_report", fhpy_report(err->partial_report)) ||
              PyObject_SetAttrString(exc, "action", Py_None);
    if (bad) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

PyObject *fhpy_raise(const fhr_error *err)
{
    PyObject *exc = fhpy_error_object(err);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *fhpy_fail(fhr_error *err)
{
    fhpy_raise(err);
    fhr_error_clear(err);
    return NULL;
}

void fhpy_exc_set_attr(const char *name, PyObject *value)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (v && PyObject_SetAttrString(v, name, value) < 0)
        PyErr_Clear(); /* the pending exception stays the one raised */
    PyErr_Restore(t, v, tb);
}

PyObject *fhpy_take_exception(fhr_error *err, fhr_status st, const char *prefix)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *msg = v ? PyObject_Str(v) : NULL;
    const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
    if (err) {
        err->status = st;
        snprintf(err->message, sizeof err->message, "%s %s: %s", prefix,
                 t ? ((PyTypeObject *)t)->tp_name : "an error", text ? text : "");
    }
    PyErr_Clear(); /* what str() may have raised */
    Py_XDECREF(msg);
    if (v && tb)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
}

PyObject *fhpy_raise_msg(fhr_status st, const char *fmt, ...)
{
    fhr_error e;
    fhr_error_init(&e);
    e.status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return fhpy_raise(&e);
}

/* ---- locations ---------------------------------------------------------------------- */

PyObject *fhpy_loc_new(fhr_location loc)
{
    fhpy_location *o = PyObject_New(fhpy_location, &fhpy_location_type);
    if (o)
        o->loc = loc;
    return (PyObject *)o;
}


static PyObject *loc_repr(PyObject *self)
{
    char buf[24];
    fhr_loc_format(((fhpy_location *)self)->loc, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

static Py_hash_t loc_hash(PyObject *self)
{
    return 1000003 + fhr_loc_slot(((fhpy_location *)self)->loc);
}

static PyObject *loc_richcompare(PyObject *a, PyObject *b, int op)
{
    if (!PyObject_TypeCheck(b, &fhpy_location_type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = fhr_loc_equal(((fhpy_location *)a)->loc, ((fhpy_location *)b)->loc);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *loc_get_kind(PyObject *self, void *c)
{
    (void)c;
    static const char *const k[] = {"invalid", "host", "pinned", "cuda"};
    return PyUnicode_FromString(k[((fhpy_location *)self)->loc.kind]);
}

static PyObject *loc_get_index(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(((fhpy_location *)self)->loc.index);
}

static PyGetSetDef loc_getset[] = {
    {"kind", loc_get_kind, NULL, "host, pinned or cuda", NULL},
    {"index", loc_get_index, NULL, "the CUDA device index (0 otherwise)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyObject *loc_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *s = loc_repr(self);
    return s ? Py_BuildValue("(O(N))", (PyObject *)&fhpy_location_type, s) : NULL;
}

static PyObject *loc_new(PyTypeObject *t, PyObject *args, PyObject *kw)
{
    (void)t;
    PyObject *text;
    static char *kwl[] = {"text", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O", kwl, &text))
        return NULL;
    fhr_location loc;
    return fhpy_to_loc(text, &loc) ? fhpy_loc_new(loc) : NULL;
}

static PyMethodDef loc_methods[] = {{"__reduce__", loc_reduce, METH_NOARGS,
     "__reduce__($self, /)\n--\n\nPickles a Location as its text."},
                                    {NULL, NULL, 0, NULL}};

PyTypeObject fhpy_location_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.Location",
    .tp_basicsize = sizeof(fhpy_location),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Location(text)\n--\n\nA local memory location: pageable host, pinned host or a "
              "CUDA device; text: 'host', 'pinned' or 'cuda:N'.",
    .tp_repr = loc_repr,
    .tp_hash = loc_hash,
    .tp_richcompare = loc_richcompare,
    .tp_getset = loc_getset,
    .tp_methods = loc_methods,
    .tp_new = loc_new,
};

/* ---- handles -------------------------------------------------------------------------- */

PyObject *fhpy_handle_new(fhr_handle h)
{
    fhpy_handle *o = PyObject_New(fhpy_handle, &fhpy_handle_type);
    if (o)
        o->h = h;
    return (PyObject *)o;
}

int fhpy_layout_of(fhpy_manager *m, PyObject *handle, PyObject **out)
{
    *out = PyDict_GetItemWithError(m->layouts, handle);
    return *out || !PyErr_Occurred();
}

static PyObject *handle_repr(PyObject *self)
{
    fhr_handle h = ((fhpy_handle *)self)->h;
    return PyUnicode_FromFormat("ResidencyHandle(manager=%llu, serial=%llu)",
                                (unsigned long long)h.manager_id, (unsigned long long)h.serial);
}

static Py_hash_t handle_hash(PyObject *self)
{
    Py_hash_t x = (Py_hash_t)fhr_handle_hash(((fhpy_handle *)self)->h);
    return x == -1 ? -2 : x;
}

static PyObject *handle_richcompare(PyObject *a, PyObject *b, int op)
{
    if (!PyObject_TypeCheck(b, &fhpy_handle_type) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = fhr_handle_equal(((fhpy_handle *)a)->h, ((fhpy_handle *)b)->h);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *handle_get_serial(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((fhpy_handle *)self)->h.serial);
}

static PyObject *handle_get_manager(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((fhpy_handle *)self)->h.manager_id);
}

static PyGetSetDef handle_getset[] = {
    {"serial", handle_get_serial, NULL, "the manager's serial number of the value", NULL},
    {"manager_id", handle_get_manager, NULL, "the issuing manager's id", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyHandle",
    .tp_basicsize = sizeof(fhpy_handle),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An immutable, hashable, tensor-free token issued by one manager.",
    .tp_repr = handle_repr,
    .tp_hash = handle_hash,
    .tp_richcompare = handle_richcompare,
    .tp_getset = handle_getset,
};

/* ---- shared converters ---------------------------------------------------------------- */

PyObject *fhpy_json(char *text)
{
    if (!text)
        return PyErr_NoMemory();
    PyObject *r = PyObject_CallFunction(json_loads, "s", text);
    free(text);
    return r;
}

PyObject *fhpy_report(const fhr_report *r)
{
    if (!r)
        Py_RETURN_NONE;
    return fhpy_json(fhr_report_json(r));
}

PyObject *fhpy_record(const char *kind, PyObject *dict)
{
    (void)kind;
    if (!dict)
        return NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *r = args ? PyObject_Call(namespace_type, args, dict) : NULL;
    Py_XDECREF(args);
    return r;
}

PyObject *fhpy_explanation(const fhr_explanation *e)
{
    PyObject *peaks = PyDict_New(), *pred = PyDict_New();
    if (!peaks || !pred)
        goto fail;
    for (size_t i = 0; i < e->npeaks; i++) {
        const fhr_loc_peak *p = &e->peaks[i];
        PyObject *k = fhpy_loc_new(p->loc);
        PyObject *d = Py_BuildValue("{s:K,s:K,s:O}", "peak_used_bytes",
                                    (unsigned long long)p->peak_used_bytes,
                                    "peak_charged_bytes",
                                    (unsigned long long)p->peak_charged_bytes, "budget_bytes",
                                    Py_None);
        PyObject *c = PyLong_FromUnsignedLongLong(p->peak_charged_bytes);
        int bad = !k || !d || !c;
        if (!bad && p->has_budget) {
            PyObject *bb = PyLong_FromUnsignedLongLong(p->budget_bytes);
            bad = !bb || PyDict_SetItemString(d, "budget_bytes", bb) < 0;
            Py_XDECREF(bb);
        }
        PyObject *rec = bad ? NULL : fhpy_record("peak", d);
        bad = bad || !rec || PyDict_SetItem(peaks, k, rec) < 0 || PyDict_SetItem(pred, k, c) < 0;
        Py_XDECREF(k);
        Py_XDECREF(d);
        Py_XDECREF(c);
        Py_XDECREF(rec);
        if (bad)
            goto fail;
    }
    PyObject *d = Py_BuildValue(
        "{s:O,s:s,s:s,s:s,s:l,s:N,s:N,s:K,s:N,s:N,s:K,s:K,s:K,s:K}", "feasible",
        e->feasible ? Py_True : Py_False, "reason", e->reason, "status",
        e->feasible ? "ok" : fhr_status_name(e->status), "phase", fhr_phase_name(e->phase),
        "action_index", e->action_index, "handle",
        e->handle.serial ? fhpy_handle_new(e->handle) : Py_NewRef(Py_None), "location",
        e->loc.kind != FHR_LOC_INVALID ? fhpy_loc_new(e->loc) : Py_NewRef(Py_None),
        "bytes_short", (unsigned long long)e->bytes_short, "peaks", peaks,
        "predicted_peak_bytes", pred, "bytes_moved", (unsigned long long)e->bytes_moved,
        "bytes_regenerated", (unsigned long long)e->bytes_regenerated, "bytes_peer",
        (unsigned long long)e->bytes_peer, "state_version",
        (unsigned long long)e->state_version);
    PyObject *r = fhpy_record("explanation", d);
    Py_XDECREF(d);
    return r;
fail:
    Py_XDECREF(peaks);
    Py_XDECREF(pred);
    return NULL;
}


/* ---- the core's share of the module's init ---------------------------------------------- */

int fhpy_core_init(void)
{
    PyObject *json = PyImport_ImportModule("json");
    PyObject *types = json ? PyImport_ImportModule("types") : NULL;
    if (types) {
        json_loads = PyObject_GetAttrString(json, "loads");
        namespace_type = PyObject_GetAttrString(types, "SimpleNamespace");
    }
    Py_XDECREF(json);
    Py_XDECREF(types);
    return json_loads && namespace_type ? 0 : -1;
}

/* Readies each type and adds it to mod under its name. -1 and an exception on failure. */
int fhpy_add_types(PyObject *mod, PyTypeObject *const *types, const char *const *names,
                   size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(mod, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}

int fhpy_alive(PyObject *owner, const fhpy_owner_ops *ops)
{
    if (owner && ops && ops->alive(owner))
        return 1;
    fhpy_raise_msg(FHR_E_LEASE, "%s", ops && ops->ended ? ops->ended
                                                        : "the memory this object viewed "
                                                          "was released: it must not be read");
    return 0;
}

/* ---- converters --------------------------------------------------------------------- */

/* o as a Python int (o itself or its __index__), or NULL and a TypeError naming param. */
static PyObject *as_int(PyObject *o, const char *param, const char *what)
{
    if (o && !PyBool_Check(o) && PyIndex_Check(o))
        return PyNumber_Index(o);
    PyErr_Format(PyExc_TypeError, "%s must be an int (%s), not %.80s", param, what,
                 o ? Py_TYPE(o)->tp_name : "nothing");
    return NULL;
}

/* Sets ResidencyValueError "param must be in lo..hi, not <o>" (o's repr through %S-free
 * formatting: the int's decimal text). Returns 0. */
static int out_of_range(PyObject *i, const char *param, const char *range)
{
    PyObject *s = PyObject_Str(i);
    const char *t = s ? PyUnicode_AsUTF8(s) : NULL;
    PyErr_Clear();
    fhpy_raise_msg(FHR_E_INVALID, "%s must be in %s, not %.60s", param, range, t ? t : "?");
    Py_XDECREF(s);
    return 0;
}

/* i in [lo, hi] (hi <= UINT64_MAX), as an unsigned 64-bit value. */
static int int_in(PyObject *i, long long lo, unsigned long long hi, const char *param,
                  const char *range, long long *sv, unsigned long long *uv)
{
    int ovf = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &ovf);
    if (v == -1 && PyErr_Occurred())
        return 0;
    if (ovf < 0 || (!ovf && v < lo))
        return out_of_range(i, param, range);
    if (ovf > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(i);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return out_of_range(i, param, range);
        }
        if (u > hi)
            return out_of_range(i, param, range);
        if (uv)
            *uv = u;
        return 1;
    }
    if (v >= 0 && (unsigned long long)v > hi)
        return out_of_range(i, param, range);
    if (sv)
        *sv = v;
    if (uv)
        *uv = (unsigned long long)v;
    return 1;
}

/* Any unsigned 64-bit value: `what` names it in both errors (a type, a range). */
static int u64_arg(PyObject *o, const char *param, const char *what, const char *range,
                   uint64_t *out)
{
    PyObject *i = as_int(o, param, what);
    if (!i)
        return 0;
    unsigned long long u = 0;
    int ok = int_in(i, 0, UINT64_MAX, param, range, NULL, &u);
    Py_DECREF(i);
    if (ok)
        *out = u;
    return ok;
}

int fhpy_bytes(PyObject *o, const char *param, uint64_t *out)
{
    return u64_arg(o, param, "a number of bytes", "0..2**64-1 (bytes)", out);
}

int fhpy_count(PyObject *o, const char *param, size_t max, size_t *out)
{
    PyObject *i = as_int(o, param, "a count");
    if (!i)
        return 0;
    char range[48];
    snprintf(range, sizeof range, "0..%zu", max);
    unsigned long long u = 0;
    int ok = int_in(i, 0, max, param, range, NULL, &u);
    Py_DECREF(i);
    if (ok)
        *out = (size_t)u;
    return ok;
}

int fhpy_u32(PyObject *o, const char *param, uint32_t *out)
{
    size_t n = 0;
    if (!fhpy_count(o, param, UINT32_MAX, &n))
        return 0;
    *out = (uint32_t)n;
    return 1;
}

int fhpy_mask64(PyObject *o, const char *param, uint64_t *out)
{
    return u64_arg(o, param, "a bit mask", "0..2**64-1 (a bit mask)", out);
}

int fhpy_priority(PyObject *o, const char *param, int32_t *out)
{
    PyObject *i = as_int(o, param, "a priority");
    if (!i)
        return 0;
    long long v = 0;
    int ok = int_in(i, INT32_MIN, INT32_MAX, param, "-2**31..2**31-1", &v, NULL);
    Py_DECREF(i);
    if (ok)
        *out = (int32_t)v;
    return ok;
}

int fhpy_text(PyObject *o, const char *param, int allow_none, const char **out)
{
    *out = NULL;
    if (allow_none && (!o || o == Py_None))
        return 1;
    if (!o || !PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str%s, not %.80s", param,
                     allow_none ? " or None" : "", o ? Py_TYPE(o)->tp_name : "nothing");
        return 0;
    }
    Py_ssize_t n;
    const char *t = PyUnicode_AsUTF8AndSize(o, &n);
    if (!t)
        return 0;
    if ((size_t)n != strlen(t)) {
        fhpy_raise_msg(FHR_E_INVALID, "%s must not contain a NUL character", param);
        return 0;
    }
    *out = t;
    return 1;
}

int fhpy_to_loc(PyObject *o, fhr_location *out)
{
    if (PyObject_TypeCheck(o, &fhpy_location_type)) {
        *out = ((fhpy_location *)o)->loc;
        return 1;
    }
    if (PyUnicode_Check(o)) {
        const char *t = PyUnicode_AsUTF8(o);
        if (!t)
            return 0;
        if (fhr_loc_parse(t, out) == FHR_OK)
            return 1;
        fhpy_raise_msg(FHR_E_LOCATION, "location '%s': expected host, pinned or cuda:N "
                                       "(N in 0..%d)", t, FHR_MAX_CUDA_DEVICES - 1);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "expected a location (PAGEABLE_HOST, PINNED_HOST, "
                                  "cuda_location(...)) or its text, not %.80s",
                 Py_TYPE(o)->tp_name);
    return 0;
}

int fhpy_handle_item(PyObject *o, const char *param, Py_ssize_t i, fhr_handle *out)
{
    if (PyObject_TypeCheck(o, &fhpy_handle_type)) {
        *out = ((fhpy_handle *)o)->h;
        return 1;
    }
    char what[80];
    snprintf(what, sizeof what, "%.60s[%zd]", param, i);
    return fhpy_handle_arg_of(o, what, out);
}

int fhpy_to_handle(PyObject *o, fhr_handle *out) { return fhpy_handle_arg_of(o, "handle", out); }

int fhpy_handle_conv(PyObject *o, void *out)
{
    fhpy_handle_arg *a = out;
    a->obj = o;
    return fhpy_handle_arg_of(o, "handle", &a->h);
}

int fhpy_to_loc_conv(PyObject *o, void *out) { return fhpy_location_arg(o, "at", out); }
int fhpy_loc_conv_to(PyObject *o, void *out) { return fhpy_location_arg(o, "to", out); }
int fhpy_loc_conv_location(PyObject *o, void *out)
{
    return fhpy_location_arg(o, "location", out);
}

int fhpy_location_arg(PyObject *o, const char *param, fhr_location *out)
{
    if (fhpy_to_loc(o, out))
        return 1;
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a Location (PAGEABLE_HOST, PINNED_HOST, "
                                      "cuda_location(i)) or its text, not %.80s",
                     param, Py_TYPE(o)->tp_name);
    }
    return 0;
}

int fhpy_handle_arg_of(PyObject *o, const char *param, fhr_handle *out)
{
    if (PyObject_TypeCheck(o, &fhpy_handle_type)) {
        *out = ((fhpy_handle *)o)->h;
        return 1;
    }
    PyErr_Format(PyExc_TypeError, "%s must be a ResidencyHandle, not %.80s", param,
                 Py_TYPE(o)->tp_name);
    return 0;
}

/* ---- exports: holds that keep a managed copy for its DLPack consumers ----------------- */

typedef struct export_token {
    fhr_hold *hold;
    fhpy_manager *mgr; /* strong */
    PyObject *key;     /* (handle, location) in mgr->exports */
} export_token;

static PyObject *export_key(PyObject *handle, fhr_location at)
{
    PyObject *loc = fhpy_loc_new(at);
    return loc ? Py_BuildValue("(ON)", handle, loc) : NULL;
}

static int count_add(fhpy_manager *m, PyObject *key, long d)
{
    PyObject *c = PyDict_GetItemWithError(m->exports, key);
    if (!c && PyErr_Occurred())
        return 0;
    long n = (c ? PyLong_AsLong(c) : 0) + d;
    if (n <= 0)
        return c ? PyDict_DelItem(m->exports, key) == 0 : 1;
    PyObject *v = PyLong_FromLong(n);
    int ok = v && PyDict_SetItem(m->exports, key, v) == 0;
    Py_XDECREF(v);
    return ok;
}

int fhpy_protect(fhpy_manager *m, PyObject *handle, fhr_location at, void **token)
{
    *token = NULL;
    export_token *t = PyMem_Calloc(1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return 0;
    }
    fhr_handle h = ((fhpy_handle *)handle)->h;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_hold_acquire(m->m, &h, 1, at, &t->hold, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        PyMem_Free(t);
        fhpy_fail(&e);
        return 0;
    }
    t->key = export_key(handle, at);
    if (!t->key || !count_add(m, t->key, 1)) {
        Py_XDECREF(t->key);
        Py_BEGIN_ALLOW_THREADS
        fhr_hold_destroy(t->hold);
        Py_END_ALLOW_THREADS
        PyMem_Free(t);
        return 0;
    }
    t->mgr = (fhpy_manager *)Py_NewRef((PyObject *)m);
    *token = t;
    return 1;
}

void fhpy_unprotect(void *token)
{
    export_token *t = token;
    if (!t)
        return;
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb); /* a deleter may run while an exception is pending */
    if (!count_add(t->mgr, t->key, -1))
        PyErr_Clear();
    Py_BEGIN_ALLOW_THREADS
    fhr_hold_destroy(t->hold);
    Py_END_ALLOW_THREADS
    Py_DECREF(t->key);
    Py_DECREF((PyObject *)t->mgr);
    PyMem_Free(t);
    PyErr_Restore(et, ev, etb);
}

long fhpy_exports_of(fhpy_manager *m, PyObject *handle, fhr_location at)
{
    PyObject *key = export_key(handle, at);
    PyObject *c = key ? PyDict_GetItemWithError(m->exports, key) : NULL;
    long n = c ? PyLong_AsLong(c) : 0;
    Py_XDECREF(key);
    PyErr_Clear();
    return n;
}

long fhpy_exports_any(fhpy_manager *m, PyObject *handle)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    long n = 0;
    while (PyDict_Next(m->exports, &pos, &k, &v))
        if (PyObject_RichCompareBool(PyTuple_GET_ITEM(k, 0), handle, Py_EQ) == 1)
            n += PyLong_AsLong(v);
    PyErr_Clear();
    return n;
}

void fhpy_exports_note(fhr_error *e, long n)
{
    if (n <= 0)
        return;
    size_t len = strlen(e->message);
    snprintf(e->message + len, sizeof e->message - len,
             "; protected by %ld exported view%s (DLPack arrays made from its lease values): "
             "they end when those arrays are deleted (del, or their consumers let them go)",
             n, n == 1 ? "" : "s");
}

int fhpy_budgets(PyObject *o, const char *param, fhr_budget **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!o || o == Py_None)
        return 1;
    if (!PyDict_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict {location: bytes}, not %.80s", param,
                     Py_TYPE(o)->tp_name);
        return 0;
    }
    /* C memory: the library reads it without the interpreter lock (caller: free) */
    fhr_budget *b = calloc((size_t)PyDict_Size(o) + 1, sizeof *b);
    if (!b) {
        PyErr_NoMemory();
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    char what[96];
    while (PyDict_Next(o, &pos, &k, &v)) {
        char lb[24] = "?";
        int ok = fhpy_location_arg(k, "a budget's location", &b[*n].loc);
        if (ok) {
            fhr_loc_format(b[*n].loc, lb, sizeof lb);
            snprintf(what, sizeof what, "%s[%s]", param, lb);
            ok = fhpy_bytes(v, what, &b[*n].nbytes);
        }
        if (!ok) {
            free(b);
            *n = 0;
            return 0;
        }
        (*n)++;
    }
    *out = b;
    return 1;
}
