/* runtime/control/policy.h — what the controller knows of the built-in policies beyond
 * their ops (internal). */
#ifndef FHEPLAN_CONTROL_POLICY_H
#define FHEPLAN_CONTROL_POLICY_H

#include "fheplan/controller.h"

/* 1 for tiered LRU and lookahead: for a request whose requirements all have a copy where
 * required and whose reservations fit, with no location over budget, both decide exactly
 * nothing (no enter, no eviction, one explored state), so the controller may skip the
 * snapshot. A custom policy may decide otherwise, and always gets its snapshot. */
int fhr_policy_is_tiered(const fhr_policy *p);

typedef struct vix vix;

/* 1 for tiered LRU and lookahead: the controller keeps a victim index for them
 * (victim_index.h). Tiered LRU's ranking depends on the copy alone (priority, last use,
 * serial), so it walks the index in order; lookahead ranks by the request's position, so
 * it ranks the index's copies at each short location instead of scanning every value. */
int policy_uses_victim_index(const fhr_policy *p);

typedef struct bwin bwin;

/* fhr_policy_decide, with the victims of a tiered LRU or lookahead policy taken from ix,
 * which must follow snap (vix_update): the same output byte for byte, without scanning
 * every value at each short location. Any other policy, or a NULL or invalid ix: the
 * full path. *scanned grows by the index entries walked, or by every value when the full
 * path decides. win (NULL: none) notes every comparison the decision makes against the
 * budget at wslot; a custom policy's decision is taken to hold at that budget alone. */
fhr_status policy_decide_indexed(const fhr_policy *p, const fhr_snapshot *snap, vix *ix,
                                 const fhr_request *req, uint64_t *scanned, fhr_policy_out *out,
                                 bwin *win, int wslot, fhr_error *err);

#endif
