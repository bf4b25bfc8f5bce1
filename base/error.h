/* base/error.h — what every layer shares below the public types: filling the caller-owned
 * fhr_error record, and the growth helper for arrays (internal, not installed). */
#ifndef FHEPLAN_BASE_ERROR_H
#define FHEPLAN_BASE_ERROR_H

#include <stddef.h>

#include "fheplan/types.h"

#if defined(__GNUC__)
#define FHR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FHR_PRINTF(a, b)
#endif

/* A record an fhr_error may own (the partial report of a failed plan) begins with its
 * own destructor, so that the error record frees it without knowing the layer that made it. */
typedef struct fhr_owned {
    void (*destroy)(struct fhr_owned *self);
} fhr_owned;

/* Sets err (when non-NULL) to status st with a formatted message; returns st.
 * Plan fields are reset; the partial report, if any, is freed. */
fhr_status fhr_fail(fhr_error *err, fhr_status st, const char *fmt, ...) FHR_PRINTF(3, 4);

/* Makes room for element n of a growable array (*arr, *cap), doubling from `first`.
 * Returns 1, or 0 with the array untouched when memory runs out. */
int fhr_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first);

#endif
