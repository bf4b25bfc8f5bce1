/* runtime/manager/manager.h — the manager's internal state: values, copies, per-location
 * accounting, events, streams and the lock (internal to runtime/). */
#ifndef FHEPLAN_RUNTIME_MANAGER_H
#define FHEPLAN_RUNTIME_MANAGER_H

#include "fheplan/residency.h"
#include "runtime/manager/report.h"
#include "runtime/manager/value.h"

#include <pthread.h>

/* A backend event shared by several owners (a copy's ready marker is also a read
 * marker on its source; one consumer event protects every leased copy). */
typedef struct evref {
    fhr_event *ev;
    unsigned refs;
    int done;
    struct evref *next_retired;
} evref;

typedef struct mat {
    fhr_location loc;
    fhr_value *value;
    evref *ready;       /* NULL once known complete */
    evref **reads;      /* copies in flight that read this one */
    size_t nreads, capreads;
    uint32_t leases, holds, pending;
    uint64_t last_use;
    uint64_t storage;   /* actual bytes held (fixed for the copy's life) */
} mat;

typedef struct val {
    uint64_t serial;
    char label[64];
    fhr_replica_mode mode;
    fhr_recoverability recov;
    int32_t priority;
    uint64_t charge;           /* at a location that keeps every field */
    uint64_t logical;
    uint64_t regen;            /* regenerable field bytes (regen.c) */
    uint64_t omit[2];          /* of which host and pinned copies omit */
    fhr_ckks_meta meta;
    /* RECONSTRUCTIBLE only */
    fhr_value_spec spec;
    fhr_field_spec *spec_fields;
    fhr_source src;
    int has_src;
    mat *mats[FHR_LOC_SLOTS]; /* by location slot */
    uint64_t present;          /* bit per slot */
} val;

/* Per-location accounting; the same struct backs explain's model. */
typedef struct locacct {
    int present;
    int has_budget;
    uint64_t budget;
    uint64_t used, reserved, temp;
    uint64_t peak_used, peak_charged;
} locacct;

typedef struct pending_ref { /* a consumer event protecting one copy */
    mat *m;
    evref *e;
} pending_ref;

struct fhr_manager {
    uint64_t id;
    fhr_backend *b;
    int ndev;
    pthread_mutex_t lock;
    gen_registry *gens;       /* generators of regenerable fields (own lock) */
    int loading;              /* a source load runs: every call fails fast */
    uint64_t version, clock;
    val **vals;               /* by serial; NULL after discard */
    uint64_t next_serial;     /* serials [1, next_serial) were issued */
    size_t nlive;
    locacct loc[FHR_LOC_SLOTS];
    fhr_stream *streams[FHR_LOC_SLOTS]; /* the manager's own stream per location */
    pending_ref *pend;
    size_t npend, cappend;
    evref *retired;           /* unreferenced events waiting for completion */
    /* trace ring */
    fhr_trace_entry *trace;
    size_t trace_cap, trace_len, trace_head;
    uint64_t trace_seq;
    /* active scopes, innermost last, for stage paths */
    fhr_scope **scopes;
    size_t nscopes, capscopes;
};

/* The charge of a copy at slot (host and pinned copies may omit regenerable fields). */
static inline uint64_t charge_at(uint64_t charge, const uint64_t omit[2], int slot)
{
    return slot == 0 || slot == 1 ? charge - omit[slot] : charge;
}
#define VAL_CHARGE(v, slot) charge_at((v)->charge, (v)->omit, (slot))

/* Locking + the reentrancy rule: returns FHR_OK with the lock held, or the error. */
fhr_status mgr_enter(fhr_manager *m, const char *op, fhr_error *err);
void mgr_leave(fhr_manager *m);
/* Resolves h to a live value, or fails naming why (foreign, forged, discarded). */
fhr_status mgr_lookup(fhr_manager *m, fhr_handle h, const char *op, val **out, fhr_error *err);
/* Validates a location for this process, creating its accounting lazily. */
fhr_status mgr_check_loc(fhr_manager *m, fhr_location loc, const char *op, fhr_error *err);
fhr_status mgr_stream(fhr_manager *m, fhr_location loc, fhr_stream **out, fhr_error *err);
const char *mgr_vname(const val *v, char *buf, size_t cap);
void mgr_bump(fhr_manager *m);
void mgr_trace(fhr_manager *m, fhr_trace_kind k, fhr_handle h, fhr_location from,
               fhr_location to, uint64_t nbytes, fhr_stream *s, const char *label);
fhr_handle mgr_handle(const fhr_manager *m, const val *v);

/* events */
evref *ev_new(fhr_manager *m, fhr_stream *s, fhr_error *err);
void ev_unref(fhr_manager *m, evref *e);
int ev_done(fhr_manager *m, evref *e);
size_t mgr_reap(fhr_manager *m);

/* accounting */
void acct_charge(locacct *a, uint64_t n);
void acct_release(locacct *a, uint64_t n);
void acct_reserve(locacct *a, uint64_t n);
void acct_unreserve(locacct *a, uint64_t n);
/* FHR_E_BUDGET (filling err, loc and bytes_short) if n more bytes do not fit. */
fhr_status acct_admit(const locacct *a, fhr_location loc, uint64_t n, const char *what,
                      fhr_error *err);

/* The rule core shared by the primitives and explain's model. */
typedef struct rule_view {
    fhr_handle h;
    const char *name;          /* for messages */
    fhr_replica_mode mode;
    fhr_recoverability recov;
    int has_src;
    uint64_t charge;           /* at a location that keeps every field */
    uint64_t omit[2];          /* less at host, pinned: regenerable bytes omitted there */
    uint64_t regen;            /* regenerable bytes: generated, not copied, onto a device */
    uint64_t present;          /* copies by slot */
    uint64_t protected_;       /* copies that are leased, held or pending */
    const char *why[FHR_LOC_SLOTS]; /* protection reason per protected slot (may be NULL) */
} rule_view;

typedef struct rule_effect {
    int noop;
    int create;      /* slot to create, -1 none */
    int remove;      /* slot to remove, -1 none */
    int src;         /* slot copied from, -1 none */
    int load;        /* create by source load */
    int discard;
} rule_effect;

fhr_status rules_check(const rule_view *v, const fhr_action *a, const locacct *locs, int ndev,
                       rule_effect *eff, fhr_error *err);
/* The deterministic source choice for a copy to `to` among `present` slots. */
int rules_pick_source(uint64_t present, int to_slot);

/* primitives with the lock held (used by plans, scopes and the public wrappers) */
fhr_status prim_apply(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_report *rep,
                      fhr_phase phase, size_t index, fhr_error *err);
void mgr_rule_view(fhr_manager *m, const val *v, rule_view *rv, char *namebuf, size_t cap);

/* leases with the lock held (scopes take their leases inside entry) */
#define LEASE_MAX_WAITS 64
typedef struct lease_waits { /* host-location copies still in flight at acquire */
    evref *ev[LEASE_MAX_WAITS];
    size_t n;
} lease_waits;
fhr_status lease_acquire_locked(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                                fhr_stream *consumer, fhr_lease **out, lease_waits *w,
                                fhr_error *err);
/* Waits for w's copies without the lock, then drops their references. */
void lease_waits_finish(fhr_manager *m, lease_waits *w);
fhr_status lease_release_locked(fhr_lease *l, fhr_error *err);
int lease_is_active(const fhr_lease *l);
/* Undoes an acquire nobody has read through yet, and frees the lease. */
void lease_abandon_locked(fhr_lease *l);

#endif
