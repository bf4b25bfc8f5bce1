/* tests/unit/observe.h — the manager's observers as expressions for assertions: each wraps
 * the status-returning call and folds a failure into the value (residency: -status, the
 * others 0 or NULL). Tests of the error channel itself call the library directly. */
#ifndef FHEPLAN_TEST_OBSERVE_H
#define FHEPLAN_TEST_OBSERVE_H

#include "fheplan/residency.h"

static inline int t_is_resident(fhr_manager *m, fhr_handle h, fhr_location loc)
{
    int r = 0;
    fhr_status st = fhr_is_resident(m, h, loc, &r, NULL);
    return st == FHR_OK ? r : -(int)st;
}

static inline uint64_t t_state_version(fhr_manager *m)
{
    uint64_t v = 0;
    return fhr_state_version(m, &v, NULL) == FHR_OK ? v : 0;
}

static inline size_t t_reap(fhr_manager *m)
{
    size_t n = 0;
    return fhr_reap(m, &n, NULL) == FHR_OK ? n : 0;
}

static inline size_t t_trace_read(fhr_manager *m, fhr_trace_entry *out, size_t cap)
{
    size_t n = 0;
    return fhr_trace_read(m, out, cap, &n, NULL) == FHR_OK ? n : 0;
}

static inline char *t_trace_json(fhr_manager *m)
{
    char *j = NULL;
    return fhr_trace_json(m, &j, NULL) == FHR_OK ? j : NULL;
}

#endif
