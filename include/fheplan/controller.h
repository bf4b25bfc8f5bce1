/* fheplan/controller.h — automation on top of the strict manager primitives:
 * requests (what must be true), policies (a pure ranking of legal choices over a
 * tensor-free snapshot), decisions (the plan, the evidence and the state version it
 * was made against) and use() (decide, version-checked scope entry, strict lease).
 * Include after fheplan/residency.h. See fhr_controller(3). */
#ifndef FHEPLAN_CONTROLLER_H
#define FHEPLAN_CONTROLLER_H

#include "fheplan/residency.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- requests ------------------------------------------------------------------- */

/* An exact (handle, location) endpoint that must hold when the use begins. */
typedef struct fhr_requirement {
    fhr_handle handle;
    fhr_location at;
    uint32_t limbs; /* a cut value at a device: the q-limbs needed (fhr_ensure_limbs); 0: whole */
} fhr_requirement;

/* A REPLICABLE value may appear at several locations; an EXCLUSIVE value at two
 * different locations is refused with FHR_E_REPLICA. A repeated identical endpoint
 * counts once. Nothing here is retained by the calls that take a request. */
typedef struct fhr_request {
    const char *name;
    const fhr_requirement *requirements;
    size_t nrequirements;
    const fhr_reservation *reservations;
    size_t nreservations;
    uint64_t position; /* where this request stands in a known future of requests
                        * (1, 2, ...; see fhr_policy_lookahead_create); 0: unknown */
} fhr_request;

/* ---- policy output (filled by a policy, owned by the controller) ---------------- */

/* One eviction: a DROP at the short location, or a MOVE (has_from = the short
 * location) to a fallback tier. */
typedef struct fhr_eviction {
    fhr_action action;
    int32_t priority;
    uint64_t last_use;   /* logical clock of the evicted copy */
    uint64_t nbytes;     /* bytes freed at the short location */
} fhr_eviction;

typedef enum fhr_protect_reason {
    FHR_PROT_LEASED = 1,       /* active lease */
    FHR_PROT_HELD = 2,         /* active hold */
    FHR_PROT_PENDING = 4,      /* consumer event not yet reaped */
    FHR_PROT_REQUIRED = 8,     /* the request needs the value */
    FHR_PROT_NO_TIER = 16      /* last copy of a MUST_PRESERVE value, no configured tier with room */
} fhr_protect_reason;

/* A copy at a short location that the policy could not evict. */
typedef struct fhr_protected_copy {
    fhr_handle handle;
    fhr_location at;
    uint64_t nbytes;
    unsigned reasons;    /* fhr_protect_reason bits */
} fhr_protected_copy;

typedef struct fhr_policy_out {
    fhr_eviction *evictions;        size_t nevictions, cap_evictions;
    fhr_action *enter;              size_t nenter, cap_enter;
    fhr_protected_copy *protected_; size_t nprotected, cap_protected;
    uint64_t explored_states;
    int feasible;                   /* the policy's own verdict */
    char reason[512];               /* "" when feasible */
    fhr_location short_loc;         /* infeasible: the location that is short */
    uint64_t bytes_short;           /* infeasible: bytes missing after every legal eviction */
} fhr_policy_out;

/* Growing the output arrays (policies call these). FHR_E_NOMEM on failure. */
FHR_API fhr_status fhr_policy_out_evict(fhr_policy_out *o, const fhr_eviction *e);
FHR_API fhr_status fhr_policy_out_enter(fhr_policy_out *o, const fhr_action *a);
FHR_API fhr_status fhr_policy_out_protect(fhr_policy_out *o, const fhr_protected_copy *p);

/* ---- policies ------------------------------------------------------------------- */

/* decide must be a pure, deterministic function of (snapshot, request): no manager
 * calls, no clocks, no free-memory observations. It may be called from several
 * threads at once. The request has been validated (known handles, valid locations,
 * replica rules) and deduplicated. */
typedef struct fhr_policy_ops {
    const char *name;
    fhr_status (*decide)(void *ctx, const fhr_snapshot *snap, const fhr_request *req,
                         fhr_policy_out *out, fhr_error *err);
    void (*destroy)(void *ctx);
} fhr_policy_ops;

typedef struct fhr_policy fhr_policy;

/* A custom policy; ops is copied, ctx is owned by the policy (ops.destroy). */
FHR_API fhr_status fhr_policy_create(const fhr_policy_ops *ops, void *ctx, fhr_policy **out,
                                     fhr_error *err);
FHR_API void fhr_policy_destroy(fhr_policy *p);
FHR_API const char *fhr_policy_name(const fhr_policy *p);
/* Runs the policy alone over a snapshot (the controller does this inside decide). */
FHR_API fhr_status fhr_policy_decide(const fhr_policy *p, const fhr_snapshot *snap,
                                     const fhr_request *req, fhr_policy_out *out,
                                     fhr_error *err);
/* Frees the arrays of an output filled by fhr_policy_decide; zeroes it. */
FHR_API void fhr_policy_out_clear(fhr_policy_out *o);

/* Fallback tiers of one location, tried in order. */
typedef struct fhr_tier_chain {
    fhr_location loc;
    const fhr_location *fallback;
    size_t nfallback;
} fhr_tier_chain;

/* The deterministic tiered LRU policy (name "tiered_lru"). Chains are copied; one per
 * location at most; a fallback list may not contain its own location or repeat one. */
FHR_API fhr_status fhr_policy_tiered_lru_create(const fhr_tier_chain *chains, size_t n,
                                                fhr_policy **out, fhr_error *err);

/* One use in a known future: request number `position` (1-based, in execution order)
 * requires `handle` at `at`, with `limbs` q-limbs of a value cut into limbs (0: whole;
 * the policy then drops the parts of a partial copy its next use does not read, ranked by
 * the first later use that reads them, before the copy itself). */
typedef struct fhr_future_use {
    uint64_t position;
    fhr_handle handle;
    fhr_location at;
    uint32_t limbs;
} fhr_future_use;

/* The lookahead policy (name "lookahead"): the same tiers, never-rules and evidence as
 * tiered LRU, but victims are ranked by their next use in the known future: a copy
 * never used again first, then the one used farthest from the request's position
 * (Belady's MIN, optimal in the number of loads when sizes are equal); ties by larger
 * size (fewer evictions), then older last use (whose readers are likeliest to have
 * ended), then priority, then handle serial. A request without a position (0) ranks as
 * if nothing were used again. The future is copied. */
FHR_API fhr_status fhr_policy_lookahead_create(const fhr_tier_chain *chains, size_t n,
                                               const fhr_future_use *future, size_t nfuture,
                                               fhr_policy **out, fhr_error *err);

/* ---- controller and decisions ----------------------------------------------------- */

typedef struct fhr_controller fhr_controller;
typedef struct fhr_decision fhr_decision;

/* Neither manager nor policy is owned; both must outlive the controller. A
 * controller holds no mutable state and may be used from several threads. */
FHR_API fhr_status fhr_controller_create(fhr_manager *m, fhr_policy *p, fhr_controller **out,
                                         fhr_error *err);
FHR_API void fhr_controller_destroy(fhr_controller *c);

/* Snapshot, policy, then the manager's explain of the resulting plan against the
 * same state version (explain is the feasibility authority). Changes no state. An
 * infeasible request is a successful decide with a decision whose explanation says
 * why; errors are bad requests (FHR_E_HANDLE/LOCATION/REPLICA/INVALID) and
 * FHR_E_STALE when the manager changed between the snapshot and explain. */
FHR_API fhr_status fhr_decide(fhr_controller *c, const fhr_request *req, fhr_decision **out,
                              fhr_error *err);
/* fhr_decide as it would decide once the consumer work recorded on the copies in
 * `settled` (handle, location) has completed: the policy sees them with no pending
 * events, so a caller that will wait for that work anyway need not wait before deciding.
 * Leases and holds still protect. A decision that evicts a settled copy whose work has
 * not completed is infeasible (explanation status FHR_E_PROTECTED): wait for it, reap,
 * and decide again. At most 65,536 entries; unknown ones are ignored. */
FHR_API fhr_status fhr_decide_settled(fhr_controller *c, const fhr_request *req,
                                      const fhr_requirement *settled, size_t nsettled,
                                      fhr_decision **out, fhr_error *err);
FHR_API void fhr_decision_destroy(fhr_decision *d);
FHR_API int fhr_decision_feasible(const fhr_decision *d);
FHR_API uint64_t fhr_decision_state_version(const fhr_decision *d);
FHR_API uint64_t fhr_decision_explored_states(const fhr_decision *d);
FHR_API const char *fhr_decision_policy(const fhr_decision *d);
/* reclaim = evictions in order; enter = ensure/move per unmet requirement;
 * reservations = the request's; no exit actions (copies stay cached). */
FHR_API const fhr_plan *fhr_decision_plan(const fhr_decision *d);
FHR_API size_t fhr_decision_nevictions(const fhr_decision *d);
FHR_API const fhr_eviction *fhr_decision_eviction(const fhr_decision *d, size_t i);
/* Infeasible decisions: the copies at the short location the policy could not evict. */
FHR_API size_t fhr_decision_nprotected(const fhr_decision *d);
FHR_API const fhr_protected_copy *fhr_decision_protected(const fhr_decision *d, size_t i);
/* feasible, reason, loc/bytes_short of the failure, per-location predicted peaks. */
FHR_API const fhr_explanation *fhr_decision_explanation(const fhr_decision *d);
/* Predicted peak charged bytes (used + reserved) at loc; 0 if the plan leaves it out. */
FHR_API uint64_t fhr_decision_predicted_peak_bytes(const fhr_decision *d, fhr_location loc);
/* Deterministic JSON (malloc'd; free()): identical for identical state and request
 * across managers — no pointers, manager ids or wall times; handles by serial. */
FHR_API char *fhr_decision_json(const fhr_decision *d);

/* ---- use ------------------------------------------------------------------------- */

typedef struct fhr_use fhr_use;

/* decide, then fhr_use_decision. consumer: one stream per required location (needed
 * for CUDA locations; optional for host ones). transfer: per-destination transfer
 * streams for the plan's actions. Infeasible: FHR_E_INFEASIBLE (err names the short
 * location and bytes), nothing changed. */
FHR_API fhr_status fhr_use_begin(fhr_controller *c, const fhr_request *req,
                                 const fhr_stream_map *consumer, size_t nconsumer,
                                 const fhr_stream_map *transfer, size_t ntransfer,
                                 fhr_use **out, fhr_error *err);
/* Executes a decision made earlier: scope entry checks its state version under the
 * manager lock before any reclaim or reservation (FHR_E_STALE, never replanned), then
 * one strict lease per required location, taken while the entry still holds the values
 * of its enter actions (fhr_scope_add_lease). On success the use owns nothing of d
 * (d may be destroyed). A failure after scope entry ends the scope (no rollback of
 * committed placements). */
FHR_API fhr_status fhr_use_decision(fhr_controller *c, const fhr_decision *d,
                                    const fhr_stream_map *consumer, size_t nconsumer,
                                    const fhr_stream_map *transfer, size_t ntransfer,
                                    fhr_use **out, fhr_error *err);
/* The borrowed value of a requirement (read-only, valid until fhr_use_end). */
FHR_API const fhr_value *fhr_use_value(const fhr_use *u, fhr_handle h, fhr_location at);
FHR_API fhr_status fhr_use_add_consumer_stream(fhr_use *u, fhr_location at, fhr_stream *s,
                                               fhr_error *err);
/* The decision fhr_use_begin made (owned by the use); NULL for fhr_use_decision. */
FHR_API const fhr_decision *fhr_use_decision_of(const fhr_use *u);
/* Releases the leases (consumer events are recorded), exits the scope (reservations
 * released; copies stay cached). A second call fails with FHR_E_SCOPE. */
FHR_API fhr_status fhr_use_end(fhr_use *u, fhr_status body_status, fhr_error *err);
/* Ends the use if still active (as a failed body), then frees it. */
FHR_API void fhr_use_destroy(fhr_use *u);
/* What the use did, readable after a successful fhr_use_end until fhr_use_destroy (NULL
 * before, or when the exit failed): every transition of its plan, bytes and copies per
 * direction (fhr_report_bytes/count), loads, evictions, and the host waits a throttled
 * begin made (fhr_report_waits). Owned by the use. */
FHR_API const fhr_report *fhr_use_report(const fhr_use *u);

/* ---- throttled use (a layer above the policy) --------------------------------------- */

/* The policy never waits: when every copy it could evict is still protected by a
 * consumer event, the decision is infeasible. FHR_USE_WAIT asks fhr_use_begin_opts to do
 * what an engine would otherwise write itself: when protection by pending consumer
 * events alone blocks the decision (the short location's protected copies include one
 * that is neither leased, held, required nor the last copy without a tier), wait on the
 * host, outside the manager lock, for the events of the least recently used such copies
 * covering the shortfall (fhr_wait_pending), reap, and decide again; the same when the
 * short location holds at least the shortfall in bytes of copies other threads are still
 * making (one of those is waited for). A decision that
 * waiting cannot fix is returned as FHR_E_INFEASIBLE, as by fhr_use_begin. The host waits
 * only when the budget forces it; the count is in the use's report. */
#define FHR_USE_WAIT 1u

typedef struct fhr_use_opts {
    unsigned flags;     /* FHR_USE_WAIT */
    uint32_t max_waits; /* give up (FHR_E_INFEASIBLE) after this many waits; 0: no limit */
} fhr_use_opts;

/* fhr_use_begin with options (opts NULL: exactly fhr_use_begin). A decision that went
 * stale before entry (another thread changed the manager) is made again. */
FHR_API fhr_status fhr_use_begin_opts(fhr_controller *c, const fhr_request *req,
                                      const fhr_stream_map *consumer, size_t nconsumer,
                                      const fhr_stream_map *transfer, size_t ntransfer,
                                      const fhr_use_opts *opts, fhr_use **out,
                                      fhr_error *err);

#ifdef __cplusplus
}
#endif
#endif
