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

#endif
