/* runtime/manager/snapshot_cache.h — a placement snapshot kept up to date from the manager's
 * change log, for callers that decide often (the controller), internal to runtime/. */
#ifndef FHEPLAN_MANAGER_SNAPSHOT_CACHE_H
#define FHEPLAN_MANAGER_SNAPSHOT_CACHE_H

#include "fheplan/residency.h"

typedef struct mgr_snapcache mgr_snapcache;

fhr_status mgr_snapcache_create(mgr_snapcache **out, fhr_error *err);
void mgr_snapcache_destroy(mgr_snapcache *c);

/* Under m's lock, brings c up to m's state and sets *out to its snapshot: field for field
 * what fhr_snapshot_take_placement would return at this moment (values in serial order,
 * the same copies, labels, counts and version). It re-reads only the values the change
 * log names since the last refresh and those with a copy still in flight; it walks every
 * value when c is new, served another manager, fell more than the log's length behind,
 * or failed last time. *out stays valid until the next refresh or destroy of c; c is not
 * thread-safe (one caller at a time). On failure (out of host memory) *out is NULL. */
fhr_status mgr_snapcache_refresh(fhr_manager *m, mgr_snapcache *c, const fhr_snapshot **out,
                                 fhr_error *err);

/* What the last successful refresh read again: the serials of the values it re-read or
 * found gone, sorted, repeats allowed (valid until the next refresh), or *full = 1 when
 * it walked every value (anything may have changed; *n is then 0). Whoever keeps state
 * derived from the view (the controller's victim index) follows it with this. */
const uint64_t *mgr_snapcache_changes(const mgr_snapcache *c, size_t *n, int *full);

/* How many values the last refresh read, and whether it walked all of them (tests). */
size_t mgr_snapcache_last_reads(const mgr_snapcache *c, int *full);

#endif
