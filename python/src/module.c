/* python/src/module.c — the `_fheplan` module: locations, handles, streams, the exception
 * classes, the queue of released foreign buffers, shared converters, and the init. */
#include "fhpy.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

PyObject *fhpy_exc[FHR_STATUS_COUNT_];
static PyObject *json_loads, *namespace_type, *module_backend_owner;

/* ---- errors ------------------------------------------------------------------------- */

static const char *const exc_names[FHR_STATUS_COUNT_] = {
    "ResidencyError", "ResidencyValueError", "ResidencyHandleError", "ResidencyLocationError",
    "ResidencyReplicaError", "ResidencyStateError", "ResidencyPreserveError",
    "ResidencyProtectedError", "ResidencyBudgetError", "ResidencyReentrancyError",
    "ResidencyMemoryError", "ResidencyBackendError", "ResidencySourceError",
    "ResidencyStaleStateError", "ResidencyPlanExecutionError", "ResidencyInfeasibleError",
    "ResidencyLeaseError", "ResidencyScopeError", "ResidencyUnsupportedError"};

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

/* ---- released foreign buffers -------------------------------------------------------------
 * The library may release an adopted buffer on any thread (a stream's host function, the
 * emulated device's worker) and must not wait there for the interpreter lock: the release
 * only queues the producer, and the queue is emptied under the lock at the next call into
 * the binding or by a pending call the interpreter runs soon. */

typedef struct rel_node {
    struct rel_node *next;
    void (*fn)(void *ctx);
    void *ctx;
} rel_node;

static pthread_mutex_t rel_lock = PTHREAD_MUTEX_INITIALIZER;
static rel_node *rel_head;
static atomic_int rel_pending;
static int rel_scheduled;

static int rel_pending_call(void *arg)
{
    (void)arg;
    fhpy_release_drain();
    return 0;
}

void fhpy_foreign_release_ctx(void *ctx); /* value.c: drops the producers of one buffer */

void fhpy_foreign_free(void *ctx, void *ptr, size_t nbytes)
{
    (void)ptr;
    (void)nbytes;
    fhpy_defer(fhpy_foreign_release_ctx, ctx);
}

void fhpy_defer(void (*fn)(void *), void *ctx)
{
    rel_node *n = malloc(sizeof *n);
    if (!n)
        return; /* the object leaks rather than being released without the lock */
    n->fn = fn;
    n->ctx = ctx;
    pthread_mutex_lock(&rel_lock);
    n->next = rel_head;
    rel_head = n;
    atomic_store(&rel_pending, 1);
    int schedule = !rel_scheduled;
    rel_scheduled = 1;
    pthread_mutex_unlock(&rel_lock);
    if (schedule && Py_AddPendingCall(rel_pending_call, NULL) != 0) {
        pthread_mutex_lock(&rel_lock);
        rel_scheduled = 0; /* the next call into the binding drains it */
        pthread_mutex_unlock(&rel_lock);
    }
}

void fhpy_release_drain(void)
{
    if (!atomic_load(&rel_pending))
        return;
    pthread_mutex_lock(&rel_lock);
    rel_node *list = rel_head;
    rel_head = NULL;
    rel_scheduled = 0;
    atomic_store(&rel_pending, 0);
    pthread_mutex_unlock(&rel_lock);
    while (list) {
        rel_node *n = list;
        list = n->next;
        n->fn(n->ctx);
        free(n);
    }
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

/* ---- streams ---------------------------------------------------------------------------- */

int fhpy_stream_native(PyObject *o, void **native, int *given)
{
    *native = NULL;
    *given = 0;
    if (!o || o == Py_None)
        return 1;
    PyObject *v = NULL;
    if (PyLong_Check(o))
        v = Py_NewRef(o);
    else if (PyObject_HasAttrString(o, "cuda_stream"))
        v = PyObject_GetAttrString(o, "cuda_stream");
    else if (PyObject_HasAttrString(o, "ptr"))
        v = PyObject_GetAttrString(o, "ptr");
    else {
        PyErr_Format(PyExc_TypeError, "a stream is an int, or an object with .cuda_stream "
                                      "(torch) or .ptr (CuPy, fheplan.Stream), not %.80s",
                     Py_TYPE(o)->tp_name);
        return 0;
    }
    if (!v)
        return 0;
    void *p = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    if (PyErr_Occurred())
        return 0;
    *native = p;
    *given = 1;
    return 1;
}

/* Adds o to the list *keep (made on first use). */
static int keep_add(PyObject **keep, PyObject *o)
{
    if (!*keep && !(*keep = PyList_New(0)))
        return 0;
    return PyList_Append(*keep, o) == 0;
}

int fhpy_stream_view(fhpy_manager *m, PyObject *o, fhr_location loc, fhr_stream **out,
                     PyObject **keep)
{
    *out = NULL;
    void *native;
    int given;
    if (!fhpy_stream_native(o, &native, &given))
        return 0;
    if (!given)
        return 1;
    if (keep && !keep_add(keep, o))
        return 0;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_stream_wrap(m->backend, loc, native, out, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        fhpy_fail(&e);
        return 0;
    }
    return 1;
}

void fhpy_stream_maps_free(fhpy_manager *m, fhr_stream_map *maps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (maps[i].stream)
            fhr_stream_destroy(m->backend, maps[i].stream);
    PyMem_Free(maps);
}

int fhpy_stream_maps(fhpy_manager *m, PyObject *mapping, fhr_stream_map **maps, size_t *n,
                     PyObject **keep)
{
    *maps = NULL;
    *n = 0;
    if (!mapping || mapping == Py_None)
        return 1;
    if (!PyDict_Check(mapping)) {
        PyErr_SetString(PyExc_TypeError, "streams are a dict {location: stream}");
        return 0;
    }
    /* The items, taken once: making a view lets go of the interpreter lock, during which
     * another thread may change the dict. */
    PyObject *items = PyDict_Items(mapping);
    if (!items)
        return 0;
    Py_ssize_t cnt = PyList_GET_SIZE(items);
    fhr_stream_map *a = PyMem_Calloc(cnt ? (size_t)cnt : 1, sizeof *a);
    if (!a) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return 0;
    }
    size_t i = 0;
    for (Py_ssize_t k = 0; k < cnt; k++) {
        PyObject *it = PyList_GET_ITEM(items, k);
        fhr_location loc;
        if (!fhpy_to_loc(PyTuple_GET_ITEM(it, 0), &loc) ||
            !fhpy_stream_view(m, PyTuple_GET_ITEM(it, 1), loc, &a[i].stream, keep)) {
            fhpy_stream_maps_free(m, a, i);
            Py_DECREF(items);
            return 0;
        }
        a[i].loc = loc;
        if (a[i].stream)
            i++;
    }
    Py_DECREF(items);
    *maps = a;
    *n = i;
    return 1;
}

static void stream_dealloc(PyObject *self)
{
    fhpy_stream *s = (fhpy_stream *)self;
    if (s->s && s->own) {
        Py_BEGIN_ALLOW_THREADS
        fhr_stream_destroy(s->b, s->s);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(s->owner);
    Py_XDECREF(s->life);
    Py_TYPE(self)->tp_free(self);
}

/* A stream handed to a kernel or loader is valid during the call only (core.c, rule 1). */
static int stream_check(fhpy_stream *s) { return !s->life || fhpy_alive(s->life, s->life_ops); }

static PyObject *stream_get_ptr(PyObject *self, void *c)
{
    (void)c;
    fhpy_stream *s = (fhpy_stream *)self;
    if (!stream_check(s))
        return NULL;
    void *native = NULL;
    FHPY_ERR_INIT(e);
    if (fhr_stream_native(s->b, s->s, &native, NULL, &e) != FHR_OK)
        return fhpy_fail(&e);
    return PyLong_FromVoidPtr(native);
}

static PyObject *stream_get_loc(PyObject *self, void *c)
{
    (void)c;
    if (!stream_check((fhpy_stream *)self))
        return NULL;
    return fhpy_loc_new(((fhpy_stream *)self)->loc);
}

static PyObject *stream_synchronize(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_stream *s = (fhpy_stream *)self;
    if (!stream_check(s))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_stream_sync(s->b, s->s, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK)
        return fhpy_fail(&e);
    Py_RETURN_NONE;
}

static PyGetSetDef stream_getset[] = {
    {"ptr", stream_get_ptr, NULL, "the native stream (a cudaStream_t on CUDA), as an int", NULL},
    {"cuda_stream", stream_get_ptr, NULL, "the same as ptr", NULL},
    {"location", stream_get_loc, NULL, "the location the stream's work runs for", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef stream_methods[] = {
    {"synchronize", stream_synchronize, METH_NOARGS,
     "synchronize($self, /)\n--\n\nWaits for the stream's work. Returns None. Raises "
     "ResidencyLeaseError for a kernel's or loader's stream after its call."},
    {NULL, NULL, 0, NULL}};

PyTypeObject fhpy_stream_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.Stream",
    .tp_basicsize = sizeof(fhpy_stream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stream of a manager's backend (fhr_stream_create); .ptr is its native form.",
    .tp_dealloc = stream_dealloc,
    .tp_getset = stream_getset,
    .tp_methods = stream_methods,
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
     "check(program, *, budgets=None, policy=None)\n--\n\nThe dry run of `fheplan check` (the "
     "model backend, unknown kernels as touch). program: a Program, plan text or a path (as "
     "compile reads it). Returns the report as a dict. Raises ResidencyError subclasses as the"
     " C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"run", (PyCFunction)(void (*)(void))fhpy_run, METH_VARARGS | METH_KEYWORDS,
     "run(program, *, device=None, kernels=None, budgets=None, scale=None, "
     "unknown_as_touch=False, policy=None, loaders=None)\n--\n\nRuns a plan as `fheplan run` "
     "does (device None: FHEPLAN_DEVICE, else auto; scale None: automatic on the emulated "
     "device). kernels/loaders: {name: callable}, each called with a record (fheplan-python(7)"
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
    {"_drain_releases", mod_drain, METH_NOARGS,
     "_drain_releases()\n--\n\nDrops the producers the library released. Returns None."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fheplan",
                                    "The C core of the fheplan Python binding.", -1,
                                    mod_methods, NULL, NULL, NULL, NULL};

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

PyMODINIT_FUNC PyInit__fheplan(void)
{
    PyObject *mod = PyModule_Create(&moddef);
    if (!mod)
        return NULL;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *types = PyImport_ImportModule("types");
    if (!json || !types)
        goto fail;
    json_loads = PyObject_GetAttrString(json, "loads");
    namespace_type = PyObject_GetAttrString(types, "SimpleNamespace");
    Py_DECREF(json);
    Py_DECREF(types);
    json = types = NULL;
    if (!json_loads || !namespace_type)
        goto fail;
    (void)module_backend_owner;
    static PyTypeObject *const ts[] = {
        &fhpy_location_type, &fhpy_handle_type, &fhpy_stream_type, &fhpy_manager_type,
        &fhpy_lease_type,    &fhpy_leased_type, &fhpy_view_type,   &fhpy_value_type,
        &fhpy_hold_type,     &fhpy_plan_type,   &fhpy_scope_type,  &fhpy_program_type,
        &fhpy_kcall_type};
    static const char *const names[] = {
        "Location",      "ResidencyHandle", "Stream",         "ResidencyManager", "ResidencyLease",
        "LeasedValue",   "FieldView",       "Value",          "ResidencyHold",    "ResidencyPlan",
        "ResidencyScope", "Program",        "_KernelCall"};
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
    Py_XDECREF(json);
    Py_XDECREF(types);
    Py_DECREF(mod);
    return NULL;
}
