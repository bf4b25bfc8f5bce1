/* python/src/stream.c — streams: the native stream of a Python stream object (an int, a
 * PyTorch or CuPy stream, a fheplan.Stream), views of them for the library, the maps of
 * {location: stream} arguments, and the fheplan.Stream type. Calls core.c only. */
#include "fhpy.h"

#include <string.h>

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
        PyErr_Format(PyExc_TypeError, "a stream (stream, consumer_stream, a streams dict's "
                                      "value) must be None, an int or an object with "
                                      ".cuda_stream (PyTorch) or .ptr (CuPy, fheplan.Stream), "
                                      "not %.80s", Py_TYPE(o)->tp_name);
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

