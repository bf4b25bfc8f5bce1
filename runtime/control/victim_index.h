/* runtime/control/victim_index.h — the built-in policies' victim index: per location, the
 * copies they could evict, in tiered LRU's eviction order, kept from a snapshot cache's
 * change set. Tiered LRU walks it in order; lookahead ranks only its copies at a short
 * location instead of scanning every value. */
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

/* The same walk, each step O(1) amortised (vix_next searches from the root), for walks
 * that visit every copy at a slot. The index must not change meanwhile. */
#define VIX_ITER_DEPTH 64
typedef struct vix_iter {
    const vix *x;
    int slot;
    int deep;     /* the stack overflowed: on with vix_next */
    uint32_t cur;
    uint32_t n;
    uint32_t st[VIX_ITER_DEPTH];
} vix_iter;
uint32_t vix_iter_first(vix_iter *it, const vix *x, int slot);
uint32_t vix_iter_next(vix_iter *it);

/* The snapshot index of a serial in snap (values are sorted by serial), or SIZE_MAX. */
size_t vix_find(const fhr_snapshot *snap, uint64_t serial);

/* Scratch state per snapshot value for one decision (the policy's model of what is
 * left): entries whose epoch is not the returned one are unset. Sized by the last
 * update; NULL when x is invalid. */
typedef struct vix_vstate {
    uint32_t epoch;
    uint32_t ncopies; /* copies left in the model */
    uint8_t required;
    int8_t trim_slot;  /* the slot where its copy dropped parts in the model (-1: none) */
    int8_t gone_slot;  /* the slot where its copy went in the model (-1: none) */
    uint64_t trimmed;  /* the bytes that drop of parts freed */
} vix_vstate;
vix_vstate *vix_scratch(vix *x, uint32_t *epoch);

/* A scratch array of at least n elements of elem bytes for one decision, kept by x between
 * decisions and grown keeping its contents (pointers into it die when it grows); NULL out of
 * host memory, the old array left as it was. */
void *vix_buffer(vix *x, size_t n, size_t elem);

/* Checks x against a ranking of snap built from scratch (the same copies, in the same
 * order, at every slot; the tree's own invariants). 1 when it holds; else 0 and `why`
 * names the first difference. For tests. */
int vix_check(const vix *x, const fhr_snapshot *snap, char *why, size_t nwhy);

/* The controller's index (controller.c), brought up to the manager's state the way a
 * decide brings it, then vix_check'ed against that state; 0 and `why` as above, or when
 * the controller keeps none (a policy other than tiered LRU). For tests. */
int controller_check_index(fhr_controller *c, char *why, size_t nwhy);

#endif
