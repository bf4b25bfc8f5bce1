/* runtime/error.h — filling the caller-owned fhr_error record (internal). */
#ifndef FHEPLAN_RUNTIME_ERROR_H
#define FHEPLAN_RUNTIME_ERROR_H

#include "fheplan/types.h"

#if defined(__GNUC__)
#define FHR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FHR_PRINTF(a, b)

#include <stddef.h>

/* Makes room for element n of a growable array (*arr, *cap), doubling from `first`.
 * Returns 1, or 0 with the array untouched when memory runs out. */
int fhr_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first);

#endif

/* Sets err (when non-NULL) to status st with a formatted message; returns st.
 * Plan fields are reset; the partial report, if any, is freed. */
fhr_status fhr_fail(fhr_error *err, fhr_status st, const char *fmt, ...) FHR_PRINTF(3, 4);


#include <stddef.h>

/* Makes room for element n of a growable array (*arr, *cap), doubling from `first`.
 * Returns 1, or 0 with the array untouched when memory runs out. */
int fhr_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first);

#endif
