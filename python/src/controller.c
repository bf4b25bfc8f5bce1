/* python/src/controller.c — policies (DeterministicTieredLRU, DeterministicLookahead),
 * ResidencyController (decide, use), ResidencyDecision and the use context manager. */
#include "fhpy.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    fhr_policy *p;
} fhpy_policy;

typedef struct {
    PyObject_HEAD
    fhpy_manager *mgr;
    PyObject *policy;
    fhr_controller *c;
} fhpy_controller;

typedef struct {
    PyObject_HEAD
    fhpy_manager *mgr;
    fhr_decision *d;
} fhpy_decision;

typedef struct {
    PyObject_HEAD
    fhpy_controller *ctl;
    PyObject *what;        /* the request or the decision */
    fhr_stream_map *consumer, *transfer;
    size_t nconsumer, ntransfer;
    int wait;
    PyObject *keep;        /* list of the stream objects behind the views */
    fhr_use *u;
    int state;             /* 0 new, 1 active, 2 ended */
    PyObject *report;
    PyObject *decision;
} fhpy_use;

/* ---- policies ------------------------------------------------------------------------------- */

/* fallback_tiers: {location: (fallback, ...)} */
static int tier_chains(PyObject *tiers, fhr_tier_chain **out, size_t *n, fhr_location **store)
{
    *out = NULL;
    *n = 0;
    *store = NULL;
    if (!tiers || tiers == Py_None)
        return 1;
    if (!PyDict_Check(tiers)) {
        PyErr_SetString(PyExc_TypeError, "fallback_tiers is a dict {location: (fallback, ...)}");
        return 0;
    }
    Py_ssize_t cnt = PyDict_Size(tiers), pos = 0, total = 0;
    PyObject *k, *v;
    while (PyDict_Next(tiers, &pos, &k, &v)) {
        Py_ssize_t l = PySequence_Size(v);
        if (l < 0)
            return 0;
        total += l;
    }
    fhr_tier_chain *c = PyMem_Calloc(cnt ? (size_t)cnt : 1, sizeof *c);
    fhr_location *locs = PyMem_Calloc(total ? (size_t)total : 1, sizeof *locs);
    if (!c || !locs) {
        PyMem_Free(c);
        PyMem_Free(locs);
        PyErr_NoMemory();
        return 0;
    }
    pos = 0;
    size_t i = 0, at = 0;
    while (PyDict_Next(tiers, &pos, &k, &v)) {
        if (!fhpy_to_loc(k, &c[i].loc))
            goto fail;
        PyObject *t = PySequence_Tuple(v);
        if (!t)
            goto fail;
        c[i].fallback = &locs[at];
        c[i].nfallback = (size_t)PyTuple_GET_SIZE(t);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++)
            if (!fhpy_to_loc(PyTuple_GET_ITEM(t, j), &locs[at++])) {
                Py_DECREF(t);
                goto fail;
            }
        Py_DECREF(t);
        i++;
    }
    *out = c;
    *n = i;
    *store = locs;
    return 1;
fail:
    PyMem_Free(c);
    PyMem_Free(locs);
    return 0;
}

static PyObject *policy_make(PyTypeObject *type, PyObject *tiers, PyObject *future)
{
    fhr_tier_chain *c;
    size_t n;
    fhr_location *store;
    if (!tier_chains(tiers, &c, &n, &store))
        return NULL;
    fhr_future_use *fu = NULL;
    size_t nf = 0;
    if (future) {
        PyObject *t = PySequence_Fast(future, "future is a sequence of (position, handle, at"
                                              "[, limbs])");
        if (!t)
            goto fail;
        nf = (size_t)PySequence_Fast_GET_SIZE(t);
        fu = PyMem_Calloc(nf ? nf : 1, sizeof *fu);
        for (size_t i = 0; fu && i < nf; i++) {
            PyObject *ho, *lo;
            unsigned long long p;
            unsigned int limbs = 0;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(t, i), "KOO|I", &p, &ho, &lo, &limbs) ||
                !fhpy_to_handle(ho, &fu[i].handle) || !fhpy_to_loc(lo, &fu[i].at)) {
                Py_DECREF(t);
                goto fail;
            }
            fu[i].position = p;
            fu[i].limbs = limbs;
        }
        Py_DECREF(t);
        if (!fu) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    FHPY_ERR_INIT(e);
    fhr_policy *p = NULL;
    fhr_status st = future ? fhr_policy_lookahead_create(c, n, fu, nf, &p, &e)
                           : fhr_policy_tiered_lru_create(c, n, &p, &e);
    PyMem_Free(c);
    PyMem_Free(store);
    PyMem_Free(fu);
    if (st != FHR_OK) {
        return fhpy_fail(&e);
    }
    fhpy_policy *o = (fhpy_policy *)type->tp_alloc(type, 0);
    if (!o) {
        fhr_policy_destroy(p);
        return NULL;
    }
    o->p = p;
    return (PyObject *)o;
fail:
    PyMem_Free(c);
    PyMem_Free(store);
    PyMem_Free(fu);
    return NULL;
}

static PyObject *lru_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *tiers = Py_None;
    static char *kwl[] = {"fallback_tiers", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", kwl, &tiers))
        return NULL;
    return policy_make(type, tiers, NULL);
}

static PyObject *lookahead_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *tiers = Py_None, *future = NULL;
    static char *kwl[] = {"fallback_tiers", "future", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO", kwl, &tiers, &future))
        return NULL;
    PyObject *empty = future ? NULL : PyTuple_New(0);
    PyObject *r = policy_make(type, tiers, future ? future : empty);
    Py_XDECREF(empty);
    return r;
}

static void policy_dealloc(PyObject *self)
{
    fhr_policy_destroy(((fhpy_policy *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *policy_get_name(PyObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(fhr_policy_name(((fhpy_policy *)self)->p));
}

static PyGetSetDef policy_getset[] = {{"name", policy_get_name, NULL, NULL, NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_policy_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.DeterministicTieredLRU",
    .tp_basicsize = sizeof(fhpy_policy),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DeterministicTieredLRU(fallback_tiers=None)\n--\n\nThe tiered LRU policy "
              "(fhr_policy_tiered_lru_create).",
    .tp_dealloc = policy_dealloc,
    .tp_getset = policy_getset,
    .tp_new = lru_new,
};

static PyTypeObject lookahead_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.DeterministicLookahead",
    .tp_basicsize = sizeof(fhpy_policy),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DeterministicLookahead(fallback_tiers=None, future=())\n--\n\nThe lookahead "
              "policy (fhr_policy_lookahead_create): farthest next use first; future: "
              "((position, handle, at[, limbs]), ...), limbs a cut value's q-limbs (0: whole): "
              "the parts of a copy its next use does not read may go before the copy.",
    .tp_dealloc = policy_dealloc,
    .tp_getset = policy_getset,
    .tp_new = lookahead_new,
};

/* ---- requests ----------------------------------------------------------------------------- */

typedef struct req_buf {
    fhr_request r;
    fhr_requirement *reqs;
    fhr_reservation *res;
    PyObject *keep;
} req_buf;

static void req_free(req_buf *b)
{
    PyMem_Free(b->reqs);
    PyMem_Free(b->res);
    Py_XDECREF(b->keep);
}

static int req_parse(PyObject *o, req_buf *b)
{
    memset(b, 0, sizeof *b);
    PyObject *name = PyObject_GetAttrString(o, "name");
    PyObject *reqs = name ? PyObject_GetAttrString(o, "requirements") : NULL;
    PyObject *res = reqs ? PyObject_GetAttrString(o, "reservations") : NULL;
    PyObject *pos = res ? PyObject_GetAttrString(o, "position") : NULL;
    if (!pos) {
        Py_XDECREF(name);
        Py_XDECREF(reqs);
        Py_XDECREF(res);
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "expected a ResidencyRequest or ResidencyDecision, "
                                          "not %.80s", Py_TYPE(o)->tp_name);
        }
        return 0;
    }
    b->keep = Py_BuildValue("(OOOO)", name, reqs, res, pos);
    Py_DECREF(name);
    Py_DECREF(reqs);
    Py_DECREF(res);
    Py_DECREF(pos);
    if (!b->keep)
        return 0;
    name = PyTuple_GET_ITEM(b->keep, 0);
    reqs = PyTuple_GET_ITEM(b->keep, 1);
    res = PyTuple_GET_ITEM(b->keep, 2);
    pos = PyTuple_GET_ITEM(b->keep, 3);
    if (!fhpy_text(name, "name", 1, &b->r.name))
        return 0;
    if (!b->r.name)
        b->r.name = "";
    b->r.position = 0;
    if (pos != Py_None && !fhpy_bytes(pos, "position", &b->r.position))
        return 0;
    PyObject *t = PySequence_Fast(reqs, "requirements are a sequence");
    if (!t)
        return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(t);
    b->reqs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *b->reqs);
    for (Py_ssize_t i = 0; b->reqs && i < n; i++) {
        PyObject *q = PySequence_Fast_GET_ITEM(t, i);
        PyObject *h = PyObject_GetAttrString(q, "handle");
        PyObject *at = h ? PyObject_GetAttrString(q, "at") : NULL;
        if (!at && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "requirements[%zd] must be a ResidencyRequirement "
                                          "(handle, at), not %.80s", i, Py_TYPE(q)->tp_name);
        }
        int ok = at && fhpy_handle_arg_of(h, "a requirement's handle", &b->reqs[i].handle) &&
                 fhpy_location_arg(at, "a requirement's at", &b->reqs[i].at);
        /* .limbs: the q-limbs of a cut value (an object without it: the whole value) */
        PyObject *limbs = ok ? PyObject_GetAttrString(q, "limbs") : NULL;
        if (ok && !limbs && PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        else if (ok)
            ok = limbs && fhpy_u32(limbs, "a requirement's limbs", &b->reqs[i].limbs);
        Py_XDECREF(limbs);
        Py_XDECREF(h);
        Py_XDECREF(at);
        if (!ok) {
            Py_DECREF(t);
            return 0;
        }
    }
    Py_DECREF(t);
    if (!b->reqs) {
        PyErr_NoMemory();
        return 0;
    }
    b->r.requirements = b->reqs;
    b->r.nrequirements = (size_t)n;
    if (res != Py_None && !fhpy_reservations(res, &b->res, &b->r.nreservations))
        return 0;
    b->r.reservations = b->res;
    return 1;
}

/* ---- controller --------------------------------------------------------------------------- */

static PyObject *ctl_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *mgr, *policy = Py_None;
    static char *kwl[] = {"manager", "policy", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|O", kwl, &fhpy_manager_type, &mgr, &policy))
        return NULL;
    if (policy == Py_None) {
        policy = PyObject_CallNoArgs((PyObject *)&fhpy_policy_type);
        if (!policy)
            return NULL;
    } else if (!PyObject_TypeCheck(policy, &fhpy_policy_type) &&
               !PyObject_TypeCheck(policy, &lookahead_type)) {
        PyErr_SetString(PyExc_TypeError, "policy: DeterministicTieredLRU or "
                                         "DeterministicLookahead");
        return NULL;
    } else
        Py_INCREF(policy);
    fhpy_manager *m = (fhpy_manager *)mgr;
    if (!m->m) {
        Py_DECREF(policy);
        PyErr_SetString(PyExc_RuntimeError, "the manager is not initialised");
        return NULL;
    }
    FHPY_ERR_INIT(e);
    fhr_controller *c = NULL;
    if (fhr_controller_create(m->m, ((fhpy_policy *)policy)->p, &c, &e) != FHR_OK) {
        Py_DECREF(policy);
        return fhpy_fail(&e);
    }
    fhpy_controller *o = (fhpy_controller *)type->tp_alloc(type, 0);
    if (!o) {
        fhr_controller_destroy(c);
        Py_DECREF(policy);
        return NULL;
    }
    o->mgr = (fhpy_manager *)Py_NewRef(mgr);
    o->policy = policy;
    o->c = c;
    return (PyObject *)o;
}

static void ctl_dealloc(PyObject *self)
{
    fhpy_controller *o = (fhpy_controller *)self;
    fhr_controller_destroy(o->c);
    Py_XDECREF(o->policy);
    Py_XDECREF(o->mgr);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *decision_wrap(fhpy_manager *m, fhr_decision *d)
{
    fhpy_decision *o = PyObject_New(fhpy_decision, &fhpy_decision_type);
    if (!o) {
        fhr_decision_destroy(d);
        return NULL;
    }
    o->mgr = (fhpy_manager *)Py_NewRef((PyObject *)m);
    o->d = d;
    return (PyObject *)o;
}

static PyObject *ctl_decide(PyObject *self, PyObject *req)
{
    fhpy_controller *c = (fhpy_controller *)self;
    req_buf b;
    if (!req_parse(req, &b)) {
        req_free(&b);
        return NULL;
    }
    FHPY_ERR_INIT(e);
    fhr_decision *d = NULL;
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_decide(c->c, &b.r, &d, &e);
    Py_END_ALLOW_THREADS
    req_free(&b);
    if (st != FHR_OK) {
        return fhpy_fail(&e);
    }
    return decision_wrap(c->mgr, d);
}

static PyObject *ctl_use(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_controller *c = (fhpy_controller *)self;
    PyObject *what, *consumer = Py_None, *transfer = Py_None;
    int wait = 0;
    static char *kwl[] = {"request", "consumer_streams", "transfer_streams", "wait", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOp", kwl, &what, &consumer, &transfer,
                                     &wait))
        return NULL;
    fhpy_use *u = PyObject_New(fhpy_use, &fhpy_use_type);
    if (!u)
        return NULL;
    u->ctl = (fhpy_controller *)Py_NewRef(self);
    u->what = Py_NewRef(what);
    u->consumer = u->transfer = NULL;
    u->nconsumer = u->ntransfer = 0;
    u->keep = NULL;
    u->wait = wait;
    u->u = NULL;
    u->state = 0;
    u->report = Py_NewRef(Py_None);
    u->decision = Py_NewRef(Py_None);
    if (!fhpy_stream_maps(c->mgr, consumer, &u->consumer, &u->nconsumer, &u->keep) ||
        !fhpy_stream_maps(c->mgr, transfer, &u->transfer, &u->ntransfer, &u->keep)) {
        Py_DECREF(u);
        return NULL;
    }
    return (PyObject *)u;
}

static PyObject *ctl_get_manager(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef((PyObject *)((fhpy_controller *)self)->mgr);
}

static PyObject *ctl_get_policy(PyObject *self, void *c)
{
    (void)c;
    return Py_NewRef(((fhpy_controller *)self)->policy);
}

static PyMethodDef ctl_methods[] = {
    {"decide", ctl_decide, METH_O,
     "decide($self, request, /)\n--\n\nReturns a ResidencyDecision for request (fhr_decide), "
     "valid while the manager's state version is unchanged. Raises ResidencyError subclasses "
     "as the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a "
     "bad argument, naming it."},
    {"use", (PyCFunction)(void (*)(void))ctl_use, METH_VARARGS | METH_KEYWORDS,
     "use($self, request, /, *, consumer_streams=None, transfer_streams=None, wait=False)\n--"
     "\n\nReturns a ResidencyUse (a context manager) that decides, enters at the decision's "
     "state version and leases the requirements (fhr_use_begin_opts). Raises ResidencyError "
     "subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ctl_getset[] = {{"manager", ctl_get_manager, NULL, NULL, NULL},
                                   {"policy", ctl_get_policy, NULL, NULL, NULL},
                                   {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject fhpy_controller_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyController",
    .tp_basicsize = sizeof(fhpy_controller),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ResidencyController(manager, policy=None)\n--\n\nDecisions and uses over a "
              "manager (fhr_controller_create); policy None: DeterministicTieredLRU().",
    .tp_dealloc = ctl_dealloc,
    .tp_methods = ctl_methods,
    .tp_getset = ctl_getset,
    .tp_new = ctl_new,
};

/* ---- decisions ----------------------------------------------------------------------------- */

static void decision_dealloc(PyObject *self)
{
    fhpy_decision *o = (fhpy_decision *)self;
    fhr_decision_destroy(o->d);
    Py_XDECREF(o->mgr);
    Py_TYPE(self)->tp_free(self);
}

static uint64_t mid(fhpy_decision *o) { return fhr_manager_id(o->mgr->m); }

static PyObject *dec_feasible(PyObject *s, void *c) { (void)c; return PyBool_FromLong(fhr_decision_feasible(((fhpy_decision *)s)->d)); }
static PyObject *dec_version(PyObject *s, void *c) { (void)c; return PyLong_FromUnsignedLongLong(fhr_decision_state_version(((fhpy_decision *)s)->d)); }
static PyObject *dec_explored(PyObject *s, void *c) { (void)c; return PyLong_FromUnsignedLongLong(fhr_decision_explored_states(((fhpy_decision *)s)->d)); }
static PyObject *dec_policy(PyObject *s, void *c) { (void)c; return PyUnicode_FromString(fhr_decision_policy(((fhpy_decision *)s)->d)); }
static PyObject *dec_explanation(PyObject *s, void *c) { (void)c; return fhpy_explanation(fhr_decision_explanation(((fhpy_decision *)s)->d)); }

/* A tuple of n items made by item(ctx, i); NULL (and an exception) if one fails. */
static PyObject *tuple_of(size_t n, PyObject *(*item)(void *ctx, size_t i), void *ctx)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *x = item(ctx, i);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    return t;
}

static PyObject *eviction_action(void *ctx, size_t i)
{
    fhpy_decision *o = ctx;
    return fhpy_action_object(&fhr_decision_eviction(o->d, i)->action, mid(o));
}

static PyObject *eviction_detail(void *ctx, size_t i)
{
    fhpy_decision *o = ctx;
    const fhr_eviction *ev = fhr_decision_eviction(o->d, i);
    PyObject *d = Py_BuildValue("{s:N,s:i,s:K,s:K}", "action",
                                fhpy_action_object(&ev->action, mid(o)), "priority",
                                ev->priority, "last_use", (unsigned long long)ev->last_use,
                                "nbytes", (unsigned long long)ev->nbytes);
    PyObject *r = fhpy_record("eviction", d);
    Py_XDECREF(d);
    return r;
}

static PyObject *protected_copy(void *ctx, size_t i)
{
    static const char *const why[] = {"leased", "held", "pending", "required", "no_tier"};
    const fhr_protected_copy *p = fhr_decision_protected(((fhpy_decision *)ctx)->d, i);
    PyObject *reasons = PyList_New(0);
    for (int b = 0; reasons && b < 5; b++)
        if (p->reasons & (1u << b)) {
            PyObject *s = PyUnicode_FromString(why[b]);
            if (!s || PyList_Append(reasons, s) < 0)
                Py_CLEAR(reasons);
            Py_XDECREF(s);
        }
    PyObject *rt = reasons ? PyList_AsTuple(reasons) : NULL;
    Py_XDECREF(reasons);
    PyObject *d = rt ? Py_BuildValue("{s:N,s:N,s:K,s:N}", "handle", fhpy_handle_new(p->handle),
                                     "at", fhpy_loc_new(p->at), "nbytes",
                                     (unsigned long long)p->nbytes, "reasons", rt)
                     : NULL;
    PyObject *r = fhpy_record("protected", d);
    Py_XDECREF(d);
    return r;
}

static PyObject *dec_evictions(PyObject *self, void *c)
{
    (void)c;
    return tuple_of(fhr_decision_nevictions(((fhpy_decision *)self)->d), eviction_action, self);
}

static PyObject *dec_eviction_details(PyObject *self, void *c)
{
    (void)c;
    return tuple_of(fhr_decision_nevictions(((fhpy_decision *)self)->d), eviction_detail, self);
}

static PyObject *dec_protected(PyObject *self, void *c)
{
    (void)c;
    return tuple_of(fhr_decision_nprotected(((fhpy_decision *)self)->d), protected_copy, self);
}

typedef struct phase_ctx {
    const fhr_plan *p;
    fhr_phase ph;
    uint64_t m;
} phase_ctx;

static PyObject *plan_action(void *ctx, size_t i)
{
    phase_ctx *x = ctx;
    return fhpy_action_object(fhr_plan_action(x->p, x->ph, i), x->m);
}

static PyObject *actions_tuple(const fhr_plan *p, fhr_phase ph, uint64_t m)
{
    phase_ctx x = {p, ph, m};
    return tuple_of(fhr_plan_nactions(p, ph), plan_action, &x);
}

static PyObject *dec_plan(PyObject *self, void *c)
{
    (void)c;
    fhpy_decision *o = (fhpy_decision *)self;
    const fhr_plan *p = fhr_decision_plan(o->d);
    if (!p)
        Py_RETURN_NONE;
    size_t nr = fhr_plan_nreservations(p);
    PyObject *res = PyTuple_New((Py_ssize_t)nr);
    for (size_t i = 0; res && i < nr; i++) {
        const fhr_reservation *r = fhr_plan_reservation(p, i);
        PyObject *x = PyObject_CallFunction(fhpy_cls_reservation, "NKs", fhpy_loc_new(r->at),
                                            (unsigned long long)r->nbytes,
                                            r->label ? r->label : "");
        if (!x) {
            Py_DECREF(res);
            return NULL;
        }
        PyTuple_SET_ITEM(res, (Py_ssize_t)i, x);
    }
    PyObject *kw = res ? Py_BuildValue("{s:s,s:N,s:N,s:N,s:N}", "name", fhr_plan_name(p),
                                       "reclaim", actions_tuple(p, FHR_PHASE_RECLAIM, mid(o)),
                                       "enter", actions_tuple(p, FHR_PHASE_ENTER, mid(o)), "exit",
                                       actions_tuple(p, FHR_PHASE_EXIT, mid(o)), "reservations",
                                       res)
                       : NULL;
    PyObject *args = kw ? PyTuple_New(0) : NULL;
    PyObject *r = args ? PyObject_Call((PyObject *)&fhpy_plan_type, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

static PyObject *dec_peak(PyObject *self, PyObject *at)
{
    fhr_location loc;
    if (!fhpy_to_loc(at, &loc))
        return NULL;
    return PyLong_FromUnsignedLongLong(
        fhr_decision_predicted_peak_bytes(((fhpy_decision *)self)->d, loc));
}

static PyObject *dec_json(PyObject *self, PyObject *unused)
{
    (void)unused;
    return fhpy_json(fhr_decision_json(((fhpy_decision *)self)->d));
}

static PyGetSetDef dec_getset[] = {
    {"feasible", dec_feasible, NULL, NULL, NULL},
    {"state_version", dec_version, NULL, "the manager state the decision was made against", NULL},
    {"explored_states", dec_explored, NULL, NULL, NULL},
    {"policy", dec_policy, NULL, NULL, NULL},
    {"explanation", dec_explanation, NULL, "feasible, reason, predicted_peak_bytes, ...", NULL},
    {"evictions", dec_evictions, NULL, "the reclaim actions, in order", NULL},
    {"eviction_details", dec_eviction_details, NULL, "priority, last use and bytes of each", NULL},
    {"protected", dec_protected, NULL, "copies the policy could not evict (infeasible)", NULL},
    {"plan", dec_plan, NULL, "the decision's plan as a ResidencyPlan", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef dec_methods[] = {
    {"predicted_peak_bytes", dec_peak, METH_O,
     "predicted_peak_bytes($self, location, /)\n--\n\nReturns the decision's predicted peak "
     "bytes at location (fhr_decision_predicted_peak_bytes). Raises ResidencyError subclasses "
     "as the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a "
     "bad argument, naming it."},
    {"json", dec_json, METH_NOARGS,
     "json($self, /)\n--\n\nReturns the decision's JSON document (fhr_decision_json) as a "
     "dict. Raises ResidencyError subclasses as the C status says (fheplan-python(7) ERRORS); "
     "TypeError or ResidencyValueError for a bad argument, naming it."},
    {NULL, NULL, 0, NULL}};

PyTypeObject fhpy_decision_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyDecision",
    .tp_basicsize = sizeof(fhpy_decision),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A manager-bound, state-versioned plan and its policy evidence.",
    .tp_dealloc = decision_dealloc,
    .tp_getset = dec_getset,
    .tp_methods = dec_methods,
};

/* ---- use ------------------------------------------------------------------------------------ */

static int use_alive(PyObject *o) { return ((fhpy_use *)o)->state == 1; }
static fhr_backend *use_backend(PyObject *o) { return ((fhpy_use *)o)->ctl->mgr->backend; }

static int use_add_consumer(PyObject *o, fhr_location at, PyObject *stream)
{
    fhpy_use *u = (fhpy_use *)o;
    fhr_stream *view = NULL;
    if (!fhpy_stream_view(u->ctl->mgr, stream, at, &view, &u->keep))
        return -1;
    if (!view)
        return 0;
    fhr_stream_map *nc = PyMem_Realloc(u->consumer, (u->nconsumer + 1) * sizeof *nc);
    if (!nc) {
        fhr_stream_destroy(u->ctl->mgr->backend, view);
        PyErr_NoMemory();
        return -1;
    }
    u->consumer = nc;
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_use_add_consumer_stream(u->u, at, view, &e);
    Py_END_ALLOW_THREADS
    if (st != FHR_OK) {
        fhr_stream_destroy(u->ctl->mgr->backend, view);
        fhpy_fail(&e);
        return -1;
    }
    u->consumer[u->nconsumer++] = (fhr_stream_map){at, view}; /* freed at the end */
    return 0;
}

/* An export of a use's value: a hold on the copy (core.c, rule 2). */
static int use_export_begin(PyObject *o, PyObject *handle, fhr_location at, void **token)
{
    *token = NULL;
    return !handle || fhpy_protect(((fhpy_use *)o)->ctl->mgr, handle, at, token);
}

static void use_export_end(PyObject *o, void *token)
{
    (void)o;
    fhpy_unprotect(token);
}

static const fhpy_owner_ops use_ops = {
    .alive = use_alive,
    .add_consumer = use_add_consumer,
    .backend = use_backend,
    .export_begin = use_export_begin,
    .export_end = use_export_end,
    .ended = "the use ended: its values must not be read (arrays exported from them stay "
             "valid until they are deleted)",
};

/* Destroys the stream views, then lets go of the streams' objects (interpreter lock held).
 * Only once the use no longer records on them: after an end that succeeded, or after
 * fhr_use_destroy. */
static void use_free_streams(fhpy_use *u)
{
    fhpy_manager *m = u->ctl->mgr;
    fhpy_stream_maps_free(m, u->consumer, u->nconsumer);
    fhpy_stream_maps_free(m, u->transfer, u->ntransfer);
    u->consumer = u->transfer = NULL;
    u->nconsumer = u->ntransfer = 0;
    Py_CLEAR(u->keep);
}

static PyObject *use_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    fhpy_use *u = (fhpy_use *)self;
    if (u->state != 0)
        return fhpy_raise_msg(FHR_E_SCOPE, "use: entered already (a use is single-use)");
    FHPY_ERR_INIT(e);
    fhr_status st;
    fhr_controller *c = u->ctl->c;
    if (PyObject_TypeCheck(u->what, &fhpy_decision_type)) {
        fhpy_decision *d = (fhpy_decision *)u->what;
        if (d->mgr != u->ctl->mgr)
            return fhpy_raise_msg(FHR_E_HANDLE, "use: the decision is another manager's");
        Py_BEGIN_ALLOW_THREADS
        st = fhr_use_decision(c, d->d, u->consumer, u->nconsumer, u->transfer, u->ntransfer,
                              &u->u, &e);
        Py_END_ALLOW_THREADS
    } else {
        req_buf b;
        if (!req_parse(u->what, &b)) {
            req_free(&b);
            return NULL;
        }
        fhr_use_opts o = {u->wait ? FHR_USE_WAIT : 0u, 0};
        Py_BEGIN_ALLOW_THREADS
        st = fhr_use_begin_opts(c, &b.r, u->consumer, u->nconsumer, u->transfer, u->ntransfer,
                                &o, &u->u, &e);
        Py_END_ALLOW_THREADS
        req_free(&b);
    }
    fhpy_release_drain();
    if (st != FHR_OK) {
        u->state = 2;
        use_free_streams(u);
        return fhpy_fail(&e);
    }
    u->state = 1;
    const fhr_decision *d = fhr_use_decision_of(u->u);
    (void)d; /* owned by the use: exposed through its JSON only while active */
    return Py_NewRef(self);
}

static PyObject *use_value(PyObject *self, PyObject *args, PyObject *kw)
{
    fhpy_use *u = (fhpy_use *)self;
    fhpy_handle_arg h;
    fhr_location at;
    static char *kwl[] = {"handle", "at", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&", kwl, fhpy_handle_conv, &h,
                                     fhpy_to_loc_conv, &at))
        return NULL;
    if (u->state != 1)
        return fhpy_raise_msg(FHR_E_SCOPE, "use.value: the use is not active");
    const fhr_value *v = fhr_use_value(u->u, h.h, at);
    if (!v)
        return fhpy_raise_msg(FHR_E_STATE, "use.value: %R is not required at that location",
                              h.obj);
    PyObject *layout;
    if (!fhpy_layout_of(u->ctl->mgr, h.obj, &layout))
        return NULL;
    return fhpy_leased_new(self, &use_ops, v, layout, h.obj);
}

static PyObject *use_add_consumer_stream(PyObject *self, PyObject *args)
{
    fhr_location at;
    PyObject *stream;
    if (!PyArg_ParseTuple(args, "O&O", fhpy_to_loc_conv, &at, &stream))
        return NULL;
    if (((fhpy_use *)self)->state != 1)
        return fhpy_raise_msg(FHR_E_SCOPE, "use.add_consumer_stream: the use is not active");
    if (use_add_consumer(self, at, stream) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *use_finish(fhpy_use *u, int body_failed)
{
    FHPY_ERR_INIT(e);
    fhr_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fhr_use_end(u->u, body_failed ? FHR_E_PLAN : FHR_OK, &e);
    Py_END_ALLOW_THREADS
    u->state = 2;
    fhpy_release_drain();
    const fhr_report *r = fhr_use_report(u->u);
    if (r) {
        PyObject *rep = fhpy_report(r);
        if (!rep)
            return NULL;
        Py_XSETREF(u->report, rep);
    }
    const fhr_decision *d = fhr_use_decision_of(u->u);
    if (d) {
        PyObject *j = fhpy_json(fhr_decision_json(d));
        if (!j)
            return NULL;
        Py_XSETREF(u->decision, j);
    }
    /* The stream views go once the use no longer records on them. After a failed end a
     * lease may still be active (a refused end leaves the whole use active; a lease whose
     * event could not be recorded is ended by the destroy): dealloc frees them after
     * fhr_use_destroy. With the interpreter lock held: the arrays are PyMem memory, which
     * needs the thread state (Python 3.12 finds the allocator through it). */
    if (st == FHR_OK)
        use_free_streams(u);
    if (st != FHR_OK && !body_failed) {
        return fhpy_fail(&e);
    }
    fhr_error_clear(&e);
    Py_RETURN_FALSE;
}

static PyObject *use_exit(PyObject *self, PyObject *args)
{
    fhpy_use *u = (fhpy_use *)self;
    PyObject *t = Py_None, *v = Py_None, *tb = Py_None;
    if (!PyArg_ParseTuple(args, "|OOO", &t, &v, &tb))
        return NULL;
    if (u->state != 1)
        Py_RETURN_FALSE;
    return use_finish(u, t != Py_None);
}

static void use_dealloc(PyObject *self)
{
    fhpy_use *u = (fhpy_use *)self;
    Py_BEGIN_ALLOW_THREADS
    if (u->u)
        fhr_use_destroy(u->u);
    Py_END_ALLOW_THREADS
    if (u->ctl)
        use_free_streams(u);
    Py_XDECREF(u->keep);
    Py_XDECREF(u->what);
    Py_XDECREF(u->report);
    Py_XDECREF(u->decision);
    Py_XDECREF(u->ctl);
    Py_TYPE(self)->tp_free(self);
    fhpy_release_drain();
}

static PyMethodDef use_methods[] = {
    {"__enter__", use_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nReturns self."},
    {"__exit__", use_exit, METH_VARARGS,
     "__exit__($self, exc_type, exc_value, traceback, /)\n--\n\nEnds it (as release or exit). "
     "Returns False: exceptions propagate."},
    {"value", (PyCFunction)(void (*)(void))use_value, METH_VARARGS | METH_KEYWORDS,
     "value($self, handle, at)\n--\n\nReturns the borrowed value of a requirement "
     "(fhr_use_value), a LeasedValue valid while the use is active. Raises ResidencyError "
     "subclasses as the C status says (fheplan-python(7) ERRORS); TypeError or "
     "ResidencyValueError for a bad argument, naming it."},
    {"add_consumer_stream", use_add_consumer_stream, METH_VARARGS,
     "add_consumer_stream($self, at, stream, /)\n--\n\nRegisters another consumer stream at "
     "`at` (fhr_use_add_consumer_stream). Returns None. Raises ResidencyError subclasses as "
     "the C status says (fheplan-python(7) ERRORS); TypeError or ResidencyValueError for a bad"
     " argument, naming it."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef use_members[] = {
    {"report", T_OBJECT, offsetof(fhpy_use, report), READONLY, "after a successful end"},
    {"decision", T_OBJECT, offsetof(fhpy_use, decision), READONLY,
     "the decision the use made, as JSON (after the end)"},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject fhpy_use_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fheplan.ResidencyUse",
    .tp_basicsize = sizeof(fhpy_use),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "controller.use(...): decide, version-checked entry, strict leases.",
    .tp_dealloc = use_dealloc,
    .tp_methods = use_methods,
    .tp_members = use_members,
};

int fhpy_add_types_controller(PyObject *mod)
{
    static PyTypeObject *const ts[] = {&fhpy_policy_type, &lookahead_type,
                                       &fhpy_controller_type, &fhpy_decision_type,
                                       &fhpy_use_type};
    static const char *const names[] = {"DeterministicTieredLRU", "DeterministicLookahead",
                                        "ResidencyController", "ResidencyDecision",
                                        "ResidencyUse"};
    return fhpy_add_types(mod, ts, names, sizeof ts / sizeof ts[0]);
}
