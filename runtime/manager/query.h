/* runtime/manager/query.h — placement questions the layers above may ask without taking a
 * snapshot (internal): is a request already met where it stands, and at which version;
 * the accounting of every location. */
#ifndef FHEPLAN_MANAGER_QUERY_H
#define FHEPLAN_MANAGER_QUERY_H

#include "fheplan/residency.h"
#include "fheplan/controller.h"

/* Under the manager lock, in O(requirements + reservations): *met = 1 when every
 * requirement names a live value with a copy at its location (ready or in flight) and
 * every location the reservations name has room for all of them beside what is committed
 * there (used + reserved + temporaries + the charges of copies in flight), and no location
 * is over its budget; *version is the state version it was answered at. Handles that are
 * not live answer *met = 0 (the full path then names the error). Fails only as the
 * manager's entry does (reentrant during a source load). */
fhr_status mgr_request_met(fhr_manager *m, const fhr_requirement *rq, size_t nrq,
                           const fhr_reservation *res, size_t nres, int *met,
                           uint64_t *version, fhr_error *err);

/* Under the manager lock, in O(locations): the per-location figures a placement snapshot
 * would hold (fhr_snapshot.locs, sorted by slot) into locs, which has room for
 * FHR_LOC_SLOTS; *n is how many. For callers that sample accounting often (the VM's peaks
 * after every request) and need no value's record. Fails only as the manager's entry does. */
fhr_status mgr_loc_stats(fhr_manager *m, fhr_loc_stats *locs, size_t *n, fhr_error *err);

/* The work of deciding and reporting, as a count: value records read by snapshots (every
 * live value), by snapshot caches (those they read again) and by policies on the
 * controller's behalf (the values, or the indexed copies, they scanned). A run whose
 * requests each cost O(values) shows it here (tests bound it; no clock involved). Any
 * thread, no lock. */
uint64_t mgr_records_read(const fhr_manager *m);
void mgr_count_reads(fhr_manager *m, uint64_t n);

/* Under the manager lock: the charges at `at` of copies other threads are making outside
 * the lock (admitted, not committed). A decision counts them as taken; fhr_wait_pending
 * waits for one of them to end. 0 for a location the manager does not know. */
uint64_t mgr_inflight_bytes(fhr_manager *m, fhr_location at);

#endif
