/* runtime/manager/manager.h — the manager's internal state: values, copies, per-location
 * accounting, events, streams, the lock and the work done outside it (internal to runtime/). */
#ifndef FHEPLAN_RUNTIME_MANAGER_H
#define FHEPLAN_RUNTIME_MANAGER_H

#include "fheplan/residency.h"
#include "runtime/manager/report.h"
#include "runtime/manager/value.h"

#include <pthread.h>
#include <stdatomic.h>

/* A backend event shared by several owners (a copy's ready marker is also a read
 * marker on its source; one consumer event protects every leased copy). */
typedef struct evref {
    fhr_event *ev;
    unsigned refs;
    int done;
    struct evref *next_retired;
    fhr_stream *stream; /* where it was recorded (events on one stream end in order) */
    uint64_t seq;       /* the manager's record order */
} evref;

/* Work a call owes after it lets go of the lock: `work` runs without the lock (device
 * waits, frees, user free functions), then `done` with it (references, counters). Chores
 * are embedded in what they finish, so queueing one never fails. */
typedef struct mgr_chore {
    struct mgr_chore *next;
    void (*work)(fhr_manager *m, struct mgr_chore *c);
    void (*done)(fhr_manager *m, struct mgr_chore *c);
} mgr_chore;

/* A destroy that came while a source load ran: it changes nothing until the last load
 * ends, then `fn` runs with the lock held (and may queue chores). */
typedef struct mgr_deferred {
    struct mgr_deferred *next;
    void (*fn)(fhr_manager *m, struct mgr_deferred *d);
} mgr_deferred;

typedef struct mat {
    fhr_location loc;
    int slot;           /* fhr_loc_slot(loc) */
    struct mat *next;   /* its value's next copy, in slot order */
    fhr_value *value;
    evref *ready;       /* NULL once known complete */
    evref **reads;      /* copies in flight that read this one */
    size_t nreads, capreads;
    uint32_t leases, holds, pending;
    uint64_t last_use;
    uint64_t serial;    /* its value's (for the change log) */
    uint64_t storage;   /* actual bytes held (fixed for the copy's life) */
    int copied;         /* made by a copy from `source` (0: adopted or loaded) */
    fhr_location source;
    mgr_chore chore;    /* its free, once removed */
    fhr_stream *free_on;
} mat;

/* What only a RECONSTRUCTIBLE value has: its spec (field specs and names in the same
 * block) and its source. */
typedef struct val_src {
    fhr_value_spec spec;
    fhr_source src;
} val_src;

/* Metadata shared by the values that have the same (val.meta): immutable once made. */
typedef struct mgr_meta {
    unsigned refs;
    fhr_ckks_meta meta;
} mgr_meta;

#define MGR_LABEL_CAP 64 /* a label's bytes kept, with its NUL */

/* A value's record. A manager may hold millions, so what most values lack lives out of
 * line: the label (NULL when unlabelled), the metadata (NULL when all zero; shared by
 * values with equal metadata), the source (NULL unless RECONSTRUCTIBLE) and the copies (a
 * list in slot order, one entry per present bit). tests/unit/test_scale.c bounds its size. */
typedef struct val {
    uint64_t serial;
    char *label;               /* at most MGR_LABEL_CAP - 1 bytes; NULL: unlabelled */
    fhr_replica_mode mode;
    fhr_recoverability recov;
    int32_t priority;
    uint64_t charge;           /* at a location that keeps every field */
    uint64_t logical;
    uint64_t regen;            /* regenerable field bytes (regen.c) */
    uint64_t omit[2];          /* of which host and pinned copies omit */
    mgr_meta *meta;            /* NULL: all zero */
    val_src *rs;               /* RECONSTRUCTIBLE only, else NULL */
    mat *copies;               /* in slot order; a copy at slot s iff bit s of present */
    uint64_t present;          /* bit per slot */
    const void *claim;         /* the call whose transition on it is under way, or NULL */
} val;

/* The value's label ("" when unlabelled) and metadata (all zero when it has none). */
static inline const char *val_label(const val *v) { return v->label ? v->label : ""; }
static inline const fhr_ckks_meta *val_meta(const val *v)
{
    return v->meta ? &v->meta->meta : &value_zero_meta;
}

/* v's copy at slot, or NULL. */
static inline mat *val_mat(const val *v, int slot)
{
    for (mat *x = v->copies; x && x->slot <= slot; x = x->next)
        if (x->slot == slot)
            return x;
    return NULL;
}

/* Puts x into v's copies at its slot, which has none. */
static inline void val_add_mat(val *v, mat *x)
{
    x->slot = fhr_loc_slot(x->loc);
    mat **pp = &v->copies;
    while (*pp && (*pp)->slot < x->slot)
        pp = &(*pp)->next;
    x->next = *pp;
    *pp = x;
}

/* Takes v's copy at slot out of its copies and returns it (NULL: none). */
static inline mat *val_take_mat(val *v, int slot)
{
    for (mat **pp = &v->copies; *pp && (*pp)->slot <= slot; pp = &(*pp)->next)
        if ((*pp)->slot == slot) {
            mat *x = *pp;
            *pp = x->next;
            x->next = NULL;
            return x;
        }
    return NULL;
}

/* The budgets B at one watched location over which every comparison "x <= B" made so far
 * came out as it did: lo <= B <= hi (rplan_min_budget, runtime/vm/min_budget.c). Every
 * decision that depends on a budget asks bwin_fits, so a run's whole course — what it
 * moves, evicts and refuses — is the same at every budget in its window. */
typedef struct bwin {
    uint64_t lo, hi;
} bwin;

/* x <= b, noted in w (NULL: not watched). */
static inline int bwin_fits(bwin *w, uint64_t x, uint64_t b)
{
    int ok = x <= b;
    if (w && ok && x > w->lo)
        w->lo = x;
    else if (w && !ok && x - 1 < w->hi)
        w->hi = x - 1;
    return ok;
}

/* a + b, or UINT64_MAX where it would wrap (a charge that can never fit). */
static inline uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Per-location accounting; the same struct backs explain's model. */
typedef struct locacct {
    bwin *win;          /* the watched location's window (mgr_watch_budget), else NULL */
    int present;
    int has_budget;
    uint64_t budget;
    uint64_t used, reserved, temp;
    uint64_t inflight;  /* charges of copies being made outside the lock: admitted, not used yet */
    uint64_t inflight_ended; /* how many of those copies have ended (committed or failed) */
    uint64_t peak_used, peak_charged;
} locacct;

#define MGR_CHLOG_CAP 4096 /* a power of two */

typedef struct pending_ref { /* a consumer event protecting one copy */
    mat *m;
    evref *e;
} pending_ref;

/* The memory of the snapshot this manager freed last, kept for its next take
 * (snapshot.c fills and takes it). Each manager has its own (no state is shared between
 * managers); a snapshot may outlive its manager, so the manager and each live snapshot
 * hold a reference, and the last one frees the slot and the block in it (free_block,
 * set by snapshot.c before it keeps one). */
typedef struct snap_spare {
    _Atomic(void *) block;
    atomic_uint refs;
    void (*free_block)(void *);
} snap_spare;
fhr_status snap_spare_create(snap_spare **out, fhr_error *err);
void snap_spare_unref(snap_spare *sp);

struct fhr_manager {
    uint64_t id;
    uint64_t ev_seq; /* events recorded so far (evref.seq) */
    fhr_backend *b;
    int ndev;
    pthread_mutex_t lock;
    gen_registry *gens;       /* generators of regenerable fields (own lock) */
    pthread_cond_t claims_cv; /* broadcast when claims end */
    uint64_t claim_waits;     /* waits begun on another call's claim (mgr_claim_waits) */
    pthread_cond_t inflight_cv; /* broadcast when a copy made outside the lock ends */
    unsigned loading;         /* source callbacks running: every new call fails fast */
    mgr_chore *chores;        /* owed by whoever unlocks next */
    mgr_deferred *deferred;   /* destroys that came during a load */
    uint64_t version, clock;
    val **vals;               /* by serial; NULL after discard */
    uint64_t next_serial;     /* serials [1, next_serial) were issued */
    size_t nlive;
    locacct loc[FHR_LOC_SLOTS];
    bwin watch;               /* the watched budget's window (mgr_watch_budget) */
    int watch_slot;           /* -1: none */
    fhr_link_rates links;     /* the cost model's rates (cost.c), defaults filled in */
    fhr_stream *streams[FHR_LOC_SLOTS]; /* the manager's own stream per location */
    pending_ref *pend;
    size_t npend, cappend;
    evref *retired;           /* unreferenced events waiting for completion */
    /* trace ring */
    fhr_trace_entry *trace;
    size_t trace_cap, trace_len, trace_head;
    uint64_t trace_seq;
    /* change log: the serial of every value whose placement record (the snapshot's view of
     * it and its copies) changed, in order; entry k is chlog[k % MGR_CHLOG_CAP], the last
     * one chseq - 1. snapshot_cache.c catches up from it instead of walking every value. */
    uint64_t chlog[MGR_CHLOG_CAP];
    uint64_t chseq;
    /* active scopes, innermost last, for stage paths */
    fhr_scope **scopes;
    size_t nscopes, capscopes;
    snap_spare *spare;        /* snapshot.c */
    mgr_meta *last_meta;      /* the metadata record made last (a reference), or NULL */
    _Atomic uint64_t reads;   /* value records read to decide or report (query.h) */
};

/* The charge of a copy at slot (host and pinned copies may omit regenerable fields). */
static inline uint64_t charge_at(uint64_t charge, const uint64_t omit[2], int slot)
{
    return slot == 0 || slot == 1 ? charge - omit[slot] : charge;
}
#define VAL_CHARGE(v, slot) charge_at((v)->charge, (v)->omit, (slot))

/* Lock held: the shared record of metadata equal to *mt (*out NULL when all zero; the
 * last one made is reused while values come with the same); FHR_E_NOMEM changes nothing. */
fhr_status mgr_meta_get(fhr_manager *m, const fhr_ckks_meta *mt, mgr_meta **out, fhr_error *err);
void mgr_meta_unref(mgr_meta *mm);
/* Frees a value's record (label, metadata, source), not its copies. */
void mgr_free_record(val *v);

/* Locking + the reentrancy rule: returns FHR_OK with the lock held, or the error. */
fhr_status mgr_enter(fhr_manager *m, const char *op, fhr_error *err);
/* Unlocks, then does the chores queued meanwhile (each `work` unlocked, `done` relocked). */
void mgr_leave(fhr_manager *m);
/* The same inside a call that will lock again (mgr_lock) to commit its work. */
void mgr_unlock(fhr_manager *m);
void mgr_lock(fhr_manager *m);
void mgr_chore_push(fhr_manager *m, mgr_chore *c);
/* A user callback (source load or release) runs between these: the lock is let go and
 * every new call on the manager is refused until the last one ends; then the deferred
 * destroys run. */
void mgr_callback_begin(fhr_manager *m);
void mgr_callback_end(fhr_manager *m);
/* With the lock held: runs d->fn now, or after the last running load when one runs. */
void mgr_defer(fhr_manager *m, mgr_deferred *d);

/* Claims: a call that lets go of the lock in the middle of its work (to copy, load or
 * wait) first claims every value it touches. Other calls on a claimed value wait for the
 * claim to end (the lock is let go while they wait); calls on other values, snapshots and
 * explain proceed. All of a call's claims are taken at once, so waits never form a
 * circle. Handles that do not resolve are skipped: the call reports them itself. */
typedef struct mgr_claims {
    fhr_handle inline_[4];
    fhr_handle *hs;
    size_t n, cap;
} mgr_claims;
void mgr_claims_init(mgr_claims *c);
/* Adds handles to the set (before mgr_claim); FHR_E_NOMEM changes nothing. */
fhr_status mgr_claims_add(mgr_claims *c, const fhr_handle *hs, size_t n, fhr_error *err);
/* With the lock held: waits until no other call claims any of them, then claims them. */
void mgr_claim(fhr_manager *m, mgr_claims *c);
/* Waits as mgr_claim does, but takes nothing (for calls that never let go of the lock). */
void mgr_await_unclaimed(fhr_manager *m, const fhr_handle *hs, size_t n);
/* How many times a call has begun to wait for another call's claim (takes the lock): lets
 * a test see that a thread is blocked on a claim rather than guess it from time. */
uint64_t mgr_claim_waits(fhr_manager *m);
/* Ends the claims (lock held) and frees the set. */
void mgr_unclaim(fhr_manager *m, mgr_claims *c);
/* Frees a set that was never claimed. */
void mgr_claims_free(mgr_claims *c);
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
/* Lock held: the placement record of value `serial` changed (a copy came or went; its
 * leases, holds, pending events, last use or priority changed; it was published or
 * discarded). Every such change calls this, or a snapshot cache goes stale. */
static inline void mgr_changed(fhr_manager *m, uint64_t serial)
{
    m->chlog[m->chseq++ & (MGR_CHLOG_CAP - 1)] = serial;
}
/* Counts n value records read (query.h, mgr_records_read). */
static inline void mgr_add_reads(fhr_manager *m, uint64_t n)
{
    atomic_fetch_add_explicit(&m->reads, n, memory_order_relaxed);
}
/* Lock held: something every value's record reads changed (the link rates, which set each
 * copy's restore_s): moving the log on by more than it holds makes every cache rebuild. */
static inline void mgr_changed_all(fhr_manager *m) { m->chseq += MGR_CHLOG_CAP + 1; }

/* snapshot.c: the parts of a placement snapshot, shared with snapshot_cache.c (lock held).
 * Per-location figures into locs (room for FHR_LOC_SLOTS), returning how many. */
size_t snap_fill_locs(const fhr_manager *m, fhr_loc_stats *locs);
/* v's record except label, meta and copies. */
void snap_fill_value(const fhr_manager *m, const val *v, fhr_value_info *vi);
/* v's copies in slot order into out (room for one per present bit); returns how many are
 * still in flight (ready 0). Forgets ready markers known complete. */
size_t snap_fill_copies(fhr_manager *m, const val *v, fhr_copy_info *out);

/* events (ev_new touches no manager state: it may run without the lock) */
fhr_status ev_new(fhr_manager *m, fhr_stream *s, evref **out, fhr_error *err);
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
/* Whether committed + n fits a's budget (noted in a's window). */
int acct_fits(const locacct *a, uint64_t n);
/* The committed charge at a: used, reserved, temporaries and copies in flight. */
static inline uint64_t acct_committed(const locacct *a)
{
    return a->used + a->reserved + a->temp + a->inflight;
}
/* Watches the budget at slot from now on (each watch starts a new window, 0..UINT64_MAX);
 * slot -1 stops watching. Returns the window's storage, or NULL for -1. */
bwin *mgr_watch_budget(fhr_manager *m, int slot);
/* The watched window, or NULL when none is watched; *slot says where. */
bwin *mgr_watched(const fhr_manager *m, int *slot);

/* The rule core shared by the primitives and explain's model. */
typedef struct rule_view {
    fhr_handle h;
    uint64_t serial;           /* for messages (rv_name): formatted only when one fails */
    const char *label;
    fhr_replica_mode mode;
    fhr_recoverability recov;
    int has_src;
    uint64_t charge;           /* at a location that keeps every field */
    uint64_t omit[2];          /* less at host, pinned: regenerable bytes omitted there */
    uint64_t regen;            /* regenerable bytes: generated, not copied, onto a device */
    uint64_t present;          /* copies by slot */
    uint64_t protected_;       /* copies that are leased, held or pending */
    const char *why[FHR_LOC_SLOTS]; /* protection reason per protected slot (may be NULL) */
    uint64_t unsettled;        /* copies still being filled (sources all the same: cost.c) */
    const fhr_link_rates *links; /* the cost model; NULL: the defaults */
} rule_view;

typedef struct rule_effect {
    int noop;
    int create;      /* slot to create, -1 none */
    int remove;      /* slot to remove, -1 none */
    int src;         /* slot copied from, -1 none */
    int load;        /* create by source load */
    int discard;
} rule_effect;

/* A value's name in messages ("#7 'keys'", or "#7" unlabelled), into buf. */
const char *rules_name(uint64_t serial, const char *label, char *buf, size_t cap);
#define RV_NAME_CAP 96
/* The name of a rule view's value, in a buffer that lives as long as the enclosing block. */
#define RV_NAME(v) rules_name((v)->serial, (v)->label, (char[RV_NAME_CAP]){0}, RV_NAME_CAP)

fhr_status rules_check(const rule_view *v, const fhr_action *a, const locacct *locs, int ndev,
                       rule_effect *eff, fhr_error *err);
/* The cost model (cost.c): the choice of a copy's source, the cheapest settled copy. */
int rules_pick_source(const rule_view *v, int to_slot);
/* 1 when a value with a source is better loaded onto device `to` than copied from the
 * device copy at `src`: that copy is still being filled, or the peer link is slower than
 * a load (costed as a copy from pinned memory). */
int rules_load_instead(const rule_view *v, int src, int to);
/* Bytes of regenerable fields a copy from slot `from` to `to` generates on `to`. */
uint64_t rules_generated(const rule_view *rv, int from, int to);
/* Seconds of one copy from `from` to `to`; *link_nbytes (may be NULL): bytes over the link. */
double rules_copy_cost(const rule_view *rv, const fhr_link_rates *l, int from, int to,
                       uint64_t *link_nbytes);
double links_rate(const fhr_link_rates *l, int from, int to);
/* Lock held: the time to restore v's copy at slot from its cheapest other copy, or from
 * pinned memory when it has none (the lookahead policy's restore cost). */
double mgr_restore_cost(fhr_manager *m, const val *v, int slot);
void links_fill(const fhr_link_rates *in, fhr_link_rates *out);

/* primitives with the lock held (used by plans, scopes and the public wrappers); the
 * caller has claimed the value (mgr_claim). A copy or a load lets go of the lock while it
 * runs: its charge is admitted and held as `inflight` meanwhile, nothing of it is visible,
 * and the state version moves when it commits. */
fhr_status prim_apply(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_report *rep,
                      fhr_phase phase, size_t index, fhr_error *err);
void mgr_rule_view(fhr_manager *m, const val *v, rule_view *rv);

/* leases with the lock held (scopes take their leases inside entry) */
typedef struct lease_waits { /* host-location copies still in flight at acquire */
    evref **ev;
    size_t n, cap;
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
/* fhr_lease_destroy with the lock held and no load running: releases (or, when no
 * consumer event can be recorded, queues a chore that waits for the consumers without
 * the lock) and frees. */
void lease_destroy_locked(fhr_lease *l);
/* With the lock held while a source load runs, before a destroy is deferred to the load's
 * end: records the lease's consumer events now, from the destroying thread, or if one
 * cannot be recorded waits for the consumer streams (letting go of the lock meanwhile).
 * The deferred release then touches none of the streams the caller passed. */
void lease_settle_consumers(fhr_lease *l);

#endif
