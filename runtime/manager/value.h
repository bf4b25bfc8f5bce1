/* runtime/manager/value.h — internals of concrete values shared by the manager: stream-ordered
 * copies and frees (internal). */
#ifndef FHEPLAN_RUNTIME_VALUE_H
#define FHEPLAN_RUNTIME_VALUE_H

#include "fheplan/residency.h"

typedef enum { VBUF_BORROWED = 0, VBUF_FN, VBUF_BACKEND } vbuf_owner;

typedef struct vbuf {
    void *ptr;
    size_t nbytes;
    vbuf_owner owner;
    fhr_free_fn fn;
    void *ctx;
    fhr_backend *b;
} vbuf;

typedef struct vfield {
    char *name;
    size_t buf;
    size_t off;
    size_t nbytes;
} vfield;

struct fhr_value {
    fhr_location loc;
    fhr_ckks_meta meta;
    vbuf *bufs;
    size_t nbufs, capbufs;
    vfield *fields;
    size_t nfields, capfields;
};

/* Copy of v at `to`, allocated and filled in order on s; no host wait. */
fhr_status value_copy_to(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                         fhr_value **out, fhr_error *err);
/* Frees v's buffers after the work enqueued on s so far (s NULL: now). */
void value_destroy_on(fhr_value *v, fhr_backend *b, fhr_stream *s);
/* Whether v matches spec: same fields (names, sizes, order), same metadata, storage
 * within the charge. On mismatch fills err with FHR_E_SOURCE naming the difference. */
fhr_status value_check_spec(const fhr_value *v, const fhr_value_spec *spec, fhr_error *err);

#endif
