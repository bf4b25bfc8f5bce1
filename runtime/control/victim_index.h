/* runtime/control/victim_index.h — the tiered LRU policy's victim index: per location, the
 * copies it could evict, in its eviction order, kept from a snapshot cache's change set. */
#ifndef FHEPLAN_CONTROL_VICTIM_INDEX_H
#define FHEPLAN_CONTROL_VICTIM_INDEX_H

#include "fheplan/residency.h"
#include "fheplan/controller.h"

#include <stddef.h>
#include <stdint.h>

/* Per location slot, an ordered set of every copy there with no lease, no hold and no
 * pending consumer event, by the tiered LRU rank: (priority, last use, handle serial),
 * smallest first. Which copies a request itself requires is the request's business: the
 * policy skips them as it walks. Not thread-safe: its owner (the controller, under the
 * lock of its snapshot cache) serialises every call. */
typedef struct vix vix;

#define VIX_NONE UINT32_MAX

fhr_status vix_create(vix **out, fhr_error *err);
void vix_destroy(vix *x);

/* Brings x up to snap, given the handle serials whose entries changed since the snapshot
 * x last followed (sorted, repeats allowed), or full = 1 when anything may have changed.
 * 1 on success; 0 out of host memory, after which x is invalid until an update that
 * succeeds (an invalid index rebuilds from snap, whatever the change set says). */
int vix_update(vix *x, const fhr_snapshot *snap, const uint64_t *changed, size_t n, int full);

/* 1 when x follows the snapshot of its last update. */
int vix_valid(const vix *x);

/* In-order walk of one slot: the first node (VIX_NONE: none), the one after `node`. */
uint32_t vix_first(const vix *x, int slot);
uint32_t vix_next(const vix *x, int slot, uint32_t node);
uint64_t vix_serial(const vix *x, uint32_t node);

/* The snapshot index of a serial in snap (values are sorted by serial), or SIZE_MAX. */
size_t vix_find(const fhr_snapshot *snap, uint64_t serial);

/* Scratch state per snapshot value for one decision (the policy's model of what is
 * left): entries whose epoch is not the returned one are unset. Sized by the last
 * update; NULL when x is invalid. */
typedef struct vix_vstate {
    uint32_t epoch;
    uint32_t ncopies; /* copies left in the model */
    uint8_t required;
} vix_vstate;
vix_vstate *vix_scratch(vix *x, uint32_t *epoch);

/* Checks x against a ranking of snap built from scratch (the same copies, in the same
 * order, at every slot; the tree's own invariants). 1 when it holds; else 0 and `why`
 * names the first difference. For tests. */
int vix_check(const vix *x, const fhr_snapshot *snap, char *why, size_t nwhy);

/* The controller's index (controller.c), brought up to the manager's state the way a
 * decide brings it, then vix_check'ed against that state; 0 and `why` as above, or when
 * the controller keeps none (a policy other than tiered LRU). For tests. */
int controller_check_index(fhr_controller *c, char *why, size_t nwhy);

#endif
