/* python/src/value.c — values without copies: DLPack producers adopted as the buffers of an
 * fhr_value (each buffer's release drops its producers), CKKS metadata, and the views a
 * lease hands out (__dlpack__, __dlpack_device__, __cuda_array_interface__,
 * __array_interface__), application-owned Values, and the queue of released producers.
 * Calls core.c and stream.c only. */
#include "fhpy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static PyObject *meta_type; /* fheplan.CKKSMeta, set by the package */

int fhpy_backend_is_cuda(fhr_backend *b)
{
    return b && b->ops && b->ops->name && strcmp(b->ops->name, "cuda") == 0;
}

/* ---- dtypes --------------------------------------------------------------------------- */

static const struct {
    const char *name;
    fhpy_dl_dtype dt;
    const char *typestr;
} dtypes[] = {
    {"bool", {FHPY_DL_BOOL, 8, 1}, "|b1"},       {"int8", {FHPY_DL_INT, 8, 1}, "|i1"},
    {"int16", {FHPY_DL_INT, 16, 1}, "<i2"},      {"int32", {FHPY_DL_INT, 32, 1}, "<i4"},
    {"int64", {FHPY_DL_INT, 64, 1}, "<i8"},      {"uint8", {FHPY_DL_UINT, 8, 1}, "|u1"},
    {"uint16", {FHPY_DL_UINT, 16, 1}, "<u2"},    {"uint32", {FHPY_DL_UINT, 32, 1}, "<u4"},
    {"uint64", {FHPY_DL_UINT, 64, 1}, "<u8"},    {"float16", {FHPY_DL_FLOAT, 16, 1}, "<f2"},
    {"float32", {FHPY_DL_FLOAT, 32, 1}, "<f4"},  {"float64", {FHPY_DL_FLOAT, 64, 1}, "<f8"},
    {"bfloat16", {FHPY_DL_BFLOAT, 16, 1}, "<V2"}, {"complex64", {FHPY_DL_COMPLEX, 64, 1}, "<c8"},
    {"complex128", {FHPY_DL_COMPLEX, 128, 1}, "<c16"},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

static int dtype_index(fhpy_dl_dtype d)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dt.code == d.code && dtypes[i].dt.bits == d.bits && d.lanes == 1)
            return (int)i;
    return -1;
}

int fhpy_parse_dtype(PyObject *o, fhpy_dl_dtype *out)
{
    PyObject *s = NULL;
    if (PyUnicode_Check(o))
        s = Py_NewRef(o);
    else if (PyObject_HasAttrString(o, "name") && PyObject_HasAttrString(o, "itemsize"))
        s = PyObject_GetAttrString(o, "name"); /* a NumPy dtype */
    else
        s = PyObject_Str(o);                   /* torch.int64 -> "torch.int64" */
    if (!s)
        return 0;
    const char *t = PyUnicode_AsUTF8(s);
    if (!t) {
        Py_DECREF(s);
        return 0;
    }
    if (strncmp(t, "torch.", 6) == 0)
        t += 6;
    for (size_t i = 0; i < NDTYPES; i++)
        if (strcmp(t, dtypes[i].name) == 0) {
            *out = dtypes[i].dt;
            Py_DECREF(s);
            return 1;
        }
    PyErr_Format(fhpy_exc[FHR_E_INVALID], "unknown dtype '%s'", t);
    Py_DECREF(s);
    return 0;
}

/* ---- CKKS metadata ------------------------------------------------------------------------ */

static PyObject *get_field(PyObject *o, const char *name)
{
    if (PyDict_Check(o)) {
        PyObject *v = PyDict_GetItemString(o, name);
        return v ? Py_NewRef(v) : NULL;
    }
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v)
        PyErr_Clear();
    return v;
}

static const char *const domain_names[] = {NULL, "coeff", "eval"};
static const char *const relation_names[] = {NULL, "rotation", "conjugation", "relinearization"};

static int name_index(PyObject *v, const char *const *names, int n, const char *what, int *out)
{
    if (v == Py_None) {
        *out = 0;
        return 1;
    }
    if (PyLong_Check(v)) {
        long i = PyLong_AsLong(v);
        if (i >= 0 && i < n) {
            *out = (int)i;
            return 1;
        }
    } else if (PyUnicode_Check(v)) {
        const char *t = PyUnicode_AsUTF8(v);
        for (int i = 1; t && i < n; i++)
            if (strcmp(t, names[i]) == 0) {
                *out = i;
                return 1;
            }
    } else if (PyObject_HasAttrString(v, "value")) { /* an enum member */
        PyObject *x = PyObject_GetAttrString(v, "value");
        int r = x ? name_index(x, names, n, what, out) : 0;
        Py_XDECREF(x);
        return r;
    }
    PyErr_Format(fhpy_exc[FHR_E_INVALID], "CKKS metadata: bad %s %R", what, v);
    return 0;
}

int fhpy_meta(PyObject *o, fhr_ckks_meta *m)
{
    memset(m, 0, sizeof *m);
    if (!o || o == Py_None)
        return 1;
    PyObject *v;
    int ok = 1;
    if (ok && (v = get_field(o, "context_id"))) {
        m->context_id = PyLong_AsUnsignedLongLong(v);
        ok = !PyErr_Occurred();
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "level"))) {
        m->level = (int32_t)PyLong_AsLong(v);
        ok = !PyErr_Occurred();
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "scale"))) {
        m->scale = PyFloat_AsDouble(v);
        ok = !PyErr_Occurred();
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "key_param"))) {
        m->key_param = PyLong_AsLongLong(v);
        ok = !PyErr_Occurred();
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "domain"))) {
        int d = 0;
        ok = name_index(v, domain_names, 3, "domain", &d);
        m->domain = (fhr_domain)d;
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "key_relation"))) {
        int d = 0;
        ok = name_index(v, relation_names, 4, "key relation", &d);
        m->key_relation = (fhr_key_relation)d;
        Py_DECREF(v);
    }
    if (ok && (v = get_field(o, "prime_ids")) && v != Py_None) {
        PyObject *seq = PySequence_Fast(v, "CKKS metadata: prime_ids is a sequence of ints");
        Py_DECREF(v);
        if (!seq)
            return 0;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n > FHR_MAX_PRIMES) {
            Py_DECREF(seq);
            PyErr_Format(fhpy_exc[FHR_E_INVALID], "CKKS metadata: %zd prime ids exceed %d", n,
                         FHR_MAX_PRIMES);
            return 0;
        }
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            m->prime_ids[i] = (uint32_t)PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
            ok = !PyErr_Occurred();
        }
        m->n_primes = (uint32_t)n;
        Py_DECREF(seq);
    } else if (v == Py_None)
        Py_DECREF(v);
    return ok && !PyErr_Occurred();
}

PyObject *fhpy_meta_object(const fhr_ckks_meta *m)
{
    PyObject *primes = PyTuple_New(m->n_primes);
    if (!primes)
        return NULL;
    for (uint32_t i = 0; i < m->n_primes; i++)
        PyTuple_SET_ITEM(primes, i, PyLong_FromUnsignedLong(m->prime_ids[i]));
    PyObject *kw = Py_BuildValue(
        "{s:K,s:i,s:d,s:N,s:s,s:s,s:L}", "context_id", (unsigned long long)m->context_id,
        "level", m->level, "scale", m->scale, "prime_ids", primes, "domain",
        m->domain > 0 && m->domain < 3 ? domain_names[m->domain] : NULL, "key_relation",
        m->key_relation > 0 && m->key_relation < 4 ? relation_names[m->key_relation] : NULL,
        "key_param", (long long)m->key_param);
    if (!kw)
        return NULL;
    PyObject *r;
    if (meta_type) {
        PyObject *args = PyTuple_New(0);
        r = args ? PyObject_Call(meta_type, args, kw) : NULL;
        Py_XDECREF(args);
    } else
        r = fhpy_record("meta", kw);
    Py_DECREF(kw);
    return r;
}

PyObject *fhpy_set_meta_type(PyObject *self, PyObject *t)
{
    (void)self;
    Py_XSETREF(meta_type, Py_NewRef(t));
    Py_RETURN_NONE;
}

/* ---- adoption without copies ---------------------------------------------------------------- */

/* The producers behind one buffer of a value. */
typedef struct foreign_ctx {
    size_t n;
    fhpy_dl_managed *mt[];
} foreign_ctx;

static void release_managed(fhpy_dl_managed *mt)
{
    if (mt && mt->deleter)
        mt->deleter(mt);
}

void fhpy_foreign_release_ctx(void *p)
{
    foreign_ctx *c = p;
    for (size_t i = 0; i < c->n; i++)
        release_managed(c->mt[i]);
    free(c);
}

typedef struct field_in {
    PyObject *name;        /* borrowed from the items list */
    fhpy_dl_managed *mt;   /* owned until handed to a buffer */
    char *start;
    size_t nbytes;
    size_t buffer, offset;
} field_in;

static int cmp_start(const void *a, const void *b)
{
    const field_in *x = *(field_in *const *)a, *y = *(field_in *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The items (name, array) of what adopt or a load was given. */
static PyObject *value_items(PyObject *value, PyObject **meta_default)
{
    *meta_default = NULL;
    PyObject *fields = NULL;
    int producer = PyObject_HasAttrString(value, "__dlpack__");
    if (!PyDict_Check(value) && PyObject_HasAttrString(value, "fields") && !producer) {
        fields = PyObject_GetAttrString(value, "fields");
        if (PyObject_HasAttrString(value, "meta"))
            *meta_default = PyObject_GetAttrString(value, "meta");
    } else if (!producer && (PyDict_Check(value) || (PyMapping_Check(value) &&
                                                    PyObject_HasAttrString(value, "items"))))
        fields = Py_NewRef(value);
    if (!fields) {
        if (PyErr_Occurred())
            return NULL;
        if (!producer) {
            PyErr_Format(PyExc_TypeError, "value must be a DLPack producer (an array), a "
                                          "mapping {field name: array} or an object with "
                                          ".fields, not %.80s", Py_TYPE(value)->tp_name);
            return NULL;
        }
        return Py_BuildValue("[(sO)]", "data", value);
    }
    if (!PyDict_Check(fields) && !(PyMapping_Check(fields) &&
                                   PyObject_HasAttrString(fields, "items"))) {
        PyErr_Format(PyExc_TypeError, "value.fields must be a mapping {field name: array}, "
                                      "not %.80s", Py_TYPE(fields)->tp_name);
        Py_DECREF(fields);
        return NULL;
    }
    PyObject *items = PyMapping_Items(fields);
    Py_DECREF(fields);
    return items;
}

/* Imports one producer: its managed tensor (owned by the caller on success). */
static int import_one(fhr_backend *be, PyObject *name, PyObject *arr, fhr_location at,
                      fhr_stream *order, field_in *f, fhpy_dl_dtype *dt, PyObject **shape)
{
    if (!PyObject_HasAttrString(arr, "__dlpack__")) {
        PyErr_Format(PyExc_TypeError, "field '%U': %.80s is not a DLPack producer (no __dlpack__)",
                     name, Py_TYPE(arr)->tp_name);
        return 0;
    }
    PyObject *dev = PyObject_CallMethod(arr, "__dlpack_device__", NULL);
    int dtype_, did;
    if (!dev || !PyArg_ParseTuple(dev, "ii", &dtype_, &did)) {
        Py_XDECREF(dev);
        return 0;
    }
    Py_DECREF(dev);
    int real_cuda = fhpy_backend_is_cuda(be);
    char lb[24];
    fhr_loc_format(at, lb, sizeof lb);
    int ok;
    if (at.kind == FHR_LOC_CUDA)
        ok = real_cuda ? ((dtype_ == FHPY_DL_CUDA || dtype_ == FHPY_DL_CUDA_MANAGED) &&
                          did == at.index)
                       : dtype_ == FHPY_DL_CPU; /* the emulated device's memory is host memory */
    else
        ok = dtype_ == FHPY_DL_CPU || dtype_ == FHPY_DL_CUDA_HOST;
    if (!ok) {
        fhpy_raise_msg(FHR_E_LOCATION, "field '%s': the array lives on DLPack device (%d, %d), "
                                       "not at %s%s", PyUnicode_AsUTF8(name), dtype_, did, lb,
                       at.kind == FHR_LOC_CUDA && !real_cuda
                           ? " (the emulated device takes host arrays)" : "");
        return 0;
    }
    PyObject *caps;
    if (dtype_ == FHPY_DL_CUDA && order) {
        void *native = NULL;
        FHPY_ERR_INIT(e);
        if (fhr_stream_native(be, order, &native, NULL, &e) != FHR_OK) {
            fhpy_fail(&e);
            return 0;
        }
        /* stream=: the producer orders its pending work before our stream */
        PyObject *kw = Py_BuildValue("{s:N}", "stream", PyLong_FromVoidPtr(native));
        PyObject *meth = PyObject_GetAttrString(arr, "__dlpack__");
        PyObject *noargs = PyTuple_New(0);
        caps = kw && meth && noargs ? PyObject_Call(meth, noargs, kw) : NULL;
        Py_XDECREF(kw);
        Py_XDECREF(meth);
        Py_XDECREF(noargs);
    } else
        caps = PyObject_CallMethod(arr, "__dlpack__", NULL);
    if (!caps)
        return 0;
    fhpy_dl_managed *mt = PyCapsule_GetPointer(caps, FHPY_DL_NAME);
    if (!mt || PyCapsule_SetName(caps, FHPY_DL_USED) < 0) {
        Py_DECREF(caps);
        return 0;
    }
    Py_DECREF(caps);
    fhpy_dl_tensor *t = &mt->dl_tensor;
    const char *why = NULL;
    uint64_t elems = 1;
    size_t esize = (size_t)t->dtype.bits * t->dtype.lanes / 8;
    if (t->dtype.bits % 8 || esize == 0)
        why = "elements are not whole bytes";
    else if (t->ndim < 0 || t->ndim > 8)
        why = "more than 8 dimensions";
    for (int i = 0; !why && i < t->ndim; i++)
        elems *= (uint64_t)t->shape[i];
    if (!why && t->strides) { /* compact row-major only: the bytes must be one span */
        int64_t expect = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (t->shape[i] != 1 && t->strides[i] != expect) {
                why = "it is not contiguous (adopt takes the producer's memory as it is: "
                      "no defensive copy is made)";
                break;
            }
            expect *= t->shape[i];
        }
    }
    if (!why && elems == 0)
        why = "it is empty";
    if (why) {
        release_managed(mt);
        fhpy_raise_msg(FHR_E_INVALID, "field '%s': %s", PyUnicode_AsUTF8(name), why);
        return 0;
    }
    f->mt = mt;
    f->name = name;
    f->start = (char *)t->data + t->byte_offset;
    f->nbytes = (size_t)(elems * esize);
    *dt = t->dtype;
    *shape = PyTuple_New(t->ndim);
    if (!*shape)
        return 0; /* the caller releases f->mt */
    for (int i = 0; i < t->ndim; i++)
        PyTuple_SET_ITEM(*shape, i, PyLong_FromLongLong(t->shape[i]));
    return 1;
}

int fhpy_build_value(fhr_backend *be, PyObject *value, PyObject *meta_obj, fhr_location at,
                     fhr_stream *order, fhr_value **out, PyObject **layout)
{
    *out = NULL;
    *layout = NULL;
    PyObject *meta_default = NULL;
    PyObject *items = value_items(value, &meta_default);
    if (!items)
        return 0;
    if (!PyList_Check(items)) {
        Py_DECREF(items);
        PyErr_SetString(PyExc_TypeError, "value: its fields' items() must give a list");
        return 0;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    field_in *fs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *fs);
    field_in **order_ = PyMem_Calloc(n ? (size_t)n : 1, sizeof *order_);
    PyObject *lay = PyTuple_New(n);
    fhr_value *v = NULL;
    int ok = fs && order_ && lay;
    if (!ok)
        PyErr_NoMemory();
    if (ok && n == 0) {
        fhpy_raise_msg(FHR_E_INVALID, "a value needs at least one field");
        ok = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i), *name = PyTuple_GET_ITEM(it, 0);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "field names are strings");
            ok = 0;
            break;
        }
        fhpy_dl_dtype dt;
        PyObject *shape = NULL;
        ok = import_one(be, name, PyTuple_GET_ITEM(it, 1), at, order, &fs[i], &dt, &shape);
        if (ok) {
            PyObject *e = Py_BuildValue("(O(iii)N)", name, dt.code, dt.bits, dt.lanes, shape);
            ok = e != NULL;
            if (ok)
                PyTuple_SET_ITEM(lay, i, e);
        }
        order_[i] = &fs[i];
    }
    fhr_ckks_meta meta;
    if (ok)
        ok = fhpy_meta(meta_obj && meta_obj != Py_None ? meta_obj : meta_default, &meta);
    FHPY_ERR_INIT(e);
    if (ok && fhr_value_create(at, &meta, &v, &e) != FHR_OK) {
        fhpy_fail(&e);
        ok = 0;
    }
    /* Fields whose bytes overlap share one buffer (views of one allocation): the value's
     * storage counts those bytes once, its logical size once per field. */
    if (ok) {
        qsort(order_, (size_t)n, sizeof *order_, cmp_start);
        for (Py_ssize_t i = 0; ok && i < n;) {
            Py_ssize_t j = i + 1;
            char *lo = order_[i]->start, *hi = lo + order_[i]->nbytes;
            while (j < n && order_[j]->start < hi) {
                if (order_[j]->start + order_[j]->nbytes > hi)
                    hi = order_[j]->start + order_[j]->nbytes;
                j++;
            }
            foreign_ctx *c = malloc(sizeof *c + (size_t)(j - i) * sizeof c->mt[0]);
            if (!c) {
                PyErr_NoMemory();
                ok = 0;
                break;
            }
            c->n = 0;
            for (Py_ssize_t k = i; k < j; k++) {
                c->mt[c->n++] = order_[k]->mt;
                order_[k]->offset = (size_t)(order_[k]->start - lo);
            }
            size_t bi;
            if (fhr_value_add_buffer(v, lo, (size_t)(hi - lo), fhpy_foreign_free, c, &bi, &e) !=
                FHR_OK) {
                free(c);
                fhpy_fail(&e);
                ok = 0;
                break;
            }
            for (Py_ssize_t k = i; k < j; k++) {
                order_[k]->mt = NULL; /* the buffer owns it now */
                order_[k]->buffer = bi;
            }
            i = j;
        }
    }
    for (Py_ssize_t i = 0; ok && i < n; i++)
        if (fhr_value_add_field(v, PyUnicode_AsUTF8(fs[i].name), fs[i].buffer, fs[i].offset,
                                fs[i].nbytes, &e) != FHR_OK) {
            fhpy_fail(&e);
            ok = 0;
        }
    for (Py_ssize_t i = 0; fs && i < n; i++)
        release_managed(fs[i].mt); /* those no buffer took (failures only) */
    if (!ok) {
        fhr_value_destroy(v); /* queues the producers its buffers took */
        fhpy_release_drain();
        Py_XDECREF(lay);
    } else {
        *out = v;
        *layout = lay;
    }
    fhr_error_clear(&e);
    PyMem_Free(fs);
    PyMem_Free(order_);
    Py_XDECREF(meta_default);
    Py_DECREF(items);
    return ok;
}

/* ---- views ------------------------------------------------------------------------------- */

PyObject *fhpy_leased_new(PyObject *owner, const fhpy_owner_ops *ops, const fhr_value *v,
                          PyObject *layout, PyObject *handle)
{
    fhpy_leased *o = PyObject_New(fhpy_leased, &fhpy_leased_type);
    if (!o)
        return NULL;
    o->owner = Py_NewRef(owner);
    o->ops = ops;
    o->v = v;
    o->layout = Py_NewRef(layout ? layout : Py_None);
    o->handle = Py_XNewRef(handle);
    o->loc = fhr_value_location(v);
    o->cuda = o->loc.kind == FHR_LOC_CUDA && fhpy_backend_is_cuda(ops->backend(owner));
    o->writable = 0;
    return (PyObject *)o;
}

static void leased_dealloc(PyObject *self)
{
    fhpy_leased *o = (fhpy_leased *)self;
    Py_XDECREF(o->owner);
    Py_XDECREF(o->layout);
    Py_XDECREF(o->handle);
    Py_TYPE(self)->tp_free(self);
}

/* Every accessor of a LeasedValue and of its FieldViews starts here (core.c, rule 1). */
static int leased_check(fhpy_leased *o) { return fhpy_alive(o->owner, o->ops); }

/* The view's dtype and shape from the field's recorded layout (dtype d, shape) when its
 * nb bytes are the layout's, or whole rows of it (a partial copy of a cut value holds
 * fewer limbs: the first dimension shrinks); else it stays nb bytes. */
static void layout_shape(fhpy_view *o, fhpy_dl_dtype d, PyObject *shape, size_t nb)
{
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    int64_t dims[8];
    uint64_t item = (uint64_t)d.bits * d.lanes / 8, row = item, all = item;
    if (nd > 8)
        return;
    for (Py_ssize_t s = 0; s < nd; s++) {
        dims[s] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, s));
        all *= (uint64_t)dims[s];
        row *= s ? (uint64_t)dims[s] : 1; /* the bytes of one index of dimension 0 */
    }
    if (all != nb && (nd == 0 || row == 0 || nb % row))
        return;
    if (all != nb)
        dims[0] = (int64_t)(nb / row);
    o->dtype = d;
    o->ndim = (int)nd;
    for (Py_ssize_t s = 0; s < nd; s++)
        o->shape[s] = dims[s];
}

static PyObject *view_new(fhpy_leased *val, Py_ssize_t i)
{
    void *p;
    size_t nb;
    if (fhr_value_field_at(val->v, (size_t)i, &p, &nb) != FHR_OK)
        return fhpy_raise_msg(FHR_E_STATE, "field %zd has no storage in this copy", i);
    fhpy_view *o = PyObject_New(fhpy_view, &fhpy_view_type);
    if (!o)
        return NULL;
    o->val = (fhpy_leased *)Py_NewRef(val);
    o->field = i;
    o->dtype = (fhpy_dl_dtype){FHPY_DL_UINT, 8, 1};
    o->ndim = 1;
    o->shape[0] = (int64_t)nb;
    const char *name = fhr_value_field_name(val->v, (size_t)i);
    if (PyTuple_Check(val->layout))
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(val->layout); k++) {
            PyObject *e = PyTuple_GET_ITEM(val->layout, k);
            const char *ln = PyUnicode_AsUTF8(PyTuple_GET_ITEM(e, 0));
            if (!ln || strcmp(ln, name) != 0)
                continue;
            PyObject *dt = PyTuple_GET_ITEM(e, 1), *shape = PyTuple_GET_ITEM(e, 2);
            fhpy_dl_dtype d = {(uint8_t)PyLong_AsLong(PyTuple_GET_ITEM(dt, 0)),
                               (uint8_t)PyLong_AsLong(PyTuple_GET_ITEM(dt, 1)),
                               (uint16_t)PyLong_AsLong(PyTuple_GET_ITEM(dt, 2))};
            layout_shape(o, d, shape, nb);
            break;
        }
    return (PyObject *)o;
}

static Py_ssize_t leased_len(PyObject *self)
{
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return -1;
    return (Py_ssize_t)fhr_value_nfields(o->v);
}

static PyObject *leased_getitem(PyObject *self, PyObject *key)
{
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
    if (!k) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    size_t n = fhr_value_nfields(o->v);
    for (size_t i = 0; i < n; i++)
        if (strcmp(fhr_value_field_name(o->v, i), k) == 0)
            return view_new(o, (Py_ssize_t)i);
    PyErr_SetObject(PyExc_KeyError, key);
    return NULL;
}

static PyObject *leased_keys(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    size_t n = fhr_value_nfields(o->v);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++)
        PyList_SET_ITEM(l, (Py_ssize_t)i, PyUnicode_FromString(fhr_value_field_name(o->v, i)));
    return l;
}

static PyObject *leased_iter(PyObject *self)
{
    PyObject *k = leased_keys(self, NULL);
    PyObject *it = k ? PyObject_GetIter(k) : NULL;
    Py_XDECREF(k);
    return it;
}

static PyObject *leased_items(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    size_t n = fhr_value_nfields(o->v);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *v = view_new(o, (Py_ssize_t)i);
        PyObject *t = v ? Py_BuildValue("(sN)", fhr_value_field_name(o->v, i), v) : NULL;
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static PyObject *single_view(fhpy_leased *o)
{
    if (!leased_check(o))
        return NULL;
    if (fhr_value_nfields(o->v) != 1)
        return fhpy_raise_msg(FHR_E_INVALID, "the value has %zu fields: export one of them "
                                             "(value['name'])", fhr_value_nfields(o->v));
    return view_new(o, 0);
}

static PyObject *view_dlpack(PyObject *self, PyObject *args, PyObject *kw);
static PyObject *view_dlpack_device(PyObject *self, PyObject *unused);

static PyObject *leased_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    PyObject *v = single_view((fhpy_leased *)self);
    if (!v)
        return NULL;
    PyObject *r = view_dlpack(v, args, kw);
    Py_DECREF(v);
    return r;
}

static PyObject *leased_dlpack_device(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    return Py_BuildValue("(ii)", o->cuda ? FHPY_DL_CUDA : FHPY_DL_CPU,
                         o->cuda ? o->loc.index : 0);
}

static PyObject *leased_get_meta(PyObject *self, void *c)
{
    (void)c;
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    return fhpy_meta_object(fhr_value_meta(o->v));
}

static PyObject *leased_get_loc(PyObject *self, void *c)
{
    (void)c;
    if (!leased_check((fhpy_leased *)self))
        return NULL;
    return fhpy_loc_new(((fhpy_leased *)self)->loc);
}

static PyObject *leased_get_nbytes(PyObject *self, void *c)
{
    (void)c;
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    return Py_BuildValue("{s:K,s:K}", "logical_nbytes",
                         (unsigned long long)fhr_value_logical_nbytes(o->v), "storage_nbytes",
                         (unsigned long long)fhr_value_storage_nbytes(o->v));
}

static PyObject *leased_repr(PyObject *self)
{
    fhpy_leased *o = (fhpy_leased *)self;
    if (!leased_check(o))
        return NULL;
    char lb[24];
    fhr_loc_format(o->loc, lb, sizeof lb);
    return PyUnicode_FromFormat("<fheplan value at %s, %zu fields>", lb, fhr_value_nfields(o->v));
}

static PyMethodDef leased_methods[] = {
    {"keys", leased_keys, METH_NOARGS,
     "keys($self, /)\n--\n\nReturns the field names (a list). Raises ResidencyLeaseError once "
     "the owner ended."},
    {"items", leased_items, METH_NOARGS,
     "items($self, /)\n--\n\nReturns (name, FieldView) pairs. Raises ResidencyLeaseError once "
     "the owner ended."},
    {"__dlpack__", (PyCFunction)(void (*)(void))leased_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--"
     "\n\nReturns a DLPack capsule of the memory, no copy; the copy stays protected until the "
     "consumer deletes the array (fheplan-python(7) OWNERSHIP). stream: the consumer's stream,"
     " ordered after the value. Raises ResidencyLeaseError once the owner ended."},
    {"__dlpack_device__", leased_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nReturns (device type, device id) as DLPack names "
     "them. Raises ResidencyLeaseError once the owner ended."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef leased_getset[] = {
    {"meta", leased_get_meta, NULL, "CKKS metadata", NULL},
    {"location", leased_get_loc, NULL, "where this copy lives", NULL},
    {"nbytes", leased_get_nbytes, NULL, "logical and storage bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMappingMethods leased_mapping = {leased_len, leased_getitem, NULL};

PyTypeObject fhpy_leased_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.LeasedValue",
    .tp_basicsize = sizeof(fhpy_leased),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A borrowed concrete value: a read-only mapping of field names to views.",
    .tp_dealloc = leased_dealloc,
    .tp_as_mapping = &leased_mapping,
    .tp_iter = leased_iter,
    .tp_repr = leased_repr,
    .tp_methods = leased_methods,
    .tp_getset = leased_getset,
};

/* One field as DLPack. The exported tensor keeps the view (and so its owner) alive, and
 * the owner keeps the memory for it (ops->export_begin: a hold on a managed copy, a count
 * on a Value) until the consumer's deleter runs (core.c, rule 2). */
typedef struct export_ctx {
    fhpy_dl_managed mt;
    int64_t shape[8];
    PyObject *view;
    void *token;           /* what ops->export_end takes */
} export_ctx;

static void export_deleter(fhpy_dl_managed *mt)
{
    export_ctx *x = (export_ctx *)mt;
    PyGILState_STATE g = PyGILState_Ensure();
    fhpy_leased *val = ((fhpy_view *)x->view)->val;
    if (val->ops->export_end)
        val->ops->export_end(val->owner, x->token);
    Py_XDECREF(x->view);
    PyGILState_Release(g);
    free(x);
}

static void capsule_destructor(PyObject *caps)
{
    if (!PyCapsule_IsValid(caps, FHPY_DL_NAME))
        return; /* consumed: the consumer calls the deleter */
    fhpy_dl_managed *mt = PyCapsule_GetPointer(caps, FHPY_DL_NAME);
    if (mt && mt->deleter)
        mt->deleter(mt);
}

static void *view_ptr(fhpy_view *o, size_t *nb)
{
    void *p = NULL;
    size_t n = 0;
    fhr_value_field_at(o->val->v, (size_t)o->field, &p, &n);
    if (nb)
        *nb = n;
    return p;
}

static PyObject *view_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_view *o = (fhpy_view *)self;
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    static char *kwl[] = {"stream", "max_version", "dl_device", "copy", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwl, &stream, &max_version, &dl_device,
                                     &copy))
        return NULL;
    if (copy == Py_True)
        return fhpy_raise_msg(FHR_E_INVALID, "__dlpack__(copy=True): a lease exports its "
                                             "memory, never a copy (use fheplan.to)");
    if (!leased_check(o->val))
        return NULL;
    /* stream: the consumer's stream; ordered after the value is ready and protecting the
     * copy until its work completes (lease.add_consumer_stream). -1: no ordering asked. */
    if (stream != Py_None && o->val->ops->add_consumer &&
        !(PyLong_Check(stream) && PyLong_AsLong(stream) == -1) &&
        o->val->loc.kind == FHR_LOC_CUDA &&
        o->val->ops->add_consumer(o->val->owner, o->val->loc, stream) < 0)
        return NULL;
    export_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return PyErr_NoMemory();
    if (o->val->ops->export_begin &&
        !o->val->ops->export_begin(o->val->owner, o->val->handle, o->val->loc, &x->token)) {
        free(x);
        return NULL;
    }
    size_t nb;
    x->mt.dl_tensor.data = view_ptr(o, &nb);
    x->mt.dl_tensor.device = (fhpy_dl_device){o->val->cuda ? FHPY_DL_CUDA : FHPY_DL_CPU,
                                              o->val->cuda ? o->val->loc.index : 0};
    x->mt.dl_tensor.ndim = o->ndim;
    x->mt.dl_tensor.dtype = o->dtype;
    memcpy(x->shape, o->shape, sizeof x->shape);
    x->mt.dl_tensor.shape = x->shape;
    x->mt.dl_tensor.strides = NULL;
    x->mt.dl_tensor.byte_offset = 0;
    x->mt.deleter = export_deleter;
    x->view = Py_NewRef(self);
    x->mt.manager_ctx = x;
    PyObject *caps = PyCapsule_New(&x->mt, FHPY_DL_NAME, capsule_destructor);
    if (!caps)
        export_deleter(&x->mt);
    return caps;
}

static PyObject *view_dlpack_device(PyObject *self, PyObject *unused)
{
    return leased_dlpack_device((PyObject *)((fhpy_view *)self)->val, unused);
}

static int view_check(PyObject *self) { return leased_check(((fhpy_view *)self)->val); }

static PyObject *shape_tuple(fhpy_view *o)
{
    PyObject *t = PyTuple_New(o->ndim);
    for (int i = 0; t && i < o->ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(o->shape[i]));
    return t;
}

static PyObject *typestr(fhpy_view *o)
{
    int i = dtype_index(o->dtype);
    return PyUnicode_FromString(i >= 0 ? dtypes[i].typestr : "|u1");
}

static PyObject *array_interface(fhpy_view *o, int version)
{
    if (!leased_check(o->val))
        return NULL;
    PyObject *shape = shape_tuple(o), *ts = typestr(o);
    return Py_BuildValue("{s:N,s:N,s:(NO),s:O,s:i}", "shape", shape, "typestr", ts, "data",
                         PyLong_FromVoidPtr(view_ptr(o, NULL)),
                         o->val->writable ? Py_False : Py_True, "strides", Py_None,
                         "version", version);
}

static PyObject *view_get_cai(PyObject *self, void *c)
{
    (void)c;
    fhpy_view *o = (fhpy_view *)self;
    if (!view_check(self))
        return NULL;
    if (!o->val->cuda) {
        PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: not CUDA memory");
        return NULL;
    }
    return array_interface(o, 3);
}

static PyObject *view_get_ai(PyObject *self, void *c)
{
    (void)c;
    fhpy_view *o = (fhpy_view *)self;
    if (!view_check(self))
        return NULL;
    if (o->val->cuda) {
        PyErr_SetString(PyExc_AttributeError, "__array_interface__: CUDA memory");
        return NULL;
    }
    return array_interface(o, 3);
}

static PyObject *view_get_ptr(PyObject *self, void *c)
{
    (void)c;
    fhpy_view *o = (fhpy_view *)self;
    if (!leased_check(o->val))
        return NULL;
    return PyLong_FromVoidPtr(view_ptr(o, NULL));
}

static PyObject *view_get_nbytes(PyObject *self, void *c)
{
    (void)c;
    size_t nb = 0;
    if (!view_check(self))
        return NULL;
    view_ptr((fhpy_view *)self, &nb);
    return PyLong_FromSize_t(nb);
}

static PyObject *view_get_shape(PyObject *self, void *c)
{
    (void)c;
    if (!view_check(self))
        return NULL;
    return shape_tuple((fhpy_view *)self);
}

static PyObject *view_get_dtype(PyObject *self, void *c)
{
    (void)c;
    if (!view_check(self))
        return NULL;
    int i = dtype_index(((fhpy_view *)self)->dtype);
    return PyUnicode_FromString(i >= 0 ? dtypes[i].name : "uint8");
}

static PyObject *view_get_loc(PyObject *self, void *c)
{
    (void)c;
    if (!view_check(self))
        return NULL;
    return fhpy_loc_new(((fhpy_view *)self)->val->loc);
}

static void view_dealloc(PyObject *self)
{
    Py_XDECREF(((fhpy_view *)self)->val);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *view_repr(PyObject *self)
{
    fhpy_view *o = (fhpy_view *)self;
    if (!view_check(self))
        return NULL;
    PyObject *shape = shape_tuple(o), *dt = view_get_dtype(self, NULL);
    char lb[24];
    fhr_loc_format(o->val->loc, lb, sizeof lb);
    PyObject *r = PyUnicode_FromFormat("<fheplan view '%s' %R %U at %s>",
                                       fhr_value_field_name(o->val->v, (size_t)o->field), shape,
                                       dt, lb);
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    return r;
}

static PyMethodDef view_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))view_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--"
     "\n\nReturns a DLPack capsule of the memory, no copy; the copy stays protected until the "
     "consumer deletes the array (fheplan-python(7) OWNERSHIP). stream: the consumer's stream,"
     " ordered after the value. Raises ResidencyLeaseError once the owner ended."},
    {"__dlpack_device__", view_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nReturns (device type, device id) as DLPack names "
     "them. Raises ResidencyLeaseError once the owner ended."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef view_getset[] = {
    {"__cuda_array_interface__", view_get_cai, NULL, "CUDA array interface (CUDA copies)", NULL},
    {"__array_interface__", view_get_ai, NULL, "NumPy array interface (host memory)", NULL},
    {"ptr", view_get_ptr, NULL, "the field's address", NULL},
    {"nbytes", view_get_nbytes, NULL, "the field's bytes", NULL},
    {"shape", view_get_shape, NULL, NULL, NULL},
    {"dtype", view_get_dtype, NULL, NULL, NULL},
    {"location", view_get_loc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_view_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.FieldView",
    .tp_basicsize = sizeof(fhpy_view),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One field of a borrowed value, exported without a copy.",
    .tp_dealloc = view_dealloc,
    .tp_repr = view_repr,
    .tp_methods = view_methods,
    .tp_getset = view_getset,
};

/* ---- application-owned values: fheplan.to ---------------------------------------------- */

static int value_alive(PyObject *o) { return ((fhpy_value *)o)->v != NULL; }
static fhr_backend *value_backend(PyObject *o) { return ((fhpy_value *)o)->b; }

static int value_export_begin(PyObject *o, PyObject *handle, fhr_location at, void **token)
{
    (void)handle;
    (void)at;
    *token = NULL;
    ((fhpy_value *)o)->nexports++;
    return 1;
}

static void value_export_end(PyObject *o, void *token)
{
    (void)token;
    ((fhpy_value *)o)->nexports--;
}

static void value_pin(PyObject *o, int delta) { ((fhpy_value *)o)->nexports += delta; }

const fhpy_owner_ops fhpy_value_ops = {
    .alive = value_alive,
    .backend = value_backend,
    .export_begin = value_export_begin,
    .export_end = value_export_end,
    .pin = value_pin,
    .ended = "the Value was adopted: the manager owns its memory now (acquire it)",
};

static void value_dealloc(PyObject *self)
{
    fhpy_value *o = (fhpy_value *)self;
    if (o->v) {
        Py_BEGIN_ALLOW_THREADS
        fhr_value_destroy(o->v);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(o->keep);
    Py_XDECREF(o->layout);
    Py_TYPE(self)->tp_free(self);
    fhpy_release_drain();
}

static PyObject *value_view(fhpy_value *o)
{
    if (!o->v)
        return fhpy_raise_msg(FHR_E_STATE, "the value was adopted: the manager owns it now");
    return fhpy_leased_new((PyObject *)o, &fhpy_value_ops, o->v, o->layout, NULL);
}

static PyObject *value_getitem(PyObject *self, PyObject *key)
{
    PyObject *v = value_view((fhpy_value *)self);
    PyObject *r = v ? PyObject_GetItem(v, key) : NULL;
    Py_XDECREF(v);
    return r;
}

static Py_ssize_t value_len(PyObject *self)
{
    fhpy_value *o = (fhpy_value *)self;
    if (!fhpy_alive(self, &fhpy_value_ops))
        return -1;
    return (Py_ssize_t)fhr_value_nfields(o->v);
}

static PyObject *value_fwd(PyObject *self, const char *meth, PyObject *args, PyObject *kw)
{
    PyObject *v = value_view((fhpy_value *)self);
    if (!v)
        return NULL;
    PyObject *m = PyObject_GetAttrString(v, meth);
    PyObject *noargs = args ? NULL : PyTuple_New(0);
    PyObject *r = m && (args || noargs) ? PyObject_Call(m, args ? args : noargs, kw) : NULL;
    Py_XDECREF(noargs);
    Py_XDECREF(m);
    Py_DECREF(v);
    return r;
}

static PyObject *value_keys(PyObject *self, PyObject *u) { (void)u; return value_fwd(self, "keys", NULL, NULL); }
static PyObject *val_items(PyObject *self, PyObject *u) { (void)u; return value_fwd(self, "items", NULL, NULL); }
static PyObject *value_dlpack(PyObject *self, PyObject *a, PyObject *k) { return value_fwd(self, "__dlpack__", a, k); }
static PyObject *value_dlpack_device(PyObject *self, PyObject *u) { (void)u; return value_fwd(self, "__dlpack_device__", NULL, NULL); }

static PyObject *value_get_meta(PyObject *self, void *c)
{
    (void)c;
    fhpy_value *o = (fhpy_value *)self;
    if (!o->v)
        return fhpy_raise_msg(FHR_E_STATE, "the value was adopted");
    return fhpy_meta_object(fhr_value_meta(o->v));
}

static PyObject *value_get_loc(PyObject *self, void *c)
{
    (void)c;
    fhpy_value *o = (fhpy_value *)self;
    if (!o->v)
        return fhpy_raise_msg(FHR_E_STATE, "the value was adopted");
    return fhpy_loc_new(fhr_value_location(o->v));
}

static PyMethodDef value_methods[] = {
    {"keys", value_keys, METH_NOARGS,
     "keys($self, /)\n--\n\nReturns the field names (a list). Raises ResidencyLeaseError once "
     "the owner ended."},
    {"items", val_items, METH_NOARGS,
     "items($self, /)\n--\n\nReturns (name, FieldView) pairs. Raises ResidencyLeaseError once "
     "the owner ended."},
    {"__dlpack__", (PyCFunction)(void (*)(void))value_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--"
     "\n\nReturns a DLPack capsule of the memory, no copy; the copy stays protected until the "
     "consumer deletes the array (fheplan-python(7) OWNERSHIP). stream: the consumer's stream,"
     " ordered after the value. Raises ResidencyLeaseError once the owner ended."},
    {"__dlpack_device__", value_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\nReturns (device type, device id) as DLPack names "
     "them. Raises ResidencyLeaseError once the owner ended."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef value_getset[] = {
    {"meta", value_get_meta, NULL, NULL, NULL},
    {"location", value_get_loc, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMappingMethods value_mapping = {value_len, value_getitem, NULL};

PyTypeObject fhpy_value_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.Value",
    .tp_basicsize = sizeof(fhpy_value),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An application-owned concrete value (what fheplan.to returns); adopt() takes it.",
    .tp_dealloc = value_dealloc,
    .tp_as_mapping = &value_mapping,
    .tp_methods = value_methods,
    .tp_getset = value_getset,
};


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

