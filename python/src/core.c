/* python/src/core.c — what every other file of the extension stands on: the ownership rule,
 * the one liveness check and the argument converters. It calls no function of another file
 * of python/src/ except the error helpers of fhpy.h (module.c builds the exception objects).
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
 *  5. A lease that another thread is reading through without the lock (fheplan.to, an
 *     export taking its hold) is pinned: its release lets no new read start at once, and
 *     the library's release happens when the last pinned read ends.
 */
#include "fhpy.h"

#include <string.h>

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

int fhpy_bytes(PyObject *o, const char *param, uint64_t *out)
{
    PyObject *i = as_int(o, param, "a number of bytes");
    if (!i)
        return 0;
    unsigned long long u = 0;
    int ok = int_in(i, 0, UINT64_MAX, param, "0..2**64-1 (bytes)", NULL, &u);
    Py_DECREF(i);
    if (ok)
        *out = u;
    return ok;
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
    fhr_budget *b = PyMem_Calloc((size_t)PyDict_Size(o) + 1, sizeof *b);
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
            PyMem_Free(b);
            *n = 0;
            return 0;
        }
        (*n)++;
    }
    *out = b;
    return 1;
}
