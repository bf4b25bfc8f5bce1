/* python/src/manager.c — ResidencyManager: budgets, adopt (no copy), register_source with a
 * Python load, the strict primitives, acquire and hold, snapshots, the trace, explain,
 * scopes and execute_actions; fheplan.to (a copy by a manager's backend). Every call that
 * may wait or copy runs without the interpreter lock; a Python load takes it back. */
#include "fhpy.h"

#include <string.h>

#define NOGIL(st, expr)                                                                      \
    do {                                                                                     \
        Py_BEGIN_ALLOW_THREADS(st) = (expr);                                                 \
        Py_END_ALLOW_THREADS                                                                 \
    } while (0)

/* Raises err, chaining the exception a Python load raised (when that made the call fail);
 * one that is not an Exception (KeyboardInterrupt, SystemExit) is raised unchanged. */
static PyObject *raise_mgr(fhpy_manager *m, fhr_error *e)
{
    PyObject *cause = m->load_exc;
    m->load_exc = NULL;
    if (cause && !PyObject_TypeCheck(cause, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetObject((PyObject *)Py_TYPE(cause), cause);
        Py_DECREF(cause);
        fhr_error_clear(e);
        return NULL;
    }
    fhpy_raise(e);
    fhr_error_clear(e);
    if (cause) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        if (v)
            PyException_SetCause(v, cause);
        else
            Py_DECREF(cause);
        PyErr_Restore(t, v, tb);
    }
    return NULL;
}

static PyObject *finish(fhpy_manager *m, fhr_status st, fhr_error *e)
{
    fhpy_release_drain();
    if (st != FHR_OK)
        return raise_mgr(m, e);
    Py_CLEAR(m->load_exc);
    Py_RETURN_NONE;
}

/* finish() for a call that returns a value: `value` (a new reference, or NULL with the
 * exception of making it) when the call succeeded, else NULL with the call's exception. */
static PyObject *finish_value(fhpy_manager *m, fhr_status st, fhr_error *e, PyObject *value)
{
    PyObject *none = finish(m, st, e);
    if (!none) {
        Py_XDECREF(value);
        return NULL;
    }
    Py_DECREF(none);
    return value;
}

static int check_open(fhpy_manager *m)
{
    if (!m->m) {
        PyErr_SetString(PyExc_RuntimeError, "the ResidencyManager is not initialised");
        return 0;
    }
    return 1;
}

static int parse_mode(PyObject *o, int *out, const char *what)
{
    if (!o || o == Py_None)
        return 1;
    long v = PyLong_AsLong(o);
    if (PyErr_Occurred() || v < 0 || v > 1) {
        PyErr_Clear();
        fhpy_raise_msg(FHR_E_INVALID, "%s: expected %s", what,
                       strcmp(what, "replica_mode") == 0 ? "ReplicaMode.REPLICABLE or EXCLUSIVE"
                                                         : "a Recoverability");
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* ---- life ------------------------------------------------------------------------------- */

static int mgr_init(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *budgets = Py_None, *device_o = Py_None, *trace_o = NULL;
    const char *device = NULL;
    size_t trace = 4096;
    static char *kwl[] = {"budgets", "device", "trace_capacity", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OO", kwl, &budgets, &device_o, &trace_o))
        return -1;
    if (m->m) {
        PyErr_SetString(PyExc_RuntimeError, "ResidencyManager.__init__ called twice");
        return -1;
    }
    if (!fhpy_text(device_o, "device", 1, &device) ||
        (trace_o && !fhpy_count(trace_o, "trace_capacity", (size_t)1 << 40, &trace)))
        return -1;
    fhr_budget *bs = NULL;
    size_t nb = 0;
    if (!fhpy_budgets(budgets, "budgets", &bs, &nb))
        return -1;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_backend_open(device, &m->backend, &e));
    if (st == FHR_OK) {
        fhr_manager_config cfg = {m->backend, bs, (size_t)nb, (size_t)trace};
        NOGIL(st, fhr_manager_create(&cfg, &m->m, &e));
        if (st != FHR_OK) {
            fhr_backend_destroy(m->backend);
            m->backend = NULL;
        }
    }
    free(bs);
    if (st != FHR_OK) {
        fhpy_fail(&e);
        return -1;
    }
    m->layouts = PyDict_New();
    m->sources = PyDict_New();
    m->exports = PyDict_New();
    return m->layouts && m->sources && m->exports ? 0 : -1;
}

static void mgr_dealloc(PyObject *self)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject_GC_UnTrack(self);
    if (m->weakrefs)
        PyObject_ClearWeakRefs(self);
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < FHR_MAX_CUDA_DEVICES; i++)
        if (m->adopt_streams[i])
            fhr_stream_destroy(m->backend, m->adopt_streams[i]);
    if (m->m)
        fhr_manager_destroy(m->m);
    if (m->backend)
        fhr_backend_destroy(m->backend);
    Py_END_ALLOW_THREADS
    fhpy_release_drain();
    Py_XDECREF(m->layouts);
    Py_XDECREF(m->sources);
    Py_XDECREF(m->exports);
    Py_XDECREF(m->load_exc);
    Py_TYPE(self)->tp_free(self);
}

static int mgr_traverse(PyObject *self, visitproc visit, void *arg)
{
    fhpy_manager *m = (fhpy_manager *)self;
    Py_VISIT(m->sources);
    Py_VISIT(m->load_exc);
    return 0;
}

static int mgr_clear(PyObject *self)
{
    fhpy_manager *m = (fhpy_manager *)self;
    Py_CLEAR(m->load_exc);
    return 0;
}

/* ---- adoption ------------------------------------------------------------------------------ */

static int opts_parse(PyObject *mode, PyObject *label, PyObject *priority, fhr_adopt_opts *o)
{
    int md = FHR_REPLICABLE;
    if (!parse_mode(mode, &md, "replica_mode"))
        return 0;
    o->mode = (fhr_replica_mode)md;
    o->priority = 0;
    return fhpy_text(label, "label", 1, &o->label) &&
           (!priority || fhpy_priority(priority, "priority", &o->priority));
}

/* The stream that orders CUDA producers' work before adoption at device `dev`. */
static fhr_stream *adopt_stream(fhpy_manager *m, fhr_location at)
{
    if (at.kind != FHR_LOC_CUDA || !fhpy_backend_is_cuda(m->backend))
        return NULL;
    if (!m->adopt_streams[at.index]) {
        FHPY_ERR_INIT(e);
        if (fhr_stream_create(m->backend, at, &m->adopt_streams[at.index], &e) != FHR_OK) {
            fhpy_fail(&e);
            return NULL;
        }
    }
    return m->adopt_streams[at.index];
}

static PyObject *mgr_adopt(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *value, *at_o = NULL, *mode = Py_None, *meta = Py_None, *label = Py_None;
    PyObject *priority = NULL;
    static char *kwl[] = {"value", "at", "replica_mode", "meta", "label", "priority", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|OO$OOO", kwl, &value, &at_o, &mode, &meta,
                                     &label, &priority))
        return NULL;
    fhpy_release_drain();
    fhr_location at = fhr_loc_host();
    fhr_adopt_opts o;
    if ((at_o && at_o != Py_None && !fhpy_location_arg(at_o, "at", &at)) || !opts_parse(mode, label, priority, &o))
        return NULL;
    if (meta != Py_None && !PyDict_Check(meta) && !PyObject_HasAttrString(meta, "level") &&
        !PyObject_HasAttrString(meta, "context_id")) {
        PyErr_Format(PyExc_TypeError, "meta must be a CKKSMeta, a dict of its fields or None, "
                                      "not %.80s", Py_TYPE(meta)->tp_name);
        return NULL;
    }
    fhr_value *v = NULL;
    PyObject *layout = NULL;
    fhpy_value *owned = NULL;
    if (PyObject_TypeCheck(value, &fhpy_value_type)) { /* what fheplan.to returned */
        owned = (fhpy_value *)value;
        if (!owned->v)
            return fhpy_raise_msg(FHR_E_STATE, "adopt: the value was adopted already");
        if (owned->nexports > 0)
            return fhpy_raise_msg(FHR_E_PROTECTED, "adopt: %zd exported view%s of the value "
                                  "still read its memory: delete those arrays first",
                                  owned->nexports, owned->nexports == 1 ? "" : "s");
        if (owned->keep != self)
            return fhpy_raise_msg(FHR_E_INVALID, "adopt: the value was copied by another "
                                                 "manager's backend");
        if (!fhr_loc_equal(fhr_value_location(owned->v), at) && at_o)
            return fhpy_raise_msg(FHR_E_LOCATION, "adopt: the value lives elsewhere than at=");
        v = owned->v;
        layout = Py_NewRef(owned->layout);
    } else {
        fhr_stream *order = adopt_stream(m, at);
        if (PyErr_Occurred())
            return NULL;
        if (!fhpy_build_value(m->backend, value, meta, at, order, &v, &layout))
            return NULL;
        if (order) {
            FHPY_ERR_INIT(e);
            fhr_status st;
            NOGIL(st, fhr_stream_sync(m->backend, order, &e));
            if (st != FHR_OK) {
                fhr_value_destroy(v);
                Py_DECREF(layout);
                return finish(m, st, &e);
            }
        }
    }
    FHPY_ERR_INIT(e);
    fhr_handle h;
    fhr_status st;
    NOGIL(st, fhr_adopt(m->m, &v, &o, &h, &e));
    if (st != FHR_OK) {
        if (!owned)
            fhr_value_destroy(v); /* the producers go back (queued, then dropped) */
        Py_DECREF(layout);
        return finish(m, st, &e);
    }
    if (owned)
        owned->v = NULL;
    PyObject *ho = fhpy_handle_new(h);
    if (!ho || PyDict_SetItem(m->layouts, ho, layout) < 0) {
        Py_XDECREF(ho);
        Py_DECREF(layout);
        return NULL;
    }
    Py_DECREF(layout);
    return ho;
}

/* ---- fheplan.to ------------------------------------------------------------------------- */

/* The memory fheplan.to reads from value (a leased view or a Value), or NULL with the
 * exception set when it is no longer there (released, adopted). */
static const fhr_value *to_source(PyObject *value)
{
    if (PyObject_TypeCheck(value, &fhpy_leased_type)) {
        fhpy_leased *l = (fhpy_leased *)value;
        return fhpy_alive(l->owner, l->ops) ? l->v : NULL;
    }
    fhpy_value *v = (fhpy_value *)value;
    if (!v->v)
        fhpy_raise_msg(FHR_E_STATE, "to: the value was adopted");
    return v->v;
}

/* fheplan.to(value, location, *, stream=None, manager=None) */
PyObject *fhpy_to(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    PyObject *value, *stream = Py_None, *mgr = Py_None;
    fhr_location to;
    static char *kwl[] = {"value", "location", "stream", "manager", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&|$OO", kwl, &value, fhpy_loc_conv_location, &to,
                                     &stream, &mgr))
        return NULL;
    const fhr_value *src = NULL;
    fhr_value *tmp = NULL;
    PyObject *layout = NULL, *keep = NULL;
    fhpy_manager *m = NULL;
    if (PyObject_TypeCheck(value, &fhpy_leased_type)) {
        fhpy_leased *l = (fhpy_leased *)value;
        if (!fhpy_alive(l->owner, l->ops))
            return NULL;
        src = l->v;
        layout = Py_NewRef(l->layout);
        if (PyObject_TypeCheck(l->owner, &fhpy_lease_type))
            m = ((fhpy_lease *)l->owner)->mgr;
        else if (PyObject_TypeCheck(l->owner, &fhpy_value_type))
            keep = ((fhpy_value *)l->owner)->keep;
    } else if (PyObject_TypeCheck(value, &fhpy_value_type)) {
        fhpy_value *v = (fhpy_value *)value;
        if (!v->v)
            return fhpy_raise_msg(FHR_E_STATE, "to: the value was adopted");
        src = v->v;
        layout = Py_NewRef(v->layout);
        keep = v->keep;
    }
    if (mgr != Py_None) {
        if (!PyObject_TypeCheck(mgr, &fhpy_manager_type)) {
            Py_XDECREF(layout);
            PyErr_SetString(PyExc_TypeError, "to: manager= takes a ResidencyManager");
            return NULL;
        }
        m = (fhpy_manager *)mgr;
    }
    if (!m && keep && PyObject_TypeCheck(keep, &fhpy_manager_type))
        m = (fhpy_manager *)keep;
    if (!m) {
        Py_XDECREF(layout);
        return fhpy_raise_msg(FHR_E_INVALID, "to: an application array needs manager= (whose "
                                             "backend copies it)");
    }
    if (!src) { /* application arrays: a temporary value over their memory */
        fhr_location at = fhr_loc_host();
        PyObject *dev = PyObject_HasAttrString(value, "__dlpack_device__")
                            ? PyObject_CallMethod(value, "__dlpack_device__", NULL) : NULL;
        int dt = FHPY_DL_CPU, di = 0;
        if (dev && PyArg_ParseTuple(dev, "ii", &dt, &di) && dt == FHPY_DL_CUDA)
            at = fhr_loc_cuda(di);
        Py_XDECREF(dev);
        PyErr_Clear();
        if (!fhpy_build_value(m->backend, value, NULL, at, NULL, &tmp, &layout))
            return NULL;
        src = tmp;
    }
    fhr_stream *view = NULL;
    if (!fhpy_stream_view(m, stream, to.kind == FHR_LOC_CUDA ? to : fhr_value_location(src),
                          &view, NULL)) {
        fhr_value_destroy(tmp);
        Py_XDECREF(layout);
        return NULL;
    }
    /* A copy queued on a stream of the caller's reads the leased copy after this call
     * returns: the stream becomes a consumer of the lease (as __dlpack__(stream=) makes
     * it), so the copy stays protected after a release until that stream passes it. */
    if (!tmp && view && PyObject_TypeCheck(value, &fhpy_leased_type)) {
        fhpy_leased *l = (fhpy_leased *)value;
        if (l->loc.kind == FHR_LOC_CUDA && l->ops->add_consumer &&
            l->ops->add_consumer(l->owner, l->loc, stream) < 0) {
            fhr_stream_destroy(m->backend, view);
            Py_XDECREF(layout);
            return NULL;
        }
    }
    /* Converting the stream ran Python code (a ptr property, a __cuda_stream__), which may
     * have released the lease or adopted the value: look again before pinning, with no
     * Python code between the check and the pin. */
    if (!tmp && !(src = to_source(value))) {
        if (view)
            fhr_stream_destroy(m->backend, view);
        Py_XDECREF(layout);
        return NULL;
    }
    /* The source stays valid while the copy runs without the lock: its owner is pinned
     * (core.c, rule 5; no call on the manager, so a source load may copy too); a source
     * whose owner cannot be pinned (a use's, a kernel call's value) is copied with it. */
    const fhpy_owner_ops *pops = NULL;
    PyObject *powner = NULL;
    if (!tmp && PyObject_TypeCheck(value, &fhpy_leased_type)) {
        pops = ((fhpy_leased *)value)->ops;
        powner = ((fhpy_leased *)value)->owner;
    } else if (!tmp) {
        pops = &fhpy_value_ops;
        powner = value;
    }
    if (pops && pops->pin)
        pops->pin(powner, 1);
    FHPY_ERR_INIT(e);
    fhr_value *out = NULL;
    fhr_status st;
    if (pops && !pops->pin) {
        st = fhr_manager_value_to(m->m, src, to, view, &out, &e);
        if (view)
            fhr_stream_destroy(m->backend, view);
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = fhr_manager_value_to(m->m, src, to, view, &out, &e);
        if (view)
            fhr_stream_destroy(m->backend, view);
        fhr_value_destroy(tmp);
        Py_END_ALLOW_THREADS
    }
    if (pops && pops->pin)
        pops->pin(powner, -1);
    fhpy_release_drain();
    if (st != FHR_OK) {
        Py_XDECREF(layout);
        return fhpy_fail(&e);
    }
    fhpy_value *r = PyObject_New(fhpy_value, &fhpy_value_type);
    if (!r) {
        fhr_value_destroy(out);
        Py_XDECREF(layout);
        return NULL;
    }
    r->v = out;
    r->nexports = 0;
    r->b = m->backend;
    r->keep = Py_NewRef((PyObject *)m);
    r->layout = layout ? layout : Py_NewRef(Py_None);
    return (PyObject *)r;
}

/* ---- sources ------------------------------------------------------------------------------- */

typedef struct py_source {
    fhpy_manager *m;  /* borrowed: the manager outlives its values */
    PyObject *load;   /* callable(at) -> value */
} py_source;

static void source_free(void *p)
{
    py_source *s = p;
    Py_XDECREF(s->load);
    PyMem_RawFree(s);
}

static void source_release(void *ctx) { fhpy_defer(source_free, ctx); }

static fhr_status source_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                              fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)b;
    py_source *src = ctx;
    fhr_status st = FHR_OK;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *loc = fhpy_loc_new(at);
    PyObject *res = loc ? PyObject_CallOneArg(src->load, loc) : NULL;
    Py_XDECREF(loc);
    PyObject *meta = res ? fhpy_meta_object(&spec->meta) : NULL;
    PyObject *layout = NULL;
    if (!meta || !fhpy_build_value(src->m->backend, res, meta, at, s, out, &layout)) {
        /* kept to become the cause of the call's exception (raise_mgr) */
        Py_XSETREF(src->m->load_exc, fhpy_take_exception(err, FHR_E_SOURCE, "source load raised"));
        st = FHR_E_SOURCE;
    }
    Py_XDECREF(layout);
    Py_XDECREF(meta);
    Py_XDECREF(res);
    PyGILState_Release(g);
    return st;
}

/* fields: {name: nbytes} or {name: (shape, dtype)}; fills specs and the layout. */
static int spec_fields(PyObject *fields, fhr_field_spec **out, size_t *n, PyObject **layout,
                       uint64_t *total)
{
    if (!PyDict_Check(fields) || PyDict_Size(fields) == 0) {
        fhpy_raise_msg(FHR_E_INVALID, "register_source: fields is a non-empty dict {name: "
                                      "nbytes or (shape, dtype)}");
        return 0;
    }
    Py_ssize_t cnt = PyDict_Size(fields), pos = 0, i = 0;
    fhr_field_spec *fs = PyMem_Calloc((size_t)cnt, sizeof *fs);
    PyObject *lay = PyTuple_New(cnt), *k, *v;
    if (!fs || !lay) {
        PyMem_Free(fs);
        Py_XDECREF(lay);
        PyErr_NoMemory();
        return 0;
    }
    *total = 0;
    while (PyDict_Next(fields, &pos, &k, &v)) {
        fs[i].name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!fs[i].name) {
            PyErr_SetString(PyExc_TypeError, "field names are strings");
            goto fail;
        }
        if (PyLong_Check(v)) {
            char what[96];
            snprintf(what, sizeof what, "fields['%.60s']", fs[i].name);
            if (!fhpy_bytes(v, what, &fs[i].nbytes))
                goto fail;
            PyObject *e = Py_BuildValue("(O(iii)(K))", k, FHPY_DL_UINT, 8, 1,
                                        (unsigned long long)fs[i].nbytes);
            if (!e)
                goto fail;
            PyTuple_SET_ITEM(lay, i, e);
        } else {
            PyObject *shape, *dto;
            fhpy_dl_dtype dt;
            if (!PyArg_ParseTuple(v, "OO", &shape, &dto) || !fhpy_parse_dtype(dto, &dt))
                goto fail;
            PyObject *st = PySequence_Tuple(shape);
            if (!st)
                goto fail;
            uint64_t elems = 1, dim;
            for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(st); d++) {
                if (!fhpy_bytes(PyTuple_GET_ITEM(st, d), "a field's shape entry", &dim)) {
                    Py_DECREF(st);
                    goto fail;
                }
                elems *= dim;
            }
            fs[i].nbytes = elems * dt.bits * dt.lanes / 8;
            PyObject *e = Py_BuildValue("(O(iii)N)", k, dt.code, dt.bits, dt.lanes, st);
            if (!e)
                goto fail;
            PyTuple_SET_ITEM(lay, i, e);
        }
        *total += fs[i].nbytes;
        i++;
    }
    *out = fs;
    *n = (size_t)cnt;
    *layout = lay;
    return 1;
fail:
    PyMem_Free(fs);
    Py_DECREF(lay);
    return 0;
}

static PyObject *mgr_register_source(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *load, *fields, *meta = Py_None, *mode = Py_None, *label = Py_None;
    PyObject *storage_o = NULL, *priority = NULL;
    uint64_t storage = 0;
    static char *kwl[] = {"load", "fields", "meta", "storage_nbytes", "replica_mode", "label",
                          "priority", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "OO|$OOOOO", kwl, &load, &fields, &meta,
                                     &storage_o, &mode, &label, &priority))
        return NULL;
    if (storage_o && !fhpy_bytes(storage_o, "storage_nbytes", &storage))
        return NULL;
    if (!PyCallable_Check(load)) {
        if (PyObject_HasAttrString(load, "load"))
            load = PyObject_GetAttrString(load, "load"); /* a ResidencySource object */
        else
            return fhpy_raise_msg(FHR_E_INVALID, "register_source: load must be callable (or "
                                                 "an object with .load)");
        if (!load)
            return NULL;
    } else
        Py_INCREF(load);
    fhr_adopt_opts o;
    fhr_value_spec spec;
    memset(&spec, 0, sizeof spec);
    fhr_field_spec *fs = NULL;
    PyObject *layout = NULL;
    uint64_t total = 0;
    if (!opts_parse(mode, label, priority, &o) || !fhpy_meta(meta, &spec.meta) ||
        !spec_fields(fields, &fs, &spec.nfields, &layout, &total)) {
        Py_DECREF(load);
        return NULL;
    }
    spec.fields = fs;
    spec.storage_nbytes = storage ? storage : total;
    py_source *src = PyMem_RawCalloc(1, sizeof *src);
    if (!src) {
        Py_DECREF(load);
        PyMem_Free(fs);
        Py_DECREF(layout);
        return PyErr_NoMemory();
    }
    src->m = m;
    src->load = load;
    fhr_source s = {source_load, src, source_release};
    FHPY_ERR_INIT(e);
    fhr_handle h;
    fhr_status st;
    NOGIL(st, fhr_register_source(m->m, &spec, &s, &o, &h, &e));
    PyMem_Free(fs);
    if (st != FHR_OK) {
        source_free(src);
        Py_DECREF(layout);
        return finish(m, st, &e);
    }
    PyObject *ho = fhpy_handle_new(h);
    if (!ho || PyDict_SetItem(m->layouts, ho, layout) < 0) {
        Py_XDECREF(ho);
        Py_DECREF(layout);
        return NULL;
    }
    Py_DECREF(layout);
    return ho;
}

/* ---- primitives ------------------------------------------------------------------------------ */

/* limbs 0: fhr_ensure (the whole value); else fhr_ensure_limbs (a cut value's q-limbs). */
static PyObject *mgr_ensure(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *stream = Py_None, *limbs_o = NULL;
    fhpy_handle_arg h;
    fhr_location at;
    uint32_t limbs = 0;
    static char *kwl[] = {"handle", "at", "stream", "limbs", NULL};
    if (!check_open(m) || !PyArg_ParseTupleAndKeywords(args, kw, "O&O&|$OO", kwl,
                                                       fhpy_handle_conv, &h, fhpy_to_loc_conv,
                                                       &at, &stream, &limbs_o))
        return NULL;
    if (limbs_o && !fhpy_u32(limbs_o, "limbs", &limbs))
        return NULL;
    fhr_stream *view = NULL;
    if (!fhpy_stream_view(m, stream, at, &view, NULL))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = limbs ? fhr_ensure_limbs(m->m, h.h, at, limbs, view, &e)
               : fhr_ensure(m->m, h.h, at, view, &e);
    if (view)
        fhr_stream_destroy(m->backend, view);
    Py_END_ALLOW_THREADS
    return finish(m, st, &e);
}

/* cut_limbs(handle, q, special, parts=1, alpha=0, regen_fields=0): fhr_value_cut_limbs */
static PyObject *mgr_cut_limbs(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *q_o, *special_o, *parts_o = NULL, *alpha_o = NULL, *regen_o = NULL;
    fhpy_handle_arg h;
    fhr_limb_cut cut = {0, 0, 1, 0, 0};
    static char *kwl[] = {"handle", "q", "special", "parts", "alpha", "regen_fields", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O&OO|OOO", kwl, fhpy_handle_conv, &h, &q_o,
                                     &special_o, &parts_o, &alpha_o, &regen_o))
        return NULL;
    if (!fhpy_u32(q_o, "q", &cut.q) || !fhpy_u32(special_o, "special", &cut.special) ||
        (parts_o && !fhpy_u32(parts_o, "parts", &cut.parts)) ||
        (alpha_o && !fhpy_u32(alpha_o, "alpha", &cut.alpha)) ||
        (regen_o && !fhpy_mask64(regen_o, "regen_fields", &cut.regen_fields)))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_value_cut_limbs(m->m, h.h, &cut, &e));
    return finish(m, st, &e);
}

/* copy_limbs and copy_parts: a count one copy holds, by the C query q. */
static PyObject *copy_count(PyObject *self, PyObject *args,
                            fhr_status (*q)(fhr_manager *, fhr_handle, fhr_location, uint32_t *,
                                            fhr_error *))
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhpy_handle_arg h;
    fhr_location at;
    if (!check_open(m) ||
        !PyArg_ParseTuple(args, "O&O&", fhpy_handle_conv, &h, fhpy_to_loc_conv, &at))
        return NULL;
    FHPY_ERR_INIT(e);
    uint32_t n = 0;
    fhr_status st;
    NOGIL(st, q(m->m, h.h, at, &n, &e));
    return finish_value(m, st, &e, PyLong_FromUnsignedLong(n));
}

static PyObject *mgr_copy_limbs(PyObject *self, PyObject *args)
{
    return copy_count(self, args, fhr_copy_limbs);
}

static PyObject *mgr_copy_parts(PyObject *self, PyObject *args)
{
    return copy_count(self, args, fhr_copy_parts);
}

static PyObject *mgr_move(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *from_o = Py_None, *stream = Py_None;
    fhpy_handle_arg h;
    fhr_location to, from;
    static char *kwl[] = {"handle", "to", "from_location", "stream", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O&O&|O$O", kwl, fhpy_handle_conv, &h,
                                     fhpy_loc_conv_to, &to, &from_o, &stream))
        return NULL;
    fhr_stream *view = NULL;
    if ((from_o != Py_None && !fhpy_location_arg(from_o, "from_location", &from)) ||
        !fhpy_stream_view(m, stream, to, &view, NULL))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_move(m->m, h.h, to, from_o != Py_None ? &from : NULL, view, &e);
    if (view)
        fhr_stream_destroy(m->backend, view);
    Py_END_ALLOW_THREADS
    if (st == FHR_E_PROTECTED)
        fhpy_exports_note(&e, fhpy_exports_any(m, h.obj));
    return finish(m, st, &e);
}

/* limbs 0: fhr_drop (the copy); else fhr_drop_parts (the parts a use of limbs reads stay). */
static PyObject *mgr_drop(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhpy_handle_arg h;
    fhr_location at;
    PyObject *limbs_o = NULL;
    uint32_t limbs = 0;
    static char *kwl[] = {"handle", "at", "limbs", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O&O&|$O", kwl, fhpy_handle_conv, &h,
                                     fhpy_to_loc_conv, &at, &limbs_o) ||
        (limbs_o && !fhpy_u32(limbs_o, "limbs", &limbs)))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, limbs ? fhr_drop_parts(m->m, h.h, at, limbs, &e) : fhr_drop(m->m, h.h, at, &e));
    if (st == FHR_E_PROTECTED)
        fhpy_exports_note(&e, fhpy_exports_of(m, h.obj, at));
    return finish(m, st, &e);
}

static PyObject *mgr_discard(PyObject *self, PyObject *ho)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhr_handle h;
    if (!check_open(m) || !fhpy_handle_arg_of(ho, "handle", &h))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_discard(m->m, h, &e));
    if (st == FHR_E_PROTECTED)
        fhpy_exports_note(&e, fhpy_exports_any(m, ho));
    if (st == FHR_OK && PyDict_DelItem(m->layouts, ho) < 0)
        PyErr_Clear();
    return finish(m, st, &e);
}

static PyObject *mgr_is_resident(PyObject *self, PyObject *args)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhpy_handle_arg h;
    fhr_location at;
    if (!check_open(m) ||
        !PyArg_ParseTuple(args, "O&O&", fhpy_handle_conv, &h, fhpy_to_loc_conv, &at))
        return NULL;
    FHPY_ERR_INIT(e);
    int r = 0;
    fhr_status st;
    NOGIL(st, fhr_is_resident(m->m, h.h, at, &r, &e));
    return finish_value(m, st, &e, PyBool_FromLong(r));
}

static PyObject *mgr_set_budget(PyObject *self, PyObject *args)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhr_location at;
    PyObject *at_o, *nb_o;
    uint64_t nb;
    if (!check_open(m) || !PyArg_ParseTuple(args, "OO", &at_o, &nb_o) ||
        !fhpy_location_arg(at_o, "at", &at) || !fhpy_bytes(nb_o, "nbytes", &nb))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_set_budget(m->m, at, nb, &e));
    return finish(m, st, &e);
}

static PyObject *mgr_set_priority(PyObject *self, PyObject *args)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhpy_handle_arg h;
    PyObject *p_o;
    int32_t p;
    if (!check_open(m) || !PyArg_ParseTuple(args, "O&O", fhpy_handle_conv, &h, &p_o) ||
        !fhpy_priority(p_o, "priority", &p))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_set_priority(m->m, h.h, p, &e));
    return finish(m, st, &e);
}

static PyObject *mgr_reap(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    FHPY_ERR_INIT(e);
    size_t n = 0;
    fhr_status st;
    NOGIL(st, fhr_reap(m->m, &n, &e));
    return finish_value(m, st, &e, PyLong_FromSize_t(n));
}

static PyObject *mgr_wait_pending(PyObject *self, PyObject *args)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhr_location at;
    PyObject *at_o, *nb_o;
    uint64_t nb;
    if (!check_open(m) || !PyArg_ParseTuple(args, "OO", &at_o, &nb_o) ||
        !fhpy_location_arg(at_o, "at", &at) || !fhpy_bytes(nb_o, "nbytes", &nb))
        return NULL;
    FHPY_ERR_INIT(e);
    size_t waited = 0;
    fhr_status st;
    NOGIL(st, fhr_wait_pending(m->m, at, nb, &waited, &e));
    return finish_value(m, st, &e, PyLong_FromSize_t(waited));
}

/* ---- leases and holds -------------------------------------------------------------------------- */

/* handles: one handle or a sequence of them. */
static int handle_list(PyObject *o, fhr_handle **out, size_t *n, PyObject **tuple)
{
    if (!PyObject_TypeCheck(o, &fhpy_handle_type) && !PyTuple_Check(o) && !PyList_Check(o)) {
        PyErr_Format(PyExc_TypeError, "handles must be a ResidencyHandle or a tuple or list "
                                      "of them, not %.80s", Py_TYPE(o)->tp_name);
        return 0;
    }
    PyObject *t = PyObject_TypeCheck(o, &fhpy_handle_type) ? PyTuple_Pack(1, o)
                                                            : PySequence_Tuple(o);
    if (!t)
        return 0;
    Py_ssize_t cnt = PyTuple_GET_SIZE(t);
    fhr_handle *hs = PyMem_Malloc((cnt ? (size_t)cnt : 1) * sizeof *hs);
    if (!hs) {
        Py_DECREF(t);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < cnt; i++)
        if (!fhpy_handle_item(PyTuple_GET_ITEM(t, i), "handles", i, &hs[i])) {
            PyMem_Free(hs);
            Py_DECREF(t);
            return 0;
        }
    *out = hs;
    *n = (size_t)cnt;
    *tuple = t;
    return 1;
}

static PyObject *mgr_acquire(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *hso, *stream = Py_None;
    fhr_location at;
    static char *kwl[] = {"handles", "at", "consumer_stream", NULL};
    if (!check_open(m) || !PyArg_ParseTupleAndKeywords(args, kw, "OO&|O", kwl, &hso,
                                                       fhpy_to_loc_conv, &at, &stream))
        return NULL;
    fhr_handle *hs;
    size_t n;
    PyObject *tuple;
    if (!handle_list(hso, &hs, &n, &tuple))
        return NULL;
    fhr_stream *view = NULL;
    PyObject *keep = NULL; /* the consumer's object, alive as long as its view */
    fhr_stream **views = PyMem_Malloc(sizeof *views); /* the lease keeps its consumer's view */
    if (!views || (at.kind == FHR_LOC_CUDA && !fhpy_stream_view(m, stream, at, &view, &keep))) {
        if (!views)
            PyErr_NoMemory();
        PyMem_Free(views);
        PyMem_Free(hs);
        Py_XDECREF(keep);
        Py_DECREF(tuple);
        return NULL;
    }
    FHPY_ERR_INIT(e);
    fhr_lease *l = NULL;
    fhr_status st;
    NOGIL(st, fhr_acquire(m->m, hs, n, at, view, &l, &e));
    PyMem_Free(hs);
    if (st != FHR_OK) {
        if (view)
            fhr_stream_destroy(m->backend, view);
        PyMem_Free(views);
        Py_XDECREF(keep);
        Py_DECREF(tuple);
        return finish(m, st, &e);
    }
    PyObject *r = fhpy_lease_make(m, l, at, tuple, NULL);
    Py_DECREF(tuple);
    if (!r) { /* the lease was destroyed (released): its view may go */
        if (view)
            fhr_stream_destroy(m->backend, view);
        PyMem_Free(views);
        Py_XDECREF(keep);
        return NULL;
    }
    fhpy_lease *lo = (fhpy_lease *)r;
    lo->keep = keep;
    lo->views = views;
    if (view)
        lo->views[lo->nviews++] = view;
    return r;
}

static PyObject *mgr_hold(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *hso;
    fhr_location at;
    static char *kwl[] = {"handles", "at", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "OO&", kwl, &hso, fhpy_to_loc_conv, &at))
        return NULL;
    fhr_handle *hs;
    size_t n;
    PyObject *tuple;
    if (!handle_list(hso, &hs, &n, &tuple))
        return NULL;
    Py_DECREF(tuple);
    FHPY_ERR_INIT(e);
    fhr_hold *hd = NULL;
    fhr_status st;
    NOGIL(st, fhr_hold_acquire(m->m, hs, n, at, &hd, &e));
    PyMem_Free(hs);
    if (st != FHR_OK)
        return finish(m, st, &e);
    fhpy_hold *o = PyObject_New(fhpy_hold, &fhpy_hold_type);
    if (!o) {
        fhr_hold_destroy(hd);
        return NULL;
    }
    o->mgr = (fhpy_manager *)Py_NewRef(self);
    o->hold = hd;
    o->released = 0;
    return (PyObject *)o;
}

/* ---- snapshots and the trace ----------------------------------------------------------------- */

static PyObject *opt_u64(int has, uint64_t v)
{
    return has ? PyLong_FromUnsignedLongLong(v) : Py_NewRef(Py_None);
}

static PyObject *obs_record(const fhr_observation *o)
{
    if (!o->valid)
        Py_RETURN_NONE;
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N}", "device_free_bytes",
        (unsigned long long)o->device_free_bytes, "device_total_bytes",
        (unsigned long long)o->device_total_bytes, "pool_used_bytes",
        (unsigned long long)o->pool_used_bytes, "pool_reserved_bytes",
        (unsigned long long)o->pool_reserved_bytes, "pool_used_high_bytes",
        (unsigned long long)o->pool_used_high_bytes, "pool_reserved_high_bytes",
        (unsigned long long)o->pool_reserved_high_bytes, "pool_granule_bytes",
        (unsigned long long)o->pool_granule_bytes, "nvml_used_bytes",
        opt_u64(o->nvml_valid, o->nvml_used_bytes), "nvml_total_bytes",
        opt_u64(o->nvml_valid, o->nvml_total_bytes));
    PyObject *r = fhpy_record("observation", d);
    Py_XDECREF(d);
    return r;
}

static int dict_put(PyObject *d, PyObject *k, PyObject *v)
{
    int r = k && v ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r;
}

/* A value's limb cut (fhr_value_cut_limbs) as cut_limbs takes it, or None when not cut. */
static PyObject *cut_record(const fhr_value_info *v)
{
    if (!v->cut_q)
        Py_RETURN_NONE;
    PyObject *d = Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:K,s:K}", "q", (unsigned)v->cut_q,
                                "special", (unsigned)v->cut_special, "parts",
                                (unsigned)v->cut_parts, "alpha", (unsigned)v->cut_alpha,
                                "nfields", (unsigned)v->cut_nfields, "limb_nbytes",
                                (unsigned long long)v->cut_limb_nbytes, "regen_fields",
                                (unsigned long long)v->cut_regen_mask);
    PyObject *r = fhpy_record("cut", d);
    Py_XDECREF(d);
    return r;
}

static PyObject *snapshot_object(const fhr_snapshot *s)
{
    PyObject *locs = PyDict_New(), *vals = PyDict_New();
    if (!locs || !vals)
        goto fail;
    for (size_t i = 0; i < s->nlocs; i++) {
        const fhr_loc_stats *l = &s->locs[i];
        PyObject *d = Py_BuildValue(
            "{s:N,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N,s:N}", "location", fhpy_loc_new(l->loc),
            "used_bytes", (unsigned long long)l->used_bytes, "reserved_bytes",
            (unsigned long long)l->reserved_bytes, "inflight_bytes",
            (unsigned long long)l->inflight_bytes, "temporary_bytes",
            (unsigned long long)l->temporary_bytes, "peak_used_bytes",
            (unsigned long long)l->peak_used_bytes, "peak_charged_bytes",
            (unsigned long long)l->peak_charged_bytes, "budget_bytes",
            opt_u64(l->has_budget, l->budget_bytes), "remaining_budget_bytes",
            opt_u64(l->has_budget, l->remaining_budget_bytes), "observation",
            obs_record(&l->obs));
        PyObject *rec = fhpy_record("location", d);
        Py_XDECREF(d);
        if (dict_put(locs, fhpy_loc_new(l->loc), rec) < 0)
            goto fail;
    }
    for (size_t i = 0; i < s->nvalues; i++) {
        const fhr_value_info *v = &s->values[i];
        PyObject *mats = PyDict_New();
        if (!mats)
            goto fail;
        for (size_t c = 0; c < v->ncopies; c++) {
            const fhr_copy_info *x = &v->copies[c];
            PyObject *d = Py_BuildValue(
                "{s:N,s:K,s:K,s:K,s:O,s:I,s:I,s:I,s:K,s:d,s:N,s:I,s:I}", "location",
                fhpy_loc_new(x->loc), "storage_nbytes", (unsigned long long)x->storage_nbytes,
                "charged_nbytes", (unsigned long long)x->charged_nbytes, "restore_nbytes",
                (unsigned long long)x->restore_nbytes, "ready", x->ready ? Py_True : Py_False,
                "leases", x->leases, "holds", x->holds, "pending_events", x->pending_events,
                "last_use", (unsigned long long)x->last_use, "restore_s", x->restore_s,
                "copied_from", x->copied ? fhpy_loc_new(x->source) : Py_NewRef(Py_None),
                "limbs", (unsigned)x->limbs, "parts", (unsigned)x->parts);
            PyObject *rec = fhpy_record("materialization", d);
            Py_XDECREF(d);
            if (dict_put(mats, fhpy_loc_new(x->loc), rec) < 0) {
                Py_DECREF(mats);
                goto fail;
            }
        }
        PyObject *d = Py_BuildValue(
            "{s:N,s:s,s:i,s:i,s:i,s:K,s:K,s:K,s:N,s:N,s:N}", "handle", fhpy_handle_new(v->handle),
            "label", v->label, "replica_mode", (int)v->mode, "recoverability",
            (int)v->recoverability, "priority", v->priority, "storage_nbytes",
            (unsigned long long)v->spec_storage_nbytes, "logical_nbytes",
            (unsigned long long)v->logical_nbytes, "regen_nbytes",
            (unsigned long long)v->regen_nbytes, "meta",
            v->meta ? fhpy_meta_object(v->meta) : Py_NewRef(Py_None), "materializations", mats,
            "cut", cut_record(v));
        PyObject *rec = fhpy_record("value", d);
        Py_XDECREF(d);
        if (dict_put(vals, fhpy_handle_new(v->handle), rec) < 0)
            goto fail;
    }
    PyObject *d = Py_BuildValue("{s:K,s:K,s:K,s:N,s:N}", "manager_id",
                                (unsigned long long)s->manager_id, "state_version",
                                (unsigned long long)s->state_version, "clock",
                                (unsigned long long)s->clock, "locations", locs, "values", vals);
    PyObject *r = fhpy_record("snapshot", d);
    Py_XDECREF(d);
    return r;
fail:
    Py_XDECREF(locs);
    Py_XDECREF(vals);
    return NULL;
}

static PyObject *mgr_snapshot(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    int placement = 0;
    static char *kwl[] = {"placement", NULL};
    if (!check_open(m) || !PyArg_ParseTupleAndKeywords(args, kw, "|$p", kwl, &placement))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_snapshot *s = NULL;
    fhr_status st;
    NOGIL(st, placement ? fhr_snapshot_take_placement(m->m, &s, &e)
                        : fhr_snapshot_take(m->m, &s, &e));
    if (st != FHR_OK)
        return finish(m, st, &e);
    PyObject *r = snapshot_object(s);
    fhr_snapshot_free(s);
    return r;
}

static PyObject *mgr_snapshot_json(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_snapshot *s = NULL;
    fhr_status st;
    NOGIL(st, fhr_snapshot_take(m->m, &s, &e));
    if (st != FHR_OK)
        return finish(m, st, &e);
    PyObject *r = fhpy_json(fhr_snapshot_json(s));
    fhr_snapshot_free(s);
    return r;
}

static PyObject *mgr_state_version(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    FHPY_ERR_INIT(e);
    uint64_t v = 0;
    fhr_status st;
    NOGIL(st, fhr_state_version(m->m, &v, &e));
    return finish_value(m, st, &e, PyLong_FromUnsignedLongLong(v));
}

static PyObject *mgr_trace(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    FHPY_ERR_INIT(e);
    char *json = NULL;
    fhr_status st;
    NOGIL(st, fhr_trace_json(m->m, &json, &e));
    if (st != FHR_OK)
        return finish(m, st, &e);
    return fhpy_json(json);
}

static PyObject *mgr_set_trace_capacity(PyObject *self, PyObject *arg)
{
    fhpy_manager *m = (fhpy_manager *)self;
    size_t n;
    if (!check_open(m) || !fhpy_count(arg, "capacity", (size_t)1 << 40, &n))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_status st;
    NOGIL(st, fhr_trace_set_capacity(m->m, n, &e));
    return finish(m, st, &e);
}

/* ---- plans --------------------------------------------------------------------------------- */

static PyObject *mgr_explain(PyObject *self, PyObject *plan)
{
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    if (!PyObject_TypeCheck(plan, &fhpy_plan_type)) {
        PyErr_SetString(PyExc_TypeError, "explain takes a ResidencyPlan");
        return NULL;
    }
    FHPY_ERR_INIT(e);
    fhr_explanation *x = PyMem_Calloc(1, sizeof *x);
    if (!x)
        return PyErr_NoMemory();
    fhr_status st;
    NOGIL(st, fhr_explain(m->m, ((fhpy_plan *)plan)->p, x, &e));
    PyObject *r = st == FHR_OK ? fhpy_explanation(x) : finish(m, st, &e);
    PyMem_Free(x);
    return r;
}


static PyObject *mgr_execute_actions(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *acts_o, *streams = Py_None;
    static char *kwl[] = {"actions", "transfer_streams", NULL};
    if (!check_open(m) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|$O", kwl, &acts_o, &streams))
        return NULL;
    PyObject *tuple = PySequence_Tuple(acts_o);
    if (!tuple)
        return NULL;
    fhr_action *acts = NULL;
    size_t n = 0, ns = 0;
    fhr_stream_map *maps = NULL;
    if (!fhpy_actions(tuple, &acts, &n) || !fhpy_stream_maps(m, streams, &maps, &ns, NULL)) {
        PyMem_Free(acts);
        Py_DECREF(tuple);
        return NULL;
    }
    FHPY_ERR_INIT(e);
    fhr_report *rep = NULL;
    fhr_status st;
    NOGIL(st, fhr_execute_actions(m->m, acts, n, maps, ns, &rep, &e));
    fhpy_stream_maps_free(m, maps, ns);
    PyMem_Free(acts);
    PyObject *r = NULL;
    if (st == FHR_OK) {
        r = fhpy_report(rep);
        fhr_report_free(rep);
        fhpy_release_drain();
    } else {
        fhr_error copy = e;
        copy.partial_report = NULL;
        finish(m, st, &e);
        fhpy_set_failed_action(tuple, &copy);
    }
    Py_DECREF(tuple);
    return r;
}

static PyObject *mgr_scope(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_manager *m = (fhpy_manager *)self;
    PyObject *plan, *streams = Py_None;
    static char *kwl[] = {"plan", "transfer_streams", NULL};
    if (!check_open(m) || !PyArg_ParseTupleAndKeywords(args, kw, "O!|$O", kwl, &fhpy_plan_type,
                                                       &plan, &streams))
        return NULL;
    fhr_stream_map *maps = NULL;
    size_t ns = 0;
    PyObject *keep = NULL; /* the streams' objects, alive as long as the scope's views */
    if (!fhpy_stream_maps(m, streams, &maps, &ns, &keep)) {
        Py_XDECREF(keep);
        return NULL;
    }
    fhr_stream **views = ns ? PyMem_Malloc(ns * sizeof *views) : NULL;
    if (!views && ns) {
        fhpy_stream_maps_free(m, maps, ns);
        Py_XDECREF(keep);
        return PyErr_NoMemory();
    }
    FHPY_ERR_INIT(e);
    fhr_scope *sc = NULL;
    if (fhr_scope_create(m->m, ((fhpy_plan *)plan)->p, maps, ns, &sc, &e) != FHR_OK) {
        fhpy_stream_maps_free(m, maps, ns);
        PyMem_Free(views);
        Py_XDECREF(keep);
        return finish(m, e.status, &e);
    }
    fhpy_scope *o = PyObject_GC_New(fhpy_scope, &fhpy_scope_type);
    if (!o) {
        fhr_scope_destroy(sc);
        fhpy_stream_maps_free(m, maps, ns);
        PyMem_Free(views);
        Py_XDECREF(keep);
        return NULL;
    }
    for (size_t i = 0; i < ns; i++)
        views[i] = maps[i].stream;
    PyMem_Free(maps);
    o->mgr = (fhpy_manager *)Py_NewRef(self);
    o->plan = (fhpy_plan *)Py_NewRef(plan);
    o->sc = sc;
    o->views = views;
    o->nviews = ns;
    o->keep = keep;
    o->state = 0;
    o->report = Py_NewRef(Py_None);
    o->exit_error = Py_NewRef(Py_None);
    PyObject_GC_Track((PyObject *)o);
    return (PyObject *)o;
}

static PyObject *mgr_stream(PyObject *self, PyObject *args)
{
    fhpy_manager *m = (fhpy_manager *)self;
    fhr_location at;
    if (!check_open(m) || !PyArg_ParseTuple(args, "O&", fhpy_loc_conv_location, &at))
        return NULL;
    FHPY_ERR_INIT(e);
    fhr_stream *s = NULL;
    if (fhr_stream_create(m->backend, at, &s, &e) != FHR_OK)
        return finish(m, e.status, &e);
    fhpy_stream *o = PyObject_New(fhpy_stream, &fhpy_stream_type);
    if (!o) {
        fhr_stream_destroy(m->backend, s);
        return NULL;
    }
    o->s = s;
    o->b = m->backend;
    o->owner = Py_NewRef(self);
    o->own = 1;
    o->loc = at;
    o->life = NULL;
    o->life_ops = NULL;
    return (PyObject *)o;
}

static PyObject *mgr_get_id(PyObject *self, void *c)
{
    (void)c;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    return PyLong_FromUnsignedLongLong(fhr_manager_id(m->m)); /* immutable: no lock */
}

static PyObject *mgr_get_backend(PyObject *self, void *c)
{
    (void)c;
    fhpy_manager *m = (fhpy_manager *)self;
    if (!check_open(m))
        return NULL;
    return PyUnicode_FromString(m->backend->ops->name);
}

static PyObject *mgr_layout(PyObject *self, PyObject *ho)
{
    PyObject *l;
    if (!fhpy_layout_of((fhpy_manager *)self, ho, &l))
        return NULL;
    return Py_NewRef(l ? l : Py_None);
}

static PyMethodDef mgr_methods[] = {
    {"adopt", (PyCFunction)(void (*)(void))mgr_adopt, METH_VARARGS | METH_KEYWORDS,
     "adopt($self, value, at=None, replica_mode=None, *, meta=None, label=None, priority=0)\n"
     "--\n\nTakes the memory of value (a DLPack producer, a mapping {field: array}, an object "
     "with .fields, or a Value of fheplan.to) without a copy (fhr_adopt). at: where that "
     "memory lives (None: PAGEABLE_HOST). Returns the new ResidencyHandle. Raises "
     "ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"register_source", (PyCFunction)(void (*)(void))mgr_register_source, METH_VARARGS | METH_KEYWORDS,
     "register_source($self, load, fields, *, meta=None, storage_nbytes=0, replica_mode=None, "
     "label=None, priority=0)\n--\n\nRegisters a reconstructible value with no copy yet "
     "(fhr_register_source): load(at) returns its arrays when a copy is made; fields: {name: "
     "nbytes or (shape, dtype)}. Returns the new ResidencyHandle. Raises ResidencyError "
     "subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"ensure", (PyCFunction)(void (*)(void))mgr_ensure, METH_VARARGS | METH_KEYWORDS,
     "ensure($self, handle, at, *, stream=None, limbs=0)\n--\n\nMakes a copy of handle at "
     "`at` if it has none, a partial one there whole (fhr_ensure). limbs: for a cut value at "
     "a device, the q-limbs the copy must hold (fhr_ensure_limbs; a plan's `level L` is "
     "limbs L + 1; 0: the whole value): a partial copy there with fewer grows. Returns None. "
     "Raises ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); "
     "TypeError or ResidencyValueError for a bad argument, naming it."},
    {"cut_limbs", (PyCFunction)(void (*)(void))mgr_cut_limbs, METH_VARARGS | METH_KEYWORDS,
     "cut_limbs($self, handle, q, special, parts=1, alpha=0, regen_fields=0)\n--\n\nCuts a "
     "REPLICABLE value into limbs (fhr_value_cut_limbs): each field is q q-limbs then special"
     " limbs, the fields form `parts` equal consecutive groups, part p covering q-limbs "
     "p*alpha..(p+1)*alpha-1 (alpha 0: ceil(q / parts)); regen_fields: bit f for field f "
     "regenerated on devices (0: the value's own). Device copies may then hold fewer q-limbs "
     "(ensure(limbs=)). Returns None. Raises ResidencyValueError for a cut that does not fit "
     "the fields, ResidencyStateError when the value is cut already, ResidencyReplicaError "
     "for an EXCLUSIVE value; ResidencyError subclasses as the C status says "
     "(fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, naming"
     " it."},
    {"copy_limbs", mgr_copy_limbs, METH_VARARGS,
     "copy_limbs($self, handle, at, /)\n--\n\nReturns the q-limbs handle's copy at `at` "
     "holds, 0 for a whole copy (fhr_copy_limbs). Raises ResidencyStateError when there is "
     "no copy there; ResidencyError subclasses as the C status says (fheplan-python(7) "
     "ERRORS); TypeError or ResidencyValueError for a bad argument, naming it."},
    {"copy_parts", mgr_copy_parts, METH_VARARGS,
     "copy_parts($self, handle, at, /)\n--\n\nReturns the parts handle's copy at `at` holds "
     "(all of them for a whole copy, fewer than its q-limbs read after drop(limbs=); 0 for a "
     "value with no limb cut) (fhr_copy_parts). Raises ResidencyStateError when there is no "
     "copy there; ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); "
     "TypeError or ResidencyValueError for a bad argument, naming it."},
    {"move", (PyCFunction)(void (*)(void))mgr_move, METH_VARARGS | METH_KEYWORDS,
     "move($self, handle, to, from_location=None, *, stream=None)\n--\n\nMoves the value's one"
     " copy to `to` (fhr_move). Returns None. Raises ResidencyError subclasses as the C status"
     " says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, "
     "naming it."},
    {"drop", (PyCFunction)(void (*)(void))mgr_drop, METH_VARARGS | METH_KEYWORDS,
     "drop($self, handle, at, *, limbs=0)\n--\n\nRemoves the copy at `at` (fhr_drop); with "
     "limbs, a partial copy keeps only the parts a use of that many q-limbs reads and frees "
     "the others (fhr_drop_parts; ResidencyStateError for a whole copy). Returns None. Raises"
     " ResidencyProtectedError while a lease, a hold, a pending consumer event or an exported "
     "view protects it (the message says which). Raises ResidencyError subclasses as the C "
     "status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"discard", mgr_discard, METH_O,
     "discard($self, handle, /)\n--\n\nRemoves the value and every copy (fhr_discard). Returns"
     " None. Raises ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS);"
     " TypeError or ResidencyValueError for a bad argument, naming it."},
    {"is_resident", mgr_is_resident, METH_VARARGS,
     "is_resident($self, handle, at, /)\n--\n\nReturns True when handle has a copy at `at` "
     "(fhr_is_resident). Raises ResidencyError subclasses as the C status says "
     "(fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, naming "
     "it."},
    {"set_budget", mgr_set_budget, METH_VARARGS,
     "set_budget($self, at, nbytes, /)\n--\n\nSets or replaces the strict budget at `at` "
     "(fhr_set_budget); nbytes in 0..2**64-1. Returns None. Raises ResidencyError subclasses "
     "as the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a "
     "bad argument, naming it."},
    {"set_priority", mgr_set_priority, METH_VARARGS,
     "set_priority($self, handle, priority, /)\n--\n\nSets the value's priority, "
     "-2**31..2**31-1 (fhr_set_priority). Returns None. Raises ResidencyError subclasses as "
     "the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad"
     " argument, naming it."},
    {"acquire", (PyCFunction)(void (*)(void))mgr_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire($self, handles, at, consumer_stream=None)\n--\n\nLeases copies already at `at` "
     "(fhr_acquire; a CUDA location needs a consumer stream). Returns a ResidencyLease (a "
     "context manager). Raises ResidencyError subclasses as the C status says "
     "(fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, naming "
     "it."},
    {"hold", (PyCFunction)(void (*)(void))mgr_hold, METH_VARARGS | METH_KEYWORDS,
     "hold($self, handles, at)\n--\n\nRetains copies without values (fhr_hold_acquire). "
     "Returns a ResidencyHold (a context manager). Raises ResidencyError subclasses as the C "
     "status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"reap", mgr_reap, METH_NOARGS,
     "reap($self, /)\n--\n\nReaps completed consumer events and deferred frees (fhr_reap). "
     "Returns how many. Raises ResidencyError subclasses as the C status says "
     "(fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, naming "
     "it."},
    {"wait_pending", mgr_wait_pending, METH_VARARGS,
     "wait_pending($self, at, nbytes, /)\n--\n\nWaits on the consumer events that alone "
     "protect copies at `at` until they cover nbytes (fhr_wait_pending). Returns the number of"
     " real waits. Raises ResidencyError subclasses as the C status says (fheplan-python(7) "
     "ERRORS); TypeError or ResidencyValueError for a bad argument, naming it."},
    {"snapshot", (PyCFunction)(void (*)(void))mgr_snapshot, METH_VARARGS | METH_KEYWORDS,
     "snapshot($self, /, *, placement=False)\n--\n\nReturns the manager's state "
     "(fhr_snapshot_take) as a namespace: locations, values, state_version. Raises "
     "ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"snapshot_json", mgr_snapshot_json, METH_NOARGS,
     "snapshot_json($self, /)\n--\n\nReturns the snapshot's JSON document as a dict. Raises "
     "ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"state_version", mgr_state_version, METH_NOARGS,
     "state_version($self, /)\n--\n\nReturns the state version (fhr_state_version), an int "
     "that changes with every placement change. Raises ResidencyError subclasses as the C "
     "status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad "
     "argument, naming it."},
    {"trace", mgr_trace, METH_NOARGS,
     "trace($self, /)\n--\n\nReturns the rolling trace (fhr_trace_json) as a list of dicts. "
     "Raises ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); "
     "TypeError or ResidencyValueError for a bad argument, naming it."},
    {"set_trace_capacity", mgr_set_trace_capacity, METH_O,
     "set_trace_capacity($self, capacity, /)\n--\n\nSets how many trace entries are kept, "
     "0..2**40 (fhr_trace_set_capacity; 0 turns the trace off). Returns None. Raises "
     "ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"explain", mgr_explain, METH_O,
     "explain($self, plan, /)\n--\n\nDry-runs a ResidencyPlan against the current state "
     "(fhr_explain). Returns the explanation (a namespace). Raises ResidencyError subclasses "
     "as the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a "
     "bad argument, naming it."},
    {"execute_actions", (PyCFunction)(void (*)(void))mgr_execute_actions, METH_VARARGS | METH_KEYWORDS,
     "execute_actions($self, actions, /, *, transfer_streams=None)\n--\n\nExecutes a sequence "
     "of actions in order (fhr_execute_actions). Returns the report as a dict. Raises "
     "ResidencyPlanExecutionError (with .action) on a failed action. Raises ResidencyError "
     "subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"scope", (PyCFunction)(void (*)(void))mgr_scope, METH_VARARGS | METH_KEYWORDS,
     "scope($self, plan, /, *, transfer_streams=None)\n--\n\nReturns a ResidencyScope for plan"
     " (fhr_scope_create): a single-use context manager. Raises ResidencyError subclasses as "
     "the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad"
     " argument, naming it."},
    {"stream", mgr_stream, METH_VARARGS,
     "stream($self, location, /)\n--\n\nReturns a new Stream of the manager's backend at "
     "location (fhr_stream_create). Raises ResidencyError subclasses as the C status says "
     "(fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad argument, naming "
     "it."},
    {"_layout", mgr_layout, METH_O,
     "_layout($self, handle, /)\n--\n\nReturns the recorded layout of handle, or None."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef mgr_getset[] = {
    {"manager_id", mgr_get_id, NULL, "immutable id (fhr_manager_id)", NULL},
    {"backend", mgr_get_backend, NULL, "the backend's name: cuda, emu or model", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_manager_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyManager",
    .tp_basicsize = sizeof(fhpy_manager),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "ResidencyManager(budgets=None, *, device=None, trace_capacity=4096)\n--\n\n"
              "The residency manager over a backend (fhr_manager_create). budgets: {location: bytes}; "
              "device: the backend (None: FHEPLAN_DEVICE, else auto). Raises TypeError or "
              "ResidencyValueError for a bad argument, ResidencyBackendError when the device "
              "cannot be opened.",
    .tp_dealloc = mgr_dealloc,
    .tp_traverse = mgr_traverse,
    .tp_clear = mgr_clear,
    .tp_weaklistoffset = offsetof(fhpy_manager, weakrefs),
    .tp_methods = mgr_methods,
    .tp_getset = mgr_getset,
    .tp_init = mgr_init,
    .tp_new = PyType_GenericNew,
};
