/* python/src/fhpy.h — what the files of the `_fheplan` extension share: the object layouts,
 * the error mapping and the argument converters. The extension includes only the public
 * headers of libfheplan (include/fheplan/). */
#ifndef FHPY_H
#define FHPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "fheplan/residency.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"
#include "dlpack_abi.h"

/* ---- objects ---------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    fhr_location loc;
} fhpy_location;

typedef struct {
    PyObject_HEAD
    fhr_handle h;
} fhpy_handle;

typedef struct {
    PyObject_HEAD
    fhr_backend *backend;
    fhr_manager *m;
    PyObject *layouts;     /* dict: handle -> tuple of (name, (code, bits, lanes), shape) */
    PyObject *sources;     /* dict: handle serial -> source object (kept while registered) */
    PyObject *load_exc;    /* the exception a Python load raised, until reported */
    PyObject *exports;     /* dict: (handle, location) -> live DLPack exports protecting it */
    fhr_stream *adopt_streams[FHR_MAX_CUDA_DEVICES]; /* per device: orders producers */
    PyObject *weakrefs;
} fhpy_manager;

typedef struct {
    PyObject_HEAD
    fhpy_manager *mgr;     /* strong */
    fhr_lease *lease;
    fhr_location at;
    int released;
    size_t nviews;
    fhr_stream **views;    /* consumer stream views made for __dlpack__(stream=...) */
    PyObject *handles;     /* tuple of handles */
    PyObject *owner;       /* what owns the lease (a scope or a use), or NULL */
    PyObject *keep;        /* list of the stream objects behind views (fhpy_stream_view) */
    int pins;              /* reads in flight without the interpreter lock (core.c rule 5) */
    int release_pending;   /* released while pinned: the library's release waits for pins 0 */
} fhpy_lease;

/* What a view asks of the object its memory belongs to (core.c: the ownership rule). */
typedef struct fhpy_owner_ops {
    int (*alive)(PyObject *owner);  /* 0: ended (every accessor of its views raises) */
    /* Orders the native consumer stream after the value and protects the value until
     * that stream's work completes; NULL: not offered (a plain host value). */
    int (*add_consumer)(PyObject *owner, fhr_location at, PyObject *stream);
    fhr_backend *(*backend)(PyObject *owner);
    /* Keeps the memory of `handle` (a handle object, or NULL) at `at` valid for one export
     * or one read without the lock, past the owner's end: *token is what export_end takes.
     * 0 and an exception on failure. NULL: the memory cannot outlive the owner. */
    int (*export_begin)(PyObject *owner, PyObject *handle, fhr_location at, void **token);
    void (*export_end)(PyObject *owner, void *token); /* with the interpreter lock */
    /* +1: a read without the lock begins (the owner must not end the memory meanwhile);
     * -1: it ended. NULL: the owner cannot be pinned (read with the lock held). */
    void (*pin)(PyObject *owner, int delta);
    const char *ended;              /* the ResidencyLeaseError's message once ended */
} fhpy_owner_ops;

typedef struct {
    PyObject_HEAD
    PyObject *owner;       /* the lease, use or Value the memory belongs to (strong) */
    const fhpy_owner_ops *ops;
    const fhr_value *v;    /* borrowed while the owner is alive */
    PyObject *layout;      /* tuple or None */
    PyObject *handle;      /* the handle object the value is leased under, or NULL */
    fhr_location loc;
    int cuda;              /* memory is real CUDA device memory */
    int writable;          /* a loader's new copy: its views may be written */
} fhpy_leased;

typedef struct {
    PyObject_HEAD
    fhpy_leased *val;      /* strong */
    Py_ssize_t field;      /* index in the value */
    fhpy_dl_dtype dtype;
    int ndim;
    int64_t shape[8];
} fhpy_view;

/* An application-owned concrete value (the result of fheplan.to). */
typedef struct {
    PyObject_HEAD
    fhr_value *v;          /* NULL once adopted */
    fhr_backend *b;        /* to free with */
    PyObject *keep;        /* the backend's owner (manager or module backend), strong */
    PyObject *layout;
    Py_ssize_t nexports;   /* live DLPack exports of its memory (adopt waits for 0) */
} fhpy_value;

typedef struct {
    PyObject_HEAD
    fhpy_manager *mgr;
    fhr_hold *hold;
    int released;
} fhpy_hold;

typedef struct {
    PyObject_HEAD
    fhr_plan *p;
    PyObject *name;
    PyObject *reclaim, *enter, *exit, *reservations; /* tuples of the Python objects */
} fhpy_plan;

typedef struct {
    PyObject_HEAD
    fhpy_manager *mgr;
    fhpy_plan *plan;
    fhr_scope *sc;
    fhr_stream **views; size_t nviews;
    PyObject *keep;        /* list of the stream objects behind views (fhpy_stream_view) */
    int state;             /* 0 new, 1 entered, 2 done (exited or failed entry) */
    PyObject *report;      /* dict after a successful exit, else None */
    PyObject *exit_error;  /* the exit's ResidencyPlanExecutionError, else None */
} fhpy_scope;

typedef struct {
    PyObject_HEAD
    fhr_stream *s;
    fhr_backend *b;
    PyObject *owner;       /* keeps the backend alive */
    int own;               /* 1: fhr_stream_destroy on dealloc */
    fhr_location loc;
    PyObject *life;        /* a call's stream: the call (strong), checked by every accessor */
    const fhpy_owner_ops *life_ops;
} fhpy_stream;

extern PyTypeObject fhpy_location_type, fhpy_handle_type, fhpy_manager_type, fhpy_lease_type,
    fhpy_leased_type, fhpy_view_type, fhpy_hold_type, fhpy_plan_type, fhpy_scope_type,
    fhpy_stream_type, fhpy_value_type, fhpy_policy_type, fhpy_controller_type,
    fhpy_decision_type, fhpy_use_type, fhpy_program_type, fhpy_kcall_type, fhpy_runner_type;

/* ---- errors ------------------------------------------------------------------------- */

extern PyObject *fhpy_exc[FHR_STATUS_COUNT_]; /* by status; [0] is the base class */
/* Raises the exception of err (status, message, phase, action, partial report). Returns NULL. */
PyObject *fhpy_raise(const fhr_error *err);
/* The same for a bare status and message. */
PyObject *fhpy_raise_msg(fhr_status st, const char *fmt, ...);
/* Builds (not raises) the exception object of err. */
PyObject *fhpy_error_object(const fhr_error *err);
/* Raises the exception of *err, then clears it (frees its partial report). Returns NULL. */
PyObject *fhpy_fail(fhr_error *err);
/* Sets the attribute `name` (value borrowed) on the exception being raised, if any. */
void fhpy_exc_set_attr(const char *name, PyObject *value);
/* A Python callback's failure as the library's: takes the exception being raised (none is
 * left pending) and, when err is not NULL, sets err to status st and the message
 * "<prefix> <exception type>: <str(exception)>". Returns the exception object with its
 * traceback (a new reference), or NULL. */
PyObject *fhpy_take_exception(fhr_error *err, fhr_status st, const char *prefix);

/* ---- core.c: the liveness check and the argument converters ------------------------- */

/* The one liveness check of the ownership rule: 1 when owner's memory may be read, else 0
 * and ResidencyLeaseError (ops->ended, or a generic message). */
int fhpy_alive(PyObject *owner, const fhpy_owner_ops *ops);
/* Argument converters: 1 and *out, or 0 and TypeError naming `param` and the types
 * accepted, or ResidencyValueError naming `param` and the range. */
int fhpy_bytes(PyObject *o, const char *param, uint64_t *out);         /* 0..2**64-1 */
int fhpy_count(PyObject *o, const char *param, size_t max, size_t *out); /* 0..max */
int fhpy_priority(PyObject *o, const char *param, int32_t *out);       /* int32 */
int fhpy_u32(PyObject *o, const char *param, uint32_t *out);           /* 0..2**32-1 */
int fhpy_mask64(PyObject *o, const char *param, uint64_t *out);        /* 0..2**64-1 */
int fhpy_text(PyObject *o, const char *param, int allow_none, const char **out);
int fhpy_location_arg(PyObject *o, const char *param, fhr_location *out);
int fhpy_handle_arg_of(PyObject *o, const char *param, fhr_handle *out);
/* The same for item i of a sequence parameter (named "param[i]" in errors). */
int fhpy_handle_item(PyObject *o, const char *param, Py_ssize_t i, fhr_handle *out);
/* A hold on (handle, at) for one export (counted in m->exports): *token for
 * fhpy_unprotect. The hold is taken without the interpreter lock. 0 and an exception. */
int fhpy_protect(fhpy_manager *m, PyObject *handle, fhr_location at, void **token);
void fhpy_unprotect(void *token); /* with the interpreter lock; NULL: nothing */
/* How many live exports protect handle's copy at `at`; at any location. */
long fhpy_exports_of(fhpy_manager *m, PyObject *handle, fhr_location at);
long fhpy_exports_any(fhpy_manager *m, PyObject *handle);
/* Appends to e's message that n exported views protect the copy (n > 0). */
void fhpy_exports_note(fhr_error *e, long n);
/* {location: bytes} (None: none) as C memory (calloc) the caller frees: the library reads
 * it without the interpreter lock. */
int fhpy_budgets(PyObject *o, const char *param, fhr_budget **out, size_t *n);

/* ---- converters ------------------------------------------------------------------- */

/* Location from a Location object or its text form. 0 and an exception on failure. */
int fhpy_to_loc(PyObject *o, fhr_location *out);
int fhpy_to_loc_conv(PyObject *o, void *out); /* "O&" converter of the parameter `at` */
int fhpy_loc_conv_to(PyObject *o, void *out); /* ... of `to` */
int fhpy_loc_conv_location(PyObject *o, void *out); /* ... of `location` */
PyObject *fhpy_loc_new(fhr_location loc);
int fhpy_to_handle(PyObject *o, fhr_handle *out);
/* A handle argument: the object (borrowed from the arguments) and its handle. */
typedef struct fhpy_handle_arg {
    PyObject *obj;
    fhr_handle h;
} fhpy_handle_arg;
int fhpy_handle_conv(PyObject *o, void *out); /* "O&" converter to an fhpy_handle_arg */
PyObject *fhpy_handle_new(fhr_handle h);
/* The layout adopt or register_source recorded for a handle object (borrowed; *out NULL
 * when there is none). 0 and an exception on failure. */
int fhpy_layout_of(fhpy_manager *m, PyObject *handle, PyObject **out);
/* Native stream pointer from an int, an object with .cuda_stream (torch) or .ptr (CuPy,
 * fheplan.Stream), or None (-> *native NULL, *given 0). */
int fhpy_stream_native(PyObject *o, void **native, int *given);
/* A view of the native stream o at loc (NULL in *out when o is None). A view does not own
 * its stream, and a fheplan.Stream or a CuPy stream destroys its stream with the object:
 * keep, when not NULL, is a list (created on first use: *keep NULL) to which o is added,
 * for the owner of a view that outlives the call to hold until the view is destroyed. */
int fhpy_stream_view(fhpy_manager *m, PyObject *o, fhr_location loc, fhr_stream **out,
                     PyObject **keep);
/* Views for a {location: stream} mapping (objects added to *keep as above); frees the
 * views it made on failure. */
int fhpy_stream_maps(fhpy_manager *m, PyObject *mapping, fhr_stream_map **maps, size_t *n,
                     PyObject **keep);
/* Destroys the views and frees the array (PyMem memory): with the interpreter lock held. */
void fhpy_stream_maps_free(fhpy_manager *m, fhr_stream_map *maps, size_t n);

/* JSON text (malloc'd, freed here) to Python objects through the json module. */
PyObject *fhpy_json(char *text);
PyObject *fhpy_report(const fhr_report *r); /* None for NULL */
PyObject *fhpy_explanation(const fhr_explanation *e);
PyObject *fhpy_action_object(const fhr_action *a, uint64_t manager_id);

/* Plan objects to C. */
int fhpy_actions(PyObject *seq, fhr_action **out, size_t *n);
int fhpy_reservations(PyObject *seq, fhr_reservation **out, size_t *n);

/* A record object: fheplan.Record(**fields) built from a dict (steals nothing). */
PyObject *fhpy_record(const char *kind, PyObject *dict);

/* ---- values ------------------------------------------------------------------------- */

/* Builds an fhr_value at `at` whose buffers are the memory of the DLPack producers in
 * value (a mapping of field names to arrays, an object with .fields, or one array), with
 * no copy: each buffer's release drops its producer. meta: a CKKS metadata object or
 * None. stream: where CUDA producers order their work (NULL: synchronised here).
 * layout receives the fields' dtypes and shapes. */
int fhpy_build_value(fhr_backend *be, PyObject *value, PyObject *meta_obj, fhr_location at,
                     fhr_stream *order, fhr_value **out, PyObject **layout);
int fhpy_meta(PyObject *o, fhr_ckks_meta *out);
PyObject *fhpy_meta_object(const fhr_ckks_meta *meta);
/* A view of v owned by owner (strong); handle: the handle object v is leased under, or
 * NULL. */
PyObject *fhpy_leased_new(PyObject *owner, const fhpy_owner_ops *ops, const fhr_value *v,
                          PyObject *layout, PyObject *handle);
extern const fhpy_owner_ops fhpy_lease_ops;
extern const fhpy_owner_ops fhpy_value_ops; /* a Value's views */
int fhpy_parse_dtype(PyObject *o, fhpy_dl_dtype *out);
/* Drops the producers whose buffers the library released since the last call. */
void fhpy_release_drain(void);
void fhpy_foreign_free(void *ctx, void *ptr, size_t nbytes);
/* Runs fn(ctx) under the interpreter lock soon (callable from any thread, lock or not). */
void fhpy_defer(void (*fn)(void *), void *ctx);

int fhpy_backend_is_cuda(fhr_backend *b);
PyObject *fhpy_lease_make(fhpy_manager *m, fhr_lease *l, fhr_location at, PyObject *handles,
                          PyObject *owner);

/* program.c */
PyObject *fhpy_compile(PyObject *self, PyObject *args, PyObject *kw);
PyObject *fhpy_check(PyObject *self, PyObject *args, PyObject *kw);
PyObject *fhpy_run(PyObject *self, PyObject *args, PyObject *kw);
PyObject *fhpy_min_budget(PyObject *self, PyObject *args, PyObject *kw);
/* timing.c */
PyObject *fhpy_c_timing(PyObject *self, PyObject *args);
PyObject *fhpy_c_run_timing(PyObject *self, PyObject *args);
/* manager.c */
PyObject *fhpy_to(PyObject *self, PyObject *args, PyObject *kw);

int fhpy_add_types_controller(PyObject *mod);
/* The json and types modules the core's helpers use. -1 and an exception on failure. */
int fhpy_core_init(void);
/* Readies each type and adds it to mod under its name. -1 and an exception on failure. */
int fhpy_add_types(PyObject *mod, PyTypeObject *const *types, const char *const *names,
                   size_t n);
/* Sets .action on the pending ResidencyPlanExecutionError from the plan or action tuple. */
void fhpy_set_failed_action(PyObject *seq_or_plan, const fhr_error *e);
/* The Python classes of the package (fheplan/__init__.py hands them over). */
extern PyObject *fhpy_cls_ensure, *fhpy_cls_move, *fhpy_cls_drop, *fhpy_cls_discard,
    *fhpy_cls_reservation;
PyObject *fhpy_set_types(PyObject *self, PyObject *args, PyObject *kw);
PyObject *fhpy_set_meta_type(PyObject *self, PyObject *t);

#define FHPY_ERR_INIT(e) fhr_error e; fhr_error_init(&e)

#endif
