/* fheplan/residency.h — the residency manager: values, handles, budgets, the strict
 * primitives, leases and holds, accounting, snapshots and the trace; plans, scopes
 * and explain. See fhr_manager(3) and fhr_plan(3) for each function's contract. */
#ifndef FHEPLAN_RESIDENCY_H
#define FHEPLAN_RESIDENCY_H

#include "fheplan/types.h"
#include "fheplan/backend.h"
#include "fheplan/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- values ------------------------------------------------------------------- */

typedef enum fhr_domain {
    FHR_DOMAIN_NONE = 0,
    FHR_DOMAIN_COEFF, /* coefficient representation */
    FHR_DOMAIN_EVAL   /* NTT / evaluation representation */
} fhr_domain;

typedef enum fhr_key_relation {
    FHR_KEY_NONE = 0,
    FHR_KEY_ROTATION, /* key_param: rotation step */
    FHR_KEY_CONJUGATION,
    FHR_KEY_RELINEARIZATION
} fhr_key_relation;

#define FHR_MAX_PRIMES 128

/* CKKS metadata; no movement ever changes it. */
typedef struct fhr_ckks_meta {
    uint64_t context_id;
    int32_t level;
    double scale;
    uint32_t n_primes;
    uint32_t prime_ids[FHR_MAX_PRIMES];
    fhr_domain domain;
    fhr_key_relation key_relation;
    int64_t key_param;
} fhr_ckks_meta;

FHR_API int fhr_ckks_meta_equal(const fhr_ckks_meta *a, const fhr_ckks_meta *b);

/* A concrete value: byte buffers at one location, named fields that are views into
 * them (fields may share or overlap storage), and CKKS metadata. A value owns its
 * buffers. Not thread-safe; a value handed to the manager belongs to it. */
typedef struct fhr_value fhr_value;

/* How a buffer is released when its value is destroyed. */
typedef void (*fhr_free_fn)(void *ctx, void *ptr, size_t nbytes);

FHR_API fhr_status fhr_value_create(fhr_location loc, const fhr_ckks_meta *meta,
                                    fhr_value **out, fhr_error *err);
/* Adds a buffer the value now owns; free_fn(free_ctx, ptr, nbytes) releases it
 * (NULL free_fn: the caller keeps ownership of the memory). Returns its index via out. */
FHR_API fhr_status fhr_value_add_buffer(fhr_value *v, void *ptr, size_t nbytes,
                                        fhr_free_fn free_fn, void *free_ctx, size_t *out,
                                        fhr_error *err);
/* Allocates a buffer through the backend at the value's location (synchronously
 * usable: the allocation is ordered on s, or immediate when s is NULL). */
FHR_API fhr_status fhr_value_alloc_buffer(fhr_value *v, fhr_backend *b, size_t nbytes,
                                          fhr_stream *s, size_t *out, fhr_error *err);
/* Declares field `name` as bytes [offset, offset+nbytes) of buffer `buffer`. */
FHR_API fhr_status fhr_value_add_field(fhr_value *v, const char *name, size_t buffer,
                                       size_t offset, size_t nbytes, fhr_error *err);
FHR_API void fhr_value_destroy(fhr_value *v);

FHR_API fhr_location fhr_value_location(const fhr_value *v);
FHR_API const fhr_ckks_meta *fhr_value_meta(const fhr_value *v);
FHR_API size_t fhr_value_nfields(const fhr_value *v);
FHR_API const char *fhr_value_field_name(const fhr_value *v, size_t i);
/* Pointer and logical size of a field, by name; FHR_E_INVALID if absent. */
FHR_API fhr_status fhr_value_field(const fhr_value *v, const char *name, void **ptr,
                                   size_t *nbytes);
FHR_API fhr_status fhr_value_field_at(const fhr_value *v, size_t i, void **ptr,
                                      size_t *nbytes);
/* Sum of field sizes (views counted each time). */
FHR_API uint64_t fhr_value_logical_nbytes(const fhr_value *v);
/* Sum of buffer sizes actually held. */
FHR_API uint64_t fhr_value_storage_nbytes(const fhr_value *v);

/* Functional copy to `to`: a new value with the same fields and metadata, each
 * buffer compacted to the byte span its fields cover. Ordered on s (the copy's
 * contents are ready once work on s completes; s NULL: a backend default stream
 * is used and synchronised before return). The source is left untouched. */
FHR_API fhr_status fhr_value_to(const fhr_value *v, fhr_location to, fhr_backend *b,
                                fhr_stream *s, fhr_value **out, fhr_error *err);

/* ---- regenerable fields (fhr_manager(3), REGENERABLE FIELDS) --------------------- */

/* A field may be declared regenerable: its bytes are a pure function of a few seed bytes
 * (kept with the value on the host), computed on the device by a generator registered
 * by name. A device copy then copies the other fields and runs the generator into this
 * one on the same stream; host copies keep it only where `keep` says so. A value with
 * regenerable fields is copied field by field into one buffer (fields in declaration
 * order), so its fields must not overlap. */
#define FHR_KEEP_HOST   1u /* pageable host copies hold the field */
#define FHR_KEEP_PINNED 2u /* pinned host copies hold the field */
#define FHR_GENERATOR_COUNTER "counter" /* built in: fhr_generator_counter */
#define FHR_MAX_SEED 256                /* bytes of seed per field */

/* Writes nbytes at dst (memory at `at`, allocated through b) from the seed, by enqueueing
 * work on s only (never waiting); the copy is ready when s's work completes. */
typedef fhr_status (*fhr_generator_fn)(void *ctx, fhr_backend *b, fhr_location at,
                                       fhr_stream *s, void *dst, size_t nbytes,
                                       const void *seed, size_t seed_len, fhr_error *err);
/* The built-in counter-based generator: byte k is byte k % 8 of a 64-bit mix of
 * (key of the seed bytes, k / 8); the same bits on CUDA, the emulated device and the
 * host. ctx is unused. */
FHR_API fhr_status fhr_generator_counter(void *ctx, fhr_backend *b, fhr_location at,
                                         fhr_stream *s, void *dst, size_t nbytes,
                                         const void *seed, size_t seed_len, fhr_error *err);
/* Declares the existing field `name` regenerable (it holds storage here: the value
 * must be at a CUDA location, or keep must name its host location). generator is
 * copied, as are the seed bytes (1..FHR_MAX_SEED). */
FHR_API fhr_status fhr_value_set_regenerable(fhr_value *v, const char *name,
                                             const char *generator, const void *seed,
                                             size_t seed_len, unsigned keep, fhr_error *err);
/* Adds a regenerable field of nbytes that has no storage in this copy (a host value
 * that omits it: v's location is not in keep). */
FHR_API fhr_status fhr_value_add_regenerable(fhr_value *v, const char *name, size_t nbytes,
                                             const char *generator, const void *seed,
                                             size_t seed_len, unsigned keep, fhr_error *err);
/* 1: field `name` has storage in this copy; 0: it is regenerable and omitted here;
 * -1: no such field. (fhr_value_field fails with FHR_E_STATE on an omitted field.) */
FHR_API int fhr_value_field_materialized(const fhr_value *v, const char *name);
/* Sum of the value's regenerable field sizes. */
FHR_API uint64_t fhr_value_regenerable_nbytes(const fhr_value *v);
/* Bytes the copy that made v generated instead of copying (0 for an original). */
FHR_API uint64_t fhr_value_generated_nbytes(const fhr_value *v);

/* A value spec fixes what a source must produce and the per-copy charge. */
typedef struct fhr_field_spec {
    const char *name;
    uint64_t nbytes;
} fhr_field_spec;

typedef struct fhr_value_spec {
    fhr_ckks_meta meta;
    size_t nfields;
    const fhr_field_spec *fields;
    uint64_t storage_nbytes; /* conservative charge per copy; >= sum of fields */
    /* Regenerable fields: their total size (0: none) and where host copies keep them.
     * A copy at a location that omits them is charged storage_nbytes - regen_nbytes. */
    uint64_t regen_nbytes;
    unsigned regen_keep;     /* FHR_KEEP_* */
} fhr_value_spec;

/* ---- manager --------------------------------------------------------------------- */

typedef struct fhr_manager fhr_manager;

typedef enum fhr_replica_mode { FHR_REPLICABLE = 0, FHR_EXCLUSIVE = 1 } fhr_replica_mode;
typedef enum fhr_recoverability {
    FHR_MUST_PRESERVE = 0,
    FHR_RECONSTRUCTIBLE = 1
} fhr_recoverability;

typedef struct fhr_budget {
    fhr_location loc;
    uint64_t nbytes;
} fhr_budget;

typedef struct fhr_manager_config {
    fhr_backend *backend;        /* required; the manager does not own it */
    const fhr_budget *budgets;   /* strict admission limits; other locations unbudgeted */
    size_t nbudgets;
    size_t trace_capacity;       /* rolling trace entries; 0 turns the trace off */
} fhr_manager_config;

FHR_API fhr_status fhr_manager_create(const fhr_manager_config *cfg, fhr_manager **out,
                                      fhr_error *err);
/* Waits for all outstanding work, frees every copy and value. Outstanding leases and
 * holds become invalid. */
FHR_API void fhr_manager_destroy(fhr_manager *m);
/* Immutable; callable at any time from any thread, also during a source load. */
FHR_API uint64_t fhr_manager_id(const fhr_manager *m);
FHR_API fhr_backend *fhr_manager_backend(const fhr_manager *m);
/* A generator that writes any part of a field: the nbytes at dst are bytes [offset,
 * offset + nbytes) of the field it would write whole from the seed (offset a multiple of
 * 8). The partial copies of a cut value (fhr_value_cut_limbs) regenerate only their limbs
 * through it. The built-in "counter" has one (fhr_generator_counter_range). */
typedef fhr_status (*fhr_generator_range_fn)(void *ctx, fhr_backend *b, fhr_location at,
                                             fhr_stream *s, void *dst, size_t nbytes,
                                             uint64_t offset, const void *seed,
                                             size_t seed_len, fhr_error *err);
FHR_API fhr_status fhr_generator_counter_range(void *ctx, fhr_backend *b, fhr_location at,
                                               fhr_stream *s, void *dst, size_t nbytes,
                                               uint64_t offset, const void *seed,
                                               size_t seed_len, fhr_error *err);
/* Registers (or replaces) the range function of the generator `name` (beside its
 * whole-field function, fhr_generator_register). */
FHR_API fhr_status fhr_generator_register_range(fhr_manager *m, const char *name,
                                                fhr_generator_range_fn fn, void *ctx,
                                                fhr_error *err);
/* Registers (or replaces) a generator for regenerable fields under `name` (copied).
 * "counter" is registered at creation. Callable at any time, also during a load. */
FHR_API fhr_status fhr_generator_register(fhr_manager *m, const char *name,
                                          fhr_generator_fn fn, void *ctx, fhr_error *err);
/* fhr_value_to with this manager's generators (fhr_value_to knows only "counter").
 * Touches no manager state: a source load may call it. */
FHR_API fhr_status fhr_manager_value_to(fhr_manager *m, const fhr_value *v, fhr_location to,
                                        fhr_stream *s, fhr_value **out, fhr_error *err);
/* The cost model the manager chooses a copy's source by: rates in GB/s of each link.
 * A copy from `from` to `to` costs (bytes over the link) / (the link's rate) + (bytes
 * the destination regenerates) / gen_gbps; regenerable fields cross no link. 0 takes
 * the default. Defaults: pinned 55.5 (pinned <-> device, measured on an H200),
 * pageable 26 (pageable <-> device and host <-> pinned, measured), peer 450 (device <->
 * device: NVLink 4's nominal rate per direction on H100/H200 SXM hosts, not a
 * measurement of ours; bench/two-gpu.sh measures it), gen 496. */
typedef struct fhr_link_rates {
    double pinned_gbps;
    double pageable_gbps;
    double peer_gbps;
    double gen_gbps;
} fhr_link_rates;

#define FHR_DEFAULT_PINNED_GBPS   55.5
#define FHR_DEFAULT_PAGEABLE_GBPS 26.0
#define FHR_DEFAULT_PEER_GBPS     450.0
#define FHR_DEFAULT_GEN_GBPS      496.0

/* Sets the link rates (0 fields take the defaults); FHR_E_INVALID for a negative or
 * non-finite rate, which changes nothing. Callable at any time. */
FHR_API fhr_status fhr_manager_set_links(fhr_manager *m, const fhr_link_rates *r,
                                         fhr_error *err);
/* The rates in force (defaults filled in). */
FHR_API void fhr_manager_links(fhr_manager *m, fhr_link_rates *out);
/* The cost model's time in seconds of one copy of h to `to` from `from`, and the bytes
 * it moves over the link (NULL: not wanted); FHR_E_STATE when h has no copy at `from`. */
FHR_API fhr_status fhr_copy_cost(fhr_manager *m, fhr_handle h, fhr_location from,
                                 fhr_location to, double *seconds, uint64_t *link_nbytes,
                                 fhr_error *err);

/* Sets or replaces a strict budget (creating the location). Refused with
 * FHR_E_BUDGET if current used+reserved already exceeds it. */
FHR_API fhr_status fhr_set_budget(fhr_manager *m, fhr_location loc, uint64_t nbytes,
                                  fhr_error *err);

typedef struct fhr_adopt_opts {
    fhr_replica_mode mode;
    const char *label;   /* diagnostics only; copied */
    int32_t priority;    /* higher is kept longer by policies */
} fhr_adopt_opts;

/* Takes ownership of *value (MUST_PRESERVE). On success *value is set to NULL: keep no
 * alias. On failure the caller still owns it. */
FHR_API fhr_status fhr_adopt(fhr_manager *m, fhr_value **value, const fhr_adopt_opts *opts,
                             fhr_handle *out, fhr_error *err);

/* A source reconstructs the exact value at `at` (allocating through b, ordered on s)
 * and hands over sole ownership in *out. While it runs every other call on the same
 * manager fails with FHR_E_REENTRANT. */
typedef fhr_status (*fhr_source_load_fn)(void *ctx, const fhr_value_spec *spec,
                                         fhr_location at, fhr_backend *b, fhr_stream *s,
                                         fhr_value **out, fhr_error *err);
typedef struct fhr_source {
    fhr_source_load_fn load;
    void *ctx;
    void (*release)(void *ctx); /* called once when the value is discarded; may be NULL */
} fhr_source;

/* RECONSTRUCTIBLE value with no copy yet. The spec is copied. */
FHR_API fhr_status fhr_register_source(fhr_manager *m, const fhr_value_spec *spec,
                                       const fhr_source *src, const fhr_adopt_opts *opts,
                                       fhr_handle *out, fhr_error *err);

/* The strict primitives. s: the transfer stream (NULL: the manager's stream for the
 * destination). None chooses another placement; a failure changes nothing. */
FHR_API fhr_status fhr_ensure(fhr_manager *m, fhr_handle h, fhr_location at, fhr_stream *s,
                              fhr_error *err);

/* ---- partial copies (fhr_manager(3), "Partial copies") ------------------------------- */
/* Cuts a REPLICABLE value into limbs: each of its fields (the spec's, or the adopted
 * value's) is q q-limbs followed by `special` special limbs of equal size, and the fields
 * form `parts` equal consecutive groups (parts divides the field count), part p
 * covering q-limbs [p * alpha, (p + 1) * alpha). A device copy may then hold only what a
 * use at level l needs, l + 1 q-limbs: of each part p with p * alpha <= l, q-limbs 0..l
 * and every special limb of
 * each of its fields, packed in field order (fhr_value_nfields/fhr_value_field_at give
 * the partial copy's fields, each (l + 1 + special) limbs; an absent part's fields are
 * not in it). Host and pinned copies are always whole. The fields must all be the same
 * size (at most 64 fields), limb bytes a multiple of 8, the charge the sum of the fields.
 * Refused once the value has a partial copy or when it is cut already. */
typedef struct fhr_limb_cut {
    uint32_t q, special, parts;
    uint32_t alpha; /* q-limbs per part (0: ceil(q / parts)); parts = ceil(q / alpha) */
    /* bit f: field f is regenerated on devices (the value's regenerable fields: their
     * bytes must be its regenerable bytes; 0 for an adopted value: its own) */
    uint64_t regen_fields;
} fhr_limb_cut;
FHR_API fhr_status fhr_value_cut_limbs(fhr_manager *m, fhr_handle h, const fhr_limb_cut *cut,
                                       fhr_error *err);
/* ensure with only `limbs` q-limbs (1..q; q or 0: the whole value) at device `at`: a copy
 * there holding at least that many is left as it is; a smaller partial copy grows (only
 * the missing limbs cross the link; the held ones are copied on the device); else a copy
 * of exactly `limbs` is made from the cheapest copy that holds them, or loaded. Charged
 * the bytes it holds. */
FHR_API fhr_status fhr_ensure_limbs(fhr_manager *m, fhr_handle h, fhr_location at,
                                    uint32_t limbs, fhr_stream *s, fhr_error *err);
/* *limbs: the q-limbs h's copy at loc holds (0: a whole copy; FHR_E_STATE: none there). */
FHR_API fhr_status fhr_copy_limbs(fhr_manager *m, fhr_handle h, fhr_location loc,
                                  uint32_t *limbs, fhr_error *err);
/* *parts: the parts h's copy at loc holds (a whole copy: all of them; an uncut value's: 0);
 * fewer than its q-limbs read after a drop of parts. */
FHR_API fhr_status fhr_copy_parts(fhr_manager *m, fhr_handle h, fhr_location loc,
                                  uint32_t *parts, fhr_error *err);
/* *holds = 1 when h's copy at loc holds what a use of `limbs` q-limbs (0 or q: the whole
 * value) reads: a whole copy, or one with at least those q-limbs and the parts they read;
 * 0 when it must grow first (FHR_E_STATE: no copy there). */
FHR_API fhr_status fhr_copy_holds(fhr_manager *m, fhr_handle h, fhr_location loc,
                                  uint32_t limbs, int *holds, fhr_error *err);
/* A drop of parts: the partial copy at device `at` keeps only the parts a use of `limbs`
 * q-limbs reads (ceil(limbs / alpha)), each with the q-limbs it held; the others are
 * freed (their charge at once, their memory once the copies reading it are done). Nothing
 * happens when it holds no more parts; refused for a whole copy (it is one buffer) and
 * for a copy leased, held or pending. A later use that needs a dropped part grows the
 * copy (the kept limbs are copied on the device). */
FHR_API fhr_status fhr_drop_parts(fhr_manager *m, fhr_handle h, fhr_location at,
                                  uint32_t limbs, fhr_error *err);
/* from NULL: the manager picks the source copy by the cost model alone (deterministic:
 * a copy still being filled counts like a complete one, equal costs keep the order
 * pinned, devices by index, host). */
FHR_API fhr_status fhr_move(fhr_manager *m, fhr_handle h, fhr_location to,
                            const fhr_location *from, fhr_stream *s, fhr_error *err);
FHR_API fhr_status fhr_drop(fhr_manager *m, fhr_handle h, fhr_location at, fhr_error *err);
FHR_API fhr_status fhr_discard(fhr_manager *m, fhr_handle h, fhr_error *err);
FHR_API fhr_status fhr_set_priority(fhr_manager *m, fhr_handle h, int32_t priority,
                                    fhr_error *err);
/* Observers report like every other call: a status, the answer in an out-parameter (set to
 * 0 or NULL on failure), the cause in err. During a source load on this manager they fail
 * with FHR_E_REENTRANT, so an error never reads as a real zero. */
/* *resident = 1 when h currently has a copy at loc, else 0. */
FHR_API fhr_status fhr_is_resident(fhr_manager *m, fhr_handle h, fhr_location loc,
                                   int *resident, fhr_error *err);

/* ---- leases and holds ---------------------------------------------------------- */

typedef struct fhr_lease fhr_lease;
typedef struct fhr_hold fhr_hold;

/* Ready-only read window over copies already at `at` (never materializes). A CUDA
 * location requires a consumer stream; the stream is made to wait for any copy
 * still in flight. A host location waits for in-flight copies before returning. */
FHR_API fhr_status fhr_acquire(fhr_manager *m, const fhr_handle *hs, size_t n,
                               fhr_location at, fhr_stream *consumer, fhr_lease **out,
                               fhr_error *err);
FHR_API fhr_status fhr_lease_add_consumer_stream(fhr_lease *l, fhr_stream *s,
                                                 fhr_error *err);
/* The borrowed value (read-only; never keep it past release). NULL if h not leased. */
FHR_API const fhr_value *fhr_lease_value(const fhr_lease *l, fhr_handle h);
/* Returns at once; records a completion event on every consumer stream; the copies
 * stay protected until those events complete and are reaped. Any thread. A second
 * release fails with FHR_E_LEASE. The lease object stays valid until destroyed. */
FHR_API fhr_status fhr_lease_release(fhr_lease *l, fhr_error *err);
/* Releases the lease if still active, then frees it. Inside a source load (where
 * fhr_lease_release is refused) it changes nothing until the last load ends, then
 * releases; it never waits with the manager lock held. */
FHR_API void fhr_lease_destroy(fhr_lease *l);
/* Reaps completed consumer events and deferred frees; *reaped (may be NULL) says how many. */
FHR_API fhr_status fhr_reap(fhr_manager *m, size_t *reaped, fhr_error *err);
/* The throttling primitive, a layer above the policy (which never waits): blocks the
 * calling thread, without the manager lock, on the consumer events that alone protect
 * copies at `at` (no lease or hold on them), least recently used copies first, until
 * those copies cover at least nbytes of charge (one copy at least), then reaps. When
 * other threads are making copies at `at` (admitted, not committed), it first waits for
 * one of them to end. Other threads keep using the manager meanwhile. *waited (may be
 * NULL): how many of those events had not completed when looked at, plus one for a wait
 * on a copy being made, i.e. real host waits (0: nothing to wait for). fhr_use_begin_opts with FHR_USE_WAIT calls it when protection alone blocks. */
FHR_API fhr_status fhr_wait_pending(fhr_manager *m, fhr_location at, uint64_t nbytes,
                                    size_t *waited, fhr_error *err);

/* Retention without values. */
FHR_API fhr_status fhr_hold_acquire(fhr_manager *m, const fhr_handle *hs, size_t n, fhr_location at,
                            fhr_hold **out, fhr_error *err);
FHR_API fhr_status fhr_hold_release(fhr_hold *hd, fhr_error *err);
/* As fhr_lease_destroy: inside a source load the release waits for the load's end. */
FHR_API void fhr_hold_destroy(fhr_hold *hd);

/* ---- accounting, snapshots, trace ---------------------------------------------- */

typedef struct fhr_loc_stats {
    fhr_location loc;
    uint64_t used_bytes;         /* sum of copy charges */
    uint64_t reserved_bytes;     /* sum of active reservations */
    uint64_t inflight_bytes;     /* charges of copies being made (admitted, not yet copies):
                                    counted as taken, neither evictable nor waitable yet */
    uint64_t temporary_bytes;    /* a source's temporary copies during its loads */
    uint64_t peak_used_bytes;
    uint64_t peak_charged_bytes; /* used + reserved + temporaries, highest seen */
    int has_budget;
    uint64_t budget_bytes;
    uint64_t remaining_budget_bytes; /* budget - used - reserved - in flight - temporaries */
    fhr_observation obs;         /* sampled when the snapshot was taken */
} fhr_loc_stats;

typedef struct fhr_copy_info {
    fhr_location loc;
    uint64_t storage_nbytes; /* actual bytes held */
    uint64_t charged_nbytes; /* the spec's charge at this location */
    uint64_t restore_nbytes; /* bytes a copy here would take over the link: the charge
                                less what a device regenerates */
    int ready;               /* 0 while the copy that fills it is in flight */
    uint32_t leases, holds, pending_events;
    uint64_t last_use;       /* logical clock */
    double restore_s;        /* the cost model's time to bring this copy back if it went:
                                from the cheapest other copy (a device copy over the peer
                                link), or with none from pinned memory */
    int copied;              /* 1: made by a copy from `source`; 0: adopted or loaded */
    fhr_location source;     /* where it was copied from (when copied) */
    uint32_t limbs;          /* a partial copy of a cut value: its q-limbs; 0: whole */
    uint32_t parts;          /* a cut value's copy: the parts it holds (all when whole;
                                fewer than its limbs read after a drop of parts); else 0 */
} fhr_copy_info;

typedef struct fhr_value_info {
    fhr_handle handle;
    const char *label;          /* never NULL ("" when unlabelled); owned by the snapshot */
    fhr_replica_mode mode;
    fhr_recoverability recoverability;
    int32_t priority;
    uint64_t spec_storage_nbytes;
    uint64_t logical_nbytes;
    uint64_t regen_nbytes;      /* regenerable field bytes (0: none) */
    const fhr_ckks_meta *meta;  /* NULL in a placement snapshot */
    size_t ncopies;
    fhr_copy_info *copies;
    /* fhr_value_cut_limbs (all 0: not cut): q, special, parts, the field count, one
     * limb's bytes and the fields regenerated on devices (bit f: field f) */
    uint32_t cut_q, cut_special, cut_parts, cut_alpha, cut_nfields;
    uint64_t cut_limb_nbytes, cut_regen_mask;
    uint64_t omitted_nbytes[2]; /* of regen_nbytes, what a copy at host [0] and at pinned
                                 * [1] omits: its charge there is spec_storage_nbytes less
                                 * this, whether or not such a copy exists */
} fhr_value_info;

/* The bytes a device copy of a cut value holding `limbs` q-limbs (0: whole) is charged
 * (regen 0), or of them the bytes regenerated on the device (regen 1); 0 when not cut. */
FHR_API uint64_t fhr_cut_nbytes(const fhr_value_info *vi, uint32_t limbs, int regen);

/* Tensor-free picture of the manager. Caller owns it (fhr_snapshot_free). */
typedef struct fhr_snapshot {
    uint64_t manager_id;
    uint64_t state_version; /* bumped by every mutation */
    uint64_t clock;         /* logical use clock */
    size_t nlocs;
    fhr_loc_stats *locs;    /* sorted by slot */
    size_t nvalues;
    fhr_value_info *values; /* sorted by handle serial */
    fhr_copy_info *copies_; /* storage behind every values[i].copies (internal) */
} fhr_snapshot;

FHR_API fhr_status fhr_snapshot_take(fhr_manager *m, fhr_snapshot **out, fhr_error *err);
/* The placement view only: no CKKS metadata and no backend observations (meta is NULL,
 * obs.valid is 0). What policies read; several times cheaper for many values. */
FHR_API fhr_status fhr_snapshot_take_placement(fhr_manager *m, fhr_snapshot **out,
                                               fhr_error *err);
FHR_API void fhr_snapshot_free(fhr_snapshot *s);
FHR_API const fhr_loc_stats *fhr_snapshot_loc(const fhr_snapshot *s, fhr_location loc);
FHR_API const fhr_value_info *fhr_snapshot_value(const fhr_snapshot *s, fhr_handle h);
/* JSON text (malloc'd; free()). Schema in fhr_manager(3). */
FHR_API char *fhr_snapshot_json(const fhr_snapshot *s);
/* The state version, bumped by every mutation (see the observers above). */
FHR_API fhr_status fhr_state_version(fhr_manager *m, uint64_t *version, fhr_error *err);

typedef enum fhr_trace_kind {
    FHR_TR_ADOPT, FHR_TR_REGISTER, FHR_TR_LOAD, FHR_TR_ENSURE, FHR_TR_MOVE, FHR_TR_DROP,
    FHR_TR_DISCARD, FHR_TR_ACQUIRE, FHR_TR_RELEASE, FHR_TR_HOLD, FHR_TR_UNHOLD,
    FHR_TR_RESERVE, FHR_TR_UNRESERVE, FHR_TR_REAP, FHR_TR_SCOPE_ENTER, FHR_TR_SCOPE_EXIT,
    FHR_TR_BODY
} fhr_trace_kind;

typedef struct fhr_trace_entry {
    uint64_t seq;
    fhr_trace_kind kind;
    fhr_handle handle;
    fhr_location from, to;
    uint64_t nbytes;
    uint64_t stream_id;
    uint64_t t_ns;          /* monotonic, host side */
    uint64_t state_version; /* after the entry */
    char label[48];         /* scope or reservation label */
} fhr_trace_entry;

FHR_API const char *fhr_trace_kind_name(fhr_trace_kind k);
/* Copies up to cap most recent entries (oldest first); *nread says how many. */
FHR_API fhr_status fhr_trace_read(fhr_manager *m, fhr_trace_entry *out, size_t cap,
                                  size_t *nread, fhr_error *err);
/* The trace as JSON text in *json (malloc'd; free()). */
FHR_API fhr_status fhr_trace_json(fhr_manager *m, char **json, fhr_error *err);
/* Resizes the ring (0 turns it off), keeping the newest min(capacity, current length)
 * entries; FHR_E_NOMEM (the trace unchanged) when the new ring cannot be allocated,
 * FHR_E_REENTRANT while a source load runs. */
FHR_API fhr_status fhr_trace_set_capacity(fhr_manager *m, size_t capacity, fhr_error *err);

/* ---- plans ------------------------------------------------------------------------- */

typedef enum fhr_action_kind {
    FHR_ACT_ENSURE = 0,
    FHR_ACT_MOVE,
    FHR_ACT_DROP,
    FHR_ACT_DISCARD
} fhr_action_kind;

typedef struct fhr_action {
    fhr_action_kind kind;
    fhr_handle handle;
    fhr_location at;   /* ENSURE/DROP: the location; MOVE: the destination */
    int has_from;      /* MOVE only */
    fhr_location from;
    uint32_t limbs;    /* ENSURE of a cut value at a device: the q-limbs it needs; 0: whole.
                          DROP: 0 drops the copy; else its partial copy keeps only the
                          parts a use of `limbs` q-limbs reads (a drop of parts) */
} fhr_action;

FHR_API const char *fhr_action_kind_name(fhr_action_kind k);

typedef struct fhr_reservation {
    fhr_location at;
    uint64_t nbytes;
    const char *label;
} fhr_reservation;

typedef struct fhr_plan_desc {
    const char *name;
    const fhr_action *reclaim; size_t nreclaim;
    const fhr_action *enter;   size_t nenter;
    const fhr_action *exit;    size_t nexit;
    const fhr_reservation *reservations; size_t nreservations;
} fhr_plan_desc;

/* Immutable plan; everything in desc is copied. */
typedef struct fhr_plan fhr_plan;
FHR_API fhr_status fhr_plan_create(const fhr_plan_desc *desc, fhr_plan **out, fhr_error *err);
FHR_API void fhr_plan_destroy(fhr_plan *p);
FHR_API const char *fhr_plan_name(const fhr_plan *p);
FHR_API size_t fhr_plan_nactions(const fhr_plan *p, fhr_phase phase);
FHR_API const fhr_action *fhr_plan_action(const fhr_plan *p, fhr_phase phase, size_t i);
FHR_API size_t fhr_plan_nreservations(const fhr_plan *p);
FHR_API const fhr_reservation *fhr_plan_reservation(const fhr_plan *p, size_t i);

typedef struct fhr_loc_peak {
    fhr_location loc;
    uint64_t peak_used_bytes;
    uint64_t peak_charged_bytes;
    int has_budget;
    uint64_t budget_bytes;
} fhr_loc_peak;

typedef struct fhr_explanation {
    int feasible;
    char reason[512];       /* "" when feasible */
    fhr_status status;      /* the failure kind */
    fhr_phase phase;
    long action_index;      /* -1 for a reservation failure without action */
    fhr_handle handle;
    fhr_location loc;
    uint64_t bytes_short;
    size_t npeaks;
    fhr_loc_peak peaks[FHR_LOC_SLOTS]; /* every location the plan or the state touches */
    uint64_t bytes_moved;   /* predicted transfer bytes (over the link) */
    uint64_t bytes_regenerated; /* predicted bytes generated on devices instead */
    uint64_t state_version; /* the state it was judged against */
    uint64_t bytes_peer;    /* of bytes_moved: device to device copies (the peer link) */
    uint64_t peer_copies;   /* how many copies take a device copy as their source */
} fhr_explanation;

/* Dry run of the whole plan (reclaim, reserve, enter, exit, release) against the
 * current state. Changes nothing. Fails only on bad arguments; infeasibility is in out. */
FHR_API fhr_status fhr_explain(fhr_manager *m, const fhr_plan *p, fhr_explanation *out,
                               fhr_error *err);
FHR_API char *fhr_explanation_json(const fhr_explanation *e);

typedef struct fhr_stream_map {
    fhr_location loc; /* destination location */
    fhr_stream *stream;
} fhr_stream_map;

/* Raw ordered sequence without a body; transfer streams per destination. */
FHR_API fhr_status fhr_execute_actions(fhr_manager *m, const fhr_action *acts, size_t n,
                                       const fhr_stream_map *streams, size_t nstreams,
                                       fhr_report **report, fhr_error *err);

/* ---- scopes ----------------------------------------------------------------------- */

typedef struct fhr_scope fhr_scope;

/* Touches no manager state. The plan must outlive the scope. */
FHR_API fhr_status fhr_scope_create(fhr_manager *m, const fhr_plan *p,
                                    const fhr_stream_map *streams, size_t nstreams,
                                    fhr_scope **out, fhr_error *err);
/* Binds the scope to a state version: entry fails with FHR_E_STALE unless the
 * manager is still at that version (checked under the lock before any mutation). */
FHR_API void fhr_scope_expect_version(fhr_scope *sc, uint64_t state_version);
/* Asks entry to also take a lease on hs at `at` (a consumer stream is required at a CUDA
 * location) while entry still holds the values it placed, so that no other caller can
 * remove the copies between placement and lease. Before entry only; copies hs. The scope
 * owns the lease: fhr_scope_lease(sc, i) returns the i-th one (in the order of these
 * calls) once entered; release it when its consumers are enqueued; exit releases any
 * lease still active before the exit actions run. */
FHR_API fhr_status fhr_scope_add_lease(fhr_scope *sc, const fhr_handle *hs, size_t n,
                                       fhr_location at, fhr_stream *consumer, fhr_error *err);
FHR_API fhr_lease *fhr_scope_lease(const fhr_scope *sc, size_t i);
/* preflight, reclaim, admit reservations, enter, leases. A failure consumes the scope. */
FHR_API fhr_status fhr_scope_enter(fhr_scope *sc, fhr_error *err);
/* body_status: the body's outcome (FHR_OK if it succeeded). Runs the exit actions,
 * releases the reservations and publishes the report. A failed exit is kept on the
 * scope (fhr_scope_exit_error). If the body failed too, its error stays primary: the
 * call returns body_status and leaves err alone; otherwise it returns FHR_E_PLAN with
 * err filled. */
FHR_API fhr_status fhr_scope_exit(fhr_scope *sc, fhr_status body_status, fhr_error *err);
/* No-op after a failed entry or completed exit; otherwise exits with body failure. */
FHR_API void fhr_scope_close(fhr_scope *sc);
/* Closes, then frees. Inside a source load (exit refused) its reservations, leases and
 * stack entry are released as the last load ends; its exit actions do not run. */
FHR_API void fhr_scope_destroy(fhr_scope *sc);
/* The published report (after a successful exit), else NULL. Owned by the scope. */
FHR_API const fhr_report *fhr_scope_report(const fhr_scope *sc);
FHR_API const fhr_error *fhr_scope_exit_error(const fhr_scope *sc);
FHR_API const char *fhr_scope_path(const fhr_scope *sc); /* "outer/inner" */

/* ---- reports ---------------------------------------------------------------------- */

typedef enum fhr_direction {
    FHR_DIR_H2H = 0, FHR_DIR_H2D, FHR_DIR_D2H, FHR_DIR_D2D, FHR_DIR_NONE, FHR_DIR_COUNT_
} fhr_direction;

FHR_API fhr_direction fhr_direction_of(fhr_location from, fhr_location to);
FHR_API const char *fhr_direction_name(fhr_direction d);

typedef struct fhr_transition {
    fhr_phase phase;
    size_t action_index;
    fhr_action_kind kind;
    fhr_handle handle;
    int has_from;
    fhr_location from, to;
    uint64_t nbytes;      /* bytes copied (0 for drop/discard) */
    uint64_t regen_nbytes; /* bytes generated on the destination instead of copied */
    uint64_t stream_id;
    uint64_t t_start_ns, t_end_ns; /* host-side submission window */
    int loaded;           /* a source load produced the copy */
    uint64_t charged_nbytes;  /* the charge of the copy it made at `to` (0: none made) */
    uint64_t replaced_nbytes; /* a grow: the charge of the partial copy it replaced there */
    uint64_t dropped_nbytes;  /* a drop of parts: the charge it freed (the copy stays) */
} fhr_transition;

typedef struct fhr_reservation_event {
    int admitted;         /* 1 admitted, 0 released */
    fhr_location at;
    uint64_t nbytes;
    char label[64];
    uint64_t t_ns;
} fhr_reservation_event;

FHR_API const char *fhr_report_name(const fhr_report *r);
FHR_API size_t fhr_report_ntransitions(const fhr_report *r);
FHR_API const fhr_transition *fhr_report_transition(const fhr_report *r, size_t i);
FHR_API size_t fhr_report_nreservation_events(const fhr_report *r);
FHR_API const fhr_reservation_event *fhr_report_reservation_event(const fhr_report *r,
                                                                   size_t i);
FHR_API uint64_t fhr_report_bytes(const fhr_report *r, fhr_direction d);
/* Bytes generated on destinations instead of copied (regenerable fields). */
FHR_API uint64_t fhr_report_regen_bytes(const fhr_report *r);
FHR_API uint64_t fhr_report_count(const fhr_report *r, fhr_direction d);
/* Copies a source load produced; reclaim-phase transitions (evictions: drops and moves
 * out of a short location); host waits a throttled use made (fhr_use_begin_opts). */
FHR_API uint64_t fhr_report_loads(const fhr_report *r);
FHR_API uint64_t fhr_report_evictions(const fhr_report *r);
FHR_API uint64_t fhr_report_waits(const fhr_report *r);
FHR_API char *fhr_report_json(const fhr_report *r);
FHR_API void fhr_report_free(fhr_report *r);
/* A deep copy the caller owns (NULL on allocation failure). */
FHR_API fhr_report *fhr_report_clone(const fhr_report *r);

#ifdef __cplusplus
}
#endif
#endif

/* The controller layer (requests, policies, decisions, use) builds on the above. */
#include "fheplan/controller.h"
