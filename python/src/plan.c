/* python/src/plan.c — the action types to fhr_action, ResidencyPlan (an immutable fhr_plan
 * that keeps its Python actions), and ResidencyScope (enter, body, exit; exit_error when
 * both the body and the exit fail). */
#include "fhpy.h"

PyObject *fhpy_cls_ensure, *fhpy_cls_move, *fhpy_cls_drop, *fhpy_cls_discard,
    *fhpy_cls_reservation;

PyObject *fhpy_set_types(PyObject *self, PyObject *args, PyObject *kw)
{
    PyObject *meta, *e, *m, *d, *x, *r;
    static char *kwl[] = {"meta", "ensure", "move", "drop", "discard", "reservation", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$OOOOOO", kwl, &meta, &e, &m, &d, &x, &r))
        return NULL;
    Py_XSETREF(fhpy_cls_ensure, Py_NewRef(e));
    Py_XSETREF(fhpy_cls_move, Py_NewRef(m));
    Py_XSETREF(fhpy_cls_drop, Py_NewRef(d));
    Py_XSETREF(fhpy_cls_discard, Py_NewRef(x));
    Py_XSETREF(fhpy_cls_reservation, Py_NewRef(r));
    return fhpy_set_meta_type(self, meta);
}

static PyObject *attr(PyObject *o, const char *name, int required)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v && !required) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    return v;
}

static int one_action(PyObject *o, fhr_action *a)
{
    PyObject *k = PyObject_GetAttrString(o, "_kind");
    if (!k) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "expected an action (EnsureResident, MoveResident, "
                                      "DropResident, DiscardValue), not %.80s",
                     Py_TYPE(o)->tp_name);
        return 0;
    }
    long kind = PyLong_AsLong(k);
    Py_DECREF(k);
    if (kind < FHR_ACT_ENSURE || kind > FHR_ACT_DISCARD) {
        PyErr_SetString(PyExc_TypeError, "unknown action kind");
        return 0;
    }
    a->kind = (fhr_action_kind)kind;
    a->has_from = 0;
    a->at = (fhr_location){FHR_LOC_INVALID, 0};
    PyObject *h = attr(o, "handle", 1);
    int ok = h && fhpy_to_handle(h, &a->handle);
    Py_XDECREF(h);
    if (ok && kind != FHR_ACT_DISCARD) {
        PyObject *at = attr(o, kind == FHR_ACT_MOVE ? "to" : "at", 1);
        ok = at && fhpy_to_loc(at, &a->at);
        Py_XDECREF(at);
    }
    a->limbs = 0;
    if (ok && (kind == FHR_ACT_ENSURE || kind == FHR_ACT_DROP)) {
        /* an object without .limbs ensures the whole value, or drops the whole copy */
        PyObject *limbs = attr(o, "limbs", 0);
        ok = limbs && (limbs == Py_None ||
                       fhpy_u32(limbs, kind == FHR_ACT_DROP ? "a drop's limbs" : "an ensure's limbs",
                                &a->limbs));
        Py_XDECREF(limbs);
    }
    if (ok && kind == FHR_ACT_MOVE) {
        PyObject *from = attr(o, "from_location", 0);
        ok = from != NULL;
        if (ok && from != Py_None) {
            ok = fhpy_to_loc(from, &a->from);
            a->has_from = 1;
        }
        Py_XDECREF(from);
    }
    return ok;
}

int fhpy_actions(PyObject *seq, fhr_action **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    PyObject *t = PySequence_Fast(seq, "actions are a sequence");
    if (!t)
        return 0;
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(t);
    fhr_action *a = PyMem_Calloc(cnt ? (size_t)cnt : 1, sizeof *a);
    if (!a) {
        Py_DECREF(t);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < cnt; i++)
        if (!one_action(PySequence_Fast_GET_ITEM(t, i), &a[i])) {
            PyMem_Free(a);
            Py_DECREF(t);
            return 0;
        }
    Py_DECREF(t);
    *out = a;
    *n = (size_t)cnt;
    return 1;
}

/* Reservations keep their label strings in `keep` (a list the caller frees). */
static int reservations_keep(PyObject *seq, fhr_reservation **out, size_t *n, PyObject *keep)
{
    *out = NULL;
    *n = 0;
    PyObject *t = PySequence_Fast(seq, "reservations are a sequence");
    if (!t)
        return 0;
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(t);
    fhr_reservation *r = PyMem_Calloc(cnt ? (size_t)cnt : 1, sizeof *r);
    if (!r) {
        Py_DECREF(t);
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < cnt; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(t, i);
        PyObject *at = attr(o, "at", 1), *nb = at ? attr(o, "nbytes", 1) : NULL;
        PyObject *label = nb ? attr(o, "label", 0) : NULL;
        char what[64];
        snprintf(what, sizeof what, "reservations[%zd].nbytes", i);
        int ok = label && fhpy_location_arg(at, "a reservation's at", &r[i].at) &&
                 fhpy_bytes(nb, what, &r[i].nbytes);
        snprintf(what, sizeof what, "reservations[%zd].label", i);
        if (ok && label != Py_None)
            ok = fhpy_text(label, what, 1, &r[i].label) && PyList_Append(keep, label) == 0;
        Py_XDECREF(at);
        Py_XDECREF(nb);
        Py_XDECREF(label);
        if (!ok) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "reservation %zd: expected a MemoryReservation", i);
            }
            PyMem_Free(r);
            Py_DECREF(t);
            return 0;
        }
    }
    Py_DECREF(t);
    *out = r;
    *n = (size_t)cnt;
    return 1;
}

int fhpy_reservations(PyObject *seq, fhr_reservation **out, size_t *n)
{
    /* Callers that use this form copy the reservations at once (plan and request
     * creation copy everything), so the labels need only live for the call: the
     * objects in seq keep them. */
    PyObject *keep = PyList_New(0);
    if (!keep)
        return 0;
    int r = reservations_keep(seq, out, n, keep);
    Py_DECREF(keep);
    return r;
}

PyObject *fhpy_action_object(const fhr_action *a, uint64_t manager_id)
{
    fhr_handle h = a->handle;
    h.manager_id = h.manager_id ? h.manager_id : manager_id;
    PyObject *ho = fhpy_handle_new(h);
    if (!ho)
        return NULL;
    switch (a->kind) {
    case FHR_ACT_ENSURE:
        return PyObject_CallFunction(fhpy_cls_ensure, "NNI", ho, fhpy_loc_new(a->at),
                                     (unsigned)a->limbs);
    case FHR_ACT_MOVE:
        return PyObject_CallFunction(fhpy_cls_move, "NNN", ho, fhpy_loc_new(a->at),
                                     a->has_from ? fhpy_loc_new(a->from) : Py_NewRef(Py_None));
    case FHR_ACT_DROP:
        return PyObject_CallFunction(fhpy_cls_drop, "NNI", ho, fhpy_loc_new(a->at),
                                     (unsigned)a->limbs);
    default:
        return PyObject_CallFunction(fhpy_cls_discard, "N", ho);
    }
}

/* Sets .action on a plan failure from the action list it ran. */
void fhpy_set_failed_action(PyObject *seq_or_plan, const fhr_error *e)
{
    if (e->status != FHR_E_PLAN || e->action_index < 0)
        return;
    PyObject *list = NULL;
    if (PyObject_TypeCheck(seq_or_plan, &fhpy_plan_type)) {
        fhpy_plan *p = (fhpy_plan *)seq_or_plan;
        list = e->phase == FHR_PHASE_RECLAIM ? p->reclaim
               : e->phase == FHR_PHASE_ENTER ? p->enter
               : e->phase == FHR_PHASE_EXIT  ? p->exit : NULL;
    } else
        list = seq_or_plan;
    if (list && PyTuple_Check(list) && e->action_index < PyTuple_GET_SIZE(list))
        fhpy_exc_set_attr("action", PyTuple_GET_ITEM(list, e->action_index));
}

/* ---- plans -------------------------------------------------------------------------------- */

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *name = NULL, *rc = NULL, *en = NULL, *ex = NULL, *rs = NULL;
    static char *kwl[] = {"name", "reclaim", "enter", "exit", "reservations", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|UOOOO", kwl, &name, &rc, &en, &ex, &rs))
        return NULL;
    fhpy_plan *p = (fhpy_plan *)type->tp_alloc(type, 0);
    if (!p)
        return NULL;
    p->name = name ? Py_NewRef(name) : PyUnicode_FromString("");
    p->reclaim = rc ? PySequence_Tuple(rc) : PyTuple_New(0);
    p->enter = en ? PySequence_Tuple(en) : PyTuple_New(0);
    p->exit = ex ? PySequence_Tuple(ex) : PyTuple_New(0);
    p->reservations = rs ? PySequence_Tuple(rs) : PyTuple_New(0);
    if (!p->name || !p->reclaim || !p->enter || !p->exit || !p->reservations) {
        Py_DECREF(p);
        return NULL;
    }
    fhr_plan_desc d = {0};
    fhr_action *a[3] = {NULL, NULL, NULL};
    size_t na[3] = {0, 0, 0};
    fhr_reservation *r = NULL;
    PyObject *keep = PyList_New(0);
    int ok = keep && fhpy_actions(p->reclaim, &a[0], &na[0]) &&
             fhpy_actions(p->enter, &a[1], &na[1]) && fhpy_actions(p->exit, &a[2], &na[2]) &&
             reservations_keep(p->reservations, &r, &d.nreservations, keep);
    if (ok) {
        d.name = PyUnicode_AsUTF8(p->name);
        d.reclaim = a[0], d.nreclaim = na[0];
        d.enter = a[1], d.nenter = na[1];
        d.exit = a[2], d.nexit = na[2];
        d.reservations = r;
        FHPY_ERR_INIT(e);
        if (fhr_plan_create(&d, &p->p, &e) != FHR_OK) {
            fhpy_fail(&e);
            ok = 0;
        }
    }
    for (int i = 0; i < 3; i++)
        PyMem_Free(a[i]);
    PyMem_Free(r);
    Py_XDECREF(keep);
    if (!ok) {
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}

static void plan_dealloc(PyObject *self)
{
    fhpy_plan *p = (fhpy_plan *)self;
    fhr_plan_destroy(p->p);
    Py_XDECREF(p->name);
    Py_XDECREF(p->reclaim);
    Py_XDECREF(p->enter);
    Py_XDECREF(p->exit);
    Py_XDECREF(p->reservations);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *plan_repr(PyObject *self)
{
    fhpy_plan *p = (fhpy_plan *)self;
    return PyUnicode_FromFormat("ResidencyPlan(name=%R, reclaim=%R, enter=%R, exit=%R, "
                                "reservations=%R)", p->name, p->reclaim, p->enter, p->exit,
                                p->reservations);
}

static PyMemberDef plan_members[] = {
    {"name", T_OBJECT, offsetof(fhpy_plan, name), READONLY, NULL},
    {"reclaim", T_OBJECT, offsetof(fhpy_plan, reclaim), READONLY, NULL},
    {"enter", T_OBJECT, offsetof(fhpy_plan, enter), READONLY, NULL},
    {"exit", T_OBJECT, offsetof(fhpy_plan, exit), READONLY, NULL},
    {"reservations", T_OBJECT, offsetof(fhpy_plan, reservations), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject fhpy_plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyPlan",
    .tp_basicsize = sizeof(fhpy_plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ResidencyPlan(name='', reclaim=(), enter=(), exit=(), reservations=())\n--\n\n"
              "An immutable ordered plan (fhr_plan_create).",
    .tp_dealloc = plan_dealloc,
    .tp_repr = plan_repr,
    .tp_members = plan_members,
    .tp_new = plan_new,
};

/* ---- scopes ---------------------------------------------------------------------------------- */

static void scope_free_views(fhpy_scope *s)
{
    for (size_t i = 0; i < s->nviews; i++)
        if (s->views[i])
            fhr_stream_destroy(s->mgr->backend, s->views[i]);
    s->nviews = 0;
}

static PyObject *scope_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_scope *s = (fhpy_scope *)self;
    if (s->state != 0)
        return fhpy_raise_msg(FHR_E_SCOPE, "scope_enter: the scope was %s",
                              s->state == 1 ? "entered already" : "consumed (single use)");
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_scope_enter(s->sc, &e);
    Py_END_ALLOW_THREADS
    fhpy_release_drain();
    if (st != FHR_OK) {
        s->state = 2; /* a failed entry consumes the scope */
        fhr_error copy = e;
        copy.partial_report = NULL;
        fhpy_raise(&e);
        fhpy_set_failed_action((PyObject *)s->plan, &copy);
        fhr_error_clear(&e);
        return NULL;
    }
    s->state = 1;
    return Py_NewRef(self);
}

static PyObject *scope_finish(fhpy_scope *s, int body_failed)
{
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_scope_exit(s->sc, body_failed ? FHR_E_PLAN : FHR_OK, &e);
    Py_END_ALLOW_THREADS
    s->state = 2;
    fhpy_release_drain();
    const fhr_error *xe = fhr_scope_exit_error(s->sc);
    if (xe && xe->status != FHR_OK) {
        PyObject *exc = fhpy_error_object(xe);
        if (!exc)
            return NULL;
        Py_XSETREF(s->exit_error, exc);
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc); /* set .action on it */
        fhpy_set_failed_action((PyObject *)s->plan, xe);
        PyErr_Clear();
    }
    const fhr_report *r = fhr_scope_report(s->sc);
    if (r) {
        PyObject *rep = fhpy_report(r);
        if (!rep)
            return NULL;
        Py_XSETREF(s->report, rep);
    }
    if (!body_failed && st != FHR_OK) {
        fhr_error_clear(&e);
        if (s->exit_error && s->exit_error != Py_None) {
            PyErr_SetObject((PyObject *)Py_TYPE(s->exit_error), s->exit_error);
            return NULL;
        }
        return fhpy_raise_msg(st, "scope exit failed");
    }
    fhr_error_clear(&e);
    Py_RETURN_FALSE;
}

static PyObject *scope_exit(PyObject *self, PyObject *args)
{
    fhpy_scope *s = (fhpy_scope *)self;
    PyObject *t = Py_None, *v = Py_None, *tb = Py_None;
    if (!PyArg_ParseTuple(args, "|OOO", &t, &v, &tb))
        return NULL;
    if (s->state != 1)
        Py_RETURN_FALSE; /* never entered, or its entry failed: nothing to exit */
    return scope_finish(s, t != Py_None);
}

static PyObject *scope_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_scope *s = (fhpy_scope *)self;
    if (s->state != 1) { /* a failed entry or a finished exit: a no-op */
        s->state = 2;
        Py_RETURN_NONE;
    }
    PyObject *r = scope_finish(s, 1);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* The collector sees a scope: its exit_error's __context__ is the body's exception, whose
 * traceback holds the frame that holds the scope. Clearing drops the Python results only;
 * the library scope, its streams and the manager go in dealloc. */
static int scope_traverse(PyObject *self, visitproc visit, void *arg)
{
    fhpy_scope *s = (fhpy_scope *)self;
    Py_VISIT(s->exit_error);
    Py_VISIT(s->report);
    Py_VISIT(s->plan);
    Py_VISIT(s->keep);
    Py_VISIT(s->mgr);
    return 0;
}

static int scope_clear(PyObject *self)
{
    fhpy_scope *s = (fhpy_scope *)self;
    Py_CLEAR(s->exit_error);
    Py_CLEAR(s->report);
    return 0;
}

static void scope_dealloc(PyObject *self)
{
    fhpy_scope *s = (fhpy_scope *)self;
    PyObject_GC_UnTrack(self);
    Py_BEGIN_ALLOW_THREADS
    fhr_scope_destroy(s->sc);
    if (s->mgr)
        scope_free_views(s);
    Py_END_ALLOW_THREADS
    PyMem_Free(s->views);
    Py_XDECREF(s->keep); /* after the views */
    Py_XDECREF(s->plan);
    Py_XDECREF(s->report);
    Py_XDECREF(s->exit_error);
    Py_XDECREF(s->mgr);
    Py_TYPE(self)->tp_free(self);
    fhpy_release_drain();
}

static PyObject *scope_get_path(PyObject *self, void *c)
{
    (void)c;
    const char *p = fhr_scope_path(((fhpy_scope *)self)->sc);
    return PyUnicode_FromString(p ? p : "");
}

static PyObject *scope_get_entered(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((fhpy_scope *)self)->state == 1);
}

static PyObject *scope_get_closed(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((fhpy_scope *)self)->state == 2);
}

static PyMethodDef scope_methods[] = {
    {"__enter__", scope_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", scope_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nEnds it (as release or exit). "
     "Returns False: exceptions propagate."},
    {"close", scope_close, METH_NOARGS,
     "close($self, /)\n--\n\nCloses the scope (fhr_scope_close; a no-op after a failed entry)."
     " Returns None."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef scope_members[] = {
    {"report", T_OBJECT, offsetof(fhpy_scope, report), READONLY,
     "the complete report, published after a successful exit"},
    {"exit_error", T_OBJECT, offsetof(fhpy_scope, exit_error), READONLY,
     "the exit's ResidencyPlanExecutionError when the exit failed"},
    {"plan", T_OBJECT, offsetof(fhpy_scope, plan), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef scope_getset[] = {
    {"path", scope_get_path, NULL, "outer/inner", NULL},
    {"entered", scope_get_entered, NULL, NULL, NULL},
    {"closed", scope_get_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_scope_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyScope",
    .tp_basicsize = sizeof(fhpy_scope),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = scope_traverse,
    .tp_clear = scope_clear,
    .tp_doc = "The placement and reservation lifetime of a plan (a single-use context manager).",
    .tp_dealloc = scope_dealloc,
    .tp_methods = scope_methods,
    .tp_members = scope_members,
    .tp_getset = scope_getset,
};
