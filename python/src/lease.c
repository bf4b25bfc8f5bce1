/* python/src/lease.c — ResidencyLease (acquire: a context manager whose items are the
 * borrowed values, with consumer streams) and ResidencyHold (retention without values). */
#include "fhpy.h"

static int lease_alive(PyObject *o) { return !((fhpy_lease *)o)->released; }
static fhr_backend *lease_backend(PyObject *o) { return ((fhpy_lease *)o)->mgr->backend; }

static int keep_view(fhpy_lease *l, fhr_stream *view)
{
    fhr_stream **nv = PyMem_Realloc(l->views, (l->nviews + 1) * sizeof *nv);
    if (!nv) {
        PyErr_NoMemory();
        return 0;
    }
    l->views = nv;
    l->views[l->nviews++] = view;
    return 1;
}

static int lease_add_consumer(PyObject *o, fhr_location at, PyObject *stream)
{
    fhpy_lease *l = (fhpy_lease *)o;
    fhr_stream *view = NULL;
    if (!fhpy_stream_view(l->mgr, stream, at, &view, &l->keep))
        return -1;
    if (!view)
        return 0;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_lease_add_consumer_stream(l->lease, view, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        fhr_stream_destroy(l->mgr->backend, view);
        fhpy_fail(&e);
        return -1;
    }
    if (!keep_view(l, view)) { /* the lease records on it at release: wait for it now */
        fhr_stream_sync(l->mgr->backend, view, NULL);
        fhr_stream_destroy(l->mgr->backend, view);
        return -1;
    }
    return 0;
}

static void lease_unpin(fhpy_lease *l);

/* An export's token when no hold could be taken (inside a source load on the manager,
 * where every call on it is refused): the lease itself stays pinned until the export
 * dies, so its release in the library waits for that. */
static char pinned_export;

/* An export of a leased copy: a hold on it, taken while the lease is pinned so that a
 * release from another thread cannot end it meanwhile. */
static int lease_export_begin(PyObject *o, PyObject *handle, fhr_location at, void **token)
{
    fhpy_lease *l = (fhpy_lease *)o;
    *token = NULL;
    if (!handle)
        return 1;
    l->pins++;
    int ok = fhpy_protect(l->mgr, handle, at, token);
    if (!ok && PyErr_ExceptionMatches(fhpy_exc[FHR_E_REENTRANT])) {
        PyErr_Clear();
        *token = &pinned_export;
        return 1; /* the pin stays: lease_export_end ends it */
    }
    lease_unpin(l);
    return ok;
}

static void lease_export_end(PyObject *o, void *token)
{
    if (token == &pinned_export)
        lease_unpin((fhpy_lease *)o);
    else
        fhpy_unprotect(token);
}

static void lease_pin(PyObject *o, int delta)
{
    fhpy_lease *l = (fhpy_lease *)o;
    if (delta > 0)
        l->pins++;
    else
        lease_unpin(l);
}

const fhpy_owner_ops fhpy_lease_ops = {
    .alive = lease_alive,
    .add_consumer = lease_add_consumer,
    .backend = lease_backend,
    .export_begin = lease_export_begin,
    .export_end = lease_export_end,
    .pin = lease_pin,
    .ended = "the lease was released: its values must not be read (arrays exported from "
             "them stay valid until they are deleted)",
};

PyObject *fhpy_lease_make(fhpy_manager *m, fhr_lease *l, fhr_location at, PyObject *handles,
                          PyObject *owner)
{
    fhpy_lease *o = PyObject_New(fhpy_lease, &fhpy_lease_type);
    if (!o) {
        if (!owner)
            fhr_lease_destroy(l);
        return NULL;
    }
    o->mgr = (fhpy_manager *)Py_NewRef((PyObject *)m);
    o->lease = l;
    o->at = at;
    o->released = 0;
    o->nviews = 0;
    o->views = NULL;
    o->handles = Py_NewRef(handles);
    o->owner = Py_XNewRef(owner);
    o->keep = NULL;
    o->pins = 0;
    o->release_pending = 0;
    return (PyObject *)o;
}

static void destroy_views(fhr_backend *b, fhr_stream **views, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fhr_stream_destroy(b, views[i]);
}

/* The library's release. The view list and the stream objects behind it are taken out
 * under the lock (another thread may append to them meanwhile: core.c, rule 4) and put
 * back when the release fails. */
static fhr_status lease_release_now(fhpy_lease *l, fhr_error *e)
{
    fhr_stream **views = l->views;
    size_t n = l->nviews;
    PyObject *keep = l->keep;
    l->views = NULL;
    l->nviews = 0;
    l->keep = NULL;
    fhr_status st;
    fhr_backend *b = l->mgr->backend;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_lease_release(l->lease, e);
    if (st == FHR_OK)
        destroy_views(b, views, n); /* the completion events are recorded */
    Py_END_ALLOW_THREADS
    if (st == FHR_OK) {
        PyMem_Free(views);
        Py_XDECREF(keep); /* after the views */
        return st;
    }
    /* failed: put them back, before those appended meanwhile */
    fhr_stream **all = PyMem_Realloc(views, (n + l->nviews + 1) * sizeof *all);
    if (all) {
        for (size_t i = 0; i < l->nviews; i++)
            all[n + i] = l->views[i];
        PyMem_Free(l->views);
        l->views = all;
        l->nviews += n;
    } else { /* no memory to keep them: their work is waited for here */
        for (size_t i = 0; i < n; i++)
            fhr_stream_sync(b, views[i], NULL);
        destroy_views(b, views, n);
        PyMem_Free(views);
    }
    if (keep && l->keep && PyList_SetSlice(keep, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, l->keep) < 0)
        PyErr_Clear();
    if (keep)
        Py_XSETREF(l->keep, keep);
    return st;
}

/* Ends a read pinned without the lock; the last one performs a release asked meanwhile. */
static void lease_unpin(fhpy_lease *l)
{
    if (--l->pins > 0 || !l->release_pending)
        return;
    l->release_pending = 0;
    FHPY_ERR_INIT(e);
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    if (lease_release_now(l, &e) != FHR_OK) {
        fhpy_fail(&e);
        PyErr_WriteUnraisable((PyObject *)l);
    }
    PyErr_Restore(et, ev, etb);
}

static PyObject *lease_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_lease *l = (fhpy_lease *)self;
    if (l->released)
        return fhpy_raise_msg(FHR_E_LEASE, "lease_release: the lease was already released");
    l->released = 1; /* no new read starts, also while the release runs */
    if (l->pins > 0) {
        l->release_pending = 1; /* the last pinned read releases */
        Py_RETURN_NONE;
    }
    FHPY_ERR_INIT(e);
    fhr_status st = lease_release_now(l, &e);
    fhpy_release_drain();
    if (st != FHR_OK) {
        l->released = 0;
        return fhpy_fail(&e);
    }
    Py_RETURN_NONE;
}

static void lease_dealloc(PyObject *self)
{
    fhpy_lease *l = (fhpy_lease *)self;
    Py_BEGIN_ALLOW_THREADS
    if (!l->owner && l->lease)
        fhr_lease_destroy(l->lease); /* releases an active lease */
    destroy_views(l->mgr->backend, l->views, l->nviews);
    Py_END_ALLOW_THREADS
    PyMem_Free(l->views);
    Py_XDECREF(l->keep); /* after the views */
    Py_XDECREF(l->handles);
    Py_XDECREF(l->owner);
    Py_XDECREF(l->mgr);
    Py_TYPE(self)->tp_free(self);
    fhpy_release_drain();
}

static PyObject *lease_getitem(PyObject *self, PyObject *key)
{
    fhpy_lease *l = (fhpy_lease *)self;
    fhr_handle h;
    if (!fhpy_to_handle(key, &h))
        return NULL;
    if (l->released)
        return fhpy_raise_msg(FHR_E_LEASE, "the lease was released: its values must not be read");
    const fhr_value *v = fhr_lease_value(l->lease, h);
    if (!v) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    PyObject *layout;
    if (!fhpy_layout_of(l->mgr, key, &layout))
        return NULL;
    return fhpy_leased_new(self, &fhpy_lease_ops, v, layout, key);
}

static Py_ssize_t lease_len(PyObject *self) { return PyTuple_GET_SIZE(((fhpy_lease *)self)->handles); }

static PyObject *lease_iter(PyObject *self) { return PyObject_GetIter(((fhpy_lease *)self)->handles); }

static PyObject *lease_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *lease_exit(PyObject *self, PyObject *args)
{
    (void)args;
    fhpy_lease *l = (fhpy_lease *)self;
    if (l->released)
        Py_RETURN_FALSE;
    PyObject *r = lease_release(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *lease_add_consumer_stream(PyObject *self, PyObject *stream)
{
    fhpy_lease *l = (fhpy_lease *)self;
    if (l->released)
        return fhpy_raise_msg(FHR_E_LEASE, "lease_add_consumer_stream: the lease was already "
                                           "released");
    if (l->at.kind != FHR_LOC_CUDA)
        Py_RETURN_NONE; /* host consumers need no completion event */
    if (lease_add_consumer(self, l->at, stream) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *lease_get_released(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((fhpy_lease *)self)->released);
}

static PyObject *lease_get_loc(PyObject *self, void *c)
{
    (void)c;
    return fhpy_loc_new(((fhpy_lease *)self)->at);
}

static PyObject *lease_get_handles(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(((fhpy_lease *)self)->handles);
}

static PyMethodDef lease_methods[] = {
    {"release", lease_release, METH_NOARGS,
     "release($self, /)\n--\n\nEnds the borrow at once (fhr_lease_release / fhr_hold_release):"
     " copies stay protected until consumer events complete and, for a lease, until the arrays"
     " exported from it are deleted. Returns None. Raises ResidencyLeaseError when already "
     "released."},
    {"add_consumer_stream", lease_add_consumer_stream, METH_O,
     "add_consumer_stream($self, stream, /)\n--\n\nRegisters another consumer stream "
     "(fhr_lease_add_consumer_stream); the lease keeps the stream object until it is released."
     " Returns None. Raises ResidencyError subclasses as the C status says (fheplan-python(7) "
     "ERRORS); TypeError or ResidencyValueError for a bad argument, naming it."},
    {"__enter__", lease_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", lease_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nEnds it (as release or exit). "
     "Returns False: exceptions propagate."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef lease_getset[] = {
    {"released", lease_get_released, NULL, NULL, NULL},
    {"location", lease_get_loc, NULL, NULL, NULL},
    {"handles", lease_get_handles, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMappingMethods lease_mapping = {lease_len, lease_getitem, NULL};

PyTypeObject fhpy_lease_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyLease",
    .tp_basicsize = sizeof(fhpy_lease),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A time-bounded immutable borrow: lease[handle] is the borrowed value.",
    .tp_dealloc = lease_dealloc,
    .tp_as_mapping = &lease_mapping,
    .tp_iter = lease_iter,
    .tp_methods = lease_methods,
    .tp_getset = lease_getset,
};

/* ---- holds ---------------------------------------------------------------------------------- */

static PyObject *hold_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_hold *h = (fhpy_hold *)self;
    if (h->released)
        return fhpy_raise_msg(FHR_E_LEASE, "hold_release: the hold was already released");
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_hold_release(h->hold, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        return fhpy_fail(&e);
    }
    h->released = 1;
    Py_RETURN_NONE;
}

static void hold_dealloc(PyObject *self)
{
    fhpy_hold *h = (fhpy_hold *)self;
    Py_BEGIN_ALLOW_THREADS
    fhr_hold_destroy(h->hold);
    Py_END_ALLOW_THREADS
    Py_XDECREF(h->mgr);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *hold_exit(PyObject *self, PyObject *args)
{
    (void)args;
    if (((fhpy_hold *)self)->released)
        Py_RETURN_FALSE;
    PyObject *r = hold_release(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *hold_get_released(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((fhpy_hold *)self)->released);
}

static PyMethodDef hold_methods[] = {
    {"release", hold_release, METH_NOARGS,
     "release($self, /)\n--\n\nEnds the hold at once (fhr_hold_release). Returns None. Raises "
     "ResidencyLeaseError when already released."},
    {"__enter__", lease_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", hold_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nEnds it (as release or exit). "
     "Returns False: exceptions propagate."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef hold_getset[] = {{"released", hold_get_released, NULL, NULL, NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_hold_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyHold",
    .tp_basicsize = sizeof(fhpy_hold),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Retention without values: removal is refused while the hold is active.",
    .tp_dealloc = hold_dealloc,
    .tp_methods = hold_methods,
    .tp_getset = hold_getset,
};
